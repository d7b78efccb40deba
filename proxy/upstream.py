"""A lean HTTP/1.1 client for the forwarding hot path: asyncio protocol + httptools (llhttp).

Why not httpx here: its pool checks every idle connection for readability (a poll syscall each)
on every request, and each chunk crosses several layers of async iterators. This client does one
``transport.write`` per request (headers and body together, TCP_NODELAY set), hands each received
body piece to the reader as is, and learns of closed idle connections from the event loop itself
(``connection_lost``), so taking one from the pool costs nothing. Bodies are not content-decoded:
the bytes the engine sent are the bytes forwarded and recorded.

Reading applies backpressure: past ``_HIGH_WATER`` unread bytes the socket stops being read, so a
slow client slows the engine instead of growing the proxy's memory.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import errno
import os
import select
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from urllib.parse import unquote, urlsplit

import httptools

from infertap.errors import ConfigError, UpstreamBroken, UpstreamTimeout, UpstreamUnreachable

#: Told of an interim response (its status and headers); returns whether it was passed on.
Interim = Callable[[int, list[tuple[bytes, bytes]]], bool]

_HIGH_WATER = 1 << 20
_LOW_WATER = 1 << 18


def _dropped(conn: _Connection) -> bool:
    """Whether an idle connection has something to read: the upstream's close (or bytes nobody asked
    for), arrived before the event loop told us. Checked before reuse, as urllib3 does, so that a
    request is not written into a connection already closed."""
    sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _NotHttp(ValueError):
    """A response head the parser accepts and HTTP doesn't (a status of 600)."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; parses one response at a time into the current ``UpstreamResponse``."""

    def __init__(self, client: UpstreamClient) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.response: UpstreamResponse | None = None
        self.reused = False

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # bytes nobody asked for: this connection can't be trusted again
            self._close()
            return
        response.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            why = exc.__context__ if isinstance(exc.__context__, _NotHttp) else exc
            response._fail(UpstreamBroken(f"invalid HTTP response from the upstream: {why}"))
            self._close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.client._all.discard(self)
        response = self.response
        if response is not None and not response.complete:
            response._lost(exc)

    # -- httptools callbacks -------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        response = self.response
        assert response is not None
        # after the head, a header is a trailer (chunked bodies): never one of the head's, which the
        # proxy's client may already have
        (response.headers if response.status_code is None else response.trailers).append((name, value))

    def on_headers_complete(self) -> None:
        response = self.response
        assert response is not None
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim response (100 Continue, 103 Early Hints): the real one follows
            headers, response.headers = response.headers, []
            if response.on_interim is not None:
                response.on_interim(status, headers)
            return
        if not 200 <= status <= 599:  # the parser takes any three digits; no server can answer with them
            raise _NotHttp(f"status {status} is no HTTP status")
        response.status_code = status
        if not response.headers_ready.done():
            response.headers_ready.set_result(None)
        if response.method == b"HEAD":  # no body, whatever Content-Length says
            response._finish(keep_alive=False)

    def on_body(self, body: bytes) -> None:
        self.response._feed(body)  # type: ignore[union-attr]

    def on_message_complete(self) -> None:
        response = self.response
        if response is None or response.status_code is None:
            return  # the end of an interim response
        response._finish(keep_alive=self.parser.should_keep_alive())

    # -- helpers -------------------------------------------------------------------------------

    def _close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class UpstreamResponse:
    """A response being received; read its body with ``aiter_raw`` and always ``aclose`` it."""

    def __init__(self, connection: _Connection, method: bytes, read_timeout: float | None) -> None:
        self._conn = connection
        self.method = method
        self.status_code: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.trailers: list[tuple[bytes, bytes]] = []  # sent after a chunked body
        # the first attempt's failure where the request was sent a second time (see ``send``)
        self.retried: str | None = None
        self.resent_ns = 0  # when that second attempt was written (monotonic)
        self.on_interim: Interim | None = None  # told of each interim response (1xx) as it comes
        self.headers_ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.received = False  # any byte of a response: from then on a failure is not retried
        self.complete = False
        self._keep_alive = False
        self._pieces: collections.deque[bytes] = collections.deque()
        self._buffered = 0
        self._paused = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._read_timeout = read_timeout
        self._closed = False

    # -- fed by the connection -----------------------------------------------------------------

    def _feed(self, piece: bytes) -> None:
        self._pieces.append(piece)
        self._buffered += len(piece)
        if self._buffered > _HIGH_WATER and not self._paused and self._conn.transport is not None:
            self._paused = True
            self._conn.transport.pause_reading()
        self._wake()

    def _finish(self, *, keep_alive: bool) -> None:
        if not self.complete:
            self.complete = True
            self._keep_alive = keep_alive
            self._wake()

    def _lost(self, exc: Exception | None) -> None:
        framed = any(n.lower() in (b"content-length", b"transfer-encoding") for n, _ in self.headers)
        if exc is None and self.status_code is not None and not framed and self.method != b"HEAD":
            self._finish(keep_alive=False)  # a body delimited by the connection's end (HTTP/1.0 style)
            return
        if self.status_code is None:
            self._fail(UpstreamBroken(f"the upstream closed the connection without a response ({exc!r})"))
        else:
            self._fail(UpstreamBroken(f"the upstream closed the connection mid-response ({exc!r})"))

    def _fail(self, error: BaseException) -> None:
        if self._error is None and not self.complete:
            self._error = error
            if not self.headers_ready.done():
                self.headers_ready.set_exception(error)
                self.headers_ready.exception()  # retrieved here; raised again to whoever awaits it
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # -- read by the caller --------------------------------------------------------------------

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as received (transfer coding removed, content coding kept), piece by piece."""
        pieces = self._pieces
        while True:
            while pieces:
                piece = pieces.popleft()
                self._buffered -= len(piece)
                if self._paused and self._buffered < _LOW_WATER:
                    self._paused = False
                    if self._conn.transport is not None:
                        self._conn.transport.resume_reading()
                yield piece
            if self._error is not None:
                raise self._error
            if self.complete:
                return
            await self._wait()

    async def _wait(self) -> None:
        loop = asyncio.get_running_loop()
        self._waiter = waiter = loop.create_future()
        timer = None
        if self._read_timeout is not None:
            timer = loop.call_later(
                self._read_timeout, _expire, waiter, f"no data from the upstream for {self._read_timeout:g} s"
            )
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    async def aclose(self) -> None:
        """Give the connection back for reuse when the response was read to its end, else close it."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        conn.response = None
        if self.complete and self._keep_alive and not self._error and not self._pieces and not conn.closed:
            conn.client._release(conn)
        else:
            conn._close()


