"""The proxy's own HTTP/1.1 client (proxy/upstream.py): framing cases, pooling, backpressure, fidelity.

The fault cases a real server produces run against the uvicorn fake upstream; the framing a
well-behaved ASGI server never sends (a body ended by the connection's close, an interim 1xx,
a stale keep-alive connection) comes from a raw socket server that writes exact bytes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import httpx
import pytest

from infertap.errors import UpstreamBroken, UpstreamTimeout, UpstreamUnreachable
from infertap.proxy.upstream import _HIGH_WATER, UpstreamClient
from tests.fake_upstream import FakeUpstream, ServerThread


async def _body(
    client: UpstreamClient, method: str, target: bytes, body: bytes = b""
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    response = await client.send(method, target, [(b"content-type", b"application/json")], body)
    try:
        data = b"".join([piece async for piece in response.aiter_raw()])
    finally:
        await response.aclose()
    return response.status_code, response.headers, data


async def _raw_server(handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], object]) -> tuple[asyncio.Server, str]:
    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)  # type: ignore[misc]
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()  # else the server's close waits for the connection forever

    server = await asyncio.start_server(closing, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
    return head + (await reader.readexactly(length) if length else b"")


def test_a_body_ended_by_the_connection_close_is_complete() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it, ")
        await writer.drain()
        writer.write(b"until the end")
        writer.close()

    async def main() -> None:
        server, url = await _raw_server(handler)
        async with server:
            client = UpstreamClient(url)
            assert await _body(client, "GET", b"/") == (200, [(b"content-type", b"text/plain")], b"all of it, until the end")
            await client.aclose()

    asyncio.run(main())


def test_interim_responses_are_skipped_and_head_has_no_body() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            request = await _read_request(reader)
            if request.startswith(b"HEAD"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n")
            else:
                writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    async def main() -> None:
        server, url = await _raw_server(handler)
        async with server:
            client = UpstreamClient(url, read_timeout=5)
            assert await _body(client, "POST", b"/x", b"{}") == (201, [(b"content-length", b"2")], b"ok")
            assert await _body(client, "HEAD", b"/x") == (200, [(b"content-length", b"1000")], b"")
            await client.aclose()

    asyncio.run(main())


async def _answer_ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: list[bytes]) -> None:
    """Read one request, note its request line in ``seen``, answer it ``ok``."""
    seen.append((await _read_request(reader)).split(b"\r\n")[0])
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    await writer.drain()


def test_an_idle_connection_the_upstream_closed_is_not_reused() -> None:
    """The upstream closes a connection after answering (its keep-alive timeout): the next request
    goes on a new one, never written into the closed one."""
    seen: list[bytes] = []
    connections = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        await _answer_ok(reader, writer, seen)
        writer.close()

    async def main() -> None:
        server, url = await _raw_server(handler)
        async with server:
            client = UpstreamClient(url)
            assert (await _body(client, "POST", b"/one", b"{}"))[2] == b"ok"
            await asyncio.sleep(0.05)  # the close has arrived, whether or not the loop has read it
            assert (await _body(client, "POST", b"/two", b"{}"))[2] == b"ok"
            await client.aclose()

    asyncio.run(main())
    assert seen == [b"POST /one HTTP/1.1", b"POST /two HTTP/1.1"] and connections == 2


def test_a_request_on_a_connection_the_upstream_closes_as_it_is_written_is_sent_again_once() -> None:
    """The upstream reads the second request on a kept-alive connection, then closes without an
    answer: from here that is the same as a close racing the write (llama-server closes a
    connection a moment after a stream), so it is sent once more on a new connection. An engine
    that crashed after reading it gets it twice (docs/reliability.md)."""
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = not seen
        await _answer_ok(reader, writer, seen)
        if first:
            seen.append((await _read_request(reader)).split(b"\r\n")[0])  # read whole, never answered
        writer.close()

    async def main() -> None:
        server, url = await _raw_server(handler)
        async with server:
            client = UpstreamClient(url, read_timeout=5)
            assert (await _body(client, "POST", b"/one", b"{}"))[2] == b"ok"
            assert (await _body(client, "POST", b"/two", b"{}"))[2] == b"ok"
            await client.aclose()

    asyncio.run(main())
    assert seen == [b"POST /one HTTP/1.1", b"POST /two HTTP/1.1", b"POST /two HTTP/1.1"]


def test_failures_are_typed() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(5)

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()

    async def main() -> None:
        from infertap.launch import free_port

        with pytest.raises(UpstreamUnreachable, match="Connection refused"):
            await UpstreamClient(f"http://127.0.0.1:{free_port()}").send("GET", b"/", [], b"")
        server, url = await _raw_server(silent)
        async with server:
            with pytest.raises(UpstreamTimeout, match="no response headers"):
                await UpstreamClient(url, read_timeout=0.3).send("GET", b"/", [], b"")
        server, url = await _raw_server(garbage)
        async with server:
            with pytest.raises(UpstreamBroken, match="invalid HTTP response"):
                await UpstreamClient(url).send("GET", b"/", [], b"")
        with pytest.raises(ValueError, match="http"):
            UpstreamClient("ftp://example.com")

    asyncio.run(main())


def test_a_reader_that_stops_reading_pauses_the_upstream_instead_of_buffering() -> None:
    """40 MiB ready to stream; nobody reads: what sits in the client stays near its high-water mark."""
    app = FakeUpstream()

    async def main(url: str) -> None:
        client = UpstreamClient(url)
        response = await client.send(
            "POST", b"/big", [(b"content-type", b"application/json")], json.dumps({"blocks": 640}).encode()
        )
        await asyncio.sleep(1.0)  # the upstream writes as fast as it may
        held = response._buffered
        assert held <= _HIGH_WATER + 512 * 1024, held
        total = 0
        async for piece in response.aiter_raw():  # reading again resumes the flow, to the last byte
            total += len(piece)
        await response.aclose()
        await client.aclose()
        assert total == 640 * 65536

    with ServerThread(app) as server:
        asyncio.run(main(server.url))


def test_the_proxy_forwards_the_clients_headers_without_adding_any(fake, record) -> None:
    app, url = fake
    rec = record(url)
    sent = {"User-Agent": "agent/1.0", "X-Trace": "abc", "Accept": "text/event-stream"}
    r = httpx.post(f"{rec.url}/echo", content=b'{"a": 1}', headers=sent, timeout=10)
    rec.stop()
    seen = {n.lower(): v for n, v in r.json()["headers"]}
    with httpx.Client() as c:  # the client adds its defaults (Accept-Encoding, Connection...)
        client_sent = {n.decode().lower() for n, _ in c.build_request("POST", rec.url, content=b"x", headers=sent).headers.raw}
    # What arrives is what the client sent, less hop-by-hop headers, with Host and Content-Length set.
    assert set(seen) == (client_sent - {"connection"}) | {"host"}
    assert seen["host"] == url.removeprefix("http://") and seen["content-length"] == "8" and seen["user-agent"] == "agent/1.0"
