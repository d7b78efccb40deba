"""Amazon Bedrock's Converse API (``/model/{modelId}/converse``), shaped as AWS documents it: its
body holds ``messages`` as chat's does, and was read as chat (no sampling settings, no tools, its
answer in no API's shape). It is read as itself now; ``/converse-stream``, in AWS's binary
event-stream framing, is unread and said so, never read as another API's answer."""

from __future__ import annotations

import binascii
import json
import struct
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.apis import read_request, read_response
from tests.analysis_builders import Load, exchange
from tests.helpers import pair_captures

_JSON = "application/json"
_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
_BODY = {
    "messages": [{"role": "user", "content": [{"text": "What is 17 + 25?"}]}],
    "system": [{"text": "Answer briefly."}],
    "inferenceConfig": {"maxTokens": 64, "temperature": 0, "topP": 0.9, "stopSequences": ["\n\n"]},
    "toolConfig": {"tools": [{"toolSpec": {"name": "calc", "inputSchema": {"json": {"type": "object"}}}}]},
}


def _answer(*blocks: dict[str, Any], stop: str = "end_turn", latency: int = 120) -> list[bytes]:
    """Converse's answer: the message's blocks, why it stopped, its usage and (new on every run) its latency."""
    said = {
        "output": {"message": {"role": "assistant", "content": list(blocks)}},
        "stopReason": stop,
        "usage": {"inputTokens": 21, "outputTokens": 7, "totalTokens": 28},
        "metrics": {"latencyMs": latency},
    }
    return [json.dumps(said).encode()]


def _record(path: str, chunks: list[bytes], ctype: str = _JSON) -> dict[str, Any]:
    return {
        "path": path,
        "request_body": json.dumps(_BODY).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", ctype]],
        "chunks": chunks,
    }


def test_a_converse_request_and_its_answer_are_read_as_converse() -> None:
    call = {"toolUse": {"toolUseId": "tooluse_1", "name": "calc", "input": {"a": 17, "b": 25}}}
    record = _record(_PATH, _answer({"text": "Let me add."}, call, stop="tool_use"))
    asked = read_request(record)
    assert (asked.api, asked.generation, asked.stream) == ("bedrock-converse", True, False)
    assert asked.system == "Answer briefly." and asked.turns[-1].text == "What is 17 + 25?"
    assert asked.tools == ("calc",) and asked.max_tokens == 64
    assert asked.sampling == {"max_tokens": 64, "temperature": 0, "top_p": 0.9, "stop": ["\n\n"]}
    out = read_response(record)
    assert out.readable and out.error is None and out.text == "Let me add."
    assert [(c["name"], json.loads(c["arguments"])) for c in out.tool_calls] == [("calc", {"a": 17, "b": 25})]
    assert out.finish_reason == "tool_calls" and (out.prompt_tokens, out.output_tokens) == (21, 7)


def _frame(event: str, payload: dict[str, Any]) -> bytes:
    """One message of AWS's event-stream framing: lengths, CRCs, binary headers, the JSON payload."""
    headers = b""
    for name, value in ((":event-type", event), (":message-type", "event"), (":content-type", _JSON)):
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(value)) + value.encode()
    data = json.dumps(payload).encode()
    prelude = struct.pack(">II", 16 + len(headers) + len(data), len(headers))
    message = prelude + struct.pack(">I", binascii.crc32(prelude)) + headers + data
    return message + struct.pack(">I", binascii.crc32(message))


_STREAM = [
    _frame("messageStart", {"role": "assistant"}),
    _frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "42"}}),
    _frame("messageStop", {"stopReason": "end_turn"}),
    _frame("metadata", {"usage": {"inputTokens": 21, "outputTokens": 2, "totalTokens": 23}, "metrics": {"latencyMs": 90}}),
]


def test_a_converse_stream_is_unread_and_says_why(load: Load) -> None:
    """Its binary frames hold JSON, yet no reader here decodes the framing: no text, no tokens,
    an unreadable answer that says what it is (not an answer of nothing, nor another API's)."""
    record = _record(_PATH + "-stream", _STREAM, "application/vnd.amazon.eventstream")
    asked = read_request(record)
    assert (asked.api, asked.generation, asked.stream) == ("bedrock-converse-stream", True, True)
    out = read_response(record)
    assert not out.readable and out.text == "" and out.output_tokens is None
    assert out.error is not None and "event-stream" in out.error
    chunks = [(10.0 * (i + 1), c) for i, c in enumerate(_STREAM)]
    a = load([exchange("x", chunks=chunks, request=json.dumps(_BODY).encode(), path=_PATH + "-stream")])
    [m] = a.query("SELECT * FROM metrics WHERE exchange_id = 'x'").records()
    assert m["generation"] is True and m["readable"] is False and m["ok"] is False  # counted unreadable, in no speed figure
    assert m["t_first_token_ns"] is None and m["output_tokens_source"] != "usage"
    assert "event-stream" in m["parse_error"]


_WHOLE = (_PATH, _BODY, _JSON)


def test_converse_answers_that_differ_differ_and_the_same_match(tmp_path: Path) -> None:
    differ = {
        "text": (_WHOLE, _answer({"text": "42"}), _answer({"text": "43"})),
        "stop": (_WHOLE, _answer({"text": "42"}), _answer({"text": "42"}, stop="max_tokens")),
    }
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=2)["divergence"]
    assert d["counts"].get("exact", 0) == 0 and d["counts"]["finish_reason_changed"] == 1, d["counts"]
    assert sum(r["read_both"] for r in d["readable"].values()) == 2
    same = {"text": (_WHOLE, _answer({"text": "42"}), _answer({"text": "42"}, latency=300))}  # its latency new on every run
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 1 and sum(r["read_both"] for r in d["readable"].values()) == 1