def _expire(waiter: asyncio.Future[None], message: str) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamTimeout(message))


class UpstreamClient:
    """Requests to one upstream (scheme, host, port) over a pool of keep-alive connections."""

    def __init__(
        self,
        base_url: str,
        *,
        connect_timeout: float | None = 10.0,
        read_timeout: float | None = 600.0,
        keepalive_expiry: float = 4.0,  # under uvicorn's 5 s default: we drop a connection before it would
        max_idle: int = 512,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"upstream must be an http(s) URL, got {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        default_port = self.port == (443 if parts.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = (host if default_port else f"{host}:{self.port}").encode("ascii")
        self.ssl = (ssl_context or ssl.create_default_context()) if parts.scheme == "https" else None
        # Credentials in the URL (http://user:pass@host) become Basic auth, unless a request has its own.
        self._basic = None
        if parts.username is not None:
            token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
            self._basic = (b"authorization", b"Basic " + token.encode())
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.keepalive_expiry = keepalive_expiry
        self.max_idle = max_idle
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()

    async def send(
        self,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        on_interim: Interim | None = None,
    ) -> UpstreamResponse:
        """Send a request and wait for the response's headers. ``target`` is path + query; ``Host``
        and ``Content-Length`` are set here (hop-by-hop headers must already be gone). ``on_interim``
        is called, from the event loop's read, with each interim response's status and headers."""
        m = method.encode("ascii")
        head = [m, b" ", target or b"/", b" HTTP/1.1\r\nhost: ", self._host_header, b"\r\n"]
        for name, value in headers:
            head += (name, b": ", value, b"\r\n")
        if self._basic is not None and not any(n.lower() == b"authorization" for n, _ in headers):
            head += (self._basic[0], b": ", self._basic[1], b"\r\n")
        if body or m in (b"POST", b"PUT", b"PATCH"):
            head += (b"content-length: ", str(len(body)).encode(), b"\r\n")
        head.append(b"\r\n")
        if body:
            head.append(body)
        data = b"".join(head)
        retried: str | None = None
        for attempt in (0, 1):
            conn = self._take() if attempt == 0 else None
            if conn is None:
                conn = await self._connect()
            response = UpstreamResponse(conn, m, self.read_timeout)
            response.on_interim = on_interim
            if retried is not None:
                response.retried, response.resent_ns = retried, time.monotonic_ns()
            conn.response = response
            conn.transport.write(data)  # type: ignore[union-attr]
            try:
                await self._headers(response)
                return response
            except UpstreamBroken as exc:
                conn._close()
                # A reused connection that broke before any response: the upstream closed it as we wrote
                # (llama-server closes one a moment after a stream: it never read the request), or read
                # the request and then closed (a crash). The two can't be told apart from here, and the
                # first is the common one: sent once more on a new connection, and the response says so
                # (``retried``: the exchange records it, the engine may have seen the request twice). A
                # close that came before the write is caught in _take, so this is only the race of the two.
                if attempt == 0 and conn.reused and not response.received:
                    retried = str(exc)
                    continue
                raise
            except BaseException:
                conn._close()
                raise
        raise AssertionError("unreachable")

    async def _headers(self, response: UpstreamResponse) -> None:
        timer = None
        if self.read_timeout is not None:
            message = f"no response headers from the upstream within {self.read_timeout:g} s"
            timer = asyncio.get_running_loop().call_later(self.read_timeout, _expire, response.headers_ready, message)
        try:
            await response.headers_ready
        finally:
            if timer is not None:
                timer.cancel()

    def _take(self) -> _Connection | None:
        now = asyncio.get_running_loop().time()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.keepalive_expiry and not _dropped(conn):
                conn.reused = True
                return conn
            conn._close()
        return None

    def _release(self, conn: _Connection) -> None:
        if len(self._idle) >= self.max_idle:
            conn._close()
            return
        conn.idle_since = asyncio.get_running_loop().time()
        self._idle.append(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(
                    lambda: _Connection(self), self.host, self.port, ssl=self.ssl, server_hostname=self.host if self.ssl else None
                )
        except TimeoutError:
            raise UpstreamTimeout(f"connecting to {self.host}:{self.port} timed out after {self.connect_timeout:g} s") from None
        except OSError as exc:
            reason = os.strerror(exc.errno) if exc.errno else str(exc)  # asyncio and uvloop word it differently
            if exc.errno == errno.EMFILE:
                reason += " (this process's open-files limit: fewer connections at once, or a higher `ulimit -n`)"
            raise UpstreamUnreachable(f"cannot connect to {self.host}:{self.port}: {reason}") from exc
        self._all.add(conn)
        return conn

    async def aclose(self) -> None:
        for conn in list(self._all):
            conn._close()
        self._idle.clear()
        self._all.clear()
