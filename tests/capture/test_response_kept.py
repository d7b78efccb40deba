"""``ResponseKept.last``: the chunks a hang-up's end-marker check reads, kept or past the limit, and
none claimed where the chunk before the hang-up is held by neither."""

from __future__ import annotations

from infertap.apis import ended_by_marker
from infertap.capture.records import ResponseKept


def _kept(chunks: list[bytes], limit: int | None) -> ResponseKept:
    kept = ResponseKept([], [], limit)
    for i, chunk in enumerate(chunks):
        kept.add(i, chunk)
    return kept


def test_the_last_chunks_come_from_the_head_or_the_tail_past_the_limit() -> None:
    chunks = [b"data: %d\n\n" % i for i in range(30)] + [b"data: [DONE]\n\n"]
    whole, cut = _kept(chunks, None), _kept(chunks, 40)
    assert cut.chunks == [*chunks[:4], chunks[4][:4]] and whole.chunks == chunks  # the first 40 bytes
    for kept in (whole, cut):
        assert kept.last() == chunks[-2:] and ended_by_marker(kept.last())  # the end, cut or not
        assert kept.last(30) == chunks[28:30] and not ended_by_marker(kept.last(30))  # gone one before it
        assert kept.last(2) == chunks[:2] and kept.last(0) == []


def test_a_chunk_before_the_hang_up_held_by_neither_claims_no_end() -> None:
    chunks = [b"data: [DONE]\n\n"] * 40  # an end marker in every chunk: only what is held can say so
    cut = _kept(chunks, 40)
    assert len(cut.chunks) == 3 and len(cut.chunks[2]) == 12 and len(cut.tail) < 30  # 2 chunks and 12 bytes
    assert cut.last(20) == [] and not ended_by_marker(cut.last(20))
    assert cut.last(3) == [] and cut.last(2) == chunks[:2] and cut.last() == chunks[-2:]  # held: read


def test_the_chunk_that_crosses_the_limit_keeps_its_first_bytes_up_to_it() -> None:
    """A one-chunk answer over the limit (a whole JSON body) kept nothing: its head is its first
    ``limit`` bytes, marked cut; the whole chunk stays the last one read. One within it, whole."""
    body = b'{"id": "chatcmpl-1", "choices": [' + b"x" * 100 + b"]}"
    cut, whole = _kept([body], 40), _kept([body], len(body))
    assert cut.chunks == [body[:40]] and cut.chunk_ns == [0] and cut.last() == [body]
    assert whole.chunks == [body] and whole.last() == [body]
    record: dict = {}
    cut.mark(record)  # type: ignore[arg-type]
    assert record == {
        "response_body_size": len(body),
        "response_body_chunks": 1,
        "response_last_ns": 0,
        "response_tail": body[40:],
    }
    whole.mark(record := {})  # type: ignore[arg-type]
    assert record == {}
    streamed = _kept([b"a" * 30, b"b" * 30, b"c" * 30], 40)  # the second crosses it: cut; the third not kept
    assert streamed.chunks == [b"a" * 30, b"b" * 10] and streamed.last() == [b"b" * 30, b"c" * 30]


def test_the_tail_past_the_head_is_kept_in_the_record_bounded_in_bytes() -> None:
    """``response_tail``: the body's last bytes past the head, ``RESPONSE_TAIL_BYTES`` at most,
    however large one chunk (only its end is copied) or however many small ones came."""
    from infertap.capture.records import RESPONSE_TAIL_BYTES

    huge = bytes(range(256)) * (3 * RESPONSE_TAIL_BYTES // 256)  # one chunk of three bounds
    record: dict = {}
    _kept([b"h" * 30, huge], 40).mark(record)  # type: ignore[arg-type]
    assert record["response_tail"] == huge[-RESPONSE_TAIL_BYTES:]
    small = [b"data: %d\n\n" % i for i in range(20_000)]
    _kept(small, 40).mark(record := {})  # type: ignore[arg-type]
    assert record["response_tail"] == b"".join(small)[-RESPONSE_TAIL_BYTES:]
    short = [b"a" * 30, b"b" * 30, b"c" * 30]  # past the limit by less than the bound: all of it past the head
    _kept(short, 40).mark(record := {})  # type: ignore[arg-type]
    assert record["response_tail"] == b"b" * 20 + b"c" * 30
    # An encoded body's end can't be read (nor searched for echoed credentials) without its start: none.
    _kept(short, 40).mark(record := {"response_headers": [["Content-Encoding", "gzip"]]})  # type: ignore[arg-type]
    assert "response_tail" not in record and record["response_body_size"] == 90


def test_chunks_past_the_limit_are_held_by_their_end_alone_bounded_in_bytes() -> None:
    """Eight chunks of 4 MiB past the limit were held whole until the exchange ended (32 MiB, one
    answer): only the end ``ended_by_marker`` reads of each is held, and the marker is still read."""
    from infertap.apis.body import MARKER_WINDOW
    from infertap.capture.records import MARKER_BYTES, RESPONSE_TAIL_BYTES

    assert MARKER_BYTES == MARKER_WINDOW  # what is held is what is read
    big = 4 << 20
    ended = b"y" * (big - 200) + b'\nevent: response.completed\ndata: {"type":"response.completed"}\n\n'.rjust(200, b"z")
    chunks = [b"h" * 30, *(bytes([i]) * big for i in range(7)), ended]
    kept = _kept(chunks, 40)
    held = sum(map(len, kept.chunks)) + sum(map(len, kept.tail)) + sum(map(len, kept.end))
    assert held <= 40 + 8 * MARKER_BYTES + 2 * RESPONSE_TAIL_BYTES < 8 * big // 4
    assert ended_by_marker(kept.last()) and kept.last()[-1] == ended[-MARKER_BYTES:]
    small = [b"data: %d\n\n" % i for i in range(12)]
    kept = _kept(small, 40)
    assert all(a is b for a, b in zip(kept.tail, small[-8:], strict=True))  # a small chunk held as it is, uncopied
