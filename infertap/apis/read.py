"""Which API an exchange speaks, and reading its request and response through that API's adapter.

The path decides (any prefix before it allowed: ``/openai/v1/chat/completions``); a path that
names no known API is told by the body's shape (Anthropic's on Vertex AI and Bedrock by its
``anthropic_version``). A response that its path's adapter can't read is
tried once more with the adapter its first event looks like (llama-server answers its native
``/completions`` alias in llama.cpp's own shape, for one).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any

from .body import NOT_IN_FILE, NOT_KEPT, decoding, ended_payloads, framing, head_of, header, invalid_utf8, unencoded
from .converse import CUT, NOT_JSON, Converse, ConverseStream, stream_ended, stream_events
from .fastjson import loads, loads_exact
from .generate import AmbiguousGenerate, SglangGenerate, TgiGenerate, TgiGenerateStream, ambiguous, batch_answers
from .llamacpp import LlamaCpp
from .media import media_kind
from .messages import Messages
from .ollama import OllamaChat, OllamaGenerate
from .openai import Chat, Completions, choices_error, matched_stop_after
from .responses import Responses, listed_tools
from .sampling import sampling_fields
from .shapes import (
    NEXT,
    Api,
    Delta,
    Event,
    Output,
    Request,
    ToolCallPart,
    Turn,
    as_int,
    call_places,
    canonical_arguments,
    canonical_citation,
    canonical_result,
    error_of,
    finish_words,
    layout_entry,
    merge_unread,
)

CHAT, COMPLETIONS, RESPONSES, MESSAGES = Chat(), Completions(), Responses(), Messages()
OLLAMA_CHAT, OLLAMA_GENERATE, LLAMACPP = OllamaChat(), OllamaGenerate(), LlamaCpp()
SGLANG_GENERATE, TGI_GENERATE, TGI_STREAM = SglangGenerate(), TgiGenerate(), TgiGenerateStream()
AMBIGUOUS_GENERATE = AmbiguousGenerate()
CONVERSE, CONVERSE_STREAM = Converse(), ConverseStream()
UNKNOWN = Api()
APIS: dict[str, Api] = {
    api.name: api
    for api in (
        CHAT,
        COMPLETIONS,
        RESPONSES,
        MESSAGES,
        OLLAMA_CHAT,
        OLLAMA_GENERATE,
        LLAMACPP,
        SGLANG_GENERATE,
        TGI_GENERATE,
        TGI_STREAM,
        AMBIGUOUS_GENERATE,
        CONVERSE,
        CONVERSE_STREAM,
    )
}

# Path endings, most specific first ("/chat/completions" before "/completions").
_BY_PATH: tuple[tuple[str, Api], ...] = (
    ("/chat/completions", CHAT),
    ("/completions", COMPLETIONS),
    ("/responses", RESPONSES),
    # A conversation compacted by the model (the Codex CLI's): the user's messages and an encrypted summary, usage as a response's
    ("/responses/compact", RESPONSES),
    ("/messages", MESSAGES),
    ("/api/chat", OLLAMA_CHAT),
    ("/api/generate", OLLAMA_GENERATE),
    ("/completion", LLAMACPP),
    ("/infill", LLAMACPP),
    ("/generate_stream", TGI_STREAM),
    # Bedrock's Converse (``/model/{modelId}/converse``): its ``messages`` are no chat's
    ("/converse", CONVERSE),
    ("/converse-stream", CONVERSE_STREAM),
)
# SGLang's and TGI's native route: one path, told apart by the body (``api_for``).
_GENERATE = "/generate"
_GENERATE_APIS = (TGI_GENERATE, SGLANG_GENERATE)
_GENERATE_BY_NAME = {a.name: a for a in _GENERATE_APIS}
# What a request for tokens carries, in one API or another (a chat body sent to /completions is
# still a request for tokens, one the engine will refuse).
_INPUTS = ("messages", "prompt", "input")
# What llama.cpp's /infill asks for tokens with where it sends no ``prompt`` (optional there; its
# code-completion clients send the text around the cursor alone): the text before and after the gap.
_INFILL_INPUTS = ("input_prefix", "input_suffix")


def asks_for_tokens(api: Api, body: Mapping[str, Any]) -> bool:
    """Whether a request body read by ``api`` asks for tokens: it carries ``_INPUTS``, or is llama.cpp's
    infill of a gap between two texts (``_INFILL_INPUTS``, no ``prompt`` needed): one of a workload's
    generation requests, in its identity, timed and compared."""
    if api is UNKNOWN:
        return False
    if api.inputs is not None:
        return any(key in body for key in api.inputs)
    return any(key in body for key in _INPUTS) or (api is LLAMACPP and any(key in body for key in _INFILL_INPUTS))


# Routes that take a conversation but generate nothing (a token count is not an answer).
_NOT_GENERATION = ("/count_tokens", "/tokenize", "/detokenize", "/apply-template", "/embeddings", "/embedding", "/rerank")


def api_for(path: str | None, body: Any = None) -> Api:
    """The adapter for a request to ``path`` (with its parsed ``body``, for paths no API owns)."""
    api = _by_path(path)
    if api is not None:
        return api
    route = (path or "").split("?", 1)[0].rstrip("/")
    if isinstance(body, dict):
        # TGI's body holds ``inputs``, SGLang's ``text`` or ``input_ids``; one of both either's (its
        # answer tells: read_request); a body of neither (vLLM's old demo server's ``prompt``) is told
        # by its shape as any other path's
        if body_apis(path) and ambiguous(body):
            return AMBIGUOUS_GENERATE
        for api in body_apis(path):
            if asks_for_tokens(api, body):
                return api
    if route.endswith(_NOT_GENERATION) or not isinstance(body, dict):
        return UNKNOWN
    if media_kind(path) is not None:  # an image's prompt is no text completion's
        return UNKNOWN
    if "anthropic_version" in body and "messages" in body:
        return MESSAGES  # Anthropic's Messages on Vertex AI (``...:rawPredict``) or Bedrock (``/model/.../invoke``)
    return CHAT if "messages" in body else COMPLETIONS if "prompt" in body else UNKNOWN


def body_apis(path: str | None) -> tuple[Api, ...]:
    """The adapters a request's body chooses among at ``path`` (``/generate``: TGI's or SGLang's),
    before the shapes any path's body may have: what a check that sees the path alone must allow for."""
    if _by_path(path) is not None:
        return ()
    return _GENERATE_APIS if (path or "").split("?", 1)[0].rstrip("/").endswith(_GENERATE) else ()


