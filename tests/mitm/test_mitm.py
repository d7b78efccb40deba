"""infertap mitm: a real mitmproxy process in front of a local TLS upstream that streams."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
import time

import httpx
import pytest

from tests.extras import needs

OpenAI = needs("openai", "dev").OpenAI

from infertap.capture.info import summarize
from infertap.capture.reader import CaptureReader
from infertap.launch import free_port
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import decompressed_bytes
from tests.mitm.test_import_machine import ANSWER
from tests.tls import self_signed

SECRET = "sk-mitm-secret-4242"

ANSWER_TEXT = json.dumps(ANSWER)  # a chat answer the openai SDK reads


@pytest.fixture
def tls_upstream(tmp_path):
    certfile, keyfile = self_signed(tmp_path)
    app = FakeUpstream()
    with ServerThread(app, certfile=str(certfile), keyfile=str(keyfile)) as server:
        yield app, server.url


def test_https_forward_proxy_records_streams_and_redacts(start_mitm, tls_upstream):
    app, url = tls_upstream
    mitm = start_mitm("--set", "ssl_insecure=true", "--label", "via=mitm")
    assert f"CA certificate clients must trust: {mitm.ca}" in mitm.log.read_text()
    received = b""
    trust = ssl.create_default_context(cafile=str(mitm.ca))
    with httpx.Client(proxy=mitm.url, verify=trust, timeout=30) as client:
        body = {
            "model": "fake",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "tag": "raw",
            "n_chunks": 30,
            "pace_ms": 5,
        }
        with client.stream("POST", f"{url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {SECRET}"}) as r:
            assert r.status_code == 200
            for chunk in r.iter_raw():
                received += chunk
        sdk = OpenAI(base_url=f"{url}/v1", api_key=SECRET, http_client=httpx.Client(proxy=mitm.url, verify=trust), max_retries=0)
        text = "".join(
            c.choices[0].delta.content or ""
            for c in sdk.chat.completions.create(
                model="fake", messages=[{"role": "user", "content": "sdk"}], stream=True, extra_body={"tag": "sdk", "n_chunks": 5}
            )
            if c.choices
        )
        client.get(f"{url}/not-an-llm-path")  # not recorded: the default match is LLM API paths
    assert text == "".join(f"sdk:{i} " for i in range(5))
    mitm.stop()
    xs = mitm.exchanges()
    assert [json.loads(x["request_body"])["tag"] for x in xs] == ["raw", "sdk"]
    raw = xs[0]
    assert b"".join(raw["chunks"]) == received and received.count(b"raw:") == 30
    assert len(raw["chunks"]) > 1 and raw["chunk_ns"] == sorted(raw["chunk_ns"]) and raw["headers_ns"] <= raw["chunk_ns"][0]
    assert (
        raw["upstream"] == url.replace("https://", "https://").rstrip("/") and raw["status"] == 200 and raw["end"] == "complete"
    )
    assert {n.lower(): v for n, v in raw["request_headers"]}["authorization"] == "Bearer [REDACTED]"
    assert SECRET.encode() not in decompressed_bytes(mitm.out)
    info = summarize(mitm.out)
    assert info["closed_cleanly"] and info["labels"] == {"via": "mitm"} and info["recorders"] == ["mitm"]


def test_a_client_that_does_not_trust_the_ca_fails_and_nothing_is_recorded(start_mitm, tls_upstream):
    app, url = tls_upstream
    mitm = start_mitm("--set", "ssl_insecure=true")
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"{url}/v1/chat/completions", json={"tag": "x"}, proxy=mitm.url, timeout=10)  # verifies against certifi
    mitm.stop()
    assert mitm.exchanges() == [] and summarize(mitm.out)["closed_cleanly"]
    assert app.requests == []


def test_mitm_and_record_keep_the_same_bytes_of_the_same_traffic(start_mitm, fake, record):
    app, url = fake
    rec = record(url, "--no-probe")
    mitm = start_mitm("--mode", f"reverse:{url}")
    bodies = [{"model": "fake", "messages": [{"role": "user", "content": "same"}], "stream": True, "tag": "same", "n_chunks": 12}]
    results = {}
    for name, base in (("record", rec.url), ("mitm", mitm.url)):
        with httpx.stream(
            "POST", f"{base}/v1/chat/completions", json=bodies[0], headers={"Authorization": f"Bearer {SECRET}"}, timeout=30
        ) as r:
            results[name] = b"".join(r.iter_raw())
    rec.stop()
    mitm.stop()
    (a,), (b,) = rec.exchanges(), mitm.exchanges()
    assert results["record"] == results["mitm"]
    assert a["request_body"] == b["request_body"]
    assert b"".join(a["chunks"]) == b"".join(b["chunks"]) == results["mitm"]
    assert (a["method"], a["path"], a["status"], a["end"]) == (b["method"], b["path"], b["status"], b["end"])
    auth = [{n.lower(): v for n, v in x["request_headers"]}["authorization"] for x in (a, b)]
    assert auth == ["Bearer [REDACTED]"] * 2
    assert set(a) <= set(b) | {"proxy_generated"}


def test_import_a_har_and_a_mitmproxy_flow_file(tmp_path):
    from click.testing import CliRunner
    from mitmproxy import io
    from mitmproxy.test import tflow

    from infertap.cli import cli

    har = {
        "log": {
            "version": "1.2",
            "entries": [
                {
                    "startedDateTime": "2026-11-29T10:00:00.000Z",
                    "time": 120.0,
                    "request": {
                        "method": "POST",
                        "url": "https://api.example.com/v1/chat/completions?key=HARSECRET",
                        "httpVersion": "HTTP/1.1",
                        "headers": [
                            {"name": "Authorization", "value": f"Bearer {SECRET}"},
                            {"name": "Content-Type", "value": "application/json"},
                        ],
                        "postData": {"mimeType": "application/json", "text": '{"model": "gpt", "messages": []}'},
                    },
                    "response": {
                        "status": 200,
                        "headers": [{"name": "Content-Type", "value": "application/json"}],
                        "content": {"size": len(ANSWER_TEXT), "mimeType": "application/json", "text": ANSWER_TEXT},
                    },
                    "timings": {"send": 1, "wait": 80, "receive": 39},
                },
                {
                    "startedDateTime": "2026-11-29T10:00:01.000Z",
                    "time": 5.0,
                    "request": {"method": "GET", "url": "https://example.com/logo.png", "httpVersion": "HTTP/1.1", "headers": []},
                    "response": {"status": 200, "headers": [], "content": {"size": 0, "text": ""}},
                    "timings": {},
                },
            ],
        }
    }
    (tmp_path / "a.har").write_text(json.dumps(har))
    runner = CliRunner()
    result = runner.invoke(cli, ["import", str(tmp_path / "a.har"), "--out", str(tmp_path / "har")])
    assert (
        result.exit_code == 0 and "imported 1 exchanges" in result.output and "1 requests to other paths skipped" in result.output
    )
    (x,) = CaptureReader(tmp_path / "har").exchanges()
    assert x["imported"] == "har" and x["request_body"] == b'{"model": "gpt", "messages": []}'
    assert x["query"] == "key=[REDACTED]" and x["headers_ns"] == 81_000_000 and x["end_ns"] == 120_000_000
    assert SECRET.encode() not in decompressed_bytes(tmp_path / "har") and b"HARSECRET" not in decompressed_bytes(
        tmp_path / "har"
    )

    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/completions"
    flow.request.headers["x-api-key"] = SECRET
    with open(tmp_path / "flows", "wb") as f:
        io.FlowWriter(f).add(flow)
    result = runner.invoke(cli, ["import", str(tmp_path / "flows"), "--out", str(tmp_path / "fl")])
    assert result.exit_code == 0, result.output
    (y,) = CaptureReader(tmp_path / "fl").exchanges()
    assert y["imported"] == "mitmproxy" and y["path"] == "/v1/completions" and y["chunks"] == [flow.response.raw_content]
    assert SECRET.encode() not in decompressed_bytes(tmp_path / "fl")
    (tmp_path / "junk.har").write_text("{not json")
    bad = runner.invoke(cli, ["import", str(tmp_path / "junk.har"), "--out", str(tmp_path / "bad")])
    assert bad.exit_code == 1 and "not valid JSON" in bad.output
    (tmp_path / "junk.bin").write_bytes(b"\x00\x01garbage")
    bad = runner.invoke(cli, ["import", str(tmp_path / "junk.bin"), "--out", str(tmp_path / "bad2")])
    assert bad.exit_code == 1 and "not a readable mitmproxy flow file" in bad.output
    (tmp_path / "empty.flow").write_bytes(b"")  # mitmproxy reads it as no flows: an import of nothing, exit 0
    bad = runner.invoke(cli, ["import", str(tmp_path / "empty.flow"), "--out", str(tmp_path / "bad3")])
    assert bad.exit_code == 1 and "empty file" in bad.output and not (tmp_path / "bad3").exists()


def test_sigkill_of_mitm_keeps_what_was_completed(start_mitm, fake):
    app, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}")
    for i in range(20):
        r = httpx.post(f"{mitm.url}/v1/chat/completions", json={"tag": f"k{i}", "stream": False, "messages": []}, timeout=10)
        assert r.status_code == 200
    time.sleep(0.3)  # beyond the writer's 5 ms gathering window
    mitm.proc.send_signal(signal.SIGKILL)
    mitm.proc.wait(10)
    reader = CaptureReader(mitm.out)
    tags = [json.loads(x["request_body"])["tag"] for x in reader.exchanges()]
    assert tags == [f"k{i}" for i in range(20)]
    assert reader.closed_cleanly is False


def test_the_terminal_closing_ends_mitm_with_its_capture_closed(start_mitm, fake):
    """SIGHUP (the terminal closed, ssh gone) killed mitm before the capture's footer, as it did record."""
    app, url = fake
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # mitm inherits it: not under nohup
    try:
        mitm = start_mitm("--mode", f"reverse:{url}")
    finally:
        signal.signal(signal.SIGHUP, previous)
    for i in range(3):
        r = httpx.post(f"{mitm.url}/v1/chat/completions", json={"tag": f"h{i}", "stream": False, "messages": []}, timeout=10)
        assert r.status_code == 200
    mitm.proc.send_signal(signal.SIGHUP)
    assert mitm.proc.wait(30) == 0
    reader = CaptureReader(mitm.out)
    assert [json.loads(x["request_body"])["tag"] for x in reader.exchanges()] == ["h0", "h1", "h2"]
    assert reader.closed_cleanly is True


