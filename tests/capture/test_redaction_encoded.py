"""A credential repeated in a gzip or deflate response: searched decoded, as every reader decodes
it, through the proxy (off its event loop), the mitmproxy addon and the flow-file import."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from infertap.apis import decoded_chunks
from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED, Redactor
from infertap.capture.writer import CaptureWriter
from infertap.proxy.app import RecordingProxy, build_app
from tests.fake_upstream import ServerThread, bomb, lifespan, read_body
from tests.helpers import decompressed_bytes

KEY = "sk-live-encoded-0123456789abcdef"
ERROR = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}).encode()


def _gzip_chunks(parts: list[bytes]) -> list[bytes]:
    """``parts`` gzip-encoded as a streaming server sends them: each flushed into a chunk of its own."""
    out = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
    chunks = [out.compress(p) + out.flush(zlib.Z_SYNC_FLUSH) for p in parts]
    chunks[-1] += out.flush()
    return chunks


def _record(chunks: list[bytes], encoding: str) -> dict[str, Any]:
    return {
        "chunks": chunks,
        "chunk_ns": [10 * (i + 1) for i in range(len(chunks))],
        "response_headers": [["content-type", "application/json"], ["content-encoding", encoding], ["content-length", "99"]],
        "error": None,
    }


def _body(record: dict[str, Any]) -> bytes:
    pieces = decoded_chunks(record)
    assert pieces is not None
    return b"".join(pieces)


def test_a_gzip_response_repeating_the_key_is_stored_decoded_without_it_chunk_by_chunk() -> None:
    parts = [b'data: {"a": 1}\n\n', b'data: {"error": "bad key ' + KEY.encode() + b'"}\n\n', b"data: [DONE]\n\n"]
    record = _record(_gzip_chunks(parts), "gzip")
    Redactor.echoes(record, {KEY})
    assert KEY.encode() not in b"".join(record["chunks"]) and KEY.encode() not in _body(record)
    assert record["chunks"] == [parts[0], parts[1].replace(KEY.encode(), REDACTED.encode()), parts[2]]
    assert record["chunk_ns"] == [10, 20, 30]  # each chunk's share of the body at its own time
    size = str(sum(map(len, record["chunks"])))
    assert record["response_headers"] == [["content-type", "application/json"], ["content-length", size]]


def test_a_deflate_response_repeating_the_key_is_stored_decoded_without_it() -> None:
    record = _record([zlib.compress(ERROR)], "deflate")
    Redactor.echoes(record, {KEY})
    assert record["chunks"] == [ERROR.replace(KEY.encode(), REDACTED.encode())]
    assert "content-encoding" not in [n for n, _ in record["response_headers"]]


def test_a_gzip_response_of_several_members_loses_the_key_in_a_later_one() -> None:
    """The key in the second member of a gzip body (every gzip reader reads them all) is found."""
    members = [gzip.compress(b'{"error": '), gzip.compress(ERROR), gzip.compress(b"}")]
    record = _record([members[0] + members[1][:10], members[1][10:] + members[2]], "gzip")
    Redactor.echoes(record, {KEY})
    assert KEY.encode() not in b"".join(record["chunks"])
    assert _body(record) == b'{"error": ' + ERROR.replace(KEY.encode(), REDACTED.encode()) + b"}"


def _zstd_chunks(parts: list[bytes]) -> list[bytes]:
    import zstandard

    out = zstandard.ZstdCompressor().compressobj()
    chunks = [out.compress(p) + out.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) for p in parts]
    chunks[-1] += out.flush()
    return chunks


def _br_chunks(parts: list[bytes]) -> list[bytes]:
    import brotli

    out = brotli.Compressor()
    chunks = [out.process(p) + out.flush() for p in parts]
    chunks[-1] += out.finish()
    return chunks


@pytest.mark.parametrize(("encoding", "encode"), [("zstd", _zstd_chunks), ("br", _br_chunks)])
def test_a_zstd_or_brotli_response_repeating_the_key_is_stored_decoded_without_it(encoding, encode) -> None:
    """Only gzip and deflate were searched decoded: a zstd or brotli response quoting the key was
    stored as it came, the key inside its compressed bytes, which any reader undoes."""
    parts = [b'data: {"a": 1}\n\n', b'data: {"error": "bad key ' + KEY.encode() + b'"}\n\n', b"data: [DONE]\n\n"]
    record = _record(encode(parts), encoding)
    Redactor.echoes(record, {KEY})
    assert record["chunks"] == [parts[0], parts[1].replace(KEY.encode(), REDACTED.encode()), parts[2]]
    assert record["chunk_ns"] == [10, 20, 30]
    assert "content-encoding" not in [n for n, _ in record["response_headers"]]
    # A stream cut before its end is searched as far as it goes, as a reader reads it.
    cut = _record(encode(parts)[:2], encoding)
    Redactor.echoes(cut, {KEY})
    assert cut["chunks"] == [parts[0], parts[1].replace(KEY.encode(), REDACTED.encode())]
    # Without the key: the exact bytes as they came.
    kept = _record(encode(parts[:1] + parts[2:]), encoding)
    before = list(kept["chunks"])
    Redactor.echoes(kept, {KEY})
    assert kept["chunks"] == before and ["content-encoding", encoding] in kept["response_headers"]


def test_an_encoded_response_without_the_key_keeps_its_exact_bytes() -> None:
    for encoding, chunks in [("gzip", _gzip_chunks([b"fine", b" answer"])), ("br", [b"\x1b\x03" + KEY.encode()])]:
        record = _record(list(chunks), encoding)
        before = json.dumps(record, default=repr)
        Redactor.echoes(record, {"sk-other-key-99999999"})
        assert json.dumps(record, default=repr) == before, encoding


class _Watched(Redactor):
    """The project's Redactor, noting the thread each response was searched on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []

    def echoes(self, record: Any, found: set[str]) -> None:  # type: ignore[override]
        self.threads.append(threading.current_thread())
        Redactor.echoes(record, found)


