"""Bedrock's ``/converse-stream``: its AWS event-stream frames read event by event, each at the chunk
its last byte came in; a frame cut short or damaged read up to it and said so; an exception message
an error; and a Converse request's model (in its path) and model-specific settings
(``additionalModelRequestFields``) read as any other API's.

The frames are built by tests.eventstream_frames with struct and zlib alone (no reader of
infertap's), as AWS documents them, and sent in chunks cut at awkward places (inside a prelude,
inside a payload)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.apis import read_request, read_response, stream_done
from tests.analysis_builders import Load, exchange
from tests.eventstream_frames import (
    EVENTSTREAM,
    JSON,
    answer_frames,
    awkward,
    chunk_of_end,
    event_frame,
    exception_frame,
    message_frame,
    text_frame,
    typed_header,
)
from tests.helpers import enrich_with_a_dead_engine, pair_captures, write_capture

_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
_BODY = {
    "messages": [{"role": "user", "content": [{"text": "What is 17 + 25?"}]}],
    "inferenceConfig": {"maxTokens": 64, "temperature": 0},
    "additionalModelRequestFields": {"top_k": 40},
}


def _record(chunks: list[bytes], path: str = _PATH, body: dict[str, Any] = _BODY) -> dict[str, Any]:
    return {
        "path": path,
        "request_body": json.dumps(body).encode(),
        "request_headers": [["content-type", JSON]],
        "response_headers": [["content-type", EVENTSTREAM]],
        "chunks": chunks,
    }


def test_a_converse_stream_is_read_event_by_event_at_the_chunk_of_its_last_byte(load: Load) -> None:
    frames = [
        event_frame("messageStart", {"role": "assistant"}),
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Add them."}}}),
        event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "c2ln"}}}),
        text_frame(1, "It is "),
        text_frame(1, "42."),
        event_frame(
            "contentBlockStart", {"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "calc"}}}
        ),
        event_frame("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '{"a": 1'}}}),
        event_frame("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"toolUse": {"input": '7, "b": 25}'}}}),
        event_frame("contentBlockStop", {"contentBlockIndex": 2}),
        event_frame("messageStop", {"stopReason": "tool_use"}),
        event_frame(
            "metadata",
            {"usage": {"inputTokens": 21, "outputTokens": 9, "cacheReadInputTokens": 5}, "metrics": {"latencyMs": 812}},
        ),
    ]
    chunks = awkward(frames)
    assert len(chunks) == len(frames) and b"".join(chunks) == b"".join(frames)
    record = _record(chunks)
    out = read_response(record)
    assert out.readable and out.error is None and out.error_message is None and out.streamed
    assert (out.text, out.reasoning) == ("It is 42.", "Add them.")
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in out.tool_calls] == [
        ("tooluse_1", "calc", {"a": 17, "b": 25})
    ]
    assert (out.finish_reason, out.finish_reason_raw) == ("tool_calls", "tool_use")
    assert (out.prompt_tokens, out.cached_tokens, out.output_tokens) == (21 + 5, 5, 9)  # inputTokens leave the cache's out
    assert [e.chunk for e in out.events] == [chunk_of_end(chunks, frames, k) for k in range(len(frames))]
    assert stream_done(chunks, out) and out.invalid_utf8 == []

    times = [10.0 * (i + 1) for i in range(len(chunks))]
    a = load(
        [
            exchange(
                "x",
                chunks=list(zip(times, chunks, strict=True)),
                request=record["request_body"],
                path=_PATH,
                headers=record["response_headers"],
            )
        ]
    )
    [m] = a.query("SELECT * FROM metrics WHERE exchange_id = 'x'").records()
    assert m["api"] == "bedrock-converse-stream" and m["readable"] is True and m["ok"] is True and m["unfinished"] is False
    assert m["model"] == _MODEL and m["finish_reason"] == "tool_calls"
    # the frames that carry reasoning, text, a tool use's name (its start, as a chat call's first piece) or its input
    bearing = [1, 3, 4, 5, 6, 7]
    at = [times[chunk_of_end(chunks, frames, k)] * 1e6 for k in bearing]
    assert m["ttft_ns"] == at[0] and m["ttft_content_ns"] == at[1] and m["t_last_token_ns"] == at[-1]
    assert (m["output_tokens"], m["output_tokens_source"], m["token_events"]) == (9, "usage", len(bearing))
    assert m["tpot_ns"] == (times[chunk_of_end(chunks, frames, 9)] * 1e6 - at[0]) / (9 - 1)  # the finish event ends the span
    gaps = [r["gap_ns"] for r in a.query("SELECT gap_ns FROM itl WHERE exchange_id = 'x'").records()]
    assert sorted(gaps) == sorted(b - a_ for a_, b in itertools.pairwise(sorted(set(at))))
    assert (m["server_total_ns"], m["server_timings_source"]) == (812_000_000, "Bedrock metrics.latencyMs (server-measured)")


def test_prompt_tokens_hold_the_cache_s_reads_and_writes(load: Load) -> None:
    """Bedrock's ``inputTokens`` leave out the tokens read from and written to its cache (its
    ``totalTokens`` adds them back): the prompt is all three, cached tokens the reads, whole or streamed."""
    fresh, read, written, output = 368, 10536, 240, 19
    usage = {
        "inputTokens": fresh,
        "outputTokens": output,
        "totalTokens": fresh + read + written + output,
        "cacheReadInputTokens": read,
        "cacheWriteInputTokens": written,
    }
    streamed = [*answer_frames("4")[:-1], event_frame("metadata", {"usage": usage})]
    whole = {"output": {"message": {"role": "assistant", "content": [{"text": "4"}]}}, "stopReason": "end_turn", "usage": usage}
    bare = {**whole, "usage": {"inputTokens": fresh, "outputTokens": output, "totalTokens": fresh + output}}
    cases = {
        "streamed": (_PATH, streamed, EVENTSTREAM, fresh + read + written, read),
        "whole": (_PATH.replace("-stream", ""), [json.dumps(whole).encode()], JSON, fresh + read + written, read),
        "no cache": (_PATH.replace("-stream", ""), [json.dumps(bare).encode()], JSON, fresh, None),
    }
    for name, (path, chunks, ctype, prompt, cached) in cases.items():
        record = {**_record(chunks, path), "response_headers": [["content-type", ctype]]}
        out = read_response(record)
        assert (out.prompt_tokens, out.cached_tokens, out.output_tokens) == (prompt, cached, output), name
        assert out.prompt_tokens + out.output_tokens == out.usage["totalTokens"], name  # as Bedrock totals them
    a = load(
        [
            exchange(
                name,
                chunks=[(10.0, c) for c in chunks],
                request=json.dumps(_BODY).encode(),
                path=path,
                headers=[["content-type", ctype]],
            )
            for name, (path, chunks, ctype, _, _) in cases.items()
        ]
    )
    rows = a.query("SELECT exchange_id, prompt_tokens, cached_tokens FROM metrics ORDER BY exchange_id").records()
    assert {r["exchange_id"]: (r["prompt_tokens"], r["cached_tokens"]) for r in rows} == {
        name: (prompt, cached) for name, (_, _, _, prompt, cached) in cases.items()
    }


def test_a_cut_or_damaged_frame_is_read_up_to_it_and_said_so(load: Load) -> None:
    whole = answer_frames("4", "2")
    body = b"".join(whole)
    third = len(whole[0]) + len(whole[1])  # where the third message (the first text) starts
    fourth = third + len(whole[2])
    flipped = bytearray(body)
    flipped[fourth - 8] ^= 0x20  # a byte of the third message's payload: its message CRC no longer checks
    prelude = bytearray(body)
    prelude[fourth + 2] ^= 0x01  # the fourth message's total length: its prelude CRC no longer checks
    cases = {
        "torn in its payload": ([body[:third], body[third : fourth - 7]], "message 3 torn", ""),
        "torn in its prelude": ([body[: fourth + 5]], "message 4 torn", "4"),
        "message CRC": ([bytes(flipped[:40]), bytes(flipped[40:])], "message 3 at byte", ""),
        "prelude CRC": ([bytes(prelude)], "message 4 at byte", "4"),
    }
    for name, (chunks, why, text) in cases.items():
        out = read_response(_record(chunks))
        assert out.error is not None and out.error.startswith("the event stream was cut: " + why), (name, out.error)
        assert out.readable and out.text == text and out.finish_reason is None, name
        assert out.unparsed == [b"".join(chunks)[(third if text == "" else fourth) :].decode("latin-1")], name
        assert not stream_done(chunks, out), name
    out = read_response(_record([body[:third], body[third:]]))
    assert out.error is None and out.text == "42" and out.unparsed == [] and stream_done([body], out)  # whole: nothing cut

    torn = load(
        [
            exchange(
                "x",
                chunks=[(10.0, body[:third]), (20.0, body[third : fourth - 7])],
                request=json.dumps(_BODY).encode(),
                path=_PATH,
                headers=[["content-type", EVENTSTREAM]],
            )
        ]
    )
    [m] = torn.query("SELECT * FROM metrics WHERE exchange_id = 'x'").records()
    assert m["readable"] is True and m["ok"] is False and m["unfinished"] is True  # ended cleanly with no stop reason
    assert m["parse_error"].startswith("the event stream was cut")
    assert torn.query("SELECT stream_done FROM exchanges WHERE exchange_id = 'x'").records() == [{"stream_done": False}]


def test_an_exception_message_is_an_error_answer(load: Load) -> None:
    frames = [*answer_frames("4")[:3], exception_frame("modelStreamErrorException", "The model failed mid-stream.")]
    out = read_response(_record(frames))
    assert out.readable and out.error is None and out.text == "4"
    assert out.error_message == "modelStreamErrorException: The model failed mid-stream." and out.finish_reason == "error"
    framing_error = message_frame({":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b"")
    out = read_response(_record([*answer_frames("4")[:3], framing_error]))
    assert out.error_message == "InternalFailure: boom" and out.finish_reason == "error"
    # the same words in headers of another value type (bytes): read as those words, not a crash
    odd = message_frame({":message-type": "error"}, b"", typed_header(":error-code", 6, b"InternalFailure"))
    out = read_response(_record([*answer_frames("4")[:3], odd]))
    assert out.error_message is not None and out.error_message.startswith("InternalFailure: ") and out.finish_reason == "error"
    a = load(
        [
            exchange(
                "x",
                chunks=[(10.0 * (i + 1), f) for i, f in enumerate(frames)],
                request=json.dumps(_BODY).encode(),
                path=_PATH,
                headers=[["content-type", EVENTSTREAM]],
            )
        ]
    )
    [m] = a.query("SELECT * FROM metrics WHERE exchange_id = 'x'").records()
    assert m["ok"] is False and m["finish_reason"] == "error" and m["parse_error"] is None


_STREAMED = (_PATH, _BODY, EVENTSTREAM)


def test_converse_streams_that_differ_differ_and_the_same_match(tmp_path: Path) -> None:
    whole = answer_frames("4", "2")
    body = b"".join(whole)
    differ = {
        "text": (_STREAMED, awkward(whole), awkward(answer_frames("4", "3"))),
        "stop": (_STREAMED, awkward(whole), awkward(answer_frames("4", "2", stop="max_tokens"))),
        "torn": (_STREAMED, awkward(whole), [body[:-3]]),
    }
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=3)["divergence"]
    assert d["counts"].get("exact", 0) == 0, d["counts"]
    assert sum(r["read_both"] for r in d["readable"].values()) == 3
    # Its latency, its padding (so every CRC) and its chunking new on every run: the same answer all the same.
    same = {"text": (_STREAMED, awkward(whole), [b"".join(answer_frames("4", "2", latency=300, pad="abcdefghijk"))])}
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 1 and sum(r["read_both"] for r in d["readable"].values()) == 1


def test_a_converse_request_s_model_is_its_path_s() -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-haiku-20240307-v1:0"
    encoded = arn.replace(":", "%3A").replace("/", "%2F")
    for route in ("converse", "converse-stream"):
        assert read_request(_record([], f"/model/{encoded}/{route}")).model == arn
        assert read_request(_record([], f"/gateway/model/{_MODEL}/{route}?x=1")).model == _MODEL
    assert read_request(_record([], _PATH)).model != read_request(_record([], _PATH.replace("haiku", "sonnet"))).model
    for route in ("converse", "converse-stream"):  # an ARN whose '/' came unencoded: the whole ARN, as encoded
        raw = read_request(_record([], f"/gw/model/{arn}/{route}?x=1")).model
        assert raw == read_request(_record([], f"/model/{encoded}/{route}")).model == arn
        assert read_request(_record([], f"/model/{arn.replace('haiku', 'sonnet')}/{route}")).model != raw
    assert read_request(_record([], "/v1/chat/completions", {**_BODY, "model": "m"})).model == "m"  # others' in the body still


def test_additional_model_request_fields_are_settings(tmp_path: Path) -> None:
    asked = read_request(_record([]))
    assert asked.sampling == {"max_tokens": 64, "temperature": 0, "top_k": 40}
    both = {**_BODY, "additionalModelRequestFields": {"top_k": 40, "temperature": 1, "thinking": {"type": "enabled"}}}
    assert read_request(_record([], body=both)).sampling["temperature"] == 0  # inferenceConfig's is the one Bedrock reads
    frames = answer_frames("4", "2")
    for name, top_k, differs in (("differ", 1, True), ("same", 40, False)):
        # B replays A's request (its source_id), with top_k set as a replay's --set would
        body_b = {**_BODY, "additionalModelRequestFields": {"top_k": top_k}}
        rows = _top_k_rows(tmp_path / name, _PATH, _BODY, body_b, frames, differs)
        if differs:
            assert rows[0]["a"].startswith("40") and rows[0]["b"].startswith("1"), rows


def _top_k_rows(at: Path, path: str, body_a: dict, body_b: dict, frames: list[bytes], differs: bool) -> list[dict]:
    """Compare's top_k rows of A asked ``body_a`` and B, its replay, ``body_b``: the only settings that
    differ where ``differs``, none where not."""
    a, b = at / "a", at / "b"
    write_capture(a, [{"id": "x", "path": path, "body": body_a, "chunks": frames, "content_type": EVENTSTREAM}])
    write_capture(b, [{"id": "y", "source_id": "x", "path": path, "body": body_b, "chunks": frames, "content_type": EVENTSTREAM}])
    for side in (a, b):
        enrich_with_a_dead_engine(side)
    settings = compare(a, b, top=1)["config"]["settings"]
    rows = [r for r in settings if r["setting"] == "top_k"]
    assert bool(rows) is differs and len(settings) == len(rows), (at, settings)
    return rows


def test_amazon_nova_s_top_k_nested_in_an_inference_config_is_a_setting(tmp_path: Path) -> None:
    """Amazon Nova takes its ``topK`` in an ``inferenceConfig`` nested in ``additionalModelRequestFields``
    (Bedrock's Nova guide): read as ``top_k``, so runs at 5 and 50 differ and runs at one match."""
    path = "/model/us.amazon.nova-lite-v1%3A0/converse-stream"

    def nova(top_k: int) -> dict[str, Any]:
        return {**_BODY, "additionalModelRequestFields": {"inferenceConfig": {"topK": top_k}}}

    assert read_request(_record([], path, nova(5))).sampling == {"max_tokens": 64, "temperature": 0, "top_k": 5}
    frames = answer_frames("4", "2")
    for name, top_k, differs in (("differ", 50, True), ("same", 5, False)):
        rows = _top_k_rows(tmp_path / name, path, nova(5), nova(top_k), frames, differs)
        if differs:
            assert rows[0]["a"].startswith("5") and rows[0]["b"].startswith("50"), rows


def test_every_cut_and_every_flipped_bit_is_read_up_to_it_never_a_crash() -> None:
    """Cut at each byte, the stream reads as the whole messages before the cut and says it was cut;
    a bit flipped anywhere fails a CRC (CRC32 catches every one-bit error), never read as other words."""
    whole = answer_frames("4", "2")
    body = b"".join(whole)
    ends = list(itertools.accumulate(map(len, whole)))
    for cut in range(len(body)):
        out = read_response(_record([body[:cut]] if cut else []))
        held = sum(end <= cut for end in ends)  # the messages whole before the cut
        assert len(out.events) == held, cut
        assert out.text == "42"[: max(0, held - 2)], cut
        assert (out.error or "").startswith("the event stream was cut") is (cut not in (0, *ends)), (cut, out.error)
    for at in range(len(body)):
        for bit in range(8):
            damaged = bytearray(body)
            damaged[at] ^= 1 << bit
            out = read_response(_record([bytes(damaged)]))
            assert out.error is not None and out.error.startswith("the event stream was cut"), (at, bit)
            assert "42".startswith(out.text), (at, bit)


def _blocks(*blocks: list[bytes], stop: str = "end_turn", pad: str = "abc") -> list[bytes]:
    """A whole answer of the blocks given (each its events), then its stop reason and usage."""
    usage = {"usage": {"inputTokens": 21, "outputTokens": 2, "totalTokens": 23}, "metrics": {"latencyMs": 90}}
    return [
        event_frame("messageStart", {"role": "assistant"}, pad),
        *itertools.chain.from_iterable(blocks),
        event_frame("messageStop", {"stopReason": stop}, pad),
        event_frame("metadata", usage, pad),
    ]


def _text_block(i: int, text: str, *cited: dict[str, Any], pad: str = "abc") -> list[bytes]:
    citations = (event_frame("contentBlockDelta", {"contentBlockIndex": i, "delta": {"citation": c}}, pad) for c in cited)
    return [text_frame(i, text, pad), *citations, event_frame("contentBlockStop", {"contentBlockIndex": i}, pad)]


def _tool_block(i: int, given: str, pad: str = "abc") -> list[bytes]:
    start = {"contentBlockIndex": i, "start": {"toolUse": {"toolUseId": f"tooluse_{pad}", "name": "calc"}}}
    return [
        event_frame("contentBlockStart", start, pad),
        event_frame("contentBlockDelta", {"contentBlockIndex": i, "delta": {"toolUse": {"input": given}}}, pad),
        event_frame("contentBlockStop", {"contentBlockIndex": i}, pad),
    ]


def _image_block(i: int, said: str, pad: str = "abc") -> list[bytes]:
    """A block of a type not read (an image's, as Bedrock's ContentBlockDelta may carry)."""
    return [
        event_frame("contentBlockStart", {"contentBlockIndex": i, "start": {"image": {"format": "png"}}}, pad),
        event_frame("contentBlockDelta", {"contentBlockIndex": i, "delta": {"image": {"source": {"bytes": said}}}}, pad),
        event_frame("contentBlockStop", {"contentBlockIndex": i}, pad),
    ]


def test_converse_streams_differing_in_a_source_cited_a_block_s_place_or_an_unread_block_differ(tmp_path: Path) -> None:
    """Text citing its sources (``citation`` deltas), the order of the answer's blocks and a block of a
    type not read: two streams differing there alone are not one answer; the same sent in other chunks,
    with other ids and padding, are."""
    source = {"title": "Q3 report", "sourceContent": [{"text": "revenue grew 4%"}], "location": {"documentPage": {"start": 2}}}
    other = {**source, "location": {"documentPage": {"start": 7}}}
    args = '{"a": 17, "b": 25}'
    differ = {
        "cited": (_STREAMED, _blocks(_text_block(0, "It grew.", source)), _blocks(_text_block(0, "It grew.", other))),
        "uncited": (_STREAMED, _blocks(_text_block(0, "It grew.", source)), _blocks(_text_block(0, "It grew."))),
        "order": (
            _STREAMED,
            _blocks(_text_block(0, "Adding."), _tool_block(1, args)),
            _blocks(_tool_block(0, args), _text_block(1, "Adding.")),
        ),
        "image": (_STREAMED, _blocks(_image_block(0, "iVBORw0KGgoA")), _blocks(_image_block(0, "iVBORw0KGgoB"))),
    }
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=len(differ))["divergence"]
    assert d["counts"].get("exact", 0) == 0, d["counts"]
    assert sum(r["read_both"] for r in d["readable"].values()) == len(differ)
    same = {
        name: (_STREAMED, awkward(_blocks(*blocks)), [b"".join(_blocks(*again))])
        for name, blocks, again in (
            ("cited", [_text_block(0, "It grew.", source)], [_text_block(0, "It grew.", source, pad="xyzzy")]),
            (
                "order",
                [_text_block(0, "Adding."), _tool_block(1, args)],
                [_text_block(0, "Adding.", pad="q"), _tool_block(1, args, "q")],
            ),
            ("image", [_image_block(0, "iVBORw0KGgoA")], [_image_block(0, "iVBORw0KGgoA", pad="zz")]),
        )
    }
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=len(same))["divergence"]
    assert d["exact_match_rate"] == 1 and sum(r["read_both"] for r in d["readable"].values()) == len(same)
    out = read_response(_record(_blocks(_text_block(0, "Adding.", source), _tool_block(1, args), _image_block(2, "iVBO"))))
    assert out.text == "Adding." and out.layout == ["text:7+1", "toolUse", "image"] and len(out.citations) == 1
    assert len(out.others) == 1 and "iVBO" in out.others[0]


