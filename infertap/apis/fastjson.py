"""``loads``: ``json.loads``, faster, with the same answer for every input.

msgspec parses the JSON it accepts about 2-3x faster than the standard library (integers of any
size included, and floats rounded the same way); what it refuses (``NaN``, ``Infinity``, numbers
beyond a double, lone surrogate escapes, other encodings than UTF-8) goes to ``json.loads``, which
then accepts or refuses it as it always did, its numbers rounded as msgspec rounds them and one
beyond a double kept with its text (``ExactFloat``). Run once per streamed event of every response read.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import msgspec

_decode = msgspec.json.Decoder().decode

#: What a msgspec decoder raises on what is not JSON of its type, nested too deeply included
#: (msgspec and json.loads both raise ``RecursionError`` there, not an error of their own).
NOT_JSON = (msgspec.MsgspecError, ValueError, RecursionError)


class ExactFloat(float):
    """A JSON number whose float is not its value (``1e400`` is infinite, ``1e-400`` zero), with the
    text it was read from: two such numbers of one float are not one number. A float to all else."""

    text: str

    @classmethod
    def of(cls, text: str) -> float:
        """The number ``text`` as a float where the float is its exact value, else as an ``ExactFloat``."""
        value = float(text)
        if math.isfinite(value) and Decimal(text) == Decimal(repr(value)):
            return value
        exact = cls(value)
        exact.text = text
        return exact

    def exact(self) -> str:
        """The number's exact value, written one way for each value (``1E+400``; ``NaN`` as itself)."""
        value = Decimal(self.text)
        return str(value) if not value.is_finite() else format(value.normalize(), "E")

    def __reduce__(self) -> tuple[Any, ...]:
        return ExactFloat.of, (self.text,)


def loads(data: str | bytes) -> Any:
    """The JSON value of ``data``, as ``json.loads`` reads it; raises ``ValueError`` as it does, and
    where the value is nested too deeply for either parser (``json.loads`` would raise
    ``RecursionError``): what no parser here can take apart is no JSON to a reader of traffic."""
    try:
        try:
            return _decode(data)
        except (msgspec.MsgspecError, ValueError):
            # What msgspec refused may be one value of many: the rest read as msgspec reads them.
            return json.loads(data, parse_float=_rounded, parse_constant=ExactFloat.of)
    except RecursionError:
        raise ValueError("JSON nested too deeply to be read") from None


def _rounded(text: str) -> float:
    """A number as msgspec reads it (the nearest double, ``0.10000000000000001`` as ``0.1``; below
    the least, 0), and as an ``ExactFloat`` where it can't (``1e400``): a body that msgspec refuses
    for one value (a lone surrogate elsewhere) reads as it would have, not exactly throughout."""
    value = float(text)
    return value if math.isfinite(value) else ExactFloat.of(text)


def loads_exact(data: str | bytes) -> Any:
    """``loads`` with every number kept at its exact value: a float that is not its text's value
    (``0.10000000000000001``, digits past a double, which ``loads`` rounds as ``json.loads`` does)
    is an ``ExactFloat``. For payloads whose numbers are compared as sent (tool calls' arguments
    sent as objects); slower than ``loads``, so only for those."""
    try:
        return json.loads(data, parse_float=ExactFloat.of, parse_constant=ExactFloat.of)
    except RecursionError:
        raise ValueError("JSON nested too deeply to be read") from None


def utf8(data: bytes) -> bool:
    """Whether ``data`` is UTF-8, as ``json.loads`` requires of bytes: what msgspec keeps as raw JSON
    or skips is not looked inside, so a reader that decodes a body only in part checks it first."""
    if data.isascii():
        return True
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


__all__ = ["NOT_JSON", "ExactFloat", "loads", "loads_exact", "utf8"]
