"""A 2xx answer whose body reports an error (vLLM's ``{"error": ...}`` chunk, a finish reason
``error``, a choice's error object, an Anthropic ``error`` event, a failed Responses answer) or is
none an adapter reads: replay's summary counted it ok where ``stats`` counts it failed. It is a
failure now ("an error in a 200 body", "a 200 body not read"), read from the answer's last events
as it ends or whole on a worker thread, among the live errors a sweep ends a lost point by.

The target is tests/fake_upstream's server over HTTP: no real engine here can be made to answer
with an in-band error on demand."""

from __future__ import annotations

import importlib
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


def _prompt(tag: str, **how: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": tag, "stream": True, "tag": tag, "n_chunks": 8, **how}


def _ollama(tag: str, **how: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": tag}], "tag": tag, "n_chunks": 8, **how}


#: Each API's stream with an error said early (``error_at`` 1 of 8 pieces), the answer going on after
#: it to a normal finish: its path, its request, and the error message ``stats`` reads of it.
EARLY = {
    "chat": (CHAT, _chat("a", n_chunks=8), "fake engine error a"),
    "completions": ("/v1/completions", _prompt("b"), "fake engine error b"),
    "messages": (MESSAGES, _messages("c", n_chunks=8), "Overloaded c"),
    "responses_error_event": (RESPONSES, _responses("d", True, n_chunks=8), "fake error d"),
    "responses_failed": (RESPONSES, _responses("e", True, n_chunks=8), "fake failure e"),
    "ollama_chat": ("/api/chat", _ollama("f"), "fake ollama error f"),
    "ollama_generate": ("/api/generate", {"model": "m", "prompt": "g", "tag": "g", "n_chunks": 8}, "fake ollama error g"),
    "llamacpp": ("/completion", {"prompt": "h", "stream": True, "tag": "h", "n_chunks": 8}, "fake engine error h"),
}
#: Text an answer says that holds each API's error marks (a whole piece "error", "failed"): no error.
_WORDS = ["error", "failed", "cancelled", ' "error" ', "done"]


@pytest.mark.parametrize("api", EARLY)
def test_an_error_said_before_an_answer_finished_fails_it_in_the_summary_as_stats_counts_it(tmp_path: Path, api: str) -> None:
    """An error event mid-stream, then more text and a normal finish: replay read only the last
    events and counted it ok, where ``stats`` reads the whole body and counts it an error. The same
    answer with the word "error" as its text (its bytes hold the mark) stays ok."""
    path, request, message = EARLY[api]
    early = {"failed_at" if api == "responses_failed" else "error_at": 1}
    exchanges = [
        {"path": path, "body": request | early, "offset_s": 0.0},
        {"path": path, "body": request | {"tag": "ok", "texts": _WORDS}, "offset_s": 0.01},  # must stay ok
        {"path": path, "body": request | {"tag": "ok2"}, "offset_s": 0.02},
    ]
    write_capture(tmp_path / "cap", exchanges)
    with ServerThread(FakeUpstream()) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert (summary["sent"], summary["ok"], summary["failed"], summary["unfinished"]) == (3, 2, 1, 0), summary
    assert summary["failures"] == {ERROR: 1} and summary["errors"] == {message: 1}, summary
    assert _stats(tmp_path / "out", tmp_path / "cache") == {"requests": 3, "ok": 2, "errors": 1, "unfinished": 0}


def test_a_stream_with_no_finish_after_an_error_said_early_is_that_error_not_unfinished(tmp_path: Path) -> None:
    """No finish reason at its end, an error said before: ``stats`` reads its finish as ``error`` (a
    failure by that error), where replay's last events called it cut. With no error it is cut."""
    exchanges = [
        {"body": _chat("a", n_chunks=8, no_finish=True, error_at=1), "offset_s": 0.0},
        {"body": _chat("b", n_chunks=8, no_finish=True), "offset_s": 0.01},  # must stay unfinished
    ]
    write_capture(tmp_path / "cap", exchanges)
    with ServerThread(FakeUpstream()) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert (summary["sent"], summary["ok"], summary["failed"], summary["unfinished"]) == (2, 0, 1, 1), summary
    assert summary["failures"] == {ERROR: 1} and summary["errors"] == {"fake engine error a": 1}, summary
    assert _stats(tmp_path / "out", tmp_path / "cache") == {"requests": 2, "ok": 0, "errors": 2, "unfinished": 1}


def test_a_sweep_point_of_in_band_errors_is_lost_early(tmp_path: Path) -> None:
    """A target answering 200 with an error chunk fails every request; the live check counts those
    errors now (vLLM's bench and GuideLLM count such a request errored), so a point over its
    ``error_rate`` ends early, where it ran its whole length before; so does one whose answers say
    their error early and then finish normally (read ok from their last events before). Answers
    that finish pass."""
    for name, how in (("errors", {"error_chunk": True}), ("early", {"error_at": 0, "n_chunks": 8}), ("finished", {})):
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


#: Bodies against each API's marks, each with whether it holds an error's mark: a null member (every
#: Responses answer's ``"error": null``, spaced or not) is none; an error object, a failed status or
#: the word as a whole piece of text is one.
_MARKED = [
    ("chat", b'data: {"choices":[{"delta":{"content":"hi"}}],"error": null}\n\ndata: [DONE]\n\n', False),
    ("chat", b'data: {"choices":[],"error" :\n   null}\n\n', False),
    ("chat", b'data: {"error": {"message": "boom"}}\n\ndata: [DONE]\n\n', True),
    ("chat", b'data: {"choices":[{"delta":{"content":"error"}}]}\n\n', True),
    ("chat", b'data: {"error":                         null}\n\n', True),  # null past the bytes read after it
    ("chat", b'data: {"x":"error"', True),  # at the body's very end: decided on what follows, nothing
    ("responses", b'data: {"type":"response.created","response":{"status":"in_progress","error":null}}\n\n', False),
    ("responses", b'data: {"type":"response.failed","response":{"status":"failed","error":null}}\n\n', True),
    ("responses", b'data: {"type":"response.completed","response":{"status":"completed","error":null}}\n\n', False),
    ("messages", b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error"}}\n\n', True),
]


@pytest.mark.parametrize("batch", [1, 5, 64 * 1024])
@pytest.mark.parametrize(("api", "body", "marked"), _MARKED)
def test_error_marks_searched_as_the_bytes_arrive_find_what_the_whole_body_holds(
    monkeypatch, api: str, body: bytes, marked: bool, batch: int
) -> None:
    """Replay searches an answer's bytes for error marks a batch of chunks at a time as they arrive
    (``SCAN_BYTES``), not all at once as it ends (a 1.4 MiB body held the event loop about 1 ms):
    split anywhere, into two chunks or one byte each, searched every byte, every few or at the end
    (a mark, or the bytes after it, across searches), the answer is the whole body's search."""
    module = importlib.import_module("infertap.apis.unfinished")  # the package's name is its function's
    monkeypatch.setattr(module, "SCAN_BYTES", batch)
    path = {"chat": CHAT, "messages": MESSAGES, "responses": RESPONSES}[api]
    assert module._may_report_error(module._by_path(path), [body]) is marked
    splits = [[body[:i], body[i:]] for i in range(len(body) + 1)] + [[body[i : i + 1] for i in range(len(body))]]
    for chunks in splits:
        scan = module.ErrorMarkScan.of_path(path)
        assert scan is not None
        for chunk in chunks:
            scan.feed(chunk)
        assert scan.ended() is marked, chunks


def test_replay_never_searches_a_whole_answer_for_error_marks_as_it_ends(tmp_path: Path, monkeypatch) -> None:
    """The search of every answer's whole body at its end ran on the replay's event loop, delaying
    every other request's send and timing; replay searches as the bytes arrive now, with the same
    answers: an error said early fails its answer, the word "error" as text doesn't."""
    module = importlib.import_module("infertap.apis.unfinished")  # the package's name is its function's

    whole: list[str] = []
    searched = module._may_report_error
    monkeypatch.setattr(module, "_may_report_error", lambda api, chunks: whole.append(api.name) or searched(api, chunks))
    path, request, message = EARLY["chat"]
    exchanges = [
        {"path": path, "body": request | {"error_at": 1}, "offset_s": 0.0},
        {"path": path, "body": request | {"tag": "ok", "texts": _WORDS}, "offset_s": 0.01},  # must stay ok
        {"path": path, "body": request | {"tag": "ok2", "n_chunks": 400}, "offset_s": 0.02},
    ]
    write_capture(tmp_path / "cap", exchanges)
    with ServerThread(FakeUpstream()) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert (summary["sent"], summary["ok"], summary["failed"]) == (3, 2, 1) and summary["errors"] == {message: 1}, summary
    assert whole == []


@pytest.mark.parametrize("api", ["ollama_chat", "ollama_generate", "llamacpp"])
def test_ollama_and_llamacpp_answers_are_judged_from_their_last_events(tmp_path: Path, monkeypatch, api: str) -> None:
    """Ollama's and llama.cpp ``/completion``'s streams were read whole on a worker thread as each
    ended (8-15 ms of the GIL per 1,000 lines), where a chat stream's last events tell: they are
    judged from theirs now, their end marker the finish and its count the output tokens, and read
    whole only where their bytes hold an error's mark (an error said early, the word as text), with
    the same summary as ``stats``."""
    runner = importlib.import_module("infertap.replay.runner")
    whole: list[str] = []
    read = runner._read_answer
    monkeypatch.setattr(
        runner, "_read_answer", lambda r, judge: whole.append(json.loads(r["request_body"])["tag"]) or read(r, judge)
    )
    path, request, message = EARLY[api]
    exchanges = [
        {"path": path, "body": request | {"error_at": 1}, "offset_s": 0.0},
        {"path": path, "body": request | {"tag": "words", "texts": _WORDS}, "offset_s": 0.01},  # marked: read whole, ok
        *({"path": path, "body": request | {"tag": f"ok{i}"}, "offset_s": 0.02 + i * 0.01} for i in range(3)),
    ]
    write_capture(tmp_path / "cap", exchanges)
    with ServerThread(FakeUpstream()) as server:
        done = _replay(tmp_path / "cap", server.url, tmp_path / "out", "--json")
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert (summary["sent"], summary["ok"], summary["failed"], summary["unfinished"]) == (5, 4, 1, 0), summary
    assert summary["errors"] == {message: 1} and summary["output_tokens"]["unknown"] == 0, summary
    assert sorted(whole) == sorted([request["tag"], "words"])  # the three plain answers told by their tails
    assert _stats(tmp_path / "out", tmp_path / "cache") == {"requests": 5, "ok": 4, "errors": 1, "unfinished": 0}
