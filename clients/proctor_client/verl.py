"""Proctor as a verl 0.9 custom reward function, for its reward loop.

    reward.custom_reward_function.path=pkg://proctor_client.verl
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://proctor:8000

verl calls the async `compute_score(data_source, solution_str, ground_truth, extra_info)` once per
sample, with the config's `reward_kwargs` as further keyword arguments, and awaits many at once;
the calls of one event loop within `linger_s` go to Proctor as one request. The domain comes from
`data_source` (`domains`, then `DATA_SOURCE_DOMAINS`, then `default_domain`); the reference from
`ground_truth` (an object, its JSON text, or a plain gold answer: `{"answer": ...}`).

verl's datasets keep their own formats, and so does this: a math data source whose verl reward
reads an answer format of its own (`DATA_SOURCE_FORMATS`: GSM8K's `#### 72`, DAPO's `Answer:
72`) gets that `format` in its reference, and a code ground truth in verl's shape, `{"inputs",
"outputs", "fn_name"?}` (codecontests, apps, codeforces, taco), becomes a Python `stdio` or
`fn_name` reference (`code_reference`).

verl has no way to leave a sample out, so a sample Proctor did not judge (`infra_error`) or could
not judge (`invalid`) is never turned into a number: it is scored again up to `infra_retries`
times, then `compute_score` raises `UnjudgedSample` and the step fails, to be re-run from a
checkpoint. verl's reward loop does not pass the response's length or finish reason, so
termination penalties do not apply here.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from typing import Any

from proctor_client._judged import UnjudgedSample, aclose, coalescer, judged, numbers
from proctor_client._models import ScoreItem
from proctor_client._rows import as_reference

__all__ = [
    "DATA_SOURCE_DOMAINS",
    "DATA_SOURCE_FORMATS",
    "UnjudgedSample",
    "aclose",
    "code_reference",
    "compute_score",
    "domain_of",
    "reference_of",
]

DATA_SOURCE_DOMAINS: Mapping[str, str] = {
    "openai/gsm8k": "math",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "aime24": "math",
    "aime25": "math",
    "numina_aops_forum": "math",
    "numina_synthetic_math": "math",
    "numina_amc_aime": "math",
    "numina_olympiads": "math",
    "codecontests": "code",
    "apps": "code",
    "codeforces": "code",
    "taco": "code",
    "google/IFEval": "ifeval",
}
"""verl's usual `data_source` names; a data source named after a Proctor domain maps to it."""

DATA_SOURCE_FORMATS: Mapping[str, str] = {
    "openai/gsm8k": "gsm8k",
    "math_dapo": "math_dapo",
    "aime24": "math_dapo",
    "aime25": "math_dapo",
}
"""The math reference's `format` for the data sources verl scores by an answer format of their
own (`verl/utils/reward_score/gsm8k.py`, and `math_dapo.py` for `math_dapo` and `aime*`), unless
the ground truth states one. A response without that format is read as the spec says."""

PROCTOR_DOMAINS = frozenset({"math", "stem", "code", "puzzle", "ifeval"})


def domain_of(
    data_source: str, domains: Mapping[str, str] | None, default_domain: str | None
) -> str:
    if domains and data_source in domains:
        return domains[data_source]
    if data_source in DATA_SOURCE_DOMAINS:
        return DATA_SOURCE_DOMAINS[data_source]
    if data_source in PROCTOR_DOMAINS:
        return data_source
    if default_domain is not None:
        return default_domain
    raise ValueError(
        f"no Proctor domain for data_source {data_source!r}: pass "
        "reward_kwargs.domains={data_source: domain} or reward_kwargs.default_domain"
    )


def reference_of(
    data_source: str, domain: str, ground_truth: Any, max_code_cases: int | None
) -> dict[str, Any] | None:
    """The Proctor reference of a verl ground truth (an object, its JSON text, or a gold answer),
    in its data source's own format: a math answer format, code tests converted."""
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        # A gold answer may start with a brace too (a set): then it stays a string.
        with contextlib.suppress(json.JSONDecodeError):
            ground_truth = json.loads(ground_truth)
    reference = as_reference(ground_truth)
    if reference is None:
        return None
    if domain == "math" and data_source in DATA_SOURCE_FORMATS:
        reference.setdefault("format", DATA_SOURCE_FORMATS[data_source])
    if domain == "code" and "inputs" in reference and "outputs" in reference:
        reference = code_reference(reference, max_code_cases)
    return reference