def test_har_entries_that_are_not_exchanges_are_named_and_the_rest_imported(tmp_path):
    from click.testing import CliRunner

    from infertap.analysis import Analysis
    from infertap.cli import cli

    good = {
        "startedDateTime": "2026-11-29T10:00:00.000Z",
        "time": 10.0,
        "request": {"method": "POST", "url": "https://x.test/v1/chat/completions", "headers": [], "postData": {"text": "{}"}},
        "response": {"status": 200, "headers": [], "content": {"text": ANSWER_TEXT}},
        "timings": {"send": 1, "wait": 5},
    }
    bad = [
        "not an entry",
        {**good, "startedDateTime": None},
        {k: v for k, v in good.items() if k != "startedDateTime"},
        {**good, "request": "POST /v1/chat/completions"},
        {**good, "request": {**good["request"], "headers": [{"value": "no name"}]}},
        {**good, "request": {**good["request"], "postData": {"encoding": "base64", "text": "abc"}}},  # bad padding
        {**good, "timings": {"send": "soon"}},
        {**good, "time": [1]},
        {**good, "response": {**good["response"], "status": "200"}},
        {**good, "response": {**good["response"], "content": {"text": 5}}},
    ]
    entries = [good, *bad, {**good, "startedDateTime": "2026-11-29T10:00:01.000Z"}]
    (tmp_path / "odd.har").write_text(json.dumps({"log": {"entries": entries}}))
    result = CliRunner().invoke(cli, ["import", str(tmp_path / "odd.har"), "--out", str(tmp_path / "cap")])
    assert result.exit_code == 0, result.output
    assert "imported 2 exchanges" in result.output
    assert f"{len(bad)} HAR entries could not be read as exchanges" in result.output and "(first: entry 1: " in result.output
    with Analysis([str(tmp_path / "cap")], cache_dir=tmp_path / "cache") as a:
        assert a.count("exchanges") == 2
    for log in ({"entries": {"a": 1}}, {"entries": None}, [1]):
        (tmp_path / "no.har").write_text(json.dumps({"log": log}))
        refused = CliRunner().invoke(cli, ["import", str(tmp_path / "no.har"), "--out", str(tmp_path / "no")])
        assert refused.exit_code == 1 and "not a HAR file" in refused.output


