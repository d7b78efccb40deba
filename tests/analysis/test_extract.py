"""Answer extraction: the answer a text gives, not the first letter or number in it."""

from __future__ import annotations

import pytest

from infertap.analysis.extract import choice, grader, number
from infertap.analysis.math_letters import multiplied
from infertap.analysis.sum_terms import ordered_sum


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


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The point is (3,5)", "5"),  # was "35": a comma is a thousands separator before 3 digits only
        ("1,2,3", "3"),  # was "123"
        ("about 1,234.50 units, 12,345,678 in all", "12345678"),
        ("The area is 50 cm^2", "50"),  # was "2", the exponent
        ("\\boxed{42}. Check: 42 = 6*7", "42"),  # was "7", from the check after the answer
        ("Natalia sold 48 clips.\n#### 72\nThat took 3 steps", "72"),  # GSM8K's marker
        ("The answer is 18 dollars, since 9 * 2 = 18 and 2 are left", "18"),  # was "2"
        ("#### Step 1\nAdd them: 17 + 25 = 42", "42"),  # a markdown heading is no GSM8K marker
        ("The answer is below.\n17 + 25 = 42", "42"),  # a marker with no number on its line is none
        ("answer: .5", "0.5"),  # was "5"
        ("1e5", "100000"),  # was "5"
        ("-0.0", "0"),  # was "-0"
        ("pages 3-5", "5"),  # a range, not minus five
        ("3 - 5 = -2", "-2"),
        ("9" * 40, "9" * 40),  # exact at any length: no float or decimal context to round it
        ("1e-40", "1E-40"),  # far from 1 in scientific form, not rounded to 0
        ("none", None),
    ],
)
def test_number_is_the_value_given_as_the_answer(text: str, value: str | None) -> None:
    assert number(text) == value


def test_number_must_match_on_equal_values_and_differ_on_different_ones() -> None:
    for same in (["0", "-0.0", "0.00", "0e5"], [".5", "0.50", "5e-1", "answer: 0.5"], ["1e5", "100,000", "100000.0"]):
        assert len({number(text) for text in same}) == 1, same
    assert number("0.5") != number("5") and number("1e5") != number("15") and number("-2") != number("2")
    assert number("1,234") != number("1,2,3,4") and number("0.001") != number("0.01")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("So $\\boxed{\\frac{1}{2}}$", "0.5"),  # was "2", the denominator
        ("\\boxed{\\dfrac{1}{2}}", "0.5"),
        ("\\boxed{\\tfrac{1}{2}}", "0.5"),
        ("\\boxed{\\frac12}", "0.5"),  # LaTeX's shorthand for one-digit parts
        ("\\boxed{1/2}", "0.5"),
        ("\\boxed{-\\frac{3}{4}}", "-0.75"),  # was "4"
        ("\\boxed{\\frac{-3}{4}}", "-0.75"),
        ("\\boxed{\\frac{10}{4}}", "2.5"),
        ("\\boxed{\\frac{6}{3}}", "2"),
        ("\\boxed{\\frac{2}{6}}", "1/3"),  # no decimal ends: the fraction, reduced
        ("The answer is 3/4 of a cup", "0.75"),  # was "3"
        ("17/4 = 4.25", "4.25"),
        ("due 12/25/2024", "2024"),  # a date is no fraction
        ("x^{1/2} = 5", "5"),  # nor an exponent
        ("\\boxed{\\frac{1}{0}}", "\\frac{1}{0}"),  # no value: as written (it was "0", its last number)
        ("1/0", "1/0"),
    ],
)
def test_a_fraction_is_one_number(text: str, value: str) -> None:
    assert number(text) == value


def test_fractions_match_their_value_and_differ_from_other_values() -> None:
    for same in (
        ["\\boxed{\\frac{1}{2}}", "0.5", "\\boxed{1/2}", "answer: .5"],
        ["\\frac{1}{3}", "2/6", "\\boxed{\\dfrac{-2}{-6}}"],
    ):
        assert len({number(text) for text in same}) == 1, same
    assert number("\\boxed{\\frac{1}{2}}") != number("\\boxed{2}") and number("\\frac{1}{3}") != number("0.333")
    assert number("\\boxed{-\\frac{3}{4}}") != number("\\boxed{\\frac{3}{4}}") != number("\\boxed{4}")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{\\frac{\\sqrt2}{2}}", "\\frac{\\sqrt{2}}{2}"),  # was "2", the denominator
        ("x = \\dfrac{ \\sqrt{2} }{2}", "\\frac{\\sqrt{2}}{2}"),  # spelled one way, as MATH's strip_string
        ("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}"),
        ("\\boxed{-2\\sqrt3}", "-2\\sqrt{3}"),  # was "3"
        ("\\frac{\\pi}{2}", "\\frac{\\pi}{2}"),
        ("x^2 = \\frac12, so x = \\frac{\\sqrt2}{2}", "\\frac{\\sqrt{2}}{2}"),  # was "2"
        ("the root: \\sqrt", None),  # no argument, no expression
    ],
)
def test_an_irrational_expression_is_one_answer_not_its_last_digit(text: str, value: str | None) -> None:
    assert number(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1 1/2", "1.5"),  # was "0.5"
        ("\\boxed{2\\frac{1}{2}}", "2.5"),  # was "0.5"
        ("-1 1/2", "-1.5"),  # was "0.5"
        ("-2 \\frac12", "-2.5"),
        ("The answer is 1 1/2 cups", "1.5"),  # was "1", the first number after the marker
        ("1,000 1/4", "1000.25"),
        ("2 + 1/2", "2.5"),  # a sum, its value (math-verify's 5/2), not its last number
        ("x = 5, 1/2", "0.5"),  # no mixed number: a list, an improper fraction, a decimal, a sign
        ("2 3/2", "1.5"),
        ("3.5 1/2", "0.5"),
        ("1 -1/2", "-0.5"),
    ],
)
def test_a_mixed_number_is_its_whole_and_its_fraction(text: str, value: str) -> None:
    assert number(text) == value


def test_expressions_and_mixed_numbers_match_their_spellings_and_differ_from_other_values() -> None:
    for same in (
        ["\\frac{\\sqrt2}{2}", "\\boxed{\\frac{\\sqrt{2}}{2}}", "\\sqrt{2} / 2"],
        ["1 1/2", "\\boxed{1\\frac{1}{2}}", "1.5", "3/2"],
        ["-1 1/2", "-1.5"],
    ):
        assert len({number(text) for text in same}) == 1, same
    assert number("\\frac{\\sqrt2}{2}") not in (number("2"), number("1"), number("\\frac{\\sqrt{3}}{2}"))
    assert number("1 1/2") != number("1/2") and number("2\\frac{1}{2}") != number("2") != number("\\frac{1}{2}")
    assert number("-1 1/2") != number("1 1/2")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{\\frac{1}{2}\\sqrt2}", "\\frac{\\sqrt{2}}{2}"),  # was "\\sqrt{2}", its last factor
        ("\\frac{1}{\\sqrt2}", "\\frac{\\sqrt{2}}{2}"),
        ("\\sqrt{12}", "2\\sqrt{3}"),
        ("\\sqrt{\\frac{1}{2}}", "\\frac{\\sqrt{2}}{2}"),
        ("\\boxed{2^3}", "8"),  # was "2", the base
        ("10^{-3}", "0.001"),
        ("2^{1/2}", "\\sqrt{2}"),
        ("1.5 \\times 10^{3}", "1500"),
        ("2 \\cdot \\sqrt{2} \\cdot \\sqrt{2}", "4"),
        ("9^99999", "9^{99999}"),  # too large to compute: as written, never its base
        ("2^x", "2^{x}"),
        ("\\sqrt[3]{2}", "\\sqrt[3]{2}"),  # no square root: as written
        ("\\frac{1+\\sqrt2}{2}", "\\frac{\\sqrt{2}+1}{2}"),  # a part's sum in one order, as "\\frac{\\sqrt2+1}{2}" is
    ],
)
def test_an_expression_is_its_exact_value_where_it_has_one(text: str, value: str) -> None:
    assert number(text) == value


