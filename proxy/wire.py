"""The recorder's HTTP/1.1 server: uvicorn's httptools protocol, plus two things a recording proxy
needs that ASGI has no message for. The app finds them in ``scope["extensions"]``.

- ``infertap.target``: a request target holding raw bytes past ASCII (``GET /v1/models/ünï``, as
  curl sends a URL it is given). llhttp refuses such a request line, and uvicorn answered a bare
  400 the app never saw, so nothing was recorded; engines' servers take it. The target is
  percent-encoded for the parser only, and the bytes received are handed to the app to forward
  and record as they came. Only a request's first line read is looked at: a raw target pipelined
  behind another request in the same read still gets the parser's 400.
- ``infertap.interim``: writes an interim response (``103 Early Hints``) to the client before the
  response starts, as a proxy must pass 1xx on (RFC 9110 15.2); ASGI's early-hint extension is
  HTTP/2's only, in uvicorn. Offered to HTTP/1.1 clients only: an HTTP/1.0 client can't be sent one.
- ``infertap.gone``: whether the client's connection is lost, as the server knows it (its cycle's
  ``disconnected``). uvicorn's ``send`` returns without writing once it is, and may do so before the
  app's ``receive`` has said ``http.disconnect``: the recorder counts a chunk as delivered only
  where the connection was still there after its ``send``.
- ``infertap.full``: whether the client's connection is full (the transport's writing paused): only
  then does ``send`` wait for the client, so only then is a slow hand-off the client's doing and not
  the machine's (a busy host can take the proxy off the CPU for milliseconds in any ``send``).
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from .hops import HOP_RESPONSE

_NOT_ASCII = re.compile(rb"[\x80-\xff]")
_REQUEST_LINE = re.compile(rb"[\r\n]*[^ \r\n]+ ([^ \r\n]+) ")  # its method and target, the target whole
_ORIGIN = re.compile(rb"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")  # an absolute-form target's scheme and authority
_PHRASES = {s.value: s.phrase.encode() for s in HTTPStatus if s.value < 200}
_MAX_LINE = 65536  # a request line held this long without its end is passed to the parser, which refuses it


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


class ProxyHttpProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol, which the recorder serves with (``uvicorn.Config(http=...)``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._between = True  # no request begun: the next bytes start a request line
        self._held = bytearray()  # a request line's start, held until its end arrives
        self._begun = False  # the held bytes hold more than the empty lines a request may follow
        self._target: bytes | None = None  # the raw target of the request being parsed

    def data_received(self, data: bytes) -> None:
        # The usual first read (the request line whole, ASCII) costs a scan to its first line end.
        if self._between and (self._held or not data.isascii() or b"\n" not in data.lstrip(b"\r\n")):
            data = self._request_line(data)
            if not data:
                return
        super().data_received(data)

    def _request_line(self, data: bytes) -> bytes:
        """The bytes to parse, a raw target percent-encoded; none while the request line is still
        arriving (only each read's own bytes are searched for its end: a line sent a byte at a time
        costs no more than one sent whole). Empty lines before it (RFC 9112 2.2) are passed on."""
        scan = data if self._begun else data.lstrip(b"\r\n")
        self._begun = self._begun or bool(scan)
        self._held += data
        if b"\n" not in scan and len(self._held) < _MAX_LINE:
            return b""  # only part of the request line: its target is read whole
        data, self._held, self._begun = bytes(self._held), bytearray(), False
        line = _REQUEST_LINE.match(data)
        if line is None:
            return data  # no request line: the parser answers it
        target = line[1]
        if target.isascii():
            return data
        self._target = target
        return data[: line.start(1)] + _NOT_ASCII.sub(_escape, target) + data[line.end(1) :]

    def on_message_begin(self) -> None:
        self._between = False
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        extensions: dict[str, Any] = self.scope.setdefault("extensions", {})  # uvicorn's own kept, if any
        if self._target is not None:
            extensions["infertap.target"], self._target = self._target, None
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:
            extensions["infertap.gone"] = lambda: cycle.disconnected
            extensions["infertap.full"] = lambda: cycle.flow.write_paused
            if self.scope.get("http_version") == "1.1":
                extensions["infertap.interim"] = _Interim(cycle)

    def on_message_complete(self) -> None:
        self._between = True
        super().on_message_complete()
