"""The code domain: the scorer (`domain`), the reference and config schema (`reference`), the
sandbox requests (`requests`), judging the harness's values (`harness`) and stdout (`stdio`)."""

from reward_specs.code.domain import SCORER, CodeConfig, CodeReference, clear_cache, score_code

__all__ = ["SCORER", "CodeConfig", "CodeReference", "clear_cache", "score_code"]
