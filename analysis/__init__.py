"""Analysis: captures loaded into DuckDB, per-exchange speed metrics and run-level statistics.

``Analysis(paths)`` decodes each capture once (cached as Parquet, see ``cache``) and exposes the
tables ``captures``, ``runs``, ``exchanges``, ``chunks``, ``events``, ``engines``, ``enrichments``,
``prefixes`` and the views ``metrics``, ``itl``, ``token_chunks``, ``enrichment_latest``;
``speed_stats`` summarises them per run, model or path. Metric definitions: docs/metrics.md.
"""

from proxy import __version__

from .cache import CachedCapture, cache_root, cached_capture
from .errors import AnalysisError, NoCapturesError, QueryError
from .sources import find_captures
from .stats import GROUPINGS, speed_stats
from .store import EXPORTED, Analysis, QueryResult

#: Every name a query can use.
VIEWS = (*EXPORTED, "token_chunks", "enrichment_latest")

__all__ = [
    "EXPORTED",
    "GROUPINGS",
    "VIEWS",
    "Analysis",
    "AnalysisError",
    "CachedCapture",
    "NoCapturesError",
    "QueryError",
    "QueryResult",
    "__version__",
    "cache_root",
    "cached_capture",
    "find_captures",
    "speed_stats",
]
