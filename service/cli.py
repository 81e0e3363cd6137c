"""The `proctor` command: `serve`, `worker` (queue mode), `score` (library mode, no server) and
`specs`."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import socket
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, BinaryIO, TypeAlias

from reward_specs import Registry, Spec, codes
from reward_specs.lazy import lazy_import
from sandboxes import SandboxError
from service.core.loading import load_all_specs, load_registry
from service.core.logs import configure_logging
from service.schemas import ErrorInfo, ScoreResult
from service.settings import Settings, SettingsError, load_settings

# The web stack and the dispatchers are imported at first use (reward_specs.lazy): a command loads
# what it runs, so that `proctor specs` starts in a fraction of `proctor serve`'s time.
if TYPE_CHECKING:
    import fastapi.exceptions as fastapi_exceptions
    import tqdm
    import uvicorn

    import reward_specs.code.languages as languages
    import service.core.fastjson as fastjson
    import service.dispatch as dispatch
    import service.dispatch.environment as environment
    import service.dispatch.judges as judges
    import service.http.auth as auth
    import service.http.header_limit as header_limit
    import service.main as app_factory
    import service.queue.worker as queue_worker
    import service.work.ingest as ingest
    import service.work.scoring as scoring
    from service.state import AppState
else:
    # Libraries, and the code domain (all of it).
    fastapi_exceptions = lazy_import("fastapi.exceptions")
    languages = lazy_import("reward_specs.code.languages")
    tqdm = lazy_import("tqdm")
    uvicorn = lazy_import("uvicorn")
    # `proctor serve`: the app and its HTTP edge.
    app_factory = lazy_import("service.main")
    auth = lazy_import("service.http.auth")
    header_limit = lazy_import("service.http.header_limit")
    # The dispatchers, `proctor worker`, and the environment probes of `specs` and `score`.
    dispatch = lazy_import("service.dispatch")
    environment = lazy_import("service.dispatch.environment")
    judges = lazy_import("service.dispatch.judges")
    queue_worker = lazy_import("service.queue.worker")
    # `proctor score`: a body read and scored in-process.
    fastjson = lazy_import("service.core.fastjson")
    ingest = lazy_import("service.work.ingest")
    scoring = lazy_import("service.work.scoring")

__all__ = ["main"]

log = logging.getLogger(__name__)


def _settings(args: argparse.Namespace, **overrides: Any) -> Settings:
    values: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    if getattr(args, "workers", None):
        values["workers"] = args.workers
    if getattr(args, "spec_dir", None):
        values["spec_dirs"] = tuple(args.spec_dir)
    if getattr(args, "queue", None):
        values["queue_url"] = args.queue
    return load_settings(**values)


def _say_what_local_lacks(settings: Settings) -> None:
    """At start, under the `local` sandbox: the code domain's toolchains this host lacks."""
    if settings.sandbox.backend != "local":
        return
    missing = languages.missing_toolchains()
    if missing:
        print(
            f"proctor serve: the local sandbox has no compiler for {', '.join(sorted(missing))}: "
            f"their code items will be infra_error (apt-get install "
            f"{' '.join(sorted(set(missing.values())))})",
            file=sys.stderr,
        )


def _serve(args: argparse.Namespace) -> int:
    settings = _settings(
        args, host=args.host, port=args.port, insecure_no_auth=args.insecure_no_auth or None
    )
    taken = _cannot_listen(settings.host, settings.port)
    if taken is not None:  # before the workers warm up, not after
        print(f"proctor serve: {taken}", file=sys.stderr)
        return 2
    # The workers warm up while the web stack loads, from here: even the exposure check imports
    # FastAPI (service.http.auth). A refusal below ends the warm-up with this process.
    dispatch.prepare(settings)
    try:
        auth.check_exposure(settings)
    except auth.ExposureError as exc:
        print(f"proctor serve: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_level, settings.log_format)
    _say_what_local_lacks(settings)
    app = app_factory.create_app(settings, owns_process=True)
    auth.redact_access_log()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=args.log_level,
        log_config=None,  # our handler (configure_logging), for uvicorn's lines too
        timeout_graceful_shutdown=max(1, round(settings.shutdown_grace_s)),
        http=header_limit.header_limited_http(settings.max_header_bytes),  # 431 past it
        h11_max_incomplete_event_size=settings.max_header_bytes,
    )
    return 0


