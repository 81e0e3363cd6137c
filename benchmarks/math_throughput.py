"""Math scoring throughput: Proctor's /v1/score against the plain math-verify loop trainers run.

Builds 4,096 realistic math responses (a few KB of reasoning with inline LaTeX, then a boxed final
answer; a mix of equal, equivalent-but-different and wrong answers, some symbolic), then in one run:

  (a) a plain loop in this process: `verify(parse("\\boxed{gold}"), parse(response))`, as
      trainers' reward functions do today (TRL's and verl's math-verify rewards);
  (b) `POST /v1/score` with all items in one batch, against `proctor serve` started here on the
      embedded default (local worker pool, one worker per core), once per spec, each on a fresh
      server: `prorl-v1` (math-verify alone) and `prorl-v1-careful` (the careful rules around
      it, the default's math grader).

Prints items/s for each and the ratios, and checks that no prorl-v1 verdict differs from (a)
except where (a) timed out, and that every prorl-v1-careful verdict that differs names the rule
that changed it. `--short` (or PROCTOR_SHORT=1) uses 512 items for CI.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Any

from _served import proctor_server, timed_score
from math_verify import parse, verify

# (gold, equivalent-but-different forms, wrong forms); integers dominate real math sets.
PROBLEMS: list[tuple[str, list[str], list[str]]] = [
    ("\\frac{1}{2}", ["0.5", "\\dfrac{1}{2}", "\\frac{2}{4}"], ["\\frac{1}{3}", "2"]),
    ("\\sqrt{2}", ["2^{1/2}", "\\frac{2}{\\sqrt{2}}"], ["\\sqrt{3}", "1.41"]),
    ("\\frac{\\sqrt{3}}{2}", ["\\frac{1}{2}\\sqrt{3}", "\\sin(\\pi/3)"], ["\\frac{\\sqrt{2}}{2}"]),
    ("x^2-1", ["(x-1)(x+1)", "-1+x^2"], ["x^2+1", "(x-1)^2"]),
    ("2\\pi", ["\\pi \\cdot 2", "2 \\pi"], ["\\pi", "4\\pi"]),
    ("(1, 3)", ["(1,3)"], ["[1, 3]", "(1, 4)"]),
    ("\\{1, 2, 3\\}", ["\\{3, 2, 1\\}"], ["\\{1, 2\\}"]),
    ("e^{2}", ["e^2", "\\exp(2)"], ["e", "2e"]),
    ("\\frac{7}{12}", ["\\frac{14}{24}"], ["\\frac{5}{12}", "0.5"]),
    ("3\\sqrt{5}", ["\\sqrt{45}"], ["5\\sqrt{3}", "\\sqrt{15}"]),
]

PROSE = [
    "Let us first restate the problem carefully and identify what is being asked.",
    "We consider the substitution $t = x + 1$, which simplifies the expression to $t^2 - 2t$.",
    "By the AM-GM inequality, $\\frac{a+b}{2} \\geq \\sqrt{ab}$ with equality when $a = b$.",
    "Checking small cases: for $n = 1$ we get $3$, for $n = 2$ we get $7$, for $n = 3$, $15$.",
    "Wait, that is not right. Let me recompute the sum $\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}$.",
    "The discriminant is $b^2 - 4ac = 16 - 12 = 4$, so the roots are real and distinct.",
    "Hmm, we should double-check the boundary condition at $x = 0$ before moving on.",
    "Using the identity $\\sin^2\\theta + \\cos^2\\theta = 1$ we can eliminate $\\cos\\theta$.",
    "So the area of the triangle is $\\frac{1}{2} \\cdot 6 \\cdot 4 = 12$ square units.",
    "Therefore modulo $7$ the residues cycle with period $3$: $2, 4, 1, 2, 4, 1, \\ldots$",
]


@dataclass(frozen=True)
class Case:
    gold: str
    response: str


def _distinct_problem(rng: random.Random, k: int) -> tuple[str, list[str], list[str]]:
    """A symbolic problem whose forms no other case shares (k makes them unique)."""
    a, b = k + 2, k + 3
    shape = rng.randrange(4)
    if shape == 0:
        return (
            f"\\frac{{{a}}}{{{b}}}",
            [f"\\frac{{{2 * a}}}{{{2 * b}}}"],
            [f"\\frac{{{a + 1}}}{{{b}}}"],
        )
    if shape == 1:
        return f"{a}\\sqrt{{2}}", [f"\\sqrt{{{2 * a * a}}}"], [f"{a}\\sqrt{{3}}"]
    if shape == 2:
        return f"x^2-{a * a}", [f"(x-{a})(x+{a})"], [f"(x-{a})^2"]
    return f"{a}\\pi", [f"\\pi \\cdot {a}"], [f"{a + 1}\\pi"]


def make_cases(n: int, seed: int = 0, distinct: bool = False) -> list[Case]:
    """`distinct`: no two cases share a gold or a final answer, so no memo can help (b)."""
    rng = random.Random(seed)
    cases = []
    for k in range(n):
        reasoning = " ".join(rng.choice(PROSE) for _ in range(rng.randint(12, 40)))
        kind = rng.random()
        if kind < 0.55:  # integer answers, as in AIME/GSM-style sets
            gold_int = 10 * k if distinct else rng.randint(0, 999)
            gold = str(gold_int)
            answer = gold if rng.random() < 0.55 else str(gold_int + rng.choice([-2, -1, 1, 3]))
        else:
            problem = _distinct_problem(rng, k) if distinct else rng.choice(PROBLEMS)
            gold, equivalent, wrong = problem
            roll = rng.random()
            answer = gold if roll < 0.3 else rng.choice(equivalent if roll < 0.65 else wrong)
        response = f"{reasoning}\n\nPutting it together, the final answer is $\\boxed{{{answer}}}$."
        cases.append(Case(gold, response))
    return cases


def baseline(cases: list[Case]) -> tuple[list[bool], float]:
    verdicts = []
    started = time.perf_counter()
    for case in cases:
        verdicts.append(bool(verify(parse("\\boxed{" + case.gold + "}"), parse(case.response))))
    return verdicts, time.perf_counter() - started


SPECS = ("prorl-v1", "prorl-v1-careful")
"""math-verify alone, then the default spec; each scored on its own fresh server."""


def ours(cases: list[Case], spec: str) -> tuple[list[dict[str, Any]], float]:
    items = [
        {"domain": "math", "response": c.response, "reference": {"answer": c.gold}} for c in cases
    ]
    with proctor_server() as url:
        return timed_score(url, json.dumps({"items": items, "spec": spec}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=None)
    parser.add_argument("--short", action="store_true", help="512 items (CI)")
    parser.add_argument("--json", action="store_true", help="also print a JSON summary line")
    parser.add_argument(
        "--distinct",
        action="store_true",
        help="every gold and answer unique (the default repeats answers, as GRPO groups do)",
    )
    parser.add_argument(
        "--spec",
        action="append",
        choices=SPECS,
        help="a spec to score, in the order given (default: both, prorl-v1 first)",
    )
    args = parser.parse_args()
    specs: tuple[str, ...] = tuple(args.spec or SPECS)
    short = args.short or os.environ.get("PROCTOR_SHORT") == "1"
    n = args.items or (512 if short else 4096)
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    cases = make_cases(n, distinct=args.distinct)
    base_verdicts, base_s = baseline(cases)
    base_rate = n / base_s
    print(f"items: {n} ({sum(base_verdicts)} correct per math-verify)")
    print(f"(a) plain math-verify loop, 1 process: {base_rate:8.1f} items/s  ({base_s:.2f} s)")
    summary: dict[str, Any] = {"items": n, "baseline_per_s": base_rate}
    failed = False
    for spec in specs:
        results, ours_s = ours(cases, spec)
        ours_rate = n / ours_s
        statuses = {r["status"] for r in results}
        differ = [
            i
            for i, (b, r) in enumerate(zip(base_verdicts, results, strict=True))
            if bool(r["success"]) != b
        ]
        unexplained = [i for i in differ if not results[i]["details"].get("rules")]
        print(f"(b) POST /v1/score, {spec:17} {ours_rate:8.1f} items/s  ({ours_s:.2f} s)")
        print(f"    ratio (b)/(a): {ours_rate / base_rate:.2f}x")
        print(
            f"    statuses: {sorted(statuses)}; verdicts differing from (a): {len(differ)}"
            f" ({len(differ) - len(unexplained)} by a named rule)"
        )
        for i in differ[:10]:
            details = results[i]["details"]
            print(
                f"    differs: gold={cases[i].gold!r} extracted={details.get('extracted')!r}"
                f" (a)={base_verdicts[i]} rules={details.get('rules')}"
            )
        # prorl-v1 must agree with (a) everywhere; the careful spec only where no rule fired.
        failed |= statuses != {"ok"} or bool(differ if spec == "prorl-v1" else unexplained)
        summary[spec] = {
            "ours_per_s": ours_rate,
            "ratio": ours_rate / base_rate,
            "differing": len(differ),
            "unexplained": len(unexplained),
        }
    if set(specs) == set(SPECS):
        plain, careful = (summary[spec]["ratio"] for spec in SPECS)
        print(f"ratio prorl-v1-careful / prorl-v1: {careful / plain:.2f}")
    if args.json:
        print(json.dumps(summary))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
