"""Anthropic's server tools (web search, code execution: ``server_tool_use``) and its MCP connector
(``mcp_tool_use``) run on Anthropic's servers, their results in the answer: their calls are read as
calls marked ``server``, as the Responses API's built-in calls are, and only a ``tool_use`` is a
call its client must make. The finish reason stays Anthropic's ``stop_reason``; ``pause_turn`` (its
server tools' loop paused: the client sends the answer back to go on) is ``other``, never a stop.
The same whole, streamed and from a cut answer's tail, and in ``compare``.

The bodies are built with the anthropic SDK's own types, each stream checked to be what the SDK's
accumulator reads as the whole message; compare's through the project's capture writer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, get_args

import httpx2
from anthropic.lib.streaming._beta_messages import accumulate_event
from anthropic.types.beta import (
    BetaBrowserTypeToolUseBlock,
    BetaCodeExecutionResultBlock,
    BetaCodeExecutionToolResultBlock,
    BetaCompactionBlock,
    BetaCompactionContentBlockDelta,
    BetaComputerTypeToolUseBlock,
    BetaContainerUploadBlock,
    BetaDirectCaller,
    BetaFallbackBlock,
    BetaInputJSONDelta,
    BetaMCPTool,
    BetaMCPToolListingBlock,
    BetaMCPToolResultBlock,
    BetaMCPToolUseBlock,
    BetaMessage,
    BetaMessageDeltaUsage,
    BetaRawContentBlockDeltaEvent,
    BetaRawContentBlockStartEvent,
    BetaRawContentBlockStopEvent,
    BetaRawMessageDeltaEvent,
    BetaRawMessageStartEvent,
    BetaRawMessageStopEvent,
    BetaServerToolCaller,
    BetaServerToolUseBlock,
    BetaStopReason,
    BetaTextBlock,
    BetaTextDelta,
    BetaToolUseBlock,
    BetaUsage,
    BetaWebSearchResultBlock,
    BetaWebSearchToolResultBlock,
)
from anthropic.types.beta.beta_raw_message_delta_event import Delta as MessageDelta

from infertap.analysis.compare import compare
from infertap.apis import read_response, tail_usage
from infertap.apis.messages import Messages
from infertap.capture.records import RESPONSE_TAIL_BYTES
from tests import sdk_shapes
from tests.helpers import pair_captures

_SSE, _JSON = "text/event-stream", "application/json"
_REQUEST = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
}
_QUERY = {"query": "weather Paris"}

_SEARCH = BetaServerToolUseBlock(type="server_tool_use", id="srvtoolu_1", name="web_search", input=_QUERY)
_FOUND = BetaWebSearchToolResultBlock(
    type="web_search_tool_result",
    tool_use_id="srvtoolu_1",
    content=[BetaWebSearchResultBlock(type="web_search_result", url="https://meteo.fr", title="Paris", encrypted_content="e1")],
)
_CODE = BetaServerToolUseBlock(type="server_tool_use", id="srvtoolu_2", name="code_execution", input={"code": "print(6*7)"})
_RAN = BetaCodeExecutionToolResultBlock(
    type="code_execution_tool_result",
    tool_use_id="srvtoolu_2",
    content=BetaCodeExecutionResultBlock(type="code_execution_result", stdout="42\n", stderr="", return_code=0, content=[]),
)
_MCP = BetaMCPToolUseBlock(type="mcp_tool_use", id="mcptoolu_1", name="forecast", server_name="weather", input={"city": "Paris"})
_MCP_GOT = BetaMCPToolResultBlock(
    type="mcp_tool_result", tool_use_id="mcptoolu_1", is_error=False, content=[BetaTextBlock(type="text", text="sunny")]
)
_CLIENT_SEARCH = BetaToolUseBlock(type="tool_use", id="toolu_1", name="web_search", input=_QUERY)
_CLIENT_WEATHER = BetaToolUseBlock(type="tool_use", id="toolu_2", name="get_weather", input={"city": "Paris"})


def _text(text: str) -> BetaTextBlock:
    return BetaTextBlock(type="text", text=text)


#: name -> (the answer's blocks, its stop_reason, (tool name, run by the server) of each call, finish reason)
ANSWERS: dict[str, tuple[list[Any], str, list[tuple[str, bool]], str]] = {
    "a web search, then its answer": ([_SEARCH, _FOUND, _text("Sunny.")], "end_turn", [("web_search", True)], "stop"),
    "code run, then its answer": ([_CODE, _RAN, _text("42")], "end_turn", [("code_execution", True)], "stop"),
    "an MCP server's tool, then its answer": (
        [_MCP, _MCP_GOT, _text("Sunny.")],
        "end_turn",
        [("weather/forecast", True)],
        "stop",
    ),
    "the client's own search": ([_text("Let me check."), _CLIENT_SEARCH], "tool_use", [("web_search", False)], "tool_calls"),
    "a web search, then the client's call": (
        [_SEARCH, _FOUND, _CLIENT_WEATHER],
        "tool_use",
        [("web_search", True), ("get_weather", False)],
        "tool_calls",
    ),
    "paused before its search ran": ([_text("Searching."), _SEARCH], "pause_turn", [("web_search", True)], "other"),
}


def _message(blocks: list[Any], stop: str) -> BetaMessage:
    return BetaMessage(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        content=blocks,
        stop_reason=stop,  # type: ignore[arg-type]
        stop_sequence=None,
        stop_details=None,
        usage=BetaUsage(input_tokens=30, output_tokens=9),
    )


def _whole(blocks: list[Any], stop: str) -> list[bytes]:
    body = _message(blocks, stop).to_json(indent=None)
    sdk_shapes.message(json.loads(body), beta=True)  # as sent: built from the SDK's models, checked as any body
    return [body.encode()]


def _events(blocks: list[Any], stop: str) -> list[Any]:
    """The answer as Anthropic streams it: each call started with an empty input then its JSON in
    pieces, each text block empty then its text, a server tool's result whole at its start."""
    head = _message([], stop).model_copy(update={"stop_reason": None, "usage": BetaUsage(input_tokens=30, output_tokens=1)})
    events: list[Any] = [BetaRawMessageStartEvent(type="message_start", message=head)]
    for i, block in enumerate(blocks):
        start, deltas = block, []
        if block.type in ("server_tool_use", "mcp_tool_use", "tool_use"):
            start = block.model_copy(update={"input": {}})
            given = json.dumps(block.input)
            deltas = [BetaInputJSONDelta(type="input_json_delta", partial_json=p) for p in (given[:5], given[5:])]
        elif block.type == "text":
            start = block.model_copy(update={"text": ""})
            deltas = [BetaTextDelta(type="text_delta", text=block.text)]
        elif block.type == "compaction":  # its summary in one delta
            start = block.model_copy(update={"content": None, "encrypted_content": None})
            deltas = [
                BetaCompactionContentBlockDelta(
                    type="compaction_delta", content=block.content, encrypted_content=block.encrypted_content
                )
            ]
        events.append(BetaRawContentBlockStartEvent(type="content_block_start", index=i, content_block=start))
        events += [BetaRawContentBlockDeltaEvent(type="content_block_delta", index=i, delta=d) for d in deltas]
        events.append(BetaRawContentBlockStopEvent(type="content_block_stop", index=i))
    events.append(
        BetaRawMessageDeltaEvent(
            type="message_delta",
            delta=MessageDelta(stop_reason=stop, stop_sequence=None, stop_details=None),  # type: ignore[arg-type]
            usage=BetaMessageDeltaUsage(output_tokens=9),
        )
    )
    events.append(BetaRawMessageStopEvent(type="message_stop"))
    return events


