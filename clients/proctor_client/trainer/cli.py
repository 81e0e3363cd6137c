"""`proctor-train CONFIG.yaml --url URL --out DIR [--engine reference|trl]`: run or resume GRPO
(the ProRL recipe) scored by Proctor, on the reference trainer or on TRL's GRPOTrainer."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

from proctor_client import ProctorError
from proctor_client.trainer.config import load_args
from proctor_client.trainer.proctor import ProctorUnreachable

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="proctor-train",
        description="Train a causal LM with GRPO (the ProRL recipe), scored by Proctor. "
        "A run on an OUT directory that holds a checkpoint resumes from the latest one. "
        "The API key, if Proctor needs one, is read from PROCTOR_API_KEY.",
    )
    parser.add_argument("config", type=Path, help="the run's YAML (see clients/configs/)")
    parser.add_argument("--url", required=True, help="Proctor's base URL")
    parser.add_argument("--out", type=Path, required=True, help="metrics, TensorBoard, checkpoints")
    parser.add_argument(
        "--engine", choices=("reference", "trl"), default="reference",
        help="reference: this package's single-file GRPO loop (default); trl: the same YAML on "
        "TRL's GRPOTrainer (accelerate, DeepSpeed/FSDP, vLLM rollouts; the `trl` extra)",
    )  # fmt: skip
    parser.add_argument(
        "--stop-after", type=int, default=None, metavar="STEPS",
        help="stop (with a checkpoint) once this many steps are done, e.g. for a time-limited job",
    )  # fmt: skip
    parser.add_argument(
        "--verbose", action="store_true",
        help="also log every HTTP request (httpx's INFO lines; off by default)",
    )  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.INFO if options.verbose else logging.WARNING)
    try:
        args = load_args(options.config)
    except (OSError, ValueError) as exc:
        print(f"proctor-train: {exc}", file=sys.stderr)
        return 2
    train: Callable[..., Path]
    if options.engine == "trl":  # imported only when asked: TRL is the `trl` extra
        from proctor_client.trainer import trl_engine

        train = trl_engine.train
    else:
        from proctor_client.trainer import grpo

        train = grpo.train
    try:
        checkpoint = train(
            args,
            options.url,
            options.out,
            stop_after=options.stop_after,
            api_key=os.environ.get("PROCTOR_API_KEY") or None,
        )
    except ValueError as exc:  # a bad prompt row, an unknown puzzle task, Proctor not ready
        print(f"proctor-train: {exc}", file=sys.stderr)
        return 2
    except (ProctorUnreachable, ProctorError) as exc:
        print(f"proctor-train: {exc}", file=sys.stderr)
        return 3
    print(f"proctor-train: last checkpoint {checkpoint}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
