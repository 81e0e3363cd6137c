"""Every setting of the service, documented, in one place.

Read from the environment with the `PROCTOR_` prefix (nested fields use `__`, e.g.
`PROCTOR_SANDBOX__BACKEND=docker`) or passed explicitly by the CLI and the tests. Validators refuse
values that would make the service unsafe or unable to keep its promises (every item answered).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings import SettingsError as SourceError

from reward_specs.json_bounds import DEFAULT_MAX_DEPTH, HARD_MAX_DEPTH
from reward_specs.judge import DEFAULT_CACHE_BYTES, Endpoint
from sandboxes.settings import SandboxSettings

__all__ = ["CompatSettings", "RunSettings", "Settings", "SettingsError", "load_settings"]


def _at_least(model: BaseModel, *pairs: tuple[str, str], prefix: str = "") -> None:
    """Refuse `model` at the first (upper, lower) pair of its fields where upper < lower."""
    for upper, lower in pairs:
        if getattr(model, upper) < getattr(model, lower):
            raise ValueError(f"{prefix}{upper} must be at least {prefix}{lower}")


def _cpu_count() -> int:
    return max(1, len(os.sched_getaffinity(0)))


class RunSettings(BaseModel):
    """`POST /v1/run`: its sandboxes (a pool of their own, which never runs scoring) and the
    bounds of one run. A request may ask for less time, memory or output, never more."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pool_size: int = Field(default_factory=_cpu_count, ge=1, le=256)
    """Sandboxes of the run pool (opened by the first run), so runs executed at once: the API
    host's, or in queue mode each worker's (one run loop per sandbox)."""
    cpu_s: float = Field(5.0, gt=0, le=600)
    """CPU seconds of the program (user + sys, all its processes), as a code item's budget."""
    wall_s: float = Field(10.0, gt=0, le=1200)
    """Wall-clock backstop of the program, for one that sleeps or blocks."""
    build_cpu_s: float = Field(10.0, gt=0, le=600)
    """CPU seconds of the compile step (C++, Java, Go, Rust; JavaScript's syntax check)."""
    memory_mb: int = Field(512, ge=32, le=65536)
    """Memory of the program (and of its compiler)."""
    output_bytes: int = Field(1 << 20, ge=1024, le=64 << 20)
    """stdout and stderr together; more is cut off and the run is `output_limit`."""
    max_processes: int = Field(64, ge=1, le=4096)
    """Processes and threads the program may have at once."""
    max_files: int = Field(16, ge=0, le=1024)
    """Entries of a request's `files`."""
    max_file_bytes: int = Field(1 << 20, ge=1024, le=64 << 20)
    """UTF-8 bytes of the source, of `stdin`, and of each entry of `files`."""

    @model_validator(mode="after")
    def _backstop_above_budget(self) -> RunSettings:
        _at_least(self, ("wall_s", "cpu_s"), prefix="run.")
        return self


