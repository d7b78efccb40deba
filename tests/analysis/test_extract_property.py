"""What ``number`` reads from any LaTeX-ish text, and how much work a long one takes: it read broken
spellings ("\\boxed{x" from "\\boxed{x }", "\\frac{\\}{)}" from "\\frac\\)"), and took time quadratic
in an answer's length ("2^x " 1,000 times: 47 s)."""

from __future__ import annotations

import os
import re

import pytest

from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import given, settings
from hypothesis import strategies as st

from infertap.analysis import extract_number
from infertap.analysis.extract_number import number

EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "300"))

# Pieces of answers as models write them, cut anywhere: boxes, braces and brackets left open or closed
# twice, commands without their arguments, subscripts, text, math delimiters, markers.
PIECES = [
    "\\boxed{", "{", "}", "(", ")", "[", "]", "x", "y", "a", "ij", "_", "^", "2", "10", "3.5", "1/2", "-", "+",
    " ", "\\frac", "\\dfrac", "\\sqrt", "\\text{ m/s}", "\\cdot", "\\times", "*", "/", "$", "\\(", "\\)", "\\[",
    "\\]", "xy", ".", "=", "Answer: ", "####", "\\pi", "\\left(", "\\right)", "\\sin", "\\log_", "e", ",", "f(",
    "5m", "\n", "abc", "\\alpha",
]  # fmt: skip


def _balanced(spelling: str) -> bool:
    """Whether its brackets pair up, told apart from the extractor's own check: innermost pairs
    removed until none is left."""
    left = "".join(c for c in spelling if c in "{}()[]")
    while (shorter := left.replace("{}", "").replace("()", "").replace("[]", "")) != left:
        left = shorter
    return not left


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=14).map("".join))
def test_a_reading_never_leaves_a_brace_or_bracket_unclosed(text: str) -> None:
    read = number(text)
    assert read is None or _balanced(read), (text, read)


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("\\boxed{x }", "x"),  # was "\\boxed{x"
        ("\\boxed{a_{ij}}", "a_{ij}"),  # was "\\boxed{a_{"
        ("1/2\\dfrac\\dfrac\\dfrac \\dfrac\\(- y", "0.5"),  # was "\\frac{\\}{(}-y": a backslash, a bracket no argument
        ("\\(*\\(-\\(\\sqrt,\\frac\n\\[,,\\)]", None),  # was "\\frac{\\}{[}\\sqrt{,}"
        ("2x)y10}\\alpha", "10"),  # was "y10}\\alpha": a brace no sum opened is no term's
    ],
)
def test_a_broken_spelling_is_no_reading(text: str, spelled: str | None) -> None:
    assert number(text) == spelled


@pytest.mark.parametrize(
    ("piece", "times", "value"),
    [
        ("\\( a ", 3000, None),
        ("2^x ", 1000, "2^{x}"),  # 47 s before: each expression's search ran again to the text's end
        ("(x+1)^2 ", 1000, "(x+1)^{2}" * 1000),  # spaced, one product (LaTeX ignores the space)
        ("1 + 2 ", 1000, "3"),
        ("\\boxed{x ", 3000, "x"),  # each box searched 2,000 characters for its brace
    ],
)
def test_a_long_answer_is_read_with_each_candidate_read_once(
    monkeypatch: pytest.MonkeyPatch, piece: str, times: int, value: str | None
) -> None:
    """The work is counted, not timed: each match of a sum with a letter is read once (it was read
    again after every expression before it, n * n / 2 reads)."""
    reads: list[int] = []
    real = extract_number._letter_term

    def counted(text: str, m: re.Match[str]) -> tuple[int, int, str] | None:
        reads.append(m.start())
        return real(text, m)

    monkeypatch.setattr(extract_number, "_letter_term", counted)
    assert number(piece * times) == value
    assert len(reads) <= 3 * times
