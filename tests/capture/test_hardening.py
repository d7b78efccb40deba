"""Hardening: the proxy's own token, a capture that can't be written, secrets in bodies, a fuzzed reader."""

from __future__ import annotations

import base64
import functools
import json
import os
import random
import re
import shutil
import string
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests import sdk_shapes
from tests.extras import needs

needs("hypothesis", "dev")
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from infertap.capture.errors import CaptureError
from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED, Redactor
from infertap.capture.writer import CaptureWriter
from infertap.proxy.app import RecordingProxy, build_app
from tests.fake_upstream import ServerThread
from tests.helpers import decompressed_bytes

TOKEN = "proxy-token-7777"

#: `make fuzz` raises this (INFERTAP_FUZZ_EXAMPLES=5000); the default run keeps it quick.
FUZZ_EXAMPLES = int(os.environ.get("INFERTAP_FUZZ_EXAMPLES", "200"))


def test_the_proxy_token_is_required_checked_and_never_recorded_or_forwarded(fake, record):
    app, url = fake
    rec = record(url, "--auth-token", TOKEN, "--no-probe")
    body = {"tag": "t", "stream": False, "messages": []}
    assert httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10).status_code == 401
    wrong = httpx.post(f"{rec.url}/v1/chat/completions", json=body, headers={"X-Infertap-Token": "nope"}, timeout=10)
    assert wrong.status_code == 401 and sdk_shapes.openai_error(wrong.json())["error"]["type"] == "proxy_unauthorized"
    ok1 = httpx.post(f"{rec.url}/v1/chat/completions", json=body, headers={"X-Infertap-Token": TOKEN}, timeout=10)
    ok2 = httpx.post(f"{rec.url}/v1/chat/completions", json=body, headers={"Proxy-Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert ok1.status_code == ok2.status_code == 200
    rec.stop()
    assert [x["end"] for x in rec.exchanges()] == ["refused", "refused", "complete", "complete"]
    assert TOKEN.encode() not in decompressed_bytes(rec.out)
    seen = [dict(r["headers"]) for r in app.requests if r["path"] == "/v1/chat/completions"]
    assert len(seen) == 2 and all(b"x-infertap-token" not in h and b"proxy-authorization" not in h for h in seen)


def _in_process_proxy(upstream: str, writer: CaptureWriter, **kw) -> ServerThread:
    return ServerThread(build_app(RecordingProxy(upstream, writer, **kw)))


@pytest.mark.parametrize("mode", ["serve", "fail"])
def test_a_capture_that_cannot_be_written(fake, tmp_path, mode):
    """Disk full under the writer: by default the proxy keeps serving and counts what it loses;
    with --on-capture-error fail it refuses traffic instead."""
    app, url = fake
    writer = CaptureWriter(tmp_path / "cap", recorder={"kind": "test"}).open()
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, writer._fd)  # every write from now on fails with ENOSPC, as on a full disk
    os.close(full)
    body = {"tag": "x", "stream": False, "messages": []}
    with _in_process_proxy(url, writer, fail_on_capture_error=mode == "fail") as server:
        first = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=10)
        assert first.status_code == 200  # nothing had failed yet when it arrived
        deadline = __import__("time").monotonic() + 10
        while writer.error is None and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.01)
        assert isinstance(writer.error, OSError)
        second = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=10)
    writer.close()
    if mode == "serve":
        assert second.status_code == 200
    else:
        assert second.status_code == 503 and sdk_shapes.openai_error(second.json())["error"]["type"] == "capture_unavailable"
    assert writer.dropped >= 2  # both exchanges, counted, none silently


