"""AWS event-stream messages built by hand for tests (struct and zlib alone, no reader of
infertap's), as AWS documents the framing, and Bedrock ``/converse-stream`` answers made of them."""

from __future__ import annotations

import itertools
import json
import struct
import zlib
from typing import Any

JSON = "application/json"
EVENTSTREAM = "application/vnd.amazon.eventstream"


def string_header(name: str, value: str) -> bytes:
    """A header of type 7 (a string): name length, name, type, 2-byte value length, value."""
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()


def typed_header(name: str, kind: int, value: bytes) -> bytes:
    """A header of any type: ``value`` the bytes of a fixed-size one (none for the booleans, 0 and 1),
    or those a 2-byte length goes before (6: bytes, 7: a string)."""
    sized = struct.pack(">H", len(value)) if kind in (6, 7) else b""
    return bytes([len(name)]) + name.encode() + bytes([kind]) + sized + value


def message_frame(headers: dict[str, str], payload: bytes, raw_headers: bytes = b"") -> bytes:
    """One event-stream message: prelude (total and headers length, their CRC32), headers (``raw_headers``
    after the strings), payload, CRC32 of it all."""
    head = b"".join(string_header(k, v) for k, v in headers.items()) + raw_headers
    prelude = struct.pack(">II", 12 + len(head) + len(payload) + 4, len(head))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event_frame(kind: str, payload: dict[str, Any], pad: str = "abc") -> bytes:
    """An event as Bedrock sends it: its payload padded with ``p`` (letters of a random length, new each time)."""
    headers = {":event-type": kind, ":content-type": JSON, ":message-type": "event"}
    return message_frame(headers, json.dumps({**payload, "p": pad}).encode())


def exception_frame(kind: str, said: str) -> bytes:
    return message_frame(
        {":exception-type": kind, ":content-type": JSON, ":message-type": "exception"}, json.dumps({"message": said}).encode()
    )


def text_frame(i: int, text: str, pad: str = "abc") -> bytes:
    return event_frame("contentBlockDelta", {"contentBlockIndex": i, "delta": {"text": text}}, pad)


def answer_frames(*words: str, stop: str = "end_turn", latency: int = 90, pad: str = "abc") -> list[bytes]:
    """A whole answer's messages: its words as text deltas, its stop reason, usage and latency."""
    return [
        event_frame("messageStart", {"role": "assistant"}, pad),
        event_frame("contentBlockStart", {"contentBlockIndex": 0, "start": {}}, pad),
        *(text_frame(0, w, pad) for w in words),
        event_frame("contentBlockStop", {"contentBlockIndex": 0}, pad),
        event_frame("messageStop", {"stopReason": stop}, pad),
        event_frame(
            "metadata",
            {
                "usage": {"inputTokens": 21, "outputTokens": len(words), "totalTokens": 21 + len(words)},
                "metrics": {"latencyMs": latency},
            },
            pad,
        ),
    ]


def cut_at(frames: list[bytes], at: list[int]) -> list[bytes]:
    """The frames' bytes as chunks ending at the offsets ``at`` (and the end)."""
    body = b"".join(frames)
    edges = [0, *at, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def awkward(frames: list[bytes]) -> list[bytes]:
    """Chunks cut inside each message after the first: 5 bytes into its prelude, or in its payload (by turns)."""
    starts = list(itertools.accumulate(len(f) for f in frames))[:-1]
    return cut_at(frames, [s + (5 if i % 2 else len(frames[i + 1]) - 9) for i, s in enumerate(starts)])


def chunk_of_end(chunks: list[bytes], frames: list[bytes], k: int) -> int:
    """The chunk that holds frame ``k``'s last byte, from the offsets alone."""
    end = sum(map(len, frames[: k + 1]))
    return next(i for i, at in enumerate(itertools.accumulate(map(len, chunks))) if at >= end)
