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