def test_equal_values_written_otherwise_match_and_other_values_differ() -> None:
    for same in (
        ["\\frac{1}{\\sqrt2}", "\\frac{\\sqrt2}{2}", "\\frac{1}{2}\\sqrt{2}", "\\sqrt{\\tfrac12}", "2^{-1/2}"],
        ["0.5", "\\frac12", "2^{-1}"],
        ["2^3", "8", "\\boxed{8}", "\\sqrt{64}"],
        ["\\sqrt{8}", "2\\sqrt2", "\\sqrt2 \\cdot 2"],
        ["1.5 \\times 10^3", "1500"],
    ):
        assert len({number(text) for text in same}) == 1, same
    assert number("\\frac{1}{2}\\sqrt2") != number("\\sqrt2")
    assert number("\\frac{1}{\\sqrt2}") not in (number("\\frac{\\sqrt3}{2}"), number("2"), number("0.7071"))
    assert number("2^3") not in (number("2"), number("3"), number("6"), number("9"))
    assert number("9^99999") != number("9") and number("9^99999") != number("9^99998")
    assert number("\\sqrt{8}") != number("\\sqrt{2}") and number("-2\\sqrt2") != number("2\\sqrt2")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{\\left(\\frac12\\right)^2}", "0.25"),  # was "0.5": the power after the bracket dropped
        ("(1/2)^2", "0.25"),
        ("-(\\frac{1}{2})^{3}", "-0.125"),
        ("(x+1)^2 = 9", "9"),  # a bracket of no value: its numbers as they are
        ("f(2)^2 = 4", "4"),
        ("1e5^2", "10000000000"),  # was "100000": the exponent's number is the base
        ("1e99999^2", "1E+99999^{2}"),  # too large to compute: as written
        ("\\boxed{\\frac{1}{0}\\sqrt2}", "\\frac{1}{0}\\sqrt{2}"),  # was "\\sqrt{2}": a factor of no value
        ("\\pi\\sqrt2", "\\sqrt{2}\\pi"),  # was "2"
        ("\\sqrt2\\pi", "\\sqrt{2}\\pi"),  # was "\\pi"
        ("3^2 + 4^2 = 5^2", "25"),  # an equation's right-hand side, its value (lm-eval's Minerva grader's)
    ],
)
def test_a_power_or_factor_after_a_value_is_part_of_it(text: str, value: str) -> None:
    assert number(text) == value


def test_products_of_no_value_and_powers_of_brackets_differ_from_their_parts() -> None:
    for same in (
        ["\\left(\\frac12\\right)^2", "(0.5)^2", "0.25", "\\frac14"],
        ["1e5^2", "10^{10}", "10000000000"],
        ["\\frac{1}{0}\\sqrt2", "\\boxed{\\frac{1}{0} \\sqrt{2}}"],
        ["\\pi\\sqrt2", "\\pi \\sqrt{2}"],
    ):
        assert len({number(text) for text in same}) == 1, same
    assert number("\\left(\\frac12\\right)^2") not in (number("0.5"), number("2"))
    assert number("1e5^2") not in (number("1e5"), number("2"))
    assert number("\\frac{1}{0}\\sqrt2") not in (number("\\sqrt2"), number("0"))
    assert number("\\frac{1}{0}") not in (number("0"), number("1"), number("\\frac{2}{0}"))
    assert number("\\pi\\sqrt2") not in (number("\\sqrt2"), number("2"), number("\\pi"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5^2 = 3^2+4^2", "25"),  # was "16", the last term (Minerva's grader: sympy's 25)
        ("3^2 + 4^2 cm", "25"),
        ("\\boxed{3^2+4^2}", "25"),
        ("1 - 2^3", "-7"),
        ("\\sqrt2 + \\sqrt2", "2\\sqrt{2}"),  # like radicals
        ("1 + \\sqrt{2}", "\\sqrt{2}+1"),  # unlike: one answer, as written (was "\\sqrt{2}")
        ("2(\\frac12)^2", "0.5"),  # was "0.5" by chance: 2 and (1/2) read apart, the power dropped
        ("3(2)^2", "12"),  # was "2"
        ("2^3 + 4x", "4x+8"),  # 4x is no number: a sum of no value, its constant terms added (was "4")
        ("17 + 25 = 42", "42"),  # numbers alone are no sum to evaluate
    ],
)
def test_a_sum_of_exact_values_is_its_value(text: str, value: str) -> None:
    assert number(text) == value


def test_sums_of_equal_value_match_and_others_differ() -> None:
    assert number("3^2+4^2") == number("25") and number("2(\\frac12)^2") == number("0.5")
    assert number("\\sqrt2 + \\sqrt2") == number("2\\sqrt2") == number("\\sqrt{8}")
    assert number("1+\\sqrt2") not in (number("2.414"), number("\\sqrt2"), number("1"))
    assert number("3^2+4^2") != number("24") and number("3(\\frac12)^2") != number("0.5")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("so x = 2 + 3", "5"),  # was "3", its last term (math-verify's expression: 2 + 3)
        ("\\boxed{2+3}", "5"),
        ("The answer is 2 + 3", "5"),  # was "2", the first number after the marker
        ("x = 10 - 4 + 1", "7"),
        ("x = -2 + 3", "1"),
        ("x = 9 * 2", "18"),  # was "2"
        ("2 \\times 3", "6"),
        ("17 + 25 = 42", "42"),  # an equation's answer is its right-hand side
        ("pages 3-5", "5"),  # a range: no difference
        ("2 + 3-1", "1"),  # a sum whose "-" may be a range's: its numbers as they are
        ("y = x + 2 + 3", "x+5"),  # a sum with a letter: its numbers added, no last term (was "3")
        ("5 + 2x = 9", "9"),
    ],
)
def test_plain_arithmetic_is_its_value(text: str, value: str) -> None:
    assert number(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2(3+4)", "14"),  # was "4": a number right before a bracket is its factor
        ("\\boxed{2\\left(3+4\\right)}", "14"),
        ("x = 3(2)", "6"),
        ("2 (3+4)", "2"),  # a space between, outside math: an aside in prose, as math-verify reads it (was 7)
        ("So we get 12 (3*4).", "12"),  # a reason in prose, as math-verify reads it (no 144)
        ("Answer: 4 (2+2)", "4"),
        ("\\boxed{2 (3+4)}", "14"),  # in math the space is LaTeX's: a product
        ("we get 2 (see step 3)", "3"),  # a bracket of words: prose, no product
        ("f(3+4)", "7f"),  # a letter before a bracket of an operator: its factor, as math-verify reads it (no 7)
        ("f(3)", "f(3)"),  # a function's application: no product, no number
        ("There are 2 (two) apples", "2"),  # a bracket of no value: its numbers as they are
    ],
)
def test_a_number_before_a_bracket_is_its_factor(text: str, value: str) -> None:
    assert number(text) == value


def test_plain_arithmetic_and_implicit_products_match_their_value_and_differ_from_their_parts() -> None:
    assert number("so x = 2 + 3") == number("5") == number("\\boxed{2+3}") == number("The answer is 2 + 3")
    assert number("so x = 2 + 3") not in (number("2"), number("3"), number("6"))
    assert number("2(3+4)") == number("14") == number("2 \\cdot 7") == number("\\boxed{2(3+4)}")
    assert number("2(3+4)") not in (number("2"), number("4"), number("7"), number("9"))
    assert number("x = 3 - 5") == number("-2") != number("x = 3 - 4")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2\\cdot(3+4)", "14"),  # was "7": a bracket after an operator went unmultiplied
        ("2 * (3+4)", "14"),
        ("2 \\cdot (3+4)", "14"),
        ("2 \\times \\left(3+4\\right)", "14"),
        ("-2 * (3+4)", "-14"),
        ("2 - (3+4)", "-5"),
        ("2 * (x+1)", "2x+2"),  # a bracket with a letter: its product (was "1"), opened
    ],
)
def test_a_bracket_after_an_operator_is_its_operand(text: str, value: str) -> None:
    assert number(text) == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{(2)(3)}", "6"),  # was "3", the last bracket's number: a product of brackets, as "2(3)" is
        ("\\boxed{(1)(2)}", "2"),
        ("\\boxed{(-2)(3)}", "-6"),  # was "3"
        ("\\boxed{(2)(3)(4)}", "24"),
        ("\\boxed{\\left(2\\right)\\left(3\\right)}", "6"),
        ("(2)(3)", "6"),
        ("(1) (2)", "2"),  # spaced in prose: a list's labels, no product
        ("(2) (3)", "3"),
        ("\\boxed{(2) (3)}", "6"),  # was "3": in math the space is LaTeX's, one rule with "(2)(3)"
        ("$(2) (3)$", "6"),
        ("\\boxed{\\left(2\\right) \\left(3\\right)}", "6"),
        ("\\boxed{(2)(3) (4)}", "24"),
        ("\\boxed{(2)3}", "6"),  # was "3": a number right after a bracket is its factor, as "2(3)" is
        ("\\boxed{(2) 3}", "6"),
        ("\\boxed{(-2) 3}", "-6"),
        ("\\boxed{(2)3.5}", "7"),
        ("(2)3", "6"),
    ],
)
def test_brackets_of_numbers_side_by_side_are_their_product(text: str, value: str) -> None:
    """math-verify reads "(2)(3)" as 5 (latex2sympy adds brackets of one number side by side, as a mixed
    number, though it multiplies "(1+1)(3)" and "(2) \\cdot (3)": the oracle's tests); LaTeX's is the product."""
    assert number(text) == value


def test_brackets_of_numbers_side_by_side_match_their_product_and_differ_from_their_sum() -> None:
    assert number("\\boxed{(2)(3)}") == number("\\boxed{6}") == number("\\boxed{2(3)}") == number("\\boxed{(2) \\cdot (3)}")
    assert number("\\boxed{(2)(3)}") not in (number("\\boxed{3}"), number("\\boxed{5}"))
    assert number("\\boxed{(2) (3)}") == number("\\boxed{(2)3}") == number("\\boxed{(2)(3)}")
    assert number("\\boxed{(2)3}") not in (number("\\boxed{3}"), number("\\boxed{5}"), number("\\boxed{23}"))