def _by_path(path: str | None) -> Api | None:
    """The adapter its path names, if any."""
    route = (path or "").split("?", 1)[0].rstrip("/")
    for suffix, api in _BY_PATH:
        if route.endswith(suffix):
            return api
    return None


def json_body(data: bytes | None) -> dict[str, Any] | None:
    """A request body that is a JSON object, else None."""
    if not data or data.lstrip()[:1] != b"{":
        return None
    try:
        body = loads(data)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def request_json(record: Mapping[str, Any], plain: bytes | None = None) -> dict[str, Any] | None:
    """A record's request body as a JSON object, its content-encoding undone (a compressed body, as
    the Codex CLI sends, is its API's request all the same), else None. ``plain``: the body as
    ``unencoded`` gave it already (a caller that reads it more than once undoes it once)."""
    if plain is None:
        plain = unencoded(record.get("request_body") or b"", record.get("request_headers"))
    return json_body(plain)


def read_request(record: Mapping[str, Any], plain: bytes | None = None) -> Request:
    """What an exchange's request asks for, read by its API's adapter (``plain``: as ``request_json``)."""
    body = request_json(record, plain)
    api = api_for(record.get("path"), body)
    if body is None:
        return Request(api.name)
    if api is AMBIGUOUS_GENERATE:  # the server said which it is by its answer's shape, where it answered
        api = _GENERATE_BY_NAME.get(read_response(record, plain=plain).api, api)
    return request_of(api, body, asks_for_tokens(api, body), *api.turns(body), api.tools(body), path=record.get("path"))


