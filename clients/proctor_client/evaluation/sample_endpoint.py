"""The `--endpoint` backend of `proctor-eval sample`: sampling through an OpenAI-compatible server
(vLLM, SGLang, TGI, `transformers serve`), `/v1/completions` for text prompts and
`/v1/chat/completions` for chats (`--api` forces one).

Every setting is sent explicitly with each request: `n`, temperature, top_p, max_tokens, seed and
`stream: false`, and, unless `--openai-params-only` (for servers that refuse fields outside
OpenAI's schema, such as `transformers serve`), `top_k` and `repetition_penalty` with their "off"
values (-1, 1.0) when not asked, so a server's defaults or the model's generation config cannot
slip in. Each request's seed is drawn from `--rng-seed`, the prompt and its first sample number,
so separate requests never share a seed. A server that ignores `n` (it returns one choice) gets
one request per sample; `--samples-per-request auto` finds out with a one-token probe, and the
rows' `decoding` says which was used. Requests run concurrently (`--concurrency`), are retried
with exponential backoff on 429, 5xx and connection errors, and each row is appended as its
response arrives, so an interrupted run resumes where it stopped. The servers report no effective
settings, so `decoding.effective` is null and `proctor-eval` compares such runs on the requested
ones. With n per request, usage counts the whole request: `response_tokens` is then recorded only
when the choice reports its own count.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx
from tqdm import tqdm

from proctor_client.evaluation.sampling import Decoding, Output, Prompt, SampleError, make_row

__all__ = ["Endpoint", "sample_endpoint"]

Api = Literal["auto", "completions", "chat"]
PerRequest = Literal["auto", "n", "1"]
PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
FINISH = {"stop": "stop", "eos_token": "stop", "stop_sequence": "stop", "length": "length"}
"""Servers' finish reasons as the rows record them (others, such as `abort`, are left unknown)."""


@dataclass(frozen=True)
class Endpoint:
    url: str
    """The server's base URL (a trailing `/v1` is dropped)."""
    model: str
    """The served model's name, sent as `model`."""
    api: Api = "auto"
    per_request: PerRequest = "auto"
    concurrency: int = 8
    retries: int = 5
    timeout_s: float = 600.0
    openai_params_only: bool = False
    api_key: str | None = field(default=None, repr=False)

    @property
    def base(self) -> str:
        url = self.url.rstrip("/")
        return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass(frozen=True)
class Job:
    prompt: Prompt
    samples: list[int]
    """The sample numbers this request fills, in choice order."""


def request_seed(rng_seed: int, prompt_id: str, first_sample: int) -> int:
    """A request's seed: stable across runs, different for every (prompt, first sample)."""
    digest = hashlib.sha256(f"{rng_seed}\x00{prompt_id}\x00{first_sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def settings(endpoint: Endpoint, decoding: Decoding) -> dict[str, Any]:
    """The sampling settings every request carries (beside model, prompt, n and seed)."""
    sent: dict[str, Any] = {
        "temperature": decoding.temperature,
        "top_p": decoding.top_p,
        "max_tokens": decoding.max_new_tokens,
        "stream": False,
    }
    if not endpoint.openai_params_only:
        sent["top_k"] = -1 if decoding.top_k is None else decoding.top_k
        penalty = decoding.repetition_penalty
        sent["repetition_penalty"] = 1.0 if penalty is None else penalty
    elif decoding.top_k is not None or decoding.repetition_penalty is not None:
        raise SampleError("--top-k and --repetition-penalty are not OpenAI parameters; "
                          "drop them or --openai-params-only")  # fmt: skip
    return sent


def api_of(endpoint: Endpoint, prompt: Prompt) -> Literal["completions", "chat"]:
    if endpoint.api != "auto":
        return endpoint.api
    return "chat" if prompt.is_chat else "completions"


def request_body(
    endpoint: Endpoint, sent: dict[str, Any], job: Job, rng_seed: int
) -> dict[str, Any]:
    body = {"model": endpoint.model, **sent, "n": len(job.samples)}
    body["seed"] = request_seed(rng_seed, job.prompt.prompt_id, job.samples[0])
    if api_of(endpoint, job.prompt) == "chat":
        body["messages"] = job.prompt.messages()
    elif job.prompt.is_chat:
        raise SampleError(f"prompt {job.prompt.prompt_id!r} is a chat; it needs --api chat/auto")
    else:
        body["prompt"] = job.prompt.prompt
    return body


def _detail(response: httpx.Response) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:300] or response.reason_phrase


