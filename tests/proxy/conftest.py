"""Fixtures of the proxy's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.proxy.in_process import InProcessRecorder


@pytest.fixture
def in_process(fake: Any, tmp_path: Path) -> Iterator[Any]:
    """Factory: ``in_process(**limits)`` starts the recorder before the fake engine (``fake``)."""
    started: list[InProcessRecorder] = []

    def start(**limits: Any) -> InProcessRecorder:
        started.append(InProcessRecorder(fake[1], tmp_path / f"cap{len(started)}", **limits))
        started[-1].server.__enter__()
        return started[-1]

    yield start
    for rec in started:
        if rec.server.thread.is_alive():
            rec.server.__exit__(None, None, None)
            rec.writer.close()