def test_converse_answers_ended_by_another_stop_sequence_differ(tmp_path: Path) -> None:
    """Where the request asked for it (``additionalModelResponseFieldPaths``), the stop sequence that
    ended the answer comes in ``additionalModelResponseFields`` (streamed under ``delta``): two answers
    of the same text ended by another one are not one answer; by the same one they are."""

    def streamed(stop: str) -> list[bytes]:
        frames = answer_frames("4", "2", stop="stop_sequence")
        fields = {"delta": {"stop_sequence": stop}}
        frames[-2] = event_frame("messageStop", {"stopReason": "stop_sequence", "additionalModelResponseFields": fields})
        return frames

    def whole(stop: str) -> list[bytes]:
        said = {
            "output": {"message": {"role": "assistant", "content": [{"text": "42"}]}},
            "stopReason": "stop_sequence",
            "additionalModelResponseFields": {"stop_sequence": stop},
            "usage": {"inputTokens": 21, "outputTokens": 2, "totalTokens": 23},
        }
        return [json.dumps(said).encode()]

    assert read_response(_record(streamed("END"))).stop_sequence == "END"
    whole_path = (_PATH.replace("-stream", ""), _BODY, JSON)
    differ = {"streamed": (_STREAMED, streamed("END"), streamed("STOP")), "whole": (whole_path, whole("END"), whole("STOP"))}
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=2)["divergence"]
    assert d["counts"].get("exact", 0) == 0 and d["counts"]["stop_sequence_differs"] == 2, d["counts"]
    same = {"streamed": (_STREAMED, streamed("END"), awkward(streamed("END"))), "whole": (whole_path, whole("END"), whole("END"))}
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=2)["divergence"]
    assert d["exact_match_rate"] == 1 and sum(r["read_both"] for r in d["readable"].values()) == 2


