"""Interim responses (1xx) from an HTTP/1.1 upstream through `infertap mitm`. mitmproxy (12.3)
reads a 103 Early Hints as the response itself (mitmproxy#2229): it hands it to the client as the
final one and never reads the 200 after it, which no addon can change. The addon recorded that
as a `complete` exchange of status 103; it is now an `interim` response and a `proxy_error`."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from tests.fake_upstream import raw_upstream

HINT = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"


@pytest.fixture
def hinting_upstream() -> Iterator[str]:
    """An HTTP/1.1 upstream that sends a 103 Early Hints, then its 200, and closes."""

    def answer(conn: socket.socket, head: bytes) -> None:
        conn.sendall(HINT)
        time.sleep(0.05)  # the 200 in a read of its own
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        time.sleep(0.2)

    with raw_upstream(answer) as url:
        yield url


def test_an_early_hint_mitmproxy_takes_for_the_response_is_recorded_as_interim(start_mitm, hinting_upstream):
    mitm = start_mitm("--mode", f"reverse:{hinting_upstream}", "--no-telemetry")
    host, port = mitm.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        got = b""
        while chunk := s.recv(65536):
            got += chunk
    mitm.stop()
    assert got == HINT  # today's mitmproxy: the hint as the answer, the 200 never read
    (x,) = mitm.exchanges()
    assert (x["status"], x["response_headers"], x["headers_ns"], x["chunks"]) == (None, None, None, [])
    ((hint),) = x["interim"]
    assert (hint["status"], hint["headers"], hint["forwarded"]) == (103, [["Link", "</style.css>; rel=preload"]], True)
    assert 0 <= hint["ns"] <= x["end_ns"]
    assert x["end"] == "proxy_error" and "interim 103" in x["error"]
