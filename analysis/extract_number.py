"""The ``number`` extractor: the number an answer gives, one spelling per value, so that two
answers compare equal where their values are equal (a fraction and a mixed number each read whole),
and a LaTeX expression that is no rational number as one answer, by its spelling."""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from fractions import Fraction

from .answer_lists import listed, side_by_side
from .exact_value import Surd, evaluated, product_at, spelled, summed
from .greek_letters import as_commands
from .math_letters import MATH_BRACKET, last_math, multiplied
from .polynomial import expanded, polynomial_value
from .relations import related
from .scan import Scan
from .sum_terms import GREEK, negated, ordered_sum
from .unit_words import MORE_MATH, SHORT_UNIT, UNIT, is_unit
from .whole_terms import whole_terms

# A number: commas only as thousands ("1,234", never "3,5"), ".5", an exponent ("1e5"); a minus
# is a sign only where it follows no word or bracket ("3-5" is 3 and 5); a power's exponent after
# "^" is no number of its own ("50 cm^2" is 50).
_NUMBER = re.compile(
    r"(?<!\^)(?<!\^\{)(?<!\d)((?<![\w)\]])-)?"
    r"((?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)((?:[eE][-+]?\d+)?)"
)
# A fraction is one number: LaTeX's (``\frac{1}{2}``, ``\dfrac``, ``\tfrac``, ``\frac12``, a sign
# before it or inside), or "1/2" (not part of a date "1/2/2024", nor an exponent "x^{1/2}"): read
# as two numbers, "\boxed{\frac{1}{2}}" gave 2.
_PART = r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+"
_ARG = r"(?:\{\s*(-?)\s*(" + _PART + r")\s*\}|(\d))"
_LATEX_FRACTION = r"((?<![\w)\]])-\s*)?\\[dt]?frac\s*" + _ARG + r"\s*" + _ARG
_SLASH_FRACTION = r"(?<![\^/.\d])(?<!\^\{)((?<![\w)\]])-)?(" + _PART + r")\s*/\s*(" + _PART + r")(?![\d/]|\.\d)"
_FRACTION = re.compile(_LATEX_FRACTION + "|" + _SLASH_FRACTION)
_LONGEST_FRACTION = 200  # characters of its two parts
# The whole number before a fraction that makes a mixed number ("1 1/2"), a sign its own.
_WHOLE = r"(?:(?<![\w)\]])(-)[ \t]*)?(?<![\w.,^/\\])(\d{1,3}(?:,\d{3})+|\d+)"
# A LaTeX expression that is no rational number ("\frac{\sqrt{2}}{2}", "2\sqrt3", "\frac{\pi}{2}"):
# its command, a number before it (a factor) and a sign; read as one answer (``_expressions``).
# Right after "\cdot" or "\times" ("2\cdot\sqrt{2}") their letters are no word it is part of; right after a "/" the
# command alone, or a number and its \pi, is a divisor ("2/\pi", "1/2\pi": they read 2 and 0.5, the \pi lost; the box is
# then a quotient, ``polynomial``).
_IRRATIONAL = re.compile(
    r"((?<![\w)\]])-\s*)?(?:(?<=\\cdot)|(?<=\\times)|(?<![\w.,^/\\])|(?<=/)(?=\\|\d+(?:\.\d+)?[ \t]*\\pi(?![a-zA-Z])))((?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?)?[ \t]*\\(sqrt|[dt]?frac|pi)(?![a-zA-Z])"
)
# A power of a number ("2^3", "10^{-3}"), evaluated: "50 cm^2" is no power of a number; right after
# "\\cdot" or "\\times" ("3\\times2^x") their letters are no word it is part of.
_POWER = re.compile(r"((?<![\w)\]])-\s*)?(?:(?<=\\cdot)|(?<=\\times)|(?<![\w.,^/\\]))(?:" + _PART + r")(?:[eE][-+]?\d+)?[ \t]*\^")
# A bracket whose power follows its closing one ("\\left(\\frac12\\right)^2"): read with its power.
# A number right before it is its factor ("2(\\frac12)^2" is 0.5); "f(2)^2" is no power of 2.
_GROUP = re.compile(r"((?<![\w)\]])-\s*)?(?:(?<![\w.,^/\\])(?:" + _PART + r")[ \t]*|(?<![\w)\]}]))(?:\\left\s*)?\(")
_CARET = re.compile(r"[ \t]*\^")
# What after a bracket's closing one makes it a product's factor: another bracket, or a number right after it ("(2)3"
# is 6, as "2(3)" is; it read 3). No space alone: in prose "(1) (2)" is a list (in math it is LaTeX's: ``math_letters``).
_BRACKET_AFTER = re.compile(r"(?:[ \t]*(?:\\cdot|\\times|\*)[ \t]*)?(?:\\left\s*)?\(|\d")
# A unit written right after its number ("10s", "5kg", "3cm", "2nd"), read as a unit after a space is
# ("10 s" is 10): "10s" was the product 10s. Only where no operator follows it ("2s + 3t" is a sum), as
# math-verify strips a unit only at the end; a single letter only of a second, metre, gram, hour or
# litre, other letters are a product's ("2x"). Words of four letters or more are prose already. Squared
# or cubed ("50m^2", a power of one digit) it is still the unit, as "50 m^2" is (it read the product 50m^{2}),
# and so is a unit per unit ("5m/s", "9.8m/s^2", as "5 m/s" is; it read the quotient \frac{5m}{s}). The units: ``unit_words``.
_UNIT_POWER = r"(?:" + UNIT + r")(?:\^(?:\{\d+\}|\d+))?"
_ATTACHED_UNIT = re.compile(
    r"(?<=\d)(?="
    + _UNIT_POWER
    + r"(?:/"
    + _UNIT_POWER
    + r")?(?![\w{^])(?![ \t]*(?:[-+*/^(]|\\cdot(?![a-zA-Z])|\\times(?![a-zA-Z])))(?!"
    + MORE_MATH
    + r"))"
)
# What before a minus spaced from its bracket makes it a difference's ("x - (2+3)"), no sign.
# The terms of a sum around an expression of no value ("1 + 2^x", "2^x - 3 \\cdot y"): a term is
# numbers, single letters, commands, braces, balanced brackets, joined by products; terms by "+" or "-".
# A space after \\pi, \\cdot, \\times or a closing brace before a letter is no gap ("\\pi x", "\\sqrt{2} x"; it
# was "\\pi", the letter lost): LaTeX ignores it. Two or three letters right after a number or a closing
# brace that are no unit are a product's ("2xy"; it was 2).
# A Greek letter ("\\alpha", "\\Gamma") is a variable as a latin letter is ("\\alpha + 1" read 1, its
# letter no term); "\\pi" is the constant. ``_as_letter`` stands it for a latin one where letters are counted.
_GREEK = r"\\(?:" + "|".join(sorted(GREEK, key=len, reverse=True)) + r")(?![a-zA-Z])"
_GREEK_LETTER = re.compile(_GREEK)
_LATEX_SPACE = r"(?:[ \t]+(?=[a-zA-Z](?![a-zA-Z])|" + _GREEK + r"))?"
# Four or more are a word where they hold a vowel ("5apples" is 5), else a product too ("2xyzw").
_CONSONANTS = r"[b-df-hj-np-tv-zB-DF-HJ-NP-TV-Z]"
_LETTER_RUN = r"(?!(?:" + SHORT_UNIT + r")(?![a-zA-Z]))(?:[a-zA-Z]{2,3}|" + _CONSONANTS + r"{4,})(?![a-zA-Z])"
_ATTACHED_LETTERS = r"(?<=[\d}])" + _LETTER_RUN  # "\\frac{1}{2}xy" too: it read 0.5
# Such letters as the whole answer ("xy", "\\boxed{xy}", "$xy$"): their product, as "x \\cdot y" is (they
# read nothing), single letters spaced as LaTeX writes them too ("\\boxed{y x}" read "\\boxed{y");
# anywhere else a word of two or three letters is prose ("so 2 + 3").
_LETTERS_ALONE = re.compile(r"[\s$]*(-?)[ \t]*(" + _LETTER_RUN + r"|[a-zA-Z](?:[ \t]+[a-zA-Z])+(?![a-zA-Z]))[\s$.]*")
# A box that holds one letter, a subscript after it too ("\\boxed{x}", "\\boxed{a_{ij}}"): that variable is the
# answer, as math-verify reads it (it read nothing, or the broken "\\boxed{x" where a space was in the box).
_SUBSCRIPTED = r"(?:[a-zA-Z](?![a-zA-Z])|" + _GREEK + r")(?:_(?:\{[^{}]*\}|[a-zA-Z\d]))?"
_VARIABLE_ALONE = re.compile(r"[\s$]*(-?)[ \t]*(" + _SUBSCRIPTED + r")[\s$.]*")
# "(x)", "\\left(x\\right)", "[x]" (math-verify's x: "\\boxed{[x]}" read nothing)
_WHOLE_BRACKET = re.compile(r"\s*(?:\\left\s*)?(?:\((.*?)(?:\\right\s*)?\)|\[(.*?)(?:\\right\s*)?\])\s*", re.DOTALL)
_BRACED_SUBSCRIPT = re.compile(r"_\{([a-zA-Z\d])\}")  # "x_{1}" as "x_1", one variable
# A space after a bracket that holds a letter, or after the exponent of a letter's or a bracket's power, before
# a letter or a bracket that holds one is LaTeX's too, a product's ("(1+x)^2 y", "(1+x) y", "x^2 y", "(x+1) (x-1)";
# they were "(x+1)^{2}", "x+1", "x^{2}" and "x-1", a factor lost); after a number's power it is its unit's ("10^3 m").
_POWER_OF_VARIABLE = r"(?<=[a-zA-Z)])\^(?:\d+(?![\d.])|[a-zA-Z](?![a-zA-Z]))"
_VARIABLE_INSIDE = r"(?=[^()]*[a-zA-Z])(?![^()]*(?<![\\a-zA-Z])[a-zA-Z]{2})"  # a letter, no word ("(see above)")
_VARIABLE_BRACKET = r"\(" + _VARIABLE_INSIDE + r"[^()]*\)"
_FACTOR_SPACE = r"(?:[ \t]+(?=[a-zA-Z](?![a-zA-Z])|" + _GREEK + r"|\(" + _VARIABLE_INSIDE + r"))?"
_ATOM = (  # no word of prose
    r"(?:(?:\\(?:pi|cdot|times)(?![a-zA-Z])|"
    + _GREEK
    + r")"
    + _LATEX_SPACE
    + r"|\\[a-zA-Z]+|\d+(?:\.\d+)?|(?<![a-zA-Z])[a-zA-Z](?![a-zA-Z])"
    r"|"
    + _ATTACHED_LETTERS
    + r"|_\{[^{}]*\}|"
    + _POWER_OF_VARIABLE
    + _FACTOR_SPACE
    + r"|[_^{]|\}"
    + _FACTOR_SPACE
    + r"|"
    + _VARIABLE_BRACKET
    + _FACTOR_SPACE
    + r"|\([^()]*\))+"
)
_TERM = _ATOM + r"(?:[ \t]*(?:\\cdot|\\times|\*|/)[ \t]*(?:-[ \t]*)?" + _ATOM + r")*"  # "x \\cdot -3": a factor's sign
_JOINER = re.compile(r"[ \t]*[-+][ \t]*")
# a sign before the first term is its own ("-1 + \\pi" is \\pi-1; it was \\pi+1, the sign lost)
_HEAD = re.compile(r"(?:(?<![\w)\]}])-[ \t]*)?(?<![\w\\.,])(?:" + _TERM + r"[ \t]*[-+][ \t]*)+\Z")
_SIGNED_HEAD = re.compile(r"(?<![\w\\.,])" + _TERM + r"(?:[ \t]*[-+][ \t]*" + _TERM + r")*[ \t]*\Z")  # before "- 2^x"
_SPACED_SIGN = re.compile(r"[-+][ \t]")
_TAIL = re.compile(r"(?:[ \t]*[-+][ \t]*(?:-[ \t]*)?" + _TERM + r")+")
# A sum or difference with a single-letter variable term ("x + 1", "2 + 3x", "x - (2+3)"), a signed or
# multiplied bracket holding one ("-(x+1)", "2(x+1)"): one expression, as written; its last number
# was another answer's ("x + 1" read 1). A word of prose is no term ("total + 5" is 5), nor a letter
# after a number and a space, its unit ("5 m + 3 m").
_LETTER_SUM = re.compile(
    r"(?:(?<![\w)\]\\.,])-[ \t]*)?(?<![\w\\.,^_{])" + _TERM + r"((?:[ \t]*[-+][ \t]*(?:-[ \t]*)?" + _TERM + r")*)"
)
_COMMANDS = re.compile(r"\\[a-zA-Z]+")
_LETTERS_OF = re.compile(_ATTACHED_LETTERS)
_NO_TERM_SIGN = re.compile(r"(?:\dE|\\cdot|/)\Z")  # "1E+99999", "x \\cdot -3": no sum's sign
_LETTER = re.compile(r"(?<![a-zA-Z])[a-zA-Z](?![a-zA-Z])")
# A variable's subscript ("a_{ij}", "x_1"): part of its name, no word of prose nor a factor ("a_{ij} + 1" read 1).
_SUBSCRIPT_OF = re.compile(r"((?<![a-zA-Z\\])[a-zA-Z])_(?:\{[^{}]*\}|[a-zA-Z\d])")  # no command's ("\\log_2")
# A minus before a bracket of a product ("-(2x)", "-(x)"): the product's sign, read with it (it read 2x, the sign lost).
_SIGNED_BRACKET = re.compile(r"-[ \t]*\(")
_LETTER_BRACKET = re.compile(r"\((?=[^()]*[a-zA-Z])(?=[^()]*[-+*/])[^()]*\)")
# A product with a single-letter variable factor ("2 \\cdot x", "3x", "x \\cdot 3"): one expression too,
# its factors in one order (``_ordered``); its number was another answer's ("2 \\cdot x" read 2).
_PIECE = re.compile(r"\\[a-zA-Z]+|\d+(?:\.\d+)?|(?<![a-zA-Z])[a-zA-Z](?![a-zA-Z])|\([^()]*\)")
_ARGUMENTS = re.compile(r"\^(?:\{[^{}]*\}|\\[a-zA-Z]+|.)|\{[^{}]*\}")  # exponents, commands' arguments
# A function's application ("f(2)", "\\sin(2)", "\\log_2(8)"): no number, nor a product this orders.
# A letter is applied only to one number, or one letter with its subscript or power ("f(2)", "f(x^2)", "f(\\alpha)",
# "f(x, y)"), as math-verify reads it; before a bracket of anything else it is its factor: an operator, a sign
# ("y(1+x)^2" is y(x+1)^2, as "(1+x)^2 y" is, "f(3+4)" 7f, "f(-2)" -2f), or a product ("f(2x)" is 2fx, "y(\\frac12)"
# y/2; they were read as f or y applied, other answers).
_ARGUMENT_ATOM = (
    r"[ \t]*(?:\d+(?:\.\d+)?|(?:(?!e\^)[a-zA-Z]|\\pi(?![a-zA-Z])|" + _GREEK + r")"
    r"(?:_(?:\{[^{}]*\}|[a-zA-Z\d]))?(?:\^(?:\{[^{}]*\}|[a-zA-Z\d]))?)[ \t]*(?:,[^()]*)?\)"
)
_APPLIED = re.compile(r"(?<![a-zA-Z\\])[a-zA-Z]\((?=" + _ARGUMENT_ATOM + ")")
_FUNCTION = re.compile(r"\\(?!left|right|cdot|times|sqrt|frac|dfrac|tfrac|pi)[a-zA-Z]+(?:_(?:\{[^{}]*\}|\w))?(?:\\left)?\(")
# A factor of a product as the extractor spells it, and its rank in the one order: numbers, roots and
# fractions, \\pi, powers of numbers, letters, brackets; a factor with a sign or of any other form
# leaves the product as written.
_FACTOR = re.compile(
    r"(\d+(?:\.\d+)?(?![\d.^]))|(\\sqrt(?:\[[^\[\]{}]*\])?\{[^{}]*\}|\\frac\{[^{}]*\}\{[^{}]*\})|(\\pi(?![a-zA-Z])(?:\^\{[^{}]*\})?)"
    r"|(\d+(?:\.\d+)?\^\{[^{}]*\})|((?:[a-zA-Z]|"
    + _GREEK
    + r")(?:_(?:\{[^{}]*\}|[a-zA-Z\d]))?(?:\^\{[^{}]*\})?)|(\([^()]*\)(?:\^\{[^{}]*\})?)"
)
# A single letter's power, a number before it its factor ("e^2", math-verify's exp(2); "2e^2", "x^2"):
# one expression too, not nothing nor its factor ("2e^2" read 2); "50 m^2", a unit's, is 50.
_LETTER_POWER = re.compile(r"(?:-[ \t]*)?(?:\d+(?:\.\d+)?)?[a-zA-Z]\^")
_EXPONENT = re.compile(r"(\d)[eE][-+]?\d+")
# A rational multiple of \\pi as the extractor spells it, and a product after it ("3\\pi \\cdot 2"), that no
# factor of no value ("2x", "2^x", "\\sqrt{y}") goes on.
_PI_MULTIPLE = re.compile(r"(-?)(\d+(?:\.\d+)?)?\\pi")
# A power of no value as the extractor spells it, its factor before it ("-3\\cdot2^{x}"): a product after
# it ("2^x \\cdot 3") is its factor too.
_POWER_MULTIPLE = re.compile(r"(-?)(?:(\d+(?:\.\d+)?)\\cdot)?(\d+(?:\.\d+)?(?:E[-+]\d+)?\^\{.*\})")
_TIMES_AFTER = re.compile(r"[ \t]*(?:\\cdot(?![a-zA-Z])|\\times(?![a-zA-Z])|\*)[ \t]*")
_NO_FACTOR_AFTER = re.compile(r"[ \t]*(?:[\w^({]|\\(?![)\]]))")
_OPERAND_BEFORE = re.compile(r"[\w)\]}][ \t]*\Z")
# A number right before a bracket, nothing between them, is its factor ("2(3+4)" is 14, as
# math-verify's LaTeX parser multiplies): "2 (two)", "12 (3*4)" and "f(3)" are no products (in math a space
# before a bracket of math is none: ``math_letters``).
_FACTOR_BEFORE = re.compile(r"\d(?:\\left\s*)?\(\Z")
# Outside math such a bracket spaced after a number, its power too, is an aside in prose, none of its numbers the
# answer: "2 (x-1)" and "2 (3+4)" are 2, as math-verify reads them (they read 1, its last number, and 7). Inside
# math the space is LaTeX's, the number the bracket's factor (``math_letters`` joins them first). A power's
# exponent is no such number ("(x+1)^2 (x+1)^2" is a product).
_ASIDE = re.compile(r"((?<![\w.,^{])(?:" + _PART + r"))[ \t]+" + MATH_BRACKET + r"(?:\^(?:\{[^{}]*\}|\w))?")
# Plain numbers joined by "+", "*", "\\cdot", "\\times" or a "-" spaced on both sides ("x = 2 + 3"),
# read whole where they have a value (``summed``), as math-verify reads an expression: "3-5" is a
# range, "1 -1/2" two numbers. A bracket after the operator is a term ("2 \\cdot (3+4)" is 14).
# Divisions chained with spaced "/" are one quotient ("12 / 4 / 2" is 1.5, as math-verify divides);
# "12/4/2024" is a date and "1 1 / 2" a mixed number (``_FRACTION``). A quotient another operator
# follows is a term ("12 / 4 + 1" is 4, as math-verify reads it; it was 1, the last term).
_OPERAND = r"(?:[.\d(]|\\left\s*\()"
_OPERATOR = (  # an operator and its operand, or a "-" spaced on both sides; a "-" after either is a sign
    # ("2 * -3" is -6, as math-verify reads it: it was -3)
    r"[ \t]*(?:\+|\*|\\cdot(?![a-zA-Z])|\\times(?![a-zA-Z]))[ \t]*(?:-[ \t]*)?" + _OPERAND,
    r"[ \t]+-[ \t]+(?:-[ \t]*)?" + _OPERAND,
)
_JOINED = (  # what joins the number to the next one: an operator, a chain of spaced "/", a quotient's
    *_OPERATOR,
    r"[ \t]+/[ \t]+(?:" + _PART + r")[ \t]+/[ \t]+" + _OPERAND,
    r"[ \t]*/[ \t]*(?:" + _PART + r")(?![\d/.])(?=" + "|".join(_OPERATOR) + ")",
    r"[ \t]*/[ \t]*-[ \t]*" + _OPERAND,  # a signed divisor: no fraction ("6 / -2" is -3)
    r"[ \t]*/[ \t]*(?:\\left\s*)?\(",  # a bracket's divisor ("2/(3+4)" is 2/7; it read 7)
)
_ARITHMETIC = re.compile(r"((?<![\w)\]])-\s*)?(?<![\w.,^/\\])(?:" + _PART + r")(?:[eE][-+]?\d+)?(?=" + "|".join(_JOINED) + ")")
# The tail of an operation whose head was no number ("x + 2 + 3"): not read as a sum of its own.
_AFTER_OPERATOR = re.compile(r"(?:[-+*/^]|\\cdot|\\times)[ \t]*\Z")
# A command factor right after an expression ("\\pi\\sqrt2", "\\frac{1}{0}\\sqrt2"): the product goes on.
_NEXT_FACTOR = re.compile(r"[ \t]*(?:\\cdot|\\times|\*)?[ \t]*\\(sqrt|[dt]?frac|pi)(?![a-zA-Z])")
# A number times the expression after it ("1.5 \\times 10^3"), read with it.
_TIMES_BEFORE = re.compile(r"((?<![\w)\]])-\s*)?(?<![\w.,^/\\])(" + _PART + r")[ \t]*(?:\\cdot|\\times|\*)[ \t]*\Z")
# A fraction times the expression after it ("\\frac{1}{2} \\cdot 2^x"), read with it.
_FRACTION_TIMES = re.compile(r"(?:" + _LATEX_FRACTION + r")[ \t]*(?:\\cdot|\\times|\*)?[ \t]*\Z")
# Numbers added to or taken from the expression after them ("1 + 2^3", "1 - \\sqrt2"), read with it.
_TERMS_BEFORE = re.compile(
    r"((?<![\w)\]])-\s*)?(?<![\w.,^/\\])(?:" + _PART + r")(?:[ \t]*[-+][ \t]*(?:" + _PART + r"))*[ \t]*[-+][ \t]*\Z"
)
_LONGEST_ARGUMENT = 200  # characters of a braced argument, its braces in
_PLAIN_PART = re.compile(r"\s*-?\s*(?:" + _PART + r")\s*")
_BOXED = re.compile(r"\\boxed\s*\{")
# Numbers joined by two or more unspaced "/" in a box: arithmetic, not a date ("\\boxed{12/4/2}" is
# 1.5, as math-verify divides; it was 2), read as the chained division spaced slashes are.
_SLASHED = re.compile(r"(?<![\w.,^/\\])(?<!\^\{)(?:" + _PART + r")(?:[ \t]*/[ \t]*(?:" + _PART + r")){2,}(?![\w/.])")
# GSM8K's "#### 72", not a markdown heading "#### Step 1"; "The answer is 72", "Answer: 72".
_MARKED_NUMBER = (re.compile(r"####(?=[ \t]*\$?-?\.?\d)"), re.compile(r"\b(?i:answer)(?:\s+is\b|\s*:)"))
# On a marked line, an "=" this near the marker and a number right after it: math-verify's
# ``answer:(?:.{0,100}=\s*|.{0,50}?)`` reads the answer after the last such "=".
_EQUALS_WITHIN = 100
# Unicode's times, division and minus signs, read as math-verify's LaTeX parser reads them ("3 × 4"
# is 12, "12 ÷ 4" 3, "−5" -5); a minus between two numbers is no range ("5−2" is 3), a division
# sign no date's slash ("12÷4÷2" is 1.5, spaced as "12 / 4 / 2" is). Its middle dot
# ("3 · 4") it reads as no product, and neither does this.
_UNICODE_OPERATORS = str.maketrans({"×": "*", "÷": " / ", "−": "-"})
_DIV = re.compile(r"[ \t]*\\div(?![a-zA-Z])[ \t]*")  # LaTeX's division sign, read as "÷" is
_UNICODE_DIFFERENCE = re.compile(r"(?<=[\d)}])[ \t]*−[ \t]*(?=[.\d(\\])")
# A function applied to a number without its bracket ("\\sin 2", "\\log_2 8", "\\ln{2}") or written as a
# word ("sin(2)"): its application, spelled "\\sin(2)" (``_FUNCTION``): each read 2, its argument.
_FUNCTION_NAMES = r"(?:arcsin|arccos|arctan|sinh|cosh|tanh|sin|cos|tan|cot|sec|csc|log|ln|lg|exp)"
_SUBSCRIPT = r"(?:_(?:\{[^{}]*\}|[a-zA-Z\d]))?"
_FUNCTION_WORD = re.compile(  # a word only right before its bracket: "I log (2) items" is prose
    r"(?<![a-zA-Z\\])(?:\\(" + _FUNCTION_NAMES + _SUBSCRIPT + r")[ \t]*|(" + _FUNCTION_NAMES + _SUBSCRIPT + r"))"
    r"(?=\(|\\left(?![a-zA-Z]))"
)
# A power of a function's value written on its name ("\\sin^2 x", "\\sin^2(x)"): as on its bracket,
# "\\sin(x)^{2}" ("\\sin^2 x" read nothing, "\\sin^2(x)" another answer than "\\sin(x)^2"); a
# negative one ("\\sin^{-1}") is an inverse, left alone.
_FUNCTION_ARGUMENT = re.compile(
    r"\\(" + _FUNCTION_NAMES + r")(?![a-zA-Z])(" + _SUBSCRIPT + r")(?:\^(?:\{(\d+)\}|(\d)))?[ \t]*"
    r"(?:\{([^{}]+)\}|(-?(?:\d+(?:\.\d+)?(?:\\pi(?![a-zA-Z])|[a-zA-Z](?![a-zA-Z])|"
    + _GREEK
    + r")?|\\pi(?![a-zA-Z])|[a-zA-Z](?![a-zA-Z])|"
    + _GREEK
    + r"))"
    r"|\(([^()]+)\))"
)
# Its name as a plain word before its argument, no bracket ("sin 2", "cos x"; it read 2): a name that
# is no English word before a number ("log 2 items", "sec 2", "exp 5" are prose, as is "I log (2)").
_FUNCTION_PLAIN = re.compile(
    r"(?<![a-zA-Z\\])(arcsin|arccos|arctan|sinh|cosh|tanh|sin|cos|tan|cot|csc|ln)"
    r"(?=(?:\^(?:\{\d+\}|\d))?[ \t]*(?:-?\d|\\pi(?![a-zA-Z])|[a-zA-Z](?![a-zA-Z])|" + _GREEK + r"))"
)


