"""Rollouts: G sampled responses per prompt with Hugging Face `generate`, and the per-token
log-probabilities of those responses under any policy at the rollout temperature.

A response ends at the first EOS it samples (`finish_reason` "stop", the EOS kept as its last
token, so the model learns to stop) or at the stage's token budget ("length"), which is what the
termination penalties of a reward spec read.

Batches are built per forward pass: prompts left-padded, responses right-padded, positions counted
from each row's first real token, so a row's log-probabilities do not depend on its neighbours.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from transformers import GenerationConfig, PreTrainedModel, PreTrainedTokenizerBase

from proctor_client import ScoreItem, ScoreResult
from proctor_client._models import FinishReason
from proctor_client.trainer.data import Prompt
from proctor_client.trainer.objective import token_logprobs

__all__ = ["Batch", "Sample", "collate", "generate_groups", "response_logprobs", "score_items"]


@dataclass
class Sample:
    """One sampled response and everything the update needs to know about it."""

    prompt: Prompt
    group: int
    """Index of its group (its prompt) within the generation round."""
    prompt_ids: list[int]
    response_ids: list[int]
    finish_reason: FinishReason
    text: str
    """The decoded response without its EOS, as Proctor judges it."""
    old_logp: Tensor | None = None
    ref_logp: Tensor | None = None
    result: ScoreResult | None = None
    advantage: float = 0.0


@dataclass(frozen=True)
class Batch:
    """Padded tensors for one forward pass over some samples."""

    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    prompt_width: int
    response_ids: Tensor
    response_mask: Tensor
    """1 at each response token (EOS included), 0 at padding."""


def collate(samples: Sequence[Sample], pad_id: int, device: torch.device) -> Batch:
    width = max(len(s.prompt_ids) for s in samples)
    length = max(len(s.response_ids) for s in samples)
    ids, attention, responses, masks = [], [], [], []
    for s in samples:
        left = width - len(s.prompt_ids)
        right = length - len(s.response_ids)
        ids.append([pad_id] * left + s.prompt_ids + s.response_ids + [pad_id] * right)
        attention.append([0] * left + [1] * (len(s.prompt_ids) + len(s.response_ids)) + [0] * right)
        responses.append(s.response_ids + [pad_id] * right)
        masks.append([1] * len(s.response_ids) + [0] * right)
    attention_mask = torch.tensor(attention, device=device)
    return Batch(
        input_ids=torch.tensor(ids, device=device),
        attention_mask=attention_mask,
        position_ids=(attention_mask.cumsum(-1) - 1).clamp(min=0),
        prompt_width=width,
        response_ids=torch.tensor(responses, device=device),
        response_mask=torch.tensor(masks, device=device, dtype=torch.float32),
    )


def forward_logits(model: PreTrainedModel, batch: Batch) -> Tensor:
    """Logits predicting each response token: [B, L, V]."""
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        use_cache=False,
    )
    logits: Tensor = out.logits
    start = batch.prompt_width - 1
    return logits[:, start : start + batch.response_ids.shape[1]]


def _chunks(items: Sequence[Sample], size: int) -> Iterator[Sequence[Sample]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@torch.no_grad()
def response_logprobs(
    model: PreTrainedModel,
    samples: Sequence[Sample],
    temperature: float,
    micro_batch_size: int,
    pad_id: int,
) -> list[Tensor]:
    """Each sample's per-token log-probabilities under `model`, on CPU."""
    device = next(model.parameters()).device
    out: list[Tensor] = []
    for chunk in _chunks(samples, micro_batch_size):
        batch = collate(chunk, pad_id, device)
        logp = token_logprobs(forward_logits(model, batch), batch.response_ids, temperature).cpu()
        out.extend(logp[i, : len(s.response_ids)] for i, s in enumerate(chunk))
    return out


def _prompt_ids(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, chat: bool) -> list[int]:
    if chat:
        messages = [{"role": "user", "content": prompt.text}]
        ids: Any = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        if not isinstance(ids, list):  # a BatchEncoding in newer transformers
            ids = ids["input_ids"]
        return [int(i) for i in ids]
    return [int(i) for i in tokenizer(prompt.text)["input_ids"]]


@torch.no_grad()
def generate_groups(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Prompt],
    *,
    group_size: int,
    temperature: float,
    max_response_tokens: int,
    batch_size: int,
    chat_template: bool = False,
) -> list[Sample]:
    """`group_size` responses to each prompt, sampled at `temperature` from the full
    distribution (no top-k, no top-p), grouped in prompt order."""
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    if eos is None:
        raise ValueError("the tokenizer has no EOS token, so no response could ever stop")
    pad = eos if pad is None else pad
    config = GenerationConfig(  # type: ignore[no-untyped-call]
        do_sample=True,
        temperature=temperature,
        top_k=0,
        top_p=1.0,
        max_new_tokens=max_response_tokens,
        eos_token_id=eos,
        pad_token_id=pad,
    )
    device = next(model.parameters()).device
    rows = [
        (group, prompt, _prompt_ids(tokenizer, prompt, chat_template))
        for group, prompt in enumerate(prompts)
        for _ in range(group_size)
    ]
    samples: list[Sample] = []
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        width = max(len(ids) for _, _, ids in chunk)
        ids = torch.tensor([[pad] * (width - len(p)) + p for _, _, p in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for _, _, p in chunk])
        generate: Any = model.generate
        generated = generate(
            input_ids=ids, attention_mask=mask.to(device), generation_config=config
        )
        for (group, prompt, prompt_ids), row in zip(
            chunk, generated[:, width:].tolist(), strict=True
        ):
            stop = row.index(eos) if eos in row else None
            response = row if stop is None else row[: stop + 1]
            body = response if stop is None else response[:-1]
            samples.append(
                Sample(
                    prompt=prompt,
                    group=group,
                    prompt_ids=prompt_ids,
                    response_ids=response,
                    finish_reason="length" if stop is None else "stop",
                    text=str(tokenizer.decode(body, skip_special_tokens=True)),
                )
            )
    return samples


def score_items(samples: Sequence[Sample], max_response_tokens: int, tag: str) -> list[ScoreItem]:
    """The Proctor items for `samples`: the response text, its length and how it ended."""
    return [
        ScoreItem(
            id=f"{tag}-{i}",
            domain=s.prompt.domain,
            response=s.text,
            reference=s.prompt.reference,
            finish_reason=s.finish_reason,
            response_tokens=len(s.response_ids),
            max_response_tokens=max_response_tokens,
        )
        for i, s in enumerate(samples)
    ]
