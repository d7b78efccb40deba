"""A request body sent with no length (neither Content-Length nor chunked encoding), as an
HTTP/1.0-style client sends one, ended by the client's close or cut by its reset.

The recorder runs in-process here (``in_process``), so that a test can send a request's body only
once the head has been read: the two reads apart, as a client writing them apart makes them."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from tests.fake_upstream import ServerThread
from tests.proxy.in_process import InProcessRecorder, read_all

BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_a_body_sent_with_no_length_in_a_later_read_than_its_head_is_one_refusal_never_forwarded(fake, in_process, version):
    """Its head ended the read; its body came in the next. The request went to the engine bodiless,
    and the body's bytes were refused apart, a second record of no method nor path (after an HTTP/1.1
    head; after an HTTP/1.0 one, whose bodiless answer closed the connection, they were lost). Now
    the body is told as the head's own: the engine gets nothing, one record keeps the request whole,
    refused by the recorder, with the client's version, as when head and body come in one read."""
    app, _ = fake
    rec = in_process(body_wait=30)  # longer than any pause between the test's two sends
    head = f"POST /echo-body HTTP/{version}\r\nHost: x\r\n\r\n".encode()
    with rec.connect() as s:
        s.sendall(head)
        assert rec.read() == head  # the server has read the head, alone
        s.sendall(BODY)
        assert rec.read() == BODY
        s.shutdown(socket.SHUT_WR)  # the only mark of the body's end
        answer = read_all(s)
    assert answer.startswith(b"HTTP/1.1 400") and answer.endswith(b"a request's body ends by its length, not by a close.")
    (refused,) = rec.stop()
    assert app.requests == []
    assert (refused["end"], refused["status"], refused["method"], refused["path"]) == ("refused", 400, "POST", "/echo-body")
    assert (refused["request_body"], refused["http_version"]) == (BODY, version)
    assert refused["error"].startswith("the recorder refused the request (its body came with neither Content-Length")
    assert "refused_head" not in refused and ["host", "x"] in refused["request_headers"]


