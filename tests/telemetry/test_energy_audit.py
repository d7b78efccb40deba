"""Energy audited against the raw samples: a replay recorded with a stand-in nvidia-smi whose two
GPUs draw a power that changes from round to round, then the energy computed here from the
``gpu_power_watts`` samples in the capture, by the documented rule (docs/metrics.md: each GPU's
power, linear between samples and held flat beyond them, integrated over the run's active time,
its first send to its last end; the GPUs summed), and the same figure asked of ``stats`` (library
and CLI), ``compare``, the claim card and the report. The replay, capture, analysis and CLI are real.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.compare import compare
from infertap.analysis.report import render
from infertap.analysis.svg import number
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.replay import ReplayConfig, run_replay
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture
from tests.slot_engine import SlotEngine
from tests.telemetry.stand_ins import gpus_on_path, switched_smi, traced_smi

#: Each round's power of GPU 0 and GPU 1 (W), cycling: far from constant, so that trapezoids,
#: rectangles, a window shifted by a sample or one GPU left out all give other figures.
TRACE = [(100.0, 40.0), (300.0, 40.0), (150.0, 90.0), (260.0, 90.0), (120.0, 60.0)]


def rows(watts: tuple[float, ...]) -> list[str]:
    return [f"{i}, {w:.2f}, 50, 1024, 1980, 60, 0x0000000000000000" for i, w in enumerate(watts)]


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INFERTAP_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with ServerThread(SlotEngine(4, 0.2)) as server:
        yield server.url


def replayed(folder: Path, target: str, trace: list[tuple[float, ...]], every: float = 0.15, failing: range = range(0)) -> Path:
    """Twelve streamed chats, one every ``every`` s, replayed while the stand-in GPUs draw ``trace``
    (the sampling rounds in ``failing`` fail, none read)."""
    chats = [{"model": "m", "stream": True, "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(12)]
    source = folder / "src"
    write_capture(source, [{"offset_s": i * every, "body": b} for i, b in enumerate(chats)])
    with pytest.MonkeyPatch.context() as mp:
        gpus_on_path(mp, folder, traced_smi(folder / "bin", [rows(w) for w in trace], failing))
        summary = run_replay(ReplayConfig(source, target, folder / "out", probe=False))
    assert summary["completed"] == summary["sent"] == 12
    return folder / "out"


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Path:
    return replayed(tmp_path_factory.mktemp("traced"), engine, TRACE)


@pytest.fixture(scope="module")
def doubled(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Path:
    """The same workload while GPU 0 draws twice as much."""
    return replayed(tmp_path_factory.mktemp("doubled"), engine, [(2 * a, b) for a, b in TRACE])


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory, engine: str) -> Path:
    """The same workload, slower, while five sampling rounds of nvidia-smi fail mid-run."""
    return replayed(tmp_path_factory.mktemp("failing"), engine, TRACE, every=0.3, failing=range(4, 9))


def power(capture: Path) -> dict[str, list[tuple[int, float]]]:
    """Each GPU's raw power samples in the capture's own records, (wall ns, W) in time order."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for record in CaptureReader(capture).records():
        if record["type"] == "telemetry" and record["source"] == "gpu":
            for name, labels, value in record["samples"]:
                if name == "gpu_power_watts":
                    out[labels["gpu"]].append((round(record["wall"] * 1e9), value))
    assert sorted(out) == ["0", "1"]
    return {gpu: sorted(samples) for gpu, samples in out.items()}


def window(capture: Path) -> tuple[int, int, int, int]:
    """The run's first send, last end, ok requests and their output tokens."""
    with Analysis([capture]) as a:
        lo, hi, ok, tokens = a.sql(
            "SELECT min(sent_wall_ns), max(end_wall_ns), count(*) FILTER (WHERE ok), sum(output_tokens) FILTER (WHERE ok) "
            "FROM metrics WHERE generation"
        ).fetchall()[0]
    return lo, hi, ok, tokens


