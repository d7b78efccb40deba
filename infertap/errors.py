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


class InfertapError(Exception):
    """Base of every error infertap raises on purpose."""


class ConfigError(InfertapError, ValueError):
    """A bad option value (an upstream that is not an http(s) URL, an unknown extractor)."""


def check_seconds(option: str, seconds: float | None, *, zero: bool = False) -> None:
    """A duration option: above 0 (``zero``: 0 or more); None, where allowed, is no limit."""
    if seconds is not None and not (isinstance(seconds, (int, float)) and (seconds >= 0 if zero else seconds > 0)):
        raise ConfigError(f"{option} {seconds}: seconds, {'0 or more' if zero else 'above 0'}")


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
