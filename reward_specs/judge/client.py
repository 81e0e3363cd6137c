"""Calling a judge model behind an OpenAI-compatible endpoint (vLLM, SGLang, TGI).

`Judges` holds what one process needs to call its configured endpoints: an httpx client per
endpoint, the replies cache and each endpoint's gate (a concurrency cap and a requests-per-minute
limit, its waiters admitted round-robin across API keys). Who caused a failure decides what it is:

- a connection error, a 5xx, a 429, 401, 403 or 404, or a reply that is no chat completion:
  the endpoint's fault, `NotJudged` `judge_unavailable` (the item is `infra_error`);
- a call past the endpoint's `timeout_s` (or past what is left of the item's budget, or a wait
  for the gate that long): `NotJudged` `judge_timeout`;
- any other 4xx (400 first of all: a prompt too long for the model, say): `JudgeRejected`, which
  the scorer judges 0, since a response can provoke it and must not escape its 0 that way;
- a reply: whatever it says, the scorer reads its verdict.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from reward_specs import codes
from reward_specs.caches import BytesCache
from reward_specs.canonical import canonical_text
from reward_specs.judge.endpoint import DEFAULT_CACHE_BYTES, Endpoint
from reward_specs.scorer import NotJudged

__all__ = [
    "JudgeRejected",
    "JudgeSetup",
    "Judges",
    "Reply",
    "models_digest",
]

Messages = tuple[tuple[str, str], ...]
"""A chat's messages as (role, content) pairs: hashable, so that they can key the cache."""


@dataclass(frozen=True, slots=True)
class Reply:
    """One chat completion, as the judge domain reads it."""

    text: str
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int

    def size(self) -> int:
        return len(self.text) + 64


class JudgeRejected(Exception):
    """The endpoint refused the request as malformed (HTTP 400 or another 4xx it does not
    blame on itself): the response's doing, judged 0."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:200]}")
        self.status = status
        self.body = body


_UNAVAILABLE = frozenset({401, 403, 404, 429})


def models_digest(reports: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """A digest of each endpoint's `GET /models` (`id`, `root`, `max_model_len` of each model):
    the judge domain's environment, which enters its spec hash."""
    return "sha256:" + hashlib.sha256(canonical_text(dict(reports)).encode()).hexdigest()


@dataclass(slots=True)
class EndpointStats:
    """Counters of one endpoint in this process."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: dict[str, int] = field(default_factory=dict)


def _reply_bytes(key: str, replies: tuple[Reply, ...]) -> int:
    """What a cache entry of `Judges` holds: its key and its replies' texts."""
    return len(key) + sum(r.size() for r in replies)


class Gate:
    """An endpoint's concurrency cap and requests-per-minute limit. Waiters are admitted
    round-robin across tenants (API keys), first come first served within one, so that one
    key's thousands of calls do not queue another's one call behind them."""

    def __init__(self, max_concurrency: int, requests_per_minute: int | None) -> None:
        self._max = max_concurrency
        self._rpm = requests_per_minute
        self._running = 0
        self._started: deque[float] = deque()
        self._waiting: dict[str, deque[object]] = {}  # insertion order: the next tenant first
        self._ready = threading.Condition()

    def _free_in(self, now: float) -> float:
        """Seconds until a call may start (0: now), counting capacity only."""
        while self._started and now - self._started[0] >= 60.0:
            self._started.popleft()
        if self._running >= self._max:
            return float("inf")  # until a call ends (notified)
        if self._rpm is not None and len(self._started) >= self._rpm:
            return 60.0 - (now - self._started[0])
        return 0.0

    def acquire(self, tenant: str, deadline: float) -> bool:
        """Wait for this tenant's turn and a free slot until `deadline` (monotonic); False when
        it passed first."""
        ticket = object()
        granted = False
        with self._ready:
            self._waiting.setdefault(tenant, deque()).append(ticket)
            try:
                while True:
                    now = time.monotonic()
                    first_tenant, queue = next(iter(self._waiting.items()))
                    wait = self._free_in(now)
                    if queue[0] is ticket and wait <= 0:
                        queue.popleft()
                        del self._waiting[first_tenant]
                        if queue:  # its next call waits behind every other tenant's
                            self._waiting[first_tenant] = queue
                        self._running += 1
                        self._started.append(now)
                        granted = True
                        self._ready.notify_all()
                        return True
                    left = deadline - now
                    if left <= 0:
                        return False
                    self._ready.wait(min(left, wait))
            finally:
                if not granted:  # gave up: leave the line
                    mine = self._waiting.get(tenant)
                    if mine is not None and ticket in mine:
                        mine.remove(ticket)
                        if not mine:
                            del self._waiting[tenant]
                    self._ready.notify_all()

    def waiting(self) -> int:
        """Calls waiting for their turn."""
        with self._ready:
            return sum(len(q) for q in self._waiting.values())

    def release(self) -> None:
        with self._ready:
            self._running -= 1
            self._ready.notify_all()


