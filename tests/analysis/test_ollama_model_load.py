"""Ollama's model load (``load_duration``) and whole-request time (``total_duration``) in ``infertap
stats``: said apart from the speed figures, which stay as they are. The done lines are Ollama's own
examples (docs.ollama.com/api/usage: a cold ``/api/generate`` answer sent whole; the older API docs'
warm one), written by the project's writer; each answer's chunk times follow from its durations
(nothing reaches the client before the load and the prompt's evaluation end)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis.store import Analysis
from infertap.cli import cli
from tests.analysis_builders import event, sse
from tests.helpers import write_capture
from tests.ollama_done import COLD, WARM, answer, timed_as, without_load


def _stats(tmp_path: Path, name: str, exchanges: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """`infertap stats`' lines and `--json` of a capture of ``exchanges``: one group (one run)."""
    write_capture(tmp_path / name, exchanges)
    runner = CliRunner()
    text = runner.invoke(cli, ["stats", str(tmp_path / name)], env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    data = runner.invoke(cli, ["stats", "--json", str(tmp_path / name)])
    assert data.exit_code == 0, data.output
    [group] = json.loads(data.output)["groups"]
    return [line.strip() for line in text.output.splitlines()], group


def _said(lines: list[str], start: str) -> list[str]:
    return [line for line in lines if line.startswith(start)]


@pytest.mark.parametrize("stream", [True, False], ids=["chat-ndjson", "generate-whole"])
def test_a_cold_load_is_said_apart_and_named_in_the_ttft_note(tmp_path: Path, stream: bool) -> None:
    lines, group = _stats(tmp_path, "cap", [answer(0, COLD, stream=stream), answer(1, WARM, stream=stream)])
    load = group["server_timings"]["load"]
    cold_ms, warm_ms = COLD["load_duration"] / 1e6, WARM["load_duration"] / 1e6
    assert (load["requests"], load["waited"], load["in_ttft"]) == (2, 1, {"requests": 1, "exchange_ids": ["src-0"]})
    assert load["waited_ms"] == pytest.approx(cold_ms)
    assert (load["total_ms"], load["max_ms"]) == (pytest.approx(cold_ms + warm_ms), pytest.approx(cold_ms))
    totals = sorted(m["total_duration"] / 1e6 for m in (COLD, WARM))
    assert group["server_timings"]["total_ms"]["mean"] == pytest.approx(sum(totals) / 2)
    [said] = _said(lines, "model load")
    assert said.startswith(f"model load (Ollama load_duration, server-measured): 1 request waited for a load, {cold_ms:.1f} ms")
    [note] = _said(lines, "note: the ttft and e2e above include a model load")
    assert "for 1 request (src-0)" in note


@pytest.mark.parametrize("stream", [True, False], ids=["chat-ndjson", "generate-whole"])
def test_no_load_says_nothing_and_leaves_the_figures_as_they_are(tmp_path: Path, stream: bool) -> None:
    """The same answers: with a cold load, with a warm one (Ollama still reports a few ms), with neither
    field (llama.cpp, an older Ollama): the speed figures are the same; only the cold one says so."""
    cold = answer(0, COLD, stream=stream)
    with_load, group = _stats(tmp_path, "cold", [cold])
    bare, bare_group = _stats(tmp_path, "bare", [timed_as(answer(0, without_load(COLD), stream=stream), cold)])
    warm, warm_group = _stats(tmp_path, "warm", [answer(0, WARM, stream=stream)])
    assert group["server_timings"]["load"]["waited"] == 1
    assert bare_group["server_timings"]["load"] is None
    assert bare_group["server_timings"]["total_ms"]["n"] == 0
    assert not _said(bare, "model load") and not _said(bare, "note: the ttft")
    assert bare_group["metrics"] == group["metrics"]  # the load's figures are beside them, not in them
    for name in ("prompt_ms", "decode_ms"):
        assert bare_group["server_timings"][name] == group["server_timings"][name]
    assert warm_group["server_timings"]["load"]["waited"] == 0
    assert warm_group["server_timings"]["load"]["in_ttft"] == {"requests": 0, "exchange_ids": []}
    assert not _said(warm, "note: the ttft")
    [said] = _said(warm, "model load")
    assert "no request waited for a load" in said
    assert _said(with_load, "note: the ttft")


@pytest.mark.parametrize(
    "bad",
    [
        {"load_duration": str(COLD["load_duration"]), "total_duration": str(COLD["total_duration"])},
        {"load_duration": -COLD["load_duration"], "total_duration": -1},
        {"load_duration": None, "total_duration": 10**20},
    ],
    ids=["strings", "negative", "null-and-past-a-bigint"],
)
def test_a_malformed_duration_is_ignored_and_nothing_else_is_lost(tmp_path: Path, bad: dict[str, Any]) -> None:
    metrics = {**COLD, **bad}
    good = answer(0, COLD, stream=True)
    broken = timed_as(answer(1, metrics, stream=True), good)
    lines, group = _stats(tmp_path, "cap", [good, broken])
    load = group["server_timings"]["load"]
    assert (load["requests"], load["waited"], load["in_ttft"]["exchange_ids"]) == (1, 1, ["src-0"])
    assert group["server_timings"]["total_ms"]["n"] == 1
    assert (group["ok"], group["metrics"]["ttft"]["n"], group["server_timings"]["prompt_ms"]["n"]) == (2, 2, 2)
    assert group["workload"]["output_tokens"]["total"] == 2 * COLD["eval_count"]
    assert _said(lines, "model load")
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        [[raw, load_ns, total_ns]] = a.query(
            "SELECT server_timings, server_load_ns, server_total_ns FROM exchanges WHERE exchange_id = 'src-1'"
        ).rows
    assert (load_ns, total_ns) == (None, None)
    kept = json.loads(raw)  # the done line's own values stay in the decoded JSON
    assert kept["load_duration"] == bad["load_duration"]
    assert kept["eval_count"] == COLD["eval_count"]


def _llamacpp(predicted_n: int) -> dict[str, Any]:
    """A llama-server chat stream of two text events, no usage: infertap counts its token events."""
    timings = {"prompt_n": 7, "prompt_ms": 12.5, "predicted_n": predicted_n, "predicted_ms": 30.0, "cache_n": 4}
    chunks = [sse(event("a")), sse(event("b", finish="stop", timings=timings), "[DONE]")]
    request = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    return {"body": request, "chunks": chunks, "content_type": "text/event-stream"}


def test_the_engines_own_token_count_is_said_where_it_differs(tmp_path: Path) -> None:
    events = 2  # the stream's two text events: infertap's count, from its chunks
    same, same_group = _stats(tmp_path, "same", [_llamacpp(events)])
    differ, differ_group = _stats(tmp_path, "differ", [_llamacpp(events + 3)])
    assert same_group["server_timings"]["counts_differ"]["output"]["requests"] == 0
    assert not _said(same, "server counts differ")
    assert differ_group["server_timings"]["counts_differ"]["output"] == {"requests": 1, "server": events + 3, "infertap": events}
    [said] = _said(differ, "server counts differ")
    assert f"output tokens of 1 request (the engine's {events + 3} in all, infertap's {events};" in said
    assert same_group["server_timings"]["load"] is None and not _said(same, "model load")
    assert differ_group["metrics"]["output_tokens"]["mean"] == same_group["metrics"]["output_tokens"]["mean"] == events
