"""What an upstream or a client can send that is odd but legal (or not): passed through exactly, recorded."""

from __future__ import annotations

import gzip
import json
import socket
import time

import httpx
import pytest

from infertap.apis import read_response


def test_gzip_bodies_are_recorded_as_sent_and_decoded_for_analysis(fake, record):
    app, url = fake
    rec = record(url, "--no-probe")
    with httpx.stream("POST", f"{rec.url}/gzip", json={}, timeout=10) as r:
        raw = b"".join(r.iter_raw())
    assert r.headers["content-encoding"] == "gzip" and gzip.decompress(raw).startswith(b'{"choices"')
    rec.stop()
    (x,) = rec.exchanges()
    assert b"".join(x["chunks"]) == raw  # still compressed, byte for byte
    assert read_response(x).text == "zipped"


def test_a_5xx_html_body_and_a_large_response_pass_through(fake, record):
    app, url = fake
    rec = record(url, "--no-probe")
    err = httpx.post(f"{rec.url}/html500", json={}, timeout=10)
    assert err.status_code == 500 and err.headers["content-type"] == "text/html" and b"<h1>500" in err.content
    big = httpx.post(f"{rec.url}/big", json={"blocks": 160}, timeout=60)  # 10 MiB
    assert len(big.content) == 160 * 65536
    rec.stop()
    e, b = rec.exchanges()
    assert (e["status"], e["end"]) == (500, "complete") and b"".join(e["chunks"]) == err.content
    assert read_response(e).error == "the body is not JSON"
    assert sum(len(c) for c in b["chunks"]) == 160 * 65536 and b["end"] == "complete"


def test_malformed_sse_and_invalid_utf8_are_kept_exactly(fake, record):
    app, url = fake
    rec = record(url, "--no-probe")
    with httpx.stream("POST", f"{rec.url}/malformed", json={}, timeout=10) as r:
        raw = b"".join(r.iter_raw())
    rec.stop()
    (x,) = rec.exchanges()
    assert b"".join(x["chunks"]) == raw and b"\xff\xfe" in raw
    parsed = read_response(x)
    assert parsed.text == "ok" and parsed.error == "an SSE event is not JSON"  # read what can be read, say what can't


def test_an_invalid_json_body_is_forwarded_untouched(fake, record):
    app, url = fake
    rec = record(url, "--no-probe")
    body = b'{"model": "m", "messages": [,,]'  # the engine decides what to say about it
    httpx.post(f"{rec.url}/echo", content=body, timeout=10)
    rec.stop()
    (seen,) = [r for r in app.requests if r["path"] == "/echo"]
    assert seen["body"] == body and rec.exchanges()[0]["request_body"] == body


