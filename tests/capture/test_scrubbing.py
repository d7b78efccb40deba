"""Scrubbed: what every recorder does last with an exchange (infertap/capture/scrubbing.py)."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import re
import threading
from typing import Any

from infertap.capture.records import Exchange, new_exchange
from infertap.capture.redact import Redactor, _spans
from infertap.capture.scrubbing import OFFLOAD_BYTES, OFFLOAD_STRINGS, Scrubbed

KEY = "sk-live-KKKK9999kkkk"


def _exchange(body_bytes: int) -> Exchange:
    """A JSON request of about ``body_bytes`` with an ``api_key``, whose response repeats the key."""
    filler = "word " * max(0, body_bytes // 5)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": filler}], "api_key": KEY}).encode()
    record = new_exchange(
        method="POST",
        path="/v1/chat/completions",
        upstream="http://127.0.0.1:1",
        wall=0.0,
        start_ns=0,
        request_headers=[["content-type", "application/json"]],
        request_body=body,
    )
    record.update({"status": 401, "chunks": [f"Incorrect API key provided: {KEY}".encode()], "chunk_ns": [1]})
    return record


class _Watched(Redactor):
    """A real redactor that notes the thread each request body is redacted on (and can fail)."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.threads: list[threading.Thread] = []
        self.fail = fail

        self.echo_threads: list[threading.Thread] = []

    def request(self, record: Any, found: set[str] | None = None) -> None:
        self.threads.append(threading.current_thread())
        if self.fail:
            raise RuntimeError("a bug in the search")
        super().request(record, found)

    def echoes(self, record: Any, found: set[str]) -> None:  # type: ignore[override]
        self.echo_threads.append(threading.current_thread())
        Redactor.echoes(record, found)


def _record_all(
    redactor: Redactor, records: list[Exchange], found: set[str] | None = None
) -> tuple[list[Exchange], threading.Thread]:
    written: list[Exchange] = []

    async def main() -> threading.Thread:
        scrubbed = Scrubbed(redactor, written.append)
        for record in records:
            scrubbed.record(record, set(found or ()), request=True)
        await scrubbed.drained()
        return threading.current_thread()

    return written, asyncio.run(main())


def test_a_large_request_body_is_redacted_off_the_loop_and_its_credential_kept_out_of_the_response() -> None:
    redactor = _Watched()
    small, large = _exchange(1000), _exchange(2 * OFFLOAD_BYTES)
    written, loop_thread = _record_all(redactor, [large, small])
    assert sorted(map(id, written)) == sorted([id(small), id(large)])  # drained: both written
    assert redactor.threads[0] is not loop_thread and redactor.threads[1] is loop_thread  # large, then small
    for record in written:
        assert json.loads(record["request_body"])["api_key"] == "[REDACTED]"
        assert record["chunks"] == [b"Incorrect API key provided: [REDACTED]"]  # found by the body's search
    assert len(large["request_body"]) > 2 * OFFLOAD_BYTES


def test_a_small_body_of_many_strings_is_redacted_off_the_loop_a_body_of_few_on_it() -> None:
    """A body far under OFFLOAD_BYTES packed with short strings (an agent's thousands of messages)
    and a credential's key is walked string by string: ~50 ms for 200 KiB, every other stream
    stalled meanwhile. Its count of strings sends it to a worker thread; a body as large of a few
    long strings is scanned on the loop, as a small ordinary request is; so is a form body of
    many parameters, each read in turn."""
    many = _exchange(0)
    doc = json.loads(many["request_body"])
    doc["messages"] = [{"role": "user", "content": "x"}] * OFFLOAD_STRINGS
    many["request_body"] = json.dumps(doc).encode()
    few = _exchange(len(many["request_body"]))  # as large, one long string
    form = _exchange(0)
    form["request_headers"] = [["content-type", "application/x-www-form-urlencoded"]]
    form["request_body"] = ("&".join(f"p{i}=v" for i in range(OFFLOAD_STRINGS)) + f"&api_key={KEY}").encode()
    assert len(many["request_body"]) < OFFLOAD_BYTES // 4 and len(few["request_body"]) >= len(many["request_body"])
    redactor = _Watched()
    written, loop_thread = _record_all(redactor, [many, few, form])
    assert sorted(map(id, written)) == sorted(map(id, [many, few, form]))
    assert redactor.threads[0] is not loop_thread and redactor.threads[2] is not loop_thread  # many, form
    assert redactor.threads[1] is loop_thread  # few
    assert json.loads(many["request_body"])["api_key"] == "[REDACTED]" and KEY.encode() not in form["request_body"]
    for record in written:
        assert record["chunks"] == [b"Incorrect API key provided: [REDACTED]"]


