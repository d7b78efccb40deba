"""The exact value of a product written in LaTeX or plain text (``\\frac{1}{2}\\sqrt2``, ``2^3``,
``\\frac{1}{\\sqrt{2}}``, ``1.5 \\times 10^{3}``), where it is a rational multiple of the square root
of an integer: the ``number`` extractor reads equal values as one answer however they are written.

Evaluated with ``Fraction`` alone (no sympy): a value is ``c * sqrt(r)``, ``r`` square-free. What
this can't hold exactly (``\\pi``, ``\\sqrt[3]{2}``, ``1 + \\sqrt2``, a letter) is no value (None),
and the extractor spells the expression as written instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from math import isqrt

#: A radicand past this is not factored (its square-free part is found by trial division to 10^4).
_LARGEST_RADICAND = 10**12
#: A power whose result would have more bits than this is not computed (a model's runaway ``9^99999``).
_MOST_BITS = 4096
_DEEPEST = 20  # braces and brackets inside each other
_LONGEST = 400  # characters of one expression
_PART = re.compile(r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+")
#: A number's exponent as plain text writes it ("1e5"): part of the number, so "1e5^2" is 10^10.
_EXPONENT = re.compile(r"[eE][-+]?\d+")
_LONGEST_EXPONENT = 4  # digits: "1e99999" is not computed
_COMMAND = re.compile(r"\\([a-zA-Z]+)|\\[,;!: ]")
_TIMES = ("\\cdot", "\\times", "*")
_WORD_AFTER = re.compile(r"[a-zA-Z_]|\\(?!cdot|times|left|right|pi(?![a-zA-Z])|[,;!: ])[a-zA-Z]")
#: A factor of no value ahead, its operator before it: the product before it is read, and ends there.
_PI_AHEAD = re.compile(r"[ \t]*(?:\\cdot|\\times|\*)?[ \t]*\\pi(?![a-zA-Z])")


@dataclass(frozen=True, slots=True)
class Surd:
    """``coefficient * sqrt(radicand)``, the radicand square-free (1 for a rational)."""

    coefficient: Fraction
    radicand: int = 1

    def __mul__(self, other: Surd) -> Surd | None:
        split = _square_free(self.radicand * other.radicand)
        if split is None:
            return None
        outside, inside = split
        return Surd(self.coefficient * other.coefficient * outside, inside if self.coefficient and other.coefficient else 1)

    def inverse(self) -> Surd | None:
        if not self.coefficient:
            return None
        return Surd(1 / (self.coefficient * self.radicand), self.radicand)  # 1/(c*sqrt r) = sqrt r/(c*r)

    def __add__(self, other: Surd) -> Surd | None:
        if not other.coefficient:
            return self
        if not self.coefficient:
            return other
        if self.radicand != other.radicand:
            return None  # 1 + sqrt2: no value of this form
        total = self.coefficient + other.coefficient
        return Surd(total, self.radicand if total else 1)

    def power(self, exponent: Surd) -> Surd | None:
        """An integer power, or a half-integer one of a rational (``2^{1/2}`` is ``\\sqrt{2}``)."""
        if exponent.radicand != 1 or exponent.coefficient.denominator not in (1, 2):
            return None
        twice = exponent.coefficient * 2
        base: Surd | None = self
        if twice.denominator != 1 or (twice.numerator % 2 and self.radicand != 1):
            return None
        if twice.numerator % 2:
            base = self.root()
            k = int(twice)
        else:
            k = int(twice) // 2
        if base is None or (k < 0 and not base.coefficient):
            return None
        c = base.coefficient
        if abs(k) * (max(c.numerator.bit_length(), c.denominator.bit_length()) + base.radicand.bit_length()) > _MOST_BITS:
            return None
        r = base.radicand
        value: Surd | None = Surd(c ** abs(k) * r ** (abs(k) // 2), r if abs(k) % 2 else 1)
        return value.inverse() if value is not None and k < 0 else value

    def root(self) -> Surd | None:
        """The square root of a rational at least 0: sqrt(p/q) = sqrt(p*q)/q."""
        c = self.coefficient
        if self.radicand != 1 or c < 0:
            return None
        split = _square_free(c.numerator * c.denominator)
        if split is None:
            return None
        outside, inside = split
        return Surd(Fraction(outside, c.denominator), inside)


def _square_free(n: int) -> tuple[int, int] | None:
    """``n`` as ``k*k*s`` with ``s`` square-free: (k, s); None for one too large to factor here.
    Primes to 10^4 are divided out; what is left (under 10^12) has at most two prime factors, so
    it is square-free unless it is a square."""
    if n == 0:
        return 1, 1
    if n > _LARGEST_RADICAND:
        return None
    outside, inside, d = 1, 1, 2
    while d * d <= n and d <= 10**4:
        while n % (d * d) == 0:
            n //= d * d
            outside *= d
        if n % d == 0:
            n //= d
            inside *= d
        d += 1
    root = isqrt(n)
    if root * root == n:
        return outside * root, inside
    return outside, inside * n


class _Reader:
    """A product read from ``text`` at ``at``: factors, each a number, ``\\frac``, ``\\sqrt``, a
    group in braces or brackets, with a power after it, joined by ``\\cdot``, ``\\times``, ``*``,
    ``/`` or nothing (before a command or a group). Inside a group, sums of like terms too."""

    def __init__(self, text: str, at: int) -> None:
        self.text, self.at, self.end = text, at, min(len(text), at + _LONGEST)
        self.depth = 0
        self.special = False  # a root, a power, an operator, a group or a \frac of no two numbers
        self.factors: list[str] = []  # the kind of each factor at the top: "number", "fraction", ...

    def skip(self) -> None:
        while self.at < self.end:
            if self.text[self.at] in " \t":
                self.at += 1
            elif (m := _COMMAND.match(self.text, self.at)) and m.group(1) in (None, "left", "right"):
                self.at = m.end()
            else:
                return

    def peek(self, *options: str) -> str | None:
        self.skip()
        return next((o for o in options if self.text.startswith(o, self.at) and self.at + len(o) <= self.end), None)

    def take(self, option: str) -> bool:
        if self.peek(option) is None or (
            option[-1].isalpha() and self.text[self.at + len(option) : self.at + len(option) + 1].isalpha()
        ):
            return False
        self.at += len(option)
        return True

    def product(self, top: bool = False) -> Surd | None:
        sign = -1 if self.take("-") else 1
        value = self.factor(top)
        while value is not None and not _PI_AHEAD.match(self.text, self.at, self.end):
            if any(self.take(op) for op in _TIMES):
                self.special = True
                other = self.signed(top)
                value = value * other if other is not None else None
            elif self.take("/"):
                self.special = True
                other = self.signed(top)
                inverse = other.inverse() if other is not None else None
                value = value * inverse if inverse is not None else None
            elif self.peek("\\frac", "\\dfrac", "\\tfrac", "\\sqrt", "{", "(") and not self.mixed(top):
                other = self.factor(top)  # "\frac12\sqrt2", "2\sqrt3"
                value = value * other if other is not None else None
            elif self.text[self.at - 1] == ")" and _PART.match(self.text, self.at, self.end):
                self.special = True  # a number right after a bracket is its factor ("(2)3" is 6, as "2(3)" is)
                other = self.factor(top)
                value = value * other if other is not None else None
            else:
                break
        return value * Surd(Fraction(sign)) if value is not None else None

    def signed(self, top: bool) -> Surd | None:
        """A factor after an operator, a minus before it its sign ("2 * -3" is -6, as math-verify reads it)."""
        sign = -1 if self.take("-") else 1
        value = self.factor(top)
        return Surd(sign * value.coefficient, value.radicand) if value is not None else None

    def sum(self) -> Surd | None:
        value = self.product()
        while value is not None and (plus := self.peek("+", "-")):
            self.at += 1
            term = self.product()
            if term is not None and plus == "-":
                term = Surd(-term.coefficient, term.radicand)
            value = value + term if term is not None else None
        return value

    def mixed(self, top: bool) -> bool:
        """A number then a \\frac of two numbers: a mixed number (``2\\frac12`` is 2.5), not a product."""
        if not (top and self.factors == ["number"]):
            return False
        at = self.at
        plain = self.take("\\frac") or self.take("\\dfrac") or self.take("\\tfrac")
        plain = plain and self.plain_ahead()
        self.at = at
        return plain

    def factor(self, top: bool = False) -> Surd | None:
        base = self.base(top)
        if base is not None and self.take("^"):
            self.special = True
            exponent = self.argument(digits=True)
            return base.power(exponent) if exponent is not None else None
        return base

    def base(self, top: bool = False) -> Surd | None:
        self.skip()
        number = _PART.match(self.text, self.at, self.end)
        if number:
            self.at = number.end()
            if top:
                self.factors.append("number")
            value = Fraction(number.group().replace(",", ""))
            if exponent := _EXPONENT.match(self.text, self.at, self.end):
                self.at = exponent.end()
                if len(exponent.group().lstrip("eE+-")) > _LONGEST_EXPONENT:
                    return None
                value *= Fraction(10) ** int(exponent.group()[1:])
            return Surd(value)
        if top:
            self.factors.append("other")
        for command in ("\\frac", "\\dfrac", "\\tfrac"):
            if self.take(command):
                plain = self.plain_ahead()
                top_, bottom = self.argument(), self.argument()
                if plain and top:
                    self.factors[-1] = "fraction"
                else:
                    self.special = True
                inverse = bottom.inverse() if bottom is not None else None
                return top_ * inverse if top_ is not None and inverse is not None else None
        if self.take("\\sqrt"):
            self.special = True
            if self.peek("["):
                return None  # another root than the square's
            inside = self.argument()
            return inside.root() if inside is not None else None
        for opening, closing in (("{", "}"), ("(", ")")):
            if self.take(opening):
                self.special = True
                return self.group(closing)
        return None

    def group(self, closing: str) -> Surd | None:
        self.depth += 1
        if self.depth > _DEEPEST:
            return None
        value = self.sum()
        self.depth -= 1
        return value if value is not None and self.take(closing) else None

    def argument(self, digits: bool = False) -> Surd | None:
        """A command's argument: a group in braces, else one digit (``\\frac12``); for a power,
        a signed whole number as plain text writes it (``2^10``, ``10^-3``)."""
        if self.take("{"):
            return self.group("}")
        plain = re.compile(r"-?\d+" if digits else r"\d").match(self.text, self.at, self.end)
        if plain:
            self.at = plain.end()
            return Surd(Fraction(plain.group()))
        return None

    def plain_ahead(self) -> bool:
        """Whether a \\frac's two arguments ahead are numbers (a fraction the extractor reads itself)."""
        m = re.compile(r"\s*(?:\{\s*-?\s*(?:" + _PART.pattern + r")\s*\}|\d)\s*(?:\{\s*-?\s*(?:" + _PART.pattern + r")\s*\}|\d)")
        return m.match(self.text, self.at, self.end) is not None


