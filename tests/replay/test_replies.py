"""Replay's preparation with the streamed replies read by a second process (replay/replies.py): the
same workload as when they are read in the loading process, whatever the worker does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import infertap.apis.conversation as conversation
import infertap.capture.identity as identity
from infertap.apis.conversation import UNREAD, chat_answer
from infertap.capture.errors import CaptureCorruptError
from infertap.capture.identity import exchange_digest
from infertap.capture.reader import CaptureReader
from infertap.capture.segments import snapshot
from infertap.replay import replies
from infertap.replay.replies import Replies
from infertap.replay.workload import load_workload
from tests.helpers import write_capture
from tests.replay.test_bodies import RESPONSES, agent_capture


def _capture(path: Path) -> None:
    """Agent sessions over several segments, then a run of every odd response shape, answered or not."""
    agent_capture(path, sessions=16, turns=8, max_segment_bytes=24_000)
    body = {"model": "m", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}
    odd = [
        {"id": f"odd-{k}", "body": body, "chunks": RESPONSES[name], "status": status, "content_type": "text/event-stream"}
        for k, (name, status) in enumerate((n, s) for n in sorted(RESPONSES) for s in (200, 500))
    ]
    write_capture(path, odd)


def _workload(path: Path) -> tuple[list[tuple[Any, ...]], Any]:
    w = load_workload(path)
    items = [(i.source_id, i.parent, i.turn, i.session, i.think_ns, i.status) for i in w.items]
    return items, w.identity


def test_the_worker_reads_every_reply_and_the_workload_is_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _capture(tmp_path / "src")
    monkeypatch.setattr(replies, "WORKER_BYTES", 1 << 40)  # in the loading process only
    alone = _workload(tmp_path / "src")
    assert sum(parent is not None for _, parent, *_ in alone[0]) > 30  # sessions linked through their replies

    def not_here(record: Any) -> Any:
        raise AssertionError(f"{record.get('id')}: read in the loading process, not by the worker")

    monkeypatch.setattr(replies, "WORKER_BYTES", 0)
    monkeypatch.setattr(conversation, "chat_answer", not_here)  # the worker's own imports are untouched
    monkeypatch.setattr(identity, "exchange_digest", not_here)
    assert _workload(tmp_path / "src") == alone


def test_a_worker_out_of_step_or_gone_leaves_the_replies_to_the_loading_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _capture(tmp_path / "src")
    monkeypatch.setattr(replies, "WORKER_BYTES", 0)
    path, sizes = str(tmp_path / "src"), snapshot(tmp_path / "src")
    records = list(CaptureReader(path, sizes).exchanges())

    r = Replies(path, sizes)
    assert r.of(records[0]["id"]) == (chat_answer(records[0]), exchange_digest(records[0]))  # in step: the worker's
    process = r._process
    assert r.of("not-the-next-id") == (UNREAD, None)  # out of step: nothing more from it, and it is ended
    assert r.of(records[2]["id"]) == (UNREAD, None)
    assert process is not None and not process.is_alive()

    r = Replies(path, sizes)
    assert r._process is not None
    r._process.kill()  # a worker that dies (here before its imports are done): nothing from it, no wait
    assert [r.of(x["id"]) for x in records] == [(UNREAD, None)] * len(records)
    r.close()


def test_a_corrupt_capture_is_reported_as_without_the_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _capture(tmp_path / "src")
    segment = sorted((tmp_path / "src").iterdir())[1]
    data = bytearray(segment.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\0" * 64
    segment.write_bytes(bytes(data))
    errors = []
    for worker_bytes in (1 << 40, 0):
        monkeypatch.setattr(replies, "WORKER_BYTES", worker_bytes)
        with pytest.raises(CaptureCorruptError) as exc:
            load_workload(tmp_path / "src")
        errors.append(str(exc.value))
    assert errors[0] == errors[1]
