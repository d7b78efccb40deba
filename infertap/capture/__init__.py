"""The capture format: record types, framing, the writer and the streaming reader, segment naming,
redaction and the format's errors. The contract everything else in infertap stands on.

It imports nothing of the proxy, replay or analysis (nor starlette, uvicorn, duckdb or mitmproxy),
so a capture can be read with this package alone::

    from infertap.capture import CaptureReader

    for record in CaptureReader("captures/run1").records():
        ...

The format itself is specified in docs/capture-format.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..lazy_names import lazy_attribute

if TYPE_CHECKING:  # what the type checker sees; at run time each name is imported when first asked for
    from .errors import CaptureCorruptError, CaptureError, CaptureWriteError, UnsupportedFormatError
    from .reader import CaptureReader, Gap, TornTail, read_records
    from .records import END_REASONS, FORMAT_MAJOR, FORMAT_MINOR
    from .redact import Redactor
    from .writer import CaptureWriter

#: Where each public name lives: importing one module of the package (``records``, ``segments``)
#: doesn't import the writer (its host facts, sockets, logging), which reading a capture never needs.
_HOME = {
    "CaptureCorruptError": ".errors",
    "CaptureError": ".errors",
    "CaptureWriteError": ".errors",
    "UnsupportedFormatError": ".errors",
    "CaptureReader": ".reader",
    "Gap": ".reader",
    "TornTail": ".reader",
    "read_records": ".reader",
    "END_REASONS": ".records",
    "FORMAT_MAJOR": ".records",
    "FORMAT_MINOR": ".records",
    "Redactor": ".redact",
    "CaptureWriter": ".writer",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOME, globals(), name)


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
