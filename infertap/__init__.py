"""infertap: record, replay and diff LLM inference traffic.

The work happens in the ``proxy`` (recording, capture format), ``replay`` and ``analysis``
packages; this package holds the ``infertap`` command and the helpers that start real engines.
"""

from proxy.version import __version__

__all__ = ["__version__"]