def test_a_tool_bedrock_ran_itself_is_no_call_for_its_client(tmp_path: Path) -> None:
    """A tool use of ``"type": "server_tool_use"`` Bedrock ran itself (its result in the answer): the
    answer asks its client for no call; a call of the same tool and input its client must make differs."""

    def streamed(kind: str | None) -> list[bytes]:
        use = {"toolUseId": "tooluse_1", "name": "web_search", **({"type": kind} if kind else {})}
        return _blocks(
            [
                event_frame("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": use}}),
                event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"q": "x"}'}}}),
            ],
            _text_block(1, "Found it."),
        )

    def whole(kind: str | None) -> list[bytes]:
        use = {"toolUseId": "tooluse_1", "name": "web_search", "input": {"q": "x"}, **({"type": kind} if kind else {})}
        content = [{"toolUse": use}, {"text": "Found it."}]
        return [json.dumps({"output": {"message": {"role": "assistant", "content": content}}, "stopReason": "end_turn"}).encode()]

    whole_path = (_PATH.replace("-stream", ""), _BODY, JSON)
    for name, (where, answer) in {"streamed": (_STREAMED, streamed), "whole": (whole_path, whole)}.items():
        path, _, ctype = where
        ran = read_response({**_record(answer("server_tool_use"), path), "response_headers": [["content-type", ctype]]})
        asked = read_response({**_record(answer(None), path), "response_headers": [["content-type", ctype]]})
        assert (ran.client_calls, asked.client_calls) == (False, True), name
        assert ran.text == asked.text == "Found it." and [c["name"] for c in ran.tool_calls] == ["web_search"], name
    pairs = {
        "streamed": (_STREAMED, streamed("server_tool_use"), streamed(None)),
        "whole": (whole_path, whole("server_tool_use"), whole(None)),
    }
    a, b = pair_captures(tmp_path / "differ", pairs)
    d = compare(a, b, top=2)["divergence"]
    assert d["counts"].get("exact", 0) == 0 and d["counts"]["tool_calls_differ"] == 2, d["counts"]
    same = {k: (where, one, one) for k, (where, one, _) in pairs.items()}
    a, b = pair_captures(tmp_path / "same", same)
    assert compare(a, b, top=2)["divergence"]["exact_match_rate"] == 1


