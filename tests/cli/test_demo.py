"""The README's main job, `infertap demo`, end to end as a user runs it (the --quick workload)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

from infertap.capture.info import summarize
from infertap.demo import load_workload, references
from infertap.launch import vllm_unavailable

pytestmark = pytest.mark.engine

DEADLINE = 900.0  # seconds for a demo's run: 390 s seen on a loaded 2-core machine; only a hang reaches it
# A demo's test: its engines' start (vLLM's, a minute or more, with --engine-c), the run to DEADLINE
# and its stop, past pytest's 300 s, which would cut a slow run short as a failure.
DEMO_TIMEOUT = pytest.mark.timeout(1800)


@contextlib.contextmanager
def demo(*args: str, stderr: int | IO[str] = subprocess.PIPE) -> Iterator[subprocess.Popen[str]]:
    """`infertap demo *args`, stopped however the test ends (a hang past DEADLINE or pytest's timeout,
    a failed assertion): SIGTERM first, which stops its engines with it, as a CI job's cancel does;
    killed past a minute (its engines, tethered to it, end with it). Left running, a `--keep` demo
    held its engines until the machine's next reboot."""
    argv = [sys.executable, "-m", "infertap", "demo", *args]
    env = {**os.environ, "COLUMNS": "160"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def test_the_bundled_workload_is_data_with_known_answers():
    full, quick = load_workload(), load_workload(quick=True)
    assert len(quick["steps"]) < len(full["steps"])
    ids = {s["id"] for s in full["steps"]}
    assert all(s["continues"] in ids for s in full["steps"] if s.get("continues"))
    assert references(full)["What is 17 + 25?"] == "42"


@dataclass
class DemoRun:
    """One `infertap demo --quick --keep` run, shared by the tests below: each demo run takes 6 to 15
    minutes of a 2-core machine, and one run shows everything they check."""

    code: int  # its exit status after Ctrl-C
    text: str  # what it printed (stdout)
    err: str
    out: Path
    engines: list[str]  # the engines it started (A and B), as its summary names them
    kept: dict[str, int]  # each engine it said it kept running: /v1/models' status while it held them
    third: str | None  # engine C's URL (--engine-c), where vLLM can be built here


@pytest.fixture(scope="module")
def third_engine(request: pytest.FixtureRequest) -> str | None:
    """The real vLLM's URL for --engine-c where vLLM can be built on this machine, else None: the
    demo's own two engines are then tested alone, and the third engine's test says why it skips."""
    if vllm_unavailable():
        return None
    return str(request.getfixturevalue("vllm_engine").url)


@pytest.fixture(scope="module")
def demo_run(third_engine: str | None, tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """The demo as a user runs it to see everything: its workload recorded on A, replayed on B (and
    C), compared, the engines kept until Ctrl-C."""
    root = tmp_path_factory.mktemp("demo")
    out = root / "demo"
    third = ["--engine-c", third_engine] if third_engine else []
    with (root / "stderr").open("w+") as err, demo("--quick", "--keep", *third, "--out", str(out), stderr=err) as proc:
        text = ""
        deadline = time.monotonic() + DEADLINE
        while "engines kept running" not in text:
            assert time.monotonic() < deadline, f"the demo took over {DEADLINE:g} s:\n{text}"
            line = proc.stdout.readline()  # type: ignore[union-attr]
            assert line, f"the demo ended first ({proc.wait()}):\n{text}"
            text += line
        held = re.search(r"engines kept running: (.*)  \(Ctrl-C", text)
        assert held is not None, text
        urls = dict(zip(held.group(1).split()[::2], held.group(1).split()[1::2], strict=True))
        kept = {url: httpx.get(url + "/v1/models", timeout=10).status_code for url in urls.values()}
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        err.seek(0)
        started = re.findall(r"^  [AB]: .* at (http://\S+),", text, re.MULTILINE)
        return DemoRun(proc.returncode, text + rest, err.read(), out, started, kept, third_engine)


@DEMO_TIMEOUT
def test_demo_records_replays_and_names_the_configuration_difference(demo_run: DemoRun):
    code, text, err, out = demo_run.code, demo_run.text, demo_run.err, demo_run.out
    assert code == 0, text + err
    # Configuration first, and the difference it was built to expose.
    comparison = text[text.index("1. Configuration") :]
    assert comparison.index("repeat_penalty") < comparison.index("2. Speed") < comparison.index("3. Divergence")
    assert "1.1 (engine_default)" in comparison and "1.0 (engine_default)" in comparison
    for command in ("infertap replay", "infertap compare", "infertap report", "infertap sql"):
        assert command in text
    a, b = summarize(out / "a-llama-cpp-python"), summarize(out / "b-llama-server")
    assert (
        a["closed_cleanly"]
        and b["closed_cleanly"]
        and a["exchanges"] == b["exchanges"] == len(load_workload(quick=True)["steps"])
    )
    assert (out / "report-a-vs-b.html").read_text().count("<svg") >= 3
    _known_answers_are_a_number(text, out)
    # Finished, it stopped the engines it started.
    assert len(demo_run.engines) == 2, text
    for url in demo_run.engines:
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/v1/models", timeout=5)


def _known_answers_are_a_number(text: str, out) -> None:
    """40 known answers, A's score with its default and with it pinned, the noise floor beside them."""
    from infertap.analysis.store import Analysis

    known = text[text.index("known answers (") : text.index("captures:")]
    n = len(references(load_workload(quick=True)))
    assert n == 40
    # Each run's score is over the answers both sides gave; those a side didn't (a stream cut short) are said apart.
    scored = [(int(of), int(out or 0)) for of, out in re.findall(r"\d+ of (\d+) right(?: \((\d+) left out)?", known)]
    assert scored and all(of + left_out == n for of, left_out in scored), known
    assert "answers flipped" in known
    assert known.index("A, its own defaults") < known.index("A again, unchanged") < known.index("A with --set repeat_penalty=1.0")
    assert "McNemar p" in known and "95% CI" in known
    # The pinned replay sent the penalty, the unchanged one didn't: the settings differ only where they must.
    for run, sent in (("a-repeat-penalty-1.0", [1.0]), ("a-again", [None])):
        with Analysis([out / run]) as db:
            values = db.sql("SELECT DISTINCT body->>'$.repeat_penalty' FROM requests WHERE generation").fetchall()
        assert [None if v[0] is None else float(v[0]) for v in values] == sent


def test_vllm_is_left_out_by_quick_and_where_it_cant_be_built(tmp_path, monkeypatch):
    from infertap.demo import vllm_left_out

    assert vllm_left_out(quick=True) == "--quick"
    monkeypatch.setenv("INFERTAP_VLLM_VENV", str(tmp_path / "venv"))
    assert "make vllm" in vllm_left_out(quick=False)
    (tmp_path / "venv.unavailable").write_text("no Python 3.11 here\n")
    assert vllm_left_out(quick=False) == "vLLM can't be built on this machine (no Python 3.11 here)"


@DEMO_TIMEOUT
def test_demo_with_a_third_engine_compares_each_pair_configuration_first(demo_run: DemoRun):
    """--quick leaves the embedded vLLM out; --engine-c brings any engine in (here the real vLLM)."""
    if demo_run.third is None:
        pytest.skip(f"vLLM can't be built on this machine: {vllm_unavailable()}")
    code, text, err, out = demo_run.code, demo_run.text, demo_run.err, demo_run.out
    assert code == 0, text + err
    assert "engine C (vLLM) left out" not in text and "C: vllm 0.32.0" in text and ", float32," in text
    sections = [text.index(f"===== {pair} ") for pair in ("A vs B", "A vs C", "B vs C")]
    assert sections == sorted(sections)
    b_vs_c = text[sections[2] : text.index("in short:")]
    assert b_vs_c.index("dtype") < b_vs_c.index("context_size") < b_vs_c.index("2. Speed") < b_vs_c.index("3. Divergence")
    summary = text[text.index("in short:") :]
    assert "B vs C: configuration differs in kind, quantization, dtype, context_size" in summary
    # llama-cpp-python's version against vLLM's is no difference of its own: versions of two engines don't compare.
    assert "A vs C: configuration differs in kind, quantization, dtype" in summary
    steps = len(load_workload(quick=True)["steps"])
    assert summarize(out / "c-vllm")["exchanges"] == steps
    # An engine it was given is not its own to stop: C still answers after the demo ended.
    assert httpx.get(demo_run.third + "/v1/models", timeout=10).status_code == 200


@DEMO_TIMEOUT
def test_keep_leaves_the_engines_running_until_ctrl_c(demo_run: DemoRun):
    text = demo_run.text
    assert text.index("1. Configuration") < text.index("engines kept running")  # results first, then the engines stay
    # Every engine it names stayed up until Ctrl-C; those it started (A, B) are among them.
    assert demo_run.kept and set(demo_run.kept.values()) == {200}, demo_run.kept
    assert set(demo_run.engines) <= set(demo_run.kept), (demo_run.engines, demo_run.kept)
    assert demo_run.code == 0, text + demo_run.err
    for url in demo_run.engines:
        with pytest.raises(httpx.ConnectError):
            httpx.get(url + "/v1/models", timeout=5)
