"""`proctor-eval`: pass@k coverage studies judged with the reward semantics the trainer used.

Needs the `[eval]` extra (numpy, matplotlib); the plain SDK never imports this package. Scoring
runs in-process through `reward_specs` when the server package is installed, or against a running
service (`--url`). See clients/README.md, section "The pass@k evaluator".
"""

from proctor_client.evaluation.study import report_from_results

__all__ = ["report_from_results"]
