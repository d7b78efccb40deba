"""The claim card's model-load fact counted the loads of every request that waited for one
(``waited``, ``waited_ms``) beside ``in_figures``, the ok ones alone: a failed request's cold load was
summed into a time the card set beside figures that hold no failed request. The fact now counts the
requests its figures are over, the ok ones, and names failed ones that waited apart, in no figure.
The captures are written by the project's writer with Ollama's documented done lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture
from tests.ollama_done import COLD, WARM, answer


def _card(path: Path, exchanges: list[dict[str, Any]]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The card's model-load line, its fact, and the stats group's load, of a capture of ``exchanges``."""
    write_capture(path, exchanges)
    runner = CliRunner()
    text = runner.invoke(cli, ["claim", str(path)], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    card = json.loads(runner.invoke(cli, ["claim", "--json", str(path)]).output)
    [group] = json.loads(runner.invoke(cli, ["stats", "--json", str(path)]).output)["groups"]
    [line] = [line.strip() for line in text.output.splitlines() if "model load" in line]
    return line, card["figures"]["model_load"]["value"], group["server_timings"]["load"]


def _failed(x: dict[str, Any]) -> dict[str, Any]:
    """The answer, its done line and all, but the connection reset before the body's end: no ok answer."""
    return {**x, "end": "upstream_error"}


def test_a_failed_request_that_waited_for_a_load_is_apart_from_the_figures_loads(tmp_path: Path) -> None:
    cold_ms = COLD["load_duration"] / 1e6
    line, fact, load = _card(
        tmp_path / "mixed", [answer(0, COLD, stream=True), _failed(answer(1, COLD, stream=True)), answer(2, WARM, stream=True)]
    )
    # stats counts both loads that made a ttft, of them one ok.
    assert (load["waited"], load["in_ttft"]["requests"]) == (2, 1)
    # Must differ: the card's load time is the ok request's alone, not the two's.
    assert load["waited_ms"] == pytest.approx(2 * cold_ms)
    assert fact["waited_ms"] == pytest.approx(cold_ms) and fact["failed_waited_ms"] == pytest.approx(cold_ms)
    # Must match: waited and in_figures count the same requests, those the figures are over.
    assert fact["waited"] == fact["in_figures"] == 1 and fact["failed_waited"] == 1 and fact["exchange_ids"] == ["src-0"]
    assert line.endswith(
        f"1 ok request waited for a load, {cold_ms:.1f} ms: the ttft and e2e above include it (src-0); "
        f"1 failed request waited for a load too, {cold_ms:.1f} ms, in no figure"
    ), line


def test_a_load_only_a_failed_request_waited_for_is_in_no_figure(tmp_path: Path) -> None:
    cold_ms = COLD["load_duration"] / 1e6
    line, fact, _ = _card(tmp_path / "failed", [_failed(answer(0, COLD, stream=True)), answer(1, WARM, stream=True)])
    assert fact["waited"] == fact["in_figures"] == 0 and fact["waited_ms"] == 0 and fact["failed_waited"] == 1
    assert line.endswith(
        "no ok request waited for a load (2 answers reported a load time); "
        f"1 failed request waited for a load all the same, {cold_ms:.1f} ms, in no figure"
    ), line
    # Must match: where every request that waited is ok, the card and stats count the same.
    line, fact, load = _card(tmp_path / "ok", [answer(0, COLD, stream=True), answer(1, WARM, stream=True)])
    assert fact["waited"] == load["waited"] == 1 and fact["waited_ms"] == pytest.approx(load["waited_ms"])
    assert fact["failed_waited"] == 0 and "failed" not in line
