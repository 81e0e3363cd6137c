"""SandboxFusion's `submit`: a dataset's test cases for one completion, scored as code items on
Proctor's scoring path, and answered in SandboxFusion's `EvalResult` (docs/api.md, "SandboxFusion
compatibility")."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reward_specs.code.extract import Language, extract_code
from service.http.compat.sandbox_fusion import Refused, RunCodeResponse, language_of

__all__ = [
    "REGISTERED_DATASETS",
    "EvalResult",
    "EvalTestCase",
    "Submission",
    "SubmitRefusal",
    "SubmitRequest",
    "TestConfig",
    "eval_result",
    "plan_submit",
]


REGISTERED_DATASETS = (
    "humaneval, mbpp, mbxp, mhpp, cruxeval, livecodebench, naturalcodebench, codecontests, "
    "aider, palmath, verilog, minif2f and SandboxFusion's other registered datasets"
)
"""What `submit` does not judge: the datasets SandboxFusion holds in its own database."""


class TestConfig(BaseModel):
    """SandboxFusion's `TestConfig`: only `language` and `provided_data` are read (the spec's
    limits and comparison apply, docs/api.md)."""

    __test__ = False  # not a pytest class, whatever its name
    model_config = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)

    dataset_type: str | None = None
    language: str | None = None
    locale: str | None = None
    is_fewshot: bool | None = None
    compile_timeout: float | None = None
    run_timeout: float | None = None
    custom_extract_logic: str | None = None
    provided_data: list[dict[str, Any]] | dict[str, Any] | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class SubmitRequest(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    dataset: str
    id: int | str
    completion: str
    config: TestConfig


class EvalTestCase(BaseModel):
    passed: bool
    exec_info: RunCodeResponse
    test_info: dict[str, Any] | None = None


class EvalResult(BaseModel):
    id: int | str
    accepted: bool
    extracted_code: str
    full_code: str | None = None
    test_code: str | None = None
    tests: list[EvalTestCase]
    extracted_type: Literal["fenced", "incomplete_fenced", "heuristic", "empty"] | None = None
    extra: dict[str, Any] | None = None


class SubmitRefusal(BaseModel):
    """`submit`'s `SandboxError`: the request's own fault (HTTP 200, as SandboxFusion's)."""

    status: Literal["SandboxError"] = "SandboxError"
    message: str


@dataclass(frozen=True, slots=True)
class Submission:
    """A `submit` request as one code item of the score path."""

    language: Language
    tests: list[dict[str, str]]
    """`[{input, output}]`: Proctor's stdio tests, in the request's order."""

    @property
    def reference(self) -> dict[str, Any]:
        return {"language": self.language, "tests": {"stdio": self.tests}}


def _stream(case: dict[str, Any], side: str, stream: str, at: int) -> str:
    value = case.get(side)
    text = value.get(stream, "") if isinstance(value, dict) else None
    if not isinstance(value, dict) or set(value) - {stream} or not isinstance(text, str):
        raise Refused(
            f"config.provided_data.test[{at}].{side}: only {{{stream!r}: text}} is judged here "
            "(tests on other files are not offered)"
        )
    return text


def plan_submit(body: SubmitRequest) -> Submission:
    """The code item of a `submit`, or `Refused`: without `provided_data` it would be one of
    SandboxFusion's registered datasets, which are not offered here."""
    data = body.config.provided_data
    if data is None:
        raise Refused(
            f"dataset {body.dataset!r}: SandboxFusion's registered datasets "
            f"({REGISTERED_DATASETS}) are not offered here; send the problem's tests in "
            "config.provided_data.test"
        )
    if isinstance(data, list):  # a list of problems: the one with this id
        found = [d for d in data if d.get("id") == body.id]
        if len(found) != 1:
            raise Refused(f"config.provided_data: no single problem with id {body.id!r}")
        data = found[0]
    cases = data.get("test")
    if isinstance(cases, str):  # a dataset row may hold its tests as JSON text
        try:
            cases = json.loads(cases)
        except ValueError:
            raise Refused("config.provided_data.test: not JSON") from None
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        raise Refused("config.provided_data.test: a non-empty list of {input, output} tests")
    language = language_of(body.config.language or "python")
    tests = [
        {"input": _stream(c, "input", "stdin", i), "output": _stream(c, "output", "stdout", i)}
        for i, c in enumerate(cases)
    ]
    return Submission(language, tests)


_EXTRACTED: dict[str, Literal["fenced", "heuristic", "empty"]] = {
    "fenced": "fenced",
    "bare_fence": "fenced",
    "whole_response": "heuristic",
}


def eval_result(
    body: SubmitRequest, submission: Submission, result: Any, spec: dict[str, str]
) -> EvalResult:
    """SandboxFusion's `EvalResult` of a judged (`ok`) score result: a test per case, passed as
    the spec judged it; each test's Proctor status in `test_info.proctor`."""
    code, source = extract_code(body.completion, submission.language)
    details: dict[str, Any] = result.details or {}
    judged = details.get("tests")
    per_test = judged if isinstance(judged, list) and len(judged) == len(submission.tests) else None
    reason = details.get("reason", "not_run")
    tests = []
    for at, case in enumerate(submission.tests):
        proctor = per_test[at] if per_test is not None else {"status": reason}
        passed = proctor.get("status") == "passed"
        info = RunCodeResponse(status="Success" if passed else "Failed")
        test_info = {"input": {"stdin": case["input"]}, "output": {"stdout": case["output"]}}
        tests.append(
            EvalTestCase(passed=passed, exec_info=info, test_info={**test_info, "proctor": proctor})
        )
    return EvalResult(
        id=body.id,
        accepted=bool(result.success),
        extracted_code=code or "",
        full_code=code,
        test_code=None,
        tests=tests,
        extracted_type="empty" if code is None else _EXTRACTED.get(source, "heuristic"),
        extra={
            "spec": spec,
            "proctor": {"score": result.score, "reward": result.reward, "parsed": result.parsed},
        },
    )
