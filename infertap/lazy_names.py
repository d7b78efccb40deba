"""``lazy_attribute``: a package's public name imported when first asked for (PEP 562), so that a
command imports only the modules it runs (a warm ``infertap stats`` no reader, decoder nor writer)."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any


def lazy_attribute(package: str, home: Mapping[str, str], namespace: dict[str, Any], name: str) -> Any:
    """``name`` of ``package`` from its module (``home``, relative), kept in ``namespace`` (the
    package's globals) so that it is looked up once."""
    if name not in home:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(import_module(home[name], package), name)
    namespace[name] = value
    return value


__all__ = ["lazy_attribute"]