def test_a_bracket_after_an_operator_matches_the_implicit_product_and_differs_from_the_bracket() -> None:
    assert number("2\\cdot(3+4)") == number("2 * (3+4)") == number("2(3+4)") == number("14")
    assert number("2 \\cdot (3+4)") not in (number("(3+4)"), number("7"), number("2"), number("2 (3+4)"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2\\cdot\\sqrt{2}", "2\\sqrt{2}"),  # was "2": the root right after "\cdot" went unread
        ("2\\cdot\\sqrt{49}", "14"),  # was "49"
        ("2\\times\\sqrt2", "2\\sqrt{2}"),
        ("-2\\cdot\\sqrt{2}", "-2\\sqrt{2}"),
        ("\\boxed{2\\cdot\\frac{1}{2}}", "1"),  # was "0.5"
        ("x\\sqrt2", "\\sqrt{2}x"),  # a letter's product, its factors in one order (was "2")
    ],
)
def test_a_command_right_after_cdot_or_times_is_a_factor(text: str, value: str) -> None:
    assert number(text) == value


def test_a_product_without_spaces_matches_the_spaced_one_and_differs_from_its_factors() -> None:
    assert number("2\\cdot\\sqrt{2}") == number("2 \\cdot \\sqrt{2}") == number("\\sqrt{8}") == number("2\\times\\sqrt2")
    assert number("2\\cdot\\sqrt{49}") == number("14")
    assert number("2\\cdot\\sqrt{2}") not in (number("2"), number("\\sqrt{2}"), number("2\\sqrt{3}"))
    assert number("2\\cdot\\sqrt{49}") not in (number("49"), number("2"), number("7"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 \\cdot \\pi", "2\\pi"),  # was "\\pi": the factor of a product of no value was dropped
        ("2\\cdot\\pi", "2\\pi"),
        ("2 * \\pi", "2\\pi"),
        ("-2 \\cdot \\pi", "-2\\pi"),
        ("1.50 \\times \\pi", "\\frac{3\\pi}{2}"),
        ("2 \\cdot \\sqrt[3]{2}", "2\\sqrt[3]{2}"),
        ("x \\cdot \\pi", "\\pi x"),  # a letter's product (was "\\pi")
    ],
)
def test_a_number_times_an_expression_of_no_value_is_its_factor(text: str, value: str) -> None:
    assert number(text) == value


def test_a_factor_times_pi_matches_it_written_without_the_dot_and_differs_from_pi() -> None:
    assert number("2 \\cdot \\pi") == number("2\\cdot\\pi") == number("2\\pi") == number("\\boxed{2\\pi}")
    assert number("2 \\cdot \\pi") not in (number("\\pi"), number("2"), number("3\\pi"), number("-2\\pi"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Answer: 7 + 1 = 9", "9"),  # was "8": the text after the line's last "=", as math-verify reads it
        ("The answer is 7 + 1 = 9", "9"),
        ("Final answer: 3 + 4 = 7.", "7"),
        ("The answer is x = 5", "5"),
        ("Answer: 2x = 10, so x = 5", "5"),  # was "2", from "2x"
        ("Answer: 5 (since x = 3)", "3"),  # math-verify's reading too
        ("Answer: x = \\frac{1}{2}", "0.5"),
        ("Answer: 9 = 7 + 2", "9"),
        ("Answer: 7 = seven", "7"),  # no number after the "=": the line's first
        ("Answer: 5 " + "and so on " * 10 + "x = 3", "5"),  # an "=" past 100 characters is not read
        ("The answer is 12.\nCheck: 7 + 1 = 8", "12"),  # an "=" on a later line is not the answer's
    ],
)
def test_an_answer_line_gives_the_number_after_its_last_equals(text: str, value: str) -> None:
    assert number(text) == value


def test_an_answer_equation_matches_its_right_hand_side_and_differs_from_its_terms() -> None:
    assert number("Answer: 7 + 1 = 9") == number("9") == number("The answer is x = 9")
    assert number("Answer: 7 + 1 = 9") not in (number("8"), number("7"), number("1"))
    assert number("Answer: 2x = 10, so x = 5") == number("5") != number("Answer: 2x = 10, so x = 6")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3 × 4", "12"),  # was "4": Unicode's times sign, read as math-verify's LaTeX parser reads it
        ("\\boxed{3×4}", "12"),
        ("2 × 10^3", "2000"),
        ("12 ÷ 4", "3"),  # was "4"
        ("−5", "-5"),  # was "5": Unicode's minus sign
        ("The answer is −5", "-5"),
        ("\\boxed{−\\frac{1}{2}}", "-0.5"),
        ("5 − 2", "3"),
        ("5−2", "3"),  # a minus sign is no range's dash, as "5-2" is
        ("3 · 4", "4"),  # a middle dot is no product to math-verify either
    ],
)
def test_unicode_operators_and_minus_read_as_their_ascii_ones(text: str, value: str) -> None:
    assert number(text) == value


def test_unicode_operators_match_their_ascii_spelling_and_differ_from_their_last_number() -> None:
    assert number("3 × 4") == number("3 * 4") == number("12") and number("3 × 4") != number("4")
    assert number("12 ÷ 4") == number("12 / 4") != number("4")
    assert number("−5") == number("-5") != number("5")
    assert number("5−2") == number("5 - 2") != number("5-2")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12 ÷ 4 ÷ 2", "1.5"),  # was "2": a chained division read as a date
        ("12÷4÷2", "1.5"),  # a division sign is no date's slash
        ("12 / 4 / 2", "1.5"),  # spaced slashes: a chained division, as math-verify divides
        ("x = 12 / 4 / 2 / 3", "0.5"),
        ("12/4/2024", "2024"),  # unspaced: a date, no quotient
        ("12 / 4", "3"),
        ("1 1 / 2", "1.5"),  # a mixed number still
    ],
)
def test_a_chained_division_is_its_quotient(text: str, value: str) -> None:
    assert number(text) == value


def test_a_chained_division_matches_its_quotient_and_differs_from_its_last_number() -> None:
    assert number("12 ÷ 4 ÷ 2") == number("12 / 4 / 2") == number("\\frac{3}{2}") == number("1.5")
    assert number("12 ÷ 4 ÷ 2") not in (number("2"), number("3"), number("6"), number("12 ÷ 4 ÷ 3"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12 / 4 + 1", "4"),  # was "1": a quotient an operator follows is a term, as math-verify reads it
        ("12/4 + 1", "4"),
        ("x = 1/2 + 1", "1.5"),  # was "1"
        ("1/2 \\cdot 3", "1.5"),  # was "3"
        ("12 / 4 - 1", "2"),
        ("12/4-1", "1"),  # an unspaced "-" may be a range's: no difference
        ("12/4/2024 + 1", "1"),  # a date is no quotient
    ],
)
def test_a_quotient_before_another_operator_is_a_term(text: str, value: str) -> None:
    assert number(text) == value


def test_a_quotient_before_another_operator_matches_its_value_and_differs_from_its_last_term() -> None:
    assert number("12 / 4 + 1") == number("12/4 + 1") == number("4") == number("\\boxed{3 + 1}")
    assert number("12 / 4 + 1") not in (number("1"), number("3"), number("12 / 4 + 2"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 * -3", "-6"),  # was "-3": a minus after an operator is its operand's sign, as math-verify reads it
        ("2 \\cdot -3", "-6"),
        ("x = 2 * - 3", "-6"),
        ("-2 * -3", "6"),  # was "-3"
        ("6 / -2", "-3"),  # was "-2"
        ("6/-2", "-3"),
        ("2 - -3", "5"),  # was "-3"
        ("2 + -3", "-1"),
        ("2 * -\\sqrt{2}", "-2\\sqrt{2}"),
        ("2--3", "-3"),  # unspaced: a range's dash still, no difference
    ],
)
def test_a_minus_after_an_operator_is_its_operands_sign(text: str, value: str) -> None:
    assert number(text) == value


def test_a_signed_operand_matches_its_product_and_differs_from_the_unsigned_one() -> None:
    assert number("2 * -3") == number("2 \\cdot -3") == number("-6") == number("-2 \\cdot 3")
    assert number("2 * -3") not in (number("-3"), number("6"), number("2 * 3"))
    assert number("2 - -3") == number("5") != number("2 - 3")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{12/4/2}", "1.5"),  # was "2": read as a date; in a box it is arithmetic, as math-verify divides
        ("So $\\boxed{1/2/2}$.", "0.25"),
        ("\\boxed{12/4/2 + 1}", "2.5"),
        ("\\boxed{1/2}", "0.5"),  # one slash: a fraction still
        ("due 12/4/2", "2"),  # outside a box: a date still
    ],
)
def test_slashes_chained_in_a_box_are_a_quotient(text: str, value: str) -> None:
    assert number(text) == value


