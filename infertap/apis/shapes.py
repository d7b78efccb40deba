"""The normalized shapes every API adapter produces, and the adapter's interface.

Each API family (chat completions, completions, Responses, Anthropic Messages, Ollama, llama.cpp's
native routes) says the same things in its own words: output text, reasoning, tool calls, why it
stopped, how many tokens. An adapter turns one event (or one whole body) into a ``Delta`` and a
request body into a ``Request``; ``read.py`` folds the deltas into an ``Output``. Everything
downstream (stats, compare, replay's conversation linking, enrichment) reads only these shapes, so
an API it doesn't know shows as unreadable instead of as an empty answer.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .fastjson import ExactFloat

#: The common vocabulary finish reasons are mapped to (the API's own word is kept beside it).
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter", "error", "other")


#: A whole tool call's index where the API gives none and each call comes whole (Ollama): the next
#: slot of the answer, not the call's place in its own event (two events' first calls are two calls).
NEXT = -1


@dataclass(slots=True)
class ToolCallPart:
    """A piece of one tool call: the first piece names it, later ones add argument text."""

    index: int
    id: str | None = None
    name: str = ""
    arguments: str = ""
    whole: bool = False  # the complete call restated (e.g. Responses' output_item.done): replaces the pieces
    free: bool = False  # a custom tool's free-form input, not JSON: compared as the text it is
    # A tool the API ran itself (Responses' web search, Anthropic's server_tool_use): no call for the client to make.
    server: bool = False
    # Who made the call where not the model itself: Anthropic's ``caller`` of a call made from its code
    # execution, Responses' of one a ``program`` item made (programmatic tool calling), as sent; None
    # where absent or ``{"type": "direct"}``.
    caller: dict[str, Any] | None = None
    # The toolset its tool belongs to (Anthropic's ``toolset_name``: ``browser``, ``computer``;
    # Responses' ``namespace``): two toolsets' tools of one name (``left_click``) are two tools. None
    # where the block says none.
    toolset: str | None = None
    # A built-in call's item as it opened (Responses' ``output_item.added``): what streams into it
    # (``streamed``) is added to it, and where its ``output_item.done`` never comes (a cut stream) the
    # call is that item as it stood, read by ``Api.open_call``.
    item: dict[str, Any] | None = None
    # Text streamed into one field of that item: (the field's path, the text): a code interpreter's
    # ``code``, a shell's ``("action", "commands", 2)``.
    streamed: tuple[tuple[str | int, ...], str] | None = None

    @property
    def carries(self) -> bool:
        """Whether the piece carries output the model generated: a name, argument text, a built-in
        call's item or what streams into it. A chat piece of neither (``{"index": 0, "function":
        {"arguments": ""}}``, a tool parser's close) is no token, as an empty ``content: ""`` is none."""
        return bool(self.name or self.arguments or self.item is not None or self.streamed is not None)


