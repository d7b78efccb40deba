"""A Responses stream cut inside a built-in call keeps what streamed into it: a code interpreter's
code (``response.code_interpreter_call_code.delta``) and a shell's commands
(``response.shell_call_command.added``/``.delta``) come only as deltas until the item's
``output_item.done``. They were dropped, so two answers cut inside different code compared as the
same failure and the cut answer's call read as asking nothing. Now the call reads as the item stood,
as a whole body's item of that status reads (its ``in_progress`` status among what the tool gave
back marks it unfinished). Every event and item is checked against the openai SDK's own types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openai.types.responses import ResponseOutputItem, ResponseStreamEvent
from pydantic import TypeAdapter

from infertap.analysis.compare import compare
from infertap.apis import read_response
from tests import sdk_shapes
from tests.helpers import pair_captures

_SSE, _JSON = "text/event-stream", "application/json"
_REQUEST = {"model": "gpt-5.3-codex", "input": "Run it.", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]}
_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
_ITEMS: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)


def _event(kind: str, **fields: Any) -> bytes:
    event = {"type": kind, "sequence_number": 0, **fields}
    assert not _EVENTS.validate_python(event).model_extra, event  # no field the SDK doesn't know
    return f"event: {kind}\ndata: {json.dumps(event)}\n\n".encode()


def _item(**fields: Any) -> dict[str, Any]:
    assert not _ITEMS.validate_python(fields).model_extra, fields
    return fields


def _code_item(code: str, ids: str, status: str = "in_progress") -> dict[str, Any]:
    return _item(type="code_interpreter_call", id=f"ci_{ids}", status=status, code=code, container_id=f"cntr_{ids}", outputs=None)


def _shell_item(commands: list[str], ids: str, status: str = "in_progress") -> dict[str, Any]:
    action = {"commands": commands, "max_output_length": None, "timeout_ms": None}
    environment = {"type": "container_reference", "container_id": "cntr_mine"}  # the client's container
    return _item(type="shell_call", id=f"sh_{ids}", call_id=f"call_{ids}", status=status, action=action, environment=environment)


def _head(ids: str) -> bytes:
    response = {"id": f"resp_{ids}", "object": "response", "created_at": 1.0, "model": "gpt-5.3-codex", "output": [],
                "status": "in_progress", "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip
    sdk_shapes.response(response)
    return _event("response.created", response=response)


def _cut_code(pieces: list[str], ids: str) -> bytes:
    """Created, the code interpreter's item added, its code's ``pieces``, then the stream ends."""
    body = _head(ids) + _event("response.output_item.added", output_index=0, item=_code_item("", ids))
    for piece in pieces:
        body += _event("response.code_interpreter_call_code.delta", output_index=0, item_id=f"ci_{ids}", delta=piece)
    return body


def _cut_shell(commands: list[list[str]], ids: str) -> bytes:
    """Created, the shell's item added, each command added then streamed in ``pieces``, then the end."""
    body = _head(ids) + _event("response.output_item.added", output_index=0, item=_shell_item([], ids))
    for i, pieces in enumerate(commands):
        body += _event("response.shell_call_command.added", output_index=0, command_index=i, command="")
        for piece in pieces:
            body += _event("response.shell_call_command.delta", output_index=0, command_index=i, delta=piece)
    return body


