"""Replay at scale: bodies read again from the capture when sent, the one-pass workload, the fast reply reading."""

from __future__ import annotations

import asyncio
import gzip
import json
import random
import threading
import time
from pathlib import Path

import pytest

from infertap.apis import link, links_of, read_request, read_response
from infertap.apis.conversation import ChatPrefixes, Prefixes, chat_answer, read_links
from infertap.apis.openai import Chat
from infertap.capture.identity import workload_identity
from infertap.capture.reader import CaptureReader
from infertap.capture.records import new_exchange
from infertap.capture.writer import CaptureWriter
from infertap.replay import ReplayConfig, ReplayError, Schedule, Transforms, run_replay
from infertap.replay.bodies import Bodies, BodyError, BodyStore, ReadAhead
from infertap.replay.workload import load, load_workload
from tests import sdk_shapes
from tests.fake_upstream import ServerThread, sse_upstream
from tests.helpers import write_capture

WORDS = "the file function test error value return import class module path line check build".split()


def _message(rng: random.Random, role: str) -> dict:
    text = " ".join(rng.choices(WORDS, k=rng.randrange(5, 400)))
    if rng.random() < 0.1:
        text += ' \u00e9\u4e2d\U0001f600 \\ " \n'  # escapes and every UTF-8 width
    return {"role": role, "content": text}


def _sse(xid: str, reply: str, call: tuple[str, str] | None) -> list[bytes]:
    def event(delta: dict, finish: str | None = None) -> bytes:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
        obj = {"id": xid, "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": choices}
        return b"data: " + json.dumps(sdk_shapes.chat_chunk(obj)).encode() + b"\n\n"

    chunks = [event({"role": "assistant", "content": ""})]
    chunks += [event({"content": word + " "}) for word in reply.split()]
    if call is not None:
        chunks.append(
            event({"tool_calls": [{"index": 0, "id": "c", "type": "function", "function": {"name": call[0], "arguments": ""}}]})
        )
        chunks += [
            event({"tool_calls": [{"index": 0, "function": {"arguments": call[1][i : i + 7]}}]})
            for i in range(0, len(call[1]), 7)
        ]
    chunks.append(event({}, "tool_calls" if call else "stop"))
    return chunks + [b"data: [DONE]\n\n"]


def agent_capture(
    path: Path, *, sessions: int = 12, turns: int = 8, seed: int = 0, max_segment_bytes: int | None = None
) -> list[dict]:
    """Interleaved agent sessions, each request the whole conversation so far; big enough for the
    writer's compression dictionary and, with ``max_segment_bytes``, several segments."""
    rng = random.Random(seed)
    convs = [[{"role": "system", "content": "You are an agent. " * 50}, _message(rng, "user")] for _ in range(sessions)]
    left = [rng.randrange(1, turns + 1) for _ in range(sessions)]
    records = []
    # with max_segment_bytes, a frame each (no flush window to gather records in), so that segments
    # rotate at the same records whatever this machine's load
    extra = {} if max_segment_bytes is None else {"max_segment_bytes": max_segment_bytes, "flush_interval": 0.0}
    with CaptureWriter(path, recorder={"kind": "proxy"}, **extra) as writer:
        t = 0
        while any(left):
            s = rng.choice([k for k in range(sessions) if left[k]])
            xid = f"x{len(records)}"
            body = json.dumps({"model": "m", "stream": True, "messages": convs[s]}).encode()
            reply = " ".join(rng.choices(WORDS, k=rng.randrange(1, 30)))
            call = (
                (rng.choice(WORDS), json.dumps({"path": rng.choice(WORDS), "n": rng.randrange(9)}))
                if rng.random() < 0.5
                else None
            )
            chunks = _sse(xid, reply, call)
            t += rng.randrange(1, 5) * 1_000_000
            record = new_exchange(
                id=xid, seq=len(records) + 1, session=None, wall=1.8e9 + t / 1e9, start_ns=t, sent_ns=t, client=None,
                method="POST", path="/v1/chat/completions", query="", http_version="1.1",
                request_headers=[["content-type", "application/json"]], request_body=body, status=200,
                response_headers=[["content-type", "text/event-stream"]], headers_ns=1000, chunk_ns=[2000] * len(chunks),
                chunks=chunks, end_ns=3000, end="complete", error=None, upstream="u",
            )  # fmt: skip
            writer.write(record)
            records.append(record)
            while max_segment_bytes is not None and writer.exchanges < len(records) and writer.error is None:
                time.sleep(0.0002)  # written, in a frame of its own, before the next is queued
            left[s] -= 1
            message: dict = {"role": "assistant", "content": "".join(w + " " for w in reply.split())}
            if call:
                message["tool_calls"] = [{"id": "c", "type": "function", "function": {"name": call[0], "arguments": call[1]}}]
            convs[s] = [*convs[s], message, _message(rng, "tool" if call else "user")]
    return records