def test_a_boxed_slash_chain_matches_its_quotient_and_differs_from_its_last_number() -> None:
    assert number("\\boxed{12/4/2}") == number("\\boxed{12 / 4 / 2}") == number("\\frac{3}{2}") == number("1.5")
    assert number("\\boxed{12/4/2}") not in (number("2"), number("3"), number("\\boxed{12/4/3}"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 \\cdot 3\\pi", "6\\pi"),  # was "2\\cdot3\\pi": the numbers' product, the factor of \pi
        ("2\\cdot3\\cdot\\pi", "6\\pi"),  # was "\\pi"
        ("\\frac{1}{2}\\pi", "\\frac{\\pi}{2}"),  # was "\\pi": a fraction before \pi was dropped
        ("\\frac{2}{3} \\cdot \\pi", "\\frac{2\\pi}{3}"),
        ("\\frac12 \\cdot 4\\pi", "2\\pi"),
        ("\\sqrt8\\pi", "2\\sqrt{2}\\pi"),
        ("0 \\cdot \\pi", "0"),
        ("2 + 3 \\cdot \\pi", "3\\pi+2"),  # was "3\\pi": a sum is no product, as written
        ("2 + 3\\pi", "3\\pi+2"),
    ],
)
def test_numbers_before_pi_are_its_factor_by_their_product(text: str, value: str) -> None:
    assert number(text) == value


def test_a_product_with_pi_matches_its_value_and_differs_from_its_parts() -> None:
    assert number("2 \\cdot 3\\pi") == number("6\\pi") == number("2 * 3 * \\pi") == number("\\boxed{6 \\pi}")
    assert number("\\frac{1}{2}\\pi") == number("0.5\\pi") == number("\\frac12 \\cdot \\pi") == number("\\pi/2")
    assert number("2 \\cdot 3\\pi") not in (number("3\\pi"), number("2\\pi"), number("6"), number("5\\pi"))
    assert number("\\frac{1}{2}\\pi") not in (number("\\pi"), number("0.5"), number("2\\pi"))
    assert number("2 + 3\\pi") not in (number("5\\pi"), number("3\\pi"), number("5"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3 \\cdot 2^x", "3\\cdot2^{x}"),  # was "2^{x}": a number times a power of no value is its factor
        ("3 * 2^x", "3\\cdot2^{x}"),
        ("-3 \\times 2^x", "-3\\cdot2^{x}"),
        ("3 \\cdot 2^{99999}", "3\\cdot2^{99999}"),  # too large to compute: as written, its factor kept
        ("32^x", "32^{x}"),  # a base of two digits, no product
        ("x \\cdot 2^x", "2^{x}x"),  # a letter's product (was "2^{x}")
    ],
)
def test_a_number_times_a_power_of_no_value_is_its_factor(text: str, value: str) -> None:
    assert number(text) == value


def test_a_factor_of_a_power_of_no_value_matches_its_spellings_and_differs_from_the_power() -> None:
    assert number("3 \\cdot 2^x") == number("3\\times2^{x}") == number("\\boxed{3 * 2^x}")
    assert number("3 \\cdot 2^x") not in (number("2^x"), number("32^x"), number("3 \\cdot 3^x"), number("2"), number("3"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("-(2 * 3)", "-6"),  # was "6": a minus before a bracket is its sign, as math-verify reads it
        ("-(2+3)", "-5"),  # was "5"
        ("so -(2)", "-2"),
        ("(-(2+3))", "-5"),
        ("-\\left(2+3\\right)", "-5"),
        ("-(-(2+3))", "5"),
        ("1 -(2+3)", "-4"),
        ("x - (2+3)", "x-5"),  # spaced after an operand: a difference's minus, no sign of the bracket's
    ],
)
def test_a_minus_before_a_bracket_is_its_sign(text: str, value: str) -> None:
    assert number(text) == value


def test_a_signed_bracket_matches_its_value_and_differs_from_the_unsigned_one() -> None:
    assert number("-(2 * 3)") == number("-6") == number("-2 \\cdot 3") == number("\\boxed{-(6)}")
    assert number("-(2 * 3)") not in (number("(2 * 3)"), number("6"), number("-(2 * 4)"))
    assert number("-(2+3)") == number("-5") != number("2+3")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 * -2^x", "-2\\cdot2^{x}"),  # was "-2^{x}": the power's own sign dropped the factor before it
        ("2 \\times -3^{y}", "-2\\cdot3^{y}"),
        ("-2 * -2^x", "2\\cdot2^{x}"),
        ("2 * -2^{99999}", "-2\\cdot2^{99999}"),
    ],
)
def test_a_factor_before_a_signed_power_of_no_value_is_kept(text: str, value: str) -> None:
    assert number(text) == value


def test_a_signed_power_times_a_factor_matches_its_product_and_differs_from_the_power() -> None:
    assert number("2 * -2^x") == number("-2 \\cdot 2^x") == number("\\boxed{-2\\times2^{x}}")
    assert number("2 * -2^x") not in (number("-2^x"), number("2 \\cdot 2^x"), number("-2"), number("2 * -3^x"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("so - 2^x", "-2^{x}"),  # raised AssertionError: the base was looked for at the sign spaced from it
        ("2 * - 2^x", "-2\\cdot2^{x}"),
        ("- 2^{99999}", "-2^{99999}"),
    ],
)
def test_a_sign_spaced_from_a_power_of_no_value_is_its_sign(text: str, value: str) -> None:
    assert number(text) == value


def test_a_spaced_sign_before_a_power_matches_the_unspaced_one_and_differs_from_the_unsigned() -> None:
    assert number("so - 2^x") == number("-2^x") == number("\\boxed{-2^{x}}")
    assert number("so - 2^x") not in (number("2^x"), number("-2"), number("- 3^x"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3 \\cdot 2^x + 1", "3\\cdot2^{x}+1"),  # was "1": a sum with a term of no value gave its last number
        ("2^x + 1", "2^{x}+1"),  # was "1"
        ("\\boxed{2^x + 1}", "2^{x}+1"),  # was "1"
        ("1 + 2^x", "2^{x}+1"),  # was "2^{x}"
        ("1 - 2^x", "-2^{x}+1"),
        ("1 + \\pi", "\\pi+1"),  # was "\\pi"
        ("\\pi + 1", "\\pi+1"),  # was "1"
        ("2\\pi + 1", "2\\pi+1"),  # was "1"
        ("\\frac{\\pi}{2} + 1", "\\frac{\\pi}{2}+1"),  # was "1"
        ("\\sqrt{x} + 1", "\\sqrt{x}+1"),  # was "1"
        ("\\sqrt[3]{2} + 1", "\\sqrt[3]{2}+1"),  # was "1"
        ("9^{99999} + 1", "9^{99999}+1"),  # was "1"
        ("\\frac{1}{0} + 2", "\\frac{1}{0}+2"),  # was "2"
        ("\\sqrt2 + 2^x", "2^{x}+\\sqrt{2}"),  # was "2^{x}"
        ("2^x + y", "2^{x}+y"),  # was "2^{x}"
        ("2^x + 3 * 4", "2^{x}+12"),  # was "4"
        ("The answer is 2^x + 1.", "2^{x}+1"),
        ("so - 2^x", "-2^{x}"),  # a word of prose is no term
        ("2^x, 3", "3"),  # no sum: a list
        ("2^{10} + 1", "1025"),  # a sum of values is its value still
    ],
)
def test_a_sum_with_a_term_of_no_value_is_one_expression(text: str, value: str) -> None:
    assert number(text) == value


def test_a_sum_with_a_term_of_no_value_matches_its_spellings_and_differs_from_its_terms() -> None:
    assert number("2^x + 1") == number("2^{x}+1") == number("\\boxed{2^x + 1}") == number("1 + 2^x")
    assert number("3 \\cdot 2^x + 1") == number("3 \\times 2^{x} + 1") == number("3 * 2^x + 1")
    assert number("2^x + 1") not in (number("1"), number("2^x"), number("2^x + 2"), number("2^x - 1"), number("3"))
    assert number("3 \\cdot 2^x + 1") not in (number("1"), number("3 \\cdot 2^x"), number("2^x + 1"), number("4"))
    assert number("1 + \\pi") not in (number("\\pi"), number("1"), number("\\pi + 2"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3\\pi \\cdot 2", "6\\pi"),  # was "2": a number after \pi is its factor, as math-verify multiplies
        ("\\pi \\cdot 2", "2\\pi"),  # was "2"
        ("-\\pi * 3", "-3\\pi"),
        ("2 \\cdot \\pi \\cdot 3", "6\\pi"),
        ("\\frac{1}{2}\\pi \\cdot 4", "2\\pi"),
        ("3\\pi \\cdot 2 + 1", "6\\pi+1"),
        ("3\\pi \\cdot 0", "0"),
        ("3\\pi \\cdot 2^x", "3\\pi\\cdot2^{x}"),  # was "2^{x}": a product of no value, as written
        ("3\\pi \\cdot 2\\pi", "6\\pi\\pi"),  # was "2\\pi"
        ("3\\pi \\cdot 2x", "6\\pi x"),  # was "2"
    ],
)
def test_numbers_after_pi_are_its_factor_by_their_product(text: str, value: str) -> None:
    assert number(text) == value


