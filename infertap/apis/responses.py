"""The OpenAI Responses API (``/v1/responses``): typed stream events, or one ``response`` object.

A streamed response ends with ``response.completed`` (or ``.incomplete``, ``.failed``), which holds
the whole response again: where its output holds items, that output is the answer (the openai SDK's
``stream.get_final_response()`` is that response, whatever the deltas said), else the deltas are.
There is no finish reason; the status (and ``incomplete_details.reason``) stands for it: a completed
response ended to call a tool where its output holds a call its client must make (``client_acts``),
not where it holds only the built-in tools the API ran itself before it answered.

A function's or custom tool's call keeps its ``namespace`` (``ToolCallPart.toolset``) and, where a
``program`` item's code made it (programmatic tool calling), its ``caller``; a program is a call the
API runs itself. A message's ``phase`` (commentary or the final answer) is in the answer's layout.
The tools an MCP server listed (``mcp_list_tools``' ``tools``, a failed listing's ``error``) are what the model read, not what it
said: the API's change of its input (``Output.input_changes``), compared as configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from .shapes import (
    Api,
    Delta,
    SettingsPlace,
    ToolCallPart,
    Turn,
    as_dict,
    as_list,
    as_text,
    canonical_arguments,
    canonical_result,
    content_text,
    error_of,
    layout_entry,
    position,
)

_ENDS = ("response.completed", "response.incomplete", "response.failed", "response.cancelled")


#: Where Responses reads its sampling settings: at the top level, its limit as ``max_output_tokens``
#: (a ``max_tokens`` there is ignored by OpenAI and vLLM, and llama-server takes ``max_output_tokens``
#: over it). Open: vLLM's Responses reads ``top_k``, ``min_p``, ``seed``, ``stop`` too.
SETTINGS = SettingsPlace(
    None,
    {"max_tokens": "max_output_tokens", "temperature": "temperature", "top_p": "top_p", "top_logprobs": "top_logprobs"},
    open=True,
)


class Responses(Api):
    name = "responses"
    settings_place = SETTINGS
    finish_map: ClassVar[dict[str, str]] = {
        "completed": "stop",
        "incomplete:max_output_tokens": "length",
        "incomplete:content_filter": "content_filter",
        "failed": "error",
        "cancelled": "other",
    }

    def finish(self, raw: str | None, tool_calls: bool) -> str | None:
        # ``tool_calls``: calls the client must make (``Output.client_calls``), not the API's own tools.
        if raw == "completed" and tool_calls:
            return "tool_calls"
        return super().finish(raw, tool_calls)

    def event(self, obj: dict[str, Any]) -> Delta:
        kind = obj.get("type")
        if kind is None and obj.get("object") in ("response", "response.compaction"):
            return _whole(obj)  # a response, or a compaction's (``/responses/compact``): its output read alike
        if not isinstance(kind, str):
            return Delta()
        if kind == "error":
            return Delta(known=True, error=str(obj.get("message") or error_of(obj) or "error event"))
        if not kind.startswith("response."):
            return Delta()
        d = Delta(known=True)
        delta = obj.get("delta")
        index = position(obj.get("output_index"), 0)
        if "output_index" in obj:
            d.block = index
        if kind == "response.output_text.delta":
            d.content = as_text(delta)
        elif kind == "response.refusal.delta":
            d.refusal = as_text(delta)
        elif kind == "response.output_text.annotation.added" and "annotation" in obj:
            d.citations = [obj["annotation"]]  # a source the text cites (url, file)
        elif kind == "response.audio.transcript.delta":
            d.audio = as_text(delta)  # an audio answer's words: no output item restates them
        elif kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            d.reasoning = as_text(delta)
            d.summarized = kind == "response.reasoning_summary_text.delta"
        elif kind in _CALL_DELTAS and as_text(delta):
            d.tool_calls = [ToolCallPart(index, arguments=as_text(delta), server=kind == _MCP_DELTA)]
        elif kind in _INPUT_DELTAS and (said := as_text(obj.get(_INPUT_DELTAS[kind][1]))):
            d.tool_calls = [ToolCallPart(index, streamed=(_input_path(kind, obj), said))]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = obj.get("item") or {}
            if kind.endswith(".added") and isinstance(item, dict):
                d.opened = _kind(item)
            if kind.endswith(".done") and isinstance(item, dict) and not _read(item.get("type")):
                d.others = [item]
            if kind.endswith(".done") and isinstance(item, dict) and item.get("type") == "reasoning":
                d.encrypted = _encrypted(item)
            if kind.endswith(".done") and isinstance(item, dict) and (listing := _listing(item)) is not None:
                d.listed = [(_item_key(item, index), index, listing)]  # merged with the final event's
            if isinstance(item, dict) and is_call(item.get("type")):
                done = kind.endswith(".done")
                if done and (result := _result(item)):
                    d.results = [result]
                d.tool_calls = [_call(index, item, _arguments(item) if done else "", whole=done)]
                if not done and _built_in(item):
                    d.tool_calls[0].item = item  # what streams into it is its input (``_INPUT_DELTAS``)
        elif kind in _ENDS or kind in ("response.created", "response.in_progress", "response.queued"):
            response = as_dict(obj.get("response"))
            _head(d, response)
            if kind in _ENDS:
                d.restated = _whole(response)  # read where no delta said anything (a stream of whole items)
                d.input_changes = d.restated.input_changes
                d.finish_reason = _status(response)
                d.usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
                d.error = _failed(response)
        return d

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        system = body.get("instructions") if isinstance(body.get("instructions"), str) else None
        turns: list[Turn] = [Turn("system", system)] if system else []
        given = body.get("input")
        if isinstance(given, str):
            return (*turns, Turn("user", given)), 1, system
        if not isinstance(given, list):
            return tuple(turns), None, system
        for item in given:
            if not isinstance(item, dict):
                continue
            kind = as_text(item.get("type")) or "message"
            if kind == "message" and item.get("role") == "assistant":
                _assistant(turns, content_text(item.get("content")), ())
            elif kind == "message":
                turns.append(Turn(str(item.get("role") or "?"), content_text(item.get("content"))))
            elif is_call(kind):
                _assistant(turns, "", ((_name(item), canonical_arguments(_arguments(item))),))
            elif kind.endswith("_call_output"):  # function, custom tool, local shell, shell, apply patch, computer
                turns.append(Turn("tool", content_text(item.get("output"))))
            elif kind != "reasoning":  # the model's own reasoning is not what the conversation says
                turns.append(Turn(kind, content_text(item)))
        return tuple(turns), len(given), system

    def tools(self, body: dict[str, Any]) -> tuple[str, ...]:
        return tuple(str(t.get("name") or t.get("type") or "?") for t in as_list(body.get("tools")) if isinstance(t, dict))

    def open_call(self, item: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        # As a whole body's item reads: its status (``in_progress``) in what it gave back marks it cut.
        return _arguments(item), _result(item)


def _assistant(turns: list[Turn], text: str, calls: tuple[tuple[str, str], ...]) -> None:
    """Add to the conversation's assistant turn: a reply's message and calls are items of their own,
    and they make one turn, as the reply itself reads."""
    if turns and turns[-1].role == "assistant":
        last = turns.pop()
        text, calls = last.text + text, (*last.calls, *calls)
    turns.append(Turn("assistant", text, calls))


def _head(d: Delta, response: dict[str, Any]) -> None:
    d.model = response.get("model") if isinstance(response.get("model"), str) else None
    d.response_id = response.get("id") if isinstance(response.get("id"), str) else None


def _status(response: dict[str, Any]) -> str | None:
    status = response.get("status")
    if status == "incomplete":
        reason = as_dict(response.get("incomplete_details")).get("reason")
        return f"incomplete:{reason}" if reason else "incomplete"
    return status if isinstance(status, str) else None


#: Output items that call a tool: a function (JSON arguments), a custom tool (free-form ``input``),
#: an MCP tool (JSON arguments); and the built-in tools' calls (``*_call``: web and file search,
#: computer, code interpreter, image generation, local shell, shell, apply patch; MCP's tool listing
#: and approval requests), read whole as what they ask (their fields but those in ``_NOT_ASKED``).
_ARGUMENTS = {
    "function_call": "arguments",
    "custom_tool_call": "input",
    "mcp_call": "arguments",
    "mcp_approval_request": "arguments",
}
_MCP_DELTA = "response.mcp_call_arguments.delta"  # an MCP call the API makes itself
_CALL_DELTAS = ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta", _MCP_DELTA)
#: What a built-in call's input streams as, before its ``output_item.done`` restates it: the event
#: and its text's field, added to the call's item at a path (``_input_path``). A stream cut before the
#: item's end holds the code or commands only there.
_INPUT_DELTAS = {
    "response.code_interpreter_call_code.delta": (("code",), "delta"),
    "response.shell_call_command.added": (("action", "commands"), "command"),
    "response.shell_call_command.delta": (("action", "commands"), "delta"),
}


def _input_path(kind: str, obj: dict[str, Any]) -> tuple[str | int, ...]:
    """Where an ``_INPUT_DELTAS`` event's text goes in its item: a shell's command at its ``command_index``."""
    path = _INPUT_DELTAS[kind][0]
    return (*path, position(obj.get("command_index"), 0)) if path[-1] == "commands" else path


def _built_in(item: dict[str, Any]) -> bool:
    """Whether a call item is a built-in tool's, read whole as what it asks (``BUILT_IN_CALLS``, any ``*_call``)."""
    return as_text(item.get("type")) not in _ARGUMENTS


