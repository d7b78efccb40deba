"""The recording reverse proxy: an ASGI app that forwards every request and records it as it streams.

The per-chunk path is two list appends (up to the response limit, ``ResponseKept``), the ``send`` itself and a count of what it wrote;
everything else (msgpack, compression, disk) happens on the capture writer's thread after the
exchange has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Receive, Scope, Send

from infertap.apis import ended_by_marker
from infertap.capture.records import MAX_RESPONSE_BYTES, Exchange, ResponseKept, new_exchange
from infertap.capture.redact import Redactor
from infertap.capture.scrubbing import Scrubbed
from infertap.capture.writer import CaptureWriter
from infertap.engines.trafficgate import TrafficGate
from infertap.errors import ConfigError, UpstreamError

from .exchange import UpstreamCall, before_response, end_of
from .hops import HOP_REQUEST, HOP_RESPONSE, connection_named
from .looplag import LoopLag
from .refusal import Refusal, redacted_head
from .upstream import Interim, UpstreamClient, UpstreamResponse
from .wire import split_target

log = logging.getLogger("infertap.proxy")

_DISCONNECT_GRACE_S = 0.05


#: Anthropic's error types by HTTP status (its API's errors page); any other status is its ``api_error``.
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}  # fmt: skip


def _error_body(kind: str, message: str, status: int = 500, path: str | None = None) -> bytes:
    """The error body of the API the client spoke, whole, so SDKs surface the message instead of a parse
    failure. Anthropic's Messages routes get Anthropic's (``{"type": "error", "error": {"type", "message"}}``,
    its type by status: the anthropic SDK read OpenAI's as no error object); any other OpenAI's, ``param``
    and ``code`` null, as OpenAI's ``ErrorObject`` has them (a string or null: the HTTP status sent as an
    int ``code`` was no OpenAI body, and a typed client reading ``code`` as a string fails on it)."""
    route = (path or "").split("?", 1)[0].rstrip("/")
    if route.endswith(("/messages", "/messages/count_tokens")):
        said = f"{message} (infertap: {kind})"
        return json.dumps(
            {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": said}}
        ).encode()
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}}).encode()


#: A hand-off to a client whose connection was full that took longer than this waited for it: the
#: time is kept (``client_wait_ns``), as every later chunk's time is late by it.
HELD_NS = 1_000_000


def _unknown() -> bool | None:
    return None


def _never() -> bool:
    return False


class _Hangup:
    """Watches for the client going away for the whole exchange, prefill included, so that the engine
    stops generating for nobody: the exchange's task is cancelled and records the disconnect.

    A chunk counts as delivered once ``send`` has written it to the client's connection. uvicorn's
    ``send`` waits for a full connection to drain, then returns without writing if the client went
    away meanwhile, and it may return so before the watcher has heard of the hang-up: a chunk
    appended to the record is not yet one the client was handed."""

    __slots__ = (
        "send",
        "gone",
        "full",
        "record",
        "task",
        "finished",
        "disconnected",
        "hung_up_ns",
        "delivered",
        "kept",
        "_watcher",
    )

    def __init__(
        self,
        receive: Receive,
        send: Send,
        record: Exchange,
        task: asyncio.Task[Any],
        gone: Callable[[], bool] | None = None,
        full: Callable[[], bool | None] | None = None,
    ) -> None:
        self.send = send
        self.gone = gone or _never  # whether the server knows the client's connection lost (wire.py)
        self.full = full or _unknown  # whether the client's connection is full, where the server says
        self.record = record
        self.task = task
        self.finished = False  # the upstream is done: a hang-up now cuts nothing short
        self.disconnected = False
        self.hung_up_ns: int | None = None  # when the client went away (monotonic)
        self.delivered = 0  # the chunks written to the client's connection before it went away
        self.kept: ResponseKept | None = None  # the response's chunks as relayed (UpstreamCall.kept)
        self._watcher = asyncio.create_task(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        message = await receive()
        if message["type"] != "http.disconnect" or self.finished:
            return
        if self.hung_up_ns is None:  # not already seen by a send that found the client gone
            self.hung_up_ns = time.monotonic_ns()
        if self.record["status"] is not None and self.after_end():
            # A client often hangs up the moment it has read the last event (an SDK stops at
            # "[DONE]") while the upstream's end of stream is still on its way: give that a
            # moment before cancelling the upstream. A client gone before the end marker is gone:
            # cancelled at once, the engine stops, and nothing it never got is recorded as sent.
            await asyncio.sleep(_DISCONNECT_GRACE_S)
            if self.finished:
                return
        self.disconnected = True
        self.task.cancel()

    async def deliver(self, chunk: bytes, arrived_ns: int) -> int:
        """One body chunk to the client, as it came; counted once written to its connection. Says how
        long it waited for the client to make room in its connection (ns), from ``arrived_ns`` (the
        chunk's arrival, which relay read: one clock read a chunk, not two): 0 where the connection
        wasn't full, however long the ``send`` took (a busy host's, not the client's doing)."""
        full = self.full()  # None where the server doesn't say: then the time alone tells
        await self.send({"type": "http.response.body", "body": chunk, "more_body": True})
        now = time.monotonic_ns()
        if self.hung_up_ns is None:
            if not self.gone():
                self.delivered += 1
            else:  # the send found the client gone and wrote nothing: the watcher hears of it next
                self.hung_up_ns = now
        waited = now - arrived_ns
        return waited if full is not False and waited > HELD_NS else 0

    def after_end(self) -> bool:
        """Whether the client hung up after the stream's end marker: it had all of the answer."""
        if self.hung_up_ns is None:
            return False
        # The kept chunks and those past the response limit (ResponseKept.last): a cut stream's end too.
        kept = self.kept
        return ended_by_marker(
            self.record["chunks"][max(0, self.delivered - 2) : self.delivered] if kept is None else kept.last(self.delivered)
        )

    def close(self) -> None:
        self.finished = True
        self._watcher.cancel()
        record = self.record
        read = len(record["chunks"]) if self.kept is None else self.kept.count  # past the response limit too
        if self.hung_up_ns is not None and self.delivered < read:
            # read from the upstream but never written to the client (waiting for its full
            # connection when it went, or read after it had gone): kept, never delivered
            record["delivered_chunks"] = self.delivered


class RecordingProxy:
    """Forwards every method and path to one upstream and records each exchange into a writer."""

    def __init__(
        self,
        upstream: str,
        writer: CaptureWriter,
        *,
        redactor: Redactor | None = None,
        max_body_bytes: int = 64 * 1024 * 1024,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
        connect_timeout: float = 10.0,
        read_timeout: float | None = 600.0,
        on_exchange: Callable[[Exchange], None] | None = None,
        auth_token: str | None = None,
        fail_on_capture_error: bool = False,
    ) -> None:
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"upstream must be an http(s) URL, got {upstream!r}")
        self.redactor = redactor or Redactor()
        self.upstream_url = upstream.rstrip("/")  # as given, credentials included: used, never recorded
        self.upstream = self.redactor.url(self.upstream_url)  # as recorded and printed
        self._url_credentials = self.redactor.url_credentials(self.upstream_url)  # looked for in responses
        self._prefix = parts.path.rstrip("/").encode("ascii")  # an upstream mounted under a path keeps it
        self.writer = writer
        self.max_body_bytes = max_body_bytes
        self.max_response_bytes = max_response_bytes  # response bytes kept of one exchange; past it relayed only
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.client: UpstreamClient | None = None
        self.on_exchange = on_exchange  # e.g. Enricher.submit: must not block
        self._auth = auth_token.encode() if auth_token else None
        self.fail_on_capture_error = fail_on_capture_error
        self._inflight: set[asyncio.Task[Any]] = set()
        self._scrubbed = Scrubbed(self.redactor, self._written)
        self._seq = 0
        self.gate = TrafficGate()  # held by the enricher around calls that would end streams in flight
        self.loop_lag = LoopLag()
        self._lag_task: asyncio.Task[None] | None = None

    @property
    def in_flight(self) -> int:
        """Exchanges under way now (read from other threads too)."""
        return len(self._inflight)

    # -- lifecycle -----------------------------------------------------------------------------

    async def startup(self) -> None:
        # Never through HTTP_PROXY, never following redirects: the engine's answer goes back as it is.
        self.client = UpstreamClient(self.upstream_url, connect_timeout=self.connect_timeout, read_timeout=self.read_timeout)
        self._lag_task = asyncio.create_task(self.loop_lag.run())
        self.writer.footer_extra["loop_lag"] = self.loop_lag.summary

    async def shutdown(self) -> None:
        """Cancel what is still in flight (each records itself as ``cancelled``), then close."""
        if self._lag_task is not None:
            self._lag_task.cancel()
        tasks = list(self._inflight)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self._scrubbed.drained()  # recorded before the writer closes
        if self.client is not None:
            await self.client.aclose()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await self.startup()
        try:
            yield
        finally:
            await self.shutdown()

    # -- ASGI ----------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        try:
            await self._exchange(scope, receive, send, task)
        finally:
            self._inflight.discard(task)

    async def _exchange(self, scope: Scope, receive: Receive, send: Send, task: asyncio.Task[Any]) -> None:
        writer = self.writer
        wall = time.time()
        start_ns = writer.elapsed_ns()
        self._seq += 1
        raw_headers: list[tuple[bytes, bytes]] = scope["headers"]
        extensions = scope.get("extensions") or {}
        received = extensions.get("infertap.target")  # a target past ASCII, as it came (see wire.py)
        if received is not None:
            raw_path, query = split_target(received)
        else:
            query = scope.get("query_string", b"")
            raw_path = scope.get("raw_path") or scope["path"].encode()
        client = scope.get("client")
        session = self.redactor.session(raw_headers)
        found = set(self._url_credentials)  # the credentials redacted below, looked for in the response too
        record = new_exchange(
            seq=self._seq,
            session=session,
            wall=wall,
            start_ns=start_ns,
            client=f"{client[0]}:{client[1]}" if client else None,
            method=scope["method"],
            path=raw_path.decode("latin-1"),
            query=self.redactor.query(query.decode("latin-1"), found),
            http_version=scope.get("http_version", "1.1"),
            request_headers=self.redactor.headers_from_asgi(raw_headers, found),
            upstream=self.upstream,
        )
        try:
            if self._auth is not None and not self._authorized(raw_headers):
                message = "infertap: this proxy needs its token (X-Infertap-Token: TOKEN, or Proxy-Authorization: Bearer TOKEN)"
                record.update({"end": "refused", "error": "missing or wrong proxy token", "headers_ns": 0})
                await self._send_error(send, record, 401, "proxy_unauthorized", message)
                return
            if self.fail_on_capture_error and writer.error is not None:
                message = f"infertap: the capture can't be written ({writer.error}); refusing traffic (--on-capture-error fail)"
                record.update({"end": "refused", "error": message, "headers_ns": 0})
                await self._send_error(send, record, 503, "capture_unavailable", message)
                return
            upgrade = extensions.get("infertap.upgrade")
            if upgrade is not None:  # a switch of protocols the recorder can't relay (wire.py): said, not half-done
                message = (
                    f"infertap: this recorder relays HTTP only; a request asking to switch to {upgrade or 'another protocol'!r}"
                    f"{' with a body' if upgrade.strip().lower() != 'websocket' else ''} is not forwarded"
                )
                record.update({"end": "refused", "error": message, "headers_ns": 0})
                await self._send_error(send, record, 501, "upgrade_not_relayed", message, close=True)
                return
            body = await self._read_body(scope, receive, send, record, raw_headers)
            if body is None:
                return
            record["request_body"] = body
            trailers = extensions.get("infertap.trailers")  # after a chunked body: recorded, never forwarded (wire.py)
            if trailers:
                record["request_trailers"] = self.redactor.headers_from_asgi(trailers, found)
            target = self._prefix + raw_path + (b"?" + query if query else b"")
            named = connection_named(raw_headers)  # the headers Connection names are this hop's too
            headers = [(n, v) for n, v in raw_headers if n not in HOP_REQUEST and n not in named]
            hangup = _Hangup(receive, send, record, task, extensions.get("infertap.gone"), extensions.get("infertap.full"))
            try:
                await self._forward(scope, send, record, hangup, target, headers, body, extensions.get("infertap.interim"))
            finally:
                hangup.close()
        finally:
            self._scrubbed.record(record, found, request=True)  # a large or compressed body redacted off this loop

    def refused(self, refusal: Refusal) -> None:
        """A request the server's parser refused before the app had it (wire.py's ``on_refused``),
        recorded as what was read of it, redacted as every request is, with the 400 it was answered.
        Its start is when its bytes came, its answer's time now: one held behind a stream still going
        is handed on once that stream has ended and its answer is written."""
        self._seq += 1
        found: set[str] = set()
        path, query = split_target(refusal.target) if refusal.target else (b"", b"")
        now = time.monotonic_ns()
        waited = now - refusal.arrived_ns if 0 < refusal.arrived_ns <= now else 0
        record = new_exchange(
            seq=self._seq,
            session=self.redactor.session(refusal.headers),
            wall=time.time() - waited / 1e9,
            start_ns=now - waited - self.writer.started_ns,
            client=refusal.client,
            method=refusal.method,
            path=path.decode("latin-1"),
            query=self.redactor.query(query.decode("latin-1"), found),
            http_version=refusal.http_version,
            request_headers=self.redactor.headers_from_asgi(refusal.headers, found),
            request_body=refusal.body,
            upstream=self.upstream,
        )
        if refusal.head:
            record["refused_head"] = redacted_head(refusal.head, self.redactor)
        if refusal.body_size is not None:
            record["request_body_size"] = refusal.body_size
        refusal.answered(record, waited)
        self._scrubbed.record(record, found, request=True)

    def _written(self, record: Exchange) -> None:
        self.writer.write(record)
        if self.on_exchange is not None:
            self.on_exchange(record)

    def _authorized(self, raw_headers: list[tuple[bytes, bytes]]) -> bool:
        for name, value in raw_headers:
            if name == b"x-infertap-token":
                presented = value
            elif name == b"proxy-authorization" and value[:7].lower() == b"bearer ":
                presented = value[7:]
            else:
                continue
            if hmac.compare_digest(presented.strip(), self._auth):  # type: ignore[arg-type]
                return True
        return False

    async def _read_body(
        self, scope: Scope, receive: Receive, send: Send, record: Exchange, raw_headers: list[tuple[bytes, bytes]]
    ) -> bytes | None:
        limit = self.max_body_bytes
        for name, value in raw_headers:
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await self._refuse(send, record, int(value), "content-length")
                return None
        parts: list[bytes] = []
        size = 0
        while True:
            try:
                message = await receive()
            except asyncio.CancelledError:  # shut down while the body arrived: what came is kept, and said
                came = _came(size, raw_headers)
                record.update({"end": "cancelled", "error": f"proxy shut down while the request body was arriving ({came})"})
                _cut(record, parts)
                raise
            if message["type"] == "http.disconnect":
                refusal = (scope.get("extensions") or {}).get("infertap.refused")
                if refusal is not None:  # the server refused the body (400, 408, 431) and answered it (wire.py): now
                    record["request_body"] = b"".join(parts)
                    refusal.answered(record, self.writer.elapsed_ns() - record["start_ns"])
                    return None
                record["end"] = "client_disconnected"
                record["error"] = f"client disconnected while sending the request body ({_came(size, raw_headers)})"
                _cut(record, parts)
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                await self._refuse(send, record, size, "bytes received")
                return None
            parts.append(chunk)
            if not message.get("more_body", False):
                return parts[0] if len(parts) == 1 else b"".join(parts)

    async def _refuse(self, send: Send, record: Exchange, size: int, how: str) -> None:
        message = f"infertap: request body of {size} {how} exceeds the proxy's limit of {self.max_body_bytes} bytes"
        record.update({"end": "refused", "error": message, "request_body_size": size, "headers_ns": 0})
        await self._send_error(send, record, 413, "request_too_large", message)

    async def _forward(
        self,
        scope: Scope,
        send: Send,
        record: Exchange,
        hangup: _Hangup,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        interim: Interim | None,
    ) -> None:
        assert self.client is not None, "RecordingProxy.startup() was not run"
        call = UpstreamCall(record, self.redactor, self.writer.elapsed_ns, "upstream", self.max_response_bytes)
        hangup.kept = call.kept
        call.sent()
        response: UpstreamResponse | None = None
        ended_at: int | None = None  # where the exchange ended before its task did (a client gone after the end)
        gate = self.gate
        gate.forwarding += 1
        try:
            if gate.held:  # an out-of-band call to the engine is running: it would end this stream
                await gate.wait()
                call.sent()
            try:
                response = await call.open(self.client, scope["method"], target, headers, body, interim)
            except UpstreamError as exc:
                error = before_response(exc, self.upstream)
                record.update({"end": end_of(error), "error": str(error)})
                record["headers_ns"] = time.monotonic_ns() - call.t0
                hangup.finished = True
                await self._send_error(send, record, error.status_code, error.error_type, str(error))
                return
            named = connection_named(response.headers)
            start = [(n, v) for n, v in response.headers if n.lower() not in HOP_RESPONSE and n.lower() not in named]
            if response.status_code in (204, 304):  # no body follows, whatever length it names (RFC 9110 8.6)
                start = [(n, v) for n, v in start if n.lower() != b"content-length"]
            await send({"type": "http.response.start", "status": response.status_code, "headers": start})
            if not await call.relay(response, hangup.deliver):
                return  # returning without completing the response makes the server cut the connection
            hangup.finished = True  # the upstream is done: the exchange is complete, whoever hangs up now
            if hangup.after_end():  # the upstream's end came within the grace, after the client had gone
                record["closed_after_end"] = True
                ended_at = hangup.hung_up_ns
            elif hangup.hung_up_ns is not None:
                # A send found the client gone before it was handed the end (its watcher had not yet
                # cancelled this task, and won't now): gone before the end, as the watcher would say.
                record.update(
                    {"end": "client_disconnected", "error": "client disconnected before it was handed the response's end"}
                )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if hangup.after_end():  # the client hung up after the stream's end marker: it had everything
                record.update({"end": "complete", "error": None, "closed_after_end": True})
                ended_at = hangup.hung_up_ns  # its end, not the grace's (nor a shutdown's within it)
            elif not hangup.disconnected:
                record.update({"end": "cancelled", "error": "proxy shut down while the exchange was in flight"})
            else:
                record.update({"end": "client_disconnected", "error": "client disconnected; upstream request cancelled"})
            if not hangup.disconnected:  # the proxy's shutdown: its cancellation goes on
                raise
            hangup.task.uncancel()
        except Exception as exc:
            record.update({"end": "proxy_error", "error": f"infertap failed while forwarding: {exc!r}"})
            raise
        finally:
            gate.forwarding -= 1
            call.ended(ended_at)
            if response is not None:
                await response.aclose()

    @staticmethod
    async def _send_error(send: Send, record: Exchange, status: int, kind: str, message: str, close: bool = False) -> None:
        """``close``: the connection ends with this answer (what follows on it is not HTTP)."""
        body = _error_body(kind, message, status, record.get("path"))
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if close:
            headers.append((b"connection", b"close"))
        record["status"] = status
        record["response_headers"] = [[n.decode(), v.decode()] for n, v in headers]
        record["chunk_ns"] = [record["headers_ns"] or 0]
        record["chunks"] = [body]
        record["proxy_generated"] = True
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _cut(record: Exchange, parts: list[bytes]) -> None:
    """A body that stopped before its end (its client gone, the proxy shut down): the part that came
    is kept, marked not the request (``request_body_cut``: ``stats`` counts it of unknown body)."""
    record["request_body"] = b"".join(parts)
    record["request_body_cut"] = True


