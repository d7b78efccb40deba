"""The recording proxy against a fake upstream: load, faults, limits and redaction end to end."""

from __future__ import annotations

import asyncio
import base64
import json
import time

import httpx
import pytest

from tests import sdk_shapes
from tests.helpers import decompressed_bytes


def _chat(tag: str, **extra: object) -> dict[str, object]:
    return {"model": "fake", "messages": [{"role": "user", "content": tag}], "stream": True, "tag": tag, **extra}


def test_64_concurrent_streams_all_recorded_none_mixed(fake, record):
    app, url = fake
    rec = record(url)

    async def one(client: httpx.AsyncClient, tag: str) -> bytes:
        async with client.stream("POST", f"{rec.url}/v1/chat/completions", json=_chat(tag, n_chunks=40, pace_ms=2)) as r:
            assert r.status_code == 200
            return b"".join([c async for c in r.aiter_raw()])

    async def main() -> list[bytes]:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as client:
            return await asyncio.gather(*(one(client, f"s{i}") for i in range(64)))

    received = asyncio.run(main())
    rec.stop()
    exchanges = rec.exchanges()
    assert len(exchanges) == 64
    by_tag = {json.loads(x["request_body"])["tag"]: x for x in exchanges}
    assert sorted(by_tag) == sorted(f"s{i}" for i in range(64))
    for i, body in enumerate(received):
        x = by_tag[f"s{i}"]
        assert b"".join(x["chunks"]) == body
        assert body.count(f"s{i}:".encode()) == 40
        assert x["end"] == "complete" and x["status"] == 200
        assert x["chunk_ns"] == sorted(x["chunk_ns"])
        assert len({c for c in x["chunks"] if b"chatcmpl-" in c and f'chatcmpl-s{i}"'.encode() not in c}) == 0
    assert len({x["seq"] for x in exchanges}) == 64
    assert len({x["id"] for x in exchanges}) == 64


def test_upstream_refused_gives_502_json_and_is_recorded(record):
    from infertap.launch import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    rec = record(dead)
    r = httpx.post(f"{rec.url}/v1/chat/completions", json=_chat("a"), timeout=10)
    assert r.status_code == 502
    err = r.json()["error"]
    assert err["type"] == "upstream_unreachable" and dead in err["message"]
    rec.stop()
    (x,) = rec.exchanges()
    assert x["end"] == "upstream_error" and x["status"] == 502 and x["proxy_generated"]
    assert "cannot connect" in x["error"] and "Connection refused" in x["error"]
    assert json.loads(x["request_body"])["tag"] == "a"


def test_upstream_hang_before_headers_gives_504(fake, record):
    app, url = fake
    rec = record(url, "--read-timeout", "0.5")
    r = httpx.post(f"{rec.url}/hang-headers", json={"x": 1}, timeout=10)
    assert r.status_code == 504
    assert r.json()["error"]["type"] == "upstream_timeout"
    rec.stop()
    (x,) = rec.exchanges()
    assert x["end"] == "timeout" and x["status"] == 504


def test_upstream_hang_mid_stream_cuts_the_stream_and_records_a_timeout(fake, record):
    app, url = fake
    rec = record(url, "--read-timeout", "0.5")
    got = b""
    with pytest.raises(httpx.RemoteProtocolError):
        with httpx.stream("POST", f"{rec.url}/hang-body", json={"tag": "h"}, timeout=10) as r:
            assert r.status_code == 200
            for c in r.iter_raw():
                got += c
    assert b"first" in got
    rec.stop()
    (x,) = rec.exchanges()
    assert x["end"] == "timeout" and x["status"] == 200
    assert b"".join(x["chunks"]) == got


def test_upstream_reset_mid_stream_reaches_the_client_and_keeps_partial_chunks(fake, record):
    app, url = fake
    rec = record(url)
    got = b""
    with pytest.raises(httpx.RemoteProtocolError):
        with httpx.stream("POST", f"{rec.url}/reset", json={"tag": "r"}, timeout=10) as r:
            for c in r.iter_raw():
                got += c
    assert got.count(b"partial") == 3
    rec.stop()
    (x,) = rec.exchanges()
    assert x["end"] == "upstream_error"
    assert b"".join(x["chunks"]) == got


