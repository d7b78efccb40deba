"""An exchange whose client hung up before it was handed every chunk read from the engine
(``delivered_chunks``): analysed as its client got it. Recorded by the recording proxy itself, with a
client that stopped reading and hung up while [DONE] waited for room in its connection."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from pathlib import Path

from click.testing import CliRunner

from infertap.analysis import Analysis
from infertap.analysis.summaries import summarize
from infertap.capture.reader import CaptureReader
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli

HI = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
LATE = b'data: {"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": "stop"}]}\n\n'
DONE = b"data: [DONE]\n\n"
BODY = b'{"model": "m", "stream": true, "messages": [{"role": "user", "content": "hello"}]}'


def _recorded(out: Path) -> None:
    """Two streamed chats through the recording proxy: one read to its end, one whose client stopped
    reading after "hi" and hung up while the rest (" there" and [DONE], one chunk) waited for room."""
    from infertap.proxy.app import RecordingProxy, build_app
    from infertap.proxy.wire import ProxyHttpProtocol
    from tests.fake_upstream import ServerThread, sse_upstream

    written = threading.Semaphore(0)

    upstream = sse_upstream([HI, LATE + DONE])

    async def app(scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/abandoned/v1/chat/completions":
            return await proxy(scope, receive, send)
        scope = {**scope, "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions"}

        async def full_client(message):
            if message.get("body", b"").endswith(DONE):
                while server.server.server_state.connections:  # as a wait for room would, until the loss
                    await asyncio.sleep(0.001)
            await send(message)

        await proxy(scope, receive, full_client)

    with CaptureWriter(out, recorder={"kind": "proxy", "upstream": "fake"}) as writer:
        with ServerThread(upstream) as up:
            proxy = build_app(RecordingProxy(up.url, writer, on_exchange=lambda _: written.release()))
            with ServerThread(app, http=ProxyHttpProtocol) as server:
                port = int(server.url.rsplit(":", 1)[1])
                for path in ("/v1/chat/completions", "/abandoned/v1/chat/completions"):
                    with socket.create_connection(("127.0.0.1", port)) as client:
                        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(BODY)}\r\n\r\n"  # keep-alive: its close is its hang-up
                        client.sendall(head.encode() + BODY)
                        got = b""
                        while DONE not in got and HI not in got if path.startswith("/abandoned") else DONE not in got:
                            piece = client.recv(65536)
                            if not piece:
                                break
                            got += piece
                    assert written.acquire(timeout=10)


def test_an_answer_whose_end_marker_never_reached_its_client_is_not_ok(tmp_path: Path) -> None:
    out = tmp_path / "cap"
    _recorded(out)
    whole, abandoned = [r for r in CaptureReader(out).records() if r["type"] == "exchange"]
    assert abandoned["end"] == "client_disconnected" and abandoned["delivered_chunks"] == 1
    assert abandoned["chunks"][-1].endswith(DONE)  # read from the engine, kept, never handed on
    assert "delivered_chunks" not in whole

    with Analysis([out]) as a:
        rows = a.query(
            'SELECT m.exchange_id, m.ok, m."end", x.stream_done, x.n_chunks, x.undelivered_chunks, m.output_tokens '
            "FROM metrics m JOIN exchanges x USING (capture, exchange_id) ORDER BY x.seq"
        ).records()
        wire = a.query("SELECT exchange_id, count(*) AS n FROM chunks GROUP BY ALL ORDER BY ALL").records()
    # Read to its end: ok. Abandoned before [DONE] reached it: not ok, though the engine sent [DONE].
    assert [(r["ok"], r["end"], r["stream_done"], r["undelivered_chunks"]) for r in rows] == [
        (True, "complete", True, None),
        (False, "client_disconnected", False, 1),
    ]
    assert [r["output_tokens"] for r in rows] == [2, 1]  # the answer the client got: "hi" alone
    assert sorted(r["n"] for r in wire) == [2, 2]  # every chunk the engine sent is still in the chunks table

    result = CliRunner().invoke(cli, ["stats", str(out), "--json", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.output)["groups"]
    assert (group["requests"], group["ok"], group["errors"]) == (2, 1, 1)

    # compare reads the answer the client got: "hi", and no end marker; the whole one "hi there".
    assert (summarize(abandoned).text, summarize(abandoned).done) == ("hi", False)
    assert (summarize(whole).text, summarize(whole).done) == ("hi there", True)