@pytest.mark.parametrize("then", ["nothing", "the next request", "its close"])
def test_a_head_of_no_length_followed_by_no_body_is_forwarded_bodiless(fake, in_process, then):
    """RFC 9112 6.3: a request with neither Content-Length nor chunked encoding has no body. A POST
    so (curl -X POST) is held only until the next read shows no body follows (a request line), the
    client's close, or the wait's end: then forwarded as it came, and recorded so, never refused."""
    app, _ = fake
    rec = in_process(body_wait=0.2 if then == "nothing" else 30)
    head = b"POST /status/201 HTTP/1.1\r\nHost: x\r\n\r\n"
    with rec.connect() as s:
        s.sendall(head)
        assert rec.read() == head
        if then == "its close":
            s.shutdown(socket.SHUT_WR)  # the client closes its side, waiting for no answer
            read_all(s)
        else:
            if then == "the next request":
                s.sendall(b"GET /status/202 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while b'"fake 201"' not in answer or (then == "the next request" and b'"fake 202"' not in answer):
                answer += s.recv(65536)
            assert answer.startswith(b"HTTP/1.1 201")
    xs = rec.stop()
    assert [(x["method"], x["path"], x["request_body"]) for x in xs] == [
        ("POST", "/status/201", b""),
        *([("GET", "/status/202", b"")] if then == "the next request" else []),
    ]
    assert not any(x["end"] == "refused" for x in xs)
    if then != "its close":  # a client gone at once may have been answered, or not
        assert [x["status"] for x in xs] == [201, 202][: len(xs)]
        assert [(r["path"], r["body"]) for r in app.requests] == [(x["path"], b"") for x in xs]


@pytest.mark.parametrize("split", [False, True], ids=["one-read", "head-then-body"])
def test_a_body_sent_with_no_length_then_a_reset_is_recorded_refused_unanswered(fake, in_process, split):
    """The client sends its body with no length and resets the connection (SO_LINGER 0) instead of
    closing its side: nothing was recorded (the body kept for the close was dropped with the
    connection). It is now recorded refused, its body whole, never answered, never forwarded."""
    app, _ = fake
    rec = in_process(body_wait=30)
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"
    s = rec.connect()
    if split:
        s.sendall(head)
        assert rec.read() == head
        s.sendall(BODY)
        assert rec.read() == BODY
    else:
        s.sendall(head + BODY)
        assert rec.read() == head + BODY
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()  # an RST, not a FIN
    (refused,) = rec.stop()
    assert app.requests == []
    assert (refused["end"], refused["method"], refused["path"], refused["request_body"]) == (
        "refused",
        "POST",
        "/v1/chat/completions",
        BODY,
    )
    assert refused["status"] is None and refused["chunks"] == [] and "proxy_generated" not in refused
    assert "the connection was lost before its end" in refused["error"]
    assert refused["error"].endswith("the client was never answered")


def test_a_body_sent_with_no_length_is_answered_503_and_recorded_when_the_recorder_stops(fake, in_process):
    """Its end would come only with the client's close; the recorder stopping first answers it and
    records it, body and all, not a connection closed without a word."""
    app, _ = fake
    rec = in_process()
    s = rec.connect()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n" + BODY)
    rec.read()
    (refused,) = rec.stop()
    answer = read_all(s)
    s.close()
    assert answer.startswith(b"HTTP/1.1 503") and answer.endswith(b"the recorder shut down before its end.")
    assert app.requests == []
    assert (refused["end"], refused["status"], refused["request_body"]) == ("refused", 503, BODY)


@pytest.mark.parametrize("wait", [0.2, 0], ids=["past-the-wait", "no-wait"])
def test_a_body_sent_with_no_length_after_the_wait_is_one_refusal_of_that_request_all_its_bytes(fake, in_process, wait):
    """Its head waited body_wait for it and went to the engine bodiless (RFC 9112 6.3 reads it so);
    the body came later. Its bytes were refused apart at the close, a record of no method nor path
    keeping their first KiB (a body of lines: the parser's "Invalid method" for its first). They are
    now that request's body, late: one refusal of that POST with every byte, answered 400 at the
    close. The bodiless request stays recorded as what the engine answered: it was forwarded."""
    app, _ = fake
    rec = in_process(body_wait=wait)
    head = b"POST /echo-body HTTP/1.1\r\nHost: x\r\n\r\n"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 4000}]}, indent=2).encode()
    with rec.connect() as s:
        s.sendall(head)
        assert rec.read() == head
        answer = b""
        while not answer.endswith(b"0\r\n\r\n"):  # the bodiless request answered: the wait is over
            answer += s.recv(65536)
        assert answer.startswith(b"HTTP/1.1 400 ") and b"bad request: \r\n" in answer
        s.sendall(body)
        got = b""
        while len(got) < len(body):
            got += rec.read()
        s.shutdown(socket.SHUT_WR)
        refusal = read_all(s)
    assert refusal.startswith(b"HTTP/1.1 400") and refusal.endswith(b"a request's body ends by its length, not by a close.")
    forwarded, refused = sorted(rec.stop(), key=lambda x: x["seq"])
    assert [(r["path"], r["body"]) for r in app.requests] == [("/echo-body", b"")]
    assert (forwarded["end"], forwarded["status"], forwarded["request_body"]) == ("complete", 400, b"")
    assert (refused["end"], refused["status"], refused["method"], refused["path"]) == ("refused", 400, "POST", "/echo-body")
    assert refused["request_body"] == body and "refused_head" not in refused
    waited = f"had waited {wait:g} s for it" if wait else "was not held for it (a body wait of 0)"
    assert f"came after its head {waited} and had gone to the upstream bodiless" in refused["error"]


@pytest.mark.parametrize("then", ["closes-its-side", "waits"])
@pytest.mark.parametrize("ends", ["http10", "connection-close"])
def test_a_late_body_after_a_request_that_ends_the_connection_is_recorded_never_answered(fake, tmp_path, ends, then):
    """A head of no length that ends the connection (HTTP/1.0, Connection: close) went to the engine
    bodiless; its body came late, while the engine answered. uvicorn closes the connection after that
    answer, so the body's 400 (held behind it, written at the client's close) is never written: it
    was recorded answered 400 all the same. It is now recorded refused, unanswered (no status),
    saying why, with every byte of the body; a client that waits without closing its side, the same."""
    import asyncio

    from tests.fake_upstream import sse_upstream

    async def held() -> None:
        await asyncio.sleep(0.5)  # the body and the client's close come before the answer's end

    version, extra = (b"1.0", b"") if ends == "http10" else (b"1.1", b"Connection: close\r\n")
    head = b"POST /v1/chat/completions HTTP/%s\r\nHost: x\r\n%s\r\n" % (version, extra)
    with ServerThread(sse_upstream([b"data: 1\n\n"], held)) as up:
        rec = InProcessRecorder(up.url, tmp_path / "cap", body_wait=0)
        rec.server.__enter__()
        with rec.connect() as s:
            s.sendall(head)
            assert rec.read() == head
            s.sendall(BODY)
            assert rec.read() == BODY
            if then == "closes-its-side":
                s.shutdown(socket.SHUT_WR)
            answer = read_all(s)
            forwarded, refused = sorted(rec.stop(), key=lambda x: x["seq"])
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"data: 1\n\n" if ends == "http10" else b"0\r\n\r\n")
    assert b"HTTP/1.1 400" not in answer
    assert (forwarded["end"], forwarded["status"], forwarded["request_body"]) == ("complete", 200, b"")
    assert (refused["end"], refused["status"], refused["method"], refused["path"]) == (
        "refused",
        None,
        "POST",
        "/v1/chat/completions",
    )
    assert refused["request_body"] == BODY and refused["error"].endswith("; the client was never answered")
    assert "the request ahead of it ended the connection (Connection: close, or HTTP/1.0's default)" in refused["error"]