def test_client_disconnect_cancels_upstream_and_is_recorded(fake, record):
    app, url = fake
    rec = record(url)
    got = b""
    with httpx.stream("POST", f"{rec.url}/slow", json={"tag": "gone"}, timeout=10) as r:
        for c in r.iter_raw():
            got += c
            if got.count(b"tick") >= 3:
                break
    deadline = time.monotonic() + 10
    while "gone" not in app.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "gone" in app.cancelled, "the upstream stream kept going after the client left"
    rec.stop()
    (x,) = rec.exchanges()
    assert x["end"] == "client_disconnected"
    assert b"".join(x["chunks"]).startswith(got)


def test_oversized_body_gets_413_and_is_recorded_as_refused(fake, record):
    app, url = fake
    rec = record(url, "--max-body-mb", "0.001")
    big = {"tag": "big", "pad": "x" * 5000}
    r = httpx.post(f"{rec.url}/v1/chat/completions", json=big, timeout=10)
    assert r.status_code == 413
    assert sdk_shapes.openai_error(r.json())["error"]["type"] == "request_too_large"  # OpenAI's shape, whole
    # Chunked upload (no content-length) is caught while reading.
    r2 = httpx.post(f"{rec.url}/v1/chat/completions", content=iter([b"y" * 600, b"y" * 600]), timeout=10)
    assert r2.status_code == 413
    rec.stop()
    xs = rec.exchanges()
    assert [x["end"] for x in xs] == ["refused", "refused"]
    assert xs[0]["request_body_size"] > 1024 and xs[1]["request_body_size"] > 1024
    assert [r for r in app.requests if r["path"] == "/v1/chat/completions"] == [], "a refused request must not reach the upstream"


def test_every_method_path_and_query_is_forwarded_exactly(fake, record):
    app, url = fake
    rec = record(url)
    body = b'{"odd": "\xc3\xa9\\u0000", "n": 1e400}  '  # not re-serialised: bytes pass as they are
    r = httpx.request("PATCH", f"{rec.url}/echo?a=1&b=%20x&b=2", content=body, headers={"X-Custom": "v"}, timeout=10)
    echoed = r.json()
    assert base64.b64decode(echoed["body_b64"]) == body
    assert echoed["query"] == "a=1&b=%20x&b=2"
    assert ["x-custom", "v"] in echoed["headers"]
    r404 = httpx.get(f"{rec.url}/engine/native/route", timeout=10)
    assert r404.status_code == 404
    rec.stop()
    x, y = rec.exchanges()
    assert (x["method"], x["path"], x["query"], x["request_body"]) == ("PATCH", "/echo", "a=1&b=%20x&b=2", body)
    assert (y["method"], y["path"], y["status"]) == ("GET", "/engine/native/route", 404)


def test_secrets_reach_the_upstream_but_never_the_capture(fake, record):
    app, url = fake
    rec = record(url, "--redact-header", "X-Org-Secret")
    secrets = {
        "Authorization": "Bearer sk-live-AAAA1111",
        "X-Api-Key": "xak-BBBB2222",
        "api-key": "azure-CCCC3333",
        "Cookie": "sid=DDDD4444",
        "X-Org-Secret": "org-EEEE5555",
    }
    r = httpx.post(f"{rec.url}/status/200?key=FFFF6666&model=m&token=GGGG7777", json={"a": 1}, headers=secrets, timeout=10)
    assert r.status_code == 200
    (seen,) = [r for r in app.requests if r["path"] == "/status/200"]
    upstream_saw = {n.decode().lower(): v.decode() for n, v in seen["headers"]}
    for name, value in secrets.items():
        assert upstream_saw[name.lower()] == value
    assert seen["query"] == b"key=FFFF6666&model=m&token=GGGG7777"
    rec.stop()
    raw = decompressed_bytes(rec.out)
    for needle in ["AAAA1111", "BBBB2222", "CCCC3333", "DDDD4444", "EEEE5555", "FFFF6666", "GGGG7777", "upstream-secret-cookie"]:
        assert needle.encode() not in raw, needle
    (x,) = rec.exchanges()
    headers = {n.lower(): v for n, v in x["request_headers"]}
    assert headers["authorization"] == "Bearer [REDACTED]"
    assert headers["x-org-secret"] == "[REDACTED]"
    assert x["query"] == "key=[REDACTED]&model=m&token=[REDACTED]"
    assert ["set-cookie", "[REDACTED]"] in x["response_headers"]
    assert ["set-cookie", "session=upstream-secret-cookie"] not in x["response_headers"]
    log = rec.proc.log_tail(1_000_000)
    assert "AAAA1111" not in log