async def _gzip_upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An engine that answers a bad key with a gzip error quoting it, and anything else gzip too."""
    if scope["type"] == "lifespan":
        return await lifespan(receive, send)
    await read_body(receive)
    auth = dict(scope["headers"]).get(b"authorization", b"").partition(b" ")[2]
    data = gzip.compress(ERROR if auth else b'{"ok": true}')
    headers = [
        (b"content-type", b"application/json"),
        (b"content-encoding", b"gzip"),
        (b"content-length", str(len(data)).encode()),
    ]
    await send({"type": "http.response.start", "status": 401 if auth else 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def test_the_proxy_stores_a_gzip_error_without_the_key_it_quotes_searched_off_its_loop(tmp_path: Path) -> None:
    writer = CaptureWriter(tmp_path / "cap", recorder={"kind": "test"}).open()
    redactor = _Watched()
    with ServerThread(_gzip_upstream) as up, ServerThread(build_app(RecordingProxy(up.url, writer, redactor=redactor))) as proxy:
        bad = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "m"}, headers={"Authorization": f"Bearer {KEY}"})
        fine = httpx.post(f"{proxy.url}/v1/chat/completions", json={"model": "m"}, headers={"X-Api-Key": "sk-other-key-1234567"})
    writer.close()
    assert bad.status_code == 401 and KEY in bad.text and fine.status_code == 200  # the client got them as sent
    assert KEY.encode() not in decompressed_bytes(tmp_path / "cap")
    first, second = sorted(CaptureReader(tmp_path / "cap").exchanges(), key=lambda x: x["seq"])
    assert _body(first) == ERROR.replace(KEY.encode(), REDACTED.encode())
    assert "content-encoding" not in [n for n, _ in first["response_headers"]]
    assert second["chunks"] == [gzip.compress(b'{"ok": true}')] or gzip.decompress(b"".join(second["chunks"])) == b'{"ok": true}'
    assert ["content-encoding", "gzip"] in second["response_headers"]  # no key in it: its bytes as they came
    assert len(redactor.threads) == 2 and proxy.thread not in redactor.threads  # never on the proxy's event loop


def _flow(raw: bytes, encoding: str = "gzip") -> Any:
    from mitmproxy.test import tflow

    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/chat/completions"
    flow.request.headers["authorization"] = f"Bearer {KEY}"
    flow.response.status_code = 401
    flow.response.headers["content-encoding"] = encoding
    flow.response.raw_content = raw
    return flow


def test_a_flow_file_import_stores_a_gzip_error_without_the_key_it_quotes(tmp_path: Path) -> None:
    from mitmproxy import io

    from infertap.mitm.importer import import_file

    with open(tmp_path / "flows", "wb") as f:
        io.FlowWriter(f).add(_flow(gzip.compress(ERROR)))
    assert import_file(tmp_path / "flows", tmp_path / "cap")["kept"] == 1
    assert KEY.encode() not in decompressed_bytes(tmp_path / "cap")
    (x,) = CaptureReader(tmp_path / "cap").exchanges()
    assert _body(x) == ERROR.replace(KEY.encode(), REDACTED.encode())


@pytest.mark.filterwarnings("ignore:tagMap is deprecated", "ignore:typeMap is deprecated")  # ldap3, by taddons
def test_the_mitm_addon_stores_a_streamed_gzip_error_without_the_key_it_quotes(tmp_path: Path) -> None:
    from mitmproxy.test import taddons

    from infertap.mitm.addon import InfertapCapture

    addon = InfertapCapture()
    chunks = _gzip_chunks([ERROR[:20], ERROR[20:]])
    flow = _flow(b"".join(chunks))

    async def run() -> None:
        addon.requestheaders(flow)  # the hooks in mitmproxy's order
        addon.request(flow)
        addon.responseheaders(flow)
        for chunk in chunks:  # as mitmproxy streams them through
            flow.response.stream(chunk)  # type: ignore[operator, union-attr]
        addon.response(flow)
        await addon.done()

    with taddons.context(addon) as tctx:
        tctx.configure(addon, infertap_out=str(tmp_path / "cap"), infertap_telemetry=False)
        asyncio.run(run())
    assert KEY.encode() not in decompressed_bytes(tmp_path / "cap")
    (x,) = CaptureReader(tmp_path / "cap").exchanges()
    assert _body(x) == ERROR.replace(KEY.encode(), REDACTED.encode()) and len(x["chunks"]) == len(x["chunk_ns"]) == 2


def test_a_replay_stores_the_targets_gzip_error_without_its_key_searched_off_its_loop(tmp_path: Path, monkeypatch: Any) -> None:
    """A replay's target quoting the key the replay sent, gzip-encoded: kept out of the replay's
    capture as the recorder keeps it out, and decompressed off the replay's event loop."""
    from infertap.replay import ReplayConfig, Transforms, run_replay
    from tests.helpers import write_capture

    threads: list[threading.Thread] = []
    echoes = Redactor.echoes

    def watched(record: Any, found: set[str]) -> None:
        threads.append(threading.current_thread())
        echoes(record, found)

    monkeypatch.setattr(Redactor, "echoes", staticmethod(watched))
    write_capture(tmp_path / "src", [{"offset_s": 0}, {"offset_s": 0.01}])
    with ServerThread(_gzip_upstream) as up:
        transforms = Transforms(headers={"Authorization": f"Bearer {KEY}"})
        summary = run_replay(ReplayConfig(tmp_path / "src", up.url, tmp_path / "out", probe=False, transforms=transforms))
    assert summary["sent"] == 2
    assert KEY.encode() not in decompressed_bytes(tmp_path / "out")
    xs = list(CaptureReader(tmp_path / "out").exchanges())
    assert len(xs) == 2 and all(_body(x) == ERROR.replace(KEY.encode(), REDACTED.encode()) for x in xs)
    assert len(threads) == 2 and threading.main_thread() not in threads  # never on the replay's event loop


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_a_response_that_decodes_past_the_bound_keeps_its_bytes_and_says_it_was_not_searched(encoding, monkeypatch) -> None:
    """A compressed response past ``apis.body.DECODED_LIMIT`` was left undecoded, its bytes kept,
    with nothing in the record to say that a credential it repeats was never looked for."""
    from infertap.apis import body

    monkeypatch.setattr(body, "DECODED_LIMIT", 4 << 20)
    record = _record([bomb(encoding, 5)], encoding)
    before = list(record["chunks"])
    Redactor.echoes(record, {KEY})
    assert record["chunks"] == before and ["content-encoding", encoding] in record["response_headers"]
    assert record["response_body_unsearched"] == f"{encoding} decodes to more than {4 << 20} bytes"
    within = _record([bomb(encoding, 3)], encoding)  # within the bound: searched, nothing to say
    Redactor.echoes(within, {KEY})
    assert "response_body_unsearched" not in within


def test_the_recorder_marks_a_compression_bomb_it_could_not_search(fake, record) -> None:
    """End to end: a zstd body of a few KiB that inflates to 65 MiB, from a request with a key."""
    app, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    r = httpx.post(rec.url + "/bomb", json={"encoding": "zstd", "mib": 65}, headers={"authorization": f"Bearer {KEY}"})
    assert r.status_code == 200
    assert rec.stop() == 0
    (x,) = rec.exchanges()
    assert x["response_body_unsearched"] == "zstd decodes to more than 67108864 bytes"
    assert b"".join(x["chunks"]) == bomb("zstd", 65)  # kept as it came