def test_a_product_after_pi_matches_its_value_and_differs_from_its_parts() -> None:
    assert number("3\\pi \\cdot 2") == number("6\\pi") == number("2 \\cdot 3\\pi") == number("\\boxed{\\pi \\times 6}")
    assert number("3\\pi \\cdot 2") not in (number("2"), number("3\\pi"), number("6"), number("3\\pi \\cdot 3"))
    assert number("3\\pi \\cdot 2^x") not in (number("2^x"), number("3\\pi"), number("6\\pi"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("x + 1", "x+1"),  # was "1": a sum with a single-letter variable gave its last number
        ("2 + 3x", "3x+2"),  # was "3"
        ("2^3 + 4x", "4x+8"),  # was "4"
        ("x + 2^3", "x+8"),  # was "8"
        ("-(x+1)", "-x-1"),  # was "1"; a whole number times a bracket of a sum is opened
        ("2(x+1)", "2x+2"),  # was "1"
        ("x - (2+3)", "x-5"),  # was "5"
        ("y = x + 2 + 3", "x+5"),  # was "3"
        ("The answer is x + 1.", "x+1"),
        ("\\boxed{x+1}", "x+1"),
        ("x = 2 + 3", "5"),  # an equation's right-hand side is its answer still
        ("x + 1 = 5", "5"),
        ("so 2 + 3", "5"),  # a word of prose is no term
        ("total + 5", "5"),
        ("I have 3 apples + 2", "2"),
        ("1e-40", "1E-40"),  # a number's exponent is no letter
    ],
)
def test_a_sum_with_a_single_letter_variable_is_one_expression(text: str, value: str) -> None:
    assert number(text) == value


def test_a_sum_with_a_letter_matches_its_spellings_and_differs_from_its_numbers() -> None:
    assert number("x + 1") == number("x+1") == number("\\boxed{x + 1}") == number("The answer is x + 1")
    assert number("x + 1") not in (number("1"), number("x + 2"), number("x - 1"), number("y + 1"))
    assert number("2 + 3x") not in (number("3"), number("2"), number("5"), number("2 + 3y"))
    assert number("-(x+1)") not in (number("1"), number("-1"), number("(x+1)"))
    assert number("x - (2+3)") not in (number("5"), number("-5"), number("x - (2+4)"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("e^2", "e^{2}"),  # was None (math-verify's exp(2))
        ("\\boxed{e^{2}}", "e^{2}"),
        ("2e^2", "2e^{2}"),  # was "2", its factor
        ("-e^2", "-e^{2}"),
        ("x^2", "x^{2}"),
        ("e^x + 1", "e^{x}+1"),  # was "1"
        ("e^2 = 7.389", "7.389"),  # an equation's right-hand side
        ("50 m^2", "50"),  # a unit's power after a number
        ("1e5^2", "10000000000"),  # a number's exponent, no letter
    ],
)
def test_a_letters_power_is_one_expression(text: str, value: str) -> None:
    assert number(text) == value


def test_a_letters_power_matches_itself_and_differs_from_its_numbers() -> None:
    assert number("e^2") == number("e^{2}") == number("\\boxed{e^2}") == number("The answer is e^2.")
    assert number("e^2") not in (number("2"), number("e^3"), number("x^2"), number("-e^2"), None)
    assert number("2e^2") not in (number("2"), number("e^2"), number("2e^3"))
    assert number("e^x + 1") not in (number("1"), number("e^x"), number("e^x + 2"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2^x \\cdot 3", "3\\cdot2^{x}"),  # was "3": a number after a power of no value is its factor
        ("-2^x * 3", "-3\\cdot2^{x}"),
        ("3 \\cdot 2^x \\cdot 2", "6\\cdot2^{x}"),
        ("2^x \\cdot 0.5", "\\frac{2^{x}}{2}"),
        ("2^x \\times 0", "0"),
        ("\\sqrt{2} \\cdot 2^x", "\\sqrt{2}\\cdot2^{x}"),  # was "2^{x}": the root's factor lost
        ("\\sqrt[3]{2} \\cdot 3", "3\\sqrt[3]{2}"),  # was "3"
        ("2^3 \\cdot x", "8x"),  # was "2^{3}": a power of a number is its value, as "8x" is
    ],
)
def test_a_product_after_an_expression_of_no_value_is_part_of_it(text: str, value: str) -> None:
    assert number(text) == value


def test_a_product_after_a_power_matches_the_one_before_it_and_differs_from_its_parts() -> None:
    assert number("2^x \\cdot 3") == number("3 \\cdot 2^x") == number("\\boxed{2^{x} * 3}")
    assert number("2^x \\cdot 3") not in (number("3"), number("2^x"), number("2^x \\cdot 4"), number("6"))
    assert number("2^x \\cdot 0.5") == number("0.5 \\cdot 2^x") != number("2^x")
    assert number("\\sqrt{2} \\cdot 2^x") not in (number("2^x"), number("\\sqrt{2}"), number("\\sqrt{3} \\cdot 2^x"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2 \\cdot x", "2x"),  # was "2": a product with a letter gave its number
        ("2x", "2x"),  # was "2"
        ("\\boxed{3x}", "3x"),  # was "3"
        ("x \\cdot 3", "3x"),  # was "3": its number first
        ("2 * y", "2y"),  # was "2"
        ("2 \\times x \\cdot 3", "6x"),  # its numbers multiplied
        ("-2 \\cdot x", "-2x"),
        ("x \\cdot y", "xy"),  # was None
        ("2 \\cdot x + 1", "2x+1"),  # a sum's product too (was "2\\cdot x+1")
        ("(x+1) \\cdot y", "xy+y"),  # multiplied out, as "y(x+1)" is: no function "y(x+1)"
        ("(x+\\sqrt{2}) \\cdot y", "y\\cdot(x+\\sqrt{2})"),  # a root's, no polynomial: a dot before the bracket
        ("x = 3", "3"),  # a letter alone is no product
        ("5 m", "5"),  # a letter after a number and a space: its unit
        ("3 apples", "3"),
        ("5 m \\cdot s", "5"),
        ("32^x", "32^{x}"),  # a base of two digits, no product
        ("x \\cdot -3", "-3x"),  # was "-3": a minus after the operator is its factor's sign, as in "2 * -3"
        ("\\boxed{x * -3}", "-3x"),
        ("x \\cdot -1", "-x"),
        ("-x \\cdot -3", "3x"),
        ("2 - x \\cdot -3", "3x+2"),  # the product's sign joins the sum's
    ],
)
def test_a_product_with_a_single_letter_variable_is_one_expression(text: str, value: str) -> None:
    assert number(text) == value


def test_a_product_with_a_letter_matches_its_spellings_and_differs_from_its_numbers() -> None:
    assert number("2 \\cdot x") == number("2x") == number("2*x") == number("\\boxed{2 \\times x}") == number("x \\cdot 2")
    assert number("x \\cdot 3") == number("3x") == number("3 * x")
    assert number("2 \\cdot x \\cdot 3") == number("6x")
    assert number("2 \\cdot x") not in (number("2"), number("x"), number("3x"), number("2y"), number("2 \\cdot x + 1"))
    assert number("x \\cdot 3") not in (number("3"), number("2x"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2xy", "2xy"),  # was "2": letters after a number that are no unit are a product's
        ("\\boxed{2yx}", "2xy"),  # its factors in the one order
        ("x2y", "2xy"),
        ("3xy^2", "3xy^{2}"),
        ("2xy + 1", "2xy+1"),
        ("v2", "2v"),  # a letter before its number: the product still, numbers first
        ("\\pi x", "\\pi x"),  # was "\\pi": LaTeX's space after a command is no gap
        ("2\\pi x", "2\\pi x"),
        ("\\sqrt{2} x", "\\sqrt{2}x"),  # was "\\sqrt{2}"
        ("2\\cdot x", "2x"),  # was "2"
        ("10km", "10"),  # a unit: no product
        ("the 2nd", "2"),
        ("I have 5apples", "5"),  # a word of four letters or more is prose
        ("5pears", "5"),
        ("I have 5 apples", "5"),
        ("2xyzw", "2wxyz"),  # was "2": four letters with no vowel are no word but a product
        ("\\boxed{3bcdf}", "3bcdf"),  # was "3"
    ],
)
def test_a_product_of_letters_is_read_whole(text: str, value: str) -> None:
    assert number(text) == value


