"""The registry-wide invariant through the service, for every registered scorer (code included,
on the embedded default's local sandbox): each example's gold response scores 1 and the empty
response 0, under every shipped spec. An opt-in domain (judge: it needs an endpoint) is scored
only under specs that name it; under the others its items are `invalid` (`domain_not_in_spec`).
Its own invariant, against a scripted judge, is in tests/test_judge.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reward_specs import default_registry
from tests.helpers import score

REGISTRY = default_registry()
SPECS = ["prorl-v1", "prorl-v1-termination", "dapo-overlong"]


def test_every_shipped_domain_is_registered() -> None:
    assert set(REGISTRY.domains()) == {"math", "stem", "code", "puzzle", "ifeval", "judge"}
    assert {scorer.domain for scorer in REGISTRY if scorer.opt_in} == {"judge"}


@pytest.mark.parametrize("spec", SPECS)
def test_gold_scores_one_and_empty_scores_zero_for_every_scorer(
    client: httpx.Client, spec: str
) -> None:
    items: list[dict[str, Any]] = []
    for scorer in REGISTRY:
        if scorer.opt_in:
            continue
        for i, example in enumerate(scorer.examples()):
            ref = dict(example.reference)
            items.append(
                {
                    "id": f"{scorer.domain}-{i}-gold",
                    "domain": scorer.domain,
                    "response": example.response,
                    "reference": ref,
                }
            )
            items.append(
                {
                    "id": f"{scorer.domain}-{i}-empty",
                    "domain": scorer.domain,
                    "response": "",
                    "reference": ref,
                }
            )
    results = score(client, items, spec=spec)
    for item, result in zip(items, results, strict=True):
        assert result["status"] == "ok", (item["id"], result["error"])
        expected = 1.0 if item["id"].endswith("gold") else 0.0
        assert result["score"] == expected, (item["id"], result["details"])
        assert result["reward"] == expected, (item["id"], result["penalties"])
        assert result["success"] is (expected == 1.0), item["id"]


def test_an_opt_in_domain_outside_its_spec_is_invalid(client: httpx.Client) -> None:
    (judge,) = [scorer for scorer in REGISTRY if scorer.opt_in]
    example = judge.examples()[0]
    item = {"domain": "judge", "response": example.response, "reference": example.reference}
    for spec in SPECS:
        (result,) = score(client, [item], spec=spec)
        assert result["status"] == "invalid", result
        assert result["error"]["code"] == "domain_not_in_spec", result
