"""`proctor-eval sample`: n responses per prompt, as a generations file whose every row records
the decoding settings that produced it.

    proctor-eval sample --model PATH --prompts PROMPTS.jsonl --n 64 --output GENERATIONS.jsonl
    proctor-eval sample --endpoint URL --model NAME --prompts PROMPTS.jsonl --n 64 --output G.jsonl

Two backends write the same rows: transformers' `generate` on a local checkpoint
(`sample_local`, needs the `[trainer]` extra), or an OpenAI-compatible server such as vLLM
(`--endpoint`, `sample_endpoint`). PROMPTS.jsonl holds `prompt_id`, `prompt` (text, or a chat as a
list of `{"role", "content"}` turns), `domain`, `reference` and optionally `task_family`.
Defaults follow the protocol: temperature 0.6, top-p 0.95, no top-k and no repetition penalty
unless asked. The output is appended to: a re-run skips the `(prompt_id, sample)` keys already
written (see `sampling`). Each row is stamped with its sampling run, device type and count
(`--device`, `--devices`) and wall time so far, and with `--training-gpu-hours` when given: the
report's GPU-hours (budgets.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from proctor_client.evaluation.sampling import (
    Decoding,
    Output,
    Prompt,
    RunFacts,
    SampleError,
    open_output,
    read_prompts,
)

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="proctor-eval sample", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="checkpoint (local) or served model name")
    p.add_argument("--prompts", type=Path, required=True, help="PROMPTS.jsonl")
    p.add_argument("--n", type=int, required=True, help="responses per prompt")
    p.add_argument("--output", type=Path, required=True, help="GENERATIONS.jsonl to append to")
    p.add_argument("--model-name", default=None, help="the rows' `model` (default: --model)")
    p.add_argument("--seed-label", default=None, help="the rows' `seed`: the training run")
    p.add_argument("--temperature", type=float, default=Decoding.temperature)
    p.add_argument("--top-p", type=float, default=Decoding.top_p)
    p.add_argument("--top-k", type=int, default=None, help="top-k (default: none)")
    p.add_argument(
        "--repetition-penalty", type=float, default=None, help="repetition penalty (default: none)"
    )
    p.add_argument("--max-new-tokens", "--max-tokens", type=int, default=Decoding.max_new_tokens)
    p.add_argument("--rng-seed", type=int, default=Decoding.rng_seed)
    p.add_argument(
        "--device",
        default=None,
        help="device type the model runs on, for GPU-hours (local default: cpu; --endpoint: "
        "the server's, unknown unless given)",
    )
    p.add_argument("--devices", type=int, default=None, help="devices the model runs on")
    p.add_argument(
        "--training-gpu-hours",
        type=float,
        default=None,
        help="the training run's gpu_hours_total, recorded in every row for the report",
    )
    local = p.add_argument_group("local backend (transformers generate)")
    local.add_argument("--batch-prompts", type=int, default=4, help="prompts per generate call")
    local.add_argument("--no-chat-template", action="store_true", help="give text prompts as is")
    server = p.add_argument_group("--endpoint backend (an OpenAI-compatible server)")
    server.add_argument("--endpoint", default=None, help="server URL, e.g. http://host:8000")
    server.add_argument(
        "--api",
        choices=["auto", "completions", "chat"],
        default="auto",
        help="auto: /v1/chat/completions for chat prompts, /v1/completions for text",
    )
    server.add_argument(
        "--samples-per-request",
        choices=["auto", "n", "1"],
        default="auto",
        help="n per request, or one request per sample for servers that ignore n (auto: probe)",
    )
    server.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    server.add_argument("--retries", type=int, default=5, help="retries on 429/5xx/connection")
    server.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    server.add_argument(
        "--openai-params-only",
        action="store_true",
        help="send no top_k/repetition_penalty (for servers that refuse non-OpenAI fields)",
    )
    server.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _check(args: argparse.Namespace) -> None:
    for name in ("n", "concurrency", "batch_prompts", "max_new_tokens"):
        if getattr(args, name) < 1:
            raise SampleError(f"--{name.replace('_', '-')} must be at least 1")
    if args.retries < 0:
        raise SampleError("--retries must be at least 0")
    if args.devices is not None and args.devices < 1:
        raise SampleError("--devices must be at least 1")
    if args.training_gpu_hours is not None and not args.training_gpu_hours >= 0:
        raise SampleError("--training-gpu-hours must be at least 0")


def _facts(args: argparse.Namespace) -> RunFacts:
    """The local backend runs the model in this process, on the CPU (sample_local.py moves it
    nowhere); an endpoint's hardware is the server's and known only when declared."""
    if args.endpoint is None:
        device, devices = args.device or "cpu", args.devices or 1
    else:
        device, devices = args.device, args.devices
    return RunFacts(device, devices, args.training_gpu_hours)


def _backend(
    args: argparse.Namespace,
    todo: list[tuple[Prompt, list[int]]],
    decoding: Decoding,
    model_name: str,
    output: Output,
) -> None:
    if args.endpoint is not None:
        from proctor_client.evaluation.sample_endpoint import Endpoint, sample_endpoint

        endpoint = Endpoint(
            args.endpoint,
            args.model,
            args.api,
            args.samples_per_request,
            args.concurrency,
            args.retries,
            args.timeout,
            args.openai_params_only,
        )
        progress = not args.no_progress
        sample_endpoint(endpoint, todo, decoding, model_name, args.seed_label, output, progress)
        return
    from proctor_client.evaluation.sample_local import generate  # torch, only here

    rows = generate(
        args.model,
        todo,
        args.n,
        decoding,
        model_name,
        args.seed_label,
        args.batch_prompts,
        not args.no_chat_template,
    )
    for row in rows:
        output.write(row)


def _run(args: argparse.Namespace) -> int:
    _check(args)
    decoding = Decoding(
        args.temperature,
        args.top_p,
        args.max_new_tokens,
        args.rng_seed,
        args.top_k,
        args.repetition_penalty,
    )
    prompts = read_prompts(args.prompts)
    model_name = args.model_name or args.model
    output = open_output(args.output, model_name, args.seed_label, decoding, _facts(args))
    before = len(output.done)
    todo = list(output.missing(prompts, args.n))
    try:
        _backend(args, todo, decoding, model_name, output)
    except SampleError as exc:
        if output.written:
            raise SampleError(f"{exc} ({output.written} rows written to {args.output}; "
                              "a re-run resumes)") from exc  # fmt: skip
        raise
    finally:
        output.close()
    kept = f" ({before} already there)" if before else ""
    print(f"proctor-eval sample: {output.written} rows written to {args.output}{kept}",
          file=sys.stderr)  # fmt: skip
    return 0


def main(argv: Sequence[str]) -> int:
    try:
        return _run(_parser().parse_args(argv))
    except SampleError as exc:
        print(f"proctor-eval sample: {exc}", file=sys.stderr)
        return 2
