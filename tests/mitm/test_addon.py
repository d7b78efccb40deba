"""The mitmproxy addon's hand-over to the capture: a response still searched for the request's
credentials (on a worker thread) when mitmproxy stops is written before the capture closes, and one
whose search fails is written without its body, never lost and never unscrubbed."""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import hooks
from mitmproxy.proxy.layers import http as layers
from mitmproxy.test import tflow

from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED, Redactor
from infertap.mitm.addon import InfertapCapture
from tests import sdk_shapes
from tests.helpers import decompressed_bytes

pytestmark = pytest.mark.filterwarnings(
    "ignore:tagMap is deprecated:DeprecationWarning", "ignore:typeMap is deprecated:DeprecationWarning"
)

KEY = "sk-live-addon-0123456789abcdef"
ERROR = json.dumps(sdk_shapes.openai_error({"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}})).encode()  # fmt: skip


def _flow() -> Any:
    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/chat/completions"
    flow.request.headers["authorization"] = f"Bearer {KEY}"
    flow.response.status_code = 401
    flow.response.headers["content-encoding"] = "gzip"
    flow.response.raw_content = gzip.compress(ERROR)
    return flow


async def _record_then_stop(out: Path, searched: threading.Event | None = None) -> None:
    """One flow through the addon as mitmproxy runs it (its hooks, then ``done``), the search of its
    response held until ``done`` has begun when ``searched`` is given."""
    from mitmproxy.test import taddons  # imports every addon of mitmproxy's, ldap3's warnings too

    addon = InfertapCapture()
    with taddons.context(addon) as tctx:
        tctx.configure(addon, infertap_out=str(out), infertap_telemetry=False)
        flow = _flow()
        for hook in (layers.HttpRequestHeadersHook, layers.HttpRequestHook, layers.HttpResponseHeadersHook):
            await tctx.master.addons.trigger_event(hook(flow))
        # mitmproxy runs a flow's hooks in its connection's task and ``done`` in its own, at shutdown
        responded = asyncio.ensure_future(tctx.master.addons.trigger_event(layers.HttpResponseHook(flow)))
        await asyncio.sleep(0)
        stopping = asyncio.ensure_future(tctx.master.addons.trigger_event(hooks.DoneHook()))
        for _ in range(10):  # done runs as far as it goes while the search is held
            await asyncio.sleep(0)
        if searched is not None:
            searched.set()
        await asyncio.gather(responded, stopping)


def test_done_writes_a_response_still_searched_before_the_capture_closes(tmp_path: Path, monkeypatch: Any) -> None:
    searched = threading.Event()
    echoes = Redactor.echoes

    def held(record: Any, found: set[str]) -> None:  # the real search, once ``done`` has begun
        searched.wait(30)
        echoes(record, found)

    monkeypatch.setattr(Redactor, "echoes", staticmethod(held))
    asyncio.run(_record_then_stop(tmp_path / "cap", searched))
    (x,) = CaptureReader(tmp_path / "cap").exchanges()
    assert b"".join(x["chunks"]) == ERROR.replace(KEY.encode(), REDACTED.encode())
    assert KEY.encode() not in decompressed_bytes(tmp_path / "cap")


def test_a_response_whose_search_fails_is_recorded_without_its_body(tmp_path: Path, monkeypatch: Any) -> None:
    def broken(record: Any, found: set[str]) -> None:
        raise MemoryError("the search failed")

    monkeypatch.setattr(Redactor, "echoes", staticmethod(broken))
    asyncio.run(_record_then_stop(tmp_path / "cap"))
    (x,) = CaptureReader(tmp_path / "cap").exchanges()
    assert x["status"] == 401 and x["chunks"] == [] and x["chunk_ns"] == []
    assert KEY.encode() not in decompressed_bytes(tmp_path / "cap")


def test_a_websocket_key_offered_as_a_subprotocol_is_redacted_and_the_other_subprotocols_kept(tmp_path: Path) -> None:
    """OpenAI's Realtime (and Responses WebSocket mode) take a browser's key as a subprotocol,
    ``openai-insecure-api-key.<key>``: only that element is redacted, through the addon."""
    key = "sk-WSPROTO-SECRET-999"
    offered = f"realtime, openai-insecure-api-key.{key}, openai-beta.realtime-v1"

    async def run() -> None:
        from mitmproxy.test import taddons

        addon = InfertapCapture()
        with taddons.context(addon) as tctx:
            tctx.configure(addon, infertap_out=str(tmp_path / "cap"), infertap_telemetry=False)
            flow = tflow.tflow(resp=True)
            flow.request.path = "/v1/responses"  # Responses WebSocket mode
            flow.request.headers["upgrade"] = "websocket"
            flow.request.headers["sec-websocket-protocol"] = offered
            flow.response.status_code = 101
            flow.response.headers["sec-websocket-protocol"] = "realtime"
            flow.response.raw_content = f"bad key {key}".encode()
            for hook in (
                layers.HttpRequestHeadersHook,
                layers.HttpRequestHook,
                layers.HttpResponseHeadersHook,
                layers.HttpResponseHook,
            ):
                await tctx.master.addons.trigger_event(hook(flow))
            await tctx.master.addons.trigger_event(hooks.DoneHook())

    asyncio.run(run())
    assert key.encode() not in decompressed_bytes(tmp_path / "cap")
    (x,) = CaptureReader(tmp_path / "cap").exchanges()
    protocol = [v for n, v in x["request_headers"] if n == "sec-websocket-protocol"]
    assert protocol == [f"realtime, openai-insecure-api-key.{REDACTED}, openai-beta.realtime-v1"]
    assert ["sec-websocket-protocol", "realtime"] in x["response_headers"]
    assert x["chunks"] == [f"bad key {REDACTED}".encode()]