@dataclass(frozen=True, slots=True)
class JudgeSetup:
    """What a process needs to open its `Judges` (picklable: a service hands it to each worker
    process)."""

    endpoints: Mapping[str, Endpoint]
    cache_bytes: int = DEFAULT_CACHE_BYTES
    budget_s: float | None = None


class Judges:
    """The judge endpoints one process calls, with their cache, gates and counters.

    `budget_s` bounds one `ask` (all its orders and waits together): a service sets it below its
    per-item hard limit, so that a slow judge makes its items `judge_timeout` and never gets a
    worker killed (which would judge the item 0). Thread-safe."""

    def __init__(
        self,
        endpoints: Mapping[str, Endpoint],
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        budget_s: float | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoints = dict(endpoints)
        self.budget_s = budget_s
        self.stats = {name: EndpointStats() for name in self.endpoints}
        self._cache: BytesCache[str, tuple[Reply, ...]] = BytesCache(cache_bytes, _reply_bytes)
        self._gates = {
            name: Gate(e.max_concurrency, e.requests_per_minute)
            for name, e in self.endpoints.items()
        }
        self._clients: dict[str, httpx.Client] = {}
        for name, endpoint in self.endpoints.items():
            key = endpoint.api_key()
            self._clients[name] = httpx.Client(
                base_url=endpoint.url.rstrip("/"),
                headers={"Authorization": f"Bearer {key}"} if key is not None else {},
                transport=transport,
                limits=httpx.Limits(max_connections=endpoint.max_concurrency),
            )
        self._lock = threading.Lock()

    @classmethod
    def open(cls, setup: JudgeSetup) -> Judges:
        return cls(setup.endpoints, cache_bytes=setup.cache_bytes, budget_s=setup.budget_s)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()

    def forget(self) -> None:
        """Empty the replies cache (the endpoint's model changed)."""
        self._cache.clear()

    def _count(self, endpoint: str, **counts: int) -> None:
        with self._lock:
            stats = self.stats[endpoint]
            for name, n in counts.items():
                setattr(stats, name, getattr(stats, name) + n)

    def _failed(self, endpoint: str, code: str) -> None:
        with self._lock:
            failures = self.stats[endpoint].failures
            failures[code] = failures.get(code, 0) + 1

    def models(self, endpoint: str) -> list[dict[str, Any]]:
        """`GET {url}/models`: each model's `id`, `root` and `max_model_len` (None where the
        server does not say). Raises NotJudged (`judge_unavailable`, `judge_timeout`)."""
        spec = self.endpoints[endpoint]
        body = self._get(endpoint, "/models", spec.timeout_s)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise NotJudged(f"judge endpoint {endpoint!r}: /models is no model list", _UNAV)
        return sorted(
            (
                {"id": m.get("id"), "root": m.get("root"), "max_model_len": m.get("max_model_len")}
                for m in data
                if isinstance(m, dict)
            ),
            key=lambda m: str(m["id"]),
        )

    def _get(self, endpoint: str, path: str, timeout_s: float) -> Any:
        try:
            response = self._clients[endpoint].get(path, timeout=timeout_s)
        except httpx.TimeoutException as exc:
            raise NotJudged(f"judge endpoint {endpoint!r}: {exc!r}", codes.JUDGE_TIMEOUT) from exc
        except httpx.TransportError as exc:
            raise NotJudged(f"judge endpoint {endpoint!r}: {exc!r}", _UNAV) from exc
        if response.status_code != 200:
            raise NotJudged(f"judge endpoint {endpoint!r}: HTTP {response.status_code}", _UNAV)
        try:
            return response.json()
        except ValueError as exc:
            raise NotJudged(f"judge endpoint {endpoint!r}: a reply that is no JSON", _UNAV) from exc

    def ask(
        self,
        endpoint: str,
        prompts: Sequence[Messages],
        body: Mapping[str, Any],
        cache_scope: str,
        tenant: str = "",
    ) -> tuple[tuple[Reply, ...], bool]:
        """The replies to each chat of `prompts` (the orders asked), and whether they came from
        the cache, which keeps them under `cache_scope` (the spec's judge section), the endpoint
        and the exact messages: all orders one entry, replies only, never a failure. `body`:
        the rest of the request (model, max_tokens, temperature). Raises NotJudged and
        JudgeRejected."""
        if endpoint not in self.endpoints:
            raise NotJudged(f"no judge endpoint {endpoint!r} is configured", _UNAV)
        key = hashlib.sha256(
            canonical_text(
                {"scope": cache_scope, "endpoint": endpoint, "prompts": [list(p) for p in prompts]}
            ).encode()
        ).hexdigest()
        cached = self._cache.get(key)
        if cached is not None:
            self._count(endpoint, cache_hits=1)
            return cached, True
        spec = self.endpoints[endpoint]
        started = time.monotonic()
        budget_end = started + self.budget_s if self.budget_s is not None else float("inf")
        replies = []
        for messages in prompts:
            replies.append(self._call(endpoint, spec, messages, body, tenant, budget_end))
        found = tuple(replies)
        self._cache.put(key, found)
        return found, False

    def _call(
        self,
        name: str,
        endpoint: Endpoint,
        messages: Messages,
        body: Mapping[str, Any],
        tenant: str,
        budget_end: float,
    ) -> Reply:
        now = time.monotonic()
        end = min(now + endpoint.timeout_s, budget_end)
        gate = self._gates[name]
        if not gate.acquire(tenant, end):
            self._failed(name, codes.JUDGE_TIMEOUT)
            raise NotJudged(f"judge endpoint {name!r}: no free slot in time", codes.JUDGE_TIMEOUT)
        try:
            payload = {**body, "messages": [{"role": r, "content": c} for r, c in messages]}
            self._count(name, calls=1)
            try:
                response = self._clients[name].post(
                    "/chat/completions", json=payload, timeout=max(0.001, end - time.monotonic())
                )
            except httpx.TimeoutException as exc:
                self._failed(name, codes.JUDGE_TIMEOUT)
                raise NotJudged(f"judge endpoint {name!r}: {exc!r}", codes.JUDGE_TIMEOUT) from exc
            except httpx.TransportError as exc:
                self._failed(name, _UNAV)
                raise NotJudged(f"judge endpoint {name!r}: {exc!r}", _UNAV) from exc
        finally:
            gate.release()
        status = response.status_code
        if status >= 500 or status in _UNAVAILABLE:
            self._failed(name, _UNAV)
            raise NotJudged(f"judge endpoint {name!r}: HTTP {status}", _UNAV)
        if status >= 400:
            self._failed(name, "judge_rejected_input")
            raise JudgeRejected(status, response.text)
        reply = _reply(response)
        if reply is None:
            self._failed(name, _UNAV)
            raise NotJudged(f"judge endpoint {name!r}: HTTP {status}, no chat completion", _UNAV)
        self._count(
            name, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens
        )
        return reply


_UNAV = codes.JUDGE_UNAVAILABLE


def _reply(response: httpx.Response) -> Reply | None:
    """The first choice of a chat completion; None when the body is not one."""
    try:
        body = response.json()
        choice = body["choices"][0]
        text = choice["message"].get("content") or ""
        usage = body.get("usage") or {}
        if not isinstance(text, str):
            return None
        return Reply(
            text=text,
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return None
