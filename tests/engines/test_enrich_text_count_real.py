"""The enrichment's output count by a real engine's tokenizer (llama-server's /tokenize): a count of
the answer's text, so of its output only where the text is all the answer generated."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis
from infertap.capture.reader import read_records
from infertap.cli import cli
from infertap.engines.enrich import NOT_TEXT_ONLY
from tests.helpers import write_capture

pytestmark = pytest.mark.engine

ANSWER = "The answer is 42."


def _sse(*deltas: dict) -> list[bytes]:
    """A chat stream sent without include_usage (no usage): each delta its own chunk, then [DONE]."""
    chunks = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": d, "finish_reason": None}],
        }
        for d in deltas
    ]
    chunks.append({**chunks[0], "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return [b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks] + [b"data: [DONE]\n\n"]


def test_an_answer_that_reasoned_is_counted_by_its_token_events_not_its_texts_tokens(llama_server_engine, tmp_path):
    thought = [{"reasoning_content": w} for w in ("Six", " times", " seven", ".")]
    text = [{"content": w} for w in ("The answer", " is 42.")]
    capture = tmp_path / "cap"
    body = {"model": "m", "messages": [{"role": "user", "content": "6*7?"}], "stream": True}
    write_capture(
        capture,
        [
            {"id": "think", "body": body, "chunks": _sse(*thought, *text), "content_type": "text/event-stream"},
            {"id": "text", "body": body, "chunks": _sse(*text), "content_type": "text/event-stream"},
        ],
    )
    result = CliRunner().invoke(cli, ["enrich", str(capture), "--engine", llama_server_engine.url])
    assert result.exit_code == 0, result.output
    counted = {r["exchange_id"]: r["output_tokens"] for r in read_records(capture) if r["type"] == "enrichment"}
    said = httpx.post(f"{llama_server_engine.url}/tokenize", json={"content": ANSWER, "add_special": False}, timeout=30).json()
    tokens = len(said["tokens"])
    assert counted["text"]["count"] == tokens  # must match: the text is the whole answer
    assert (counted["think"]["count"], counted["think"]["source"]) == (None, NOT_TEXT_ONLY)  # must differ: not its text's
    with Analysis([capture], cache_dir=tmp_path / "cache") as a:
        rows = {r["exchange_id"]: r for r in a.query("SELECT * FROM metrics").records()}
    assert (rows["text"]["output_tokens"], rows["text"]["output_tokens_source"]) == (tokens, "tokenize")
    assert (rows["think"]["output_tokens"], rows["think"]["output_tokens_source"]) == (len(thought) + len(text), "chunks")
