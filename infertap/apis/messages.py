"""Anthropic Messages (``/v1/messages``): content blocks, streamed as typed events or whole.

Usage differs from OpenAI's: ``input_tokens`` leaves out the prompt tokens read from or written to
the cache (``cache_read_input_tokens``, ``cache_creation_input_tokens``), so the prompt is their
sum. A stream's usage comes in two parts: ``message_start`` (input) and ``message_delta`` (output,
cumulative). Where ``usage.iterations`` breaks a request down by sampling iteration (a server tool
loop's turns, an advisor's, a fallback model's, a compaction of the context), the counts are their
sums: the top level leaves out what a compaction read and wrote (the summary in the answer's
``compaction`` block), though the request spent those tokens, and its time.

The finish reason is the ``stop_reason`` Anthropic says: ``tool_use`` where the answer ends in calls
its client must make, not where it holds only the calls Anthropic's servers ran themselves (a web
search, then the text that answers: ``end_turn``). Those calls are read as calls, marked ``server``.
A call the model's code made in Anthropic's code execution (programmatic tool calling) keeps its
``caller``: the client still runs it, but its result goes back to that code. A call of a toolset's
tool (the ``browser`` and ``computer`` toolsets' ``tool_use`` blocks) keeps its ``toolset_name``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .shapes import (
    Api,
    Delta,
    SettingsPlace,
    ToolCallPart,
    Turn,
    as_dict,
    as_int,
    as_list,
    as_text,
    canonical_arguments,
    canonical_result,
    content_text,
    error_of,
    layout_entry,
    position,
)

#: Blocks that call a tool: the client's (``tool_use``), a server tool (web search, code execution,
#: web fetch) and an MCP server's; each streams its input as ``input_json_delta``.
_CALLS = ("tool_use", "server_tool_use", "mcp_tool_use")
#: Of those, the calls Anthropic makes itself, their results in the answer (``*_tool_result``): a
#: server tool's and the MCP connector's. Marked ``server`` (``ToolCallPart.server``), as the
#: Responses API's built-in calls are: only a ``tool_use`` is a call its client must make.
_SERVER_CALLS = ("server_tool_use", "mcp_tool_use")
#: Blocks of the model's words and what its deltas carry: what else comes is kept whole (``Delta.unread``).
_WORDS = ("text", "thinking", "redacted_thinking")
_DELTAS = ("text_delta", "thinking_delta", "signature_delta", "input_json_delta", "citations_delta")

# What every block, delta and event of the SDK's (beta) Messages is to this adapter, so that a test
# finds a type or field added to the API since (tests/apis/test_messages_classified.py): a block
# unknown here is kept whole and compared whole (``Output.others``), never read as nothing, but a
# field of a block read apart (a call's) that no one classified is compared by no one.

#: What a server's tool gave back (read as ``*_tool_result``: one added since is read alike), whole.
RESULTS = (
    "web_search_tool_result",
    "web_fetch_tool_result",
    "advisor_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "tool_search_tool_result",
    "mcp_tool_result",
)
#: Blocks kept whole and compared whole, each field but ids and encrypted blobs (``canonical_result``):
#: a file a container made (``container_upload``), the context's summary (``compaction``, its
#: ``compaction_delta`` merged in), the model falling back to another (``fallback``: from, to, why),
#: an MCP server's tool listing (``mcp_tool_listing``).
KEPT_WHOLE = ("container_upload", "compaction", "fallback", "mcp_tool_listing")
#: Deltas of a block kept whole, merged into it as the SDK accumulates them (``merge_unread``).
KEPT_DELTAS = ("compaction_delta",)
#: The fields of each block and delta read apart: those compared (the words, a call's tool, input,
#: caller and toolset, a source cited), and those left out on purpose: ids (new on every answer),
#: signatures and encrypted thinking (opaque, new on every answer: a redacted block is counted),
#: a thinking delta's ``estimated_tokens`` (a running estimate, as usage is not compared).
FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "text": (("text", "citations"), ()),
    "thinking": (("thinking",), ("signature",)),
    "redacted_thinking": ((), ("data",)),
    "tool_use": (("name", "input", "caller", "toolset_name"), ("id",)),
    "server_tool_use": (("name", "input", "caller"), ("id",)),
    "mcp_tool_use": (("name", "input", "server_name"), ("id",)),
    "text_delta": (("text",), ()),
    "thinking_delta": (("thinking",), ("estimated_tokens",)),
    "signature_delta": ((), ("signature",)),
    "input_json_delta": (("partial_json",), ()),
    "citations_delta": (("citation",), ()),
}
#: The fields of a message (whole, or ``message_start``'s and ``message_delta``'s), compared or
#: counted (what the API did to the request's input before the model read it, ``context_management``'s
#: edits and ``input_transformations``, as the effective input, ``input_changes``), and those not:
#: what the request's container was (its id and expiry, new per request), prompt-cache ``diagnostics``.
MESSAGE_FIELDS = (
    (
        "id",
        "model",
        "role",
        "content",
        "stop_reason",
        "stop_sequence",
        "stop_details",
        "usage",
        "context_management",
        "input_transformations",
    ),  # fmt: skip
    ("container", "diagnostics"),
)
#: Stream events read (``ping`` and ``error`` besides).
EVENTS = ("message_start", "message_delta", "message_stop", "content_block_start", "content_block_delta", "content_block_stop")


def _read(kind: Any) -> bool:
    """Whether a block of type ``kind`` is one this adapter reads (words, a call, a server tool's result)."""
    return kind in _WORDS or kind in _CALLS or isinstance(kind, str) and kind.endswith("_tool_result")


def _tool(block: dict[str, Any]) -> str:
    """A call's tool: its name, after its MCP server's (two servers' tools of one name are two tools)."""
    name, server = as_text(block.get("name")), as_text(block.get("server_name"))
    return f"{server}/{name}" if server else name


def _caller(block: dict[str, Any]) -> dict[str, Any] | None:
    """Who made a call where not the model itself: code it wrote, run in Anthropic's code execution
    (programmatic tool calling: ``{"type": "code_execution_20250825", "tool_id": ...}``, the
    ``tool_id`` that code execution's own call). A call made from code is another call than the
    model's of the same tool and input: its result goes back to the code, not to the model. None
    where the model made it (``{"type": "direct"}``, or no ``caller``, as before the field)."""
    said = block.get("caller")
    if not isinstance(said, dict) or said.get("type") in (None, "direct"):
        return None
    return said


def _toolset(block: dict[str, Any]) -> str | None:
    """The toolset a call's tool belongs to (``toolset_name``: Anthropic's ``browser`` and ``computer``
    toolsets both have a ``left_click``): a click in the browser is not a click on the screen. None
    where the block names none."""
    said = block.get("toolset_name")
    return said if isinstance(said, str) and said else None


def _call(index: int, block: dict[str, Any], given: str, *, server: bool) -> ToolCallPart:
    """A call block as the call it makes: its tool, input, who made it and its tool's toolset."""
    return ToolCallPart(
        index, block.get("id"), _tool(block), given, server=server, caller=_caller(block), toolset=_toolset(block)
    )


#: Where Messages reads its sampling settings: at the top level, these alone (Anthropic's API; vLLM's
#: ``AnthropicMessagesRequest`` and llama-server's ``convert_anthropic_to_oai`` read no others).
SETTINGS = SettingsPlace(
    None,
    {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "stop": "stop_sequences"},
)


class Messages(Api):
    name = "messages"
    settings_place = SETTINGS
    finish_map: ClassVar[dict[str, str]] = {
        "end_turn": "stop",
        "stop_sequence": "stop",
        "max_tokens": "length",
        "model_context_window_exceeded": "length",
        "tool_use": "tool_calls",
        "refusal": "content_filter",
        # Anthropic paused its own server tools' loop (web search, code execution): the turn is not
        # over, its client sends the answer back to go on. No stop, nor a call for the client to make.
        "pause_turn": "other",
        # Context management (beta) compacted the context and paused there (``pause_after_compaction``):
        # the answer is the summary (a ``compaction`` block, kept whole), not the turn's; its client
        # sends it back to go on. Not finished, as pause_turn.
        "compaction": "other",
    }

    def event(self, obj: dict[str, Any]) -> Delta:
        kind = obj.get("type")
        if kind == "message":  # a whole, non-streamed response
            d = _message_head(obj)
            d.finish_reason = obj.get("stop_reason")
            d.stop_sequence, d.stop_details = _stop(obj), _stop_details(obj)
            d.input_changes = input_changes(obj)
            calls = []
            cited: list[Any] = []
            others: list[Any] = []
            d.layout = []
            for index, block in enumerate(as_list(obj.get("content"))):
                if isinstance(block, dict):
                    kind = block.get("type")
                    text, thought, sources = as_text(block.get("text")), as_text(block.get("thinking")), []
                    if kind == "text":
                        d.content += text
                        cited.extend(sources := as_list(block.get("citations")))
                    elif kind == "thinking":
                        d.reasoning += thought
                    d.encrypted += int(kind == "redacted_thinking")
                    if kind in _CALLS:
                        given = _json(block.get("input"))
                        server = kind in _SERVER_CALLS
                        calls.append(_call(index, block, given, server=server))
                    if _is_result(block):
                        d.results = [*d.results, block]
                    if not _read(kind):
                        others.append(block)
                    d.layout.append(layout_entry(kind, len(text) + len(thought) if kind in _WORDS else 0, len(sources)))
            d.tool_calls, d.citations, d.others = calls, cited, others
            return d
        if kind == "message_start":
            message = as_dict(obj.get("message"))
            d = _message_head(message)
            d.input_changes = input_changes(message)
            return d
        if kind == "content_block_start":
            block = as_dict(obj.get("content_block"))
            opened = block.get("type")
            if not _read(opened):  # kept whole, with what its deltas add
                return Delta(known=True, block=position(obj.get("index"), 0), opened=str(opened), unread=block)
            d = Delta(known=True, content=as_text(block.get("text")), reasoning=as_text(block.get("thinking")))
            d.block, d.opened = position(obj.get("index"), 0), opened
            d.encrypted = int(opened == "redacted_thinking")  # whole at its start: no deltas follow
            d.citations = as_list(block.get("citations"))
            if _is_result(block):
                d.results = [block]  # a server tool's result comes whole, at its block's start
            if block.get("type") in _CALLS:
                # Anthropic starts a call with "input": {} and streams it as input_json_delta; a block
                # that starts whole (a proxy's, a recorded replay's) carries its input here.
                given = _json(block.get("input")) if block.get("input") else ""
                at, server = position(obj.get("index"), 0), opened in _SERVER_CALLS
                d.tool_calls = [_call(at, block, given, server=server)]
            return d
        if kind == "content_block_delta":
            inner = as_dict(obj.get("delta"))
            if inner.get("type") not in _DELTAS:
                return Delta(known=True, block=position(obj.get("index"), 0), unread=inner)
            d = Delta(known=True, content=as_text(inner.get("text")), reasoning=as_text(inner.get("thinking")))
            d.block = position(obj.get("index"), 0)
            if inner.get("type") == "input_json_delta" and as_text(inner.get("partial_json")):
                d.tool_calls = [ToolCallPart(position(obj.get("index"), 0), arguments=inner["partial_json"])]
            elif inner.get("type") == "citations_delta" and "citation" in inner:
                d.citations = [inner["citation"]]  # a source the text block cites
            return d
        if kind == "message_delta":
            inner = as_dict(obj.get("delta"))
            usage = obj.get("usage")
            return Delta(
                known=True,
                finish_reason=inner.get("stop_reason"),
                usage=usage if isinstance(usage, dict) else None,
                stop_sequence=_stop(inner),
                stop_details=_stop_details(inner),
                input_changes=input_changes(obj),
            )
        if kind in ("content_block_stop", "message_stop", "ping"):
            return Delta(known=True)
        if kind == "error":
            return Delta(known=True, error=error_of(obj) or "error event")
        if isinstance(kind, str) and kind.endswith("_error") and isinstance(obj.get("message"), str):
            # llama.cpp's Anthropic route: its own bare error object as the ``event: error``'s data
            # (``{"code", "message", "type": "server_error"}``), not Anthropic's ``{"type": "error", ...}``
            return Delta(known=True, error=obj["message"] or kind)
        return Delta()

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        top = _counts(usage)
        each = [_counts(i) if isinstance(i, dict) else (None, None, None) for i in as_list(usage.get("iterations"))]
        if not each or any(None in c for c in each):
            return top
        # Every sampling iteration of the request, where they account for at least the top level's
        # counts (an iteration list cut short, or counts it leaves out, would make them fewer).
        whole = (sum(c[0] or 0 for c in each), sum(c[1] or 0 for c in each), sum(c[2] or 0 for c in each))
        if all(t is None or w >= t for t, w in zip(top, whole, strict=True)):
            return whole
        return top

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        system = content_text(body.get("system")) or None
        turns = [Turn("system", system)] if system else []
        messages = body.get("messages")
        if not isinstance(messages, list):
            return tuple(turns), None, system
        for m in messages:
            if not isinstance(m, dict):
                continue
            blocks = m.get("content")
            calls: tuple[tuple[str, str], ...] = ()
            if isinstance(blocks, list):
                kinds = [b.get("type") if isinstance(b, dict) else None for b in blocks]
                calls = tuple(
                    (_tool(b), canonical_arguments(b.get("input")))
                    for b, kind in zip(blocks, kinds, strict=True)
                    if kind in _CALLS
                )
                # A server tool's result in the assistant's turn is the server's, not the model's
                # words: the reply that carried it reads none either.
                server = m.get("role") == "assistant"
                blocks = [
                    _block_text(b)
                    for b, kind in zip(blocks, kinds, strict=True)
                    if kind not in _CALLS and not (server and isinstance(kind, str) and kind.endswith("_tool_result"))
                ]
            turns.append(Turn(str(m.get("role") or "?"), content_text(blocks), calls))
        return tuple(turns), len(messages), system

    def tools(self, body: dict[str, Any]) -> tuple[str, ...]:
        return tuple(str(t.get("name") or t.get("type") or "?") for t in as_list(body.get("tools")) if isinstance(t, dict))


def _counts(usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(prompt, read from the cache, output) of one usage object (the top level's or an iteration's)."""
    fresh = as_int(usage.get("input_tokens"))
    read, written = as_int(usage.get("cache_read_input_tokens")), as_int(usage.get("cache_creation_input_tokens"))
    prompt = None if fresh is None else fresh + (read or 0) + (written or 0)
    return prompt, read, as_int(usage.get("output_tokens"))


def _is_result(block: dict[str, Any]) -> bool:
    """Whether a block of the answer is what a server's tool gave back (web search, code execution,
    web fetch, an MCP server's tool): not the model's words, but what the client received."""
    kind = block.get("type")
    return isinstance(kind, str) and kind.endswith("_tool_result")


def _message_head(message: dict[str, Any]) -> Delta:
    usage = message.get("usage")
    return Delta(
        known=True,
        model=message.get("model") if isinstance(message.get("model"), str) else None,
        response_id=message.get("id") if isinstance(message.get("id"), str) else None,
        usage={k: v for k, v in usage.items() if v is not None} if isinstance(usage, dict) else None,
    )


def _block_text(block: Any) -> Any:
    """A tool result's content as text (it may be blocks itself); other blocks as they are."""
    if isinstance(block, dict) and block.get("type") == "tool_result":
        return {"type": "text", "text": content_text(block.get("content"))}
    return block


def _stop(obj: dict[str, Any]) -> str | None:
    """Which of the request's stop sequences ended the answer (``stop_sequence``), if one did."""
    said = obj.get("stop_sequence")
    return said if isinstance(said, str) and said else None


#: Fields of ``stop_details`` that are no part of why it stopped: a code to refund a retry on the
#: fallback model (new each refusal), whether it may be redeemed by prefill, the retry target while
#: the fallback was overloaded, and the category's explanation (its text "not guaranteed to be stable").
_NOT_WHY = frozenset(("fallback_credit_token", "fallback_has_prefill_claim", "recommended_model", "explanation"))


def _stop_details(obj: dict[str, Any]) -> str | None:
    """Why the answer stopped beyond its stop reason (``stop_details``: a refusal's ``category``), as
    canonical JSON less ``_NOT_WHY``; None where it is null or missing."""
    said = obj.get("stop_details")
    if said is None:
        return None
    return canonical_result({k: v for k, v in said.items() if k not in _NOT_WHY} if isinstance(said, dict) else said)


def input_changes(obj: dict[str, Any]) -> str | None:
    """What the API did to the request's input before the model read it, as canonical JSON: the
    context edits applied (``context_management.applied_edits``: tool uses or thinking turns cleared)
    and ``input_transformations`` (thinking blocks dropped, or let through though they failed a
    check); None where it said it changed nothing (null, empty lists) or said nothing."""
    edits = as_list(as_dict(obj.get("context_management")).get("applied_edits"))
    transformed = as_list(obj.get("input_transformations"))
    if not edits and not transformed:
        return None
    return canonical_result({"applied_edits": edits, "input_transformations": transformed})


def _json(value: Any) -> str:
    """A call's input as JSON text (a number beyond a double as its exact value)."""
    return "" if value is None else canonical_arguments(value)
