"""Engine adapters, chosen by what an engine answers (most specific first).

Each public name is imported when first asked for (PEP 562): the recorder's proxy holds its traffic
with ``trafficgate`` alone, and ``infertap record --no-probe`` imports neither the adapters nor
httpx (with its own CLI's rich and pygments), a third of its start's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..lazy_names import lazy_attribute

if TYPE_CHECKING:  # what the type checker sees; at run time each name is imported when first asked for
    from .base import Endpoint, Engine, Tokens, canonical
    from .kinds import KINDS, ProbeError, detect

_HOME = {
    "Endpoint": ".base",
    "Engine": ".base",
    "Tokens": ".base",
    "canonical": ".base",
    "KINDS": ".kinds",
    "ProbeError": ".kinds",
    "detect": ".kinds",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOME, globals(), name)


__all__ = ["KINDS", "Endpoint", "Engine", "ProbeError", "Tokens", "canonical", "detect"]
