"""An answer's output tokens as the answer itself counts them: one rule for ``infertap stats``
(decoded into ``exchanges.answer_tokens``, which the metrics view reads, an enrichment's count
between the two) and ``infertap replay``'s summary, so that the two say the same of one run.

The engine's usage where it reported one; else, for a streamed answer to a generation request, its
token-bearing events (text, reasoning text, a refusal or transcript, a tool-call delta: what the
``token_chunks`` table counts), source ``chunks``: a chat stream sent without
``stream_options.include_usage`` reports none, and its tokens were unknown to replay while stats
counted them. A whole (JSON) answer with no usage has no count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .chat_stream import read_chat_stream
from .read import read_response
from .shapes import Delta, Output


def event_text(delta: Delta) -> str:
    """An event's generated text: a refusal and an audio answer's transcript are generated text too."""
    return delta.content + delta.refusal + delta.audio if delta.refusal or delta.audio else delta.content


def carries_token(text: str, reasoning: str, tool_deltas: int | None) -> bool:
    """Whether an event carries output: its text or reasoning text, or tool-call deltas."""
    return bool(text or reasoning or (tool_deltas or 0) > 0)


def tool_deltas(delta: Delta) -> int:
    return delta.tool_deltas if delta.tool_calls else 0


def text_is_output(out: Output) -> bool:
    """Whether an answer's text is all it generated: no reasoning, tool call, refusal, transcript,
    encrypted reasoning or other choice (``n`` > 1). Only then is a tokenizer's count of its text a
    count of its output; of any other it leaves tokens out (the reasoning ``ttft`` starts at)."""
    return not (out.reasoning or out.tool_calls or out.refusal or out.audio or out.encrypted_reasoning or out.choices)


def answer_tokens(usage: int | None, *, streamed_generation: bool, token_events: int | None) -> tuple[int | None, str | None]:
    """(tokens, source): ``usage`` where the engine reported one (``"usage"``), else a streamed
    generation answer's token events (``"chunks"``, 0 where none carried a token), else unknown."""
    if usage is not None:
        return usage, "usage"
    if streamed_generation:
        return token_events or 0, "chunks"
    return None, None


def read_counted(record: Mapping[str, Any]) -> tuple[Output, int]:
    """An answer read whole, as the decode reads it (a plain chat stream in one pass, anything else
    through its adapter), and how many of its events carry a token."""
    stream = read_chat_stream(record)
    if stream is not None:
        rows = zip(stream.content, stream.reasoning, stream.tool_calls, strict=True)
        return stream.output, sum(carries_token(*row) for row in rows)
    out = read_response(record)
    return out, sum(carries_token(event_text(e.delta), e.delta.reasoning, tool_deltas(e.delta)) for e in out.events)
