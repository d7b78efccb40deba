"""A mitmproxy addon that records LLM API flows into an infertap capture.

Shaped like mitmproxy's own ``save`` addon: options in ``load``, validation in ``configure``,
cleanup in ``done``. It holds no capture logic: it builds the same exchange records as the reverse
proxy (same redaction, request header names lowercase as the proxy's) and hands them to the same
CaptureWriter, whose thread does the msgpack, compression and disk work. On mitmproxy's event loop
it only appends each streamed chunk and its time to two lists; an encoded response that must be
searched for the request's credentials is decompressed on a worker thread, and a large or compressed
request body (a large response) searched there, as the proxy's are (``Scrubbed``), and ``done``
waits for those searches before it closes the capture.

Usable directly: ``mitmdump -s infertap/mitm/addon.py --set infertap_out=captures/x``.
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import math
import os
import re
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any, Unpack

from mitmproxy import ctx, exceptions, http
from mitmproxy.utils import human

from infertap.apis import ended_by_marker
from infertap.capture.records import MAX_RESPONSE_BYTES, End, ExchangeExtras, ResponseKept, new_exchange
from infertap.capture.redact import Redactor
from infertap.capture.scrubbing import Scrubbed
from infertap.capture.writer import CaptureWriter
from infertap.mitm import reloads
from infertap.mitm.endings import end_of_flow, stream_of
from infertap.telemetry import Sampler, recorded_telemetry, start_telemetry

log = logging.getLogger("infertap.mitm")

# The routes infertap's analysis reads (infertap/apis/read.py; tests/mitm/test_paths.py holds the
# two together), on any host and under any prefix, as few others as can be: Responses and Messages
# only after v1/ (or Azure's openai/), since /responses and /messages are common outside LLM APIs.
_ROUTES = (
    r"v1/(chat/completions|completions|responses|embeddings|messages|models|rerank)",  # OpenAI, Anthropic
    r"openai/responses",  # Azure OpenAI's Responses (?api-version=...)
    r"chat/completions|completions?|infill|embeddings?|rerank",  # OpenAI-compatible anywhere; llama.cpp's own
    r"api/(chat|generate|embed|embeddings|show|tags|ps|version)",  # Ollama
    r"tokenize|detokenize|apply-template|props",  # llama.cpp's
    r"generate(_stream)?",  # SGLang's and text-generation-inference's native routes
    r"model/[^/?]+/invoke(-with-response-stream)?",  # Bedrock (Anthropic's Messages among them)
    r"model/[^/?]+/converse(-stream)?",  # Bedrock's Converse API
    r"[^/?]+:(stream)?[rR]awPredict",  # Vertex AI (Anthropic's Messages)
)
DEFAULT_PATHS = re.compile(rf"^(/[^?]*)?/({'|'.join(_ROUTES)})(\?|$|/)")
INTERIM_TAKEN_FOR_RESPONSE = (
    "mitmproxy took the upstream's interim {} for its response: passed on as the final one, the "
    "response after it neither read nor passed on"
)


def _seconds(name: str, text: str) -> float:
    """A positive, finite number of seconds from an option's text, or an OptionsError naming it."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise exceptions.OptionsError(f"{name}: expected a number of seconds > 0, e.g. 0.5, got {text!r}")
    return value