def reference_parents(path: Path) -> list[int | None]:
    """Parents as analysis finds them: every request and response read whole, linked in start order."""
    exchanges = sorted(CaptureReader(path).exchanges(), key=lambda r: (r["start_ns"], r["seq"]))
    links = [links_of(r, read_request(r), read_response(r)) for r in exchanges]
    found = link(links, [r["sent_ns"] for r in exchanges], [r["sent_ns"] + r.get("end_ns", 0) for r in exchanges])
    return [None if f is None else f[0] for f in found]


def test_bodies_read_again_are_the_recorded_bytes_across_segments_and_dictionaries(tmp_path: Path) -> None:
    records = agent_capture(tmp_path / "src", sessions=20, turns=10, max_segment_bytes=64 * 1024)
    reader = CaptureReader(tmp_path / "src")
    assert len(reader.segments) > 2 and any(r["type"] == "dictionary" for r in reader.records())
    items, _ = load(tmp_path / "src")
    sent = {r["id"]: r["request_body"] for r in records}
    assert len(items) == len(records) and all(item.store is not None for item in items)  # none held
    assert all(item.body == sent[item.source_id] for item in reversed(items))  # any order: blocks read again as needed
    # The links found in one pass, narrowed as they are read, are those of every request read whole.
    assert [item.parent for item in items] == reference_parents(tmp_path / "src")
    assert sum(item.parent is not None for item in items) > len(items) // 2
    assert load_workload(tmp_path / "src").identity == workload_identity(tmp_path / "src")


def test_a_body_not_found_in_its_block_is_held(tmp_path: Path) -> None:
    agent_capture(tmp_path / "src", sessions=2, turns=2)
    reader = CaptureReader(tmp_path / "src")
    store = BodyStore(reader)
    for record, ref, payload, start in reader.located():
        if record["type"] == "exchange":
            assert store.add(ref, payload, start, b"not in the capture") == -1
            spot = store.add(ref, payload, start, record["request_body"])
            assert spot >= 0 and store.raw(spot) == record["request_body"]


def test_replay_sends_and_records_the_capture_bytes(fake, tmp_path: Path) -> None:
    app, url = fake
    records = agent_capture(tmp_path / "src", sessions=6, turns=4)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    by_id = {r["id"]: r["request_body"] for r in records}
    replayed = list(CaptureReader(tmp_path / "out").exchanges())
    assert sorted(r["request_body"] for r in replayed) == sorted(by_id.values()) == sorted(r["body"] for r in app.requests)
    assert all(r["request_body"] == by_id[r["source_id"]] for r in replayed)
    # Transformed as they are read again: what was sent is recorded, and is the transform of the source.
    app.requests.clear()
    transforms = Transforms(set_values=[("temperature", 0)], model="other")
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out2", probe=False, transforms=transforms))
    replayed = list(CaptureReader(tmp_path / "out2").exchanges())
    assert all(r["request_body"] == transforms.body(by_id[r["source_id"]]) for r in replayed)
    assert sorted(r["request_body"] for r in replayed) == sorted(r["body"] for r in app.requests)