def test_a_request_bedrock_refused_is_its_error(tmp_path: Path) -> None:
    """A request refused before any answer (a validation error, throttling) answers a status and a
    JSON ``{"message"}`` (its type in ``x-amzn-ErrorType``), whether it asked for a stream or not:
    that is the error it reports, not a body of no API's shape; two refusals that say otherwise differ."""
    said = "1 validation error detected: Value '0' at 'inferenceConfig.maxTokens' failed to satisfy constraint"
    whole_path = _PATH.replace("-stream", "")
    for path in (_PATH, whole_path):
        record = {**_record([json.dumps({"message": said}).encode()], path), "status": 400}
        record["response_headers"] = [["content-type", JSON], ["x-amzn-errortype", "ValidationException:http://internal"]]
        out = read_response(record)
        assert out.readable and out.error is None and (out.error_message, out.finish_reason) == (said, "error"), path
        assert not read_response({**record, "chunks": [b'{"message": 5}']}).readable, path  # no words: no error read as one
    refused = ((whole_path, _BODY, JSON), [json.dumps({"message": said}).encode()])
    other = [json.dumps({"message": "Too many requests, please wait before trying again."}).encode()]
    a, b = pair_captures(tmp_path / "differ", {"x": (*refused, other)})
    assert compare(a, b, top=1)["divergence"]["counts"].get("exact", 0) == 0
    a, b = pair_captures(tmp_path / "same", {"x": (*refused, refused[1])})
    assert compare(a, b, top=1)["divergence"]["exact_match_rate"] == 1


