"""``number``'s readings against math-verify's, the oracle: two answers are one reading where math-verify
parses and verifies them as one, and two readings where it tells them apart. Each pair was read wrong
(different answers as one, or one answer as two)."""

from __future__ import annotations

import pytest

from infertap.analysis import unit_words
from infertap.analysis.extract import grader
from infertap.analysis.extract_number import number
from tests.extras import needs

math_verify = needs("math_verify", "math")


def _oracle_same(a: str, b: str) -> bool:
    return bool(math_verify.verify(math_verify.parse(a), math_verify.parse(b)))


def _assert_read_as_the_oracle_reads(a: str, b: str, same: bool) -> None:
    assert _oracle_same(a, b) is same, (a, b)  # the case is what it says it is
    assert number(a) is not None and number(b) is not None, (a, number(a), b, number(b))
    assert (number(a) == number(b)) is same, (a, number(a), b, number(b))


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\alpha + 1}", "\\boxed{1}", False),  # was 1 and 1: the Greek letter no term
        ("\\boxed{\\alpha + 1}", "\\boxed{\\beta + 1}", False),
        ("\\boxed{\\alpha + 1}", "$1 + \\alpha$", True),
        ("\\boxed{\\alpha}", "\\boxed{\\beta}", False),  # was None and None
        ("\\boxed{-\\theta_1}", "\\boxed{-\\theta_{1}}", True),
        ("\\boxed{2\\alpha}", "\\boxed{2}", False),  # was 2
        ("\\boxed{2\\alpha}", "\\boxed{\\alpha \\cdot 2}", True),
        ("\\boxed{\\alpha\\beta}", "\\boxed{\\beta \\alpha}", True),
        ("\\boxed{\\alpha x}", "\\boxed{x\\alpha}", True),
        ("\\boxed{\\alpha x}", "\\boxed{\\alpha}", False),
        ("\\boxed{\\sin \\theta}", "\\boxed{\\sin \\phi}", False),  # was None and None
        ("\\boxed{\\sin \\theta}", "\\boxed{\\sin(\\theta)}", True),
        ("\\boxed{\\pi + 1}", "\\boxed{1 + \\pi}", True),  # \\pi the constant, as it was
    ],
)
def test_a_greek_letter_is_a_variable_as_a_latin_one_is(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{x + 2 + 3}", "\\boxed{x + 5}", True),  # was "x+2+3" and "x+5"
        ("\\boxed{x + 2 + 3}", "\\boxed{x + 6}", False),
        ("\\boxed{2^3 + 4x}", "\\boxed{4x + 8}", True),  # was "4x+2^{3}" and "4x+8"
        ("\\boxed{2^3 + 4x}", "\\boxed{4x + 9}", False),
        ("\\boxed{x - 2 - 3}", "\\boxed{x - 5}", True),
        ("\\boxed{x - 2 - 3}", "\\boxed{x + 5}", False),
        ("\\boxed{x + 2 - 1}", "\\boxed{x + 1}", True),
        ("\\boxed{x - \\frac{1}{2}}", "\\boxed{x - 0.5}", True),
        ("\\boxed{x + \\frac{1}{3} + \\frac{1}{3}}", "\\boxed{x + \\frac{2}{3}}", True),
        ("\\boxed{(x + 2 + 3)^2}", "\\boxed{(x + 5)^2}", True),
        ("\\boxed{2 + \\pi + 3}", "\\boxed{\\pi + 5}", True),
    ],
)
def test_the_constant_terms_of_a_sum_are_added(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_constant_terms_are_added_exactly() -> None:
    """No float: terms that a float's rounding makes one sum are two answers (math-verify's own
    comparison is numeric, so this is no oracle's case)."""
    assert number("\\boxed{x + 0.1 + 0.2}") == number("\\boxed{x + 0.3}") == "x+0.3"
    assert number("\\boxed{x + 10^{20} + 1}") == "x+100000000000000000001" != number("\\boxed{x + 10^{20}}")
    assert number("\\boxed{x + \\frac{1}{3}}") == "x+\\frac{1}{3}" != number("\\boxed{x + 0.333333333333333333}")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(1+x)^2 y}", "\\boxed{(1+x)^2}", False),  # was "(x+1)^{2}" both: y lost
        ("\\boxed{(1+x)^2 y}", "\\boxed{(1+x)^2 z}", False),
        ("\\boxed{(1+x)^2 y}", "\\boxed{y \\cdot (x+1)^2}", True),
        ("\\boxed{(1+x)^2 y}", "\\boxed{(1+x)^2y}", True),
        ("\\boxed{(1+x)^{2} y}", "\\boxed{(1+x)^2 \\cdot y}", True),
        ("\\boxed{(1+x) y}", "\\boxed{1+x}", False),  # was "x+1" both
        ("\\boxed{(1+x) y}", "\\boxed{y \\cdot (x+1)}", True),
        ("\\boxed{x^2 y}", "\\boxed{x^2}", False),  # was "x^{2}" both
        ("\\boxed{x^2 y}", "\\boxed{x^2y}", True),
        ("\\boxed{(x+1) (x-1)}", "\\boxed{x-1}", False),  # was "x-1" both
        ("\\boxed{(x+1) (x-1)}", "\\boxed{(x-1)(x+1)}", True),
        ("\\boxed{(x+1)^2 (x-1)}", "\\boxed{1}", False),  # was "1" both
        ("\\boxed{(x+1)^{2} (x-1)}", "\\boxed{(x-1)(x+1)^2}", True),
        ("\\boxed{\\sqrt{2} (x+1)}", "\\boxed{\\sqrt{2}(x+1)}", True),
        ("\\boxed{2(\\pi+1)}", "\\boxed{\\pi+1}", False),  # was "\\pi+1" both: a bracket of no value, its factor lost
        ("\\boxed{2(\\pi+1)}", "\\boxed{2 (1+\\pi)}", True),
        ("\\boxed{-(\\pi+1)}", "\\boxed{\\pi+1}", False),  # its sign lost
        ("\\boxed{-(\\pi+1)}", "\\boxed{-(1+\\pi)}", True),
        ("\\boxed{2(\\sqrt{2}+1) + 1}", "\\boxed{1}", False),  # was 1
        ("\\boxed{2(\\sqrt{2}+1) + 1}", "\\boxed{1 + 2(1+\\sqrt{2})}", True),
        ("\\boxed{(\\pi+1)(\\pi-1)}", "\\boxed{\\pi-1}", False),  # was "\\pi-1"
        ("\\boxed{(\\pi+1)(\\pi-1)}", "\\boxed{(\\pi-1)(\\pi+1)}", True),
        ("\\boxed{(\\pi+1)2}", "\\boxed{2(\\pi+1)}", True),  # was 2
        ("\\boxed{1 - (\\pi+1)}", "\\boxed{\\pi+1}", False),  # was "\\pi+1" both: a subtracted bracket, its difference lost
        ("$1-(1+\\pi)$", "$\\pi+1$", False),
        ("\\boxed{1 - (\\pi+1)}", "$1-(1+\\pi)$", True),
        ("\\boxed{1 - (\\pi+1)}", "\\boxed{-\\pi}", True),  # was "-(\\pi+1)+1": the bracket opened, its constants added
        ("\\boxed{1 - (x+1)}", "\\boxed{-x}", True),
        ("\\boxed{1 - (x+1)}", "\\boxed{x}", False),
        ("\\boxed{1-(2+3)}", "\\boxed{5}", False),  # was 5
        ("\\boxed{1-(2+3)}", "\\boxed{-4}", True),
        ("\\boxed{\\sqrt{2}(\\pi+1)}", "\\boxed{\\pi+1}", False),  # was "\\pi+1" both: a command is a bracket's factor
        ("\\boxed{\\sqrt{2}(\\pi+1)}", "\\boxed{\\sqrt{2}}", False),
        ("\\boxed{\\sqrt{2}(\\pi+1)}", "\\boxed{\\sqrt{2}\\left(1+\\pi\\right)}", True),
        ("\\boxed{\\sqrt{2}(\\pi+1)^2}", "\\boxed{\\sqrt{2}(\\pi+1)}", False),
        ("\\boxed{(\\pi+1)\\sqrt{2}}", "\\boxed{\\sqrt{2}}", False),  # was "\\sqrt{2}" both: the bracket lost
        ("\\boxed{(\\pi+1)\\sqrt{2}}", "\\boxed{\\sqrt{2}(1+\\pi)}", True),
        ("\\boxed{(\\pi+1) \\cdot \\sqrt{2}}", "\\boxed{\\sqrt{2}(\\pi+1)}", True),
        ("\\boxed{\\frac{1}{2}(\\pi+1)}", "\\boxed{\\pi+1}", False),  # was "\\pi+1" both: a fraction is a factor too
        ("\\boxed{\\frac{1}{2}(\\pi+1)}", "\\boxed{\\frac12(1+\\pi)}", True),
        ("\\boxed{-\\frac{1}{2}(\\pi+1)}", "\\boxed{\\frac{1}{2}(\\pi+1)}", False),
    ],
)
def test_a_product_after_a_bracket_or_a_power_keeps_every_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_space_after_a_numbers_power_or_before_a_word_is_no_product() -> None:
    """A number's power and a letter after a space is the number and its unit, a bracket of words prose."""
    assert number("10^3 m") == number("1000") != number("10^4 m")
    assert number("(x+1) (see above)") == number("(x+1)") == "x+1"
    assert number("5 - (see above)") == number("5") == "5" != number("5 - (x)")
    assert number("\\sqrt{2}(see above)") == number("\\sqrt{2}") != number("\\sqrt{2}(x)")
    assert number("see (above) \\sqrt{2}") == number("(see above)\\sqrt{2}") == number("\\sqrt{2}") != number("(x)\\sqrt{2}")


def test_the_unit_words_are_math_verifys() -> None:
    """The words of three letters or more that math-verify strips as a unit are the ones read as a unit here."""
    from latex2sympy2_extended.math_normalization import units

    theirs = {u for u in units if u.isalpha() and len(u) >= 3} - {"integerpoint"}  # its "integer" "point", run together
    assert theirs == unit_words.UNIT_WORDS