def request_of(
    api: Api,
    body: dict[str, Any],
    generation: bool,
    turns: tuple[Turn, ...],
    items: int | None,
    system: str | None,
    tools: tuple[str, ...],
    path: str | None = None,
) -> Request:
    """The ``Request`` of a body (its conversation and tools read already) sent to ``path``: the one
    place that says what its model, stream, tool choice and sampling settings are (``ChatRequests`` reads too)."""
    sampling = sampling_fields(api.sampling(body))
    previous = body.get("previous_response_id")
    return Request(
        api=api.name,
        generation=generation,
        body=body,
        model=api.model(body, path),
        stream=api.streams(body),
        turns=turns,
        items=items,
        system=system,
        tools=tools,
        tool_choice=body.get("tool_choice"),
        max_tokens=as_int(sampling.get("max_tokens")),
        sampling=sampling,
        previous_response_id=previous if isinstance(previous, str) else None,
    )


def is_generation(record: Mapping[str, Any], plain: bytes | None = None) -> bool:
    """``read_request(record).generation`` without reading the rest of the request (its turns,
    tools, sampling): what a workload's identity asks of every exchange (``plain``: as ``request_json``)."""
    body = request_json(record, plain)
    return body is not None and asks_for_tokens(api_for(record.get("path"), body), body)


def generation_since_wl3(record: Mapping[str, Any], plain: bytes | None = None) -> bool:
    """Whether a generation request (``is_generation``) was none before infertap read a body sent
    compressed, llama.cpp's ``/infill`` with no ``prompt``, SGLang's and TGI's ``/generate`` and
    ``/v1/responses/compact``: an older infertap left it out of the workload identity, which is then
    tagged ``wl3`` (``capture.identity.version_of``). The body is read only where the route asks it
    (``plain``: as ``request_json``; a body ``unencoded`` decoded is not the very bytes recorded)."""
    route = (record.get("path") or "").split("?", 1)[0].rstrip("/")
    if route.endswith(("/responses/compact", "/generate_stream")):
        return True
    raw = record.get("request_body") or b""
    if plain is None:
        plain = unencoded(raw, record.get("request_headers"))
    if plain is not raw:  # read decoded: raw, it was no JSON
        return True
    if not route.endswith((_GENERATE, "/infill")):
        return False
    body = json_body(raw)
    if body is None:
        return False
    api = api_for(record.get("path"), body)
    return api in (SGLANG_GENERATE, TGI_GENERATE, AMBIGUOUS_GENERATE) or (
        api is LLAMACPP and not any(key in body for key in _INPUTS)
    )


def not_in_file(record: Mapping[str, Any]) -> bool:
    """Whether the record's response body was sent and is not in the file it was imported from
    (``body_not_in_file``), or is a WebSocket's messages the import left out (``websocket_messages``):
    unknown, never the empty answer (or the head) it is recorded as."""
    missing = record.get("body_not_in_file")
    return (isinstance(missing, list) and "response" in missing) or "websocket_messages" in record


def response_not_kept(record: Mapping[str, Any]) -> bool:
    """Whether the record's chunks hold only the head of its response (``response_body_size``: it
    went past the recorder's response limit): its answer is unknown, never that head read as one."""
    size = record.get("response_body_size")
    return isinstance(size, int) and not isinstance(size, bool)


def read_response(record: Mapping[str, Any], api: Api | None = None, plain: bytes | None = None) -> Output:
    """What an exchange's response said, read by ``api`` (else the one its path and body name;
    ``plain``: the request body as ``request_json`` takes it)."""
    # The body is parsed only when the path names no API (it decides nothing otherwise).
    api = api or _by_path(record.get("path")) or api_for(record.get("path"), request_json(record, plain))
    if not_in_file(record):
        return Output(api.name, error=NOT_IN_FILE)
    if response_not_kept(record):
        return Output(api.name, error=NOT_KEPT)
    pieces, why = decoding(record)
    if pieces is None:
        return Output(api.name, error=why or "cannot decode the response's content-encoding")
    if api is CONVERSE_STREAM and _eventstream(record):
        return _read_eventstream(pieces)
    how = framing(record, head_of(pieces))
    payloads, rest = ended_payloads(record, pieces, how)
    events = [Event(p.chunk, p.data, _NOTHING, _loads(p.data)) for p in payloads]
    api, events = batch_events(api, events, how)
    out = fold(api, events, how)
    if not out.readable:
        other = sniff(events)
        if other is not None and other is not api:
            out = fold(other, events, how)
    out.after_end = rest if rest.strip() else b""
    out.invalid_utf8 = invalid_utf8(b"".join(pieces))
    return out


