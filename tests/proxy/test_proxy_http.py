"""HTTP the engines' servers rarely send, through `infertap record`: what the client gets and what
the capture keeps (a raw socket upstream writes the exact bytes)."""

from __future__ import annotations

import asyncio
import json
import select
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import httpx
import pytest

from tests.helpers import decompressed_bytes

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[bool]]


async def _request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
    return head + (await reader.readexactly(length) if length else b"")


@pytest.fixture
def raw_upstream() -> Iterator[Callable[[Handler], str]]:
    """Factory: raw_upstream(handler) serves ``handler(reader, writer, request)`` per request (True:
    keep the connection for the next one) on a thread of its own; returns its URL."""
    running: list[tuple[asyncio.AbstractEventLoop, threading.Thread]] = []

    def start(handler: Handler) -> str:
        loop = asyncio.new_event_loop()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while await handler(reader, writer, await _request(reader)):
                    pass
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        def run() -> None:
            asyncio.set_event_loop(loop)
            server = loop.run_until_complete(asyncio.start_server(connection, sock=sock))
            loop.run_forever()
            server.close()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.close()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        running.append((loop, thread))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for loop, thread in running:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_a_304_that_names_a_length_reaches_the_client_and_is_recorded_complete(raw_upstream, record) -> None:
    """RFC 9110 8.6 lets a 304 carry the length of what it stands for: passed on, the proxy's server
    waited for that many bytes, cut the client's connection and recorded a proxy_error."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        writer.write(b'HTTP/1.1 304 Not Modified\r\netag: "v1"\r\ncontent-length: 1234\r\n\r\n')
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    with httpx.Client() as client:
        r = [client.get(f"{rec.url}/v1/models", headers={"if-none-match": '"v1"'}) for _ in range(2)]
    rec.stop()
    assert [x.status_code for x in r] == [304, 304] and r[1].headers["etag"] == '"v1"'
    xs = rec.exchanges()
    assert [(x["status"], x["end"], x["error"]) for x in xs] == [(304, "complete", None)] * 2
    assert ["content-length", "1234"] in xs[0]["response_headers"]  # kept as the engine sent it


def test_a_status_outside_http_is_a_clear_502_recorded(raw_upstream, record) -> None:
    """The parser takes any three digits: a status of 600 reached the proxy's server, which failed on
    it and closed the client's connection with no reply."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        writer.write(b"HTTP/1.1 600 Nonsense\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return False

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    r = httpx.get(f"{rec.url}/v1/models")
    rec.stop()
    assert r.status_code == 502 and "status 600 is no HTTP status" in r.text
    (x,) = rec.exchanges()
    assert x["end"] == "upstream_error" and "status 600 is no HTTP status" in x["error"]


