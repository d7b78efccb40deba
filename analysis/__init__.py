"""Analysis: captures loaded into DuckDB, per-exchange speed metrics and run-level statistics.

``Analysis(paths)`` decodes each capture once (cached as Parquet, see ``cache``) and exposes the
tables ``captures``, ``runs``, ``exchanges``, ``requests``, ``chunks``, ``events``, ``engines``,
``enrichments``, ``prefixes``, ``token_chunks``, ``telemetry`` and the views ``metrics``, ``itl``,
``enrichment_latest``; ``speed_stats`` summarises them per run, model, path or API. Metric
definitions: docs/metrics.md.

Names are loaded on first use (PEP 562): importing this package costs nothing until a name is
asked for, so ``infertap --help`` doesn't load DuckDB and Arrow.
"""

from importlib import import_module
from typing import Any

from .groupings import GROUPINGS

#: Where each public name lives.
_HOME = {
    "EXPORTED": ".store",
    "Analysis": ".store",
    "QueryResult": ".store",
    "AnalysisError": ".errors",
    "NoCapturesError": ".errors",
    "QueryError": ".errors",
    "CachedCapture": ".cache",
    "cache_root": ".cache",
    "cached_capture": ".cache",
    "find_captures": ".sources",
    "locate_captures": ".sources",
    "export_on_ray": ".distributed_export",
    "DistributedExportError": ".distributed_export",
    "MANIFEST": ".store",
    "speed_stats": ".stats",
    "__version__": "infertap.version",
}

__all__ = ["GROUPINGS", "VIEWS", *_HOME]


def __getattr__(name: str) -> Any:
    if name == "VIEWS":  # every name a query can use
        return (*__getattr__("EXPORTED"), "token_chunks", "enrichment_latest")
    if name not in _HOME:
        raise AttributeError(f"module 'analysis' has no attribute {name!r}")
    value = getattr(import_module(_HOME[name], __name__), name)
    globals()[name] = value
    return value
