"""Ollama answers whose done lines carry its documented durations (docs.ollama.com/api/usage: a cold
``/api/generate`` answer sent whole; the older API docs' warm one), for captures written by the
project's writer; each answer's chunk times follow from its durations (nothing reaches the client
before the load and the prompt's evaluation end)."""

from __future__ import annotations

import json
from typing import Any

#: docs.ollama.com/api/usage's example: 101 ms of its 175 ms went to loading the model.
COLD = {
    "total_duration": 174560334,
    "load_duration": 101397084,
    "prompt_eval_count": 11,
    "prompt_eval_duration": 13074791,
    "eval_count": 18,
    "eval_duration": 52479709,
}
#: The older API docs' example: the model already loaded (4 ms to find it), 4.6 s of work.
WARM = {
    "total_duration": 4648158584,
    "load_duration": 4071084,
    "prompt_eval_count": 36,
    "prompt_eval_duration": 439038000,
    "eval_count": 180,
    "eval_duration": 4196918000,
}
_NET_NS = 1_000_000  # the wire between Ollama and the recorder


def without_load(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if k not in ("load_duration", "total_duration")}


def answer(i: int, metrics: dict[str, Any], *, stream: bool) -> dict[str, Any]:
    """An /api/chat answer streamed as NDJSON, or an /api/generate answer sent whole, whose done line
    carries ``metrics``. Its first text leaves Ollama once the model is loaded and the prompt read."""
    start = _ns(metrics, "load_duration") + _ns(metrics, "prompt_eval_duration") + _NET_NS
    end = start + _ns(metrics, "eval_duration")
    done = {"model": "m", "created_at": "2025-10-17T23:14:07.414671Z", "done": True, "done_reason": "stop", **metrics}
    if not stream:
        whole = {**done, "response": "Hello! How can I help you today?"}
        request = {"model": "m", "prompt": f"q{i}", "stream": False}
        return {
            "path": "/api/generate",
            "body": request,
            "chunks": [json.dumps(whole).encode()],
            "chunk_ns": [end],
            "duration_ns": end + 1,
        }
    lines = [
        {"model": "m", "message": {"role": "assistant", "content": "Hello!"}, "done": False},
        {"model": "m", "message": {"role": "assistant", "content": " Hi."}, "done": False},
        {**done, "message": {"role": "assistant", "content": ""}},
    ]
    return {
        "path": "/api/chat",
        "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]},
        "chunks": [json.dumps(line).encode() + b"\n" for line in lines],
        "content_type": "application/x-ndjson",
        "chunk_ns": [start, (start + end) // 2, end],
        "duration_ns": end + 1,
    }


def timed_as(answer: dict[str, Any], like: dict[str, Any]) -> dict[str, Any]:
    """``answer`` with ``like``'s chunk times: only their done lines differ."""
    return {**answer, "chunk_ns": like["chunk_ns"], "duration_ns": like["duration_ns"]}


def _ns(metrics: dict[str, Any], key: str) -> int:
    value = metrics.get(key)
    return value if isinstance(value, int) and value > 0 else 0