def _eventstream(record: Mapping[str, Any]) -> bool:
    """Whether a ``/converse-stream`` answer is in AWS's event-stream framing: its content type says
    so, or names no JSON (an error before the stream began is a JSON object)."""
    ctype = (header(record.get("response_headers"), "content-type") or "").lower()
    return "amazon.eventstream" in ctype or "json" not in ctype


def _read_eventstream(pieces: list[bytes]) -> Output:
    """A ``/converse-stream`` body read: its whole messages' events folded as any stream's; bytes
    cut short or damaged said so (``Output.error``, ``converse.CUT``) and kept, as an SSE event cut
    short is, among ``unparsed`` (each byte as one character, Latin-1)."""
    events, framed = stream_events(pieces)
    out = fold(CONVERSE_STREAM, events, "eventstream")
    if framed.cut is not None:
        out.error = f"{CUT}: {framed.cut}"
        out.unparsed.append(framed.rest.decode("latin-1"))
    # the framing's lengths and CRCs are no text: only the payloads' bytes are the answer's
    out.invalid_utf8 = invalid_utf8(b"".join(m.payload for m in framed.messages))
    return out


_FINAL_EVENTS = ("message_stop", "response.completed", "response.incomplete", "response.failed")  # Anthropic, Responses


def stream_done(pieces: list[bytes], out: Output) -> bool:
    """Whether a read body carried its stream's own end marker: SSE ``[DONE]``, Ollama's
    ``"done": true``, llama.cpp's ``"stop": true``, Anthropic's ``message_stop`` or the Responses API's ``response.completed``;
    Bedrock's ``/converse-stream`` its ``messageStop`` or ``metadata`` last, no frame after it cut
    (``converse.stream_ended``). ``pieces``: the decoded chunks."""
    last = out.events[-1].obj if out.events else None
    if out.api == CONVERSE_STREAM.name and out.streamed:
        return stream_ended(last, out.error)
    return ended(pieces, last)


def ended(pieces: list[bytes], last: Any) -> bool:
    """``stream_done`` given the parsed JSON of the body's last event (None: no event)."""
    if b"".join(pieces[-3:]).rstrip().endswith(b"[DONE]"):
        return True
    return isinstance(last, dict) and (
        last.get("done") is True
        or last.get("stop") is True
        or last.get("type") in _FINAL_EVENTS
        or (isinstance(last.get("token"), dict) and isinstance(last.get("generated_text"), str))
    )  # Ollama's "done", llama.cpp /completion's "stop", Anthropic's and Responses' final event, TGI's last token


def _loads(data: str) -> Any:
    try:
        # Tool-call arguments sent as an object (Ollama's, Anthropic's ``input``) are compared by
        # their numbers as sent: digits past a double are not rounded away there.
        return loads_exact(data) if '"arguments"' in data or '"input"' in data else loads(data)
    except ValueError:
        return None


def sniff(events: list[Event]) -> Api | None:
    """The API whose shape the first JSON object of a response has."""
    obj = next((e.obj for e in events if isinstance(e.obj, dict)), None)
    if obj is None:
        return None
    kind = obj.get("type")
    if "choices" in obj:
        return CHAT
    if isinstance(kind, str) and (kind.startswith("response.") or obj.get("object") == "response"):
        return RESPONSES
    if kind in ("message", "message_start", "ping"):
        return MESSAGES
    if isinstance(obj.get("message"), dict) and "done" in obj:
        return OLLAMA_CHAT
    if isinstance(obj.get("response"), str) and "done" in obj:
        return OLLAMA_GENERATE
    if isinstance(obj.get("content"), str):
        return LLAMACPP
    if isinstance(obj.get("meta_info"), dict) and "text" in obj:
        return SGLANG_GENERATE
    if "generated_text" in obj or isinstance(obj.get("token"), dict):
        return TGI_GENERATE
    return None


