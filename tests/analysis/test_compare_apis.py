"""compare on Anthropic Messages and Responses traffic: different answers must differ, equal ones
match, and what no adapter reads is counted as unreadable, never as agreement."""

from __future__ import annotations

import json

import pytest

from infertap.analysis.compare import compare
from tests import sdk_shapes
from tests.helpers import write_capture


def _messages(text: str) -> list[bytes]:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
                "usage": {"input_tokens": 9, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(sdk_shapes.message_event(e))}\n\n".encode() for e in events]


def _response(status: str, output: list[dict[str, object]]) -> dict[str, object]:
    usage = sdk_shapes.response_usage(9, 5) if status == "completed" else None
    body = {"id": "resp_1", "object": "response", "model": "m", **sdk_shapes.RESPONSE_REST, "status": status, "usage": usage}
    return sdk_shapes.response({**body, "output": output})


def _said(text: str) -> dict[str, object]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}


def _responses(text: str) -> list[bytes]:
    return [json.dumps(_response("completed", [_said(text)])).encode()]


def _capture(path, api: str, texts: list[str | bytes], statuses: list[int] | None = None):
    xs = []
    for i, text in enumerate(texts):
        body = (
            {"model": "m", "max_tokens": 32, "messages": [{"role": "user", "content": f"q{i}"}]}
            if api == "messages"
            else {"model": "m", "input": f"q{i}"}
        )
        chunks = [text] if isinstance(text, bytes) else _messages(text) if api == "messages" else _responses(text)
        xs.append(
            {
                "path": f"/v1/{api}",
                "body": body,
                "chunks": chunks,
                "status": (statuses or [200] * len(texts))[i],
                "content_type": "text/event-stream" if api == "messages" else "application/json",
            }
        )
    write_capture(path, xs)
    return path


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_different_answers_differ_and_equal_ones_match(tmp_path, api):
    a = _capture(tmp_path / "a", api, ["The answer is 5.", "Paris."])
    b = _capture(tmp_path / "b", api, ["In mathematics, it is the product of", "Paris."])
    d = compare(a, b, extract="number")["divergence"]
    assert d["exact_match_rate"] == pytest.approx(0.5) and d["similarity_mean"] < 0.75
    assert d["counts"]["answer_changed"] == 1 and d["counts"].get("unreadable", 0) == 0
    assert d["readable"] == {
        f"POST /v1/{api}": {
            "pairs": 2,
            "read_both": 2,
            "unreadable_a": 0,
            "unreadable_b": 0,
            "error_body_unread_a": 0,
            "error_body_unread_b": 0,
            "not_compared": 0,
            "not_in_file": 0,
            "too_large": 0,
            "response_not_kept": 0,
            "partly_unreadable": 0,
        }
    }
    same = compare(a, _capture(tmp_path / "a2", api, ["The answer is 5.", "Paris."]))["divergence"]
    assert same["exact_match_rate"] == 1.0 and same["similarity_mean"] == 1.0


def test_an_answer_against_an_error_is_no_match_and_no_output_compared(tmp_path):
    """B failed: not the same outcome, and no output of B's to be similar or not to A's (it scored 0)."""
    a = _capture(tmp_path / "a", "responses", ["42"])
    b = _capture(
        tmp_path / "b",
        "responses",
        [json.dumps(sdk_shapes.error_body("File Not Found", "invalid_request_error")).encode()],
        statuses=[404],
    )
    d = compare(a, b)["divergence"]
    assert d["exact_match_rate"] == 0.0 and d["similarity_mean"] is None and d["outputs_compared"] == 0
    assert d["failed"] == {"pairs": 1, "a_only": 0, "b_only": 1, "both": 0, "both_same": 0, "both_differ": 0, "not_generation": 0}


def test_two_bodies_no_adapter_reads_are_never_an_exact_match(tmp_path):
    odd = b'{"answer": "something no API sends"}'
    a = _capture(tmp_path / "a", "responses", [odd, "fine"])
    b = _capture(tmp_path / "b", "responses", [odd, "fine"])
    d = compare(a, b)["divergence"]
    assert d["exact_match_rate"] == pytest.approx(0.5) and d["counts"]["unreadable"] == 1
    assert d["readable"]["POST /v1/responses"] == {
        "pairs": 2,
        "read_both": 1,
        "unreadable_a": 1,
        "unreadable_b": 1,
        "error_body_unread_a": 0,
        "error_body_unread_b": 0,
        "not_compared": 0,
        "not_in_file": 0,
        "too_large": 0,
        "response_not_kept": 0,
        "partly_unreadable": 0,
    }
    (worst,) = d["most_divergent"]
    assert worst["similarity"] == 0.0 and "responses" in worst["unreadable"][0]


