"""Ollama's and llama.cpp's own APIs end a stream on their end marker (Ollama's ``"done": true``,
llama.cpp ``/completion``'s ``"stop": true``), which carries why it stopped where it says at all
(older Ollama says no ``done_reason``): a 200 stream of theirs that ended cleanly without it was cut
(a gateway or server that dropped the request), not an ok answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.apis import ended_answer, unfinished
from infertap.cli import cli
from tests.analysis_builders import exchange, write_capture

_NDJSON = [["content-type", "application/x-ndjson"]]
_SSE = [["content-type", "text/event-stream"]]


def _ollama(path: str, words: list[str], *, done: dict[str, Any] | None) -> dict[str, Any]:
    """An Ollama stream: a line per word, then (``done``) its last line with these fields."""
    chat = path == "/api/chat"
    key = "message" if chat else "response"

    def line(word: str, **extra: Any) -> bytes:
        piece: Any = {"role": "assistant", "content": word} if chat else word
        return json.dumps({"model": "smollm2", "created_at": "2026-12-06T00:00:00Z", key: piece, **extra}).encode() + b"\n"

    lines = [line(w, done=False) for w in words]
    if done is not None:
        lines.append(line("", done=True, prompt_eval_count=5, eval_count=len(words), **done))
    return lines  # type: ignore[return-value]


def _llamacpp(words: list[str], *, stop: bool) -> list[bytes]:
    events = [{"content": w, "stop": False} for w in words]
    if stop:
        events.append({"content": "", "stop": True, "stop_type": "eos", "tokens_predicted": len(words), "tokens_evaluated": 5})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]


def _request(path: str) -> bytes:
    if path == "/api/chat":
        return json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": "q"}]}).encode()  # streams by default
    if path == "/api/generate":
        return json.dumps({"model": "smollm2", "prompt": "q"}).encode()
    return json.dumps({"prompt": "q", "n_predict": 8, "stream": True}).encode()


_CASES = {  # id: (path, chunks, unfinished)
    "chat_done": ("/api/chat", _ollama("/api/chat", ["Hel", "lo"], done={"done_reason": "stop"}), False),
    "chat_done_old": ("/api/chat", _ollama("/api/chat", ["Hel", "lo"], done={}), False),  # older Ollama: no done_reason
    "chat_cut": ("/api/chat", _ollama("/api/chat", ["Hel", "lo"], done=None), True),
    "generate_done": ("/api/generate", _ollama("/api/generate", ["Hel", "lo"], done={"done_reason": "length"}), False),
    "generate_cut": ("/api/generate", _ollama("/api/generate", ["Hel"], done=None), True),
    "completion_stop": ("/completion", _llamacpp(["Hel", "lo"], stop=True), False),
    "completion_cut": ("/completion", _llamacpp(["Hel", "lo"], stop=False), True),
}


def _records() -> list[dict[str, Any]]:
    out = []
    for k, (xid, (path, chunks, _)) in enumerate(_CASES.items()):
        headers = _SSE if path == "/completion" else _NDJSON
        rec = exchange(xid, sent_ms=k, request=_request(path), chunks=[(5 + i, c) for i, c in enumerate(chunks)], headers=headers)
        out.append({**rec, "path": path})
    return out


def test_a_native_stream_cut_before_its_end_marker_is_unfinished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    cap = write_capture(tmp_path / "cap", _records())
    rows = CliRunner().invoke(cli, ["sql", "SELECT exchange_id, api, ok, unfinished FROM metrics", str(cap), "--json"])
    assert rows.exit_code == 0, rows.output
    said = {r["exchange_id"]: (r["ok"], r["unfinished"]) for r in json.loads(rows.output)}
    assert said == {xid: (not cut, cut) for xid, (_, _, cut) in _CASES.items()}
    apis = {r["api"] for r in json.loads(rows.output)}
    assert apis == {"ollama-chat", "ollama-generate", "llamacpp"}


def test_replay_judges_them_as_the_analysis_does() -> None:
    """Replay read these whole on a worker thread as each ended (a 1,000-line answer held the GIL
    8-15 ms); it reads their last events now, as a chat stream's (``ended_answer``), and says what
    the whole reading says (``unfinished``, the analysis's rule): cut, or told, with the engine's
    output token count (``eval_count``, ``tokens_predicted``) and no error."""
    from infertap.apis import read_response

    for record in _records():
        cut = _CASES[record["id"]][2]
        assert unfinished(record) is cut, record["id"]
        tokens = None if cut else read_response(record).output_tokens
        assert tokens is None or tokens > 0
        assert ended_answer(record, generation=True) == (cut, not cut, tokens, None), record["id"]
