"""The local backend of `proctor-eval sample`: n responses per prompt from a Hugging Face causal
LM through transformers' `generate` (the `[trainer]` extra's torch and transformers).

Every setting is passed explicitly, over transformers' defaults and the model's own generation
config; each row's `decoding` holds `requested` (what was asked) and `effective` (the generation
config `generate` was given, with the model's own config recorded beside it). Sampling is seeded
(`--rng-seed`), so a study can be regenerated; a resumed run regenerates the prompts it lacks
samples of and keeps only the missing samples, so its draws differ from an uninterrupted run's.
`finish_reason` is `length` when a response ran into `--max-new-tokens` without an
end-of-sequence token.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from proctor_client.evaluation.sampling import Decoding, Prompt, SampleError, make_row

__all__ = ["effective_config", "generate"]

EFFECTIVE_FIELDS = (
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "repetition_penalty",
    "no_repeat_ngram_size",
    "max_new_tokens",
)
"""The generation-config fields recorded as the effective decoding."""


def effective_config(model: Any, decoding: Decoding) -> tuple[GenerationConfig, dict[str, Any]]:
    """The generation config `generate` is given (the model's own with every setting of
    `decoding` written over it), and the record of it: the effective settings, and the model's own
    generation config as it came with the checkpoint."""
    own = model.generation_config
    config = copy.deepcopy(own)
    config.update(**decoding.explicit())
    record = {name: getattr(config, name, None) for name in EFFECTIVE_FIELDS}
    record["generation_config"] = own.to_diff_dict()
    return config, record


def _texts(tokenizer: Any, batch: Sequence[Prompt], use_template: bool) -> list[str]:
    if not use_template and any(p.is_chat for p in batch):
        raise SampleError(
            "chat prompts need a chat template (the tokenizer has none, or it is off)"
        )
    return [
        tokenizer.apply_chat_template(p.messages(), tokenize=False, add_generation_prompt=True)
        if use_template
        else str(p.prompt)
        for p in batch
    ]


def generate(
    checkpoint: str,
    todo: Sequence[tuple[Prompt, list[int]]],
    n: int,
    decoding: Decoding,
    model_name: str,
    seed_label: str | None = None,
    batch_prompts: int = 4,
    chat_template: bool = True,
) -> Iterator[dict[str, Any]]:
    """Generation rows for the listed samples of each prompt, prompt by prompt (n are drawn per
    prompt; those not listed, already written, are dropped)."""
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    tokenizer.padding_side = "left"  # decoder-only: new tokens continue every row's last token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(checkpoint)  # in eval mode (no dropout)
    torch.manual_seed(decoding.rng_seed)
    use_template = chat_template and getattr(tokenizer, "chat_template", None) is not None
    config, effective = effective_config(model, decoding)
    record = {
        "engine": "transformers.generate",
        "checkpoint": checkpoint,
        "requested": decoding.requested(),
        "effective": effective,
    }
    for start in range(0, len(todo), batch_prompts):
        batch = todo[start : start + batch_prompts]
        texts = _texts(tokenizer, [p for p, _ in batch], use_template)
        encoded = tokenizer(texts, return_tensors="pt", padding=True)
        with torch.no_grad():
            output = model.generate(
                **encoded,
                generation_config=config,
                num_return_sequences=n,
                pad_token_id=tokenizer.pad_token_id,
            )
        new_tokens = output[:, encoded["input_ids"].shape[1] :]
        prompt_tokens = encoded["attention_mask"].sum(dim=1).tolist()
        for row, tokens in enumerate(new_tokens):
            prompt, wanted = batch[row // n]
            if row % n not in wanted:
                continue
            ids = tokens.tolist()
            ended = tokenizer.eos_token_id in ids
            length = ids.index(tokenizer.eos_token_id) if ended else len(ids)
            yield make_row(
                prompt,
                row % n,
                model_name,
                seed_label,
                str(tokenizer.decode(ids[:length], skip_special_tokens=True)),
                finish_reason="stop" if ended else "length",
                response_tokens=length,
                prompt_tokens=prompt_tokens[row // n],
                max_response_tokens=decoding.max_new_tokens,
                decoding=record,
            )