def bridged(capture: Path) -> dict[str, float]:
    """Per GPU, the seconds of the run's window between two consecutive raw power samples more
    than two sampling intervals (the median gap between its samples) apart: the documented gap."""
    lo, hi, _, _ = window(capture)
    out = {}
    for gpu, samples in power(capture).items():
        t = [at for at, _ in samples]
        steps = np.diff(t)
        limit = 2 * sorted(steps.tolist())[len(steps) // 2]
        inside = sum(max(0, min(b, hi) - max(a, lo)) for a, b in zip(t, t[1:], strict=False) if b - a > limit) / 1e9
        if inside:
            out[f"gpu {gpu}"] = inside
    return out


def expected(capture: Path) -> dict[str, float]:
    """The energy figures from the capture's own records: each GPU's raw power samples, integrated
    here over the run's first send to its last end, per the documented rule."""
    lo, hi, ok, tokens = window(capture)
    joules, end = 0.0, (hi - lo) / 1e9
    for samples in power(capture).values():
        t = np.array([(at - lo) / 1e9 for at, _ in sorted(samples)])  # s from the first send
        w = np.array([v for _, v in sorted(samples)])
        assert len(set(w.tolist())) > 2 and len(t[(t > 0) & (t < end)]) >= 5  # a trace that varies, within the run
        grid = np.concatenate([[0.0], t[(t > 0) & (t < end)], [end]])
        joules += float(np.trapezoid(np.interp(grid, t, w), grid))
    return {
        "joules": joules,
        "joules_per_request": joules / ok,
        "joules_per_output_token": joules / tokens,
        "mean_watts": joules / end,
        "watt_hours_per_session": joules / 3600 / ok,  # no request continues another: each a session
    }


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # rich's lines, as wrapped to the terminal, joined again


def figure(text: str, pattern: str) -> float:
    found = re.search(pattern, text)
    assert found, f"{pattern!r} not in {text!r}"
    return float(found.group(1).replace(",", ""))


FIGURES = ("joules", "joules_per_request", "joules_per_output_token", "mean_watts", "watt_hours_per_session")


def test_every_command_gives_the_energy_the_raw_samples_give(traced: Path) -> None:
    want = expected(traced)
    with Analysis([traced]) as a:
        [group] = speed_stats(a)["groups"]
    energy = group["energy"]
    assert energy["devices"] == 2
    assert {k: energy[k] for k in FIGURES} == pytest.approx(want, rel=1e-6)
    # The CLI: stats' text and --json, compare's side A, the claim card and the report's card.
    [as_json] = json.loads(invoke("stats", str(traced), "--json"))["groups"]
    assert {k: as_json["energy"][k] for k in FIGURES} == pytest.approx(want, rel=1e-6)
    said = invoke("stats", str(traced))
    assert figure(said, r"energy \(.*?\): joules ([\d,.]+)") == pytest.approx(want["joules"], abs=0.05)
    assert figure(said, r"joules_per_request ([\d,.]+)") == pytest.approx(want["joules_per_request"], abs=5e-4)
    assert figure(said, r"mean_watts ([\d,.]+)") == pytest.approx(want["mean_watts"], abs=0.05)
    side = compare(traced, traced)["energy"]["a"]
    assert {k: side[k] for k in FIGURES} == pytest.approx(want, rel=1e-6)
    compared = invoke("compare", str(traced), str(traced))
    # compare prints 3 significant digits, the claim card (and the report's) 4: the figures, so rounded.
    a = {k: number(v, 3) for k, v in want.items()}
    assert (
        f"energy A: {a['joules_per_output_token']} J per output token, {a['joules_per_request']} J per request, "
        f"{a['mean_watts']} W mean"
    ) in compared
    c = {k: number(v) for k, v in want.items()}
    said = (
        f"energy {c['joules']} J, {c['joules_per_request']} J/request, {c['joules_per_output_token']} J/output token, "
        f"{c['mean_watts']} W mean"
    )
    assert said in invoke("claim", str(traced))
    assert said in " ".join(re.sub(r"<[^>]+>", " ", render(traced)).split())


def test_a_changed_power_trace_makes_compare_differ(traced: Path, doubled: Path) -> None:
    a, b = expected(traced), expected(doubled)
    e = compare(traced, doubled)["energy"]
    # Must differ: GPU 0 at twice its power, as the raw samples of each side say.
    assert e["b"]["joules"] == pytest.approx(b["joules"], rel=1e-6)
    assert e["ratio_joules_per_output_token"] == pytest.approx(
        b["joules_per_output_token"] / a["joules_per_output_token"], rel=1e-6
    )
    assert e["ratio_mean_watts"] > 1.5
    # Must match: a run against itself.
    itself = compare(traced, traced)["energy"]
    assert itself["ratio_joules_per_output_token"] == pytest.approx(1.0, abs=1e-12)


def test_a_gap_in_the_power_samples_is_said_where_the_energy_is(failing: Path, traced: Path) -> None:
    # Must differ: five failed nvidia-smi rounds mid-run leave each GPU's samples a gap, bridged by
    # a straight line; every command says how long, as the raw samples do.
    gaps = bridged(failing)
    assert sorted(gaps) == ["gpu 0", "gpu 1"]
    with Analysis([failing]) as a:
        [group] = speed_stats(a)["groups"]
    energy = group["energy"]
    assert {k: energy[k] for k in FIGURES} == pytest.approx(expected(failing), rel=1e-6)  # the line is the estimate
    said = energy["interpolated"]
    assert said["devices"] == pytest.approx(gaps, rel=1e-9)
    assert said["seconds"] == pytest.approx(max(gaps.values()), rel=1e-9)  # the GPUs were read in one round
    assert said["share"] == pytest.approx(said["seconds"] / energy["measured"]["seconds"], rel=1e-9)
    s = said["seconds"]
    assert f"energy: {s:,.2f} s of it interpolated across a gap in the power samples (gpu 0" in invoke("stats", str(failing))
    assert f"{number(s, 3)} s of it interpolated across a gap in the power samples" in invoke(
        "compare", str(traced), str(failing)
    )
    assert f"; {number(s)} s of it interpolated across a gap in the power samples" in invoke("claim", str(failing))
    # Must match: the run sampled throughout has no gap, and nothing says one.
    assert bridged(traced) == {}
    with Analysis([traced]) as a:
        [group] = speed_stats(a)["groups"]
    assert group["energy"]["interpolated"] is None
    for said_text in (invoke("stats", str(traced)), invoke("compare", str(traced), str(traced)), invoke("claim", str(traced))):
        assert "interpolated" not in said_text


class Switching:
    """The engine, making the file ``switch`` when its ``at``-th chat completion arrives: a stand-in
    GPU told to stop answering there stops at that point of the workload, by its own traffic. It
    lists its model on /v1/models, so that the probe takes a snapshot (nvidia-smi's list in it)."""

    def __init__(self, app: Any, switch: Path, at: int) -> None:
        self.app, self.switch, self.at, self.seen = app, switch, at, 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"].endswith("/chat/completions"):
            self.seen += 1
            if self.seen == self.at:
                self.switch.touch()
        if scope["type"] == "http" and scope["path"] == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "slots"}]}).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