def _applied(m: re.Match[str]) -> str:
    """A function's application ``_FUNCTION_ARGUMENT`` found, spelled "\\sin(2)", its power after it."""
    name, sub, power = m.group(1), m.group(2), m.group(3) or m.group(4)
    return f"\\{name}{sub}({m.group(5) or m.group(6) or m.group(7)})" + (f"^{{{power}}}" if power else "")


# Euler's number: "e" is math-verify's constant, and so "\\exp(1)", "e^{1}" and an upright "\\mathrm{e}" are "e", and
# "\\exp(x)" is "e^{x}", as "e^x" is (they were other answers). A decimal of it ("2.718281828") stays a decimal, as
# one of \\pi does: no value here is rounded to be another's.
_UPRIGHT_E = re.compile(r"\\(?:mathrm|text|operatorname)\s*\{\s*e\s*\}")
_EXP = re.compile(r"\\exp\(([^()]+)\)")
_E_FIRST_POWER = re.compile(r"(?<![a-zA-Z\\])e\^(?:\{\s*1\s*\}|1(?![\d.]))")
# Words in ``\\text{...}`` (no digit in them: "\\boxed{10\\text{ m/s}}", "\\text{ cm}^2") are prose, a unit after
# a number with its power: read as a space, as math-verify strips them ("m/s}" read the quotient "\\frac{m}{s}}"), a
# unit's powers in them or on them too ("\\text{m\\,s^{-1}}" read 1, its exponent, and "\\text{m s}^{-1}" 0.2).
_TEXT_WORDS = re.compile(
    r"\\(?:text(?:rm|bf|it|sf|tt|normal)?|mbox)\s*\{(?:[^{}\d]|\^(?:\{-?\d+\}|\d))*\}(?:\^(?:\{-?\d+\}|\d))?"
)
# Units set upright after a number ("5\\,\\mathrm{m}", "5\\,\\mathrm{m\\,s^{-1}}", "5\\,\\mathrm{m}\\,\\mathrm{s}^{-1}"), each word a unit
# (``unit_words``): read as a space, as math-verify strips them (they read 1, an exponent, and "\\mathrm{s}^{-1}"). Any
# other upright word is math's ("2\\mathrm{i}", "\\mathrm{d}x").
_UPRIGHT_UNITS = re.compile(
    r"(?<=\d)(?:[ \t]*\\mathrm\s*\{((?:[^{}\d]|\^(?:\{-?\d+\}|\d))*)\}(?:\^(?:\{-?\d+\}|\d))?(?:[ \t]*/)?)+"
)


