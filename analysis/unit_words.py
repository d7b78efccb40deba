"""The units a number may be written with ("10s", "5 km", "\\boxed{5apples}"), so that the ``number``
extractor reads a unit after a number as no factor of it, and any other letters there, inside math,
as a product's ("\\boxed{5 xy}" is 5xy, as math-verify reads it; the letters were taken for a unit,
so that it read 5, another answer's)."""

from __future__ import annotations

import re

from .sum_terms import GREEK

_PREFIXED = r"[pnuμmcdkMGT](?:m|g|s|l|L|W|J|V|A|N|B|b|Hz|Pa|eV|Wh|Ah|cal|mol)"
#: Units of SI and common abbreviations, an ordinal's suffix ("2nd") too, as a regex's alternatives.
SHORT_UNIT = (
    r"s|m|g|h|l|L|" + _PREFIXED + r"|Hz|Pa|eV|Wh|mol|cal|min|mins|hr|hrs|sec|secs|ft|in|mi|yd|lb|lbs|oz|mph|kph|kmh|mpg"
    r"|yr|yrs|wk|wks|deg|rad|px|pt|dB|am|pm|AM|PM|st|nd|rd|th"
)
#: The words math-verify strips as a unit after a number (latex2sympy2_extended's ``units``, its plurals too:
#: "\\boxed{5apples}" is 5 there), of three letters or more: a shorter one ("ab", "bc", "t", "d") is a
#: product's letters or a variable here ("5ab" is 5ab), as a reader reads it, never a unit that makes
#: "5ab" and "5" one answer.
UNIT_WORDS = frozenset(
    "Surface acre apple are cent coin cube cubic day decrease deg degree digit east edge excess feet gain gal "
    "gallon hectare hour inch inches increase kmh kmph less liter litre loss man mark meal men meter metre mile "
    "min minute minw monkey month more mph mtr multiple noon number ohm per pie pound prime profit pure ratio "
    "rise rounds rupee sec second soldier square student sue tile toy unit way west woman women yard year".split()
)
#: Any unit, as a regex's alternatives: a short one, or a unit word, in the plural too.
UNIT = SHORT_UNIT + r"|(?:" + "|".join(sorted(UNIT_WORDS)) + r")(?:s|es)?"
_UNIT = re.compile(UNIT)
#: What after a unit word makes it a factor of the math that follows, no unit: a unit is one only at the
#: end of the answer ("\\boxed{5 m \\pi}" is 5πm, as math-verify reads it; it read 5, another answer's).
MORE_MATH = r"[ \t]*\\(?:pi|sqrt|[dt]?frac|" + "|".join(sorted(GREEK, key=len, reverse=True)) + r")(?![a-zA-Z])"
_MORE_MATH = re.compile(MORE_MATH)
#: What after a unit spaced from its number, inside math, makes it a product's factor too: a sum's sign or a product's
#: ("\\boxed{5\\,m + 1}" is 5m+1, as math-verify reads it: a unit is stripped only at the end; it read 1, the last term).
#: A unit per unit or a unit's power ("5 m/s", "5 m^2") is still the unit.
_OPERATOR_AFTER = re.compile(r"[ \t]*(?:[-+*]|\\cdot(?![a-zA-Z])|\\times(?![a-zA-Z]))")


def is_unit(letters: str) -> bool:
    """Whether the letters are a unit's, whole ("km", "apples"; not "xy", "cats")."""
    return _UNIT.fullmatch(letters) is not None


def before_more_math(text: str, at: int) -> bool:
    """Whether more math follows ``at``, the end of a unit's letters inside math (a factor's command, or an operator:
    ``_OPERATOR_AFTER``): then they are a product's factors."""
    return _MORE_MATH.match(text, at) is not None or _OPERATOR_AFTER.match(text, at) is not None
