"""A run recorded with --no-telemetry says so (its header's ``recorder.telemetry``), and stats,
compare and the claim card say its energy was not sampled, apart from a run that sampled and found
no power telemetry, and from an older capture that says neither. Real ``infertap record`` and
``replay`` in front of the fake upstream; the machine without power telemetry is the tests' stand-in."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.replay import ReplayConfig, run_replay
from tests.helpers import write_capture
from tests.telemetry.stand_ins import no_gpu

NOT_SAMPLED = "energy: not sampled (recorded with --no-telemetry)"
NO_POWER = "energy: no power telemetry (a GPU through NVML or nvidia-smi, a DCGM exporter, or RAPL)"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def compared(a: Path, b: Path) -> str:
    """``compare``'s words, its lines as wrapped to the terminal joined again."""
    return " ".join(invoke("compare", str(a), str(b)).split())


def headers(capture: Path) -> list[dict[str, Any]]:
    return [r["recorder"] for r in CaptureReader(capture).records() if r["type"] == "header"]


def sampled_on_a_dark_machine(tmp_path: Path, source: Path, target: str, out: Path) -> Path:
    """``source`` replayed into ``out`` with telemetry on, on a machine with no power telemetry."""
    with pytest.MonkeyPatch.context() as mp:
        no_gpu(mp, tmp_path)
        summary = run_replay(ReplayConfig(source, target, out, probe=False))
    assert summary["completed"] == summary["sent"] == 1
    return out


@pytest.fixture
def off(record, fake) -> Path:
    """One chat through a real ``infertap record --no-telemetry``."""
    _, url = fake
    rec = record(url, "--no-telemetry", name="off")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10).status_code == 200
    rec.stop()
    assert len(rec.exchanges()) == 1
    return rec.out


def test_no_telemetry_is_said_not_sampled_and_apart_from_no_power(tmp_path, off, fake):
    [recorder] = headers(off)
    assert recorder["telemetry"] is False
    said = invoke("stats", str(off))
    assert NOT_SAMPLED in said and "no power telemetry" not in said
    [group] = json.loads(invoke("stats", str(off), "--json"))["groups"]
    assert group["energy"] is None and group["telemetry"]["not_sampled"] and group["telemetry"]["runs"] == 1
    assert f"; {NOT_SAMPLED}" in invoke("claim", str(off))
    # Must differ: telemetry on, on a machine with no power telemetry, is "no power telemetry".
    dark = sampled_on_a_dark_machine(tmp_path, off, fake[1], tmp_path / "dark")
    assert [r["telemetry"] for r in headers(dark)] == [True]
    said = invoke("stats", str(dark))
    assert NO_POWER in said and "not sampled" not in said
    card = invoke("claim", str(dark))
    assert "; energy: no power telemetry" in card and "not sampled" not in card
    # Replay's --no-telemetry says so too.
    replayed = tmp_path / "replayed-off"
    invoke("replay", str(off), "--target", fake[1], "--out", str(replayed), "--no-probe", "--no-telemetry", "--json")
    assert [r["telemetry"] for r in headers(replayed)] == [False]
    assert NOT_SAMPLED in invoke("stats", str(replayed))
    # compare: each side as it was recorded; both alike, said once.
    both = compared(off, dark)
    assert "energy A: not sampled (recorded with --no-telemetry)" in both and "energy B: no power telemetry" in both
    assert "neither run measured energy: not sampled (recorded with --no-telemetry) in either run" in compared(off, replayed)
    assert "neither run measured energy: no power telemetry in either run" in compared(dark, dark)
    energy = json.loads(invoke("compare", str(off), str(dark), "--json"))["energy"]
    assert energy["telemetry"]["a"]["not_sampled"] and not energy["telemetry"]["b"]["not_sampled"]


def test_a_group_of_runs_with_and_without_telemetry_says_which(tmp_path, off, fake):
    mixed = tmp_path / "mixed"
    shutil.copytree(off, mixed)  # the --no-telemetry run, then a replay appended with telemetry on
    sampled_on_a_dark_machine(tmp_path, off, fake[1], mixed)
    [unsampled] = [
        r["run_id"] for r in CaptureReader(mixed).records() if r["type"] == "header" and not r["recorder"]["telemetry"]
    ]
    said = " ".join(invoke("stats", str(mixed), "--by", "model").split())  # both runs, one group
    assert (
        "energy: no power telemetry (a GPU through NVML or nvidia-smi, a DCGM exporter, or RAPL) in its other runs; "
        f"not sampled in 1 of 2 runs (recorded with --no-telemetry): {unsampled}"
    ) in said
    assert NOT_SAMPLED not in said
    # Must differ: a run at a time, each says what it was.
    by_run = invoke("stats", str(mixed))
    assert NOT_SAMPLED in by_run and NO_POWER in by_run and "in its other runs" not in by_run


def test_an_older_capture_that_does_not_say_keeps_the_words_it_had(tmp_path):
    old = tmp_path / "old"
    write_capture(old, [{"body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}])
    assert "telemetry" not in headers(old)[0]
    said = invoke("stats", str(old))
    assert NO_POWER in said and "not sampled" not in said
    assert "; energy: no telemetry" in invoke("claim", str(old))
