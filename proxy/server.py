"""Running the recording proxy: options -> RecordConfig -> uvicorn, with the capture closed on every exit."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import uvicorn

from infertap.capture.hostfacts import is_loopback
from infertap.capture.records import MAX_RESPONSE_BYTES
from infertap.capture.redact import Redactor
from infertap.capture.writer import DEFAULT_MAX_SEGMENT_BYTES, CaptureWriter
from infertap.engines.gguf_check import check_gguf
from infertap.errors import ConfigError, check_headers, check_seconds, check_url
from infertap.stopping import stop_signals
from infertap.telemetry import check_telemetry, recorded_telemetry, start_telemetry
from infertap.version import __version__

from .app import QuietCancelled, RecordingProxy, build_app
from .wire import BODY_TIMEOUT, BODY_WAIT, HEAD_TIMEOUT, MAX_HEAD, protocol

if TYPE_CHECKING:  # imported where the recorder probes: the adapters and httpx, a third of its start's imports
    from infertap.engines.enrich import Enricher

log = logging.getLogger("infertap.proxy")


@dataclass
class RecordConfig:
    upstream: str
    out: Path
    host: str = "127.0.0.1"
    port: int = 8787
    labels: dict[str, str] = field(default_factory=dict)
    redact_headers: tuple[str, ...] = ()
    redact_query_params: tuple[str, ...] = ()
    max_body_bytes: int = 64 * 1024 * 1024
    max_response_bytes: int = MAX_RESPONSE_BYTES  # kept of one response; past it relayed whole, kept cut
    connect_timeout: float = 10.0
    read_timeout: float | None = 600.0
    max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES
    graceful_timeout: float = 5.0
    header_timeout: float | None = HEAD_TIMEOUT  # for a request's head to arrive whole; past it 408
    max_header_bytes: int = MAX_HEAD  # of a request's head, and of a chunked body's trailers; past it 431
    body_timeout: float | None = BODY_TIMEOUT  # between two reads of a request's body; past it 408
    body_wait: float = BODY_WAIT  # a POST, PUT or PATCH head of no length, its read's last bytes, held for a body; 0: not held
    log_level: str = "warning"
    probe: bool = True  # engine snapshots at start, periodically and on change
    enrich: bool = True  # per-exchange effective tokens and settings
    probe_interval: float = 60.0
    model_file: str | None = None
    enrich_queue: int = 1024
    probe_headers: dict[str, str] = field(default_factory=dict)  # credentials for probes; never stored
    auth_token: str | None = None  # clients must present it to the proxy itself; never stored
    on_capture_error: str = "serve"  # "serve": keep serving, loudly; "fail": refuse traffic with 503
    telemetry: bool = True  # the engine's /metrics, GPUs and the host, sampled into the capture
    telemetry_urls: tuple[str, ...] = ()  # other Prometheus exporters (a DCGM exporter's /metrics)
    telemetry_interval_s: float = 0.25

    def __post_init__(self) -> None:
        check_telemetry(self.telemetry_urls, self.telemetry_interval_s)
        check_url("--upstream", self.upstream)
        check_headers("--probe-header", self.probe_headers)
        if not (isinstance(self.port, int) and 0 <= self.port <= 65535):
            raise ConfigError(f"--listen port {self.port}: 0 to 65535")
        if points_at_itself(self.upstream, self.host, self.port):
            raise ConfigError(
                f"--upstream {Redactor().url(self.upstream)} is this recorder's own --listen {self.host}:{self.port}: "
                "every request would be forwarded to itself, without end; give the engine's address"
            )
        sizes = (
            ("--max-body-mb", self.max_body_bytes),
            ("--max-response-mb", self.max_response_bytes),
            ("--max-segment-mb", self.max_segment_bytes),
            ("--max-header-kb", self.max_header_bytes),
        )
        for name, size in sizes:
            if size <= 0:
                raise ConfigError(f"{name}: a size above 0 ({size} bytes)")
        check_seconds("--connect-timeout", self.connect_timeout)
        check_seconds("--read-timeout", self.read_timeout)  # None: no limit (0 on the command line)
        check_seconds("--graceful-timeout", self.graceful_timeout, zero=True)
        check_seconds("--header-timeout", self.header_timeout)  # None: no limit (0 on the command line)
        check_seconds("--body-timeout", self.body_timeout)  # None: no limit (0 on the command line)
        check_seconds("--body-wait", self.body_wait, zero=True)
        check_seconds("--probe-interval", self.probe_interval)
        if self.model_file is not None:
            check_gguf(self.model_file)  # before the capture is opened
        if self.enrich_queue < 1:
            raise ConfigError(f"enrich_queue {self.enrich_queue}: 1 or more")


def _addresses(host: str, port: int) -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return set()


def points_at_itself(upstream: str, host: str, port: int) -> bool:
    """Whether ``upstream`` is the address the recorder listens on (``host:port``): a loop that would
    forward one request to itself until the process runs out of sockets. A wildcard listen address
    (0.0.0.0, ::) is every address of this machine: loopback, and the host name's."""
    parts = urlsplit(upstream)
    up_port = parts.port or (443 if parts.scheme == "https" else 80)
    if not port or up_port != port or not parts.hostname:
        return False
    upstream_at = _addresses(parts.hostname, up_port)
    if host in ("", "0.0.0.0", "::"):
        local = _addresses(socket.gethostname(), port) | {"127.0.0.1", "::1"}
        return any(a in local or a.startswith("127.") for a in upstream_at)
    return bool(upstream_at & _addresses(host, port))


