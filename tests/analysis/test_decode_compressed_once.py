"""A decode undoes a compressed request body's encoding once per exchange (issue #19): the request
reading, the identity digest, the newer-request check and the mislabelled-body count each
decompressed it again, three or four times a Codex /responses request. The tables it writes are
what they were: the same as each reader decompressing on its own, and, for every body that
decodes, the same as the capture sent uncompressed but for the columns that hold its raw bytes."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import brotli
import duckdb
import pyarrow.parquet as pq
import pytest
import zstandard

from infertap.analysis import decode
from infertap.analysis.schema import TABLES
from infertap.apis import body as body_module
from infertap.capture import identity, info
from infertap.capture.identity import workload_identity
from infertap.capture.info import summarize
from tests.helpers import write_capture

HEADERS = [["content-type", "application/json"], ["authorization", "Bearer [REDACTED]"]]


def _responses(i: int) -> dict[str, Any]:
    """A Responses request as Codex sends one (its conversation as input items)."""
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"fix test {i}"}]}]
    return {"model": "gpt-5-codex", "instructions": "You are Codex.", "input": items, "stream": False, "store": False}


def _chat(i: int) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": f"explain diff {i}"}], "temperature": 0.2}


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


#: Each content-encoding's compressor, and one more body of each kind that a decode meets.
ENCODERS = {
    "zstd": lambda d: zstandard.ZstdCompressor(level=3).compress(d),
    "gzip": lambda d: gzip.compress(d, mtime=7),
    "deflate": zlib.compress,  # zlib-wrapped, as the RFC says
    "deflate-raw": _raw_deflate,  # RFC 1951 alone, as some clients send it
    "br": brotli.compress,
    "mislabelled": lambda d: d,  # plain JSON under a gzip label
    # Stopped inside its stream; last, so that the requests before keep their order among generations.
    "cut": lambda d: zstandard.ZstdCompressor(level=3).compress(d)[:-12],
}
LABEL = {"deflate-raw": "deflate", "cut": "zstd", "mislabelled": "gzip"}
WALL = 1_800_000_000.0  # both runs began at once
#: The bodies that don't decode to the JSON sent: their exchanges read otherwise than uncompressed.
UNDECODED = ("cut",)


def _exchanges(encode: bool) -> list[dict[str, Any]]:
    """A /responses and a chat request per encoding, each with an answer; ``encode``: as the client
    compressed them (else the same JSON sent plain, with no Content-Encoding)."""
    xs = []
    for n, (kind, compress) in enumerate(ENCODERS.items()):
        for path, request, answer in (
            ("/v1/responses", _responses(n), {"id": f"resp_{n}", "object": "response", "status": "completed", "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": f"done {n}"}]}]}),
            ("/v1/chat/completions", _chat(n), {"choices": [
                {"index": 0, "message": {"role": "assistant", "content": f"it renames {n}"}, "finish_reason": "stop"}]}),
        ):  # fmt: skip
            plain = json.dumps(request).encode()
            sent = compress(plain) if encode else plain
            headers = [*HEADERS, ["content-encoding", LABEL.get(kind, kind)]] if encode else HEADERS
            xs.append(
                {"id": f"{kind}-{path}", "path": path, "body": sent, "headers": headers, "chunks": [json.dumps(answer).encode()]}
            )
    return xs


def _tables(out: Path) -> dict[str, list[dict[str, Any]]]:
    return {name: pq.read_table(out / f"{name}.parquet").to_pylist() for name in TABLES}


def _decode(capture: Path, out: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """The tables of a decode of ``capture``, and how many times it undid a body's encoding."""
    undo = body_module._undo
    calls = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return undo(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(body_module, "_undo", counted)
        decode.decode_records(capture, out, "cap")
    return _tables(out), calls[0]


#: The columns that hold a request's bytes as recorded (its size on the wire) and the capture's own
#: facts (its id, its run's, its size on disk); ``newer``: said below. Its text (``requests.body``,
#: what SQL's ``body->>'$.field'`` reads) and the byte prefixes it shares are of the JSON it asks.
RAW = {"exchanges": ("request_bytes",), "requests": ("newer",), "captures": ("bytes_on_disk",)}
OWN = ("capture_id", "run_id")


def _without_raw(name: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    raw = RAW.get(name, ())
    return [{k: v for k, v in row.items() if k not in raw and k not in OWN} for row in rows]


def test_each_compressed_body_is_decoded_once_and_read_as_its_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sent = _exchanges(encode=True)
    write_capture(tmp_path / "sent", sent, run_wall=WALL)
    write_capture(tmp_path / "plain", _exchanges(encode=False), run_wall=WALL)
    tables, undone = _decode(tmp_path / "sent", tmp_path / "out", monkeypatch)

    # Once per exchange whose body is labelled with an encoding infertap undoes: never again.
    assert undone == len(sent)

    # As the same JSON sent uncompressed, its text and byte prefixes too, but its size on the wire (must match) ...
    plain, _ = _decode(tmp_path / "plain", tmp_path / "plain-out", monkeypatch)
    cut = {x["id"] for x in sent if x["id"].startswith(UNDECODED)}
    for name in TABLES:
        keep = [r for r in tables[name] if r.get("exchange_id", r.get("id")) not in cut]
        keep_plain = [r for r in plain[name] if r.get("exchange_id", r.get("id")) not in cut]
        assert _without_raw(name, keep) == _without_raw(name, keep_plain), name
    # ... and a body cut inside its stream is no request (must differ); nor is it the plain one's.
    requests = {r["exchange_id"]: r for r in tables["requests"]}
    plain_requests = {r["exchange_id"]: r for r in plain["requests"]}
    for xid in cut:
        assert not requests[xid]["generation"] and plain_requests[xid]["generation"]
    # Read decoded, a compressed request is newer than wl3; a mislabelled one was always read as JSON.
    assert {xid for xid, r in requests.items() if r["newer"]} == {x["id"] for x in sent} - cut - {
        x["id"] for x in sent if x["id"].startswith("mislabelled")
    }


def test_a_capture_s_identity_and_info_undo_each_body_once_and_are_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent = _exchanges(encode=True)
    write_capture(tmp_path / "sent", sent, run_wall=WALL)
    write_capture(tmp_path / "plain", _exchanges(encode=False), run_wall=WALL)
    undo = body_module._undo
    calls = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return undo(*args, **kwargs)

    monkeypatch.setattr(body_module, "_undo", counted)
    ours = workload_identity(tmp_path / "sent")
    assert calls[0] == len(sent)
    calls[0] = 0
    summary = summarize(tmp_path / "sent")  # infertap info: the workload's requests told, then hashed
    assert calls[0] == len(sent)
    with monkeypatch.context() as m:  # each reader undoing the encoding itself, as before
        m.setattr(identity, "plain_body", lambda record: None)
        m.setattr(info, "plain_body", lambda record: None)
        assert workload_identity(tmp_path / "sent") == ours
        assert summarize(tmp_path / "sent")["workload"] == summary["workload"]
    assert calls[0] > 4 * len(sent)
    # Must differ: the cut bodies are no request, while sent plain they are.
    plain = workload_identity(tmp_path / "plain")
    assert ours.requests == plain.requests - len([x for x in sent if x["id"].startswith(UNDECODED)])
    assert ours.workload != plain.workload


def test_decoded_in_parts_the_byte_prefixes_are_of_the_decoded_bodies_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass over the whole capture of a decode in parts keeps each body in the prefix index
    itself (decoding.py): the decoded one, as the serial decode does, not its compression."""
    from infertap.analysis import decoding

    write_capture(tmp_path / "sent", _exchanges(encode=True), run_wall=WALL)
    write_capture(tmp_path / "plain", _exchanges(encode=False), run_wall=WALL)
    serial = decoding.decode_capture(tmp_path / "sent", tmp_path / "serial", "cap")
    monkeypatch.setattr(decoding, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(decoding, "PART_EXCHANGES", 1)
    parts = decoding.decode_capture(tmp_path / "sent", tmp_path / "parts", "cap", workers=2)
    decoding.decode_capture(tmp_path / "plain", tmp_path / "plain-parts", "cap", workers=2)
    assert parts == serial
    query = "SELECT unit, exchange_id, length, shared FROM '{}/prefixes.parquet' ORDER BY ALL"
    rows = [duckdb.sql(query.format(tmp_path / d)).fetchall() for d in ("serial", "parts", "plain-parts")]
    assert rows[0] == rows[1]
    cut = {x["id"] for x in _exchanges(encode=True) if x["id"].startswith(UNDECODED)}
    decoded = [r for r in rows[1] if r[1] not in cut]
    assert decoded and decoded == [r for r in rows[2] if r[1] not in cut]  # must match: the same JSON sent plain
    assert any(r[0] == "bytes" for r in decoded)
