"""Per-exchange metrics (docs/metrics.md) on captures whose chunk times and token counts are set by the test."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from infertap.analysis import Analysis
from tests import sdk_shapes
from tests.analysis_builders import (
    JSON_HEADERS,
    MS,
    SSE_HEADERS,
    Load,
    body,
    encoded_chunks,
    enrichment,
    event,
    exchange,
    sse,
)


def metric(a: Analysis, xid: str) -> dict[str, Any]:
    [row] = a.query("SELECT * FROM metrics WHERE exchange_id = ?", [xid]).records()
    return row


def itl(a: Analysis, xid: str) -> list[int]:
    return [r[0] for r in a.query("SELECT gap_ns FROM itl WHERE exchange_id = ? ORDER BY chunk", [xid]).rows]


USAGE_3 = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def test_a_role_only_first_chunk_is_not_the_first_token(load: Load) -> None:
    a = load(
        [
            exchange(
                "x",
                sent_ms=5_000,
                end_ms=230,
                chunks=[
                    (100, sse(event(role="assistant", content=""))),  # role only, and an empty content: no token
                    (150, sse(event("Hel"))),
                    (170, sse(event("lo"))),
                    (200, sse(event(" world", finish="stop"))),
                    (210, sse(event(choices=False, usage=USAGE_3))),
                    (220, sse("[DONE]")),
                ],
            )
        ]
    )
    m = metric(a, "x")
    assert m["t_first_byte_ns"] == 100 * MS
    assert m["ttft_ns"] == 150 * MS and m["ttft_content_ns"] == 150 * MS
    assert m["e2e_ns"] == 230 * MS
    assert (m["output_tokens"], m["output_tokens_source"]) == (3, "usage")
    assert (m["prompt_tokens"], m["prompt_tokens_source"]) == (12, "usage")
    assert m["tpot_ns"] == pytest.approx((200 - 150) * MS / (3 - 1))
    assert itl(a, "x") == [20 * MS, 30 * MS]
    assert (m["token_chunks"], m["token_events"]) == (3, 3)
    assert m["ok"] is True and m["generation"] is True and m["stream"] is True


def test_tpot_counts_a_silent_end_of_sequence_token_up_to_the_finish_event(load: Load) -> None:
    """llama-server's usage counts the end-of-sequence token, which carries no text and arrives as the
    finish event one decode step after the last text: 3 text tokens + EOS = 4 tokens, 3 gaps to the
    finish. A count that leaves it out (re-tokenized text) keeps the span to the last text."""
    text = [(100, sse(event("a"))), (150, sse(event("b"))), (200, sse(event("c")))]
    usage = {"prompt_tokens": 5, "completion_tokens": 4}
    a = load(
        [
            exchange("usage", chunks=[*text, (250, sse(event(finish="stop"), event(choices=False, usage=usage)))]),
            exchange("tokenize", chunks=[*text, (250, sse(event(finish="stop")))]),
            enrichment("tokenize", output_count=3),
        ]
    )
    eos, retokenized = metric(a, "usage"), metric(a, "tokenize")
    assert (eos["output_tokens"], eos["output_tokens_source"], eos["t_last_token_ns"], eos["t_finish_ns"]) == (
        4,
        "usage",
        200 * MS,
        250 * MS,
    )
    assert eos["tpot_ns"] == pytest.approx((250 - 100) * MS / (4 - 1))
    assert (retokenized["output_tokens"], retokenized["output_tokens_source"]) == (3, "tokenize")
    assert retokenized["tpot_ns"] == pytest.approx((200 - 100) * MS / (3 - 1))


def test_reasoning_and_tool_calls_are_tokens_but_not_content(load: Load) -> None:
    a = load(
        [
            exchange(
                "think", chunks=[(40, sse(event(reasoning="Let me see"))), (90, sse(event("4"))), (95, sse(event(finish="stop")))]
            ),
            exchange("tool", chunks=[(60, sse(event(role="assistant"))), (70, sse(event(tools=1))), (85, sse(event(tools=1)))]),
        ]
    )
    think, tool = metric(a, "think"), metric(a, "tool")
    assert (think["ttft_ns"], think["ttft_content_ns"]) == (40 * MS, 90 * MS)
    assert (tool["ttft_ns"], tool["ttft_content_ns"]) == (70 * MS, None)
    assert (tool["output_tokens"], tool["output_tokens_source"]) == (2, "chunks")  # two tool-call delta events
    assert itl(a, "tool") == [15 * MS]


def test_an_event_is_timed_by_the_chunk_that_ends_it(load: Load) -> None:
    a = load(
        [
            exchange(
                "x",
                chunks=[
                    (10, b'data: {"choices":[{"index":0,"delta":{"content":"A"}}]}\n'),  # the blank line hasn't arrived
                    (30, b'\ndata: {"choices":[{"index":0,"delta":{"con'),  # ...it has now; B starts
                    (55, b'tent":"B"}}]}\r\n\r'),  # CRLF line ends, the last "\n" still missing
                    (70, b"\n"),
                ],
            )
        ]
    )
    m = metric(a, "x")
    assert m["t_first_byte_ns"] == 10 * MS
    assert m["ttft_ns"] == 30 * MS
    assert itl(a, "x") == [40 * MS]
    events = a.query("SELECT chunk, t_ns, content FROM events WHERE exchange_id = 'x' ORDER BY index").rows
    assert events == [(1, 30 * MS, "A"), (3, 70 * MS, "B")]


def test_itl_is_per_chunk_and_chunks_may_carry_several_tokens(load: Load) -> None:
    a = load(
        [
            exchange(
                "x",
                request=body(max_tokens=100),
                chunks=[
                    (100, sse(event("a"), event("b"), event("c"))),
                    (160, sse(event("d"))),
                    (161, sse(event(finish="length"))),  # a finish_reason alone carries no token
                ],
            )
        ]
    )
    m = metric(a, "x")
    # No usage, no enrichment: the token-bearing events, named as such; never the requested max_tokens.
    assert (m["output_tokens"], m["output_tokens_source"]) == (4, "chunks")
    assert (m["token_chunks"], m["token_events"]) == (2, 4)
    assert itl(a, "x") == [60 * MS]
    assert a.query("SELECT events FROM itl WHERE exchange_id = 'x'").rows == [(1,)]
    assert m["tpot_ns"] == pytest.approx(60 * MS / (4 - 1))
    [finish] = a.query("SELECT finish_reason FROM exchanges WHERE exchange_id = 'x'").rows[0]
    assert finish == "length"


def test_output_tokens_come_from_usage_then_enrichment_then_chunks(load: Load) -> None:
    two = [(10, sse(event("a"))), (20, sse(event("b")))]
    with_usage = [*two, (30, sse(event(choices=False, usage={"prompt_tokens": 4, "completion_tokens": 5})))]
    a = load(
        [
            exchange("usage", chunks=with_usage),
            exchange("both", chunks=with_usage),
            exchange("tokenize", chunks=two),
            exchange("chunks", chunks=two),
            enrichment("both", prompt_ids=[1, 2, 3, 4], output_count=9),
            enrichment("tokenize", prompt_ids=[1, 2, 3], output_count=7),
        ]
    )
    got = {
        x: (metric(a, x)["output_tokens"], metric(a, x)["output_tokens_source"]) for x in ("usage", "both", "tokenize", "chunks")
    }
    assert got == {"usage": (5, "usage"), "both": (5, "usage"), "tokenize": (7, "tokenize"), "chunks": (2, "chunks")}
    assert (metric(a, "tokenize")["prompt_tokens"], metric(a, "tokenize")["prompt_tokens_source"]) == (3, "tokenize")
    assert (metric(a, "tokenize")["output_tokens_detail"], metric(a, "usage")["output_tokens_detail"]) == ("test tokenizer", None)
    assert metric(a, "tokenize")["tpot_ns"] == pytest.approx(10 * MS / (7 - 1))


def test_a_non_streamed_response_is_one_event_at_its_last_chunk(load: Load) -> None:
    payload = json.dumps(
        {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "four"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 6},
        }
    ).encode()
    a = load(
        [
            exchange(
                "x", request=body(stream=False), headers=JSON_HEADERS, end_ms=99, chunks=[(80, payload[:20]), (95, payload[20:])]
            )
        ]
    )
    m = metric(a, "x")
    assert (m["t_first_byte_ns"], m["ttft_ns"], m["e2e_ns"]) == (80 * MS, 95 * MS, 99 * MS)
    assert (m["output_tokens"], m["output_tokens_source"], m["stream"]) == (6, "usage", False)
    assert m["tpot_ns"] is None and itl(a, "x") == []  # token spacing was not observed


def test_incomplete_exchanges_end_at_their_last_byte_and_are_not_ok(load: Load) -> None:
    a = load(
        [
            exchange("gone", end="client_disconnected", end_ms=500, chunks=[(10, sse(event("a"))), (20, sse(event("b")))]),
            # The openai SDK closes on [DONE], sometimes before the engine ends the body: the answer is whole.
            exchange(
                "done",
                end="client_disconnected",
                end_ms=40,
                chunks=[(10, sse(event("a"))), (30, sse(event("b", finish="stop"), "[DONE]"))],
            ),
            exchange("refused", end="upstream_error", status=None, end_ms=3, chunks=[]),
            exchange(
                "http500", status=500, headers=JSON_HEADERS, chunks=[(7, json.dumps(sdk_shapes.error_body("boom")).encode())]
            ),
        ]
    )
    gone, refused, http500 = metric(a, "gone"), metric(a, "refused"), metric(a, "http500")
    assert (gone["e2e_ns"], gone["ok"], gone["ttft_ns"]) == (20 * MS, False, 10 * MS)
    done = metric(a, "done")
    assert (done["ok"], done["e2e_ns"], done["output_tokens"]) == (True, 30 * MS, 2)
    assert a.query("SELECT exchange_id FROM exchanges WHERE stream_done").rows == [("done",)]
    assert (refused["e2e_ns"], refused["ok"], refused["t_first_byte_ns"]) == (None, False, None)
    assert (http500["ok"], http500["ttft_ns"], http500["e2e_ns"]) == (False, None, 7 * MS)


@pytest.mark.parametrize(
    ("encoding", "wbits"), [("gzip", 16 + zlib.MAX_WBITS), ("deflate", zlib.MAX_WBITS), ("deflate", -zlib.MAX_WBITS)]
)
def test_a_compressed_stream_keeps_its_chunk_times(load: Load, encoding: str, wbits: int) -> None:
    plain = [(10, sse(event(role="assistant"))), (30, sse(event("x"))), (60, sse(event("y"), event("z")))]
    a = load([exchange("gz", chunks=encoded_chunks(plain, wbits), headers=[*SSE_HEADERS, ["content-encoding", encoding]])])
    m = metric(a, "gz")
    assert (m["ttft_ns"], m["output_tokens"], m["token_chunks"]) == (30 * MS, 3, 2)
    assert itl(a, "gz") == [30 * MS]


def test_llama_cpp_server_timings_are_kept_apart_and_labelled(load: Load) -> None:
    timings = {"prompt_n": 10, "prompt_ms": 12.5, "predicted_n": 3, "predicted_ms": 30.0, "cache_n": 4}
    a = load([exchange("x", chunks=[(10, sse(event("a"))), (20, sse(event("b"), event("c", finish="stop", timings=timings)))])])
    m = metric(a, "x")
    assert (m["server_prompt_ms"], m["server_decode_ms"], m["server_cached_tokens"]) == (12.5, 30.0, 4)
    assert (m["server_prompt_tokens"], m["server_decode_tokens"]) == (10, 3)
    assert "server-measured" in m["server_timings_source"]
    assert (m["cached_tokens"], m["cached_tokens_source"]) == (4, "server")


def test_ollama_ndjson_lines_durations_and_counts(load: Load) -> None:
    lines = [
        {"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": False},
        {"model": "m", "message": {"role": "assistant", "content": " there"}, "done": False},
        {
            "model": "m",
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 8,
            "prompt_eval_duration": 5_000_000,
            "eval_count": 2,
            "eval_duration": 15_000_000,
        },
    ]
    raw = [json.dumps(line).encode() + b"\n" for line in lines]
    a = load(
        [
            exchange(
                "o",
                path="/api/chat",
                headers=[["content-type", "application/x-ndjson"]],
                request=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
                chunks=[(20, raw[0] + raw[1][:5]), (35, raw[1][5:]), (50, raw[2])],
            )
        ]
    )
    m = metric(a, "o")
    assert (m["ttft_ns"], m["e2e_ns"]) == (20 * MS, 50 * MS)
    assert itl(a, "o") == [15 * MS]
    assert (m["output_tokens"], m["output_tokens_source"], m["prompt_tokens"]) == (2, "usage", 8)
    assert (m["server_prompt_ms"], m["server_decode_ms"]) == (5.0, 15.0)
    assert m["server_timings_source"].startswith("Ollama")
    assert m["stream"] is False  # Ollama streams unless told not to, but the request didn't say "stream": true


def test_anthropic_stream_events_count_text_and_thinking(load: Load) -> None:
    def ev(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    a = load(
        [
            exchange(
                "an",
                path="/v1/messages",
                chunks=[
                    (5, ev("message_start", {"type": "message_start", "message": {"role": "assistant"}})),
                    (
                        25,
                        ev(
                            "content_block_delta",
                            {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "hm"}},
                        ),
                    ),
                    (
                        45,
                        ev(
                            "content_block_delta", {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Yes"}}
                        ),
                    ),
                    (
                        50,
                        ev(
                            "message_delta",
                            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
                        ),
                    ),
                ],
            )
        ]
    )
    m = metric(a, "an")
    assert (m["t_first_byte_ns"], m["ttft_ns"], m["ttft_content_ns"]) == (5 * MS, 25 * MS, 45 * MS)
    assert (m["output_tokens"], m["output_tokens_source"]) == (2, "usage")


def test_token_times_kept_at_decode_are_what_the_events_say(load: Load) -> None:
    """The exchanges' token times (summed up at decode, so that metrics reads no events) against
    the token_chunks view over every shape: several events a chunk, reasoning and tool deltas only,
    a finish without text, events past the recorded chunk times, no events, a plain JSON body."""
    a = load(
        [
            exchange(
                "many",
                chunks=[
                    (10, sse(event(role="assistant"))),
                    (20, sse(event("a"), event(reasoning="r"), event(tools=2))),
                    (30, sse(event(reasoning="only"))),
                    (40, sse(event("b"), event(finish="stop", usage=USAGE_3))),
                ],
            ),
            exchange("thinking", chunks=[(5, sse(event(reasoning="r"))), (9, sse(event(tools=1, finish="tool_calls")))]),
            exchange("silent", chunks=[(7, sse(event(role="assistant"), event(finish="length")))]),
            # The last two chunks have no recorded time: their events are timed NULL, as in SQL.
            exchange(
                "untimed",
                chunks=[(3, sse(event("x"))), (6, sse(event("y"))), (8, sse(event("z", finish="stop")))],
                chunk_ns=[3 * MS],
            ),
            exchange("refused", chunks=[], status=None, end="upstream_error"),
            exchange(
                "whole",
                chunks=[
                    (12, json.dumps({"choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}]}).encode())
                ],
                headers=JSON_HEADERS,
            ),
        ]
    )
    from tests.analysis_builders import assert_token_times_match_events

    assert assert_token_times_match_events(a) == 6
    rows = {
        r[0]: r[1:]
        for r in a.sql(
            "SELECT exchange_id, first_token_ns, last_token_ns, first_content_ns, token_chunk_count, token_event_count, finish_ns FROM exchanges"
        ).fetchall()
    }
    assert rows["many"] == (20 * MS, 40 * MS, 20 * MS, 3, 5, 40 * MS)
    assert rows["thinking"] == (5 * MS, 9 * MS, None, 2, 2, 9 * MS)  # tokens, but no text
    assert rows["silent"] == (None, None, None, None, None, 7 * MS)  # no token at all: NULL, as a LEFT JOIN gives
    assert rows["untimed"] == (3 * MS, 3 * MS, 3 * MS, 3, 3, None)
    assert rows["refused"] == (None,) * 6