# Which item it is and how far it got, and what the server's tool gave back (a code interpreter's
# outputs and its container, made anew per request, a search's results, a generated image, an MCP
# server's tool list), not
# what the model asked for: two answers that ran the same code are the same answer.
_NOT_ASKED = frozenset(
    (
        "id",
        "call_id",
        "status",
        "type",
        "container_id",
        "outputs",
        "output",
        "results",
        "result",
        "error",
        "pending_safety_checks",
        "tools",
        "caller",  # read apart (``_caller``): its id is new on every answer
        "fingerprint",  # a program's, opaque ("must be round-tripped")
        "created_by",  # "the ID of the entity that created this tool call": an id, as ``call_id`` is
    )
)


# What every output item of the SDK's Responses is to this adapter, so that a test finds a type or
# field added to the API since (tests/apis/test_responses_classified.py): an item unknown here is
# kept whole and compared whole (``Output.others``), never read as nothing, but a field of an item
# read apart (a function call's) that no one classified is compared by no one.

#: The fields of each item read apart, and of a message's parts: those compared (the words, a
#: call's tool, namespace, arguments and caller, what an MCP tool gave back, a message's ``phase``),
#: and those left out on purpose: ids (new on every answer), a status the response's own stands for
#: (the model's own calls, a message; a built-in call's is compared), the role (the assistant's), a
#: call's ``async`` (its tool's, as the request defined it), an MCP call's ``approval_request_id``,
#: an output text's ``logprobs`` (read apart, for compare's KL, as chat's: ``logprob_positions``).
FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "message": (("content", "phase"), ("id", "role", "status")),
    "output_text": (("text", "annotations"), ("logprobs",)),
    "refusal": (("refusal",), ()),
    "reasoning": (("content", "summary", "encrypted_content"), ("id", "status")),
    "function_call": (("name", "arguments", "namespace", "caller"), ("id", "call_id", "status", "async")),
    "custom_tool_call": (("name", "input", "namespace", "caller"), ("id", "call_id", "async")),
    "mcp_call": (("name", "arguments", "server_label", "output", "error", "status"), ("id", "approval_request_id")),
    "mcp_approval_request": (("name", "arguments", "server_label"), ("id",)),
}
#: The built-in tools' calls, read whole as what they ask (every field but ``_NOT_ASKED``), what they
#: gave back apart (``_RESULTS``); a ``program``'s code (programmatic tool calling) among them.
BUILT_IN_CALLS = (
    "file_search_call",
    "web_search_call",
    "computer_call",
    "image_generation_call",
    "code_interpreter_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "tool_search_call",
    "mcp_list_tools",
    "program",
)
#: Items kept whole and compared whole, each field but ids and encrypted blobs (``canonical_result``):
#: the outputs of calls made before (a function's, a shell's, a program's...), an MCP approval, a
#: tool search's tools, the compacted context.
KEPT_WHOLE = (
    "function_call_output",
    "custom_tool_call_output",
    "computer_call_output",
    "local_shell_call_output",
    "shell_call_output",
    "apply_patch_call_output",
    "program_output",
    "tool_search_output",
    "additional_tools",
    "mcp_approval_response",
    "compaction",
)