@pytest.mark.parametrize(
    ("at", "said"),
    [
        (None, None),  # Must match: both GPUs answer throughout, both measured.
        (7, "gpu 1's power samples cover"),  # Must differ: GPU 1 stops answering power at the 7th of 12 requests.
        (0, "gpu 1 has no power samples in run"),  # Must differ: it never answers; only the probe's nvidia-smi list names it.
    ],
)
def test_a_gpu_that_stops_answering_power_leaves_a_real_recording_unmeasured(
    tmp_path: Path, at: int | None, said: str | None
) -> None:
    """Two GPUs through the real sampler, the probe and the analysis: nvidia-smi answering "[N/A]"
    for GPU 1's power from some point of the workload on. Its energy was GPU 0's alone, given as the
    whole; the run is unmeasured, naming GPU 1 and how much of the run it covered."""
    both = rows((300.0, 200.0))
    gpu0_only = [both[0], "1, [N/A], 50, 1024, 1980, 60, 0x0000000000000000"]
    switch = tmp_path / "switch"
    if at == 0:
        switch.touch()
    chats = [{"model": "m", "stream": True, "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(12)]
    source = tmp_path / "src"
    write_capture(source, [{"offset_s": i * 0.15, "body": b} for i, b in enumerate(chats)])
    with pytest.MonkeyPatch.context() as mp, ServerThread(Switching(SlotEngine(4, 0.2), switch, at or 0)) as server:
        gpus_on_path(mp, tmp_path, switched_smi(tmp_path / "bin", both, gpu0_only, switch))
        summary = run_replay(ReplayConfig(source, server.url, tmp_path / "out"))
    assert summary["completed"] == summary["sent"] == 12
    with Analysis([tmp_path / "out"]) as a:
        [listed] = a.sql("SELECT host FROM engines").fetchall()[0]
        [group] = speed_stats(a)["groups"]
    assert len(json.loads(listed)["gpus"]) == 2  # the probe's list, from the stand-in told of two GPUs
    e = group["energy"]
    if said is None:
        assert e["joules"] > 0 and e["devices"] == 2 and e["partly_measured"] is None and "unknown" not in e
        return
    assert e["joules"] is None and e["joules_per_output_token"] is None and e["devices"] == 0
    assert said in e["unknown"] and "(gpu 0's cover it)" in e["unknown"], e["unknown"]
