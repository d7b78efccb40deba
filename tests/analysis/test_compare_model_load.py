"""A model load on one side of ``compare`` and on the claim card: Ollama's ``load_duration`` inside a
side's ttft and e2e is named beside the B/A ratios (text, ``--json``, the HTML report), and on the
run's card; where neither side waited for a load the speed section is as it was without the field.
The captures are written by the project's writer with Ollama's documented done lines (tests/ollama_done.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis.claim import unknown_fields
from infertap.analysis.compare import compare
from infertap.analysis.compare_model_load import model_load_lines
from infertap.analysis.report import render
from infertap.analysis.server_figures import LOAD_FLOOR_NS
from infertap.cli import cli
from tests.helpers import write_capture
from tests.ollama_done import COLD, WARM, answer, timed_as, without_load

_REQUESTS = 3


def _capture(tmp_path: Path, name: str, exchanges: list[dict[str, Any]]) -> Path:
    write_capture(tmp_path / name, exchanges)
    return tmp_path / name


def _warm(*, bare: bool = False) -> list[dict[str, Any]]:
    """Every request on a model already loaded; ``bare``: the same answers, timed alike, whose done
    lines carry no load time at all (an older Ollama)."""
    warm = [answer(i, WARM, stream=True) for i in range(_REQUESTS)]
    return [timed_as(answer(i, without_load(WARM), stream=True), w) for i, w in enumerate(warm)] if bare else warm


def _cold_first() -> list[dict[str, Any]]:
    """The first request waited for a cold load, the others found the model loaded."""
    return [answer(0, COLD, stream=True)] + _warm()[1:]


def _compare(a: Path, b: Path) -> tuple[list[str], dict[str, Any]]:
    runner = CliRunner()
    text = runner.invoke(cli, ["compare", str(a), str(b)], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    data = runner.invoke(cli, ["compare", "--json", str(a), str(b)])
    assert data.exit_code == 0, data.output
    return [line.strip() for line in text.output.splitlines()], json.loads(data.output)


def _speed_section(lines: list[str]) -> list[str]:
    """compare's speed section: from its heading to the energy lines after it."""
    start = lines.index("2. Speed (paired exchanges that succeeded on both sides)")
    end = next(i for i, line in enumerate(lines) if i > start and line.startswith("energy"))
    return lines[start:end]