@pytest.mark.parametrize("word", sorted(unit_words.UNIT_WORDS))
def test_a_unit_word_right_after_a_number_in_math_is_its_unit(word: str) -> None:
    for spelled in (word, word + "s"):  # "\\boxed{5apples}" was the product 5aelpps
        _assert_read_as_the_oracle_reads(f"\\boxed{{5{spelled}}}", "\\boxed{5}", True)
        _assert_read_as_the_oracle_reads(f"\\boxed{{5{spelled}}}", "\\boxed{6}", False)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{5apples}", "\\boxed{5}", True),  # was the product 5aelpps: "apple" is math-verify's unit word
        ("\\boxed{5apples}", "\\boxed{6}", False),
        ("$5hours$", "\\boxed{5}", True),
        ("\\boxed{5cats}", "\\boxed{5}", False),  # no unit of its: a product, as math-verify reads it
        ("\\boxed{5cats}", "\\boxed{5tsac}", True),
        ("\\boxed{5apples + 1}", "\\boxed{6}", False),  # a unit only at the end
        ("\\boxed{apples}", "\\boxed{sppale}", True),  # the whole answer: its letters in any order
        ("\\boxed{apples}", "\\boxed{5}", False),
    ],
)
def test_letters_after_a_number_are_its_unit_or_a_product_as_math_verify_reads_them(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_word_of_one_or_two_letters_is_no_unit_where_math_verify_strips_it() -> None:
    """math-verify strips "ab", "t" and others as units ("\\\\boxed{5ab}" is 5 there): two answers made one."""
    assert number("\\boxed{5ab}") == number("\\boxed{5 \\cdot b \\cdot a}") == "5ab" != number("\\boxed{5}")
    assert number("\\boxed{2s + 3t}") == "2s+3t" != number("\\boxed{2s + 3}")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{2^3 \\cdot x}", "\\boxed{8x}", True),  # was "2^{3}x" and "8x"
        ("\\boxed{2^3 \\cdot x}", "\\boxed{6x}", False),
        ("\\boxed{x \\cdot 2^{3} \\cdot 3}", "\\boxed{24x}", True),
        ("\\boxed{2^{-1} x}", "\\boxed{\\frac{x}{2}}", True),
        ("\\boxed{0.5 \\cdot 2^x}", "\\boxed{2^x}", False),  # a power of no value stays a factor
    ],
)
def test_a_power_of_a_number_in_a_product_is_its_value(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{x+1E+40}", "\\boxed{x+10^{40}}", True),  # was "1E+40+x" and "x+1E+40": its E a variable
        ("\\boxed{x+1E+40}", "\\boxed{x+10^{41}}", False),
        ("\\boxed{x+1E+5+1}", "\\boxed{x+100001}", True),  # was "1E+5+x+1": no number to add
        ("\\boxed{x+1E+5+1}", "\\boxed{x+100000}", False),
        ("\\boxed{x+1E5}", "\\boxed{x+100000}", True),  # was "5E+x", a product of 1, E and 5
        ("\\boxed{x+1E5}", "\\boxed{x+5E}", False),
        ("\\boxed{x+2.5E-3}", "\\boxed{0.0025+x}", True),
    ],
)
def test_scientific_notation_in_a_sum_is_a_number(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_lowercase_e_exponent_in_a_sum_is_a_number_as_alone() -> None:
    """math-verify reads "1e5" in a box as 5 times Euler's e, alone too ("\\\\boxed{1e5}"); the extractor
    reads it alone as 100000, so in a sum as well: "x+1e5" read "5e+x", another answer than "x+100000"
    (no oracle's case: here the oracle reads its own "e" as a constant)."""
    assert number("\\boxed{1e5}") == "100000"
    assert number("\\boxed{x+1e5}") == number("\\boxed{1e5 + x}") == number("\\boxed{x+100000}") == "x+100000"
    assert number("\\boxed{x+1e5}") not in (number("\\boxed{x+5e}"), number("\\boxed{x+1e6}"), number("\\boxed{x+5}"))
    assert number("\\boxed{x + 1.5e3}") == "x+1500"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{2 (x-1)}", "\\boxed{1}", False),  # was 1 and 1: the factor lost after a space
        ("\\boxed{2 (x-1)}", "\\boxed{2(x-1)}", True),
        ("\\boxed{2 (x-1)}", "\\boxed{2 (x+1)}", False),
        ("\\boxed{2 \\left(x-1\\right)}", "\\boxed{(x-1) \\cdot 2}", True),
        ("\\boxed{2 (x-1) + 3}", "\\boxed{3}", False),  # was 3 and 3
        ("\\boxed{2 (x-1) + 3}", "\\boxed{3 + 2(x-1)}", True),
        ("$2 (x-1)$", "$2(x-1)$", True),
        ("\\boxed{2 (3+4)}", "\\boxed{14}", True),  # was 7
        ("\\boxed{2 (3+4)}", "\\boxed{7}", False),
        ("\\boxed{2 (-1)}", "\\boxed{-2}", True),  # was -1
        ("There are 2 (two) apples", "2", True),  # prose in the bracket: no product
        ("So we get 12 (3*4).", "12", True),  # outside math a reason given in prose (no 144)
        ("So we get 12 (3*4).", "144", False),
    ],
)
def test_a_number_spaced_before_a_bracket_of_math_is_its_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("2 (x-1)", "2", True),  # was 1, the bracket's last number
        ("2 (x-1)", "1", False),
        ("2 (x-1)", "3 (x-1)", False),
        ("2 (x+1)", "2 (x-1)", True),  # the aside is no part of the answer
        ("We get 2 (x-1)^2 here", "2", True),  # was "x-1"
        ("2 (3+4)", "2", True),  # was 7
        ("2 (3+4)", "7", False),
        ("2 (3-1)", "2", True),  # was 1
        ("2 (x-1)", "$2 (x-1)$", False),  # in math the number is the bracket's factor
    ],
)
def test_outside_math_a_bracket_of_math_spaced_after_a_number_is_an_aside(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_an_aside_is_read_alike_however_its_operator_is_spaced() -> None:
    """math-verify reads "2 (x-1)" as 2 but "2 (x - 1)" as 1 and "2 (3 + 4)" as 4, its last number (its number
    pattern takes no number right after a letter): one answer written with more spaces. Here the spaces inside the
    aside change nothing."""
    assert _oracle_same("2 (x - 1)", "1") and _oracle_same("2 (x-1)", "2")  # the oracle's own split
    assert number("2 (x - 1)") == number("2 (x-1)") == number("2 (x -1)") == "2" != number("1")
    assert number("2 (3 + 4)") == number("2 (3+4)") == "2" not in (number("4"), number("7"))


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{5 xy}", "\\boxed{5}", False),  # was 5 and 5: its letters taken for a unit
        ("\\boxed{5 xy}", "\\boxed{5xy}", True),
        ("\\boxed{5 xy}", "\\boxed{5 yx}", True),
        ("\\boxed{5 xy}", "\\boxed{5 xyz}", False),
        ("\\boxed{5 x y}", "\\boxed{5xy}", True),  # was 5
        ("$5 xy$", "\\boxed{5 \\cdot x \\cdot y}", True),  # was 5
        ("\\boxed{5 xy + 1}", "\\boxed{1}", False),  # was 1 and 1
        ("\\boxed{5 xy + 1}", "\\boxed{1 + 5xy}", True),
        ("\\boxed{5 cats}", "\\boxed{5}", False),  # no unit: a product, as without the space
        ("\\boxed{5 km}", "\\boxed{5}", True),  # a unit still
        ("\\boxed{5 apples}", "\\boxed{5}", True),
        ("\\boxed{10 mins}", "\\boxed{10}", True),
        ("\\boxed{5 m \\pi}", "\\boxed{5}", False),  # was 5: a unit only at the end, not before more math
        ("\\boxed{5 m \\pi}", "\\boxed{m \\cdot 5\\pi}", True),
        ("\\boxed{5 m \\pi}", "\\boxed{5\\pi}", False),
        ("\\boxed{5m\\pi}", "\\boxed{5}", False),  # was 5
        ("\\boxed{5m\\pi}", "\\boxed{m \\cdot 5\\pi}", True),
        ("\\boxed{5 m \\sqrt{2}}", "\\boxed{5\\sqrt{2}}", False),
        ("\\boxed{5 km \\pi}", "\\boxed{\\pi}", False),  # was \\pi: the number lost
        ("\\boxed{5 km \\pi}", "\\boxed{5 k m \\pi}", True),
        ("\\boxed{5 xy \\pi}", "\\boxed{5\\pi xy}", True),  # was \\pi
        ("\\boxed{5 m}", "\\boxed{5}", True),  # at the end, a unit still
        ("\\boxed{5m}", "\\boxed{5}", True),
    ],
)
def test_letters_spaced_after_a_number_in_math_are_its_unit_or_a_product(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{y(1+x)^2}", "\\boxed{(1+x)^2 y}", True),  # was "y(1+x)^{2}" (y applied) and "y\\cdot(x+1)^{2}"
        ("\\boxed{y(1+x)^2}", "\\boxed{(1+x)^2}", False),
        ("\\boxed{y(1+x)^2}", "\\boxed{z(1+x)^2}", False),
        ("\\boxed{y(x+1)}", "\\boxed{(x+1)y}", True),  # was "y(x+1)" and "y\\cdot(x+1)"
        ("\\boxed{x(x+1)}", "\\boxed{(x+1) \\cdot x}", True),
        ("\\boxed{2y(x+1)}", "\\boxed{2(x+1)y}", True),
        ("\\boxed{y (x+1)}", "\\boxed{x+1}", False),  # was "x+1" both: y lost after its space
        ("\\boxed{y (x+1)}", "\\boxed{y(x+1)}", True),
        ("\\boxed{y (1+x)^2}", "\\boxed{(1+x)^2 y}", True),
        ("\\boxed{f(x)}", "\\boxed{xf}", False),  # a bracket of one variable: the function applied
        ("\\boxed{f(2)^2}", "\\boxed{4f}", False),
    ],
)
def test_a_letter_before_a_bracket_of_a_sum_is_its_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{2\\,(x+1)}", "\\boxed{x+1}", False),  # was "x+1" both: the thin space no space
        ("\\boxed{2\\,(x+1)}", "\\boxed{2(x+1)}", True),
        ("\\boxed{5\\,xy}", "\\boxed{5xy}", True),  # was "\\cdot y", a broken spelling
        ("\\boxed{5\\;xy}", "\\boxed{5}", False),  # was "xy"
        ("\\boxed{5\\!xy}", "\\boxed{5yx}", True),
        ("\\boxed{x\\,y}", "\\boxed{y \\cdot x}", True),  # was nothing
        ("\\boxed{10\\,\\text{m}}", "\\boxed{10}", True),
    ],
)
def test_latex_spacing_commands_are_spaces(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_thin_space_between_groups_of_three_digits_separates_thousands() -> None:
    """ "5\\\\,000" is 5000, as "5,000" is (math-verify reads 5*0, and "1\\\\,234\\\\,567" as 802: no oracle's case)."""
    assert number("\\boxed{5\\,000}") == number("5,000") == "5000" != number("\\boxed{0}")
    assert number("\\boxed{1\\,234\\,567}") == "1234567" != number("\\boxed{567}")
    assert number("\\boxed{5\\,000.5}") == "5000.5"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{0.123\\,456}", "\\boxed{456}", False),  # was 456 both: the decimals' groups apart
        ("\\boxed{0.123\\,456}", "\\boxed{0.123}", False),
        ("\\boxed{3.141\\,592\\,65}", "\\boxed{65}", False),
    ],
)
def test_a_thin_space_between_groups_of_decimals_is_no_product_of_its_groups(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_thin_space_between_groups_of_decimals_joins_them() -> None:
    """ "0.123\\,456" is 0.123456, as the decimals' groups are set (math-verify reads 0.123*456: no oracle's case);
    a first group of other than three decimals, or a last of more, is no such grouping ("1.5\\,2")."""
    assert number("\\boxed{0.123\\,456}") == number("0.123456") == "0.123456" != number("\\boxed{0.123456\\,1}")
    assert number("\\boxed{3.141\\,592\\,65}") == "3.14159265"
    assert number("\\boxed{1\\,234.567\\,8}") == number("1234.5678") != number("1234.567")
    assert number("\\boxed{1.5\\,2}") != number("1.52")
    assert number("\\boxed{0.123\\,4567}") != number("0.1234567")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{5 x}", "\\boxed{5}", False),  # was 5 and 5: the letter taken for a unit
        ("\\boxed{5 x}", "\\boxed{5x}", True),
        ("\\boxed{5 y + 1}", "\\boxed{1}", False),  # was 1 and 1
        ("\\boxed{5 y + 1}", "\\boxed{1 + 5y}", True),
        ("\\boxed{5 x^2}", "\\boxed{5x^2}", True),  # was 5
        ("$5 a$", "\\boxed{5 \\cdot a}", True),
        ("\\boxed{5 \\alpha}", "\\boxed{5}", False),  # was 5 and 5
        ("\\boxed{5 \\alpha}", "\\boxed{\\alpha \\cdot 5}", True),
        ("\\boxed{5 m}", "\\boxed{5}", True),  # a unit's letter: a unit still
        ("\\boxed{5 s}", "\\boxed{6}", False),
    ],
)
def test_a_letter_spaced_after_a_number_in_math_is_its_factor_unless_a_unit(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{2 (x)}", "\\boxed{2}", False),  # was 2 and 2: the bracket after a space lost
        ("\\boxed{2 (x)}", "\\boxed{2x}", True),
        ("\\boxed{2(x)}", "\\boxed{2x}", True),  # was "2(x)" and "2x"
        ("\\boxed{2(x)^2}", "\\boxed{2x^2}", True),
        ("\\boxed{2(x)^2}", "\\boxed{2x}", False),
        ("\\boxed{3(x) + 1}", "\\boxed{1 + 3x}", True),
        ("\\boxed{y(x)}", "\\boxed{xy}", False),  # a letter before it: the function applied
    ],
)
def test_a_bracket_of_one_letter_after_a_number_is_that_letter_its_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{y(-x)}", "\\boxed{-xy}", True),  # was "y\\cdot(-x)" and "-xy"
        ("\\boxed{y(-x)}", "\\boxed{xy}", False),
        ("\\boxed{(-x)y}", "\\boxed{-yx}", True),
        ("\\boxed{(-x)(-y)}", "\\boxed{xy}", True),  # was "(-x)(-y)"
        ("\\boxed{(-x)(-y)}", "\\boxed{-xy}", False),
        ("\\boxed{y(-2x)}", "\\boxed{-2xy}", True),
        ("\\boxed{(3+4)x}", "\\boxed{7x}", True),  # was "x\\cdot(7)"
        ("\\boxed{(-2)x}", "\\boxed{-2x}", True),  # was "x\\cdot(-2)"
        ("\\boxed{(-2)x}", "\\boxed{2x}", False),
        ("\\boxed{(3/4)^2 x}", "\\boxed{\\frac{9x}{16}}", True),
        ("\\boxed{x(1-y)}", "\\boxed{x-y}", False),  # a bracket of a sum stays one
        ("\\boxed{(1-x)^2}", "\\boxed{(x-1)^2}", True),  # was "(-x+1)^{2}" and "(x-1)^{2}": an even power
        ("\\boxed{(1-x)^3}", "\\boxed{(x-1)^3}", False),  # an odd one keeps the sign
        ("\\boxed{(1-x)^{4} y}", "\\boxed{y(x-1)^4}", True),
        ("\\boxed{(-x)^2}", "\\boxed{x^2}", True),  # was "(-x)^{2}" and "x^{2}"
        ("\\boxed{(-x)^3}", "\\boxed{x^3}", False),
        ("\\boxed{(-\\pi)^2}", "\\boxed{\\pi^2}", True),
        (
            "\\boxed{\\left(\\frac{1-x}{2}\\right)^2}",
            "\\boxed{\\left(\\frac{x-1}{2}\\right)^2}",
            True,
        ),  # was "(-\\frac{x-1}{2})^{2}"
        ("\\boxed{\\left(\\frac{1-x}{2}\\right)^3}", "\\boxed{\\left(\\frac{x-1}{2}\\right)^3}", False),
    ],
)
def test_a_bracket_of_a_signed_term_or_a_value_in_a_product_is_its_factors(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{f(3+4)}", "\\boxed{7f}", True),  # was "f(3+4)", f applied
        ("\\boxed{f(3+4)}", "\\boxed{f(7)}", False),
        ("\\boxed{f(3+4)}", "\\boxed{7}", False),
        ("\\boxed{f(-2)}", "\\boxed{-2f}", True),  # was "f(-2)"
        ("\\boxed{f(3+4)^2}", "\\boxed{49f}", True),
        ("\\boxed{f(3/4)}", "\\boxed{\\frac{3f}{4}}", True),
        ("\\boxed{f(3 \\cdot 4)}", "\\boxed{12f}", True),
        ("\\boxed{f(3+4) + 1}", "\\boxed{1 + 7f}", True),
        ("\\boxed{f(2)}", "\\boxed{2f}", False),  # a bracket of one number: the function applied
    ],
)
def test_a_letter_before_a_bracket_with_an_operator_is_its_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(x)}", "\\boxed{x}", True),  # was nothing
        ("\\boxed{(x)}", "\\boxed{y}", False),
        ("\\boxed{((x))}", "\\boxed{x}", True),
        ("\\boxed{( x )}", "\\boxed{x}", True),
        ("\\boxed{(\\alpha)}", "\\boxed{\\alpha}", True),
        ("\\boxed{(xy)}", "\\boxed{yx}", True),
        ("\\boxed{(xy)}", "\\boxed{x}", False),
        ("\\boxed{\\left(x\\right)}", "\\boxed{(x)}", True),
        ("\\boxed{(x)(y)}", "\\boxed{xy}", True),  # two brackets, no one around the whole
    ],
)
def test_a_bracket_around_the_whole_boxed_answer_is_none(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{-(2x)}", "\\boxed{-2x}", True),  # was "2x": the sign lost
        ("\\boxed{-(2x)}", "\\boxed{2x}", False),
        ("\\boxed{-(xy)}", "\\boxed{-yx}", True),  # was "xy"
        ("\\boxed{-(x)}", "\\boxed{-x}", True),  # was the broken "\\boxed{-(x)}"
        ("\\boxed{-(\\alpha)}", "\\boxed{\\alpha}", False),
        ("\\boxed{-(x^2)}", "\\boxed{-x^2}", True),  # was "x^{2}"
        ("\\boxed{3-(2x)}", "\\boxed{3 - 2x}", True),
    ],
)
def test_a_minus_before_a_bracket_of_a_product_is_its_sign(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{α + 1}", "\\boxed{1}", False),  # was 1 and 1: the Unicode letter no term
        ("\\boxed{α + 1}", "\\boxed{\\alpha + 1}", True),
        ("\\boxed{α + 1}", "\\boxed{β + 1}", False),
        ("\\boxed{α}", "\\boxed{\\alpha}", True),  # was None and "\\alpha"
        ("\\boxed{2πr}", "\\boxed{2}", False),  # was 2 and 2
        ("\\boxed{2πr}", "\\boxed{2\\pi r}", True),
        ("\\boxed{αx}", "\\boxed{x\\alpha}", True),
        ("\\boxed{ϵ}", "\\boxed{\\varepsilon}", True),  # the variant forms as math-verify maps them
        ("\\boxed{ϕ}", "\\boxed{\\phi}", False),
        ("5μm", "5", True),  # a unit's prefix, no letter
    ],
)
def test_a_unicode_greek_letter_is_its_latex_command(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_greek_capitals_and_small_letters_are_two_variables() -> None:
    """math-verify names "\\Delta" and "\\delta" one symbol, delta (no oracle here): in LaTeX they are two
    letters, as "X" and "x" are, and stay two answers, typed as Unicode or as commands."""
    assert number("\\boxed{Δ}") == number("\\boxed{\\Delta}") != number("\\boxed{δ}") == number("\\boxed{\\delta}")
    assert number("\\boxed{Δx}") == "\\Delta x" != number("\\boxed{δx}")


def test_a_greek_word_is_prose() -> None:
    assert number("Η απάντηση είναι 5") == "5"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("$x$", "$y$", False),  # was None and None: one answer
        ("$x$", "\\boxed{x}", True),
        ("$(x)$", "$(y)$", False),  # was None and None
        ("$(x)$", "\\boxed{x}", True),
        ("\\(-(y)\\)", "\\boxed{-y}", True),
        ("Let $x$ be the answer.", "$x$", True),
        ("\\boxed{[x]}", "\\boxed{[y]}", False),  # was None and None
        ("\\boxed{[x]}", "\\boxed{x}", True),  # was None and x
        ("\\boxed{\\left[x\\right]}", "\\boxed{[x]}", True),
    ],
)
def test_a_variable_alone_in_math_or_in_a_bracket_is_that_variable(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\text{yes}}", "\\boxed{\\text{no}}", False),  # was None and None: one answer
        ("\\boxed{\\text{yes}}", "\\boxed{\\text{ yes }}", True),
        ("So 5 of them. \\boxed{\\text{no}}", "\\boxed{5}", False),  # was 5, a number outside the box
        ("\\boxed{[x, y]}", "\\boxed{[x,y]}", True),
        ("\\boxed{[x, y]}", "\\boxed{[y, x]}", False),
        ("$\\text{no}$", "\\boxed{\\text{no}}", True),
    ],
)
def test_a_box_nothing_is_read_in_is_its_text_as_written(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_box_read_as_written_is_one_with_its_known_answer() -> None:
    """A known answer written bare is read as math (``as_math``): one a box holds is the box's reading."""
    g = grader("number")
    assert g.known("[x, y]") == g.read("\\boxed{[x,y]}") == "[x,y]" != g.known("[y, x]")
    assert g.known("\\text{no}") == g.read("\\boxed{\\text{ no}}") != g.read("\\boxed{\\text{yes}}")
    assert g.known("no number") == "no number"  # words keep their space


def test_a_box_left_open_or_empty_is_no_answer_as_written() -> None:
    assert number("\\boxed{\\text{no}") is None and number("\\boxed{[x}") is None
    assert number("so 5 \\boxed{ }") == "5"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{2x + 3x}", "\\boxed{5x}", True),  # was "2x+3x", as written
        ("\\boxed{2x + 3x}", "\\boxed{6x}", False),
        ("\\boxed{x-(2x)}", "\\boxed{-x}", True),  # was "-2x+x"
        ("\\boxed{x-(2x)}", "\\boxed{x}", False),
        ("\\boxed{x - x + 1}", "\\boxed{1}", True),
        ("\\boxed{x - x + 1}", "\\boxed{2}", False),
        ("\\boxed{2x + 3y - x}", "\\boxed{3y + x}", True),
        ("\\boxed{2x + 3y - x}", "\\boxed{3y + 2x}", False),
        ("\\boxed{xy + yx}", "\\boxed{2xy}", True),
        ("\\boxed{x^2 + 2x^2}", "\\boxed{3x^2}", True),
        ("\\boxed{x^2 + 2x^2}", "\\boxed{3x}", False),
        ("\\boxed{\\pi + \\pi}", "\\boxed{2\\pi}", True),
        ("\\boxed{2(x+1) - (x+1)}", "\\boxed{x+1}", True),
        ("\\boxed{(x+1) + (x+1)}", "\\boxed{2(x+1)}", True),
        # (math-verify tells a lone letter from any expression: "x" is no "2x - x" there, a multiple choice's letter)
        ("\\boxed{\\frac{x}{2} + \\frac{x}{2} + 1}", "\\boxed{x + 1}", True),
        ("\\boxed{x + y}", "\\boxed{2x}", False),  # unlike terms stay apart
    ],
)
def test_like_terms_of_a_sum_are_one_term(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_like_terms_that_cancel_leave_zero() -> None:
    assert number("\\boxed{x - x}") == number("\\boxed{0}") == "0" != number("\\boxed{x}")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{f(2x)}", "\\boxed{2fx}", True),  # was "f(2x)" (f applied) and "2fx"
        ("\\boxed{f(2x)}", "\\boxed{f(2y)}", False),
        ("\\boxed{f(2x)}", "\\boxed{2x}", False),
        ("\\boxed{y(\\frac12)}", "\\boxed{\\frac{y}{2}}", True),  # was "y(\\frac{1}{2})"
        ("\\boxed{y(\\frac12)}", "\\boxed{y}", False),
        ("\\boxed{f(\\sqrt{2})}", "\\boxed{\\sqrt{2} f}", True),
        ("\\boxed{3f(2x)}", "\\boxed{6xf}", True),
        ("\\boxed{f(x^2)}", "\\boxed{x^2 f}", False),  # was "fx^{2}" both: applied to one letter's power
        ("\\boxed{f(x^2)}", "\\boxed{f(x^{2})}", True),
        ("\\boxed{f(x_1)}", "\\boxed{x_1 f}", False),
        ("\\boxed{f(\\pi)}", "\\boxed{\\pi f}", False),
        ("\\boxed{f(2.5)}", "\\boxed{2.5f}", False),
        ("\\boxed{f(x, y)}", "\\boxed{f(x,y)}", True),
    ],
)
def test_a_letter_is_applied_to_one_number_or_letter_and_a_factor_of_a_product(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\frac{1}{2} \\cdot 2^x}", "\\boxed{2^x}", False),  # was 2^{x} and 2^{x}: its factor lost
        ("\\boxed{\\frac{1}{2} \\cdot 2^x}", "\\boxed{2^x/2}", True),
        ("\\boxed{\\frac{3}{2} \\times 2^x}", "\\boxed{3 \\cdot 2^x}", False),
        ("\\boxed{\\frac{1}{3} \\cdot 2^x}", "\\boxed{\\frac{2^x}{3}}", True),
        ("\\boxed{1 + \\frac{1}{2} \\cdot 2^x}", "\\boxed{1}", False),
        ("\\boxed{1 + \\frac{1}{2} \\cdot 2^x}", "\\boxed{\\frac{2^x}{2} + 1}", True),
    ],
)
def test_a_fraction_times_a_power_of_no_value_is_its_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\frac{1}{2}\\pi}", "\\boxed{\\frac{\\pi}{2}}", True),  # was "0.5\\pi" and "\\frac{\\pi}{2}"
        ("\\boxed{\\frac{1}{2}\\pi}", "\\boxed{\\frac{\\pi}{3}}", False),
        ("\\boxed{0.5\\pi}", "\\boxed{\\pi/2}", True),
        ("\\boxed{\\frac{2}{3}\\pi}", "\\boxed{\\frac{2\\pi}{3}}", True),  # was "\\frac{2}{3}\\pi" and as written
        ("\\boxed{2\\pi/3}", "\\boxed{\\frac{2\\pi}{3}}", True),  # was "2\\cdot\\frac{\\pi}{3}"
        ("\\boxed{2\\pi/3}", "\\boxed{\\frac{3\\pi}{2}}", False),
        ("\\boxed{0.5 \\cdot 2^x}", "\\boxed{2^x/2}", True),  # was "0.5\\cdot2^{x}" and "\\frac{2^{x}}{2}"
        ("\\boxed{0.5 \\cdot 2^x}", "\\boxed{2^x/3}", False),
        ("\\boxed{0.75 \\cdot 2^x}", "\\boxed{\\frac{3 \\cdot 2^x}{4}}", True),
        ("\\boxed{32^x}", "\\boxed{3 \\cdot 2^x}", False),
    ],
)
def test_a_rational_multiple_of_pi_or_a_power_has_one_spelling(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\frac{-\\pi}{2}}", "\\boxed{-\\frac{\\pi}{2}}", True),  # were two spellings
        ("\\boxed{\\frac{\\pi}{-2}}", "\\boxed{-\\frac{\\pi}{2}}", True),
        ("\\boxed{\\frac{-\\pi}{2}}", "\\boxed{\\frac{\\pi}{2}}", False),
        ("\\boxed{\\frac{-\\pi}{-2}}", "\\boxed{\\frac{\\pi}{2}}", True),
        ("\\boxed{-\\frac{-\\pi}{2}}", "\\boxed{\\frac{\\pi}{2}}", True),
        ("\\boxed{\\frac{-\\sqrt{2}}{2}}", "\\boxed{-\\frac{\\sqrt{2}}{2}}", True),
        ("\\boxed{\\frac{-\\pi + 1}{2}}", "\\boxed{-\\frac{\\pi + 1}{2}}", False),  # a sum's minus is its term's
        ("\\boxed{2\\frac{-\\pi}{3}}", "\\boxed{-\\frac{2\\pi}{3}}", True),
        ("\\boxed{1+\\frac{-\\pi}{2}}", "\\boxed{1-\\frac{\\pi}{2}}", True),  # no "1+-\\frac{\\pi}{2}"
        ("\\boxed{1-\\frac{-\\pi}{2}}", "\\boxed{1+\\frac{\\pi}{2}}", True),
        ("\\boxed{1-\\frac{-\\pi}{2}}", "\\boxed{1-\\frac{\\pi}{2}}", False),
    ],
)
def test_a_negated_fraction_has_one_spelling(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\frac{-x}{2}}", "\\boxed{-\\frac{x}{2}}", True),  # were two spellings
        ("\\boxed{\\frac{x}{-2}}", "\\boxed{-\\frac{x}{2}}", True),
        ("\\boxed{\\frac{-x}{-2}}", "\\boxed{\\frac{x}{2}}", True),
        ("\\boxed{\\frac{-x}{2}}", "\\boxed{\\frac{x}{2}}", False),
        ("\\boxed{\\frac{-\\pi x}{2}}", "\\boxed{-\\frac{\\pi x}{2}}", True),
        ("\\boxed{x+\\frac{-\\pi}{2}}", "\\boxed{x-\\frac{\\pi}{2}}", True),
        ("\\boxed{x+\\frac{-\\pi}{2}}", "\\boxed{x+\\frac{\\pi}{2}}", False),
        ("\\boxed{1+\\frac{-x}{2}}", "\\boxed{1-\\frac{x}{2}}", True),
        ("\\boxed{x \\cdot \\frac{-\\pi}{2}}", "\\boxed{-\\frac{\\pi x}{2}}", True),
        ("\\boxed{x \\cdot \\frac{-\\pi}{2}}", "\\boxed{\\frac{\\pi x}{2}}", False),
        ("\\boxed{\\frac{-\\pi}{2} x}", "\\boxed{-\\frac{x\\pi}{2}}", True),
    ],
)
def test_a_negated_fraction_with_a_letter_has_one_spelling(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(1+1)(3)}", "\\boxed{6}", True),  # was 3, the last bracket's number
        ("\\boxed{(1+1)(3)}", "\\boxed{3}", False),
        ("\\boxed{(2) \\cdot (3)}", "\\boxed{6}", True),  # was 3
        ("\\boxed{(2) \\cdot (3)}", "\\boxed{3}", False),
        ("\\boxed{(2)\\times(4)}", "\\boxed{8}", True),
        ("\\boxed{(2)(3)}", "\\boxed{3}", False),  # was 3 (math-verify's 5: ``test_extract``)
    ],
)
def test_a_product_of_brackets_of_numbers_is_its_value(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{5 \\pi x}", "\\boxed{5\\pi}", False),  # was 5\\pi: x lost after the space
        ("\\boxed{5 \\pi x}", "\\boxed{5x\\pi}", True),
        ("\\boxed{5 \\pi x y}", "\\boxed{xy}", False),  # was xy: 5 and \\pi lost
        ("\\boxed{5 \\pi x y}", "\\boxed{5\\pi xy}", True),
        ("\\boxed{5 \\sqrt{2}x}", "\\boxed{5\\sqrt{2}}", False),  # was 5\\sqrt{2}
        ("\\boxed{5 \\sqrt{2}x}", "\\boxed{5x\\sqrt{2}}", True),
        ("\\boxed{5 \\frac{\\pi}{2} x}", "\\boxed{\\frac{5\\pi}{2}}", False),  # was \\frac{5\\pi}{2}
        ("\\boxed{5 \\frac{\\pi}{2} x}", "\\boxed{\\frac{5\\pi x}{2}}", True),
        ("\\boxed{5 \\pi}", "\\boxed{5\\pi}", True),
        ("\\boxed{5 \\frac{1}{2}}", "\\boxed{5.5}", True),  # a mixed number still
    ],
)
def test_a_number_spaced_before_pi_a_root_or_a_fraction_is_its_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{x \\pi}", "\\boxed{\\pi}", False),  # was \\pi and \\pi: the letter lost before its space
        ("\\boxed{x \\pi}", "\\boxed{\\pi x}", True),
        ("\\boxed{x \\sqrt{2}}", "\\boxed{\\sqrt{2}}", False),  # was \\sqrt{2} both
        ("\\boxed{x \\sqrt{2}}", "\\boxed{x\\sqrt{2}}", True),
        ("\\boxed{x \\alpha + 1}", "\\boxed{\\alpha + 1}", False),  # was \\alpha+1 both
        ("\\boxed{x \\alpha + 1}", "\\boxed{1 + \\alpha x}", True),
        ("\\boxed{x \\alpha}", "\\boxed{\\alpha x}", True),  # was nothing, then "x\\alpha" as written
        ("$x \\frac{1}{2}$", "\\boxed{\\frac{x}{2}}", True),
    ],
)
def test_a_space_between_a_letter_and_a_factors_command_in_math_is_latexs(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(1, 2)}", "\\boxed{2}", False),  # was 2 and 2: a tuple read as its last number
        ("\\boxed{(1, 2)}", "\\boxed{(2, 1)}", False),  # a tuple's order counts
        ("\\boxed{(1, 2)}", "\\boxed{\\left(1,2\\right)}", True),
        ("\\boxed{(1, \\frac12)}", "\\boxed{(1, 0.5)}", True),  # each item read
        ("\\boxed{1, 2}", "\\boxed{2}", False),  # was 2 and 2
        ("\\boxed{1, 2}", "\\boxed{2, 1}", True),  # a list of no bracket has no order
        ("\\boxed{\\{1, 2\\}}", "\\boxed{\\{2, 1\\}}", True),  # nor a set
        ("\\boxed{\\{1, 2\\}}", "\\boxed{2}", False),
        ("\\boxed{[1, 2]}", "\\boxed{[1, 2.0]}", True),
        ("\\boxed{[x, y]}", "\\boxed{[y, x]}", False),
        ("\\boxed{(x+1, 2y)}", "\\boxed{(1+x, y \\cdot 2)}", True),
        ("\\boxed{1,234}", "\\boxed{1234}", True),  # thousands, no list
        ("\\boxed{1,234}", "\\boxed{1, 234}", False),
        ("\\boxed{[0, 1)}", "\\boxed{[0,1)}", True),  # was 1: a half-open interval
        ("\\boxed{[0, 1)}", "\\boxed{[0, 1]}", False),
        ("\\boxed{(0, 1]}", "\\boxed{1}", False),
        ("$(1, 2)$", "\\boxed{(1,2)}", True),  # was 2 and 2: a text that is one "$...$" as a box
        ("\\boxed{(1,2)(3,4)}", "\\boxed{4}", False),  # was 4 and 4: lists side by side, one answer of their brackets
        ("\\boxed{(1, 2) (3, 4)}", "\\boxed{(1, 2)(3, 4)}", True),
        ("\\boxed{(1, 2) (3, 4)}", "\\boxed{(3, 4) (1, 2)}", False),
        ("\\boxed{(1, 2) (3, 4)}", "\\boxed{(1, 2), (3, 4)}", False),
        ("\\boxed{(1, 2) \\cdot (3, 4)}", "\\boxed{(1, 2)(3, 4)}", True),
        ("\\boxed{[1, 2] (3, 4)}", "\\boxed{\\left[1, 2\\right] \\left(3, 4\\right)}", True),
        ("\\boxed{\\{1,2\\}\\{3,4\\}}", "\\boxed{4}", False),
        ("\\boxed{(1, 2) (3)}", "\\boxed{3}", False),  # was 3: a bracket of one value beside a list
        ("\\boxed{(1, 2) \\cup (3, 4)}", "\\boxed{4}", False),  # was 4: a union, of its brackets in one order
        ("\\boxed{(-\\infty, 2) \\cup (3, \\infty)}", "\\boxed{(3, \\infty) \\cup (-\\infty, 2)}", True),  # was 3 and 2
        ("\\boxed{(1, 2) \\cup (3, 4)}", "\\boxed{(1, 2) \\cup [3, 4]}", False),
        ("\\boxed{x \\in (1, 2) \\cup (3, 4)}", "\\boxed{(1, 2) \\cup (3, 4)}", True),
        ("\\boxed{(0, 2) \\cap (1, 3)}", "\\boxed{3}", False),
    ],
)
def test_a_box_that_lists_values_is_one_answer_of_each_read(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_known_answer_that_lists_values_is_its_boxs_reading() -> None:
    g = grader("number")
    assert g.known("(1, 2)") == g.read("\\boxed{(1,2)}") == "(1,2)" != g.read("\\boxed{2}")
    assert g.known("1, 2") == g.read("\\boxed{2, 1}") != g.known("2")
    assert g.known("[0, 1)") == g.read("\\boxed{[0,1)}") != g.known("[0, 1]")


def test_lists_side_by_side_are_no_number_though_math_verifys_fallback_reads_their_last() -> None:
    """math-verify's LaTeX reading of "(1, 2) (3, 4)" has no value; its fallback reads the last number, so that the
    box is one answer with "\\boxed{4}" and with "(5, 7) (3, 4)": false matches. Here it is its brackets, each read."""
    assert _oracle_same("\\boxed{(1, 2) (3, 4)}", "\\boxed{4}")  # the oracle's reading, which we differ from
    assert _oracle_same("\\boxed{(1, 2) (3, 4)}", "\\boxed{(5, 7) (3, 4)}")
    assert number("\\boxed{(1, 2) (3, 4)}") == number("$(1, 2)(3, 4)$") == "(1,2)(3,4)" != number("\\boxed{4}")
    assert number("\\boxed{(1, 2) (3, 4)}") != number("\\boxed{(5, 7) (3, 4)}")
    assert number("\\boxed{(1, \\frac{1}{2}) (3, 4)}") == number("\\boxed{(1, 0.5)(3, 4)}") == "(1,0.5)(3,4)"
    g = grader("number")
    assert g.known("(1, 2) (3, 4)") == g.read("\\boxed{(1,2)(3,4)}") != g.known("4")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{x < 3}", "\\boxed{x > 3}", False),  # was 3 and 3: an inequality read as its last number
        ("\\boxed{x \\le 3}", "\\boxed{3}", False),
        ("\\boxed{x \\neq 3}", "\\boxed{x = 3}", False),
        ("$x < 3$", "$x > 3$", False),
        ("\\boxed{1 < x < 3}", "\\boxed{x < 3}", False),
        ("\\boxed{x \\le 3}", "\\boxed{x \\leq 3}", True),  # one spelling per relation
        ("\\boxed{x \\le 3}", "\\boxed{3 \\ge x}", True),  # a falling relation written rising
        ("\\boxed{x \\le 3}", "\\boxed{x < 3}", False),
        ("\\boxed{x \\geq 1.50}", "\\boxed{x \\ge \\frac32}", True),  # each side read
        ("\\boxed{\\left(x < 3\\right)}", "\\boxed{x<3}", True),
        ("\\boxed{0 < x, y < 1}", "\\boxed{y < 1, 0 < x}", True),
        ("\\boxed{0 < x, y < 1}", "\\boxed{0 < x, y < 2}", False),
        ("so x < 3", "so x > 3", True),  # outside math the last number, as math-verify reads it
    ],
)
def test_an_inequality_in_math_is_one_answer_of_its_sides_and_relations(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_falling_chain_of_inequalities_is_written_rising() -> None:
    """math-verify tells "3 > x > 1" from "1 < x < 3" (no oracle here): one set of x, read as one answer."""
    assert number("\\boxed{3 > x > 1}") == number("\\boxed{1 < x < 3}") == "1<x<3" != number("\\boxed{1 < x < 4}")
    assert number("\\boxed{x \\ge y}") == "y\\le x" != number("\\boxed{x \\le y}")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{1 \\text{ and } 2}", "\\boxed{2}", False),  # was 2 and 2: the words as a space, the last number read
        ("\\boxed{3 \\text{ and } 4}", "\\boxed{4}", False),
        ("\\boxed{1 \\text{ and } 2}", "\\boxed{1, 2}", True),
        ("\\boxed{1 \\text{ or } 2}", "\\boxed{2, 1}", True),
        ("\\boxed{1, 2, \\text{and } 3}", "\\boxed{3,2,1}", True),
        ("\\boxed{1, 2, \\text{and } 3}", "\\boxed{1, 2}", False),
    ],
)
def test_and_or_in_text_between_values_joins_a_list(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(1+1)3}", "\\boxed{6}", True),  # was 3: a number right after a bracket is its factor
        ("\\boxed{(1+1)3}", "\\boxed{3}", False),
        ("\\boxed{(1+1) 3}", "\\boxed{6}", True),  # was 3: spaced in math, one rule with side by side
        ("\\boxed{(x+1) 3}", "\\boxed{3(x+1)}", True),  # was 3
        ("\\boxed{(x+1) 3}", "\\boxed{x+1}", False),
        ("\\boxed{(1+1) (1+2)}", "\\boxed{6}", True),  # was 3
        ("\\boxed{(1+1) (1+2)}", "\\boxed{3}", False),
    ],
)
def test_brackets_side_by_side_in_math_are_a_product(a: str, b: str, same: bool) -> None:
    """math-verify reads "(2)3" and "(2) (3)" as 5 (brackets of one number side by side as a mixed number); here they
    are 6, LaTeX's product, as "(1+1)3" is there too (``test_extract``'s cases)."""
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\frac{-x+1}{2}}", "\\boxed{\\frac{1-x}{2}}", True),  # were two spellings
        ("\\boxed{\\frac{-x+1}{2}}", "\\boxed{\\frac{x-1}{2}}", False),
        ("\\boxed{\\frac{1+x}{2}}", "\\boxed{\\frac{x+1}{2}}", True),
        ("\\boxed{\\frac{1+x}{2}}", "\\boxed{\\frac{x+2}{2}}", False),
        ("\\boxed{\\frac{2}{1+x}}", "\\boxed{\\frac{2}{x+1}}", True),  # a divisor's sum too
        ("\\boxed{\\frac{2}{1+x}}", "\\boxed{\\frac{2}{x-1}}", False),
        ("\\boxed{(1-x)/2}", "\\boxed{\\frac{-x+1}{2}}", True),  # a quotient spelled as its \\frac
        ("\\boxed{\\frac{1-x^2}{2}}", "\\boxed{\\frac{-x^{2}+1}{2}}", True),  # a part with braces
        ("\\boxed{\\frac{1-x^2}{2}}", "\\boxed{\\frac{x^{2}-1}{2}}", False),
        ("\\boxed{\\frac{1+2+x}{2}}", "\\boxed{\\frac{x+3}{2}}", True),  # its numbers one, as a sum's
        ("\\boxed{\\frac{1-\\pi}{2}}", "\\boxed{\\frac{-\\pi+1}{2}}", True),
        ("\\boxed{\\frac{1-\\pi}{2}}", "\\boxed{\\frac{\\pi-1}{2}}", False),
        ("\\boxed{y+\\frac{1-x}{2}}", "\\boxed{\\frac{-x+1}{2}+y}", True),
        ("\\boxed{\\frac{1}{1+\\frac{1-x}{2}}}", "\\boxed{\\frac{1}{\\frac{-x+1}{2}+1}}", True),  # nested
        ("\\boxed{\\frac{-x+1}{-2}}", "\\boxed{\\frac{x-1}{2}}", True),  # were two: a part's first minus the fraction's
        ("\\boxed{\\frac{-x+1}{-2}}", "\\boxed{\\frac{x+1}{2}}", False),
        ("\\boxed{\\frac{x-1}{-2}}", "\\boxed{\\frac{1-x}{2}}", True),
        ("\\boxed{\\frac{x-1}{-2}}", "\\boxed{\\frac{x-1}{2}}", False),
        ("\\boxed{-\\frac{x-1}{2}}", "\\boxed{\\frac{1-x}{2}}", True),
        ("\\boxed{\\frac{2}{1-x}}", "\\boxed{\\frac{-2}{x-1}}", True),
        ("\\boxed{\\frac{1-x}{1-y}}", "\\boxed{\\frac{x-1}{y-1}}", True),
        ("\\boxed{\\frac{1-x}{1-y}}", "\\boxed{\\frac{x-1}{1-y}}", False),
        ("\\boxed{1+\\frac{1-x}{2}}", "\\boxed{1-\\frac{x-1}{2}}", True),  # its minus joined to the sum's sign
        ("\\boxed{2\\frac{1-x}{2}}", "\\boxed{-2\\frac{x-1}{2}}", True),  # or the product's
        ("\\boxed{\\frac{\\pi-1}{-2}}", "\\boxed{\\frac{1-\\pi}{2}}", True),
        ("\\boxed{\\frac{1-\\sqrt{2}}{2}}", "\\boxed{\\frac{\\sqrt{2}-1}{-2}}", True),
        ("\\boxed{\\frac{1-\\sqrt{2}}{2}}", "\\boxed{\\frac{\\sqrt{2}-1}{2}}", False),
    ],
)
def test_a_fraction_part_that_is_a_sum_has_its_terms_in_one_order(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{5\\pi m}", "\\boxed{5\\pi}", True),  # was "5\\pi m": a unit at the end, after a value of constants
        ("\\boxed{5\\pi m}", "\\boxed{5}", False),
        ("\\boxed{5 \\pi m}", "\\boxed{5\\pi}", True),
        ("\\boxed{\\pi m}", "\\boxed{\\pi}", True),
        ("\\boxed{5\\pi meters}", "\\boxed{5\\pi}", True),  # was 5πeemrst
        ("\\boxed{\\sqrt{5} km}", "\\boxed{\\sqrt{5}}", True),
        ("\\boxed{3\\sqrt{2} inches}", "\\boxed{3\\sqrt{2}}", True),
        ("\\boxed{3\\sqrt{2} inches}", "\\boxed{3}", False),
        ("\\boxed{5\\pi m + 1}", "\\boxed{5\\pi + 1}", False),  # not at the end: a factor
        ("\\boxed{5\\pi x}", "\\boxed{5\\pi}", False),  # no unit: a factor
        ("\\boxed{5\\pi cats}", "\\boxed{5\\pi}", False),
        ("\\boxed{\\pi^2 m}", "\\boxed{\\pi^2}", True),  # was "\\pi^{2}m": after a power of \\pi too
        ("\\boxed{\\pi^2 m}", "\\boxed{m\\pi^2}", False),
        ("\\boxed{3\\pi^2 s}", "\\boxed{3\\pi^{2}}", True),
        ("\\boxed{\\pi^2 x}", "\\boxed{\\pi^2}", False),  # no unit: a factor
        ("\\boxed{\\pi^2 m + 1}", "\\boxed{\\pi^2 + 1}", False),
        ("\\boxed{2e^{2} m}", "\\boxed{2e^2}", True),  # was "2e^{2}m": after a number's power of e, its exp
        ("\\boxed{2e^{2} m}", "\\boxed{2e^2 x}", False),
        ("\\boxed{(1+\\pi)^2 m}", "\\boxed{(1+\\pi)^2}", True),  # was "m\\cdot(\\pi+1)^{2}": after a bracket of constants
        ("\\boxed{(1+\\pi)^2 x}", "\\boxed{(1+\\pi)^2}", False),
        ("\\boxed{2\\pi^2 cm^2}", "\\boxed{2\\pi^2}", False),  # was "2\\pi^{2}": a unit's power after a power of \\pi
        ("\\boxed{2\\pi^2 cm^2}", "\\boxed{2\\pi^{2} cm^2}", True),  # is a product's, as after "\\pi^{2}", "\\pi" was
        ("\\boxed{2\\pi^2 cm^2}", "\\boxed{2\\pi^2 m^2}", False),
        ("\\boxed{2\\pi^2 m^2}", "\\boxed{2\\pi^2}", False),
        ("\\boxed{2\\pi^2 cm}", "\\boxed{2\\pi^2}", True),  # no power: the unit, as it was
    ],
)
def test_a_unit_at_the_end_after_a_constant_value_is_no_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_letters_after_a_variable_stay_factors_though_math_verify_strips_them_as_a_unit() -> None:
    """math-verify reads "2 \\pi r h" as 2πr ("h" an hour) and "x m" as x: the cylinder's side 2πrh one answer with
    2πr, a false match. After a variable the letters are a product's here, as before any other math."""
    assert _oracle_same("\\boxed{2 \\pi r h}", "\\boxed{2\\pi r}")  # the oracle's reading, which we differ from
    assert number("\\boxed{2 \\pi r h}") == number("\\boxed{2\\pi rh}") == number("\\boxed{h \\cdot 2\\pi r}")
    assert number("\\boxed{2 \\pi r h}") != number("\\boxed{2\\pi r}")
    assert number("\\boxed{x m}") == number("\\boxed{mx}") != number("\\boxed{x}")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\pi^2}", "\\boxed{\\pi}", False),  # was \\pi and \\pi: the power lost
        ("\\boxed{\\pi^2}", "\\boxed{\\pi^{2}}", True),
        ("\\boxed{5\\pi^2}", "\\boxed{5\\pi}", False),  # was 5\\pi
        ("\\boxed{\\pi^{-1}}", "\\boxed{\\pi}", False),
        ("\\boxed{\\pi^2 + 1}", "\\boxed{1 + \\pi^2}", True),
        ("\\boxed{\\pi^2 + 1}", "\\boxed{\\pi + 1}", False),
        ("\\boxed{\\frac{\\pi^2}{6}}", "\\boxed{\\frac{\\pi}{6}}", False),
        ("\\boxed{x\\pi^2}", "\\boxed{\\pi^2 x}", True),  # a factor ordered as \\pi is
        ("\\boxed{2\\pi^2 \\cdot 3}", "\\boxed{6\\pi^2}", True),
        ("\\boxed{2\\pi^2 \\cdot 3}", "\\boxed{6\\pi}", False),
        ("\\boxed{(1+\\pi)^2}", "\\boxed{1+\\pi}", False),  # was "\\pi+1" both: a bracket's power lost
        ("\\boxed{(1+\\pi)^2}", "\\boxed{(\\pi+1)^{2}}", True),
        ("\\boxed{(2\\pi)^2}", "\\boxed{2\\pi}", False),
        ("\\boxed{\\left(\\frac{\\pi}{2}\\right)^2}", "\\boxed{(\\frac{\\pi}{2})^2}", True),
        ("\\boxed{\\left(\\frac{\\pi}{2}\\right)^2}", "\\boxed{\\frac{\\pi}{2}}", False),
        ("\\boxed{(\\sqrt{2}+1)^2}", "\\boxed{\\sqrt{2}+1}", False),
        ("\\boxed{(1+\\pi)^2 + 1}", "\\boxed{1 + (\\pi+1)^2}", True),
        ("\\boxed{(\\pi)^2}", "\\boxed{\\pi^2}", True),  # was "(\\pi)^{2}" and "\\pi^{2}"
        ("\\boxed{(\\pi)^2}", "\\boxed{\\pi^3}", False),
        ("\\boxed{2(\\pi)^2 x}", "\\boxed{2x\\pi^2}", True),
    ],
)
def test_a_power_of_pi_keeps_its_exponent(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\frac{1}{2}(\\pi+1)}", "\\boxed{\\frac{\\pi+1}{2}}", True),  # was "\\frac{1}{2}(\\pi+1)"
        ("\\boxed{0.5(1+\\pi)}", "\\boxed{\\frac{\\pi+1}{2}}", True),
        ("\\boxed{\\frac{3}{2}(\\pi+1)}", "\\boxed{\\frac{3(\\pi+1)}{2}}", True),
        ("\\boxed{\\frac{1}{2}(\\sqrt{2}+1)}", "\\boxed{\\frac{\\sqrt{2}+1}{2}}", True),
        ("\\boxed{\\frac{1}{2}\\pi+1}", "\\boxed{\\frac{\\pi+1}{2}}", False),
        ("\\boxed{\\frac{1}{2}(\\pi+1)}", "\\boxed{\\frac{\\pi+1}{3}}", False),
        ("\\boxed{\\frac{1}{2}(\\pi+1)^2}", "\\boxed{\\frac{(\\pi+1)^2}{2}}", True),
        ("\\boxed{\\frac{1}{2}(\\pi+1)^2}", "\\boxed{\\frac{\\pi+1}{2}}", False),
        ("\\boxed{\\frac{1}{2}(x+1)^2}", "\\boxed{\\frac{(x+1)^2}{2}}", True),  # both the broken "\\frac{x+1)^{2}{2}"
        ("\\boxed{\\frac{1}{2}(x+1)^2}", "\\boxed{\\frac{x+1}{2}}", False),
    ],
)
def test_a_rational_before_a_bracket_of_no_value_is_its_fractions(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_fraction_of_a_bracket_with_a_power_is_multiplied_out_whole() -> None:
    assert number("\\boxed{\\frac{(x+1)^2}{2}}") == number("\\boxed{\\frac{1}{2}(x+1)^2}") == "\\frac{x^{2}}{2}+x+0.5"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\pi-(x+1)}", "\\boxed{\\pi-x-1}", True),  # was "-(x+1)+\\pi" and "-x+\\pi-1"
        ("\\boxed{\\pi - (x + 1)}", "$\\pi-x-1$", True),
        ("\\boxed{\\pi-(x+1)}", "\\boxed{\\pi-x+1}", False),
        ("\\boxed{\\pi+(x-1)}", "\\boxed{x+\\pi-1}", True),
        ("\\boxed{y-(x+1)}", "\\boxed{y-x-1}", True),
        ("\\boxed{y-(x+1)}", "\\boxed{y-x+1}", False),
        ("\\boxed{x-(x+1)}", "\\boxed{-1}", True),  # opened, its like terms cancel
        ("\\boxed{\\sqrt{2}-(x+1)}", "\\boxed{\\sqrt{2}-x-1}", True),
        ("\\boxed{2(x+1)-(x+1)}", "\\boxed{x+1}", True),  # brackets that are like terms stay
        ("\\boxed{2(x+1)-(x+1)}", "\\boxed{x-1}", False),
    ],
)
def test_a_bracket_a_sum_subtracts_is_opened_among_terms_of_no_value(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(-x)^3}", "\\boxed{-x^3}", True),  # was "(-x)^{3}" and "-x^{3}"
        ("\\boxed{(-x)^3}", "\\boxed{x^3}", False),
        ("\\boxed{(1-x)^3}", "\\boxed{-(x-1)^3}", True),  # was "(-x+1)^{3}" and "-(x-1)^{3}"
        ("\\boxed{(1-x)^3}", "\\boxed{(x-1)^3}", False),
        ("\\boxed{(1-x)^{11}}", "\\boxed{-(x-1)^{11}}", True),
        ("\\boxed{(1-x)^2}", "\\boxed{-(x-1)^2}", False),  # an even power: no sign
        ("\\boxed{(1-x)^2}", "\\boxed{(x-1)^2}", True),
        ("\\boxed{(-\\pi)^3}", "\\boxed{-\\pi^3}", True),
        ("\\boxed{(-\\pi)^3}", "\\boxed{\\pi^3}", False),
        ("\\boxed{(1-\\pi)^3}", "\\boxed{-(\\pi-1)^3}", True),
        ("\\boxed{2(1-x)^3}", "\\boxed{-2(x-1)^3}", True),
        ("\\boxed{2(1-x)^3}", "\\boxed{2(x-1)^3}", False),
        ("\\boxed{(1-x)^3 + 1}", "\\boxed{1-(x-1)^3}", True),
        ("\\boxed{(-2)^3}", "\\boxed{-8}", True),
        ("\\boxed{-2^3}", "\\boxed{-8}", True),
        ("\\boxed{-2^2}", "\\boxed{4}", False),
        ("\\boxed{-2^2}", "\\boxed{-4}", True),
        ("\\boxed{(-2)^2}", "\\boxed{4}", True),
    ],
)
def test_an_odd_power_of_a_negated_bracket_is_the_power_negated(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{\\exp(1)}", "\\boxed{e}", True),  # was "\\exp(1)" and "e"
        ("$\\exp 1$", "\\boxed{e}", True),
        ("\\boxed{e^1}", "\\boxed{e}", True),  # was "e^{1}"
        ("\\boxed{\\mathrm{e}}", "\\boxed{e}", True),  # was nothing
        ("\\boxed{\\exp(x)}", "\\boxed{e^x}", True),  # was "\\exp(x)" and "e^{x}"
        ("\\boxed{\\exp(-1)}", "\\boxed{e^{-1}}", True),
        ("\\boxed{2\\exp(1)}", "\\boxed{2e}", True),
        ("\\boxed{\\exp(1)+1}", "\\boxed{1+e}", True),
        ("\\boxed{\\exp(2)}", "\\boxed{e}", False),
        ("\\boxed{e^{10}}", "\\boxed{e}", False),
        ("\\boxed{e^{10}}", "\\boxed{\\exp(10)}", True),
        ("\\boxed{e = 3}", "\\boxed{e}", False),  # e a variable in an equation: its value, 3
    ],
)
def test_eulers_number_has_one_spelling(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_decimal_of_eulers_number_is_no_e() -> None:
    """math-verify finds e and its decimal one where the float it rounds to is e's (not so "2.718"); here no value is
    rounded to be another's, as a decimal of \\\\pi is no \\\\pi: they are two answers, as they are for \\\\pi."""
    assert _oracle_same("\\boxed{2.718281828459045}", "\\boxed{e}")
    assert number("\\boxed{2.718281828459045}") == "2.718281828459045" != number("\\boxed{e}")
    assert number("\\boxed{3.141592653589793}") != number("\\boxed{\\pi}")


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{5\\,\\mathrm{m\\,s^{-1}}}", "\\boxed{5}", True),  # was 1, the exponent
        ("\\boxed{5\\,\\mathrm{m\\,s^{-1}}}", "\\boxed{6}", False),
        ("\\boxed{5\\,\\mathrm{m}\\,\\mathrm{s}^{-1}}", "\\boxed{5}", True),  # was "\\mathrm{s}^{-1}"
        ("\\boxed{5\\,\\mathrm{m}/\\mathrm{s}}", "\\boxed{5}", True),
        ("\\boxed{5\\,\\text{m\\,s^{-1}}}", "\\boxed{5}", True),  # was 1
        ("\\boxed{5\\,\\text{m s}^{-1}}", "\\boxed{5}", True),  # was 0.2
        ("\\boxed{5\\,\\text{m s}^{-1}}", "\\boxed{0.2}", False),
    ],
)
def test_units_after_a_thin_space_are_no_part_of_the_number(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


def test_a_thin_space_before_a_unit_is_a_space() -> None:
    """ "5\\\\,m" is 5, as "5 m" is (math-verify reads the product 5*m there, and 5*c*m for "5\\\\,cm": no oracle's case).
    Units are not compared: "5\\\\,m" and "5\\\\,cm" are one answer, 5."""
    for spelled in ("\\boxed{5\\,m}", "$5\\,m$", "\\boxed{5\\,m^2}", "The rod is 5\\,m long.", "\\boxed{5\\,cm}"):
        assert number(spelled) == number("\\boxed{5 m}") == number("\\boxed{5}") == "5" != number("\\boxed{6\\,m}")
    assert grader("number").known("5\\,m") == grader("number").known("5 m") == "5"
    assert number("\\boxed{5\\,x}") == "5x" != number("\\boxed{5}")  # no unit's letter: a product


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{x = e}", "\\boxed{e}", True),  # was "x=e": a variable alone after "=" no answer
        ("$x = e$", "\\boxed{\\exp(1)}", True),
        ("\\boxed{x = y}", "\\boxed{y}", True),
        ("\\boxed{x = y}", "\\boxed{x}", False),
        ("\\boxed{x = -y}", "\\boxed{-y}", True),
        ("\\boxed{x = \\alpha}", "\\boxed{\\alpha}", True),
        ("\\boxed{x = a_{1}}", "\\boxed{a_1}", True),
        ("\\boxed{x = a_{1}}", "\\boxed{a_2}", False),
    ],
)
def test_a_variable_alone_on_an_equations_right_hand_side_is_its_answer(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(\\pi+1)/2}", "\\boxed{\\frac{\\pi+1}{2}}", True),  # was 2, the divisor
        ("\\boxed{(\\pi+1)/2}", "\\boxed{(\\pi+2)/2}", False),  # was 2 and 2: a wrong answer read as right
        ("\\boxed{(\\pi+1)/2}", "\\boxed{2}", False),
        ("\\boxed{(1+\\pi)/2}", "$\\frac{\\pi + 1}{2}$", True),
        ("\\boxed{(3+4)/2}", "\\boxed{3.5}", True),  # was 2
        ("\\boxed{(3+4)/2}", "\\boxed{2}", False),
        ("\\boxed{2/(3+4)}", "\\boxed{\\frac{2}{7}}", True),  # was 7
        ("\\boxed{2/(3+4)}", "\\boxed{7}", False),
        ("\\boxed{2/(\\pi+1)}", "\\boxed{\\pi+1}", False),  # was \\pi+1: a box read whole or as written
        ("\\boxed{2/(\\pi+1)}", "$2/(\\pi+1)$", True),
        ("\\boxed{2017-2018}", "\\boxed{2018}", False),  # was 2018
        ("\\boxed{12 \\div 4}", "\\boxed{3}", True),  # was 4: LaTeX's division sign as "÷" is
        ("\\boxed{12 \\div 4}", "\\boxed{4}", False),
        ("\\boxed{x \\div 2}", "\\boxed{\\frac{x}{2}}", True),
    ],
)
def test_a_box_that_holds_an_expression_is_read_as_one(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(-2x)^3}", "\\boxed{-8x^3}", True),  # was "-(2x)^{3}"
        ("\\boxed{(-2x)^3}", "\\boxed{8x^3}", False),
        ("\\boxed{(-2x)^2}", "\\boxed{4x^2}", True),
        ("\\boxed{(-2x)^2}", "\\boxed{-4x^2}", False),
        ("\\boxed{(x^2)^3}", "\\boxed{x^6}", True),
        ("\\boxed{(x^2)^3}", "\\boxed{x^5}", False),
        ("\\boxed{(2\\pi)^2}", "\\boxed{4\\pi^2}", True),
        ("\\boxed{(2xy)^2}", "\\boxed{4x^2y^2}", True),
        ("\\boxed{3(2x)^2}", "\\boxed{12x^2}", True),
        ("\\boxed{3(2x)^2}", "\\boxed{6x^2}", False),
    ],
)
def test_a_power_of_a_bracketed_product_is_each_factors_power(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{2(\\pi+1)}", "\\boxed{2\\pi+2}", True),  # was "2(\\pi+1)"
        ("\\boxed{2(\\pi+1)}", "\\boxed{2\\pi+1}", False),
        ("\\boxed{2(x+1)}", "\\boxed{2x+2}", True),
        ("\\boxed{2(x+1)}", "\\boxed{2x+1}", False),
        ("\\boxed{-(x-4)}", "\\boxed{4-x}", True),
        ("\\boxed{-(x-4)}", "\\boxed{x-4}", False),
        ("\\boxed{2(x+1)+3}", "\\boxed{2x+5}", True),
        ("\\boxed{\\frac{1}{2}(\\pi+1)}", "\\boxed{\\frac{\\pi+1}{2}}", True),  # a fraction's multiple, as it was
    ],
)
def test_a_whole_number_times_a_bracket_of_a_sum_is_opened(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{5\\,m + 1}", "\\boxed{5m+1}", True),  # was 1: the unit letter taken for a unit before a sum's sign
        ("\\boxed{5\\,m + 1}", "\\boxed{1}", False),
        ("\\boxed{5 m - 1}", "\\boxed{5m-1}", True),
        ("\\boxed{5 m - 1}", "\\boxed{5m+1}", False),
        ("$5\\,m + 1$", "\\boxed{m \\cdot 5 + 1}", True),
        ("\\boxed{5\\,kg + 1}", "\\boxed{5kg+1}", True),
    ],
)
def test_a_unit_spaced_after_its_number_before_more_terms_is_a_factor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("answer", "reference", "right"),
    [
        ("The answer is $\\boxed{(\\pi+1)/2}$.", "\\frac{\\pi+1}{2}", True),
        ("The answer is $\\boxed{(\\pi+1)/2}$.", "(\\pi+1)/2", True),
        ("The answer is $\\boxed{(\\pi+1)/2}$.", "(\\pi+2)/2", False),
        ("So $\\boxed{(-2x)^3}$", "-8x^3", True),
        ("So $\\boxed{(-2x)^3}$", "8x^3", False),
        ("\\boxed{2(\\pi+1)}", "2\\pi+2", True),
        ("\\boxed{2(\\pi+1)}", "2\\pi+1", False),
        ("\\boxed{5\\,m + 1}", "5m + 1", True),
        ("\\boxed{5\\,m + 1}", "1", False),
    ],
)
def test_known_answers_are_graded_as_math_verify_grades_them(answer: str, reference: str, right: bool) -> None:
    """A model's answer against a known one as compare scores it (``number``), and as ``--extract math`` does."""
    numbers, maths = grader("number"), grader("math")
    assert maths.same(maths.known(reference), maths.read(answer)) is right
    assert numbers.same(numbers.known(reference), numbers.read(answer)) is right


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{x(x+1)}", "\\boxed{x^2+x}", True),  # was "x\\cdot(x+1)" and "x+x^{2}"
        ("\\boxed{x(x+2)}", "\\boxed{x^2+x}", False),
        ("\\boxed{2x(x-1)}", "\\boxed{2x^2-2x}", True),  # was "2x\\cdot(x-1)"
        ("\\boxed{2x(x-1)}", "\\boxed{2x^2-x}", False),
        ("\\boxed{(x+1)(x-1)}", "\\boxed{x^2-1}", True),  # was "(x+1)(x-1)"
        ("\\boxed{(x+1)(x+1)}", "\\boxed{x^2-1}", False),
        ("\\boxed{(x+1)(x+1)}", "\\boxed{(x+1)^2}", True),  # was "(x+1)(x+1)" and "(x+1)^{2}"
        ("\\boxed{(x+1)^2}", "\\boxed{x^2+2x+1}", True),
        ("\\boxed{(x+1)^2}", "\\boxed{x^2+1}", False),
        ("\\boxed{x(x+y)}", "\\boxed{x^2+xy}", True),
        ("\\boxed{\\pi(\\pi+1)}", "\\boxed{\\pi^2+\\pi}", True),
        ("\\boxed{(\\pi+1)(\\pi-1)}", "\\boxed{\\pi^2-1}", True),  # was "(\\pi+1)(\\pi-1)"
        ("\\boxed{(\\pi+1)(\\pi-1)}", "\\boxed{\\pi^2+1}", False),
        ("\\boxed{\\alpha(\\alpha-1)}", "\\boxed{\\alpha^2-\\alpha}", True),
        ("\\boxed{\\alpha(\\alpha-1)}", "\\boxed{\\alpha^2-1}", False),
        ("\\boxed{\\frac{2}{(x+1)(x-1)}}", "\\boxed{\\frac{2}{x^2-1}}", True),
        ("\\boxed{\\frac{2}{(x+1)(x-1)}}", "\\boxed{\\frac{2}{x^2+1}}", False),
    ],
)
def test_a_product_with_a_bracket_is_multiplied_out(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{2/(\\pi+1)}", "\\boxed{\\frac{2}{\\pi+1}}", True),  # was "2/(\\pi+1)", the box as written
        ("\\boxed{2/(\\pi+2)}", "\\boxed{\\frac{2}{\\pi+1}}", False),
        ("\\boxed{2/(\\pi+1)}", "\\boxed{\\pi+1}", False),
        ("$2/(\\pi+1)$", "\\boxed{\\frac{2}{\\pi+1}}", True),
        ("\\boxed{2/(-\\pi-1)}", "\\boxed{-\\frac{2}{\\pi+1}}", True),
        ("\\boxed{2/(\\pi+1) + 1}", "\\boxed{1 + \\frac{2}{\\pi+1}}", True),
        ("\\boxed{2/(\\pi+1) + 1}", "\\boxed{\\frac{2}{\\pi+1}}", False),
        ("\\boxed{2/\\pi}", "\\boxed{\\frac{2}{\\pi}}", True),  # was 2, the divisor lost
        ("\\boxed{2/\\pi}", "\\boxed{2}", False),
        ("\\boxed{2/\\pi}", "\\boxed{\\frac{3}{\\pi}}", False),
        ("$1/\\pi$", "\\boxed{\\frac{1}{\\pi}}", True),
    ],
)
def test_a_quotient_by_a_bracket_of_no_value_is_its_fraction(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("gold", "answer", "same"),
    [
        ("x^2+x", "The answer is $\\boxed{x(x+1)}$.", True),
        ("x(x+1)", "The answer is $\\boxed{x^2+x}$.", True),
        ("x^2+x", "The answer is $\\boxed{x(x+2)}$.", False),
        ("\\frac{2}{\\pi+1}", "So $\\boxed{2/(\\pi+1)}$.", True),
        ("\\frac{2}{\\pi+1}", "So $\\boxed{2/(\\pi+2)}$.", False),
    ],
)
def test_known_answers_multiplied_out_grade_as_math_verify_grades(gold: str, answer: str, same: bool) -> None:
    """The grader compare runs: a known answer written bare against a model's answer, both graders agreeing."""
    builtin, oracle = grader("number"), grader("math")
    assert oracle.same(oracle.known(gold), oracle.read(answer)) is same
    assert builtin.same(builtin.known(gold), builtin.read(answer)) is same


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{-1+\\pi}", "\\boxed{\\pi+1}", False),  # was "\\pi+1" both: the first term's sign lost
        ("\\boxed{-1+\\pi}", "\\boxed{\\pi-1}", True),
        ("\\boxed{-1-\\pi}", "\\boxed{1-\\pi}", False),  # was "-\\pi+1" both
        ("\\boxed{-1-\\pi}", "\\boxed{-\\pi-1}", True),
        ("\\boxed{-1+2^x}", "\\boxed{2^x+1}", False),
        ("\\boxed{-1+2^x}", "\\boxed{2^x-1}", True),
    ],
)
def test_a_sums_first_term_keeps_its_sign(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{1/xy}", "\\boxed{\\frac{y}{x}}", False),  # was y/x: the letters' product split at the divisor
        ("\\boxed{1/xy}", "\\boxed{\\frac{1}{xy}}", True),
        ("\\boxed{a/bc}", "\\boxed{\\frac{ac}{b}}", False),
        ("\\boxed{a/bc}", "\\boxed{\\frac{a}{bc}}", True),
        ("\\boxed{ab/cd}", "\\boxed{\\frac{abd}{c}}", False),
        ("\\boxed{ab/cd}", "\\boxed{\\frac{ab}{cd}}", True),
        ("\\boxed{1/2xy}", "\\boxed{\\frac{y}{2x}}", False),
        ("\\boxed{1/2xy}", "\\boxed{\\frac{1}{2xy}}", True),
    ],
)
def test_a_product_of_letters_after_a_slash_is_the_whole_divisor(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{1/2\\pi}", "\\boxed{0.5}", False),  # was 0.5: a divisor's number read, its \\pi lost
        ("\\boxed{1/2\\pi}", "\\boxed{\\frac{1}{2\\pi}}", True),
        ("\\boxed{4/2\\pi}", "\\boxed{2}", False),
        ("\\boxed{4/2\\pi}", "\\boxed{\\frac{2}{\\pi}}", True),
        ("\\boxed{2/3\\pi}", "\\boxed{\\frac{2}{3}}", False),
        ("\\boxed{2/3\\pi}", "\\boxed{\\frac{2}{3\\pi}}", True),
    ],
)
def test_a_quotient_by_a_number_times_pi_keeps_its_pi(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("\\boxed{(x+1)2\\frac{1}{2}}", "\\boxed{x+1}", False),  # was x+1: the mixed number dropped
        ("\\boxed{(x+1)2\\frac{1}{2}}", "\\boxed{\\frac{5x+5}{2}}", True),
        ("\\boxed{x\\cdot 2\\frac{1}{2}}", "\\boxed{x}", False),  # was x
        ("\\boxed{x\\cdot 2\\frac{1}{2}}", "\\boxed{\\frac{5x}{2}}", True),
        ("\\boxed{3 \\cdot 2\\frac12}", "\\boxed{3}", False),  # was 3
        ("\\boxed{3 \\cdot 2\\frac12}", "\\boxed{7.5}", True),
        ("\\boxed{2\\frac{1}{2}\\cdot 3}", "\\boxed{3}", False),  # was 3
        ("\\boxed{x + 2\\frac{1}{2}}", "\\boxed{x+1}", False),  # was x+1
        ("\\boxed{x + 2\\frac{1}{2}}", "\\boxed{x + 2.5}", True),
        ("\\boxed{n!+1}", "\\boxed{1}", False),  # was 1: the factorial dropped
        ("\\boxed{n!+1}", "\\boxed{n! + 1}", True),  # kept as written, spelled one way
        ("\\boxed{n!-1}", "\\boxed{-1}", False),  # was -1
        ("\\boxed{1-n!}", "\\boxed{1-n}", False),  # was 1-n
        ("\\boxed{n! \\cdot 2}", "\\boxed{2}", False),  # was 2
        ("\\boxed{2n!}", "\\boxed{2n}", False),  # was 2n
        ("\\boxed{(n+1)!}", "\\boxed{n+1}", False),  # was n+1
        ("\\boxed{5!}", "\\boxed{5}", False),  # was 5
        ("\\boxed{5!}", "\\boxed{120}", True),
        ("\\boxed{3!+1}", "\\boxed{7}", True),
        ("\\boxed{\\frac{1}{2}\\cdot 4!}", "\\boxed{2}", False),  # was 2
        ("\\boxed{\\frac{1}{2}\\cdot 4!}", "\\boxed{12}", True),
        ("\\boxed{\\frac{5!}{3!}}", "\\boxed{20}", True),
        ("\\boxed{\\binom{5}{2}}", "\\boxed{10}", True),  # was kept as written: another answer than 10
        ("\\boxed{\\binom{5}{2}+1}", "\\boxed{11}", True),
        ("\\boxed{\\binom{5}{2}+1}", "\\boxed{10}", False),
    ],
)
def test_a_factorial_binomial_or_mixed_number_is_read_with_the_rest(a: str, b: str, same: bool) -> None:
    _assert_read_as_the_oracle_reads(a, b, same)