#: What every stream event of the SDK's Responses is to this adapter (tests/apis/test_responses_classified.py
#: finds one added since). Read: the deltas of what the answer says (text, refusal, reasoning, an audio
#: answer's transcript, a call's arguments or input, a built-in call's code or commands), a cited
#: source, each item as it starts and ends, the response's head and end (the end restates the whole
#: answer), an error.
STREAM_EVENTS_READ = (
    "response.output_text.delta",
    "response.refusal.delta",
    "response.output_text.annotation.added",
    "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta",
    "response.audio.transcript.delta",
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
    "response.mcp_call_arguments.delta",
    "response.code_interpreter_call_code.delta",
    "response.shell_call_command.added",
    "response.shell_call_command.delta",
    "response.output_item.added",
    "response.output_item.done",
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.completed",
    "response.incomplete",
    "response.failed",
    "error",
)
_RESTATES_DELTAS = "restates its deltas"
_RESTATED_BY_ITEM = "restated whole by the item's response.output_item.done"
_PROGRESS = "a built-in tool's progress: its item's status at output_item.done says how it ended"
#: Left out on purpose, each with the reason: nothing of the answer is in it that no read event says.
STREAM_EVENTS_LEFT_OUT: dict[str, str] = {
    "response.output_text.done": _RESTATES_DELTAS,
    "response.refusal.done": _RESTATES_DELTAS,
    "response.reasoning_text.done": _RESTATES_DELTAS,
    "response.reasoning_summary_text.done": _RESTATES_DELTAS,
    "response.audio.transcript.done": _RESTATES_DELTAS,
    "response.function_call_arguments.done": _RESTATES_DELTAS,
    "response.custom_tool_call_input.done": _RESTATES_DELTAS,
    "response.mcp_call_arguments.done": _RESTATES_DELTAS,
    "response.content_part.added": "a part's start, its text to come as deltas",
    "response.content_part.done": _RESTATES_DELTAS,
    "response.reasoning_summary_part.added": "a summary part's start, its text to come as deltas",
    "response.reasoning_summary_part.done": _RESTATES_DELTAS,
    "response.audio.delta": "the audio's bytes: its transcript stands for what it says",
    "response.audio.done": "the audio's end",
    "response.code_interpreter_call_code.done": _RESTATES_DELTAS,
    "response.shell_call_command.done": _RESTATES_DELTAS,
    "response.shell_call_output_content.delta": _RESTATED_BY_ITEM,
    "response.shell_call_output_content.done": _RESTATED_BY_ITEM,
    "response.image_generation_call.partial_image": "a preview: the item's result is the image",
    "response.code_interpreter_call.in_progress": _PROGRESS,
    "response.code_interpreter_call.interpreting": _PROGRESS,
    "response.code_interpreter_call.completed": _PROGRESS,
    "response.file_search_call.in_progress": _PROGRESS,
    "response.file_search_call.searching": _PROGRESS,
    "response.file_search_call.completed": _PROGRESS,
    "response.web_search_call.in_progress": _PROGRESS,
    "response.web_search_call.searching": _PROGRESS,
    "response.web_search_call.completed": _PROGRESS,
    "response.image_generation_call.in_progress": _PROGRESS,
    "response.image_generation_call.generating": _PROGRESS,
    "response.image_generation_call.completed": _PROGRESS,
    "response.mcp_call.in_progress": _PROGRESS,
    "response.mcp_call.completed": _PROGRESS,
    "response.mcp_call.failed": _PROGRESS,
    "response.mcp_list_tools.in_progress": _PROGRESS,
    "response.mcp_list_tools.completed": _PROGRESS,
    "response.mcp_list_tools.failed": _PROGRESS,
    "response.compaction.compacting": _PROGRESS,
}


