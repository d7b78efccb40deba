"""Bytes a client sent that the recorder never read as a request: each leaves a record saying they
came, what they were and when (the recorder in-process: ``in_process``, its clock the test's)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time
from typing import Any

import pytest

from infertap.capture.redact import REDACTED
from tests.fake_upstream import ServerThread, sse_upstream
from tests.proxy.in_process import InProcessRecorder, read_all

_STREAM = json.dumps({"stream": True, "n_chunks": 5, "tag": "t", "pace_ms": 100}).encode()  # half a second
_AFTER = (
    b"GET /v1/models?key=sk-query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-secret\r\n\r\n"
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
)


def _reset(s: socket.socket) -> None:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # an RST, not a FIN


@pytest.mark.parametrize("after", [_AFTER, b"\r\n"], ids=["two-requests", "an-empty-line"])
@pytest.mark.parametrize("read", ["in-its-read", "in-a-later-read"])
@pytest.mark.parametrize("ends", ["connection-close", "http10"])
def test_bytes_after_a_request_that_ends_the_connection_are_recorded_never_answered(fake, in_process, ends, read, after):
    """RFC 9112 9.6 lets a server ignore what follows a request that ends the connection, and the
    parser did (uvicorn's lenient_data_after_close): the requests pipelined behind it were dropped
    without a record. They are now one record, refused, never answered, with the request they
    begin (method, path, its first KiB of head, credentials redacted) and how many bytes came;
    nothing reaches the engine. Empty lines after a body (RFC 9112 2.2) are nothing sent."""
    app, _ = fake
    rec = in_process()
    version, extra = (b"1.0", b"") if ends == "http10" else (b"1.1", b"Connection: close\r\n")
    first = b"POST /v1/chat/completions HTTP/%s\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n%s" % (
        version,
        extra,
        len(_STREAM),
        _STREAM,
    )
    with rec.connect() as s:
        if read == "in-its-read":
            s.sendall(first + after)
            rec.read()
        else:
            s.sendall(first)
            rec.read()
            s.sendall(after)  # while the stream goes on
            rec.read()
        answer = read_all(s)
    xs = sorted(rec.stop(), key=lambda x: x["seq"])
    assert answer.count(b"HTTP/1.1 ") == 1 and b"[DONE]" in answer  # the stream whole, nothing else
    assert [r["path"] for r in app.requests] == ["/v1/chat/completions"]
    assert (xs[0]["end"], xs[0]["status"], xs[0]["request_body"]) == ("complete", 200, _STREAM)
    if after == b"\r\n":
        assert len(xs) == 1
        return
    (refused,) = xs[1:]
    assert (refused["end"], refused["status"], refused["chunks"], refused["request_body"]) == ("refused", None, [], b"")
    assert (refused["method"], refused["path"], refused["http_version"]) == ("GET", "/v1/models", "1.1")
    assert "sk-query" not in refused["query"]
    assert refused["refused_head"] == b"GET /v1/models?key=[REDACTED] HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer [REDACTED]"
    assert f"{len(after)} bytes came after a request that ended the connection" in refused["error"]
    assert refused["error"].endswith("the client was never answered")


@pytest.mark.parametrize("then", ["waits", "resets"])
@pytest.mark.parametrize("where", ["alone", "behind-a-request-in-its-read", "in-a-read-after-a-request"])
def test_a_request_line_that_never_ends_is_recorded_with_its_bytes(fake, in_process, where, then):
    """A request line still arriving is held until its end. Behind a request in the same read it had
    no deadline, and after a request the keep-alive timeout (shorter than the head's) closed the
    connection: either way it went without a word or a record, as did one whose client reset the
    connection. It now gets the head's 408, or a record never answered where the client reset,
    each keeping the bytes that came, redacted as a head is."""
    rec = in_process(head_timeout=1.0)
    rec.server.server.config.timeout_keep_alive = 0.3  # read by each connection as it starts
    line = b"GET /v1/chat/completions?key=sk-query"  # no space, no end: still arriving
    good = b"GET /status/201 HTTP/1.1\r\nHost: x\r\n\r\n"
    with rec.connect() as s:
        if where == "in-a-read-after-a-request":
            s.sendall(good)
            rec.read()
            answer = b""
            while not answer.endswith(b"0\r\n\r\n"):  # answered: the keep-alive timeout runs
                answer += s.recv(65536)
            s.sendall(line)
        else:
            s.sendall((good if where == "behind-a-request-in-its-read" else b"") + line)
        rec.read()
        if then == "resets":
            _reset(s)
        else:
            answer = read_all(s)
            assert answer.endswith(b"Request Timeout: its head not whole after 1 s.")
    refused = sorted(rec.stop(), key=lambda x: x["seq"])[-1]
    assert (refused["end"], refused["method"], refused["path"]) == ("refused", "", "")
    assert refused["refused_head"] == b"GET /v1/chat/completions?key=[REDACTED]"
    if then == "resets":
        assert refused["status"] is None and "the connection was lost" in refused["error"]
        assert refused["error"].endswith("before its request line ended); the client was never answered")
    else:
        assert refused["status"] == 408


@pytest.mark.parametrize("behind", ["a-stream", "nothing"])
def test_a_refusals_times_are_when_its_bytes_came_and_when_its_answer_was_written(tmp_path, behind):
    """A refusal held behind a stream still going (its answer written once the stream ends) took
    both times at that write: its start after the stream's end, its answer at 0. Its start is now
    when its bytes came, its answer when written, as a refusal answered at once has them."""

    ended: list[int] = []

    def now() -> tuple[int, float]:
        return time.monotonic_ns() - rec.writer.started_ns, time.time()

    async def held() -> None:
        await asyncio.sleep(0.5)
        ended.append(now()[0])  # the upstream's end: the stream's follows, then the refusal's answer

    with ServerThread(sse_upstream([b"data: 1\n\n"], held)) as up:
        rec = InProcessRecorder(up.url, tmp_path / "cap")
        rec.server.__enter__()

        with rec.connect() as s:
            if behind == "a-stream":
                s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
                rec.read()
            before = now()
            s.sendall(b"GET /v1/bad HTTP/1.1\r\nHost: x\r\nBad Header: x\r\n\r\n")
            rec.read()
            sent = now()
            answer = read_all(s)
            answered = now()
        xs = sorted(rec.stop(), key=lambda x: x["seq"])
    refused = xs[-1]
    assert answer.endswith(b"Invalid HTTP request received.") and refused["status"] == 400
    assert before[0] <= refused["start_ns"] <= sent[0] and before[1] <= refused["wall"] <= sent[1]
    written = refused["start_ns"] + refused["headers_ns"]
    assert refused["chunk_ns"] == [refused["headers_ns"]] and refused["end_ns"] == refused["headers_ns"]
    assert written <= answered[0]
    if behind == "a-stream":
        assert xs[0]["end"] == "complete" and ended[0] <= written


_BAD = b"GET /v1/models HTTP/1.1\r\nBad Header: x\r\n\r\n"  # the parser refuses it (400)
_WEBSOCKET = b"GET /v1/realtime HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"


@pytest.mark.parametrize("after", [_AFTER, b"\r\n"], ids=["two-requests", "an-empty-line"])
@pytest.mark.parametrize("refused", ["behind-a-stream", "an-upgrade", "at-once"])
def test_bytes_after_a_refusal_that_ends_the_connection_are_recorded_never_answered(fake, in_process, refused, after):
    """A refusal ends its connection: its answer (a 400 held behind a stream still going, a 501 to
    an Upgrade, a 400 written at once) is the last thing written. Bytes the client sent after it, in
    a later read (behind the stream) or in the refused request's own read, were dropped without a
    record; they are now one record, refused, never answered, as bytes after a request that ends the
    connection are."""
    app, _ = fake
    rec = in_process()
    stream = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(_STREAM), _STREAM)
    with rec.connect() as s:
        if refused == "behind-a-stream":
            s.sendall(stream + _BAD)
            rec.read()
            s.sendall(after)  # while the stream goes on, its refusal's answer held behind it
            rec.read()
        else:
            s.sendall((_WEBSOCKET if refused == "an-upgrade" else _BAD) + after)
            rec.read()
        answer = read_all(s)
    xs = sorted(rec.stop(), key=lambda x: x["seq"])
    status = 501 if refused == "an-upgrade" else 400
    assert answer.count(b"HTTP/1.1 ") == (2 if refused == "behind-a-stream" else 1)
    assert b"HTTP/1.1 %d " % status in answer and b"/v1/models" not in answer
    assert [r["path"] for r in app.requests] == (["/v1/chat/completions"] if refused == "behind-a-stream" else [])
    ahead = 1 if refused == "behind-a-stream" else 0  # the stream's record
    assert (xs[ahead]["status"], xs[ahead]["end"], xs[ahead]["proxy_generated"]) == (status, "refused", True)
    if after == b"\r\n":  # nothing sent (RFC 9112 2.2)
        assert len(xs) == ahead + 1
        return
    assert len(xs) == ahead + 2
    kept = xs[-1]
    assert (kept["end"], kept["status"], kept["chunks"], kept["request_body"]) == ("refused", None, [], b"")
    assert (kept["method"], kept["path"], kept["http_version"]) == ("GET", "/v1/models", "1.1")
    assert kept["refused_head"] == b"GET /v1/models?key=[REDACTED] HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer [REDACTED]"
    assert f"{len(after)} bytes came after a request the recorder refused" in kept["error"]
    assert kept["error"].endswith("the client was never answered")


_ASK = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"


@pytest.mark.parametrize("upstream", ["closes", "keeps-alive", "resets"])
def test_requests_pipelined_behind_an_answer_that_ends_upstream_are_run_or_recorded_never_run(fake, in_process, upstream):
    """An upstream's Connection: close is its own connection's (hop-by-hop): the recorder does not
    pass it on, so the requests queued behind that answer run and are recorded, as behind any. An
    answer cut short (its upstream reset mid-stream) ends the client's connection: uvicorn dropped
    the requests queued behind it, never run and never recorded. Each is now a record, refused,
    never answered, with its head and body, saying why."""
    app, _ = fake
    rec = in_process()
    first = json.dumps({"stream": False, "tag": "a", "pace_ms": 200, "close": upstream == "closes"}).encode()
    second = json.dumps({"stream": False, "tag": "b"}).encode()
    ahead = (
        b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" if upstream == "resets" else _ASK % (len(first), first)
    )
    closing = b"GET /v1/models?key=sk-query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-secret\r\nConnection: close\r\n\r\n"
    with rec.connect() as s:
        s.sendall(ahead + _ASK % (len(second), second) + closing)
        answer = read_all(s)
    xs = sorted(rec.stop(), key=lambda x: x["seq"])
    assert [(x["method"], x["path"]) for x in xs] == [
        ("POST", "/reset" if upstream == "resets" else "/v1/chat/completions"),
        ("POST", "/v1/chat/completions"),
        ("GET", "/v1/models"),
    ]
    if upstream != "resets":
        assert answer.count(b"HTTP/1.1 200 ") == 2 and app.completed == ["a", "b"]
        assert b"connection: close" not in answer.split(b"reply to a")[0].lower()  # the upstream's, not passed on
        assert [(x["status"], x["end"]) for x in xs[:2]] == [(200, "complete")] * 2
        return
    assert answer.count(b"HTTP/1.1 ") == 1 and app.completed == []  # the stream cut short, nothing else
    assert [r["path"] for r in app.requests] == ["/reset"]
    assert xs[0]["end"] == "upstream_error"
    queued, last = xs[1:]
    assert (queued["end"], queued["status"], queued["chunks"], queued["request_body"]) == ("refused", None, [], second)
    assert (last["end"], last["status"], last["request_body"], last["http_version"]) == ("refused", None, b"", "1.1")
    assert "sk-query" not in last["query"] and ["authorization", "Bearer [REDACTED]"] in last["request_headers"]
    never_run = (
        "the request was never run: it was queued behind a response on its connection, and the connection closed before its turn"
    )
    assert queued["error"].startswith(never_run) and "refused" not in queued["error"]
    assert queued["error"].endswith("the client was never answered")
    assert 0 < queued["start_ns"] < xs[0]["start_ns"] + xs[0]["end_ns"]  # when it came, not when the connection closed


@pytest.mark.parametrize("body", ["whole", "cut-short"])
def test_a_request_never_run_says_whether_its_body_came_whole(fake, in_process, body):
    """A request queued behind a response the connection closed on is recorded never run, with the
    body that came: one still arriving was recorded as though it were the request's whole body.
    Its error now says the body was cut short, and how much of it came."""
    rec = in_process()
    sent = json.dumps({"stream": False, "tag": "b"}).encode()
    length = len(sent) + (10 if body == "cut-short" else 0)
    queued = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (length, sent)
    with rec.connect() as s:
        s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" + queued)
        read_all(s)
    xs = sorted(rec.stop(), key=lambda x: x["seq"])
    assert [(x["path"], x["end"], x["status"]) for x in xs] == [
        ("/reset", "upstream_error", 200),
        ("/v1/chat/completions", "refused", None),
    ]
    assert xs[1]["request_body"] == sent
    cut = f"its body cut short: {len(sent)} of {length} bytes came before the close"
    assert (cut in xs[1]["error"]) == (body == "cut-short")
    assert xs[1]["error"].endswith("the client was never answered")


@pytest.mark.parametrize("ahead", ["answered", "cut-short"])
def test_stats_counts_a_request_never_run_as_never_sent_not_ok(fake, in_process, tmp_path, monkeypatch, ahead):
    """A generation request queued behind a response the connection closed on was never run: the
    engine never saw it. ``stats`` counts it with the requests infertap never sent (``refused``), in
    no figure, never as an answer; behind a response that ends whole, the same request runs and is ok."""
    from click.testing import CliRunner

    from infertap.cli import cli

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    rec = in_process()
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False, "tag": "b"}).encode()
    first = b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" if ahead == "cut-short" else b""
    with rec.connect() as s:  # one answered on a connection of its own: its group is there either way
        s.sendall(_ASK[:-4] % len(ask) + b"Connection: close\r\n\r\n" + ask)
        read_all(s)
    with rec.connect() as s:
        s.sendall(first + _ASK % (len(ask), ask) + b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        read_all(s)
    xs = rec.stop()
    ends = ["complete", "refused" if ahead == "cut-short" else "complete"]
    assert [x["end"] for x in sorted(xs, key=lambda x: x["seq"]) if x["path"] == "/v1/chat/completions"] == ends
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["groups"]
    counts = [(g["requests"], g["ok"], g["refused"]) for g in groups]
    assert counts == ([(1, 1, 1)] if ahead == "cut-short" else [(2, 2, 0)])


def _stats(out: Any) -> list[dict[str, Any]]:
    from click.testing import CliRunner

    from infertap.cli import cli

    result = CliRunner().invoke(cli, ["stats", str(out), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["groups"]


@pytest.mark.parametrize("body", ["whole", "cut-short"])
def test_stats_counts_a_request_never_run_with_its_body_cut_short_as_refused(fake, in_process, tmp_path, monkeypatch, body):
    """A generation request never run whose body was cut short by the close holds a part of its
    JSON: it read as no generation, and ``stats`` counted it nowhere, neither refused nor of unknown
    body. Its record now says its body is cut short (``request_body_cut``): a body not the request,
    unknown, and it counts as refused (never sent) as it does with its body whole."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    rec = in_process()
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False, "tag": "b"}).encode()
    length = len(ask) + (10 if body == "cut-short" else 0)
    with rec.connect() as s:  # one answered on a connection of its own: its group is there either way
        s.sendall(_ASK[:-4] % len(ask) + b"Connection: close\r\n\r\n" + ask)
        read_all(s)
    with rec.connect() as s:
        s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" + _ASK % (length, ask))
        read_all(s)
    xs = sorted(rec.stop(), key=lambda x: x["seq"])
    never_run = [x for x in xs if x["end"] == "refused"]
    assert [(x["path"], x["request_body"]) for x in never_run] == [("/v1/chat/completions", ask)]
    assert never_run[0].get("request_body_cut", False) == (body == "cut-short")
    (group,) = _stats(rec.out)
    assert (group["requests"], group["ok"], group["refused"], group["request_body_unknown"]) == (1, 1, 1, 0)


