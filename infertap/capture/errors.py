"""The capture format's errors: what a reader or writer of captures needs to catch."""

from __future__ import annotations

from ..errors import InfertapError


class CaptureError(InfertapError):
    """Reading or writing a capture failed."""


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
