"""The recorder's HTTP/1.1 server: uvicorn's httptools protocol, plus two things a recording proxy
needs that ASGI has no message for. The app finds them in ``scope["extensions"]``.

- ``infertap.target``: a request target holding raw bytes past ASCII (``GET /v1/models/ünï``, as
  curl sends a URL it is given). llhttp refuses such a request line, and uvicorn answered a bare
  400 the app never saw, so nothing was recorded; engines' servers take it. The target is
  percent-encoded for the parser only, and the bytes received are handed to the app to forward
  and record as they came. Every request line is looked at, a pipelined one too: a read is fed to
  the parser in pieces that end where a request may begin (a head's end, a body's known length, a
  chunked body's last CRLF CRLF), so the next request line is read before the parser sees it. A
  body of known length is fed as it comes, unscanned; a request's head is scanned to its end.
- ``infertap.interim``: writes an interim response (``103 Early Hints``) to the client before the
  response starts, as a proxy must pass 1xx on (RFC 9110 15.2); ASGI's early-hint extension is
  HTTP/2's only, in uvicorn. Offered to HTTP/1.1 clients only: an HTTP/1.0 client can't be sent one.
- ``infertap.gone``: whether the client's connection is lost, as the server knows it (its cycle's
  ``disconnected``). uvicorn's ``send`` returns without writing once it is, and may do so before the
  app's ``receive`` has said ``http.disconnect``: the recorder counts a chunk as delivered only
  where the connection was still there after its ``send``. A write that fails (a client that closed
  its connection, kept open as a half-close: its reset) closes the transport at once but loses the
  connection a loop turn later: closing counts as gone, or that chunk was counted delivered.
- ``infertap.full``: whether the client's connection is full (the transport's writing paused): only
  then does ``send`` wait for the client, so only then is a slow hand-off the client's doing and not
  the machine's (a busy host can take the proxy off the CPU for milliseconds in any ``send``).
- A request refused (by the parser or the recorder) while a response to a request before it
  (pipelined) is still going is answered after that response ends, the connection closed then,
  every later byte of it kept as bytes after a request that ends the connection are (below):
  uvicorn wrote its 400 into the response still streaming and
  closed the connection, cutting that response short with the 400's bytes inside it. It is handed
  on (recorded) once that answer is written, or, where the connection closes first (the client
  gone, a shutdown, a request ahead ending the connection), as never answered, saying why.
- Requests queued behind a response (pipelined) are dropped by uvicorn with the connection where it
  closes before they run: that response cut short (its upstream reset), a shutdown, the client
  gone. Each is handed on at the close as a refusal never answered, with its head and body as they
  came (``_unrun``); the time its bytes came is kept for it while it is queued (one per request).
- ``infertap.upgrade``: the ``Upgrade`` asked for by a request the recorder can't relay as HTTP: a
  WebSocket (uvicorn is run with no WebSocket support: it answered a bare 500 and nothing was
  recorded), or any switch asked with a body (curl --http2's h2c POST), which the parser takes for
  the new protocol's bytes: the request was forwarded without its body. The app refuses it (501),
  and every later byte of the connection (past its body of known length) is kept as bytes after a
  request that ends the connection are (below); they were dropped without a record. An Upgrade without a body (h2c on a GET) is
  ignored, as RFC 9110 7.8 lets a server: the request is forwarded as HTTP.
- ``infertap.trailers``: the trailer fields after a chunked request body. uvicorn appends them to
  the request's headers, which the app had already recorded: they were forwarded to the upstream
  as headers (an ``Authorization`` among them), and never recorded. Kept apart, never forwarded
  (RFC 9110 6.5.2: the proxy sends the body with a Content-Length, no trailer section).
- An HTTP/1.0 client is never sent ``transfer-encoding: chunked`` (RFC 9112 7), which uvicorn sends
  any response without a Content-Length: it read the chunk-size lines as its body. Its response of
  no known length goes unframed and is ended by the connection's close, as nginx sends it
  (``_UnframedCycle``).
- A request's head has ``head_timeout`` seconds to arrive whole, from the connection's start or the
  next request's first byte, and at most ``max_head`` bytes: uvicorn has no limit on either (its
  keep-alive timeout runs only between requests), so a client sending a byte now and then held its
  connection forever, and a head that never ended grew without bound. Answered 408 or 431 and
  closed, recorded ``refused`` as the parser's refusals are; a connection that sent nothing of a
  request is closed without a word (none was made). A request line's start held behind a request
  in the same read had no deadline, and one after a request the keep-alive timeout's, which closed
  it unsaid: both have the head's now. One whose connection closes or resets first is recorded
  ``refused``, never answered, with the bytes that came of it.
- A request's body, once its head is in, may go ``body_timeout`` seconds between two reads (not in
  all: a large upload on a slow link passes while bytes keep coming), its chunked trailer section
  (or a chunk-size line) at most ``max_head`` bytes: uvicorn has neither, so a client trickling a
  body, or a trailer section that never ended, held its connection, and the recorder's slot, forever.
  Answered 408 or 431 and closed, recorded ``refused`` with the body that came. Each read costs one
  clock reading; the timer looks at it when it fires, and waits on while the proxy itself stopped
  reading (its flow control) or an earlier response on the connection is still going.
- A request's body ends by its length (RFC 9112 6.3): one sent with neither Content-Length nor
  chunked encoding, its end marked only by the client closing its side, is judged where its head
  ends, before the app has the request: bytes behind the head, in the read that ended it, that
  begin no request line are such a body. The app never has that request (it would forward it
  bodiless: an engine would run a request the client never sent whole); every byte that follows is
  kept, to the client's close (answered 400, saying so), ``body_timeout`` without one (408) or
  ``max_body`` bytes (413), and recorded ``refused`` with the head as read and the bytes as its
  body. A client that resets the connection before the body's end leaves that record too, with no
  answer (none could be written); a shutdown answers it 503. A POST, PUT or PATCH head of no length
  that ends its read is held, unforwarded, for the next read, the client's close or ``body_wait``
  seconds: a client may write its head and body apart. Bytes that begin no request line are its
  body, sent so (one refusal, as above); a request line, a close or the wait's end send it on
  bodiless, as RFC 9112 reads it (a POST with no length and no body, ``curl -X POST``, waits so).
  After the wait (``body_wait`` 0: not held), bytes of the next read that begin no request line
  are that request's body all the same, late: kept as above (``_late``), one refusal of that
  request (its method, target, headers) with every byte, answered 400 at the close after its
  bodiless answer (never, where that request ended the connection: uvicorn closes it after the
  bodiless answer, and the refusal is recorded unanswered); the bodiless request stays recorded as
  the upstream answered it. They were
  refused apart, a record of no method nor path keeping their first KiB (the parser had dropped
  them without a word after an HTTP/1.0 request, refused them as an "Invalid method" after 1.1).
- A client that closes its side (``shutdown(SHUT_WR)``) once its requests are whole, the last one
  ending the connection (``Connection: close``, or HTTP/1.0's default), is answered: the transport
  is kept open to write (``eof_received``) and uvicorn closes it after that response. uvicorn (its
  h11 protocol too) closed the connection at any close of the client's side, and such a client was
  never answered (``client_disconnected``). A keep-alive client's close is still its hang-up: a
  shutdown can't be told from a close until a write fails, and a hang-up cancels the upstream request.
- Bytes after a request that ends the connection (``Connection: close``, HTTP/1.0's default), in
  its read or a later one, before the close: RFC 9112 9.6 lets a server ignore them, and the parser
  did (uvicorn's ``lenient_data_after_close``) without a word, though a client pipelining its next
  request sent one. Their first KiB and their count are kept (``_keep_after``, nothing parsed) and
  handed on at the close as one refusal never answered, of the request they begin; empty lines
  alone are nothing sent (RFC 9112 2.2). So are those after a refusal that ends the connection
  (``_ends_with_refusal``), answered at once or held behind a response, which were dropped unsaid.
- ``infertap.refused``: set when the parser refused the request's body (a bad chunk size), which
  uvicorn answers a bare 400: the app, whose body then stops, records that (refusal.py), with the
  rest of the refused read from the end of the last data passed on, which the parser dropped
  (``_keep_unread``: its body had only the data before the error). A request
  refused in its head never reaches the app: it goes to ``on_refused``, the recorder's (``protocol``).
  uvicorn drops the parser's reason: it is read where uvicorn answers (``send_400_response``).
"""

