"""A request the recorder's HTTP parser refused (a malformed request line, an invalid header, a bad
chunk size): uvicorn answers it a bare 400 and closes the connection, and the app never hears why.
Or one the server gave up on itself (wire.py): its head or body not whole in time (408), too large
(431), a body sent with neither Content-Length nor chunked encoding (400, or 413 past the limit; none
where its client reset the connection first: ``lost``, recorded unanswered).
The server (wire.py) hands the refusal on, and the app records it as the exchange it was: ``refused``
with that answer, ``proxy_generated``, who refused it and why in its error, the client's HTTP version.

A request refused in its body is with the app already: the app records it when its body stops
(``infertap.refused`` in the scope's extensions). One refused in its head never reached the app:
the server gives the app what the parser had read of it, and the refused bytes of its head, whose
credentials the app takes out before they are queued (``redacted_head``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from infertap.capture.records import Exchange
from infertap.capture.redact import REDACTED, Redactor

#: The most bytes of a refused head kept (``refused_head``): enough to see what was wrong with it.
HEAD_BYTES = 1024

_NAME = re.compile(rb"[ \t]*([A-Za-z0-9_.-]+)")  # a header line's name, however the line goes on
_URL_QUERY = re.compile(rb"(?<=\?)[^ \t\r#]*")  # a target's query, in a request line or a URL-valued header


@dataclass(slots=True)
class Refusal:
    """What the parser refused, and the 400 the client got for it (as uvicorn wrote it); or a head
    the server gave up on: too slow (408) or too large (431)."""

    reason: str  # the parser's own words ("Invalid header token"), or the server's
    answer: bytes  # the answer's body
    status: int = 400
    # Known only for a request refused in its head, which the app never saw (the parser's reading so far):
    method: str = ""
    target: bytes = b""
    http_version: str = ""  # "": its request line not read, on a connection with no request read before
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    client: str | None = None
    head: bytes = b""  # the head's bytes read (every read), from a line's start, at most HEAD_BYTES: unredacted
    body: bytes = b""  # the body that came, where the head was read whole
    body_size: int | None = None  # where that body was not kept (over the limit): its size
    by: str = "the recorder"  # who refused it: the recorder (wire.py), or its HTTP parser (llhttp)
    lost: bool = False  # the client's connection was gone (a reset) before it could be answered: no answer
    unsent: str = ""  # where its answer, held behind the responses ahead of it, was never written: why
    arrived_ns: int = 0  # when its first bytes came (time.monotonic_ns()); 0: when handed on
    never_run: bool = False  # not refused: queued behind a response, dropped with the connection before its turn
    body_cut: bool = False  # its body is not whole: cut short by the refusal or the close (``request_body_cut``)
    # A chunked body refused in a read: that read's bytes from the last data the parser passed on (the
    # refused chunk-size line and what followed it), at most HEAD_BYTES, and how many there were.
    unread: bytes = b""
    unread_size: int = 0

    @property
    def error(self) -> str:
        if self.never_run:
            return f"the request was never run: {self.reason}; the client was never answered"
        reason = self.reason
        if self.unread_size:
            reason += f"; {self.unread_size} bytes of its body's read, from the end of the last data passed on, never read as body (refused_body)"
        if self.lost:
            unsent = f"; its answer ({self.status}) waited for the responses ahead of it and was never written: {self.unsent}"
            return f"{self.by} refused the request ({reason}){unsent if self.unsent else ''}; the client was never answered"
        return f"{self.by} refused the request ({reason}); the client was answered {self.status}"

    def answered(self, record: Exchange, at_ns: int = 0) -> None:
        """``record`` as refused with the answer the client got (none, where its connection was lost),
        written, or known lost, ``at_ns`` after the record's start."""
        if self.body_cut:
            record["request_body_cut"] = True
        if self.unread_size:
            record["refused_body"] = self.unread
        if self.lost:
            record.update({"end": "refused", "error": self.error, "end_ns": at_ns})
            return
        record.update(
            {"end": "refused", "error": self.error, "status": self.status, "headers_ns": at_ns, "proxy_generated": True}
        )
        record["response_headers"] = [
            ["content-type", "text/plain; charset=utf-8"],
            ["content-length", str(len(self.answer))],
            ["connection", "close"],
        ]
        record["chunks"], record["chunk_ns"], record["end_ns"] = [self.answer], [at_ns], at_ns


def redacted_head(raw: bytes, redactor: Redactor) -> bytes:
    """Refused head bytes as recorded: the value of every line named as a credential header taken
    out, a line refused for its form too (``Authorization Bearer sk-...`` without its colon, a space
    before the colon, a value folded onto the next line), and secret query parameters redacted."""
    lines = raw.split(b"\n")
    secret = False
    for i, line in enumerate(lines):
        if line[:1] in (b" ", b"\t") and i:  # an obsolete fold goes on with the line above
            if secret:
                lines[i] = line[:1] + REDACTED.encode() + (b"\r" if line.endswith(b"\r") else b"")
            continue
        name = _NAME.match(line)
        secret = name is not None and redactor.secret_header(name[1])
        if secret:
            assert name is not None
            value = line[name.end() :].lstrip(b" \t:").rstrip(b"\r").decode("latin-1")
            kept = redactor.redact_value(name[1].decode("latin-1"), value) if value else ""
            lines[i] = name[0] + b": " + kept.encode("latin-1") + (b"\r" if line.endswith(b"\r") else b"")
        elif b"?" in line:
            lines[i] = _URL_QUERY.sub(lambda m: redactor.query(m[0].decode("latin-1")).encode("latin-1"), line)
    return b"\n".join(lines)
