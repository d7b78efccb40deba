"""Modules that only an optional extra installs (``engine``, ``scale``, ``dev``).

Without the extra, the tests that need it are skipped, with the command that installs it. ``make
test`` installs every extra and sets ``INFERTAP_ALL_EXTRAS=1``: there a missing one is an import
error, never a skip that would pass for a success.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def needs(module: str, extra: str) -> ModuleType:
    if os.environ.get("INFERTAP_ALL_EXTRAS"):
        return importlib.import_module(module)
    return pytest.importorskip(module, reason=f"needs the {extra} extra: pip install -e '.[{extra}]'")


#: Why a test of an optional compiled module skips where it isn't built.
NOT_BUILT = "infertap's optional C reader is not built (a C compiler at install: pip install -e ., or python setup.py build_ext --inplace)"


def built(module: str) -> ModuleType | None:
    """One of infertap's optional compiled modules (setup.py), or None where it wasn't built (no C
    compiler at install): its tests then skip with ``NOT_BUILT``. ``make test`` builds it on install,
    so there (``INFERTAP_ALL_EXTRAS=1``) a missing one is an import error, and the C path really runs."""
    if os.environ.get("INFERTAP_ALL_EXTRAS"):
        return importlib.import_module(module)
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
