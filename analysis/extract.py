"""Answer extractors: what counts as "the answer" when two outputs are compared for flips."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Protocol

from infertap.errors import ConfigError

from .extract_number import number
from .math_letters import as_math

__all__ = ["Grader", "Readings", "choice", "extractor", "grader", "json_value", "number", "regex"]


class Grader(Protocol):
    """How ``--extract`` reads answers and tells whether two are one answer: compare asks it this
    for every pair (A against B) and for every side against its known answer."""

    def read(self, text: str) -> Any:
        """An answer's reading, what ``same`` takes."""

    def known(self, reference: str) -> Any:
        """A known answer's reading: a reference is written as an answer, not as a model's output."""

    def shown(self, reading: Any) -> str | None:
        """The reading as compare shows it; None where nothing was read."""

    def same(self, gold: Any, reading: Any) -> bool:
        """Whether ``reading`` is the answer ``gold`` is (gold first: a comparison may be one-sided)."""

    def decides(self, reading: Any) -> bool:
        """Whether the grader read an answer at all: one it read nothing in (no number, no option letter, no JSON
        value, no match: an empty answer, one cut short, "forty-two") is graded wrong, as benchmarks grade it, and
        counted apart per side (``known_unread_a``/``_b``), so that a grader's limits are seen: left out of the
        score, a side whose answers were cut short before their number scored as high as one that answered."""

    def timed_out(self) -> int:
        """How many readings and comparisons were given up so far (too slow): none for equality."""


class Readings:
    """A grader of readings that are one answer where they are equal strings (``number``,
    ``choice``, ``json``, ``regex:``); a known answer it reads nothing in is its own text.
    An answer it reads nothing in (``decides``: no number, "the answer is forty-two", no option letter, no JSON
    value, no match of the pattern, an empty answer, a text cut short) is wrong, and counted apart as unread."""

    def __init__(self, read: Callable[[str], str | None], math_references: bool = False) -> None:
        self.read = read
        self.math_references = math_references  # ``number``'s: a known answer is LaTeX (``as_math``)

    def known(self, reference: str) -> str:
        return self.read(as_math(reference) if self.math_references else reference) or reference

    def shown(self, reading: str | None) -> str | None:
        return reading

    def same(self, gold: str | None, reading: str | None) -> bool:
        return gold == reading

    def decides(self, reading: str | None) -> bool:
        return reading is not None

    def timed_out(self) -> int:
        return 0


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
    """The first match's group 1 (the whole match where the pattern has no group); None, nothing read, where
    nothing matched or group 1 took no part in the match."""
    compiled = re.compile(pattern)

    def extract(text: str) -> str | None:
        m = compiled.search(text)
        if not m:
            return None
        return m.group(1) if m.groups() else m.group(0)

    return extract


def extractor(spec: str) -> Callable[[str], str | None]:
    """``number``, ``choice``, ``json`` or ``regex:PATTERN`` (group 1 if the pattern has one); ``math``
    reads and compares by math-verify, through ``grader`` only."""
    if spec == "number":
        return number
    if spec == "choice":
        return choice
    if spec == "json":
        return json_value
    if spec == "math":
        raise ConfigError("math answers are compared by math-verify, not read as strings: grader('math')")
    if spec.startswith("regex:"):
        try:
            return regex(spec[6:])
        except re.error as exc:
            raise ConfigError(f"--extract regex: {exc}") from exc
    raise ConfigError(f"unknown extractor {spec!r}: number, math, choice, json or regex:PATTERN")


def grader(spec: str) -> Grader:
    """The grader of ``--extract``: ``math`` is math-verify's (the ``math`` extra), any other spec
    ``extractor``'s readings compared as strings."""
    if spec == "math":
        from .extract_math import MathVerify

        return MathVerify()
    return Readings(extractor(spec), math_references=spec == "number")