def _redacted_block(i: int, *pieces: str) -> list[bytes]:
    """A reasoning block sent redacted, its blob in ``pieces`` (one ``contentBlockDelta`` each)."""
    return [
        *(
            event_frame("contentBlockDelta", {"contentBlockIndex": i, "delta": {"reasoningContent": {"redactedContent": p}}})
            for p in pieces
        ),
        event_frame("contentBlockStop", {"contentBlockIndex": i}),
    ]


def test_a_redacted_reasoning_block_split_across_deltas_counts_once() -> None:
    """One ``contentBlockIndex`` is one block, whatever number of deltas carry its blob: one block in
    three pieces counts as one in one piece does (and as a whole answer's block), two blocks as two."""

    def count(*blocks: list[bytes]) -> int:
        return read_response(_record(_blocks(*blocks, _text_block(len(blocks), "4")))).encrypted_reasoning

    split, whole = count(_redacted_block(0, "c2Vj", "cmV0", "IQ==")), count(_redacted_block(0, "c2VjcmV0IQ=="))
    assert split == whole == 1
    assert count(_redacted_block(0, "c2Vj", "cmV0"), _redacted_block(1, "b3RoZXI=", "IQ==")) == 2


def _served_frames(stop_fields: dict[str, Any] | None, metadata: dict[str, Any]) -> list[bytes]:
    """A whole answer "42" whose messageStop carries ``stop_fields`` (additionalModelResponseFields)
    and whose metadata event carries ``metadata`` (trace, performanceConfig) beside its usage."""
    stop = {"stopReason": "end_turn", **({"additionalModelResponseFields": stop_fields} if stop_fields else {})}
    usage = {"usage": {"inputTokens": 21, "outputTokens": 2, "totalTokens": 23}, "metrics": {"latencyMs": 90}}
    return [
        event_frame("messageStart", {"role": "assistant"}),
        text_frame(0, "4"),
        text_frame(0, "2"),
        event_frame("contentBlockStop", {"contentBlockIndex": 0}),
        event_frame("messageStop", stop),
        event_frame("metadata", {**usage, **metadata}),
    ]