def _stream(blocks: list[Any], stop: str) -> list[bytes]:
    events = _events(blocks, stop)
    snapshot, pieces = None, {}
    for event in events:  # what the SDK's client makes of the stream: the whole message, no less
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=pieces, request_headers=httpx2.Headers())
    assert snapshot is not None and snapshot.to_dict() == _message(blocks, stop).to_dict()
    sent = [e.to_json(indent=None) for e in events]
    for data in sent:
        sdk_shapes.message_event(json.loads(data), beta=True)
    return [f"event: {e.type}\ndata: {data}\n\n".encode() for e, data in zip(events, sent, strict=True)]


def _record(chunks: list[bytes], ctype: str) -> dict[str, Any]:
    return {
        "path": "/v1/messages",
        "status": 200,
        "end": "complete",
        "request_body": json.dumps({**_REQUEST, "stream": ctype == _SSE}).encode(),
        "response_headers": [["content-type", ctype]],
        "chunks": chunks,
    }


def test_calls_anthropic_runs_itself_are_marked_server_and_the_client_s_are_not() -> None:
    for name, (blocks, stop, calls, finish) in ANSWERS.items():
        for how, record in (("whole", _record(_whole(blocks, stop), _JSON)), ("streamed", _record(_stream(blocks, stop), _SSE))):
            out = read_response(record)
            assert [(c["name"], bool(c.get("server"))) for c in out.tool_calls] == calls, (name, how)
            assert out.client_calls == any(not server for _, server in calls), (name, how)
            assert (out.finish_reason, out.finish_reason_raw) == (finish, stop), (name, how)