class InfertapCapture:
    """Records matching flows; ``on_ready(listen_addrs, capture_path)`` is called once serving."""

    def __init__(self, on_ready: Callable[[list[str], str], None] | None = None) -> None:
        self.writer: CaptureWriter | None = None
        self.scrubbed: Scrubbed | None = None  # hands records to ``writer``
        self.sampler: Sampler | None = None
        self.redactor = Redactor()
        self.patterns: list[str] = []
        self.on_ready = on_ready
        self._seq = 0
        self._live: dict[str, http.HTTPFlow] = {}  # flows being recorded: written at shutdown if not ended
        self._retired = False  # unloaded by a script reload: closes once ``_live`` is empty
        self._closing: asyncio.Task[None] | None = None
        self.max_body = 64 * 1024 * 1024  # request body bytes kept (infertap_max_body)
        self.max_response = MAX_RESPONSE_BYTES  # response body bytes kept (infertap_max_response)
        self.telemetry_interval = 0.25  # seconds (infertap_telemetry_interval)

    def load(self, loader: Any) -> None:
        loader.add_option("infertap_out", str, "", "Capture directory infertap writes the matching flows to.")
        loader.add_option(
            "infertap_match",
            Sequence[str],
            [],
            "Host or path patterns to record (fnmatch; a pattern with '/' matches paths). "
            "Default: the LLM API paths infertap reads (OpenAI-compatible, Anthropic, Ollama, llama.cpp, Bedrock, Vertex AI) on any host.",
        )
        loader.add_option("infertap_redact", Sequence[str], [], "More header names whose values are secrets.")
        loader.add_option("infertap_redact_query", Sequence[str], [], "More query parameter names whose values are secrets.")
        loader.add_option(
            "infertap_max_body",
            str,
            "64m",
            "A request body over this size (k, m, g suffixes) is passed on but not kept, only its size: "
            "infertap record's --max-body-mb, where it is refused.",
        )
        loader.add_option(
            "infertap_max_response",
            str,
            "64m",
            "Of a response body over this size (k, m, g suffixes) only its head is kept, marked with its real size "
            "(response_body_size); it is passed on whole: infertap record's --max-response-mb.",
        )
        loader.add_option("infertap_labels", Sequence[str], [], "key=value labels stored in the capture header.")
        loader.add_option("infertap_telemetry", bool, True, "Sample GPUs, the host and infertap_telemetry_urls into the capture.")
        # A str, parsed in configure: mitmproxy's --set parses no float option (NotImplementedError).
        loader.add_option("infertap_telemetry_interval", str, "0.25", "Seconds between GPU and host samples (> 0).")
        loader.add_option(
            "infertap_telemetry_urls",
            Sequence[str],
            [],
            "Prometheus endpoints to sample (a DCGM exporter, an engine's /metrics).",
        )

    def configure(self, updated: set[str]) -> None:
        if "infertap_max_body" in updated:
            try:
                size = human.parse_size(ctx.options.infertap_max_body)
                self.max_body = sys.maxsize if size is None else size  # "": no cap, as mitmproxy reads it
            except ValueError as exc:
                raise exceptions.OptionsError(f"infertap_max_body: {exc}") from exc
        if "infertap_max_response" in updated:
            try:
                size = human.parse_size(ctx.options.infertap_max_response)
                self.max_response = sys.maxsize if size is None else size
            except ValueError as exc:
                raise exceptions.OptionsError(f"infertap_max_response: {exc}") from exc
        if "infertap_telemetry_interval" in updated:
            self.telemetry_interval = _seconds("infertap_telemetry_interval", ctx.options.infertap_telemetry_interval)
        if "infertap_match" in updated:
            self.patterns = list(ctx.options.infertap_match)
        if {"infertap_redact", "infertap_redact_query"} & updated:
            self.redactor = Redactor(ctx.options.infertap_redact, ctx.options.infertap_redact_query)
            if self.scrubbed is not None:  # set while recording: the exchanges from now are redacted by it
                self.scrubbed.redactor = self.redactor
        if "infertap_out" in updated and ctx.options.infertap_out:
            labels = {}
            for item in ctx.options.infertap_labels:
                key, sep, value = item.partition("=")
                if not sep:
                    raise exceptions.OptionsError(f"infertap_labels: expected key=value, got {item!r}")
                labels[key] = value
            if self.writer is not None:
                self.writer.close()
            mode = ",".join(ctx.options.mode)
            recorder = {
                "kind": "mitm",
                "mode": mode,
                "listen": f"{ctx.options.listen_host}:{ctx.options.listen_port}",
                "pid": os.getpid(),
                **recorded_telemetry(
                    ctx.options.infertap_telemetry,
                    ctx.options.infertap_telemetry_urls,
                    self.redactor.url,
                    self.telemetry_interval,
                ),
            }
            try:
                self.writer = CaptureWriter(ctx.options.infertap_out, recorder=recorder, labels=labels, list_gpus=True).open()
            except Exception as exc:  # a capture that can't be written must stop the start, loudly
                raise exceptions.OptionsError(f"infertap: {exc}") from exc
            self.scrubbed = Scrubbed(self.redactor, self.writer.write)
            if self.sampler is not None:
                self.sampler.close()
            # Many hosts pass through: no one engine's /metrics, only what is named.
            urls = list(ctx.options.infertap_telemetry_urls)
            self.sampler = start_telemetry(
                ctx.options.infertap_telemetry,
                None,
                urls,
                self.telemetry_interval,
                {},
                self.writer.write,
                self.writer.wall_now,
            )

    def running(self) -> None:
        if self.on_ready is not None and self.writer is not None:
            server = ctx.master.addons.get("proxyserver")
            addrs = [f"{a[0]}:{a[1]}" for a in server.listen_addrs()] if server else []
            self.on_ready(addrs, str(self.writer.path))

    def done(self) -> Coroutine[Any, Any, None] | None:
        """mitmproxy runs ``done`` at shutdown, awaiting what it returns, and when it unloads the
        script (``-s``, edited while it runs, or dropped from ``scripts``), synchronously: there it
        refuses an ``async def done`` (the reload failed, the new code never loaded). Unloading
        unregisters the addon before ``done`` runs; shutdown leaves it registered (a reload's retired
        instances are stopped by ``reloads``' own addon, there even where no instance is loaded)."""
        if self in ctx.master.addons:
            return self.stop_recording()
        self._retire()
        return None

    async def stop_recording(self) -> None:
        """Flows in flight (no hook ends them at shutdown) written cancelled, then the capture closed."""
        for flow in list(self._live.values()):
            state = flow.metadata.get("infertap")
            if state is not None and "body_whole" not in state:
                self._cut(flow, state, "cancelled", "infertap mitm shut down while the request body was arriving")
            else:
                self._finish(flow, "cancelled", "infertap mitm shut down while the request was in flight")
        await self._closed()

    def _retire(self) -> None:
        """Unloaded by a reload: the flows in flight go on (their hooks reach the new instance, which
        hands them here, or, where none loaded, ``reloads``' relay), written as they end, and the run
        is closed after the last of them."""
        self._retired = True
        reloads.retire(ctx.master, self)  # until closed: a shutdown before then closes it
        if self._live:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # unloaded outside mitmproxy's loop: nothing runs later to close it
            asyncio.run(self._close())
            return
        self._closed()

    def _closed(self) -> asyncio.Task[None]:
        """The capture closed, once (an exchange whose response is still searched written first)."""
        if self._closing is None:
            self._closing = asyncio.get_running_loop().create_task(self._close())
        return self._closing

    async def _close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
        if self.scrubbed is not None:  # an exchange whose response is still searched is written first
            await self.scrubbed.drained()
        if self.writer is not None:
            self.writer.close()
            if self.writer.error is not None:
                log.error("infertap: the capture could not be fully written: %s", self.writer.error)
        reloads.forget(ctx.master, self)

    def _owner(self, flow: http.HTTPFlow) -> Any:
        """The instance recording ``flow``: the one a script reload retired while it was in flight
        (its run holds the flow's start), else this one."""
        state = flow.metadata.get("infertap")
        return self if state is None else state.get("addon", self)

    # -- matching ------------------------------------------------------------------------------

    def matches(self, flow: http.HTTPFlow) -> bool:
        if not self.patterns:
            return bool(DEFAULT_PATHS.match(flow.request.path))
        host, path = flow.request.pretty_host, flow.request.path.split("?", 1)[0]
        return any(fnmatch.fnmatchcase(path if "/" in p else host, p) for p in self.patterns)

    # -- hooks -----------------------------------------------------------------------------------

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if self.writer is None or not self.matches(flow):
            return
        self._live[flow.id] = flow
        state = flow.metadata["infertap"] = {
            "wall": time.time(),
            "start_ns": self.writer.elapsed_ns(),
            "t0": 0,
            "chunk_ns": [],
            "chunks": [],
            "headers_ns": None,
            "addon": self,  # a script reload hands the flow's later hooks back to this instance
        }
        if flow.request.stream:
            # Over stream_large_bodies (its size known) or streamed by an addon before this one:
            # mitmproxy hands the body on as it comes and keeps none of it, and the request hook
            # fires only once all of it went (the answer may be there first). Each chunk is kept
            # as it passes, and the exchange starts with the first.
            flow.request.stream = self._keeper(state, flow.request.stream)
        elif _size_unknown(flow.request) and ctx.options.stream_large_bodies:
            # Buffered as mitmproxy buffers it (every addon's request hook sees a small body whole
            # and may change it); one that grows past the limit is kept from the stream's switch.
            _SwitchWatched.watch(flow.request, lambda stream: self._keeper(state, stream))

    def _keeper(
        self, state: dict[str, Any], before: Callable[[bytes], bytes | Iterable[bytes]] | bool
    ) -> Callable[[bytes], bytes | Iterable[bytes]]:
        """A stream callable that keeps what goes upstream (``before``'s output, if callable), up to
        ``max_body`` bytes: past it, only its size, so that a large upload holds no memory here."""
        kept: list[bytes] = []
        state["request_chunks"] = kept
        state["request_size"] = 0
        inner = before if callable(before) else None
        limit = self.max_body

        def keep(data: bytes) -> bytes | Iterable[bytes]:
            self._handed(state)
            out = inner(data) if inner is not None else data
            parts = [out] if isinstance(out, bytes) else list(out)
            state["request_size"] += sum(map(len, parts))
            if state["request_size"] > limit:
                kept.clear()  # over the cap: what mitmproxy streams, without infertap holding it all
            else:
                kept.extend(parts)
            return out if isinstance(out, bytes) else parts

        return keep

    def request(self, flow: http.HTTPFlow) -> None:
        if (owner := self._owner(flow)) is not self:
            return owner.request(flow)
        state = flow.metadata.get("infertap")
        if state is None:
            return
        state["body_whole"] = True  # mitmproxy runs this hook once the body's end came, buffered or streamed
        if flow.error is None:  # killed by an addon before this one: never handed on
            self._handed(state)

    def _handed(self, state: dict[str, Any]) -> None:
        """The request goes to the upstream now: the exchange's clock starts (once)."""
        if "sent_ns" not in state and self.writer is not None:
            state["sent_ns"] = self.writer.elapsed_ns()
            state["t0"] = time.monotonic_ns()

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        if (owner := self._owner(flow)) is not self:
            return owner.responseheaders(flow)
        state = flow.metadata.get("infertap")
        if state is None or flow.response is None:
            return
        self._handed(state)  # an answer before the request was handed on (an addon's): from now
        t0 = state["t0"]
        state["headers_ns"] = time.monotonic_ns() - t0
        kept = state["kept"] = ResponseKept(state["chunk_ns"], state["chunks"], self.max_response)

        def record_chunk(data: bytes) -> bytes:
            if data:
                kept.add(time.monotonic_ns() - t0, data)  # past infertap_max_response: passed on, only counted
            return data

        flow.response.stream = record_chunk  # passes each chunk through as it arrives

    def response(self, flow: http.HTTPFlow) -> None:
        if (owner := self._owner(flow)) is not self:
            return owner.response(flow)
        self._finish(flow, "complete", None)

    def error(self, flow: http.HTTPFlow) -> None:
        if (owner := self._owner(flow)) is not self:
            return owner.error(flow)
        msg = flow.error.msg if flow.error else "unknown error"
        state = flow.metadata.get("infertap")
        end = end_of_flow(flow, live=True, handed=state is None or "sent_ns" in state)
        # Its last chunks, kept or past infertap_max_response (ResponseKept.last): a cut stream's end too.
        # No "kept" yet: no response streamed, no chunk.
        if end == "client_disconnected" and state is not None and "kept" in state and ended_by_marker(state["kept"].last()):
            self._finish(flow, "complete", None, closed_after_end=True)  # it had the whole stream
            return
        size = flow.request.headers.get("content-length", "")
        if end == "refused" and not flow.request.raw_content and size.isdigit():
            self._finish(flow, end, msg, request_body_size=int(size))  # the body was not kept, as the proxy's refusals
            return
        if end in ("client_disconnected", "cancelled") and state is not None and "body_whole" not in state:
            self._cut(flow, state, end, msg)  # its client gone (or the flow killed) while the body came
            return
        self._finish(flow, end, msg)

    def _cut(self, flow: http.HTTPFlow, state: dict[str, Any], end: End, error: str) -> None:
        """A flow that ended while its request body came: what came is kept, marked not the request, as
        the proxy marks it (``request_body_cut``: ``stats`` counts it of unknown body)."""
        if "request_chunks" not in state:  # buffered: the part is in mitmproxy's stream, not the flow
            part = _buffered_part(flow)
            state["request_chunks"], state["request_size"] = [part], len(part)
        self._finish(flow, end, error, request_body_cut=True)

    def _finish(self, flow: http.HTTPFlow, end: End, error: str | None, **extra: Unpack[ExchangeExtras]) -> None:
        state = flow.metadata.pop("infertap", None)
        self._live.pop(flow.id, None)
        scrubbed = self.scrubbed
        if state is None or self.writer is None or scrubbed is None:
            return
        req, resp = flow.request, flow.response
        _SwitchWatched.unwatch(req)
        if resp is not None and 100 <= resp.status_code < 200 and resp.status_code != 101:
            # mitmproxy reads an HTTP/1 upstream's interim response (103 Early Hints, an unasked 100)
            # as the response: it hands it on as the final one and never reads the one after it
            # (mitmproxy#2229; HTTP/2 ones it drops unseen). Recorded as what it was, and that.
            extra["interim"] = [
                {
                    "status": resp.status_code,
                    "headers": self.redactor.headers_from_asgi(resp.headers.fields),
                    "ns": state["headers_ns"] or 0,
                    "forwarded": True,  # as if it were the response: the client waits on for one
                }
            ]
            if end == "complete":
                end, error = "proxy_error", INTERIM_TAKEN_FOR_RESPONSE.format(resp.status_code)
            resp, state["headers_ns"] = None, None
        if req.stream is True and "request_chunks" not in state and req.raw_content is None:
            log.warning(  # streamed with no hook between (stream_large_bodies set while it came): lost
                "infertap: %s %s: mitmproxy streamed its request body without keeping it; recorded empty "
                "(--set store_streamed_bodies=true keeps it)",
                req.method,
                req.path,
            )
            # Marked, so that replay and compare read its empty body as unknown, never as sent empty.
            extra["request_body_not_kept"] = "mitmproxy streamed it with no hook between (stream_large_bodies set while it came)"
        if "request_chunks" in state:
            body, size = b"".join(state["request_chunks"]), state["request_size"]
        else:
            body = req.raw_content or b""
            size = len(body)
        if size > self.max_body and "request_body_size" not in extra:
            log.warning(
                "infertap: %s %s: request body of %d bytes over infertap_max_body: recorded without it",
                req.method,
                req.path,
                size,
            )
            body, extra["request_body_size"] = b"", size
        path, _, query = req.path.partition("?")
        self._seq += 1
        t0 = state["t0"] or time.monotonic_ns()
        peer = flow.client_conn.peername
        found: set[str] = set()  # the credentials redacted below, looked for in the response too
        record = new_exchange(
            seq=self._seq,
            session=self.redactor.session(req.headers.fields),
            wall=state["wall"],
            start_ns=state["start_ns"],
            sent_ns=state.get("sent_ns", state["start_ns"]),
            client=f"{peer[0]}:{peer[1]}" if peer else None,
            method=req.method,
            path=path,
            query=self.redactor.query(query, found),
            http_version=req.http_version.removeprefix("HTTP/"),
            # names lowercase, as record's server hands them to it: a capture's headers read alike whoever wrote it
            request_headers=self.redactor.headers_from_asgi(((n.lower(), v) for n, v in req.headers.fields), found),
            request_body=body,
            status=resp.status_code if resp else None,
            response_headers=self.redactor.headers_from_asgi(resp.headers.fields) if resp else None,
            headers_ns=state["headers_ns"],
            chunk_ns=state["chunk_ns"],
            chunks=state["chunks"],
            end_ns=time.monotonic_ns() - t0,
            end=end,
            error=error,
            upstream=f"{req.scheme}://{req.host}:{req.port}",
            **extra,
        )
        if resp is not None and not state["chunks"] and resp.raw_content:
            # Not streamed (e.g. another addon buffered it): one chunk, its time the response's end.
            kept = state["kept"] = ResponseKept(record["chunk_ns"], record["chunks"], self.max_response)
            kept.add(record["end_ns"], resp.raw_content)
        if "kept" in state:
            state["kept"].mark(record)
        scrubbed.record(record, found, request=True)  # a decompression, a large body's search: off mitmproxy's loop
        if self._retired and not self._live:  # the last flow of a run a script reload retired
            self._closed()


