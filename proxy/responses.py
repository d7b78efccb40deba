"""Derived views of a recorded response: SSE or NDJSON events and what they say.

Always computed from the recorded bytes, never stored instead of them. Used off the hot path (by
the enricher) and by analysis.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any


def header(pairs: list[list[str]] | None, name: str) -> str | None:
    for n, v in pairs or ():
        if n.lower() == name:
            return v
    return None


def decoded_body(record: dict[str, Any]) -> bytes:
    """The response body with its content-encoding undone (the capture keeps it as sent)."""
    body = b"".join(record.get("chunks") or ())
    encoding = (header(record.get("response_headers"), "content-encoding") or "").lower().strip()
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompress(body, 16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    return body


_END_MARKERS = (b"data: [DONE]", b"data:[DONE]", b"event: message_stop", b'"done":true', b'"done": true')


def ended_by_marker(chunks: list[bytes]) -> bool:
    """Whether a stream's last bytes carry its protocol's end marker (OpenAI's ``[DONE]``,
    Anthropic's ``message_stop``, Ollama's ``"done": true``): the client has had all of it."""
    tail = b"".join(chunks[-2:])[-512:].rstrip()
    return any(marker in tail[-(len(marker) + 200):] for marker in _END_MARKERS)


def sse_events(body: bytes) -> list[str]:
    """The data payloads of a text/event-stream body, in order (comments and other fields skipped)."""
    out = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].removeprefix(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            out.append(b"\n".join(data).decode("utf-8", errors="replace"))
    return out


@dataclass
class Parsed:
    """What a response said, as far as it can be read."""

    streamed: bool = False
    events: list[dict[str, Any]] = field(default_factory=list)  # parsed JSON objects, in order
    text: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    model: str | None = None
    system_fingerprint: str | None = None
    usage: dict[str, Any] | None = None
    timings: dict[str, Any] | None = None  # llama.cpp's server-side timings
    durations: dict[str, Any] | None = None  # Ollama's server-side durations (ns)
    token_ids: list[int] | None = None  # output token ids, when the engine reported them
    error: str | None = None  # why the body could not be read, if it couldn't


_OLLAMA_DURATIONS = ("total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration")


def parse_response(record: dict[str, Any]) -> Parsed:
    parsed = Parsed()
    try:
        body = decoded_body(record)
    except zlib.error as exc:
        parsed.error = f"cannot decode content-encoding: {exc}"
        return parsed
    ctype = (header(record.get("response_headers"), "content-type") or "").lower()
    objects: list[Any] = []
    if "event-stream" in ctype or body.startswith(b"data:"):
        parsed.streamed = True
        for data in sse_events(body):
            if data.strip() == "[DONE]":
                continue
            try:
                objects.append(json.loads(data))
            except ValueError:
                parsed.error = "an SSE event is not JSON"
    elif "ndjson" in ctype:
        parsed.streamed = True
        for line in body.splitlines():
            if line.strip():
                try:
                    objects.append(json.loads(line))
                except ValueError:
                    parsed.error = "an NDJSON line is not JSON"
    elif body:
        try:
            objects.append(json.loads(body))
        except ValueError:
            parsed.error = "the body is not JSON"
    parsed.events = [o for o in objects if isinstance(o, dict)]
    ids: list[int] = []
    tool_calls: dict[int, dict[str, Any]] = {}
    for event in parsed.events:
        parsed.model = event.get("model") or parsed.model
        parsed.system_fingerprint = event.get("system_fingerprint") or parsed.system_fingerprint
        if event.get("usage"):
            parsed.usage = event["usage"]
        if isinstance(event.get("timings"), dict):
            parsed.timings = event["timings"]
        if any(k in event for k in _OLLAMA_DURATIONS):
            parsed.durations = {k: event[k] for k in _OLLAMA_DURATIONS if k in event}
        if isinstance(event.get("message"), dict) and "choices" not in event:  # Ollama /api/chat
            parsed.text += event["message"].get("content") or ""
            parsed.reasoning += event["message"].get("thinking") or ""
        if isinstance(event.get("response"), str):  # Ollama /api/generate
            parsed.text += event["response"]
        if isinstance(event.get("content"), str) and "choices" not in event:  # llama.cpp /completion
            parsed.text += event["content"]
        for choice in event.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            part = choice.get("delta") or choice.get("message") or {}
            if isinstance(part, dict):
                parsed.text += part.get("content") or ""
                parsed.reasoning += part.get("reasoning_content") or part.get("reasoning") or ""
                for i, call in enumerate(part.get("tool_calls") or ()):
                    slot = tool_calls.setdefault(call.get("index", i), {"id": None, "name": "", "arguments": ""})
                    slot["id"] = call.get("id") or slot["id"]
                    fn = call.get("function") or {}
                    slot["name"] += fn.get("name") or ""
                    slot["arguments"] += fn.get("arguments") or ""
            if isinstance(choice.get("text"), str):
                parsed.text += choice["text"]
            parsed.finish_reason = choice.get("finish_reason") or parsed.finish_reason
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict):
                for item in logprobs.get("content") or ():
                    if isinstance(item, dict) and isinstance(item.get("id"), int):
                        ids.append(item["id"])
            if isinstance(choice.get("token_ids"), list):  # vLLM's return_token_ids
                ids.extend(t for t in choice["token_ids"] if isinstance(t, int))
    parsed.tool_calls = [tool_calls[k] for k in sorted(tool_calls)]
    parsed.token_ids = ids or None
    return parsed