def test_a_paused_answer_cut_past_the_response_limit_reads_its_pause_from_the_tail() -> None:
    """A turn Anthropic paused is not finished, whether read whole or from a cut answer's kept tail."""
    blocks = [_text("Searching. " * 10000), _SEARCH]
    body = b"".join(_stream(blocks, "pause_turn"))
    head, tail = body[:1024], body[-RESPONSE_TAIL_BYTES:]
    assert len(head) + len(tail) < len(body)
    cut = {**_record([head], _SSE), "response_body_size": len(body), "response_tail": tail}
    got = tail_usage(cut)
    assert got is not None and (got.finish_reason, got.finish_reason_raw) == ("other", "pause_turn")
    assert read_response(_record([body], _SSE)).finish_reason == "other"


def _compared(tmp_path: Path, a: list[bytes], b: list[bytes], ctype: str = _SSE) -> dict[str, Any]:
    """A's and B's answers to the same request compared: the divergence."""
    request = ("/v1/messages", {**_REQUEST, "stream": ctype == _SSE}, ctype)
    first, second = pair_captures(tmp_path, {"pair": (request, a, b)})
    return compare(first, second, top=1)["divergence"]


def test_compare_tells_a_search_anthropic_ran_from_the_client_s_search_of_the_same_name(tmp_path: Path) -> None:
    """The same text, then a call of ``web_search`` with the same input: Anthropic's own search on
    one side (paused before it ran), on the other the client's tool of that name (a replay on an
    engine that runs no server tools). Compare called the calls equal and the outputs identical."""
    paused = _stream([_text("Searching."), _SEARCH], "pause_turn")
    client = _stream([_text("Searching."), _CLIENT_SEARCH], "tool_use")
    d = _compared(tmp_path / "differ", paused, client)
    assert d["counts"]["tool_calls_differ"] == 1 and d["exact_match_rate"] == 0, d["counts"]
    (item,) = d["most_divergent"]
    calls = item["tool_calls"]
    assert (calls["a"], calls["b"], calls["names_equal"], calls["arguments_equal"]) == (
        ["web_search"],
        ["web_search"],
        True,
        True,
    )
    assert not calls["equal"] and calls["server"] == [[0], []]
    assert item["similarity"] < 1 and item["first_divergence"]["at"] is not None
    assert item["diff"] == 'Searching.\n[-server: -]web_search({"query":"weather Paris"})'  # the mark is what differs
    assert item["finish_reason_raw"] == ["pause_turn", "tool_use"]


def test_compare_tells_a_paused_turn_from_the_finished_one(tmp_path: Path) -> None:
    """The same blocks, paused (the client must send them back) or ended: not the same answer."""
    blocks = [_SEARCH, _FOUND, _text("Sunny.")]
    d = _compared(tmp_path / "paused", _stream(blocks, "end_turn"), _stream(blocks, "pause_turn"))
    assert d["counts"]["finish_reason_changed"] == 1 and d["exact_match_rate"] == 0, d["counts"]
    (item,) = d["most_divergent"]
    assert (item["finish_reason"], item["finish_reason_raw"]) == (["stop", "other"], ["end_turn", "pause_turn"])
    assert item["tool_calls"]["equal"]  # the calls themselves agree


def test_compare_matches_the_same_server_calls(tmp_path: Path) -> None:
    names = ("a web search, then its answer", "an MCP server's tool, then its answer", "paused before its search ran")
    for i, name in enumerate(names):
        blocks, stop, _, _ = ANSWERS[name]
        for how, ctype, answer in (("streamed", _SSE, _stream), ("whole", _JSON, _whole)):
            d = _compared(tmp_path / f"{i}-{how}", answer(blocks, stop), answer(blocks, stop), ctype)
            assert d["exact_match_rate"] == 1 and not d["counts"].get("tool_calls_differ"), (name, how, d["counts"])


# -- programmatic tool calling: a client tool called by the model's code ---------------------------------

_RUN_CODE = BetaServerToolUseBlock(
    type="server_tool_use", id="srvtoolu_3", name="code_execution", input={"code": "await get_weather(city='Paris')"}
)