class CompatSettings(BaseModel):
    """The SandboxFusion-compatible routes (`service.http.compat`, docs/api.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    queue_wait_s: float = Field(10.0, gt=0, le=600)
    """How long a compat request waits for a sandbox of the run pool before it is answered 504
    with `Retry-After` (verl retries only a 504, within an HTTP timeout of at least 20 s)."""
    executor_pod_name: str | None = Field(None, max_length=253)
    """What `executor_pod_name` answers (None: null); never the host's name unless set so."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="PROCTOR_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    host: str = "127.0.0.1"
    """Interface `proctor serve` binds to."""
    port: int = Field(8000, ge=1, le=65535)
    """Port `proctor serve` listens on."""

    api_keys: Annotated[tuple[str, ...], NoDecode] = Field((), repr=False)
    """Keys a client may send as `Authorization: Bearer KEY` (`PROCTOR_API_KEYS=k1,k2`). With
    none here or in `api_keys_file`, every route is open (service/http/auth.py)."""
    api_keys_file: Path | None = None
    """A file of further keys, one per line (blank lines and `#` comments ignored), read at
    start-up, so that keys stay out of the environment."""
    metrics_require_key: bool = True
    """Whether `/metrics` needs a key when keys are configured (scrapers can send one);
    `/healthz` and `/readyz` never do."""
    insecure_no_auth: bool = False
    """Let `proctor serve` listen on a non-loopback address with no key configured; logged as a
    warning at start-up."""

    @field_validator("api_keys", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(k.strip() for k in value.split(",") if k.strip())
        return value

    @field_validator("api_keys")
    @classmethod
    def _keys_are_long(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(len(k) < 16 for k in value):
            raise ValueError("each API key must be at least 16 characters")
        return value

    default_spec: str = "prorl-v1-careful-2"
    """Spec used when a request names none: the SDK's, `proctor-train`'s and `proctor-eval`'s
    default too (`proctor_client._defaults.DEFAULT_SPEC`, which tests/test_default_spec.py holds
    equal), a 2.0.0 training spec that pays no puzzle partial credit."""
    spec_dirs: tuple[Path, ...] = ()
    """Extra directories of `*.toml` specs, loaded after the built-in ones."""
    registry: str = "reward_specs.domains:default_registry"
    """`module:function` returning the scorer registry; a seam for operators' own scorers."""

    workers: int = Field(default_factory=_cpu_count, ge=1, le=512)
    """Worker processes for CPU-bound scorers (math, STEM, puzzles, IFEval); one per core."""
    thread_workers: int = Field(32, ge=1, le=1024)
    """Threads for scorers that wait on a sandbox (code)."""
    chunk_size: int = Field(0, ge=0, le=4096)
    """Items sent to a worker at a time; 0 picks one from the batch size and the pool size."""
    item_timeout_s: float = Field(30.0, gt=0, le=3600)
    """Hard limit on one item in a worker (a backstop behind the verifiers' own timeouts): the
    worker is killed and replaced, and the item is judged 0 with reason `timeout`."""
    worker_memory_mb: int = Field(4096, ge=256)
    """Address-space limit of each worker process, so a pathological expression raises
    MemoryError (judged 0) instead of exhausting the machine."""
    sample_processes: int = Field(2, ge=1, le=64)
    """Puzzle sampling calls (`POST /v1/puzzles/{task}/sample`) running at once, each in a child
    process of its own under `item_timeout_s` and `worker_memory_mb`; more wait, admitted
    round-robin across API keys."""
    request_deadline_s: float = Field(300.0, gt=0, le=86400)
    """Items not scored within this time after a request arrives come back `infra_error`."""

    max_items_per_request: int = Field(16384, ge=1)
    """Items of one request (`/v1/score`, `/v1/jobs`); more is a 422 and nothing is scored."""
    max_response_bytes: int = Field(256 * 1024, ge=1)
    """Per item, UTF-8 bytes of `response`; a larger one is judged 0 (`response_too_large`) without
    being read: a response must not escape its zero by running long."""
    max_request_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    """Whole request body; a larger one is refused with 413 before it is parsed."""
    max_inflight_request_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    """Request body bytes this API process reads and holds at once, across all requests (a
    body counts from its first byte until its response is sent); a request past it is refused
    with 429 and `Retry-After`, so concurrent large bodies cannot exhaust the process's memory.
    At least `max_request_bytes`, so that one largest body is always taken."""
    max_header_bytes: int = Field(64 * 1024, ge=4096, le=16 * 1024 * 1024)
    """`proctor serve`: bytes of a request's line and headers together; more is refused with
    431 before the rest is read."""
    max_inflight_requests_per_key: int = Field(256, ge=1)
    """Requests of one API key being served at once (across API replicas in queue mode); one
    more is refused with 429 and `Retry-After`, and other keys are not affected."""
    max_inflight_items_per_key: int = Field(65536, ge=1)
    """Items of one API key being scored at once, requests' and running jobs' (across API
    replicas in queue mode); a request that would pass it is refused with 429 and
    `Retry-After`. At least `max_items_per_request`, so that one full request is always taken."""
    max_reference_depth: int = Field(DEFAULT_MAX_DEPTH, ge=1, le=HARD_MAX_DEPTH)
    """Levels of arrays and objects a reference or `meta` may nest; a deeper one makes its item
    `invalid`. At most 200, so that whatever walks a value later stays far from Python's
    recursion limit."""
    max_reference_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    """Compact-JSON bytes of one reference; a larger one makes its item `invalid`."""
    max_meta_bytes: int = Field(64 * 1024, ge=64)
    """Compact-JSON bytes of one item's `meta`; a larger one makes its item `invalid`."""

    job_ttl_s: float = Field(3600.0, gt=0)
    """How long a finished job's results stay available at GET /v1/jobs/{id}."""
    max_jobs: int = Field(8, ge=1)
    """Jobs running at once (across replicas in queue mode); a new job beyond this is refused
    with 429 and `Retry-After`. Each holds its items' results until it ends, so this is a term of
    the API's memory ceiling (docs/operating.md)."""
    max_running_job_bytes: int = Field(32 * 1024 * 1024, ge=1024)
    """Bytes of the requests of the jobs running in one API process (their items live as long as
    the job): a job past it is refused with 429 and `Retry-After`, one larger than it alone with
    413."""
    max_finished_jobs: int = Field(1024, ge=1)
    """Finished jobs whose results are kept (each for `job_ttl_s`); the oldest go first."""
    max_finished_job_bytes: int = Field(256 * 1024 * 1024, ge=1024)
    """Bytes of finished jobs' results (as encoded JSON) kept in all; past it the oldest finished
    jobs are forgotten (GET answers 404), and a result larger than this alone fails its job with
    `result_too_large`. In queue mode this is what Redis holds, across replicas."""

    log_format: Literal["text", "json"] = "text"
    """`json`: one JSON object per log line (time, level, logger, message, request_id), for log
    collectors; `text`: the same fields as a line of text."""

    shutdown_grace_s: float = Field(10.0, gt=0, le=600)
    """On SIGTERM, how long requests in flight may finish before they are cut off and the
    workers and sandboxes are stopped."""

    queue_url: str | None = Field(None, repr=False)
    """Redis URL of the queue (`redis://HOST:PORT/DB`, `rediss://` for TLS, `redis://:PW@...`
    with a password). Set, the service puts batches on RQ queues for `proctor worker`s instead of
    scoring them in its own worker processes; unset, the embedded default."""
    queue_wait_s: float = Field(10.0, gt=0, le=600)
    """Queue mode: how long a request waits for a live worker of a domain it needs before it is
    refused with 503; also how long a batch's chunks may have no live worker before their items
    come back `infra_error` (`workers_unavailable`)."""
    max_queue_depth: int = Field(65536, ge=1)
    """Queue mode: items waiting for a result (across API replicas) beyond which a new request is
    refused with 429 and `Retry-After`. A request larger than this is taken when nothing waits.
    Checked at admission: replicas admitting at the same moment may pass it by a batch each."""
    queue_chunk_size: int = Field(0, ge=0, le=4096)
    """Queue mode: items per RQ job; 0 picks one from the batch size and the live workers."""
    code_environment: str | None = Field(None, pattern=r"^sha256:[0-9a-f]{64}$")
    """Queue mode: the code sandbox's environment digest (`GET /v1/specs` `environments`, or a
    worker's start-up log line) whose workers get the code chunks. None: the API adopts the
    digest of the first live code workers it sees and keeps it while it runs."""
    worker_concurrency: int = Field(2, ge=1, le=256)
    """`proctor worker`: chunks one worker takes at a time (each spread over all its processes).
    Two let the next chunk start while one's last items finish; more leave a worker holding
    chunks that an idle worker could take at a batch's end (benchmarks/HISTORY.md, scale_out)."""

    environment_probe_interval_s: float = Field(300.0, ge=1.0, le=86400.0)
    """How often a running service (or `proctor worker`) probes its code sandbox's environment
    again; it also probes whenever the sandbox interpreter's path directories or the package
    database change (what `local` and `unsafe` sandboxes see of the host's /usr), and docker
    checks its image's tag before each sandbox start. A digest other than the one it started
    with makes code items `infra_error` (`environment_changed`) until a restart. At least 1 s
    (a probe takes a sandbox for about that long), at most a day."""

    judge_endpoints: dict[str, Endpoint] = Field(default_factory=dict, repr=False)
    """The judge domain's endpoints by name (`PROCTOR_JUDGE_ENDPOINTS` as JSON:
    `{"judge": {"url": "http://host:8000/v1", "api_key_env": "JUDGE_KEY", "timeout_s": 60}}`),
    each an OpenAI-compatible base URL with its `/v1` (`reward_specs.judge.Endpoint`). A key comes
    from a file or a variable, never from this setting; with none, no Authorization header is
    sent. A spec whose endpoint is not here still loads; its items are `infra_error`
    `judge_unavailable`. A judge call is also cut at `item_timeout_s` (less a margin), as
    `judge_timeout`, so that a slow judge never gets a worker killed."""
    judge_cache_bytes: int = Field(DEFAULT_CACHE_BYTES, ge=0)
    """Bytes of judge replies kept per worker process (least recently used first out), keyed by
    the spec's judge section, the endpoint and the exact messages: shared across API keys."""

    sandbox: SandboxSettings = SandboxSettings()
    run: RunSettings = RunSettings()
    """`POST /v1/run` (`RunSettings`; `PROCTOR_RUN__CPU_S=2`, ...)."""
    compat: CompatSettings = CompatSettings()
    """The compatibility routes (`CompatSettings`; `PROCTOR_COMPAT__QUEUE_WAIT_S=5`, ...)."""

    @field_validator("queue_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("queue_url must be a redis://, rediss:// or unix:// URL")
        return value

    @field_validator("judge_endpoints")
    @classmethod
    def _endpoint_names(cls, value: dict[str, Endpoint]) -> dict[str, Endpoint]:
        if any(not name.isidentifier() for name in value):
            raise ValueError("judge endpoint names must be identifiers")
        for name, endpoint in value.items():  # at start, not in a worker that then cannot start
            try:
                endpoint.api_key()
            except (OSError, ValueError) as exc:
                problem = type(exc).__name__ if isinstance(exc, OSError) else str(exc)
                message = f"judge endpoint {name}: its API key cannot be read ({problem})"
                raise ValueError(message) from None
        return value

    @model_validator(mode="after")
    def _limits_hold(self) -> Settings:
        _at_least(
            self,
            ("max_inflight_items_per_key", "max_items_per_request"),  # a full request fits
            ("max_inflight_request_bytes", "max_request_bytes"),
            ("request_deadline_s", "item_timeout_s"),  # the deadline covers an item
        )
        return self


class SettingsError(ValueError):
    """Settings refused: one line per refused setting, naming its environment variable and the
    rule it breaks, never its value (a key is a secret)."""


def _variable(loc: tuple[int | str, ...]) -> str:
    return "PROCTOR_" + "__".join(str(part).upper() for part in loc) if loc else "settings"


def load_settings(**values: Any) -> Settings:
    """`Settings(**values)` (and the environment), or `SettingsError` saying what is wrong."""
    try:
        return Settings(**values)
    except ValidationError as exc:
        lines = []
        for error in exc.errors(include_url=False, include_input=False):
            rule = str(error["msg"]).removeprefix("Value error, ")
            lines.append(f"{_variable(tuple(error['loc']))}: {rule}")
        raise SettingsError("; ".join(lines)) from None
    except SourceError as exc:  # an environment value that does not parse (names the field)
        raise SettingsError(str(exc)) from None
