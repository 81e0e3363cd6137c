# ruff: noqa: E501  (data: prompts and responses are kept on one line each)
"""Writes prompts.jsonl and responses.jsonl: IFEval-format prompts with responses written for them.

Prompts follow IFEval's input format (`key`, `prompt`, `instruction_id_list`, `kwargs`); some rows
carry every kwarg key with `None` for the unused ones, as the Hugging Face copy of IFEval does.
Each prompt has a response meant to follow every instruction and one meant to break at least one;
the reference's strict and loose verdicts (lm-eval's copy of Google's checkers, seeded langdetect,
offline punkt) are recorded beside each response. Run from the repository root:

    python tests/data/ifeval/build_conformance.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from tests.ifeval_reference import reference_verdicts

HERE = Path(__file__).resolve().parent

ALL_KEYS = (
    "num_highlights", "relation", "num_words", "num_placeholders", "prompt_to_repeat",
    "num_paragraphs", "nth_paragraph", "first_word", "num_sentences", "keyword", "frequency",
    "keywords", "forbidden_words", "letter", "let_frequency", "let_relation", "language",
    "num_bullets", "section_spliter", "num_sections", "postscript_marker", "end_phrase",
    "capital_frequency", "capital_relation",
)  # fmt: skip

POEM = (
    "The river bends where willows lean,\nits water cold and bright and clean.\n"
    "A heron waits on stones of grey,\nand watches all the fish that stray."
)

# (prompt, [(instruction_id, kwargs)], following response, breaking response)
ROWS: list[tuple[str, list[tuple[str, dict[str, Any]]], str, str]] = [
    (
        "Write a short note about tea. Include the keywords steam and kettle.",
        [("keywords:existence", {"keywords": ["steam", "kettle"]})],
        "The kettle sings and steam curls toward the window as the tea leaves unfold.",
        "Tea is best enjoyed slowly in the afternoon.",
    ),
    (
        "Describe a market. Mention the words apples, bread and cheese.",
        [("keywords:existence", {"keywords": ["apples", "bread", "cheese"]})],
        "Stalls overflow with apples, warm bread and wheels of cheese.",
        "Stalls overflow with apples and warm bread.",
    ),
    (
        "Write about the ocean. The word wave should appear at least 3 times.",
        [("keywords:frequency", {"keyword": "wave", "frequency": 3, "relation": "at least"})],
        "A wave rises, a second wave follows, and every wave breaks on the sand.",
        "A wave rises and then the sea is calm again.",
    ),
    (
        "Describe your morning. The word coffee should appear less than 2 times.",
        [("keywords:frequency", {"keyword": "coffee", "frequency": 2, "relation": "less than"})],
        "I woke early, drank a coffee and read the news.",
        "Coffee first, then more coffee, then a walk.",
    ),
    (
        "Explain photosynthesis without using the words sun or light.",
        [("keywords:forbidden_words", {"forbidden_words": ["sun", "light"]})],
        "Plants turn carbon dioxide and water into sugar using energy from the sky.",
        "Plants use light from the sun to make sugar.",
    ),
    (
        "Write a limerick. Do not use the words cat, dog or mouse.",
        [("keywords:forbidden_words", {"forbidden_words": ["cat", "dog", "mouse"]})],
        "A catalogue of dogged delight\nwas read by a mousey old knight.",
        "A cat and a dog had a fight.",
    ),
    (
        "Write a sentence in which the letter q appears at least 2 times.",
        [("keywords:letter_frequency", {"letter": "q", "let_frequency": 2, "let_relation": "at least"})],
        "The queen asked a quiet question.",
        "The king asked a loud one.",
    ),
    (
        "Write a sentence where the letter e appears less than 4 times.",
        [("keywords:letter_frequency", {"letter": "e", "let_frequency": 4, "let_relation": "less than"})],
        "A tiny cat ran off.",
        "Everyone entered the eerie tree house.",
    ),
    (
        "Describe Paris. Your ENTIRE response should be in French language, no other language is allowed.",
        [("language:response_language", {"language": "fr"})],
        "Paris est une ville magnifique, pleine de musées, de cafés et de jardins où les gens se promènent le dimanche.",
        "Paris is a beautiful city, full of museums, cafes and gardens where people walk on Sundays.",
    ),
    (
        "Describe a garden. Your ENTIRE response should be in German language, no other language is allowed.",
        [("language:response_language", {"language": "de"})],
        "Der Garten ist voller Blumen, und im Sommer sitzen wir oft unter dem alten Apfelbaum und trinken Kaffee.",
        "El jardín está lleno de flores y en verano nos sentamos bajo el viejo manzano a tomar café.",
    ),
    (
        "Tell me about Tokyo. Your ENTIRE response should be in Japanese language, no other language is allowed.",
        [("language:response_language", {"language": "ja"})],
        "東京は日本の首都で、たくさんの人々が住んでいます。電車はとても便利です。",
        "Tokyo is the capital of Japan and many people live there.",
    ),
    (
        "Summarize the history of Rome. Your response should contain less than 3 sentences.",
        [("length_constraints:number_sentences", {"num_sentences": 3, "relation": "less than"})],
        "Rome grew from a small city-state into an empire that ruled the Mediterranean. It fell in 476 A.D. after centuries of decline.",
        "Rome began as a kingdom. It became a republic. It then became an empire. It fell.",
    ),
    (
        "Describe the U.S. economy. Your response should contain at least 4 sentences.",
        [("length_constraints:number_sentences", {"num_sentences": 4, "relation": "at least"})],
        "The U.S. economy is large. It grew by 2.5 percent last year. Dr. Lee, an economist, expects more growth. Inflation is near 3.1 percent.",
        "The U.S. economy is large. Dr. Lee expects 2.5 percent growth. Mr. Smith disagrees.",
    ),
    (
        "Write a story in 3 paragraphs. Paragraphs are separated with the markdown divider: ***",
        [("length_constraints:number_paragraphs", {"num_paragraphs": 3})],
        "Once a fox lived in a wood.\n\n***\n\nOne day it met a crow.\n\n***\n\nThey became friends.",
        "Once a fox lived in a wood.\n\n***\n\nOne day it met a crow and they became friends.",
    ),
    (
        "Write 2 paragraphs about winter separated by ***.",
        [("length_constraints:number_paragraphs", {"num_paragraphs": 2})],
        "Snow covers the roofs.\n***\nChildren build snowmen.",
        "Snow covers the roofs.\n***\n***\nChildren build snowmen.",
    ),
    (
        "Describe a bicycle. Answer with less than 20 words.",
        [("length_constraints:number_words", {"num_words": 20, "relation": "less than"})],
        "A bicycle has two wheels, pedals, a chain and handlebars.",
        "A bicycle is a human-powered vehicle with two wheels, a frame, pedals, a chain, a saddle, brakes, gears and handlebars for steering it.",
    ),
    (
        "Explain gravity. Answer with at least 12 words.",
        [("length_constraints:number_words", {"num_words": 12, "relation": "at least"})],
        "Gravity is the force that pulls objects with mass toward each other, like apples to Earth.",
        "Gravity pulls things down.",
    ),
    (
        "Write 2 paragraphs about dogs. Paragraphs are separated by two new lines. Paragraph 2 must start with word however.",
        [("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "however"})],
        "Dogs are loyal and playful.\n\nHowever, they need daily walks.",
        "Dogs are loyal and playful.\n\nThey need daily walks.",
    ),
    (
        "Write 3 paragraphs about rain separated by two new lines. Paragraph 1 must start with word clouds.",
        [("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 3, "nth_paragraph": 1, "first_word": "clouds"})],
        "Clouds gather over the hills.\n\nThe first drops fall.\n\nSoon the streets shine.",
        "Clouds gather over the hills.\n\nThe first drops fall and soon the streets shine.",
    ),
    (
        "Write a letter template. The response must contain at least 3 placeholders represented by square brackets, such as [address].",
        [("detectable_content:number_placeholders", {"num_placeholders": 3})],
        "Dear [name],\nThank you for your order [order id] shipped to [address].",
        "Dear [name],\nThank you for your order.",
    ),
    (
        "Write a short invitation. At the end of your response, please explicitly add a postscript starting with P.S.",
        [("detectable_content:postscript", {"postscript_marker": "P.S."})],
        "Please join us for dinner on Friday.\n\nP.S. Bring a friend.",
        "Please join us for dinner on Friday. Bring a friend.",
    ),
    (
        "Write a thank-you note. At the end, add a postscript starting with P.P.S",
        [("detectable_content:postscript", {"postscript_marker": "P.P.S"})],
        "Thank you for the lovely gift.\nP.P.S I will call you soon.",
        "Thank you for the lovely gift.\nP.S. I will call you soon.",
    ),
    (
        "List benefits of exercise. Your answer must contain exactly 3 bullet points.",
        [("detectable_format:number_bullet_lists", {"num_bullets": 3})],
        "* Better sleep\n* Stronger heart\n* More energy",
        "* Better sleep\n* Stronger heart",
    ),
    (
        "Name two planets. Use exactly 2 markdown bullet points.",
        [("detectable_format:number_bullet_lists", {"num_bullets": 2})],
        "- Mars\n- Venus",
        "- Mars\n- Venus\n- Jupiter",
    ),
    (
        "Is the sky blue? Answer with one of the following options: ('My answer is yes.', 'My answer is no.', 'My answer is maybe.')",
        [("detectable_format:constrained_response", {})],
        "My answer is yes.",
        "Yes, it is.",
    ),
    (
        "Explain recycling. Highlight at least 2 sections in your answer with markdown, i.e. *highlighted section*.",
        [("detectable_format:number_highlighted_sections", {"num_highlights": 2})],
        "Recycling *saves resources* and **reduces waste**.",
        "Recycling *saves resources* and reduces waste.",
    ),
    (
        "Describe a volcano. Highlight at least 3 sections with markdown.",
        [("detectable_format:number_highlighted_sections", {"num_highlights": 3})],
        "*Magma* rises, *pressure* builds and *lava* flows.",
        "**Magma** rises and pressure builds.",
    ),
    (
        "Write a plan with 2 sections. Mark the beginning of each section with SECTION X.",
        [("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2})],
        "SECTION 1\nBuy ingredients.\nSECTION 2\nCook dinner.",
        "SECTION 1\nBuy ingredients and cook dinner.",
    ),
    (
        "Write a guide with 3 parts. Mark each with Section X.",
        [("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 3})],
        "Section 1: Setup\nSection 2: Use\nSection 3: Cleanup",
        "Part 1: Setup\nPart 2: Use\nPart 3: Cleanup",
    ),
    (
        "List three colors. Entire output should be wrapped in JSON format. You can use markdown ticks such as ```.",
        [("detectable_format:json_format", {})],
        '```json\n{"colors": ["red", "green", "blue"]}\n```',
        'Here are the colors:\n{"colors": ["red", "green", "blue"]}\nHope this helps!',
    ),
    (
        "Give your age as JSON.",
        [("detectable_format:json_format", {})],
        '{"age": 30}',
        "{'age': 30}",
    ),
    (
        "Write a poem about joy. Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>.",
        [("detectable_format:title", {})],
        "<<Morning Joy>>\n" + POEM,
        "Morning Joy\n" + POEM,
    ),
    (
        "Give two different responses about cats. Responses and only responses should be separated by 6 asterisk symbols: ******.",
        [("combination:two_responses", {})],
        "Cats are independent.\n******\nCats love to sleep in the sun.",
        "Cats are independent.\n******\nCats are independent.",
    ),
    (
        "Write a haiku about rain. First repeat the request word for word without change, then give your answer",
        [("combination:repeat_prompt", {"prompt_to_repeat": "Write a haiku about rain."})],
        "Write a haiku about rain.\nSoft drops on the roof\npuddles gather in the street\nthe city breathes slow",
        "Here is a haiku about rain.\nSoft drops on the roof",
    ),
    (
        "Tell me a fact about owls. Finish your response with this exact phrase Is there anything else I can help with?. No other words should follow this phrase.",
        [("startend:end_checker", {"end_phrase": "Is there anything else I can help with?"})],
        "Owls can turn their heads about 270 degrees. Is there anything else I can help with?",
        "Owls can turn their heads about 270 degrees. Is there anything else I can help with? Have a nice day.",
    ),
    (
        "Describe a sunset. Wrap your entire response with double quotation marks.",
        [("startend:quotation", {})],
        '"The sky turned orange and then a deep violet."',
        "The sky turned orange and then a deep violet.",
    ),
    (
        "Write about space agencies. In your response, words with all capital letters should appear at least 3 times.",
        [("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": "at least"})],
        "NASA, ESA and JAXA all launch satellites.",
        "NASA and the European agency launch satellites.",
    ),
    (
        "Write about your day. In your response, words with all capital letters should appear less than 2 times.",
        [("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "less than"})],
        "I had a calm day at home.",
        "I had a VERY BUSY day at work.",
    ),
    (
        "Describe a storm. Your entire response should be in English, and in all capital letters.",
        [("change_case:english_capital", {})],
        "THE STORM ROLLED IN FROM THE SEA, AND THE WIND BENT THE TREES ALL NIGHT LONG.",
        "The storm rolled in from the sea, and the wind bent the trees all night long.",
    ),
    (
        "Describe a forest. Your entire response should be in English, and in all lowercase letters. No capital letters are allowed.",
        [("change_case:english_lowercase", {})],
        "the forest is quiet in the morning, and the light falls softly between the tall pines.",
        "The forest is quiet in the morning, and the light falls softly between the tall pines.",
    ),
    (
        "Explain how bees make honey. In your entire response, refrain from the use of any commas.",
        [("punctuation:no_comma", {})],
        "Bees collect nectar and store it in wax cells where it thickens into honey.",
        "Bees collect nectar, store it, and turn it into honey.",
    ),
    # combinations of instructions, as most IFEval prompts have
    (
        "Write a product description for a lamp. Use at least 25 words, no commas, and end with Any other questions?",
        [
            ("length_constraints:number_words", {"num_words": 25, "relation": "at least"}),
            ("punctuation:no_comma", {}),
            ("startend:end_checker", {"end_phrase": "Any other questions?"}),
        ],
        "This brass lamp gives a warm and steady light for reading in the evening. It has a heavy base and a soft linen shade that hides the bulb. Any other questions?",
        "This brass lamp, with its linen shade, gives warm light. Any other questions?",
    ),
    (
        "Write a blog post title and 2 highlighted tips about sleep, all in lowercase.",
        [
            ("detectable_format:title", {}),
            ("detectable_format:number_highlighted_sections", {"num_highlights": 2}),
            ("change_case:english_lowercase", {}),
        ],
        "<<better sleep tonight>>\n*keep a regular schedule* and *avoid screens before bed* so your mind can rest.",
        "<<Better Sleep Tonight>>\n*Keep a regular schedule* and avoid screens before bed.",
    ),
    (
        "Give two different answers in French about the weather, separated by ******.",
        [
            ("combination:two_responses", {}),
            ("language:response_language", {"language": "fr"}),
        ],
        "Il fait beau aujourd'hui et le soleil brille sur la ville.\n******\nIl pleut depuis ce matin et tout le monde reste à la maison.",
        "It is sunny today and the sun shines over the city.\n******\nIt has been raining since this morning.",
    ),
    (
        "Write a 3 item list in JSON about fruit with the keyword banana.",
        [
            ("detectable_format:json_format", {}),
            ("keywords:existence", {"keywords": ["banana"]}),
        ],
        '```json\n["banana", "apple", "pear"]\n```',
        '```json\n["cherry", "apple", "pear"]\n```',
    ),
    (
        "Write a formal letter with a P.S. at the end, 3 placeholders and exactly 3 sentences or more.",
        [
            ("detectable_content:postscript", {"postscript_marker": "P.S."}),
            ("detectable_content:number_placeholders", {"num_placeholders": 3}),
            ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"}),
        ],
        "Dear [name]. Your order [number] has shipped. It will reach [address] soon.\nP.S. Thank you.",
        "Dear [name]. Your order has shipped.",
    ),
    (
        "Answer in markdown: a bold title line, then the answer, then a closing line. Answer: is water wet? Use one of: My answer is yes./no./maybe.",
        [("detectable_format:constrained_response", {}), ("punctuation:no_comma", {})],
        "**Answer**\nMy answer is maybe.\nThanks for asking!",
        "**Answer, briefly**\nWater makes things wet.\nThanks, bye",
    ),
    (
        "Repeat the request first: Describe a lighthouse in capital letters with the word LIGHT at least twice.",
        [
            ("combination:repeat_prompt", {"prompt_to_repeat": "Describe a lighthouse in capital letters"}),
            ("change_case:english_capital", {}),
            ("keywords:frequency", {"keyword": "light", "frequency": 2, "relation": "at least"}),
        ],
        "DESCRIBE A LIGHTHOUSE IN CAPITAL LETTERS. THE LIGHTHOUSE STANDS ON THE CLIFF AND ITS LIGHT SWEEPS THE DARK SEA EVERY NIGHT.",
        "A LIGHTHOUSE STANDS ON THE CLIFF AND ITS BEAM SWEEPS THE DARK SEA EVERY NIGHT.",
    ),
    (
        "First repeat the request word for word: What is the capital of Peru? Then answer in quotes.",
        [
            ("combination:repeat_prompt", {"prompt_to_repeat": "What is the capital of Peru?"}),
            ("startend:end_checker", {"end_phrase": "Lima."}),
        ],
        "What is the capital of Peru? The capital is Lima.",
        "The capital of Peru is Lima, of course!",
    ),
    (
        "Wrap your answer in double quotes, use no commas and keep it under 15 words: why do leaves fall?",
        [
            ("startend:quotation", {}),
            ("punctuation:no_comma", {}),
            ("length_constraints:number_words", {"num_words": 15, "relation": "less than"}),
        ],
        '"Trees drop leaves to save water in winter."',
        '"Trees drop leaves in autumn, mostly to save water and energy during the cold dark winter months ahead."',
    ),
    (
        "Quote a short motto in double quotes with a title in double angular brackets.",
        [("startend:quotation", {}), ("detectable_format:title", {})],
        '"<<Motto>> Work hard and be kind."',
        "<<Motto>> Work hard and be kind.",
    ),
    (
        "Write a warning sign text in English, all capitals, with at least 4 capital words, in 2 bullet points.",
        [
            ("change_case:english_capital", {}),
            ("change_case:capital_word_frequency", {"capital_frequency": 4, "capital_relation": "at least"}),
            ("detectable_format:number_bullet_lists", {"num_bullets": 2}),
        ],
        "* DANGER: HIGH VOLTAGE EQUIPMENT INSIDE THIS ROOM\n* KEEP THE DOOR CLOSED AT ALL TIMES",
        "* Danger: high voltage equipment inside this room\n* Keep the door closed at all times",
    ),
    (
        "Write 2 paragraphs separated by *** about maps, all lowercase, without the words north or south, letter m at least 3 times.",
        [
            ("length_constraints:number_paragraphs", {"num_paragraphs": 2}),
            ("change_case:english_lowercase", {}),
            ("keywords:forbidden_words", {"forbidden_words": ["north", "south"]}),
            ("keywords:letter_frequency", {"letter": "m", "let_frequency": 3, "let_relation": "at least"}),
        ],
        "maps help people find their way in many places around the world.\n***\na good map makes every journey much easier to plan.",
        "Maps point north.\n***\nmaps point south too.",
    ),
    (
        "Write 3 paragraphs separated by two new lines, the second starting with meanwhile, with a placeholder and 2 sections marked Part X.",
        [
            ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "meanwhile"}),
            ("detectable_content:number_placeholders", {"num_placeholders": 1}),
            ("detectable_format:multiple_sections", {"section_spliter": "Part", "num_sections": 2}),
        ],
        "Part 1 The hero leaves [town].\n\nMeanwhile, Part 2 the villain waits.\n\nThey meet at dawn.",
        "Part 1 The hero leaves town.\n\nThe villain waits.\n\nThey meet at dawn.",
    ),
    (
        "Answer in Spanish with two different responses separated by ******, each a yes/no style answer: My answer is yes./no./maybe.",
        [
            ("combination:two_responses", {}),
            ("detectable_format:constrained_response", {}),
            ("keywords:existence", {"keywords": ["respuesta"]}),
        ],
        "My answer is yes. La respuesta es clara.\n******\nMy answer is no. Otra respuesta distinta.",
        "My answer is yes. La respuesta es clara.",
    ),
    (
        "Write a tweet with at least 2 highlighted words, exactly one bullet, a title, and P.S. at the end, less than 5 sentences.",
        [
            ("detectable_format:number_highlighted_sections", {"num_highlights": 2}),
            ("detectable_format:number_bullet_lists", {"num_bullets": 1}),
            ("detectable_format:title", {}),
            ("length_constraints:number_sentences", {"num_sentences": 5, "relation": "less than"}),
            ("detectable_content:postscript", {"postscript_marker": "P.S."}),
        ],
        "<<Big News>>\nLaunch day is *here* and **now**.\n* Visit our site.\nP.S. Tell your friends.",
        "<<Big News>>\nLaunch day is here. Visit our site. Tell friends. Share it. Like it. Thanks.",
    ),
    (
        "Explain JSON briefly, at most 40 words, end with Any other questions?, in English.",
        [
            ("length_constraints:number_words", {"num_words": 40, "relation": "less than"}),
            ("startend:end_checker", {"end_phrase": "Any other questions?"}),
            ("language:response_language", {"language": "en"}),
            ("change_case:capital_word_frequency", {"capital_frequency": 1, "capital_relation": "at least"}),
        ],
        "JSON is a text format for structured data built from objects and arrays. Any other questions?",
        "Json is a text format for structured data. Ask me more if you like.",
    ),
    (
        "Write two fenced JSON objects? No: one JSON object with 3 keys and the word key at least 3 times.",
        [
            ("detectable_format:json_format", {}),
            ("keywords:frequency", {"keyword": "key", "frequency": 3, "relation": "at least"}),
            ("length_constraints:number_paragraphs", {"num_paragraphs": 1}),
        ],
        '```\n{"key1": 1, "key2": 2, "key3": 3}\n```',
        '```\n{"a": 1, "b": 2}\n```\n***\nDone.',
    ),
]  # fmt: skip


def _kwargs(kwargs: dict[str, Any], full: bool) -> dict[str, Any]:
    if not full:
        return kwargs
    return {key: kwargs.get(key) for key in ALL_KEYS}


def main() -> None:
    prompts = []
    responses = []
    for key, (prompt, instructions, follows, breaks) in enumerate(ROWS, start=1000):
        ids = [i for i, _ in instructions]
        kwargs = [_kwargs(k, full=key % 3 == 0) for _, k in instructions]
        prompts.append({"key": key, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs})
        for intent, response in (("follows", follows), ("breaks", breaks)):
            strict, loose = reference_verdicts(ids, kwargs, response, prompt)
            responses.append(
                {
                    "key": key,
                    "intent": intent,
                    "response": response,
                    "reference_strict": strict,
                    "reference_loose": loose,
                }
            )
    with (HERE / "prompts.jsonl").open("w") as f:
        for row in prompts:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    with (HERE / "responses.jsonl").open("w") as f:
        for row in responses:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