async def post(
    client: httpx.AsyncClient, endpoint: Endpoint, path: str, body: dict[str, Any]
) -> dict[str, Any]:
    """POST with retries (429, 5xx, connection errors, backing off); other refusals raise."""
    problem = ""
    for attempt in range(endpoint.retries + 1):
        if attempt:
            await asyncio.sleep(min(30.0, 0.5 * 2 ** (attempt - 1)))
        try:
            response = await client.post(endpoint.base + path, json=body)
        except httpx.TransportError as exc:
            problem = f"{type(exc).__name__}: {exc}"
            continue
        if response.status_code == 429 or response.status_code >= 500:
            problem = f"HTTP {response.status_code}: {_detail(response)}"
            continue
        if response.status_code >= 400:
            raise SampleError(
                f"{endpoint.base}{path} refused the request (HTTP {response.status_code}): "
                f"{_detail(response)}"
            )
        try:
            result: dict[str, Any] = response.json()
        except ValueError as exc:
            raise SampleError(f"{endpoint.base}{path} answered with no JSON body") from exc
        return result
    raise SampleError(f"{endpoint.base}{path}: {problem} ({endpoint.retries + 1} attempts)")


async def check_served(client: httpx.AsyncClient, endpoint: Endpoint) -> None:
    """Fail fast: the server answers, and serves the model when it lists its models."""
    try:
        response = await client.get(endpoint.base + "/v1/models", timeout=30.0)
    except httpx.TransportError as exc:
        raise SampleError(f"cannot reach {endpoint.base}: {type(exc).__name__}: {exc}") from exc
    try:
        listing = response.json() if response.status_code == 200 else {}
    except ValueError:
        listing = {}
    if not isinstance(listing, dict):
        return  # not every server lists its models; the first request will tell
    served = [m.get("id") for m in listing.get("data") or [] if isinstance(m, dict)]
    if served and endpoint.model not in served:
        listed = ", ".join(str(s) for s in served[:5])
        raise SampleError(f"{endpoint.base} does not serve {endpoint.model!r} (it serves {listed})")


async def honours_n(
    client: httpx.AsyncClient, endpoint: Endpoint, sent: dict[str, Any], first: Prompt
) -> bool:
    """Whether the server returns n choices for n: one request for two one-token choices."""
    if endpoint.per_request != "auto":
        return endpoint.per_request == "n"
    probe = Job(first, [0, 1])
    body = request_body(endpoint, {**sent, "max_tokens": 1}, probe, 0)
    response = await post(client, endpoint, PATHS[api_of(endpoint, first)], body)
    return len(response.get("choices", [])) >= 2


def decoding_record(
    endpoint: Endpoint, api: str, decoding: Decoding, sent: dict[str, Any], per_sample: bool
) -> dict[str, Any]:
    """The rows' `decoding`: what was asked and sent, and how the samples were requested."""
    return {
        "engine": "openai-api",
        "endpoint": endpoint.base + PATHS[api],
        "served_model": endpoint.model,
        "sent": sent,
        "samples_per_request": "1" if per_sample else "n",
        "requests": "one request per sample (the server ignores n)"
        if per_sample
        else "n samples per request",
        "seeds": "per request, from rng_seed, prompt_id and the request's first sample number",
        "requested": decoding.requested(),
        "effective": None,
    }