@pytest.mark.parametrize("split", [False, True], ids=["one-packet", "trailer-later"])
def test_trailers_are_recorded_apart_and_never_sent_as_headers(raw_upstream, record, split) -> None:
    """A trailer arriving with the head became a response header the client got; one arriving later
    was lost from the record."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-checksum\r\n\r\n5\r\nhello\r\n"
        tail = b"0\r\nx-checksum: abc123\r\n\r\n"
        if split:
            writer.write(head)
            await writer.drain()
            await asyncio.sleep(0.2)
            writer.write(tail)
        else:
            writer.write(head + tail)
        await writer.drain()
        return False

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    r = httpx.get(f"{rec.url}/v1/models")
    rec.stop()
    assert r.status_code == 200 and r.content == b"hello" and "x-checksum" not in r.headers
    (x,) = rec.exchanges()
    assert x["response_trailers"] == [["x-checksum", "abc123"]]
    assert all(n.lower() != "x-checksum" for n, _ in x["response_headers"])


def test_a_request_sent_twice_after_a_broken_connection_says_so(raw_upstream, record) -> None:
    """The engine read the POST on a kept-alive connection and closed without answering: the proxy
    sends it once more (llama-server's close-after-stream race looks the same) and the exchange
    now records that it did, its times from the attempt that was answered."""
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        seen.append(request.split(b"\r\n")[0])
        if seen.count(b"POST /v1/completions HTTP/1.1") == 1 and request.startswith(b"POST"):
            await asyncio.sleep(0.3)  # read, then the connection is gone: no answer
            return False
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    with httpx.Client() as client:
        assert client.get(f"{rec.url}/v1/models").status_code == 200  # the connection to reuse
        assert client.post(f"{rec.url}/v1/completions", json={"prompt": "p"}).text == "ok"
    rec.stop()
    assert seen.count(b"POST /v1/completions HTTP/1.1") == 2
    models, completion = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert "retried" not in models
    assert completion["end"] == "complete" and "without a response" in completion["retried"]
    # sent when the second attempt was: after the first one's 0.3 s without an answer
    assert completion["sent_ns"] - completion["start_ns"] >= 300_000_000


def test_the_client_recorded_is_the_one_connected(raw_upstream, record) -> None:
    """uvicorn's proxy headers took a local client's X-Forwarded-For as its address."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    httpx.get(f"{rec.url}/v1/models", headers={"x-forwarded-for": "6.6.6.6"})
    rec.stop()
    (x,) = rec.exchanges()
    assert x["client"].startswith("127.0.0.1:")
    assert ["x-forwarded-for", "6.6.6.6"] in x["request_headers"]


def _raw_exchange(url: str, *pieces: bytes) -> bytes:
    """Sends ``pieces`` one write each (the request must end with Connection: close); all it got back."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for k, piece in enumerate(pieces):
            if k:
                time.sleep(0.05)  # each piece its own read on the other side, as a slow client's
            s.sendall(piece)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_early_hints_reach_an_http11_client_and_are_recorded(raw_upstream, record) -> None:
    """A 103 Early Hints was swallowed by the proxy's upstream client: neither passed on (a proxy
    must forward 1xx, RFC 9110 15.2) nor recorded. An HTTP/1.0 client can't be sent one."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
        await writer.drain()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    new = _raw_exchange(rec.url, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    old = _raw_exchange(rec.url, b"GET /v1/models HTTP/1.0\r\nHost: x\r\n\r\n")
    rec.stop()
    assert new.startswith(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n")
    assert new.endswith(b"\r\n\r\nok") and old.startswith(b"HTTP/1.1 200 OK\r\n") and b"103" not in old
    hints = [x["interim"] for x in sorted(rec.exchanges(), key=lambda x: x["seq"])]
    assert [[(i["status"], i["headers"], i["forwarded"]) for i in h] for h in hints] == [
        [(103, [["Link", "</style.css>; rel=preload"]], True)],
        [(103, [["Link", "</style.css>; rel=preload"]], False)],
    ]


def test_an_expect_100_continue_client_gets_its_large_body_forwarded_and_recorded_exactly(raw_upstream, record) -> None:
    """curl asks Expect: 100-continue for a large body and waits for the 100 before sending it: the
    proxy's server answers it, the upstream (never asked) gets the body at once."""
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        seen.append(request)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    body = bytes(range(256)) * 1024  # 256 KiB, every byte value
    head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n" % len(body)
    host, port = rec.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(head + b"Connection: close\r\n\r\n")
        assert s.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"  # asked for, before any body byte
        s.sendall(body)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    rec.stop()
    assert out.startswith(b"HTTP/1.1 200 OK") and out.endswith(b"ok")
    (sent,) = seen
    assert sent.endswith(b"\r\n\r\n" + body) and b"expect" not in sent.lower().split(b"\r\n\r\n")[0]
    (x,) = rec.exchanges()
    assert x["request_body"] == body and ["expect", "100-continue"] in x["request_headers"]


def test_a_chunked_requests_trailers_are_recorded_apart_and_never_forwarded_as_headers(raw_upstream, record) -> None:
    """uvicorn appends a chunked request's trailers to its headers after the app has recorded them:
    they reached the upstream as headers (a credential among them) and the capture never held them."""
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        seen.append(request)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    out = _raw_exchange(
        rec.url,
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n"
        b"Connection: close\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n"
        b"X-Checksum: c0ffee\r\nAuthorization: Bearer sk-in-a-trailer-0123\r\n\r\n",
    )
    rec.stop()
    assert out.endswith(b"\r\n\r\nok")
    (sent,) = seen
    assert sent.endswith(b"\r\ncontent-length: 11\r\n\r\nhello world")
    assert b"c0ffee" not in sent and b"sk-in-a-trailer" not in sent  # trailers are not headers
    (x,) = rec.exchanges()
    assert x["request_body"] == b"hello world"
    assert x["request_trailers"] == [["x-checksum", "c0ffee"], ["authorization", "Bearer [REDACTED]"]]
    assert not any(n.lower() in ("x-checksum", "authorization") for n, _ in x["request_headers"])
    assert b"sk-in-a-trailer" not in decompressed_bytes(rec.out)


_H2C = b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
_WEBSOCKET = (
    b"Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


@pytest.mark.parametrize(
    "pieces",
    [
        [b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\n" + _WEBSOCKET + b"\r\n"],
        [b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + _H2C + b"Content-Length: 11\r\n\r\n" + b'{"a": "hi"}'],
        [b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + _H2C + b"Content-Length: 11\r\n\r\n", b'{"a": "hi"}'],
        [b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + _H2C + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"],
    ],
    ids=["websocket", "h2c-with-a-body", "h2c-body-in-a-later-read", "h2c-chunked"],
)
def test_a_switch_of_protocols_the_recorder_cant_relay_is_refused_clearly_and_recorded(raw_upstream, record, pieces) -> None:
    """A WebSocket got uvicorn's bare 500 and no record; a request asking for h2c with a body (curl
    --http2's POST) lost its body, which the parser takes for the new protocol's bytes, and went to
    the upstream without it. Both now get a 501 saying why, are recorded refused, reach no upstream,
    and the recorder serves the next client; an h2c GET (no body) is forwarded, its Upgrade ignored."""
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        seen.append(request)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    out = _raw_exchange(rec.url, *pieces)  # the refusal closes the connection
    head, _, body = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 501 ") and b"connection: close" in head.lower()
    error = json.loads(body)["error"]
    assert error["type"] == "upgrade_not_relayed" and "relays HTTP only" in error["message"]
    h2c_get = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + _H2C + b"Connection: close\r\n\r\n"
    assert _raw_exchange(rec.url, h2c_get).endswith(b"\r\n\r\nok")  # answered as HTTP, as a server may
    rec.stop()
    assert [r.split(b" ")[1] for r in seen] == [b"/v1/models"]
    xs = sorted(rec.exchanges(), key=lambda x: x["seq"])
    if b"chunked" in pieces[0]:  # its body's end can't be known unparsed: kept as bytes after the refusal
        kept = xs.pop(1)
        assert (kept["end"], kept["status"], kept["refused_head"]) == ("refused", None, b"3\r\nabc\r\n0")
        assert "(its chunked body among them)" in kept["error"]
    refused, answered = xs
    assert (refused["status"], refused["end"], refused["proxy_generated"]) == (501, "refused", True)
    assert refused["error"] == error["message"] and refused["path"] in ("/v1/realtime", "/v1/completions")
    assert (answered["status"], answered["end"]) == (200, "complete")


@pytest.mark.parametrize("split", ["whole", "in-two", "after-an-empty-line", "a-byte-at-a-time"])
def test_a_target_with_raw_utf8_is_forwarded_and_recorded_as_received(raw_upstream, record, split) -> None:
    """curl sends a URL's UTF-8 as it is given (GET /v1/models/ünï): engines' servers take it, while
    the proxy's parser refused it with a bare 400 and nothing recorded."""
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        seen.append(request.split(b"\r\n")[0])
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    request = "GET /v1/models/ünï?q=ü HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    pieces = {
        "whole": [request],
        "in-two": [request[:17], request[17:]],  # the target cut inside its UTF-8
        "after-an-empty-line": [b"\r\n" + request[:17], request[17:]],  # RFC 9112 2.2: a server ignores it
        "a-byte-at-a-time": [request[k : k + 1] for k in range(40)] + [request[40:]],
    }[split]
    out = _raw_exchange(rec.url, *pieces)
    rec.stop()
    assert out.startswith(b"HTTP/1.1 200 OK") and out.endswith(b"ok")
    assert seen == ["GET /v1/models/ünï?q=ü HTTP/1.1".encode()]  # as the client sent it
    (x,) = rec.exchanges()
    assert (x["path"].encode("latin-1"), x["query"].encode("latin-1")) == ("/v1/models/ünï".encode(), "q=ü".encode())


@pytest.mark.parametrize("split", ["one-send", "cut-in-a-pipelined-target"])
def test_pipelined_requests_with_raw_utf8_targets_are_each_answered_and_recorded(raw_upstream, record, split) -> None:
    """A raw target pipelined behind another request in the same read (after a body of known length
    that ends with no line end, after a chunked one) got the parser's bare 400, and nothing recorded."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
        line = request.split(b"\r\n")[0]
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(line), line))
        await writer.drain()
        return True

    rec = record(raw_upstream(handler), "--no-probe", "--no-telemetry")
    body = '{"content": "ünï"}'.encode()
    sent = b"".join(
        [
            b"POST /v1/a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
            "GET /v1/models/ünï HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
            b"POST /v1/c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            "GET /v1/ü?q=ï HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
        ]
    )
    cut = sent.index("/v1/models/ü".encode()) + 11  # inside the second target's UTF-8
    out = _raw_exchange(rec.url, *([sent] if split == "one-send" else [sent[:cut], sent[cut:]]))
    rec.stop()
    lines = ["POST /v1/a HTTP/1.1", "GET /v1/models/ünï HTTP/1.1", "POST /v1/c HTTP/1.1", "GET /v1/ü?q=ï HTTP/1.1"]
    answers = out.split(b"HTTP/1.1 200 OK\r\n")
    assert answers[0] == b"" and [a.split(b"\r\n\r\n")[1] for a in answers[1:]] == [x.encode() for x in lines]
    xs = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert [(x["method"], x["path"].encode("latin-1"), x["query"].encode("latin-1"), x["status"]) for x in xs] == [
        ("POST", b"/v1/a", b"", 200),
        ("GET", "/v1/models/ünï".encode(), b"", 200),
        ("POST", b"/v1/c", b"", 200),
        ("GET", "/v1/ü".encode(), "q=ï".encode(), 200),
    ]
    assert [x["request_body"] for x in xs] == [body, b"", b"hello", b""]


async def _models(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
    writer.write(b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"data":[]}')
    await writer.drain()
    return True


@pytest.mark.parametrize("split", ["one-send", "cut-in-a-credential"])
def test_a_request_refused_in_its_headers_is_recorded_as_answered_its_credentials_redacted(raw_upstream, record, split) -> None:
    """An invalid header line got uvicorn's bare 400 and left no record: it is recorded refused with
    that 400, the parser's reason, what was read of it and its head's bytes, credentials out (a
    credential header's line, a secret query parameter, in the parsed headers as in the bytes)."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry")
    head = (
        b"POST /v1/chat/completions?api_key=qs-hush HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer sk-topsecret\r\nX-Api-Key: xk-hush\r\nBad Header: x\r\nContent-Length: 2\r\n\r\n{}"
    )
    cut = head.index(b"secret")  # the head's second read begins inside the credential's line
    pieces = (head,) if split == "one-send" else (head[:cut], head[cut:])
    refused = _raw_exchange(rec.url, *pieces)
    good = _raw_exchange(rec.url, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rec.stop()

    assert refused.startswith(b"HTTP/1.1 400 ") and refused.endswith(b"Invalid HTTP request received.")
    assert good.startswith(b"HTTP/1.1 200 ") and good.endswith(b'{"data":[]}')
    x, body, ok = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert (x["status"], x["end"], x["proxy_generated"]) == (400, "refused", True)
    assert "Invalid header token" in x["error"]
    # the bytes after the refused head (its body) were dropped unsaid: a record of them, never answered
    assert (body["end"], body["status"], body["refused_head"]) == ("refused", None, b"{}")
    assert "2 bytes came after a request the recorder refused, whose answer ends the connection, in its head" in body["error"]
    assert (x["method"], x["path"], x["query"]) == ("POST", "/v1/chat/completions", "api_key=[REDACTED]")
    assert x["chunks"] == [b"Invalid HTTP request received."] and x["request_body"] == b""
    # the whole head, however many reads it came in (the refused one held only its end), redacted as one
    assert x["refused_head"] == (
        b"POST /v1/chat/completions?api_key=[REDACTED] HTTP/1.1\r\nHost: x\r\n"
        b"Authorization: Bearer [REDACTED]\r\nX-Api-Key: [REDACTED]\r\nBad Header: x\r\nContent-Length: 2"
    )
    on_disk = decompressed_bytes(rec.out)
    assert b"Bad Header" in on_disk
    for secret in (b"sk-topsecret", b"xk-hush", b"qs-hush"):
        assert secret not in on_disk
    assert (ok["method"], ok["path"], ok["status"], ok["end"]) == ("GET", "/v1/models", 200, "complete")
    assert "proxy_generated" not in ok and "refused_head" not in ok


def test_a_long_refused_head_in_several_reads_keeps_its_first_kib(raw_upstream, record) -> None:
    """A head cut across reads is kept from its request line, as far as ``HEAD_BYTES``: no more,
    however long it goes on."""
    from infertap.proxy.refusal import HEAD_BYTES

    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry")
    line = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 40) for i in range(60))
    head = line + filler + b"Bad Header: x\r\n\r\n"
    pieces = [head[i : i + 700] for i in range(0, len(head), 700)]
    assert len(pieces) >= 3
    refused = _raw_exchange(rec.url, *pieces)
    rec.stop()
    assert refused.startswith(b"HTTP/1.1 400 ")
    (x,) = rec.exchanges()
    assert x["end"] == "refused" and x["refused_head"] == head[:HEAD_BYTES]


@pytest.mark.parametrize("split", ["one-send", "bad-chunk-later"])
def test_a_request_refused_in_its_chunked_body_is_recorded_refused_not_gone(raw_upstream, record, split) -> None:
    """A bad chunk size after a good chunk: the client is answered 400 by the server's parser; it was
    recorded client_disconnected with no status, and is refused with that 400, the body that came kept."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry")
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
    pieces = (head + b"zz\r\n",) if split == "one-send" else (head, b"zz\r\n")
    refused = _raw_exchange(rec.url, *pieces)
    good = _raw_exchange(rec.url, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rec.stop()

    assert refused.startswith(b"HTTP/1.1 400 ") and good.startswith(b"HTTP/1.1 200 ")
    x, ok = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert (x["status"], x["end"], x["proxy_generated"]) == (400, "refused", True)
    assert "Invalid character in chunk size" in x["error"]
    assert (x["method"], x["path"], x["request_body"]) == ("POST", "/v1/chat/completions", b"hello")
    assert x["chunks"] == [b"Invalid HTTP request received."]
    assert (ok["path"], ok["status"], ok["end"]) == ("/v1/models", 200, "complete")


def test_a_request_line_refused_is_recorded_with_its_bytes(raw_upstream, record) -> None:
    """A request line the parser can't read (no method it knows): recorded with no method or path,
    its bytes kept."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry")
    refused = _raw_exchange(rec.url, b"BREW /pot?key=k-hush HTCPCP/1.0\r\nHost: x\r\n\r\n")
    rec.stop()
    assert refused.startswith(b"HTTP/1.1 400 ")
    (x,) = rec.exchanges()
    assert (x["status"], x["end"], x["proxy_generated"], x["method"], x["path"]) == (400, "refused", True, "", "")
    assert x["refused_head"] == b"BREW /pot?key=[REDACTED] HTCPCP/1.0\r\nHost: x"
    assert b"k-hush" not in decompressed_bytes(rec.out)


_UNSENT = {
    "refused-then-hang-up": "the client's connection was lost (",
    "refused-then-stop": "the recorder shut down and closed the connection after the response ahead of it",
}


@pytest.mark.parametrize(
    "then",
    [
        "refused-request",
        "oversized-request",
        "refused-in-its-body",
        "good-then-refused",
        "refused-then-shut",
        "hang-up",
        *_UNSENT,
    ],
)
def test_a_request_refused_behind_a_stream_is_answered_after_the_stream_ends(record, then) -> None:
    """A request pipelined behind a stream and refused in its head (by the parser: 400; by the
    recorder's limit: 431): uvicorn wrote its answer into the stream still going and closed the
    connection, the 400's bytes inside the stream, cut short. The stream now ends whole, any request
    queued before the refused one is answered, and then the refusal's answer, the connection closed;
    each recorded (the stream and the good one complete, the refused one refused), a client that
    closes its side after the refused request too; its record follows theirs (seq). A client that
    does hang up is still client_disconnected. An answer never written (the client gone, the
    recorder stopped, before the stream ended) was recorded answered
    all the same, before it: the refusal is now recorded unanswered (no status), saying why, every
    byte of its head kept."""
    from tests.fake_upstream import ServerThread, sse_upstream

    async def held() -> None:
        await asyncio.sleep(0.5)

    events = [b'data: {"choices": [{"index": 0, "delta": {"content": "%d"}}]}\n\n' % i for i in range(3)]
    stream = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"  # as the client gets it
    with ServerThread(sse_upstream(events, held)) as up:
        rec = record(up.url, "--no-probe", "--no-telemetry", "--max-header-kb", "2")
        host, port = rec.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            time.sleep(0.2)  # the stream under way, its end held back
            if then == "hang-up":
                s.close()
            else:
                bad = b"X-Filler: " + b"f" * 3000 + b"\r\n" if then == "oversized-request" else b"Bad Header: x\r\n"
                good = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" if then == "good-then-refused" else b""
                bad_request = b"GET /v1/bad HTTP/1.1\r\nHost: x\r\n" + bad + b"\r\n"
                if then == "refused-in-its-body":  # its head read whole, queued: a bad chunk size
                    bad_request = b"GET /v1/bad HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\nzz\r\n"
                s.sendall(good + bad_request)
                if then == "refused-then-shut":
                    s.shutdown(socket.SHUT_WR)  # its last request sent, refused: it waits for the answers
                elif then == "refused-then-hang-up":
                    time.sleep(0.1)  # the refusal read
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.close()  # gone before the stream's end
                elif then == "refused-then-stop":
                    time.sleep(0.1)  # the refusal read
                    rec.stop()  # the stream ends, then the connection closes
                out = b""
                while then != "refused-then-hang-up" and (chunk := s.recv(65536)):
                    out += chunk
        rec.stop()
    xs = sorted(rec.exchanges(), key=lambda x: x["seq"])
    first = xs[0]
    assert (first["method"], first["status"]) == ("POST", 200)
    if then == "hang-up":
        assert len(xs) == 1 and first["end"] == "client_disconnected"
        return
    if then in _UNSENT:
        assert b"HTTP/1.1 400" not in out
        assert [x["path"] for x in xs] == ["/v1/chat/completions", "/v1/bad"]  # in the order they happened
        refused = xs[1]
        assert (refused["method"], refused["status"], refused["end"], refused["chunks"]) == ("GET", None, "refused", [])
        assert refused["refused_head"] == b"GET /v1/bad HTTP/1.1\r\nHost: x\r\nBad Header: x"
        assert "was never written: " + _UNSENT[then] in refused["error"]
        assert refused["error"].endswith("the client was never answered")
        assert first["end"] == ("client_disconnected" if then == "refused-then-hang-up" else "complete")
        return
    status, answer = (431, b"over 2048 bytes.") if then == "oversized-request" else (400, b"Invalid HTTP request received.")
    answers = out.split(b"HTTP/1.1 ")[1:]
    assert len(answers) == (3 if good else 2) and all(a.endswith(stream) for a in answers[:-1])  # each whole
    assert answers[-1].startswith(b"%d " % status) and answers[-1].endswith(answer)
    *answered, refused = xs  # recorded once answered: after the requests ahead of it
    assert (refused["method"], refused["path"], refused["status"], refused["end"]) == ("GET", "/v1/bad", status, "refused")
    assert [x["path"] for x in answered] == ["/v1/chat/completions", *(["/v1/models"] if good else [])]
    assert all((x["end"], b"".join(x["chunks"])) == ("complete", b"".join(events)) for x in answered)
    if then == "refused-in-its-body":  # queued when refused: never recorded
        assert refused["request_body"] == b"{}" and "Invalid character in chunk size" in refused["error"]


def _stream_request(version: bytes, extra: bytes = b"") -> bytes:
    body = json.dumps({"stream": True, "n_chunks": 5, "tag": "t", "pace_ms": 20}).encode()
    head = b"POST /v1/chat/completions HTTP/%s\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" % (version, extra, len(body))
    return head + body


def test_an_http10_client_gets_a_stream_unframed_ended_by_the_close(fake, record) -> None:
    """RFC 9112 7 forbids chunked to an HTTP/1.0 client, which read the chunk-size lines as its body:
    a stream of no known length is sent as it comes and ended by closing the connection (as nginx
    does), and recorded as any exchange; an HTTP/1.1 client still gets it chunked."""
    _, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    old = _raw_exchange(rec.url, _stream_request(b"1.0"))  # returns once the proxy closes the connection
    new = _raw_exchange(rec.url, _stream_request(b"1.1", b"Connection: close\r\n"))
    rec.stop()
    x, y = sorted(rec.exchanges(), key=lambda x: x["seq"])
    head, _, body = old.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding" not in head.lower()
    assert b"content-length" not in head.lower() and b"connection: close" in head.lower()
    assert body == b"".join(x["chunks"]) and body.startswith(b"data: ") and body.endswith(b"data: [DONE]\n\n")
    assert (x["http_version"], x["status"], x["end"]) == ("1.0", 200, "complete")
    new_head, _, new_body = new.partition(b"\r\n\r\n")
    assert b"transfer-encoding: chunked" in new_head.lower() and new_body.endswith(b"0\r\n\r\n")
    assert (y["http_version"], y["status"], y["end"]) == ("1.1", 200, "complete") and b"".join(y["chunks"]) == body


@pytest.mark.parametrize("begun", ["in-its-headers", "in-its-request-line"])
def test_a_head_sent_a_byte_at_a_time_gets_408_and_is_recorded_refused(raw_upstream, record, begun) -> None:
    """Slow-loris: uvicorn has no deadline for a request's head (its keep-alive timeout runs between
    requests only), so a client sending a byte every so often held its connection forever. Past
    --header-timeout the client is answered 408, the connection closed, the request recorded refused
    with what came of it (a credential redacted); the next client is served."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry", "--header-timeout", "0.5")
    host, port = rec.url.removeprefix("http://").split(":")
    start = b"POST /v1/chat/completions HTTP/1.1\r\nAuthorization: Bearer sk-slow\r\nX-Slow: "
    if begun == "in-its-request-line":
        start = b"POST /v1/chat/comp"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(start)
        answer = b""
        try:
            for _ in range(100):  # a byte every 0.2 s, as long as the proxy listens (20 s: it never stops)
                time.sleep(0.2)
                s.sendall(b"a")
                s.setblocking(False)
                try:
                    chunk = s.recv(65536)
                except BlockingIOError:
                    chunk = None
                finally:
                    s.setblocking(True)
                if chunk == b"":
                    break
                answer += chunk or b""
        except (BrokenPipeError, ConnectionResetError):
            pass
    good = _raw_exchange(rec.url, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rec.stop()

    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"connection: close" in answer
    assert good.startswith(b"HTTP/1.1 200 ")
    x, ok = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert (x["status"], x["end"], x["proxy_generated"]) == (408, "refused", True)
    assert "its head not whole after 0.5 s" in x["error"] and x["chunks"] == [answer.partition(b"\r\n\r\n")[2]]
    assert x["refused_head"].startswith(start.replace(b"sk-slow", b"[REDACTED]"))
    if begun == "in-its-headers":
        assert (x["method"], x["path"]) == ("POST", "/v1/chat/completions")
    assert b"sk-slow" not in decompressed_bytes(rec.out)
    assert (ok["status"], ok["end"]) == (200, "complete")


def test_a_connection_that_sends_nothing_is_closed_past_the_header_timeout(raw_upstream, record) -> None:
    """No request, no record: the connection is closed without an answer."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry", "--header-timeout", "0.5")
    host, port = rec.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        assert s.recv(65536) == b""  # closed by the proxy (a hang would be a timeout error here)
    rec.stop()
    assert rec.exchanges() == []


@pytest.mark.parametrize("pieces", [1, 5])
def test_a_head_past_max_header_kb_gets_431_and_is_recorded_refused(raw_upstream, record, pieces) -> None:
    """A head that never ends grew without bound in the parser: past --max-header-kb the client is
    answered 431, the connection closed, the request recorded refused with what the parser read."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry", "--max-header-kb", "2")
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-big\r\n"
    head += b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 60) for i in range(100)) + b"\r\n"
    size = len(head) // pieces + 1
    host, port = rec.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for i in range(0, len(head), size):  # a piece a read, until the proxy answers
            if select.select([s], [], [], 0.05)[0]:
                break
            s.sendall(head[i : i + size])
        refused = b""
        while chunk := s.recv(65536):
            refused += chunk
    fits = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + b"X-Fits: " + b"f" * 1900 + b"\r\nConnection: close\r\n\r\n"
    good = _raw_exchange(rec.url, fits)
    rec.stop()

    assert refused.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert refused.endswith(b"its head is over 2048 bytes.")
    assert good.startswith(b"HTTP/1.1 200 ")
    x, ok = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert (x["status"], x["end"], x["method"], x["path"]) == (431, "refused", "POST", "/v1/chat/completions")
    assert ["authorization", "Bearer [REDACTED]"] in x["request_headers"] and len(x["request_headers"]) < 40
    assert b"sk-big" not in decompressed_bytes(rec.out)
    assert (ok["status"], ok["end"]) == (200, "complete")


def _answer_after(url: str, *pieces: bytes, gap: float = 0.0) -> bytes:
    """What the proxy answers a client sending ``pieces`` ``gap`` seconds apart, then nothing more."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for piece in pieces:
            s.sendall(piece)
            time.sleep(gap)
        answer = b""
        while chunk := s.recv(65536):  # the proxy closes it (a hang would be a timeout error here)
            answer += chunk
    return answer


_CHUNKED_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("stalls", ["content-length", "chunked", "in-its-trailers"])
def test_a_request_body_that_stalls_gets_408_and_is_recorded_with_what_came(raw_upstream, record, stalls) -> None:
    """Once the head was in, uvicorn set a body no deadline: a client that stopped sending its body
    (of known length, chunked, or in its trailer section) held its connection and its recorder slot
    forever. Past --body-timeout without a byte it is answered 408, closed, and recorded refused
    with the body that came; the next client is served."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry", "--body-timeout", "0.5")
    pieces = {
        "content-length": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhel", b"lo"),
        "chunked": (_CHUNKED_HEAD + b"3\r\nhel\r\n", b"2\r\nlo\r\n"),
        "in-its-trailers": (_CHUNKED_HEAD + b"3\r\nhel\r\n", b"2\r\nlo\r\n0\r\nX-Trailer: 1\r\n"),
    }[stalls]
    refused = _answer_after(rec.url, *pieces, gap=0.2)
    good = _raw_exchange(rec.url, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rec.stop()

    assert refused.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"connection: close" in refused
    assert refused.endswith(b"its body idle for 0.5 s.") and good.startswith(b"HTTP/1.1 200 ")
    x, ok = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert (x["status"], x["end"], x["proxy_generated"]) == (408, "refused", True)
    assert (x["method"], x["path"], x["request_body"]) == ("POST", "/v1/chat/completions", b"hello")
    assert "its body idle for 0.5 s" in x["error"] and x["chunks"] == [refused.partition(b"\r\n\r\n")[2]]
    assert x["headers_ns"] == x["chunk_ns"][0] == x["end_ns"] > 0  # answered when it timed out, not at its start
    assert (ok["status"], ok["end"]) == (200, "complete")


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_request_body_that_keeps_coming_passes_however_long_it_takes(raw_upstream, record, framing) -> None:
    """--body-timeout is a deadline between two reads, not for the whole body: a body that trickles
    in for three times as long, a piece every 0.1 s, is forwarded and recorded whole."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry", "--body-timeout", "0.5")
    parts = [b"%02d" % i for i in range(15)]
    if framing == "content-length":
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 30\r\n\r\n"
        pieces = [head, *parts]
    else:
        head = _CHUNKED_HEAD.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
        pieces = [head, *(b"2\r\n" + p + b"\r\n" for p in parts), b"0\r\n", b"X-Trailer: 1\r\n", b"\r\n"]
    answer = _answer_after(rec.url, *pieces, gap=0.1)
    rec.stop()

    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b'{"data":[]}')
    (x,) = rec.exchanges()
    assert (x["status"], x["end"], x["request_body"]) == (200, "complete", b"".join(parts))