@dataclass(slots=True)
class Delta:
    """What one event (or a whole non-streamed body) says."""

    known: bool = False  # the event has a shape this API sends
    content: str = ""
    reasoning: str = ""
    summarized: bool = False  # the reasoning is a summary of it (Responses' reasoning_summary_text), not the tokens
    refusal: str = ""  # a refusal's text (chat's ``refusal``, Responses' refusal parts): not an answer
    tool_calls: Sequence[ToolCallPart] = ()
    finish_reason: str | None = None  # in the API's own words
    usage: dict[str, Any] | None = None  # the engine's own token counts, as sent
    model: str | None = None
    response_id: str | None = None
    system_fingerprint: str | None = None
    timings: dict[str, Any] | None = None  # llama.cpp's server-side timings
    durations: dict[str, Any] | None = None  # Ollama's server-side durations (ns)
    token_ids: list[int] | None = None  # output token ids, when the engine sent them
    error: str | None = None  # an error the body reports (error object or error event)
    stop_sequence: str | None = None  # the stop string that ended it, where the engine says
    stop_reason: str | None = None  # vLLM's ``stop_reason`` as JSON where the choice carries it (``Output.stop_reason``)
    matched_stop: str | None = None  # SGLang's ``matched_stop`` as JSON where the choice carries it (``Output.matched_stop``)
    stop_details: str | None = None  # Anthropic's ``stop_details`` (``Output.stop_details``)
    input_changes: str | None = None  # what the API did to the input before the model read it (``Output.input_changes``)
    served: dict[str, Any] | None = None  # how the server served the answer, beyond its words (``Output.served``)
    listed: Sequence[Any] = ()  # MCP servers' tool listings (Responses): (item key, output index, listing)
    encrypted: int = 0  # reasoning sent encrypted (Anthropic redacted_thinking, Responses encrypted_content): counted
    choices: dict[int, Delta] | None = None  # what choices other than the first say (n > 1), by index
    audio: str = ""  # an audio answer's transcript (chat with modalities: audio)
    citations: Sequence[Any] = ()  # sources the text cites (annotations, Anthropic's citations), as sent
    results: Sequence[Any] = ()  # what a server's tool gave back, a generated image: as sent
    restated: Delta | None = None  # the whole answer a final event restates (Responses' response.completed)
    # Where the event goes in an answer made of blocks (Anthropic) or output items (Responses):
    block: int | None = None  # the block's (item's) index
    opened: str | None = None  # a block (item) of this type starts there
    unread: dict[str, Any] | None = None  # a block of a type not read, at its start; a delta of a type not read
    others: Sequence[Any] = ()  # whole blocks (items) of a type not read, as sent
    layout: list[str] | None = None  # a whole answer's blocks (items), each a ``layout_entry``
    # ``content`` is the text so far, not this event's own (SGLang's ``/generate`` stream): ``fold``
    # makes it the new text.
    so_far: bool = False

    @property
    def tool_deltas(self) -> int:
        """Tool-call pieces that carry output (``ToolCallPart.carries``), a whole call restated not one."""
        return sum(not part.whole and part.carries for part in self.tool_calls)

    @property
    def generated(self) -> bool:
        """Whether the event carries generated output: text, reasoning text, a refusal, an audio
        answer's transcript or a tool-call delta."""
        return bool(self.content or self.reasoning or self.refusal or self.audio or self.tool_deltas)


@dataclass(slots=True)
class Event:
    chunk: int  # index of the chunk in which the event was complete
    data: str  # the payload as sent
    delta: Delta
    obj: Any = None  # the parsed JSON (None when the payload is not JSON)


@dataclass(slots=True, frozen=True)
class Turn:
    """One turn of a conversation, in a form that is the same whichever API carried it."""

    role: str
    text: str = ""
    calls: tuple[tuple[str, str], ...] = ()  # (tool name, arguments as canonical JSON)

    def key(self) -> bytes:
        """The turn as bytes that no other turn has: the lengths of role and text, then both, then
        the calls. Computed for every turn of every request linked: copies, no escaping."""
        calls = repr(self.calls) if self.calls else ""
        return f"{len(self.role)}:{len(self.text)}:{self.role}{self.text}{calls}".encode("utf-8", "surrogatepass")