def test_a_request_to_an_engine_that_is_down_is_recorded_not_lost(start_mitm):
    """mitmproxy connects to the upstream before reading a request by default: with the engine
    down, the client got a bare disconnect and nothing was recorded. infertap mitm connects lazily."""
    mitm = start_mitm("--mode", f"reverse:http://127.0.0.1:{free_port()}", "--no-telemetry")
    r = httpx.post(f"{mitm.url}/v1/chat/completions", json={"messages": [], "tag": "down"}, timeout=10)
    assert r.status_code == 502
    mitm.stop()
    (x,) = mitm.exchanges()
    assert x["end"] == "upstream_error" and x["status"] is None and json.loads(x["request_body"])["tag"] == "down"


def test_a_listen_address_in_use_is_refused_before_the_capture_opens(tmp_path, fake, record):
    """mitmproxy says so only once started: the capture had opened and an unclosed empty run was
    appended to it (a capture that had closed cleanly no longer had)."""
    import socket

    proxy = record(fake[1])
    with httpx.Client() as client:
        client.post(f"{proxy.url}/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    proxy.stop()
    before = sorted((p.name, p.read_bytes()) for p in proxy.out.iterdir())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for out in (proxy.out, tmp_path / "new"):
            said = subprocess.run(
                [sys.executable, "-m", "infertap", "mitm", "--listen", f"127.0.0.1:{port}", "--out", str(out), "--no-telemetry"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert said.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in said.stderr, said.stderr
    assert sorted((p.name, p.read_bytes()) for p in proxy.out.iterdir()) == before
    assert summarize(proxy.out)["closed_cleanly"] and not (tmp_path / "new").exists()


def test_the_start_line_tells_a_reverse_proxys_clients_its_base_url_not_a_proxy(start_mitm, fake):
    """In reverse mode `mitm` said "e.g. HTTPS_PROXY=http://HOST:PORT", as in regular mode: a client
    so set sends CONNECT to a reverse proxy, which can't serve it. It names the base URL instead."""
    _, url = fake
    reverse, regular = start_mitm("--mode", f"reverse:{url}"), start_mitm()
    reverse.stop()
    regular.stop()
    said = reverse.log.read_text()
    assert f"OPENAI_BASE_URL={reverse.url}/v1 ANTHROPIC_BASE_URL={reverse.url}" in said and "HTTPS_PROXY" not in said
    assert f"HTTPS_PROXY={regular.url}" in regular.log.read_text()


def test_mitm_stores_request_header_names_lowercase_as_record_does(start_mitm, fake):
    """mitmproxy hands an HTTP/1 request's names on as the client wrote them; the capture stores them
    lowercase, as record (and import) store them, so that a capture reads alike whoever recorded it.
    The response's names are kept as received, as record keeps them."""
    app, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", mitmdump=True)
    sent = {"X-Title": "My App", "Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"}
    r = httpx.post(f"{mitm.url}/v1/chat/completions", content=b'{"stream": false}', headers=sent, timeout=10)
    assert r.status_code == 200
    mitm.stop()
    (x,) = mitm.exchanges()
    names = [n for n, _ in x["request_headers"]]
    assert {"x-title", "authorization", "content-type"} <= set(names) and names == [n.lower() for n in names]
    got = dict(x["request_headers"])
    assert got["x-title"] == "My App" and got["authorization"] == "Bearer [REDACTED]"  # values as sent, redacted
