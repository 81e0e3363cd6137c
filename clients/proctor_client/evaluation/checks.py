"""Warnings about what a study's numbers can and cannot claim: seeds, decoding, spec.

Each returns sentences for report.json's `warnings` (and the top of report.md). The decoding a row
records is `{"requested": {...}, "effective": {...} | null}` (what was asked, and what the library
actually used with the model's generation config merged in; null where a server does not report
it); a flat dict, as older generations files have, counts as requested only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["COMPARED", "decoding_warnings", "normalise_decoding", "seed_warning", "spec_warnings"]

COMPARED = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "max_tokens",
    "generation_config",
)
"""Settings compared across models (`max_new_tokens` is read as `max_tokens`)."""

_ALIASES = {"max_new_tokens": "max_tokens"}


def normalise_decoding(
    decoding: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(requested, effective) of a row's `decoding`, keys aliased."""
    if decoding is None:
        return {}, None
    if "requested" in decoding or "effective" in decoding:
        requested = decoding.get("requested") or {}
        effective = decoding.get("effective")
    else:
        requested, effective = dict(decoding), None

    def alias(d: Mapping[str, Any]) -> dict[str, Any]:
        return {_ALIASES.get(k, k): v for k, v in d.items()}

    return alias(requested), None if effective is None else alias(effective)


def seed_warning(model: str, seeds: Sequence[str]) -> str | None:
    """The warning for a model with fewer than three training seeds, or none labelled."""
    if len(seeds) >= 3:
        return None
    if not seeds:
        said = "its rows carry no seed label, so they are read as one training seed"
    else:
        said = f"{len(seeds)} training seed{'s' if len(seeds) > 1 else ''}"
    return f"{model}: {said}; the protocol asks for at least 3 seeds per recipe. " + (
        "The intervals are prompt-level only (these runs): they say nothing about the recipe "
        "(a base checkpoint has no training seed, and for it that is right)."
        if len(seeds) < 2
        else "The recipe-level interval rests on 1 degree of freedom for the seed spread."
    )


def _shown(value: Any) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else repr(value)


def decoding_warnings(
    decodings: Mapping[str, Sequence[Mapping[str, Any]]], unrecorded: Mapping[str, int]
) -> list[str]:
    """Models sampled under different settings, settings unknown, or mixed within a model."""
    warnings: list[str] = []
    seen: dict[str, dict[str, set[str]]] = {}
    for model, records in decodings.items():
        values = seen.setdefault(model, {})
        unknown = 0
        for record in records:
            requested, effective = normalise_decoding(record)
            if effective is None:
                unknown += 1
            used = effective if effective is not None else requested
            for key in COMPARED:
                values.setdefault(key, set()).add(_shown(used.get(key)))
        if unknown:
            warnings.append(
                f"{model}: the effective decoding is unknown for {unknown} of its "
                f"{len(records)} distinct decoding record(s) (the sampler or server did not "
                "report it); compared on the requested settings there"
            )
        for key, shown in values.items():
            if len(shown) > 1:
                listed = ", ".join(sorted(shown))
                warnings.append(f"{model}: its rows were sampled with different {key}: {listed}")
    for model, count in unrecorded.items():
        if count:
            warnings.append(f"{model}: {count} row(s) record no decoding; it cannot be compared")
    models = [m for m in seen if seen[m]]
    for key in COMPARED:
        per_model = {m: seen[m].get(key, set()) for m in models}
        distinct = {v for values in per_model.values() for v in values}
        if len(models) > 1 and len(distinct) > 1:
            listed = "; ".join(f"{m} {', '.join(sorted(v))}" for m, v in per_model.items())
            warnings.append(f"models compared under different decoding: {key}: {listed}")
    return warnings


def spec_warnings(study_spec: str, training_specs: Mapping[str, set[str]]) -> list[str]:
    """A loud warning per model whose rows name training specs other than the study's."""
    warnings = []
    for model, specs in training_specs.items():
        other = sorted(s for s in specs if s != study_spec)
        if other:
            warnings.append(
                f"SPEC MISMATCH: {model} was trained under {', '.join(other)} (its rows' "
                f"`training_spec`), but this study judges it under {study_spec}: its pass@k is "
                "not measured with the reward it was trained on"
            )
    return warnings
