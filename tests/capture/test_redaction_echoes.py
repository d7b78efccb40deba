"""Where a response repeats the request's credentials: in its trailers too (through the real
recorder), and only the credentials: a Basic user name is no secret of its own."""

from __future__ import annotations

import base64
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from infertap.capture.redact import REDACTED, Redactor
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


def test_a_basic_user_name_is_kept_in_the_response_and_the_password_is_not(fake, record):
    """A user name beside a password is no secret: user ``assistant`` left ``"role": "[REDACTED]"``
    in every answer, and an upstream URL's user ``chat.completion`` the ``object``. The password
    and the whole Basic token still go wherever the response repeats them."""
    app, url = fake
    password, upstream_password = "hunter2-password-1", "upstream-pass-22"
    rec = record(url.replace("http://", f"http://chat.completion:{upstream_password}@"), "--no-probe", "--no-telemetry")
    auth = ("assistant", password)
    body = {"model": "m", "stream": False, "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(rec.url + "/v1/chat/completions", json=body, auth=auth).status_code == 200
    assert httpx.post(rec.url + "/echo", json=body, auth=auth).status_code == 200
    assert rec.stop() == 0
    data = decompressed_bytes(rec.out)
    token = base64.b64encode(f"assistant:{password}".encode())
    for secret in (password.encode(), upstream_password.encode(), token):
        assert secret not in data, secret
    chat, echo = rec.exchanges()
    answer = b"".join(chat["chunks"])
    assert b'"role": "assistant"' in answer and b'"object": "chat.completion"' in answer
    assert ["authorization", f"Basic {REDACTED}"] in chat["request_headers"]
    assert token not in b"".join(echo["chunks"]) and REDACTED.encode() in b"".join(echo["chunks"])


@pytest.mark.parametrize(
    ("header", "url", "secrets", "kept"),
    [
        (
            ("Authorization", "Basic " + base64.b64encode(b"assistant:hunter2-password-1").decode()),
            None,
            ["hunter2-password-1"],
            "assistant",
        ),
        (("Authorization", "Basic " + base64.b64encode(b"sk-user-token-only:").decode()), None, ["sk-user-token-only"], None),
        (None, "http://completions:pw-secret-1234@127.0.0.1:8080", ["pw-secret-1234"], "completions"),
        (None, "http://sk-token-as-user-99@127.0.0.1:8080", ["sk-token-as-user-99"], None),
    ],
)
def test_what_a_credential_gives_echoes_to_look_for(header, url, secrets, kept):
    r = Redactor()
    found = r.url_credentials(url) if url else set()
    if header:
        r.header_pairs([header], found)
    record = {"chunks": [f"/v1/chat/{kept} {' '.join(secrets)}".encode()], "response_headers": [], "error": None}
    Redactor.echoes(record, found)
    text = record["chunks"][0].decode()
    assert all(s not in text for s in secrets)
    assert kept is None or kept in text
