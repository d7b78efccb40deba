"""Running mitmproxy with infertap's addon: ``infertap mitm`` (through mitmproxy's own API)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from infertap.errors import ConfigError, InfertapError
from infertap.stopping import stop_signals
from infertap.telemetry import check_telemetry


class MitmError(InfertapError):
    pass


@dataclass
class MitmConfig:
    out: Path
    host: str = "127.0.0.1"
    port: int = 8788
    mode: str = "regular"
    match: Sequence[str] = ()
    redact_headers: Sequence[str] = ()
    redact_query: Sequence[str] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    set_options: Sequence[str] = ()  # mitmproxy "name=value" options, passed through
    confdir: str | None = None  # where mitmproxy keeps its CA (default ~/.mitmproxy)
    telemetry: bool = True  # GPUs, the host and telemetry_urls, sampled into the capture
    telemetry_urls: Sequence[str] = ()
    telemetry_interval_s: float = 0.25

    def __post_init__(self) -> None:
        check_telemetry(self.telemetry_urls, self.telemetry_interval_s)
        from mitmproxy.proxy.mode_specs import ProxyMode

        try:  # a mode mitmproxy can't read: it printed a traceback, never listened and never exited
            ProxyMode.parse(self.mode)
        except ValueError as exc:
            raise ConfigError(f"--mode {self.mode!r}: {exc} (regular, reverse:URL, upstream:URL, ...)") from None


def ca_cert_path(confdir: str | None) -> Path:
    """The CA certificate clients must trust (mitmproxy creates it on first start)."""
    return Path(os.path.expanduser(confdir or "~/.mitmproxy")) / "mitmproxy-ca-cert.pem"


def run_mitm(config: MitmConfig, *, on_ready: Callable[[list[str], str, Path], None] | None = None) -> None:
    """Serve until SIGINT, SIGTERM or SIGHUP (``stop_signals``); the capture is closed by the addon's ``done``.
    The caller's handlers of those signals are theirs again after (asyncio's loop leaves them at
    their defaults: a SIGTERM would then end the caller at once, its own cleanup skipped)."""
    from mitmproxy import exceptions, options
    from mitmproxy.tools.dump import DumpMaster

    from .addon import InfertapCapture

    _check_listen(config)  # before the capture opens: a run that never listened is no run

    async def main() -> None:
        opts = options.Options(listen_host=config.host, listen_port=config.port, mode=[config.mode])
        if config.confdir:
            opts.update(confdir=config.confdir)
        master = DumpMaster(opts, with_termlog=True, with_dumper=False)
        addon = InfertapCapture(
            on_ready=(lambda addrs, path: on_ready(addrs, path, ca_cert_path(config.confdir))) if on_ready else None
        )
        master.addons.add(addon)
        try:
            # Connect to the upstream once the request is read (mitmproxy's default connects first): a
            # request to an engine that is down is then an exchange recorded upstream_error, not lost.
            opts.update(connection_strategy="lazy")
            opts.update(
                infertap_match=list(config.match),
                infertap_redact=list(config.redact_headers),
                infertap_redact_query=list(config.redact_query),
                infertap_labels=[f"{k}={v}" for k, v in config.labels.items()],
                infertap_telemetry=config.telemetry,
                infertap_telemetry_urls=list(config.telemetry_urls),
                infertap_telemetry_interval=repr(config.telemetry_interval_s),
            )
            if config.set_options:
                opts.set(*config.set_options)
            opts.update(infertap_out=str(config.out))  # last: opens the capture once all else is valid
        except exceptions.OptionsError as exc:
            raise MitmError(str(exc)) from exc
        loop = asyncio.get_running_loop()
        for sig in signals:
            loop.add_signal_handler(sig, master.shutdown)
        await master.run()

    signals = stop_signals()
    previous = {sig: signal.getsignal(sig) for sig in signals}
    try:
        asyncio.run(main())
    finally:
        for sig, handler in previous.items():  # None: set outside Python, its default the nearest
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)


def _check_listen(config: MitmConfig) -> None:
    """The address mitmproxy will listen on can be taken now (mitmproxy itself says so only once
    it has started, after the capture opened and an empty run was appended to it)."""
    from mitmproxy.proxy.mode_specs import ProxyMode

    mode = ProxyMode.parse(config.mode)
    port = mode.listen_port(config.port)
    if port is None:  # a mode that listens on no port of its own (local, transparent)
        return
    host = mode.listen_host(config.host)
    kind = socket.SOCK_DGRAM if mode.transport_protocol == "udp" else socket.SOCK_STREAM
    try:
        infos = socket.getaddrinfo(host or None, port, type=kind, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise MitmError(f"cannot listen on {host or '*'}:{port}: {exc.strerror or exc}") from None
    family, type_, proto, _, address = infos[0]
    with socket.socket(family, type_, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio's servers do
        try:
            s.bind(address)
        except OSError as exc:
            raise MitmError(
                f"cannot listen on {host or '*'}:{port}: {exc.strerror or exc}; choose another with --listen"
            ) from None
