"""compare's achieved concurrency per side, beside its speed ratios."""

from __future__ import annotations

import html
import json

from click.testing import CliRunner

from infertap.analysis.report import render
from infertap.cli import cli
from tests.analysis.test_compare_failures import _answer
from tests.analysis_builders import write_capture


def _compare(a, b):
    env = {"COLUMNS": "300"}
    text = CliRunner().invoke(cli, ["compare", str(a), str(b)], env=env)
    data = CliRunner().invoke(cli, ["compare", str(a), str(b), "--json"], env=env)
    assert text.exit_code == 0 and data.exit_code == 0, text.output + data.output
    return text.output, json.loads(data.output)


def test_compare_says_when_b_piled_requests_up(tmp_path):
    """Replayed at the recording's timing on a slower engine, B's requests overlapped (each 8 s, one
    a second): its ttft held their queueing, and compare gave the ratio with nothing said of it."""
    a = write_capture(tmp_path / "a", [_answer(i, i * 1000, 400) for i in range(10)])
    b = write_capture(tmp_path / "b", [_answer(i, i * 1000, 8000) for i in range(10)])
    text, data = _compare(a, b)
    c = data["concurrency"]
    # A: 10 × 0.4 s in flight over 9.4 s; B: 10 × 8 s over 17 s, 8 at once from the 8th send to the 1st end.
    assert (round(c["a"]["mean"], 3), c["a"]["max"]) == (round(4 / 9.4, 3), 1)
    assert (round(c["b"]["mean"], 3), c["b"]["max"]) == (round(80 / 17, 3), 8)
    assert c["much_higher"] == "b"
    assert "achieved concurrency (requests in flight): A 0.4 mean, 1 max; B 4.7 mean, 8 max" in text
    note = "B ran at 4.7 requests in flight on average against A's 0.4: its latencies include the time its requests queued"
    lines = text.splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("e2e "))
    assert any(line.startswith(note) for line in lines[table : table + 6]), text
    page = render(a, b)
    assert html.escape(note) in page and "achieved concurrency (requests in flight): A 0.4 mean" in page


def test_compare_of_runs_at_the_same_concurrency_says_nothing_of_it(tmp_path):
    a = write_capture(tmp_path / "a", [_answer(i, i * 1000, 400) for i in range(10)])
    b = write_capture(tmp_path / "b", [_answer(i, i * 1000, 300) for i in range(10)])
    text, data = _compare(a, b)
    assert data["concurrency"]["much_higher"] is None
    assert "achieved concurrency (requests in flight): A 0.4 mean, 1 max; B 0.3 mean, 1 max" in text
    assert "queued" not in text and "queued" not in render(a, b)