def _from_code(tool_id: str = "srvtoolu_3", call_id: str = "toolu_3") -> BetaToolUseBlock:
    """The client's get_weather called by the code of ``tool_id`` (Anthropic's programmatic tool calling)."""
    caller = BetaServerToolCaller(type="code_execution_20250825", tool_id=tool_id)
    return BetaToolUseBlock(type="tool_use", id=call_id, name="get_weather", input={"city": "Paris"}, caller=caller)


def _direct(call_id: str = "toolu_3") -> BetaToolUseBlock:
    """The same call made by the model itself, saying so (``caller: {"type": "direct"}``)."""
    return BetaToolUseBlock(
        type="tool_use", id=call_id, name="get_weather", input={"city": "Paris"}, caller=BetaDirectCaller(type="direct")
    )


def test_a_call_made_by_code_keeps_its_caller_and_is_still_the_client_s() -> None:
    """The client runs a call its code made (its result goes back to the code): a client call, with its caller."""
    blocks = [_RUN_CODE, _from_code()]
    for how, record in (
        ("whole", _record(_whole(blocks, "tool_use"), _JSON)),
        ("streamed", _record(_stream(blocks, "tool_use"), _SSE)),
    ):
        out = read_response(record)
        assert [(c["name"], bool(c.get("server")), c.get("caller")) for c in out.tool_calls] == [
            ("code_execution", True, None),
            ("get_weather", False, {"type": "code_execution_20250825", "tool_id": "srvtoolu_3"}),
        ], how
        assert out.client_calls and out.finish_reason == "tool_calls", how
    # The model's own call, saying "direct" or nothing: no caller.
    for block in (_direct(), _CLIENT_WEATHER):
        assert "caller" not in read_response(_record(_whole([block], "tool_use"), _JSON)).tool_calls[0]


def test_compare_tells_a_call_made_by_code_from_the_model_s_own(tmp_path: Path) -> None:
    """The same code run, then get_weather of the same input: made by that code on A, by the model
    on B. Compare called the calls equal and the answers identical."""
    by_code = _stream([_RUN_CODE, _from_code()], "tool_use")
    by_model = _stream([_RUN_CODE, _direct()], "tool_use")
    d = _compared(tmp_path / "differ", by_code, by_model)
    assert d["counts"]["tool_calls_differ"] == 1 and d["exact_match_rate"] == 0, d["counts"]
    (item,) = d["most_divergent"]
    calls = item["tool_calls"]
    assert calls["names_equal"] and calls["arguments_equal"] and not calls["equal"]
    assert calls["callers"] == [[None, "code_execution_20250825 (call 0)"], [None, None]]
    assert item["diff"].endswith('get_weather({"city":"Paris"})[- from code_execution_20250825 (call 0)-]'), item["diff"]
    # Must differ: made by the code of another call of the answer (the second code run, not the first).
    second = BetaServerToolUseBlock(type="server_tool_use", id="srvtoolu_4", name="code_execution", input={"code": "pass"})
    first_run = _stream([_RUN_CODE, second, _from_code("srvtoolu_3")], "tool_use")
    second_run = _stream([_RUN_CODE, second, _from_code("srvtoolu_4")], "tool_use")
    d = _compared(tmp_path / "other-code", first_run, second_run)
    assert d["counts"]["tool_calls_differ"] == 1, d["counts"]


def test_compare_matches_calls_made_by_the_same_code(tmp_path: Path) -> None:
    """Must match: the same code's call on both sides, though each answer's ids are its own (a replay's
    are new); the model's call saying "direct" against one saying nothing; and a call of code an
    earlier answer started (its id in the request), the same id on both sides."""
    a = _stream([_RUN_CODE, _from_code()], "tool_use")
    renamed = _RUN_CODE.model_copy(update={"id": "srvtoolu_9"})
    b = _stream([renamed, _from_code("srvtoolu_9", "toolu_9")], "tool_use")
    cases = {
        "same code, new ids": (a, b),
        "direct or unsaid": (_stream([_direct()], "tool_use"), _stream([_CLIENT_WEATHER], "tool_use")),
        "code of an earlier answer": (
            _stream([_from_code("srvtoolu_0")], "tool_use"),
            _stream([_from_code("srvtoolu_0", "toolu_8")], "tool_use"),
        ),
    }
    for i, (name, (x, y)) in enumerate(cases.items()):
        d = _compared(tmp_path / str(i), x, y)
        assert d["exact_match_rate"] == 1 and not d["counts"].get("tool_calls_differ"), (name, d["counts"])
    # Must differ: code of an earlier answer, another one on B.
    d = _compared(
        tmp_path / "earlier", _stream([_from_code("srvtoolu_0")], "tool_use"), _stream([_from_code("srvtoolu_7")], "tool_use")
    )
    assert d["counts"]["tool_calls_differ"] == 1, d["counts"]
    (item,) = d["most_divergent"]
    assert item["tool_calls"]["callers"] == [["code_execution_20250825 (srvtoolu_0)"], ["code_execution_20250825 (srvtoolu_7)"]]


