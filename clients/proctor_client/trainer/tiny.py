"""The tiny task and model the learning test trains on CPU, built in code (no hub downloads).

The task: a prompt names a digit ("box seven"); a response earns reward 1 from Proctor's math
domain when its last `\\boxed{}` holds that digit. The word-level vocabulary has every boxed digit
as one token beside bare digits and filler words, so a randomly initialised model answers right
about one time in ten by chance, and can only do better by learning from reward which boxed token
goes with which prompt.
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedModel, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from proctor_client.trainer.data import Prompt

__all__ = ["DIGIT_NAMES", "digit_prompts", "tiny_model", "tiny_tokenizer"]

DIGIT_NAMES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_FILLER = ("the", "answer", "is", "so")
EOS = "<eos>"


def _vocabulary() -> list[str]:
    boxed = [f"\\boxed{{{d}}}" for d in range(10)]
    bare = [str(d) for d in range(10)]
    return [EOS, "<unk>", "box", *DIGIT_NAMES, *boxed, *bare, *_FILLER]


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer over the task's words; EOS doubles as padding."""
    vocab = {word: i for i, word in enumerate(_vocabulary())}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=backend, eos_token=EOS, pad_token=EOS, unk_token="<unk>"
    )


def tiny_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> PreTrainedModel:
    """A two-layer Qwen2 with random weights drawn from `seed` (about 20K parameters)."""
    eos = tokenizer.eos_token_id
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        eos_token_id=eos,
        pad_token_id=eos,
        bos_token_id=None,
    )
    devices = torch.random.fork_rng(devices=[])
    with devices:
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    return model


def digit_prompts(count: int) -> list[Prompt]:
    """`count` prompts cycling through the ten digits, each judged by the math domain."""
    return [
        Prompt(
            text=f"box {DIGIT_NAMES[i % 10]}",
            domain="math",
            reference={"answer": str(i % 10)},
            id=f"digit-{i}",
        )
        for i in range(count)
    ]
