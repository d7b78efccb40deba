"""Analysis: DuckDB over captures, speed and divergence metrics (to come)."""

from proxy import __version__

__all__ = ["__version__"]
