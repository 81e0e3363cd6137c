"""The reference GRPO trainer on one GPU: 20 steps of the 8-stage schedule's first stage with a
randomly initialised model of a real architecture (Qwen2, about 0.1B parameters).

Not run in CI (it needs a CUDA device). The model is built in code and saved to a temporary
directory with the tiny word-level tokenizer (no hub downloads), and trained on the digit task,
since the schedule's prompt files are not part of this repository; everything else is stage 1 of
`clients/configs/prorl-8-stage.yaml` (256 prompts per step in minibatches of 64, G = 16,
temperature 1.2, 8,192-token budget, bf16). Prints the mean seconds per step in generation,
scoring, scoring-with-passes and update, and generated tokens per second of generation.

    python benchmarks/trainer_gpu.py                  # starts `proctor serve` here
    python benchmarks/trainer_gpu.py --url http://proctor:8000 --steps 20
    python benchmarks/trainer_gpu.py --engine trl     # TRL's GRPOTrainer, vLLM colocate

With `--engine trl` the same stage runs on TRL with clients/configs/vllm.yaml's `trl:` table
(vLLM in colocate mode; `--no-vllm` for TRL's `generate`), to set beside the reference run. The
configuration is built and checked first, so without CUDA the script prints it and exits 2.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import yaml
from _served import proctor_server
from transformers import Qwen2ForCausalLM

from proctor_client.trainer.grpo import load_args, train
from proctor_client.trainer.metrics import read_metrics
from proctor_client.trainer.tiny import qwen2_config, tiny_tokenizer

ROOT = Path(__file__).parent.parent
PRORL = ROOT / "clients" / "configs" / "prorl-8-stage.yaml"


def build_model(directory: Path) -> int:
    """Save a random ~0.1B Qwen2 and the tiny tokenizer to `directory`; its parameter count."""
    tokenizer = tiny_tokenizer()
    config = qwen2_config(
        tokenizer, hidden=768, ffn=3072, layers=12, heads=12, kv_heads=12, positions=20480
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return sum(p.numel() for p in model.parameters())


@contextlib.contextmanager
def proctor(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    with proctor_server() as started:
        yield started


def mean(metrics: list[dict[str, Any]], key: str) -> float:
    return sum(float(m[key]) for m in metrics) / len(metrics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=None, help="a running Proctor (default: start one)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--engine", choices=("reference", "trl"), default="reference")
    parser.add_argument("--no-vllm", action="store_true", help="--engine trl with generate")
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    first = load_args(PRORL).stages[0]
    trl_table: dict[str, Any] = {}
    if options.engine == "trl":
        from proctor_client.trainer.trl_engine import refusals

        if not options.no_vllm:
            trl_table = yaml.safe_load((PRORL.parent / "vllm.yaml").read_text())["trl"]
        problems = refusals(load_args(PRORL, trl=trl_table))
        print(f"trainer_gpu: --engine trl, trl: {trl_table}; refusals: {problems or 'none'}")
        if problems:
            return 2
    if options.device.startswith("cuda") and not torch.cuda.is_available():
        print("trainer_gpu: no CUDA device; this benchmark is for a GPU machine", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as work:
        model_dir = Path(work) / "model"
        parameters = build_model(model_dir)
        stage = first.model_copy(update={"steps": options.steps, "mixture": {"digits": 1.0}})
        args = load_args(
            PRORL,
            model=str(model_dir),
            device=options.device,
            data={"digits": {"kind": "digits", "size": 1000}},
            validation_mixture=None,
            validation_every=0,
            plateau_patience=None,
            checkpoint_every=0,
            tensorboard=False,
            stages=[stage.model_dump()],
            trl=trl_table,
        )
        with proctor(options.url) as url:
            if options.engine == "trl":
                from proctor_client.trainer import trl_engine

                trl_engine.train(args, url, Path(work) / "out")
            else:
                train(args, url, Path(work) / "out")
        metrics = read_metrics(Path(work) / "out" / "metrics.jsonl")
    generated = sum(
        int(m["tokens_accepted"]) + int(m["tokens_rejected"]) + int(m["tokens_surplus"])
        for m in metrics
    )
    generation_s = sum(float(m.get("time_generation", 0.0)) for m in metrics)
    print(f"model: Qwen2, {parameters / 1e6:.1f}M parameters, random weights, {options.device}")
    shape = f"G={first.group_size}, T={first.temperature}"
    print(f"steps: {len(metrics)} of stage {first.name} ({shape})")
    keys = ("time_generation", "time_scoring", "time_scoring_and_passes", "time_update")
    for key in keys if options.engine == "reference" else ("time_step", "time_scoring"):
        print(f"{key:24s} {mean(metrics, key):8.2f} s per step")
    if generation_s:
        print(
            f"generated tokens: {generated} ({generated / generation_s:.0f} tokens/s of generation)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
