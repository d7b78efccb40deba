"""compare's KL with n > 1: each choice is an answer, so a changed distribution behind choice 1's
same text is seen (it read choice 0's logprobs alone), and the same answers keep a KL of 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from tests.helpers import pair_captures

_ASK = {"model": "m", "messages": [{"role": "user", "content": "q"}], "n": 2, "logprobs": True, "top_logprobs": 2}


def _position(token: str, top: dict[str, float]) -> dict[str, Any]:
    alternatives = [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in top.items()]
    return {"token": token, "logprob": top[token], "bytes": list(token.encode()), "top_logprobs": alternatives}


_FIRST = [_position("The", {"The": -0.1, "A": -2.4}), _position(" cat", {" cat": -0.5, " dog": -0.9})]
_CAT = [_position("A", {"A": -0.2, "The": -1.8}), _position(" cat", {" cat": -0.5, " dog": -0.9})]
_DOG = [_position("A", {"A": -0.2, "The": -1.8}), _position(" cat", {" cat": -1.2, " dog": -0.4})]


def _chat_whole(second: list[dict[str, Any]]) -> list[bytes]:
    choices = [
        {"index": k, "message": {"role": "assistant", "content": "".join(p["token"] for p in lp)},
         "logprobs": {"content": lp}, "finish_reason": "stop"}
        for k, lp in enumerate((_FIRST, second))
    ]  # fmt: skip
    return [json.dumps({"object": "chat.completion", "model": "m", "choices": choices}).encode()]


def _chat_stream(second: list[dict[str, Any]]) -> list[bytes]:
    """One chunk per token and choice, interleaved, as an n > 1 stream sends them."""
    chunks = []
    for a, b in zip(_FIRST, second, strict=True):
        for k, p in ((0, a), (1, b)):
            choice = {"index": k, "delta": {"content": p["token"]}, "logprobs": {"content": [p]}, "finish_reason": None}
            chunks.append({"object": "chat.completion.chunk", "model": "m", "choices": [choice]})
    chunks += [{"object": "chat.completion.chunk", "model": "m", "choices": [{"index": k, "delta": {}, "finish_reason": "stop"}]} for k in (0, 1)]  # fmt: skip
    return [b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"]


def _legacy(second: list[dict[str, Any]]) -> list[bytes]:
    """A legacy completion of ``n`` 2 (``best_of`` answers so too): parallel ``tokens`` lists per choice."""

    def logprobs(lp: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "tokens": [p["token"] for p in lp],
            "token_logprobs": [p["logprob"] for p in lp],
            "top_logprobs": [{t["token"]: t["logprob"] for t in p["top_logprobs"]} for p in lp],
            "text_offset": [0] * len(lp),
        }

    choices = [
        {"index": k, "text": "".join(p["token"] for p in lp), "logprobs": logprobs(lp), "finish_reason": "stop"}
        for k, lp in enumerate((_FIRST, second))
    ]
    return [json.dumps({"object": "text_completion", "model": "m", "choices": choices}).encode()]


def _pairs(b_second: list[dict[str, Any]]) -> dict[str, Any]:
    completions = {"model": "m", "prompt": "q", "n": 2, "best_of": 2, "logprobs": 2}
    return {
        "chat whole": (("/v1/chat/completions", _ASK, "application/json"), _chat_whole(_CAT), _chat_whole(b_second)),
        "chat stream": (
            ("/v1/chat/completions", {**_ASK, "stream": True}, "text/event-stream"),
            _chat_stream(_CAT),
            _chat_stream(b_second),
        ),
        "completions whole": (("/v1/completions", completions, "application/json"), _legacy(_CAT), _legacy(b_second)),
    }


def test_a_changed_choice_1_distribution_has_a_kl_and_the_same_one_none(tmp_path: Path) -> None:
    changed, same = tmp_path / "changed", tmp_path / "same"
    for folder, second in ((changed, _DOG), (same, _CAT)):
        folder.mkdir()
        a, b = pair_captures(folder, _pairs(second))
        d = compare(a, b, top=3)["divergence"]
        assert d["exact_match_rate"] == 1, d["counts"]  # the same text: choice 1's logprobs alone tell them apart
        assert d["logprobs"]["pairs"] == 3, d.get("logprobs")
        if folder is changed:
            # choice 0's 2 positions agree; choice 1's second disagrees at the top: 3 of 4 pooled agree
            assert d["logprobs"]["kl_mean"] > 0 and d["logprobs"]["top1_agreement"] == 0.75
        else:
            assert d["logprobs"]["kl_mean"] == 0 and d["logprobs"]["top1_agreement"] == 1