@dataclass
class Output:
    """What a response said, as far as its API adapter could read it."""

    api: str
    streamed: bool = False
    readable: bool = False  # some event had a shape of this API (an answer or an error object)
    error: str | None = None  # why (part of) the body could not be read
    error_message: str | None = None  # an error the body itself reports
    events: list[Event] = field(default_factory=list)
    text: str = ""
    reasoning: str = ""
    # Whether ``reasoning`` is all a summary of the reasoning, none of its own tokens (Responses'
    # reasoning summaries: the reasoning tokens the engine counted stay unseen, OpenAI's models).
    reasoning_summarized: bool = False
    refusal: str = ""  # the model declined: its words, apart from any answer text
    audio: str = ""  # an audio answer's transcript: its words, apart from the text (not in the reply)
    citations: list[str] = field(
        default_factory=list
    )  # sources the text cites, each as canonical JSON less per-request ids (``canonical_citation``)
    # {"id", "name", "arguments"} (and "free": True; "server": True of a call the API ran itself, ``ToolCallPart.server``;
    # "caller": who made it, where not the model itself, ``ToolCallPart.caller``; "toolset": its tool's
    # toolset, ``ToolCallPart.toolset``)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # What a server's tool gave back (a search's results, code's output) and images generated, each as
    # canonical JSON (``canonical_result``): what the client received, though not the model's words.
    tool_results: list[str] = field(default_factory=list)
    finish_reason: str | None = None  # in FINISH_REASONS
    finish_reason_raw: str | None = None  # the API's own word
    # Every finish reason said, in order (repeats in a row once): a stream that said ``length`` then
    # ``stop`` is not one that said ``stop`` alone.
    finish_reasons: list[str] = field(default_factory=list)
    # Payloads that are not JSON objects (a truncated event), as sent: what they said is unknown.
    unparsed: list[str] = field(default_factory=list)
    # The bytes of the body that are not UTF-8, each run as sent: read as U+FFFD, two different
    # bytes would read the same.
    invalid_utf8: list[bytes] = field(default_factory=list)
    # What followed the stream's first end marker (``[DONE]``), as sent: a client stops reading there.
    after_end: bytes = b""
    model: str | None = None
    response_id: str | None = None
    system_fingerprint: str | None = None
    usage: dict[str, Any] | None = None  # the engine's own counts, merged over the events
    prompt_tokens: int | None = None  # everything the model read, cached tokens included
    cached_tokens: int | None = None
    output_tokens: int | None = None
    timings: dict[str, Any] | None = None
    durations: dict[str, Any] | None = None
    token_ids: list[int] | None = None
    stop_sequence: str | None = None  # the stop string that ended it: Anthropic, llama.cpp, vLLM, SGLang
    # vLLM's ``stop_reason`` as JSON (``"###"``, ``106``, ``null`` at EOS or length), the last a
    # choice said; None where none carried the key (other engines): compared only where both say.
    stop_reason: str | None = None
    # SGLang's ``matched_stop`` as JSON (``"###"``, a token id, its end of sequence's too, ``null`` at
    # the length), the last value a choice said; None where none carried the key: compared only where both say.
    matched_stop: str | None = None
    # Anthropic's ``stop_details``, why it stopped beyond the stop reason (a refusal's category), as
    # canonical JSON without what is new per request; None where null or missing.
    stop_details: str | None = None
    # What the API did to the request's input before the model read it (Anthropic's context
    # management ``applied_edits``, ``input_transformations``: thinking blocks dropped; the tools an
    # MCP server listed to the Responses API, ``mcp_list_tools``), as canonical JSON; None where it
    # changed nothing: the same request is not the same effective input.
    input_changes: str | None = None
    # How the server served the answer, beyond its words and its ending: Bedrock's ``trace`` (a
    # guardrail's assessment, the model a prompt router chose), ``performanceConfig`` (its latency
    # tier) and a model's other ``additionalModelResponseFields``, as canonical JSON less timings; None
    # where it said none. A config or outcome fact: compare counts the pairs it differs in apart.
    served: str | None = None
    encrypted_reasoning: int = (
        0  # blocks of reasoning sent encrypted (Anthropic redacted_thinking, Responses encrypted_content): only counted
    )
    choices: list[dict[str, Any]] = field(default_factory=list)  # choices other than the first (n > 1): see read.py
    # Each of ``choices``' finish reasons in the common vocabulary (None: it said none), as
    # ``finish_reason`` is choice 0's: each choice is an answer, counted by how it ended.
    choices_finish: list[str | None] = field(default_factory=list)
    # A cut answer's (apis.kept): (its choices, of those after the first how many said no finish
    # reason, None where the kept head and tail can't tell); a whole answer's are its ``choices``'.
    kept_choices: tuple[int, int | None] | None = None
    # The answer's blocks (Anthropic) or output items (Responses) in order, each a ``layout_entry``:
    # the same words in other blocks, or a source cited by another block, is another message to the
    # client (and in the conversation that restates it). Empty for APIs of one message.
    layout: list[str] = field(default_factory=list)
    # Blocks or items of a type the adapter does not read, each as canonical JSON (``canonical_result``),
    # compared whole: an answer of a kind added to an API after this reader never reads as nothing.
    others: list[str] = field(default_factory=list)

    @property
    def client_calls(self) -> bool:
        """Whether the answer ended asking its client to call a tool: a call of its own, not only the
        built-in tools the API ran itself (a web search followed by a message is a finished answer)."""
        return any(not c.get("server") for c in self.tool_calls)

    @property
    def choices_unfinished(self) -> int | None:
        """Choices other than the first (n > 1) that said no finish reason: in a stream, answers it
        cut short, as a choice 0 with none is (``apis.unfinished.cut_short``). None: unknown (a cut
        answer's, where its kept ends don't tell, ``kept_choices``)."""
        if self.kept_choices is not None:
            return self.kept_choices[1]
        return sum(c.get("finish_reason") is None for c in self.choices)

    @property
    def choice_count(self) -> int:
        """The answers in the body (n > 1 asks for several): a cut answer's as ``kept_choices`` says."""
        return self.kept_choices[0] if self.kept_choices is not None else 1 + len(self.choices)

    @property
    def objects(self) -> list[dict[str, Any]]:
        """The events that parsed as JSON objects, in order."""
        return [e.obj for e in self.events if isinstance(e.obj, dict)]

    def reply(self) -> Turn:
        """The assistant turn this response adds to its conversation (a refusal is what it said)."""
        return Turn(
            "assistant",
            self.text + self.refusal,
            tuple((c["name"], canonical_arguments(c["arguments"])) for c in self.tool_calls),
        )


