"""infertap: record, replay and diff LLM inference traffic.

The library API, one namespace (the command line is a thin layer over it)::

    from infertap import CaptureReader, RecordConfig, serve, run_replay, Analysis, compare

Where each part lives: ``infertap.capture`` (the format: reader, writer, records, redaction),
``infertap.apis`` (what each inference API's bytes mean), ``infertap.engines`` (engine adapters,
probing, enrichment), ``infertap.proxy`` (the recording proxy), ``infertap.mitm`` (HTTPS proxy
addon, HAR / flow import), ``infertap.replay``, ``infertap.analysis``, ``infertap.cli``.

Names load on first use (PEP 562): importing infertap, or one part of it, loads nothing of the
others, so reading a capture never pulls in the proxy's server or DuckDB.
"""

from typing import Any

from .lazy_names import lazy_attribute

#: Where each public name lives.
_HOME = {
    "__version__": ".version",
    # errors
    "InfertapError": ".errors",
    "UpstreamError": ".errors",
    "CaptureError": ".capture",
    "CaptureCorruptError": ".capture",
    "UnsupportedFormatError": ".capture",
    "CaptureWriteError": ".capture",
    # the capture format
    "CaptureReader": ".capture",
    "CaptureWriter": ".capture",
    "Redactor": ".capture",
    "TornTail": ".capture",
    "read_records": ".capture",
    # engines
    "probe": ".engines.probe",
    "enrich_capture": ".engines.enrich",
    # recording
    "RecordConfig": ".proxy.server",
    "RecordResult": ".proxy.server",
    "serve": ".proxy.server",
    "MitmConfig": ".mitm.run",
    "run_mitm": ".mitm.run",
    "import_file": ".mitm.importer",
    # replay
    "ReplayConfig": ".replay",
    "run_replay": ".replay",
    "Schedule": ".replay",
    "Filters": ".replay",
    "Transforms": ".replay",
    "SweepConfig": ".replay.sweep",
    "run_sweep": ".analysis.capacity",
    "parse_slos": ".analysis.slo",
    # analysis
    "Analysis": ".analysis",
    "speed_stats": ".analysis",
    "compare": ".analysis.compare",
    "write_report": ".analysis.report",
}

__all__ = list(_HOME)


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOME, globals(), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