def _routed(model: str, latency: int = 12) -> dict[str, Any]:
    guard = {"outputAssessments": {}, "invocationMetrics": {"guardrailProcessingLatency": latency}}
    return {"trace": {"promptRouter": {"invokedModelId": model}, "guardrail": guard}}


def test_answers_served_otherwise_are_said_to_differ_in_config_and_the_same_match(tmp_path: Path) -> None:
    """The same words from another model a prompt router chose, another latency tier or another model
    response field: compare's config says the pairs were served otherwise (the text still matches);
    the same trace and fields, their timings new on every request, match. Whole answers as streamed."""
    haiku, sonnet = "anthropic.claude-3-haiku-20240307-v1:0", "anthropic.claude-3-5-sonnet-20240620-v1:0"
    standard, optimized = {"performanceConfig": {"latency": "standard"}}, {"performanceConfig": {"latency": "optimized"}}
    differ = {
        "router": (_STREAMED, _served_frames(None, _routed(haiku)), _served_frames(None, _routed(sonnet))),
        "tier": (_STREAMED, _served_frames(None, standard), _served_frames(None, optimized)),
        "field": (_STREAMED, _served_frames({"x": 1, "stop_sequence": None}, {}), _served_frames({"x": 2}, {})),
        "one side": (_STREAMED, _served_frames(None, standard), _served_frames(None, {})),
    }
    a, b = pair_captures(tmp_path / "differ", differ)
    result = compare(a, b, top=4)
    assert result["config"]["served"] == {"a": 4, "b": 3, "pairs_differ": 4}, result["config"]["served"]
    assert result["divergence"]["exact_match_rate"] == 1  # the words are the same: the difference is the config's
    same = {
        "router": (_STREAMED, _served_frames(None, _routed(haiku, 12)), _served_frames(None, _routed(haiku, 40))),
        "tier": (_STREAMED, _served_frames(None, standard), _served_frames(None, standard)),
        "field": (_STREAMED, _served_frames({"x": 1}, {}), _served_frames({"x": 1, "stop_sequence": None}, {})),
        "stop sequence alone": (_STREAMED, _served_frames({"stop_sequence": None}, {}), _served_frames(None, {})),
    }
    a, b = pair_captures(tmp_path / "same", same)
    result = compare(a, b, top=4)
    assert result["config"]["served"] == {"a": 3, "b": 3, "pairs_differ": 0}, result["config"]["served"]
    assert result["divergence"]["exact_match_rate"] == 1


