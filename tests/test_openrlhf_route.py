"""POST /v1/openrlhf on a real server, sent exactly as OpenRLHF 0.11's single-turn agent
executor sends it: aiohttp posting `{"query", "prompts", "labels"}` as JSON, where the query is
the prompt's and the response's token ids decoded with their special tokens."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
import pytest

from service.http.routes.openrlhf import label_item, split_response
from tests.helpers import Server

SPECIAL = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
WORDS = [*SPECIAL, "user", "assistant", "what", "is", "1", "plus", "?", "so", "\\boxed{2}",
         "\\boxed{3}", "B", "the", "answer"]  # fmt: skip


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(WORDS)}, unk_token="?"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=words, eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
    tokenizer.add_special_tokens({"additional_special_tokens": SPECIAL})
    return tokenizer


def _query(tokenizer: Any, prompt: str, response: str) -> str:
    """What the executor sends: decode(prompt ids + action ids, skip_special_tokens=False)."""
    prompt_ids = tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
    action_ids = tokenizer(text=response, add_special_tokens=False)["input_ids"]
    decoded: str = tokenizer.decode(prompt_ids + action_ids, skip_special_tokens=False)
    return decoded


async def _post(url: str, queries: list[str], prompts: list[str], labels: list[Any]) -> Any:
    """OpenRLHF's `_post_request`, one attempt: aiohttp, the JSON body, a 180 s timeout; the
    status is returned where OpenRLHF raises for it (and retries)."""
    payload = {"query": queries, "prompts": prompts, "labels": labels}
    timeout = aiohttp.ClientTimeout(total=180)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(url, json=payload) as response,
    ):
        return response.status, await response.json()


PROMPT = "<|im_start|> user what is 1 plus 1 ? <|im_end|> <|im_start|> assistant"


def test_rewards_for_openrlhf_queries(server: Server) -> None:
    tokenizer = _tokenizer()
    responses = [
        "so \\boxed{2} <|im_end|>",  # right, finished
        "so \\boxed{3} <|im_end|>",  # wrong, finished
        "so the answer \\boxed{2}",  # right, but cut at the length limit: no end token
        "the answer is B <|im_end|> <|endoftext|> <|endoftext|>",  # finished, then padding
    ]
    labels: list[Any] = [
        "2",
        "2",
        "2",
        json.dumps({"domain": "stem", "reference": {"answer": "B", "choices": ["x", "y"]}}),
    ]
    queries = [_query(tokenizer, PROMPT, r) for r in responses]
    assert queries[0].endswith("<|im_end|>")
    url = server.url + "/v1/openrlhf?spec=prorl-v1-termination"
    status, body = asyncio.run(_post(url, queries, [PROMPT] * 4, labels))
    assert status == 200, body
    assert body["rewards"] == [1.0, 0.0, 0.0, 1.0]
    assert body["scores"] == [1.0, 0.0, 1.0, 1.0]  # the cut one solved it, and was penalised
    assert body["extra_logs"]["proctor_penalty"][2] == -1.0
    assert body["extra_logs"]["proctor_parsed"] == [1.0, 1.0, 1.0, 1.0]


def test_an_unjudged_item_is_a_503_not_a_zero(make_server: Callable[..., Server]) -> None:
    # One worker, five 0.8 s items, a 2 s deadline: the last ones are never reached.
    srv = make_server(
        registry="tests.pool_scorers:registry",
        workers=1,
        chunk_size=1,
        item_timeout_s=2.0,
        request_deadline_s=2.0,
    )
    labels = [{"domain": "sleep", "reference": {"seconds": 0.8, "n": i}} for i in range(5)]
    url = srv.url + "/v1/openrlhf"
    status, body = asyncio.run(_post(url, ["p ok"] * 5, ["p "] * 5, labels))
    assert status == 503
    assert "were not judged" in body["detail"]


def test_a_label_without_a_reference_is_a_422(server: Server) -> None:
    bad: list[Any] = [{"domain": "math"}]
    status, body = asyncio.run(_post(server.url + "/v1/openrlhf", ["q"], ["q"], bad))
    assert status == 422
    assert body["detail"][0]["loc"] == ["body", "labels", 0]


def test_the_key_may_come_in_the_url(make_server: Callable[..., Server]) -> None:
    key = "openrlhf-key-000000"
    srv = make_server(api_keys=(key,))
    url = srv.url + "/v1/openrlhf"
    assert asyncio.run(_post(url, ["q \\boxed{2}"], ["q"], ["2"]))[0] == 401
    status, body = asyncio.run(_post(f"{url}?api_key={key}", ["q \\boxed{2}"], ["q"], ["2"]))
    assert (status, body["rewards"]) == (200, [1.0])


@pytest.mark.parametrize(
    ("query", "prompt", "expected"),
    [
        ("P answer<|im_end|>", "P", (" answer", True)),
        ("P answer", "P", (" answer", False)),  # no end token: cut at the length limit
        ("P a</s></s>", "P", (" a", True)),
        ("<s> P a<|eot_id|>", "P", (" a", True)),  # a BOS before the prompt
        ("x y", "P", ("x y", False)),  # the prompt is not there: the query is the response
    ],
)
def test_split_response(query: str, prompt: str, expected: tuple[str, bool]) -> None:
    from service.http.routes.openrlhf import END_TOKENS

    assert split_response(query, prompt, END_TOKENS) == expected


def test_label_conventions() -> None:
    assert label_item("3/4", "math") == ("math", {"answer": "3/4"})
    assert label_item(7, "math") == ("math", {"answer": "7"})
    assert label_item("{1, 2}", "math") == ("math", {"answer": "{1, 2}"})  # a set, not JSON
    code = {"domain": "code", "reference": {"language": "python", "tests": {"stdio": []}}}
    assert label_item(json.dumps(code), "math") == ("code", code["reference"])
    with pytest.raises(ValueError, match="reference"):
        label_item({"answer": "3"}, "math")


def test_an_empty_domain_in_the_url_is_a_422_naming_it(server: Server) -> None:
    reply = httpx.post(
        server.url + "/v1/openrlhf?domain=",
        json={"query": ["q"], "prompts": ["q"], "labels": ["2"]},
        timeout=60,
    )
    assert reply.status_code == 422, reply.text
    assert reply.json()["detail"][0]["loc"] == ["query", "domain"]
