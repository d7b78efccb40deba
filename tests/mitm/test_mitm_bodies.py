"""Request bodies through `infertap mitm` under mitmproxy's body options: one over
``stream_large_bodies`` is streamed by mitmproxy, which keeps none of it (it was recorded as an
empty body, ``complete``), and its ``request`` hook fires only once the body went, so an engine
that answered first had its times counted from zero (absolute monotonic times)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from click.testing import CliRunner

from infertap.apis import kept_response_id, tail_usage
from infertap.capture.redact import REDACTED
from infertap.cli import cli
from tests.fake_upstream import raw_upstream


def test_a_request_body_over_stream_large_bodies_is_recorded_whole(start_mitm, fake):
    app, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", "--set", "stream_large_bodies=1k", "--no-telemetry")
    body = json.dumps({"tag": "big", "stream": True, "n_chunks": 3, "messages": [{"role": "user", "content": "a" * 5000}]})
    with httpx.stream("POST", f"{mitm.url}/v1/chat/completions", content=body, timeout=30) as r:
        received = b"".join(r.iter_raw())
    mitm.stop()
    (x,) = mitm.exchanges()
    assert app.requests[-1]["body"] == body.encode()  # the upstream had it all
    assert x["request_body"] == body.encode() and x["end"] == "complete"
    assert b"".join(x["chunks"]) == received and 0 <= x["headers_ns"] <= x["chunk_ns"][0] <= x["end_ns"] < 30e9


REWRITER = """
from mitmproxy import http


def request(flow: http.HTTPFlow) -> None:
    if flow.request.raw_content is not None:  # buffered: an addon may change the body before it goes
        flow.request.content = flow.request.content.replace(b'"hi"', b'"rewritten"')
