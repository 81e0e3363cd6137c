"""Run inside verl's own environment (a separate venv: verl pins transformers<5.11): score samples
through verl's `NaiveRewardManager`, with Proctor's `compute_score` loaded the way verl's config
loads a custom reward function. Prints one JSON line per sample: its result or its error.

    python tests/verl_reward_loop.py URL SAMPLES_JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager
from verl.trainer.ppo.reward import get_custom_reward_fn

PROMPT_LENGTH = 4
RESPONSE_LENGTH = 6


def tokenizer(words: list[str]) -> Any:
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *words])}
    model = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    model.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=model, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def sample(tok: Any, item: dict[str, Any]) -> DataProto:
    """One rollout as verl's trainer hands it over: left-padded prompt, right-padded response
    ending in EOS, and their attention mask."""
    prompt = tok(item["prompt"], add_special_tokens=False)["input_ids"][-PROMPT_LENGTH:]
    response = tok(item["response"], add_special_tokens=False)["input_ids"][: RESPONSE_LENGTH - 1]
    response = [*response, tok.eos_token_id]
    pad = tok.pad_token_id
    prompt_ids = [pad] * (PROMPT_LENGTH - len(prompt)) + prompt
    response_ids = response + [pad] * (RESPONSE_LENGTH - len(response))
    mask = [0] * (PROMPT_LENGTH - len(prompt)) + [1] * (len(prompt) + len(response))
    mask += [0] * (RESPONSE_LENGTH - len(response))
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt_ids]),
            "responses": torch.tensor([response_ids]),
            "input_ids": torch.tensor([prompt_ids + response_ids]),
            "attention_mask": torch.tensor([mask]),
        },
        non_tensors={
            "data_source": np.array([item["data_source"]], dtype=object),
            "reward_model": np.array([{"ground_truth": item["ground_truth"]}], dtype=object),
            "extra_info": np.array([{"index": 0}], dtype=object),
        },
    )


def main() -> None:
    url, samples = sys.argv[1], json.loads(sys.argv[2])
    config = OmegaConf.create(
        {
            "reward": {
                "custom_reward_function": {
                    "path": "pkg://proctor_client.verl",
                    "name": "compute_score",
                    "reward_kwargs": {"url": url, "domains": {"my_math": "math"}},
                }
            }
        }
    )
    words = sorted({w for s in samples for w in f"{s['prompt']} {s['response']}".split()})
    tok = tokenizer(words)
    manager = NaiveRewardManager(config, tok, get_custom_reward_fn(config))

    async def run() -> list[Any]:
        return await asyncio.gather(
            *(manager.run_single(sample(tok, s)) for s in samples), return_exceptions=True
        )

    for outcome in manager.loop.run_until_complete(run()):
        if isinstance(outcome, BaseException):
            print(json.dumps({"error": type(outcome).__name__, "message": str(outcome)}))
        else:
            print(json.dumps(outcome))


if __name__ == "__main__":
    main()