def _read(kind: Any) -> bool:
    """Whether an output item of type ``kind`` is one this adapter reads (a message, reasoning, a call)."""
    return kind in ("message", "reasoning") or is_call(kind)


def is_call(kind: Any) -> bool:
    """Whether an output (or input) item of type ``kind`` is a call of a tool."""
    return isinstance(kind, str) and (kind in _ARGUMENTS or kind.endswith("_call") or kind in ("mcp_list_tools", "program"))


#: Output items the client must act on before the answer goes on: its functions' and custom tools'
#: calls, the local shell's, the computer's and apply patch's (the client runs them, and sends back
#: their ``*_output`` by ``call_id``), and an MCP call the API waits for the client to approve. The
#: other calls (web and file search, code interpreter, image generation, an MCP call or tool listing)
#: the API ran itself, their results in the response: an answer that holds only those is finished.
_CLIENT_ITEMS = frozenset(
    ("function_call", "custom_tool_call", "local_shell_call", "computer_call", "apply_patch_call", "mcp_approval_request")
)


def client_acts(item: dict[str, Any]) -> bool:
    """Whether the output item is a call its client must make (``_CLIENT_ITEMS``); the shell's where
    it runs in the client's environment (``local``, or none said: a container is the API's), a tool
    search where the client runs it (``execution`` client). An item type not known here is the API's."""
    kind = item.get("type")
    if kind == "shell_call":
        environment = item.get("environment")
        return not isinstance(environment, dict) or environment.get("type") in (None, "local")
    if kind == "tool_search_call":
        return item.get("execution") == "client"
    return kind in _CLIENT_ITEMS


