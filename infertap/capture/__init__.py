"""The capture format: record types, framing, the writer and the streaming reader, segment naming,
redaction and the format's errors. The contract everything else in infertap stands on.

It imports nothing of the proxy, replay or analysis (nor starlette, uvicorn, duckdb or mitmproxy),
so a capture can be read with this package alone::

    from infertap.capture import CaptureReader

    for record in CaptureReader("captures/run1").records():
        ...

The format itself is specified in docs/capture-format.md.
"""

from .errors import CaptureCorruptError, CaptureError, CaptureWriteError, UnsupportedFormatError
from .reader import CaptureReader, Gap, TornTail, read_records
from .records import END_REASONS, FORMAT_MAJOR, FORMAT_MINOR
from .redact import Redactor
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
    "Gap",
    "Redactor",
    "TornTail",
    "UnsupportedFormatError",
    "read_records",
]