def test_compare_and_stats_print_the_same_percentiles_for_the_same_exchanges(tmp_path):
    """One percentile definition (linear interpolation): compare's p99 of A is stats' p99 of A."""
    from infertap.analysis import Analysis, speed_stats

    durations = [3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377]  # ms: p90 and p99 fall between order statistics
    xs = [
        {"body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}, "duration_ns": d * 1_000_000}
        for i, d in enumerate(durations)
    ]
    # A request for no tokens has an e2e too: neither stats nor compare counts it among the requests.
    xs.append({"method": "GET", "path": "/v1/models", "body": b"", "duration_ns": 900_000_000})
    write_capture(tmp_path / "a", xs)
    write_capture(tmp_path / "b", xs)
    e2e = next(row for row in compare(tmp_path / "a", tmp_path / "b")["speed"] if row["metric"] == "e2e")["a"]
    assert e2e["n"] == len(durations)
    with Analysis([tmp_path / "a"], cache_dir=tmp_path / "cache") as a:
        [group] = speed_stats(a)["groups"]
    printed = group["metrics"]["e2e"]
    assert e2e["p90"] == pytest.approx(printed["p90"]) == pytest.approx(233)  # (n-1)*0.9 = 9: the 10th value exactly
    assert e2e["p99"] == pytest.approx(printed["p99"]) == pytest.approx(233 + 0.9 * (377 - 233))
    assert e2e["p50"] == pytest.approx(printed["p50"]) == 34


def _responses_stream(text: str, *, completed: bool) -> list[bytes]:
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0, "logprobs": []}
    events = [
        {"type": "response.created", "response": _response("in_progress", [])},
        *({"type": "response.output_text.delta", **at, "delta": w} for w in text.split()),
    ]
    if completed:
        events.append({"type": "response.completed", "response": _response("completed", [_said("".join(text.split()))])})
    events = [sdk_shapes.response_event({**e, "sequence_number": n}) for n, e in enumerate(events)]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def test_a_responses_stream_cut_before_completed_is_not_the_complete_answer(tmp_path):
    """The client got the deltas, then the connection ended before response.completed: as a chat
    stream cut before its finish reason, it is no answer (unfinished: B failed), not an answer that
    differs however alike its text; two streams cut alike are the same failure."""

    def capture(name: str, completed: bool):
        x = {"path": "/v1/responses", "body": {"model": "m", "input": "q", "stream": True}, "content_type": "text/event-stream"}
        write_capture(tmp_path / name, [x | {"chunks": _responses_stream("Par is", completed=completed)}])
        return tmp_path / name

    whole, cut, cut_too = capture("whole", True), capture("cut", False), capture("cut_too", False)
    result = compare(whole, cut)
    d = result["divergence"]
    assert (d["exact_match_rate"], d["outputs_compared"], d["outputs_differ"]) == (0.0, 0, 0)
    assert (d["failed"]["b_only"], d["failed"]["a_only"]) == (1, 0)
    assert result["outcomes"]["b"]["unfinished"] == 1 and result["outcomes"]["a"]["unfinished"] == 0
    same = compare(cut, cut_too)["divergence"]
    assert same["exact_match_rate"] == 1.0 and same["failed"]["both_same"] == 1


def _thinking(thought: str, signature: str, redacted: str) -> list[bytes]:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
                "usage": {"input_tokens": 9, "output_tokens": 1},
            },  # fmt: skip
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": thought}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": signature}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": redacted}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "4"}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return [f"event: {e['type']}\ndata: {json.dumps(sdk_shapes.message_event(e))}\n\n".encode() for e in events]


def test_thinking_signatures_and_redacted_thinking_data_are_opaque_and_never_compared(tmp_path):
    """A thinking block's signature and a redacted_thinking block's data are ciphertext, new on
    every call (Anthropic: an opaque value that verifies the block came from Claude): answers alike
    but for them match; other thinking differs."""

    def capture(name: str, thought: str, signature: str, redacted: str):
        x = {"path": "/v1/messages", "body": {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "2+2"}]}}
        write_capture(
            tmp_path / name, [x | {"chunks": _thinking(thought, signature, redacted), "content_type": "text/event-stream"}]
        )
        return tmp_path / name

    a = capture("a", "add them", "EqQBCkYsigA", "EmwKAhgBredA")
    same = compare(a, capture("b", "add them", "ErUBCkYsigB", "EmwKAhgBredB"))["divergence"]
    assert same["exact_match_rate"] == 1.0 and "encrypted_reasoning_differs" not in same["counts"]
    other = compare(a, capture("c", "sum them", "EqQBCkYsigA", "EmwKAhgBredA"))["divergence"]
    assert other["exact_match_rate"] == 0.0
