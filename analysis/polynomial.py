"""A ``number`` spelling that holds a bracket, read as a polynomial (or a quotient of two) and multiplied
out, so that one value written two ways is one answer: ``x\\cdot(x+1)`` is ``x^2+x``, ``(x+1)(x-1)``
``x^2-1``, ``(x+1)^{2}`` ``x^2+2x+1``, and ``2/(\\pi+1)`` and ``2/\\pi`` (boxes the extractor reads as
more than one number, spelled as written) are ``\\frac{2}{\\pi+1}`` and ``\\frac{2}{\\pi}``, as math-verify
reads them; they were compared by their spelling, wrong answers to each other.

Exact: coefficients are ``Fraction``s, variables (a letter, its subscript with it, a Greek letter) and
``\\pi`` are symbols, never numbers. A quotient is its numerator and denominator each multiplied out, not
reduced by a common factor (``\\frac{x^2-1}{x-1}`` stays a quotient of no value ``x+1`` has). Anything
else (a root, a function's application "f(x)", a list's comma, a relation, a power that is no small
whole number) is no polynomial: None, and the spelling stays as it was.
"""

from __future__ import annotations

import re
from fractions import Fraction
from math import gcd, lcm

from .sum_terms import GREEK

#: Powers past this, or products past this many terms, are left as written (a model's ``(x+y)^{99}``).
_LARGEST_POWER = 12
_MOST_TERMS = 64

type Monomial = tuple[tuple[str, int], ...]  # (symbol, power) sorted by symbol
type Polynomial = dict[Monomial, Fraction]

_TOKEN = re.compile(
    r"\s*(?:(\d+(?:\.\d+)?)"  # a number
    r"|([a-zA-Z](?:_(?:\{[a-zA-Z\d]+\}|[a-zA-Z\d]))?)"  # a variable, its subscript with it ("xy" two)
    r"|\\(left|right)(?![a-zA-Z])"  # no part of the value
    r"|\\([a-zA-Z]+)"  # a command
    r"|([-+()^{}/*]))"  # an operator, a bracket, a brace
)


class _NotPolynomial(Exception):
    """What ``_Parser`` reads is none: the spelling stays as it was."""


def _product(a: Polynomial, b: Polynomial) -> Polynomial:
    out: Polynomial = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            powers = dict(ma)
            for symbol, k in mb:
                powers[symbol] = powers.get(symbol, 0) + k
            m = tuple(sorted(powers.items()))
            out[m] = out.get(m, Fraction(0)) + ca * cb
    out = {m: c for m, c in out.items() if c}
    if len(out) > _MOST_TERMS:
        raise _NotPolynomial
    return out


def _sum(a: Polynomial, b: Polynomial, sign: int = 1) -> Polynomial:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, Fraction(0)) + sign * c
    return {m: c for m, c in out.items() if c}


def _constant(value: Fraction) -> Polynomial:
    return {(): value} if value else {}


type _Key = tuple[tuple[Monomial, Fraction], ...]  # a denominator, frozen
_ONE: _Key = (((), Fraction(1)),)


def _key(poly: Polynomial) -> _Key:
    return tuple(sorted(poly.items()))


