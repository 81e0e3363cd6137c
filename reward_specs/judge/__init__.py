"""The judge domain: a free-form answer judged by a model behind an OpenAI-compatible endpoint
(`domain`), the calls, cache and limits (`client`) and the text defences (`text`)."""

from reward_specs.judge.client import (
    DEFAULT_CACHE_BYTES,
    Endpoint,
    JudgeRejected,
    Judges,
    Reply,
    models_digest,
)
from reward_specs.judge.domain import SCORER, JudgeConfig, JudgeReference, prompts, render

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "SCORER",
    "Endpoint",
    "JudgeConfig",
    "JudgeReference",
    "JudgeRejected",
    "Judges",
    "Reply",
    "models_digest",
    "prompts",
    "render",
]
