"""A response over ``--max-response-mb`` reaches the client whole while the recorder keeps only its
head (``response_body_size``, ``response_body_chunks``, ``response_last_ns``): one huge answer can't
grow its memory until it is killed with every exchange in flight. Analysis reads that answer as
unknown, never as the head it kept; one under the limit is kept and read exactly as before."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from infertap.cli import cli

LIMIT = 8192  # bytes: --max-response-mb as the test sets it
_MB = str(LIMIT / (1024 * 1024))


def _stream(url: str, tag: str, n: int) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": True, "tag": tag, "n_chunks": n}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        return r.read()


def test_a_response_over_the_limit_is_relayed_whole_kept_cut_and_read_as_unknown(fake, record, tmp_path, monkeypatch) -> None:
    _, upstream = fake
    rec = record(upstream, "--max-response-mb", _MB)
    big, small = _stream(rec.url, "big", 400), _stream(rec.url, "small", 3)
    assert big == _stream(upstream, "big", 400)  # every byte, as the engine sent it
    assert len(big) > 4 * LIMIT and len(small) < LIMIT
    assert rec.stop() == 0
    cut, whole = rec.exchanges()

    assert cut["end"] == "complete" and cut["response_body_size"] == len(big)
    assert cut["response_body_chunks"] > len(cut["chunks"]) and cut["response_last_ns"] >= cut["chunk_ns"][-1]
    head = b"".join(cut["chunks"])
    assert 0 < len(head) <= LIMIT and big.startswith(head) and len(cut["chunk_ns"]) == len(cut["chunks"])
    assert b"".join(whole["chunks"]) == small and "response_body_size" not in whole  # as before

    cache = str(tmp_path / "cache")
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json", "--cache-dir", cache])
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.stdout)["groups"]
    # The cut answer: unknown, neither ok (with a truncated answer) nor an error; the other read.
    assert (group["requests"], group["ok"], group["errors"], group["response_not_kept"]) == (2, 1, 0, 1)
    assert "response not kept 1" in CliRunner().invoke(cli, ["stats", str(rec.out), "--cache-dir", cache]).output

    monkeypatch.setenv("INFERTAP_CACHE", cache)
    result = CliRunner().invoke(cli, ["compare", str(rec.out), str(rec.out), "--json"])
    assert result.exit_code == 0, result.output
    divergence = json.loads(result.stdout)["divergence"]
    # The cut pair is neither a match nor a divergence, counted; the whole one matches.
    assert divergence["pairs"] == 1 and divergence["counts"]["response_not_kept"] == 1
    assert divergence["exact_match_rate"] == 1.0


def test_responses_under_the_limit_are_kept_whole_and_read(fake, record, tmp_path) -> None:
    _, upstream = fake
    rec = record(upstream)  # the default limit, 64 MiB
    big = _stream(rec.url, "big", 400)
    assert rec.stop() == 0
    [x] = rec.exchanges()
    assert b"".join(x["chunks"]) == big and "response_body_size" not in x
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json", "--cache-dir", str(tmp_path / "cache")])
    [group] = json.loads(result.stdout)["groups"]
    assert (group["requests"], group["ok"], group["response_not_kept"]) == (1, 1, 0)


@pytest.mark.parametrize("done", [True, False], ids=["after-done", "before-done"])
def test_a_client_gone_from_a_cut_stream_is_judged_by_its_last_chunks_not_its_kept_head(record, done) -> None:
    """The end marker of a stream past the limit is in no kept chunk: a client that hung up right
    after it (as an SDK does at [DONE]) was recorded gone, its complete answer as cut short. One
    that hung up before the end is gone still."""
    import asyncio

    from tests.fake_upstream import ServerThread, sse_chunk, sse_upstream

    events = [sse_chunk("cut", i, "word " * 20) for i in range(200)]
    content = b"".join(events)
    # The upstream then takes its time to close, as engines do after [DONE].
    with ServerThread(sse_upstream(events + [b"data: [DONE]\n\n"] * done, lambda: asyncio.sleep(2))) as server:
        rec = record(server.url, "--no-probe", "--max-response-mb", _MB)
        got = b""
        with httpx.stream("POST", f"{rec.url}/v1/chat/completions", json={"stream": True}, timeout=10) as r:
            for chunk in r.iter_raw():
                got += chunk
                if got.rstrip().endswith(b"[DONE]") or (not done and len(got) >= len(content)):
                    break  # hang up, as the openai SDK does at [DONE]
        assert rec.stop() == 0
    (x,) = rec.exchanges()
    assert got == content + (b"data: [DONE]\n\n" if done else b"") and len(got) > 4 * LIMIT
    assert x["response_body_size"] >= len(got) and len(b"".join(x["chunks"])) <= LIMIT  # cut, as before
    if done:
        assert (x["end"], x["error"], x.get("closed_after_end")) == ("complete", None, True)
    else:
        assert x["end"] == "client_disconnected" and "closed_after_end" not in x


def test_a_client_gone_from_a_cut_stream_with_chunks_never_written_says_how_many_were(record) -> None:
    """A client that stopped reading, then hung up: the chunks read from the upstream but never
    written to it are told by ``delivered_chunks``, counted against every chunk read, not against
    the kept head (far fewer than were written, so the count was left out)."""
    import asyncio
    import socket
    import time

    from tests.fake_upstream import ServerThread, sse_chunk, sse_upstream

    events = [sse_chunk("slow", i, "word " * 200) for i in range(20_000)]  # 20 MB: more than the sockets hold
    with ServerThread(sse_upstream(events, lambda: asyncio.sleep(0))) as server:
        rec = record(server.url, "--no-probe", "--max-response-mb", _MB)
        host, port = rec.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as client:
            body = b'{"stream": true}'
            client.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            assert client.recv(4096)  # the head and a first event, then nothing more is read
            time.sleep(1.5)  # the connection fills; the proxy waits on it with a chunk in hand
        assert rec.stop() == 0
    (x,) = rec.exchanges()
    assert x["end"] == "client_disconnected" and len(b"".join(x["chunks"])) <= LIMIT  # cut, and gone
    assert len(x["chunks"]) < x["delivered_chunks"] < x["response_body_chunks"]


def test_a_one_chunk_answer_over_the_limit_keeps_its_head_and_the_id_it_names(fake, record) -> None:
    """A non-streamed answer sent in one chunk past the limit was kept empty: its head is its first
    LIMIT bytes, and the id its JSON leads with is read (the answer stays unknown)."""
    from infertap.apis import kept_response_id, read_response

    _, upstream = fake
    rec = record(upstream, "--max-response-mb", _MB)
    bodies = []
    for tag, n in (("big", 3000), ("small", 3)):
        body = {"model": "m", "input": tag, "stream": False, "tag": tag, "n_chunks": n}
        bodies.append(httpx.post(f"{rec.url}/v1/responses", json=body, timeout=30).content)
    assert rec.stop() == 0
    cut, whole = rec.exchanges()
    assert len(bodies[0]) > 2 * LIMIT and cut["response_body_size"] == len(bodies[0])
    assert b"".join(cut["chunks"]) == bodies[0][:LIMIT] and kept_response_id(cut) == json.loads(bodies[0])["id"]
    assert read_response(cut).error is not None and not read_response(cut).readable
    assert b"".join(whole["chunks"]) == bodies[1] and "response_body_size" not in whole and kept_response_id(whole) is None


def test_a_cut_answers_usage_is_read_from_its_kept_tail_and_counted_in_stats_not_compare(
    fake, record, tmp_path, monkeypatch
) -> None:
    """A runaway stream's usage chunk comes last, past the kept head: its tail (``response_tail``)
    keeps it, stats counts its output tokens (the longest answer weighs most on throughput), while
    its answer stays unknown to compare."""
    from infertap.apis import tail_usage
    from infertap.capture.records import RESPONSE_TAIL_BYTES

    _, upstream = fake
    rec = record(upstream, "--max-response-mb", _MB)
    usage = {"stream_options": {"include_usage": True}}
    for tag, n in (("big", 400), ("small", 3)):
        body = {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": True, "tag": tag, "n_chunks": n, **usage}
        with httpx.stream("POST", f"{rec.url}/v1/chat/completions", json=body, timeout=30) as r:
            assert r.status_code == 200
            got = r.read()
        if tag == "big":
            big = got
    assert rec.stop() == 0
    cut, whole = rec.exchanges()
    assert len(big) > 4 * LIMIT and "response_tail" not in whole
    tail = cut["response_tail"]
    assert big.endswith(tail) and len(tail) == min(RESPONSE_TAIL_BYTES, len(big) - LIMIT)
    found = tail_usage(cut)
    assert found is not None and (found.output_tokens, found.prompt_tokens, found.finish_reason) == (400, 5, "length")

    cache = str(tmp_path / "cache")
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json", "--cache-dir", cache])
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.stdout)["groups"]
    assert (group["ok"], group["response_not_kept"], group["response_not_kept_counted"]) == (1, 1, 1)
    assert group["workload"]["output_tokens"]["total"] == 403 and group["throughput"]["output_tokens_unknown"] == 0
    assert group["throughput"]["output_tokens_per_s"] > 0 and group["finish_reasons"] == {"length": 2}
    text = CliRunner().invoke(cli, ["stats", str(rec.out), "--cache-dir", cache]).output
    assert "1 counted in the output tokens by the usage in their kept tail" in text

    monkeypatch.setenv("INFERTAP_CACHE", cache)
    result = CliRunner().invoke(cli, ["compare", str(rec.out), str(rec.out), "--json"])
    assert result.exit_code == 0, result.output
    divergence = json.loads(result.stdout)["divergence"]
    assert divergence["pairs"] == 1 and divergence["counts"]["response_not_kept"] == 1  # still not compared


def test_a_cut_messages_answers_prompt_tokens_are_read_from_its_heads_message_start(fake, record, tmp_path) -> None:
    """A Messages stream's usage is in two parts: the output's in message_delta (in the tail), the
    prompt's in message_start, the first event of the kept head. Both are read for a cut answer:
    its prompt tokens were unknown, its output tokens known."""
    _, upstream = fake
    rec = record(upstream, "--max-response-mb", _MB)
    body = {"model": "m", "max_tokens": 900, "messages": [{"role": "user", "content": "q"}], "stream": True}
    with httpx.stream("POST", f"{rec.url}/v1/messages", json={**body, "tag": "big", "n_chunks": 1500}, timeout=30) as r:
        assert r.status_code == 200 and r.read()
    assert rec.stop() == 0
    [cut] = rec.exchanges()
    # Neither the kept head nor its tail is the whole body: the tail alone holds no message_start.
    assert len(cut["response_tail"]) + LIMIT < cut["response_body_size"]

    cache = str(tmp_path / "cache")
    result = CliRunner().invoke(cli, ["stats", str(rec.out), "--json", "--cache-dir", cache])
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.stdout)["groups"]
    assert (group["response_not_kept"], group["response_not_kept_counted"]) == (1, 1)
    assert group["workload"]["output_tokens"]["total"] == 1500 and group["finish_reasons"] == {"length": 1}
    assert group["workload"]["prompt_tokens"]["total"] == 8  # 5 fresh, 2 read from the cache, 1 written to it
    assert group["workload"]["cached_tokens"]["total"] == 2
