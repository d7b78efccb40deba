"""An answer the engine cut: a 2xx chat, completions, Messages, Responses or Bedrock Converse stream
that ended with no finish reason.

Every OpenAI stream that finishes says why before it ends, of each choice it streams (``n`` > 1: a
choice other than 0 that said none was cut as a choice 0 would be); an Anthropic Messages stream
says its ``stop_reason`` in ``message_delta`` before ``message_stop``, and a Responses stream ends
with ``response.completed`` (``.incomplete``, ``.failed``), whose status is its finish reason. llama-cpp-python's
``interrupt_requests`` ends a stream in flight with ``[DONE]`` alone when the next request waits,
after as little as the role chunk; an engine or gateway that drops a request may close the body
cleanly after some content chunks, with neither a finish reason nor ``[DONE]``. Either way a
clean-looking 200 holds an empty or cut answer.

``cut_short`` is the rule over an exchange's decoded facts; ``unfinished`` the same of a record read
whole, as the analysis reads it; ``ended_unfinished`` the same from the last events alone, what
``infertap replay`` counts by as each answer ends. ``analysis.views.UNFINISHED`` states the rule in
SQL over the decoded columns of the same names (tests/analysis/test_unfinished_streams.py holds the
three to the same answers).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .body import decoded_chunks, encoded, ended_payloads, framing, head_of
from .finishing import FINISHING_APIS, MARKER_APIS
from .kept import with_tail_usage
from .openai import FINISHED_IN_ERROR
from .read import (
    CHAT,
    COMPLETIONS,
    CONVERSE_STREAM,
    _by_path,
    _loads,
    ended,
    json_body,
    read_request,
    read_response,
    response_not_kept,
    stream_done,
)
from .shapes import Api, Output, error_of, one_prompt

#: How much of a stream's end ``ended_unfinished`` reads first: its last events (the finish chunk,
#: a usage chunk, ``[DONE]``) are a few hundred bytes.
TAIL_BYTES = 4 * 1024
#: The events of that tail it parses, the last: the finish chunk, a usage chunk. An n > 1 stream's
#: choices each finish in their own event, any of them long before the end: such a stream is read whole.
LAST_EVENTS = 4
#: A completions request's prompt sent as a list: several prompts (a batch), or one of token ids.
_LISTED_PROMPT = re.compile(rb'"prompt"\s*:\s*\[')
#: What every in-band error of an API's stream holds in its bytes, as its servers write JSON: an
#: error object's key or an error event's type (``"error"``: OpenAI's, vLLM's ``"object": "error"``,
#: a finish reason ``error``, Anthropic's and the Responses API's ``error`` event), and a Responses
#: answer that failed or was cancelled (its status, its final event's type). An error said before
#: the last events (an answer that went on after it) fails the answer as ``fold`` reads it whole.
ERROR_MARKS: dict[str, tuple[bytes, ...]] = {
    "chat": (b'"error"',),
    "completions": (b'"error"',),
    "messages": (b'"error"',),
    "responses": (b'"error"', b'"failed"', b'.failed"', b'"cancelled"', b'.cancelled"'),
    # Ollama's in-band error is a line of its own, ``{"error": ...}``; llama.cpp's an event holding an error object
    "ollama-chat": (b'"error"',),
    "ollama-generate": (b'"error"',),
    "llamacpp": (b'"error"',),
    # SGLang's and TGI's in-band error: an event holding ``{"error": ...}``
    "sglang-generate": (b'"error"',),
    "tgi-generate": (b'"error"',),
    "tgi-generate-stream": (b'"error"',),
}
#: The bytes after a mark read for a member that is null (``"error": null``): none.
_AFTER = 24
#: How many bytes of a stream ``ErrorMarkScan`` searches at once as they arrive (tens of µs).
SCAN_BYTES = 64 * 1024
#: The most it reads, growing the tail while it holds no whole event (a long last event: a tool
#: call sent whole with its finish reason); past it the answer is left to ``unfinished``.
TAIL_MOST = 64 * 1024


def cut_short(
    *,
    status: int | None,
    generation: bool,
    streamed: bool,
    api: str | None,
    stream_done: bool,
    finish_reason: str | None,
    choices_unfinished: int | None,
    end: str | None,
    readable: bool,
    error_message: str | None,
) -> bool:
    """A request for tokens answered 2xx by a stream of a ``FINISHING_APIS`` API with no finish reason
    (``finish_reason``: choice 0's common word, ``error`` for an in-band error), or one of whose
    other choices (n > 1) said none (``choices_unfinished``, None unknown: no evidence of a cut;
    where the body reported no error, ``error_message``, of any choice: an answer one of whose
    choices failed is an error, however another ended), that ended
    cleanly: by its end marker (``stream_done``), or by the body's end (``end`` complete) after
    events of its API (``readable``); or by a ``MARKER_APIS`` stream that ended by the body's end
    after events of its API with no end marker and no error reported. A stream that ended otherwise (timeout,
    upstream error) is a failure by that; an answer sent whole (JSON) says its finish reasons as
    they are, null too."""
    if not (generation and streamed and status is not None and 200 <= status <= 299):
        return False
    if api in MARKER_APIS:
        return not stream_done and end == "complete" and readable and error_message is None
    return bool(
        api in FINISHING_APIS
        and (finish_reason is None or ((choices_unfinished or 0) > 0 and error_message is None))
        and (stream_done or (end == "complete" and readable))
    )


def unfinished(record: Mapping[str, Any], parsed: Output | None = None) -> bool:
    """``cut_short`` of an exchange record as its client got it (``capture.records.delivered``), its
    whole response read as the analysis reads it: a worker thread's work, not an event loop's.
    ``parsed``: that reading, already made by a caller that knows the request asked for tokens."""
    status = record.get("status")
    if not isinstance(status, int) or not 200 <= status <= 299 or not record.get("chunks"):
        return False  # no 2xx, or no body: no stream to have ended (the analysis reads none either)
    if parsed is None:
        if not read_request(record).generation:
            return False
        parsed = read_response(record)
    if response_not_kept(record):
        with_tail_usage(parsed, record)  # as the analysis reads a body kept in part: its tail's finish reason
    return cut_short(
        status=status,
        generation=True,
        streamed=parsed.streamed,
        api=parsed.api,
        stream_done=stream_done(decoded_chunks(record) or record.get("chunks") or [], parsed),
        finish_reason=parsed.finish_reason,
        choices_unfinished=parsed.choices_unfinished,
        end=record.get("end"),
        readable=parsed.readable,
        error_message=parsed.error_message,
    )


def ended_unfinished(record: Mapping[str, Any], *, generation: bool) -> bool | None:
    """``unfinished`` of a 2xx answer read in full, from its last events only (``LAST_EVENTS`` of its
    last ``TAIL_BYTES``, more bytes while they hold no whole event, at most ``TAIL_MOST``): cheap
    enough to run on the event loop as each answer ends (tens of µs, where its error marks were
    searched as its bytes arrived: ``ErrorMarkScan``).
    None where the tail can't tell (an encoded body, a path that names no API, a body kept in part, a
    longer last event, a request for several answers or last events of a choice other than 0: each
    choice says its own finish reason, any of them long before the end; bytes that may hold an
    error said before the last events, ``ERROR_MARKS``): ``unfinished`` reads those
    as the analysis does."""
    return ended_answer(record, generation=generation)[0]


def ended_answer(
    record: Mapping[str, Any], *, generation: bool, marked: bool | None = None
) -> tuple[bool | None, bool, int | None, str | None]:
    """``ended_unfinished``, the output tokens a stream's engine counted (a chat or completions usage
    chunk, before ``[DONE]``; Ollama's ``eval_count`` and llama.cpp's ``tokens_predicted`` on their
    end marker, an SSE event or an NDJSON line), and the error its last events report, from one reading of them:
    replay asks all three of every answer as it ends, on its event loop. (unfinished, told, tokens,
    error): ``told`` False where the tail can't tell (another API, a JSON body, an encoded body, one
    kept in part, an unfinished answer's, last events of no shape of its API, or ``unfinished``
    None) and ``read_response`` reads them whole; ``tokens`` None where a stream that the tail tells
    of reported no usage (``stream_options.include_usage`` not asked for); ``error`` the message of an
    in-band error (an error object or event, a finish reason ``error``, a failed Responses status), as
    ``read_response``'s ``error_message``: an engine's in-band error mostly ends its stream (vLLM's
    error chunk comes before ``[DONE]``, Anthropic's ``error`` event and ``response.failed`` last),
    so its last events hold it; one said earlier, the answer going on after it, still fails it in
    ``stats``: where the last events report none but the body's bytes hold an error's mark
    (``ERROR_MARKS``), ``unfinished`` is None and the answer is read whole. ``marked``: whether they
    do, as an ``ErrorMarkScan`` found as the bytes arrived (None: searched here, the whole body at once)."""
    status = record.get("status")
    chunks = record.get("chunks") or []
    if not generation or not isinstance(status, int) or not 200 <= status <= 299 or not chunks:
        return False, False, None, None
    api = _by_path(record.get("path"))
    if api is None or encoded(record) or response_not_kept(record):
        return (
            None,
            False,
            None,
            None,
        )  # the API is the request body's to name, the bytes are not the body's text, or not all kept
    if api is CONVERSE_STREAM:
        return None, False, None, None  # binary event-stream frames: read whole, as the analysis reads them
    how = framing(record, head_of(chunks))
    if api.name in MARKER_APIS:
        # its end marker is its finish (Ollama's last line, llama.cpp's last event), read from the tail
        # as a chat stream's is: read whole, a 1,000-line answer held the GIL for 8-15 ms
        if how not in ("sse", "ndjson"):
            return None, False, None, None  # a whole answer (JSON), or lines of no named framing: read whole
    elif api.name not in FINISHING_APIS:
        return False, False, None, None
    elif how != "sse":
        return False, False, None, None  # a whole answer (JSON): not a stream
    if _several_answers(record, api) or (last := _last_events(record, chunks, how)) is None:
        return None, False, None, None
    tail, objs = last
    finish, readable, others, error = _why_ended(api, objs)
    if others:
        # n > 1 (not asked in the request's words): each choice's finish may be before these events
        return None, False, None, None
    usages = (usage for obj in reversed(objs) if (usage := _usage(api, obj)) is not None)
    tokens = next((api.counts(usage)[2] for usage in usages), None)
    cut = cut_short(
        status=status,
        generation=True,
        streamed=True,
        api=api.name,
        stream_done=ended([tail], objs[-1] if objs else None),
        finish_reason=finish,
        choices_unfinished=0,
        end=record.get("end"),
        readable=readable,
        error_message=error,
    )
    if error is None and (cut or readable) and (_may_report_error(api, chunks) if marked is None else marked):
        # an error said before the last events (an answer that went on after it): read whole, as stats
        return None, False, None, None
    return cut, not cut and readable, None if cut else tokens, None if cut else error


def _may_report_error(api: Api, chunks: list[bytes]) -> bool:
    """Whether a stream's bytes may hold an in-band error anywhere (``ERROR_MARKS``): searched, not
    parsed, so every answer is checked at the cost of a byte search (replay's, as the bytes arrive:
    ``ErrorMarkScan``); the few that hold a mark (the word as a whole delta's text too) are read
    whole, as ``fold`` reads them."""
    return _marked(b"".join(chunks), ERROR_MARKS[api.name], True)  # one copy: a mark may straddle two chunks


def _marked(data: bytes, marks: tuple[bytes, ...], ended: bool) -> bool:
    """Whether ``data`` holds one of ``marks`` that is not a null member (every Responses answer's
    ``"error": null``); where not ``ended``, a mark whose next ``_AFTER`` bytes are still to come
    is left to the next search (``ErrorMarkScan``), not decided on part of them."""
    for mark in marks:
        at = data.find(mark)
        while at >= 0:
            at += len(mark)
            if not ended and at + _AFTER > len(data):
                break  # its later occurrences are later still: all left to the bytes to come
            after = data[at : at + _AFTER].lstrip()
            if not (after[:1] == b":" and after[1:].lstrip().startswith(b"null")):
                return True
            at = data.find(mark, at)
    return False


class ErrorMarkScan:
    """``_may_report_error`` of a stream searched as its chunks arrive, so that no answer's end costs
    the event loop a search of its whole body (about 1 ms per 1.4 MiB: every other request's send
    and timing waits that long). The chunks are searched a batch at a time (``SCAN_BYTES``: a
    search per small SSE chunk cost the loop more in all than the one search at the end), each batch
    with the bytes before it that a mark and the bytes read after it may span (``_keep``); the
    answer is the whole body's search, where the chunks fed are the record's (``ended_answer``'s
    ``marked``)."""

    __slots__ = ("_marks", "_keep", "_carry", "_pending", "_size", "_marked")

    def __init__(self, marks: tuple[bytes, ...]) -> None:
        self._marks = marks
        self._keep = max(len(m) for m in marks) + _AFTER - 1  # a mark starting there may be undecided
        self._carry = b""
        self._pending: list[bytes] = []
        self._size = 0
        self._marked = False

    @classmethod
    def of_path(cls, path: str | None) -> ErrorMarkScan | None:
        """The scan for a request to ``path``: None where its API has no ``ERROR_MARKS`` (its answer is
        read whole, or its marker is its finish)."""
        api = _by_path(path)
        marks = ERROR_MARKS.get(api.name) if api is not None else None
        return cls(marks) if marks else None

    def feed(self, chunk: bytes) -> None:
        """The next chunk of the body, as it arrived."""
        if not self._marked:
            self._pending.append(chunk)
            self._size += len(chunk)
            if self._size >= SCAN_BYTES:
                self._search(False)

    def ended(self) -> bool:
        """Whether the body held a mark: the bytes at its end decided with what follows them, none."""
        if not self._marked and (self._pending or self._carry):
            self._search(True)
        return self._marked

    def _search(self, ended: bool) -> None:
        data = b"".join([self._carry, *self._pending])
        self._pending.clear()
        self._size = 0
        self._marked = _marked(data, self._marks, ended)
        self._carry = b"" if ended else data[-self._keep :]


def _last_events(record: Mapping[str, Any], chunks: list[bytes], how: str = "sse") -> tuple[bytes, list[Any]] | None:
    """A stream's tail and its last events parsed (``LAST_EVENTS``; ``how``: its framing, SSE or
    NDJSON), the tail grown from ``TAIL_BYTES`` while it holds no whole event; None past ``TAIL_MOST``
    (a longer last event)."""
    sep = b"\n\n" if how == "sse" else b"\n"
    size = TAIL_BYTES
    while True:
        tail, whole = _tail(chunks, size, sep)
        payloads, _ = ended_payloads(record, [_last_blocks(tail, LAST_EVENTS + 1, sep)], how)  # and [DONE]
        objs = [_loads(p.data) for p in payloads[-LAST_EVENTS:]]
        if whole or any(isinstance(obj, dict) for obj in objs):
            return tail, objs
        if size >= TAIL_MOST:
            return None
        size *= 4


def _why_ended(api: Api, objs: list[Any]) -> tuple[str | None, bool, bool, str | None]:
    """The finish reason a stream's last events (``objs``, parsed) give, as ``fold`` reads a whole
    stream's: the last one said (of choice 0), else ``error`` where one reports an error; whether
    any has the API's shape; whether any speaks for a choice other than 0 (n > 1: each choice
    finishes in its own event, any of them long before the end, so these can't tell whether every
    one did); and the error they report (``fold``'s ``error_message``: the last error said, else a
    chat or completions finish reason ``error``). Read from the last back: the first finish reason
    found is the answer's."""
    readable = others = False
    finish = error = None
    for obj in reversed(objs):
        if not isinstance(obj, dict):
            continue
        d = api.event(obj)
        others = others or bool(d.choices)
        message = d.error if d.known else error_of(obj)  # fold: an error object makes an event known
        error = error or message
        readable = readable or d.known or message is not None
        if finish is None and isinstance(d.finish_reason, str) and d.finish_reason:
            finish, readable = d.finish_reason, True
    if error is None and finish == "error" and (api is CHAT or api is COMPLETIONS):
        error = FINISHED_IN_ERROR  # as fold says it (choices_error)
    return (finish or ("error" if error else None)), readable, others, error


