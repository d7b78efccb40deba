"""An answer the engine cut: a 2xx chat or completions stream whose end marker came with no finish
reason on it or before it. Every OpenAI stream that finishes says why; llama-cpp-python's
``interrupt_requests`` ends a stream in flight with ``[DONE]`` alone when the next request waits,
after as little as the role chunk, so that a clean-looking 200 holds an empty or cut answer.

``cut_short`` is the rule over an exchange's decoded facts, ``unfinished`` the same of a record
read here (what ``infertap replay`` counts); ``analysis.views.UNFINISHED`` states it in SQL over the
decoded columns of the same names, and mirrors it (tests/analysis/test_unfinished_streams.py holds
the two to the same answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .body import decoded_chunks
from .kept import with_tail_usage
from .read import read_request, read_response, response_not_kept, stream_done

#: The APIs whose streams end with a finish reason before their end marker (``[DONE]``).
FINISHING_APIS = ("chat", "completions")


def cut_short(
    *, status: int | None, generation: bool, streamed: bool, api: str | None, stream_done: bool, finish_reason: str | None
) -> bool:
    """A request for tokens answered 2xx by a chat or completions stream that carried its end marker
    (``stream_done``) and no finish reason (``finish_reason``: the common word, ``error`` for an
    in-band error)."""
    return bool(
        generation
        and streamed
        and api in FINISHING_APIS
        and stream_done
        and finish_reason is None
        and status is not None
        and 200 <= status <= 299
    )


def unfinished(record: Mapping[str, Any]) -> bool:
    """``cut_short`` of an exchange record as its client got it (``capture.records.delivered``), its
    response read as the analysis reads it. Reads the whole body: a worker thread's work, not an event loop's."""
    status = record.get("status")
    if not isinstance(status, int) or not 200 <= status <= 299 or not record.get("chunks"):
        return False  # no 2xx, or no body: no stream to have ended (the analysis reads none either)
    request = read_request(record)
    if not request.generation:
        return False
    parsed = read_response(record)
    if response_not_kept(record):
        with_tail_usage(parsed, record)  # as the analysis reads a body kept in part: its tail's finish reason
    done = stream_done(decoded_chunks(record) or record.get("chunks") or [], parsed)
    return cut_short(
        status=status,
        generation=request.generation,
        streamed=parsed.streamed,
        api=parsed.api,
        stream_done=done,
        finish_reason=parsed.finish_reason,
    )
