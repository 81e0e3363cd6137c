r"""The STEM regression table: multiple choice and free-form answers.

`expected` is the careful grader's verdict (prorl-v1-careful, and the default prorl-v1-careful-2);
`prorl_v1` is prorl-v1's where it differs (its plain letter reader; math-verify alone for free-form
numbers it cannot read).
Multiple-choice verdicts are what a careful grader reads as the response's final choice; free-form
numeric verdicts follow `math.isclose(answer, gold, rel_tol=...)` with the item's `rel_tol`, else
the spec's (prorl-v1: 0.01); free-form symbolic verdicts are math-verify's.
"""

from __future__ import annotations

from tests.cases import StemCase

__all__ = ["STEM_CASES"]

COLOURS = ("red", "green", "blue", "yellow")
"""Four choices, A-D; the gold of most rows is C (blue)."""
PLANETS = ("Mercury", "Venus", "Earth", "Mars", "Jupiter")
ELEMENTS = ("hydrogen", "helium", "lithium")
PRESSURE = ("An increase in pressure", "No change", "A decrease in pressure", "It depends")
"""Choice texts that begin with a capitalised article."""

STEM_CASES: list[StemCase] = [
    # ------------------------------------------------------------------ letter formats
    StemCase("C", "Blue light scatters most.\nAnswer: C", True, "'Answer: C' line", COLOURS),
    StemCase("C", "Red light scatters least.\nAnswer: B", False, "'Answer: B', wrong", COLOURS),
    StemCase("C", r"Therefore $\boxed{C}$.", True, r"\boxed{C}", COLOURS),
    StemCase("C", r"Therefore $\boxed{(C)}$.", True, r"\boxed{(C)}", COLOURS),
    StemCase("C", r"Therefore $\boxed{\text{C}}$.", True, r"\boxed{\text{C}}", COLOURS),
    StemCase("C", r"$\boxed{C. \text{blue}}$", True, "boxed letter with its text", COLOURS),
    StemCase("C", r"Therefore $\boxed{B}$.", False, r"\boxed{B}, wrong", COLOURS),
    StemCase("C", "The correct option is (C).", True, "parenthesised letter", COLOURS),
    StemCase("C", "The answer is C.", True, "'The answer is C.'", COLOURS),
    StemCase("C", "The answer is (C) blue.", True, "'the answer is (C) text'", COLOURS),
    StemCase("C", "**Answer:** C", True, "markdown bold around 'Answer:'", COLOURS),
    StemCase("C", "**Answer**: C", True, "markdown bold around 'Answer' only", COLOURS),
    StemCase("C", "Final answer: C) blue", True, "'C)' style", COLOURS),
    StemCase("E", "Jupiter is the largest.\nAnswer: E", True, "fifth choice", PLANETS),
    # ------------------------------------------------------------------ which statement counts
    StemCase(
        "C",
        "Answer: A\nHmm, red is wrong: it scatters least.\nAnswer: C",
        True,
        "two answer lines: the last wins",
        COLOURS,
    ),
    StemCase(
        "A",
        "Answer: A\nHmm, red is wrong: it scatters least.\nAnswer: C",
        False,
        "two answer lines: an earlier one does not count",
        COLOURS,
    ),
    StemCase(
        "C",
        "(A) is tempting, (B) is wrong. Answer: C",
        True,
        "answer line beats parentheses",
        COLOURS,
    ),
    StemCase("C", "Not (A), not (B); it must be (C).", True, "last parenthesised letter", COLOURS),
    StemCase(
        "D",
        "Option A fails, option B fails, option C fails, so it is option D.",
        True,
        "the last choice stated",
        COLOURS,
    ),
    StemCase(
        "C",
        "Option A fails, option B fails, option C fails, so it is option D.",
        False,
        "an earlier stated option does not count",
        COLOURS,
    ),
    StemCase(
        "C",
        r"<think>Answer: A, surely.</think>The answer is \boxed{C}.",
        True,
        "a decoy answer line inside the reasoning is ignored",
        COLOURS,
    ),
    StemCase(
        "A",
        r"<think>Answer: A, surely.</think>The answer is \boxed{C}.",
        False,
        "the gold letter only inside the reasoning",
        COLOURS,
    ),
    StemCase("C", "<think>Answer: C", False, "unclosed reasoning: no answer", COLOURS),
    # ------------------------------------------------------------------ the choice's text
    StemCase("C", "The answer is blue.", True, "choice text after 'the answer is'", COLOURS),
    StemCase("C", r"$\boxed{\text{blue}}$", True, "choice text in the box", COLOURS),
    StemCase("C", r"$\boxed{Blue}$", True, "choice text, capitalised", COLOURS),
    StemCase("C", "The answer is green.", False, "another choice's text", COLOURS),
    StemCase("B", r"$\boxed{\text{helium}}$", True, "element name as the answer", ELEMENTS),
    StemCase("B", "The answer is Venus.", True, "planet name as the answer", PLANETS),
    # ------------------------------------------------------------------ lowercase and range traps
    StemCase(
        "B",
        "The answer is a noble gas, so (B).",
        True,
        "'a' as an article after 'the answer is' is not choice A",
        ELEMENTS,
    ),
    StemCase(
        "A",
        "The answer is a noble gas, so (B).",
        False,
        "'a' as an article does not earn choice A",
        ELEMENTS,
    ),
    StemCase(
        "A",
        "The answer is a bit subtle. I am not sure which one.",
        False,
        "'a' as an article and no choice at all",
        ELEMENTS,
    ),
    StemCase(
        "A",
        "It is a light gas; a balloon of it floats. Hydrogen is a good guess, but I won't commit.",
        False,
        "articles everywhere, no chosen letter",
        ELEMENTS,
    ),
    StemCase(
        "C",
        r"$\boxed{A decrease in pressure}$",
        True,
        "boxed choice text starting with the article 'A' is that choice, not A",
        PRESSURE,
    ),
    StemCase(
        "C",
        "The answer is A decrease in pressure.",
        True,
        "choice text starting with 'A' after 'the answer is'",
        PRESSURE,
    ),
    StemCase(
        "A",
        "Answer: A decrease in pressure",
        False,
        "'A' of the article does not earn choice A",
        PRESSURE,
    ),
    StemCase(
        "C",
        "Answer: B. Hmm, no: the answer is blue.",
        True,
        "a later stated choice text beats an earlier letter",
        COLOURS,
    ),
    StemCase(
        "C",
        "Answer: (c)",
        True,
        "lowercase letter in parentheses after 'Answer:'",
        COLOURS,
    ),
    StemCase("C", "Answer: F", False, "a letter beyond the offered choices (A-D)", COLOURS),
    StemCase("C", "Answer: D", False, "D with only three choices is not a choice", ELEMENTS),
    StemCase("C", r"$\boxed{E}$", False, "boxed letter beyond the choices", COLOURS),
    # ------------------------------------------------------------------ gold forms
    StemCase("2", "Answer: C", True, "gold as a 0-based index", COLOURS),
    StemCase("0", "Answer: A", True, "gold index 0", COLOURS),
    StemCase("blue", "Answer: C", True, "gold as the choice's text", COLOURS),
    StemCase("Blue", "Answer: B", False, "gold as text, wrong letter", COLOURS),
    StemCase("(C)", "Answer: C", True, "gold as a parenthesised letter", COLOURS),
    StemCase("c", "Answer: C", True, "gold as a lowercase letter", COLOURS),
    # ------------------------------------------------------------------ no answer
    StemCase("C", "", False, "empty response", COLOURS),
    StemCase("C", "I am not sure.", False, "no choice stated", COLOURS),
    # ------------------------------------------------------------------ free-form numeric
    StemCase("3.2e-5", r"The rate is $\boxed{3.2 \times 10^{-5}}$.", True, r"\times 10^{-5}"),
    StemCase("3.2e-5", r"$\boxed{3.2 \cdot 10^{-5}}$", True, r"\cdot 10^{-5}"),
    StemCase("3.2e-5", r"$\boxed{3.2e-5}$", True, "e-notation"),
    StemCase("3.2e-5", r"$\boxed{3.2E-5}$", True, "E-notation"),
    StemCase("3.2e-5", r"$\boxed{0.000032}$", True, "plain decimal for a scientific gold"),
    StemCase("3.2e-5", "The rate is 3.2×10^-5 per second.", False, "no boxed, no 'answer is'"),
    StemCase(
        "3.2e-5",
        "The answer is 3.2×10^-5 per second.",
        True,
        "Unicode ×, bare exponent, unit",
    ),
    StemCase("3.2e-5", r"$\boxed{3.2 \times 10^{-6}}$", False, "exponent off by one"),
    StemCase("6.022e23", r"$\boxed{6.02 \times 10^{23}}$", True, "Avogadro to 3 figures (0.04%)"),
    StemCase("6.022e23", r"$\boxed{6.02 x 10^23}$", True, "'x 10^23' written with the letter x"),
    StemCase("2500", r"$\boxed{2.5 \times 10^{3}}$", True, "scientific answer, plain gold"),
    StemCase(
        "1e-3",
        r"$\boxed{10^{-3}}$",
        True,
        "bare power of ten",
    ),
    StemCase("100", r"$\boxed{101}$", True, "at the tolerance: 1% of 100"),
    StemCase("100", r"$\boxed{99}$", True, "at the tolerance, below"),
    StemCase("100", r"$\boxed{100.5}$", True, "inside the tolerance"),
    StemCase("100", r"$\boxed{102}$", False, "outside the tolerance (2%)"),
    StemCase("100", r"$\boxed{97}$", False, "outside the tolerance, below"),
    StemCase(
        "100", r"$\boxed{104}$", True, "reference rel_tol 5% overrides the spec", rel_tol=0.05
    ),
    StemCase("100", r"$\boxed{106}$", False, "outside the reference's 5%", rel_tol=0.05),
    StemCase("100", r"$\boxed{100.5}$", False, "reference rel_tol 0.1% is stricter", rel_tol=0.001),
    StemCase("2.5", r"$\boxed{2.50}$", True, "rel_tol 0: exact, trailing zero", rel_tol=0.0),
    StemCase("2.5", r"$\boxed{2.50001}$", False, "rel_tol 0: exact", rel_tol=0.0),
    StemCase("-273.15", r"$\boxed{-273}$", True, "negative, within 1%"),
    StemCase("-5", r"$\boxed{5}$", False, "sign flipped"),
    StemCase("0", r"$\boxed{0.001}$", False, "zero gold: a relative tolerance admits nothing else"),
    StemCase("0", r"$\boxed{0.0}$", True, "zero gold, zero answer"),
    StemCase("12000", r"$\boxed{12,000}$", True, "thousands separator"),
    StemCase("12000", r"$\boxed{12{,}000}$", True, "LaTeX {,} separator"),
    StemCase("0.125", r"$\boxed{1/8}$", True, "slash fraction"),
    StemCase("0.125", r"$\boxed{\frac{1}{8}}$", True, r"\frac"),
    StemCase("0.125", r"$\boxed{\dfrac{1}{7}}$", False, r"\dfrac, wrong (14%)"),
    StemCase(
        "9.8",
        r"$\boxed{9.81 \text{ m/s}^2}$",
        True,
        r"unit in \text, exponent outside it",
    ),
    StemCase("9.8", r"$\boxed{9.8\,\mathrm{m/s^2}}$", True, r"unit in \mathrm after \,"),
    StemCase("9.8", "The answer is 9.8 m/s^2.", True, "plain unit after 'the answer is'"),
    StemCase("9.8", r"$\boxed{8.9 \text{ m/s}^2}$", False, "digits swapped, with a unit"),
    StemCase("42", "The answer is 42 J.", True, "fallback with a unit"),
    StemCase("4", "The answer is 42 J.", False, "a unit must not swallow the number's last digit"),
    StemCase("9.8", r"$\boxed{9 \text{ m/s}^2}$", False, "integer part only, with a unit (8% off)"),
    StemCase("3.14159", r"$\boxed{\approx 3.14}$", True, r"\approx prefix, within 1%"),
    StemCase(
        "1.414",
        r"$\boxed{\sqrt{2}}$",
        True,
        "exact form of a numeric gold, within 1%",
    ),
    StemCase(
        "1500",
        "The answer is 1.5e3 kg.",
        True,
        "e-notation followed by a unit",
    ),
    StemCase(
        "1.5",
        "The answer is 1.5e3 kg.",
        False,
        "1500 is not 1.5: the exponent is not a unit",
    ),
    StemCase("25", r"$\boxed{25\%}$", True, "percent sign on the number asked for"),
    StemCase("7.5", "", False, "empty response"),
    StemCase("7.5", "I could not finish the calculation.", False, "no answer"),
    # ------------------------------------------------------------------ free-form symbolic
    StemCase("x^2 + 1", r"$\boxed{1 + x^2}$", True, "commuted polynomial"),
    StemCase("x^2 + 1", r"$\boxed{x^2 - 1}$", False, "sign of a term"),
    StemCase(r"\frac{h}{2\pi}", r"$\boxed{\frac{h}{2 \pi}}$", True, "reduced Planck constant"),
    StemCase(r"2\pi r", r"$\boxed{2 r \pi}$", True, "product of symbols, reordered"),
    StemCase(r"\sqrt{2gh}", r"$\boxed{\sqrt{2hg}}$", True, "commuted under a root"),
    StemCase(r"\frac{v^2}{r}", r"$\boxed{v^2/r}$", True, "slash fraction of symbols"),
    StemCase(r"\frac{v^2}{r}", r"$\boxed{\frac{v}{r^2}}$", False, "exponent on the wrong symbol"),
    StemCase(
        r"\frac{1}{2}mv^2",
        r"The kinetic energy is $\boxed{\frac{m v^2}{2}}$",
        True,
        "kinetic energy",
    ),
    # ================================================================== the careful reader
    # Rows below exercise reward_specs/stem/choice_letters.py (and the math rules for free-form
    # numbers); `prorl_v1=` gives the plain reader's verdict where it differs.
    # -------------------------------------------------- lower-case standalone letters
    StemCase(
        "C",
        "Blue scatters most.\nanswer: c",
        True,
        "lower-case 'answer: c'",
        COLOURS,
        prorl_v1=False,
    ),
    StemCase(
        "C",
        "The answer is c.",
        True,
        "lower-case letter ending the sentence",
        COLOURS,
        prorl_v1=False,
    ),
    StemCase("C", r"$\boxed{c}$", True, "lower-case boxed letter", COLOURS, prorl_v1=False),
    StemCase(
        "C", r"Answer: $\text{c}$", True, r"lower-case letter in \text", COLOURS, prorl_v1=False
    ),
    StemCase(
        "B", "The answer is a noble gas.", False, "'a' followed by a word is an article", ELEMENTS
    ),
    StemCase(
        "A",
        "The answer is a.",
        True,
        "lower-case 'a' standing alone is choice A",
        ELEMENTS,
        prorl_v1=False,
    ),
    # ------------------------------------------------------------------ first-person statements
    StemCase(
        "C",
        "Blue light has the shortest wavelength, so I choose C.",
        True,
        "'I choose C'",
        COLOURS,
        prorl_v1=False,
    ),
    StemCase("C", "After all that, my answer is (c).", True, "'my answer is (c)'", COLOURS),
    StemCase("D", "I'll go with D.", True, "'I'll go with D'", COLOURS, prorl_v1=False),
    StemCase("B", "Weighing both, I pick B.", True, "'I pick B'", COLOURS, prorl_v1=False),
    StemCase("C", "I would choose option C here.", True, "'I would choose option C'", COLOURS),
    # ------------------------------------------------------------------ the explicit statement wins
    StemCase(
        "C",
        "Answer: C\nOption A is wrong since red scatters least, and option B fails too.",
        True,
        "an explicit answer, then a discussion of other options",
        COLOURS,
        prorl_v1=False,
    ),
    StemCase(
        "C",
        "I choose C. To see why the others fail: (A) is too long a wavelength, (B) as well.",
        True,
        "'I choose C', then parenthesised letters",
        COLOURS,
        prorl_v1=False,
    ),
    StemCase(
        "C",
        "The answer is (C).\nWhy not option D? Yellow light is scattered less.",
        True,
        "'the answer is (C)', then a later 'option D'",
        COLOURS,
        prorl_v1=False,
    ),
    StemCase(
        "A",
        "Answer: C\nOption A is wrong since red scatters least.",
        False,
        "a later mention of another option earns nothing",
        COLOURS,
        prorl_v1=True,
    ),
    StemCase(
        "C",
        "Answer: A\nOn reflection, red scatters least.\nAnswer: C",
        True,
        "two explicit statements: the last",
        COLOURS,
    ),
    # ------------------------------------------------------------------ bold and \text
    StemCase("C", "The answer is **C**.", True, "letter in bold", COLOURS),
    StemCase("C", "**Final answer: C**", True, "the whole statement in bold", COLOURS),
    StemCase("C", r"Final answer: $\text{(C)}$", True, r"parenthesised letter in \text", COLOURS),
    StemCase("C", r"Answer: $\textbf{C}$", True, r"letter in \textbf", COLOURS, prorl_v1=False),
    # ------------------------------------------------------------------ two final letters
    StemCase(
        "C",
        "Answer: A or C",
        False,
        "two letters in the final statement: not parsed",
        COLOURS,
    ),
    StemCase(
        "A",
        "Answer: A or C",
        False,
        "two letters do not earn the first one either",
        COLOURS,
        prorl_v1=True,
    ),
    StemCase(
        "C",
        r"$\boxed{B}, \boxed{C}$",
        False,
        "two different final boxes: not parsed",
        COLOURS,
        prorl_v1=True,
    ),
    StemCase("C", r"$\boxed{B, C}$", False, "two letters in one box: not parsed", COLOURS),
    StemCase("C", "The answer is C and D.", False, "'C and D': not parsed", COLOURS, prorl_v1=True),
    StemCase(
        "C",
        r"$\boxed{C}$ and again $\boxed{C}$",
        True,
        "the same letter twice is one choice",
        COLOURS,
    ),
    StemCase(
        "C", "The answer is C, not A.", True, "a negated letter is not a second choice", COLOURS
    ),
    # -------------------------------------------------- free-form numbers (math rules)
    StemCase(
        "12345",
        r"$\boxed{12\,345}$",
        True,
        r"\, thousands separator (thousands_sep)",
        prorl_v1=False,
    ),
    StemCase(
        "1000",
        r"$\boxed{1 000}$",
        True,
        "space thousands separator (thousands_sep)",
        prorl_v1=False,
    ),
    StemCase("1.22", r"$\boxed{1,22}$", True, "decimal comma (decimal_comma)", prorl_v1=False),
    StemCase(
        "0.333",
        r"$\boxed{0.\overline{3}}$",
        True,
        "repeating decimal within 1% (repeating_decimal)",
        prorl_v1=False,
    ),
    StemCase("12345", r"$\boxed{13\,345}$", False, "separated, 8% off"),
]
