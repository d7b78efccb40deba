"""A chat tool-call piece that names nothing and adds no argument text (``{"index": 0, "function":
{"arguments": ""}}``, as a tool parser may close a call with, beside the finish reason) carries no
token, as an empty ``content: ""`` carries none, and as Anthropic's empty ``input_json_delta`` and
the Responses API's empty arguments delta carry none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infertap.analysis import Analysis
from tests.analysis_builders import MS, Load, event, exchange, sse


def metric(a: Analysis, xid: str) -> dict[str, Any]:
    [row] = a.query("SELECT * FROM metrics WHERE exchange_id = ?", [xid]).records()
    return row


def piece(finish: str | None = None, **call: Any) -> dict[str, Any]:
    chunk = event(finish=finish)
    chunk["choices"][0]["delta"] = {"tool_calls": [{"index": 0, **call}]}
    return chunk


NAMED = piece(id="call_1", type="function", function={"name": "add", "arguments": ""})  # the call's name: a token
ARGS = [piece(function={"arguments": '{"a": 1'}), piece(function={"arguments": "}"})]


@pytest.mark.parametrize("reader", ["typed", "loop", "fold"])
def test_an_empty_tool_call_piece_is_no_token(load: Load, reader: str) -> None:
    """Each of the three readers of a chat stream: msgspec's typed one (one data line per event, then
    ``[DONE]``), the loop (a stream that ends with its last chunk, no ``[DONE]``), the adapter's fold."""
    head = event(role="assistant", content="")
    done = [] if reader == "loop" else [(81, sse("[DONE]"))]
    if reader == "fold":  # a source cited: a delta the plain chat readers leave to the adapter's fold
        cited = {
            "type": "url_citation",
            "url_citation": {"url": "https://example.com", "title": "t", "start_index": 0, "end_index": 0},
        }
        head["choices"][0]["delta"]["annotations"] = [cited]
    a = load(
        [
            exchange(
                "closed",
                chunks=[
                    (10, sse(head)),
                    (20, sse(NAMED)),
                    (30, sse(ARGS[0])),
                    (40, sse(ARGS[1])),
                    (80, sse(piece("tool_calls", function={"arguments": ""}))),  # must not count
                    *done,
                ],
            ),
            exchange(
                "plain",
                chunks=[
                    (10, sse(head)),
                    (20, sse(NAMED)),
                    (30, sse(ARGS[0])),
                    (40, sse(ARGS[1])),
                    (80, sse(event(finish="tool_calls"))),
                    *done,
                ],
            ),
        ]
    )
    closed, plain = metric(a, "closed"), metric(a, "plain")
    # must match the same answer without the empty piece: the name's piece first, the last argument's last
    for m in (closed, plain):
        assert (m["ttft_ns"], m["t_last_token_ns"], m["token_events"], m["output_tokens"]) == (20 * MS, 40 * MS, 3, 3)
        assert m["tpot_ns"] == pytest.approx((40 - 20) * MS / (3 - 1))
        assert json.loads(json.dumps(m["tool_calls"])) == 1
    gaps = [r[0] for r in a.query("SELECT gap_ns FROM itl WHERE exchange_id = 'closed' ORDER BY chunk").rows]
    assert gaps == [10 * MS, 10 * MS]  # no 40 ms gap to a piece that carried nothing