def test_a_large_request_body_whose_search_fails_is_recorded_without_its_bodies() -> None:
    large = _exchange(2 * OFFLOAD_BYTES)
    size = len(large["request_body"])
    written, _ = _record_all(_Watched(fail=True), [large])
    assert written == [large]
    assert large["request_body"] == b"" and large.get("request_body_size") == size
    assert large["chunks"] == [] and KEY.encode() not in json.dumps(large, default=repr).encode()


def test_a_small_compressed_request_body_is_decoded_and_redacted_off_the_loop() -> None:
    """A gzip body far under OFFLOAD_BYTES may decode to many MiB (up to the 64 MiB bound): its
    size says nothing of what its search costs, so it is searched on a worker thread, never on the
    loop streaming other exchanges. Stored decoded and redacted, its echo in the response too."""
    record = _exchange(2 * OFFLOAD_BYTES)
    plain = record["request_body"]
    record["request_body"] = gzip.compress(plain)
    record["request_headers"] += [["content-encoding", "gzip"], ["content-length", str(len(record["request_body"]))]]
    assert len(record["request_body"]) < OFFLOAD_BYTES // 10
    redactor = _Watched()
    written, loop_thread = _record_all(redactor, [record])
    assert written == [record] and redactor.threads[0] is not loop_thread
    assert record["request_body"] == plain.replace(KEY.encode(), b"[REDACTED]")  # every other byte as sent
    assert record["request_headers"] == [
        ["content-type", "application/json"],
        ["content-length", str(len(record["request_body"]))],
    ]
    assert record["chunks"] == [b"Incorrect API key provided: [REDACTED]"] and record["chunk_ns"] == [1]


def test_a_large_response_repeating_a_credential_is_searched_off_the_loop() -> None:
    """An error that quotes a huge request (plain, no encoding) holding a credential of a small
    request: the response is searched for it on a worker thread; the small request on the loop."""
    record = _exchange(1000)
    quoted = b"x" * (2 * OFFLOAD_BYTES) + KEY.encode() + b"y" * 100
    record["chunks"] = [b"bad request: " + quoted[:OFFLOAD_BYTES], quoted[OFFLOAD_BYTES:]]
    record["chunk_ns"] = [1, 2]
    redactor = _Watched()
    written, loop_thread = _record_all(redactor, [record], found={"sk-header-AAAA0000"})
    assert written == [record]
    assert redactor.threads == [loop_thread] and redactor.echo_threads[0] is not loop_thread
    assert record["chunks"][0] == b"bad request: " + quoted[:OFFLOAD_BYTES]  # each chunk keeps its place
    assert record["chunks"][1] == quoted[OFFLOAD_BYTES:].replace(KEY.encode(), b"[REDACTED]") and record["chunk_ns"] == [1, 2]


def test_a_small_response_repeating_a_credential_is_still_searched_at_once() -> None:
    redactor = _Watched()
    written, loop_thread = _record_all(redactor, [_exchange(1000)])
    assert redactor.threads == [loop_thread] and redactor.echo_threads == [loop_thread]
    assert written[0]["chunks"] == [b"Incorrect API key provided: [REDACTED]"]


def test_credentials_are_found_a_window_at_a_time_as_one_scan_finds_them() -> None:
    """``_spans`` searches a window at a time (the GIL let go between them): the same matches as one
    scan, a needle across a window's edge and overlapping needles (the longest first) included."""
    rnd = random.Random(7)
    needles = [b"abcab", b"cab", b"bb"]
    pattern = re.compile(b"|".join(re.escape(n) for n in needles))
    for _ in range(300):
        body = bytes(rnd.choice(b"abcx") for _ in range(rnd.randrange(0, 200)))
        window = rnd.randrange(1, 20)
        assert _spans(body, pattern, 5, window) == [m.span() for m in pattern.finditer(body)], (body, window)
