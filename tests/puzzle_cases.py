"""Shared generators for the puzzle validator tests: malformed JSON from a well-formed text."""

from __future__ import annotations

import random

__all__ = ["malformed_variants"]


def _mutations(text: str, rng: random.Random) -> list[tuple[str, str]]:
    out = []
    if len(text) > 2:
        cut = rng.randrange(1, len(text) - 1)
        out.append(("truncated", text[:cut]))
    structural = [i for i, ch in enumerate(text) if ch in '[]{},:"']
    if structural:
        i = rng.choice(structural)
        out.append(("char_deleted", text[:i] + text[i + 1 :]))
    out.append(("extra_closer", text + rng.choice(["]", "}"])))
    out.append(("single_quotes", text.replace('"', "'")))
    closers = [i for i, ch in enumerate(text) if ch in "]}"]
    if closers:
        i = rng.choice(closers)
        out.append(("trailing_comma", text[:i] + "," + text[i:]))
    out.append(("python_literals", text.replace("null", "None").replace("true", "True")))
    return out


def malformed_variants(text: str, rng: random.Random, k: int) -> list[tuple[str, str]]:
    """Up to `k` corruptions of a JSON text that are no longer JSON (checked)."""
    import json

    found = []
    for label, bad in _mutations(text, rng):
        try:
            json.loads(bad)
        except ValueError:
            found.append((label, bad))
    rng.shuffle(found)
    return found[:k]
