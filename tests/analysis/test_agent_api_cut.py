"""Agent APIs' streams cut short: a 200 Anthropic Messages or OpenAI Responses stream that ended
cleanly with no finish reason (no ``message_delta`` stop reason, no ``response.completed``) is an
answer the engine or a gateway cut, not an ok one: stats, compare and replay had called it ok."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.apis import ended_answer, read_response, unfinished
from infertap.cli import cli
from tests import sdk_shapes
from tests.analysis_builders import exchange, outcomes, write_capture

_MESSAGES_REQUEST = json.dumps(
    {"model": "claude-x", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "q"}]}
).encode()
_RESPONSES_REQUEST = json.dumps({"model": "gpt-x", "stream": True, "input": "q"}).encode()


def _sse(*events: dict[str, Any]) -> bytes:
    """Named SSE events, as Anthropic and the Responses API send them (each checked by its SDK; Anthropic's
    error event is the SDK's APIError, no stream event, and goes as it is)."""
    return b"".join(b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(_checked(e)).encode() + b"\n\n" for e in events)


def _checked(event: dict[str, Any]) -> dict[str, Any]:
    if event["type"].startswith("response."):
        return sdk_shapes.response_event(event)
    return event if event["type"] == "error" else sdk_shapes.message_event(event)


def _messages(text: str, *, stop: str | None = "end_turn", end: bool = True, error: bool = False) -> list[dict[str, Any]]:
    """An Anthropic Messages stream: its head, one text block, then (``stop``) the stop reason and
    (``end``) ``message_stop``; ``error``: an overloaded error event instead of its end."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
    ]
    if error:
        return [*events, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    if stop is not None:
        events += [
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 7}},
        ]
    return [*events, {"type": "message_stop"}] if end else events


def _responses(text: str, *, status: str | None = "completed", error: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A Responses stream: created, one text delta, then (``status``) its final event."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**_HEAD, "status": "in_progress", "output": []}, "sequence_number": 0},
        {
            "type": "response.output_text.delta",
            "item_id": "msg_1",
            "output_index": 0,
            "content_index": 0,
            "delta": text,
            "logprobs": [],
            "sequence_number": 1,
        },  # fmt: skip
    ]
    if status is None:
        return events
    item = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    response: dict[str, Any] = {
        **_HEAD,
        "status": status,
        "output": [item],
        "usage": sdk_shapes.response_usage(5, 9),
        "error": error,
    }
    if status == "incomplete":
        response["incomplete_details"] = {"reason": "max_output_tokens"}
    return [*events, {"type": f"response.{status}", "response": response, "sequence_number": 2}]


_HEAD = {"id": "resp_1", "object": "response", "model": "gpt-x", **sdk_shapes.RESPONSE_REST}


def _exchange(xid: str, api: str, events: list[dict[str, Any]], sent_ms: float = 0) -> dict[str, Any]:
    request, path = (_MESSAGES_REQUEST, "/v1/messages") if api == "messages" else (_RESPONSES_REQUEST, "/v1/responses")
    chunks = [(5 + k, _sse(e)) for k, e in enumerate(events)]
    return {
        **exchange(xid, sent_ms=sent_ms, request=request, chunks=chunks, headers=[["content-type", "text/event-stream"]]),
        "path": path,
    }


_CASES = {  # id: (api, events, ok, unfinished)
    "m_finished": ("messages", _messages("Hello"), True, False),
    "m_no_message_stop": ("messages", _messages("Hello", end=False), True, False),  # its stop reason said it
    "m_paused": ("messages", _messages("Hello", stop="pause_turn"), True, False),  # a finish of its own: not cut
    "m_cut_after_text": ("messages", _messages("Hello", stop=None, end=False), False, True),
    "m_stop_without_reason": ("messages", _messages("Hello", stop=None), False, True),  # message_stop, no stop reason
    "m_error_event": ("messages", _messages("Hello", error=True), False, False),  # an error: failed by that
    "r_completed": ("responses", _responses("Hello"), True, False),
    "r_incomplete": ("responses", _responses("Hello", status="incomplete"), True, False),  # ran out of tokens: length
    "r_cut": ("responses", _responses("Hello", status=None), False, True),
    "r_failed_with_error": (
        "responses",
        _responses("Hello", status="failed", error={"code": "server_error", "message": "boom"}),
        False,
        False,
    ),
    "r_failed_no_error": ("responses", _responses("Hello", status="failed"), False, False),  # read ok before
}


def _records() -> list[dict[str, Any]]:
    return [_exchange(xid, api, events, sent_ms=k) for k, (xid, (api, events, _, _)) in enumerate(_CASES.items())]


def test_stats_and_sql_call_a_cut_agent_stream_unfinished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    cap = write_capture(tmp_path / "cap", _records())
    rows = outcomes(cap)
    assert {xid: (r["ok"], r["unfinished"]) for xid, r in rows.items()} == {
        xid: (ok, cut) for xid, (_, _, ok, cut) in _CASES.items()
    }
    assert (
        rows["r_failed_no_error"]["error_message"] == "response failed" and rows["r_failed_with_error"]["error_message"] == "boom"
    )
    runner = CliRunner()
    stats = runner.invoke(cli, ["stats", str(cap), "--json"])
    assert stats.exit_code == 0, stats.output
    groups = json.loads(stats.output)["groups"]
    assert sum(g["unfinished"] for g in groups) == 3
    assert sum(g["ok"] for g in groups) == sum(ok for _, _, ok, _ in _CASES.values())


def test_replay_s_reading_of_each_ending_agrees_with_the_analysis() -> None:
    """Replay counts an answer unfinished as it ends from its last events (``ended_answer``), the
    analysis over the decoded columns: the same answer for the agent APIs, the output tokens
    their final events report (Messages' ``message_delta``, the Responses' ``response.usage``), and
    the error they report (an ``error`` event, a failed response), which replay counted ok before."""
    for record in _records():
        xid = record["id"]
        _, _, ok, cut = _CASES[xid]
        assert unfinished(record) is cut, xid
        tail_cut, told, tokens, error = ended_answer(record, generation=True)
        assert tail_cut is cut, xid
        if ok:
            assert told and tokens == (7 if xid.startswith("m_") else 9), (xid, told, tokens)
        if not cut:  # an answer, or an error said in its body: the tail tells which, as the whole read does
            assert told and error == read_response(record).error_message, (xid, error)
            assert (error is None) is ok, xid


def test_compare_counts_a_cut_agent_answer_as_failed_not_as_a_different_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B's Messages answer cut after its first words against A's finished one: B failed, not an
    output that differs; the same finished answer on both sides matches; a different one differs."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a = write_capture(
        tmp_path / "a",
        [
            _exchange("same", "messages", _messages("Paris"), 0),
            _exchange("other", "messages", _messages("Paris"), 1),
            _exchange("cut", "messages", _messages("Paris is the capital"), 2),
            _exchange("r_cut", "responses", _responses("Paris is the capital"), 3),
        ],
    )
    b = write_capture(
        tmp_path / "b",
        [
            _exchange("same", "messages", _messages("Paris"), 0),
            _exchange("other", "messages", _messages("Lyon"), 1),
            _exchange("cut", "messages", _messages("Paris", stop=None, end=False), 2),
            _exchange("r_cut", "responses", _responses("Paris", status=None), 3),
        ],
    )
    out = CliRunner().invoke(cli, ["compare", str(a), str(b), "--json"], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    d = data["divergence"]
    assert (d["pairs"], d["outputs_compared"], d["outputs_differ"], d["counts"]["exact"]) == (4, 2, 1, 1)
    assert (d["failed"]["pairs"], d["failed"]["a_only"], d["failed"]["b_only"]) == (2, 0, 2)
    assert data["outcomes"]["b"]["unfinished"] == 2 and data["outcomes"]["a"]["unfinished"] == 0