#: Tools the API runs itself (their dated versions too: ``web_search_preview_2025_03_11``): offered
#: alone, no answer can end to call a tool of the client's.
_BUILT_IN_TOOLS = ("web_search", "file_search", "code_interpreter", "image_generation")


def offers_client_tool(tools: Any) -> bool:
    """Whether a request's ``tools`` offer one that an answer may end calling on its client (any but
    ``_BUILT_IN_TOOLS``: a function, a local shell, an MCP server whose calls may ask for approval)."""
    return any(
        not (isinstance(kind := tool.get("type") if isinstance(tool, dict) else None, str) and kind.startswith(_BUILT_IN_TOOLS))
        for tool in as_list(tools)
    )


def _name(item: dict[str, Any]) -> str:
    """A call's tool: a function's, custom or MCP tool's name (after its server's: two servers' tools
    of one name are two tools); a built-in tool's item type."""
    kind = as_text(item.get("type"))
    if kind not in _ARGUMENTS:
        return kind
    name, server = as_text(item.get("name")), as_text(item.get("server_label"))
    return f"{server}/{name}" if server else name


#: What a call item holds of what the server's tool gave back (a code interpreter's outputs, a
#: search's results, a generated image, an MCP tool's output or error).
_RESULTS = ("outputs", "output", "results", "result", "error")


#: Calls the client runs (its functions, its custom tools): their status says only whether the
#: model finished writing them, as the finish reason does.
_CLIENT_CALLS = ("function_call", "custom_tool_call")