def _upright_units(text: str) -> str:
    """The text with units set upright after a number (``_UPRIGHT_UNITS``) as a space."""

    def unit(m: re.Match[str]) -> str:
        words = re.findall(r"[^\W\d_]+", re.sub(r"\\mathrm", " ", m.group()))
        return " " if words and all(is_unit(word) for word in words) else m.group()

    return _UPRIGHT_UNITS.sub(unit, text)


# "and" or "or" as such text joins a list's items, as a comma does ("\\boxed{1 \\text{ and } 2}" is "\\boxed{1, 2}",
# as math-verify reads it; it read 2, one answer with "\\boxed{2}").
_TEXT_AND = re.compile(r"[ \t]*,?[ \t]*\\(?:text(?:rm|bf|it|sf|tt|normal)?|mbox)\s*\{\s*(?:and|or)\s*\}")
_NUMBER_AHEAD = re.compile(r"[ \t]*\$?[ \t]*-?[ \t]*(?:\.?\d|\\[a-zA-Z]|\()")


# LaTeX's spacing commands ("\\,", "\\;", "\\:", "\\ ", "\\quad"; "\\!" a negative one) are spaces, as math-verify
# reads them: "\\boxed{2\\,(x+1)}" read x+1 and "\\boxed{5\\,xy}" "\\cdot y". Between groups of three digits a thin
# space is a thousands separator ("5\\,000" is 5000, as "5,000" is; it read 0, where math-verify reads 5*0), and
# after a decimal point it groups the decimals, the last group three digits or fewer ("0.123\\,456" is 0.123456;
# it read 456, where math-verify reads 0.123*456).
_SPACING = re.compile(r"(?<!\\)\\(?:[,;: ]|q?quad(?![a-zA-Z]))|(?<!\\)\\!")
_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:\\[,;: ]\d{3})+(?![\d,])")
_DECIMALS = re.compile(r"(?<=\d\.)\d{3}(?:\\[,;: ]\d{3})*\\[,;: ]\d{1,3}(?![\d,])")


def _spaced(text: str) -> str:
    """The text with LaTeX's spacing commands as spaces (``_SPACING``), a thousands separator as a comma,
    the spaces between groups of decimals as none."""
    text = _THOUSANDS.sub(lambda m: re.sub(r"\\.", ",", m.group()), text)
    text = _DECIMALS.sub(lambda m: re.sub(r"\\.", "", m.group()), text)
    return _SPACING.sub(lambda m: "" if m.group() == "\\!" else " ", text)


def number(text: str) -> str | None:
    """The number the text gives as its answer (``_read``), a spelling with a bracket multiplied out where it
    is a polynomial or a quotient of two (``polynomial.expanded``): "x(x+1)" is "x^2+x", "2/(\\pi+1)"
    "\\frac{2}{\\pi+1}", as math-verify reads them (they were compared by spelling, other answers)."""
    read = _read(text)
    if read is None or (product := expanded(read)) is None:
        return read
    spelled = _read(f"\\boxed{{{product}}}")
    # read back as the value it is: where the extractor reads the sum otherwise ("\\frac{5}{2} m", a unit's
    # "m" dropped), the reading stays as it was
    return spelled if spelled is not None and polynomial_value(spelled) == polynomial_value(read) else read


def _read(text: str) -> str | None:
    """The number the text gives as its answer, written so that equal values are equal strings
    ("3.50", "3.5" and "35e-1" are "3.5"; "-0.0" is "0"; "\\frac{1}{2}" and "1/2" are "0.5"; the
    mixed number "1 1/2" is "1.5"); an expression that is no rational number, "\\frac{\\sqrt2}{2}",
    is its LaTeX spelled one way, not evaluated.

    The last ``\\boxed{...}``'s, else the first after the last "####" (GSM8K's) or else after the
    last "answer is"/"answer:" on its line (after its last "=": "Answer: 7 + 1 = 9" -> "9"), else
    the last in the text ("17 + 25 = 42" -> "42"):
    a check after the answer ("\\boxed{42}. Check: 42 = 6*7") is not the answer.
    """
    written = text
    text = as_commands(_spaced(text))  # "α" as "\\alpha"
    text = _UNICODE_DIFFERENCE.sub(" - ", text).translate(_UNICODE_OPERATORS)
    text = _DIV.sub(" / ", text)  # "12 \\div 4" as "12 / 4", as "÷" is: 3 (it read 4, the divisor)
    text = _ATTACHED_UNIT.sub(" ", _TEXT_WORDS.sub(" ", _upright_units(_TEXT_AND.sub(", ", text))))
    text = _FUNCTION_WORD.sub(lambda m: "\\" + (m.group(1) or m.group(2)), text)
    text = _FUNCTION_PLAIN.sub(r"\\\1", text)
    text = _FUNCTION_ARGUMENT.sub(_applied, text)
    text = _E_FIRST_POWER.sub("e", _EXP.sub(r"e^{\1}", _UPRIGHT_E.sub("e", text)))  # "\\exp(1)", "e^1" as "e"
    text = re.sub(r"(\\" + _FUNCTION_NAMES + r")_\{(\w)\}", r"\1_\2", text)  # "\\log_{2}" as "\\log_2"
    text = multiplied(text)  # "\\boxed{xy + 1}" as "\\boxed{x \\cdot y + 1}": inside math, letters are variables
    text = _ASIDE.sub(r"\1", text)
    boxes = list(_BOXED.finditer(text))
    if boxes:
        boxed = _SLASHED.sub(lambda m: re.sub(r"[ \t]*/[ \t]*", " / ", m.group()), _braced(text, boxes[-1].end()))
        whole = whole_terms(boxed)  # "\\boxed{n!+1}" read 1: a part of it, another answer's reading
        if whole is None:
            return _box_as_written(written)
        if whole != boxed:  # as written, the terms made whole: "3!+1" as "6+1", read again (``number``)
            written, boxed = f"\\boxed{{{whole}}}", whole
        if items := _relation(_inside_brackets(boxed)) or _items(boxed) or _side_by_side(boxed):  # a tuple (it read 2)
            return items
        boxed = _inside_brackets(boxed)
        found = _numbers(boxed) or _alone(boxed) or _variable(_right_side(boxed))
        if found:
            return _one_answer(boxed, found, lambda: _box_as_written(written))
        if literal := _box_as_written(written):
            return literal
    for marker in _MARKED_NUMBER:
        marks = list(marker.finditer(text))
        if marks:
            marked = _marked(text[marks[-1].end() :].split("\n", 1)[0])
            if marked:
                return marked
    display = _ONE_DISPLAY.fullmatch(text)
    if display and (
        items := _relation(_inside_brackets(display.group(1))) or _items(display.group(1)) or _side_by_side(display.group(1))
    ):
        return items  # "$(1, 2)$", as a known answer "(1, 2)" is read: as its box is
    found = _numbers(text) or _alone(text)
    if display and found:  # a known answer's "$...$", read as its box is
        return _one_answer(display.group(1), found, lambda: _literal(last_math(written) or ""))
    if not found and (math := last_math(text)) is not None:  # "$x$", "$(x)$": that variable (they read nothing)
        inside = _inside_brackets(math)
        found = _alone(inside) or _variable(_right_side(inside))
    if not found and (literal := _literal(last_math(written) or "")):  # "$\\text{no}$", as a box's
        return literal
    return found[-1] if found else None


