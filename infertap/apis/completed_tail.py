"""The usage and status of a Responses stream's last event read back from its end, exactly: a cut
answer's kept tail (``response_tail``) may hold only the end of a ``response.completed`` that
restates a long answer whole, and its usage, status and output's calls are what is read of it
(``apis.kept.tail_usage``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .responses import client_acts

__all__ = ["CompletedEnd", "completed_end"]

_DONE = (b"data: [DONE]", b"data:[DONE]")


@dataclass(frozen=True, slots=True)
class CompletedEnd:
    """What the end of a terminal event says: each None where the tail started before it."""

    usage: dict[str, Any]
    status: str | None  # the response's status, else the event type's (response.incomplete: incomplete)
    reason: str | None  # incomplete_details.reason, where ``details_read``
    details_read: bool  # incomplete_details was in the tail (null or not)
    calls: bool | None  # whether the output holds a call its client must make (client_acts), where read whole


def completed_end(tail: bytes) -> CompletedEnd | None:
    """The ``usage`` of the ``response`` in the Responses stream's last event, read back from its end
    where the tail holds only that end (the event starts before it: the answer restated whole), and
    of its ``status``, ``incomplete_details`` and ``output`` what the tail holds whole.

    Read backwards, exactly: a string's bounds are its quotes not escaped (an even number of
    backslashes before them: outside a string JSON has none), a container's its matching bracket, so
    each value after ``usage`` is skipped whole, whatever text it holds. The event's members after
    its ``response`` may only be ``sequence_number`` and ``type`` (a terminal one: completed,
    incomplete, failed, cancelled), as every server writes them; ``response`` is its only object.
    Within it, its own members are read back to ``"usage"`` and on, as far as the tail goes: one
    nested in an output item, or in a string, is never reached (each is inside a value skipped
    whole). A ``data: [DONE]`` after the event (some servers and gateways send one) is no part of
    it. Only a stream that ended whole is read so (``end`` complete): its last event is its terminal
    one. None where anything else is met, or the tail starts before the usage: the usage written
    before the output (or cut), a tail of another event."""
    line = tail.rstrip(b" \t\r\n")
    for done in _DONE:
        if line.endswith(done):
            line = line[: -len(done)].rstrip(b" \t\r\n")
    i = len(line) - 1
    if i < 0 or line[i] != _CLOSE_OBJECT:
        return None
    i -= 1
    status = None
    try:
        while True:  # the event's members after its response, then the response
            i = _back_space(line, i)
            if line[i] == _CLOSE_OBJECT:
                break
            key, value, i = _back_member(line, i)
            if key == "type":
                kind = json.loads(value)
                if kind not in _RESPONSE_ENDS:
                    return None
                status = kind.removeprefix("response.")
            elif key != "sequence_number" or value[:1] in (b"{", b"["):
                return None
            if line[i] != _COMMA:
                return None  # the event began with no response object
            i -= 1
        i -= 1
    except (IndexError, ValueError):  # the tail started first (an index below 0), or no JSON there
        return None
    return _response_end(line, i, status)


def _response_end(line: bytes, i: int, status: str | None) -> CompletedEnd | None:
    """The response's members whose values end at ``i`` and before, last first, up to where the tail
    starts or the response does; None where no usage is among them, or no JSON is there."""
    usage: dict[str, Any] | None = None
    reason, details_read, calls = None, False, None
    try:
        while True:
            i = _back_space(line, i)
            key, value, i = _back_member(line, i)
            if key == "usage":
                usage = json.loads(value)
                if not isinstance(usage, dict) or not isinstance(usage.get("output_tokens"), int):
                    return None
            elif key == "status" and isinstance(said := json.loads(value), str):
                status = said
            elif key == "incomplete_details":
                details = json.loads(value)
                reason, details_read = details.get("reason") if isinstance(details, dict) else None, True
            elif key == "output" and isinstance(items := json.loads(value), list):
                calls = any(isinstance(item, dict) and client_acts(item) for item in items)
            if line[i] != _COMMA:
                break  # the response began
            i -= 1
    except IndexError:  # the tail started within a member: what came after it was read
        pass
    except ValueError:
        return None
    if usage is None:
        return None
    return CompletedEnd(usage, status, reason if isinstance(reason, str) else None, details_read, calls)


_RESPONSE_ENDS = ("response.completed", "response.incomplete", "response.failed", "response.cancelled")
_CLOSE_OBJECT, _COMMA, _QUOTE, _BACKSLASH = b"}"[0], b","[0], b'"'[0], b"\\"[0]
_OPENS, _CLOSES = b"{[", b"}]"


def _back_space(line: bytes, i: int) -> int:
    while i >= 0 and line[i] in b" \t\r\n":
        i -= 1
    if i < 0:
        raise IndexError  # not a negative index: that would read the line's end
    return i


def _back_member(line: bytes, i: int) -> tuple[str, bytes, int]:
    """The member of an object whose value ends at ``i``: its key, its value's bytes, and where the
    byte before the key is (a comma, or the object's opening brace)."""
    start = _back_value(line, i)
    value = line[start : i + 1]
    i = _back_space(line, start - 1)
    if line[i] != b":"[0]:
        raise ValueError("no member")
    i = _back_space(line, i - 1)
    if line[i] != _QUOTE:
        raise ValueError("no key")
    opening = _back_string(line, i)
    key = json.loads(line[opening : i + 1])
    return key, value, _back_space(line, opening - 1)


def _back_value(line: bytes, i: int) -> int:
    """Where the JSON value that ends at ``i`` starts."""
    c = line[i]
    if c == _QUOTE:
        return _back_string(line, i)
    if c in _CLOSES:
        depth = 0
        while True:
            c = line[i]
            if c == _QUOTE:
                i = _back_string(line, i)
            elif c in _CLOSES:
                depth += 1
            elif c in _OPENS:
                depth -= 1
                if depth == 0:
                    return i
            i -= 1
            if i < 0:
                raise IndexError
    while i > 0 and line[i - 1] not in b",:[{ \t\r\n":  # a number, true, false or null
        i -= 1
    if i == 0:
        raise IndexError  # it may go on before the tail
    return i


def _back_string(line: bytes, i: int) -> int:
    """Where the string whose closing quote is at ``i`` opens: the quote before it not escaped."""
    while True:
        i = line.rfind(b'"', 0, i)
        if i < 0:
            raise IndexError
        slashes = i
        while slashes > 0 and line[slashes - 1] == _BACKSLASH:
            slashes -= 1
        if slashes == 0:
            raise IndexError  # the tail starts at the quote or within its backslashes: escaped or not is unknown
        if (i - slashes) % 2 == 0:
            return i
