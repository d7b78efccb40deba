"""Fields of the Responses API's output items that tell two answers apart (openai 3.63.0): a
function's ``namespace`` (two namespaces' tools of one name), a call's ``caller`` (made by a
``program`` item's code, programmatic tool calling, or by the model), a message's ``phase``
(commentary or the final answer). Each was dropped, so answers differing only in one compared
identical; a call made by a program carried that program's call id, new on every answer, in the
arguments of a shell or apply-patch call, so the same answer replayed differed. Whole and streamed,
through the capture writer; every item checked against the openai SDK's own types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openai.types.responses import Response, ResponseOutputItem
from pydantic import TypeAdapter

from infertap.analysis.compare import compare
from infertap.apis import read_response
from tests.helpers import pair_captures

_SSE, _JSON = "text/event-stream", "application/json"
_REQUEST = {"model": "gpt-5.3-codex", "input": "Look up ACME."}
_ITEMS: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)


def _item(**fields: Any) -> dict[str, Any]:
    """An output item as the SDK reads it: of the type it says, with no field the SDK doesn't know."""
    parsed = _ITEMS.validate_python(fields)
    assert parsed.type == fields["type"] and not parsed.model_extra, fields
    return fields


def _lookup(namespace: str | None = "crm", call_id: str = "call_1", caller: dict[str, Any] | None = None) -> dict[str, Any]:
    more = {"namespace": namespace} if namespace else {}
    more |= {"caller": caller} if caller else {}
    return _item(type="function_call", id=f"fc_{call_id}", call_id=call_id, name="lookup", arguments='{"q":"ACME"}', **more)


def _program(call_id: str = "call_p1") -> dict[str, Any]:
    code = "await tools.crm.lookup({q: 'ACME'})"
    return _item(type="program", id=f"pg_{call_id}", call_id=call_id, code=code, fingerprint=f"fp-{call_id}")


def _shell(call_id: str, program: str) -> dict[str, Any]:
    """The shell's ``ls``, run by the code of ``program``."""
    return _item(
        type="shell_call",
        id=f"sh_{call_id}",
        call_id=call_id,
        status="completed",
        action={"commands": ["ls"], "max_output_length": None, "timeout_ms": None},
        caller={"type": "program", "caller_id": program},
    )


def _built_in(kind: str, created_by: str, asked: str) -> dict[str, Any]:
    """A shell's, apply patch's or tool search's call asking ``asked``, made by ``created_by``."""
    ids = {"id": f"it_{created_by}", "call_id": f"call_{created_by}", "created_by": created_by, "status": "completed"}
    if kind == "shell_call":
        action = {"commands": [asked], "max_output_length": None, "timeout_ms": None}
        return _item(type=kind, action=action, **ids)
    if kind == "apply_patch_call":
        return _item(type=kind, operation={"type": "create_file", "path": asked, "diff": "+hi"}, **ids)
    return _item(type=kind, arguments={"query": asked}, execution="server", **ids)


def _message(text: str, phase: str | None) -> dict[str, Any]:
    more = {"phase": phase} if phase else {}
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return _item(type="message", id="msg_1", role="assistant", status="completed", content=content, **more)