class _Quotient:
    """A sum of quotients, each numerator kept with its denominator (the terms over one denominator added):
    ``1 + 2/(\\pi+1)`` stays two terms, as ``1 + \\frac{2}{\\pi+1}`` is written, not one quotient."""

    def __init__(self, numerator: Polynomial, denominator: Polynomial | None = None) -> None:
        self.terms: dict[_Key, Polynomial] = {}
        self._add(numerator, _constant(Fraction(1)) if denominator is None else denominator)

    def _add(self, numerator: Polynomial, denominator: Polynomial) -> None:
        if not denominator:
            raise _NotPolynomial  # over zero: no value
        # one denominator per quotient: its first term's coefficient 1 ("2/(-\\pi-1)" is "-2/(\\pi+1)"), a rational
        # divisor the numerator's coefficients'
        lead = denominator[min(denominator)]
        numerator = {m: c / lead for m, c in numerator.items()}
        denominator = {m: c / lead for m, c in denominator.items()}
        key = _key(denominator)
        total = _sum(self.terms.get(key, {}), numerator)
        if total:
            self.terms[key] = total
        else:
            self.terms.pop(key, None)
        if sum(map(len, self.terms.values())) > _MOST_TERMS:
            raise _NotPolynomial

    @staticmethod
    def _of(terms: list[tuple[Polynomial, Polynomial]]) -> _Quotient:
        out = _Quotient({})
        for numerator, denominator in terms:
            out._add(numerator, denominator)
        return out

    def __mul__(self, other: _Quotient) -> _Quotient:
        return _Quotient._of(
            [(_product(n1, n2), _product(dict(d1), dict(d2))) for d1, n1 in self.terms.items() for d2, n2 in other.terms.items()]
        )

    def __add__(self, other: _Quotient) -> _Quotient:
        return _Quotient._of([(n, dict(d)) for q in (self, other) for d, n in q.terms.items()])

    def negated(self) -> _Quotient:
        return _Quotient._of([({m: -c for m, c in n.items()}, dict(d)) for d, n in self.terms.items()])

    def inverse(self) -> _Quotient:
        if len(self.terms) != 1:
            raise _NotPolynomial  # zero, or a sum of quotients: no divisor of ours
        ((denominator, numerator),) = self.terms.items()
        return _Quotient(dict(denominator), numerator)

    def power(self, k: int) -> _Quotient:
        out = _Quotient(_constant(Fraction(1)))
        for _ in range(k):
            out = out * self
        return out


class _Parser:
    """Sums of products of numbers, variables, ``\\pi``, brackets, braces, ``\\frac``s and whole powers,
    joined by ``+``, ``-``, ``\\cdot``, ``\\times``, ``*``, ``/`` or nothing."""

    def __init__(self, spelling: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        at = 0
        while at < len(spelling):
            m = _TOKEN.match(spelling, at)
            if m is None or m.end() == at:
                if spelling[at:].strip():
                    raise _NotPolynomial
                break
            at = m.end()
            number, variable, skipped, command, operator = m.groups()
            if skipped:
                continue
            if command is not None and command not in ("cdot", "times", "frac", "dfrac", "tfrac", "pi", *GREEK):
                raise _NotPolynomial  # a root, a function, a relation, a text
            kind = "number" if number else "variable" if variable else "command" if command else "operator"
            self.tokens.append((kind, number or variable or command or operator))
        self.at = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, value: str) -> bool:
        token = self.peek()
        if token is not None and token[1] == value:
            self.at += 1
            return True
        return False

    def whole(self) -> _Quotient:
        value = self.sum()
        if self.peek() is not None:
            raise _NotPolynomial
        return value

    def sum(self) -> _Quotient:
        negative = self.take("-")
        if not negative:
            self.take("+")
        value = self.product()
        value = value.negated() if negative else value
        while (token := self.peek()) is not None and token[1] in "+-" and token[0] == "operator":
            self.at += 1
            term = self.product()
            value = value + (term.negated() if token[1] == "-" else term)
        return value

    def product(self) -> _Quotient:
        value = self.power()
        while (token := self.peek()) is not None:
            if token[1] in ("cdot", "times", "*"):
                self.at += 1
                value = value * self.power()
            elif token[1] == "/":  # the divisor all the factors after it, as math-verify reads "x/2y"
                self.at += 1
                divisor = self.power()
                while (after := self.peek()) is not None and (after[0] in ("variable", "command") or after[1] in "({"):
                    if after[1] in ("cdot", "times"):
                        break
                    divisor = divisor * self.power()
                value = value * divisor.inverse()
            elif token[0] in ("number", "variable", "command") or token[1] in "({":
                if token[0] == "number" and self.tokens[self.at - 1][0] == "number":
                    raise _NotPolynomial  # "2 3": no product of ours
                value = value * self.power()
            else:
                break
        return value

    def power(self) -> _Quotient:
        base = self.atom()
        if self.take("^"):
            if self.take("{"):
                exponent = self.peek()
                self.at += 1
                if not self.take("}"):
                    raise _NotPolynomial
            else:
                exponent = self.peek()
                self.at += 1
            if exponent is None or exponent[0] != "number" or not exponent[1].isdigit():
                raise _NotPolynomial  # "x^{-1}", "2^{x}", "x^{0.5}"
            k = int(exponent[1])
            if k > _LARGEST_POWER:
                raise _NotPolynomial
            return base.power(k)
        return base

    def atom(self) -> _Quotient:
        token = self.peek()
        if token is None:
            raise _NotPolynomial
        self.at += 1
        kind, value = token
        if kind == "number":
            return _Quotient(_constant(Fraction(value)))
        if kind == "variable":
            if self.peek() == ("operator", "("):
                raise _NotPolynomial  # "f(x)": a function's application, as the extractor spells it
            return _Quotient({((re.sub(r"_\{(\w)\}", r"_\1", value), 1),): Fraction(1)})
        if kind == "command" and value in ("frac", "dfrac", "tfrac"):
            return self.braced() * self.braced().inverse()
        if kind == "command" and value not in ("cdot", "times"):
            return _Quotient({(("\\" + value, 1),): Fraction(1)})
        if value in ("(", "{"):
            inside = self.sum()
            if not self.take(")" if value == "(" else "}"):
                raise _NotPolynomial
            return inside
        raise _NotPolynomial

    def braced(self) -> _Quotient:
        if self.take("{"):
            inside = self.sum()
            if self.take("}"):
                return inside
        raise _NotPolynomial