def test_a_large_body_with_a_credential_is_redacted_and_recorded_before_shutdown(fake, record):
    """A body over OFFLOAD_BYTES is searched on a worker thread (the loop keeps streaming): still
    redacted, its credential kept out of the response that repeats it, and written before a stop
    right after its response."""
    app, url = fake
    rec = record(url)
    key = "sk-large-HHHH8888hhhh"
    messages = [{"role": "user", "content": "word " * 200}] * 1500  # about 1.5 MiB
    body = json.dumps({"model": "m", "messages": messages, "api_key": key}).encode()
    r = httpx.post(f"{rec.url}/echo-body", content=body, headers={"content-type": "application/json"}, timeout=60)
    assert r.status_code == 400 and key.encode() in r.content  # the client gets the engine's answer as sent
    rec.stop()
    assert key not in repr(rec.records())  # (its frames use the run's dictionary: read through the reader)
    (x,) = rec.exchanges()
    kept = json.loads(x["request_body"])
    assert kept["api_key"] == "[REDACTED]" and kept["messages"] == messages
    assert b"[REDACTED]" in b"".join(x["chunks"])


def test_a_client_that_hangs_up_right_after_done_leaves_a_complete_exchange(record):
    """An SDK stops reading at [DONE]; the upstream's close comes later. That is a complete answer."""
    import asyncio as _asyncio

    from tests.fake_upstream import ServerThread

    async def lingering(scope, receive, send):  # [DONE], then the upstream takes its time to close
        if scope["type"] == "lifespan":
            from tests.fake_upstream import lifespan

            return await lifespan(receive, send)
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send(
            {
                "type": "http.response.body",
                "body": b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n',
                "more_body": True,
            }
        )
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
        await _asyncio.sleep(2)
        await send({"type": "http.response.body", "body": b""})

    asked = [{"role": "user", "content": "hello"}]
    with ServerThread(lingering) as server:
        rec = record(server.url, "--no-probe")
        got = b""
        with httpx.stream("POST", f"{rec.url}/v1/chat/completions", json={"stream": True, "messages": asked}, timeout=10) as r:
            for chunk in r.iter_raw():
                got += chunk
                if got.rstrip().endswith(b"[DONE]"):
                    break  # hang up, as the openai SDK does
        # The agent's next turn, at once: the answer it continues had reached it whole.
        following = [*asked, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "more"}]
        with httpx.stream(
            "POST", f"{rec.url}/v1/chat/completions", json={"stream": True, "messages": following}, timeout=10
        ) as r:
            for chunk in r.iter_raw():
                if chunk.rstrip().endswith(b"[DONE]"):
                    break
        rec.stop()
    first, second = rec.exchanges()
    assert first["end"] == "complete" and first["closed_after_end"] is True
    assert b"".join(first["chunks"]) == got
    # It ended when the client had it all, not when the proxy gave up waiting for the upstream's close:
    # the next turn, sent right after, continues it (it was 'still in flight' and began a session).
    from infertap.analysis import Analysis

    with Analysis([rec.out], cache_dir=rec.out.parent / "cache") as a:
        parents = dict(a.sql("SELECT exchange_id, parent_id FROM turns").fetchall())
    assert parents[second["id"]] == first["id"]


