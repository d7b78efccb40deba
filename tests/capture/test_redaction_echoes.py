"""Where a response repeats the request's credentials: in its trailers too (through the real
recorder), and only the credentials: a Basic user name is no secret of its own."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from infertap.capture.redact import REDACTED
from tests.helpers import decompressed_bytes

KEY = "sk-TRAILER-SECRET-888"


@pytest.fixture
def trailer_upstream() -> Iterator[str]:
    """An upstream that answers 401 with a chunked body and quotes the key it got in a trailer."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head = data.partition(b"\r\n\r\n")[0].split(b"\r\n")
                key = next(line.split(b" ")[-1] for line in head if line.lower().startswith(b"authorization:"))
                body = b'{"error":"denied"}'
                conn.sendall(
                    b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n"
                    b"trailer: x-error-detail\r\n\r\n" + b"%x\r\n" % len(body) + body + b"\r\n0\r\n"
                    b"x-error-detail: invalid api key " + key + b"\r\n\r\n"
                )

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_a_trailer_that_repeats_the_key_is_recorded_without_it(trailer_upstream, record):
    rec = record(trailer_upstream, "--no-probe", "--no-telemetry")
    r = httpx.post(rec.url + "/v1/chat/completions", json={"model": "m"}, headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 401
    assert rec.stop() == 0
    assert KEY.encode() not in decompressed_bytes(rec.out)
    (x,) = rec.exchanges()
    assert x["response_trailers"] == [["x-error-detail", f"invalid api key {REDACTED}"]]
