"""AWS's binary event-stream framing (``application/vnd.amazon.eventstream``), read strictly.

Bedrock's ``/converse-stream`` answers in it. Each message is a 12-byte prelude (its total length,
its headers' length, the CRC32 of those 8 bytes), its headers (a name of 1-255 bytes, a type byte, a
value), its payload, and the CRC32 of everything before it. botocore parses it, but is no dependency
of infertap; this reads only what a recorded body needs, and checks both CRCs.

A message that does not check (a CRC that differs, lengths no message can have, headers that overrun
their length) ends the reading there: the messages before it are read, the rest is named, never
guessed at, since a length read from a damaged prelude would place every later message wrongly. A
message still incomplete at the body's end (a stream cut mid-message) is named the same way.
"""

from __future__ import annotations

import bisect
import itertools
import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Any

#: The prelude (total length, headers length, prelude CRC) and the message CRC after the payload.
PRELUDE, TRAILER = 12, 4
#: The largest message and headers section the format allows (AWS's limits: 16 MiB and 128 KiB).
MOST_MESSAGE, MOST_HEADERS = 16 * 1024 * 1024, 128 * 1024
#: Header value types by their type byte: their fixed sizes (None: 2-byte length, then the bytes).
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 6: None, 7: None, 8: 8, 9: 16}
_INTS = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


@dataclass(slots=True)
class Message:
    chunk: int  # index of the chunk in which the message's last byte arrived
    headers: dict[str, Any]
    payload: bytes


@dataclass(slots=True)
class Framed:
    """A body read as messages: those that checked, and where and why reading stopped short of its end."""

    messages: list[Message]
    cut: str | None = None  # why the bytes after the last message are no message (None: none are left)
    rest: bytes = b""  # those bytes, as sent


class _Bad(Exception):
    """A message that does not check: its words say why."""


def read_messages(pieces: list[bytes]) -> Framed:
    """The messages of a body received as ``pieces`` (its chunks, in order), each with the chunk
    that completed it."""
    body = b"".join(pieces)
    ends = list(itertools.accumulate(map(len, pieces)))  # the body offset each chunk ends at
    out: list[Message] = []
    pos = 0
    while pos < len(body):
        if len(body) - pos < PRELUDE:
            return Framed(
                out, f"message {len(out) + 1} torn: {len(body) - pos} bytes of its {PRELUDE}-byte prelude came", body[pos:]
            )
        try:
            size = _checked_size(body, pos)
            if pos + size > len(body):
                return Framed(out, f"message {len(out) + 1} torn: {len(body) - pos} of its {size} bytes came", body[pos:])
            message = body[pos : pos + size]
            (crc,) = struct.unpack_from(">I", message, size - TRAILER)
            if zlib.crc32(message[:-TRAILER]) != crc:
                raise _Bad("its message CRC does not match its bytes")
            (header_size,) = struct.unpack_from(">I", message, 4)
            headers = _headers(message[PRELUDE : PRELUDE + header_size])
        except _Bad as exc:
            return Framed(out, f"message {len(out) + 1} at byte {pos} is damaged: {exc}", body[pos:])
        chunk = bisect.bisect_left(ends, pos + size)  # the first chunk ending at or past its last byte
        out.append(Message(chunk, headers, message[PRELUDE + header_size : -TRAILER]))
        pos += size
    return Framed(out)


def messages_after(tail: bytes) -> Framed:
    """The whole messages of a body's ``tail`` that starts mid-message (a cut answer's kept end): read
    from the first offset where a whole message checks (both its CRCs, so a prelude's bytes met inside
    a payload by chance are not taken for one); none where no whole message does."""
    for pos in range(max(len(tail) - PRELUDE - TRAILER + 1, 0)):
        try:
            size = _checked_size(tail, pos)
        except _Bad:
            continue
        message = tail[pos : pos + size]
        if len(message) == size and zlib.crc32(message[:-TRAILER]) == struct.unpack_from(">I", message, size - TRAILER)[0]:
            return read_messages([tail[pos:]])
    return Framed([])


def _checked_size(body: bytes, pos: int) -> int:
    """The total length of the message whose whole prelude is at ``pos``, once it checks; ``_Bad``
    where it does not."""
    size, header_size, crc = struct.unpack_from(">III", body, pos)
    if zlib.crc32(body[pos : pos + 8]) != crc:
        raise _Bad("its prelude CRC does not match its lengths")
    if not PRELUDE + TRAILER <= size <= MOST_MESSAGE or header_size > min(MOST_HEADERS, size - PRELUDE - TRAILER):
        raise _Bad(f"a length of {size} bytes with {header_size} of headers is no message's")
    return size


def _headers(data: bytes) -> dict[str, Any]:
    """A message's headers by name: strings and byte arrays as they are, integers, booleans, a
    timestamp as its milliseconds, a UUID as its text."""
    headers: dict[str, Any] = {}
    pos = 0
    while pos < len(data):
        length = data[pos]
        name_end = pos + 1 + length
        if length == 0 or name_end >= len(data):
            raise _Bad("a header's name overruns its headers")
        name = data[pos + 1 : name_end].decode("utf-8", errors="replace")
        kind, pos = data[name_end], name_end + 1
        if kind not in _FIXED:
            raise _Bad(f"header {name!r} has an unknown value type {kind}")
        fixed = _FIXED[kind]
        if fixed is None:
            if pos + 2 > len(data):
                raise _Bad(f"header {name!r}'s value overruns its headers")
            (fixed,) = struct.unpack_from(">H", data, pos)
            pos += 2
        raw = data[pos : pos + fixed]
        if len(raw) < fixed:
            raise _Bad(f"header {name!r}'s value overruns its headers")
        pos += fixed
        headers[name] = _value(kind, raw)
    return headers


def _value(kind: int, raw: bytes) -> Any:
    if kind in (0, 1):
        return kind == 0
    if kind in _INTS:
        return struct.unpack(_INTS[kind], raw)[0]
    if kind == 7:
        return raw.decode("utf-8", errors="replace")
    if kind == 9:
        return str(uuid.UUID(bytes=raw))
    return raw  # 6: bytes
