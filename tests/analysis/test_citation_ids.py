"""A citation is compared less the ids made anew on every request, as an item kept whole is: a
Responses ``container_file_citation``'s ``container_id`` and ``file_id`` (a file the code
interpreter's container wrote), a ``file_path``'s ``file_id`` (a file the code interpreter generated)
and an Anthropic ``web_search_result_location``'s ``encrypted_index``. They were compared as sent, so the same cited answer replayed was another answer. The user's own
file (a ``file_citation``'s ``file_id``, one they uploaded) is still compared. Every body is checked
against the SDKs' own types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from tests import sdk_shapes
from tests.helpers import pair_captures

_RESPONSES = ("/v1/responses", {"model": "m", "input": "q"}, "application/json")
_RESPONSES_SSE = ("/v1/responses", {"model": "m", "input": "q", "stream": True}, "text/event-stream")
_MESSAGES = ("/v1/messages", {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}]}, "application/json")  # fmt: skip
_MESSAGES_SSE = ("/v1/messages", {**_MESSAGES[1], "stream": True}, "text/event-stream")


def _sse(events: list[dict[str, Any]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _container(run: str, filename: str = "plot.png") -> dict[str, Any]:
    return {"type": "container_file_citation", "container_id": f"cntr_{run}", "file_id": f"cfile_{run}",
            "filename": filename, "start_index": 0, "end_index": 5}  # fmt: skip


def _made(run: str, index: int = 5) -> dict[str, Any]:
    """A ``file_path``: a file the code interpreter generated, its id new on every request."""
    return {"type": "file_path", "file_id": f"cfile_{run}", "index": index}


def _uploaded(file_id: str) -> dict[str, Any]:
    return {"type": "file_citation", "file_id": file_id, "filename": "notes.pdf", "index": 5}


def _responses(cite: dict[str, Any], *, stream: bool) -> list[bytes]:
    part = {"type": "output_text", "text": "Rain.", "annotations": [cite]}
    message = {"type": "message", "id": "msg", "role": "assistant", "status": "completed", "content": [part]}
    body = {"id": "resp", "object": "response", "created_at": 1.0, "model": "m", "output": [message],
            "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}  # fmt: skip
    sdk_shapes.response(body)
    if not stream:
        return [json.dumps(body).encode()]
    added = {"type": "response.output_text.annotation.added", "item_id": "msg", "output_index": 0,
             "content_index": 0, "annotation_index": 0, "annotation": cite, "sequence_number": 2}  # fmt: skip
    sdk_shapes.response_event(added)
    delta = {"type": "response.output_text.delta", "item_id": "msg", "output_index": 0, "content_index": 0,
             "delta": "Rain.", "sequence_number": 1}  # fmt: skip
    # the final event restates no output: the annotation streamed is what was cited
    return _sse([delta, added, {"type": "response.completed", "response": {**body, "output": []}}])


def _web(run: str, url: str = "https://a.example") -> dict[str, Any]:
    return {"type": "web_search_result_location", "cited_text": "It rains.", "encrypted_index": f"Eo8B{run}",
            "title": "Weather", "url": url}  # fmt: skip


def _messages(cite: dict[str, Any], *, stream: bool) -> list[bytes]:
    block = {"type": "text", "text": "Rain.", "citations": [cite]}
    body = {"id": "msg", "type": "message", "role": "assistant", "model": "m", "content": [block],
            "stop_reason": "end_turn", "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    sdk_shapes.message(body)
    if not stream:
        return [json.dumps(body).encode()]
    cited = {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": cite}}
    sdk_shapes.message_event(cited)
    return _sse([
        {"type": "message_start", "message": {**body, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Rain."}},
        cited,
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 1}},
        {"type": "message_stop"},
    ])  # fmt: skip


def _pairs(a: dict[str, Any], b: dict[str, Any], api: str) -> dict[str, Any]:
    read, shapes = (_responses, (_RESPONSES, _RESPONSES_SSE)) if api == "responses" else (_messages, (_MESSAGES, _MESSAGES_SSE))
    return {f"{api} {how}": (shape, read(a, stream=how == "streamed"), read(b, stream=how == "streamed"))
            for how, shape in zip(("whole", "streamed"), shapes, strict=True)}  # fmt: skip


def _divergence(tmp_path: Path, pairs: dict[str, Any]) -> dict[str, Any]:
    tmp_path.mkdir()
    a, b = pair_captures(tmp_path, pairs)
    return compare(a, b, top=len(pairs))["divergence"]


def test_the_same_source_cited_with_other_per_request_ids_is_the_same_answer(tmp_path: Path) -> None:
    same = {
        **_pairs(_container("a"), _container("b"), "responses"),
        **{f"made {k}": v for k, v in _pairs(_made("a"), _made("b"), "responses").items()},
        **_pairs(_web("a"), _web("b"), "messages"),
    }
    d = _divergence(tmp_path / "same", same)
    assert d["exact_match_rate"] == 1 and "citations_differ" not in d["counts"], d["counts"]


def test_another_source_cited_is_another_answer(tmp_path: Path) -> None:
    other = {
        **_pairs(_container("a"), _container("b", "table.csv"), "responses"),  # another file made
        **{f"made {k}": v for k, v in _pairs(_made("a"), _made("b", 0), "responses").items()},  # cited elsewhere
        **{f"uploaded {k}": v for k, v in _pairs(_uploaded("file_a"), _uploaded("file_b"), "responses").items()},
        **_pairs(_web("a"), _web("b", "https://b.example"), "messages"),
    }
    d = _divergence(tmp_path / "other", other)
    assert d["exact_match_rate"] == 0 and d["counts"]["citations_differ"] == len(other), d["counts"]
