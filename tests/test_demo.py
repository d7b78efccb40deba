"""The README's main job, `infertap demo`, end to end as a user runs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from proxy.info import summarize

pytestmark = pytest.mark.engine


def test_demo_records_a_session_and_shows_what_the_engine_ran(tmp_path):
    out = tmp_path / "demo"
    run = subprocess.run(
        [sys.executable, "-m", "infertap", "demo", "--out", str(out)], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "repeat_penalty=1.1" in run.stdout  # the default llama-cpp-python applied unasked
    assert "You are a helpful AI assistant named SmolLM" in run.stdout  # the text the template added
    assert "equals the engine's usage.prompt_tokens: True" in run.stdout
    info = summarize(out)
    assert info["closed_cleanly"] and info["exchanges"] == 5 and info["ends"] == {"complete": 5}
    assert list(info["engines"])[0].startswith("llama-cpp-python ")
    assert info["records"]["enrichment"] == 4