_NOTHING = Delta()  # what an event that is not a JSON object says (shared: never changed)
_NOT_JSON = {
    "sse": "an SSE event is not JSON",
    "ndjson": "an NDJSON line is not JSON",
    "json": "the body is not JSON",
    "eventstream": NOT_JSON,
}


def batch_events(api: Api, events: list[Event], how: str) -> tuple[Api, list[Event]]:
    """A whole JSON body that is an array of answers (several prompts in one request: llama.cpp's,
    SGLang's batch) as one event per answer, and the API that reads them; any other as it is."""
    if how != "json" or len(events) != 1 or not isinstance(whole := events[0].obj, list):
        return api, events
    if api is AMBIGUOUS_GENERATE:
        # a body of both servers' shapes answered by an array: SGLang's answer to a batch, where its first answer is SGLang's
        first = [Event(events[0].chunk, events[0].data, _NOTHING, answer) for answer in whole[:1]]
        api = SGLANG_GENERATE if sniff(first) is SGLANG_GENERATE else api
    if api in (LLAMACPP, SGLANG_GENERATE):
        answers = batch_answers(whole) if api is SGLANG_GENERATE else whole
        events = [Event(events[0].chunk, events[0].data, _NOTHING, answer) for answer in answers]
    return api, events


def fold(api: Api, events: list[Event], how: str) -> Output:
    """Each event read by ``api``, and the response they make together (``how``: the body's framing)."""
    out = Output(api.name, streamed=how != "json")
    text: list[str] = []
    reasoning: list[str] = []
    refusal: list[str] = []
    spoken: list[str] = []
    cited: list[str] = []
    results: list[Any] = []  # what server tools gave back, as sent: canonical once the calls are known
    listed: list[Any] = []  # MCP servers' tool listings, each item's as it ended
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    ids: list[int] = []
    finishes: list[str] = []
    finish: str | None = None
    model = response_id = fingerprint = error_message = stop = stop_reason = matched = stop_details = None
    timings: dict[str, Any] | None = None
    durations: dict[str, Any] | None = None
    others: dict[int, list[Delta]] = {}
    encrypted = 0
    served: dict[str, Any] = {}  # how the answer was served (Converse's trace...), merged over the events
    sealed: set[int] = set()  # the blocks counted encrypted: one block's pieces (Converse's deltas) count once
    raw = False  # some reasoning of its own tokens, not only a summary
    restated: Delta | None = None
    blocks: dict[int, list[Any]] = {}  # a streamed answer's blocks (items) by index: [type, characters, cited]
    unread: dict[int, dict[str, Any]] = {}  # streamed blocks of a type not read, their deltas merged in
    kept: list[Any] = []  # whole blocks (items) of a type not read
    layout: list[str] | None = None  # a whole answer's
    readable, read = False, api.event  # locals: the loop runs per streamed event
    so_far = ""  # an API whose events each say the text so far (``Delta.so_far``): that text
    cumulative = False  # whether one of them repeated the text before it: they are the text so far
    choices_so_far: dict[int, tuple[str, bool]] = {}  # and each other choice's (text so far, cumulative)
    for event in events:
        obj = event.obj
        if not isinstance(obj, dict):
            event.delta = _NOTHING
            out.error = out.error or _NOT_JSON[how]
            out.unparsed.append(event.data)
            continue
        d = event.delta = read(obj)
        if d.finish_reason is not None and not isinstance(d.finish_reason, str):
            d.finish_reason = None  # a number or an object where the API's word goes: no word
        if not d.known and (message := error_of(obj)) is not None:
            d.known, d.error = True, message
        readable = readable or d.known
        if d.so_far:
            d.content, so_far, cumulative = new_text(d.content, so_far, cumulative)
        if d.content:
            text.append(d.content)
        if d.reasoning:
            reasoning.append(d.reasoning)
            raw = raw or not d.summarized
        if d.refusal:
            refusal.append(d.refusal)
        if d.audio:
            spoken.append(d.audio)
        if d.citations:
            cited.extend(map(canonical_citation, d.citations))
        if d.results:
            results.extend(d.results)
        for part in d.tool_calls:
            add_call(calls, part)
        if d.stop_sequence is not None:
            stop = d.stop_sequence
        if d.stop_reason is not None:
            stop_reason = d.stop_reason
        matched = matched_stop_after(matched, d.matched_stop)
        if d.stop_details is not None:
            stop_details = d.stop_details
        if d.input_changes is not None:
            out.input_changes = d.input_changes
        if d.served:
            served = {**served, **d.served}
        if d.listed:
            listed.extend(d.listed)
        if d.choices:
            for k, other in d.choices.items():
                if other.so_far:  # each choice's text so far its own (SGLang's stream of a batch)
                    other.content, said, grew = new_text(other.content, *choices_so_far.get(k, ("", False)))
                    choices_so_far[k] = (said, grew)
                others.setdefault(k, []).append(other)
        if d.encrypted and d.block is not None:
            encrypted += d.block not in sealed
            sealed.add(d.block)
        else:
            encrypted += d.encrypted
        restated = d.restated or restated
        if d.block is not None:
            _place(blocks, unread, d.block, d)
        if d.others:
            kept.extend(d.others)
        if d.layout is not None:
            layout = d.layout
        if d.usage:
            usage.update((k, v) for k, v in d.usage.items() if v is not None)
        if d.finish_reason:
            finishes.append(d.finish_reason)
        finish = d.finish_reason or finish
        model = d.model or model
        response_id = response_id or d.response_id
        fingerprint = d.system_fingerprint or fingerprint
        # llama-server adds its timings to the last event of any API it serves.
        timings = d.timings or (obj["timings"] if isinstance(obj.get("timings"), dict) else None) or timings
        durations = d.durations or durations
        error_message = d.error or error_message
        if d.token_ids:
            ids.extend(d.token_ids)
    out.readable = readable
    if listed:  # the final event's output may list only some servers' tools, or none (a gateway's)
        out.input_changes = listed_tools(listed, restated.listed if restated is not None else ())
    out.model, out.response_id, out.system_fingerprint, out.error_message = model, response_id, fingerprint, error_message
    out.timings, out.durations = timings, durations
    out.events = events
    out.text, out.reasoning, out.refusal = so_far if cumulative else "".join(text), "".join(reasoning), "".join(refusal)
    out.reasoning_summarized = bool(reasoning) and not raw
    out.audio, out.citations = "".join(spoken), cited
    out.layout = layout if layout is not None else [layout_entry(*blocks[k]) for k in sorted(blocks)]
    kept.extend(unread[k] for k in sorted(unread))
    if restated is not None:
        if not (text or reasoning or refusal or calls or spoken or cited or results or kept):
            # Nothing came as deltas, yet the final event holds the answer (a server or gateway that
            # sends whole items only): it is what was answered, read whole below. Its tokens have no
            # times of their own.
            encrypted = max(encrypted, restated.encrypted)
        _add_restated(calls, restated, out, results, kept)
    close_open_calls(api, calls, results)
    out.tool_calls = [calls[k] for k in sorted(calls)]
    places = call_places(out.tool_calls)  # ids new on every answer: a caller by its place
    out.tool_results = [canonical_result(r, places) for r in results]
    out.others = [canonical_result(o, places) for o in kept]
    out.finish_reasons = finish_words(finishes)
    out.finish_reason_raw = finish
    out.finish_reason = api.finish(finish, out.client_calls)
    out.choices = [other_choice(k, deltas) for k, deltas in sorted(others.items())]
    for choice in out.choices:  # a cumulative choice's answer is its last text, as the first's (new_text)
        said, grew = choices_so_far.get(choice["index"], ("", False))
        if grew:
            choice["text"] = said
    out.choices_finish = [api.finish(c["finish_reason"], any(not t.get("server") for t in c["tool_calls"])) for c in out.choices]
    if out.error_message is None and (api is CHAT or api is COMPLETIONS):
        out.error_message = choices_error(out.finish_reason, out.choices)  # a choice that ended in an error
    if out.error_message is not None and out.finish_reason is None:
        out.finish_reason = "error"
    out.usage = usage or None
    if usage:
        out.prompt_tokens, out.cached_tokens, out.output_tokens = api.counts(usage)
    out.token_ids = ids or None
    out.stop_sequence, out.stop_reason, out.stop_details, out.encrypted_reasoning = stop, stop_reason, stop_details, encrypted
    out.served = canonical_arguments(served) if served else None
    out.matched_stop = matched
    if not events and out.error is None:
        out.error = "empty body"
    elif not out.readable and out.error is None:
        out.error = f"no event has a shape of the {api.name} API" if api is not UNKNOWN else "no known API's shape"
    return out


