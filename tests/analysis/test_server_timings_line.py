"""`infertap stats`' server-measured line, on Ollama's done line (api/types.go ``Metrics``, each field
``omitempty``) streamed as NDJSON and sent whole, and on llama.cpp's ``timings``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.cli import cli
from tests.analysis_builders import event, sse
from tests.helpers import write_capture

_ALL = {
    "total_duration": 9_000_000,
    "load_duration": 1_000_000,
    "prompt_eval_count": 4,
    "prompt_eval_duration": 2_000_000,
    "eval_count": 3,
    "eval_duration": 6_000_000,
}
#: A done line whose durations were left out (omitempty): no figure stats prints.
_COUNT_ONLY = {"eval_count": 3}


def _done(metrics: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": "stop", **metrics}


def _ollama(metrics: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """An /api/chat exchange whose done line carries ``metrics``: NDJSON lines, or one whole body."""
    request = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": stream}
    if stream:
        lines = [{"model": "m", "message": {"role": "assistant", "content": "Hi"}, "done": False}, _done(metrics)]
        chunks = [json.dumps(line).encode() + b"\n" for line in lines]
        return {"path": "/api/chat", "body": request, "chunks": chunks, "content_type": "application/x-ndjson"}
    whole = _done(metrics) | {"message": {"role": "assistant", "content": "Hi"}}
    return {"path": "/api/chat", "body": request, "chunks": [json.dumps(whole).encode()], "content_type": "application/json"}


def _server_line(tmp_path: Path, exchanges: list[dict[str, Any]]) -> list[str]:
    write_capture(tmp_path / "cap", exchanges)
    out = CliRunner().invoke(cli, ["stats", str(tmp_path / "cap")], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    return [line.strip() for line in out.output.splitlines() if "server-measured" in line and "model load" not in line]


@pytest.mark.parametrize("stream", [True, False], ids=["ndjson", "whole"])
def test_ollama_durations_print_their_figures_labelled_once(tmp_path: Path, stream: bool) -> None:
    [line] = _server_line(tmp_path, [_ollama(_ALL, stream=stream)])
    assert line == (
        "Ollama durations (server-measured): server_prompt_ms p50 2.0 mean 2.0, server_decode_ms p50 6.0 mean 6.0, "
        "server_total_ms p50 9.0 mean 9.0"
    )


@pytest.mark.parametrize("stream", [True, False], ids=["ndjson", "whole"])
def test_ollama_durations_with_no_prompt_or_decode_time_leave_no_dangling_label(tmp_path: Path, stream: bool) -> None:
    """The line read ``server-measured (Ollama durations (server-measured)): `` with nothing after it."""
    [line] = _server_line(tmp_path, [_ollama(_COUNT_ONLY, stream=stream)])
    assert line == "Ollama durations (server-measured): no prompt, decode or total time or cached tokens among them"


def test_llama_cpp_timings_print_their_figures(tmp_path: Path) -> None:
    timings = {"prompt_n": 10, "prompt_ms": 12.5, "predicted_n": 2, "predicted_ms": 30.0, "cache_n": 4}
    chunks = [sse(event("a")), sse(event("b", finish="stop", timings=timings), "[DONE]")]
    request = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    [line] = _server_line(tmp_path, [{"body": request, "chunks": chunks, "content_type": "text/event-stream"}])
    assert line == (
        "llama.cpp timings (server-measured): server_prompt_ms p50 12.5 mean 12.5, "
        "server_decode_ms p50 30.0 mean 30.0, server_cached_tokens p50 4.0 mean 4.0"
    )


def test_no_server_timings_say_so(tmp_path: Path) -> None:
    chunks = [sse(event("a")), sse(event("b", finish="stop"), "[DONE]")]
    request = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    [line] = _server_line(tmp_path, [{"body": request, "chunks": chunks, "content_type": "text/event-stream"}])
    assert line == "server-measured: none reported by the engine"
