"""Recording: the capture format, its writer and reader, and the recording proxy.

``replay`` and ``analysis`` build on this package; it imports neither.
"""

from .errors import (
    CaptureCorruptError,
    CaptureError,
    CaptureWriteError,
    InfertapError,
    UnsupportedFormatError,
    UpstreamBroken,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
)
from .reader import CaptureReader, TornTail, read_records
from .records import END_REASONS, FORMAT_MAJOR, FORMAT_MINOR
from .version import __version__
from .writer import CaptureWriter

__all__ = [
    "END_REASONS",
    "FORMAT_MAJOR",
    "FORMAT_MINOR",
    "CaptureCorruptError",
    "CaptureError",
    "CaptureReader",
    "CaptureWriteError",
    "CaptureWriter",
    "InfertapError",
    "TornTail",
    "UnsupportedFormatError",
    "UpstreamBroken",
    "UpstreamError",
    "UpstreamTimeout",
    "UpstreamUnreachable",
    "__version__",
    "read_records",
]