def test_a_secret_in_a_json_body_is_forwarded_but_never_recorded(fake, record):
    app, url = fake
    rec = record(url, "--no-probe")
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": False,
        "tag": "b",
        "api_key": "sk-in-body-1234",
        "extra": {"apiKey": "nested-5678", "password": 'p@ss"w'},
    }
    raw = json.dumps(body, indent=2).encode()
    assert httpx.post(f"{rec.url}/v1/chat/completions", content=raw, timeout=10).status_code == 200
    rec.stop()
    (seen,) = [r for r in app.requests if r["path"] == "/v1/chat/completions"]
    assert seen["body"] == raw  # the engine gets exactly what the client sent
    (x,) = rec.exchanges()
    stored = decompressed_bytes(rec.out)
    for secret in (b"sk-in-body-1234", b"nested-5678", b"p@ss"):
        assert secret not in stored
    assert x["request_body"] == raw.replace(b"sk-in-body-1234", b"[REDACTED]").replace(b"nested-5678", b"[REDACTED]").replace(
        json.dumps('p@ss"w')[1:-1].encode(), b"[REDACTED]"
    )  # every other byte, indentation included, as sent


secret_text = st.text(alphabet=string.ascii_letters + string.digits + "-_.~!@#$%^&*()é€", min_size=8, max_size=40)
key_names = st.sampled_from(["api_key", "API_KEY", "apiKey", "Api-Key", "access_token", "password", "client_secret", "token"])


@settings(max_examples=FUZZ_EXAMPLES, suppress_health_check=[HealthCheck.too_slow])
@given(secret=secret_text, key=key_names, depth=st.integers(0, 3), indent=st.sampled_from([None, 1, 2]), ascii=st.booleans())
def test_body_redaction_property(secret, key, depth, indent, ascii):
    def body(value: str) -> bytes:
        node: object = {key: value, "keep": "visible text"}
        for _ in range(depth):
            node = {"wrap": [node, 1]}
        return json.dumps({"model": "m", "messages": [], "payload": node}, indent=indent, ensure_ascii=ascii).encode()

    # A secret that is itself a word of the rest of the body ("messages", "REDACTED", "client_s"...) is there anyway.
    assume(secret.encode() not in body("") + REDACTED.encode())
    out = Redactor().body(body(secret))
    assert secret.encode() not in out and json.dumps(secret)[1:-1].encode() not in out
    assert b"visible text" in out and REDACTED.encode() in out
    assert json.loads(out)["model"] == "m"  # still JSON


DEEP = b"[" * 100_000 + b"]" * 100_000  # deeper than any JSON parser here goes (RecursionError)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model": "m", "api_key": "sk-torn-1234", "messages": [{"role": "user", "content": "cut he',
        b'{"api_key": "sk-nan-1234", "temperature": NaN, "x": }',
        b'{"api_key": "sk-deep-1234", "x": ' + DEEP + b"}",
        b'{"x": ' + DEEP + b', "Password" : "sk-after\\"-1234"}',
        b'{"api_key": "sk-edge-1234", "x": ' + b"[" * 990 + b"]" * 990 + b"}",  # parses: walked without recursion
    ],
)
def test_a_secret_in_a_body_that_does_not_parse_is_still_redacted(raw):
    out = Redactor().body(raw)
    assert b"-1234" not in out and REDACTED.encode() in out
    assert out.replace(REDACTED.encode(), b"") == re.sub(rb'(:\s*")(?:[^"\\]|\\.)*-1234"', rb'\1"', raw)  # nothing else changed


def test_a_deep_body_with_a_secret_is_recorded_without_it(fake, record):
    """Its redaction raised RecursionError after the exchange was forwarded: the record was lost."""
    app, url = fake
    rec = record(url, "--no-probe")
    raw = b'{"model": "m", "messages": [], "stream": false, "api_key": "sk-deep-5678", "x": ' + DEEP + b"}"
    httpx.post(f"{rec.url}/v1/chat/completions", content=raw, timeout=30)  # the fake engine can't read it either: a 500
    rec.stop()
    (x,) = rec.exchanges()
    assert b"sk-deep-5678" not in decompressed_bytes(rec.out)
    assert x["request_body"] == raw.replace(b"sk-deep-5678", REDACTED.encode())


def test_bodies_without_secret_keys_are_untouched():
    raw = b'{"model": "m", "messages": [{"role": "user", "content": "max_tokens and tokens"}]}'
    assert Redactor().body(raw) is raw
    assert Redactor().body(b"not json but api_key=1") == b"not json but api_key=1"