def test_a_chunked_bodys_trailer_section_past_max_header_kb_gets_431_and_is_recorded(raw_upstream, record) -> None:
    """A trailer section that never ended grew without bound in the parser (the head's limit ends
    with the head): past --max-header-kb it is answered 431, closed, and recorded refused with the
    body that came; the next client is served."""
    rec = record(raw_upstream(_models), "--no-probe", "--no-telemetry", "--max-header-kb", "2")
    trailers = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 60) for i in range(100))
    pieces = [_CHUNKED_HEAD + b"5\r\nhello\r\n0\r\n"] + [trailers[i : i + 500] for i in range(0, len(trailers), 500)]
    host, port = rec.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        for piece in pieces:  # a piece a read, until the proxy answers
            if select.select([s], [], [], 0.05)[0]:
                break
            s.sendall(piece)
        refused = b""
        while chunk := s.recv(65536):
            refused += chunk
    good = _raw_exchange(rec.url, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    rec.stop()

    assert refused.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert refused.endswith(b"its chunked body's trailer section is over 2048 bytes.")
    assert good.startswith(b"HTTP/1.1 200 ")
    x, ok = sorted(rec.exchanges(), key=lambda x: x["seq"])
    assert (x["status"], x["end"], x["proxy_generated"]) == (431, "refused", True)
    assert (x["method"], x["path"], x["request_body"]) == ("POST", "/v1/chat/completions", b"hello")
    assert "request_trailers" not in x
    assert (ok["status"], ok["end"]) == (200, "complete")


def test_every_refusal_records_the_clients_http_version_and_who_refused_it(raw_upstream, record) -> None:
    """A refused request was recorded HTTP/1.1 where the recorder had not read its version (a request
    line whole but its end, past --header-timeout), and a body sent with neither Content-Length nor
    chunked encoding as refused by "the recorder's HTTP parser", which the recorder itself refused.
    Each kind of refusal, from an HTTP/1.0 and an HTTP/1.1 client: the record says the version the
    client sent and who refused it, why."""
    rec = record(
        raw_upstream(_models), "--no-probe", "--no-telemetry", "--header-timeout", "0.5", "--body-timeout", "0.5",
        "--max-header-kb", "2",
    )  # fmt: skip
    kinds = {  # what the client sends, then nothing more; the answer's status; who refused it
        "line-408": (b"GET /v1/models HTTP/{v}", 408, "the recorder refused the request (its head not whole"),
        "head-408": (b"POST /v1/chat/completions HTTP/{v}\r\nHost: x\r\nX-Slow: a", 408, "the recorder refused"),
        "body-408": (b"POST /v1/chat/completions HTTP/{v}\r\nContent-Length: 9\r\n\r\n{", 408, "the recorder refused"),
        "431": (b"GET /v1/models HTTP/{v}\r\nX-Filler: " + b"f" * 3000 + b"\r\n\r\n", 431, "the recorder refused"),
        "501": (b"GET /v1/realtime HTTP/{v}\r\nHost: x\r\n" + _WEBSOCKET + b"\r\n", 501, "infertap: this recorder relays"),
        "parser-400": (b"GET /v1/models HTTP/{v}\r\nBad Header: x\r\n\r\n", 400, "the recorder's HTTP parser refused"),
        "unframed-400": (b"POST /v1/chat/completions HTTP/{v}\r\n\r\n{}", 400, "the recorder refused the request (its body"),
    }
    host, port = rec.url.removeprefix("http://").split(":")
    for version in ("1.0", "1.1"):
        for sent, status, _ in kinds.values():
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(sent.replace(b"{v}", version.encode()))
                if sent.endswith(b"{}"):
                    s.shutdown(socket.SHUT_WR)  # the unframed body's only end
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 %d " % status)
    rec.stop()
    xs = sorted(rec.exchanges(), key=lambda x: x["seq"])
    expected = [(v, status, "refused", by) for v in ("1.0", "1.1") for _, status, by in kinds.values()]
    assert len(xs) == len(expected)  # one record a refusal, no other
    assert [
        (x["http_version"], x["status"], x["end"], x["error"][: len(by)]) for x, (*_, by) in zip(xs, expected, strict=True)
    ] == expected


async def _slow_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
    await asyncio.sleep(0.3)  # the client's close of its side reaches the recorder first
    body = b"seen: " + request.partition(b"\r\n\r\n")[2]
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()
    return True


_WHOLE = {
    "content-length": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}",
    "chunked": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"2\r\n{}\r\n0\r\n\r\n",
    "http10": b"POST /v1/chat/completions HTTP/1.0\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    "keep-alive": b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
}


