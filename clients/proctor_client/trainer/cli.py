"""`proctor-train CONFIG.yaml --url URL --out DIR`: run or resume the reference GRPO trainer."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from proctor_client import ProctorError
from proctor_client.trainer.grpo import load_args, train
from proctor_client.trainer.proctor import ProctorUnreachable

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
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
        "--stop-after", type=int, default=None, metavar="STEPS",
        help="stop (with a checkpoint) once this many steps are done, e.g. for a time-limited job",
    )  # fmt: skip
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        args = load_args(options.config)
    except (OSError, ValueError) as exc:
        print(f"proctor-train: {exc}", file=sys.stderr)
        return 2
    try:
        checkpoint = train(
            args,
            options.url,
            options.out,
            stop_after=options.stop_after,
            api_key=os.environ.get("PROCTOR_API_KEY") or None,
        )
    except ValueError as exc:  # a prompt file's bad row, a puzzle task Proctor does not know
        print(f"proctor-train: {exc}", file=sys.stderr)
        return 2
    except (ProctorUnreachable, ProctorError) as exc:
        print(f"proctor-train: {exc}", file=sys.stderr)
        return 3
    print(f"proctor-train: last checkpoint {checkpoint}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
