"""`proctor-eval sample`: n responses per prompt from a Hugging Face causal LM, as a generations
file whose every row records the decoding settings that produced it.

    proctor-eval sample --model PATH --prompts PROMPTS.jsonl --n 64 --output GENERATIONS.jsonl

PROMPTS.jsonl holds `prompt_id`, `prompt` (the text given to the model), `domain`, `reference`
and optionally `task_family`. Defaults follow the protocol: temperature 0.6, top-p 0.95, and no
top-k and no repetition penalty unless asked (`--top-k`, `--repetition-penalty`): every setting
is passed explicitly, over transformers' defaults and the model's own generation config. Each
row's `decoding` holds `requested` (what was asked) and `effective` (the generation config
`generate` was given, with the model's own config recorded beside it). Sampling
is seeded (`--rng-seed`), so a study can be regenerated; `finish_reason` is `length` when a
response ran into `--max-new-tokens` without an end-of-sequence token. Needs torch and
transformers (the `[trainer]` extra); vLLM is not used.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

__all__ = ["Decoding", "Prompt", "generate", "main"]


class Prompt(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt_id: str = Field(..., min_length=1)
    prompt: str
    domain: str = Field(..., min_length=1)
    reference: dict[str, Any]
    task_family: str | None = None


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


@dataclass(frozen=True)
class Decoding:
    temperature: float = 0.6
    top_p: float = 0.95
    max_new_tokens: int = 1024
    rng_seed: int = 0
    top_k: int | None = None
    """None: no top-k (transformers' own default of 50 is switched off, as is the model's)."""
    repetition_penalty: float | None = None
    """None: no penalty (1.0), whatever the model's generation config sets."""

    def requested(self) -> dict[str, Any]:
        """What was asked for (None: not asked)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "repetition_penalty": self.repetition_penalty,
            "max_new_tokens": self.max_new_tokens,
            "rng_seed": self.rng_seed,
        }

    def explicit(self) -> dict[str, Any]:
        """Every sampling setting, passed explicitly so nothing comes from a default."""
        return {
            "do_sample": True,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": 0 if self.top_k is None else self.top_k,  # 0 switches the warper off
            "repetition_penalty": 1.0
            if self.repetition_penalty is None
            else self.repetition_penalty,
            "max_new_tokens": self.max_new_tokens,
        }


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


def read_prompts(path: Path) -> list[Prompt]:
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            prompts.append(Prompt.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            message = f"proctor-eval sample: {path} line {number}: {where}: {first['msg']}"
            raise SystemExit(message) from exc
    return prompts


def generate(
    checkpoint: str,
    prompts: Sequence[Prompt],
    n: int,
    decoding: Decoding,
    model_name: str,
    seed_label: str | None = None,
    batch_prompts: int = 4,
    chat_template: bool = True,
) -> Iterator[dict[str, Any]]:
    """Generation rows, n per prompt, prompt by prompt."""
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
    for start in range(0, len(prompts), batch_prompts):
        batch = prompts[start : start + batch_prompts]
        texts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": p.prompt}], tokenize=False, add_generation_prompt=True
            )
            if use_template
            else p.prompt
            for p in batch
        ]
        encoded = tokenizer(texts, return_tensors="pt", padding=True)
        with torch.no_grad():
            output = model.generate(
                **encoded,
                generation_config=config,
                num_return_sequences=n,
                pad_token_id=tokenizer.pad_token_id,
            )
        new_tokens = output[:, encoded["input_ids"].shape[1] :]
        for row, tokens in enumerate(new_tokens):
            prompt = batch[row // n]
            ids = tokens.tolist()
            ended = tokenizer.eos_token_id in ids
            length = ids.index(tokenizer.eos_token_id) if ended else len(ids)
            yield {
                "prompt_id": prompt.prompt_id,
                "prompt": prompt.prompt,
                "sample": row % n,
                "model": model_name,
                **({"seed": seed_label} if seed_label is not None else {}),
                "domain": prompt.domain,
                **({"task_family": prompt.task_family} if prompt.task_family else {}),
                "reference": prompt.reference,
                "response": tokenizer.decode(ids[:length], skip_special_tokens=True),
                "finish_reason": "stop" if ended else "length",
                "response_tokens": length,
                "max_response_tokens": decoding.max_new_tokens,
                "decoding": record,
            }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="proctor-eval sample", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint directory (or hub name)")
    p.add_argument("--prompts", type=Path, required=True, help="PROMPTS.jsonl")
    p.add_argument("--n", type=int, required=True, help="responses per prompt")
    p.add_argument("--output", type=Path, required=True, help="GENERATIONS.jsonl to write")
    p.add_argument("--model-name", default=None, help="the rows' `model` (default: --model)")
    p.add_argument("--seed-label", default=None, help="the rows' `seed`: the training run")
    p.add_argument("--temperature", type=float, default=Decoding.temperature)
    p.add_argument("--top-p", type=float, default=Decoding.top_p)
    p.add_argument("--top-k", type=int, default=None, help="top-k (default: none)")
    p.add_argument(
        "--repetition-penalty", type=float, default=None, help="repetition penalty (default: none)"
    )
    p.add_argument("--max-new-tokens", type=int, default=Decoding.max_new_tokens)
    p.add_argument("--rng-seed", type=int, default=Decoding.rng_seed)
    p.add_argument("--batch-prompts", type=int, default=4, help="prompts per generate call")
    p.add_argument("--no-chat-template", action="store_true", help="give the prompt as it is")
    return p


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(argv)
    if args.n < 1:
        raise SystemExit("proctor-eval sample: --n must be at least 1")
    decoding = Decoding(
        args.temperature,
        args.top_p,
        args.max_new_tokens,
        args.rng_seed,
        args.top_k,
        args.repetition_penalty,
    )
    prompts = read_prompts(args.prompts)
    rows = generate(
        args.model,
        prompts,
        args.n,
        decoding,
        args.model_name or args.model,
        args.seed_label,
        args.batch_prompts,
        not args.no_chat_template,
    )
    written = 0
    with args.output.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
            written += 1
    print(f"proctor-eval sample: {written} rows in {args.output}", file=sys.stderr)
    return 0