def new_text(said: str, so_far: str, cumulative: bool) -> tuple[str, str, bool]:
    """An event's new text, of one that says the text so far (``Delta.so_far``), the text so far
    after it, and whether the events have shown they are cumulative (one repeated the text before
    it): what it adds, or all of it where it does not continue the text before (an incremental
    stream's event). One shorter than the text before it that it begins, once cumulative, adds
    nothing and is the text so far: SGLang 0.4 trims a stop string that spans tokens already sent
    from its last event's text (an empty text, an abort's, cuts nothing)."""
    if said.startswith(so_far):
        return said[len(so_far) :], said, cumulative or bool(so_far)
    if cumulative and said and so_far.startswith(said):
        return "", said, True
    return said, so_far + said, cumulative


def _add_restated(calls: dict[int, dict[str, Any]], restated: Delta, out: Output, results: list[Any], kept: list[Any]) -> None:
    """The final event's output, where it holds items; else what it restates that no delta said: a call in an output slot no event filled
    (nor of an id already read); the text, refusal, reasoning, what the server's tools gave back,
    the sources cited and items of a type not read, each when no event said it (deltas may leave out a message's annotations, as the
    openai SDK's own final response warns); and the output's items as they ended, the answer's
    layout (the deltas' may miss an item that came whole)."""
    if restated.layout:
        # Its output holds items: that response is what the client ends with (the openai SDK's
        # ``stream.get_final_response()`` is the final event's response, its deltas only shown on
        # the way), so where the deltas disagree with it, it is the answer.
        calls.clear()
        out.text, out.refusal, out.citations, out.reasoning = "", "", [], ""
        results.clear()
        kept.clear()
    ids = {c["id"] for c in calls.values() if isinstance(c["id"], str)}
    for part in restated.tool_calls:
        if part.index not in calls and not (isinstance(part.id, str) and part.id in ids):
            add_call(calls, part)
    if not results:
        results.extend(restated.results)
    if not out.text:
        out.text = restated.content  # a message sent whole beside calls that streamed
    if not out.refusal:
        out.refusal = restated.refusal
    if not out.reasoning:
        out.reasoning, out.reasoning_summarized = restated.reasoning, restated.summarized
    if not out.citations:
        out.citations = [canonical_citation(c) for c in restated.citations]
    if not kept:
        kept.extend(restated.others)
    out.layout = restated.layout or out.layout