def test_a_product_of_letters_matches_its_other_orders_and_differs_from_its_prefix() -> None:
    assert number("2xy") == number("2yx") == number("x2y") == number("2 \\cdot x \\cdot y") == number("\\boxed{2xy}")
    assert number("2xy") not in (number("2"), number("2x"), number("2xz"), number("3xy"), number("xy"))
    assert number("\\pi x") == number("x\\pi") == number("x \\cdot \\pi") != number("\\pi")
    assert number("\\pi x") not in (number("\\pi y"), number("2\\pi x"), number("x"))
    assert number("v2") == number("2v") == number("2 \\cdot v") != number("2")
    assert number("v2") not in (number("v3"), number("2u"))
    assert number("2xyzw") == number("2wxyz") == number("2 \\cdot x \\cdot y \\cdot z \\cdot w")
    assert number("2xyzw") not in (number("2"), number("2xyz"), number("3xyzw"), number("2xyzv"))
    assert number("5apples") == number("5 apples") == number("5") != number("6apples")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("xy", "xy"),  # was None, while "x \\cdot y" read xy
        ("\\boxed{yx}", "xy"),  # was None
        ("$xy$", "xy"),
        ("\\boxed{y x}", "xy"),  # was "\\boxed{y", a broken spelling
        ("-xy", "-xy"),
        ("The answer is xy.", "xy"),  # was None
        ("xyzw", "wxyz"),  # no vowel: no word
        ("\\frac{1}{2}xy", "\\frac{xy}{2}"),  # was "0.5", a part
        ("km", None),  # a unit alone
        ("word", None),  # a word of prose
        ("so 2 + 3", "5"),  # letters that are not all the answer are prose
        ("The answer is 5 and xy", "5"),
    ],
)
def test_letters_that_are_the_whole_answer_are_their_product(text: str, value: str | None) -> None:
    assert number(text) == value


def test_a_product_of_letters_alone_matches_it_written_with_a_dot_and_differs_from_others() -> None:
    assert number("xy") == number("x \\cdot y") == number("\\boxed{y x}") == number("\\boxed{yx}") == number("x*y")
    assert number("xy") not in (number("xz"), number("x"), number("2xy"), number("-xy"), None)
    assert number("\\frac{1}{2}xy") == number("\\frac{xy}{2}") == number("0.5xy") != number("\\frac{xy}{3}")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{xy + 1}", "xy+1"),  # was "1": inside math, letters are variables, no word of prose
        ("$xy + 1$", "xy+1"),
        ("\\(xy+1\\)", "xy+1"),
        ("\\[xy+1\\]", "xy+1"),
        ("$$xy + 1$$", "xy+1"),
        ("The answer is $xy + 1$.", "xy+1"),
        ("$1 + xy$", "xy+1"),  # the terms in one order, as "$xy + 1$" is
        ("$x y + 1$", "xy+1"),  # was "y+1": LaTeX ignores the space
        ("\\boxed{yx + 1}", "xy+1"),
        ("\\boxed{2abcd}", "2abcd"),  # was "2": after a number, four letters with a vowel are no word in math
        ("\\boxed{abcd + 1}", "abcd+1"),
        ("xy + 1", "1"),  # outside math, prose: as math-verify reads the text
        ("so 2 + 3", "5"),
        ("total + 5", "5"),
        ("5apples", "5"),
        ("It costs $5 and so is $6", "6"),  # money, no math: a closing dollar has no space before it
        ("\\boxed{5\\text{ apples}}", "5"),  # text is no product
        ("\\boxed{5 apples}", "5"),  # a unit after a number and a space, in math too
        ("\\boxed{The answer is 5}", "5"),  # words spaced are prose written without \\text
    ],
)
def test_letters_inside_math_are_a_product(text: str, value: str) -> None:
    assert number(text) == value


def test_a_known_answer_written_bare_is_read_as_math() -> None:
    """A reference "xy + 1" read 1, as prose: "\\boxed{1}" scored right against it, "\\boxed{xy+1}" wrong."""
    g = grader("number")
    assert g.known("xy + 1") == g.read("\\boxed{xy + 1}") == g.known("$x y + 1$") == "xy+1"
    assert g.known("xy + 1") not in (g.read("\\boxed{1}"), g.read("xy + 1"), g.known("xz + 1"))
    assert g.known("2abcd") == g.read("\\boxed{2abcd}") != g.known("2")
    assert g.known(" 72 ") == g.read("#### 72") == g.known("72 apples") == "72" != g.known("73")
    assert g.known("costs $5 and so is $6") == "6"  # delimited already (money): read as written
    assert g.known("no number") == "no number" and grader("regex:(x+)").known("xx + 1") == "xx"  # no math for others


@pytest.mark.parametrize(
    ("text", "spelled"),
    [
        ("so $xy$ and xy", "so $x \\cdot y$ and xy"),  # math only
        (
            "\\boxed{abc} \\(pq\\) \\[x y\\] $$uv$$",
            "\\boxed{a \\cdot b \\cdot c} \\(p \\cdot q\\) \\[x \\cdot y\\] $$u \\cdot v$$",
        ),
        ("it costs $5 and so is $6", "it costs $5 and so is $6"),  # money: no math between the dollars
        ("$5$ and $6$ so xy", "$5$ and $6$ so xy"),
        (
            "\\boxed{2\\text{ cm} + a_{ij} + \\sqrt{x}}",
            "\\boxed{2\\text{ cm} + a_{ij} + \\sqrt{x}}",
        ),  # text, subscripts, commands
        ("$a__b + x_$", "$a__b + x_$"),  # a "_" of no subscript: as written (it failed an assertion)
        ("$5 km$, $2km$", "$5 km$, $2k \\cdot m$"),  # a unit after a space; attached, ``number`` reads it first
        ("\\boxed{The answer is 5}", "\\boxed{The answer is 5}"),  # words spaced: prose
    ],
)
def test_only_letters_inside_math_are_spelled_as_products(text: str, spelled: str) -> None:
    assert multiplied(text) == spelled


def test_letters_inside_math_match_their_product_and_differ_from_the_terms_without_them() -> None:
    assert number("\\boxed{xy + 1}") == number("\\boxed{x \\cdot y + 1}") == number("$x y + 1$") == number("\\(yx+1\\)")
    assert number("\\boxed{xy+1}") not in (
        number("\\boxed{1}"),
        number("\\boxed{xz + 1}"),
        number("\\boxed{xy + 2}"),
        number("\\boxed{xy}"),
    )
    assert number("\\boxed{2abcd}") == number("\\boxed{2 \\cdot a \\cdot b \\cdot c \\cdot d}") == number("$2dcba$")
    assert number("\\boxed{2abcd}") not in (number("\\boxed{2}"), number("\\boxed{2abc}"), number("\\boxed{3abcd}"))
    assert number("xy + 1") == number("1") != number("$xy + 1$")  # outside math, prose is no term


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("x/2", "\\frac{x}{2}"),  # was "x/2", another answer than "\\frac{x}{2}"
        ("\\boxed{x / 2}", "\\frac{x}{2}"),
        ("1/x", "\\frac{1}{x}"),
        ("(x+1)/2", "\\frac{x}{2}+0.5"),  # a bracket around a part is none; multiplied out, as "0.5x+0.5" is
        ("2x/3 + 1", "\\frac{2x}{3}+1"),
        ("x/2y", "\\frac{x}{2y}"),  # the divisor all after the "/", as math-verify reads it
        ("x^2/2", "\\frac{x^{2}}{2}"),
        ("x/2 \\cdot 3", "\\frac{3x}{2}"),  # 3x/2, as math-verify reads it (``polynomial``; it was as written), never x over 6
        ("2^x/2", "\\frac{2^{x}}{2}"),  # was "2", its divisor: the letter only in an exponent
        ("\\boxed{2^{x} / 3}", "\\frac{2^{x}}{3}"),  # was "3"
        ("x^{1/2}", "x^{1/2}"),  # was "\\frac{x^{1}{2}}": an exponent's slash is no quotient's
        ("2^{x/2} + 1", "2^{x/2}+1"),
    ],
)
def test_a_quotient_with_a_letter_is_spelled_as_its_fraction(text: str, value: str) -> None:
    assert number(text) == value