def _spelled_number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


def _spelled_polynomial(poly: Polynomial) -> str:
    """Written as a sum of its terms, each a coefficient and its symbols' powers: a spelling the extractor
    reads whole and puts in its own order."""
    if not poly:
        return "0"
    out = ""
    for monomial, c in sorted(poly.items(), key=lambda item: (not item[0], item[0])):  # the number last, as written
        symbols = " ".join(s + (f"^{{{k}}}" if k > 1 else "") for s, k in monomial)
        body = _spelled_number(abs(c)) if not monomial or abs(c) != 1 else ""
        term = body + (" " if body and symbols else "") + symbols
        out += ("-" if c < 0 else "+") + term
    return out.removeprefix("+")


def _whole(numerator: Polynomial, denominator: Polynomial) -> tuple[Polynomial, Polynomial]:
    """A quotient's two parts with whole coefficients of no common factor, as it is written ("x/(2y)", never
    "\\frac{\\frac{1}{2}x}{y}")."""
    coefficients = [*numerator.values(), *denominator.values()]
    scale = Fraction(lcm(*(c.denominator for c in coefficients)), gcd(*(c.numerator for c in coefficients)))
    return {m: c * scale for m, c in numerator.items()}, {m: c * scale for m, c in denominator.items()}


def polynomial_value(spelling: str) -> dict[_Key, Polynomial] | None:
    """The value ``spelling`` is, as a sum of quotients of polynomials; None where it is none of ours."""
    try:
        return _Parser(spelling).whole().terms
    except (_NotPolynomial, RecursionError):
        return None


def expanded(spelling: str) -> str | None:
    """``spelling`` multiplied out, where it holds a bracket, a "/" or a ``\\frac`` and reads as a polynomial or a
    quotient of two: written as a sum (``x^{2}+x``) of polynomials and ``\\frac{...}{...}`` of them, for the
    extractor to spell one way; None where it holds neither (already spelled one way) or is no such value."""
    if "(" not in spelling and "/" not in spelling and "\\frac" not in spelling:
        return None
    terms = polynomial_value(spelling)
    if terms is None:
        return None
    if not terms:
        return "0"
    out = ""
    for denominator, numerator in sorted(terms.items()):
        spelled = _spelled_polynomial(numerator)
        if denominator != _ONE:
            top, bottom = _whole(numerator, dict(denominator))
            spelled = f"\\frac{{{_spelled_polynomial(top)}}}{{{_spelled_polynomial(bottom)}}}"
        out += "+" + spelled
    return out.removeprefix("+").replace("+-", "-")