def _place(blocks: dict[int, list[Any]], unread: dict[int, dict[str, Any]], index: int, d: Delta) -> None:
    """An event of a streamed answer made of blocks (items), placed in its block ``index``: the
    layout's count of characters and sources, and a block of a type not read accumulated whole."""
    entry = blocks.get(index)
    if entry is None:
        entry = blocks[index] = [d.opened or "?", 0, 0]
    elif d.opened:
        entry[0] = d.opened
    entry[1] += len(d.content) + len(d.reasoning) + len(d.refusal)
    entry[2] += len(d.citations)
    if d.unread is not None:
        if d.opened:
            unread[index] = dict(d.unread)
        else:
            merge_unread(unread.setdefault(index, {}), d.unread)


def add_call(calls: dict[int, dict[str, Any]], part: ToolCallPart) -> None:
    """A tool call's piece added to the calls so far (by index; a whole call replaces its pieces)."""
    index = part.index if part.index != NEXT else max(calls, default=-1) + 1
    if part.streamed is not None and "item" not in calls.get(index, {}):
        return  # input for an item that never opened (or has ended): no call of its own
    slot = calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
    slot["id"] = part.id or slot["id"]
    if part.free:
        slot["free"] = True  # a custom tool's input: compared as the text it is
    if part.server:
        slot["server"] = True  # run by the API itself: no call for the client to make
    elif part.whole:
        slot.pop("server", None)  # the call as it ended says whose it is
    if part.caller is not None:
        slot["caller"] = part.caller  # made by code the API ran (Anthropic's programmatic calls), not the model
    if part.toolset is not None:
        slot["toolset"] = part.toolset  # the toolset its tool belongs to (Anthropic's browser, computer)
    if part.whole:
        slot["name"], slot["arguments"] = part.name or slot["name"], part.arguments or slot["arguments"]
        slot.pop("item", None)  # the call as it ended replaces what streamed into it
    else:
        slot["name"] += part.name
        slot["arguments"] += part.arguments
        if part.item is not None:
            slot["item"] = copy.deepcopy(part.item)
        if part.streamed is not None and isinstance(slot.get("item"), dict):
            _stream_into(slot["item"], *part.streamed)


