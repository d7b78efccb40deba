"""A replay keeps a target's response only up to ``--max-response-mb`` (64 by default, as record's):
past it the response is still read whole, its head kept and marked ``response_body_size``, so that a
runaway stream or a huge embeddings answer can't grow the replay's memory until it is killed with
its run. Analysis reads that answer as unknown; one under the limit is kept whole and read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests import sdk_shapes
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import write_capture

LIMIT = 8192  # bytes: --max-response-mb as the test sets it


def _chat(tag: str, n: int) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": True, "tag": tag, "n_chunks": n}


def _replay(capture: Path, url: str, out: Path, *extra: str) -> list[dict[str, Any]]:
    return _replayed(capture, url, out, *extra)[0]


def _replayed(capture: Path, url: str, out: Path, *extra: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The replay's exchanges, by tag, and its summary (``--json``)."""
    args = ["replay", str(capture), "--target", url, "--out", str(out), "--no-probe", "--no-telemetry"]
    done = CliRunner().invoke(cli, [*args, "--concurrency", "1", "--json", *extra])
    assert done.exit_code == 0, done.output
    xs = [r for r in CaptureReader(out).records() if r["type"] == "exchange"]
    return sorted(xs, key=lambda x: json.loads(x["request_body"])["tag"]), json.loads(done.stdout)


def _stats(out: Path, cache: Path) -> dict[str, Any]:
    done = CliRunner().invoke(cli, ["stats", str(out), "--json", "--cache-dir", str(cache)])
    assert done.exit_code == 0, done.output
    [group] = json.loads(done.stdout)["groups"]
    return group


def test_a_target_response_over_the_limit_is_kept_cut_and_read_as_unknown(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{"body": _chat("big", 400)}, {"body": _chat("small", 3), "offset_s": 0.01}])
    limit = ("--max-response-mb", str(LIMIT / 2**20))
    with ServerThread(FakeUpstream()) as server:
        (cut, whole), summary = _replayed(tmp_path / "cap", server.url, tmp_path / "out", *limit)
        big = httpx.post(f"{server.url}/v1/chat/completions", json=_chat("big", 400), timeout=30).content
        args = ["replay", str(tmp_path / "cap"), "--target", server.url, "--no-probe", "--no-telemetry", *limit]
        text = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "text")])
    assert cut["end"] == "complete" and cut["response_body_size"] == len(big) > 4 * LIMIT
    assert cut["response_body_chunks"] > len(cut["chunks"]) and cut["response_last_ns"] >= cut["chunk_ns"][-1]
    head = b"".join(cut["chunks"])
    assert 0 < len(head) <= LIMIT and big.startswith(head) and len(cut["chunk_ns"]) == len(cut["chunks"])
    assert b"".join(whole["chunks"]).endswith(b"data: [DONE]\n\n") and "response_body_size" not in whole
    group = _stats(tmp_path / "out", tmp_path / "cache")
    assert (group["requests"], group["ok"], group["errors"], group["response_not_kept"]) == (2, 1, 0, 1)
    # The replay's summary says it as stats does: unknown, neither ok (where it said 2 ok) nor failed.
    assert (summary["sent"], summary["ok"], summary["failed"], summary["response_not_kept"]) == (2, 1, 0, 1)
    assert summary["throughput"]["ok_per_s"] == pytest.approx(1 / summary["throughput"]["span_s"])
    assert text.exit_code == 0 and "2 (1 ok, 1 response not kept (answered in full past --max-response-mb" in " ".join(
        text.output.split()
    )