def _one_answer(math: str, found: list[str], as_written: Callable[[], str | None]) -> str:
    """The one answer of a box's math (or of a text that is one display, as a known answer is) from what it reads
    (``found``): where it reads more than one, none is the answer (``\\boxed{2/(\\pi+1)}`` read "\\pi+1" and
    ``\\boxed{5 \\pm 2}`` 2, other answers' readings): an equation's right-hand side where that reads one
    (``\\boxed{f(2) = 3}`` is 3), else the math as written (``as_written``, spelled one way), an answer of its own;
    its last reading where none is written whole (a brace left open)."""
    if len(found) == 1:
        return found[0]
    side = _right_side(math)
    if side != math and len(on_side := _numbers(side)) == 1:
        return on_side[0]
    return as_written() or found[-1]


_ONE_DISPLAY = re.compile(r"\s*(?:\$\$?|\\\(|\\\[)([^$]*?)(?:\$\$?|\\\)|\\\])\s*")  # a text that is one "$...$"


def _relation(math: str) -> str | None:
    """An inequality (``relations``) with each side read as a box's one answer ("\\boxed{x \\geq 1.50}" is
    "x\\ge1.5"); None where the math is none, or it lists values (its relations are its items')."""
    found = related(math) if listed(math) is None else None
    if found is None:
        return None
    sides, relations = found
    read = [_one(side) for side in sides]
    # a space after a command's relation: "x\\le y", no command "\\ley"
    return "".join(
        side + relation + " " * relation.startswith("\\") for side, relation in zip(read, [*relations, ""], strict=True)
    )


def _one(math: str) -> str:
    """Math read as a box's one answer; as written where it reads none or more than one."""
    inside = _inside_brackets(math)
    if relation := _relation(inside):  # a list's item "0 < x"
        return relation
    read = _numbers(inside) or _alone(inside) or _variable(inside)
    return read[0] if len(read) == 1 else _literal(math) or math.strip()


def _items(boxed: str) -> str | None:
    """A box's list (``answer_lists``) with each item read as a box's one answer is ("\\boxed{(1, \\frac12)}" is
    "(1,0.5)"), its text as written where it reads none or more than one; a set's or an unbracketed list's items
    sorted. None where the box lists nothing."""
    found = listed(boxed)
    if found is None:
        return None
    items = [_one(item) for item in found.items]
    return found.opening + ",".join(items if found.ordered else sorted(items)) + found.closing


# A bracket and what it holds, "\\left" and "\\right" before them too.
_BRACKET = re.compile(r"\s*(?:\\left\s*)?(\\\{|\(|\[)(.*?)(?:\\right\s*)?(\\\}|\)|\])\s*", re.DOTALL)


def _side_by_side(math: str) -> str | None:
    """Lists side by side (``answer_lists.side_by_side``: "\\boxed{(1, 2) (3, 4)}") as one answer, each bracket read
    (``_items``; one of a single value as a box's one answer is: "(1,2)(3)"), spelled side by side whatever product's
    sign joined them; a union's or an intersection's in one order ("(1,2)\\cup(3,4)" is "(3,4)\\cup(1,2)", as
    math-verify reads them: sets). None where the math is no such brackets."""
    joined = side_by_side(_IN.sub("", math, count=1))
    if joined is None:
        return None
    read = []
    for group in joined.groups:
        if (items := _items(group)) is None:
            m = _BRACKET.fullmatch(group)
            items = m.group(1) + _one(m.group(2)) + m.group(3) if m else _literal(group) or group.strip()
        read.append(items)
    return joined.joiner.join(sorted(read) if joined.joiner else read)


# "x \\in" before a union: the set its variable is in is the answer ("x \\in (1, 2) \\cup (3, 4)"), as math-verify reads it.
_IN = re.compile(r"\A\s*[a-zA-Z]\s*\\in(?![a-zA-Z])\s*")


def _box_as_written(text: str) -> str | None:
    """The last box's text as written, spelled one way (``_latex``), where nothing in it is read
    ("\\boxed{\\text{no}}", "\\boxed{[x, y]}"): the answer it boxes, no number elsewhere ("so 5.
    \\boxed{\\text{no}}" read 5), and two such boxes one answer only where they are written alike (they
    were one, nothing read in either). None for an empty box, or one never closed (an answer cut short)."""
    last = next(reversed(list(_BOXED.finditer(text))), None)
    if last is None:
        return None
    inside = _braced(text, last.end())
    return _literal(inside) if text.startswith("}", last.end() + len(inside)) else None


def _literal(math: str) -> str | None:
    """Math as written, spelled one way: no ``\\left``/``\\right``, a space only between two words ("[x, y]" as
    "[x,y]", "\\text{ no }" as "\\text{no}", "no number" as written); None where it is empty or a brace or
    bracket in it is left open."""
    literal = re.sub(r"\s+", " ", re.sub(r"\\(?:left|right)(?![a-zA-Z])", "", math)).strip()
    literal = re.sub(r"(?<!\w) | (?!\w)", "", literal)
    return literal if literal and _balanced(literal) else None


def _inside_brackets(boxed: str) -> str:
    """A box's answer without the brackets around all of it ("\\boxed{(x)}", "\\boxed{((xy))}" are x and xy, as
    math-verify reads them; they read nothing); "(x)(y)" is no such bracket."""
    while (m := _WHOLE_BRACKET.fullmatch(boxed)) and _balanced(inside := m.group(1) or m.group(2) or ""):
        boxed = inside
    return boxed


def _alone(text: str) -> list[str]:
    """A product of letters that is all the text gives (``_LETTERS_ALONE``), in its order; [] else."""
    m = _LETTERS_ALONE.fullmatch(text)
    return [m.group(1) + _ordered_product("\\cdot".join(re.sub(r"\s", "", m.group(2))))] if m else []


def _right_side(math: str) -> str:
    """An equation's right-hand side, its answer, as a number's is ("\\boxed{x = e}" is e, as "\\boxed{x = 5}" is 5 and
    math-verify reads both; it read "x=e", another answer than "\\boxed{e}"); the math as it is where it holds no "="
    outside braces and brackets."""
    depth, at = 0, -1
    for i, c in enumerate(math):
        depth += 1 if c in "{([" else -1 if c in "})]" else 0
        if c == "=" and not depth:
            at = i
    return math[at + 1 :] if at >= 0 else math


def _variable(boxed: str) -> list[str]:
    """A box's one variable (``_VARIABLE_ALONE``), its sign with it; [] else."""
    m = _VARIABLE_ALONE.fullmatch(boxed)
    return [m.group(1) + _BRACED_SUBSCRIPT.sub(r"_\1", m.group(2))] if m else []


def _marked(line: str) -> str | None:
    """The number a marked line gives: the first right after its last "=" near the marker
    (``_EQUALS_WITHIN``), as math-verify reads "Answer: 7 + 1 = 9" (9: the first number, or the
    sum before the "=", was no answer), else its first."""
    for equals in reversed([i for i, c in enumerate(line[: _EQUALS_WITHIN + 1]) if c == "="]):
        if _NUMBER_AHEAD.match(line, equals + 1) and (found := _numbers(line[equals + 1 :])):
            return found[0]
    found = _numbers(line) or _alone(line)
    return found[0] if found else None


def _numbers(text: str) -> list[str]:
    """The numbers in ``text`` in order: an expression (``_expressions``) or a fraction as one."""
    out: list[str] = []
    at = 0
    for start, end, value in _expressions(text):
        out += _rationals(text, at, start)
        out.append(value)
        at = end
    return out + _rationals(text, at, len(text))


def _rationals(text: str, start: int, end: int) -> list[str]:
    """The numbers between ``start`` and ``end``, a fraction as one, a mixed number with it."""
    out: list[str] = []
    at = start
    for f in _FRACTION.finditer(text, start, end):
        value = _fraction(f)
        if value is None:
            if f.group(10) is not None and not Fraction(_digits(f.group(10))):  # "1/0": no value, as written
                out += _plain(text, at, f.start())
                out.append(("-" if f.group(8) else "") + _canonical("", f.group(9), "") + "/0")
                at = f.end()
            continue
        whole = _mixed_whole(text, at, f)
        if whole is not None:
            sign, digits, begin = whole
            value = (Fraction(digits.replace(",", "")) + value) * (-1 if sign else 1)
        else:
            begin = f.start()
        out += _plain(text, at, begin)
        out.append(_spelled(value))
        at = f.end()
    return out + _plain(text, at, end)


def _mixed_whole(text: str, at: int, f: re.Match[str]) -> tuple[str, str, int] | None:
    """The whole number of a mixed number ("1 1/2", "2\\frac{1}{2}": 1.5 and 2.5, as math-verify's
    LaTeX parser reads them, a sign before it the whole's): an unsigned proper fraction of whole
    numbers right after a whole number, a space between them, none needed before a ``\\frac``."""
    sign, top_sign, top, top_digit, bottom_sign, bottom, bottom_digit, slash_sign, over, under = f.groups()
    if any((sign, top_sign, bottom_sign, slash_sign)):
        return None
    top, bottom = (over, under) if over is not None else (top or top_digit, bottom or bottom_digit)
    if "." in top + bottom or not 0 < Fraction(top.replace(",", "")) < Fraction(bottom.replace(",", "")):
        return None
    gap = r"[ \t]+" if over is not None else r"[ \t]*"
    m = re.compile(_WHOLE + gap + r"\Z").search(text, at, f.start())
    return (m.group(1) or "", m.group(2), m.start()) if m else None


def _expressions(text: str) -> list[tuple[int, int, str]]:
    """Where the text writes a LaTeX expression that is no number as written, each as (start, end,
    spelling): "\\frac{\\sqrt{2}}{2}" was read as 2, its denominator. It is one answer: its exact
    value where it is a rational multiple of a square root (``exact_value``), so that
    "\\frac{1}{\\sqrt2}" and "\\frac{\\sqrt2}{2}" are one answer and "2^3" is 8; else spelled
    one way as the MATH graders' ``strip_string`` spells it (``_as_written``), not evaluated."""
    out: list[tuple[int, int, str]] = []
    groups = [
        m
        for m in _GROUP.finditer(text)
        if _powered_or_multiplied(text, m) or _FACTOR_BEFORE.search(m.group()) or _signed(text, m) or _subtracted(text, m)
    ]
    starts = [m.start() for m in groups]
    # each pattern searched forward once (``Scan``), not again to the text's end after each expression
    scans = [
        Scan(_IRRATIONAL, text, lambda m: m),
        Scan(_POWER, text, lambda m: m),
        Scan(_ARITHMETIC, text, lambda m: None if _AFTER_OPERATOR.search(text, max(0, m.start() - 8), m.start()) else m),
    ]
    letter_sums = Scan(_LETTER_SUM, text, lambda m: _letter_term(text, m))
    at = floor = 0  # floor: where the last expression read ended (``at`` passes arithmetic of no value too)
    while True:
        index = bisect_left(starts, at)
        group = groups[index] if index < len(groups) else None
        candidates = [group, *(first[0] if (first := scan.first(at)) else None for scan in scans)]
        found = sorted((m for m in candidates if m), key=lambda m: m.start())
        letters = letter_sum[1] if (letter_sum := letter_sums.first(at)) else None
        if letters and (not found or letters[0] <= found[0].start()):  # "2 + 3x", "2^3 + 4x": no value
            out.append(letters)
            at = floor = letters[1]
            continue
        if not found:
            return out
        m = found[0]
        before = _TIMES_BEFORE.search(text, floor, m.start())  # "1.5 \\times 10^3", "2 \\cdot \\sqrt2", "3 \\cdot 2^x"
        times = evaluated(text, before.start()) if before else None
        exact = times or evaluated(text, m.start())
        factor = None
        terms = _TERMS_BEFORE.search(text, at, m.start() + len(m.group(1) or ""))
        begin = terms.start() if terms else before.start() if before and times else m.start()
        total = summed(text, begin)
        if total and total[1] > m.start():  # "3^2+4^2" is 25, "1+\\sqrt2" one answer as written
            whole, end = total
            spelling = spelled(whole, _spelled(whole.coefficient)) if whole else _latex(text[begin:end])
            read, valued = True, whole is not None
        elif exact:
            value, end = exact
            factor = value  # a product's value: the factors of no value after it are its (``_more_factors``)
            begin = before.start() if before and times else m.start()
            spelling = spelled(value, _spelled(value.coefficient))
            read = valued = True
        elif m.re is _GROUP and (as_written := _group_as_written(text, m)) is not None:
            (begin, end, spelling), read, valued = as_written, False, False
        elif m.re is _GROUP or m.re is _ARITHMETIC:
            at = m.end()  # "(x+1)^2", "2 + 3x": no value; their numbers are read as they are
            continue
        else:
            begin, written = _no_value(text, m, before, floor)
            if written is None:
                at = m.end()
                continue
            (end, spelling), read, valued = written, False, False
        more, after = _more_factors(text, end)
        if more and factor is not None:  # "2 \\cdot 3\\pi" is "6\\pi": the value's factors of no value
            spelling, end = _times(factor) + more if factor.coefficient else "0", after
        elif more:  # "\\sqrt2\\pi", "\\frac{1}{0}\\sqrt2", "1+2\\pi": a product with no value, as written
            spelling, end = (_latex(text[begin:end]) if read else spelling) + more, after
        spelling, end = _times_after(text, spelling, end)
        if not valued or more:
            count, kept, alone = len(out), out[-1:], (begin, end, spelling)
            begin, end, spelling = _whole_sum(text, out, floor, alone)
            if not _balanced(spelling):  # its sum's terms are no terms ("1}+2^x"): the expression alone
                if len(out) < count:  # the expression before it, which the sum took, is its own again
                    out += kept
                begin, end, spelling = alone
            spelling = _ordered(spelling)  # "2^x \\cdot \\sqrt{2}" as "\\sqrt{2} \\cdot 2^x"
        if not _balanced(spelling):
            at = m.end()
            continue
        out.append((begin, end, spelling))
        at = floor = end