@pytest.mark.parametrize("damage", ["vanished", "corrupted", "truncated"])
def test_a_capture_changed_before_sending_stops_the_replay_and_keeps_what_was_sent(fake, tmp_path: Path, damage: str) -> None:
    app, url = fake
    agent_capture(tmp_path / "src", sessions=24, turns=8, max_segment_bytes=24 * 1024)
    segments = CaptureReader(tmp_path / "src").segments
    assert len(segments) >= 3
    victim = segments[-2]
    lost = {r["id"] for r in CaptureReader(victim).exchanges()}

    def harm(_: dict) -> None:  # after loading, before the first body is read again
        if damage == "vanished":
            victim.unlink()
        elif damage == "truncated":
            victim.write_bytes(victim.read_bytes()[:40])  # cut inside its first block
        else:
            data = bytearray(victim.read_bytes())
            for at in range(40, len(data), 200):  # every block hit
                data[at] ^= 0xFF
            victim.write_bytes(bytes(data))

    with pytest.raises(ReplayError, match=rf"the replay stopped: .*{victim.name}.* The \d+ exchanges sent before are recorded"):
        # each body of the damaged segment that the dispatcher reached before it stopped stops it
        # again: once, so the requests in flight end in their grace period, however slow this machine
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, grace_s=60.0), on_start=harm)
    reader = CaptureReader(tmp_path / "out")
    kept = list(reader.exchanges())
    assert reader.closed_cleanly and reader.torn == []
    assert kept and len(kept) == len(app.requests)  # everything sent is recorded, complete
    assert all(r["end"] == "complete" for r in kept) and not {r["source_id"] for r in kept} & lost


def test_read_ahead_keeps_a_bounded_window_and_serves_any_order() -> None:
    reads: list[int] = []
    lock = threading.Lock()

    class Counting(list):
        def __getitem__(self, i):  # type: ignore[override]
            with lock:
                reads.append(i)
            if i == 7:
                raise BodyError("seven is gone")
            return b"body %d" % i

    async def main() -> None:
        ahead = ReadAhead(Counting(range(1000)), window=10).start()
        try:
            assert await ahead.get(0) == b"body 0"
            await asyncio.sleep(0.2)
            assert max(reads) <= 10  # no further than the window past what was asked
            assert await ahead.get(5) == b"body 5"
            with pytest.raises(BodyError, match="seven"):
                await ahead.get(7)
            assert await ahead.get(500) == b"body 500"  # far ahead: read on its own
            assert await ahead.get(3) == b"body 3"  # held since read ahead
            await asyncio.sleep(0.2)
            assert await ahead.get(1) == b"body 1"
            assert max(reads) <= 500 + 10
        finally:
            ahead.close()
        assert reads.count(500) == 1  # read on its own, never again by the thread

    asyncio.run(main())


def test_bodies_transform_as_sent(tmp_path: Path) -> None:
    records = agent_capture(tmp_path / "src", sessions=2, turns=3)
    items, _ = load(tmp_path / "src")
    transforms = Transforms(set_values=[("temperature", 0)])
    bodies = Bodies(items, transforms, None)
    by_id = {r["id"]: r["request_body"] for r in records}
    assert [bodies[i] for i in range(len(items))] == [transforms.body(by_id[item.source_id]) for item in items]
    assert bodies[1:3] == [bodies[1], bodies[2]]


# -- the reply of a streamed chat completion, read only as far as linking needs ------------------------------


