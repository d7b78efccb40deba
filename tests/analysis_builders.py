"""Hand-built captures for the analysis tests: every chunk time and token count is chosen by the test."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infertap.capture.records import new_exchange
from infertap.capture.writer import CaptureWriter
from tests import sdk_shapes

if TYPE_CHECKING:
    from infertap.analysis import Analysis

MS = 1_000_000  # ns
RECORDER = {"kind": "proxy", "upstream": "http://engine.test", "pid": 1}
SSE_HEADERS = [["content-type", "text/event-stream"]]
JSON_HEADERS = [["content-type", "application/json"]]


def event(
    content: str | None = None,
    *,
    role: str | None = None,
    reasoning: str | None = None,
    tools: int = 0,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    timings: dict[str, Any] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """One OpenAI chat-completion stream event (a ``chat.completion.chunk``), as the SDK reads one."""
    return sdk_shapes.chat_chunk(
        odd_event(
            content, role=role, reasoning=reasoning, tools=tools, finish=finish, usage=usage, timings=timings, choices=choices
        )
    )


def odd_event(
    content: str | None = None,
    *,
    role: str | None = None,
    reasoning: str | None = None,
    tools: int = 0,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    timings: dict[str, Any] | None = None,
    choices: bool = True,
) -> dict[str, Any]:
    """A chunk as ``event`` builds it, unchecked: for an engine's own finish reason or usage the SDK refuses."""
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if tools:
        delta["tool_calls"] = [{"index": i, "function": {"arguments": "{"}} for i in range(tools)]
    out: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    out["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []
    if usage is not None:  # OpenAI's total beside the counts a test names
        out["usage"] = {"total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0), **usage}
    if timings is not None:
        out["timings"] = timings
    return out


def sse(*events: dict[str, Any] | str) -> bytes:
    """SSE bytes of events (a str is sent as is, e.g. "[DONE]")."""
    return b"".join(b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in events)


def body(content: str = "hi", model: str = "m", stream: bool = True, **extra: Any) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": content}], "stream": stream, **extra}).encode()


def exchange(
    xid: str,
    *,
    sent_ms: float = 0.0,
    chunks: list[tuple[float, bytes]] = (),  # type: ignore[assignment]
    end_ms: float | None = None,
    request: bytes | None = None,
    status: int | None = 200,
    end: str = "complete",
    headers: list[list[str]] | None = None,
    seq: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    """An exchange record; ``chunks`` are (receive time in ms since sent, bytes)."""
    chunk_ns = [round(t * MS) for t, _ in chunks]
    rec: dict[str, Any] = new_exchange(
        id=xid,
        seq=seq,
        session=None,
        wall=1.8e9 + sent_ms / 1e3,
        start_ns=round(sent_ms * MS),
        sent_ns=round(sent_ms * MS),
        client="127.0.0.1:1",
        method="POST",
        path="/v1/chat/completions",
        query="",
        http_version="1.1",
        request_headers=[["content-type", "application/json"]],
        request_body=body() if request is None else request,
        status=status,
        response_headers=SSE_HEADERS if headers is None else headers,
        headers_ns=chunk_ns[0] if chunk_ns else None,
        chunk_ns=chunk_ns,
        chunks=[c for _, c in chunks],
        end_ns=round((end_ms if end_ms is not None else (chunks[-1][0] if chunks else 0)) * MS),
        end=end,
        error=None if end == "complete" else f"ended {end}",
        upstream="http://engine.test",
    )
    rec.update(extra)
    return rec


def encoded_chunks(chunks: list[tuple[float, bytes]], wbits: int = 16 + zlib.MAX_WBITS) -> list[tuple[float, bytes]]:
    """The same chunks compressed as one stream (gzip by default), each flushed, so each decodes on arrival."""
    comp = zlib.compressobj(wbits=wbits)
    out = [(t, comp.compress(c) + comp.flush(zlib.Z_SYNC_FLUSH)) for t, c in chunks]
    t_last, last = out[-1]
    out[-1] = (t_last, last + comp.flush())
    assert zlib.decompress(b"".join(c for _, c in out), wbits) == b"".join(c for _, c in chunks)
    return out


def enrichment(xid: str, *, prompt_ids: list[int] | None = None, output_count: int | None = None, **extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "type": "enrichment",
        "exchange_id": xid,
        "wall": 1.8e9,
        "engine": "fp",
        "kind": "llama-server",
        "prompt_tokens": {
            "ids": prompt_ids,
            "count": len(prompt_ids) if prompt_ids is not None else None,
            "source": "test tokenizer",
            "agrees_with_usage": None,
        },
        "output_tokens": {"ids": None, "count": output_count, "source": "test tokenizer"},
        "settings": {"temperature": {"value": 0, "source": "request"}},
        "server_timings": None,
        "response": {"model": "m", "finish_reason": "stop", "usage": None},
    }
    rec.update(extra)
    return rec


def write_capture(path: Path, records: list[dict[str, Any]], recorder: dict[str, Any] | None = None) -> Path:
    with CaptureWriter(path, recorder=recorder or RECORDER, labels={"gpu": "none"}) as writer:
        for rec in records:
            writer.write(rec)
    assert writer.error is None
    return path


#: Writes records as a capture and loads it (the ``load`` fixture of tests/analysis/conftest.py).
Load = Callable[[list[dict[str, Any]]], "Analysis"]


#: The token-bearing chunks of each exchange as the ``token_chunks`` view computed them from
#: ``events`` before the decode wrote them as a table (analysis/token_chunks.py): the definition it must meet.
TOKEN_CHUNKS_FROM_EVENTS = """
SELECT capture, exchange_id, chunk, min(t_ns) AS t_ns, count(*) AS events, bool_or(content <> '') AS has_content
FROM events
WHERE content <> '' OR reasoning <> '' OR tool_calls > 0
GROUP BY capture, exchange_id, chunk
"""

#: The inter-token gaps as the ``itl`` view computed them at query time (a window over the token
#: chunks above): what the decoded ``token_chunks.gap_ns`` must give.
ITL_FROM_EVENTS = f"""
SELECT * FROM (
    SELECT capture, exchange_id, chunk, t_ns, events,
           t_ns - lag(t_ns) OVER (PARTITION BY capture, exchange_id ORDER BY chunk) AS gap_ns
    FROM ({TOKEN_CHUNKS_FROM_EVENTS})
) WHERE gap_ns IS NOT NULL
"""

#: The token times of each exchange as the metrics view computed them from ``events`` before they
#: were summed up at decode time (analysis/decode.py ``_token_times``): the definition they must meet.
TOKEN_TIMES_FROM_EVENTS = f"""
WITH token_chunks AS ({TOKEN_CHUNKS_FROM_EVENTS}), tok AS (
    SELECT capture, exchange_id, min(t_ns) AS first_ns, max(t_ns) AS last_ns,
           min(t_ns) FILTER (WHERE has_content) AS first_content_ns,
           count(*) AS token_chunks, sum(events)::BIGINT AS token_events
    FROM token_chunks GROUP BY capture, exchange_id
), fin AS (
    SELECT capture, exchange_id, min(t_ns) AS finish_ns FROM events WHERE finish_reason IS NOT NULL GROUP BY capture, exchange_id
)
SELECT x.exchange_id, tok.first_ns, tok.last_ns, tok.first_content_ns, tok.token_chunks, tok.token_events, fin.finish_ns
FROM exchanges x
LEFT JOIN tok ON tok.capture = x.capture AND tok.exchange_id = x.exchange_id
LEFT JOIN fin ON fin.capture = x.capture AND fin.exchange_id = x.exchange_id
ORDER BY x.capture, x.exchange_id
"""


def assert_token_times_match_events(a: Analysis) -> int:
    """The exchanges' token times equal what the views compute from their events; how many were checked."""
    kept = a.sql(
        "SELECT exchange_id, first_token_ns, last_token_ns, first_content_ns, token_chunk_count, token_event_count, "
        "finish_ns FROM exchanges ORDER BY capture, exchange_id"
    ).fetchall()
    assert kept == a.sql(TOKEN_TIMES_FROM_EVENTS).fetchall()
    # The token chunks and gaps written at decode time, against the views' SQL over the events.
    order = "ORDER BY ALL"
    chunks = "SELECT capture, exchange_id, chunk, t_ns, events, has_content FROM token_chunks"
    assert a.sql(f"{chunks} {order}").fetchall() == a.sql(f"SELECT * FROM ({TOKEN_CHUNKS_FROM_EVENTS}) {order}").fetchall()
    assert a.sql(f"SELECT * FROM itl {order}").fetchall() == a.sql(f"SELECT * FROM ({ITL_FROM_EVENTS}) {order}").fetchall()
    return len(kept)


def outcomes(cap: Path) -> dict[str, dict[str, Any]]:
    """Each exchange's ``ok``, ``unfinished`` (the metrics view) and ``error_message`` (its decoded
    row), by id, as ``infertap sql --json`` prints them: what the tests of failed answers assert."""
    from click.testing import CliRunner

    from infertap.cli import cli

    query = "SELECT m.exchange_id, ok, unfinished, x.error_message FROM metrics m JOIN exchanges x USING (capture, exchange_id)"
    rows = CliRunner().invoke(cli, ["sql", query, str(cap), "--json"])
    assert rows.exit_code == 0, rows.output
    return {r["exchange_id"]: r for r in json.loads(rows.output)}
