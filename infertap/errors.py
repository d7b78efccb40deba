"""The root of the exceptions infertap raises on purpose, and the whole tree drawn once, so callers
catch at the right depth. Each family lives with its concern; the CLI turns any of them into a
one-line error (``infertap.cli``), and nothing else catches them broadly.

    InfertapError                           infertap.errors
    ├── CaptureError                        infertap.capture.errors: reading or writing a capture
    │   ├── CaptureCorruptError             bytes that are not what the writer wrote (file and offset named)
    │   ├── UnsupportedFormatError          a capture from a newer major format version
    │   └── CaptureWriteError               the writer could not write (disk full, permissions)
    ├── ConfigError                         infertap.errors: a bad option value (also a ValueError)
    ├── UpstreamError                       infertap.errors: the engine failed; mapped once, in infertap.proxy.upstream
    │   ├── UpstreamUnreachable             refused, DNS, reset before any response   -> 502
    │   ├── UpstreamTimeout                 connect or read timeout                   -> 504
    │   └── UpstreamBroken                  reset or protocol error mid-response      -> stream cut
    ├── ProbeError                          infertap.engines: an engine's facts could not be read
    ├── MitmError, ImportError_             infertap.mitm: the HTTPS proxy, HAR / flow import
    ├── ReplayError, WorkloadError,         infertap.replay: options, workload, schedule, transforms, Ray
    │   ScheduleError, TransformError,
    │   DistributedReplayError
    └── AnalysisError                       infertap.analysis
        ├── NoCapturesError
        └── QueryError
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from urllib.parse import urlsplit


class InfertapError(Exception):
    """Base of every error infertap raises on purpose."""


class ConfigError(InfertapError, ValueError):
    """A bad option value (an upstream that is not an http(s) URL, an unknown extractor)."""


#: The exit code of a command a Ctrl-C cut short, by the shells' convention (128 + SIGINT).
INTERRUPTED = 130


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is a Ctrl-C: a KeyboardInterrupt, or the RuntimeError DuckDB raises in its
    stead ("Query interrupted") when the signal lands inside a query."""
    return isinstance(exc, KeyboardInterrupt) or (isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower())


def check_seconds(option: str, seconds: float | None, *, zero: bool = False) -> None:
    """A duration option: above 0 (``zero``: 0 or more), and finite; None, where allowed, is no limit."""
    if isinstance(seconds, float) and not math.isfinite(seconds):  # "nan" and "inf" parse as floats
        raise ConfigError(f"{option} {seconds}: not a finite number of seconds")
    if seconds is not None and not (
        isinstance(seconds, (int, float)) and math.isfinite(seconds) and (seconds >= 0 if zero else seconds > 0)
    ):
        raise ConfigError(f"{option} {seconds}: seconds, {'0 or more' if zero else 'above 0'}")


#: What HTTP allows in a header name (RFC 9110 5.6.2's token).
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def check_headers(option: str, headers: Mapping[str, str]) -> None:
    """Headers a user adds: a name HTTP allows, a value that is one line of Latin-1 (a value of
    another script can't be sent; a newline would start another header)."""
    for name, value in headers.items():
        if not name or not set(name) <= _TOKEN:
            raise ConfigError(f"{option} {name!r}: not a header name (letters, digits and !#$%&'*+-.^_`|~)")
        if any(c in value for c in "\r\n\x00"):
            raise ConfigError(f"{option} {name}: its value has a line break")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise ConfigError(f"{option} {name}: its value is not Latin-1 (HTTP headers can't carry {value!r})") from None


def check_url(option: str, url: str) -> None:
    """An engine's address: http(s), a host, a port that is a port (``http://[::1``, ``:99999``,
    ``:abc`` raised ValueError deep in a request)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{option} {url!r}: not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or (port is not None and not 0 < port < 65536):
        raise ConfigError(f"{option} {url!r}: an http(s) URL with a host, e.g. http://127.0.0.1:8080")


class UpstreamError(InfertapError):
    status_code = 502
    error_type = "upstream_error"


class UpstreamUnreachable(UpstreamError):
    status_code = 502
    error_type = "upstream_unreachable"


class UpstreamTimeout(UpstreamError):
    status_code = 504
    error_type = "upstream_timeout"


class UpstreamBroken(UpstreamError):
    status_code = 502
    error_type = "upstream_broken"