def _event(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _odd_chunk(delta: object, **extra: object) -> dict:
    """A chunk unchecked, for the odd ones the reading must survive (no index, arguments an object, a null delta)."""
    return {"id": "r1", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": None}], **extra}  # fmt: skip


def _chunk(delta: object) -> dict:
    return sdk_shapes.chat_chunk(_odd_chunk(delta))


#: vLLM's in-band error, as it sends it.
_BOOM = {"message": "boom", "type": "InternalServerError", "param": None, "code": 500}
RESPONSES: dict[str, list[bytes]] = {
    "usual": [_event(_chunk({"role": "assistant", "content": ""})), _event(_chunk({"content": "hi"})), b"data: [DONE]\n\n"],
    "tool call in pieces": [
        _event(_chunk({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get", "arguments": '{"a"'}}]})),
        _event(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]})),
        _event(_chunk({"tool_calls": [{"index": 1, "function": {"name": "put", "arguments": "{}"}}]})),
        b"data: [DONE]\n\n",
    ],
    "calls without index": [_event(_odd_chunk({"tool_calls": [{"function": {"name": "f"}}, {"function": {"name": "g"}}]}))],
    "arguments as an object": [
        _event(_odd_chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": {"b": 1, "a": 2}}}]}))
    ],
    "index as text": [_event(_odd_chunk({"tool_calls": [{"index": "0", "function": {"name": "f"}}]}))],
    "second choice": [
        _event({"id": "r", "choices": [{"index": 1, "delta": {"content": "no"}}, {"index": 0, "delta": {"content": "yes"}}]})
    ],
    "message beside an empty delta": [_event({"id": "r", "choices": [{"index": 0, "delta": {}, "message": {"content": "m"}}]})],
    "choice text": [
        _event(
            sdk_shapes.completion_chunk(
                {
                    "id": "r",
                    "object": "text_completion",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "text": "t", "finish_reason": None}],
                }
            )
        )
    ],  # fmt: skip
    "error event": [_event(_chunk({"content": "a"})), _event(sdk_shapes.vllm_error({"error": _BOOM}))],
    "error only": [_event({"error": "boom"})],
    "empty error": [_event(_chunk({"content": "a"})), _event({"error": ""}), b"data: [DONE]\n\n"],  # no message: answered
    "empty error only": [_event({"error": ""})],
    "id before the chunks": [_event({"id": "first"}), _event(_chunk({"content": "a"})), b"data: [DONE]\n\n"],
    "usage first": [_event({"id": "u0", "usage": {"prompt_tokens": 1}}), _event(_chunk({"content": "a"}))],
    "not json": [_event(_chunk({"content": "a"})), b"data: {oops\n\n", _event(_chunk({"content": "b"}))],
    "not an object": [b"data: [1, 2]\n\n", _event(_chunk({"content": "b"}))],
    "done mid-stream": [_event(_chunk({"content": "a"})), b"data: [DONE]\n\n", _event(_chunk({"content": "b"}))],
    "multi-line data": [b'data: {"id": "r", "choices": [{"index": 0,\ndata: "delta": {"content": "x"}}]}\n\n'],
    "newline inside": [b'data: {"id": "r", "choices": [{"index": 0, "delta":\n {"content": "x"}}]}\n\n'],
    "event lines": [b"event: chunk\n" + _event(_chunk({"content": "e"}))],
    "crlf": [_event(_chunk({"content": "a"})).replace(b"\n", b"\r\n")],
    "unterminated": [_event(_chunk({"content": "a"})), _event(_chunk({"content": "b"}))[:-2]],
    "empty ids": [_event({"id": "", "choices": [{"index": 0, "delta": {"content": "a"}}]}), _event({"id": 5, "choices": []})],
    "no choices, known object": [_event({"id": "r", "object": "chat.completion.chunk"})],
    "unknown shape": [_event({"hello": "world"})],
    "null delta and content": [_event(_odd_chunk(None)), _event(_chunk({"content": None})), _event(_chunk({"content": "z"}))],
    "bad utf-8": [b'data: {"id": "r", "choices": [{"index": 0, "delta": {"content": "\xff"}}]}\n\n'],
    "nan": [b'data: {"id": "r", "x": NaN, "choices": [{"index": 0, "delta": {"content": "n"}}]}\n\n'],
    "whole json": [
        json.dumps(
            sdk_shapes.chat_completion(
                {
                    "id": "r",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "w"}, "finish_reason": "stop"}],
                }
            )
        ).encode()  # fmt: skip
    ],
    "empty": [],
}