def evaluated(text: str, at: int) -> tuple[Surd, int] | None:
    """The exact value of the product written at ``at`` and where it ends; None where it has no
    value of this form, or is one the extractor reads as it is (a number, a fraction of two
    numbers, a mixed number ``2\\frac12``)."""
    reader = _Reader(text, at)
    value = reader.product(top=True)
    plain = not (reader.special or len(reader.factors) > 2 or reader.factors[:1] == ["fraction"] != reader.factors)
    if value is None or (plain and not _PI_AHEAD.match(text, reader.at)):  # "\frac12\pi": the factor of \pi
        return None
    return value, reader.at


def product_at(text: str, at: int) -> tuple[Surd, int] | None:
    """The value of the product written at ``at``, a plain number too, and where it ends; None where
    it has none of this form."""
    reader = _Reader(text, at)
    value = reader.product()
    return (value, reader.at) if value is not None else None


def summed(text: str, at: int) -> tuple[Surd | None, int] | None:
    """The sum or difference of terms written at ``at`` (``3^2+4^2``, ``\\sqrt2 + \\sqrt2``, ``2 + 3``),
    each a product ``evaluated`` reads or a number, and where it ends: its value, or None for unlike
    radicals (``1+\\sqrt2``), which have no value of this form but are one answer, as written. None
    where fewer than two terms have a value (``2^3 + x``: the power alone), or where numbers alone
    are joined by a "-" not spaced on both sides ("3-5" is a range, "1 -1/2" two numbers)."""
    reader = _Reader(text, at)
    total: Surd | None = Surd(Fraction(0))
    terms, expression, loose, end, sign = 0, False, False, at, 1
    while True:
        reader.factors, reader.special = [], False
        term = reader.product(top=True)
        after = reader.at
        while after > at and text[after - 1] in " \t":  # the spaces the reader looked past
            after -= 1
        if term is None or _WORD_AFTER.match(text, after):  # "2^3 + 4x": 4x is no number
            break
        factors = reader.factors
        expression |= reader.special or len(factors) > 2 or factors[:1] == ["fraction"] != factors
        terms, end = terms + 1, after
        term = Surd(sign * term.coefficient, term.radicand)
        total = total + term if total is not None else None
        operator = reader.peek("+", "-")
        if operator is None:
            break
        loose |= operator == "-" and not (reader.at > after and text[reader.at + 1 : reader.at + 2] in (" ", "\t"))
        reader.at += 1
        sign = -1 if operator == "-" else 1
    if terms < 2 or (loose and not expression):
        return None
    return total, end


def spelled(value: Surd, rational: str) -> str:
    """``value`` written one way: a rational as ``rational`` (the extractor's spelling of its
    coefficient), else ``\\frac{p\\sqrt{r}}{q}`` reduced, its sign before it."""
    c = value.coefficient
    if value.radicand == 1 or not c:
        return rational
    body = (str(abs(c.numerator)) if abs(c.numerator) != 1 else "") + f"\\sqrt{{{value.radicand}}}"
    if c.denominator != 1:
        body = f"\\frac{{{body}}}{{{c.denominator}}}"
    return ("-" if c < 0 else "") + body