@dataclass
class Request:
    """What a request asks for, the same for every API."""

    api: str
    generation: bool = False  # asks for generated tokens (not /models, /embeddings, /tokenize...)
    body: dict[str, Any] | None = None
    model: str | None = None
    stream: bool | None = None
    turns: tuple[Turn, ...] = ()  # the conversation it carries, system prompt first
    items: int | None = None  # messages (or input items) as sent
    system: str | None = None
    tools: tuple[str, ...] = ()  # names of the tools offered
    tool_choice: Any = None
    max_tokens: int | None = None
    sampling: dict[str, Any] = field(default_factory=dict)  # canonical name -> value as sent
    previous_response_id: str | None = None

    @property
    def last_user(self) -> str | None:
        users = [t.text for t in self.turns if t.role == "user"]
        return users[-1] if users else None


@dataclass(frozen=True)
class SettingsPlace:
    """Where and under which names an API reads its sampling settings, so that a replay's
    ``--set temperature=0`` lands where the server reads it, not where it reads nothing: the
    object ``key`` (``sampling_params``; None: the body's top level), a list of such objects too
    where ``lists`` (one per prompt of a batch); each setting under the API's own name, by
    canonical name (``sampling.canonical``: ``max_tokens`` -> ``max_new_tokens``, on Responses
    ``max_output_tokens``); ``others``, settings it reads there that have no canonical name
    (``ignore_eos``). A sampling setting in neither has no place, unless ``open``: the servers of
    the API read settings of their own beside its names (vLLM's ``top_k`` on Responses), so it
    goes as given. ``positive``: settings the API refuses at 0 or below, and how it asks for what
    0 means instead (TGI's temperature: greedy is ``do_sample`` false), said to a ``--set`` of it;
    ``positive_pinned``: the same said of a pin ``--pin-defaults`` left out for it, whose request goes
    with the server's own default (the user named no setting to change)."""

    key: str | None
    names: Mapping[str, str]
    others: frozenset[str] = frozenset()
    lists: bool = False
    open: bool = False
    positive: Mapping[str, str] = field(default_factory=dict)
    positive_pinned: Mapping[str, str] = field(default_factory=dict)