@pytest.mark.parametrize("name", sorted(RESPONSES))
@pytest.mark.parametrize("status", [200, 500])
def test_read_links_reads_replies_as_read_response_does(name: str, status: int) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}],
    }
    ctype = "application/json" if name == "whole json" else "text/event-stream"
    for encoding in (None, "gzip"):
        chunks = RESPONSES[name]
        headers = [["content-type", ctype]]
        if encoding:
            chunks, headers = [gzip.compress(b"".join(chunks))], [*headers, ["content-encoding", "gzip"]]
        record = {"id": "x", "path": "/v1/chat/completions", "request_body": json.dumps(body).encode(), "status": status,
                  "response_headers": headers, "chunks": chunks}  # fmt: skip
        request = read_request(record)
        prefixes = Prefixes.of(request.api, request.turns)
        expected = links_of(record, request, read_response(record))
        assert read_links(record, prefixes, request.previous_response_id, request.generation) == expected, name
        fast = ("usual", "tool call in pieces", "calls without index", "second choice", "empty error", "id before the chunks")
        if name in fast and not encoding:
            assert chat_answer(record) is not None  # read by the fast path, not handed to read_response


def test_a_request_body_not_utf8_is_no_conversation_in_the_workload(tmp_path: Path) -> None:
    """json.loads refuses bytes that are not UTF-8, so ``read_request`` reads no conversation in such
    a body; the workload's own reading of chat bodies (msgspec, which does not look inside every
    string) must not read one either, nor stop at it."""
    turn = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a0"}]
    bodies = [
        {"model": "m", "messages": turn[:1]},
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a0"}, '
        b'{"role": "user", "content": "\xff"}]}',  # fmt: skip
        json.dumps({"model": "m", "user": "@", "messages": [*turn, {"role": "user", "content": "more"}]})
        .encode()
        .replace(b"@", b"\xff"),
        {"model": "m", "messages": [*turn, {"role": "user", "content": "ok"}]},
    ]
    records = write_capture(tmp_path / "src", [{"id": f"x{i}", "body": b} for i, b in enumerate(bodies)])
    expected = [links_of(r, read_request(r), read_response(r)) for r in records]
    parents = {
        records[i]["id"]: records[p[0]]["id"]
        for i, p in enumerate(link(expected, [r["sent_ns"] for r in records], [r["sent_ns"] + r["end_ns"] for r in records]))
        if p is not None
    }
    assert parents == {"x3": "x0"}  # the one continuation that is JSON
    items, _ = load(tmp_path / "src")
    assert [i.source_id for i in items] == ["x0", "x1", "x2", "x3"]
    assert {i.source_id: items[i.parent].source_id for i in items if i.parent is not None} == parents


def test_the_workload_links_turns_as_the_analysis_does(tmp_path: Path) -> None:
    """Replay's parents, turns and think times are the analysis's ``turns`` table: generation
    requests only (a GET in a session is no turn), the think time up to the send (a replay's capture
    records a turn's start before its wait for the parent), a repeated id naming its first exchange."""
    from infertap.analysis import Analysis

    def chat(*contents: str) -> dict:
        roles = ["user", "assistant"]
        return {"model": "m", "messages": [{"role": roles[k % 2], "content": c} for k, c in enumerate(contents)]}

    records = write_capture(
        tmp_path / "src",
        [
            {"id": "a", "session": "S", "offset_s": 0.0, "body": chat("q0")},
            {"id": "g", "session": "S", "offset_s": 0.005, "method": "GET", "path": "/v1/models", "body": b""},
            {"id": "b", "session": "S", "offset_s": 0.010, "wait_ns": 5_000_000, "body": chat("q0", "a0", "q1")},
            {"id": "dup", "offset_s": 0.1, "body": chat("d0")},
            {"id": "dup", "offset_s": 0.2, "body": chat("d1")},
            {"id": "c", "offset_s": 0.3, "parent_id": "dup", "body": chat("d0", "a3", "more")},
        ],
    )
    with Analysis([str(tmp_path / "src")], cache_dir=tmp_path / "cache") as a:
        rows = a.sql("SELECT exchange_id, parent_id, turn, think_ns FROM turns").fetchall()
    expected = {xid: (parent, turn, think if parent is not None else None) for xid, parent, turn, think in rows}
    items, _ = load(tmp_path / "src")
    seen: dict[str, int] = {}
    names = []  # each item's name in the analysis: a repeated id's later copies are <id>~2, ...
    for item in items:
        seen[item.source_id] = seen.get(item.source_id, 0) + 1
        names.append(item.source_id if seen[item.source_id] == 1 else f"{item.source_id}~{seen[item.source_id]}")
    got = {
        name: (None if i.parent is None else names[i.parent], i.turn, i.think_ns)
        for name, i in zip(names, items, strict=True)
        if i.method == "POST"
    }
    assert got == expected
    assert expected["b"] == ("a", 1, records[2]["start_ns"] + 5_000_000 - (records[0]["sent_ns"] + records[0]["end_ns"]))
    assert expected["c"][:2] == ("dup", 1)
    assert [(i.parent, i.turn) for i in items if i.method == "GET"] == [(None, 0)]


