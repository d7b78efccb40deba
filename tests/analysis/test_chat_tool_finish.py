"""A chat answer that calls a tool and says "stop" (OpenAI to a named ``tool_choice``, older vLLM
and Ollama's /v1 to any) finishes ``tool_calls`` in the common vocabulary, as the engines that say
"tool_calls" have it, by every reading (whole, streamed: typed, looped, general); its raw word stays
"stop". stats counts the two alike and compare matches them; a "stop" without calls still differs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.compare import compare
from infertap.apis import read_response
from infertap.apis.chat_stream import _looped, _typed
from tests import sdk_shapes
from tests.helpers import pair_captures, write_capture

_SSE, _JSON = "text/event-stream", "application/json"
_ASK = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
_CALL = {"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def _stream(finish: str, calls: bool = True) -> list[bytes]:
    """A streamed answer: a call's chunk (or text), then its finish chunk, as one chunk of bytes."""
    delta = {"tool_calls": [_CALL]} if calls else {"content": "Paris is sunny."}
    chunks = [{"index": 0, "delta": delta}, {"index": 0, "delta": {}, "finish_reason": finish}]
    events = [sdk_shapes.chat_chunk({"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [c]}) for c in chunks]  # fmt: skip
    return [b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"]


def _whole(finish: str, n: int = 1) -> list[bytes]:
    """An answer sent whole, its ``n`` choices each the call."""
    call = {k: v for k, v in _CALL.items() if k != "index"}  # a whole message's calls have no index
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choices = [{"index": k, "message": message, "finish_reason": finish} for k in range(n)]
    body = {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": choices}
    return [json.dumps(sdk_shapes.chat_completion(body)).encode()]


def _record(chunks: list[bytes], ctype: str) -> dict[str, Any]:
    return {"path": "/v1/chat/completions", "request_body": json.dumps(_ASK).encode(), "response_headers": [["content-type", ctype]], "chunks": chunks}  # fmt: skip


def test_a_chat_stop_that_calls_a_tool_finishes_tool_calls_by_every_reading() -> None:
    for chunks, ctype, want in (
        (_stream("stop"), _SSE, ("tool_calls", "stop")),
        (_whole("stop"), _JSON, ("tool_calls", "stop")),
        (_stream("tool_calls"), _SSE, ("tool_calls", "tool_calls")),
        (_stream("stop", calls=False), _SSE, ("stop", "stop")),
    ):
        out = read_response(_record(chunks, ctype))
        assert (out.finish_reason, out.finish_reason_raw) == want
        if ctype == _SSE:
            body = b"".join(chunks)
            ends = list(itertools.accumulate(map(len, chunks)))
            typed, looped = _typed(chunks, body, ends), _looped(chunks, body, ends)
            assert typed is not None and looped is not None
            assert (typed.output.finish_reason, typed.output.finish_reason_raw) == want
            assert (looped.output.finish_reason, looped.output.finish_reason_raw) == want


def test_stats_counts_and_compare_matches_a_call_whichever_word_the_engine_ends_it_with(tmp_path: Path) -> None:
    chat = ("/v1/chat/completions", _ASK, _SSE)
    records = write_capture(
        tmp_path / "cap",
        [
            {"body": {**_ASK, "tag": i}, "chunks": c, "content_type": _SSE}
            for i, c in enumerate((_stream("tool_calls"), _stream("stop"), _stream("stop", calls=False)))
        ],
    )
    assert [read_response(r).finish_reason for r in records] == ["tool_calls", "tool_calls", "stop"]
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        (group,) = speed_stats(a)["groups"]
    assert group["finish_reasons"] == {"tool_calls": 2, "stop": 1}

    # Must match: vLLM's "tool_calls" against OpenAI's "stop" of the same call, streamed or whole.
    a, b = pair_captures(tmp_path / "same", {"streamed": (chat, _stream("tool_calls"), _stream("stop"))})
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 1 and not d["counts"].get("finish_reason_changed"), d["counts"]
    whole = ("/v1/chat/completions", {**_ASK, "stream": False}, _JSON)
    a, b = pair_captures(tmp_path / "same-whole", {"whole": (whole, _whole("tool_calls"), _whole("stop"))})
    assert compare(a, b, top=1)["divergence"]["exact_match_rate"] == 1
    a, b = pair_captures(tmp_path / "same-choices", {"n=2": (whole, _whole("tool_calls", 2), _whole("stop", 2))})
    assert compare(a, b, top=1)["divergence"]["exact_match_rate"] == 1  # choice 1 judged as choice 0

    # Must differ: a "stop" that calls against one that answers in words.
    a, b = pair_captures(tmp_path / "differ", {"call vs text": (chat, _stream("stop"), _stream("stop", calls=False))})
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 0 and d["counts"]["finish_reason_changed"] == 1
    (item,) = d["most_divergent"]
    assert item["finish_reason"] == ["tool_calls", "stop"] and item["finish_reason_raw"] == ["stop", "stop"]
