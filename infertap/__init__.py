"""infertap: record, replay and diff LLM inference traffic.

The work happens in the ``proxy`` (recording, capture format), ``replay`` and ``analysis``
packages; this package holds the ``infertap`` command, the API adapters (``infertap.apis``) and
the helpers that start real engines. Importing it loads none of them.
"""

from typing import Any

__all__ = ["__version__"]


def __getattr__(name: str) -> Any:  # PEP 562: the version is looked up only when asked for
    if name == "__version__":
        from proxy.version import __version__

        return __version__
    raise AttributeError(f"module 'infertap' has no attribute {name!r}")
