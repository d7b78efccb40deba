"""The terms of a sum of no value in one order, so that equal sums are one answer: "$1 + xy$" and
"$xy + 1$" were two answers ("1+xy", "xy+1") where math-verify reads one. Addition commutes, so
reordering whole terms, each with its own sign, keeps the value ("x-1" and "-1+x" are one, "1-x"
another). A spelling with anything that may bind across a "+" or "-" (a relation "\\le", "\\pm", an
absolute value's "|", an unbalanced brace) is left as written: there the terms are no terms of one sum."""

from __future__ import annotations

import re
from collections.abc import Callable
from fractions import Fraction

from .exact_value import product_at

# What a sum's spelling may hold to be reordered: letters, numbers, groups, powers, subscripts,
# products, quotients, and only commands that are a factor or a function, never a relation.
_CHARACTERS = re.compile(r"[a-zA-Z\d.\\{}()\[\]^_+\-/ ]*")
_COMMAND = re.compile(r"\\([a-zA-Z]+)")
_OPERATIONS = frozenset(
    "cdot frac sqrt pi infty arcsin arccos arctan sinh cosh tanh sin cos tan cot sec csc log ln lg exp".split()
)
GREEK = frozenset(  # variables, as a letter is (\\pi is the constant)
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi rho varrho "
    "sigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon Phi Psi Omega".split()
)
# A sign that is no sum's: a number's exponent ("1E+5"), after a product's dot or a "/" ("x \\cdot -3", "x/-2").
_NO_TERM_SIGN = re.compile(r"(?:\dE|\\cdot|/)\Z")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:E([-+]\d+))?")
_LARGEST_EXPONENT = 1000  # a number past it ("1E+99999") stays as written: its digits are past any answer's
_COEFFICIENT = re.compile(r"\d+(?:\.\d+)?(?![\d.^])(?:\\cdot)?")
_LETTER = re.compile(r"[a-zA-Z]")


def ordered_sum(spelling: str, spell: Callable[[Fraction], str] | None = None) -> str:
    """The sum's top-level terms sorted (terms with a variable first, then other expressions, then
    numbers; within each by what follows the number before them), each keeping its sign; the
    spelling as it is where it is one term or may not be reordered. With ``spell`` (how a positive
    rational is written), its rational terms are one term, their exact sum (``_folded``)."""
    terms = _terms(spelling)
    if terms is None or len(terms) < 2:
        return spelling
    if spell is not None:
        terms = _folded(terms, spell)
        if len(terms) == 1:
            return ("-" if terms[0][0] else "") + terms[0][1]
    ordered = sorted(terms, key=_rank)
    out = "".join(("-" if negative else "+") + body for negative, body in ordered)
    return out[1:] if out.startswith("+") else out


def negated(spelling: str) -> str | None:
    """The sum with each top-level term's sign flipped, in its order ("-x+1" as "x-1"), so that a fraction's
    part whose first term is negative gives its minus to the fraction; None where its terms are no terms."""
    terms = _terms(spelling)
    if terms is None:
        return None
    out = "".join(("+" if negative else "-") + body for negative, body in terms)
    return out[1:] if out.startswith("+") else out


def _terms(spelling: str) -> list[tuple[bool, str]] | None:
    """Each top-level term as (negative, its spelling without sign); None where one is empty or
    the spelling holds what may bind across a sign."""
    if not _CHARACTERS.fullmatch(spelling) or any(c not in _OPERATIONS | GREEK for c in _COMMAND.findall(spelling)):
        return None
    terms: list[tuple[bool, str]] = []
    negative, body, depth = False, "", 0
    for i, c in enumerate(spelling):
        if (
            depth == 0
            and c in "+-"
            and spelling[i - 1 : i] not in ("^", "_")
            and not _NO_TERM_SIGN.search(spelling, max(0, i - 6), i)
        ):
            if body:
                terms.append((negative, body))
            elif i:  # "x+-1", "x-": no term between the signs
                return None
            negative, body = c == "-", ""
            continue
        depth += 1 if c in "{([" else -1 if c in "})]" else 0
        if depth < 0:
            return None
        body += c
    if not body or depth:
        return None
    return [*terms, (negative, body)]


def _folded(terms: list[tuple[bool, str]], spell: Callable[[Fraction], str]) -> list[tuple[bool, str]]:
    """The terms with those of a rational value (numbers, fractions, powers of numbers: "2", "0.5",
    "\\frac{1}{3}", "2^{3}") added up, exactly, as one term, none where they add up to zero: "x+2+3"
    is "x+5" and "4x+2^{3}" "4x+8", as math-verify reads them (they were other answers than "x+5" and
    "4x+8"). ``Fraction`` alone, no float: 0.1 + 0.2 is 0.3, never a value near it."""
    kept, total, constants = [], Fraction(0), 0
    for negative, body in terms:
        if (number := _NUMBER.fullmatch(body)) and abs(int(number.group(1) or 0)) <= _LARGEST_EXPONENT:
            # "1E+40": scientific notation is a number, its "E" no variable
            total += -Fraction(body) if negative else Fraction(body)
            constants += 1
            continue
        read = product_at(body, 0) if not _LETTER.search(_COMMAND.sub("", body)) else None
        if read is None or read[1] != len(body) or read[0].radicand != 1:
            kept.append((negative, body))
            continue
        total += -read[0].coefficient if negative else read[0].coefficient
        constants += 1
    if not constants:
        return terms
    if total or not kept:
        kept.append((total < 0, spell(abs(total))))
    return kept


def _rank(term: tuple[bool, str]) -> tuple[int, str, str, bool]:
    """Where a term goes: terms with a variable (a letter, a Greek one) first, then other expressions
    ("\\pi", "\\sqrt{2}"), then numbers; within each by what follows its number ("x" before "2y")."""
    negative, body = term
    variable = _LETTER.search(_NUMBER.sub("", _COMMAND.sub("", body))) or any(c in GREEK for c in _COMMAND.findall(body))
    kind = 0 if variable else 2 if _NUMBER.fullmatch(body) else 1
    coefficient = _COEFFICIENT.match(body)
    return kind, body[coefficient.end() :] if coefficient else body, body, negative