@dataclass
class Run:
    endpoint: Endpoint
    decoding: Decoding
    model_name: str
    seed_label: str | None
    sent: dict[str, Any]
    records: dict[str, dict[str, Any]]


def rows_of(job: Job, response: dict[str, Any], run: Run) -> list[dict[str, Any]]:
    """The rows a response fills, one per choice, in the job's sample order."""
    choices = sorted(response.get("choices") or [], key=lambda c: c.get("index", 0))
    if len(choices) != len(job.samples):
        raise SampleError(
            f"the server returned {len(choices)} choice(s) for n={len(job.samples)}; "
            "pass --samples-per-request 1"
        )
    usage = response.get("usage") or {}
    api = api_of(run.endpoint, job.prompt)
    rows = []
    for sample, choice in zip(job.samples, choices, strict=True):
        text = (
            choice.get("text")
            if api == "completions"
            else (choice.get("message") or {}).get("content")
        )
        tokens = usage.get("completion_tokens") if len(choices) == 1 else None
        rows.append(
            make_row(
                job.prompt,
                sample,
                run.model_name,
                run.seed_label,
                text or "",
                finish_reason=FINISH.get(choice.get("finish_reason") or ""),
                response_tokens=choice.get("completion_tokens", tokens),
                prompt_tokens=usage.get("prompt_tokens"),
                max_response_tokens=run.decoding.max_new_tokens,
                decoding=run.records[api],
            )
        )
    return rows


def jobs(todo: Sequence[tuple[Prompt, list[int]]], per_sample: bool) -> Iterator[Job]:
    for prompt, samples in todo:
        if per_sample:
            yield from (Job(prompt, [s]) for s in samples)
        else:
            yield Job(prompt, samples)


async def _worker(
    client: httpx.AsyncClient, run: Run, queue: Iterator[Job], output: Output, bar: tqdm[Any]
) -> None:
    for job in queue:  # one event loop: workers take turns, no lock needed
        path = PATHS[api_of(run.endpoint, job.prompt)]
        response = await post(client, run.endpoint, path, request_body(
            run.endpoint, run.sent, job, run.decoding.rng_seed))  # fmt: skip
        for row in rows_of(job, response, run):
            output.write(row)
        bar.update(len(job.samples))


async def _sample(
    run: Run, todo: Sequence[tuple[Prompt, list[int]]], output: Output, progress: bool
) -> None:
    endpoint = run.endpoint
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    limits = httpx.Limits(max_connections=endpoint.concurrency)
    async with httpx.AsyncClient(
        timeout=endpoint.timeout_s, limits=limits, headers=headers
    ) as client:
        await check_served(client, endpoint)
        per_sample = not await honours_n(client, endpoint, run.sent, todo[0][0])
        for api in PATHS:
            run.records[api] = decoding_record(endpoint, api, run.decoding, run.sent, per_sample)
        queue = jobs(todo, per_sample)
        total = sum(len(samples) for _, samples in todo)
        with tqdm(total=total, unit="sample", disable=not progress) as bar:
            workers = [
                asyncio.ensure_future(_worker(client, run, queue, output, bar))
                for _ in range(endpoint.concurrency)
            ]
            done, pending = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in done:
                task.result()  # the first failure, if any


def sample_endpoint(
    endpoint: Endpoint,
    todo: Sequence[tuple[Prompt, list[int]]],
    decoding: Decoding,
    model_name: str,
    seed_label: str | None,
    output: Output,
    progress: bool = True,
) -> None:
    """Request the listed samples of each prompt and append their rows to `output`."""
    if not todo:
        return
    key = endpoint.api_key or os.environ.get("OPENAI_API_KEY")
    endpoint = replace(endpoint, api_key=key)
    run = Run(endpoint, decoding, model_name, seed_label, settings(endpoint, decoding), {})
    asyncio.run(_sample(run, todo, output, progress))
