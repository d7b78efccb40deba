"""A streamed Responses answer compares equal to the same answer sent whole, for each item type the
adapter reads, streamed as the API streams it (each item's start, its deltas, its built-in tool's
progress, its end, then the whole response); and equal again where the final event's ``output`` is
empty (a gateway's), so the answer is only what the events said. The same stream against another
answer differs. Every response and event is checked by ``tests.sdk_shapes``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.apis import read_response
from tests import sdk_shapes
from tests.helpers import write_capture

_SSE, _JSON = "text/event-stream", "application/json"
_REQUEST = {"model": "gpt-5.3-codex", "input": "Go.", "stream": True}
_USAGE = {
    "input_tokens": 30,
    "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
    "output_tokens": 9,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 39,
}


def _response(output: list[dict[str, Any]], status: str = "completed") -> dict[str, Any]:
    body = {"id": "resp_1", "object": "response", "created_at": 1.0, "model": "gpt-5.3-codex", "output": output,
            "status": status, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": _USAGE}  # fmt: skip
    return sdk_shapes.response(body)


# Each item type read, as ``say`` makes it (the same ``say``, the same answer), with the events the
# API streams between the item's start and its end.
def _message(say: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cite = {"type": "url_citation", "url": f"https://example.com/{say}", "title": say, "start_index": 0, "end_index": 2}
    part = {"type": "output_text", "text": f"It is {say}.", "annotations": [cite]}
    item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}
    empty = {**part, "text": "", "annotations": []}
    events = [
        {"type": "response.content_part.added", "content_index": 0, "part": empty},
        {"type": "response.output_text.delta", "content_index": 0, "delta": "It is ", "logprobs": []},
        {"type": "response.output_text.delta", "content_index": 0, "delta": f"{say}.", "logprobs": []},
        {"type": "response.output_text.annotation.added", "content_index": 0, "annotation_index": 0, "annotation": cite},
        {"type": "response.output_text.done", "content_index": 0, "text": part["text"], "logprobs": []},
        {"type": "response.content_part.done", "content_index": 0, "part": part},
    ]
    return item, events


def _refusal(say: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    part = {"type": "refusal", "refusal": f"Not {say}."}
    item = {"type": "message", "id": "msg_2", "role": "assistant", "status": "completed", "content": [part]}
    events = [
        {"type": "response.content_part.added", "content_index": 0, "part": {**part, "refusal": ""}},
        {"type": "response.refusal.delta", "content_index": 0, "delta": part["refusal"]},
        {"type": "response.refusal.done", "content_index": 0, "refusal": part["refusal"]},
        {"type": "response.content_part.done", "content_index": 0, "part": part},
    ]
    return item, events


def _summary(say: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    part = {"type": "summary_text", "text": f"Thought of {say}."}
    item = {"type": "reasoning", "id": "rs_1", "summary": [part], "encrypted_content": f"enc-{say}"}
    events = [
        {"type": "response.reasoning_summary_part.added", "summary_index": 0, "part": {**part, "text": ""}},
        {"type": "response.reasoning_summary_text.delta", "summary_index": 0, "delta": part["text"]},
        {"type": "response.reasoning_summary_text.done", "summary_index": 0, "text": part["text"]},
        {"type": "response.reasoning_summary_part.done", "summary_index": 0, "part": part},
    ]
    return item, events


def _reasoning_text(say: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    part = {"type": "reasoning_text", "text": f"Think {say}."}
    item = {"type": "reasoning", "id": "rs_2", "summary": [], "content": [part]}
    events = [
        {"type": "response.reasoning_text.delta", "content_index": 0, "delta": part["text"]},
        {"type": "response.reasoning_text.done", "content_index": 0, "text": part["text"]},
    ]
    return item, events


def _arguments_streamed(kind: str, field: str, event: str, **more: Any) -> Callable[[str], Any]:
    def make(say: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        said = json.dumps({"q": say}) if field == "arguments" else f"echo {say}"
        item = {"type": kind, "id": f"it_{kind}", field: said, **more}
        half = len(said) // 2
        events = [
            {"type": f"{event}.delta", "delta": said[:half]},
            {"type": f"{event}.delta", "delta": said[half:]},
            {"type": f"{event}.done", field: said},
        ]
        return item, events

    return make


def _whole_call(item: Callable[[str], dict[str, Any]], *progress: str, extra: Callable[[str], list[Any]] | None = None):
    """A built-in call, streamed as its progress events (its content restated by its end)."""

    def make(say: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        made = item(say)
        events = [{"type": f"response.{made['type']}.{p}"} for p in progress]
        return made, events[:1] + (extra(say) if extra else []) + events[1:]

    return make


_ITEMS: dict[str, Callable[[str], tuple[dict[str, Any], list[dict[str, Any]]]]] = {
    "message": _message,
    "refusal": _refusal,
    "reasoning summary": _summary,
    "reasoning text": _reasoning_text,
    "function_call": _arguments_streamed(
        "function_call", "arguments", "response.function_call_arguments", call_id="call_1", name="f", status="completed"
    ),
    "custom_tool_call": _arguments_streamed(
        "custom_tool_call", "input", "response.custom_tool_call_input", call_id="call_1", name="sh"
    ),
    "mcp_call": _arguments_streamed(
        "mcp_call", "arguments", "response.mcp_call_arguments", name="lookup", server_label="crm", output="ok", status="completed"
    ),
    "mcp_approval_request": _whole_call(
        lambda say: {
            "type": "mcp_approval_request",
            "id": "ap_1",
            "name": "lookup",
            "server_label": "crm",
            "arguments": json.dumps({"q": say}),
        }
    ),
    "file_search_call": _whole_call(
        lambda say: {"type": "file_search_call", "id": "fs_1", "queries": [say], "status": "completed", "results": None},
        "in_progress",
        "searching",
        "completed",
    ),
    "web_search_call": _whole_call(
        lambda say: {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": say}},
        "in_progress",
        "searching",
        "completed",
    ),
    "computer_call": _whole_call(
        lambda say: {
            "type": "computer_call",
            "id": "cu_1",
            "call_id": "call_c",
            "status": "completed",
            "pending_safety_checks": [],
            "action": {"type": "type", "text": say},
        }  # fmt: skip
    ),
    "image_generation_call": _whole_call(
        lambda say: {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": f"aW1n{say}"},
        "in_progress",
        "generating",
        "completed",
        extra=lambda say: [
            {
                "type": "response.image_generation_call.partial_image",
                "partial_image_index": 0,
                "partial_image_b64": "cHJl",
                "background": "auto",
                "output_format": "png",
                "quality": "low",
                "size": "1024x1024",
            }
        ],  # fmt: skip
    ),
    "code_interpreter_call": _whole_call(
        lambda say: {
            "type": "code_interpreter_call",
            "id": "ci_1",
            "status": "completed",
            "container_id": "cntr_1",
            "code": f"print('{say}')",
            "outputs": [{"type": "logs", "logs": say}],
        },  # fmt: skip
        "in_progress",
        "interpreting",
        "completed",
        extra=lambda say: [
            {"type": "response.code_interpreter_call_code.delta", "delta": f"print('{say}')"},
            {"type": "response.code_interpreter_call_code.done", "code": f"print('{say}')"},
        ],  # fmt: skip
    ),
    "local_shell_call": _whole_call(
        lambda say: {
            "type": "local_shell_call",
            "id": "ls_1",
            "call_id": "call_l",
            "status": "completed",
            "action": {"type": "exec", "command": ["echo", say], "env": {}},
        }  # fmt: skip
    ),
    "shell_call": _whole_call(
        lambda say: {
            "type": "shell_call",
            "id": "sh_1",
            "call_id": "call_s",
            "status": "completed",
            "action": {"commands": [f"echo {say}"], "max_output_length": None, "timeout_ms": None},
        },  # fmt: skip
        extra=lambda say: [
            {"type": "response.shell_call_command.added", "command_index": 0, "command": ""},
            {"type": "response.shell_call_command.delta", "command_index": 0, "delta": f"echo {say}", "obfuscation": ""},
            {"type": "response.shell_call_command.done", "command_index": 0, "command": f"echo {say}"},
        ],  # fmt: skip
    ),
    "apply_patch_call": _whole_call(
        lambda say: {
            "type": "apply_patch_call",
            "id": "ap_2",
            "call_id": "call_a",
            "status": "completed",
            "operation": {"type": "create_file", "path": f"{say}.txt", "diff": "+hi"},
        }  # fmt: skip
    ),
    "tool_search_call": _whole_call(
        lambda say: {
            "type": "tool_search_call",
            "id": "ts_1",
            "call_id": "call_t",
            "status": "completed",
            "execution": "server",
            "arguments": {"query": say},
        }  # fmt: skip
    ),
    "mcp_list_tools": _whole_call(
        lambda say: {
            "type": "mcp_list_tools",
            "id": "ml_1",
            "server_label": say,  # its tools, what the server listed, are the model's input (input_changes), not the answer
            "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
        },  # fmt: skip
        "in_progress",
        "completed",
    ),
    "program": _whole_call(
        lambda say: {
            "type": "program",
            "id": "pg_1",
            "call_id": "call_p",
            "code": f"await tools.f({{q: '{say}'}})",
            "fingerprint": "fp",
        }
    ),
}


def _sse(events: list[dict[str, Any]]) -> bytes:
    """``events`` numbered as the API numbers them (``sequence_number``), checked, framed."""
    checked = [sdk_shapes.response_event({**e, "sequence_number": n}) for n, e in enumerate(events)]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in checked)


def _stream(item: dict[str, Any], events: list[dict[str, Any]], final: list[dict[str, Any]]) -> bytes:
    start = {**item, "status": "in_progress"} if "status" in item else item
    start = {**start, "content": []} if item["type"] == "message" else start
    for field in ("arguments", "input"):
        if item["type"] in ("function_call", "custom_tool_call", "mcp_call") and field in item:
            start = {**start, field: ""}
    placed = [{**e, "output_index": 0, **({"item_id": item["id"]} if "command_index" not in e else {})} for e in events]
    return _sse(
        [
            {"type": "response.created", "response": {**_response([], "in_progress")}},
            {"type": "response.output_item.added", "output_index": 0, "item": start},
            *placed,
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": _response(final)},
        ]
    )


def test_each_item_type_streamed_reads_as_it_does_whole(tmp_path: Path) -> None:
    whole, streamed = [], []
    for name, make in _ITEMS.items():
        item, events = make("ACME")
        other, _ = make("Initech")
        answer = json.dumps(_response([item])).encode()
        for how, chunks, same in (
            ("final", _stream(item, events, [item]), answer),  # the final event restates the answer
            ("deltas", _stream(item, events, []), answer),  # only the events say it
            ("differs", _stream(item, events, [item]), json.dumps(_response([other])).encode()),
            ("differs-deltas", _stream(item, events, []), json.dumps(_response([other])).encode()),
        ):
            body = {**_REQUEST, "tag": f"{name}/{how}"}
            whole.append({"path": "/v1/responses", "body": body, "chunks": [same], "content_type": _JSON})
            streamed.append({"path": "/v1/responses", "body": body, "chunks": [chunks], "content_type": _SSE})
    write_capture(tmp_path / "a", whole)
    write_capture(tmp_path / "b", streamed)
    d = compare(tmp_path / "a", tmp_path / "b", top=len(whole))["divergence"]
    tags = [x["body"]["tag"] for x in whole]
    differ = {tags[int(p["a_id"].removeprefix("src-"))] for p in d["most_divergent"]}
    assert d["pairs"] == len(tags) and d["counts"]["exact"] == len(tags) - len(differ)
    # Must match: each item streamed and whole. Must differ: each against another answer.
    assert sorted(differ) == sorted(t for t in tags if "/differs" in t)


def _audio(words: list[str]) -> bytes:
    """An audio answer streamed: its bytes, its transcript's deltas, a final response of no item."""
    return _sse(
        [
            {"type": "response.created", "response": _response([], "in_progress")},
            {"type": "response.audio.delta", "delta": "UklGRg=="},
            *({"type": "response.audio.transcript.delta", "delta": w} for w in words),
            {"type": "response.audio.transcript.done"},
            {"type": "response.audio.done"},
            {"type": "response.completed", "response": _response([])},
        ]
    )


