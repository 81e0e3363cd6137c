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

__all__ = ["DIGIT_NAMES", "digit_prompts", "qwen2_config", "tiny_model", "tiny_tokenizer"]

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


def qwen2_config(
    tokenizer: PreTrainedTokenizerFast,
    *,
    hidden: int,
    ffn: int,
    layers: int,
    heads: int,
    kv_heads: int,
    positions: int,
) -> Qwen2Config:
    """A Qwen2 of these sizes over `tokenizer`'s vocabulary, with tied embeddings, EOS as padding
    and no BOS (the tiny tokenizer has none)."""
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=ffn,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )


def tiny_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> PreTrainedModel:
    """A two-layer Qwen2 with random weights drawn from `seed` (about 20K parameters)."""
    config = qwen2_config(tokenizer, hidden=32, ffn=64, layers=2, heads=4, kv_heads=2, positions=64)
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
