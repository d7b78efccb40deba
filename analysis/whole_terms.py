"""A box's terms that the number reader would read only in part, made whole first.

The reader takes numbers, fractions, powers and products; a factorial, a binomial or a mixed number
next to other terms it read as a piece of them ("\\boxed{n!+1}" read 1, "\\boxed{x + 2\\frac{1}{2}}"
x+1, "\\boxed{(x+1)2\\frac{1}{2}}" x+1): another answer's reading, so a wrong answer graded right.
Here those of numbers are evaluated (a factorial, a binomial) or written as one fraction (a mixed
number), as math-verify reads them; where one can't be (a factorial of a letter or a bracket, a
mixed number a letter or bracket follows, which math-verify reads as a product of its parts), the
box is its text as written (``None``), never a part of it."""

from __future__ import annotations

import math
import re

_LARGEST = 1000  # of a factorial's or a binomial's number: larger ones are kept as written

# "5!", "(5)!": of a whole number; a second "!" (a double factorial) or "!=" is no factorial of it.
_FACTORIAL = re.compile(r"(?<![\w.^_}\\])(?:(\d+)|\((\d+)\))!(?![!=])")
_BANG = re.compile(r"!(?!=)")
_BINOMIAL = re.compile(
    r"\\[dt]?binom\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))|\{\s*(\d+)\s*\\choose(?![a-zA-Z])\s*(\d+)\s*\}"
)
_ANY_BINOMIAL = re.compile(r"\\[dt]?binom(?![a-zA-Z])|\\choose(?![a-zA-Z])")
# A whole number right before a fraction of two numbers: one mixed number ("2\\frac{1}{2}" is 5/2), where it
# follows no letter, number or power (after "\\cdot" or "\\times" it is a factor of its own).
_ARGUMENT = r"(?:\{\s*(\d+)\s*\}|(\d))"
_MIXED = re.compile(r"(?:(?<=\\cdot)|(?<=\\times)|(?<![\w.,^_\\]))(\d+)[ \t]*\\[dt]?frac\s*" + _ARGUMENT + r"\s*" + _ARGUMENT)
# What after a mixed number makes it a product's factor, not one number: a letter, a bracket, a command
# other than a product's sign.
_FACTOR_AFTER = re.compile(r"[ \t]*(?:[a-zA-Z(\[]|\\(?!cdot(?![a-zA-Z])|times(?![a-zA-Z])|right(?![a-zA-Z]))[a-zA-Z])")


def whole_terms(math_text: str) -> str | None:
    """The box's math with its factorials and binomials of numbers evaluated and its mixed numbers
    as one fraction each; None where one of them can't be read whole (its text as written is then the answer)."""
    text = _BINOMIAL.sub(_binomial, math_text)
    text = _FACTORIAL.sub(_factorial, text)
    if _BANG.search(text) or _ANY_BINOMIAL.search(text) or "\x00" in text:
        return None
    out, at = [], 0
    for m in _MIXED.finditer(text):
        if _FACTOR_AFTER.match(text, m.end()):
            return None
        whole, top, bottom = int(m.group(1)), int(m.group(2) or m.group(3)), int(m.group(4) or m.group(5))
        if bottom == 0:
            return None
        out += [text[at : m.start()], f"\\frac{{{whole * bottom + top}}}{{{bottom}}}"]
        at = m.end()
    return "".join([*out, text[at:]])


# What next to a term makes it a product's factor, so that its value is bracketed ("3!2" is (6)2, no 62).
_FACTOR_BEFORE = re.compile(r"[)\]][ \t]*\Z")
_FACTOR_NEXT = re.compile(r"[ \t]*(?:[\w(\[.]|\\(?!cdot(?![a-zA-Z])|times(?![a-zA-Z])|right(?![a-zA-Z]))[a-zA-Z])")


def _value(text: str, start: int, end: int, value: int) -> str:
    """A value in place of a term: bare where it stands alone as a term ("3!+1" is 6+1), bracketed where
    it is a product's factor ("(x+1)3!", "3!x")."""
    alone = not _FACTOR_BEFORE.search(text, 0, start) and not _FACTOR_NEXT.match(text, end)
    return str(value) if alone else f"({value})"


def _factorial(m: re.Match[str]) -> str:
    n = int(m.group(1) or m.group(2))
    if n > _LARGEST:
        return "\x00"  # kept as written: too large to write out
    return _value(m.string, m.start(), m.end(), math.factorial(n))


def _binomial(m: re.Match[str]) -> str:
    n, k = (int(g) for g in [m.group(1) or m.group(2) or m.group(5), m.group(3) or m.group(4) or m.group(6)])
    if n > _LARGEST:
        return "\x00"
    return _value(m.string, m.start(), m.end(), math.comb(n, k))
