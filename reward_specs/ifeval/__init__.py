"""The IFEval domain: the scorer (`domain`), the instruction registry and its strict/loose
evaluation (see README.md here)."""

from reward_specs.ifeval.domain import SCORER, IFEvalConfig, IFEvalReference, score_ifeval
from reward_specs.ifeval.evaluation import Verdict, evaluate, loose_variants
from reward_specs.ifeval.instructions import (
    INSTRUCTIONS,
    LANGUAGE_CODES,
    Check,
    Instruction,
    InvalidKwargs,
    build_check,
)

__all__ = [
    "INSTRUCTIONS",
    "LANGUAGE_CODES",
    "SCORER",
    "Check",
    "IFEvalConfig",
    "IFEvalReference",
    "Instruction",
    "InvalidKwargs",
    "Verdict",
    "build_check",
    "evaluate",
    "loose_variants",
    "score_ifeval",
]