def test_a_quotient_matches_its_fraction_and_differs_from_other_quotients() -> None:
    assert number("x/2") == number("\\frac{x}{2}") == number("\\dfrac{x}{2}") == number("The answer is x / 2.")
    assert number("x/2") not in (number("x/3"), number("\\frac{x}{3}"), number("2/x"), number("x"), number("2"))
    assert number("(x+1)/2") == number("\\frac{x+1}{2}") != number("\\frac{x+2}{2}")
    assert number("x^2/2") == number("\\frac{x^2}{2}") != number("\\frac{x^3}{2}")
    assert number("2^x/2") == number("\\frac{2^x}{2}") == number("2^x / 2") == number("\\boxed{2^{x}/2}")
    assert number("2^x/2") not in (number("2"), number("2^x"), number("2^x/3"), number("\\frac{2^y}{2}"))
    assert number("x^{1/2}") == number("x^{1/2}.") not in (number("x^{1/3}"), number("\\frac{x}{2}"), number("2"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0.5x", "\\frac{x}{2}"),  # was "0.5x", another answer than "x/2"
        ("\\frac{1}{2}x", "\\frac{x}{2}"),  # was "\\frac{1}{2}x"
        ("x \\cdot 0.5", "\\frac{x}{2}"),
        ("-0.5x", "-\\frac{x}{2}"),
        ("1.5x", "\\frac{3x}{2}"),
        ("\\frac{3}{2}x", "\\frac{3x}{2}"),
        ("\\frac{6x}{4}", "\\frac{3x}{2}"),  # reduced
        ("2x/4", "\\frac{x}{2}"),
        ("0.5x^2", "\\frac{x^{2}}{2}"),
        ("0.5(x+1)", "\\frac{x}{2}+0.5"),  # as "(x+1)/2" is
        ("\\frac{1}{2}x + 1", "\\frac{x}{2}+1"),
        ("\\frac{x}{2y}", "\\frac{x}{2y}"),  # a letter in the divisor: as written
        ("1.5\\pi", "\\frac{3\\pi}{2}"),  # a multiple of \\pi as a letter's
    ],
)
def test_a_rational_times_letters_is_one_fraction(text: str, value: str) -> None:
    assert number(text) == value


def test_a_rational_times_letters_matches_its_quotient_and_differs_from_other_multiples() -> None:
    assert number("\\frac{1}{2}x") == number("0.5x") == number("x/2") == number("\\frac{x}{2}") == number("x \\cdot 0.5")
    assert number("0.5x") not in (number("x/3"), number("0.5y"), number("x"), number("0.5"), number("2x"), number("-0.5x"))
    assert number("1.5x") == number("\\frac{3x}{2}") == number("3x/2") != number("\\frac{3x}{4}")
    assert number("0.5(x+1)") == number("(x+1)/2") != number("0.5(x+2)")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("10s", "10"),  # was "10s": a unit right after its number read as a product
        ("10 s", "10"),
        ("10 seconds", "10"),
        ("\\boxed{10s}", "10"),
        ("The answer is 10s.", "10"),
        ("5kg", "5"),
        ("3.5cm", "3.5"),
        ("x = 10m", "10"),
        ("2s + 3t", "2s+3t"),  # an operator after it: a sum's term, no unit
        ("10s \\cdot 2", "20s"),
        ("3t", "3t"),  # no unit's letter: a product
        ("50m^2", "50"),  # was "50m^{2}", while "50 m^2" read 50: a unit's power is the unit's
        ("\\boxed{5cm^{3}}", "5"),
        ("50 m^2", "50"),
        ("3x^2", "3x^{2}"),  # no unit's letter: a product still
        ("2m^2 + 1", "2m^{2}+1"),  # an operator after it: a sum's term
        ("5m/s", "5"),  # was "\\frac{5m}{s}", while "5 m/s" read 5: a unit per unit is the unit's
        ("9.8m/s^2", "9.8"),
        ("$5m/s$", "5"),  # in math too, as "\\boxed{5 m/s}" and "\\boxed{50m^2}" are
        ("\\boxed{5m/s}", "5"),
        ("60mi/h", "60"),
        ("5m/2", "\\frac{5m}{2}"),  # no unit after the "/": a quotient still
        ("5m/x", "\\frac{5m}{x}"),
        ("5m/s + 1", "\\frac{5m}{s}+1"),  # an operator after it: a sum's term
        ("\\boxed{10\\text{ m/s}}", "10"),  # was "\\frac{m}{s}}": words in \\text are prose, its unit here
        ("\\boxed{10\\text{ m/s}^2}", "10"),  # its power too: never 100
        ("$50 \\text{ cm}^{2}$", "50"),
        ("\\boxed{\\textbf{5}}", "5"),  # a number in \\text is read
    ],
)
def test_a_unit_right_after_its_number_is_its_unit(text: str, value: str) -> None:
    assert number(text) == value


def test_a_unit_written_either_way_matches_the_number_and_differs_from_other_numbers() -> None:
    assert number("10s") == number("10 s") == number("10 seconds") == number("10") == number("\\boxed{10s}")
    assert number("10s") not in (number("11s"), number("10x"), number("1"), number("100"))
    assert number("2s + 3t") not in (number("2"), number("3t"), number("2s + 3u"))
    assert number("50m^2") == number("50 m^2") == number("50") == number("50m") != number("50x^2")
    assert number("50m^2") not in (number("5"), number("2"), number("51 m^2"))
    assert number("5m/s") == number("5 m/s") == number("\\boxed{5m/s}") == number("$5 m/s$") == number("5")
    assert number("5m/s") not in (number("6m/s"), number("\\frac{5m}{x}"), number("5m/2"), number("s"))
    assert number("\\boxed{10\\text{ m/s}}") == number("\\boxed{10 \\text{ m/s}^2}") == number("10 m/s") == number("10")
    assert number("\\boxed{10\\text{ m/s}}") not in (number("\\boxed{11\\text{ m/s}}"), number("\\frac{m}{s}"), number("100"))


def test_a_signed_factor_of_a_product_matches_the_signed_product_and_differs_from_its_parts() -> None:
    assert number("x \\cdot -3") == number("-3x") == number("-3 \\cdot x") == number("\\boxed{x \\times -3}")
    assert number("x \\cdot -3") not in (number("-3"), number("3x"), number("x \\cdot 3"), number("x \\cdot -2"))
    assert number("2 - x \\cdot -3") == number("2 + 3x") != number("2 - 3x")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("f(2)^2", "f(2)^{2}"),  # was "2": a function's application gave its argument
        ("f(2)", "f(2)"),  # was "2"
        ("\\boxed{f(2)^2}", "f(2)^{2}"),  # was "2"
        ("2f(3)", "2f(3)"),  # was "3"
        ("\\sin(2)", "\\sin(2)"),  # was "2"
        ("\\sin\\left(2\\right)", "\\sin(2)"),  # was "2"
        ("\\log_2(8)", "\\log_2(8)"),  # was "8"
        ("f(2) = 5", "5"),  # an equation's right-hand side
        ("I have (a) 3", "3"),
        ("\\sin 2", "\\sin(2)"),  # was "2": a function's name without its bracket
        ("\\boxed{\\sin2}", "\\sin(2)"),  # was "2"
        ("sin(2)", "\\sin(2)"),  # was "2": its name as a word
        ("\\ln{2}", "\\ln(2)"),
        ("\\log_{2} 8", "\\log_2(8)"),  # was "8"
        ("\\sin 2x + 1", "\\sin(2x)+1"),
        ("basin(2)", "2"),  # a word that is no function's name
        ("I log (2) items", "2"),  # a word spaced from its bracket: prose, no logarithm
        ("sin 2", "\\sin(2)"),  # was "2": a name that is no English word, before its argument
        ("cos x", "\\cos(x)"),
        ("I log 2 items", "2"),  # "log", "sec": words of prose before a number
        ("see sec 2", "2"),
        ("\\sin^2 x", "\\sin(x)^{2}"),  # was None: the power on its name is its value's
        ("\\sin^2(x)", "\\sin(x)^{2}"),  # was "\\sin^{2}(x)", another answer than "\\sin(x)^2"
        ("\\sin^{-1} x", "\\sin^{-1}x"),  # an inverse, no power
    ],
)
def test_a_functions_application_is_no_number(text: str, value: str) -> None:
    assert number(text) == value


def test_a_functions_application_matches_its_spellings_and_differs_from_its_numbers() -> None:
    assert number("f(2)^2") == number("f(2)^{2}") == number("\\boxed{f(2)^2}") == number("The answer is f(2)^2.")
    assert number("f(2)^2") not in (number("2"), number("4"), number("f(2)"), number("f(3)^2"), number("g(2)^2"))
    assert number("\\sin(2)") not in (number("2"), number("\\cos(2)"), number("\\sin(3)"))
    assert number("\\sin 2") == number("sin(2)") == number("\\sin(2)") == number("\\sin{2}") == number("\\sin (2)")
    assert number("\\sin 2") not in (number("2"), number("\\cos 2"), number("\\sin 3"), number("sin(3)"), number("\\sin 2x"))
    assert number("\\log_2 8") == number("\\log_2(8)") not in (number("8"), number("3"), number("\\log_3 8"))
    assert number("sin 2") == number("\\sin 2") not in (number("2"), number("cos 2"), number("sin 3"), number("sin 2x"))
    assert number("\\sin^2 x") == number("\\sin(x)^2") == number("\\sin^2(x)") == number("\\boxed{\\sin^{2} x}")
    assert number("\\sin^2 x") not in (number("\\sin x"), number("\\sin^3 x"), number("\\cos^2 x"), number("2"), None)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2^x \\cdot \\sqrt{2}", "\\sqrt{2}\\cdot2^{x}"),  # was "2^{x}\\sqrt{2}": its factors in the order written
        ("\\sqrt{2} \\cdot 2^x", "\\sqrt{2}\\cdot2^{x}"),
        ("2^x \\cdot 3 + 1", "3\\cdot2^{x}+1"),  # was "2^{x}\\cdot3+1"
        ("\\pi\\sqrt2", "\\sqrt{2}\\pi"),  # was "\\pi\\sqrt{2}"
        ("(x+1)", "x+1"),  # was "(x+1)": brackets around the whole answer
        ("(2^x + 1)", "2^{x}+1"),
        ("-(x+1)", "-x-1"),  # a sign's bracket, no whole's: opened
        ("(x+1)(x-1)", "x^{2}-1"),  # multiplied out (``polynomial``)
        ("(x+1)(x-\\sqrt{2})", "(x+1)(x-\\sqrt{2})"),  # a root's: as written
        ("1e99999^2", "1E+99999^{2}"),  # a number's exponent, no sum's term
    ],
)
def test_a_products_factors_and_a_bracketed_whole_are_written_one_way(text: str, value: str) -> None:
    assert number(text) == value


