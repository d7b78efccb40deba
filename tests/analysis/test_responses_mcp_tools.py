"""The tools an MCP server listed to the Responses API (an ``mcp_list_tools`` item) are what the model
read, not what it said: the API puts them before the model as the tools it may call, as a request's
own ``tools`` are. A server that lists other tools on another run (its tools changed, another
``allowed_tools``) is another input, so compare reports it in its configuration, as the API's change
of the input (``config.input_changes``, beside the effective prompt tokens), and the same answer
stays an exact match. They were compared by no one: a changed tool list was invisible. Every item
is checked against the openai SDK's own types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from openai.types.responses import ResponseOutputItem
from pydantic import TypeAdapter

from infertap.analysis.compare import compare
from infertap.apis import read_response
from infertap.cli import cli
from tests import sdk_shapes
from tests.helpers import write_capture

_SSE, _JSON = "text/event-stream", "application/json"
_TOOL = {"type": "mcp", "server_label": "crm", "server_url": "https://crm.example/mcp", "require_approval": "never"}
_REQUEST = {"model": "gpt-5.3-codex", "input": "Look up ACME.", "tools": [_TOOL]}
_ITEMS: TypeAdapter[Any] = TypeAdapter(ResponseOutputItem)
_LOOKUP = {"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}, "description": "Find."}
_DELETE = {"name": "delete", "input_schema": {"type": "object"}, "description": "Delete."}


def _output(tools: list[dict[str, Any]], ids: str) -> list[dict[str, Any]]:
    listed = {"type": "mcp_list_tools", "id": f"mcpl_{ids}", "server_label": "crm", "tools": tools}
    content = [{"type": "output_text", "text": "ACME is a customer.", "annotations": []}]
    message = {"type": "message", "id": f"msg_{ids}", "role": "assistant", "status": "completed", "content": content}
    for item in (listed, message):
        assert not _ITEMS.validate_python(item).model_extra, item
    return [listed, message]


def _response(output: list[dict[str, Any]], ids: str) -> dict[str, Any]:
    body = {"id": f"resp_{ids}", "object": "response", "created_at": 1.0, "model": "gpt-5.3-codex", "output": output,
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip
    sdk_shapes.response(body)
    return body


def _whole(tools: list[dict[str, Any]], ids: str) -> bytes:
    return json.dumps(_response(_output(tools, ids), ids)).encode()


def _stream(tools: list[dict[str, Any]], ids: str) -> bytes:
    """Each item added then done, then the whole response."""

    def sse(kind: str, **data: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    output = _output(tools, ids)
    out = sse("response.created", response={**_response([], ids), "status": "in_progress"})
    for i, item in enumerate(output):
        out += sse("response.output_item.added", output_index=i, item={**item, "tools": []} if i == 0 else item)
        out += sse("response.output_item.done", output_index=i, item=item)
    return out + sse("response.completed", response=_response(output, ids))


_WAYS = (("whole", _whole, _JSON), ("streamed", _stream, _SSE))


def _compared(tmp_path: Path, pairs: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]) -> dict[str, Any]:
    sides: list[list[dict[str, Any]]] = [[], []]
    for name, lists in pairs.items():
        for how, answer, ctype in _WAYS:
            body = {**_REQUEST, "stream": ctype == _SSE, "tag": f"{name}/{how}"}
            for side in (0, 1):
                chunks = [answer(lists[side], "ab"[side])]  # each side's ids its own
                sides[side].append({"path": "/v1/responses", "body": body, "chunks": chunks, "content_type": ctype})
    write_capture(tmp_path / "a", sides[0])
    write_capture(tmp_path / "b", sides[1])
    return compare(tmp_path / "a", tmp_path / "b", top=10)


def test_the_tools_a_server_listed_are_read_as_the_model_s_input() -> None:
    for how, answer, ctype in _WAYS:
        request = json.dumps({**_REQUEST, "stream": ctype == _SSE}).encode()
        record = {"path": "/v1/responses", "status": 200, "end": "complete", "request_body": request,
                  "response_headers": [["content-type", ctype]], "chunks": [answer([_LOOKUP], "a")]}  # fmt: skip
        out = read_response(record)
        assert json.loads(out.input_changes) == {"mcp_tools": [{"server_label": "crm", "tools": [_LOOKUP]}]}, how
        assert out.text == "ACME is a customer." and [c["name"] for c in out.tool_calls] == ["mcp_list_tools"], how


def test_compare_reports_another_tool_list_as_another_input_not_another_answer(tmp_path: Path) -> None:
    # Must differ: the server listed another tool, one more, or none, on B.
    pairs = {"other": ([_LOOKUP], [_DELETE]), "more": ([_LOOKUP], [_LOOKUP, _DELETE]), "none": ([_LOOKUP], [])}
    r = _compared(tmp_path / "differ", pairs)
    assert r["config"]["input_changes"] == {"a": 6, "b": 6, "pairs_differ": 6}
    # The answers are the same answer: what differs is what the model was offered.
    assert r["divergence"]["exact_match_rate"] == 1
    # Must match: the same tools listed, each side's ids its own.
    r = _compared(tmp_path / "same", {"same": ([_LOOKUP, _DELETE], [_LOOKUP, _DELETE])})
    assert r["config"]["input_changes"] == {"a": 2, "b": 2, "pairs_differ": 0}
    out = CliRunner().invoke(
        cli, ["compare", str(tmp_path / "differ" / "a"), str(tmp_path / "differ" / "b")], env={"COLUMNS": "300"}
    )
    assert out.exit_code == 0, out.output
    said = "input changed by the API before the model read it (context edits, thinking dropped, MCP tools listed): A 6 exchanges, B 6 exchanges; differs in 6 pairs"
    assert said in out.output, out.output


def _gateway_stream(lists: dict[str, list[dict[str, Any]]], ids: str) -> bytes:
    """Each server's listing, then a message, each item done; the final event's output empty (a gateway's)."""

    def sse(kind: str, **data: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    items: list[dict[str, Any]] = [
        {"type": "mcp_list_tools", "id": f"mcpl_{ids}{i}", "server_label": label, "tools": tools}
        for i, (label, tools) in enumerate(lists.items())
    ]
    content = [{"type": "output_text", "text": "ACME is a customer.", "annotations": []}]
    items.append({"type": "message", "id": f"msg_{ids}", "role": "assistant", "status": "completed", "content": content})
    out = sse("response.created", response={**_response([], ids), "status": "in_progress"})
    for i, item in enumerate(items):
        assert not _ITEMS.validate_python(item).model_extra, item
        out += sse("response.output_item.done", output_index=i, item=item)
    return out + sse("response.completed", response=_response([], ids))


def _record(chunks: bytes) -> dict[str, Any]:
    request = json.dumps({**_REQUEST, "stream": True}).encode()
    return {"path": "/v1/responses", "status": 200, "end": "complete", "request_body": request,
            "response_headers": [["content-type", _SSE]], "chunks": [chunks]}  # fmt: skip


def test_every_server_s_listing_is_kept_where_the_final_event_restates_none(tmp_path: Path) -> None:
    # Several servers listed in one stream, its final output empty: only the last listing was kept.
    out = read_response(_record(_gateway_stream({"crm": [_LOOKUP], "files": [_DELETE]}, "a")))
    assert json.loads(out.input_changes) == {
        "mcp_tools": [{"server_label": "crm", "tools": [_LOOKUP]}, {"server_label": "files", "tools": [_DELETE]}]
    }
    sides: list[list[dict[str, Any]]] = [[], []]
    cases = {  # name: (A's lists, B's lists)
        "first differs": ({"crm": [_LOOKUP], "files": [_DELETE]}, {"crm": [_LOOKUP, _DELETE], "files": [_DELETE]}),
        "same": ({"crm": [_LOOKUP], "files": [_DELETE]}, {"crm": [_LOOKUP], "files": [_DELETE]}),
    }
    for name, lists in cases.items():
        for side in (0, 1):
            chunks = [_gateway_stream(lists[side], "ab"[side])]  # each side's ids its own
            body = {**_REQUEST, "stream": True, "tag": name}
            sides[side].append({"path": "/v1/responses", "body": body, "chunks": chunks, "content_type": _SSE})
    write_capture(tmp_path / "a", sides[0])
    write_capture(tmp_path / "b", sides[1])
    r = compare(tmp_path / "a", tmp_path / "b", top=10)
    # Must differ: the first server listed another tool on B; must match: the same lists.
    assert r["config"]["input_changes"] == {"a": 2, "b": 2, "pairs_differ": 1}
    assert r["divergence"]["exact_match_rate"] == 1


def _failed_listing(error: str | None, ids: str, *, stream: bool) -> bytes:
    """A server's listing that failed (``error``, no tools; None: it listed ``_LOOKUP``), then the message."""
    listed, message = _output([] if error else [_LOOKUP], ids)
    if error is not None:
        listed["error"] = error
    assert not _ITEMS.validate_python(listed).model_extra, listed
    if not stream:
        return json.dumps(_response([listed, message], ids)).encode()

    def sse(kind: str, **data: Any) -> bytes:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

    out = b"".join(sse("response.output_item.done", output_index=i, item=x) for i, x in enumerate((listed, message)))
    return out + sse("response.completed", response=_response([listed, message], ids))


def test_a_failed_listing_is_the_model_s_input_not_a_tool_result(tmp_path: Path) -> None:
    # The model saw no tools from a server whose listing failed: its error was compared as what a
    # tool gave back (another answer), though the model read it, as it reads the tools listed.
    out = read_response(_record(_failed_listing("401 Unauthorized", "a", stream=True)))
    assert json.loads(out.input_changes) == {"mcp_tools": [{"server_label": "crm", "tools": [], "error": "401 Unauthorized"}]}
    assert out.tool_results == []
    sides: list[list[dict[str, Any]]] = [[], []]
    cases = {  # name: (A's error, B's error)
        "other error": ("401 Unauthorized", "503 Service Unavailable"),
        "failed on B only": (None, "503 Service Unavailable"),
        "same error": ("401 Unauthorized", "401 Unauthorized"),
    }
    for name, errors in cases.items():
        for how, ctype in (("whole", _JSON), ("streamed", _SSE)):
            for side in (0, 1):
                chunks = [_failed_listing(errors[side], "ab"[side], stream=how == "streamed")]
                body = {**_REQUEST, "stream": how == "streamed", "tag": f"{name}/{how}"}
                sides[side].append({"path": "/v1/responses", "body": body, "chunks": chunks, "content_type": ctype})
    write_capture(tmp_path / "a", sides[0])
    write_capture(tmp_path / "b", sides[1])
    r = compare(tmp_path / "a", tmp_path / "b", top=10)
    # Must differ: another error, or a failure on B only (4 pairs); must match: the same error (2).
    assert r["config"]["input_changes"] == {"a": 6, "b": 6, "pairs_differ": 4}
    d = r["divergence"]
    assert d["exact_match_rate"] == 1 and "tool_results_differ" not in d["counts"], d["counts"]


def _listings(
    lists: list[tuple[str, list[dict[str, Any]]]], ids: str, *, stream: bool, restate: int | None = None, id_of: str = "own"
) -> bytes:
    """Each ``(server_label, tools)`` listed in order, then the message; streamed, each item done, the
    final event's output restating only the first ``restate`` listings (None: every item). ``id_of``:
    each listing's id its own ("own"), one id for all ("shared": a server that reuses ids), or none
    ("none": a gateway's, which the SDK refuses: the API gives every item an id)."""
    items: list[dict[str, Any]] = [
        {"type": "mcp_list_tools", "id": f"mcpl_{ids}{i if id_of == 'own' else ''}", "server_label": label, "tools": tools}
        for i, (label, tools) in enumerate(lists)
    ]
    content = [{"type": "output_text", "text": "ACME is a customer.", "annotations": []}]
    message = {"type": "message", "id": f"msg_{ids}", "role": "assistant", "status": "completed", "content": content}
    items.append(message)
    for item in items:
        assert not _ITEMS.validate_python(item).model_extra, item
    if not stream:
        out = json.dumps(_response(items, ids)).encode()
    else:

        def sse(kind: str, **data: Any) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        out = b"".join(sse("response.output_item.done", output_index=i, item=x) for i, x in enumerate(items))
        final = items if restate is None else [*items[:restate], message]
        out += sse("response.completed", response=_response(final, ids))
    # Built valid, then the listings' one id taken out: the SDK checks all else.
    if id_of == "none":
        out = out.replace(f'"id": "mcpl_{ids}", '.encode(), b"")
        assert b"mcpl_" not in out, out
    return out


def _listings_compared(
    tmp_path: Path, cases: dict[str, Any], ways: tuple[bool, ...], restate: int | None = None, id_of: str = "own"
) -> dict[str, Any]:
    sides: list[list[dict[str, Any]]] = [[], []]
    for name, lists in cases.items():
        for stream in ways:
            for side in (0, 1):
                chunks = [_listings(lists[side], "ab"[side], stream=stream, restate=restate, id_of=id_of)]
                body = {**_REQUEST, "stream": stream, "tag": f"{name}/{stream}"}
                ctype = _SSE if stream else _JSON
                sides[side].append({"path": "/v1/responses", "body": body, "chunks": chunks, "content_type": ctype})
    write_capture(tmp_path / "a", sides[0])
    write_capture(tmp_path / "b", sides[1])
    return compare(tmp_path / "a", tmp_path / "b", top=10)


def test_two_listings_from_one_server_are_two(tmp_path: Path) -> None:
    # One server listed twice in one response: only its last listing was kept, so a first listing
    # that differed (or was not there) was no change.
    twice = [("crm", [_LOOKUP]), ("crm", [_DELETE])]
    for stream in (False, True):
        record = {**_record(_listings(twice, "a", stream=stream))}
        if not stream:
            record["response_headers"] = [["content-type", _JSON]]
        assert json.loads(read_response(record).input_changes) == {
            "mcp_tools": [{"server_label": "crm", "tools": [_LOOKUP]}, {"server_label": "crm", "tools": [_DELETE]}]
        }, stream
    cases = {  # name: (A's listings, B's listings)
        "first differs": (twice, [("crm", [_LOOKUP, _DELETE]), ("crm", [_DELETE])]),
        "same": (twice, twice),
    }
    r = _listings_compared(tmp_path, cases, (False, True))
    # Must differ: another first listing, its last the same (2 pairs); must match: the same two (2).
    assert r["config"]["input_changes"] == {"a": 4, "b": 4, "pairs_differ": 2}
    assert r["divergence"]["exact_match_rate"] == 1


def test_a_final_event_listing_some_servers_is_merged_with_the_items_streamed(tmp_path: Path) -> None:
    # The final event restated only the first server's listing: it replaced the listings streamed,
    # so what the second server listed was lost.
    both = [("crm", [_LOOKUP]), ("files", [_DELETE])]
    out = read_response(_record(_listings(both, "a", stream=True, restate=1)))
    assert json.loads(out.input_changes) == {
        "mcp_tools": [{"server_label": "crm", "tools": [_LOOKUP]}, {"server_label": "files", "tools": [_DELETE]}]
    }
    cases = {  # name: (A's listings, B's listings)
        "second differs": (both, [("crm", [_LOOKUP]), ("files", [_LOOKUP, _DELETE])]),
        "same": (both, both),
    }
    r = _listings_compared(tmp_path, cases, (True,), restate=1)
    # Must differ: the server the final event did not restate listed another tool on B; must match: the same.
    assert r["config"]["input_changes"] == {"a": 2, "b": 2, "pairs_differ": 1}
    assert r["divergence"]["exact_match_rate"] == 1


def _read_listings(lists: list[tuple[str, list[dict[str, Any]]]], stream: bool, **how: Any) -> Any:
    record = _record(_listings(lists, "a", stream=stream, **how))
    if not stream:
        record["response_headers"] = [["content-type", _JSON]]
    return json.loads(read_response(record).input_changes)


def test_listings_that_share_an_id_are_each_kept_in_order(tmp_path: Path) -> None:
    # Two listings of one id (a server that reuses ids) were merged by it into one: the first was
    # lost, whole and streamed, so a first listing that differed was no change.
    twice = [("crm", [_LOOKUP]), ("crm", [_DELETE])]
    both = {"mcp_tools": [{"server_label": "crm", "tools": [_LOOKUP]}, {"server_label": "crm", "tools": [_DELETE]}]}
    for stream in (False, True):
        assert _read_listings(twice, stream, id_of="shared") == both, stream
    # Streamed, the final event restating only the first: it is paired with the first streamed of its id.
    assert _read_listings(twice, True, id_of="shared", restate=1) == both
    cases = {  # name: (A's listings, B's listings)
        "first differs": (twice, [("crm", [_LOOKUP, _DELETE]), ("crm", [_DELETE])]),
        "same": (twice, twice),
    }
    r = _listings_compared(tmp_path / "shared", cases, (False, True), id_of="shared")
    # Must differ: another first listing, its last the same (2 pairs); must match: the same two (2).
    assert r["config"]["input_changes"] == {"a": 4, "b": 4, "pairs_differ": 2}
    assert r["divergence"]["exact_match_rate"] == 1


def test_listings_without_an_id_are_merged_by_their_place(tmp_path: Path) -> None:
    # The API gives every item an id (the SDK's McpListTools requires one); a gateway's listing
    # without one is its output's place: each kept, the final event's restating the one streamed there.
    both = [("crm", [_LOOKUP]), ("files", [_DELETE])]
    said = {"mcp_tools": [{"server_label": "crm", "tools": [_LOOKUP]}, {"server_label": "files", "tools": [_DELETE]}]}
    for stream in (False, True):
        assert _read_listings(both, stream, id_of="none") == said, stream
    assert _read_listings(both, True, id_of="none", restate=1) == said
    cases = {  # name: (A's listings, B's listings)
        "second differs": (both, [("crm", [_LOOKUP]), ("files", [_LOOKUP, _DELETE])]),
        "same": (both, both),
    }
    r = _listings_compared(tmp_path / "none", cases, (False, True), id_of="none")
    # Must differ: the second server listed another tool on B (2 pairs); must match: the same (2).
    assert r["config"]["input_changes"] == {"a": 4, "b": 4, "pairs_differ": 2}
    assert r["divergence"]["exact_match_rate"] == 1