# -- context management: paused after compacting the context -------------------------------------------

_COMPACTED = BetaCompactionBlock(type="compaction", content="The user asked about the weather in Paris.", encrypted_content="e2")


def test_every_stop_reason_anthropic_says_has_its_common_word() -> None:
    """Each stop_reason of the SDK's (beta) Messages: "compaction" fell through to "other" unlisted."""
    assert set(get_args(BetaStopReason)) <= Messages.finish_map.keys()
    assert Messages().finish("compaction", False) == "other"  # the turn is not over: never a stop


def test_an_answer_paused_after_compaction_is_unfinished_and_keeps_its_summary(tmp_path: Path) -> None:
    """Anthropic compacted the context and paused (pause_after_compaction): the answer is the summary,
    its client sends it back to go on. Other, not stop, whole, streamed and from a cut answer's tail;
    the compaction block kept whole (what the client sends back)."""
    whole = read_response(_record(_whole([_COMPACTED], "compaction"), _JSON))
    streamed = read_response(_record(_stream([_COMPACTED], "compaction"), _SSE))
    for out in (whole, streamed):
        assert (out.finish_reason, out.finish_reason_raw) == ("other", "compaction")
        assert not out.tool_calls and out.text == ""
        assert len(out.others) == 1 and "The user asked about the weather in Paris." in out.others[0]
    assert whole.others == streamed.others
    body = b"".join(_stream([_text("Noted. " * 10000), _COMPACTED], "compaction"))
    cut = {**_record([body[:1024]], _SSE), "response_body_size": len(body), "response_tail": body[-RESPONSE_TAIL_BYTES:]}
    got = tail_usage(cut)
    assert got is not None and (got.finish_reason, got.finish_reason_raw) == ("other", "compaction")
    # Must differ: the same summary, paused on one side, the turn ended on the other.
    d = _compared(tmp_path / "paused", _stream([_COMPACTED], "end_turn"), _stream([_COMPACTED], "compaction"))
    assert d["counts"]["finish_reason_changed"] == 1, d["counts"]
    # Must match: paused after the same compaction on both sides.
    d = _compared(tmp_path / "same", _stream([_COMPACTED], "compaction"), _stream([_COMPACTED], "compaction"))
    assert d["exact_match_rate"] == 1, d["counts"]


# -- toolsets: two toolsets' tools of one name ---------------------------------------------------------


def _typed(toolset: str | None, call_id: str = "toolu_5") -> BetaToolUseBlock:
    """A ``type`` of "hello": in the browser toolset's, the computer toolset's, or a client tool of that name (None)."""
    block = BetaToolUseBlock(type="tool_use", id=call_id, name="type", input={"text": "hello"}, toolset_name=toolset)
    member = {"browser": BetaBrowserTypeToolUseBlock, "computer": BetaComputerTypeToolUseBlock}.get(toolset or "")
    if member is not None:  # the shape the SDK gives that toolset's member, no other
        assert member.model_validate(block.to_dict()).to_dict() == block.to_dict()
    return block


def test_a_call_of_a_toolset_s_tool_keeps_its_toolset() -> None:
    """The browser's ``type`` keeps ``toolset_name`` with the call, whole and streamed; a tool of no toolset has none."""
    for how, answer, ctype in (("whole", _whole, _JSON), ("streamed", _stream, _SSE)):
        out = read_response(_record(answer([_typed("browser"), _typed(None, "toolu_6")], "tool_use"), ctype))
        assert [(c["name"], c.get("toolset")) for c in out.tool_calls] == [("type", "browser"), ("type", None)], how
        assert "toolset" not in out.tool_calls[1] and out.finish_reason == "tool_calls", how