class _SwitchWatched(http.Request):
    """A recorded request whose body mitmproxy buffers until its end or until it passes
    ``stream_large_bodies`` (its size unknown: chunked, HTTP/2 or 3 without content-length).

    At that switch mitmproxy (``HttpStream.check_body_size``) sets ``stream = True``, over any
    callable, and hands its buffer straight to the streaming state: no hook runs and no stream
    callable is asked, so an addon can neither keep that first part nor the rest. On this class
    (set on the one request while it is recorded, ``unwatch`` puts ``http.Request`` back)
    ``stream`` is a property whose setter turns that assignment, or any addon's later one, into the
    addon's keeping callable, before the buffer is handed on. Nothing else differs: the body stays
    buffered, and every addon's ``request`` hook sees it, unless it grows past the limit.
    """

    @property
    def stream(self) -> Callable[[bytes], Iterable[bytes] | bytes] | bool:
        value: Callable[[bytes], Iterable[bytes] | bytes] | bool = self.__dict__.get("stream", False)
        return value

    @stream.setter
    def stream(self, value: Callable[[bytes], Iterable[bytes] | bytes] | bool) -> None:
        on_stream = self.__dict__.get("_infertap_on_stream")
        if value and on_stream is not None and value is not self.__dict__.get("stream"):
            value = on_stream(value)
        self.__dict__["stream"] = value

    @staticmethod
    def watch(request: http.Request, on_stream: Callable[[Callable[[bytes], Iterable[bytes] | bytes] | bool], Any]) -> None:
        request.__dict__["_infertap_on_stream"] = on_stream
        request.__dict__.setdefault("stream", False)
        request.__class__ = _SwitchWatched

    @staticmethod
    def unwatch(request: http.Request) -> None:
        watched: type = type(request)
        if watched is _SwitchWatched:
            request.__class__ = http.Request  # ``stream`` stays as set, a plain attribute again
            request.__dict__.pop("_infertap_on_stream", None)


def _buffered_part(flow: http.HTTPFlow) -> bytes:
    """The part of a buffered request body that came before the flow failed: mitmproxy holds it in its
    stream (``HttpStream.request_body_buf``) and sets the flow's body only at the body's end. Empty
    where that stream can't be read (another mitmproxy's internals)."""
    buffer = getattr(stream_of(flow), "request_body_buf", None)
    try:
        return bytes(buffer) if buffer is not None else b""
    except TypeError:  # not a buffer of bytes
        return b""


def _size_unknown(request: http.Request) -> bool:
    """Whether a request's body size is unknown until it ends: chunked, or HTTP/2 or 3 without a
    content-length (an HTTP/1 request with neither has no body)."""
    if "content-length" in request.headers:
        return False
    return request.is_http2 or request.is_http3 or "chunked" in request.headers.get("transfer-encoding", "").lower()


addons = [InfertapCapture()]
