"""math-verify's entry points as the math and STEM scorers call them, imported at the first call
(`reward_specs.lazy`): building a registry or hashing a spec never loads math-verify or sympy.

The scorers bind `parse` and `verify` to names of their own module (the seam tests replace) and
catch `math_verify_errors.TimeoutException`, math-verify's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from reward_specs.caches import Cache
from reward_specs.lazy import lazy_import

if TYPE_CHECKING:
    import math_verify
    import math_verify.errors as math_verify_errors
    import math_verify.utils as math_verify_utils
else:  # imported at first use (reward_specs.lazy)
    math_verify = lazy_import("math_verify")
    math_verify_errors = lazy_import("math_verify.errors")
    math_verify_utils = lazy_import("math_verify.utils")

__all__ = [
    "boxed_latex",
    "math_verify_errors",
    "math_verify_utils",
    "parse",
    "prose_extraction",
    "verify",
]


def parse(text: str, extraction_config: Sequence[Any], **options: Any) -> list[Any]:
    """`math_verify.parse`."""
    parsed: list[Any] = math_verify.parse(text, extraction_config, **options)
    return parsed


def verify(gold: Any, target: Any, **options: Any) -> bool:
    """`math_verify.verify`."""
    return bool(math_verify.verify(gold, target, **options))


@Cache("math.boxed_latex", 1)
def boxed_latex() -> list[Any]:
    """The extraction of an answer given as `\\boxed{...}`: LaTeX, the box first."""
    return [math_verify.LatexExtractionConfig(boxed_match_priority=0)]


@Cache("math.prose_extraction", 1)
def prose_extraction() -> list[Any]:
    """math-verify's default extraction from prose: LaTeX, then plain expressions."""
    return [math_verify.LatexExtractionConfig(), math_verify.ExprExtractionConfig()]