@pytest.mark.parametrize("split", ["in-one-read", "bad-chunk-in-a-later-read", "good"])
def test_a_chunked_body_refused_in_a_read_keeps_that_reads_bytes(fake, in_process, tmp_path, monkeypatch, split):
    """The parser refusing a chunked body's bad chunk size passes on only the data before it: the
    rest of that read (the bad line, what followed it) was in no record. It is now kept as the
    record's ``refused_body``, the error saying how many bytes, the body marked cut short: counted
    refused by ``stats``. A body whose chunks are good is recorded whole, with neither."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    rec = in_process()
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False, "tag": "b"}).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = b"%x\r\n%s\r\n" % (len(ask) - 5, ask[:-5])
    rest = (b"5" if split == "good" else b"zz") + b"\r\n" + ask[-5:] + b"\r\n0\r\n\r\n"
    with rec.connect() as s:
        if split == "bad-chunk-in-a-later-read":
            s.sendall(head + first)
            rec.read()
            s.sendall(rest)
        else:
            s.sendall(head + first + rest)
        read_all(s)
    with rec.connect() as s:  # one answered on a connection of its own: its group is there either way
        s.sendall(_ASK[:-4] % len(ask) + b"Connection: close\r\n\r\n" + ask)
        read_all(s)
    x, _ = sorted(rec.stop(), key=lambda x: x["seq"])
    if split == "good":
        assert (x["end"], x["request_body"]) == ("complete", ask)
        assert "refused_body" not in x and "request_body_cut" not in x
    else:
        unread = rest if split == "bad-chunk-in-a-later-read" else b"\r\n" + rest
        assert (x["end"], x["status"], x["request_body"]) == ("refused", 400, ask[:-5])
        assert (x["refused_body"], x["request_body_cut"]) == (unread, True)
        assert f"; {len(unread)} bytes of its body's read" in x["error"]
    (group,) = _stats(rec.out)
    counts = (group["requests"], group["ok"], group["refused"], group["request_body_unknown"])
    assert counts == ((2, 2, 0, 0) if split == "good" else (1, 1, 1, 0))


@pytest.mark.parametrize("body", ["idle", "whole"])
def test_stats_counts_a_request_refused_in_an_idle_body_as_refused(fake, in_process, tmp_path, monkeypatch, body):
    """A generation request whose body went idle past body_timeout is answered 408 and recorded
    refused with the part that came: that part read as no generation, and ``stats`` counted it
    nowhere. It is now marked cut short (``request_body_cut``) and counted refused; its body
    whole, the same request is answered and ok."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    rec = in_process(body_timeout=0.3)
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False, "tag": "b"}).encode()
    with rec.connect() as s:  # one answered on a connection of its own: its group is there either way
        s.sendall(_ASK[:-4] % len(ask) + b"Connection: close\r\n\r\n" + ask)
        read_all(s)
    with rec.connect() as s:
        s.sendall(_ASK % (len(ask), ask[:10] if body == "idle" else ask))
        answer = s.recv(65536)
    xs = sorted(rec.stop(), key=lambda x: x["seq"])
    assert answer.startswith(b"HTTP/1.1 408 " if body == "idle" else b"HTTP/1.1 200 ")
    assert xs[1].get("request_body_cut", False) == (body == "idle")
    (group,) = _stats(rec.out)
    counts = (group["requests"], group["ok"], group["refused"], group["request_body_unknown"])
    assert counts == ((1, 1, 1, 0) if body == "idle" else (2, 2, 0, 0))


