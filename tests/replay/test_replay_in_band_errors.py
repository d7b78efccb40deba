"""A 2xx answer whose body reports an error (vLLM's ``{"error": ...}`` chunk, a finish reason
``error``, a choice's error object, an Anthropic ``error`` event, a failed Responses answer) or is
none an adapter reads: replay's summary counted it ok where ``stats`` counts it failed. It is a
failure now ("an error in a 200 body", "a 200 body not read"), read from the answer's last events
as it ends or whole on a worker thread, among the live errors a sweep ends a lost point by.

The target is tests/fake_upstream's server over HTTP: no real engine here can be made to answer
with an in-band error on demand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis.capacity import run_sweep
from infertap.analysis.slo import parse_slos
from infertap.cli import cli
from infertap.replay import ReplayConfig
from infertap.replay.sweep import SweepConfig
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import write_capture

CHAT, MESSAGES, RESPONSES = "/v1/chat/completions", "/v1/messages", "/v1/responses"
ERROR, UNREAD = "an error in a 200 body", "a 200 body not read"


def _chat(tag: str, stream: bool = True, **how: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": stream, "tag": tag, "n_chunks": 3, **how}


def _messages(tag: str, **how: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": tag}], "stream": True, "tag": tag, **how}


def _responses(tag: str, stream: bool, **how: Any) -> dict[str, Any]:
    return {"model": "m", "input": tag, "stream": stream, "tag": tag, "n_chunks": 3, **how}


#: Each shape: its path, its request, the failure the summary names and the error message it counts.
SHAPES = {
    "chat_error_chunk": (CHAT, _chat("a", error_chunk=True), ERROR, "fake engine error a"),
    "chat_error_chunk_long": (CHAT, _chat("b", error_chunk=True, n_chunks=60), ERROR, "fake engine error b"),  # past the tail
    "chat_finish_error": (CHAT, _chat("c", finish="error"), ERROR, 'finish_reason "error"'),
    "chat_choice_error": (CHAT, _chat("d", n=2, error_choice=1), ERROR, "choice 1: fake choice error d"),  # read whole
    "chat_whole_error_object": (CHAT, _chat("e", stream=False, error_body=True), ERROR, "fake overloaded e"),
    "messages_error_event": (MESSAGES, _messages("f", error_event=True), ERROR, "Overloaded f"),
    "responses_failed": (RESPONSES, _responses("g", True, status="failed"), ERROR, "fake failure g"),
    "responses_whole_failed": (RESPONSES, _responses("h", False, status="failed"), ERROR, "response failed"),
    "chat_html": (CHAT, _chat("i", html=True), UNREAD, UNREAD),
}


#: The fake's switches for an error shape: left out, the same request is answered in full.
_HOW = {"error_chunk", "finish", "n", "error_choice", "error_body", "error_event", "status", "html"}


def _replay(capture: Path, url: str, out: Path, *extra: str) -> Any:
    args = ["replay", str(capture), "--target", url, "--out", str(out), "--no-probe", "--no-telemetry", *extra]
    return CliRunner().invoke(cli, args)


def _stats(out: Path, cache: Path) -> dict[str, Any]:
    done = CliRunner().invoke(cli, ["stats", str(out), "--json", "--cache-dir", str(cache)])
    assert done.exit_code == 0, done.output
    groups = json.loads(done.stdout)["groups"]
    return {k: sum(g[k] for g in groups) for k in ("requests", "ok", "errors", "unfinished")}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_2xx_answer_whose_body_is_an_error_fails_in_the_summary_as_stats_counts_it(tmp_path: Path, shape: str) -> None:
    path, request, failure, message = SHAPES[shape]
    finished = [  # must match: answers that stay ok beside it, a stream and a body sent whole
        {"path": path, "body": {k: v for k, v in request.items() if k not in _HOW} | {"tag": "ok1"}, "offset_s": 0.01},
        {"body": _chat("ok2", stream=False), "offset_s": 0.02},
    ]
    write_capture(tmp_path / "cap", [{"path": path, "body": request}, *finished])
    with ServerThread(FakeUpstream()) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--json")
        text = _replay(tmp_path / "cap", server.url, tmp_path / "text")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert (summary["sent"], summary["ok"], summary["failed"], summary["unfinished"]) == (3, 2, 1, 0), summary
    assert summary["failures"] == {failure: 1} and summary["failures_by_path"][path]["failures"] == {failure: 1}
    assert summary["errors"] == {message: 1} and summary["statuses"] == {"200": 3}
    assert summary["throughput"]["ok_per_s"] == pytest.approx(2 / summary["throughput"]["span_s"])
    assert _stats(tmp_path / "out", tmp_path / "cache") == {"requests": 3, "ok": 2, "errors": 1, "unfinished": 0}
    assert text.exit_code == 0, text.output
    assert f"3 (2 ok, 1 failed: {failure} ×1 on {path}" in " ".join(text.output.split())


def test_a_sweep_point_of_in_band_errors_is_lost_early(tmp_path: Path) -> None:
    """A target answering 200 with an error chunk fails every request; the live check counts those
    errors now (vLLM's bench and GuideLLM count such a request errored), so a point over its
    ``error_rate`` ends early, where it ran its whole length before. Answers that finish pass."""
    for name, how in (("errors", {"error_chunk": True}), ("finished", {})):
        src = tmp_path / f"src-{name}"
        write_capture(src, [{"offset_s": 0.025 * i, "body": _chat(f"t{i}", **how)} for i in range(80)])
        with ServerThread(FakeUpstream()) as server:
            config = ReplayConfig(src, server.url, tmp_path / f"sweep-{name}", probe=False, grace_s=1.0, telemetry=False)
            result = run_sweep(SweepConfig(config, speeds=(1.0,)), parse_slos(["error_rate<=1%"]))
        [point] = result["points"]
        if how:
            assert point["lost_early"] and not point["passed"] and 0 < point["sent"] < 80, point
            assert point["error_rate"] == 1.0
        else:
            assert not point["lost_early"] and point["passed"] and point["sent"] == 80, point