def _stream_into(item: dict[str, Any], path: tuple[str | int, ...], text: str) -> None:
    """``text`` added to the field of an opened item at ``path`` (a code interpreter's ``code``, a
    shell's ``("action", "commands", 1)``), as the item ends holding it: missing levels made (a list
    grown to the index), anything else there replaced."""
    at: Any = item
    for key, below in zip(path, path[1:], strict=False):
        at = _child(at, key, [] if isinstance(below, int) else {})
    had = _child(at, path[-1], "")
    if had is not None:
        at[path[-1]] = had + text


def _child(at: Any, key: str | int, fresh: Any) -> Any:
    """``at[key]``, made ``fresh`` where missing or of another type; None where ``at`` can't hold ``key``."""
    holder: Any = at  # a list by an index, or an object by a name
    if isinstance(key, int) and key >= 0 and isinstance(at, list):
        at.extend(None for _ in range(key + 1 - len(at)))
    elif not (isinstance(key, str) and isinstance(at, dict)):
        return None
    if not isinstance(holder[key], type(fresh)) if isinstance(at, list) else not isinstance(at.get(key), type(fresh)):
        holder[key] = fresh
    return holder[key]


def close_open_calls(api: Api, calls: dict[int, dict[str, Any]], results: list[Any]) -> None:
    """Calls whose item opened and never ended (a cut stream) read as the item stood, what streamed
    into it included (``Api.open_call``): a code interpreter's partial code is what the answer said."""
    for slot in calls.values():
        item = slot.pop("item", None)
        if isinstance(item, dict):
            arguments, result = api.open_call(item)
            slot["arguments"] = arguments or slot["arguments"]
            if result is not None:
                results.append(result)


def other_choice(index: int, deltas: list[Delta]) -> dict[str, Any]:
    """A choice other than the first (n > 1), folded from its pieces: what compare compares of it.
    One whose error object said no finish reason finished ``error``, as choice 0's does (``fold``)."""
    calls: dict[int, dict[str, Any]] = {}
    for d in deltas:
        for part in d.tool_calls:
            add_call(calls, part)
    error = next((d.error for d in reversed(deltas) if d.error is not None), None)
    finish = next((d.finish_reason for d in reversed(deltas) if d.finish_reason), None)
    return {
        "index": index,
        "text": "".join(d.content for d in deltas),
        "reasoning": "".join(d.reasoning for d in deltas),
        "refusal": "".join(d.refusal for d in deltas),
        "audio": "".join(d.audio for d in deltas),
        "citations": [canonical_citation(c) for d in deltas for c in d.citations],
        "tool_results": [canonical_result(r) for d in deltas for r in d.results],
        "tool_calls": [calls[k] for k in sorted(calls)],
        "finish_reason": "error" if finish is None and error is not None else finish,
        "error": error,  # an error object of this choice alone (its message)
        "stop_sequence": next((d.stop_sequence for d in reversed(deltas) if d.stop_sequence is not None), None),
        "stop_reason": next((d.stop_reason for d in reversed(deltas) if d.stop_reason is not None), None),
        "matched_stop": functools.reduce(matched_stop_after, (d.matched_stop for d in deltas), None),
    }