@functools.cache
def _segment(dictionary: bool) -> bytes:
    """A closed one-segment capture; with ``dictionary``, past 1 MiB so that its later frames use one."""
    path = Path(tempfile.mkdtemp(prefix="infertap-fuzz-")) / "cap"
    with CaptureWriter(path, recorder={"kind": "test"}) as w:
        for i in range(20):
            w.write({"type": "exchange", "id": str(i), "chunks": [b"data: %d\n\n" % i] * 5, "request_body": b"{}"})
        if dictionary:
            for i in range(40):
                w.write(
                    {
                        "type": "exchange",
                        "id": f"big{i}",
                        "chunks": [b'data: {"token": %d}\n\n' % k for k in range(2000)],
                        "request_body": b"{}",
                    }
                )
            for i in range(5):  # frames of their own, after the dictionary
                before = w.records
                w.write({"type": "exchange", "id": f"late{i}", "chunks": [b"data: late %d\n\n" % i] * 5, "request_body": b"{}"})
                while w.records == before:
                    time.sleep(0.002)
    (segment,) = CaptureReader(path).segments
    records = list(CaptureReader(path).records())
    assert any(r["type"] == "dictionary" for r in records) == dictionary
    data = segment.read_bytes()
    shutil.rmtree(path.parent)  # the bytes are what the tests use: no folder left behind in /tmp
    return data


@pytest.mark.parametrize("dictionary", [False, True], ids=["plain", "with-dictionary"])
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_reader_fails_only_with_its_documented_error_on_corrupted_segments(tmp_path_factory, data, dictionary):
    base = tmp_path_factory.mktemp("fuzz")
    original = _segment(dictionary)
    (base / "cap").mkdir()
    (base / "cap" / "000000.itap.zst").write_bytes(original)
    (segment,) = CaptureReader(base / "cap").segments
    damaged = bytearray(original)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    for _ in range(data.draw(st.integers(1, 8))):
        choice = rng.random()
        if choice < 0.6:
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        elif choice < 0.8:
            del damaged[rng.randrange(len(damaged)) :]
            if not damaged:
                damaged = bytearray(b"\0")
        else:
            at = rng.randrange(len(damaged))
            damaged[at:at] = rng.randbytes(rng.randrange(1, 64))
    segment.write_bytes(bytes(damaged))
    reader = CaptureReader(base / "cap")
    try:
        records = list(reader.records())
    except CaptureError:
        return  # the documented, clear error (it names the file)
    assert all(isinstance(r, dict) and "type" in r for r in records)


def test_secrets_reach_neither_the_capture_nor_the_logs_nor_a_traceback(fake, record):
    """Credentials in the upstream URL, headers, query and body, through a working exchange and a
    failing one: forwarded where they belong, absent from the capture's bytes and the recorder's output."""
    app, url = fake
    secrets = [b"hunter2-url-pass", b"sk-header-9876", b"q-token-5555", b"body-key-4321"]
    rec = record(url.replace("http://", "http://svc:hunter2-url-pass@"), "--no-probe")
    body = json.dumps({"model": "m", "messages": [], "stream": False, "tag": "s", "api_key": "body-key-4321"}).encode()
    ok = httpx.post(
        f"{rec.url}/v1/chat/completions?api_key=q-token-5555",
        content=body,
        timeout=10,
        headers={"Authorization": "Bearer sk-header-9876"},
    )
    echoed = httpx.post(f"{rec.url}/echo", content=b"{}", timeout=10)
    with pytest.raises(httpx.RemoteProtocolError):  # the upstream resets mid-stream: an error path, with its messages
        httpx.post(f"{rec.url}/reset", content=body, timeout=10, headers={"X-Api-Key": "sk-header-9876"})
    assert ok.status_code == 200 and echoed.status_code == 200
    rec.stop()
    # The URL's credentials became Basic auth for the engine, where the client sent none of its own.
    basic = dict((n.lower(), v) for n, v in echoed.json()["headers"])["authorization"]
    assert base64.b64decode(basic.removeprefix("Basic ")) == b"svc:hunter2-url-pass"
    stored = decompressed_bytes(rec.out)
    output = rec.proc.log_tail(1_000_000).encode()
    for secret in secrets:
        assert secret not in stored and secret not in output, secret
    assert "svc:REDACTED@" in rec.records()[0]["recorder"]["upstream"]