def test_a_cut_target_answers_tail_is_kept_and_its_usage_counted(tmp_path: Path) -> None:
    """Replay keeps a cut answer's end (``response_tail``) as the recorder does: a chat stream's usage
    chunk and a Messages stream's message_delta are there (its prompt's in the head's message_start),
    and stats counts their tokens while their answers stay unknown."""
    usage = {"stream_options": {"include_usage": True}}
    messages = {"model": "m", "max_tokens": 9000, "messages": [{"role": "user", "content": "q"}], "stream": True}
    items = [
        {"body": {**_chat("chat", 1500), **usage}},
        {"path": "/v1/messages", "body": {**messages, "tag": "messages", "n_chunks": 1500}, "offset_s": 0.01},
    ]
    write_capture(tmp_path / "cap", items)
    with ServerThread(FakeUpstream()) as server:
        (chat, message), summary = _replayed(
            tmp_path / "cap", server.url, tmp_path / "out", "--max-response-mb", str(LIMIT / 2**20)
        )
        big = httpx.post(f"{server.url}/v1/chat/completions", json={**_chat("chat", 1500), **usage}, timeout=30).content
    assert big.endswith(chat["response_tail"]) and len(chat["response_tail"]) + LIMIT < chat["response_body_size"]
    assert b"message_delta" in message["response_tail"] and b"message_start" not in message["response_tail"]
    group = _stats(tmp_path / "out", tmp_path / "cache")
    assert (group["requests"], group["ok"], group["response_not_kept"], group["response_not_kept_counted"]) == (2, 0, 2, 2)
    assert (summary["ok"], summary["response_not_kept"], summary["failed"]) == (0, 2, 0)  # as stats: unknown
    assert group["workload"]["output_tokens"]["total"] == 3000  # 1500 each, by the usage in their tails
    assert group["workload"]["prompt_tokens"]["total"] == 5 + 8  # chat's usage chunk; message_start's 5 + 2 + 1
    assert group["throughput"]["output_tokens_per_s"] > 0
    # The replay's own summary counts them as stats does: it counted their output tokens as unknown
    # (reported no usage), and its output tokens/s was unknown for the longest answers.
    assert summary["output_tokens"] == {
        "total": 3000,
        "counted": 2,
        "unknown": 0,
        "source": {"usage": 2},
        "by_source": {"usage": 3000},
    }
    span = summary["throughput"]["span_s"]
    assert summary["throughput"]["output_tokens_per_s"] == pytest.approx(3000 / span)


def test_a_cut_answer_with_no_usage_in_its_tail_counts_as_unknown_in_the_replays_summary(tmp_path: Path) -> None:
    """Must differ: a cut chat stream that asked for no usage has none in its tail; its tokens stay
    unknown, the whole one's usage counted (a lower bound, as the summary line says)."""
    usage = {"stream_options": {"include_usage": True}}
    items = [{"body": _chat("big", 1500)}, {"body": {**_chat("small", 3), **usage}, "offset_s": 0.01}]
    write_capture(tmp_path / "cap", items)
    with ServerThread(FakeUpstream()) as server:
        _, summary = _replayed(tmp_path / "cap", server.url, tmp_path / "out", "--max-response-mb", str(LIMIT / 2**20))
    assert summary["output_tokens"] == {"total": 3, "counted": 1, "unknown": 1, "source": {"usage": 1}, "by_source": {"usage": 3}}


def test_target_responses_under_the_default_limit_are_kept_whole(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{"body": _chat("big", 400)}])
    with ServerThread(FakeUpstream()) as server:
        [x], summary = _replayed(tmp_path / "cap", server.url, tmp_path / "out")
        big = httpx.post(f"{server.url}/v1/chat/completions", json=_chat("big", 400), timeout=30).content
    assert b"".join(x["chunks"]) == big and "response_body_size" not in x
    group = _stats(tmp_path / "out", tmp_path / "cache")
    assert (group["requests"], group["ok"], group["response_not_kept"]) == (1, 1, 0)
    assert (summary["ok"], summary["response_not_kept"]) == (1, 0)


def test_a_response_limit_that_is_no_size_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{"body": _chat("big", 400)}])
    app = FakeUpstream()
    with ServerThread(app) as server:
        for mb in ("0", "-1", "nan"):
            args = ["replay", str(tmp_path / "cap"), "--target", server.url, "--out", str(tmp_path / f"o{mb}")]
            done = CliRunner().invoke(cli, [*args, "--no-probe", "--no-telemetry", "--max-response-mb", mb])
            assert done.exit_code != 0 and "--max-response-mb" in done.output, done.output
    assert app.requests == [] and not (tmp_path / "o0").exists()


def _conversation(stream: bool, **how: Any) -> list[dict[str, Any]]:
    """Two Responses turns: the second continues the first by its previous_response_id."""
    first = {"model": "m", "input": "one", "stream": stream, "tag": "t0", "n_chunks": 3000, **how}
    answer = [
        json.dumps(
            sdk_shapes.response(
                {
                    "id": "resp_src_0",
                    "object": "response",
                    "model": "m",
                    "status": "completed",
                    "output": [],
                    **sdk_shapes.RESPONSE_REST,
                }
            )
        ).encode()
    ]
    second = {"model": "m", "input": "two", "previous_response_id": "resp_src_0", "tag": "t1", "n_chunks": 2}
    return [
        {"path": "/v1/responses", "body": first, "chunks": answer},
        {"path": "/v1/responses", "body": second, "chunks": answer, "offset_s": 0.01},
    ]