def _raw_http(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(payload)  # the server closes when done (HTTP/1.0, or "Connection: close" last)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def test_http10_and_pipelined_clients(fake, record):
    app, url = fake
    rec = record(url, "--no-probe")
    port = int(rec.url.rsplit(":", 1)[1])
    old = _raw_http(port, b"GET /status/200 HTTP/1.0\r\nHost: x\r\n\r\n")
    assert old.startswith(b"HTTP/1.1 200") and b'"fake 200"' in old
    two = _raw_http(
        port, b"GET /status/201 HTTP/1.1\r\nHost: x\r\n\r\nGET /status/202 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert two.index(b"201") < two.index(b"202")  # answered in order
    rec.stop()
    xs = rec.exchanges()
    assert [(x["path"], x["status"], x["http_version"]) for x in xs] == [
        ("/status/200", 200, "1.0"),
        ("/status/201", 201, "1.1"),
        ("/status/202", 202, "1.1"),
    ]
    assert all(json.loads(b"".join(x["chunks"]))["error"]["code"] == x["status"] for x in xs)


_ONE_LINE = b'{"model": "m", "tag": "close-only"}'
_PRETTY = json.dumps(
    {"model": "m", "tag": "close-only", "messages": [{"role": "user", "content": "x" * 4000}]}, indent=2
).encode()


@pytest.mark.parametrize("body", [_ONE_LINE, _PRETTY], ids=["one-line", "4-kib-over-lines"])
@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_a_body_ended_only_by_the_client_closing_its_side_is_refused_before_the_upstream_sees_it(fake, record, version, body):
    """A request's body ends by its length (RFC 9112 6.3): one sent with neither Content-Length nor
    chunked encoding, its end marked by the client shutting its side, went to the upstream without
    its body (an engine ran a request the client never sent whole, recorded 'client disconnected')
    before its bytes were refused. It is now judged where its head ends: the upstream gets nothing,
    and one record keeps the request as sent, every byte of its body."""
    app, url = fake
    rec = record(url, "--no-probe")
    port = int(rec.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"POST /echo-body HTTP/{version}\r\nHost: x\r\n\r\n".encode() + body)
        s.shutdown(socket.SHUT_WR)  # the only mark of the body's end
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400") and b"a request's body ends by its length, not by a close" in answer
    assert [r for r in app.requests if r["path"] == "/echo-body"] == []  # the engine saw nothing of it
    # The same body with its length: forwarded whole, the engine's answer (which quotes it) relayed, recorded whole.
    head = f"POST /echo-body HTTP/{version}\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n"
    framed = _raw_http(port, head.encode() + body)
    assert b"bad request: " + body in framed and b"ends by its length" not in framed
    assert [r["body"] for r in app.requests if r["path"] == "/echo-body"] == [body]
    rec.stop()
    refused, complete = rec.exchanges()  # one record each: no bodiless forward recorded 'client disconnected'
    assert (refused["end"], refused["status"], refused["method"], refused["path"]) == ("refused", 400, "POST", "/echo-body")
    assert (refused["request_body"], refused["http_version"]) == (body, version)  # every byte, the client's version
    assert "refused_head" not in refused and ["host", "x"] in refused["request_headers"]
    assert refused["error"].startswith("the recorder refused the request (its body came with neither Content-Length")
    assert (complete["end"], complete["request_body"], complete["http_version"]) == ("complete", body, version)


def test_a_body_sent_unframed_is_kept_to_the_body_limit_and_refused_past_it_or_the_body_timeout(fake, record):
    """Kept only while it comes: a body of --max-body-mb is kept whole to the close, one a byte past
    it gets 413, its size recorded, not its bytes; a client that neither closes nor sends more gets
    --body-timeout's 408. None reaches the upstream."""
    app, url = fake
    rec = record(url, "--no-probe", "--body-timeout", "0.5", "--max-body-mb", "1")
    port = int(rec.url.rsplit(":", 1)[1])
    head = b"POST /echo-body HTTP/1.1\r\nHost: x\r\n\r\n"
    answers = []
    for size in (1024 * 1024, 1024 * 1024 + 1):  # the limit, and a byte past it (the proxy reads it all: no reset)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head + b"{" + b"x" * (size - 1))
            s.shutdown(socket.SHUT_WR)
            answers.append(b"")
            while chunk := s.recv(65536):
                answers[-1] += chunk
    stalled = _raw_http(port, head + b'{"tag": "stalls"')  # never closes its side
    rec.stop()
    assert answers[0].startswith(b"HTTP/1.1 400") and answers[1].startswith(b"HTTP/1.1 413")
    assert answers[1].endswith(b"is over 1048576 bytes.")
    assert stalled.startswith(b"HTTP/1.1 408") and stalled.endswith(b"its body idle for 0.5 s.")
    assert app.requests == []
    kept, too_large, timed_out = sorted(
        rec.exchanges(), key=lambda x: x["seq"]
    )  # a 1 MiB body is scrubbed off the loop: written late
    assert (kept["end"], kept["status"], kept["request_body"]) == ("refused", 400, b"{" + b"x" * (1024 * 1024 - 1))
    assert "request_body_size" not in kept
    assert (too_large["end"], too_large["status"], too_large["request_body"]) == ("refused", 413, b"")
    assert too_large["request_body_size"] == 1024 * 1024 + 1
    assert (timed_out["end"], timed_out["status"], timed_out["request_body"]) == ("refused", 408, b'{"tag": "stalls"')


def test_a_slow_reader_slows_the_upstream_through_the_proxy(fake, record):
    """Backpressure end to end: a client that stops reading stops the upstream (its sends wait)
    instead of the proxy buffering the rest; reading again delivers and records every byte."""
    app, url = fake
    rec = record(url, "--no-probe")
    blocks = 640  # 40 MiB
    with socket.create_connection(("127.0.0.1", int(rec.url.rsplit(":", 1)[1]))) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        body = json.dumps({"blocks": blocks}).encode()
        sock.sendall(
            b"POST /big HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        sock.recv(1024)  # the headers arrive; then the client reads nothing for a while
        time.sleep(1.5)
        stalled_at = app.big_sent
        total = 0
        while total < blocks * 65536:
            data = sock.recv(1 << 20)
            if not data:
                break
            total += len(data)
    rec.stop()
    assert stalled_at < 16 * 2**20, f"the upstream sent {stalled_at / 2**20:.1f} MiB to a client that read nothing"
    (x,) = rec.exchanges()
    assert x["end"] == "complete" and sum(len(c) for c in x["chunks"]) == blocks * 65536


def test_a_client_too_slow_to_take_the_stream_is_recorded_and_stats_says_its_times_include_it(fake, record):
    """The proxy reads the engine's next chunk only once the last is handed on: while a client reads
    nothing, the chunks' times run late. The wait is kept (``client_wait_ns``) and ``stats`` says so;
    a client that keeps up leaves none."""
    from click.testing import CliRunner

    from infertap.cli import cli

    app, url = fake
    rec = record(url, "--no-probe")
    ask = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    slow = json.dumps({**ask, "tag": "s" * 4000, "n_chunks": 2000}).encode()  # ~8 KiB an event, 16 MiB
    with socket.create_connection(("127.0.0.1", int(rec.url.rsplit(":", 1)[1]))) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(slow), slow)
        )
        sock.recv(1024)
        time.sleep(1.5)  # reads nothing: the buffers fill within a few ms, then the proxy waits
        received = b""
        while not received.endswith(b"\r\n0\r\n\r\n"):  # the chunked body's last chunk
            data = sock.recv(1 << 20)
            assert data, f"the stream ended early, after {len(received)} bytes"
            received += data
    assert b"data: [DONE]" in received
    kept_up = httpx.post(f"{rec.url}/v1/chat/completions", json={**ask, "tag": "f", "n_chunks": 5}, timeout=10)
    assert kept_up.status_code == 200
    rec.stop()
    held, fast = rec.exchanges()
    assert held["end"] == "complete" and len(held["chunks"]) >= 2000
    assert held["client_wait_ns"] >= 500_000_000, held.get("client_wait_ns")  # of the 1.5 s it read nothing
    assert "client_wait_ns" not in fast
    shown = CliRunner().invoke(cli, ["stats", str(rec.out), "--json"])
    assert shown.exit_code == 0, shown.output
    (group,) = json.loads(shown.output)["groups"]
    assert group["client_wait"]["exchanges"] == 1 and group["client_wait"]["max_ms"] == held["client_wait_ns"] / 1e6
    text = CliRunner().invoke(cli, ["stats", str(rec.out)], env={"COLUMNS": "200"}).output
    assert "1 exchange waited for its client to take the body" in " ".join(text.split())


def test_the_recorders_event_loop_lag_is_in_every_footer_and_in_info(fake, record):
    """A capture says how coarse its own timestamps may be: the recorder's event-loop lag."""
    from click.testing import CliRunner

    from infertap.capture.reader import CaptureReader
    from infertap.cli import cli

    app, url = fake
    rec = record(url, "--no-probe")
    for i in range(20):
        httpx.post(f"{rec.url}/v1/chat/completions", json={"tag": f"l{i}", "n_chunks": 5, "pace_ms": 20}, timeout=10)
    rec.stop()
    (footer,) = [r for r in CaptureReader(rec.out).records() if r["type"] == "footer"]
    lag = footer["loop_lag"]
    assert lag["samples"] >= 20 and sum(lag["counts"]) == lag["samples"] and lag["max_ms"] >= 0
    assert lag["p50_at_most_ms"] is not None and lag["p50_at_most_ms"] <= lag["p99_at_most_ms"]
    shown = CliRunner().invoke(cli, ["info", str(rec.out)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and f"({lag['samples']} samples)" in shown.output and "recorder loop lag" in shown.output