class _SGLangWithKey:
    """An engine whose server info holds its own api_key (SGLang's ``asdict(server_args)`` does),
    in front of the fake upstream's chat and echo routes."""

    def __init__(self, key: str) -> None:
        from tests.fake_engines import sglang_app
        from tests.fake_upstream import FakeUpstream

        self.info = sglang_app()
        self.info.routes[("GET", "/get_server_info")] = {**self.info.routes[("GET", "/get_server_info")], "api_key": key}
        self.fake = FakeUpstream()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan" or (scope["method"], scope["path"]) in self.info.routes:
            return await self.info(scope, receive, send)
        return await self.fake(scope, receive, send)


def test_credentials_reach_no_capture_with_the_probe_on_nor_where_a_response_repeats_them(record):
    """The engine's URL (a password, a token as its user) in its snapshot and messages, the engine's
    own key in its answers, headers named for a credential, query and form secrets, a body key with
    an underscore or an escaped value, and a response that echoes what the request sent."""
    secrets = {
        "url": "url-pass-3333",
        "engine": "sglang-own-key-7777",
        "x-auth-token": "xauth-secret-1111",
        "x-client-secret": "xclient-secret-2222",
        "client_secret query": "q-client-4444",
        "amz query": "amz-signature-5555",
        "form": "form-password-6666",
        "x_api_key body": "body-underscore-8888",
        "escaped body": "body-escaped-9999",
        "body echoed": "body-echoed-1010",
        "form echoed": "form-echoed-1212",
    }
    with ServerThread(_SGLangWithKey(secrets["engine"])) as up:
        rec = record(up.url.replace("http://", f"http://svc:{secrets['url']}@"), "--probe-interval", "1")
        headers = {"X-Auth-Token": secrets["x-auth-token"], "x-client-secret": secrets["x-client-secret"]}
        query = f"client_secret={secrets['client_secret query']}&X-Amz-Signature={secrets['amz query']}"
        chat = {"model": "m", "messages": [], "stream": False, "x_api_key": secrets["x_api_key body"]}
        assert httpx.post(f"{rec.url}/v1/chat/completions?{query}", json=chat, headers=headers, timeout=10).status_code == 200
        escaped = (
            b'{"model": "m", "stream": false, "api_key": "' + secrets["escaped body"].replace("-", "\\u002d").encode() + b'"}'
        )
        assert httpx.post(f"{rec.url}/v1/chat/completions", content=escaped, timeout=10).status_code == 200
        form = {"content-type": "application/x-www-form-urlencoded", **headers}
        echoed = httpx.post(f"{rec.url}/echo", content=f"user=me&password={secrets['form']}", headers=form, timeout=10)
        assert secrets["x-auth-token"] in echoed.text  # the upstream did repeat it
        # A body's own secret repeated in the response (a 400 quoting the request) is replaced there too.
        repeated = httpx.post(f"{rec.url}/echo-body", json={"model": "m", "api_key": secrets["body echoed"]}, timeout=10)
        assert secrets["body echoed"] in repeated.text
        form_back = httpx.post(
            f"{rec.url}/echo-body", content=f"client_secret={secrets['form echoed']}", headers=form, timeout=10
        )
        assert secrets["form echoed"] in form_back.text
        rec.stop()
    stored = decompressed_bytes(rec.out)
    output = rec.proc.log_tail(1_000_000).encode()
    basic = base64.b64encode(f"svc:{secrets['url']}".encode())
    for what, secret in [*secrets.items(), ("the Basic token made of the URL", basic.decode())]:
        assert secret.encode() not in stored and secret.encode() not in output, what
    (engine,) = [r for r in rec.records() if r["type"] == "engine"]  # the probe ran
    assert engine["raw"]["/get_server_info"]["api_key"] == REDACTED and "svc:REDACTED@" in engine["url"]
