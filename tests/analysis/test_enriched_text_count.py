"""An enrichment counts an answer's output by the engine's tokenizer on its text (engines/enrich.py):
a count of the whole output only where the text is all the answer generated. Of an answer that also
streamed reasoning or tool calls it would leave those tokens out, while ``ttft`` starts at the first
of them: ``output_tokens`` (and so output tokens/s) too few, ``tpot`` too long."""

from __future__ import annotations

from typing import Any

import pytest

from infertap.analysis import Analysis
from infertap.analysis.stats import speed_stats
from tests.analysis_builders import MS, Load, enrichment, event, exchange, sse


def metric(a: Analysis, xid: str) -> dict[str, Any]:
    [row] = a.query("SELECT * FROM metrics WHERE exchange_id = ?", [xid]).records()
    return row


THINK = [(10 * (i + 1), sse(event(reasoning=w))) for i, w in enumerate(["Let", " me", " see"])]
ANSWER = [(40, sse(event("4"))), (50, sse(event(" ok"))), (60, sse(event(finish="stop"))), (61, sse("[DONE]"))]
CALL = [
    (40, sse(event("Let me call it."))),
    (50, sse(event(tools=1))),
    (60, sse(event(tools=1))),
    (70, sse(event(finish="tool_calls"))),
]


def test_a_tokenizer_count_of_the_text_alone_is_no_count_of_an_answer_that_reasoned_or_called(load: Load) -> None:
    a = load(
        [
            exchange("think", chunks=[*THINK, *ANSWER]),
            exchange("call", chunks=[*CALL, (71, sse("[DONE]"))]),
            exchange("text", chunks=[(10, sse(event(role="assistant", content=""))), *ANSWER]),
            # what the engine's tokenizer makes of each answer's text ("4 ok": 2 tokens; the call's words: 5)
            enrichment("think", output_count=2),
            enrichment("call", output_count=5),
            enrichment("text", output_count=2),
        ]
    )
    think, call, text = metric(a, "think"), metric(a, "call"), metric(a, "text")
    # must differ from the text's count: the reasoning's three events are output too
    assert (think["output_tokens"], think["output_tokens_source"]) == (think["token_events"], "chunks") == (5, "chunks")
    assert think["output_tokens_detail"] is None
    assert think["tpot_ns"] == pytest.approx((50 - 10) * MS / (5 - 1))
    assert (call["output_tokens"], call["output_tokens_source"]) == (call["token_events"], "chunks") == (3, "chunks")
    # must match: an answer of text alone keeps the tokenizer's count of it
    assert (text["output_tokens"], text["output_tokens_source"], text["output_tokens_detail"]) == (
        2,
        "tokenize",
        "test tokenizer",
    )
    assert text["tpot_ns"] == pytest.approx((50 - 40) * MS / (2 - 1))


def test_stats_output_tokens_per_s_counts_the_reasoning(load: Load) -> None:
    a = load([exchange("think", chunks=[*THINK, *ANSWER]), enrichment("think", output_count=2)])
    [group] = speed_stats(a)["groups"]
    assert group["workload"]["output_tokens"]["total"] == 5  # not the text's 2
    assert group["throughput"]["output_tokens_source"] == "chunks"