def _result(item: dict[str, Any]) -> dict[str, Any] | None:
    """What the server's tool gave back, with the item's type; a web search's sources too; how a
    built-in call ended where it did not complete (``failed``, ``incomplete``): a search that
    failed is no search that completed, though both asked the same. None: nothing."""
    # a listing's error is what the model was given (no tools from that server): ``_listing``
    given = _RESULTS if item.get("type") != "mcp_list_tools" else ()
    got = {k: item[k] for k in given if item.get(k) is not None}
    status = item.get("status")
    if status is not None and status != "completed" and item.get("type") not in _CLIENT_CALLS:
        got["status"] = status
    action = item.get("action")
    if isinstance(action, dict) and action.get("sources") is not None:
        got["sources"] = action["sources"]
    return {"type": item.get("type"), **got} if got else None


def _call(index: int, item: dict[str, Any], arguments: str, *, whole: bool = False) -> ToolCallPart:
    """A call item as the call it makes: its tool, who made it and its tool's namespace (``ToolCallPart.toolset``)."""
    return ToolCallPart(
        index,
        item.get("call_id") or item.get("id"),
        _name(item),
        arguments,
        whole=whole,
        free=_free(item),
        server=not client_acts(item),
        caller=_caller(item),
        toolset=_namespace(item),
    )


def _caller(item: dict[str, Any]) -> dict[str, Any] | None:
    """Who made a call where not the model itself: a ``program`` item's code (programmatic tool
    calling: ``{"type": "program", "caller_id": ...}``, that program's ``call_id``), whose result
    goes back to the code. None where the model made it (``direct``, or no ``caller``)."""
    said = item.get("caller")
    if not isinstance(said, dict) or said.get("type") in (None, "direct"):
        return None
    return said


def _namespace(item: dict[str, Any]) -> str | None:
    """The namespace a function's or custom tool's tool belongs to (``namespace``: a ``namespace``
    tool groups tools under a name, ``crm``): two namespaces' tools of one name are two tools."""
    said = item.get("namespace")
    return said if isinstance(said, str) and said else None


def _kind(item: dict[str, Any]) -> str:
    """An item's type in the answer's layout; a message's with its ``phase`` (``message(commentary)``,
    ``message(final_answer)``): the same words as commentary or as the final answer are two messages."""
    kind = as_text(item.get("type")) or "message"
    phase = item.get("phase")
    return f"{kind}({phase})" if kind == "message" and isinstance(phase, str) and phase else kind


def _free(item: dict[str, Any]) -> bool:
    """Whether the call's input is free-form text (a custom tool's), not JSON."""
    return item.get("type") == "custom_tool_call"


def _encrypted(item: dict[str, Any]) -> int:
    """1 for a reasoning item that carries its reasoning encrypted (``include: reasoning.encrypted_content``)."""
    return int(bool(as_text(item.get("encrypted_content"))))


def _arguments(item: dict[str, Any]) -> str:
    """A call item's arguments as text: a function's JSON string (an object sent as one is written as
    JSON), a custom tool's ``input``; a built-in call's fields but ``_NOT_ASKED``, as JSON."""
    field = _ARGUMENTS.get(as_text(item.get("type")))
    value = item.get(field) if field else {k: v for k, v in item.items() if k not in _NOT_ASKED}
    if isinstance(value, dict) and isinstance(action := value.get("action"), dict) and "sources" in action:
        value["action"] = {k: v for k, v in action.items() if k != "sources"}  # what a web search found
    if isinstance(value, (dict, list)):
        return canonical_arguments(value)
    return as_text(value)


def _failed(response: dict[str, Any]) -> str | None:
    """Why a response failed: its error's message, else its status where that is ``failed`` or
    ``cancelled`` (a failed response sent with no error object read as an ok answer)."""
    if response.get("error"):
        return error_of(response)
    status = response.get("status")
    return f"response {status}" if status in ("failed", "cancelled") else None


