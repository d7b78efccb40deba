"""A Responses answer's logprobs (``include: ["message.output_text.logprobs"]``, ``top_logprobs``)
feed compare's KL and top-1 agreement over the shared prefix, as a chat completion's do: they come
on each ``response.output_text.delta`` and on the whole response's ``output_text`` parts, and were
not read at all (a Responses run had no logprob figures where a chat run had them). Every body is
checked against the openai SDK's own types."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from infertap.analysis.compare import compare
from infertap.analysis.divergence import logprob_positions
from infertap.apis import read_response
from tests import sdk_shapes
from tests.helpers import pair_captures

_SSE, _JSON = "text/event-stream", "application/json"
_REQUEST = {
    "model": "gpt-4.1-mini",
    "input": "Capital of France?",
    "top_logprobs": 2,
    "include": ["message.output_text.logprobs"],
}
_EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
# Each token with its chosen logprob and the runner-up's.
_SURE = [("Paris", -0.01, ("Lyon", -4.6)), (".", -0.02, ("!", -3.9))]
_UNSURE = [("Paris", -0.7, ("Lyon", -0.9)), (".", -0.5, ("!", -1.1))]


def _logprobs(tokens: list[tuple[str, float, tuple[str, float]]]) -> list[dict[str, Any]]:
    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "bytes": list(token.encode()), "logprob": logprob}

    return [{**entry(t, lp), "top_logprobs": [entry(t, lp), entry(*other)]} for t, lp, other in tokens]


def _response(tokens: list[tuple[str, float, tuple[str, float]]], status: str = "completed") -> dict[str, Any]:
    text = "".join(t for t, _, _ in tokens)
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": _logprobs(tokens)}
    message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}
    body = {"id": "resp_1", "object": "response", "created_at": 1.0, "model": "gpt-4.1-mini", "output": [message],
            "status": status, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "top_logprobs": 2,
            "usage": {"input_tokens": 9, "output_tokens": 2, "total_tokens": 11,
                      "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 0}}}  # fmt: skip
    sdk_shapes.response(body)
    return body


def _sse(event: dict[str, Any]) -> bytes:
    event = {**event, "sequence_number": 0}
    assert not _EVENTS.validate_python(event).model_extra, event
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _stream(tokens: list[tuple[str, float, tuple[str, float]]], *, final_logprobs: bool = True) -> bytes:
    """Each token a text delta with its logprobs, then the whole response (with its logprobs, or
    without: ``include`` not asking them of the final event's parts)."""
    whole = _response(tokens)
    if not final_logprobs:
        whole["output"][0]["content"][0]["logprobs"] = []
    head = {**whole, "status": "in_progress", "output": [], "usage": None}
    out = _sse({"type": "response.created", "response": head})
    for token, entry in zip([t for t, _, _ in tokens], _logprobs(tokens), strict=True):
        top = [{"token": e["token"], "logprob": e["logprob"]} for e in entry["top_logprobs"]]
        said = {"token": token, "logprob": entry["logprob"], "top_logprobs": top}
        out += _sse({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0,
                     "delta": token, "logprobs": [said]})  # fmt: skip
    return out + _sse({"type": "response.completed", "response": whole})


def _whole(tokens: list[tuple[str, float, tuple[str, float]]]) -> bytes:
    return json.dumps(_response(tokens)).encode()


def _record(body: bytes, ctype: str) -> dict[str, Any]:
    request = json.dumps({**_REQUEST, "stream": ctype == _SSE}).encode()
    return {"id": "x", "path": "/v1/responses", "status": 200, "end": "complete", "request_body": request,
            "response_headers": [["content-type", ctype]], "chunks": [body]}  # fmt: skip


def _divergence(tmp_path: Path, a: bytes, b: bytes, ctype: str) -> dict[str, Any]:
    request = ("/v1/responses", {**_REQUEST, "stream": ctype == _SSE}, ctype)
    first, second = pair_captures(tmp_path, {"pair": (request, [a], [b])})
    return compare(first, second, top=1)["divergence"]


def test_a_responses_answer_s_logprobs_are_its_positions_streamed_or_whole() -> None:
    def positions(body: bytes, ctype: str) -> Any:
        out = read_response(_record(body, ctype))
        return logprob_positions(out.objects, out.api)

    streamed, whole = positions(_stream(_SURE), _SSE), positions(_whole(_SURE), _JSON)
    from_deltas = positions(_stream(_SURE, final_logprobs=False), _SSE)
    expected = [("Paris", {"Paris": -0.01, "Lyon": -4.6}), (".", {".": -0.02, "!": -3.9})]
    # The final event restates the deltas' positions: read once, not twice.
    assert whole == streamed == from_deltas == expected


def test_compare_takes_the_kl_of_responses_logprobs(tmp_path: Path) -> None:
    for how, answer, ctype in (("streamed", _stream, _SSE), ("whole", _whole, _JSON)):
        # Must match: the same distributions.
        d = _divergence(tmp_path / f"{how}-same", answer(_SURE), answer(_SURE), ctype)
        assert d["logprobs"]["pairs"] == 1 and d["logprobs"]["kl_mean"] == 0 and d["logprobs"]["top1_agreement"] == 1, how
        # Must differ: the same tokens chosen, surely on one side, barely on the other.
        d = _divergence(tmp_path / f"{how}-differ", answer(_SURE), answer(_UNSURE), ctype)
        assert d["logprobs"]["pairs"] == 1 and d["logprobs"]["kl_mean"] > 0.1, (how, d["logprobs"])
        assert d["exact_match_rate"] == 1, how  # the answers themselves are the same
