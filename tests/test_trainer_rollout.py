"""Rollouts on the tiny model: finish_reason comes from EOS, and a response's log-probabilities
do not depend on the padding its neighbours in a batch bring."""

from __future__ import annotations

import torch

from proctor_client.trainer.data import Prompt
from proctor_client.trainer.rollout import Sample, generate_groups, response_logprobs, score_items
from proctor_client.trainer.tiny import digit_prompts, tiny_model, tiny_tokenizer


def test_a_response_ends_at_its_first_eos_or_at_the_budget() -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, seed=0)
    torch.manual_seed(0)
    samples = generate_groups(
        model, tokenizer, digit_prompts(10), group_size=8, temperature=1.0,
        max_response_tokens=4, batch_size=32,
    )  # fmt: skip
    eos = tokenizer.eos_token_id
    assert [s.group for s in samples] == [g for g in range(10) for _ in range(8)]
    stopped = [s for s in samples if s.finish_reason == "stop"]
    cut = [s for s in samples if s.finish_reason == "length"]
    assert stopped and cut  # a random model does both within 80 samples
    for s in stopped:
        assert s.response_ids[-1] == eos and eos not in s.response_ids[:-1]
        assert len(s.response_ids) <= 4
    for s in cut:
        assert len(s.response_ids) == 4 and eos not in s.response_ids
    assert all("<eos>" not in s.text for s in samples)
    items = score_items(samples[:2], max_response_tokens=4, tag="t")
    assert [i.response_tokens for i in items] == [len(s.response_ids) for s in samples[:2]]
    assert [i.finish_reason for i in items] == [s.finish_reason for s in samples[:2]]
    assert items[0].max_response_tokens == 4 and items[0].id == "t-0"


def test_log_probabilities_do_not_depend_on_the_batch() -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_model(tokenizer, seed=1)
    ids = tokenizer.convert_tokens_to_ids

    def sample(prompt: str, response: list[str]) -> Sample:
        return Sample(
            prompt=Prompt(text=prompt, domain="math", reference={"answer": "7"}, id=prompt),
            group=0,
            prompt_ids=tokenizer(prompt)["input_ids"],
            response_ids=ids(response),
            finish_reason="stop",
            text="",
        )

    short = sample("box seven", ["\\boxed{7}", "<eos>"])
    long = sample("box seven seven seven nine", ["the", "answer", "is", "\\boxed{7}", "<eos>"])
    (alone,) = response_logprobs(model, [short], 1.3, micro_batch_size=8, pad_id=0)
    together = response_logprobs(model, [long, short], 1.3, micro_batch_size=8, pad_id=0)
    assert alone.shape == (2,) and together[0].shape == (5,)
    assert torch.allclose(together[1], alone, atol=1e-6)
