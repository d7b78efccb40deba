from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import zstandard

from infertap.capture.reader import CaptureReader
from infertap.capture.records import new_exchange


def decompressed_bytes(capture: Path) -> bytes:
    """Every byte a capture holds, decompressed: what a secret must never appear in."""
    out = []
    for segment in CaptureReader(capture).segments:
        with open(segment, "rb") as f:
            out.append(zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read())
    return b"".join(out)


def reseal_head(data: bytearray, start: int) -> None:
    """Recompute a block head's own checksum after editing its fields (as a writer of that version would)."""
    from infertap.capture.framing import HEAD_SIZE

    struct.pack_into("<I", data, start + HEAD_SIZE - 4, zlib.crc32(bytes(data[start + 8 : start + HEAD_SIZE - 4])))


#: A generation request infertap refused (a body over ``--max-body-mb``), for ``write_capture``: never sent.
REFUSED_OVER_LIMIT = {"body": b"", "status": 413, "end": "refused", "chunks": [b'{"error": "too large"}'],
                      "fields": {"request_body_size": 9000, "proxy_generated": True}}  # fmt: skip


def write_capture(
    path: Path,
    exchanges: list[dict],
    *,
    enrichments: list[dict] | None = None,
    wall0: float = 1_800_000_000.0,
    run_wall: float | None = None,
    recorder: dict | None = None,
) -> list[dict]:
    """A capture built by hand: each exchange dict gives what differs (offset_s, body, chunks, ...);
    ``run_wall``: the run's start (its header's wall, which offsets count from; default now);
    ``recorder``: its header's (default a proxy's)."""
    import json as _json

    from infertap.capture.writer import CaptureWriter

    records = []
    recorder = recorder or {"kind": "proxy", "upstream": "http://127.0.0.1:9"}
    with CaptureWriter(path, recorder=recorder, wall=run_wall) as writer:
        for i, x in enumerate(exchanges):
            offset_ns = int(x.get("offset_s", i) * 1e9)
            body = x.get("body", {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
            raw = body if isinstance(body, bytes) else _json.dumps(body).encode()
            chunks = x.get("chunks", [b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "a%d"}}]}' % i])
            record = new_exchange(
                id=x.get("id", f"src-{i}"),
                seq=i + 1,
                session=x.get("session"),
                wall=wall0 + offset_ns / 1e9,
                start_ns=offset_ns,
                sent_ns=offset_ns + x.get("wait_ns", 1000),  # from its arrival to its hand-off
                client="127.0.0.1:1",
                method=x.get("method", "POST"),
                path=x.get("path", "/v1/chat/completions"),
                query=x.get("query", ""),
                http_version="1.1",
                request_headers=x.get("headers", [["content-type", "application/json"], ["authorization", "Bearer [REDACTED]"]]),
                request_body=raw,
                status=x.get("status", 200),
                response_headers=[["content-type", x.get("content_type", "application/json")], *x.get("response_headers", [])],
                headers_ns=1_000_000,
                chunk_ns=x.get("chunk_ns", [2_000_000] * len(chunks)),
                chunks=chunks,
                end_ns=x.get("duration_ns", 3_000_000),
                end=x.get("end", "complete"),
                error=None,
                upstream="http://127.0.0.1:9",
            )
            if "parent_id" in x:  # as a replay records the turn it continued
                record["parent_id"] = x["parent_id"]
            if "source_id" in x:  # as a replay records the exchange it replayed
                record["source_id"] = x["source_id"]
            record.update(x.get("fields", {}))  # any other field, as a recorder writes it (request_body_size, ...)
            writer.write(record)
            records.append(record)
        for e in enrichments or ():
            writer.write({"type": "enrichment", **e})
    return records


def pair_captures(tmp_path: Path, pairs: dict[str, Any]) -> tuple[Path, Path]:
    """Captures A and B of the same requests, each pair's answers side by side: ``pairs`` maps a
    name to ((path, body, content type), A's chunks, B's chunks)."""
    for side in (0, 1):
        write_capture(
            tmp_path / "ab"[side],
            [
                {"path": path, "body": {**body, "tag": name}, "chunks": chunks[side], "content_type": ctype}
                for name, ((path, body, ctype), *chunks) in pairs.items()
            ],
        )
    return tmp_path / "a", tmp_path / "b"


def enrich_with_a_dead_engine(capture: Path) -> None:
    """What a recorder or replay whose probe failed writes: enrichments counting nothing, appended
    by the project's own enricher to a real capture (nothing listens on its engine's port)."""
    from infertap.capture.writer import CaptureWriter
    from infertap.engines.enrich import Enricher

    exchanges = list(CaptureReader(capture).exchanges())
    with CaptureWriter(capture, recorder={"kind": "enrich", "engine": "http://127.0.0.1:31997"}) as writer:
        enricher = Enricher("http://127.0.0.1:31997", writer.write, timeout=2.0).start()
        for record in exchanges:
            enricher.submit(record)
        enricher.close()
    assert enricher.engine is None and enricher.enriched == len(exchanges), enricher.__dict__


def embeddings_request(
    text: str, at: float, *, model: str = "e5-small", dimensions: int = 4, path: str = "/v1/embeddings"
) -> dict:
    """An exchange for ``write_capture``: what embeddings.create(model=..., input=[text], dimensions=...) sends, at ``at`` s, and its answer."""
    answer = {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.5] * dimensions}]}
    return {
        "path": path,
        "body": {"model": model, "input": [text], "dimensions": dimensions},
        "chunks": [json.dumps(answer).encode()],
        "offset_s": at,
    }


def image_request(prompt: str, at: float) -> dict[str, Any]:
    """An exchange for ``write_capture``: what images.generate(model="gpt-image-1", prompt=...) sends, at ``at``
    s into the run, and an answer of one image."""
    return {
        "path": "/v1/images/generations",
        "body": {"model": "gpt-image-1", "prompt": prompt, "size": "1024x1024"},
        "chunks": [b'{"created": 1, "data": [{"b64_json": "iVBORw0KGgo="}]}'],
        "offset_s": at,
    }
