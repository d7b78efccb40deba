"""An n > 1 answer whose choice other than the first reports an error is an error, as choice 0's is."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.apis import read_request, read_response
from infertap.apis.conversation import Prefixes, chat_answer, read_links
from infertap.cli import cli
from tests import sdk_shapes
from tests.analysis_builders import JSON_HEADERS, body, exchange, outcomes, sse, write_capture

_CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}


def _chat(k: int, content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    """A chat chunk of choice ``k`` alone (n > 1: each choice's deltas come in chunks of their own)."""
    delta = {"content": content} if content is not None else {}
    return sdk_shapes.chat_chunk({**_CHUNK, "choices": [{"index": k, "delta": delta, "finish_reason": finish}]})


def _failed_chat(k: int, content: str | None = None, finish: str | None = "error", **more: Any) -> dict[str, Any]:
    """Choice ``k``'s chunk as vLLM or a gateway ends a failed choice: ``finish_reason`` "error" and/or an
    ``error`` object beside it, neither of which OpenAI's SDK allows (so unchecked, on purpose)."""
    delta = {"content": content} if content is not None else {}
    return {**_CHUNK, "choices": [{"index": k, "delta": delta, "finish_reason": finish, **more}]}


def _text(k: int, text: str, finish: str | None = None) -> dict[str, Any]:
    """Choice ``k``'s text completion chunk: checked unless it failed ("error", no SDK's finish)."""
    choice = {"index": k, "text": text, "logprobs": None, "finish_reason": finish}
    chunk = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": "m", "choices": [choice]}
    return chunk if finish == "error" else sdk_shapes.completion_chunk(chunk)


def _streamed(xid: str, sent_ms: float, *events: dict[str, Any], n: int = 2, **request: Any) -> dict[str, Any]:
    return exchange(xid, sent_ms=sent_ms, request=body(n=n, **request), chunks=[(5, sse(*events, "[DONE]"))])


def _completion(xid: str, sent_ms: float, *events: dict[str, Any]) -> dict[str, Any]:
    ask = json.dumps({"model": "m", "prompt": "2+2=", "stream": True, "n": 2}).encode()
    return {**exchange(xid, sent_ms=sent_ms, request=ask, chunks=[(5, sse(*events, "[DONE]"))]), "path": "/v1/completions"}


def _whole(xid: str, sent_ms: float, second: dict[str, Any]) -> dict[str, Any]:
    """A whole n = 2 answer whose choice 1 is ``second``: checked unless it failed ("error", no SDK's finish)."""
    first = {"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}
    answer = {"id": "r", "object": "chat.completion", "created": 0, "model": "m", "choices": [first, {"index": 1, **second}]}
    if second["finish_reason"] != "error":
        sdk_shapes.chat_completion(answer)
    return exchange(
        xid, sent_ms=sent_ms, request=body(stream=False, n=2), chunks=[(5, json.dumps(answer).encode())], headers=JSON_HEADERS
    )


_FAILED = {"message": "CUDA error: an illegal memory access"}
#: Each an answer whose choice 1 (or choice 0 alone, saying no more than the word) failed.
FAILED = [
    _streamed("chat_finish_error", 0, _chat(0, "4"), _chat(1, "5"), _chat(0, finish="stop"), _failed_chat(1)),
    _streamed("chat_error_object", 1, _chat(0, "4"), _chat(1, "5"), _chat(0, finish="stop"), _failed_chat(1, error=_FAILED)),
    _streamed(
        "chat_error_no_finish",
        2,
        _chat(0, "4"),
        _chat(1, "5"),
        _chat(0, finish="stop"),
        _failed_chat(1, finish=None, error=_FAILED),
    ),
    _streamed("chat_first_finish_error", 3, _failed_chat(0, "4"), n=1),
    _completion("completions_finish_error", 4, _text(0, "4", "stop"), _text(1, "5", "error")),
    _whole("whole_finish_error", 5, {"message": {"role": "assistant", "content": "5"}, "finish_reason": "error"}),
]
#: The same answers whose every choice finished: ok.
FINISHED = [
    _streamed("chat_both", 6, _chat(0, "4"), _chat(1, "5"), _chat(0, finish="stop"), _chat(1, finish="length")),
    _completion("completions_both", 7, _text(0, "4", "stop"), _text(1, "5", "stop")),
    _whole("whole_both", 8, {"message": {"role": "assistant", "content": "5"}, "finish_reason": "stop"}),
]


def test_an_error_in_another_choice_fails_the_answer_in_stats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM or a gateway may end choice 1 of an n = 2 answer with finish_reason "error" (and an error
    object, or none): stats counted the answer ok, its choice 1 dropped; the same word alone on choice
    0 was ok too. Now each is an error (error_message says which choice), not unfinished; answers
    whose every choice finished stay ok."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    messages = {r["id"]: read_response(r).error_message for r in FAILED + FINISHED}
    assert messages == {
        "chat_finish_error": 'choice 1: finish_reason "error"',
        "chat_error_object": "choice 1: CUDA error: an illegal memory access",
        "chat_error_no_finish": "choice 1: CUDA error: an illegal memory access",
        "chat_first_finish_error": 'finish_reason "error"',
        "completions_finish_error": 'choice 1: finish_reason "error"',
        "whole_finish_error": 'choice 1: finish_reason "error"',
        "chat_both": None,
        "completions_both": None,
        "whole_both": None,
    }
    cap = write_capture(tmp_path / "cap", FAILED + FINISHED)
    table = {xid: (r["ok"], r["unfinished"], r["error_message"]) for xid, r in outcomes(cap).items()}
    assert table == {r["id"]: (False, False, messages[r["id"]]) for r in FAILED} | {
        r["id"]: (True, False, None) for r in FINISHED
    }
    runner = CliRunner()
    stats = runner.invoke(cli, ["stats", str(cap), "--json"])
    assert stats.exit_code == 0, stats.output
    groups = json.loads(stats.output)["groups"]
    assert (sum(g["requests"] for g in groups), sum(g["ok"] for g in groups), sum(g["unfinished"] for g in groups)) == (9, 3, 0)


def test_compare_counts_a_side_whose_other_choice_failed_as_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """compare timed B's answers whose choice 1 failed among the pairs ok on both sides."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))

    def answer(i: int, failed: bool) -> dict[str, Any]:
        end = _failed_chat(1, error=_FAILED) if failed else _chat(1, finish="stop")
        return _streamed(f"x{i}", i * 10, _chat(0, "4"), _chat(1, "5"), _chat(0, finish="stop"), end, content=f"q{i}")

    a = write_capture(tmp_path / "a", [answer(i, failed=False) for i in range(4)])
    b = write_capture(tmp_path / "b", [answer(i, failed=i < 2) for i in range(4)])
    o = compare(a, b)["outcomes"]
    assert o["a"] == {"requests": 4, "ok": 4, "failed": 0, "unfinished": 0, "errors": {}}
    assert o["b"] == {"requests": 4, "ok": 2, "failed": 2, "unfinished": 0, "errors": {"an error in a 200 body": 2}}
    assert o["pairs"] == {"pairs": 4, "ok_both": 2, "failed_a": {}, "failed_b": {"an error in a 200 body": 2}}
    assert compare(a, a)["outcomes"]["pairs"]["ok_both"] == 4


def test_a_turn_never_continues_an_answer_whose_other_choice_failed() -> None:
    """Linking reads the usual stream by a fast path that skips other choices: it must say that the
    answer an error ended is no answer, as read_response does, so that no next turn continues it."""
    for record, answered in ((FAILED[0], False), (FAILED[3], False), (FINISHED[0], True)):
        request = read_request(record)
        found = chat_answer(record)
        assert found is not None and (found[0] is not None) == answered, record["id"]
        links = read_links(record, Prefixes.of(request.api, request.turns), None, True)
        assert (links.continuation is not None) == answered, record["id"]
