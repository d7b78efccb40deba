"""n > 1 (chat and legacy completions ``n``; ``best_of`` answers with ``n`` choices too): each choice is
an answer, so ``stats`` counts each choice's finish reason, and a second choice cut at ``length``
is counted as ``length``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infertap.analysis import speed_stats
from tests.analysis.test_choice_errors import _chat, _completion, _streamed, _text, _whole
from tests.analysis_builders import Load, body, event, exchange, sse


def _finishes(load: Load, x: dict[str, Any]) -> dict[str, int]:
    [group] = speed_stats(load([x]), ["path"])["groups"]
    return group["finish_reasons"]


def _whole_completion(second_finish: str) -> dict[str, Any]:
    ask = json.dumps({"model": "m", "prompt": "2+2=", "n": 2, "best_of": 3}).encode()
    answer = {
        "object": "text_completion",
        "model": "m",
        "choices": [
            {"index": 0, "text": "4", "finish_reason": "stop", "logprobs": None},
            {"index": 1, "text": "5", "finish_reason": second_finish, "logprobs": None},
        ],
    }
    headers = [["content-type", "application/json"]]
    x = exchange("w", request=ask, chunks=[(5, json.dumps(answer).encode())], headers=headers)
    return {**x, "path": "/v1/completions"}


#: name -> (the answer with choice 1 ended by ``length``, the same with both ended by ``stop``)
PAIRS = {
    "chat stream": (
        _streamed("c", 0, _chat(0, "4"), _chat(1, "5"), _chat(0, finish="stop"), _chat(1, finish="length")),
        _streamed("c", 0, _chat(0, "4"), _chat(1, "5"), _chat(0, finish="stop"), _chat(1, finish="stop")),
    ),
    "chat whole": (
        _whole("w", 0, {"message": {"role": "assistant", "content": "5"}, "finish_reason": "length"}),
        _whole("w", 0, {"message": {"role": "assistant", "content": "5"}, "finish_reason": "stop"}),
    ),
    "completions stream": (
        _completion("s", 0, _text(0, "4", "stop"), _text(1, "5", "length")),
        _completion("s", 0, _text(0, "4", "stop"), _text(1, "5", "stop")),
    ),
    "completions whole, best_of": (_whole_completion("length"), _whole_completion("stop")),
}


@pytest.mark.parametrize("name", PAIRS)
def test_each_choice_is_counted_by_its_own_finish_reason(load: Load, name: str) -> None:
    cut, finished = PAIRS[name]
    assert _finishes(load, cut) == {"stop": 1, "length": 1}
    assert _finishes(load, finished) == {"stop": 2}


def test_an_answer_of_one_choice_counts_once(load: Load) -> None:
    one = exchange("one", request=body(), chunks=[(5, sse(event("4"), event(finish="length"), "[DONE]"))])
    assert _finishes(load, one) == {"length": 1}
