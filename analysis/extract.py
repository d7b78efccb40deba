"""Answer extractors: what counts as "the answer" when two outputs are compared for flips."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from infertap.errors import ConfigError

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
_CHOICE = re.compile(r"(?:answer(?: is)?|option|choice)?\s*[:(]?\s*\b([A-E])\b[).:]?", re.IGNORECASE)


def number(text: str) -> str | None:
    """The last number in the text, commas dropped ("17 + 25 = 42" -> "42")."""
    found = _NUMBER.findall(text)
    if not found:
        return None
    value = found[-1].replace(",", "")
    return value.rstrip("0").rstrip(".") if "." in value else value


def choice(text: str) -> str | None:
    """The first standalone choice letter A-E ("The answer is (B)." -> "B")."""
    m = _CHOICE.search(text)
    return m.group(1).upper() if m else None


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