def test_an_audio_answer_s_transcript_is_compared(tmp_path: Path) -> None:
    """Its words were read as nothing: two audio answers saying different things compared equal."""
    assert read_response(_record(_audio(["It is ", "ACME."]))).audio == "It is ACME."
    pairs = {"same": (["It is ", "ACME."], ["It is ACME."]), "differs": (["It is ", "ACME."], ["It is Initech."])}
    sides = [
        [
            {"path": "/v1/responses", "body": {**_REQUEST, "tag": tag}, "chunks": [_audio(said[side])], "content_type": _SSE}
            for tag, said in pairs.items()
        ]  # fmt: skip
        for side in (0, 1)
    ]
    write_capture(tmp_path / "a", sides[0])
    write_capture(tmp_path / "b", sides[1])
    d = compare(tmp_path / "a", tmp_path / "b", top=2)["divergence"]
    assert d["pairs"] == 2 and d["counts"]["exact"] == 1, d["counts"]
    (item,) = d["most_divergent"]
    assert item["a_id"] == "src-1", item


def _record(body: bytes) -> dict[str, Any]:
    return {"path": "/v1/responses", "status": 200, "end": "complete", "request_body": json.dumps(_REQUEST).encode(),
            "response_headers": [["content-type", _SSE]], "chunks": [body]}  # fmt: skip