def test_a_late_body_that_stalls_gets_the_body_timeouts_408_with_its_bytes(fake, in_process):
    """A body after the wait that stops coming, its client neither closing nor sending more: the
    body's deadline ran only while a request was begun, and the keep-alive timer then cut the
    connection unanswered. It gets --body-timeout's 408, recorded with the bytes that came."""
    rec = in_process(body_wait=0, body_timeout=0.5)
    with rec.connect() as s:
        s.sendall(b"POST /status/201 HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while b'"fake 201"' not in answer:  # the bodiless request answered
            answer += s.recv(65536)
        s.sendall(b'{"tag": "stalls"')  # and no more
        refusal = read_all(s)
    assert refusal.startswith(b"HTTP/1.1 408") and refusal.endswith(b"its body idle for 0.5 s.")
    forwarded, refused = sorted(rec.stop(), key=lambda x: x["seq"])
    assert (forwarded["status"], forwarded["request_body"]) == (201, b"")
    assert (refused["end"], refused["status"], refused["path"], refused["request_body"]) == (
        "refused",
        408,
        "/status/201",
        b'{"tag": "stalls"',
    )


@pytest.mark.parametrize("then", ["closes-its-side", "over-the-limit", "resets", "stalls-with-a-length"])
def test_a_body_refused_behind_a_stream_is_answered_after_the_stream_ends(fake, tmp_path, then):
    """A request pipelined behind a stream still going, refused by the recorder itself in its body:
    sent with no length (400 at the client's close, 413 past the limit), or one of known length that
    stalls (408). Its answer waits for the stream's end, whole, and is recorded after it; a client
    that resets instead leaves the body's record, refused, never answered (as uvicorn's own 400 once
    was, these were never written into the stream)."""
    import asyncio

    from tests.fake_upstream import sse_upstream

    async def held() -> None:
        await asyncio.sleep(0.5)

    bodies = {"over-the-limit": BODY + b"x" * 64, "stalls-with-a-length": b"{"}
    head = b"POST /v1/refused HTTP/1.1\r\nHost: x\r\n%s\r\n" % (
        b"Content-Length: 10\r\n" if then == "stalls-with-a-length" else b""
    )
    body = bodies.get(then, BODY)
    with ServerThread(sse_upstream([b"data: 1\n\n"], held)) as up:
        rec = InProcessRecorder(up.url, tmp_path / "cap", body_timeout=0.3, max_body=len(BODY))
        rec.server.__enter__()
        s = rec.connect()
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        rec.read()
        s.sendall(head + body)
        rec.read()
        if then == "resets":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        else:
            if then == "closes-its-side":
                s.shutdown(socket.SHUT_WR)
            answer = read_all(s)
            s.close()
        stream, refused = sorted(rec.stop(), key=lambda x: x["seq"])
    assert (refused["end"], refused["method"], refused["path"]) == ("refused", "POST", "/v1/refused")
    if then == "resets":
        assert stream["end"] == "client_disconnected" and refused["status"] is None and refused["request_body"] == BODY
        assert refused["error"].endswith("the client was never answered")
        return
    status = {"closes-its-side": 400, "over-the-limit": 413, "stalls-with-a-length": 408}[then]
    streamed, refusal = answer.split(b"HTTP/1.1 ")[1:]
    assert streamed.startswith(b"200 ") and streamed.endswith(b"data: 1\n\n\r\n0\r\n\r\n")  # whole, nothing inside
    assert refusal.startswith(b"%d " % status) and refused["status"] == status and stream["end"] == "complete"
    assert refused["request_body"] == (b"" if then == "over-the-limit" else body)
