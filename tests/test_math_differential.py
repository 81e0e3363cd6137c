r"""prorl-v1's math verdicts against math-verify's, on a generated corpus of 10,000+ pairs.

prorl-v1 promises math-verify's verdict alone; the fast path (`reward_specs/math/fast.py`) may
only skip math-verify's work where its verdict is certain. The corpus is built deterministically
around what the fast path reads and where it must decline: integers, decimals and fractions
written several ways, equal, unequal and nearly equal (a digit off, a rounding apart, leading
zeros, a trailing dot, separators, percentages, a zero denominator); constants (radicals,
multiples of pi and e) equal, unequal and a hair apart; polynomials expanded, factored, a sign or
a variable off, a tiny coefficient apart, rational functions; and relations, sets and tuples,
which the fast path never answers. Each pair is judged by `equivalent` under prorl-v1's config and
by math-verify's own `verify(parse(...), parse(...))` on the same boxed texts, in two worker
processes; every verdict must be identical. Timeouts are left out of the comparison (they depend
on the machine's load), and the test fails if more than a few pairs time out.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

from math_verify import LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException

from reward_specs import default_registry, load_specs
from reward_specs.math import MathConfig, equivalent

PAIRS = 10_000
_SPEC_CONFIG = load_specs(default_registry())["prorl-v1"].domains["math"]
if not isinstance(_SPEC_CONFIG, MathConfig):
    raise TypeError("prorl-v1's math config is not a MathConfig")
CONFIG: MathConfig = _SPEC_CONFIG
LATEX = [LatexExtractionConfig(boxed_match_priority=0)]

Group = tuple[str, list[str]]
"""A gold and the answers judged against it."""


def _integer_group(rng: random.Random) -> Group:
    n = rng.choice([rng.randint(-50, 50), rng.randint(0, 10**6), rng.randint(10**13, 10**17)])
    s = str(n)
    answers = [
        s,
        str(n + rng.choice([-1, 1, 10])),
        str(-n),
        "0" + s if n >= 0 else s,
        "+" + s if n >= 0 else s,
        s + ".",
        s + ".0",
        s + ".000001",
        f"\\frac{{{2 * n}}}{{2}}",
        f"\\frac{{{n}}}{{1}}",
        f"\\frac{{{3 * n + 1}}}{{3}}",
        f"{s}\\%",
        f"{n:,}",
        f"{s}e0",
    ]
    return s, answers


def _decimal_group(rng: random.Random) -> Group:
    whole, places = rng.randint(0, 999), rng.randint(1, 7)
    frac = rng.randint(0, 10**places - 1)
    s = f"{whole}.{frac:0{places}d}"
    last = 10**-places
    answers = [
        s,
        s + "0",
        s.lstrip("0") if whole == 0 else s,
        f"{float(s) + last:.{places}f}",
        f"{float(s) + last / 1000:.{places + 3}f}",
        f"{float(s) + 4e-7:.8f}",
        f"\\frac{{{whole * 10**places + frac}}}{{{10**places}}}",
        f"{whole},{frac:0{places}d}",
        s + "\\%",
    ]
    return s, answers


def _fraction_group(rng: random.Random) -> Group:
    p, q = rng.randint(-30, 60), rng.randint(1, 40)
    k = rng.randint(2, 9)
    sign, ap = ("-", abs(p)) if p < 0 else ("", p)
    gold = rng.choice([f"{sign}\\frac{{{ap}}}{{{q}}}", f"\\frac{{{p}}}{{{q}}}"])
    answers = [
        gold,
        f"{sign}\\frac{{{k * ap}}}{{{k * q}}}",
        f"{sign}\\dfrac{{{ap}}}{{{q}}}",
        f"\\frac{{{p}}}{{{q}}}",
        f"\\frac{{{p + 1}}}{{{q}}}",
        f"\\frac{{{q}}}{{{p or 1}}}",
        f"{sign}\\frac{{ {ap} }}{{ {q} }}",
        f"{p}/{q}",
        f"{p / q:.6f}",
        f"{p / q:.4f}",
        f"{p / q:.10f}",
        f"\\frac{{{p}}}{{0}}",
        f"\\frac{{{p}}}{{{q}}}+\\frac{{1}}{{{10**12}}}",
        f"-\\frac{{{p}}}{{{q}}}",
    ]
    return gold, answers


def _constant_group(rng: random.Random) -> Group:
    a, b = rng.randint(1, 12), rng.choice([2, 3, 5, 6, 7, 10])
    shape = rng.randrange(4)
    if shape == 0:
        gold = f"{a}\\sqrt{{{b}}}"
        answers = [
            f"\\sqrt{{{a * a * b}}}",
            f"{a}\\sqrt{{{b + 1}}}",
            f"{a + 1}\\sqrt{{{b}}}",
            f"\\sqrt{{{a * a * b + 1}}}",
            f"{a * b**0.5:.6f}",
            f"{a}\\sqrt{{{b}}}+\\frac{{1}}{{{10**9}}}",
            f"\\frac{{{a * b}}}{{\\sqrt{{{b}}}}}",
        ]
    elif shape == 1:
        gold = f"{a}\\pi"
        answers = [
            f"\\pi \\cdot {a}",
            f"{a + 1}\\pi",
            f"\\frac{{{2 * a}\\pi}}{{2}}",
            f"{a}\\pi + \\frac{{1}}{{{10**8}}}",
            f"{a * 3.14159265:.6f}",
            f"{a}e",
        ]
    elif shape == 2:
        gold = f"{a}e^{{{b}}}"
        answers = [f"{a}e^{{{b}}}", f"{a}e^{{{b + 1}}}", f"e^{{{b}}} \\cdot {a}", f"{a + 1}e^{b}"]
    else:
        gold = f"\\sqrt{{{b}}} + {a}"
        answers = [
            f"{a} + \\sqrt{{{b}}}",
            f"{a} - \\sqrt{{{b}}}",
            f"\\frac{{{2 * a} + 2\\sqrt{{{b}}}}}{{2}}",
            f"\\sqrt{{{b}}} + {a + 1}",
        ]
    return gold, answers


def _polynomial_group(rng: random.Random) -> Group:
    a = rng.randint(1, 9)
    b = rng.randint(1, 9)
    x = rng.choice(["x", "y", "t"])
    gold = f"{x}^2-{a * a}"
    answers = [
        f"({x}-{a})({x}+{a})",
        f"({x}+{a})({x}-{a})",
        f"({x}-{a})^2",
        f"{x}^2+{a * a}",
        f"-{a * a}+{x}^2",
        f"(z-{a})(z+{a})",
        f"{x}^2-{a * a}+\\frac{{{x}}}{{{10**20}}}",
        f"\\frac{{({x}^2-{a * a})({x}+{b})}}{{{x}+{b}}}",
        f"({x}-{a})({x}+{a}) + {x} - {x}",
        f"{x}^2-{a * a} = 0",
        f"{x}^{{2}} - {a}^{{2}}",
        f"({x}-{a})({x}+{a + 1})",
    ]
    return gold, answers


def _structured_group(rng: random.Random) -> Group:
    a, b = rng.randint(-9, 9), rng.randint(10, 20)
    shape = rng.randrange(3)
    if shape == 0:
        gold = f"({a}, {b})"
        answers = [
            f"({a},{b})",
            f"[{a}, {b}]",
            f"({b}, {a})",
            f"\\{{{a}, {b}\\}}",
            f"{a} < x < {b}",
        ]
    elif shape == 1:
        gold = f"\\{{{a}, {b}\\}}"
        answers = [f"\\{{{b}, {a}\\}}", f"{a}, {b}", f"\\{{{a}\\}}", f"x = {a}"]
    else:
        gold = f"x = {a}"
        answers = [f"{a}", f"x={a}", f"y = {a}", f"x = {a + 1}", f"x \\geq {a}"]
    return gold, answers


MAKERS = (
    (_integer_group, 30),
    (_decimal_group, 20),
    (_fraction_group, 25),
    (_constant_group, 12),
    (_polynomial_group, 6),
    (_structured_group, 7),
)


def corpus(pairs: int = PAIRS, seed: int = 0) -> list[Group]:
    """Groups of (gold, answers), deterministic in the seed: at least `pairs` distinct pairs."""
    rng = random.Random(seed)
    makers = [maker for maker, weight in MAKERS for _ in range(weight)]
    groups: list[Group] = []
    seen: set[tuple[str, str]] = set()
    while len(seen) < pairs:
        gold, answers = rng.choice(makers)(rng)
        fresh = [a for a in dict.fromkeys(answers) if (gold, a) not in seen]
        if fresh:
            seen.update((gold, a) for a in fresh)
            groups.append((gold, fresh))
    return groups


def _reference(gold: str, answers: list[str]) -> Iterator[bool | None]:
    """math-verify alone, as the scorer calls it (each boxed text parsed by its LaTeX extraction),
    with its own handling of errors (a failed parse or comparison is False); None where a parse
    timed out (a comparison that times out is False to math-verify: rare, as the corpus is small
    expressions, and a disagreement it caused would show as one)."""
    gold_parsed = parse("\\boxed{" + gold + "}", LATEX, parsing_timeout=CONFIG.parsing_timeout_s)
    for answer in answers:
        try:
            predicted = parse(
                "\\boxed{" + answer + "}", LATEX, parsing_timeout=CONFIG.parsing_timeout_s
            )
            yield bool(
                verify(
                    gold_parsed,
                    predicted,
                    float_rounding=CONFIG.float_rounding,
                    numeric_precision=CONFIG.numeric_precision,
                    strict=CONFIG.strict,
                    timeout_seconds=CONFIG.verify_timeout_s,
                    raise_on_error=False,
                )
            )
        except TimeoutException:
            yield None


def judge(groups: list[Group]) -> list[tuple[str, str, bool | None, bool | None, str]]:
    """(gold, answer, ours, math-verify's, our path) for every pair; None where a side timed out."""
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    rows = []
    for gold, answers in groups:
        for answer, theirs in zip(answers, _reference(gold, answers), strict=True):
            ok, details = equivalent(gold, answer, CONFIG)
            timed_out = details.get("reason") in ("parse_timeout", "verifier_timeout")
            rows.append((gold, answer, None if timed_out else ok, theirs, details.get("path", "")))
    return rows


def test_corpus_shape() -> None:
    groups = corpus()
    pairs = [(g, a) for g, answers in groups for a in answers]
    assert len(pairs) >= PAIRS
    assert len(set(pairs)) == len(pairs)
    assert corpus() == groups  # deterministic


def test_prorl_v1_agrees_with_math_verify_on_the_corpus() -> None:
    groups = corpus()
    shards = [groups[i::2] for i in range(2)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        rows = [row for shard in pool.map(judge, shards) for row in shard]
    compared = [r for r in rows if r[2] is not None and r[3] is not None]
    assert len(rows) - len(compared) <= 20, "too many timeouts to compare"
    differ = [r for r in compared if r[2] is not r[3]]
    assert not differ, differ[:20]
    fast = [r for r in compared if r[4] == "fast"]
    # The corpus exercises both answers of the fast path, and math-verify's path as well.
    assert sum(r[2] is True for r in fast) >= 1000 and sum(r[2] is False for r in fast) >= 1000
    assert len(compared) - len(fast) >= 1000