def test_what_the_upstream_sends_after_the_client_hung_up_past_done_is_kept_and_marked_undelivered(record):
    """An upstream that sends a usage chunk after [DONE] and then ends, while the client, gone at
    [DONE], never gets it: the chunk is kept (the engine sent it) and marked as never delivered,
    and the exchange ends at the hang-up, as when the proxy stops waiting for the upstream's end."""
    import asyncio as _asyncio

    from tests.fake_upstream import ServerThread, lifespan

    released: list[_asyncio.Event] = []

    async def trailing(scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        while (await receive()).get("more_body"):
            pass
        if not released:
            released.append(_asyncio.Event())
        if scope["path"] == "/release":  # asked only once the first client has hung up
            released[0].set()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        content = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
        await send({"type": "http.response.body", "body": content, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n", "more_body": True})
        await released[0].wait()
        await send({"type": "http.response.body", "body": b'data: {"usage": {"completion_tokens": 1}}\n\n'})

    with ServerThread(trailing) as server:
        rec = record(server.url, "--no-probe")
        got = b""
        with httpx.Client(timeout=10) as client:  # made before: the release follows the hang-up at once
            with client.stream("POST", f"{rec.url}/v1/chat/completions", json={"stream": True}) as r:
                for chunk in r.iter_raw():
                    got += chunk
                    if got.rstrip().endswith(b"[DONE]"):
                        break  # hang up, as the openai SDK does
            # Sent after the hang-up, through the same proxy: it sees the hang-up before this request.
            assert client.post(f"{rec.url}/release").status_code == 204
        rec.stop()
    (first,) = [x for x in rec.exchanges() if x["path"] == "/v1/chat/completions"]  # written after /release
    assert first["end"] == "complete" and first.get("closed_after_end") is True
    delivered = first.get("delivered_chunks", len(first["chunks"]))
    assert b"".join(first["chunks"][:delivered]) == got  # what the client had, and nothing it didn't
    late = b"".join(first["chunks"][delivered:])
    if late:  # came before the proxy stopped waiting for the upstream's end: kept, after the exchange's end
        assert late == b'data: {"usage": {"completion_tokens": 1}}\n\n'
        assert first["end_ns"] < first["chunk_ns"][delivered]


class _Exchanges:
    """A capture writer that keeps the exchanges in memory, for a proxy served in the test's process."""

    error = None

    def __init__(self) -> None:
        self.footer_extra: dict[str, object] = {}
        self.written: list[dict] = []
        self.t0 = time.monotonic_ns()

    def elapsed_ns(self) -> int:
        return time.monotonic_ns() - self.t0

    def write(self, record: dict) -> None:
        self.written.append(record)


@pytest.mark.parametrize("heard", ["by the watcher first", "by the send first"])
def test_an_end_marker_waiting_for_a_full_client_when_it_hangs_up_is_not_recorded_as_delivered(heard):
    """uvicorn's send waits while the client's connection is full (a client that stopped reading)
    and, the client gone meanwhile, returns without writing. Here [DONE] waits so until the server
    has lost the connection; the proxy hears of the hang-up from its watcher first, or (the
    upstream's wake-up queued ahead of the watcher's) from that send. The client never got [DONE]:
    the exchange is a disconnect before the end marker, [DONE] kept but not delivered, not a
    complete one it closed after."""
    import socket

    from infertap.proxy.app import RecordingProxy, build_app
    from infertap.proxy.wire import ProxyHttpProtocol
    from tests.fake_upstream import ServerThread, sse_upstream

    content = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n'
    writer = _Exchanges()

    async def given_up() -> None:  # the end comes only once the proxy has given up on it
        while not writer.written:
            await asyncio.sleep(0.01)

    upstream = sse_upstream([content, b"data: [DONE]\n\n"], given_up)

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return await proxy(scope, receive, send)
        sent = asyncio.Event()

        async def full_client(message):
            if message.get("body", b"").endswith(b"data: [DONE]\n\n"):
                while server.server.server_state.connections:  # as a wait for room would, until the loss
                    await asyncio.sleep(0.001)
            await send(message)
            sent.set()

        async def late():
            message = await receive()
            if message["type"] == "http.disconnect":
                await sent.wait()
            return message

        await proxy(scope, late if heard == "by the send first" else receive, full_client)

    up = ServerThread(upstream)
    proxy = build_app(RecordingProxy(up.url, writer))  # type: ignore[arg-type]
    server = ServerThread(app, http=ProxyHttpProtocol)
    with up, server, socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as client:
        client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        got = b""
        while content not in got:
            got += client.recv(4096)
        client.close()
        deadline = time.monotonic() + 10
        while not writer.written and time.monotonic() < deadline:
            time.sleep(0.01)
    assert b"[DONE]" not in got
    (x,) = writer.written
    assert x["chunks"] == [content, b"data: [DONE]\n\n"]
    assert x["end"] == "client_disconnected" and "closed_after_end" not in x
    assert x["delivered_chunks"] == 1  # handed on: the content, never [DONE]


@pytest.mark.parametrize("server_says", [True, False], ids=["connection-full-known", "unknown"])
def test_a_send_slowed_by_a_busy_host_is_not_taken_for_a_slow_client(server_says):
    """On a busy host any ``send`` may take milliseconds: the proxy was taken off the CPU. That is
    no wait for the client, whose connection had room, and recording it as one (``client_wait_ns``)
    says the client made the chunk times late when it didn't. The recorder's server says whether the
    connection was full (wire.py); only a server that doesn't leaves the time alone to tell."""
    from infertap.proxy.app import RecordingProxy, build_app
    from infertap.proxy.wire import ProxyHttpProtocol
    from tests.fake_upstream import ServerThread, sse_upstream

    events = [b'data: {"choices": [{"index": 0, "delta": {"content": "%d"}}]}\n\n' % i for i in range(12)]
    writer = _Exchanges()

    upstream = sse_upstream([*events, b"data: [DONE]\n\n"])

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return await proxy(scope, receive, send)

        async def busy_host(message):
            if message["type"] == "http.response.body":
                time.sleep(0.005)  # the proxy's thread off the CPU for 5 ms, as a loaded host does
            await send(message)

        await proxy(scope, receive, busy_host)

    up = ServerThread(upstream)
    proxy = build_app(RecordingProxy(up.url, writer))  # type: ignore[arg-type]
    with up, ServerThread(app, http=ProxyHttpProtocol if server_says else "httptools") as server:
        answer = httpx.post(f"{server.url}/v1/chat/completions", json={}, timeout=10)
        deadline = time.monotonic() + 10
        while not writer.written and time.monotonic() < deadline:
            time.sleep(0.01)
    assert answer.content == b"".join(events) + b"data: [DONE]\n\n"
    (x,) = writer.written
    assert x["end"] == "complete" and len(x["chunks"]) >= len(events)
    if server_says:
        assert "client_wait_ns" not in x, x.get("client_wait_ns")
    else:
        assert x["client_wait_ns"] >= 5_000_000 * len(events)


def test_a_disconnect_storm_is_recorded_and_the_proxy_keeps_serving(fake, record):
    """100 clients hang up mid-stream at once: each exchange is recorded, each upstream stream is
    cancelled, and the next request is served normally."""
    app, url = fake
    rec = record(url, "--no-probe")

    async def hang_up(client: httpx.AsyncClient, tag: str) -> None:
        async with client.stream("POST", f"{rec.url}/slow", json={"tag": tag}) as r:
            async for chunk in r.aiter_raw():
                if b"tick" in chunk:
                    return  # leaving the block closes the connection mid-stream

    async def storm() -> None:
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=100)) as client:
            await asyncio.gather(*(hang_up(client, f"d{i}") for i in range(100)))

    asyncio.run(storm())
    deadline = time.monotonic() + 20
    while len(app.cancelled) < 100 and time.monotonic() < deadline:
        time.sleep(0.05)
    after = httpx.post(f"{rec.url}/v1/chat/completions", json=_chat("after", stream=False), timeout=10)
    assert after.status_code == 200
    rec.stop()
    xs = rec.exchanges()
    assert sorted(app.cancelled) == sorted(f"d{i}" for i in range(100))
    storm_xs = [x for x in xs if x["path"] == "/slow"]
    assert len(storm_xs) == 100 and {x["end"] for x in storm_xs} == {"client_disconnected"}
    assert [x["end"] for x in xs if x["path"] == "/v1/chat/completions"] == ["complete"]


def test_headers_named_in_connection_are_not_forwarded_either_way(record):
    """RFC 9110 7.6.1: a header the Connection header names belongs to that hop only."""
    from tests.fake_upstream import ServerThread, lifespan

    seen: list[list[tuple[bytes, bytes]]] = []

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        if scope["path"] == "/v1/models":  # not telemetry's /metrics
            seen.append(scope["headers"])
        headers = [(b"connection", b"x-upstream-hop"), (b"x-upstream-hop", b"1"), (b"x-kept", b"1"), (b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    with ServerThread(app) as server:
        rec = record(server.url, "--no-probe")
        r = httpx.get(
            f"{rec.url}/v1/models", headers={"Connection": "keep-alive, X-Client-Hop", "X-Client-Hop": "1", "X-Kept": "1"}
        )
        rec.stop()
    names = {n.lower() for n, _ in seen[0]}
    assert b"x-client-hop" not in names and b"x-kept" in names
    assert "x-upstream-hop" not in r.headers and r.headers["x-kept"] == "1"


def test_a_shutdown_while_the_request_body_arrives_records_it_cancelled_with_what_came(record, tmp_path, monkeypatch):
    """What came of the body is kept, marked cut short (``request_body_cut``): it was recorded as
    though it were the request, read as no generation, and ``stats`` counted it nowhere; it now
    counts it of unknown body (in no group here: no request of its key was counted)."""
    import socket

    from click.testing import CliRunner

    from infertap.cli import cli
    from tests.fake_upstream import FakeUpstream, ServerThread

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    with ServerThread(FakeUpstream()) as server:
        rec = record(server.url, "--no-probe", "--graceful-timeout", "0.5")
        host, port = rec.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n" + b'{"model": "m", ')
            time.sleep(0.5)
            rec.stop()  # SIGTERM with the body a sixth of the way in
    (x,) = rec.exchanges()
    assert (x["end"], x["request_body"], x.get("request_body_cut")) == ("cancelled", b'{"model": "m", ', True)
    assert x["error"] == "proxy shut down while the request body was arriving (15 of 100 bytes came)"
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["groups"], out["in_no_group"]) == ([], {"refused": 0, "request_body_unknown": 1})
    table = CliRunner().invoke(cli, ["stats", str(rec.out)], catch_exceptions=False)
    assert "1 sent with a body not kept or cut short" in table.stdout, table.stdout


def test_a_chunks_hand_off_is_timed_from_its_arrival_with_one_clock_read(monkeypatch):
    """relay reads each chunk's arrival time: the hand-off's wait (``client_wait_ns``) runs from it,
    not from a second reading of the clock before the ``send``; only a full connection's wait counts."""
    import types

    from infertap.proxy import app as proxy_app

    reads = []

    def clock() -> int:
        reads.append(1)
        return time.monotonic_ns()

    monkeypatch.setattr(proxy_app, "time", types.SimpleNamespace(monotonic_ns=clock))

    async def scenario():
        sent = []

        async def receive():
            await asyncio.Event().wait()  # the client stays

        async def send(message):
            sent.append(message["body"])

        task = asyncio.current_task()
        full = [True]
        hangup = proxy_app._Hangup(receive, send, {"chunks": [], "status": 200}, task, lambda: False, lambda: full[0])
        arrived = time.monotonic_ns() - 3 * proxy_app.HELD_NS  # the chunk came 3 ms before its hand-off
        waited_full = await hangup.deliver(b"a", arrived)
        clock_reads = len(reads)
        full[0] = False
        waited_room = await hangup.deliver(b"b", arrived)
        hangup.close()
        return sent, waited_full, clock_reads, waited_room, hangup.delivered

    sent, waited_full, clock_reads, waited_room, delivered = asyncio.run(scenario())
    assert sent == [b"a", b"b"] and delivered == 2
    assert clock_reads == 1
    assert waited_full >= 3 * proxy_app.HELD_NS  # the connection was full: the wait since arrival is kept
    assert waited_room == 0  # it had room: however long, no wait for the client


def test_an_anthropic_client_refused_by_infertap_reads_anthropics_error(fake, record):
    """infertap's own answers (here a body over --max-body-mb) to a Messages client were OpenAI's error
    body, which the anthropic SDK reads as no error object of its own: now Anthropic's, its message said."""
    from anthropic import Anthropic, APIStatusError

    app, url = fake
    rec = record(url, "--max-body-mb", "0.001")
    client = Anthropic(base_url=rec.url, api_key="sk-ant-test", max_retries=0, timeout=10)
    with pytest.raises(APIStatusError) as refused:
        client.messages.create(model="m", max_tokens=16, messages=[{"role": "user", "content": "x" * 5000}])
    assert refused.value.status_code == 413
    # Anthropic's error shape with its 413 type (its API's errors page: request_too_large, a type the SDK's
    # union of error objects lacks, as its docs say the types grow), the message the SDK surfaces.
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "error" and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == "request_too_large" and body["error"]["message"] in refused.value.message
    assert "infertap: request_too_large" in body["error"]["message"]
    # Must match: the same refusal on an OpenAI route keeps OpenAI's body.
    r = httpx.post(f"{rec.url}/v1/chat/completions", json={"pad": "x" * 5000}, timeout=10)
    assert sdk_shapes.openai_error(r.json())["error"]["type"] == "request_too_large"
    rec.stop()
    assert [x["status"] for x in rec.exchanges()] == [413, 413]
