"""The `proctor` command: `serve`, `score` (library mode, no server) and `specs`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import uvicorn
from pydantic import ValidationError
from tqdm import tqdm
from uvicorn.protocols.http import flow_control, h11_impl, httptools_impl

from reward_specs import BUILTIN_SPEC_DIR, Spec, load_specs
from service.auth import ExposureError, check_exposure, redact_access_log
from service.dispatch.worker import load_registry
from service.fastjson import dump_json
from service.main import build_state, create_app
from service.schemas import ErrorInfo, ScoreItem, ScoreResult
from service.scoring import score_batch
from service.settings import Settings
from service.state import AppState

__all__ = ["main"]

log = logging.getLogger(__name__)


def _settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    values: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    if getattr(args, "workers", None):
        values["workers"] = args.workers
    if getattr(args, "spec_dir", None):
        values["spec_dirs"] = tuple(args.spec_dir)
    return Settings(**values)


BODY_BUFFER_BYTES = 4 << 20
"""How much of a request body uvicorn may read ahead of the app (see `widen_body_buffer`)."""


def widen_body_buffer(limit: int = BODY_BUFFER_BYTES) -> None:
    """Let uvicorn read up to `limit` bytes of a request body before waiting for the app.

    uvicorn stops reading a connection whenever 64 KiB of body are waiting for the app and resumes
    once the app has taken them: a 12 MB batch costs ~190 such round trips through the event loop,
    ~6 ms of the ~20 ms its body took to arrive here. The limit is a module constant of uvicorn's
    HTTP protocols, read at each use, with no setting; where a protocol module does not have it
    (another uvicorn version), nothing changes. A connection may then hold `limit` bytes the app
    has not consumed yet, which `max_request_bytes` already bounds from above."""
    for module in (flow_control, h11_impl, httptools_impl):
        current = getattr(module, "HIGH_WATER_LIMIT", None)
        if isinstance(current, int):
            setattr(module, "HIGH_WATER_LIMIT", max(current, limit))  # noqa: B010 - not typed
        else:
            log.debug("%s has no HIGH_WATER_LIMIT; its read-ahead stays as it is", module.__name__)


def _serve(args: argparse.Namespace) -> int:
    settings = _settings(
        args, host=args.host, port=args.port, insecure_no_auth=args.insecure_no_auth or None
    )
    try:
        check_exposure(settings)
    except ExposureError as exc:
        print(f"proctor serve: {exc}", file=sys.stderr)
        return 2
    app = create_app(settings)
    widen_body_buffer()
    redact_access_log()
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level)
    return 0


def result_line(result: ScoreResult, omit_timing: bool = False) -> str:
    """One result exactly as the HTTP path writes it (pydantic's compact JSON)."""
    return dump_json(result, exclude={"elapsed_ms"} if omit_timing else None).decode()


def _read_items(lines: IO[str]) -> Iterator[ScoreItem | ScoreResult]:
    """Each non-blank line's item, or an `invalid` result naming what is wrong with it."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield ScoreItem.model_validate_json(line)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            message = f"line {number}: {where + ': ' if where else ''}{first['msg']}"
            yield ScoreResult(
                status="invalid", error=ErrorInfo(code="malformed_item", message=message)
            )


async def _score_file(args: argparse.Namespace, out: IO[str]) -> int:
    settings = _settings(args)
    state = build_state(settings)
    spec_name = args.spec or settings.default_spec
    spec = state.specs.get(spec_name)
    if spec is None:
        print(
            f"proctor score: unknown spec {spec_name!r}; known: {sorted(state.specs)}",
            file=sys.stderr,
        )
        return 2
    try:
        with open(args.file, "rb") as raw:
            total = sum(1 for line in raw if line.strip())
    except OSError as exc:
        print(f"proctor score: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    await state.dispatcher.start()
    counts: dict[str, int] = {}
    try:
        with (
            open(args.file, encoding="utf-8", errors="surrogateescape") as lines,
            tqdm(total=total, unit="item", disable=args.no_progress, file=sys.stderr) as progress,
        ):
            pending: list[ScoreItem | ScoreResult] = []
            for entry in _read_items(lines):
                pending.append(entry)
                if len(pending) >= args.batch_size:
                    await _flush(pending, state, spec, out, args.omit_timing, counts)
                    progress.update(len(pending))
                    pending = []
            await _flush(pending, state, spec, out, args.omit_timing, counts)
            progress.update(len(pending))
    finally:
        await state.dispatcher.stop()
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"proctor score: {spec.name} {spec.hash}: {summary or 'no items'}", file=sys.stderr)
    return 0


async def _flush(
    entries: Sequence[ScoreItem | ScoreResult],
    state: AppState,
    spec: Spec,
    out: IO[str],
    omit_timing: bool,
    counts: dict[str, int],
) -> None:
    items = [e for e in entries if isinstance(e, ScoreItem)]
    scored = iter(
        (
            await score_batch(
                state.dispatcher,
                spec,
                items,
                max_response_bytes=state.settings.max_response_bytes,
                deadline_s=state.settings.request_deadline_s,
                registry=state.registry,
            )
        ).results
    )
    for entry in entries:
        result = next(scored) if isinstance(entry, ScoreItem) else entry
        counts[result.status] = counts.get(result.status, 0) + 1
        out.write(result_line(result, omit_timing) + "\n")
    out.flush()


def _score(args: argparse.Namespace) -> int:
    if args.output == "-":
        return asyncio.run(_score_file(args, sys.stdout))
    with open(args.output, "w", encoding="utf-8") as out:
        return asyncio.run(_score_file(args, out))


def _specs(args: argparse.Namespace) -> int:
    settings = _settings(args)
    specs = load_specs(load_registry(settings.registry), (BUILTIN_SPEC_DIR, *settings.spec_dirs))
    for name, spec in sorted(specs.items()):
        marker = "*" if name == settings.default_spec else " "
        print(f"{marker} {name:28} {spec.version:8} {spec.hash}  {spec.description}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="proctor", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default 8000)")
    serve.add_argument(
        "--workers", type=int, default=None, help="worker processes (default: cores)"
    )
    serve.add_argument("--spec-dir", type=Path, action="append", help="extra spec directory")
    serve.add_argument("--log-level", default="info")
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve on a non-loopback address with no API key (logged as a warning)",
    )
    serve.set_defaults(func=_serve)

    score = sub.add_parser(
        "score", help="score a JSONL file of items in-process, writing JSONL results"
    )
    score.add_argument("file", type=Path, help="one /v1/score item per line")
    score.add_argument("-o", "--output", default="-", help="results file (default: stdout)")
    score.add_argument("--spec", default=None, help="spec name (default: the server default)")
    score.add_argument("--workers", type=int, default=None)
    score.add_argument("--spec-dir", type=Path, action="append")
    score.add_argument("--batch-size", type=int, default=4096, help="items scored at a time")
    score.add_argument(
        "--omit-timing", action="store_true", help="leave out elapsed_ms (for byte-wise diffs)"
    )
    score.add_argument("--no-progress", action="store_true", help="no progress bar")
    score.set_defaults(func=_score)

    specs = sub.add_parser("specs", help="list the known reward specs and their hashes")
    specs.add_argument("--spec-dir", type=Path, action="append")
    specs.set_defaults(func=_specs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
