"""The exceptions infertap raises, drawn once so callers can catch at the right depth.

    InfertapError
    ├── CaptureError                  reading or writing a capture
    │   ├── CaptureCorruptError       bytes that are not what the writer wrote (file and offset named)
    │   ├── UnsupportedFormatError    a capture from a newer major format version
    │   └── CaptureWriteError         the writer could not write (disk full, permissions)
    └── UpstreamError                 the engine behind the proxy failed; mapped once, at the proxy boundary
        ├── UpstreamUnreachable       refused, DNS, reset before any response   -> 502
        ├── UpstreamTimeout           connect or read timeout                   -> 504
        └── UpstreamBroken            reset or protocol error mid-response      -> stream cut
"""

from __future__ import annotations


class InfertapError(Exception):
    """Base of every error infertap raises on purpose."""


class CaptureError(InfertapError):
    pass


class CaptureCorruptError(CaptureError):
    def __init__(self, path: str, offset: int, reason: str) -> None:
        self.path = path
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path}: corrupt capture data at byte offset {offset}: {reason}")

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:  # survives a trip to a worker process
        return (type(self), (self.path, self.offset, self.reason))


class UnsupportedFormatError(CaptureError):
    pass


class CaptureWriteError(CaptureError):
    pass


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