def _whole(item: dict[str, Any]) -> bytes:
    response = {"id": "resp_w", "object": "response", "created_at": 1.0, "model": "gpt-5.3-codex", "output": [item],
                "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip
    sdk_shapes.response(response)
    return json.dumps(response).encode()


def _read(body: bytes, ctype: str = _SSE) -> Any:
    request = json.dumps({**_REQUEST, "stream": ctype == _SSE}).encode()
    record = {"path": "/v1/responses", "status": 200, "end": "complete", "request_body": request,
              "response_headers": [["content-type", ctype]], "chunks": [body]}  # fmt: skip
    return read_response(record)


def _divergence(tmp_path: Path, a: bytes, b: bytes) -> dict[str, Any]:
    request = ("/v1/responses", {**_REQUEST, "stream": True}, _SSE)
    first, second = pair_captures(tmp_path, {"pair": (request, [a], [b])})
    return compare(first, second, top=1)["divergence"]


def test_a_cut_call_reads_the_code_and_commands_streamed_into_it_as_its_item_whole_reads() -> None:
    cases = {
        "code": (_cut_code(["import math\n", "print(math.pi"], "1"), _code_item("import math\nprint(math.pi", "w")),
        "shell": (_cut_shell([["ls ", "-la"], ["cat RE"]], "1"), _shell_item(["ls -la", "cat RE"], "w")),
    }
    for name, (cut, item) in cases.items():
        streamed, whole = _read(cut), _read(_whole(item), _JSON)
        assert streamed.finish_reason is None and streamed.tool_calls, name  # unfinished, its call kept
        asked = json.loads(streamed.tool_calls[0]["arguments"])
        assert asked == ({"code": "import math\nprint(math.pi"} if name == "code" else {
            "action": {"commands": ["ls -la", "cat RE"], "max_output_length": None, "timeout_ms": None},
            "environment": {"type": "container_reference", "container_id": "cntr_mine"}}), name  # fmt: skip
        # The same item in a whole body (an answer that stopped there) reads alike, its status too.
        assert [c["arguments"] for c in streamed.tool_calls] == [c["arguments"] for c in whole.tool_calls], name
        assert streamed.tool_results == whole.tool_results == [f'{{"status":"in_progress","type":"{item["type"]}"}}'], name
        # Each piece of the call's input is generated output: its events bear tokens, as a function's arguments do.
        pieces = [e.obj["type"] for e in streamed.events if e.delta.generated and e.obj["type"] != "response.output_item.added"]
        assert len(pieces) == (2 if name == "code" else 3), (name, pieces)


def test_compare_tells_two_answers_cut_inside_different_code_apart(tmp_path: Path) -> None:
    cases = {
        "code": (_cut_code(["print(", "1"], "a"), _cut_code(["print(", "1"], "b"), _cut_code(["print(", "2"], "b")),
        "shell": (
            _cut_shell([["ls"], ["rm x"]], "a"),
            _cut_shell([["l", "s"], ["rm x"]], "b"),
            _cut_shell([["ls"], ["rm y"]], "b"),
        ),
    }
    for name, (a, same, other) in cases.items():
        # Must differ: both cut, inside different code (or commands).
        d = _divergence(tmp_path / f"{name}-differ", a, other)
        assert (d["failed"]["both"], d["failed"]["both_differ"], d["counts"]["exact"]) == (1, 1, 0), (name, d["failed"])
        # Must match: both cut at the same code, each answer's ids its own.
        d = _divergence(tmp_path / f"{name}-same", a, same)
        assert (d["failed"]["both"], d["failed"]["both_same"], d["counts"]["exact"]) == (1, 1, 1), (name, d["failed"])


def test_the_item_s_end_replaces_what_streamed_into_it() -> None:
    """Deltas then the item's ``output_item.done``: the call is the item as it ended (its status
    ``completed``: no unfinished mark), not the deltas read again."""
    body = _cut_code(["print(1)"], "1") + _event(
        "response.output_item.done", output_index=0, item=_code_item("print(1)", "1", "completed")
    )
    out = _read(body)
    assert [c["arguments"] for c in out.tool_calls] == ['{"code":"print(1)"}'] and out.tool_results == []


def test_code_streamed_into_no_opened_item_makes_no_call() -> None:
    """Code deltas at an output index no item opened (a gateway that dropped the item's start) are
    no call: a call of no tool asking nothing was read before it."""
    body = _head("1") + _event("response.code_interpreter_call_code.delta", output_index=0, item_id="ci_1", delta="print(1)")
    assert _read(body).tool_calls == []
