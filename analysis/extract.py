"""Answer extractors: what counts as "the answer" when two outputs are compared for flips."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from infertap.errors import ConfigError

from .extract_number import number

__all__ = ["choice", "extractor", "json_value", "number", "regex"]

# A letter that is marked as the answer: "answer is B", "Answer: (c)", "answer is option **D**".
# Lowercase counts here only where nothing follows it in the sentence ("the answer is a bit" is no A).
_LETTER = r"(?:\(\s*([A-Ea-e])\s*\)|\*\*([A-Ea-e])\*\*|([A-E])(?![\w'-])|([a-e])(?=[).,;!*]|\s*$))"
_ANSWER = re.compile(r"\b(?i:answer)\b(?:\s+is)?\s*[:=]?\s*(?:(?i:option|choice)\s+)?" + _LETTER)
_OPTION = re.compile(r"\b(?i:option|choice)\s*[:=]?\s*" + _LETTER)
_ALONE = re.compile(r"\W*([A-Ea-e])\W*")
_CAPITAL = re.compile(r"(?<![\w'-])([A-E])(?![\w'-])")


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