def test_equal_products_in_another_order_match_and_others_differ() -> None:
    assert number("2^x \\cdot \\sqrt{2}") == number("\\sqrt{2} \\cdot 2^x") == number("\\boxed{\\sqrt2 \\times 2^x}")
    assert number("2^x \\cdot 3 + 1") == number("3 \\cdot 2^x + 1")
    assert number("(x+1)") == number("x+1") == number("\\boxed{(x + 1)}")
    assert number("2^x \\cdot \\sqrt{2}") not in (
        number("2^x"),
        number("\\sqrt{2}"),
        number("\\sqrt{3} \\cdot 2^x"),
        number("2^x + \\sqrt{2}"),
    )
    assert number("2^x \\cdot 3 + 1") not in (number("3 \\cdot 2^x"), number("2^x \\cdot 3 - 1"), number("1"))
    assert number("(x+1)") not in (number("-(x+1)"), number("(x+1)^2"), number("x-1"))


def test_an_answer_cut_short_inside_an_exponent_is_read_without_failing() -> None:
    """ "2^{2^x" (a stream stopped at its token limit) failed an assertion: compare stopped on it."""
    assert number("The answer is 2^{2^x") == number("\\boxed{2^{2^x") == "2"  # the number written, no power
    assert number("The answer is 2^{2^x}") == "2^{2^x}" != number("The answer is 2^{2^x")
    assert number("^{10^^") is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\boxed{x}", "x"),  # was None: a box's one letter is its answer, as math-verify reads it
        ("\\boxed{x }", "x"),  # was "\\boxed{x", a broken spelling
        ("\\boxed{ -x }", "-x"),
        ("\\boxed{x \\text{ m/s}}", "x"),  # was "\\boxed{x": the unit in \\text after a letter
        ("\\boxed{a_{ij}}", "a_{ij}"),  # was "\\boxed{a_{"
        ("\\boxed{a_{ij} + 1}", "a_{ij}+1"),  # was "1"
        ("\\boxed{a_{1}}", "a_1"),  # one variable however its subscript is braced
        ("\\boxed{a_{ij} \\cdot 2}", "2a_{ij}"),  # a subscripted factor in the product's order
        ("\\log_2(8)", "\\log_2(8)"),  # a command's subscript is no variable's
    ],
)
def test_a_boxed_letter_and_a_subscripted_variable_are_read_whole(text: str, value: str) -> None:
    assert number(text) == value


def test_a_boxed_letter_matches_its_spellings_and_differs_from_other_letters() -> None:
    assert number("\\boxed{x}") == number("\\boxed{ x }") == number("\\boxed{x \\text{ m/s}}") == number("$x$ is \\boxed{x}")
    assert number("\\boxed{x}") not in (number("\\boxed{y}"), number("\\boxed{-x}"), number("\\boxed{X}"), None)
    assert number("\\boxed{a_{ij}+1}") == number("\\boxed{a_{ij} + 1}") == number("\\boxed{1 + a_{ij}}")
    assert number("\\boxed{a_{ij}+1}") not in (number("\\boxed{1}"), number("\\boxed{a_{ji}+1}"), number("\\boxed{a_{ij}}"))
    assert number("\\boxed{a_1}") == number("\\boxed{a_{1}}") != number("\\boxed{a_2}")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("$1 + xy$", "xy+1"),  # was "1+xy", another answer than "$xy + 1$"
        ("-1 + x", "x-1"),
        ("1 - x", "-x+1"),  # each term keeps its sign
        ("$2 + x^2 - x$", "-x+x^{2}+2"),
        ("\\boxed{y + x}", "x+y"),
        ("\\boxed{2(1+x)}", "2x+2"),  # a bracket's sum too
        ("1 + 2^x", "2^{x}+1"),
    ],
)
def test_the_terms_of_a_sum_are_in_one_order(text: str, value: str) -> None:
    assert number(text) == value


def test_sums_in_another_order_match_and_other_sums_differ() -> None:
    assert number("x - 1") == number("-1 + x") == number("\\boxed{-1+x}") != number("1 - x")
    assert number("$1 + xy$") == number("$xy + 1$") != number("$xy - 1$")
    assert number("\\boxed{x + y}") == number("\\boxed{y + x}") != number("\\boxed{x - y}")
    assert number("\\boxed{2(1+x)}") == number("\\boxed{2(x+1)}") != number("\\boxed{2(x-1)}")
    assert number("1 - x") == number("-x + 1") != number("-1 - x")


@pytest.mark.parametrize(
    "spelling",
    ["1+x\\le2", "|x-1|+2", "x\\pm1+2", "1+{x", "x+-1", "x"],  # a relation, an absolute value, no sum
)
def test_a_sum_is_reordered_only_where_its_terms_are_a_sums(spelling: str) -> None:
    assert ordered_sum(spelling) == spelling


def test_a_fraction_parts_minus_is_its_terms_signs_flipped_not_its_first_character_cut() -> None:
    """``_product`` gives a fraction part's minus to the fraction by flipping each term's sign ("-x+1" is "x-1", never
    "x+1"); a part that is a sum is no product, so the fraction stays one factor, as written."""
    from fractions import Fraction

    from infertap.analysis.extract_number import _product

    assert _product("\\frac{-x}{2}", True) == (True, Fraction(1, 2), [(5, "x")])
    assert _product("\\frac{x}{-2}", True) == _product("\\frac{-x}{2}", True) != _product("\\frac{x}{2}", True)
    assert _product("\\frac{-x+1}{2}", True) == (False, Fraction(1), [(2, "\\frac{-x+1}{2}")])


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{x(x+1)}", "\\boxed{x^2+x}", True),  # was "x\\cdot(x+1)" and "x+x^{2}"
        ("\\boxed{x(x+2)}", "\\boxed{x^2+x}", False),
        ("\\boxed{(x+1)(x-1)}", "\\boxed{x^2-1}", True),
        ("\\boxed{(x+1)(x-1)}", "\\boxed{x^2+1}", False),
        ("\\boxed{2/(\\pi+1)}", "\\boxed{\\frac{2}{\\pi+1}}", True),  # was "2/(\\pi+1)", as written
        ("\\boxed{2/(\\pi+2)}", "\\boxed{\\frac{2}{\\pi+1}}", False),
        ("\\boxed{0.5(x+1)(x-1)}", "\\boxed{\\frac{x^2-1}{2}}", True),  # exact: Fractions, no float
        ("\\boxed{0.5(x+1)(x-1)}", "\\boxed{\\frac{x^2-1}{3}}", False),
    ],
)
def test_a_polynomial_with_a_bracket_is_read_multiplied_out(a: str, b: str, same: bool) -> None:
    """Without math-verify too: the built-in reading is one spelling per polynomial (``polynomial``)."""
    assert (number(a) == number(b)) is same, (number(a), number(b))


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{(x+1)^{13}}",  # a power past the largest multiplied out
        "\\boxed{(a+b+c+d+e+f+g+h)^{3}}",  # a product past the most terms
        "\\boxed{f(x)}",  # a function's application
        "\\boxed{(x+1)(x-\\sqrt{2})}",  # a root: no polynomial
        "\\boxed{1/(x-x)}",  # over zero: no value
    ],
)
def test_what_is_no_polynomial_of_ours_is_read_as_before(text: str) -> None:
    from infertap.analysis.extract_number import _read

    assert number(text) == _read(text) is not None


def test_a_fraction_of_a_sum_over_a_number_is_its_terms() -> None:
    """One spelling whether the divisor is the fraction's or the terms' ("\\frac{x+1}{2}" was another answer than
    "0.5x+0.5" and "\\frac{x}{2}+\\frac{1}{2}")."""
    assert number("\\boxed{\\frac{x+1}{2}}") == number("\\boxed{0.5x+0.5}") == number("\\boxed{\\frac{x}{2}+\\frac12}")
    assert number("\\boxed{\\frac{x+1}{2}}") != number("\\boxed{0.5x+1}")
    assert number("\\boxed{x/(2y)}") == number("\\boxed{\\frac{x}{2y}}") == "\\frac{x}{2y}"
    assert number("5m/2") == "\\frac{5m}{2}"  # read back as a unit's "m" (2.5): the reading as it was
