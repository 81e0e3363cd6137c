"""The math domain: the scorer around math-verify (`domain`) and the careful grader's rules
(`rules`)."""

from reward_specs.math.domain import (
    SCORER,
    MathConfig,
    MathReference,
    equivalent,
    math_answer_key,
)

__all__ = ["SCORER", "MathConfig", "MathReference", "equivalent", "math_answer_key"]
