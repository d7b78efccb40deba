"""An answer the recorder kept only the head of (``response_not_kept``) is unknown, but the head
names its id (a chat chunk's ``id``, the Messages API's ``message_start``, a JSON body's leading
``"id"``): ``exchanges.response_id`` holds it, as it holds a whole answer's; a head cut before the
id holds none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.analysis import Analysis
from infertap.apis import NOT_KEPT
from tests import sdk_shapes
from tests.fake_upstream import sse_chunk
from tests.helpers import write_capture

CUT = {"response_body_size": 1 << 20, "response_body_chunks": 900, "response_last_ns": 90_000_000}
_CHAT = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
_MESSAGES = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "q"}], "stream": True}


def _event(data: dict[str, Any]) -> bytes:
    return b"event: " + data["type"].encode() + b"\ndata: " + json.dumps(sdk_shapes.message_event(data)).encode() + b"\n\n"


_MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [], "stop_reason": None,
            "usage": {"input_tokens": 3, "output_tokens": 1}}  # fmt: skip
_START = _event({"type": "message_start", "message": _MESSAGE})
_DELTA = _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}})
_ANSWER = {"role": "assistant", "content": "a" * 99}
_JSON = json.dumps(
    sdk_shapes.chat_completion(
        {
            "id": "chatcmpl-json",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "message": _ANSWER, "finish_reason": "stop"}],
        }
    )  # fmt: skip
)


def _x(xid: str, body: dict[str, Any], chunks: list[bytes], cut: bool, **how: Any) -> dict[str, Any]:
    sse = {"content_type": "text/event-stream"} if body.get("stream") else {}
    return {"id": xid, "body": body, "chunks": chunks, "fields": CUT if cut else {}, **sse, **how}


def test_a_cut_answers_response_id_is_the_one_its_kept_head_names(tmp_path: Path) -> None:
    chat = [sse_chunk("c", i, "word ") for i in range(3)]
    exchanges = [
        _x("chat-cut", _CHAT, chat, True),
        _x("chat-whole", _CHAT, [*chat, b"data: [DONE]\n\n"], False),
        _x("chat-before-id", _CHAT, [chat[0][:20]], True),  # cut inside the first event: no id known
        _x("messages-cut", _MESSAGES, [_START, _DELTA], True, path="/v1/messages"),
        _x("json-cut", {**_CHAT, "stream": False}, [_JSON.encode()[:60]], True),
        _x("json-cut-before-id", {**_CHAT, "stream": False}, [b'{"object": "chat.completion", "choi'], True),
    ]
    write_capture(tmp_path / "cap", exchanges)
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        rows = {
            r["exchange_id"]: r
            for r in a.query("SELECT exchange_id, response_id, readable, parse_error FROM exchanges").records()
        }
    ids = {xid: r["response_id"] for xid, r in rows.items()}
    assert ids == {
        "chat-cut": "chatcmpl-c",
        "chat-whole": "chatcmpl-c",
        "chat-before-id": None,
        "messages-cut": "msg_1",
        "json-cut": "chatcmpl-json",
        "json-cut-before-id": None,
    }
    for xid, row in rows.items():  # only the id: the answer stays unknown
        assert (row["readable"], row["parse_error"]) == ((True, None) if xid == "chat-whole" else (False, NOT_KEPT)), xid
