"""Scrubbed: what every recorder does last with an exchange (infertap/capture/scrubbing.py)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from infertap.capture.records import Exchange, new_exchange
from infertap.capture.redact import Redactor
from infertap.capture.scrubbing import OFFLOAD_BYTES, Scrubbed

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

    def request(self, record: Any, found: set[str] | None = None) -> None:
        self.threads.append(threading.current_thread())
        if self.fail:
            raise RuntimeError("a bug in the search")
        super().request(record, found)


def _record_all(redactor: Redactor, records: list[Exchange]) -> tuple[list[Exchange], threading.Thread]:
    written: list[Exchange] = []

    async def main() -> threading.Thread:
        scrubbed = Scrubbed(redactor, written.append)
        for record in records:
            scrubbed.record(record, set(), request=True)
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


def test_a_large_request_body_whose_search_fails_is_recorded_without_its_bodies() -> None:
    large = _exchange(2 * OFFLOAD_BYTES)
    size = len(large["request_body"])
    written, _ = _record_all(_Watched(fail=True), [large])
    assert written == [large]
    assert large["request_body"] == b"" and large.get("request_body_size") == size
    assert large["chunks"] == [] and KEY.encode() not in json.dumps(large, default=repr).encode()
