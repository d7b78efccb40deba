"""Fixtures of the analysis tests: captures built by hand, loaded into an Analysis each."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infertap.analysis import Analysis
from tests.analysis_builders import Load, assert_token_times_match_events, write_capture


@pytest.fixture
def load(tmp_path: Path) -> Iterator[Load]:
    """Write records as a capture and load it; every Analysis opened is closed after the test."""
    opened: list[Analysis] = []

    def _load(records: list[dict[str, Any]]) -> Analysis:
        path = write_capture(tmp_path / f"cap{len(opened)}", records)
        opened.append(Analysis([path], cache_dir=tmp_path / "cache"))
        return opened[-1]

    yield _load
    for a in opened:
        # Every capture a test builds also checks the token times kept at decode time against the events.
        assert_token_times_match_events(a)
        a.close()