def _letter_term(text: str, m: re.Match[str]) -> tuple[int, int, str] | None:
    """A match of ``_LETTER_SUM`` where it is a sum or bracket with a single-letter variable term,
    or a letter's power (``_LETTER_POWER``), product (``_PIECE``) or function's application (``_APPLIED``,
    ``_FUNCTION``: "f(2)^2" read 2, its argument), spelled as written ("x + 1" is "x+1", "e^2" "e^{2}",
    "f(2)^2" "f(2)^{2}"), as (start, end, spelling)."""
    if not _balanced(m.group()):  # "\\boxed{x", "a_{": its terms' braces unclosed, no expression
        return None
    named = _SUBSCRIPT_OF.sub(r"\1 ", m.group())  # "a_{ij}" is one variable, a
    split = _LETTERS_OF.sub(lambda r: " ".join(r.group()), named)  # "2xy": its letters apart
    bare = _EXPONENT.sub(r"\1", _COMMANDS.sub(" ", _as_letter(split)))  # "1e-40" is a number
    applied = _APPLIED.search(named) or _FUNCTION.search(named)
    if not (_LETTER.search(bare) or applied) or re.search(r"[a-zA-Z]{2}", bare) or _unit_before(text, m.start()):
        return None
    if m.group(1) or _LETTER_BRACKET.search(bare) or _LETTER_POWER.match(m.group()) or _SIGNED_BRACKET.match(m.group()):
        return m.start(), m.end(), _ordered(_sum_as_written(m.group()))
    factors = _ARGUMENTS.sub(" ", split)  # "2^x", "2\\sqrt{x}": the letter no factor
    if "/" in factors:  # a quotient with a letter in an exponent ("2^x/2": it read 2, its divisor)
        return m.start(), m.end(), _ordered(_sum_as_written(m.group()))
    if (
        applied
        or named != m.group()
        or (len(_PIECE.findall(split)) > 1 and _LETTER.search(_EXPONENT.sub(r"\1", _COMMANDS.sub(" ", _as_letter(factors)))))
    ):
        return m.start(), m.end(), _ordered(_sum_as_written(m.group()))
    return None


def _as_letter(spelling: str) -> str:
    """The spelling with each Greek letter as a latin one, where letters are counted ("2\\alpha" is a product)."""
    return _GREEK_LETTER.sub(" v ", spelling)


def _unit_before(text: str, at: int) -> bool:
    """Whether a number and a space come before ``at``: the letters there are its unit ("5 m + 3 m")."""
    begin = at
    while begin and text[begin - 1] in " \t":
        begin -= 1
    return begin < at and text[begin - 1 : begin].isdigit()


def _ordered(spelling: str) -> str:
    """An expression of no value with each product's factors in one order (``_FACTOR``'s), its numbers
    multiplied, so that equal products are one answer: "x \\cdot 3" and "2 \\cdot x \\cdot 3" are "3x"
    and "6x", as "3x" and "6x" are; a dot only before a factor that begins with a digit or ``\\frac``.
    With a letter, a rational's denominator is the product's: "0.5x" and "\\frac{1}{2}x" are
    "\\frac{x}{2}", as "x/2" is (they were three answers).
    Only factors, a sign after a product's dot its factor's ("x \\cdot -3" is "-3x"): a term with a
    function's bracket ("f(2)") is left as written, a quotient spelled as its ``\\frac`` (``_quotient``).
    Brackets around the whole are none ("(x+1)" is "x+1"), and the sum's terms are in one order
    (``ordered_sum``: "1 + xy" is "xy+1", as "xy + 1" is), like terms one (``_like_terms``), and so are
    those of a ``\\frac``'s parts (``_parts_ordered``)."""
    spelling = _parts_ordered(_unbracketed(spelling))
    terms = _top_terms(spelling)
    if (opened := _brackets_opened(terms)) is not None:
        return _ordered(opened)
    if (distributed := _distributed(terms)) is not None:
        return _ordered(distributed)
    out = ""
    for joiner, product in _like_terms(terms):
        out = _signed_term(out + joiner, product)
    out = out.removeprefix("+") or "0"
    if _unbracketed(out) != out:  # "2(x+1) - (x+1)" is "(x+1)": "x+1"
        return _ordered(out)
    return ordered_sum(out, _constant)


def _top_terms(spelling: str) -> list[tuple[str, str]]:
    """The terms of the spelling's top-level sum, each as (its sign, the term); no exponent's sign ("1E+99999", "2^-x")."""
    terms: list[tuple[str, str]] = []
    sign, term, depth = "", "", 0
    for i, c in enumerate(spelling):
        depth += 1 if c in "{([" else -1 if c in "})]" else 0
        if (
            depth == 0
            and c in "+-"
            and spelling[i - 1 : i] not in ("^", "_")
            and not _NO_TERM_SIGN.search(spelling, max(0, i - 6), i)
        ):
            terms.append((sign, term))
            sign, term = c, ""
        else:
            term += c
    terms.append((sign, term))
    return terms


def _distributed(terms: list[tuple[str, str]]) -> str | None:
    """A sum whose terms that are a whole number times one bracket of a sum, no power on it, are that sum's terms times
    the number: "2(\\pi+1)" is "2\\pi+2", "-(x-4)" "-x+4" (``ordered_sum`` orders them), as math-verify reads them (they
    were written as they stood, other answers than "2\\pi+2"); the spelling with them opened, None where no term is one."""
    out, opened = "", False
    for sign, term in terms:
        read = _read_product(term) if term else term
        others = [] if isinstance(read, str) else [f for f in read[1] if f[0] != 1]
        inner = _unbracketed(others[0][1]) if len(others) == 1 and others[0][0] == 6 else None
        parts = _top_terms(inner) if inner is not None and inner != others[0][1] else []
        if (
            isinstance(read, str)
            or read[0].denominator != 1  # "\\frac{1}{2}(\\pi+1)" stays the fraction "\\frac{\\pi+1}{2}" (``_spelled_product``)
            or sum(bool(part) for _, part in parts) < 2
            or not all(part for _, part in parts)
        ):
            out += sign + term
            continue
        opened = True
        factor = -read[0] if sign == "-" else read[0]
        for part_sign, part in parts:
            value = -factor if part_sign == "-" else factor
            out += ("-" if value < 0 else "+") + ("" if abs(value) == 1 else _constant(abs(value)) + "\\cdot ") + part
    return out.removeprefix("+") if opened else None


def _brackets_opened(terms: list[tuple[str, str]]) -> str | None:
    """A sum of terms and a bracket of a sum, no power or factor on it, with the bracket opened, its terms' signs
    flipped where a minus is before it: "1-(\\pi+1)" is "1-\\pi-1", so "-\\pi", and "\\pi-(x+1)" "\\pi-x-1", as
    math-verify reads them (they read "-(\\pi+1)+1" and "-(x+1)+\\pi", other answers than "-\\pi" and "\\pi-x-1").
    None where the sum is no such sum: a bracket alone ("-(x+1)") stays, and so do brackets that may be like terms
    ("2(x+1) - (x+1)" is "x+1"): no other term may hold a bracket."""
    brackets = [term for _, term in terms if _unbracketed(term) != term]
    if (
        len(brackets) != 1
        or sum(bool(term) for _, term in terms) < 2
        or not all(term in brackets or "(" not in term for _, term in terms if term)
    ):
        return None
    out, opened = "", False
    for sign, term in terms:
        inner = _unbracketed(term)
        body = negated(inner) if inner != term and sign == "-" else inner if inner != term else None
        if body is not None and _terms_of(inner):
            opened, sign, term = True, "-" if body.startswith("-") else "+", body.removeprefix("-")
        out += sign + term
    return out.removeprefix("+") if opened else None


def _terms_of(spelling: str) -> bool:
    """Whether the spelling is a sum's terms that may be reordered (``negated`` reads them)."""
    return negated(spelling) is not None


def _parts_ordered(spelling: str) -> str:
    """The spelling with a sum in each ``\\frac``'s part in one order, as a sum's elsewhere (``ordered_sum``):
    "\\frac{-x+1}{2}" and "\\frac{1-x}{2}", "\\frac{2}{1+x}" and "\\frac{2}{x+1}" are one answer each, as
    math-verify reads them (they were two); a part's leading minus is the fraction's (``_signs_out``), joined to
    the sign before it (``_negated_before``)."""
    out, at = "", 0
    for m in re.finditer(r"\\frac(?![a-zA-Z])", spelling):
        if m.start() < at:
            continue
        top, after = _argument(spelling, m.end())
        bottom, end = _argument(spelling, after)
        if top is None or bottom is None:
            continue
        flipped, parts = _signs_out([ordered_sum(_parts_ordered(part), _constant) for part in (top, bottom)])
        before = out + spelling[at : m.start()]
        out = (_negated_before(before) if flipped else before) + "\\frac{" + parts[0] + "}{" + parts[1] + "}"
        at = end
    return out + spelling[at:]


# What before a fraction leaves a minus there as its sign alone: the start, a brace or bracket, a product's dot, a
# power; after anything else (a factor: "2\\frac{1-x}{2}") the minus is a product's sign, after its dot.
_SIGN_ALONE = re.compile(r"(?:\A|[{(\[^_/]|\\cdot|\\times)\Z")


def _negated_before(before: str) -> str:
    """The spelling before a fraction whose parts gave it their minus, the minus joined to the sign there: "1+" as "1-",
    "1-" as "1+", "-" (the whole's sign) as none, "2" as "2\\cdot-"."""
    if before.endswith(("+", "-")):
        rest = before[:-1]
        if before.endswith("+"):
            return rest + "-"
        return rest if _SIGN_ALONE.search(rest) else rest + "+"
    return before + ("-" if _SIGN_ALONE.search(before) else "\\cdot-")


def _like_terms(terms: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A sum's terms, each as its product is spelled (``_ordered_product``), those that are one product
    but for their numbers one term, their numbers' exact sum its factor ("2x + 3x" is "5x", "x - (2x)" "-x",
    as math-verify reads them; they were other answers than "5x" and "-x"), none where it is zero."""
    reads = [_read_product(term) for _, term in terms]
    totals: dict[tuple[bool, tuple[tuple[int, str], ...]], Fraction] = {}
    for (sign, _), read in zip(terms, reads, strict=True):
        if not isinstance(read, str) and (key := _like(read)) is not None:
            totals[key] = totals.get(key, Fraction(0)) + (-read[0] if sign == "-" else read[0])
    out: list[tuple[str, str]] = []
    for (sign, _), read in zip(terms, reads, strict=True):
        key = None if isinstance(read, str) else _like(read)
        if key is None:
            out.append((sign, read if isinstance(read, str) else _spelled_product(*read)))
            continue
        if key not in totals:  # one of like terms the first stood for
            continue
        total = totals.pop(key)  # the first of its like terms stands for them all
        if total:
            out.append(("-" if total < 0 else "+" if sign else "", _spelled_product(abs(total), list(key[1]), key[0])))
    return out


def _like(read: tuple[Fraction, list[tuple[int, str]], bool]) -> tuple[bool, tuple[tuple[int, str], ...]] | None:
    """What makes two products like terms: their factors but numbers; None for a number alone."""
    others = tuple(sorted(f for f in read[1] if f[0] != 1))
    return (read[2], others) if others else None


def _constant(value: Fraction) -> str:
    """A sum's rational term as the extractor spells a rational, its decimal where it has one, else
    its ``\\frac`` ("1/3" would read as a quotient of the term before it)."""
    rational = _spelled(value)
    return rational if "/" not in rational else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _signed_term(out: str, product: str) -> str:
    """A sum's spelling so far with its next term, a product's own sign joined to the sum's ("x - y
    \\cdot -3" is "x+3y", "x \\cdot -3" "-3x")."""
    if product.startswith("-") and out[-1:] in ("+", "-") and out:
        out, product = out[:-1] + ("+" if out[-1] == "-" else "-"), product[1:]
        return ("" if out == "+" else out) + product
    return out + product


