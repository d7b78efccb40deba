"""Replay: re-issuing a captured workload against another engine or configuration (to come)."""

from proxy import __version__

__all__ = ["__version__"]
