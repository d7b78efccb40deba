"""An encoded response decoded as its readers decode it: a gzip body of several members (what
``gzip`` writes when it appends, what a server sends that compresses each flush on its own) read to
its end, not to the end of its first member; bytes after the streams that no stream reads leave
the body undecoded rather than cut short."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

from infertap.apis import decoded_chunks, read_response
from tests import sdk_shapes

ANSWER = json.dumps(
    sdk_shapes.chat_completion(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello there"}, "finish_reason": "stop"}],
        }
    )
).encode()


def _record(chunks: list[bytes], encoding: str = "gzip") -> dict[str, Any]:
    return {
        "path": "/v1/chat/completions",
        "request_body": json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        "response_headers": [["content-type", "application/json"], ["content-encoding", encoding]],
        "chunks": chunks,
        "chunk_ns": [10 * (i + 1) for i in range(len(chunks))],
    }


def test_a_gzip_body_of_several_members_is_read_to_its_end() -> None:
    members = gzip.compress(b"") + gzip.compress(ANSWER[:30]) + b"\0\0" + gzip.compress(ANSWER[30:])
    for chunks in ([members], [members[:25], members[25:60], members[60:]], [bytes([b]) for b in members]):
        record = _record(chunks)
        pieces = decoded_chunks(record)
        assert pieces is not None and b"".join(pieces) == ANSWER and len(pieces) == len(chunks)
        assert gzip.decompress(members) == ANSWER  # as every gzip reader reads it
        assert read_response(record).text == "hello there"


def test_bytes_after_the_streams_that_no_stream_reads_leave_the_body_undecoded() -> None:
    for encoding, body in (("gzip", gzip.compress(ANSWER) + b"not gzip"), ("deflate", zlib.compress(ANSWER) + b"xx")):
        record = _record([body], encoding)
        assert decoded_chunks(record) is None
        assert read_response(record).error == "cannot decode the response's content-encoding"


def test_a_torn_gzip_stream_is_read_as_far_as_it_came() -> None:
    body = gzip.compress(ANSWER * 50)
    pieces = decoded_chunks(_record([body[: len(body) // 2]]))
    assert pieces is not None and (ANSWER * 50).startswith(b"".join(pieces)) and pieces[0]


def test_a_zstd_or_brotli_answer_is_read_as_the_same_answer_plain() -> None:
    """zstd and br were read as their compressed bytes: no answer at all, so two engines' different
    answers behind one such gateway compared as two unreadable ones."""
    import brotli
    import zstandard

    other = ANSWER.replace(b"hello there", b"goodbye now")
    frames = zstandard.ZstdCompressor().compress(ANSWER[:40]) + zstandard.ZstdCompressor().compress(ANSWER[40:])
    for encoding, body in (("zstd", frames), ("br", brotli.compress(ANSWER))):
        for chunks in ([body], [body[:7], body[7:]], [bytes([b]) for b in body]):
            record = _record(chunks, encoding)
            pieces = decoded_chunks(record)
            assert pieces is not None and b"".join(pieces) == ANSWER and len(pieces) == len(chunks), encoding
            assert read_response(record).text == read_response(_record([ANSWER], "identity")).text == "hello there"
        encode = zstandard.ZstdCompressor().compress if encoding == "zstd" else brotli.compress
        assert read_response(_record([encode(other)], encoding)).text == "goodbye now"
        assert decoded_chunks(_record([b"not " + encoding.encode()], encoding)) is None  # no such stream: said