"""


@pytest.mark.parametrize("mitmdump", [False, True], ids=["infertap-mitm", "mitmdump"])
def test_a_chunked_request_body_stays_buffered_for_other_addons_unless_it_grows_past_the_limit(
    start_mitm, fake, tmp_path, mitmdump
):
    """With stream_large_bodies set, mitmproxy buffers a body of unknown size (chunked) until its
    end, every addon's request hook seeing it whole (and able to change it), or until it passes the
    limit: then it streams it on with what it had, keeping none and calling no hook (it was recorded
    empty). The recorder streamed every such body from its first byte instead: another addon's
    rewrite of a small one never went upstream. A small body is now buffered as mitmproxy buffers
    it, recorded as it went upstream (rewritten), and a large one is kept whole from the switch."""
    app, url = fake
    (script := tmp_path / "rewriter.py").write_text(REWRITER)
    loads = (
        ["-s", str(script), "--set", "infertap_telemetry=false"] if mitmdump else ["--set", f"scripts={script}", "--no-telemetry"]
    )
    mitm = start_mitm("--mode", f"reverse:{url}", "--set", "stream_large_bodies=1k", *loads, mitmdump=mitmdump)
    turns = [{"role": "user", "content": "a" * 5000}, {"role": "user", "content": "hi"}]
    big = json.dumps({"tag": "big", "messages": turns}).encode()
    small = json.dumps({"tag": "small", "messages": [{"role": "user", "content": "hi"}]}).encode()
    for body in (big, small):
        parts = [body[i : i + 700] for i in range(0, len(body), 700)]  # the first chunks under the limit
        r = httpx.post(f"{mitm.url}/v1/chat/completions", content=iter(parts), timeout=30)
        assert r.status_code == 200 and r.request.headers["transfer-encoding"] == "chunked"
    mitm.stop()
    rewritten = small.replace(b'"hi"', b'"rewritten"')
    assert [r["body"] for r in app.requests] == [big, rewritten]  # the large one streamed, as mitmproxy does
    assert [x["request_body"] for x in mitm.exchanges()] == [big, rewritten]  # what went upstream
    assert "without keeping it" not in mitm.log.read_text()


@pytest.fixture
def early_upstream() -> Iterator[str]:
    """An HTTP/1.1 upstream that answers with its first event as soon as the request's headers are
    in, then reads the body and ends the stream."""

    def answer(conn: socket.socket, head: bytes) -> None:
        head, _, rest = head.partition(b"\r\n\r\n")
        length = int(
            next(v for n, _, v in (line.partition(b":") for line in head.split(b"\r\n")) if n.lower() == b"content-length")
        )
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        conn.sendall(b"d\r\ndata: early\n\n\r\n")
        while len(rest) < length:
            rest += conn.recv(65536)
        conn.sendall(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")

    with raw_upstream(answer) as url:
        yield url


def test_an_answer_before_a_streamed_body_has_gone_is_timed_from_the_send(start_mitm, early_upstream):
    mitm = start_mitm("--mode", f"reverse:{early_upstream}", "--set", "stream_large_bodies=1k", "--no-telemetry")
    parts = [b'{"tag": "early", "pad": "' + b"b" * 3000, b"c" * 3000, b'"}']

    def slowly() -> Iterator[bytes]:
        for part in parts:
            yield part
            time.sleep(0.3)

    r = httpx.post(
        f"{mitm.url}/v1/chat/completions", content=slowly(), headers={"content-length": str(sum(map(len, parts)))}, timeout=30
    )
    assert r.status_code == 200
    mitm.stop()
    (x,) = mitm.exchanges()
    assert x["request_body"] == b"".join(parts)
    assert 0 <= x["headers_ns"] < 1e9 and x["chunk_ns"] == sorted(x["chunk_ns"]) and x["end_ns"] < 10e9


def test_mitmproxys_own_refusals_are_refused_not_upstream_errors(start_mitm, fake):
    """A request over mitmproxy's body_size_limit, and one its block_list kills (status 444), were
    recorded upstream_error: no engine saw either."""
    app, url = fake
    mitm = start_mitm(
        "--mode", f"reverse:{url}", "--set", "body_size_limit=1k", "--set", "block_list=:~u /v1/completions:444", "--no-telemetry"
    )
    big = json.dumps({"tag": "big", "messages": [{"role": "user", "content": "a" * 5000}]}).encode()
    assert httpx.post(f"{mitm.url}/v1/chat/completions", content=big, timeout=30).status_code == 413
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.post(f"{mitm.url}/v1/completions", json={"prompt": "blocked"}, timeout=30)
    mitm.stop()
    limited, killed = mitm.exchanges()
    assert app.requests == []
    assert (limited["end"], limited["status"], limited["request_body_size"]) == ("refused", None, len(big))
    assert "body_size_limit" in limited["error"]
    assert (killed["end"], killed["error"]) == ("refused", "Connection killed.")


def test_a_kill_after_the_request_went_upstream_is_cancelled() -> None:
    from mitmproxy.flow import Error

    from infertap.mitm.endings import KILLED, end_of_error

    assert KILLED == Error.KILLED_MESSAGE
    assert [end_of_error(KILLED, handed=h) for h in (True, False)] == ["cancelled", "refused"]
    assert end_of_error("Response body exceeds mitmproxy's body_size_limit.") == "cancelled"


def test_a_request_body_over_infertap_max_body_is_passed_on_and_its_size_recorded(start_mitm, fake):
    """A body mitmproxy streams (over stream_large_bodies) was kept whole in the addon's memory,
    however large (a 200 MiB upload took 200 MiB more of mitmdump's memory): one over
    infertap_max_body (64m, record's --max-body-mb) is now passed on whole and recorded without its
    bytes, as record records a body it refuses; buffered or streamed alike."""
    app, url = fake
    mitm = start_mitm(
        "--mode", f"reverse:{url}", "--set", "stream_large_bodies=8k", "--set", "infertap_max_body=4k", "--no-telemetry"
    )
    bodies = [
        json.dumps({"tag": tag, "messages": [{"role": "user", "content": "a" * n}]}).encode()
        for tag, n in (("streamed", 20_000), ("buffered", 6000), ("kept", 2000))
    ]
    for body in bodies:
        assert httpx.post(f"{mitm.url}/v1/chat/completions", content=body, timeout=30).status_code == 200
    mitm.stop()
    assert [r["body"] for r in app.requests] == bodies  # the upstream had each whole
    streamed, buffered, kept = mitm.exchanges()
    for x, body in ((streamed, bodies[0]), (buffered, bodies[1])):
        assert (x["request_body"], x["request_body_size"], x["end"], x["status"]) == (b"", len(body), "complete", 200)
        assert x["chunks"]
    assert kept["request_body"] == bodies[2] and "request_body_size" not in kept
    assert mitm.log.read_text().count("over infertap_max_body") == 2


def test_a_response_over_infertap_max_response_is_passed_on_whole_and_kept_cut(start_mitm, fake, tmp_path):
    """A response the addon streams was kept whole in its memory, however large (a runaway stream
    grew mitmdump until it was killed): past infertap_max_response (64m, record's --max-response-mb)
    it is passed on whole, only its head kept, marked with its real size; one under it as before."""
    _, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", "--set", "infertap_max_response=8k", "--no-telemetry")
    got = []
    for tag, n in (("big", 400), ("small", 3)):
        body = {"messages": [{"role": "user", "content": tag}], "stream": True, "tag": tag, "n_chunks": n}
        body["stream_options"] = {"include_usage": tag == "big"}  # its usage past the head: in its tail
        with httpx.stream("POST", f"{mitm.url}/v1/chat/completions", json=body, timeout=30) as r:
            got.append(r.read())
    # One JSON body past it, sent in one chunk: its first 8k kept (nothing was), its leading id read.
    body = {"model": "m", "input": "one", "stream": False, "tag": "one", "n_chunks": 3000}
    one = httpx.post(f"{mitm.url}/v1/responses", json=body, timeout=30).content
    mitm.stop()
    big, small = got
    assert len(big) > 4 * 8192 and big.endswith(b"data: [DONE]\n\n")  # every byte reached the client
    cut, whole, single = mitm.exchanges()
    assert single["response_body_size"] == len(one) > 2 * 8192 and b"".join(single["chunks"]) == one[:8192]
    assert kept_response_id(single) == json.loads(one)["id"]
    assert (cut["end"], cut["response_body_size"]) == ("complete", len(big))
    assert cut["response_body_chunks"] > len(cut["chunks"]) and cut["response_last_ns"] >= cut["chunk_ns"][-1]
    head = b"".join(cut["chunks"])
    assert 0 < len(head) <= 8192 and big.startswith(head)
    assert big.endswith(cut["response_tail"]) and tail_usage(cut).output_tokens == 400  # type: ignore[union-attr]
    assert b"".join(whole["chunks"]) == small and "response_body_size" not in whole

    result = CliRunner().invoke(cli, ["stats", str(mitm.out), "--json", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.stdout)["groups"]
    assert (group["requests"], group["ok"], group["errors"], group["response_not_kept"]) == (3, 1, 0, 2)
    assert group["response_not_kept_counted"] == 1 and group["workload"]["output_tokens"]["total"] == 403


@pytest.mark.parametrize("done", [True, False], ids=["after-done", "before-done"])
def test_a_client_gone_from_a_cut_stream_is_judged_by_its_last_chunks_not_its_kept_head(start_mitm, done):
    """The end marker of a stream past infertap_max_response is in no kept chunk: a client that hung
    up right after it (an SDK at [DONE]) was recorded gone, not complete. One gone before, gone."""
    import asyncio

    from tests.fake_upstream import ServerThread, sse_chunk, sse_upstream

    events = [sse_chunk("cut", i, "word " * 20) for i in range(200)]
    content = b"".join(events)
    # The upstream then takes its time to close, as engines do after [DONE].
    with ServerThread(sse_upstream(events + [b"data: [DONE]\n\n"] * done, lambda: asyncio.sleep(3))) as server:
        mitm = start_mitm("--mode", f"reverse:{server.url}", "--set", "infertap_max_response=8k", "--no-telemetry")
        got = b""
        with httpx.stream("POST", f"{mitm.url}/v1/chat/completions", json={"stream": True}, timeout=10) as r:
            for chunk in r.iter_raw():
                got += chunk
                if got.rstrip().endswith(b"[DONE]") or (not done and len(got) >= len(content)):
                    break  # hang up, as the openai SDK does at [DONE]
        mitm.stop()
    (x,) = mitm.exchanges()
    assert got == content + (b"data: [DONE]\n\n" if done else b"") and len(got) > 4 * 8192
    assert x["response_body_size"] >= len(got) and len(b"".join(x["chunks"])) <= 8192  # cut, as before
    if done:
        assert (x["end"], x["error"], x.get("closed_after_end")) == ("complete", None, True)
    else:
        assert x["end"] == "client_disconnected" and "closed_after_end" not in x


def _whole_answer(s: socket.socket) -> bytes:
    """An HTTP/1.1 answer read off ``s`` to its end: its Content-Length, or a chunked body's last chunk."""
    got = b""
    while b"\r\n\r\n" not in got:
        if not (more := s.recv(65536)):
            return got
        got += more
    head, _, body = got.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), None
    )
    while (len(body) < length) if length is not None else not body.endswith(b"0\r\n\r\n"):
        more = s.recv(65536)
        if not more:
            break
        body += more
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize("came", ["part", "whole"])
@pytest.mark.parametrize("size", ["buffered", "streamed"])
def test_a_body_its_client_hung_up_on_is_kept_cut_short_and_counted(start_mitm, fake, tmp_path, size, came):
    """A client that closed its connection while sending a request's body through `infertap mitm` was
    recorded client_disconnected with nothing saying the body was not the request: a buffered body
    empty (mitmproxy holds the part that came in its stream, not the flow), a streamed one with the
    part that went; either read as no generation, and ``stats`` counted it nowhere. It is now kept
    (credentials redacted) and marked ``request_body_cut``, as the proxy marks it, and ``stats``
    counts it of unknown body; the same request sent whole is answered and ok."""
    app, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", "--set", "stream_large_bodies=2k", "--no-telemetry")
    assert httpx.post(f"{mitm.url}/v1/chat/completions", json={"model": "m", "messages": [], "tag": "b"}).status_code == 200
    key = "sk-proj-cutbody0123456789abcdef"
    text = "a" * (5000 if size == "streamed" else 100)
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}], "tag": "b", "api_key": key}).encode()
    sent = ask if came == "whole" else ask[: ask.index(key.encode()) + len(key)]
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    with socket.create_connection(("127.0.0.1", mitm.port)) as s:
        s.sendall(head % len(ask) + sent)
        if came == "whole":  # the whole answer read before the close: a close after its head alone is a hang-up
            answer = _whole_answer(s)
            assert answer.startswith(b"HTTP/1.1 200"), answer
        else:
            time.sleep(0.5)  # mitmproxy had what came before the close
    deadline = time.monotonic() + 30
    while len(mitm.exchanges()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    mitm.stop()
    x = mitm.exchanges()[1]
    if came == "whole":
        assert (x["end"], x["status"], "request_body_cut" in x) == ("complete", 200, False)
    else:
        assert (x["end"], x["status"], x.get("request_body_cut")) == ("client_disconnected", None, True)
        assert x["request_body"] == sent.replace(key.encode(), REDACTED.encode())
        assert f"received {len(sent)} bytes, expected {len(ask)}" in x["error"]
    result = CliRunner().invoke(cli, ["stats", str(mitm.out), "--json", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.stdout)["groups"]
    counts = (group["requests"], group["ok"], group["request_body_unknown"])
    assert counts == ((2, 2, 0) if came == "whole" else (1, 1, 1))


def test_a_shutdown_records_the_body_arriving_cut_short_and_the_stream_in_flight_cancelled(start_mitm, fake, tmp_path):
    """`infertap mitm` stopped (SIGTERM) while a request's body arrived, and while an answer streamed,
    wrote neither: no mitmproxy hook ends a flow in flight at shutdown. Both are recorded now, as
    record records them: the body's part kept (credentials redacted) and marked ``request_body_cut``
    (``stats`` counts it of unknown body), the stream ``cancelled`` with the chunks that came."""
    app, url = fake
    mitm = start_mitm("--mode", f"reverse:{url}", "--no-telemetry")
    key = "sk-proj-cutbody0123456789abcdef"
    ask = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tag": "b", "api_key": key}).encode()
    sent = ask[: ask.index(key.encode()) + len(key)]
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    streaming = {"model": "m", "messages": [], "stream": True, "n_chunks": 1000, "pace_ms": 20, "tag": "b"}
    with socket.create_connection(("127.0.0.1", mitm.port)) as s, httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{mitm.url}/v1/chat/completions", json=streaming) as r:
            stream = r.iter_raw()
            assert next(stream)  # the answer is streaming
            s.sendall(head % len(ask) + sent)
            time.sleep(0.5)  # mitmproxy had what came
            mitm.stop()
    body, streamed = sorted(mitm.exchanges(), key=lambda x: "stream" in x["request_body"].decode(errors="replace"))
    assert (body["end"], body["status"], body.get("request_body_cut")) == ("cancelled", None, True)
    assert body["request_body"] == sent.replace(key.encode(), REDACTED.encode())
    assert body["error"] == "infertap mitm shut down while the request body was arriving"
    assert (streamed["end"], streamed["status"], "request_body_cut" in streamed) == ("cancelled", 200, False)
    assert 0 < len(streamed["chunks"]) < 1000 and streamed["error"] == "infertap mitm shut down while the request was in flight"
    result = CliRunner().invoke(cli, ["stats", str(mitm.out), "--json", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    (group,) = json.loads(result.stdout)["groups"]
    assert (group["requests"], group["request_body_unknown"]) == (1, 1)
