"""What a run loads before its first step, shared by both engines: the policy and its tokenizer,
the prompt pools, and a Ctrl-C handler that stops after the current step."""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from proctor_client.trainer import tiny
from proctor_client.trainer.config import Args
from proctor_client.trainer.data import Prompt, load_jsonl
from proctor_client.trainer.proctor import puzzle_prompts
from proctor_client.trainer.schedule import Source

__all__ = ["load_model", "load_pools", "stop_on_sigint"]

log = logging.getLogger("proctor_client.trainer")


def load_model(args: Args, device: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The policy (on `device`, in the run's dtype) and its tokenizer."""
    tokenizer: PreTrainedTokenizerBase
    model: PreTrainedModel
    if args.model == "tiny-digits":
        tokenizer = tiny.tiny_tokenizer()
        model = tiny.tiny_model(tokenizer, args.seed)
    else:
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model)
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else torch.float32
    moved: PreTrainedModel = model.to(device=device, dtype=dtype)  # type: ignore[call-arg]
    return moved, tokenizer


def load_pools(sources: Mapping[str, Source], url: str, seed: int) -> dict[str, list[Prompt]]:
    """Every named source's prompts: a file read, puzzles sampled from Proctor, or digits."""
    pools: dict[str, list[Prompt]] = {}
    for name, source in sorted(sources.items()):
        if source.path is not None:  # kind jsonl (the Source validator pairs them)
            pools[name] = load_jsonl(source.path)
        elif source.task is not None:  # kind puzzle
            pools[name] = puzzle_prompts(url, source.task, source.config, source.size, seed)
        else:
            pools[name] = tiny.digit_prompts(source.size)
    return pools


@contextmanager
def stop_on_sigint() -> Iterator[list[bool]]:
    """A first Ctrl-C asks the loop to stop after the current step (with a checkpoint); a second
    one interrupts at once."""
    requested = [False]

    def handler(signum: int, frame: object) -> None:
        if requested[0]:
            raise KeyboardInterrupt
        requested[0] = True
        log.warning("interrupt: stopping after this step, with a checkpoint (again to abort)")

    try:
        previous = signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: no handler, Ctrl-C behaves as usual
        yield requested
        return
    try:
        yield requested
    finally:
        signal.signal(signal.SIGINT, previous)
