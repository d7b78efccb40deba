"""A request body the client sent compressed (``Content-Encoding: gzip``, deflate, zstd, br): its
credentials found decoded, through the real recorder, the mitmproxy addon and a flow-file import;
its exact bytes kept where it holds none, and a body that can't be searched said to be."""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import brotli
import httpx
import pytest
import zstandard

from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED, Redactor
from tests.helpers import decompressed_bytes

KEY = "GZIPBODY-SECRET-333-abcdef"
BODY = json.dumps({"model": "m", "api_key": KEY, "messages": [{"role": "user", "content": "hi"}]}).encode()
ENCODE = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
    "br": brotli.compress,
}


def _assert_decoded_and_redacted(x: dict[str, Any]) -> None:
    assert x["request_body"] == BODY.replace(KEY.encode(), REDACTED.encode())
    names = [n.lower() for n, _ in x["request_headers"]]
    assert "content-encoding" not in names
    assert ["content-length", str(len(x["request_body"]))] in [[n.lower(), v] for n, v in x["request_headers"]]


@pytest.mark.parametrize("encoding", sorted(ENCODE))
def test_the_recorder_stores_an_encoded_body_that_holds_a_key_decoded_without_it(fake, record, encoding):
    app, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    sent = ENCODE[encoding](BODY)
    headers = {"content-type": "application/json", "content-encoding": encoding}
    assert httpx.post(rec.url + "/echo", content=sent, headers=headers).status_code == 200
    assert app.requests[-1]["body"] == sent  # the upstream got the bytes as sent
    assert rec.stop() == 0
    assert KEY.encode() not in decompressed_bytes(rec.out)
    (x,) = rec.exchanges()
    _assert_decoded_and_redacted(x)


def test_an_encoded_body_without_a_key_keeps_its_exact_bytes_and_one_that_wont_decode_says_so(fake, record):
    app, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    clean = gzip.compress(b'{"model": "m", "messages": []}')
    assert httpx.post(rec.url + "/echo", content=clean, headers={"content-encoding": "gzip"}).status_code == 200
    assert httpx.post(rec.url + "/echo", content=b"\x00not brotli", headers={"content-encoding": "br"}).status_code == 200
    assert rec.stop() == 0
    kept, broken = rec.exchanges()
    assert kept["request_body"] == clean and ["content-encoding", "gzip"] in kept["request_headers"]
    assert "request_body_unsearched" not in kept
    assert broken["request_body"] == b"\x00not brotli" and broken["request_body_unsearched"].startswith("br does not decode")


def test_a_body_that_inflates_past_the_bound_is_not_decoded_but_said_unsearched():
    record = {"request_headers": [["content-encoding", "gzip"]], "request_body": gzip.compress(b"\0" * (65 * 2**20))}
    Redactor().request(record, set())
    assert record["request_body_unsearched"] == "gzip decodes to more than 67108864 bytes"


def test_a_brotli_bomb_is_decoded_a_step_at_a_time_to_the_bound_and_said_unsearched(monkeypatch: Any) -> None:
    """A br body was decoded in one call bounded only by the limit: the decoder grew its buffer past
    it (79 MiB for 64) and held the GIL through much of it. It goes a step at a time, as gzip's."""
    from infertap.apis import body  # the one decoder: a request's, a response's

    compressor = brotli.Compressor(quality=5)
    zeros = b"\0" * (1 << 20)
    bomb = b"".join(compressor.process(zeros) for _ in range(64)) + compressor.finish()
    assert len(bomb) < 1024  # 64 MiB of body
    limit = 8 << 20
    monkeypatch.setattr(body, "DECODED_LIMIT", limit)
    monkeypatch.setattr(body, "STEP", 256 << 10)
    outputs: list[int] = []
    real = brotli.Decompressor

    class Watched:  # the real decoder, each output's size noted
        def __init__(self) -> None:
            self.decoder = real()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.decoder, name)

        def process(self, data: bytes, **limits: int) -> bytes:
            out: bytes = self.decoder.process(data, **limits)
            outputs.append(len(out))
            return out

    monkeypatch.setattr(brotli, "Decompressor", Watched)
    record = {"request_headers": [["content-encoding", "br"]], "request_body": bomb}
    Redactor().request(record, set())
    assert record["request_body_unsearched"] == f"br decodes to more than {limit} bytes"
    assert record["request_body"] == bomb  # kept as sent
    assert max(outputs) <= 2 * body.STEP  # a step at a time (the decoder rounds its buffer up)
    assert limit < sum(outputs) <= limit + 2 * body.STEP  # decoded no further than the bound and a step


def test_a_key_from_an_encoded_body_is_scrubbed_where_the_response_repeats_it():
    found: set[str] = set()
    record = {
        "request_headers": [["Content-Encoding", "gzip"]],
        "request_body": gzip.compress(BODY),
        "chunks": [b"bad request: " + BODY],
        "response_headers": [],
        "error": None,
    }
    Redactor().request(record, found)
    Redactor.echoes(record, found)
    assert KEY in found and KEY.encode() not in repr(record).encode()
    assert record["request_headers"] == []


def _flow(encoding: str) -> Any:
    from mitmproxy.test import tflow

    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/chat/completions"
    flow.request.headers["content-encoding"] = encoding
    flow.request.headers["content-length"] = "1"
    flow.request.raw_content = ENCODE[encoding](BODY)
    return flow


@pytest.mark.filterwarnings("ignore:tagMap is deprecated", "ignore:typeMap is deprecated")  # ldap3, by taddons
def test_the_mitm_addon_and_the_flow_import_store_an_encoded_body_decoded_without_its_key(tmp_path: Path) -> None:
    from mitmproxy import hooks, io
    from mitmproxy.proxy.layers import http as layers
    from mitmproxy.test import taddons

    from infertap.mitm.addon import InfertapCapture
    from infertap.mitm.importer import import_file

    async def run() -> None:
        addon = InfertapCapture()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, infertap_out=str(tmp_path / "mitm"), infertap_telemetry=False)
            flow = _flow("gzip")
            for hook in (
                layers.HttpRequestHeadersHook,
                layers.HttpRequestHook,
                layers.HttpResponseHeadersHook,
                layers.HttpResponseHook,
            ):
                await tctx.master.addons.trigger_event(hook(flow))
            await tctx.master.addons.trigger_event(hooks.DoneHook())

    asyncio.run(run())
    with open(tmp_path / "flows", "wb") as f:
        io.FlowWriter(f).add(_flow("deflate"))
    import_file(tmp_path / "flows", tmp_path / "imported", all_paths=True)
    for out in ("mitm", "imported"):
        assert KEY.encode() not in decompressed_bytes(tmp_path / out), out
        (x,) = CaptureReader(tmp_path / out).exchanges()
        _assert_decoded_and_redacted(x)
