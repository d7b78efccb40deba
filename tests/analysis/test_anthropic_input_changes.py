"""What Anthropic did to the request's input before the model read it (beta context management's
``applied_edits``, ``input_transformations``: thinking blocks dropped) is the effective input: two
runs of the same request where only one had its input changed showed no sign of it in compare.
Compare's configuration now counts each side's changed inputs and the pairs whose changes differ,
whole and streamed, through the capture writer; every body checked by ``tests.sdk_shapes`` against the
anthropic SDK's ``BetaMessage`` and stream events, at any depth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.apis import read_response
from infertap.cli import cli
from tests import sdk_shapes
from tests.helpers import write_capture

_SSE, _JSON = "text/event-stream", "application/json"
_REQUEST = {"model": "claude-opus-4-5", "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
_USAGE = {"input_tokens": 12, "output_tokens": 3}

DROPPED = {
    "input_transformations": [{"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "model_binding_mismatch"}]
}
CLEARED = {
    "context_management": {
        "applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 1200}]
    }
}
NOTHING = {"context_management": {"applied_edits": []}, "input_transformations": []}


def _whole(changes: dict[str, Any]) -> bytes:
    body = {"type": "message", "id": "msg_1", "role": "assistant", "model": "claude-opus-4-5", "content": [{"type": "text", "text": "Hello"}],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": _USAGE, **changes}  # fmt: skip
    return json.dumps(sdk_shapes.message(body, beta=True)).encode()


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(sdk_shapes.message_event(event, beta=True))}\n\n".encode()


def _stream(changes: dict[str, Any]) -> bytes:
    """The changes as the API streams them: on ``message_delta``, beside the stop reason."""
    start = {"type": "message", "id": "msg_1", "role": "assistant", "model": "claude-opus-4-5", "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": _USAGE}  # fmt: skip
    delta = {"stop_reason": "end_turn", "stop_sequence": None}
    return b"".join(
        _sse(e)
        for e in [
            {"type": "message_start", "message": start},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 3}, **changes},
            {"type": "message_stop"},
        ]
    )


_WAYS = (("whole", _whole, _JSON), ("streamed", _stream, _SSE))


def _compared(tmp_path: Path, pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    sides: list[list[dict[str, Any]]] = [[], []]
    for name, changes in pairs.items():
        for how, answer, ctype in _WAYS:
            body = {**_REQUEST, "stream": ctype == _SSE, "tag": f"{name}/{how}"}
            for side in (0, 1):
                sides[side].append(
                    {"path": "/v1/messages", "body": body, "chunks": [answer(changes[side])], "content_type": ctype}
                )
    write_capture(tmp_path / "a", sides[0])
    write_capture(tmp_path / "b", sides[1])
    return compare(tmp_path / "a", tmp_path / "b", top=10)


def test_the_input_the_api_changed_is_read_whole_and_streamed() -> None:
    for how, answer, ctype in _WAYS:
        request = json.dumps({**_REQUEST, "stream": ctype == _SSE}).encode()
        record = {"path": "/v1/messages", "status": 200, "end": "complete", "request_body": request,
                  "response_headers": [["content-type", ctype]], "chunks": [answer({**DROPPED, **CLEARED})]}  # fmt: skip
        out = read_response(record)
        assert out.text == "Hello" and json.loads(out.input_changes) == {
            "applied_edits": CLEARED["context_management"]["applied_edits"],
            "input_transformations": DROPPED["input_transformations"],
        }, how
        record["chunks"] = [answer(NOTHING)]
        assert read_response(record).input_changes is None, how


def test_compare_says_where_the_api_changed_one_side_s_input(tmp_path: Path) -> None:
    # Must differ: thinking dropped on A only; tool uses cleared on B only; other edits on each side.
    other = {
        "context_management": {"applied_edits": [{**CLEARED["context_management"]["applied_edits"][0], "cleared_tool_uses": 4}]}
    }
    r = _compared(tmp_path / "differ", {"dropped": (DROPPED, {}), "cleared": (NOTHING, CLEARED), "other": (CLEARED, other)})
    assert r["config"]["input_changes"] == {"a": 4, "b": 4, "pairs_differ": 6}
    assert r["divergence"]["exact_match_rate"] == 1  # the same answers: what differs is what the model read
    # Must match: the same changes on both sides, nothing changed on either.
    r = _compared(tmp_path / "same", {"dropped": (DROPPED, DROPPED), "cleared": (CLEARED, CLEARED), "none": (NOTHING, {})})
    assert r["config"]["input_changes"] == {"a": 4, "b": 4, "pairs_differ": 0}
    r = _compared(tmp_path / "none", {"none": (NOTHING, {})})
    assert r["config"]["input_changes"] is None


def test_compare_s_configuration_prints_the_input_changes(tmp_path: Path) -> None:
    _compared(tmp_path, {"dropped": (DROPPED, {}), "same": (CLEARED, CLEARED)})
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")], env={"COLUMNS": "300"})
    assert out.exit_code == 0, out.output
    said = "input changed by the API before the model read it (context edits, thinking dropped, MCP tools listed): A 4 exchanges, B 2 exchanges; differs in 2 pairs"
    assert said in out.output, out.output