@pytest.mark.parametrize(
    ("stream", "how", "limit", "continued"),
    [
        (True, {}, LIMIT, True),  # response.created, the stream's first event, is in the kept head
        (False, {"piece_bytes": 1024}, LIMIT, True),  # the JSON body's leading "id" is
        (False, {}, LIMIT, True),  # one chunk past the limit: its first bytes kept, the id among them
        (False, {}, 10, False),  # cut before the id ends: none read
    ],
)
def test_a_turn_continuing_a_cut_answer_is_sent_with_the_id_its_kept_head_names(
    tmp_path: Path, stream: bool, how: dict[str, Any], limit: int, continued: bool
) -> None:
    write_capture(tmp_path / "cap", _conversation(stream, **how))
    app = FakeUpstream()
    with ServerThread(app) as server:
        cut, turn = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--max-response-mb", str(limit / 2**20))
    assert cut["response_body_size"] > LIMIT and cut["end"] == "complete"
    if continued:
        assert [json.loads(r["body"]).get("previous_response_id") for r in app.requests] == [None, "resp_t0_1"]
        assert turn["end"] == "complete" and turn["rechained_from"] == "resp_src_0"
    else:
        assert len(app.requests) == 1 and b"".join(cut["chunks"]) == b'{"id": "re'
        assert turn["end"] == "refused" and "returned no response id" in turn["error"]
    group = _stats(tmp_path / "out", tmp_path / "cache")
    assert group["response_not_kept"] == 1  # the answer itself stays unknown, its id read or not


def _sessions(capture: Path, cache: Path) -> list[int]:
    done = CliRunner().invoke(cli, ["stats", str(capture), "--by", "session", "--json", "--cache-dir", str(cache)])
    assert done.exit_code == 0, done.output
    return sorted(g["session"]["turns"] for g in json.loads(done.stdout)["groups"] if g.get("session"))


@pytest.mark.parametrize(("head", "turns"), [(2, [2]), (0, [1, 1])])
def test_a_recorded_turn_continuing_a_cut_answer_is_linked_to_it_by_the_id_in_its_head(
    tmp_path: Path, head: int, turns: list[int]
) -> None:
    """A recording (no session header) whose first answer was cut: the second turn names its id, read
    from the kept head (response.created), so both are one session; cut before the id, two."""
    created = {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "status": "in_progress",
        "output": [],
        **sdk_shapes.RESPONSE_REST,
    }
    events = [
        {"type": "response.created", "response": created, "sequence_number": 0},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "a long answer",
         "logprobs": [], "sequence_number": 1},
    ]  # fmt: skip
    events = [sdk_shapes.response_event(e) for e in events]
    chunks = [b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events][:head]
    kept = {"response_body_size": 10 * LIMIT, "response_body_chunks": 500, "response_last_ns": 90_000_000}
    sse = {"path": "/v1/responses", "content_type": "text/event-stream"}
    write_capture(
        tmp_path / "rec",
        [
            {**sse, "body": {"model": "m", "input": "one", "stream": True}, "chunks": chunks, "fields": kept},
            {**sse, "body": {"model": "m", "input": "two", "previous_response_id": "resp_1"}, "offset_s": 0.5},
        ],
    )
    assert _sessions(tmp_path / "rec", tmp_path / "cache") == turns


def test_a_turn_carrying_a_cut_chat_answers_head_is_not_linked_to_it_by_replay_nor_analysis(tmp_path: Path) -> None:
    """A streamed chat answer cut after whole events: its kept head parses as a complete stream, but
    it is no reply the engine ended with. A next turn whose conversation carries that head continues
    nothing, in the replay's workload as in the analysis's sessions; uncut, both link it."""
    from replay.workload import load
    from tests.fake_upstream import sse_chunk

    head = [sse_chunk("big", i, f"big:{i} ") for i in range(3)]
    first = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    said = [{"role": "assistant", "content": "big:0 big:1 big:2 "}, {"role": "user", "content": "next"}]
    sse = {"content_type": "text/event-stream", "chunks": head}
    cut = {"response_body_size": 10 * LIMIT, "response_body_chunks": 400, "response_last_ns": 90_000_000}
    for name, fields, parents, turns in (("cut", cut, [None, None], [1, 1]), ("whole", {}, [None, 0], [2])):
        exchanges = [{**sse, "body": first, "fields": fields}, {"body": {**first, "messages": first["messages"] + said}}]
        write_capture(tmp_path / name, exchanges)
        assert [item.parent for item in load(tmp_path / name)[0]] == parents, name
        assert _sessions(tmp_path / name, tmp_path / f"cache-{name}") == turns, name
