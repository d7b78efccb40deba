"""Answer extraction: the answer a text gives, not the first letter or number in it."""

from __future__ import annotations

import pytest

from infertap.analysis.extract import choice


@pytest.mark.parametrize(
    ("text", "letter"),
    [
        ("After a careful analysis, the answer is B.", "B"),  # was "A", from "After"
        ("e.g. the answer is B", "B"),  # was "E", from "e.g."
        ("Option A is tempting; the answer is C. Option D fails.", "C"),  # the answer over options weighed
        ("answer is B.\nOn reflection, the answer is D", "D"),  # the last answer given
        ("The answer is a bit unclear, but I pick C", "C"),  # "a bit" is no A
        ("The correct answer is option **E**", "E"),
        ("Answer: (c)", "C"),  # lowercase where it is marked as the answer
        ("I think it's (D)", "D"),
        ("B)", "B"),
        ("**B**", "B"),
        ("I'd rule out A, so B", "B"),  # no marker: the last capital
        ("b", "B"),  # a reference written as the letter alone
    ],
)
def test_choice_is_the_letter_given_as_the_answer(text: str, letter: str) -> None:
    assert choice(text) == letter


def test_choice_must_differ_on_different_answers_and_match_on_the_same_one() -> None:
    assert choice("After some thought, the answer is B.") != choice("After some thought, the answer is C.")
    assert choice("After some thought, the answer is B.") == choice("(B)") == choice("Answer: b")


def test_choice_takes_no_lowercase_letter_without_a_marker() -> None:
    assert choice("a bit of e.g. and i.e. here") is None
    assert choice("no letter here!") is None