def test_compare_tells_the_browser_s_tool_from_the_computer_s_of_the_same_name(tmp_path: Path) -> None:
    """``type`` "hello" in the browser on A, on the computer's screen on B (or a client tool named
    ``type`` on B): two calls. Compare called them equal and the answers identical."""
    for how, answer, ctype in (("streamed", _stream, _SSE), ("whole", _whole, _JSON)):
        for other in ("computer", None):
            a, b = answer([_typed("browser")], "tool_use"), answer([_typed(other)], "tool_use")
            d = _compared(tmp_path / f"{how}-{other}", a, b, ctype)
            assert d["counts"]["tool_calls_differ"] == 1 and d["exact_match_rate"] == 0, (how, other, d["counts"])
            (item,) = d["most_divergent"]
            calls = item["tool_calls"]
            assert calls["names_equal"] and calls["arguments_equal"] and not calls["equal"], (how, other)
            assert calls["toolsets"] == [["browser"], [other]], (how, other)
            mark = "[-browser/-]" if other is None else "[-browser-]{+computer+}/"  # the toolset is what differs
            assert item["diff"] == f'\n{mark}type({{"text":"hello"}})', item["diff"]


def test_compare_matches_calls_of_the_same_toolset_s_tool(tmp_path: Path) -> None:
    """Must match: the browser's ``type`` on both sides, each answer's id its own; a client tool on both."""
    for how, answer, ctype in (("streamed", _stream, _SSE), ("whole", _whole, _JSON)):
        for toolset in ("browser", None):
            a, b = answer([_typed(toolset)], "tool_use"), answer([_typed(toolset, "toolu_9")], "tool_use")
            d = _compared(tmp_path / f"{how}-{toolset}", a, b, ctype)
            assert d["exact_match_rate"] == 1 and not d["counts"].get("tool_calls_differ"), (how, toolset, d["counts"])


# -- blocks kept whole: the model falling back to another, an MCP server's tool listing, a file made --------


def _fell_back(declined: str, category: str = "cyber") -> BetaFallbackBlock:
    """The model ``declined`` (``category``), and the answer's model wrote what follows (the SDK's
    accumulator makes the fallback's ``to`` the message's model)."""
    hop = {"from": {"model": declined}, "to": {"model": "claude-sonnet-4-5"}}
    return BetaFallbackBlock.model_validate({"type": "fallback", **hop, "trigger": {"type": "refusal", "category": category}})


def _listed(tool: str) -> BetaMCPToolListingBlock:
    return BetaMCPToolListingBlock(
        type="mcp_tool_listing", mcp_server_name="weather", tools=[BetaMCPTool(name=tool, input_schema={"type": "object"})]
    )


#: name -> (a block kept whole, another of its type: the answers' only difference)
_KEPT = {
    "fallback, from another model": (_fell_back("claude-opus-4-7"), _fell_back("claude-opus-4-6")),
    "fallback, for another reason": (_fell_back("claude-opus-4-7"), _fell_back("claude-opus-4-7", "bio")),
    "an MCP server's tools": (_listed("forecast"), _listed("alerts")),
    "a file its container made": (
        BetaContainerUploadBlock(type="container_upload", file_id="file_1"),
        BetaContainerUploadBlock(type="container_upload", file_id="file_2"),
    ),
}


def test_a_block_kept_whole_is_read_alike_whole_and_streamed() -> None:
    for name, (block, _) in _KEPT.items():
        blocks = [block, _text("Sunny.")]
        whole = read_response(_record(_whole(blocks, "end_turn"), _JSON))
        streamed = read_response(_record(_stream(blocks, "end_turn"), _SSE))
        assert whole.others == streamed.others and len(whole.others) == 1, name
        assert json.loads(whole.others[0])["type"] == block.type and whole.text == streamed.text == "Sunny.", name


def test_compare_tells_answers_apart_by_a_block_kept_whole(tmp_path: Path) -> None:
    """The same text after a fallback from another model (or for another reason), another MCP server's
    tools, another file: not the same answer. Must match: the same block on both sides."""
    for i, (name, (block, other)) in enumerate(_KEPT.items()):
        for how, answer, ctype in (("streamed", _stream, _SSE), ("whole", _whole, _JSON)):
            a, b = answer([block, _text("Sunny.")], "end_turn"), answer([other, _text("Sunny.")], "end_turn")
            d = _compared(tmp_path / f"{i}-{how}-differ", a, b, ctype)
            assert d["exact_match_rate"] == 0 and d["most_divergent"][0]["similarity"] < 1, (name, how, d["counts"])
            same = answer([block, _text("Sunny.")], "end_turn")
            d = _compared(tmp_path / f"{i}-{how}-same", a, same, ctype)
            assert d["exact_match_rate"] == 1, (name, how, d["counts"])
