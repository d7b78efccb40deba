"""infertap's version as installed, read from the package's metadata when first asked for: the
lookup scans the installed distributions (30-40 ms), which a command that writes or prints no
version (``stats`` and ``sql`` on cached captures) never needs. ``__version__`` reads it too."""

from __future__ import annotations

import functools


@functools.cache
def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("infertap")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
