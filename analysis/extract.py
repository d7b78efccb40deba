"""Answer extractors: what counts as "the answer" when two outputs are compared for flips."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from fractions import Fraction

from infertap.errors import ConfigError

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
_BOXED = re.compile(r"\\boxed\s*\{")
# GSM8K's "#### 72", not a markdown heading "#### Step 1"; "The answer is 72", "Answer: 72".
_MARKED_NUMBER = (re.compile(r"####(?=[ \t]*\$?-?\.?\d)"), re.compile(r"\b(?i:answer)(?:\s+is\b|\s*:)"))
# A letter that is marked as the answer: "answer is B", "Answer: (c)", "answer is option **D**".
# Lowercase counts here only where nothing follows it in the sentence ("the answer is a bit" is no A).
_LETTER = r"(?:\(\s*([A-Ea-e])\s*\)|\*\*([A-Ea-e])\*\*|([A-E])(?![\w'-])|([a-e])(?=[).,;!*]|\s*$))"
_ANSWER = re.compile(r"\b(?i:answer)\b(?:\s+is)?\s*[:=]?\s*(?:(?i:option|choice)\s+)?" + _LETTER)
_OPTION = re.compile(r"\b(?i:option|choice)\s*[:=]?\s*" + _LETTER)
_ALONE = re.compile(r"\W*([A-Ea-e])\W*")
_CAPITAL = re.compile(r"(?<![\w'-])([A-E])(?![\w'-])")


def number(text: str) -> str | None:
    """The number the text gives as its answer, written so that equal values are equal strings
    ("3.50", "3.5" and "35e-1" are "3.5"; "-0.0" is "0"; "\\frac{1}{2}" and "1/2" are "0.5").

    The last ``\\boxed{...}``'s, else the first after the last "####" (GSM8K's) or else after the
    last "answer is"/"answer:" on its line, else the last in the text ("17 + 25 = 42" -> "42"):
    a check after the answer ("\\boxed{42}. Check: 42 = 6*7") is not the answer.
    """
    boxes = list(_BOXED.finditer(text))
    if boxes:
        found = _numbers(_braced(text, boxes[-1].end()))
        if found:
            return found[-1]
    for marker in _MARKED_NUMBER:
        marks = list(marker.finditer(text))
        if marks:
            found = _numbers(text[marks[-1].end() :].split("\n", 1)[0])
            if found:
                return found[0]
    found = _numbers(text)
    return found[-1] if found else None


def _numbers(text: str) -> list[str]:
    """The numbers in ``text`` in order, a fraction as one (``_fraction``)."""
    out: list[str] = []
    at = 0
    for f in _FRACTION.finditer(text):
        value = _fraction(f)
        if value is not None:
            out += _plain(text, at, f.start())
            out.append(value)
            at = f.end()
    return out + _plain(text, at, len(text))


def _plain(text: str, start: int, end: int) -> list[str]:
    found = _NUMBER.finditer(text, start, end)  # lookbehinds see the text before ``start``
    return [_canonical(m.group(1) or "", m.group(2), m.group(3)) for m in found]


def _fraction(m: re.Match[str]) -> str | None:
    """A fraction's value, as its decimal where it has one ("\\frac{1}{2}" is "0.5", as "0.5" is),
    else reduced ("2/6" is "1/3"); None for a zero denominator, or parts too long to divide in
    little time (a model's runaway digits): two numbers, as written."""
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
    value = Fraction(top.replace(",", "")) / divisor * (-1 if signs.count("-") % 2 else 1)
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


def choice(text: str) -> str | None:
    """The choice letter A-E the text gives as its answer ("The answer is (B)." -> "B").

    The last letter marked "answer is"/"answer:", else the last marked "option"/"choice" (a
    conclusion follows the options weighed), else the last standalone capital: a first letter
    anywhere was "A" in "After a careful analysis, the answer is B" and "E" in "e.g.". A text that
    is one letter and nothing else (a reference written "b") is that letter.
    """
    alone = _ALONE.fullmatch(text)
    if alone:
        return alone.group(1).upper()
    for marked in (_ANSWER, _OPTION):
        found = [next(g for g in m.groups() if g) for m in marked.finditer(text)]
        if found:
            return found[-1].upper()
    capitals = _CAPITAL.findall(text)
    return capitals[-1] if capitals else None


def json_value(text: str) -> str | None:
    """The first JSON object or array in the text, canonicalised (key order and spacing ignored)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text[i:])
            except ValueError:
                continue
            except RecursionError:  # nested too deeply for any reading here: no value (trying on is quadratic)
                return None
            return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return None


def regex(pattern: str) -> Callable[[str], str | None]:
    compiled = re.compile(pattern)

    def extract(text: str) -> str | None:
        m = compiled.search(text)
        if not m:
            return None
        return m.group(1) if m.groups() else m.group(0)

    return extract


def extractor(spec: str) -> Callable[[str], str | None]:
    """``number``, ``choice``, ``json`` or ``regex:PATTERN`` (group 1 if the pattern has one)."""
    if spec == "number":
        return number
    if spec == "choice":
        return choice
    if spec == "json":
        return json_value
    if spec.startswith("regex:"):
        try:
            return regex(spec[6:])
        except re.error as exc:
            raise ConfigError(f"--extract regex: {exc}") from exc
    raise ConfigError(f"unknown extractor {spec!r}: number, choice, json or regex:PATTERN")
