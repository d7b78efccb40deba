"""Anthropic's ``usage.iterations``: a request's sampling iterations, each with its own counts. The
top-level counts leave out a compaction's (the SDK's ``BetaIterationsUsage``: "A compaction entry's
tokens are not included in the top-level usage fields"), though the answer carries what it wrote
(its ``compaction`` block) and the request spent its time: the answer's prompt, cached and output
tokens are the iterations' sums, whole, streamed and from a cut answer's tail, and in the metrics
view. Every body is checked against the anthropic SDK's own types."""

from __future__ import annotations

import json
from typing import Any

from anthropic.types.beta import BetaMessage, BetaRawMessageDeltaEvent

from infertap.apis import read_response, tail_usage
from infertap.capture.records import RESPONSE_TAIL_BYTES
from tests import sdk_shapes
from tests.analysis_builders import JSON_HEADERS, Load, exchange

_SSE = [["content-type", "text/event-stream"]]
_REQUEST = json.dumps(
    {"model": "claude-sonnet-4-6", "max_tokens": 4096, "messages": [{"role": "user", "content": "Go on."}]}
).encode()
_SUMMARY = "The user asked about the weather in Paris."


def _iteration(kind: str, fresh: int, read: int, written: int, output: int, model: str | None = None) -> dict[str, Any]:
    entry = {
        "type": kind,
        "input_tokens": fresh,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": written,
        "output_tokens": output,
    }
    return {**entry, "model": model} if model else entry


#: A compaction (its own counts, not in the top level's), then the answer from the compacted context.
_COMPACTED = [_iteration("compaction", 180_000, 0, 0, 3_500), _iteration("message", 23_000, 100, 0, 1_000)]
#: A server tool loop's two turns, an advisor consulted between them, served by a fallback model.
_LOOP = [
    _iteration("message", 2_000, 0, 0, 50),
    _iteration("advisor_message", 2_100, 0, 0, 600, model="claude-opus-4-7"),
    _iteration("fallback_message", 2_700, 0, 0, 200, model="claude-sonnet-4-5"),
]
_TOP = {"input_tokens": 23_000, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0, "output_tokens": 1_000}


def _message(usage: dict[str, Any], content: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": content if content is not None else [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": usage,
    }
    sdk_shapes.message(body, beta=True)
    _as_the_sdk_reads(BetaMessage.model_validate(body).usage, usage)
    return body


def _as_the_sdk_reads(parsed: Any, usage: dict[str, Any]) -> None:
    """The SDK's model of ``usage`` holds it all, each iteration as the type it says, no field unknown to it."""
    assert parsed.to_dict(exclude_none=True) == usage and not parsed.model_extra
    for entry, said in zip(parsed.iterations or (), usage.get("iterations", ()), strict=True):
        assert entry.type == said["type"] and not entry.model_extra, said


def _stream(usage: dict[str, Any], text: str = "Sunny.") -> list[bytes]:
    """Streamed: the input counts at the start, the cumulative counts (iterations too) at the end."""
    head = {**_message({"input_tokens": usage["input_tokens"], "output_tokens": 1}), "content": [], "stop_reason": None}
    events = [
        {"type": "message_start", "message": head},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": usage},
        {"type": "message_stop"},
    ]
    _as_the_sdk_reads(BetaRawMessageDeltaEvent.model_validate(events[4]).usage, usage)
    return [f"event: {e['type']}\ndata: {json.dumps(sdk_shapes.message_event(e, beta=True))}\n\n".encode() for e in events]


def _record(chunks: list[bytes], headers: list[list[str]]) -> dict[str, Any]:
    return {"path": "/v1/messages", "status": 200, "end": "complete", "request_body": _REQUEST,
            "response_headers": headers, "chunks": chunks}  # fmt: skip


def _counts(usage: dict[str, Any]) -> list[tuple[int | None, int | None, int | None]]:
    """(prompt, cached, output) of the answer whole and streamed."""
    outs = [
        read_response(_record([json.dumps(_message(usage)).encode()], JSON_HEADERS)),
        read_response(_record(_stream(usage), _SSE)),
    ]
    return [(o.prompt_tokens, o.cached_tokens, o.output_tokens) for o in outs]


def test_a_compaction_s_tokens_count_with_the_answer_s() -> None:
    """Compacted, then answered: 180,100 + 23,100 prompt tokens read (100 from the cache) and
    3,500 + 1,000 written; the top level says 23,100 and 1,000."""
    assert _counts({**_TOP, "iterations": _COMPACTED}) == [(203_100, 100, 4_500)] * 2
    # Must match the top level: no iterations said, or only the answer's own.
    assert _counts(_TOP) == [(23_100, 100, 1_000)] * 2
    assert _counts({**_TOP, "iterations": _COMPACTED[1:]}) == [(23_100, 100, 1_000)] * 2


def test_every_iteration_of_a_tool_loop_counts_once() -> None:
    """A tool loop's turns, an advisor's and a fallback model's: each iteration's counts once, the
    top level (its non-compaction iterations, here every one) not added again."""
    top = {"input_tokens": 6_800, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "output_tokens": 850}
    assert _counts({**top, "iterations": _LOOP}) == [(6_800, 0, 850)] * 2
    # An advisor's counts left out of the top level: still counted, once.
    executor = {**top, "input_tokens": 4_700, "output_tokens": 250}
    assert _counts({**executor, "iterations": _LOOP}) == [(6_800, 0, 850)] * 2


def test_iterations_that_count_fewer_than_the_top_level_leave_it_as_it_is() -> None:
    """An iteration list that accounts for less than the top level (cut short) is no breakdown of it."""
    assert _counts({**_TOP, "output_tokens": 5_000, "iterations": _COMPACTED}) == [(23_100, 100, 5_000)] * 2


def test_a_cut_answer_counts_its_compaction_from_its_tail() -> None:
    """An answer past the response limit: its counts read from the kept tail's message_delta."""
    body = b"".join(_stream({**_TOP, "iterations": _COMPACTED}, text="Sunny. " * 20_000))
    cut = {**_record([body[:1024]], _SSE), "response_body_size": len(body), "response_tail": body[-RESPONSE_TAIL_BYTES:]}
    got = tail_usage(cut)
    assert got is not None and (got.prompt_tokens, got.output_tokens) == (203_100, 4_500)


def test_the_metrics_view_counts_a_compaction_s_output(load: Load) -> None:
    """Through the capture writer: the metrics view's counts are the iterations' too."""
    chunks = _stream({**_TOP, "iterations": _COMPACTED})
    times = [10.0, 20.0, 30.0, 40.0, 4_510.0, 4_511.0]  # the text's one delta at 30 ms
    a = load([exchange("x", path="/v1/messages", request=_REQUEST, chunks=list(zip(times, chunks, strict=True)))])
    row = a.sql("SELECT output_tokens, output_tokens_source, prompt_tokens FROM metrics").fetchall()
    assert row == [(4_500, "usage", 203_100)]
