"""In-process scoring for the evaluator, through the service's own dispatcher (the
server package, installed from the checkout beside the client: `pip install . "./clients[eval]"`).

The only part of `proctor_client` that imports the server's packages (`service`, `reward_specs`,
`sandboxes`); `proctor_client.evaluation` reaches it lazily, for `proctor-eval` without `--url`.
"""

from __future__ import annotations

from proctor_client.local.scorer import DEFAULT_REGISTRY, LocalScorer, outcome_result

__all__ = ["DEFAULT_REGISTRY", "LocalScorer", "outcome_result"]