class Api:
    """An API family's adapter. Subclasses read their own shapes; this base knows none."""

    name: ClassVar[str] = "unknown"
    #: The API's finish reasons in the common vocabulary (others map to "other").
    finish_map: ClassVar[dict[str, str]] = {}
    #: What a request of this API asks for tokens with (``read.asks_for_tokens``); None: the common
    #: ``messages``, ``prompt`` or ``input``.
    inputs: ClassVar[tuple[str, ...] | None] = None
    #: Where its sampling settings go (None: at the top level, under any name).
    #: Whether the request's model is in its path, not its body (Bedrock's ``/model/{modelId}/...``).
    model_in_path: ClassVar[bool] = False
    settings_place: ClassVar[SettingsPlace | None] = None

    def streams(self, body: dict[str, Any]) -> bool:
        """Whether the request asks for a stream: its ``stream`` (Ollama streams unless told not to,
        yet is read as the request said)."""
        return bool(body.get("stream"))

    def event(self, obj: dict[str, Any]) -> Delta:
        return Delta()

    def model(self, body: dict[str, Any], path: str | None) -> str | None:
        """The model a request at ``path`` asks for: its body's ``model`` (Bedrock's is in the path)."""
        model = body.get("model")
        return model if isinstance(model, str) else None

    def finish(self, raw: str | None, tool_calls: bool) -> str | None:
        if raw is None:
            return None
        return self.finish_map.get(raw, "other")

    def counts(self, usage: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
        """(prompt, cached, output) tokens from the merged usage: OpenAI's names by default."""
        details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
        prompt = as_int(usage.get("prompt_tokens")) if "prompt_tokens" in usage else as_int(usage.get("input_tokens"))
        output = as_int(usage.get("completion_tokens")) if "completion_tokens" in usage else as_int(usage.get("output_tokens"))
        cached = as_int(details.get("cached_tokens")) if isinstance(details, dict) else None
        return prompt, cached, output

    def turns(self, body: dict[str, Any]) -> tuple[tuple[Turn, ...], int | None, str | None]:
        """(conversation turns, items as sent, system prompt)."""
        return (), None, None

    def tools(self, body: dict[str, Any]) -> tuple[str, ...]:
        """Names of the tools offered (OpenAI's ``{"type": "function", "function": {"name"}}`` and flat ``{"name"}``)."""
        out = []
        for tool in as_list(body.get("tools")):
            if isinstance(tool, dict):
                fn = as_dict(tool.get("function")) or tool
                out.append(str(fn.get("name") or tool.get("type") or "?"))
        return tuple(out)

    def sampling(self, body: dict[str, Any]) -> dict[str, Any]:
        return dict(body)

    def open_call(self, item: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
        """A call whose item opened (``ToolCallPart.item``) and never ended, as the item stood: (its
        arguments, what its tool gave back and how far it got), as a whole body's item is read."""
        return "", None


def finish_words(words: Sequence[str]) -> list[str]:
    """Finish reasons in the order said, each repeat in a row once (a usage chunk that says it again)."""
    return [w for i, w in enumerate(words) if i == 0 or words[i - 1] != w]


def as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """A JSON array, else none: a field of another type is read as no items, never iterated."""
    return value if isinstance(value, list) else []


def position(value: Any, default: int) -> int:
    """A tool call's index as sent, else ``default`` (its place): an index that isn't an integer
    would name no slot (a list, an object) or none that sorts with the others."""
    index = as_int(value)
    return default if index is None else index


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def canonical_arguments(value: Any) -> str:
    """Tool-call arguments as canonical JSON, whether sent as a JSON string or an object, so that
    ``'{"a": 1}'`` streamed in pieces and ``{"a": 1}`` sent whole are the same call; no arguments
    at all are the empty object (Anthropic streams a call of none as ``""`` and the client sends it
    back as ``{}``; Ollama the other way round). Canonical only where that loses nothing: numbers
    keep their exact decimal value (``1e400`` is not ``2e400``, nor ``1e-400`` zero), a string is a
    string (one holding JSON is not the object), and text with a key twice is compared as sent."""
    if isinstance(value, str):
        # An agent's conversation restates each earlier call's arguments in every later request:
        # the same strings come back again and again (the cache holds short ones only).
        return _canonical_cached(value) if len(value) <= 2048 else _canonical_text(value)
    try:
        return _dumps(value)
    except RecursionError:
        return repr(value)


class _Twice(ValueError):
    """A JSON object with a key twice: readers disagree on which value counts."""


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise _Twice
    return obj


def _canonical_text(value: str) -> str:
    if not value.strip():
        return "{}"
    inexact: list[float] = []

    def number(text: str) -> float:
        read = ExactFloat.of(text)
        if type(read) is ExactFloat:
            inexact.append(read)
        return read

    try:
        parsed = json.loads(value, parse_float=number, parse_constant=number, object_pairs_hook=_once)
        # json.dumps (C) writes what _dumps would, but for a number no float holds exactly
        return _dumps(parsed) if inexact else json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (ValueError, RecursionError):
        return value  # not JSON (or a key twice): compared as the text it is


_canonical_cached = functools.lru_cache(maxsize=4096)(_canonical_text)


def _dumps(value: Any) -> str:
    """``value`` as JSON, keys sorted, no spaces; a number read exactly (``ExactFloat``) as its value."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_string(k)}:{_dumps(value[k])}" for k in sorted(value, key=str)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(map(_dumps, value)) + "]"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, ExactFloat):
        return value.exact()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"
    return json.dumps(value)


def _string(key: Any) -> str:
    return json.dumps(key if isinstance(key, str) else str(key), ensure_ascii=False)


#: A string longer than this (a generated image, a file in base64) is kept in a result as its digest.
_LONGEST_KEPT = 1024
#: Fields of a server tool's result or an item kept whole made anew on every request, whatever it
#: found: not compared. Ids of the item, its call and container; who created it (``created_by``, "the
#: ID of the entity that created" it, as a built-in call's arguments leave it out); the approval
#: request an MCP approval answers (``approval_request_id``, as an MCP call's is left out). The
#: program whose code made it (a caller's ``caller_id``) is compared by place (``canonical_result``).
_VOLATILE = frozenset(
    (
        "id",
        "call_id",
        "tool_use_id",
        "container_id",
        "encrypted_content",
        "encrypted_index",
        "created_by",
        "approval_request_id",
    )
)


def layout_entry(kind: Any, chars: int = 0, cited: int = 0) -> str:
    """One block (item) of an answer: its type, then its characters of text, reasoning or refusal,
    then how many sources it cites (``text:17+1``)."""
    return f"{kind}" + (f":{chars}" if chars else "") + (f"+{cited}" if cited else "")


def merge_unread(block: dict[str, Any], delta: dict[str, Any]) -> None:
    """A streamed delta of a type no adapter reads added to its block as an SDK accumulates one: text
    appended to text, a list extended, an object joined member by member (Bedrock nests a delta's
    pieces: ``{"image": {"source": {"bytes": ...}}}``), anything else set; so a block streamed reads
    as it does whole, and no earlier piece is lost to a later one."""
    for key, value in delta.items():
        if key != "type":
            block[key] = _joined(block.get(key), value)


def _joined(had: Any, value: Any) -> Any:
    """``value``, a delta's piece, added to what its block ``had`` there; new objects, never ``had``
    changed in place (it may be an event's own, read again elsewhere)."""
    if isinstance(value, str) and isinstance(had, str):
        return had + value
    if isinstance(value, list) and isinstance(had, list):
        return had + value
    if isinstance(value, dict) and isinstance(had, dict):
        return {**had, **{k: _joined(had.get(k), v) for k, v in value.items()}}
    return value


def canonical_result(value: Any, places: Mapping[str, int] | None = None) -> str:
    """What a server's tool gave back (or an image generated) as canonical JSON: its ids and
    encrypted blobs left out, each long string (base64) as its digest and length. A caller's
    ``caller_id`` (the program whose code made it) as ``call N``, that program's place among the
    answer's calls (``places``, ``call_places``), as ``divergence.callers`` reads a call's: the same
    program with a new id is the same, another program another; the id as sent where the answer
    holds no such call (code started earlier, its id in the request: the same on both sides)."""
    return canonical_arguments(_kept(value, places or {}))


def call_places(calls: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Each call's id to its place among the answer's calls."""
    return {c["id"]: i for i, c in enumerate(calls) if isinstance(c.get("id"), str)}


def _kept(value: Any, places: Mapping[str, int]) -> Any:
    if isinstance(value, dict):
        return {k: _caller(v, places) if k == "caller_id" else _kept(v, places) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_kept(v, places) for v in value]
    if isinstance(value, str) and len(value) > _LONGEST_KEPT:
        digest = hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        return f"<{len(value)} characters, blake2b {digest}>"
    return value


def _caller(said: Any, places: Mapping[str, int]) -> Any:
    return f"call {places[said]}" if isinstance(said, str) and said in places else said


#: Citations whose ``file_id`` names a file made anew on every request (one the code interpreter's
#: container wrote; a ``file_path``'s, "the file that was generated" when the code interpreter made
#: one, as the Assistants API that brought it in says), not the user's own (a ``file_citation``'s
#: file they uploaded stays compared).
_MADE_FILES = frozenset(("container_file_citation", "file_path"))


def canonical_citation(value: Any) -> str:
    """A source the text cites as canonical JSON, less the ids made anew on every request (as
    ``canonical_result`` leaves them out: a container's ``container_id`` and the file it made,
    Anthropic's ``encrypted_index``): the same source cited on a replay is the same citation."""
    if isinstance(value, dict) and value.get("type") in _MADE_FILES:
        value = {k: v for k, v in value.items() if k != "file_id"}
    return canonical_result(value)


def content_text(content: Any) -> str:
    """The text of a message's content: a string, or text parts joined. Parts that are not text
    (images, files) are kept as canonical JSON so that two different images never read as equal,
    less their ``cache_control``: a cache breakpoint that a client moves each turn (Claude Code
    does) is no change in what the conversation says."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else [content]
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
                out.append(part["refusal"])  # the model's words, as its reply reads them
            elif part.get("type") in ("thinking", "redacted_thinking", "reasoning"):
                continue  # the model's own reasoning, not part of what the conversation says
            else:
                if "cache_control" in part:
                    part = {k: v for k, v in part.items() if k != "cache_control"}
                out.append(json.dumps(part, sort_keys=True, ensure_ascii=False))
    return "".join(out)


def one_prompt(prompt: Any) -> Any:
    """The prompt a completion request runs where it sends a list of one (``["ab"]``, ``[[1, 2]]``):
    that prompt, a batch of one, as OpenAI, vLLM, llama-server and llama-cpp-python run it (the
    same answer as ``"ab"``); anything else as sent: two prompts stay a batch, ``[5]`` token ids."""
    if isinstance(prompt, list) and len(prompt) == 1:
        item = prompt[0]
        if isinstance(item, str) or (isinstance(item, list) and item and all(type(t) is int for t in item)):
            return item
    return prompt


def prompt_text(prompt: Any) -> str:
    """A completion's prompt as one text: a string as it is (a list of one as its one, ``one_prompt``);
    anything else (token ids ``[1, 2, 3]``, llama.cpp's mixed ``[12, "text", 34]``, several prompts,
    a multimodal object) as canonical JSON, so that prompts of other token ids never read as one
    (their text parts alone were read, ids left out: two prompts of ids were both empty)."""
    prompt = one_prompt(prompt)
    if isinstance(prompt, str):
        return prompt
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False)


def error_of(obj: dict[str, Any]) -> str | None:
    """The message of an error object in any of the usual shapes (OpenAI, Anthropic, Ollama, llama.cpp,
    and vLLM's ``{"object": "error", "message": ...}``)."""
    if obj.get("object") == "error":
        return str(obj.get("message") or obj.get("type") or obj.get("code") or "error")
    err = obj.get("error")
    if isinstance(err, str):
        return err
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err.get("code") or json.dumps(err))
    return None