def _card(path: Path) -> tuple[list[str], dict[str, Any]]:
    runner = CliRunner()
    text = runner.invoke(cli, ["claim", str(path)], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    data = runner.invoke(cli, ["claim", "--json", str(path)])
    assert data.exit_code == 0, data.output
    return [line.strip() for line in text.output.splitlines()], json.loads(data.output)


def _loaded(lines: list[str]) -> list[str]:
    return [line for line in lines if "model load" in line]


@pytest.mark.parametrize("b_reports", [True, False], ids=["b-warm", "b-reports-no-load"])
def test_a_load_on_a_only_is_named_on_as_side(tmp_path: Path, b_reports: bool) -> None:
    a = _capture(tmp_path, "a", _cold_first())
    b = _capture(tmp_path, "b", _warm(bare=not b_reports))
    lines, result = _compare(a, b)
    cold_ms = COLD["load_duration"] / 1e6
    load = result["model_load"]
    assert load["a"]["waited"] == 1 and load["a"]["exchange_ids"] == ["src-0"]
    assert load["a"]["waited_ms"] == pytest.approx(cold_ms)
    assert load["a"]["reported"] == _REQUESTS
    speed = _speed_section(lines)
    said = [line for line in speed if line.startswith(("A: ", "B: ", "B/A's ttft"))]
    assert said[0] == (
        f"A: 1 request waited for a model load ({cold_ms:.1f} ms, Ollama load_duration, server-measured: src-0): "
        "its ttft and e2e include it"
    )
    if b_reports:
        assert load["b"] == {**load["b"], "waited": 0, "reported": _REQUESTS, "exchange_ids": []}
        assert (
            said[1] == f"B: no request waited for a model load ({_REQUESTS} answers reported a load time, Ollama load_duration)"
        )
    else:
        assert load["b"] is None
        assert said[1].startswith("B: no model load time reported")
    assert said[2].startswith("B/A's ttft and e2e include a model load on A only")
    assert len(said) == 3
    html = render(a, b)
    assert f"A: 1 request waited for a model load ({cold_ms:.1f} ms" in html

    card_lines, card = _card(a)
    fact = card["figures"]["model_load"]
    assert fact["value"]["waited"] == fact["value"]["in_figures"] == 1
    assert fact["value"]["waited_ms"] == pytest.approx(cold_ms)
    [line] = _loaded(card_lines)
    assert f"1 ok request waited for a load, {cold_ms:.1f} ms: the ttft and e2e above include it (src-0)" in line


def test_no_load_on_either_side_leaves_the_speed_section_as_it_was(tmp_path: Path) -> None:
    """Warm loads only (a few ms each) and no load field at all: the same speed section, byte for
    byte, and no model-load line; the warm run's card says none waited, the bare one's says unknown."""
    warm_a, warm_b = _capture(tmp_path, "warm_a", _warm()), _capture(tmp_path, "warm_b", _warm())
    bare_a, bare_b = _capture(tmp_path, "bare_a", _warm(bare=True)), _capture(tmp_path, "bare_b", _warm(bare=True))
    warm_lines, warm = _compare(warm_a, warm_b)
    bare_lines, bare = _compare(bare_a, bare_b)
    assert _speed_section(warm_lines) == _speed_section(bare_lines)
    assert warm["speed"] == bare["speed"]
    assert not _loaded(warm_lines) and not [line for line in _speed_section(warm_lines) if line.startswith(("A: ", "B: "))]
    assert warm["model_load"]["a"]["waited"] == 0 and warm["model_load"]["a"]["reported"] == _REQUESTS
    assert bare["model_load"] == {"a": None, "b": None}

    warm_card_lines, warm_card = _card(warm_a)
    assert warm_card["figures"]["model_load"]["value"]["waited"] == 0
    [line] = _loaded(warm_card_lines)
    assert f"none: no request waited for a load ({_REQUESTS} answers reported a load time)" in line
    bare_card_lines, bare_card = _card(bare_a)
    fact = bare_card["figures"]["model_load"]
    assert fact["value"] is None and "reported no model load time" in fact["unknown"]
    assert not _loaded(bare_card_lines)
    assert "figures" not in unknown_fields(bare_card)  # no load time is no figure unknown: --strict passes it


def test_a_malformed_load_time_is_no_load_and_the_pair_is_still_compared(tmp_path: Path) -> None:
    """A done line whose load_duration is no number (a proxy that rewrote it): unknown, as stats reads
    it; the pair stays in the speed table and nothing is said of a load it can't show."""
    cold = answer(0, COLD, stream=True)
    broken = timed_as(answer(0, {**COLD, "load_duration": str(COLD["load_duration"])}, stream=True), cold)
    a = _capture(tmp_path, "a", [broken, *_warm()[1:]])
    lines, result = _compare(a, _capture(tmp_path, "b", _warm()))
    assert result["model_load"]["a"] == {**result["model_load"]["a"], "reported": _REQUESTS - 1, "waited": 0}
    assert [row["a"]["n"] for row in result["speed"]] == [_REQUESTS] * len(result["speed"])
    assert not [line for line in _speed_section(lines) if line.startswith(("A: ", "B: "))]


def test_a_warm_load_beside_a_short_prompt_is_no_model_load(tmp_path, monkeypatch):
    """A model already in memory (4 ms of load, the API docs' warm figure) answering a prompt of 2 ms:
    half its ttft was the load, yet no load happened. It was called a cold start on A's side."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    warm = {**WARM, "prompt_eval_duration": 2_000_000}
    cold = {**warm, "load_duration": LOAD_FLOOR_NS}  # the least a load can be, the same short prompt
    write_capture(tmp_path / "warm", [answer(i, warm, stream=True) for i in range(3)])
    write_capture(tmp_path / "cold", [answer(0, cold, stream=True), *(answer(i, warm, stream=True) for i in (1, 2))])
    write_capture(tmp_path / "bare", [answer(i, without_load(warm), stream=True) for i in range(3)])
    # Must match: warm loads only, no request waited, no warning.
    load = compare(tmp_path / "warm", tmp_path / "bare")["model_load"]
    assert load["a"]["reported"] == 3 and load["a"]["waited"] == 0 and model_load_lines(load) == []
    # Must differ: a load of the floor's length before the same short prompt is one.
    said = model_load_lines(compare(tmp_path / "cold", tmp_path / "bare")["model_load"])
    assert said[0][0].startswith("A: 1 request waited for a model load") and any(w for _, w in said)
