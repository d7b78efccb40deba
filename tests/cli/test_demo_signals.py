"""`infertap demo` stopped from outside (a CI job's cancel, `timeout`, systemd, `kill`, a closed
terminal, `kill -9`) takes the engines it started with it: none is left running, orphaned.

The full demo runs all three engines where vLLM is built here (vLLM's engine-core and worker
processes are checked too), two where it isn't."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from infertap.capture.info import summarize
from infertap.capture.reader import CaptureReader
from infertap.errors import INTERRUPTED

# The engines' start (vLLM's a minute or more) and the demo's steps, on a 2-core machine shared with other jobs.
pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]

DEADLINE = 900.0  # seconds; generous, for a loaded 2-core machine: only a hang reaches it


class Demo:
    """`infertap demo` in a subprocess, read line by line."""

    def __init__(self, out: Path, *args: str) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "infertap", "demo", "--out", str(out), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "COLUMNS": "160"},
        )
        self.said = ""

    def read_until(self, done: Callable[[str], bool]) -> None:
        deadline = time.monotonic() + DEADLINE
        while not done(self.said):
            assert time.monotonic() < deadline, self.said
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            assert line, f"the demo ended first ({self.proc.wait()}):\n{self.said}{self.proc.stderr.read()}"  # type: ignore[union-attr]
            self.said += line

    def tree(self) -> list[psutil.Process]:
        """Every process the demo started, and what those started: the engines, the recorder, vLLM's own."""
        started = psutil.Process(self.proc.pid).children(recursive=True)
        names = " ".join(" ".join(_cmdline(p)) for p in started)
        assert "llama_cpp.server" in names and "llama-server" in names, names
        if "engine C (vLLM) left out" not in self.said:
            assert "vllm.entrypoints.openai.api_server" in names and "VLLM::EngineCore" in names, names
        return started

    def end(self, sig: signal.Signals) -> tuple[int, str, str]:
        self.proc.send_signal(sig)
        stdout, stderr = self.proc.communicate(timeout=DEADLINE)
        return self.proc.returncode, self.said + stdout, stderr


@pytest.fixture
def start_demo(tmp_path: Path) -> Iterator[Callable[..., Demo]]:
    """Factory: ``start_demo(*args)``; a demo a failed test left running is killed after it."""
    started: list[Demo] = []

    def start(*args: str) -> Demo:
        started.append(Demo(tmp_path / "demo", *args))
        return started[-1]

    yield start
    for demo in started:
        if demo.proc.poll() is None:
            demo.proc.kill()
        demo.proc.communicate()


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.NoSuchProcess:  # a short-lived one (a decode worker) already gone
        return []


def _left_running(started: list[psutil.Process]) -> list[str]:
    """Those still running once they had a generous while to go (SIGTERM lets each shut down)."""
    deadline = time.monotonic() + 180

    def running() -> list[psutil.Process]:
        alive = []
        for p in started:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                pass
        return alive

    while running() and time.monotonic() < deadline:
        time.sleep(0.5)
    left = [f"{p.pid} {' '.join(_cmdline(p))[:120]}" for p in running()]
    for p in running():  # not to leak them into the next tests
        with contextlib.suppress(psutil.NoSuchProcess):
            p.kill()
    return left


def _recording(said: str) -> bool:
    """The recording has begun and a first answer came back through the recorder."""
    lines = said.splitlines()
    began = next((i for i, line in enumerate(lines) if line.startswith("recording ")), None)
    return began is not None and len(lines) > began + 1


def test_sigterm_mid_recording_stops_every_engine_and_keeps_the_capture(start_demo):
    demo = start_demo()
    demo.read_until(_recording)
    started = demo.tree()
    code, said, stderr = demo.end(signal.SIGTERM)
    left = _left_running(started)  # first: a failing test leaks nothing
    assert code == INTERRUPTED, said + stderr
    assert "stopped: the engines it started are stopped" in stderr and "Traceback" not in stderr, stderr
    assert left == []
    capture = summarize(demo.out / "a-llama-cpp-python")
    assert capture["closed_cleanly"] and capture["exchanges"] >= 1, capture


def _exchanges(capture: Path) -> int:
    try:
        return sum(r["type"] == "exchange" for r in CaptureReader(capture).records())
    except Exception:  # not there yet, or a segment still being written
        return 0


def test_sighup_mid_replay_stops_the_demo_there_not_only_the_replay(start_demo):
    """The replay handles the signal itself (its capture closed cleanly); the demo must not go on to the next step."""
    demo = start_demo("--quick")
    demo.read_until(lambda said: "replaying the capture on B" in said)
    deadline = time.monotonic() + DEADLINE
    while not _exchanges(demo.out / "b-llama-server"):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    started = demo.tree()
    code, said, stderr = demo.end(signal.SIGHUP)
    left = _left_running(started)  # first: a failing test leaks nothing
    assert code == INTERRUPTED, said + stderr
    assert "comparing" not in said and "Traceback" not in stderr, said + stderr
    assert left == []
    assert summarize(demo.out / "b-llama-server")["closed_cleanly"]


def test_sigterm_after_the_replays_still_stops_the_demo_cleanly(start_demo):
    """Each replay handles the stop signals while it runs; after it, they stop the demo again
    (they were left at their defaults: SIGTERM killed the demo outright)."""
    demo = start_demo("--quick")
    demo.read_until(lambda said: "comparing " in said)
    started = demo.tree()
    code, said, stderr = demo.end(signal.SIGTERM)
    left = _left_running(started)  # first: a failing test leaks nothing
    assert code == INTERRUPTED, said + stderr
    assert "Traceback" not in stderr, stderr
    assert left == []


def test_a_sigkilled_demo_takes_its_engines_and_their_processes_with_it(start_demo):
    """Nothing of the demo runs after SIGKILL: the kernel tells each process it started (on Linux)."""
    demo = start_demo()
    demo.read_until(_recording)
    started = demo.tree()
    code, said, _ = demo.end(signal.SIGKILL)
    assert code == -signal.SIGKILL
    assert _left_running(started) == []
    # The recorder was told too (SIGTERM), and closed its capture.
    assert summarize(demo.out / "a-llama-cpp-python")["closed_cleanly"]