def _ordered_product(term: str) -> str:
    read = _read_product(term)
    return read if isinstance(read, str) else _spelled_product(*read)


def _read_product(term: str) -> str | tuple[Fraction, list[tuple[int, str]], bool]:
    """A product's signed number, its factors (``_product``) and whether a letter is one of them; the term
    as written where it is no product this orders."""
    if _APPLIED.search(term) or _FUNCTION.search(term):
        return term
    if _top_slash(term) >= 0:
        quotient = _quotient(term)
        return term if quotient == term else _read_product(quotient)
    read = _product(term, True)
    # A bracket of a letter or of no value ("(\\pi+1)") is a letter's factor: a rational before it is its numerator and
    # denominator ("\\frac{1}{2}(\\pi+1)" is "\\frac{\\pi+1}{2}", as math-verify reads it; they were two answers).
    letters = read is not None and any(rank == 5 or (rank == 6 and _NO_VALUE_IN.search(f)) for rank, f in read[2])
    # A rational multiple of \\pi or of one power of no value is spelled as a letter's is ("\\frac{1}{2}\\pi" and
    # "0.5 \\cdot 2^x" as "\\frac{\\pi}{2}" and "\\frac{2^{x}}{2}"; they were other answers than those).
    multiple = read is not None and [rank for rank, _ in read[2] if rank != 1] in ([3], [4])
    if not letters and not multiple:  # "\\sqrt{2}\\pi" as written
        read = _product(term, False)
    if read is None:
        return term
    negative, coefficient, factors = read
    return (-coefficient if negative else coefficient), factors, letters or multiple


_NO_VALUE_IN = re.compile(r"(?<![a-zA-Z])[a-zA-Z](?![a-zA-Z])|\\(?:pi|sqrt)(?![a-zA-Z])")


def _spelled_product(signed: Fraction, factors: list[tuple[int, str]], letters: bool) -> str:
    negative, coefficient = signed < 0, abs(signed)
    others = sorted(f for f in factors if f[0] != 1)
    if not coefficient:
        return "0"
    if not others:
        return ("-" if negative else "") + _joined(sorted(factors))
    if coefficient.denominator != 1 and letters:  # "0.5x", "\\frac{1}{2}x" as "x/2" is: "\\frac{x}{2}"
        top = _joined(([] if coefficient.numerator == 1 else [(1, str(coefficient.numerator))]) + others)
        # a bracket alone is none ("\\frac{x+1}{2}"), but one with a power is kept whole ("\\frac{(x+1)^{2}}{2}"; it
        # read the broken "\\frac{x+1)^{2}{2}")
        top = _unbracketed(top) if len(others) == 1 and others[0][0] == 6 and coefficient.numerator == 1 else top
        return ("-" if negative else "") + "\\frac{" + top + "}{" + str(coefficient.denominator) + "}"
    # "2 \\cdot x \\cdot 3" is "6x", "x \\cdot 1" "x"
    return ("-" if negative else "") + _joined(([] if coefficient == 1 else [(1, _spelled(coefficient))]) + others)


def _product(term: str, fractions: bool) -> tuple[bool, Fraction, list[tuple[int, str]]] | None:
    """A product's sign, the product of its numbers and its factors (``_FACTOR``'s rank, spelling);
    with ``fractions``, a ``\\frac`` over a whole number of a product ("\\frac{1}{2}", "\\frac{3x}{2}")
    is its factors and a number, so that "\\frac{1}{2}x" and "\\frac{x}{2}" are one product. None
    where a factor is of no form it orders."""
    factors: list[tuple[int, str]] = []
    at, negative, coefficient = 0, False, Fraction(1)
    while at < len(term):
        if at and (joiner := re.compile(r"\\cdot ?(-?)| ").match(term, at)):  # "\\pi x": LaTeX's space
            at, negative = joiner.end(), negative != bool(joiner.group(1))  # "x \\cdot -3": the product's sign
        if fractions and term.startswith("\\frac{", at):
            top, after = _argument(term, at + 5)
            bottom, after = _argument(term, after)
            # a part's own minus is the fraction's ("\\frac{-x}{2}" is "-\\frac{x}{2}", as math-verify reads it): each
            # term's sign flipped (``_signs_out``), no first character cut ("-x+1" is no "x+1")
            flipped, (top, bottom) = _signs_out([top, bottom]) if top and bottom else (False, [top, bottom])
            over = _product(top, True) if top and bottom is not None and re.fullmatch(r"\d+", bottom) else None
            if over is not None and int(bottom or 0):
                negative = (negative != over[0]) != flipped
                coefficient = coefficient * over[1] / int(bottom or 0)
                factors += [f for f in over[2] if f[0] != 1]
                at = after
                continue
        m = _FACTOR.match(term, at)
        if m is None:
            return None
        # "2^{3}x" is "8x", as "8x" is; "(3/4)x" and "(3+4)^{2}x" "\\frac{3x}{4}" and "49x", a bracket of a value its value
        power = product_at(m.group(), 0) if m.lastindex in (4, 6) else None
        if power is not None and power[1] == len(m.group()) and power[0].radicand == 1:
            coefficient *= power[0].coefficient
            factors.append((1, _spelled(power[0].coefficient)))
            at = m.end()
            continue
        bracket = m.lastindex == 6 and re.match(r"\(([^()]*)\)", m.group())  # "(1+x)" as "(x+1)"
        flip, inside = _signed_inside(bracket.group(1), m.group()[bracket.end() :]) if bracket else (False, "")
        negative = negative != flip
        if bracket and (alone := _ALONE_IN_BRACKET.fullmatch(inside)):  # "2(x)" as "2x", "(\\pi)^2" as "\\pi^2"
            factors.append((5 if alone.group(1) else 3, inside + m.group()[bracket.end() :]))
            at = m.end()
            continue
        if bracket and (raised := _raised_product(inside, m.group()[bracket.end() :], fractions)):  # "(-2x)^3" is "-8x^3"
            negative, coefficient = negative != raised[0], coefficient * raised[1]
            factors += raised[2]
            at = m.end()
            continue
        if bracket and bracket.end() == len(m.group()) and (inner := _bracketed_product(bracket.group(1), fractions)):
            negative, coefficient = negative != inner[0], coefficient * inner[1]
            factors += inner[2]
            at = m.end()
            continue
        factors.append((m.lastindex or 0, "(" + inside + m.group()[bracket.end() - 1 :] if bracket else m.group()))
        coefficient *= Fraction(m.group()) if m.lastindex == 1 else 1
        at = m.end()
    return negative, coefficient, factors


# A bracket's one letter or \\pi: the factor itself, as math-verify reads it ("(x)^2" is "x^2", "(\\pi)^2" "\\pi^2").
_ALONE_IN_BRACKET = re.compile(r"([a-zA-Z])|\\pi")
_EVEN_POWER = re.compile(r"\^\{\d*[02468]\}")
_ODD_POWER = re.compile(r"\^\{\d*[13579]\}")


def _signed_inside(inside: str, power: str) -> tuple[bool, str]:
    """A bracket's sum in one order (``ordered_sum``), and under a power with its first term positive, and whether
    that flipped the product's sign: a negated expression's even power is the expression's ("(1-x)^2" is "(x-1)^2",
    "(-x)^2" "x^2"), its odd power the expression's negated ("(1-x)^3" is "-(x-1)^3", "(-x)^3" "-x^3"), as
    math-verify reads them (they were two answers). With no power the sign stays: "(1-x)" is no "-(x-1)" here."""
    ordered = ordered_sum(inside, _constant)
    even = _EVEN_POWER.fullmatch(power)
    if not ordered.startswith("-") or not (even or _ODD_POWER.fullmatch(power)):
        return False, ordered
    flipped = negated(ordered)
    return (False, ordered) if flipped is None else (not even, ordered_sum(_parts_ordered(flipped), _constant))


_WHOLE_POWER = re.compile(r"\^\{([1-9]\d?)\}")  # a whole power, to 99
_FACTOR_POWER = re.compile(r"(.*?)(?:\^\{(\d+)\})?", re.DOTALL)


def _raised_product(inside: str, power: str, fractions: bool) -> tuple[bool, Fraction, list[tuple[int, str]]] | None:
    """A bracket's product under a whole power, each factor raised (``_bracketed_product``'s form): "(-2x)^3" is
    "-8x^{3}", "(2x^2)^2" "4x^{4}", "(2\\pi)^2" "4\\pi^{2}", as math-verify reads them (they were "-(2x)^{3}", another
    answer than "-8x^3"). None where the bracket holds no product, or one whose factors are not letters, \\pi or
    numbers (its sign: ``_signed_inside`` took it out already)."""
    whole = _WHOLE_POWER.fullmatch(power)
    inner = _bracketed_product(inside, fractions) if whole else None
    if inner is None or whole is None:
        return None
    n = int(whole.group(1))
    raised: list[tuple[int, str]] = []
    for rank, factor in inner[2]:
        if rank == 1:
            continue  # a number: the coefficient's
        base = _FACTOR_POWER.fullmatch(factor)
        if rank not in (3, 5) or base is None:
            return None
        exponent = n * int(base.group(2) or 1)
        raised.append((rank, base.group(1) + ("" if exponent == 1 else "^{" + str(exponent) + "}")))
    value = inner[1] ** n
    if abs(value.numerator).bit_length() + value.denominator.bit_length() > 4096:
        return None
    return inner[0] and n % 2 == 1, value, [(1, _spelled(value)), *raised]


def _bracketed_product(inside: str, fractions: bool) -> tuple[bool, Fraction, list[tuple[int, str]]] | None:
    """A bracket's product, its sign and its constants' sum in (``_product``'s), where it holds one and no
    sum: its factors are the outer product's ("y(-x)" is "-xy", "(3+4)x" "7x", as math-verify reads them;
    they were "y\\cdot(-x)" and "x\\cdot(7)", other answers). None for a sum ("(x+1)") or nothing."""
    spelling = ordered_sum(inside, _constant)
    negative = spelling.startswith("-")
    rest = spelling[1:] if negative else spelling
    read = _product(rest, fractions) if rest else None
    return (negative != read[0], read[1], read[2]) if read else None


def _joined(factors: list[tuple[int, str]]) -> str:
    """Factors in their order spelled as one product: a dot only before a factor that begins with a
    digit or ``\\frac``, or a bracket after a letter."""
    out = ""
    for _, factor in factors:
        if out and (factor[0].isdigit() or factor.startswith("\\frac")):
            out += "\\cdot"
        elif re.search(r"\\[a-zA-Z]+\Z", out) and factor[0].isalpha():  # "\\pi x", no command "\\pix"
            out += " "
        elif out[-1:].isalpha() and factor[0] == "(":  # "y\\cdot(x+1)", no function "y(x+1)"
            out += "\\cdot"
        out += factor
    return out


def _quotient(term: str) -> str:
    """A quotient of no value spelled as its ``\\frac`` is ("x/2" as "\\frac{x}{2}"; they were two
    answers), a bracket around either part none ("(x+1)/2" is "\\frac{x+1}{2}"). The divisor is all
    after the "/", a product written without a sign too ("x/2y" is x over 2y, as math-verify reads
    it); a quotient with a product's dot after the "/" ("x/2 \\cdot 3", 3x/2), another "/", or a sign,
    is left as written."""
    slash = _top_slash(term)
    top, bottom = term[:slash], term[slash + 1 :]
    if not top or not bottom or "/" in bottom or "\\cdot" in bottom or bottom[0] in "+-":
        return term
    return _parts_ordered("\\frac{" + _unbracketed(top) + "}{" + _unbracketed(bottom) + "}")