def code_reference(ground_truth: Mapping[str, Any], max_cases: int | None = None) -> dict[str, Any]:
    """verl's code ground truth, `{"inputs": [...], "outputs": [...], "fn_name"?: ...}`, as a
    Python code reference; `max_cases` keeps the first cases only (verl's own score counts the
    first 10 of codecontests, apps, codeforces and taco).

    Without `fn_name` each case is stdin and the expected stdout (a list of lines is joined).
    With it, each input is the call's arguments, one JSON value a line (the stdin verl's
    sandbox harness reads; a list is taken as the arguments themselves, as APPS stores them),
    each output the JSON of the return value, which APPS and TACO wrap in a one-element list,
    and the solution runs after the imports verl's harness puts before it.
    """
    inputs, outputs = list(ground_truth["inputs"]), list(ground_truth["outputs"])
    if len(inputs) != len(outputs):
        raise ValueError(f"{len(inputs)} inputs but {len(outputs)} outputs in a code ground truth")
    cases = list(zip(inputs, outputs, strict=True))[:max_cases]
    fn_name = ground_truth.get("fn_name")
    if fn_name:
        tests: dict[str, Any] = {
            "fn_name": fn_name,
            "cases": [{"args": _args(i), "expected": _returned(o)} for i, o in cases],
            "prelude": _FN_PRELUDE,
        }
    else:
        tests = {"stdio": [{"input": _text(i), "output": _text(o)} for i, o in cases]}
    return {"language": "python", "tests": tests}


_FN_MODULES = [
    *("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random"),
    *("statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins"),
    "typing",
]
_FN_PRELUDE = "".join(f"from {m} import *\n" for m in _FN_MODULES) + "".join(
    f"import {m}\n" for m in _FN_MODULES if m not in ("builtins", "typing")
)
"""What verl's sandbox harness imports before a `fn_name` solution
(`verl/utils/reward_score/sandbox_fusion/utils.py`): solutions trained on it may lean on it."""


def _text(value: Any) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def _args(value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    text = str(value)
    return [json.loads(line) for line in text.strip("\n").split("\n")] if text.strip() else []


def _returned(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return value
    return value[0] if isinstance(value, list) and len(value) == 1 else value


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    spec: str | None = None,
    domains: Mapping[str, str] | None = None,
    default_domain: str | None = None,
    infra_retries: int = 2,
    max_code_cases: int | None = None,
    linger_s: float = 0.02,
    deadline_s: float | None = 600.0,
    **kwargs: Any,
) -> dict[str, float]:
    """`{"score": reward, ...}` for one sample, with Proctor's numbers as extra info
    (`proctor_score`, `proctor_success`, `proctor_parsed`, `proctor_penalty`).

    `url` and `api_key` default to `PROCTOR_URL` and `PROCTOR_API_KEY`. `max_code_cases` keeps
    the first cases of a code ground truth in verl's shape (a problem with more tests than the
    spec's `max_tests` is otherwise `invalid`, and raises). Other keyword arguments verl passes (a
    reward router's address, ...) are accepted and ignored.
    """
    url = url or os.environ.get("PROCTOR_URL")
    if not url:
        raise ValueError("no Proctor URL: set reward_kwargs.url or PROCTOR_URL")
    domain = domain_of(data_source, domains, default_domain)
    item = ScoreItem(
        domain=domain,
        response=solution_str,
        reference=reference_of(data_source, domain, ground_truth, max_code_cases),
    )
    batcher = coalescer(
        url, api_key or os.environ.get("PROCTOR_API_KEY"), spec, linger_s, deadline_s
    )
    what = f"a {item.domain} sample of {data_source!r}"
    result, reward = await judged(batcher, item, infra_retries, what, "verl")
    return {"score": reward, **numbers(result)}