def test_chat_prefixes_read_messages_as_chat_turns_does() -> None:
    rng = random.Random(3)
    cache = ChatPrefixes(size=16)  # small: what it forgets it reads again
    conversation: list[dict] = [{"role": "system", "content": "s"}]
    odd = [7, "text", None, {"role": "assistant", "content": [{"type": "text", "text": "parts"}, {"type": "image", "url": "u"}]},
           {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}]  # fmt: skip
    for step in range(60):
        conversation.append(rng.choice(odd) if step % 7 == 3 else _message(rng, rng.choice(["user", "assistant", "tool"])))
        raw = [json.dumps(m).encode() for m in conversation]
        turns, _, _ = Chat().turns({"messages": conversation})
        assert cache.of(raw) == Prefixes.of("chat", turns)


def test_chat_prefixes_remember_no_more_than_their_size_however_small() -> None:
    """A size under 8 forgot nothing (an eighth of it is 0 messages), so it grew without bound."""
    conversation = [{"role": "user" if i % 2 else "assistant", "content": f"turn {i}"} for i in range(40)]
    raw = [json.dumps(m).encode() for m in conversation]
    for size in (1, 4, 7, 8, 64):
        cache = ChatPrefixes(size=size)
        expected = Prefixes.of("chat", Chat().turns({"messages": conversation})[0])
        assert cache.of(raw) == expected  # what it forgets it reads again, the same
        assert len(cache._seen) <= size
        assert cache.of(raw) == expected


def test_bodies_that_cant_be_read_stop_the_replay_once_and_the_request_in_flight_gets_its_grace(tmp_path: Path) -> None:
    """Every body that couldn't be read stopped the replay again, and a second stop is a second
    Ctrl-C: it ended the grace period, and the requests in flight were cancelled (their answers
    lost) whenever two bodies failed before they ended, as many do when a segment is gone. The
    answer in flight is held until both failures are counted: it ends complete, within its grace."""
    write_capture(tmp_path / "a", [{"offset_s": 0.0, "body": {"model": "m", "stream": True, "messages": []}}])
    write_capture(tmp_path / "b", [{"offset_s": 0.0, "id": f"b{i}"} for i in range(2)])
    stats: list = []

    async def held() -> None:  # the answer's end, once both unreadable bodies are counted
        for _ in range(3000):
            if stats and stats[0].completed >= 2:
                return
            await asyncio.sleep(0.01)

    chunk = _event(sdk_shapes.chat_chunk({"id": "r1", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]}))  # fmt: skip
    chunk += b"data: [DONE]\n\n"
    with ServerThread(sse_upstream([chunk], held)) as server:
        config = ReplayConfig(
            (tmp_path / "a", tmp_path / "b"), server.url, tmp_path / "out", Schedule("concurrency", concurrency=3),
            probe=False, telemetry=False, grace_s=60.0,
        )  # fmt: skip
        with pytest.raises(
            ReplayError, match=r"the replay stopped: .*/b/000000.itap.zst: cannot read.* The 1 exchange sent before is recorded"
        ):
            run_replay(
                config,
                progress=lambda s: stats.append(s) if not stats else None,
                on_start=lambda _: [p.unlink() for p in CaptureReader(tmp_path / "b").segments],
            )
    [kept] = CaptureReader(tmp_path / "out").exchanges()
    assert (kept["end"], kept["status"], kept["source_id"]) == ("complete", 200, "src-0"), kept["error"]