def _top_slash(term: str) -> int:
    """Where the term's first "/" outside braces and brackets is, -1 where none is: an exponent's
    ("x^{1/2}") is no quotient's (it read "\\frac{x^{1}{2}}")."""
    depth = 0
    for i, c in enumerate(term):
        depth += 1 if c in "{([" else -1 if c in "})]" else 0
        if c == "/" and depth == 0:
            return i
    return -1


def _unbracketed(part: str) -> str:
    whole = part.startswith("(") and _argument(part, 0, "(", ")")[1] == len(part)
    return part[1:-1] if whole else part


def _times_after(text: str, spelling: str, end: int) -> tuple[str, int]:
    """An expression with the product after it ("\\cdot", "\\times" or "*"): a multiple of \\pi or of a
    power of no value times numbers and roots is their product ("3\\pi \\cdot 2" is "6\\pi", as "6\\pi"
    is, and "2^x \\cdot 3" "3\\cdot2^{x}", as "3 \\cdot 2^x" is; they were 2 and 3, the last number); any
    other product is written as it is ("3\\pi \\cdot 2^x" is "3\\pi\\cdot2^{x}" and "\\sqrt{2} \\cdot 2^x"
    "\\sqrt{2}\\cdot2^{x}"; they were 2^{x}, the factor lost)."""
    times = _TIMES_AFTER.match(text, end)
    if times is None:
        return spelling, end
    pi, power = _PI_MULTIPLE.fullmatch(spelling), _POWER_MULTIPLE.fullmatch(spelling)
    after = product_at(text, times.end())
    if (pi is None and power is None) or after is None or _NO_FACTOR_AFTER.match(text, after[1]):
        term = re.compile(_TERM).match(text, times.end())
        return (spelling + _sum_as_written("\\cdot " + term.group()), term.end()) if term else (spelling, end)
    value, end = after
    multiple = pi or power
    assert multiple is not None
    coefficient = Fraction(multiple.group(2) or 1) * (-1 if multiple.group(1) else 1) * value.coefficient
    if not coefficient:
        return "0", end
    if pi or power is None:
        return _times(Surd(coefficient, value.radicand)) + "\\pi", end
    factor = spelled(Surd(coefficient, value.radicand), _spelled(coefficient))
    unit = abs(coefficient) == 1 and value.radicand == 1  # "2^x \\cdot -1" is "-2^{x}"
    return (factor.removesuffix("1") if unit else factor + "\\cdot") + power.group(3), end


def _whole_sum(text: str, out: list[tuple[int, int, str]], floor: int, found: tuple[int, int, str]) -> tuple[int, int, str]:
    """An expression of no value with the terms of the sum it is one of ("2^x + 1" is "2^{x}+1"; it
    was 1, the last term, and "1 + \\pi" was "\\pi"): a term alone is another answer. The expression
    read before it (in ``out``) joins it; other terms are spelled as written (``_sum_as_written``)."""
    begin, end, spelling = found
    if out and out[-1][1] == floor and _JOINER.fullmatch(text, floor, begin):
        head = out.pop()
        begin, spelling = head[0], _signs_joined(head[2] + _sum_as_written(text[floor:begin]), spelling)
    elif head_terms := (_SIGNED_HEAD if _SPACED_SIGN.match(text, begin) else _HEAD).search(text, floor, begin):
        begin, spelling = head_terms.start(), _signs_joined(_sum_as_written(head_terms.group()), spelling)
    if tail := _TAIL.match(text, end):
        end, spelling = tail.end(), spelling + _sum_as_written(tail.group())
    return begin, end, spelling


def _signs_joined(head: str, term: str) -> str:
    """A sum's head and a term of its own sign, one sign between them ("1+" and "-\\frac{\\pi}{2}", of
    "1+\\frac{-\\pi}{2}", are "1-\\frac{\\pi}{2}", no "1+-\\frac{\\pi}{2}")."""
    if term.startswith("-") and head.endswith(("+", "-")):
        return head[:-1] + ("+" if head.endswith("-") else "-") + term[1:]
    return head + term


def _sum_as_written(terms: str) -> str:
    """Terms of a sum spelled as the extractor spells expressions of no value: no spaces, ``\\cdot``
    for every product's sign, a power's exponent braced ("2^x" as "2^{x}"), a number in scientific
    notation as the number (``_SCIENTIFIC``)."""
    spelling = _SCIENTIFIC.sub(lambda m: _canonical("", m.group(1), m.group(2)), _latex(terms))
    return _BRACED_SUBSCRIPT.sub(r"_\1", _powers_braced(re.sub(r"\\times(?![a-zA-Z])|\*", r"\\cdot", spelling)))


# A number in scientific notation among a sum's terms ("x+1e5", "x+1E+40"): one number, spelled as a number
# is ("x+100000"; it read "5e+x", the product of 1, e and 5), no product of its "e" and digits.
_SCIENTIFIC = re.compile(r"(?<![\w.^{])(\d+(?:\.\d+)?)([eE][-+]?\d+)(?![\w.])")


def _powers_braced(spelling: str) -> str:
    return re.sub(r"\^(-?\d+|[a-zA-Z])", r"^{\1}", spelling)


def _times(value: Surd) -> str:
    """A value spelled as the factor of a product ("6" of "6\\pi", "-" of "-\\pi", "\\frac{2}{3}" of
    "\\frac{2}{3}\\pi", not "2/3", which reads as 2 over 3\\pi)."""
    c = value.coefficient
    if value.radicand != 1:
        return spelled(value, "")
    if abs(c) == 1:
        return "-" if c < 0 else ""
    rational = _spelled(c)
    return rational if "/" not in rational else ("-" if c < 0 else "") + f"\\frac{{{abs(c.numerator)}}}{{{c.denominator}}}"


def _no_value(text: str, m: re.Match[str], before: re.Match[str] | None, floor: int) -> tuple[int, tuple[int, str] | None]:
    """Where an expression of no value (``_IRRATIONAL``'s or ``_POWER``'s) begins, and its spelling
    as written (``_as_written``): a number times a command of no sign or factor of its own is its
    factor ("2 \\cdot \\pi" is "2\\pi", as written without the dot; it was "\\pi", its factor lost), and so
    of a power, spelled with its dot ("3 \\cdot 2^x" is "3\\cdot2^{x}", no "32^{x}"; it was "2^{x}"), its
    sign the product's."""
    if m.re is _POWER:
        power = _power_as_written(text, m)
        if power is not None and before is None and (over := _FRACTION_TIMES.search(text, floor, m.start())):
            # "\\frac{1}{2} \\cdot 2^x" is "\\frac{1}{2}\\cdot2^{x}" (it was 2^{x}, its factor lost)
            value = _fraction(_FRACTION.match(text, over.start()) or over)
            if value is not None:
                factor = _constant(-value if power[1].startswith("-") else value)
                return over.start(), (power[0], factor + "\\cdot" + power[1].removeprefix("-"))
        if power is None or before is None:
            return m.start(), power
        # the power's own sign is the product's ("2 * -2^x" is -2\cdot2^{x}; it was -2^{x}, its factor lost)
        negative = bool(before.group(1)) != power[1].startswith("-")
        factor = _canonical("-" if negative else "", before.group(2), "")
        return before.start(), (power[0], factor + "\\cdot" + power[1].removeprefix("-"))
    if before and not m.group(1) and not m.group(2):
        return before.start(), _as_written(text, before.group(1), before.group(2), m.group(3), m.end())
    written = _as_written(text, m.group(1), m.group(2), m.group(3), m.end())
    if written is None and m.group(3).endswith("frac"):  # a fraction of numbers before a bracket of no value, its factor
        within = _as_written(text, m.group(1), m.group(2), m.group(3), m.end(), True)
        # ("\\frac{1}{2}(\\pi+1)"; it read "\\pi+1", one answer with "\\boxed{\\pi+1}")
        written = within if within and _more_factors(text, within[0])[0].startswith("(") else None
    return m.start(), written


def _signed(text: str, m: re.Match[str]) -> bool:
    """Whether the bracket ``_GROUP`` found has a sign of its own ("-(2+3)" is -5, as math-verify reads
    it; it was 5, the minus lost); "x - (2+3)", spaced after an operand, is a difference."""
    sign = m.group(1)
    return bool(sign) and not (sign != "-" and _OPERAND_BEFORE.search(text, 0, m.start()))


# A difference's minus before a bracket ("1 - (", "1-(", "x-\\left("), and a bracket that holds math, no word of prose.
_MINUS_BEFORE = re.compile(r"[\w)\]}][ \t]*-[ \t]*(?:\\left\s*)?\(\Z")
_MATH_BRACKET = re.compile(r"(?![^()]*(?<![\\a-zA-Z])[a-zA-Z]{2})[^(),]+")


def _subtracted(text: str, m: re.Match[str]) -> bool:
    """Whether the bracket ``_GROUP`` found is subtracted ("1 - (\\pi+1)", "1-(1+\\pi)"): read whole, a term of its
    difference (its inside alone was read, "\\pi+1", one answer with "\\boxed{\\pi+1}" where math-verify reads -π).
    Only a bracket of math: "5 - (see above)" is prose, no product of its letters."""
    if not _MINUS_BEFORE.search(text, max(0, m.end() - 40), m.end()):
        return False
    inside, _ = _argument(text, m.end() - 1, "(", ")")
    return inside is not None and _MATH_BRACKET.fullmatch(inside) is not None


def _group_as_written(text: str, m: re.Match[str]) -> tuple[int, int, str] | None:
    """A bracket ``_GROUP`` found that has no value (``\\pi`` or a root in it), with what made it a group: its power, its
    sign, the number before it, the brackets after it ("(1+\\pi)^2", "-(\\pi+1)", "2(\\pi+1)", "(\\pi+1)(\\pi-1)"), spelled as
    written ("(\\pi+1)^{2}"), as (start, end, spelling). Its expression alone was read ("\\pi+1"): one answer with the
    bracket's, the power, the sign or the factor lost. None where a bracket is left open or a caret has no exponent."""
    begin = m.start() if _signed(text, m) else m.start() + len(m.group(1) or "")
    end = m.end() - 1  # its opening bracket
    while True:
        _, close = _argument(text, end, "(", ")")
        if close == end:
            return None
        end = close
        if caret := _CARET.match(text, end):
            digits = re.compile(r"[ \t]*(-?\d+)").match(text, caret.end())
            exponent, end = (digits.group(1), digits.end()) if digits else _argument(text, caret.end())
            if exponent is None or not exponent.strip():
                return None
        after = _BRACKET_AFTER.match(text, end)
        if after is None:
            if divisor := _DIVISOR_AFTER.match(text, end):  # "(\\pi+1)/2": its quotient's, as "\\frac{\\pi+1}{2}" is
                end = divisor.end()
            break
        if not after.group().endswith("("):  # a number right after it is its factor ("(\\pi+1)2")
            number = re.compile(_PART).match(text, after.end() - 1)
            end = number.end() if number else end
            break
        end = after.end() - 1
    spelling = _sum_as_written(text[begin:end])
    return (begin, end, spelling) if _balanced(spelling) else None


def _powered_or_multiplied(text: str, m: re.Match[str]) -> bool:
    """Whether the bracket ``_GROUP`` found closes (``\\right)`` too) with a power after it, or with another
    bracket, its factor ("(2)(3)" and "(2) \\cdot (3)" are 6, as "2(3)" is; they read 3, the last number), or, where it
    holds math, with a command's expression (``_COMMAND_AFTER``)."""
    inside, end = _argument(text, m.end() - 1, "(", ")")
    if end == m.end() - 1:
        return False
    if _CARET.match(text, end) or _BRACKET_AFTER.match(text, end) or _DIVISOR_AFTER.match(text, end):
        return True
    return _COMMAND_AFTER.match(text, end) is not None and _MATH_BRACKET.fullmatch(inside or "") is not None


