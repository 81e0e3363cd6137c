"""IFEval's instruction registry and its strict/loose evaluation (see README.md here)."""

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
    "Check",
    "Instruction",
    "InvalidKwargs",
    "Verdict",
    "build_check",
    "evaluate",
    "loose_variants",
]