from __future__ import annotations

import re
import sys
import time
from asyncio import TimerHandle
from collections import deque
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from .hops import HOP_RESPONSE
from .refusal import HEAD_BYTES, Refusal

_NOT_ASCII = re.compile(rb"[\x80-\xff]")
_REQUEST_LINE = re.compile(rb"[^ \r\n]+ ([^ \r\n]+) ")  # its method and target, the target whole
_ORIGIN = re.compile(rb"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")  # an absolute-form target's scheme and authority
_PHRASES = {s.value: s.phrase.encode() for s in HTTPStatus if s.value < 200}
_MAX_LINE = 65536  # a request line held this long without its end is passed to the parser as it is
_CRLFS = re.compile(rb"[\r\n]+")
_CHUNKED_END = re.compile(rb"\r\n\r\n(?=[!#$%&'*+\-.^_`|~0-9A-Za-z])")  # a last chunk's end, a method after it
_LINE_START = re.compile(rb"[\r\n]*(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?: |\Z)|\Z)")  # a request line's start, or none yet
_HELD_VERSION = re.compile(rb"[^ \r\n]+ [^ \r\n]+ HTTP/(\d\.\d)\r?\Z")  # a whole request line but its LF
_WHOLE_LINE = re.compile(rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^ \r\n]+) HTTP/(\d\.\d)\r?\n")  # method, target, version
_UNFRAMED = "its body came with neither Content-Length nor chunked encoding"
_AFTER_CLOSE = (
    "a request that ended the connection (Connection: close, or HTTP/1.0's default), which a server may ignore (RFC 9112 9.6)"
)
_AFTER_REFUSAL = "a request the recorder refused, whose answer ends the connection"
_ENDED = "the request ahead of it ended the connection (Connection: close, or HTTP/1.0's default), closed after its response"

HEAD_TIMEOUT = 30.0  # seconds for a request's head to arrive whole (nginx's client_header_timeout: 60)
BODY_TIMEOUT = 60.0  # seconds between two reads of a request's body (nginx's client_body_timeout)
MAX_BODY = 64 * 1024 * 1024  # bytes of a body sent unframed, kept until the client's close (the app's limit)
BODY_WAIT = 0.5  # seconds a head of no length that ended its read waits for a body sent unframed in the next
_CONTENT_METHODS = (b"POST", b"PUT", b"PATCH")  # those whose content has a meaning (RFC 9110 8.6): a body may follow
MAX_HEAD = 64 * 1024  # bytes of a request's head (nginx's 4 x 8 KiB; an LLM client's is under 2 KiB)

# Where the parser is within a request, between requests aside (a count >= 0: body bytes to come).
_HEAD = -1  # its request line or headers: they end at CRLF CRLF
_CHUNKED = -2  # a chunked body: it ends at CRLF CRLF (its last chunk's, or its trailers')


def _escape(match: re.Match[bytes]) -> bytes:
    return b"%%%02X" % match[0][0]


def split_target(target: bytes) -> tuple[bytes, bytes]:
    """A raw request target's path and query, as uvicorn splits an ASCII one (fragment dropped,
    an absolute-form target's scheme and authority too)."""
    target = _ORIGIN.sub(b"", target.partition(b"#")[0])
    path, _, query = target.partition(b"?")
    return path or b"/", query