def _response(output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    """The whole response holding ``output``, as the SDK reads one (checked: every field it requires)."""
    usage = {"input_tokens": 30, "output_tokens": 9, "total_tokens": 39,
             "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    body = {"id": "resp_1", "object": "response", "created_at": 1.0, "model": "gpt-5.3-codex", "output": output,
            "status": status, "usage": usage, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip
    assert not Response.model_validate(body).model_extra, body
    return body


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``response.output_item.added`` sends it: a message with no content yet, any other item as it ends."""
    return _item(**{**item, "content": []}) if item["type"] == "message" else item


def _stream(output: list[dict[str, Any]]) -> bytes:
    """Each item added (a message empty, then its text as a delta), each done, then the whole response."""
    events = [_sse("response.created", {"response": _response([], "in_progress")})]
    for i, item in enumerate(output):
        events.append(_sse("response.output_item.added", {"output_index": i, "item": _opened(item)}))
        for part in item.get("content", []) if item["type"] == "message" else []:
            events.append(_sse("response.output_text.delta", {"output_index": i, "content_index": 0, "delta": part["text"]}))
        events.append(_sse("response.output_item.done", {"output_index": i, "item": item}))
    events.append(_sse("response.completed", {"response": _response(output)}))
    return b"".join(events)


def _whole(output: list[dict[str, Any]]) -> bytes:
    return json.dumps(_response(output)).encode()


_WAYS = (("streamed", _stream, _SSE), ("whole", _whole, _JSON))


def _compared(tmp_path: Path, a: bytes, b: bytes, ctype: str) -> dict[str, Any]:
    request = ("/v1/responses", {**_REQUEST, "stream": ctype == _SSE}, ctype)
    first, second = pair_captures(tmp_path, {"pair": (request, [a], [b])})
    return compare(first, second, top=1)["divergence"]


def _read(body: bytes, ctype: str) -> Any:
    request = json.dumps({**_REQUEST, "stream": ctype == _SSE}).encode()
    record = {"path": "/v1/responses", "status": 200, "end": "complete", "request_body": request,
              "response_headers": [["content-type", ctype]], "chunks": [body]}  # fmt: skip
    return read_response(record)


def test_a_call_keeps_its_namespace_and_its_caller() -> None:
    for how, answer, ctype in _WAYS:
        out = _read(answer([_program(), _lookup(caller={"type": "program", "caller_id": "call_p1"}), _lookup(None)]), ctype)
        assert [(c["name"], c.get("toolset"), c.get("caller"), bool(c.get("server"))) for c in out.tool_calls] == [
            ("program", None, None, True),
            ("lookup", "crm", {"type": "program", "caller_id": "call_p1"}, False),
            ("lookup", None, None, False),
        ], how
        assert out.finish_reason == "tool_calls", how


def test_compare_tells_one_namespace_s_tool_from_another_s(tmp_path: Path) -> None:
    for how, answer, ctype in _WAYS:
        # Must differ: crm's lookup against billing's, and against a function of no namespace.
        for other in ("billing", None):
            d = _compared(tmp_path / f"{how}-{other}", answer([_lookup("crm")]), answer([_lookup(other)]), ctype)
            assert d["counts"]["tool_calls_differ"] == 1 and d["exact_match_rate"] == 0, (how, other, d["counts"])
            (item,) = d["most_divergent"]
            assert item["tool_calls"]["toolsets"] == [["crm"], [other]], (how, other)
        # Must match: crm's lookup on both sides, each answer's call id its own.
        d = _compared(tmp_path / f"{how}-same", answer([_lookup("crm")]), answer([_lookup("crm", "call_9")]), ctype)
        assert d["exact_match_rate"] == 1, (how, d["counts"])


def test_compare_tells_a_call_made_by_a_program_from_the_model_s_own(tmp_path: Path) -> None:
    by_program = {"type": "program", "caller_id": "call_p1"}
    for how, answer, ctype in _WAYS:
        # Must differ: the same lookup, made by the program's code on A, by the model on B.
        a = answer([_program(), _lookup(caller=by_program)])
        d = _compared(tmp_path / f"{how}-differ", a, answer([_program(), _lookup()]), ctype)
        assert d["counts"]["tool_calls_differ"] == 1 and d["exact_match_rate"] == 0, (how, d["counts"])
        (item,) = d["most_divergent"]
        assert item["tool_calls"]["callers"] == [[None, "program (call 0)"], [None, None]], how
        # Must match: the same program's calls, each answer's ids its own (a replay's are new).
        renamed = answer([_program("call_p9"), _lookup("crm", "call_8", {"type": "program", "caller_id": "call_p9"})])
        d = _compared(tmp_path / f"{how}-same", a, renamed, ctype)
        assert d["exact_match_rate"] == 1, (how, d["counts"])
        a, b = answer([_program(), _shell("call_2", "call_p1")]), answer([_program("call_p9"), _shell("call_7", "call_p9")])
        d = _compared(tmp_path / f"{how}-shell", a, b, ctype)
        assert d["exact_match_rate"] == 1, (how, d["counts"])


def test_compare_tells_commentary_from_the_final_answer(tmp_path: Path) -> None:
    for how, answer, ctype in _WAYS:
        said = "Looking it up."
        # Must differ: the same words as commentary on A, as the final answer on B.
        d = _compared(
            tmp_path / f"{how}-differ", answer([_message(said, "commentary")]), answer([_message(said, "final_answer")]), ctype
        )
        assert d["counts"]["layout_differs"] == 1 and d["exact_match_rate"] == 0, (how, d["counts"])
        (item,) = d["most_divergent"]
        assert item["layout"] == [["message(commentary):14"], ["message(final_answer):14"]], how
        # Must match: commentary on both sides.
        same = answer([_message(said, "commentary")])
        d = _compared(tmp_path / f"{how}-same", same, answer([_message(said, "commentary")]), ctype)
        assert d["exact_match_rate"] == 1, (how, d["counts"])


def test_compare_leaves_out_who_created_a_built_in_call(tmp_path: Path) -> None:
    """``created_by`` is an id (of the entity that made the call), new per answer as a call id is."""
    for kind in ("shell_call", "apply_patch_call", "tool_search_call"):
        for how, answer, ctype in _WAYS:
            # Must match: the same call, each answer's ids (its creator's too) its own.
            a = answer([_built_in(kind, "ent_1", "ls")])
            d = _compared(tmp_path / f"{kind}-{how}-same", a, answer([_built_in(kind, "ent_2", "ls")]), ctype)
            assert d["exact_match_rate"] == 1, (kind, how, d["counts"])
            # Must differ: the same creator, another thing asked.
            d = _compared(tmp_path / f"{kind}-{how}-differ", a, answer([_built_in(kind, "ent_1", "pwd")]), ctype)
            assert d["counts"]["tool_calls_differ"] == 1 and d["exact_match_rate"] == 0, (kind, how, d["counts"])


def _kept_whole(kind: str, ids: str, said: str) -> dict[str, Any]:
    """An item kept whole and compared whole, saying ``said``, its ids (its creator's, its program's
    call, the approval request it answers) all ``ids``' own."""
    if kind == "shell_call_output":
        out = {"stdout": said, "stderr": "", "outcome": {"type": "exit", "exit_code": 0}, "created_by": f"ent_{ids}"}
        caller = {"type": "program", "caller_id": f"call_p{ids}"}
        return _item(type=kind, id=f"sho_{ids}", call_id=f"call_{ids}", status="completed", output=[out],
                     caller=caller, created_by=f"ent_{ids}")  # fmt: skip
    if kind == "mcp_approval_response":
        return _item(type=kind, id=f"mcpr_{ids}", approval_request_id=f"mcpa_{ids}", approve=said == "yes", reason=said)
    return _item(type=kind, id=f"cmp_{ids}", encrypted_content=f"enc_{ids}", created_by=f"ent_{ids}")


def test_compare_leaves_out_the_ids_of_an_item_kept_whole(tmp_path: Path) -> None:
    """An item kept whole (a shell's output, an MCP approval, a compaction) is compared field by
    field but its ids: who created it, the program that made its call, the approval request it
    answers are new per answer, as its own id is. They were compared: the same answer replayed differed."""
    for kind in ("shell_call_output", "mcp_approval_response", "compaction"):
        for how, answer, ctype in _WAYS:
            a = answer([_program("call_p1"), _kept_whole(kind, "1", "yes"), _message("Done.", None)])
            # Must match: the same item, each answer's ids its own (its program's too).
            same = answer([_program("call_p2"), _kept_whole(kind, "2", "yes"), _message("Done.", None)])
            d = _compared(tmp_path / f"{kind}-{how}-same", a, same, ctype)
            assert d["exact_match_rate"] == 1, (kind, how, d["counts"])
            if kind == "compaction":
                continue  # nothing in it but ids and its encrypted summary: none is compared
            # Must differ: the same ids, another thing said (another output, another decision).
            b = answer([_program("call_p1"), _kept_whole(kind, "1", "no"), _message("Done.", None)])
            d = _compared(tmp_path / f"{kind}-{how}-differ", a, b, ctype)
            assert d["exact_match_rate"] == 0, (kind, how, d["counts"])


def _shell_output(call_id: str, program: str) -> dict[str, Any]:
    """The shell's output for ``call_id``, its call made by the code of ``program``."""
    out = {"stdout": "a.txt", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
    caller = {"type": "program", "caller_id": program}
    return _item(type="shell_call_output", id=f"sho_{call_id}", call_id=call_id, status="completed", output=[out], caller=caller)


def _two_programs(ids: str, by: int) -> list[dict[str, Any]]:
    """Two programs (each answer's ids its own), then a shell's output whose call the ``by``-th made."""
    return [_program(f"call_p{ids}0"), _program(f"call_p{ids}1"), _shell_output(f"call_s{ids}", f"call_p{ids}{by}")]


def test_compare_reads_the_program_an_item_kept_whole_belongs_to_by_its_place(tmp_path: Path) -> None:
    """An item kept whole names the program whose code made its call by that program's call id, new
    on every answer: it was left out, so an output of the first program and the same output of the
    second compared equal. It is read by the program's place among the answer's calls."""
    for how, answer, ctype in _WAYS:
        a = answer(_two_programs("a", 0))
        # Must match: the same program (the first), each answer's ids its own.
        d = _compared(tmp_path / f"{how}-same", a, answer(_two_programs("b", 0)), ctype)
        assert d["exact_match_rate"] == 1, (how, d["counts"])
        # Must differ: the same output, made by the second program on B.
        d = _compared(tmp_path / f"{how}-differ", a, answer(_two_programs("b", 1)), ctype)
        assert d["exact_match_rate"] == 0 and d["counts"]["other_items_differ"] == 1, (how, d["counts"])