def _usage(api: Api, obj: Any) -> dict[str, Any] | None:
    """The engine's token counts one last event carries: a chat or completions usage chunk's, or
    what the API's own event says (Messages' ``message_delta``, the Responses final event's
    ``response.usage``)."""
    if not isinstance(obj, dict):
        return None
    usage = obj.get("usage") if api is CHAT or api is COMPLETIONS else api.event(obj).usage
    return usage if isinstance(usage, dict) else None


def _several_answers(record: Mapping[str, Any], api: Api) -> bool:
    """Whether the request may ask for several answers, each a choice of its own (``n`` > 1; a
    completions batch of prompts): their finish reasons may all come long before the stream's last
    events. Parsed only where its bytes name ``n`` or a completions prompt that is a list: an agent's
    long request is not parsed on the event loop. A body not kept asks for one, as far as is known."""
    raw = record.get("request_body")
    if not isinstance(raw, bytes) or (b'"n"' not in raw and not (api is COMPLETIONS and _LISTED_PROMPT.search(raw))):
        return False
    body = json_body(raw)
    if body is None:
        return False
    n = body.get("n")
    prompt = one_prompt(body.get("prompt")) if api is COMPLETIONS else None
    batch = isinstance(prompt, list) and not all(type(t) is int for t in prompt)  # several prompts, not one of token ids
    return (isinstance(n, int) and n > 1) or batch


def _tail(chunks: list[bytes], size: int, sep: bytes = b"\n\n") -> tuple[bytes, bool]:
    """The body's whole events within its last ``size`` bytes, and whether that is the whole body
    (a large last chunk is sliced: never more is read). A tail cut mid-event starts after its first
    ``sep`` (a blank line; a line's end, for NDJSON)."""
    taken: list[bytes] = []
    n = 0
    for chunk in reversed(chunks):
        taken.append(chunk)
        n += len(chunk)
        if n >= size:
            break
    tail = b"".join(reversed(taken))
    if len(taken) == len(chunks) and n <= size:
        return tail, True
    tail = tail[-size:]
    tail = tail.replace(b"\r\n", b"\n") if b"\r" in tail else tail
    cut = tail.find(sep)
    return (tail[cut + len(sep) :] if cut >= 0 else b""), False


def _last_blocks(tail: bytes, n: int, sep: bytes = b"\n\n") -> bytes:
    """The last ``n`` blocks of ``tail`` that ``sep`` separates (all of it where it holds fewer):
    only those are split into events."""
    at = len(tail.rstrip())
    for _ in range(n):
        at = tail.rfind(sep, 0, at)
        if at < 0:
            return tail
    return tail[at + len(sep) :]