class _Interim:
    """Writes one interim response to a request's connection, while its response has not started."""

    __slots__ = ("cycle",)

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self.cycle = cycle

    def __call__(self, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        cycle = self.cycle
        if cycle.response_started or cycle.disconnected or cycle.transport.is_closing():
            return False
        head = [b"HTTP/1.1 %d %s\r\n" % (status, _PHRASES.get(status, b""))]
        head += [n + b": " + v + b"\r\n" for n, v in headers if n.lower() not in HOP_RESPONSE]
        cycle.transport.write(b"".join(head) + b"\r\n")
        return True


class _UnframedCycle(RequestResponseCycle):
    """An HTTP/1.0 request's cycle: a response with no Content-Length is written as it comes, not
    chunked, and ended by closing the connection (uvicorn never keeps an HTTP/1.0 one alive)."""

    unframed = False

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start" and not self.response_started:
            framed = (b"content-length", b"transfer-encoding")
            if not any(name.lower() in framed for name, _ in message.get("headers", ())):
                self.unframed, self.chunked_encoding = True, False  # uvicorn then adds no transfer-encoding
        elif self.unframed:  # uvicorn writes a body of "known length" as it is: each piece is its own length
            self.expected_content_length = len(message.get("body", b""))
        await super().send(message)


def protocol(
    on_refused: Callable[[Refusal], None],
    *,
    head_timeout: float | None = HEAD_TIMEOUT,
    max_head: int = MAX_HEAD,
    body_timeout: float | None = BODY_TIMEOUT,
    max_body: int = MAX_BODY,
    body_wait: float = BODY_WAIT,
) -> type[ProxyHttpProtocol]:
    """The protocol for ``uvicorn.Config(http=...)``, handing ``on_refused`` the requests its parser
    refuses in their head (uvicorn builds one per connection, from the class)."""
    attrs = {
        "on_refused": staticmethod(on_refused),
        "head_timeout": head_timeout,
        "max_head": max_head,
        "body_timeout": body_timeout,
        "max_body": max_body,
        "body_wait": body_wait,
    }
    return type("RecordingHttpProtocol", (ProxyHttpProtocol,), attrs)


class ProxyHttpProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol, which the recorder serves with (``uvicorn.Config(http=...)``)."""

    on_refused: Callable[[Refusal], None] | None = None  # where a request refused in its head goes
    head_timeout: float | None = HEAD_TIMEOUT  # None: no limit
    max_head: int = MAX_HEAD
    body_timeout: float | None = BODY_TIMEOUT  # between two reads of a body; None: no limit
    max_body: int = MAX_BODY  # of a body sent unframed, kept until the client's close
    body_wait: float = BODY_WAIT  # for a body sent unframed after a head that ended its read; 0: none

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._between = True  # no request begun: the next bytes start a request line
        self._left = _HEAD  # where the parser is in the request begun (see _HEAD)
        self._upgrade = False  # the request asks to switch protocols: the rest of its read isn't HTTP
        self._switched = False  # a switch refused (infertap.upgrade): nothing more on this connection is HTTP
        self._held = bytearray()  # a request line's start, held until its end arrives
        self._target: bytes | None = None  # the raw target of the request being parsed
        self._refusal: Refusal | None = None  # the parser refused the request: uvicorn has answered it
        self._head: list[bytes | memoryview] = []  # the request's head as fed so far, its first HEAD_BYTES
        self._head_size = 0
        self._head_whole = True  # it begins at a line's start
        self._head_timer: TimerHandle | None = None  # the head's deadline (head_timeout), while it arrives
        self._body_timer: TimerHandle | None = None  # the body's idle deadline (body_timeout), while it arrives
        self._read_at = 0.0  # the loop's time of the last read
        self._framing = 0  # a chunked body's bytes fed since its last data: a chunk-size line, its trailers
        self._passed: list[bytes] = []  # the data the parser passed on from the chunked piece being fed
        self._begun = 0  # requests the parser has begun: a line that began one (and ended it, bodiless) is told apart
        self._read: bytes = b""  # the read being fed, and where the piece fed ends in it: what follows a head
        self._read_end = 0
        self._unframed: bytearray | None = None  # a body sent unframed, after a head the app never had
        self._unframed_size: int | None = None  # its size, where it went past max_body and is not kept
        self._version = ""  # the HTTP version of the connection's last request: a refusal with none read says it
        self._waiting: TimerHandle | None = None  # a head of no length held: does a body sent unframed follow?
        self._keep_alive = True  # the held request's, read before the parser forgets it (at its message's end)
        self._answer: bytes | None = None  # a refusal's answer, held until the responses before it have ended
        self._dropped: RequestResponseCycle | None = None  # a queued request refused: taken out, never run
        self._pending: Refusal | None = None  # its refusal: recorded once that answer is written, or can't be
        self._stopping = False  # the recorder is shutting down (shutdown): a held answer may never be written
        self._late = False  # the held head went on bodiless at body_wait's end: is the next read its body, late?
        self._why = _UNFRAMED  # what a body sent unframed is, in its refusal's reason
        self._begun_ns = 0  # when the request being read began to arrive (monotonic ns): a refusal's start
        self._after: bytearray | None = None  # after a request that ended the connection: the first bytes that followed
        self._after_size = 0  # and how many came
        self._after_why = _AFTER_CLOSE  # what they came after, in their refusal's reason
        self._after_skip = 0  # a refused Upgrade's body of known length, still to come: its own, not after it

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm_head_timer()  # a connection that never sends a whole head is held no longer

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self._stop_body_timer()
        if self._unframed is not None:  # a body sent unframed, the connection gone before its end (a reset)
            how = f"the connection was lost before its end ({exc})" if exc is not None else "the connection closed before its end"
            self._refused(Refusal(f"{self._why}, and {how}", b"", lost=True))
        elif self._waiting is not None:  # gone before a body or not followed: the app records it, unforwarded
            self._release()
        elif self._held and not self._switched and self._answer is None:  # a request line's start, never ended
            how = f"the connection was lost ({exc})" if exc is not None else "the connection closed"
            how = "the recorder shut down and closed the connection" if self._stopping else how
            self._refused_held(Refusal(f"{how} before its request line ended", b"", lost=True))
        if self.pipeline and self.on_refused is not None:  # requests queued behind a response, never run
            self._unrun(exc)
        if self._pending is not None:  # a refusal's answer held, never written: the connection went first
            if self._stopping:
                self._unwritten("the recorder shut down before the responses ahead of it ended")
            elif exc is not None:
                self._unwritten(f"the client's connection was lost ({exc}) before the responses ahead of it ended")
            else:
                self._unwritten("the connection closed before the responses ahead of it ended")
        if self._after_size and self.on_refused is not None:  # recorded after the request that ended the connection
            self.on_refused(self._after_refusal())
        super().connection_lost(exc)

    def shutdown(self) -> None:
        # uvicorn's graceful shutdown: a request held is served as it came (the connection closed
        # after it, as uvicorn ends one in flight); a body sent unframed won't end now: answered.
        self._stopping = True
        if self._waiting is not None:
            self._release()
        elif self._unframed is not None and not self._over():
            self._refuse(503, f"{self._why}, and the recorder shut down before its end")
            return
        super().shutdown()

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio reads True: keep the transport open to write
        # A request can't be ended by its client closing its side (RFC 9112 6.3: a request with
        # neither Content-Length nor chunked encoding has no body), so bytes kept behind such a head
        # (_unframed), or held as a request line's start, when it does are a body sent so: answered
        # and recorded, not dropped unsaid. A head held with nothing after it had no body: served.
        if self._unframed is not None and not self._over():
            self._refuse(
                400,
                f"{self._why}, its end marked only by the client closing its side: a request's body ends by its length, not by a close",
            )
        elif self._waiting is not None:
            self._release()
        elif self._held and not self._switched and not self._over():
            self._refuse(
                400,
                "the client closed its side after bytes that begin no request line, as a body sent with neither "
                "Content-Length nor chunked encoding leaves them: a request's body ends by its length, not by a close",
            )
        if self._answer is not None and not self.transport.is_closing():
            return True  # a request refused behind a response still going: that response, then its answer
        if self._half_closed():
            return True  # the transport stays open to write: uvicorn closes it after that last response
        super().eof_received()
        return None

    def _over(self) -> bool:
        """Whether the connection is answered for good: closing, or a refusal's answer held (``_answer``)."""
        return self._answer is not None or self.transport.is_closing()

    def _half_closed(self) -> bool:
        """Whether the client's close of its side (after its requests whole, the last one saying it
        ends the connection: ``Connection: close``, or HTTP/1.0's default) only ends its sending, so
        its answers are still written. uvicorn closed the connection at any close, and such a client
        was never answered (recorded ``client_disconnected``). A keep-alive client's close is taken
        for its hang-up, as before: a shutdown of its side can't be told from its close (a timeout's,
        an SDK's at ``[DONE]``) until a write fails, and the hang-up cancels the upstream request."""
        if not self._between or self._held or self._switched or self._over():
            return False
        last = self.pipeline[0][0] if self.pipeline else self.cycle  # the newest request (uvicorn's appendleft)
        return last is not None and not last.response_complete and not last.keep_alive

    def data_received(self, data: bytes) -> None:
        self._read_at = self.loop.time()
        if self._switched:  # a refusal answered (or its answer held): nothing more is HTTP, kept as sent
            self._keep_after(data)
            return
        if self._unframed is not None:  # a body sent unframed: kept, never parsed, to the client's close
            self._keep_unframed(data)
            return
        if self._late:  # the first read after a head held went on bodiless at the wait's end
            self._late = False
            if self._between and not self._held and not _LINE_START.match(data):  # its body, late: kept as one
                self._unframe()
                waited = (
                    f"had waited {self.body_wait:g} s for it" if self.body_wait > 0 else "was not held for it (a body wait of 0)"
                )
                self._why = f"{_UNFRAMED}, and came after its head {waited} and had gone to the upstream bodiless"
                self._keep_unframed(data)
                return
        if self._waiting is not None:  # a head of no length held: this read says whether a body follows it
            if _LINE_START.match(data):  # the next request: the one held had no body (RFC 9112 6.3)
                self._release()
            else:  # its body, sent unframed, in a later read than its head
                self._unframe()
                self._keep_unframed(data)
                return
        if self._after is not None:  # behind a request that ended the connection: the parser drops them
            self._keep_after(data)
            return
        # A body's bytes, known to go on past this read: no request begins in them (nor is refused).
        if not self._between and self._left >= len(data):
            super().data_received(data)
            return
        if self._between and self._head_timer is None:  # the next request's first bytes: its head's clock starts
            self._arm_head_timer()
        view, pos, end = memoryview(data), 0, len(data)
        while pos < end:
            piece: bytes | memoryview | None
            line = self._between
            if line and not self._held and data[pos] in b"\r\n":  # empty lines before a request (RFC 9112 2.2)
                cut, line = _CRLFS.match(data, pos).end(), False  # type: ignore[union-attr]
                piece = view[pos:cut]
            elif line:
                if not self._held:  # a request line's first bytes (once per request, not per read)
                    self._begun_ns = time.monotonic_ns()
                cut, piece = self._request_line(data, view, pos)
                if piece is None:
                    return  # the line's start, held
            else:
                cut = self._cut(data, pos)
                piece = view[pos:cut]
            begun = self._begun
            self._read, self._read_end = data, cut  # what follows a head that ends this piece (on_headers_complete)
            self._feed(piece, line or (pos > 0 and data[pos - 1] == 10))
            self._read = b""
            if self._unframed is not None:  # the piece ended a head with a body sent unframed behind it
                self._keep_unframed(view[cut:])
                return
            if self._after is not None:  # the piece ended a request that ends the connection
                self._keep_after(view[cut:])
                return
            if self._over() or self._upgrade:
                self._upgrade = False
                return  # switched away from HTTP (an Upgrade served as such): uvicorn drops the rest
            if line and self._between and self._begun == begun:  # a line that began no request: the parser skips what follows
                self._feed(view[cut:], data[cut - 1] == 10)
                return
            pos = cut

    def _unframe(self) -> None:
        """The request whose head was read last has a body sent unframed: the app never has it."""
        self._stop_waiting()
        self._unframed = bytearray()
        if self.body_timeout is not None:
            self._body_timer = self.loop.call_later(self.body_timeout, self._body_timed_out)

    def _stop_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def _waited(self) -> None:
        """No read came in ``body_wait``: the head goes on bodiless; bytes of the next read that begin
        no request line are its body all the same, late (one refusal, of that request, all its bytes)."""
        self._release()
        self._late = True

    def _release(self) -> None:
        """The request held goes to the app as it came: bodiless, as RFC 9112 6.3 reads it."""
        self._stop_waiting()
        self._dispatch()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:  # the parser forgot its Connection: close at its end
            cycle.keep_alive = cycle.keep_alive and self._keep_alive
        self.on_message_complete()

    def _keep_unframed(self, data: bytes | memoryview) -> None:
        kept = self._unframed
        assert kept is not None
        if self._over():
            return
        size = len(kept) + len(data)
        if size <= self.max_body:
            kept += data
        else:  # not kept whole: none of it (its size said), as the app refuses a body over its limit
            self._unframed, self._unframed_size = bytearray(), size
            self._refuse(413, f"{self._why}, and is over {self.max_body} bytes")

    def _feed(self, piece: bytes | memoryview, whole: bool) -> None:
        """``whole``: the piece begins at a line's start."""
        head = self._between or self._left == _HEAD
        if self._between:  # a request's head (or the empty lines before one) begins here
            self._head, self._head_size, self._head_whole = [], 0, whole
        over = self._head_size + len(piece) - self.max_head if head else 0
        framing = self._left == _CHUNKED
        if framing:
            self._framing += len(piece)  # on_body sets it back to 0 where the piece carries data
            self._passed = []
        if over > 0:  # the parser reads the head up to its limit (its request line, its headers so far)
            piece = piece[: len(piece) - over]
        if head:
            if self._head_size <= HEAD_BYTES:  # a head cut across reads goes on
                self._head.append(piece)  # a reference to the read, no copy: bytes that stay as they are
            self._head_size += len(piece)
        super().data_received(piece)  # type: ignore[arg-type]  # the parser takes a memoryview: no copy
        if self._refusal is not None:
            if framing:  # refused in its chunked body: the rest of the piece was never body (nor parsed on)
                self._keep_unread(self._refusal, piece)
            self._refused(self._refusal)
        elif over > 0 and not self._over():
            self._refuse(431, f"its head is over {self.max_head} bytes")
        elif framing and self._framing > self.max_head and not self._between and not self._over():
            self._refuse_body(431, f"its chunked body's trailer section is over {self.max_head} bytes")

    def _keep_unread(self, refusal: Refusal, piece: bytes | memoryview) -> None:
        """The refused piece's bytes from the end of the last data the parser passed on: the error
        lies in them (llhttp doesn't say where), and the parser dropped them. That data is found by
        searching forward, so a match inside a chunk-size line ends it early: a few bytes more kept,
        never fewer."""
        raw, end = bytes(piece), 0
        for data in self._passed:
            at = raw.find(data, end)
            if at < 0:  # not in this piece (none should be): kept from the last found
                break
            end = at + len(data)
        self._passed = []
        refusal.body_cut, refusal.unread, refusal.unread_size = True, raw[end : end + HEAD_BYTES], len(raw) - end

    def _arm_head_timer(self) -> None:
        if self.head_timeout is not None:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._over():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:  # a response is still going: the head waits its turn
            self._arm_head_timer()
        elif self._between and not self._held:  # no request begun: an idle connection, closed
            self.transport.close()
        else:
            self._refuse(408, f"its head not whole after {self.head_timeout:g} s")

    def _stop_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        timeout = self.body_timeout
        if timeout is None or (self._between and self._unframed is None) or self._over():
            return
        now, cycle = self.loop.time(), self.cycle
        if self.flow.read_paused or any(queued is cycle for queued, _ in self.pipeline):
            self._read_at = now  # the proxy isn't reading, or the request waits its turn: not the client's doing
        idle = now - self._read_at
        if idle < timeout:
            self._body_timer = self.loop.call_later(timeout - idle, self._body_timed_out)
        else:
            self._refuse_body(408, f"its body idle for {timeout:g} s")

    def _refuse_body(self, status: int, reason: str) -> None:
        """Gives up on a request's body: answered and recorded (``_refuse``), unless the app has
        answered it already (a 413, a 401, before its body ended): then the connection is closed."""
        self._stop_body_timer()
        cycle = self.cycle
        if self._unframed is None and cycle is not None and cycle.scope is self.scope and cycle.response_started:
            self._ends_with_refusal()
            self.transport.close()
        else:
            self._refuse(status, reason)

    def _refuse(self, status: int, reason: str) -> None:
        """Answers a request the server gives up on (its head, its body), closes the connection and
        hands the refusal on."""
        if self._answer is not None:  # one refusal per connection: every later byte is kept after it
            return
        phrase = HTTPStatus(status).phrase
        answer = f"{phrase}: {reason}.".encode("ascii")
        self._close_with(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, phrase.encode("ascii"), len(answer), answer)
        )
        refusal = Refusal(reason, answer, status)
        refusal.body_cut = not self._between and self._left != _HEAD and self._unframed is None  # its body not whole
        if not self._between or self._unframed is not None:  # the parser has read the request: recorded so
            self._refused(refusal)
        else:  # its request line still arriving, held (_request_line)
            self._refused_held(refusal)

    def _refused_held(self, refusal: Refusal) -> None:
        """A refusal of the request line held (``_request_line``), with the bytes that came of it."""
        if self.client:
            refusal.client = f"{self.client[0]}:{self.client[1]}"
        held = _HELD_VERSION.match(self._held)  # a line whole but its end says its version; else the connection's
        refusal.http_version = held[1].decode("ascii") if held else self._version
        refusal.head = bytes(self._held[:HEAD_BYTES])
        self._held = bytearray()
        self._hand_on(refusal)

    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this from its ``except HttpParserError``, the error at hand, its reason dropped.
        error = sys.exc_info()[1]
        head = [b"HTTP/1.1 400 Bad Request\r\n"] + [n + b": " + v + b"\r\n" for n, v in self.server_state.default_headers]
        self._close_with(
            b"".join(head) + b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (len(msg), msg.encode("ascii"))
        )  # uvicorn's answer, as it writes it
        reason = str(error) if error is not None else msg
        self._refusal = Refusal(reason, msg.encode("ascii"), by="the recorder's HTTP parser")

    def _close_with(self, answer: bytes) -> None:
        """Writes a refusal's answer and closes the connection; after the responses still going on it,
        to requests before the refused one (pipelined): uvicorn wrote its 400 into a response still
        streaming and closed the connection, cutting that response short with the 400's bytes inside
        it. Every later byte of the connection is kept for one record (``_ends_with_refusal``)."""
        self._ends_with_refusal()  # answered now or held: the rest of this read, and any later, kept so
        if not self._between and self._left == _HEAD and self._after_why == _AFTER_REFUSAL:
            self._after_why += ", in its head (its own body, if it had one, among them: its length was never read)"
        cycle = self.cycle
        own = not self._between and cycle is not None and cycle.scope is self.scope  # the refused request's cycle
        queued = own and any(queued is cycle for queued, _ in self.pipeline)
        if cycle is not None and not cycle.response_complete and (queued or not own):
            if queued:  # never run: refused, recorded by on_refused (_refused)
                self.pipeline = deque(entry for entry in self.pipeline if entry[0] is not cycle)
                self._dropped = cycle
            self._answer, self._switched = answer, True
            self._stop_body_timer()
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None
        elif own and cycle is not None and cycle.response_started:  # the app answered it before its body ended
            self.transport.close()
        else:
            self.transport.write(answer)
            self.transport.close()

    def on_response_complete(self) -> None:
        last = not self.pipeline  # no response to come before a refusal's answer held
        super().on_response_complete()
        cycle = self.cycle  # uvicorn closed the connection after that response, which ended it (or a shutdown did)
        ended = self.transport.is_closing() and cycle is not None and not cycle.keep_alive
        why = "the recorder shut down and closed the connection after the response ahead of it" if self._stopping else _ENDED
        if self._unframed is not None and ended:  # a late body (_late): its own request ended the connection
            self._refused(Refusal(f"{self._why}, and {why}", b"", lost=True))
        elif self._unframed is not None or self._held:  # a body sent unframed, a request line, still coming:
            self._unset_keepalive_if_required()  # their deadlines are body_timeout's and head_timeout's
        if self._answer is None:
            return
        if ended:
            if self._pending is not None:
                self._unwritten(why)
        elif last and not self.transport.is_closing():
            self._unset_keepalive_if_required()
            self.transport.write(self._answer)
            self.transport.close()
            self._hand_on(None)

    def _hand_on(self, refusal: Refusal | None) -> None:
        """A refusal to ``on_refused``; one whose answer is held behind the responses ahead of it
        (``_answer``) once that answer is written, or can't be (``_unwritten``): recorded at once as
        answered, it claimed an answer the client never got where the connection closed first. Its
        record (and its ``seq``) so comes after those of the requests ahead of it."""
        if refusal is not None and not refusal.arrived_ns:  # its start: when its bytes came, not when recorded
            refusal.arrived_ns = self._begun_ns
        if refusal is not None and self._answer is not None:
            self._pending = refusal
            return
        refusal, self._pending = refusal or self._pending, None
        if refusal is not None and self.on_refused is not None:
            self.on_refused(refusal)

    def _unwritten(self, why: str) -> None:
        """The refusal held is recorded unanswered: ``why`` its answer was never written."""
        assert self._pending is not None
        self._pending.lost, self._pending.unsent = True, why
        self._hand_on(None)

    def _refused(self, refusal: Refusal) -> None:
        """The refused request handed to whoever records it: the app, where it has the request, else
        ``on_refused`` (with what the parser read of it, and the head's bytes: every read of it)."""
        self._refusal = None
        cycle, scope = self.cycle, self.scope
        # Not a late body's (_waited), nor a queued request's, taken out of the pipeline (_close_with).
        own = self._unframed is None and cycle is not None and cycle.scope is scope and cycle is not self._dropped
        if own and cycle is not None and all(queued is not cycle for queued, _ in self.pipeline):
            if not cycle.response_complete:  # its body stops: the app records it so (app.py's _read_body)
                extensions: dict[str, Any] = scope.setdefault("extensions", {})
                extensions["infertap.refused"] = refusal
            return
        if self.on_refused is None:
            return
        url = self._target if self._target is not None else getattr(self, "url", b"")  # none before a message began
        if url:  # the parser read the request line: its method is known
            refusal.method = self.parser.get_method().decode("latin-1")
            refusal.target = url
            version = self.parser.get_http_version()
            refusal.http_version = version if version != "0.0" else self._version  # 0.0: not read: the connection's
        else:
            refusal.http_version = self._version  # none read of this request's line: the connection's
        refusal.headers = list(self.headers or ())
        if self.client:
            refusal.client = f"{self.client[0]}:{self.client[1]}"
        if self._unframed is not None:  # its head read whole, the app never had it: its body sent unframed
            refusal.body, refusal.body_size = bytes(self._unframed), self._unframed_size
            self._unframed = None
        elif cycle is not None and cycle.scope is scope:  # read whole, queued behind a request: its body refused
            refusal.body = bytes(cycle.body)
        else:  # the head as read so far, every read of it, not the refused one alone
            head = b"".join(self._head)[: HEAD_BYTES + 4]
            if not self._head_whole:  # it begins inside a line, which may be a credential's
                head = head[head.find(b"\n") + 1 :] if b"\n" in head else b""
            refusal.head = head.partition(b"\r\n\r\n")[0][:HEAD_BYTES]  # the head's bytes only
        self._head, self._head_size = [], 0
        self._hand_on(refusal)

    def _cut(self, data: bytes, pos: int) -> int:
        """Where the piece fed from ``pos`` ends: at the latest, where the request may end."""
        left = self._left
        if left > 0:
            return min(pos + left, len(data))
        if left == 0:
            return len(data)
        if data[pos] in b"\r\n":  # a head's or a last chunk's end, cut across reads, may be here
            return _CRLFS.match(data, pos).end()  # type: ignore[union-attr]
        if left == _HEAD:
            found = data.find(b"\r\n\r\n", pos)
            return found + 4 if found >= 0 else len(data)
        chunked_end = _CHUNKED_END.search(data, pos)
        return chunked_end.end() if chunked_end else len(data)

    def _request_line(self, data: bytes, view: memoryview, pos: int) -> tuple[int, bytes | memoryview | None]:
        """Where the piece fed from ``pos`` ends and the piece: an ASCII request line with the rest of
        its head, or a raw target's line percent-encoded; none while the line is still arriving (only
        each read's own bytes are searched for its end: a line sent a byte at a time costs no more
        than one sent whole)."""
        nl = data.find(b"\n", pos)
        if nl < 0 and len(self._held) + len(data) - pos < min(_MAX_LINE, self.max_head):
            if not self._held:  # a request begun: its head's deadline runs (behind a request in this read too)
                if self._head_timer is None:
                    self._arm_head_timer()
                self._unset_keepalive_if_required()  # not the keep-alive timeout's, which closes unsaid
            self._held += view[pos:]
            return len(data), None
        cut = len(data) if nl < 0 else nl + 1
        line, start, stop = data, pos, cut
        if self._held:
            line, start = bytes(self._held) + data[pos:cut], 0
            stop, self._held = len(line), bytearray()
        request = _REQUEST_LINE.match(line, start, stop)
        if request is not None and not request[1].isascii():
            target = self._target = request[1]
            return cut, line[start : request.start(1)] + _NOT_ASCII.sub(_escape, target) + line[request.end(1) : stop]
        if line is not data:
            return cut, line
        head_end = data.find(b"\r\n\r\n", max(pos, cut - 2))  # the usual request: line and head, one piece
        return (cut, view[pos:cut]) if head_end < 0 else (head_end + 4, view[pos : head_end + 4])

    def on_message_begin(self) -> None:
        self._between, self._left = False, _HEAD
        self._begun += 1
        if self._head_timer is None:  # a request begun in the read that ended the one before it
            self._arm_head_timer()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        if self._head_timer is not None:  # the head is whole: its body's deadline is body_timeout's
            self._head_timer.cancel()
            self._head_timer = None
        self._version = self.parser.get_http_version()
        left, framed = 0, False  # left 0 where framed: the parser refused a request whose length it could not tell
        for name, value in self.headers:
            if name == b"transfer-encoding":
                left, framed = _CHUNKED, True
                break
            if name == b"content-length":
                left, framed = int(value) if value.isdigit() else 0, True
        self._left, self._framing = left, 0
        if not framed and self._read and not self.parser.should_upgrade():
            if not _LINE_START.match(self._read, self._read_end):
                # Bytes behind a head of no body that begin no request line: a body sent unframed, judged
                # before the app has the request, which is never forwarded (_keep_unframed).
                self._unframe()
                return
            if self._read_end == len(self._read) and self.parser.get_method() in _CONTENT_METHODS:
                # Its head ended the read: a body sent unframed may come in the next (a client writing
                # head and body apart). Held, unforwarded, until that read, the client's close or
                # body_wait: a POST sent with no length and no body (curl -X POST) waits that long.
                if self.body_wait > 0:
                    self._keep_alive = self.parser.should_keep_alive()
                    self._waiting = self.loop.call_later(self.body_wait, self._waited)
                    return
                self._late = True  # not held: a body in the next read is still its own, late (_waited)
        self._dispatch()

    def _dispatch(self) -> None:
        """The request whose head was read goes to the app (uvicorn's cycle), with the extensions."""
        left = self._left
        extensions: dict[str, Any] = self.scope.setdefault("extensions", {})  # uvicorn's own kept, if any
        if self._target is not None:
            extensions["infertap.target"], self._target = self._target, None
        if left != 0 and self.body_timeout is not None and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.body_timeout, self._body_timed_out)
        self._upgrade = self.parser.should_upgrade()  # cleared once its read is dropped
        if self._upgrade and not self._should_upgrade():
            asked = next((v for n, v in self.headers if n == b"upgrade"), b"")
            if left != 0 or asked.strip().lower() == b"websocket":  # not to be answered as HTTP: refused
                extensions["infertap.upgrade"] = asked.decode("latin-1")
                self._switched = True
                self._ends_with_refusal()
                if left > 0:  # its own body, not after it
                    self._after_skip = left
                elif left == _CHUNKED:  # its end unknown unparsed: kept with what follows, said so
                    self._after_why += " (its chunked body among them)"
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope and self.scope.get("http_version") == "1.0":
            cycle.__class__ = _UnframedCycle  # its app task has not run yet: its send is looked up when it does
        if self.pipeline and self.pipeline[0][0] is cycle:  # queued behind a response: when it came, if never run
            extensions["infertap.queued_ns"] = self._begun_ns
        if cycle is not None and cycle.scope is self.scope:
            extensions["infertap.gone"] = lambda: cycle.disconnected or cycle.transport.is_closing()  # a write failed: closing
            extensions["infertap.full"] = lambda: cycle.flow.write_paused
            if self.scope.get("http_version") == "1.1":
                extensions["infertap.interim"] = _Interim(cycle)

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._left != _CHUNKED:  # the head's
            super().on_header(name, value)
            return
        extensions: dict[str, Any] = self.scope.setdefault("extensions", {})
        trailers: list[tuple[bytes, bytes]] = extensions.setdefault("infertap.trailers", [])
        trailers.append((name.lower(), value.rstrip(b" \t")))  # as uvicorn keeps a header

    def _unsupported_upgrade_warning(self) -> None:
        pass  # uvicorn's advice to install a WebSocket library: the app answers the request and records it

    def on_body(self, body: bytes) -> None:
        if self._left > 0:
            self._left -= len(body)
        else:
            self._framing = 0
            self._passed.append(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._unframed is not None or self._waiting is not None:  # a request the app hasn't (yet): see its head's end
            return
        self._between = True
        self._stop_body_timer()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope and not cycle.keep_alive:
            self._after = bytearray()  # the connection ends with its response: later bytes are never parsed
        super().on_message_complete()

    def _keep_after(self, data: bytes | memoryview) -> None:
        """Bytes after a request that ends the connection (``Connection: close``, HTTP/1.0's default):
        RFC 9112 9.6 lets a server ignore them, and the parser does (uvicorn's
        ``lenient_data_after_close``), but each was something the client sent: their first KiB and
        their count are kept for one record, written when the connection closes (``_after_refusal``).
        Empty lines alone (RFC 9112 2.2, some clients end a body so) are nothing sent."""
        kept = self._after
        assert kept is not None
        if self._after_skip:  # a refused Upgrade's own body
            skip = min(self._after_skip, len(data))
            data, self._after_skip = data[skip:], self._after_skip - skip
        if not self._after_size:
            start = _CRLFS.match(data)
            data = data[start.end() :] if start else data
            if not data:
                return
            self._begun_ns = time.monotonic_ns()
        self._after_size += len(data)
        room = HEAD_BYTES + 4 - len(kept)
        if room > 0:
            kept += data[:room]

    def _unrun(self, exc: Exception | None) -> None:
        """The requests queued behind a response (pipelined) that the connection's close left never
        run: a response ahead cut short (its upstream reset), the recorder's shutdown, the client
        gone. uvicorn drops them with the connection, and they went without a record: each is handed
        on as a refusal never answered, with its head and the body that came, oldest first; a body
        still arriving is said to be cut short, its bytes kept as a part, not the request's whole body."""
        assert self.on_refused is not None
        if exc is not None:
            how = f"the client's connection was lost ({exc}) before its turn"
        elif self._stopping:
            how = "the recorder shut down and closed the connection before its turn"
        else:
            how = "the connection closed before its turn (a response ahead of it cut short, or ending the connection)"
        client = f"{self.client[0]}:{self.client[1]}" if self.client else None
        while self.pipeline:
            cycle, _ = self.pipeline.pop()  # the oldest (uvicorn's appendleft)
            scope: dict[str, Any] = cycle.scope  # type: ignore[assignment]
            extensions = scope.get("extensions") or {}
            target = extensions.get("infertap.target")
            if target is None:
                query = scope["query_string"]
                target = scope["raw_path"] + (b"?" + query if query else b"")
            body = bytes(cycle.body)
            cut = ""
            if cycle.more_body:  # its body still arriving (uvicorn's flag, cleared at its message's end): a part
                length = next((v.decode("latin-1") for n, v in scope["headers"] if n == b"content-length"), "")
                cut = f"; its body cut short: {len(body)}{f' of {length}' if length else ''} bytes came before the close"
            refusal = Refusal(
                f"it was queued behind a response on its connection, and {how}{cut}", b"", lost=True, never_run=True
            )
            refusal.method, refusal.target, refusal.http_version = scope["method"], target, scope["http_version"]
            refusal.headers, refusal.client, refusal.body = list(scope["headers"]), client, body
            refusal.body_cut = bool(cut)
            refusal.arrived_ns = extensions.get("infertap.queued_ns", 0)
            self.on_refused(refusal)

    def _ends_with_refusal(self) -> None:
        """A refusal's answer ends the connection: the bytes that follow it are kept (``_keep_after``)
        for one record at the close, as after a request that ends the connection."""
        if self._after is None:  # not already after such a request
            self._after, self._after_why = bytearray(), _AFTER_REFUSAL

    def _after_refusal(self) -> Refusal:
        """The bytes after a request that ended the connection, as a refusal never answered: the
        request they begin (its method, target and version where its request line is whole)."""
        assert self._after is not None
        size, kept = self._after_size, bytes(self._after)
        reason = f"{size} bytes came after {self._after_why}: never read"
        refusal = Refusal(reason, b"", lost=True, arrived_ns=self._begun_ns)
        line = _WHOLE_LINE.match(kept)
        if line is not None:
            refusal.method, refusal.target, refusal.http_version = line[1].decode("ascii"), line[2], line[3].decode("ascii")
        else:
            refusal.http_version = self._version
        refusal.head = kept.partition(b"\r\n\r\n")[0][:HEAD_BYTES]
        if self.client:
            refusal.client = f"{self.client[0]}:{self.client[1]}"
        self._after, self._after_size = None, 0
        return refusal