@pytest.mark.parametrize("answered", [False, True], ids=["only-refused", "one-answered"])
def test_stats_says_refused_requests_that_no_group_holds(fake, in_process, tmp_path, monkeypatch, answered):
    """A capture whose only generation request was never run has no counted request, so no group:
    ``stats`` printed nothing of it, as though nothing happened. Its refusal is now said apart
    (``in_no_group``, and a line of the table); one answered beside it keeps its group, as before,
    and holds the refusal itself, so nothing is left apart."""
    from click.testing import CliRunner

    from infertap.cli import cli

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    rec = in_process()
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False, "tag": "b"}).encode()
    if answered:
        with rec.connect() as s:
            s.sendall(_ASK[:-4] % len(ask) + b"Connection: close\r\n\r\n" + ask)
            read_all(s)
    with rec.connect() as s:  # behind a response the connection closes on: never run
        s.sendall(b"POST /reset HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}" + _ASK % (len(ask), ask))
        read_all(s)
    xs = rec.stop()
    assert [x["end"] for x in sorted(xs, key=lambda x: x["seq"]) if x["path"] == "/v1/chat/completions"] == [
        *(["complete"] if answered else []),
        "refused",
    ]
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    counts = [(g["requests"], g["ok"], g["refused"]) for g in out["groups"]]
    assert (counts, out["in_no_group"]) == (
        ([(1, 1, 1)], {"refused": 0, "request_body_unknown": 0}) if answered else ([], {"refused": 1, "request_body_unknown": 0})
    )
    table = CliRunner().invoke(cli, ["stats", str(rec.out)], catch_exceptions=False)
    assert table.exit_code == 0, table.output
    said = "1 refused by infertap, never sent"
    if answered:
        assert "1 more refused by infertap, never sent" in table.stdout and "in no group" not in table.stdout
    else:
        assert f"no counted generation requests in these captures: {said}" in table.stdout