# A number that divides a bracket ("(\\pi+1)/2", "(3+4)/2"): the bracket is the quotient's numerator, read with it (it read
# 2, the divisor alone, one answer with "(\\pi+2)/2"); "(3+4)/2/2" or "(x)/2^3" are no such plain divisor.
_DIVISOR_AFTER = re.compile(r"[ \t]*/[ \t]*(?:" + _PART + r")(?![\d.]|[ \t]*[/^(\\])")
# A command's expression after a bracket of math, its factor ("(\\pi+1)\\sqrt{2}", "(\\pi+1) \\cdot \\sqrt{2}"; they
# read \\sqrt{2}, the bracket lost); a space alone is no product's ("see (above) \\sqrt{2}" is prose).
_COMMAND_AFTER = re.compile(r"(?:[ \t]*(?:\\cdot|\\times|\*)[ \t]*)?\\(?:sqrt|[dt]?frac|pi)(?![a-zA-Z])")


def _more_factors(text: str, at: int) -> tuple[str, int]:
    """The command factors right after an expression, spelled as written, and where they end
    ("", ``at`` where none follows): a factor of no value makes the whole product one of none. A bracket of math
    right after it, no space between, is a factor too, with its power ("\\sqrt{2}(\\pi+1)" is that product; it read
    "\\pi+1", one answer with "\\boxed{\\pi+1}", the command lost)."""
    spelling = ""
    while True:
        if (m := _NEXT_FACTOR.match(text, at)) and (written := _as_written(text, None, None, m.group(1), m.end(), True)):
            at, piece = written
        elif bracket := _BRACKET_FACTOR.match(text, at):
            inside, close = _argument(text, bracket.end() - 1, "(", ")")
            if inside is None or not _MATH_INSIDE.fullmatch(inside):
                break
            power = _CARET_EXPONENT.match(text, close)
            piece, at = "(" + _sum_as_written(inside) + ")", close
            if power:
                piece, at = piece + "^{" + _latex(power.group(1) or power.group(2)) + "}", power.end()
        else:
            break
        spelling += piece
    return spelling, at


# A bracket right after a command's expression, its factor ("\\sqrt{2}(\\pi+1)", "\\pi\\left(x-1\\right)"), where it holds
# math: no word ("\\sqrt{2}(see above)" is prose), nor a comma (a tuple's).
_BRACKET_FACTOR = re.compile(r"(?:\\left\s*)?\(")
_MATH_INSIDE = re.compile(r"(?![^()]*(?<![\\a-zA-Z])[a-zA-Z]{2})[^,]+")
_CARET_EXPONENT = re.compile(r"[ \t]*\^[ \t]*(?:\{([^{}]+)\}|(\w))")


def _power_as_written(text: str, m: re.Match[str]) -> tuple[int, str] | None:
    """A power ``_POWER`` found that has no value here ("9^99999", "2^x"), spelled as written
    ("9^{99999}"): its base alone is another answer. None where the caret has no exponent, or its
    base is an exponent's, in a brace never closed (an answer cut short, "2^{2^x": it failed an assertion)."""
    digits = re.compile(r"[ \t]*(-?\d+)").match(text, m.end())
    exponent, end = (digits.group(1), digits.end()) if digits else _argument(text, m.end())
    if exponent is None or not exponent.strip():
        return None
    base = _NUMBER.match(text, m.start() + len(m.group(1) or ""))  # after a sign spaced from it ("- 2^x")
    if base is None:
        return None
    return end, _canonical("-" if m.group(1) else "", base.group(2), base.group(3)) + "^{" + _latex(exponent) + "}"


def _as_written(
    text: str, sign: str | None, factor: str | None, command: str, end: int, within: bool = False
) -> tuple[int, str] | None:
    """An expression's ``command`` (``_IRRATIONAL``'s, with the sign and factor before it, ending at
    ``end``) spelled one way (spaces, ``\\left``/``\\right`` and ``\\dfrac`` aside, "\\sqrt2" as
    "\\sqrt{2}", "\\sqrt{2}/2" as "\\frac{\\sqrt{2}}{2}"), and where it ends; None for a command
    with no argument, or a fraction of two numbers (``_FRACTION`` reads it) but one over zero, which
    has no value: "\\frac{1}{0}" is no 0. ``within``: a factor of a product with no value, any
    fraction spelled."""
    if command == "pi":
        body = "\\pi"
        if caret := _CARET.match(text, end):  # "\\pi^2" is π², no π (it read \\pi, one answer with "\\pi")
            digits = re.compile(r"[ \t]*(-?\d+)").match(text, caret.end())
            exponent, after = (digits.group(1), digits.end()) if digits else _argument(text, caret.end())
            if exponent is not None and exponent.strip():
                body, end = body + "^{" + _powers_braced(_latex(exponent)) + "}", after
    elif command == "sqrt":
        index, end = _argument(text, end, "[", "]")
        root, end = _argument(text, end)
        if root is None:
            return None
        body = "\\sqrt" + (f"[{_latex(index)}]" if index is not None else "") + "{" + _latex(root) + "}"
    else:
        top, end = _argument(text, end)
        bottom, end = _argument(text, end)
        if top is None or bottom is None:
            return None
        if not within and _PLAIN_PART.fullmatch(top) and _PLAIN_PART.fullmatch(bottom) and Fraction(_digits(bottom)):
            return None
        parts = [ordered_sum(_parts_ordered(_powers_braced(_latex(part))), _constant) for part in (top, bottom)]
        flipped, parts = _signs_out(parts)
        if flipped:  # the fraction's sign: one spelling of a negated fraction
            sign = None if sign else "-"
        body = "\\frac{" + parts[0] + "}{" + parts[1] + "}"
    if command in ("sqrt", "pi"):
        over = re.compile(r"\s*/\s*(\d+)(?![\d/.])").match(text, end)
        if over:
            body, end = "\\frac{" + body + "}{" + over.group(1) + "}", over.end()
    factor = _canonical("", factor, "") if factor else ""
    return end, ("-" if sign else "") + factor + body


def _signs_out(parts: list[str]) -> tuple[bool, list[str]]:
    """A fraction's two parts, each in its terms' order, with the minus of each whose first term is negative
    the fraction's, and whether the fraction is negated: "\\frac{-\\pi}{2}", "\\frac{\\pi}{-2}" and "-\\frac{\\pi}{2}"
    are one answer, and so are "\\frac{-x+1}{-2}" and "\\frac{x-1}{2}", as math-verify reads them (they were two)."""
    flipped, out = False, []
    for part in parts:
        positive = negated(part) if part.startswith("-") else None
        if positive is None and _NEGATED_TERM.fullmatch(part):  # one term of no sum's form ("-|x|")
            positive = part[1:]
        if positive is not None:
            flipped, part = not flipped, positive
        out.append(part)
    return flipped, out


_NEGATED_TERM = re.compile(r"-[^-+]+")


def _digits(part: str) -> str:
    """A plain fraction part's number as ``Fraction`` reads it (no spaces, no thousands commas)."""
    return re.sub(r"[\s,]", "", part)


# An unbraced argument: a letter, a digit or a command ("\\frac12", "\\sqrt\\pi"); never a bracket, a brace or a
# backslash alone (garbage "\\frac\\)" read "\\frac{\\}{)}", a spelling no brace closes).
_ONE_TOKEN = re.compile(r"\\[a-zA-Z]+|[a-zA-Z\d]")


def _balanced(spelling: str) -> bool:
    """Whether each brace and bracket of a spelling is closed, in order: no reading is a broken
    spelling ("\\boxed{x" read from "\\boxed{x }"); one that would be is not read as one expression."""
    stack: list[str] = []
    for c in spelling:
        if c in "{([":
            stack.append(c)
        elif c in "})]" and (not stack or stack.pop() != "{(["["})]".index(c)]):
            return False
    return not stack


def _argument(text: str, at: int, opening: str = "{", closing: str = "}") -> tuple[str | None, int]:
    """A LaTeX command's argument at ``at`` (spaces before it skipped): a braced group, or, for a
    ``{`` argument, one character or command; (None, at) where there is none, or its group is
    longer than any answer's (an unclosed brace is not searched to the end of a long text)."""
    i = at
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        return None, at
    if text[i] == opening:
        depth = 0
        for j in range(i, min(len(text), i + _LONGEST_ARGUMENT)):
            depth += 1 if text[j] == opening else -1 if text[j] == closing else 0
            if depth == 0:
                return text[i + 1 : j], j + 1
        return None, at
    command = _ONE_TOKEN.match(text, i) if opening == "{" else None
    return (command.group(), command.end()) if command else (None, at)


def _latex(text: str) -> str:
    """A LaTeX argument spelled one way: no spaces, ``\\left``/``\\right``, ``\\dfrac`` or ``\\tfrac``,
    every ``\\frac``'s and ``\\sqrt``'s argument braced."""
    text = re.sub(r"\\(?:left|right)(?![a-zA-Z])", "", text)
    text = re.sub(r"(\\[a-zA-Z]+)\s+(?=[a-zA-Z])|\s+", lambda m: m.group(1) + " " if m.group(1) else "", text)
    return re.sub(r"\\[dt]?frac(?![a-zA-Z])", r"\\frac", _brace_arguments(text))


def _brace_arguments(text: str) -> str:
    out, at = [], 0
    for m in re.finditer(r"\\(sqrt|[dt]?frac)(?![a-zA-Z])", text):
        if m.start() < at:
            continue
        out.append(text[at : m.end()])
        at = m.end()
        index, at = _argument(text, at, "[", "]") if m.group(1) == "sqrt" else (None, at)
        if index is not None:
            out.append(f"[{_brace_arguments(index)}]")
        for _ in range(1 if m.group(1) == "sqrt" else 2):
            arg, at = _argument(text, at)
            out.append("{" + _brace_arguments(arg or "") + "}")
    return "".join(out) + text[at:]


def _plain(text: str, start: int, end: int) -> list[str]:
    found = _NUMBER.finditer(text, start, end)  # lookbehinds see the text before ``start``
    return [_canonical(m.group(1) or "", m.group(2), m.group(3)) for m in found]


def _fraction(m: re.Match[str]) -> Fraction | None:
    """A fraction's value; None for a zero denominator, or parts too long to divide in little time
    (a model's runaway digits): two numbers, as written."""
    sign, top_sign, top, top_digit, bottom_sign, bottom, bottom_digit, slash_sign, over, under = m.groups()
    if over is not None:
        signs, top, bottom = slash_sign or "", over, under
    else:
        signs, top, bottom = (sign or "") + (top_sign or "") + (bottom_sign or ""), top or top_digit, bottom or bottom_digit
    if len(top) + len(bottom) > _LONGEST_FRACTION:
        return None
    divisor = Fraction(bottom.replace(",", ""))
    if not divisor:
        return None
    return Fraction(top.replace(",", "")) / divisor * (-1 if signs.count("-") % 2 else 1)


def _spelled(value: Fraction) -> str:
    """A rational's one spelling: its decimal where it has one ("\\frac{1}{2}" is "0.5", as "0.5"
    is), else reduced ("2/6" is "1/3")."""
    rest, twos, fives = value.denominator, 0, 0
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:  # its decimal never ends: the reduced fraction is its one spelling
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    digits = str(abs(value.numerator) * 10**places // value.denominator)
    return _canonical("-" if value < 0 else "", digits, f"e-{places}" if places else "")


def _canonical(sign: str, digits: str, exponent: str) -> str:
    """One spelling per value, exact at any length (no float, no decimal context to round in):
    no thousands commas, no leading or trailing zeros, positional within 30 zeros of the digits,
    else ``D.DDDE+X``."""
    whole, _, fraction = digits.replace(",", "").partition(".")
    if len(exponent) > 12:  # an exponent past any real value's: the text as written is the answer
        return sign + whole + ("." + fraction if fraction else "") + exponent.lower()
    shift = int(exponent[1:] or 0) - len(fraction)
    significant = (whole + fraction).lstrip("0")
    if not significant:
        return "0"
    kept = significant.rstrip("0")
    shift += len(significant) - len(kept)
    if 0 <= shift <= 30:
        text = kept + "0" * shift
    elif shift < 0 and -shift - len(kept) <= 30:
        padded = kept.rjust(-shift + 1, "0")
        text = padded[:shift] + "." + padded[shift:]
    else:
        text = kept[0] + ("." + kept[1:] if len(kept) > 1 else "") + f"E{shift + len(kept) - 1:+d}"
    return sign + text


def _braced(text: str, start: int) -> str:
    """The text from ``start`` to the brace that closes the one before it (nested braces kept)."""
    depth = 1
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i]
    return text[start:]
