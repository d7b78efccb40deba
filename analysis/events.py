"""A response's events, each with the chunk that completed it: what ttft, tpot and itl are measured on.

An SSE event's time is the receive time of the chunk in which its terminating blank line arrived
(an NDJSON line's, the chunk holding its newline); a non-streamed body is one event, complete with
its last chunk. Event payloads are split with ``proxy.responses.sse_events``, the same splitter
``parse_response`` uses, so these are exactly the events it reads.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from proxy.responses import header, sse_events


@dataclass(slots=True)
class Payload:
    chunk: int  # index of the chunk in which the payload was complete
    data: str


def _wbits(record: dict[str, Any]) -> list[int]:
    """zlib window settings to try for the response's content-encoding ([]: not encoded)."""
    encoding = (header(record.get("response_headers"), "content-encoding") or "").lower().strip()
    if encoding in ("gzip", "x-gzip"):
        return [16 + zlib.MAX_WBITS]
    if encoding == "deflate":  # zlib-wrapped as the RFC says, or raw deflate as some servers send
        return [zlib.MAX_WBITS, -zlib.MAX_WBITS]
    return []


def decoded_chunks(record: dict[str, Any]) -> list[bytes]:
    """Each chunk's share of the decoded body, decoded incrementally so that chunk times still
    apply (nothing at all when the body can't be decoded: parse_response reports why)."""
    chunks: list[bytes] = list(record.get("chunks") or ())
    for wbits in _wbits(record):
        decode = zlib.decompressobj(wbits).decompress
        try:
            return [decode(c) for c in chunks]
        except zlib.error:
            continue
    return chunks if not _wbits(record) else [b""] * len(chunks)


def mode(record: dict[str, Any], head: bytes) -> str:
    """How parse_response reads the body: "sse", "ndjson" or "json"."""
    ctype = (header(record.get("response_headers"), "content-type") or "").lower()
    if "event-stream" in ctype or head.startswith(b"data:"):
        return "sse"
    return "ndjson" if "ndjson" in ctype else "json"


def timed_payloads(record: dict[str, Any], pieces: list[bytes] | None = None) -> list[Payload]:
    """The payloads of a response in order, each with the chunk that completed it ([DONE] left out).

    ``pieces``: the record's decoded chunks, when the caller has them already.
    """
    pieces = decoded_chunks(record) if pieces is None else pieces
    if not pieces:
        return []
    head = b""
    for piece in pieces:  # enough of the body to tell an SSE stream by its first bytes
        head += piece
        if len(head) >= 5:
            break
    how = mode(record, head)
    last = len(pieces) - 1
    if how == "json":
        body = b"".join(pieces)
        return [Payload(last, body.decode("utf-8", errors="replace"))] if body else []
    out: list[Payload] = []
    buf = b""
    sep = b"\n\n" if how == "sse" else b"\n"
    for index, piece in enumerate(pieces):
        if not piece:
            continue
        buf = (buf + piece).replace(b"\r\n", b"\n")  # a "\r" left at the end pairs with the next chunk's "\n"
        while (cut := buf.find(sep)) >= 0:
            _emit(out, how, buf[:cut], index)
            buf = buf[cut + len(sep) :]
    if buf.strip():
        _emit(out, how, buf, last)  # a last event without its terminator: complete when the body was
    return out


def _emit(out: list[Payload], how: str, block: bytes, index: int) -> None:
    if how == "sse":
        out.extend(Payload(index, data) for data in sse_events(block) if data.strip() != "[DONE]")
    elif block.strip():
        out.append(Payload(index, block.decode("utf-8", errors="replace")))


_FINAL_EVENTS = ("message_stop", "response.completed")  # Anthropic, OpenAI Responses


def stream_done(pieces: list[bytes], events: list[Any]) -> bool:
    """Whether the body carried its stream's own end marker: SSE ``[DONE]``, Ollama's ``"done": true``,
    Anthropic's ``message_stop`` or the Responses API's ``response.completed``."""
    if b"".join(pieces[-3:]).rstrip().endswith(b"[DONE]"):
        return True
    last = events[-1] if events else None
    return isinstance(last, dict) and (last.get("done") is True or last.get("type") in _FINAL_EVENTS)


@dataclass(slots=True)
class Delta:
    """What one event adds to the response (choice 0 only, as parse_response reads it)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: int = 0  # tool-call deltas in this event
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    @property
    def generated(self) -> bool:
        """Whether the event carries generated output: text, reasoning text or a tool-call delta."""
        return bool(self.content or self.reasoning or self.tool_calls)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def delta(event: dict[str, Any]) -> Delta:
    """The generated output of one parsed event, for OpenAI, llama.cpp, Ollama and Anthropic shapes."""
    usage = event.get("usage")
    d = Delta(usage=usage if isinstance(usage, dict) and usage else None)
    choices = event.get("choices")
    if choices is not None:  # OpenAI-compatible: the common case, read first and alone
        _choices(d, choices)
        return d
    message = event.get("message")
    if isinstance(message, dict) and "choices" not in event:  # Ollama /api/chat
        d.content += _text(message.get("content"))
        d.reasoning += _text(message.get("thinking"))
        d.tool_calls += len(message.get("tool_calls") or ())
        d.finish_reason = event.get("done_reason") or None
    if isinstance(event.get("response"), str):  # Ollama /api/generate
        d.content += event["response"]
        d.finish_reason = event.get("done_reason") or d.finish_reason
    if isinstance(event.get("content"), str) and "choices" not in event:  # llama.cpp /completion
        d.content += event["content"]
        d.finish_reason = event.get("stop_type") if event.get("stop") else d.finish_reason
    etype = event.get("type")
    if isinstance(etype, str):  # OpenAI /v1/responses and Anthropic /v1/messages stream events
        inner = event.get("delta")
        if etype == "response.output_text.delta":
            d.content += _text(inner)
        elif etype in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            d.reasoning += _text(inner)
        elif etype == "response.function_call_arguments.delta":
            d.tool_calls += 1
        elif etype == "content_block_delta" and isinstance(inner, dict):
            d.content += _text(inner.get("text"))
            d.reasoning += _text(inner.get("thinking"))
            d.tool_calls += inner.get("type") == "input_json_delta"
        elif etype == "message_delta" and isinstance(inner, dict):
            d.finish_reason = inner.get("stop_reason") or None
    return d


def _choices(d: Delta, choices: Any) -> None:
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            continue
        part = choice.get("delta") or choice.get("message") or {}
        if isinstance(part, dict):
            d.content += _text(part.get("content"))
            d.reasoning += _text(part.get("reasoning_content") or part.get("reasoning"))
            d.tool_calls += len(part.get("tool_calls") or ())
        d.content += _text(choice.get("text"))
        d.finish_reason = choice.get("finish_reason") or d.finish_reason