@pytest.mark.parametrize("sent", ["key-again", "no-key"])
def test_a_refused_chunked_reads_bytes_keep_no_credential(fake, in_process, sent):
    """``refused_body`` keeps the bytes of a chunked body's read its parser refused, raw: a client
    that sent its API key again in them (a secret field of the body, or the header's key) had it
    written to disk. Both are taken out now; bytes holding no credential are kept as they came."""
    key = "sk-proj-refusedbody0123456789abcdef"
    rec = in_process()
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    tail = b'"api_key": "%s", "echo": "%s"}' % (key.encode(), key.encode()) if sent == "key-again" else b'"n": 1}'
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = b"%x\r\n%s\r\n" % (len(ask) - 1, ask[:-1])
    rest = b"zz\r\n, " + tail + b"\r\n0\r\n\r\n"
    with rec.connect() as s:
        s.sendall(head % key.encode() + first + rest)
        read_all(s)
    (x,) = rec.stop()
    assert x["end"] == "refused" and x["refused_body"].endswith(b"0\r\n\r\n")
    assert key.encode() not in x["refused_body"] and key.encode() not in b"".join(v.encode() for _, v in x["request_headers"])
    if sent == "key-again":
        assert x["refused_body"].count(REDACTED.encode()) == 2
    else:
        assert x["refused_body"] == b"\r\n" + rest


