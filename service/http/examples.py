"""One complete example item per domain, as docs/api.md gives them: shown in the OpenAPI schema
(`/docs` offers them as ready-made requests), and checked against the document by the tests."""

from __future__ import annotations

from typing import Any

__all__ = ["EXAMPLE_ITEMS"]

EXAMPLE_ITEMS: dict[str, dict[str, Any]] = {
    "math": {
        "domain": "math",
        "response": "Adding the halves... so the answer is \\boxed{\\frac{1}{2}}",
        "reference": {"answer": "0.5"},
    },
    "stem": {
        "domain": "stem",
        "response": "The gas expands, so pressure falls. Answer: B",
        "reference": {
            "answer": "B",
            "choices": ["It rises", "It falls", "It stays the same", "It oscillates"],
        },
    },
    "code": {
        "domain": "code",
        "response": "```python\nn = int(input())\nprint(n * 2)\n```",
        "reference": {
            "language": "python",
            "tests": {
                "stdio": [{"input": "21\n", "output": "42\n"}, {"input": "0\n", "output": "0\n"}]
            },
        },
    },
    "puzzle": {
        "domain": "puzzle",
        "response": "Counting... <answer>7</answer>",
        "reference": {
            "task": "basic_arithmetic",
            "entry": {"question": "Calculate 3 + 4.", "answer": "7", "metadata": {}},
        },
    },
    "ifeval": {
        "domain": "ifeval",
        "response": "hello world, all in lower case",
        "reference": {
            "instruction_id_list": ["change_case:english_lowercase", "punctuation:no_comma"],
            "kwargs": [{}, {}],
        },
    },
}