def _whole(response: dict[str, Any]) -> Delta:
    """A non-streamed response: its output items read in order."""
    d = Delta(known=True, finish_reason=_status(response))
    _head(d, response)
    d.usage = response.get("usage") if isinstance(response.get("usage"), dict) else None
    d.error = _failed(response)
    calls = []
    cited: list[Any] = []
    results: list[Any] = []
    others: list[Any] = []
    d.layout = []
    raw = False  # reasoning's own text, not only its summary
    for index, item in enumerate(as_list(response.get("output"))):
        if not isinstance(item, dict):
            continue
        kind, said, sources = item.get("type"), len(d.content) + len(d.refusal) + len(d.reasoning), len(cited)
        if kind == "message" and item.get("role") != "user":
            # (a compaction's output restates the user's messages before its compaction item: no
            # words of the model's, kept whole with the items not read)
            for part in as_list(item.get("content")):
                if isinstance(part, dict):
                    d.content += as_text(part.get("text"))
                    d.refusal += as_text(part.get("refusal"))
                    cited.extend(as_list(part.get("annotations")))
        elif kind == "reasoning":
            d.encrypted += _encrypted(item)
            for part in as_list(item.get("content")) + as_list(item.get("summary")):
                if isinstance(part, dict):
                    d.reasoning += as_text(part.get("text"))
            raw = raw or any(isinstance(p, dict) and as_text(p.get("text")) for p in as_list(item.get("content")))
        elif is_call(kind):
            calls.append(_call(index, item, _arguments(item)))
            if result := _result(item):
                results.append(result)
        else:
            others.append(item)
        said = len(d.content) + len(d.refusal) + len(d.reasoning) - said
        d.layout.append(layout_entry(_kind(item), said, len(cited) - sources))
    d.tool_calls, d.citations, d.results, d.others = calls, cited, results, others
    d.summarized = bool(d.reasoning) and not raw  # a summary of the reasoning only: its tokens unseen
    d.listed = [
        (_item_key(item, index), index, listing)
        for index, item in enumerate(as_list(response.get("output")))
        if (listing := _listing(item)) is not None
    ]
    d.input_changes = listed_tools(d.listed)
    return d


def _item_key(item: dict[str, Any], index: int) -> Any:
    """Which output item a listing is, to merge one streamed with the same restated: its id, else its place."""
    return item["id"] if isinstance(item.get("id"), str) else index


def _listing(item: Any) -> dict[str, Any] | None:
    """What an ``mcp_list_tools`` item put before the model: its ``server_label``, ``tools`` and, where
    the listing failed, its ``error`` (the model saw no tools from that server). None: another item."""
    if not isinstance(item, dict) or item.get("type") != "mcp_list_tools":
        return None
    listing = {"server_label": item.get("server_label"), "tools": item.get("tools")}
    if item.get("error") is not None:
        listing["error"] = item["error"]
    return listing


def listed_tools(streamed: Sequence[Any], restated: Sequence[Any] = ()) -> str | None:
    """The tools each MCP server listed (``_listing``), each listing in the order of the output (two
    listings from one server are two), as canonical JSON less ids; None where no server listed any.
    ``streamed`` and ``restated``: ``(item key, output index, listing)`` of the items streamed and of
    the final event's output, merged by item: the final event's version of an item streamed, each
    item either lists (a final event that lists only some servers' tools leaves the others'). Items
    of one key (a server that reuses an id) are paired in order, the k-th restated with the k-th
    streamed: merged into one, the first listing was lost. The API puts them before the model as
    the tools it may call: what the model read, as the request's own ``tools`` are, not what it
    said. A server that lists other tools on a later run (its tools changed, the request's
    ``allowed_tools``, a listing that failed) is another input, reported as the API's change of
    the input (``Output.input_changes``)."""
    merged: list[tuple[int, dict[str, Any]]] = [(index, listing) for _, index, listing in streamed]
    unmatched: dict[Any, list[int]] = {}  # key: the places in ``merged`` of its items not yet restated
    for at, (key, _, _) in enumerate(streamed):
        unmatched.setdefault(key, []).append(at)
    for key, index, listing in restated:
        if places := unmatched.get(key):
            at = places.pop(0)
            merged[at] = (merged[at][0], listing)
        else:
            merged.append((index, listing))
    listings = [listing for _, listing in sorted(merged, key=lambda x: x[0])]  # stable: equal places keep their order
    return canonical_result({"mcp_tools": listings}) if listings else None