@pytest.mark.parametrize("close", ["fin", "reset"])
@pytest.mark.parametrize("came", ["part", "none", "whole"])
def test_a_body_its_client_hung_up_on_is_kept_cut_short_and_counted(fake, in_process, tmp_path, monkeypatch, came, close):
    """A client that closed its connection while sending a request's body left a record of the part
    that came with nothing saying it was not the request: it read as no generation, and ``stats``
    counted it nowhere. It is now marked cut short (``request_body_cut``), its error saying how much
    came, the part kept with its credentials taken out, and ``stats`` counts it of unknown body;
    the same request sent whole is answered and ok."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    key = "sk-proj-cutbody0123456789abcdef"
    rec = in_process()
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tag": "b", "api_key": key}).encode()
    with rec.connect() as s:  # one answered on a connection of its own: its group is there either way
        s.sendall(_ASK[:-4] % len(ask) + b"Connection: close\r\n\r\n" + ask)
        read_all(s)
    sent = {"part": ask[: ask.index(key.encode()) + len(key)], "none": b"", "whole": ask}[came]
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n"
    s = rec.connect()
    s.sendall(head % (key.encode(), len(ask)) + sent)
    while b"\r\n\r\n" not in rec.read():  # the recorder had the head (and what came of the body) before the close
        pass
    if came == "whole":
        read_all(s)
    _reset(s) if close == "reset" else s.close()
    xs = sorted(rec.stop(), key=lambda x: x["seq"])
    assert [x["path"] for x in xs] == ["/v1/chat/completions"] * 2
    x = xs[1]
    assert key.encode() not in x["request_body"] + b"".join(v.encode() for _, v in x["request_headers"])
    if came == "whole":
        assert (x["end"], x["status"], "request_body_cut" in x) == ("complete", 200, False)
    else:
        assert (x["end"], x["status"], x.get("request_body_cut")) == ("client_disconnected", None, True)
        assert x["request_body"] == sent.replace(key.encode(), REDACTED.encode())
        assert x["error"] == f"client disconnected while sending the request body ({len(sent)} of {len(ask)} bytes came)"
    (group,) = _stats(rec.out)
    counts = (group["requests"], group["ok"], group["refused"], group["request_body_unknown"])
    assert counts == ((2, 2, 0, 0) if came == "whole" else (1, 1, 0, 1))
