"""The library entry point: a study's report from rows and their results, without the CLI.

    from proctor_client.evaluation import report_from_results
    report = report_from_results(rows, results, k=[1, 4, 16], bootstrap=2000, rng_seed=0)

`rows` are generation rows as GENERATIONS.jsonl holds them (dicts or `Generation`), `results` the
`/v1/score` results for them in the same order (dicts, or the SDK's result models). Options take
the CLI flags' names with underscores: `k`, `weights`, `two_level`, `bootstrap`, `confidence`,
`alpha`, `success_threshold`, `pair`, `rng_seed`, and `spec` (the name of the spec that judged
the results, or a `SpecSummary`; default the evaluator's default spec). The returned dict is what
report.json holds; `proctor-eval` computes its study through `study_from_scored` too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proctor_client.evaluation.analysis import Options, Study, analyse, build_table
from proctor_client.evaluation.checks import spec_warnings
from proctor_client.evaluation.report import build_json
from proctor_client.evaluation.rows import Generation, StudyError, check_consistency
from proctor_client.evaluation.scoring import DEFAULT_SPEC, SpecSummary
from proctor_client.evaluation.store import ScoredRow

__all__ = ["options_from", "report_from_results", "study_from_scored"]

_FLAGS = {
    "k": "ks",
    "weights": "weights",
    "two_level": "two_level",
    "bootstrap": "resamples",
    "confidence": "confidence",
    "alpha": "alpha",
    "success_threshold": "threshold",
    "pair": "pairs",
    "rng_seed": "rng_seed",
}


def options_from(**flags: Any) -> Options:
    """`Options` from the CLI flags' names; an unknown name is a TypeError naming it."""
    unknown = sorted(set(flags) - set(_FLAGS))
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(_FLAGS)}")
    return Options(**{_FLAGS[name]: value for name, value in flags.items()})


def study_from_scored(scored: Sequence[ScoredRow], options: Options, spec_name: str) -> Study:
    """The study of scored rows, with the loud spec-mismatch warnings first."""
    study = analyse(build_table(scored, options.threshold), options)
    study.warnings[:0] = spec_warnings(spec_name, study.training_specs)
    return study


def _spec(spec: SpecSummary | str | None) -> SpecSummary:
    if isinstance(spec, SpecSummary):
        return spec
    return SpecSummary(spec or DEFAULT_SPEC, "unknown", "unknown", {})


def _result(result: Any) -> dict[str, Any]:
    if isinstance(result, Mapping):
        return dict(result)
    dump = getattr(result, "model_dump", None)
    if dump is None:
        raise TypeError(f"a result must be a mapping or a pydantic model, not {type(result)!r}")
    dumped: dict[str, Any] = dump(mode="json")
    return dumped


def report_from_results(
    rows: Sequence[Mapping[str, Any] | Generation],
    results: Sequence[Any],
    spec: SpecSummary | str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """The dict report.json holds, for `rows` and their `results` (same order, same length)."""
    if len(rows) != len(results):
        raise ValueError(f"{len(rows)} rows but {len(results)} results: they pair up in order")
    parsed = [r if isinstance(r, Generation) else Generation.model_validate(r) for r in rows]
    check_consistency(enumerate(parsed, 1))
    if not parsed:
        raise StudyError("no rows to evaluate", ["the study is empty"])
    summary = _spec(spec)
    scored = [ScoredRow(row, _result(r)) for row, r in zip(parsed, results, strict=True)]
    study = study_from_scored(scored, options_from(**options), summary.name)
    return build_json(study, summary, [], None)