def _pieced_block(i: int, form: str, *pieces: str, pad: str = "abc") -> list[bytes]:
    """A block of a type not read (an image) whose bytes come in ``pieces``, one ``contentBlockDelta`` each."""
    deltas = ({"contentBlockIndex": i, "delta": {"image": {"source": {"bytes": p}}}} for p in pieces)
    return [
        event_frame("contentBlockStart", {"contentBlockIndex": i, "start": {"image": {"format": form}}}, pad),
        *(event_frame("contentBlockDelta", d, pad) for d in deltas),
        event_frame("contentBlockStop", {"contentBlockIndex": i}, pad),
    ]


def test_an_unread_block_streamed_in_pieces_is_all_its_pieces_joined(tmp_path: Path) -> None:
    """Bedrock nests a delta's piece (``{"image": {"source": {"bytes": ...}}}``): a block of a type not
    read is its start and every piece joined, member by member, as text is; not its last piece alone.
    Two such blocks differing in an earlier piece, or in their start, differ; the same bytes in other
    pieces are the same block."""
    out = read_response(_record(_blocks(_pieced_block(0, "png", "iVBO", "RW0K", "GgoA"))))
    assert [json.loads(o) for o in out.others] == [{"image": {"format": "png", "source": {"bytes": "iVBORW0KGgoA"}}}]
    differ = {
        "earlier": (
            _STREAMED,
            _blocks(_pieced_block(0, "png", "iVBO", "GgoA")),
            _blocks(_pieced_block(0, "png", "XXXX", "GgoA")),
        ),
        "start": (_STREAMED, _blocks(_pieced_block(0, "png", "iVBO", "GgoA")), _blocks(_pieced_block(0, "jpeg", "iVBO", "GgoA"))),
    }
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=len(differ))["divergence"]
    assert d["counts"].get("exact", 0) == 0, d["counts"]
    assert sum(r["read_both"] for r in d["readable"].values()) == len(differ)
    same = {
        "pieces": (
            _STREAMED,
            awkward(_blocks(_pieced_block(0, "png", "iVBO", "RW0K", "GgoA"))),
            [b"".join(_blocks(_pieced_block(0, "png", "iVBORW", "0KGgoA", pad="zz")))],
        )
    }
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 1 and sum(r["read_both"] for r in d["readable"].values()) == 1