def _cannot_listen(host: str, port: int) -> str | None:
    """Why `host:port` cannot be listened on (in use, not an address of this machine), tried the
    way uvicorn binds (`SO_REUSEADDR`); None if it can."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        return f"cannot resolve {host}: {exc.strerror}"
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror}"
    return None


def _worker(args: argparse.Namespace) -> int:
    settings = _settings(args, worker_concurrency=args.concurrency)
    domains = [d.strip() for d in args.domains.split(",") if d.strip()] if args.domains else None
    configure_logging(args.log_level, settings.log_format)
    if settings.queue_url is None:
        print("proctor worker: no queue: give --queue or set PROCTOR_QUEUE_URL", file=sys.stderr)
        return 2
    try:
        return queue_worker.run_worker(settings, domains)
    except ValueError as exc:
        print(f"proctor worker: {exc}", file=sys.stderr)
        return 2


def result_line(result: ScoreResult, omit_timing: bool = False) -> str:
    """One result exactly as the HTTP path writes it (pydantic's compact JSON)."""
    return fastjson.dump_json(result, exclude={"elapsed_ms"} if omit_timing else None).decode()


_Entry: TypeAlias = "tuple[ingest.RequestItem, str | None] | ScoreResult"
"""A line's item (and why the reader refused it, if it did) or the `invalid` result of a line that
holds no item."""


def _read_items(lines: Iterable[bytes]) -> Iterator[_Entry]:
    """Each line's item, read as the HTTP path reads an item of a request, or an `invalid`
    result naming the line, and the column or field of what is wrong with it (a blank line
    too, so that result N is always line N's)."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            message = f"line {number}: a blank line, no item"
            yield ScoreResult(
                status="invalid", error=ErrorInfo(code=codes.MALFORMED_ITEM, message=message)
            )
            continue
        try:
            value = ingest.loads_json(line)
            if not isinstance(value, dict):
                raise fastapi_exceptions.RequestValidationError(
                    [{"loc": ("body",), "msg": "a line must hold one JSON object, the item"}]
                )
            body = ingest.validate_score_request({"items": [value]})
        except fastapi_exceptions.RequestValidationError as exc:
            yield _malformed(number, exc.errors()[0])
            continue
        refused = body.rejected.get(0)  # an unknown field, a field of the wrong type
        yield body.items[0], None if refused is None else f"line {number}: {refused}"


def _malformed(number: int, error: Mapping[str, Any]) -> ScoreResult:
    loc = list(error.get("loc", ()))[1:]  # past "body"
    position = error.get("ctx", {}).get("position")
    if loc[:2] == ["items", 0]:
        where = f"line {number}: " + ".".join(str(p) for p in loc[2:])
    elif isinstance(position, int):  # where the JSON decoder stopped (`ingest.loads_json`)
        where = f"line {number}, column {position + 1}"
        error = {"msg": f"invalid JSON: {error['ctx']['reason']}"}
    else:
        where = f"line {number}"
    message = f"{where}: {error.get('msg', '')}"
    return ScoreResult(
        status="invalid", error=ErrorInfo(code=codes.MALFORMED_ITEM, message=message)
    )


def _open_items(path: Path) -> tuple[BinaryIO, int | None]:
    """The items' lines (standard input for `-`) and, for a file, how many there are."""
    if str(path) == "-":
        return sys.stdin.buffer, None
    with open(path, "rb") as raw:
        total = sum(1 for _ in raw)
    return open(path, "rb"), total


async def _score_file(args: argparse.Namespace, out: IO[str]) -> int:
    settings = _settings(args)
    state = app_factory.build_state(settings)
    spec_name = args.spec or settings.default_spec
    if spec_name not in state.specs:
        print(
            f"proctor score: unknown spec {spec_name!r}; known: {sorted(state.specs)}",
            file=sys.stderr,
        )
        return 2
    try:
        source, total = _open_items(args.file)
    except OSError as exc:
        print(f"proctor score: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    # Started (its sandbox probed) before line 1: the hash there is the one a server on this
    # host and sandbox reports, and the one every result is scored under.
    await state.dispatcher.start()
    spec = state.specs[spec_name]
    counts: dict[str, int] = {}
    try:
        out.write(json.dumps({"spec": spec.summary()}, separators=(",", ":")) + "\n")  # line 1
        with (
            source,
            tqdm.tqdm(
                total=total, unit="item", disable=args.no_progress, file=sys.stderr
            ) as progress,
        ):
            pending: list[_Entry] = []
            for entry in _read_items(source):
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
    entries: Sequence[_Entry],
    state: AppState,
    spec: Spec,
    out: IO[str],
    omit_timing: bool,
    counts: dict[str, int],
) -> None:
    items: list[ingest.RequestItem] = []
    rejected: dict[int, str] = {}
    for entry in entries:
        if isinstance(entry, tuple):
            if entry[1] is not None:
                rejected[len(items)] = entry[1]
            items.append(entry[0])
    # strict=False: the lines' values were read leniently (NaN included)
    body = ingest.ScoreBody(items, rejected=rejected, strict=False)
    response = await scoring.score_batch(state.scoring, spec, body)
    scored = iter(response.results)
    for entry in entries:
        result = next(scored) if isinstance(entry, tuple) else entry
        counts[result.status] = counts.get(result.status, 0) + 1
        out.write(result_line(result, omit_timing) + "\n")
    out.flush()


def _score(args: argparse.Namespace) -> int:
    if args.output == "-":
        return asyncio.run(_score_file(args, sys.stdout))
    with open(args.output, "w", encoding="utf-8") as out:
        return asyncio.run(_score_file(args, out))


def _environments(settings: Settings, registry: Registry) -> tuple[dict[str, str], str | None]:
    """The environment digests a server of `settings` on this host would score under (queue
    mode's pinned `code_environment`, else its sandbox probed as the server probes it), or {}
    and why none could be had."""
    if settings.queue_url is not None and settings.code_environment is not None:
        domains = dispatch.base.sandboxed_domains(registry)
        return {domain: settings.code_environment for domain in domains}, None
    try:
        return environment.probe_configured(settings.sandbox, registry), None
    except (SandboxError, ImportError) as exc:
        return {}, f"the {settings.sandbox.backend} sandbox is unavailable here ({exc})"


def _judge_environment(settings: Settings) -> dict[str, str]:
    """The judge endpoints' models as a server of `settings` reads them at start (`{"judge":
    digest}`), or {} with none configured."""
    setup = judges.judge_setup(settings)
    if setup is None:
        return {}
    watch = judges.JudgeWatch(setup, settings.environment_probe_interval_s)
    try:
        watch.check()
        return {"judge": watch.digest} if watch.digest else {}
    finally:
        watch.close()


def _specs(args: argparse.Namespace) -> int:
    settings = _settings(args)
    registry = load_registry(settings.registry)
    environments, unprobed = _environments(settings, registry)
    environments.update(_judge_environment(settings))
    specs = load_all_specs(registry, settings.spec_dirs, environments)
    if args.name is not None:
        spec = specs.get(args.name)
        if spec is None:
            print(
                f"proctor specs: unknown spec {args.name!r}; known: {sorted(specs)}",
                file=sys.stderr,
            )
            return 2
        shown = {
            **spec.summary(),
            "description": spec.description,
            "default": args.name == settings.default_spec,
            "environments": dict(spec.environments),
            **({"unprobed": unprobed} if unprobed else {}),
            "parameters": spec.parameters(),
            "domain_hashes": dict(spec.domain_hashes),
        }
        print(json.dumps(shown, indent=2))
        return 0
    if unprobed:
        print(f"# without the code environment: {unprobed}; no server reports these hashes")
    for domain, digest in sorted(environments.items()):
        source = (
            "its endpoints' models" if domain == "judge" else f"{settings.sandbox.backend} sandbox"
        )
        print(f"# {domain} environment {digest} ({source})")
    for name, spec in sorted(specs.items()):
        marker = "*" if name == settings.default_spec else " "
        print(f"{marker} {name:28} {spec.version:8} {spec.hash}  {spec.description}")
    return 0


def _setting_default(name: str) -> Any:
    """A setting's default as `service.settings` declares it: the one place it is written."""
    return Settings.model_fields[name].default


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="proctor", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP service")
    serve.add_argument(
        "--host", default=None, help=f"interface to bind (default {_setting_default('host')})"
    )
    serve.add_argument(
        "--port", type=int, default=None, help=f"port (default {_setting_default('port')})"
    )
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
    serve.add_argument(
        "--queue", default=None, help="Redis URL: score through `proctor worker`s (queue mode)"
    )
    serve.set_defaults(func=_serve)

    worker = sub.add_parser("worker", help="score the chunks of a queue (one per machine)")
    worker.add_argument(
        "--queue",
        default=None,
        help="Redis URL (redis://, rediss://); default PROCTOR_QUEUE_URL, which keeps a "
        "password off the command line",
    )
    worker.add_argument(
        "--domains",
        default=None,
        help="comma-separated domains to take, `run` for runs (default: every domain and run)",
    )
    worker.add_argument(
        "--workers", type=int, default=None, help="worker processes (default: cores)"
    )
    worker.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help=f"chunks taken at a time (default {_setting_default('worker_concurrency')})",
    )
    worker.add_argument("--spec-dir", type=Path, action="append", help="extra spec directory")
    worker.add_argument("--log-level", default="info")
    worker.set_defaults(func=_worker)

    score = sub.add_parser(
        "score", help="score a JSONL file of items in-process, writing JSONL results"
    )
    score.add_argument("file", type=Path, help="one /v1/score item per line; - for stdin")
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
    specs.add_argument(
        "name", nargs="?", default=None, help="a spec: show its resolved parameters as JSON"
    )
    specs.add_argument("--spec-dir", type=Path, action="append")
    specs.set_defaults(func=_specs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SettingsError as exc:
        print(f"proctor {args.command}: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
