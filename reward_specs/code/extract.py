"""Finding the program in a response.

The program is the last closed fenced block tagged with the item's language (```python, ```py,
```python3; ```cpp, ```c++, ```cc, ```cxx; ```java; ```javascript, ```js, ```node; ```go,
```golang; ```rust, ```rs; tags are case-insensitive); failing that the last
closed bare ``` block; failing that, if the response has no closed fenced block at all, the whole
response. A response with nothing but whitespace, or whose fenced blocks are all tagged with
other languages, has no code: `None` (the scorer reports parsed=false). Whether a whole response
is a program of the language (it may be prose) is the scorer's question, `reward_specs.code.domain`.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["LANGUAGE_TAGS", "Language", "extract_code"]

Language = Literal["python", "cpp", "java", "javascript", "go", "rust"]

LANGUAGE_TAGS: dict[Language, frozenset[str]] = {
    "python": frozenset({"python", "py", "python3"}),
    "cpp": frozenset({"cpp", "c++", "cc", "cxx"}),
    "java": frozenset({"java"}),
    "javascript": frozenset({"javascript", "js", "node", "nodejs"}),
    "go": frozenset({"go", "golang"}),
    "rust": frozenset({"rust", "rs"}),
}

# An opening fence at the start of a line, an optional info string, then the body up to the
# next fence at the start of a line.
_FENCE = re.compile(
    r"^[ \t]*```[ \t]*(?P<tag>[^\s`]*)[^\n]*\n(?P<body>.*?)^[ \t]*```", re.MULTILINE | re.DOTALL
)


def extract_code(response: str, language: Language) -> tuple[str | None, str]:
    """The program and where it came from: `fenced`, `bare_fence` or `whole_response`."""
    blocks = [(m.group("tag").lower(), m.group("body")) for m in _FENCE.finditer(response)]
    tags = LANGUAGE_TAGS[language]
    tagged = [body for tag, body in blocks if tag in tags]
    if tagged:
        return _nonempty(tagged[-1]), "fenced"
    bare = [body for tag, body in blocks if not tag]
    if bare:
        return _nonempty(bare[-1]), "bare_fence"
    if blocks:
        return None, "other_language"
    return _nonempty(response), "whole_response"


def _nonempty(code: str) -> str | None:
    return code if code.strip() else None