@dataclass
class RecordResult:
    out: Path
    exchanges: int
    records: int
    dropped: int
    bytes_written: int
    error: str | None
    enriched: int = 0
    enrich_dropped: int = 0
    snapshots: int = 0


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # uvicorn re-raises SIGINT/SIGTERM once it has shut down, which would kill the process
        # before the capture's final footer is written. Handle them, and exit normally instead;
        # SIGHUP (the terminal closed) too, unless it is ignored (nohup): it would kill it at once.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in stop_signals()}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_ready is not None:
            self._on_ready()


@contextlib.contextmanager
def _quiet_cancellations() -> Iterator[None]:
    """No traceback for each exchange a shutdown cuts short: it is recorded as cancelled."""
    quiet, uvicorn_log = QuietCancelled(), logging.getLogger("uvicorn.error")
    uvicorn_log.addFilter(quiet)
    try:
        yield
    finally:
        uvicorn_log.removeFilter(quiet)


def bind(host: str, port: int) -> socket.socket:
    """Bind before serving, so port 0 works and the real address is known up front."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def serve(
    config: RecordConfig,
    *,
    sock: socket.socket | None = None,
    on_ready: Callable[[str, CaptureWriter], None] | None = None,
) -> RecordResult:
    """Record until SIGINT or SIGTERM; the capture is closed cleanly on every way out."""
    sock = sock or bind(config.host, config.port)
    host, port = sock.getsockname()[:2]
    listen = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    redactor = Redactor(config.redact_headers, config.redact_query_params)
    writer = CaptureWriter(
        config.out,
        recorder={
            "kind": "proxy",
            "upstream": redactor.url(config.upstream),
            "listen": listen,
            "pid": os.getpid(),
            **recorded_telemetry(config.telemetry, config.telemetry_urls, redactor.url, config.telemetry_interval_s),
        },
        labels=config.labels,
        max_segment_bytes=config.max_segment_bytes,
        list_gpus=True,
    ).open()
    enricher: Enricher | None = None
    sampler = start_telemetry(
        config.telemetry,
        config.upstream,
        config.telemetry_urls,
        config.telemetry_interval_s,
        config.probe_headers,
        writer.write,
        writer.wall_now,
    )
    try:
        proxy = RecordingProxy(
            config.upstream,
            writer,
            redactor=redactor,
            max_body_bytes=config.max_body_bytes,
            max_response_bytes=config.max_response_bytes,
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            auth_token=config.auth_token,
            fail_on_capture_error=config.on_capture_error == "fail",
        )
        if config.probe:
            from infertap.engines.enrich import Enricher

            enricher = Enricher(
                config.upstream,
                writer.write,
                labels=config.labels,
                model_file=config.model_file,
                gate=proxy.gate,
                enrich=config.enrich,
                probe_interval=config.probe_interval,
                maxsize=config.enrich_queue,
                headers=config.probe_headers,
            ).start()
            proxy.on_exchange = enricher.submit
        uv_config = uvicorn.Config(
            build_app(proxy),
            # uvicorn's httptools, with raw targets, interim responses, refusals, a head's limits (wire.py)
            http=protocol(
                proxy.refused,
                head_timeout=config.header_timeout,
                max_head=config.max_header_bytes,
                body_timeout=config.body_timeout,
                max_body=config.max_body_bytes,
                body_wait=config.body_wait,
            ),
            ws="none",  # a WebSocket reaches the proxy as HTTP, which refuses it clearly and records it (wire.py)
            log_level=config.log_level,
            access_log=False,
            server_header=False,  # the client sees the engine's headers, not ours
            date_header=False,
            proxy_headers=False,  # the client recorded is the one connected; X-Forwarded-For is its own header, forwarded
            timeout_graceful_shutdown=config.graceful_timeout,  # type: ignore[arg-type]  # seconds, any number
            timeout_keep_alive=30,
        )
        server = _Server(uv_config, (lambda: on_ready(listen, writer)) if on_ready else None)
        with _quiet_cancellations():
            server.run(sockets=[sock])
    finally:
        if enricher is not None:
            enricher.close()
        if sampler is not None:
            sampler.close()
        writer.close()
        sock.close()
    return RecordResult(
        out=writer.path,
        exchanges=writer.exchanges,
        records=writer.records,
        dropped=writer.dropped,
        bytes_written=writer.bytes_written,
        error=repr(writer.error) if writer.error else None,
        enriched=enricher.enriched if enricher else 0,
        enrich_dropped=enricher.dropped if enricher else 0,
        snapshots=enricher.snapshots if enricher else 0,
    )


__all__ = ["RecordConfig", "RecordResult", "__version__", "bind", "is_loopback", "serve"]