def _came(size: int, raw_headers: list[tuple[bytes, bytes]]) -> str:
    """How much of a body cut short came: of its Content-Length where it named one."""
    length = next((v.decode() for n, v in raw_headers if n == b"content-length" and v.isdigit()), None)
    return f"{size}{f' of {length}' if length else ''} bytes came"


class QuietCancelled(logging.Filter):
    """Drops uvicorn's "Exception in ASGI application" traceback for an exchange cancelled by the
    recorder's shutdown (Ctrl-C, SIGTERM past the grace period): the exchange recorded itself as
    ``cancelled`` first, and uvicorn still cuts its connection, so its client sees the stream end
    short. Cancellation is the only way an exchange ends there: a client's hang-up returns. Also
    the lifespan's own cancellation, which Starlette hands uvicorn as a traceback's text, after a
    second Ctrl-C (uvicorn then skips the app's shutdown; the capture is closed after it all the same)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError):
            return False
        text = record.msg if isinstance(record.msg, str) else ""
        return not (text.startswith("Traceback") and text.rstrip().endswith("CancelledError"))


class ProxyApp:
    """The app uvicorn serves: Starlette runs the lifespan (the shared client's start and stop);
    HTTP goes straight to the proxy, so no middleware wraps ``send`` on the per-chunk path."""

    def __init__(self, proxy: RecordingProxy) -> None:
        self.proxy = proxy
        self.starlette = Starlette(routes=[Mount("/", app=proxy)], lifespan=proxy.lifespan)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await self.proxy(scope, receive, send)
        else:
            await self.starlette(scope, receive, send)


def build_app(proxy: RecordingProxy) -> ProxyApp:
    return ProxyApp(proxy)