@pytest.mark.parametrize("request_", list(_WHOLE))
def test_a_client_that_closes_its_side_after_a_whole_request_that_ends_the_connection_is_answered(
    raw_upstream, record, request_
) -> None:
    """A client that shuts its side (shutdown(SHUT_WR)) once its request is whole, as a script piping
    into netcat does: uvicorn closed the connection at that close, the client was never answered and
    the exchange was recorded client_disconnected. One whose request ends the connection
    (Connection: close, HTTP/1.0) is answered and recorded complete; a keep-alive client's close is
    its hang-up still (a close can't be told from a shutdown), its upstream request cancelled."""
    rec = record(raw_upstream(_slow_answer), "--no-probe", "--no-telemetry")
    host, port = rec.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_WHOLE[request_])
        s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    rec.stop()
    (x,) = rec.exchanges()
    assert x["request_body"] == b"{}"
    if request_ == "keep-alive":
        assert out == b"" and x["end"] == "client_disconnected"
    else:
        assert out.startswith(b"HTTP/1.1 200 OK\r\n") and out.endswith(b"\r\n\r\nseen: {}")
        assert (x["end"], x["status"], b"".join(x["chunks"])) == ("complete", 200, b"seen: {}")


async def _slow_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> bool:
    await asyncio.sleep(0.3)  # the client's close reaches the recorder first
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    for i in range(3):
        await asyncio.sleep(0.1)  # the client's reset of the headers' write reaches the recorder first
        event = b"data: %d\n\n" % i
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


@pytest.mark.parametrize("answer", ["stream", "whole"])
def test_a_client_that_closes_before_an_answer_that_ends_the_connection_is_not_counted_as_handed_it(
    raw_upstream, record, answer
) -> None:
    """A Connection: close client that closes its connection (not only its side) once its request is
    sent can't be told from one that half-closes: the transport is kept open and the answer written.
    Its first write (the headers) reaches the client's kernel, which answers with a reset; the next
    fails. That failing write's chunk was counted delivered (the connection's loss is heard a loop
    turn later): a whole answer was recorded complete, a stream one chunk more delivered than the
    client had. Both are now client_disconnected, no chunk delivered."""
    rec = record(raw_upstream(_slow_stream if answer == "stream" else _slow_answer), "--no-probe", "--no-telemetry")
    host, port = rec.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}")
    time.sleep(1)  # the answer's time
    rec.stop()
    (x,) = rec.exchanges()
    assert (x["end"], x["status"], x["request_body"]) == ("client_disconnected", 200, b"{}")
    assert x["delivered_chunks"] == 0 and len(x["chunks"]) == 1
