"""The capacity sweep (replay/sweep.py, analysis/capacity.py, ``infertap sweep``) against a simulated
engine whose capacity is known by construction (tests/slot_engine.py): ``slots`` requests served at
once, each for ``service_s``. Below its capacity every request takes about ``service_s``; above it
a queue grows and the e2e SLOs (set at 1.5-2x ``service_s``) fail by a wide margin."""

from __future__ import annotations

import html
import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infertap.analysis import Analysis
from infertap.analysis.capacity import RESULT, read_sweep, run_sweep
from infertap.analysis.slo import parse_slos
from infertap.analysis.svg import number
from infertap.analysis.sweep_report import capacity_sentence, load_sweeps, render_sweeps
from infertap.capture.info import summarize
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.errors import ConfigError, InfertapError
from infertap.launch import free_port
from infertap.replay import ReplayConfig, Schedule, sweep_checks
from infertap.replay.sweep import (
    Load,
    Point,
    Sweep,
    SweepConfig,
    SweepError,
    behind_loads,
    capacity_of,
    inconsistent,
    parse_numbers,
    unmeasured_passes,
)
from tests import sdk_shapes
from tests.fake_engines import JSONRoutes
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture
from tests.slot_engine import SlotEngine

#: What sweep.json and ``--json`` hold (analysis/capacity.py), and each point in it.
SWEEP_KEYS = {
    "kind",
    "source",
    "target",
    "target_kind",
    "slo",
    "capacity",
    "knee",
    "inconsistent",
    "replayer_behind",
    "unmeasured",
    "points",
    "stopped_early",
    "aborted",
    "finished",
    "warmup",
    "source_failed",
}
POINT_KEYS = {
    "passed",
    "out",
    "lost_early",
    "replayer_behind",
    "unmeasured",
    "not_carried",
    "unmeasurable",
    "answered_per_s",
    "sent",
    "wall_s",
    "offered_requests_per_s",
    "schedule_lag_ms",
    "in_flight",
    "slos",
    "requests",
    "not_sent",
    "ok",
    "cancelled",
    "unjudged",
    "error_rate",
    "attainment",
    "requests_per_s",
    "output_tokens_per_s",
    "output_tokens_unknown",
    "goodput",
    "latency_ms",
}


def chat(i: int) -> dict[str, Any]:
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"question {i}"}]}


#: A Responses API answer, as recorded and as the fake target gives it (its own id each time).
RESPONSE = sdk_shapes.response(
    {
        "id": "resp_src",
        "object": "response",
        "status": "completed",
        "model": "m",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}],
            }
        ],
        **sdk_shapes.RESPONSE_REST,
        "usage": sdk_shapes.response_usage(5, 1),
    }
)


def workload(path: Path, n: int, interval_s: float) -> Path:
    """``n`` streamed chat requests, one every ``interval_s``: a rate of 1 / interval_s."""
    write_capture(path, [{"offset_s": i * interval_s, "body": chat(i)} for i in range(n)])
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoded captures (each point is judged through Analysis) cached under the test's own folder."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def slot_engine(request: pytest.FixtureRequest) -> Iterator[tuple[SlotEngine, str]]:
    """SlotEngine(slots, service_s), parametrized indirectly; 2 slots of 0.1 s (20 req/s) by default."""
    slots, service_s = getattr(request, "param", (2, 0.1))
    engine = SlotEngine(slots, service_s)
    with ServerThread(engine) as server:
        yield engine, server.url


def sweep_cli(*args: str) -> Result:
    # A wide terminal, so that rich's table keeps each SLO's column title on one line.
    return CliRunner().invoke(cli, ["sweep", *args], env={"COLUMNS": "300"})


def point_captures(result: dict[str, Any]) -> dict[str, int]:
    """Each point's folder read back as a capture (closed cleanly): its generation exchanges, by folder name."""
    counts = {}
    for p in result["points"]:
        assert summarize(Path(p["out"]))["closed_cleanly"], p["out"]
        with Analysis([p["out"]]) as a:
            counts[Path(p["out"]).name] = a.query("SELECT count(*) FROM metrics WHERE generation").rows[0][0]
    return counts


def sent_by_folder(result: dict[str, Any]) -> dict[str, int]:
    return {Path(p["out"]).name: p["sent"] for p in result["points"]}


# -- finding the capacity ---------------------------------------------------------------------------


def test_search_finds_the_capacity_with_passes_below_and_failures_above(slot_engine, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the search, not this machine's replayer lag
    engine, url = slot_engine
    rate = 10.0  # requests per second in the workload as recorded
    src = workload(tmp_path / "src", 40, 1 / rate)
    true_speed = engine.capacity / rate  # 2.0

    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), search=True),
        parse_slos([f"e2e:p90<={2 * engine.service_s}s"]),
    )

    capacity, knee = result["capacity"], result["knee"]
    assert capacity is not None and knee["failed"] is not None, result
    assert abs(capacity["speed"] - true_speed) <= 0.15 * true_speed, result["points"]
    assert knee["passed"] == capacity["speed"] < knee["failed"]
    assert (knee["failed"] - knee["passed"]) / knee["passed"] <= 0.10  # bisected down to the tolerance
    speeds = [p["speed"] for p in result["points"]]
    assert speeds == sorted(speeds) and len(set(speeds)) == len(speeds)
    for p in result["points"]:
        if p["speed"] <= 0.85 * true_speed:
            assert p["passed"] and not p["lost_early"] and p["sent"] == 40, p
        if p["speed"] >= 1.15 * true_speed:
            assert not p["passed"], p
    # No run can carry more than the engine serves: 2 slots, 0.1 s each (by construction).
    assert capacity["requests_per_s"] <= engine.capacity * 1.001
    assert capacity["goodput"]["requests_per_s"] <= capacity["requests_per_s"]
    assert read_sweep(tmp_path / "sweep") == json.loads(json.dumps(result, default=str))
    assert result["kind"] == "speed" and result["stopped_early"] is False


def test_fixed_speeds_pass_below_the_capacity_and_fail_above_it(slot_engine, tmp_path, monkeypatch):
    # The speeds against the engine's slots, not this host's replayer lag: at speed 1.5 (a request
    # every 67 ms) a lag p99 over 6.7 ms, as on a loaded 2-core machine, left the pass uncounted
    # (replayer_behind) and the capacity at speed 1.
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)
    engine, url = slot_engine
    rate = 10.0
    src = workload(tmp_path / "src", 20, 1 / rate)
    true_speed = engine.capacity / rate
    speeds = [0.5 * true_speed, 0.75 * true_speed, 2 * true_speed, 3 * true_speed]

    run = sweep_cli(
        str(src),
        "--target",
        url,
        "--no-probe",
        "--grace",
        "1",
        "--slo",
        f"e2e:p90<={2 * engine.service_s * 1000:g}ms",
        "--speeds",
        ",".join(f"{s:g}" for s in speeds),
        "--out",
        str(tmp_path / "sweep"),
        "--json",
    )
    assert run.exit_code == 0, run.output
    result = json.loads(run.stdout)

    assert set(result) == SWEEP_KEYS and result["kind"] == "speed"
    assert [p["speed"] for p in result["points"]] == speeds
    assert [p["passed"] for p in result["points"]] == [True, True, False, False], result["points"]
    assert result["capacity"]["speed"] == speeds[1] and result["knee"] == {"passed": speeds[1], "failed": speeds[2]}
    assert result["inconsistent"] == []
    assert result["capacity"]["requests_per_s"] == result["points"][1]["requests_per_s"]
    assert result["source"] == [str(src)] and result["target"] == url and result["target_kind"] is None
    assert result["slo"] == [{"slo": "e2e:p90<=200ms", "metric": "e2e", "stat": "p90", "bound": 200e6}]
    for p in result["points"]:
        assert POINT_KEYS | {"speed"} <= set(p), set(p) ^ POINT_KEYS
        assert p["offered_requests_per_s"] == pytest.approx(p["speed"] * rate)  # what the schedule asked for
        assert p["out"] == str(tmp_path / "sweep" / f"speed-{p['speed']:g}")
    for p in result["points"][:2]:  # the passing points ran whole
        assert p["sent"] == p["requests"] == p["ok"] == 20 and not p["lost_early"] and p["error_rate"] == 0
    assert read_sweep(tmp_path / "sweep") == result
    # Every point is a capture of its own, with every request it sent, labelled with its load.
    assert point_captures(result) == sent_by_folder(result)
    for p in result["points"]:
        header = next(CaptureReader(p["out"]).records())
        assert header["type"] == "header" and header["labels"]["sweep_load"] == f"speed-{p['speed']:g}"


def _points_and_finished(result: dict) -> list:
    return [*(Path(p["out"]).name for p in result["points"]), result["finished"]]


def most_in_flight(folder: str) -> int:
    """The most of a capture's requests in flight together, from each one's send and end."""
    with Analysis([folder]) as a:
        spans = a.query("SELECT sent_wall_ns, end_wall_ns FROM metrics").rows
    return max(sum(s <= t < e for s, e in spans) for t, _ in spans)


def test_a_warm_up_runs_first_and_is_never_a_point(slot_engine, tmp_path):
    engine, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.05)
    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), concurrency_levels=(2,), warmup=5),
        parse_slos(["error_rate<=1%"]),
    )
    assert result["warmup"]["sent"] == 5 and result["warmup"]["ends"] == {"complete": 5}
    assert engine.served == 5 + 20 and [p["concurrency"] for p in result["points"]] == [2]  # the warm-up is no point
    warm = read_sweep(tmp_path / "sweep")["warmup"]["out"]
    assert len(list(CaptureReader(warm).exchanges())) == 5
    with pytest.raises(SweepError, match="--warmup"):
        SweepConfig(ReplayConfig(src, url, tmp_path / "x"), speeds=(1,), warmup=-1)
    assert (
        run_sweep(  # none asked: none sent
            SweepConfig(ReplayConfig(src, url, tmp_path / "cold", probe=False, grace_s=1.0), concurrency_levels=(2,)),
            parse_slos(["error_rate<=1%"]),
        )["warmup"]
        is None
    )


@pytest.mark.parametrize(
    ("loads", "overlap"),
    [({"concurrency_levels": (2, 1)}, True), ({"concurrency_levels": (1, 2)}, False), ({"speeds": (1,)}, True)],
)
def test_a_warm_up_runs_at_the_first_points_load(slot_engine, tmp_path, loads, overlap):
    """Sent one at a time, the warm-up filled one slot's prompt cache of a llama-server -np 2, and the
    first point's second request met the other slot cold: it now runs at the first point's
    concurrency or speed (requests every 0.05 s, each served 0.1 s: overlapping at speed 1), as
    GuideLLM's and AIPerf's warm-ups run the benchmark's own load."""
    engine, url = slot_engine
    src = workload(tmp_path / "src", 10, 0.05)
    config = ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0)
    result = run_sweep(SweepConfig(config, warmup=6, **loads), parse_slos(["error_rate<=1%"]))
    assert result["warmup"]["ends"] == {"complete": 6}
    assert result["warmup"][result["kind"]] == next(iter(loads.values()))[0]  # the first point given, not the lowest
    assert (most_in_flight(result["warmup"]["out"]) > 1) == overlap


def test_closed_loop_levels_pass_up_to_the_slots_and_fail_beyond(slot_engine, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the levels, not the replayer's lag here
    # 2 slots of 0.1 s: at 8 in flight each request waits three whole services (0.4 s in all), at 1 or 2
    # none (0.1 s). The bound lies 0.15 s from either: a loaded 2-core machine took a level of 1 to a
    # p90 of 0.13 s, over half the way to the 0.15 s bound it had when 4 (0.2 s) was the level to fail.
    engine, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.5)
    written: list[list[str]] = []  # sweep.json's points as each point ends

    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), concurrency_levels=(1, 2, 8, 16)),
        parse_slos([f"e2e:p90<={2.5 * engine.service_s}s"]),
        on_point=lambda point: written.append(_points_and_finished(read_sweep(tmp_path / "sweep"))),
    )

    # sweep.json is rewritten after every point, so a sweep cut short keeps what it found, and says so.
    assert written == [[f"concurrency-{n}" for n in (1, 2, 8, 16)[:k]] + [False] for k in range(1, 5)]
    assert result["finished"] is True and read_sweep(tmp_path / "sweep")["finished"] is True

    assert result["kind"] == "concurrency"
    points = result["points"]
    assert [p["concurrency"] for p in points] == [1, 2, 8, 16]
    assert [Path(p["out"]).name for p in points] == ["concurrency-1", "concurrency-2", "concurrency-8", "concurrency-16"]
    assert [p["in_flight"]["max"] for p in points] == [1, 2, 8, 16]  # closed loop holds each level, no more
    assert [p["passed"] for p in points] == [True, True, False, False], points
    assert result["capacity"]["concurrency"] == 2 and result["knee"] == {"passed": 2, "failed": 8}
    assert all(p["offered_requests_per_s"] is None for p in points)  # closed loop offers what it gets
    # By construction: one request at a time is at most 1 / service_s, two at most 2 / service_s.
    assert points[0]["requests_per_s"] <= 1 / engine.service_s * 1.001
    assert points[1]["requests_per_s"] <= 2 / engine.service_s * 1.001
    assert points[0]["sent"] == points[1]["sent"] == 20 and not points[0]["lost_early"] and not points[1]["lost_early"]
    assert point_captures(result) == sent_by_folder(result)


@pytest.mark.parametrize(
    ("min_requests", "min_duration_s", "passes"),
    # min-duration: a pass at speed 2 is its arrivals (0.9 s) and one mean gap (0.1 s) before the next copy: 2 passes
    [(25, 0.0, 3), (0, 2.0, 2), (5, 0.0, 1)],
    ids=["min-requests", "min-duration", "already-enough"],
)
def test_a_point_too_short_to_judge_repeats_the_workload(slot_engine, tmp_path, min_requests, min_duration_s, passes):
    engine, url = slot_engine
    src = workload(tmp_path / "src", 10, 0.2)  # 1.8 s as recorded, 0.9 s at speed 2 (half the capacity)

    result = run_sweep(
        SweepConfig(
            ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0),
            speeds=(2.0,),
            min_requests=min_requests,
            min_duration_s=min_duration_s,
        ),
        parse_slos(["e2e:p90<=1s"]),
    )

    [point] = result["points"]
    assert point["sent"] == point["requests"] == 10 * passes and point["sent"] >= min_requests
    assert point["passed"] and engine.served == 10 * passes
    exchanges = list(CaptureReader(point["out"]).exchanges())
    assert Counter(Counter(x["source_id"] for x in exchanges).values()) == {passes: 10}  # each request once per pass
    assert {x["repeat"] for x in exchanges} == set(range(passes))


@pytest.mark.parametrize("slot_engine", [(1, 0.1)], indirect=True)
def test_a_clearly_lost_point_ends_early_and_keeps_what_it_sent(slot_engine, tmp_path):
    engine, url = slot_engine  # 10 req/s at most; the workload asks for 40 req/s
    src = workload(tmp_path / "src", 80, 0.025)

    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1.0,)),
        parse_slos([f"e2e:p90<={1.5 * engine.service_s}s"]),
    )

    [point] = result["points"]
    assert point["lost_early"] is True and point["passed"] is False
    assert 0 < point["sent"] < 80
    assert result["capacity"] is None and result["knee"] == {"passed": None, "failed": 1.0}
    assert result["stopped_early"] is False  # a lost point is judged; only Ctrl-C stops the sweep
    # Still a whole capture: every request sent is in it, and it reads like any other.
    assert point_captures(result) == {"speed-1": point["sent"]} and point["requests"] == point["sent"]


@pytest.mark.parametrize("slot_engine", [(1, 0.1)], indirect=True)
def test_a_point_whose_check_fired_after_everything_was_sent_and_finished_ran_whole(slot_engine, tmp_path):
    """Every request sent at once, the check then sure the point is lost, and the grace lets each
    one finish: nothing was cut short. It was said "lost (ended early)"; it ran whole and failed."""
    engine, url = slot_engine  # one request at a time, 0.1 s each: the eighth ends at 0.8 s
    src = workload(tmp_path / "src", 8, 0.001)

    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=5.0), speeds=(1.0,)),
        parse_slos([f"e2e:p90<={1.5 * engine.service_s}s"]),
    )

    [point] = result["points"]
    assert point["sent"] == point["requests"] == 8 and engine.served == 8  # every request, each to its end
    assert point["lost_early"] is False and point["passed"] is False  # failed, judged on the whole point
    assert point["cancelled"] == 0  # nothing cut


@pytest.mark.parametrize("slot_engine", [(1, 0.1)], indirect=True)
def test_requests_cut_in_flight_when_a_point_ends_early_are_said_apart_from_the_targets_errors(slot_engine, tmp_path):
    """A point lost to its e2e bound, the requests in flight past the grace cancelled by the replayer:
    the table said "errors 56%" of a target that sent no error. They stay errors as stats counts
    them (not ok, over every bound), and the point's ``cancelled`` and a note say how many were cut."""
    engine, url = slot_engine  # 10 req/s at most; the workload asks for 40 req/s
    src = workload(tmp_path / "src", 80, 0.025)
    args = [str(src), "--target", url, "--no-probe", "--grace", "0.2", "--speeds", "1", "--slo", "e2e:p90<=150ms"]
    run = sweep_cli(*args, "--out", str(tmp_path / "s"))
    assert run.exit_code == 0, run.output
    [point] = read_sweep(tmp_path / "s")["points"]
    with Analysis([point["out"]]) as a:
        [(cut, errors, total)] = a.query(
            "SELECT count(*) FILTER (WHERE \"end\" = 'cancelled'), count(*) FILTER (WHERE NOT ok), count(*) "
            "FROM metrics WHERE generation"
        ).rows
    assert point["lost_early"] is True and cut > 0 and errors == cut  # the engine itself failed nothing
    assert point["cancelled"] == cut and point["error_rate"] == pytest.approx(errors / total)
    text = " ".join(run.output.split())
    assert (
        f"speed 1: {cut} of its {total} requests were cancelled by the replayer in flight when it cut the point short"
    ) in text, text

    report = CliRunner().invoke(cli, ["report", str(tmp_path / "s"), "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "r.html").read_text()
    said = f"speed 1: {cut} of its {total} requests were cancelled by the replayer in flight when it cut the point short"
    assert html.escape(said) in page  # the report says it as the command does


def test_a_point_whose_every_answer_is_unknown_is_no_pass_and_the_sweep_goes_on(slot_engine, tmp_path, monkeypatch):
    """Every answer cut at a --max-response-mb smaller than one answer: the requests were sent, none
    can be judged. The point raised "no generation exchanges sent in this run" and the sweep ended
    there; it is now a point whose figures are unknown, counted as no pass, saying why, and the next
    point runs. The same sweep keeping its answers whole judges them as before."""
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the verdicts, not this machine's replayer lag
    _, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.1)
    args = [str(src), "--target", url, "--no-probe", "--grace", "1", "--speeds", "0.5,1", "--slo", "e2e:p90<=2s"]
    run = sweep_cli(*args, "--max-response-mb", "0.00001", "--out", str(tmp_path / "cut"))  # 10 bytes
    assert run.exit_code == 0, run.output
    result = read_sweep(tmp_path / "cut")
    assert [p["speed"] for p in result["points"]] == [0.5, 1]  # the sweep went on past the first
    reason = "20 requests sent, none whose answer could be judged (20 answered 2xx, kept only in part (past the recorder's --max-response-mb))"
    for p in result["points"]:
        assert p["passed"] is False and p["unjudged"] == reason and p["requests"] == p["response_not_kept"] == 20, p
        assert (p["error_rate"], p["attainment"], p["requests_per_s"], p["ok"]) == (None, None, None, None)
        assert [(s["observed"], s["met"]) for s in p["slos"]] == [(None, None)]
    assert result["capacity"] is None and result["knee"] == {"passed": None, "failed": 0.5}
    text = " ".join(run.output.split())
    assert f"speed 0.5: {reason}: its figures are unknown, and it counts as no pass" in text, text
    assert "unknown (no pass)" in text and "capacity: none (the lowest speed tried, 0.5, had no answer to judge" in text
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "cut"), "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "r.html").read_text()
    assert html.escape(f"speed 1: {reason}") in page and "<td>unknown (no pass)</td>" in page
    said = "the lowest speed tried, 0.5, had no answer to judge (see the notes)"  # the command's words, both
    assert f"capacity: none ({said})" in text
    assert capacity_sentence(load_sweeps(tmp_path / "cut")) == f"A: no capacity is stated: {said}."
    assert html.escape(said) in page and "no load tried" not in page

    run = sweep_cli(*args, "--out", str(tmp_path / "whole"))
    assert run.exit_code == 0, run.output
    whole = read_sweep(tmp_path / "whole")
    assert [(p["passed"], p["unjudged"], p["ok"]) for p in whole["points"]] == [(True, None, 20), (True, None, 20)]
    assert "counts as no pass" not in run.output and whole["capacity"]["speed"] == 1
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "whole"), "-o", str(tmp_path / "w.html")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "w.html").read_text()
    assert "Notes:" not in page and "cancelled by the replayer" not in page and "no output token count" not in page


# -- the command -------------------------------------------------------------------------------------


def test_the_command_prints_the_capacity_or_that_none_was_found(slot_engine, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the output, not the replayer's lag here
    engine, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.1)
    common = [str(src), "--target", url, "--no-probe", "--grace", "1", "--speeds", "0.5,4"]

    run = sweep_cli(*common, "--slo", "e2e:p90<=200ms", "--slo", "error_rate<=1%", "--out", str(tmp_path / "met"))
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())  # rich wraps at the terminal's width
    assert "capacity: speed 0.5," in text and "the knee lies between 0.5 and 4" in text, text
    assert "e2e:p90<=200ms" in text and "error_rate<=1%" in text
    assert read_sweep(tmp_path / "met")["capacity"]["speed"] == 0.5

    run = sweep_cli(*common, "--slo", "e2e:p90<=10ms", "--out", str(tmp_path / "unmet"))  # under one service time
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())
    assert "capacity: none (the lowest speed tried, 0.5, failed)" in text, text
    assert read_sweep(tmp_path / "unmet")["capacity"] is None


def test_the_capacity_says_the_goodput_there_beside_the_achieved_requests_per_s(tmp_path, monkeypatch):
    """Every twentieth answer takes 1 s against a 500 ms e2e:p50 bound: the point passes with those
    two of its 40 answers over the bound. The capacity line said the achieved requests/s alone, read
    as what the target carries under the SLOs; it says the goodput there too (the answers that met
    them), and so does the report's sentence. How many met the bound is read from the point's own
    recorded e2e latencies, not assumed: a busy machine may slow a 50 ms answer past it too (it
    failed once so, 36 of 40 where 38 was assumed), and the p50 keeps the point passing then."""
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the output, not the replayer's lag here
    src = workload(tmp_path / "src", 40, 0.025)
    with ServerThread(SlotEngine(100, 0.05, slow=(20, 1.0))) as server:
        args = [str(src), "--target", server.url, "--no-probe", "--grace", "1", "--speeds", "1"]
        run = sweep_cli(*args, "--slo", "e2e:p50<=500ms", "--out", str(tmp_path / "s"))
    assert run.exit_code == 0, run.output
    result = read_sweep(tmp_path / "s")
    cap = result["capacity"]
    achieved, goodput, tokens = cap["requests_per_s"], cap["goodput"]["requests_per_s"], cap["output_tokens_per_s"]
    with Analysis([result["points"][0]["out"]]) as a:
        [(ok, met)] = a.query(
            "SELECT count(*), count(*) FILTER (WHERE e2e_ns <= 500e6) FROM metrics WHERE generation AND ok"
        ).rows
    assert met < ok, (ok, met)  # the slow answers (1 s) never meet it: goodput < achieved
    assert goodput == pytest.approx(achieved * met / ok) and goodput < achieved, cap
    text = " ".join(run.output.split())
    line = f"capacity: speed 1, {achieved:.2f} requests/s, of which {goodput:.2f}/s met every SLO (goodput), {tokens:.2f} output tokens/s"
    assert line in text, text
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "s"), "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "r.html").read_text()
    assert f"{number(achieved, 3)} requests/s, of which {number(goodput, 3)}/s met every SLO (goodput)" in page, page


def test_a_capacity_whose_answers_have_no_token_count_says_its_output_tokens_per_s_are_unknown(tmp_path, monkeypatch):
    """A target answering whole, with no usage: no output token count anywhere. The capacity line
    said "0.00 output tokens/s", read as answers of nothing; it says unknown, and why, as stats does."""
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the output, not the replayer's lag here
    choice = {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    answer = sdk_shapes.chat_completion({"id": "c", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]})
    src = tmp_path / "src"
    write_capture(src, [{"offset_s": i * 0.05, "body": {**chat(i), "stream": False}} for i in range(20)])
    with ServerThread(JSONRoutes({("POST", "/v1/chat/completions"): answer})) as server:
        args = [str(src), "--target", server.url, "--no-probe", "--grace", "1", "--speeds", "1", "--slo", "e2e:p90<=2s"]
        run = sweep_cli(*args, "--out", str(tmp_path / "s"))
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())
    cap = read_sweep(tmp_path / "s")["capacity"]
    assert cap["requests_per_s"] > 0 and cap["output_tokens_per_s"] is None, cap
    assert "output tokens/s unknown; no failing point above it" in text and "0.00 output tokens/s" not in text, text
    assert "speed 1: 20 of 20 ok answers have no output token count (sent whole, with no usage): none counted" in text, text
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "s"), "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    page = (tmp_path / "r.html").read_text()
    assert "speed 1: 20 of 20 ok answers have no output token count (sent whole, with no usage): none counted" in page


def test_the_points_read_unabridged_at_80_columns_and_as_a_table_when_wide(slot_engine, tmp_path, monkeypatch, capsys):
    """At 80 columns the table's eleven columns were cut to "offe…", "verd…", "ttft…": a narrow
    terminal now gets each point's figures on lines of their own; a wide one keeps the table."""
    from infertap.analysis.sweep_report import verdict_of
    from infertap.cli_sweep import print_sweep

    engine, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.1)
    slos = ["--slo", "e2e:p90<=200ms", "--slo", "ttft:p99<=150ms", "--slo", "error_rate<=1%"]
    args = [str(src), "--target", url, "--no-probe", "--grace", "1", "--speeds", "0.5,4", *slos]
    run = CliRunner().invoke(cli, ["sweep", *args, "--out", str(tmp_path / "s")], env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.output
    result = read_sweep(tmp_path / "s")
    figures = [f"{p['offered_requests_per_s']:.2f}" for p in result["points"]]
    figures += [f"{p['goodput']['requests_per_s']:.2f}" for p in result["points"]]
    figures += [f"{s['observed'] / 1e6:.1f} ms" for p in result["points"] for s in p["slos"] if s["metric"] != "error_rate"]
    narrow = run.output[run.output.index("speed 0.5: ") :]  # after the progress bars
    assert "…" not in narrow and max(map(len, narrow.splitlines())) <= 80 and "┃" not in narrow
    assert all(f"speed {p['speed']:g}: {verdict_of(p)}" in narrow for p in result["points"]), narrow
    assert all(f"{s}: " in narrow for s in ("e2e:p90<=200ms", "ttft:p99<=150ms", "error_rate<=1%")), narrow
    assert "req/s offered" in narrow and "schedule lag p99" in narrow
    assert all(f in narrow for f in figures), (figures, narrow)
    monkeypatch.setenv("COLUMNS", "300")
    print_sweep(result)
    wide = capsys.readouterr().out
    assert "…" not in wide
    header = next(line for line in wide.splitlines() if "verdict" in line)
    assert [h.strip() for h in header.split("┃")[1:-1]] == [
        "speed", "verdict", "offered req/s", "req/s", "goodput req/s", "attainment", "errors",
        "e2e:p90<=200ms", "ttft:p99<=150ms", "error_rate<=1%", "lag p99 ms",
    ]  # fmt: skip
    assert all(f in wide for f in figures), (figures, wide)


def test_the_progress_bars_fit_the_terminal(slot_engine, tmp_path, monkeypatch):
    """The bars drew on rich's shared console, whose width is the first command's in the process: at
    COLUMNS=80 after a command at 300 they were 92 characters wide."""
    import rich
    from rich.console import Console

    monkeypatch.setattr(rich, "_console", Console(width=300))  # made by an earlier, wider command
    engine, url = slot_engine
    src = workload(tmp_path / "src", 10, 0.05)
    args = [str(src), "--target", url, "--no-probe", "--grace", "1", "--concurrency-levels", "1,16", "--warmup", "2"]
    run = CliRunner().invoke(cli, ["sweep", *args, "--slo", "e2e:p90<=1s", "--out", str(tmp_path / "s")], env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.output
    bars = [line for line in run.output.splitlines() if "━" in line]
    assert len(bars) == 3 and all(len(line) <= 80 for line in bars), bars  # the overall line and each point's


def test_a_sweep_with_no_warm_up_says_its_first_point_met_the_target_cold(slot_engine, tmp_path):
    """A fresh llama-server's first prompt took 3.5 s against 0.15 s once its prefix was cached (the
    audit's speed 1 at 8.8 s, speed 2 at 2.1 s): with --warmup 0, the default as AIPerf's and
    GuideLLM's, the output says so and how to warm up; with a warm-up it says nothing."""
    engine, url = slot_engine
    src = workload(tmp_path / "src", 10, 0.1)
    args = [str(src), "--target", url, "--no-probe", "--grace", "1", "--speeds", "1", "--slo", "e2e:p90<=1s"]
    cold = sweep_cli(*args, "--out", str(tmp_path / "cold"))
    assert cold.exit_code == 0, cold.output
    assert "note: no warm-up (--warmup 0): the first point met the target as it was" in " ".join(cold.output.split())
    warm = sweep_cli(*args, "--warmup", "2", "--out", str(tmp_path / "warm"))
    assert warm.exit_code == 0, warm.output
    assert read_sweep(tmp_path / "warm")["warmup"]["sent"] == 2 and "no warm-up" not in warm.output


def test_a_warm_up_runs_under_the_progress_bars(slot_engine, tmp_path):
    """--warmup without --json crashed (KeyError: None): the warm-up's progress reached a bar not made yet."""
    engine, url = slot_engine
    src = workload(tmp_path / "src", 10, 0.1)
    args = [str(src), "--target", url, "--no-probe", "--grace", "1", "--speeds", "1", "--slo", "e2e:p90<=1s"]
    run = sweep_cli(*args, "--warmup", "2", "--out", str(tmp_path / "warm"))
    assert run.exit_code == 0, repr(run.exception)
    assert read_sweep(tmp_path / "warm")["warmup"]["sent"] == 2 and "capacity: " in run.output


@pytest.mark.parametrize("slot_engine", [(2, 0.05)], indirect=True)
def test_a_concurrency_sweep_keeps_each_level_and_prints_its_table(slot_engine, tmp_path, monkeypatch):
    """The level under its own key, the achieved concurrency under ``in_flight``: they once shared one."""
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the table, not the replayer's lag here
    engine, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.05)
    args = [str(src), "--target", url, "--no-probe", "--slo", "e2e:p90<=1s", "--concurrency-levels", "1,2"]
    run = sweep_cli(*args, "--out", str(tmp_path / "table"))
    assert run.exit_code == 0, repr(run.exception)
    text = " ".join(run.output.split())
    assert "capacity: concurrency 2," in text and "no failing point above it" in text, text
    assert [p["concurrency"] for p in read_sweep(tmp_path / "table")["points"]] == [1, 2]


# -- bad inputs: a clear error, nothing sent, nothing lost ------------------------------------------


@pytest.mark.parametrize(
    ("slo", "message"),
    [("e2e<=1s", "does not parse"), ("latency:p99<=1s", "unknown metric 'latency'")],
    ids=["syntax", "metric"],
)
def test_a_bad_slo_fails_before_anything_is_sent_naming_the_syntax_and_the_metrics(slot_engine, tmp_path, slo, message):
    engine, url = slot_engine
    src = workload(tmp_path / "src", 5, 0.1)
    run = sweep_cli(str(src), "--target", url, "--no-probe", "--slo", slo, "--speeds", "1", "--out", str(tmp_path / "sweep"))
    assert run.exit_code == 1 and isinstance(run.exception, SystemExit), repr(run.exception)  # an error, not a traceback
    assert message in run.output and "METRIC:STAT<=VALUE" in run.output, run.output
    assert all(m in run.output for m in ("ttft", "tpot", "e2e", "itl", "error_rate")), run.output
    assert engine.served == 0 and not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give one of --speeds, --concurrency-levels or --search"),
        (["--speeds", "1,2", "--search"], "give one of --speeds, --concurrency-levels or --search"),
        (["--speeds", "1", "--concurrency-levels", "2"], "give one of --speeds, --concurrency-levels or --search"),
        (["--speeds", "1,fast"], "--speeds: a comma-separated list of numbers, and 'fast' is not one (in '1,fast')"),
        (["--speeds", "1_0"], "--speeds: a comma-separated list of numbers, and '1_0' is not one"),
        (
            ["--concurrency-levels", "2,1.5"],
            "--concurrency-levels: a comma-separated list of whole numbers, and '1.5' is not one",
        ),
        (["--speeds", "0,1"], "must be > 0"),
        (["--search", "--tolerance", "1"], "--tolerance must be in (0, 1)"),
        (["--speeds", "1", "--min-requests", "-1"], "--min-requests, --min-duration and --idle-timeout are 0 or more"),
        (["--speeds", "1", "--idle-timeout", "-1"], "--min-requests, --min-duration and --idle-timeout are 0 or more"),
        (["--concurrency-levels", "1,2", "--sessions", "closed"], "--sessions closed has no load a sweep can vary"),
    ],
    ids=[
        "no-load",
        "two-loads",
        "speeds-and-levels",
        "bad-speeds",
        "digit-separator",
        "bad-levels",
        "zero-speed",
        "tolerance",
        "min-requests",
        "idle-timeout",
        "closed-sessions",
    ],  # fmt: skip
)
def test_bad_load_options_fail_before_anything_is_sent(slot_engine, tmp_path, args, message):
    engine, url = slot_engine
    src = workload(tmp_path / "src", 5, 0.1)
    run = sweep_cli(str(src), "--target", url, "--no-probe", "--slo", "e2e:p99<=1s", "--out", str(tmp_path / "sweep"), *args)
    assert run.exit_code == 1 and isinstance(run.exception, SystemExit), repr(run.exception)
    assert message in run.output, run.output
    assert engine.served == 0 and not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--speeds", "nan"], "--speeds: 'nan' is not a finite number (in 'nan')"),
        (["--speeds", "1,nan"], "--speeds: 'nan' is not a finite number (in '1,nan')"),
        (["--speeds", "inf"], "--speeds: 'inf' is not a finite number (in 'inf')"),
        (["--speeds", "-inf,2"], "--speeds: '-inf' is not a finite number (in '-inf,2')"),
        (["--search", "--start-speed", "nan"], "--start-speed nan: not a finite number"),
        (["--search", "--tolerance", "inf"], "--tolerance inf: not a finite number"),
        (["--speeds", "1", "--min-duration", "inf"], "--min-duration inf: not a finite number"),
        (["--speeds", "1", "--idle-timeout", "nan"], "--idle-timeout nan: not a finite number"),
        (["--speeds", "1", "--grace", "nan"], "--grace nan: not a finite number of seconds"),
        (["--speeds", "1", "--read-timeout", "inf"], "--read-timeout inf: not a finite number of seconds"),
    ],
)
def test_a_load_that_is_no_finite_number_is_said_to_be_none(slot_engine, tmp_path, args, message):
    """float() reads "nan" and "inf": --speeds nan was refused as "must be > 0", which it is not
    either; said now to be no finite number, before anything is sent. Zero is still "must be > 0"."""
    engine, url = slot_engine
    src = workload(tmp_path / "src", 5, 0.1)
    run = sweep_cli(str(src), "--target", url, "--no-probe", "--slo", "e2e:p99<=1s", "--out", str(tmp_path / "sweep"), *args)
    assert run.exit_code == 1 and message in run.output and "> 0" not in run.output, run.output
    assert engine.served == 0 and not (tmp_path / "sweep").exists()


def test_no_slo_at_all_is_a_usage_error(slot_engine, tmp_path):
    engine, url = slot_engine
    run = sweep_cli(str(workload(tmp_path / "src", 5, 0.1)), "--target", url, "--speeds", "1", "--out", str(tmp_path / "sweep"))
    assert run.exit_code == 2 and "--slo" in run.output
    assert engine.served == 0 and not (tmp_path / "sweep").exists()


@pytest.mark.parametrize("probe", [[], ["--no-probe"]], ids=["probed", "not-probed"])
def test_a_target_that_refuses_connections_fails_before_the_first_point(tmp_path, probe):
    src = workload(tmp_path / "src", 5, 0.1)
    dead = f"http://127.0.0.1:{free_port()}"
    run = sweep_cli(
        str(src), "--target", dead, *probe, "--slo", "e2e:p99<=1s", "--speeds", "1,2", "--out", str(tmp_path / "sweep")
    )
    assert run.exit_code == 1 and "refuses connections" in run.output and "nothing was sent" in run.output, run.output
    assert not (tmp_path / "sweep" / RESULT).exists()
    assert not (tmp_path / "sweep" / "speed-1").exists()


def test_a_capture_without_generation_requests_is_refused(slot_engine, tmp_path):
    engine, url = slot_engine
    src = tmp_path / "src"
    write_capture(src, [{"offset_s": i, "method": "GET", "path": "/v1/models", "body": b""} for i in range(3)])
    run = sweep_cli(
        str(src), "--target", url, "--no-probe", "--slo", "e2e:p99<=1s", "--speeds", "1", "--out", str(tmp_path / "sweep")
    )
    assert run.exit_code == 1 and "no generation requests" in run.output, run.output
    assert engine.served == 0 and not (tmp_path / "sweep" / RESULT).exists()
    with pytest.raises(ConfigError, match="no generation requests"):
        run_sweep(
            SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1,)),
            parse_slos(["e2e:p99<=1s"]),
        )


def _questions_sent(result: dict[str, Any]) -> dict[str, list[str]]:
    """Each point's requests as its capture recorded them sent: their questions, by folder name."""
    return {
        Path(p["out"]).name: sorted(
            json.loads(x["request_body"])["messages"][-1]["content"] for x in CaptureReader(p["out"]).exchanges()
        )
        for p in result["points"]
    }


@pytest.mark.parametrize("slot_engine", [(4, 0.02)], indirect=True)
def test_a_folder_of_captures_is_one_workload_at_each_point_and_one_capture_is_itself(slot_engine, tmp_path):
    """Sweep takes CAPTURE... as replay does (a folder of captures, one per recorder, is one workload):
    it took one capture only, so two gateways' traffic could be swept one gateway at a time."""
    engine, url = slot_engine
    for name, first in (("gw-a", 0), ("gw-b", 10)):
        write_capture(tmp_path / "gws" / name, [{"offset_s": i * 0.05, "body": chat(first + i)} for i in range(3)])
    common = ["--target", url, "--no-probe", "--grace", "1", "--slo", "e2e:p90<=10s", "--speeds", "1,4", "--json"]
    both = sorted(f"question {i}" for i in (0, 1, 2, 10, 11, 12))

    run = sweep_cli(str(tmp_path / "gws"), *common, "--out", str(tmp_path / "folder"))
    assert run.exit_code == 0, run.output
    result = json.loads(run.stdout)
    assert _questions_sent(result) == {"speed-1": both, "speed-4": both}
    # Each capture its own entry (comma-joined, a path holding ", " could not be told from two), and
    # the report names each.
    gws = [str(tmp_path / "gws" / "gw-a"), str(tmp_path / "gws" / "gw-b")]
    assert result["source"] == gws and read_sweep(tmp_path / "folder")["source"] == gws
    page = render_sweeps(tmp_path / "folder")
    assert f"a speed sweep of 2 captures as one workload (<code>{gws[0]}</code>, <code>{gws[1]}</code>) against" in page

    run = sweep_cli(str(tmp_path / "gws" / "gw-a"), str(tmp_path / "gws" / "gw-b"), *common, "--out", str(tmp_path / "two"))
    assert run.exit_code == 0, run.output
    assert _questions_sent(json.loads(run.stdout)) == {"speed-1": both, "speed-4": both}

    run = sweep_cli(str(tmp_path / "gws" / "gw-a"), *common, "--out", str(tmp_path / "one"))  # as before
    assert run.exit_code == 0, run.output
    result = json.loads(run.stdout)
    one = [f"question {i}" for i in (0, 1, 2)]
    assert _questions_sent(result) == {"speed-1": one, "speed-4": one}
    assert result["source"] == [str(tmp_path / "gws" / "gw-a")]
    assert f"a speed sweep of <code>{tmp_path / 'gws' / 'gw-a'}</code> against" in render_sweeps(tmp_path / "one")

    (tmp_path / "empty").mkdir()
    served = engine.served
    run = sweep_cli(str(tmp_path / "empty"), *common, "--out", str(tmp_path / "none"))
    assert run.exit_code == 1 and "not a capture, and no capture in it" in run.output, run.output
    assert engine.served == served and not (tmp_path / "none").exists()
    for name in ("gw-a", "gw-b"):  # a refusal names the captures, not a tuple's repr
        write_capture(tmp_path / "models" / name, [{"method": "GET", "path": "/v1/models", "body": b""}])
    run = sweep_cli(str(tmp_path / "models"), *common, "--out", str(tmp_path / "none"))
    gws = f"{tmp_path / 'models' / 'gw-a'}, {tmp_path / 'models' / 'gw-b'}"
    assert run.exit_code == 1 and f"{gws}: no generation requests" in run.output, run.output


def test_an_out_that_already_holds_a_sweep_is_refused_and_left_as_it_was(slot_engine, tmp_path):
    engine, url = slot_engine
    src = workload(tmp_path / "src", 5, 0.05)
    args = [str(src), "--target", url, "--no-probe", "--slo", "e2e:p90<=1s", "--speeds", "1", "--out", str(tmp_path / "sweep")]
    first = sweep_cli(*args, "--json")
    assert first.exit_code == 0, first.output
    before = {p: p.read_bytes() for p in (tmp_path / "sweep").rglob("*") if p.is_file()}
    served = engine.served
    assert served == 5 and (tmp_path / "sweep" / RESULT) in before

    again = sweep_cli(*args)
    assert again.exit_code == 1 and "already holds a sweep" in again.output, again.output
    assert engine.served == served
    after = {p: p.read_bytes() for p in (tmp_path / "sweep").rglob("*") if p.is_file()}
    assert after == before


def test_loads_parse_as_written_with_spaces_and_a_trailing_comma():
    """What must parse does: the refusals above name the value, these read as meant."""
    assert parse_numbers(" 1, 2.5 ,", float, "--speeds") == (1.0, 2.5)
    assert parse_numbers("4,16", int, "--concurrency-levels") == (4, 16)


def test_sweep_config_needs_exactly_one_kind_of_load(tmp_path):
    base = ReplayConfig(tmp_path / "src", "http://127.0.0.1:9", tmp_path / "out", probe=False)
    for kwargs in ({}, {"speeds": (1.0,), "search": True}, {"speeds": (1.0,), "concurrency_levels": (2,)}):
        with pytest.raises(SweepError, match="give one of"):
            SweepConfig(base, **kwargs)
    assert SweepConfig(base, concurrency_levels=(1, 2)).loads()[1].name == "concurrency-2"


# -- the capacity and the knee from the points --------------------------------------------------------


def _point(kind: str, value: float, passed: bool) -> Point:
    return Point(Load(kind, value), Path(f"{kind}-{value:g}"), {"sent": 1}, {"passed": passed, "requests_per_s": value})


@pytest.mark.parametrize(
    ("verdicts", "capacity", "failed", "above"),
    [
        ({1: True, 2: True, 4: False, 8: False}, 2, 4, []),
        ({1: True, 2: True}, 2, None, []),  # no failure seen: no knee above
        ({1: False, 2: False}, None, 1, []),
        ({1: True, 2: False, 4: True, 8: False}, 1, 2, [4]),  # a pass above a failure never raises the capacity
        ({8: True, 1: True, 4: False, 2: True}, 2, 4, [8]),  # in any order
    ],
)
def test_the_capacity_is_the_highest_pass_below_the_first_failure(verdicts, capacity, failed, above):
    points = [_point("concurrency", load, passed) for load, passed in verdicts.items()]
    best, first_fail = capacity_of(points)
    assert (best.load.value if best else None, first_fail.load.value if first_fail else None) == (capacity, failed)
    assert inconsistent(points) == above


def test_a_point_lost_early_never_passes():
    point = Point(Load("speed", 1.0), Path("speed-1"), {}, {"passed": True}, lost_early=True)
    assert point.passed is False and point.describe()["passed"] is False
    assert Point(Load("speed", 1.0), Path("speed-1"), {}, {"passed": True}).passed is True


# -- known bugs (strict xfail: remove the marker when fixed) -----------------------------------------


@pytest.mark.parametrize("slot_engine", [(2, 0.05)], indirect=True)
def test_a_repeated_load_is_refused_or_judged_on_its_own_run(slot_engine, tmp_path):
    engine, url = slot_engine
    src = workload(tmp_path / "src", 6, 0.05)
    try:
        result = run_sweep(
            SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1.0, 1.0)),
            parse_slos(["e2e:p90<=1s"]),
        )
    except InfertapError:
        assert engine.served == 0
        return
    assert [p["requests"] for p in result["points"]] == [p["sent"] for p in result["points"]]


@pytest.mark.parametrize("slot_engine", [(2, 0.05)], indirect=True)
def test_a_capture_left_in_out_is_not_mixed_into_a_point(slot_engine, tmp_path):
    engine, url = slot_engine
    src = workload(tmp_path / "src", 6, 0.05)
    write_capture(tmp_path / "sweep" / "speed-1", [{"offset_s": 0, "body": chat(99)}])
    try:
        result = run_sweep(
            SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1.0,)),
            parse_slos(["e2e:p90<=1s"]),
        )
    except InfertapError:
        assert engine.served == 0 and len(list(CaptureReader(tmp_path / "sweep" / "speed-1").exchanges())) == 1
        return
    [point] = result["points"]
    assert point["requests"] == point["sent"] == 6


# -- the search, on its own (no replay: each point's verdict given by a known capacity) ----------------


def _search(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capacity: float, behind_from: float = math.inf, **options: Any
) -> list[float]:
    """The speeds --search tries against a target that passes exactly below ``capacity``, with a
    replayer that falls behind its schedule from speed ``behind_from`` on."""
    from infertap.replay import sweep as sweep_module

    tried: list[float] = []

    def point(self: Any, load: Load) -> Point:
        tried.append(load.value)
        p = Point(load, tmp_path / load.name, {}, {"passed": load.value < capacity}, replayer_behind=load.value >= behind_from)
        self.points.append(p)
        return p

    monkeypatch.setattr(sweep_module.Sweep, "_point", point)
    src = workload(tmp_path / "src", 2, 0.1)
    config = SweepConfig(ReplayConfig(src, "http://127.0.0.1:1", tmp_path / "out", probe=False), search=True, **options)
    sweep_module.Sweep(config, evaluate=lambda _: {}).run()
    return tried


@pytest.mark.parametrize("capacity", [0.3, 1.7, 5.0, 37.0])
def test_the_search_brackets_the_knee_within_its_tolerance(monkeypatch, tmp_path, capacity):
    tried = _search(monkeypatch, tmp_path, capacity)
    passed = max(s for s in tried if s < capacity)
    failed = min(s for s in tried if s >= capacity)
    assert passed < capacity <= failed
    assert (failed - passed) / passed <= 0.10
    assert len(tried) == len(set(tried))  # no load tried twice


def test_the_search_stops_halving_when_nothing_passes(monkeypatch, tmp_path):
    tried = _search(monkeypatch, tmp_path, capacity=0.0)  # a target that meets the SLOs at no load
    assert tried == [1.0, 0.5, 0.25, 0.125, 0.0625]  # down to 1/16 of the recorded rate, then it says so


def test_the_search_stops_where_the_replayer_falls_behind(monkeypatch, tmp_path):
    """A pass whose replayer fell behind says nothing of the target: doubling on would measure the replayer."""
    assert _search(monkeypatch, tmp_path, capacity=1e9, behind_from=4.0) == [1.0, 2.0, 4.0]
    # Past the knee it is a failure like any other: the bisection goes on.
    tried = _search(monkeypatch, tmp_path, capacity=3.0, behind_from=4.0)
    assert tried[:3] == [1.0, 2.0, 4.0] and 2.0 < tried[3] < 4.0


def test_a_pass_with_the_replayer_behind_is_no_capacity():
    points = [_point("speed", 1, True), _point("speed", 2, True), _point("speed", 4, True), _point("speed", 8, False)]
    points[2].replayer_behind = True
    best, first_fail = capacity_of(points)
    assert best is not None and best.load.value == 2 and first_fail is not None and first_fail.load.value == 8
    assert behind_loads(points) == [4]
    points[0].replayer_behind = points[1].replayer_behind = True
    assert capacity_of(points)[0] is None and behind_loads(points) == [1, 2, 4]
    points[2].replayer_behind = False  # the counter-case: on schedule, it counts
    assert capacity_of(points)[0].load.value == 4  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kind", "lag_p99", "scale", "behind"),
    [
        ("speed", 5.0, 10.0, False),  # 10 requests/s: 100 ms between arrivals, 10 ms allowed
        ("speed", 12.0, 10.0, True),
        ("speed", 3.0, 1000.0, True),  # 1 ms between arrivals: 2 ms allowed at least
        ("concurrency", 5.0, 100.0, False),  # a slot's next request follows a 100 ms e2e: 10 ms allowed
        ("concurrency", 15.0, 100.0, True),
        ("concurrency", 3.0, None, True),  # no e2e known: 2 ms
    ],
)
def test_the_replayer_is_behind_by_the_time_it_schedules_by(kind, lag_p99, scale, behind):
    summary = {"lag_ms": {"p99": lag_p99}, "offered_requests_per_s": scale if kind == "speed" else None}
    verdict = {"latency_ms": {"e2e": {"p50": scale}}} if kind == "concurrency" else {}
    assert (sweep_checks.behind(Load(kind, 1.0), summary, verdict) is not None) is behind
    # The replayer's own --max-concurrency queue is held to the same rule: a wait no latency holds.
    queued = {"queue_wait_ms": {"p99": lag_p99}, "offered_requests_per_s": summary["offered_requests_per_s"]}
    assert (sweep_checks.behind(Load(kind, 1.0), queued, verdict) is not None) is behind


def test_each_load_has_a_folder_of_its_own():
    assert Load("speed", 1.5).name == "speed-1.5" and Load("concurrency", 8).name == "concurrency-8"
    assert Load("speed", 1.0000001).name != Load("speed", 1.0000002).name  # six digits said "speed-1" for both
    assert Load("speed", 1.0).name == "speed-1"


def test_the_search_keeps_to_its_point_budget(monkeypatch, tmp_path):
    assert len(_search(monkeypatch, tmp_path, capacity=1e9, max_points=6)) == 6  # always passing: doubles until the budget


def test_ctrl_c_ends_the_point_in_flight_and_keeps_what_was_found(slot_engine, tmp_path):
    """SIGINT during the second point: that point's capture is closed, no third point runs, and the
    command prints the first point's verdict and exits cleanly."""
    import os
    import signal
    import subprocess
    import sys
    import time

    engine, url = slot_engine
    src = workload(tmp_path / "src", 40, 0.1)  # 4 s at speed 1 (passes: 10 of the engine's 20 req/s), 8 s at 0.5
    out = tmp_path / "sweep"
    # The CLI as `infertap sweep` runs it, the replayer taken as on time: the stop, not this machine's lag.
    on_time = "import math, runpy; from infertap.replay import sweep_checks; sweep_checks.late_ms = lambda *_: math.inf; "
    on_time += "runpy.run_module('infertap', run_name='__main__')"
    proc = subprocess.Popen(
        [sys.executable, "-c", on_time, "sweep", str(src), "--target", url, "--out", str(out), "--no-probe"]
        + ["--slo", "e2e:p90<=1s", "--speeds", "1,0.5,8", "--no-telemetry"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "300", "INFERTAP_CACHE": str(tmp_path / "cache")},
    )
    deadline = time.monotonic() + 60
    while not (out / RESULT).exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the first point judged
    while not (out / "speed-0.5").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # the second point under way
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output  # what was found printed and kept; the sweep not whole
    result = read_sweep(out)
    assert [p["speed"] for p in result["points"]] == [1.0] and result["stopped_early"] is True
    assert "capacity: speed 1" in output
    assert not (out / "speed-8").exists()
    reader = CaptureReader(out / "speed-0.5")
    sent = len(list(reader.exchanges()))
    assert 0 < sent < 40 and reader.closed_cleanly  # cut short, nothing it sent lost


def test_the_offered_rate_is_the_generation_requests_arrival_rate(tmp_path):
    """Two chats a second apart offer one request a second at speed 1 (two arrivals, one gap), two at
    speed 2; a GET /v1/models between them is no request for tokens, as the achieved rate counts."""
    from infertap.replay.workload import load

    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0.0},
            {"offset_s": 0.5, "method": "GET", "path": "/v1/models", "body": b""},
            {"offset_s": 1.0},
        ],
    )
    sweep = Sweep(config=None, evaluate=None)  # type: ignore[arg-type]  # only the workload is asked here
    sweep._items, _ = load(tmp_path / "src")
    assert [i.generation for i in sweep._items] == [True, False, True]
    assert sweep._offered(Load("speed", 1.0), {}) == pytest.approx(1.0)
    assert sweep._offered(Load("speed", 2.0), {}) == pytest.approx(2.0)
    assert sweep._offered(Load("concurrency", 4), {}) is None


def test_requests_for_no_tokens_do_not_cut_a_point_short(slot_engine, tmp_path):
    """error_rate is over generation requests: three GET /v1/models the engine answers 404 made the
    live check end a point early that its own verdict passes (and the capacity none)."""
    _, url = slot_engine
    chats = [{"offset_s": i * 0.05, "body": chat(i)} for i in range(40)]
    gets = [{"offset_s": 0.01 + i * 0.5, "method": "GET", "path": "/v1/models", "body": b""} for i in range(3)]
    write_capture(tmp_path / "src", sorted(chats + gets, key=lambda x: x["offset_s"]))
    result = run_sweep(
        SweepConfig(ReplayConfig(tmp_path / "src", url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1.0,)),
        parse_slos(["error_rate<=1%"]),
    )
    [point] = result["points"]
    assert not point["lost_early"] and point["passed"] and point["error_rate"] == 0 and point["sent"] == 43


def test_a_sweep_whose_lowest_point_failed_says_what_passed_above_it() -> None:
    from infertap.analysis.sweep_report import _one

    sweep = {"kind": "speed", "capacity": None, "knee": None, "inconsistent": [2.0], "points": [{"speed": 1.0}, {"speed": 2.0}]}
    text = _one("A", "a", sweep)
    assert "failed the SLOs at its lowest speed tried (1)" in text and "met them at 2" in text


def test_the_misses_a_percentile_allows_are_counted_exactly() -> None:
    """(1 - 0.9) * 10 is 0.9999999999999998 in floats: a p90 over 10 requests allowed no miss, and a
    point was cut short on its first slow request."""
    from infertap.analysis.capacity import _allowed

    allowed = [_allowed(parse_slos([f"e2e:{p}<=1s"])[0], n) for p, n in (("p90", 11), ("p99", 101), ("p99.9", 1001), ("p50", 3))]
    assert allowed == [1, 1, 1, 1]
    assert _allowed(parse_slos(["e2e:max<=1s"])[0], 100) == 0 and _allowed(parse_slos(["e2e:mean<=1s"])[0], 100) is None


@pytest.mark.parametrize("stat", ["p50", "p75", "p90", "p95", "p99", "p99.9", "p100", "p33.3"])
def test_the_misses_a_percentile_allows_are_those_its_statistic_allows(stat: str) -> None:
    """The live check's allowance is the statistic's own: with that many failures (+infinity) among n
    values the percentile slo._stat judges a point by is finite, with one more it is not. It allowed
    floor(n (1 - q)) where the statistic, at (n - 1) q, allows floor((n - 1) (1 - q)): a p50 of two
    values, one failed, is +infinity; a p90 of ten with one failure too."""
    from infertap.analysis.capacity import _allowed
    from infertap.analysis.slo import _stat

    slo = parse_slos([f"e2e:{stat}<=1s"])[0]
    for n in [*range(1, 121), *range(995, 1006)]:  # every edge of p50..p99, and p99.9's at 1,001
        m = _allowed(slo, n)
        assert m is not None and 0 <= m < n
        assert math.isfinite(_stat([0.0] * (n - m) + [math.inf] * m, stat)), (n, m)  # allowed: it passes
        assert _stat([0.0] * (n - m - 1) + [math.inf] * (m + 1), stat) == math.inf, (n, m)  # one more: it fails


@pytest.mark.parametrize("as_json", [True, False])
def test_ctrl_c_between_points_keeps_what_was_found_and_says_so(slot_engine, tmp_path, monkeypatch, as_json):
    """Ctrl-C while a point is judged: with --json nothing was printed (click.Abort), without it
    sweep.json didn't say it was stopped, so the report took the sweep for a whole one."""
    from infertap.analysis import capacity

    _, url = slot_engine
    src = workload(tmp_path / "src", 10, 0.05)
    judged = []
    real = capacity.judge

    def judge(capture, slos):  # the second point's judging is interrupted
        judged.append(capture)
        if len(judged) == 2:
            raise KeyboardInterrupt
        return real(capture, slos)

    monkeypatch.setattr(capacity, "judge", judge)
    args = [str(src), "--target", url, "--out", str(tmp_path / "s"), "--speeds", "1,2", "--slo", "e2e:p90<=5s", "--no-probe"]
    run = sweep_cli(*args, *(["--json"] if as_json else []))
    assert run.exit_code == 130, run.output  # what was found kept and printed; the sweep not whole
    saved = read_sweep(tmp_path / "s")
    assert saved["stopped_early"] is True and len(saved["points"]) == 1
    if as_json:
        assert json.loads(run.stdout)["stopped_early"] is True


# -- whether a point measured the target at its load (replay/sweep_checks.py) ---------------------------


@pytest.mark.parametrize("slot_engine", [(2, 0.1)], indirect=True)
def test_a_pass_whose_requests_waited_in_the_replayers_queue_is_not_the_capacity(slot_engine, tmp_path):
    """--max-concurrency 1 at 20 requests/s against 0.1 s answers: requests wait up to seconds in the
    replayer's own queue, a wait no latency holds, so every speed passed its e2e SLO."""
    engine, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.05)
    config = ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0)
    result = run_sweep(
        SweepConfig(replace(config, schedule=Schedule(max_concurrency=1)), speeds=(1.0,)), parse_slos(["e2e:p90<=1s"])
    )
    [point] = result["points"]
    assert point["passed"] and point["replayer_behind"], point  # the SLO held: each request alone took 0.1 s
    assert point["not_carried"] is None  # the replayer held the load back, not the target
    assert "--max-concurrency queue" in " ".join(point["unmeasured"])
    assert result["capacity"] is None and result["unmeasured"] == [{"speed": 1.0, "why": point["unmeasured"]}]


@pytest.mark.parametrize("slot_engine", [(2, 0.1)], indirect=True)
def test_a_concurrency_level_the_workload_cannot_fill_is_not_the_capacity(slot_engine, tmp_path, monkeypatch):
    """64 in flight from 20 requests: at most 20 ever were, yet 64 was printed as the capacity."""
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the level never reached, not the replayer's lag here
    engine, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.05)
    run = sweep_cli(
        str(src),
        "--target",
        url,
        "--no-probe",
        "--slo",
        "e2e:p90<=10s",
        "--concurrency-levels",
        "2,64",
        "--out",
        str(tmp_path / "s"),
    )
    assert run.exit_code == 0, run.output
    result = read_sweep(tmp_path / "s")
    high = result["points"][1]
    assert high["passed"] and high["in_flight"]["max"] <= 20 and "concurrency 64 was never reached" in high["unmeasured"][0]
    assert result["capacity"]["concurrency"] == 2
    text = " ".join(run.output.split())
    assert "capacity: concurrency 2," in text and "pass (not measured)" in text, text
    assert "concurrency 64 passed without measuring the target there, not counted" in text


def test_a_point_of_too_few_requests_is_not_the_capacity(slot_engine, tmp_path, monkeypatch):
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # too few requests alone, whatever the lag here
    engine, url = slot_engine
    src = workload(tmp_path / "src", 6, 0.1)
    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1.0,)),
        parse_slos(["e2e:p90<=1s"]),
    )
    [point] = result["points"]
    assert point["passed"] and point["unmeasured"] == [
        f"6 requests are too few to judge (at least {sweep_checks.MIN_REQUESTS}: --min-requests repeats the workload)"
    ]
    assert result["capacity"] is None and result["knee"] == {"passed": None, "failed": None}


@pytest.mark.parametrize("slot_engine", [(1, 0.1)], indirect=True)
def test_a_load_the_target_did_not_carry_fails_though_its_slos_held(slot_engine, tmp_path, monkeypatch):
    """40 requests/s offered to a target that answers 10 a second: a tpot bound holds however long the
    queue in front of the engine grows; the answers came back at a quarter of the rate sent."""
    engine, url = slot_engine
    # The replayer taken as on its schedule: a shared 2-core machine can't promise 2.5 ms at p99 here.
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)
    src = workload(tmp_path / "src", 30, 0.025)
    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1.0,)),
        parse_slos(["tpot:p50<=1s"]),
    )
    [point] = result["points"]
    assert point["slos"][0]["met"] is True and point["answered_per_s"] <= engine.capacity * 1.001
    assert point["passed"] is False and "under half the 40 offered" in point["not_carried"], point
    assert result["capacity"] is None and result["knee"]["failed"] == 1.0


def test_a_target_that_keeps_up_carries_its_load_though_a_few_answers_are_long(tmp_path, monkeypatch):
    """40 requests/s to a target that never queues, most answers 0.05 s and every tenth 1.5 s: the
    answers' ends spread over the arrivals' second plus 1.5 s, which made their rate look like under
    half the offered and failed a load the target carried."""
    engine = SlotEngine(100, 0.05, slow=(10, 1.5))
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # as above: the replayer taken as on time
    src = workload(tmp_path / "src", 40, 0.025)
    with ServerThread(engine) as server:
        result = run_sweep(
            SweepConfig(ReplayConfig(src, server.url, tmp_path / "sweep", probe=False, grace_s=1.0), speeds=(1.0,)),
            parse_slos(["e2e:max<=5s"]),
        )
    [point] = result["points"]
    assert point["in_flight"]["max"] < 40 and point["latency_ms"]["e2e"]["p50"] < 1000  # it kept up
    assert point["not_carried"] is None and point["answered_per_s"] >= 20, point
    assert point["passed"] and result["capacity"]["speed"] == 1.0


def test_requests_the_replayer_gave_up_on_are_no_answers_and_the_load_was_not_carried(tmp_path, monkeypatch):
    """40 requests/s to a target that sends its headers and then nothing for a second: the replayer
    gives up on each at its 0.3 s read timeout. Those were counted as answers that came back, at the
    offered rate: the point 'carried' its load. They are none: no answer came back, and the command
    says the load was not carried; against a target that answers, the same point carried it."""
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the replayer taken as on time, as above
    src = workload(tmp_path / "src", 40, 0.025)
    points = {}
    for name, slow in (("stalled", (1, 5.0)), ("answering", None)):
        with ServerThread(SlotEngine(100, 0.05, slow=slow)) as server:
            args = [str(src), "--target", server.url, "--no-probe", "--grace", "1", "--read-timeout", "0.3"]
            run = sweep_cli(*args, "--slo", "e2e:p90<=1s", "--speeds", "1", "--out", str(tmp_path / name))
        assert run.exit_code == 0, run.output
        [points[name]] = read_sweep(tmp_path / name)["points"]
        points[name]["output"] = " ".join(run.output.split())
    stalled, answering = points["stalled"], points["answering"]
    assert stalled["ok"] == 0 and stalled["answered_per_s"] == 0.0, stalled
    assert "speed 1 did not carry its load: answers came back at 0 requests/s, under half the 40 offered" in stalled["output"]
    assert answering["ok"] == 40 and answering["answered_per_s"] >= 0.5 * answering["offered_requests_per_s"]
    assert answering["not_carried"] is None and "did not carry" not in answering["output"], answering


def test_requests_the_replayer_never_sent_are_left_out_of_a_points_slos(tmp_path):
    """Every tenth turn continues a response from before the recording: the replayer refuses it, never
    sent. They counted as failed requests (error_rate, +inf latencies) and in the live early-stop
    count, so a target that answered every request it was sent lost the point early."""
    answered = []

    def respond(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        answered.append(body)
        return 200, {**RESPONSE, "id": f"resp_{len(answered)}"}

    exchanges = []
    for i in range(40):
        body: dict[str, Any] = {"model": "m", "input": f"question {i}"}
        if i % 10 == 0:
            body["previous_response_id"] = f"resp_before_{i}"
        exchanges.append({"offset_s": i * 0.05, "path": "/v1/responses", "body": body, "chunks": [json.dumps(RESPONSE).encode()]})
    write_capture(tmp_path / "src", exchanges)
    with ServerThread(JSONRoutes({("POST", "/v1/responses"): respond})) as server:
        run = sweep_cli(
            str(tmp_path / "src"),
            *("--target", server.url, "--out", str(tmp_path / "s"), "--speeds", "1", "--no-probe"),
            *("--slo", "e2e:p90<=5s", "--slo", "error_rate<=1%"),
        )
    assert run.exit_code == 0, run.output
    [point] = read_sweep(tmp_path / "s")["points"]
    assert len(answered) == 36 and point["requests"] == 36 and point["not_sent"] == 4
    assert point["error_rate"] == 0 and point["passed"] and not point["lost_early"], point
    assert "speed 1: 4 requests not sent (refused by the replayer" in " ".join(run.output.split())


def test_a_target_that_dies_mid_sweep_leaves_a_sweep_that_says_it_stopped(tmp_path):
    """The second point's probe finds nothing listening: the sweep ended with an error, and what it
    left read as a whole sweep (capacity at its one point, 'may be higher')."""
    engine = SlotEngine(2, 0.05)
    server = ServerThread(engine).__enter__()
    src = workload(tmp_path / "src", 20, 0.05)

    def die(point: Point) -> None:
        server.__exit__(None, None, None)

    result = run_sweep(
        SweepConfig(ReplayConfig(src, server.url, tmp_path / "sweep", grace_s=1.0), speeds=(1.0, 2.0, 4.0), idle_timeout_s=1),
        parse_slos(["e2e:p90<=1s"]),
        on_point=die,
    )
    assert [p["speed"] for p in result["points"]] == [1.0] and result["stopped_early"] is False
    assert result["aborted"]["speed"] == 2.0 and "refuses connections" in result["aborted"]["error"], result["aborted"]
    assert read_sweep(tmp_path / "sweep")["aborted"] == result["aborted"]


def test_the_command_says_the_sweep_stopped_on_an_error_and_fails(slot_engine, tmp_path, monkeypatch):
    from infertap.replay import sweep as sweep_module
    from infertap.replay.api import ReplayError

    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the stop's message, not the replayer's lag
    _, url = slot_engine
    src = workload(tmp_path / "src", 20, 0.05)
    real, calls = sweep_module.run_replay, []

    def run_replay(config, **kwargs):
        calls.append(config)
        if len(calls) == 2:
            raise ReplayError("the target refuses connections, nothing was sent: gone")
        return real(config, **kwargs)

    monkeypatch.setattr(sweep_module, "run_replay", run_replay)
    args = [str(src), "--target", url, "--no-probe", "--slo", "e2e:p90<=1s", "--speeds", "1,2", "--out", str(tmp_path / "s")]
    run = sweep_cli(*args)
    assert run.exit_code == 1, run.output
    text = " ".join(run.output.split())
    assert "capacity: speed 1," in text and "the sweep stopped at speed 2 (the target refuses connections" in text, text
    assert "how much higher it goes is unknown" in text and "Error: the sweep stopped: speed 2" in text
    assert read_sweep(tmp_path / "s")["aborted"]["speed"] == 2.0
    # The first point's failure is still an error, as before: nothing was found.
    calls.clear()
    monkeypatch.setattr(sweep_module, "run_replay", lambda config, **kw: (_ for _ in ()).throw(ReplayError("down")))
    run = sweep_cli(*args[:-1], str(tmp_path / "s2"))
    assert run.exit_code == 1 and "down" in run.output and not (tmp_path / "s2" / RESULT).exists()


@pytest.mark.parametrize("stat", ["p50", "p90", "p99", "max"])
def test_a_point_ended_early_is_one_its_statistic_fails_whatever_comes_after(stat: str) -> None:
    """The live check stops a point only when the statistic it is judged by must fail: at its first
    stop, the requests already slow (finished just over the bound, all others fast) or failed give a
    statistic over the bound even at their best (the interpolation may pass one slow request more
    than failures, which the check's margin covers)."""
    from infertap.analysis.capacity import certain_miss
    from infertap.analysis.slo import _stat
    from infertap.replay.runner import ReplayStats

    bound = 1_000_000_000
    slos = parse_slos([f"e2e:{stat}<=1s"])
    for n in [*range(1, 61), 100, 101, 201]:
        slow = next(k for k in range(2 * n + 5) if certain_miss(slos, n)(ReplayStats(intervals=[(0, bound + 1)] * k)))
        failed = next(k for k in range(2 * n + 5) if certain_miss(slos, n)(ReplayStats(generation_failed=k)))
        for k in (slow, failed):
            if k <= n:  # a stop this point can reach
                assert _stat([0.0] * (n - k) + [bound + 1.0] * k, stat) > bound, (n, k)
        assert failed > 0 and slow > 0


def test_failed_requests_end_a_point_early_under_any_latency_percentile():
    """A failed request is over every latency bound: a ttft-only SLO let a shedding target run a
    point to its end, since ttft can't be judged live."""
    from infertap.analysis.capacity import certain_miss
    from infertap.replay.runner import ReplayStats

    lost = certain_miss(parse_slos(["ttft:p90<=1s"]), 100)  # 9 may fail (p90 at 89.1); twice over and 2: 20
    assert lost(ReplayStats(generation_failed=20)) is False
    assert lost(ReplayStats(generation_failed=21)) is True
    at_ten, at_eleven = (certain_miss(parse_slos(["e2e:p90<=1s"]), n) for n in (10, 11))  # none may fail, then 1
    assert at_ten(ReplayStats(generation_failed=2)) is False and at_ten(ReplayStats(generation_failed=3)) is True
    assert at_eleven(ReplayStats(generation_failed=4)) is False and at_eleven(ReplayStats(generation_failed=5)) is True
    assert certain_miss(parse_slos(["ttft:mean<=1s"]), 100)(ReplayStats(generation_failed=90)) is False  # no count decides a mean


def test_a_pass_not_measured_stops_the_search_and_is_no_capacity(monkeypatch, tmp_path):
    from infertap.replay import sweep as sweep_module

    tried: list[float] = []

    def point(self: Any, load: Load) -> Point:
        tried.append(load.value)
        p = Point(load, tmp_path / load.name, {}, {"passed": True}, unmeasured=["too few"] if load.value >= 2 else [])
        self.points.append(p)
        return p

    monkeypatch.setattr(sweep_module.Sweep, "_point", point)
    src = workload(tmp_path / "src", 2, 0.1)
    config = SweepConfig(ReplayConfig(src, "http://127.0.0.1:1", tmp_path / "out", probe=False), search=True)
    sweep = sweep_module.Sweep(config, evaluate=lambda _: {})
    sweep.run()
    assert tried == [1.0, 2.0]
    assert capacity_of(sweep.points)[0].load.value == 1.0  # type: ignore[union-attr]
    assert unmeasured_passes(sweep.points) == [{"speed": 2.0, "why": ["too few"]}]


def test_what_a_point_measured_each_rule():
    verdict = {"requests": 40, "unmeasurable": []}
    assert sweep_checks.unmeasured(Load("concurrency", 8), {"concurrency": {"max": 8}}, verdict) == []
    assert "never reached" in sweep_checks.unmeasured(Load("concurrency", 8), {"concurrency": {"max": 7}}, verdict)[0]
    [why] = sweep_checks.unmeasured(Load("speed", 1), {}, {"requests": 40, "unmeasurable": ["tpot:p50<=50ms"]})
    assert "nothing here measures tpot:p50<=50ms" in why
    speed = Load("speed", 1)
    assert sweep_checks.not_carried(speed, {"offered_requests_per_s": 10.0}, {"answered_per_s": 5.0}) is None  # half: carried
    assert sweep_checks.not_carried(speed, {"offered_requests_per_s": 10.0}, {"answered_per_s": 4.9}) is not None
    held = {"offered_requests_per_s": 10.0, "queue_wait_ms": {"p99": 500.0}}  # the replayer held them: never offered
    assert sweep_checks.not_carried(speed, held, {"answered_per_s": 1.0}) is None
    closed = Load("concurrency", 4)
    assert sweep_checks.not_carried(closed, {"offered_requests_per_s": None}, {"answered_per_s": 1.0}) is None
    carried = Point(Load("speed", 1), Path("s"), {}, {"passed": True}, not_carried="answers came back at ...")
    assert carried.passed is False and carried.describe()["not_carried"] == "answers came back at ..."


def test_the_command_prints_what_could_not_be_measured(capsys, monkeypatch):
    """A tpot bound on answers not streamed was printed as the target failing at the lowest speed; a
    ttft bound missing on empty answers went unsaid."""
    from infertap.cli_sweep import print_sweep

    monkeypatch.setenv("COLUMNS", "300")
    ttft = {"slo": "ttft:p99<=300ms", "metric": "ttft", "stat": "p99", "bound": 3e8}
    tpot = {"slo": "tpot:p50<=50ms", "metric": "tpot", "stat": "p50", "bound": 5e7}
    unmeasurable = {**tpot, "observed": None, "met": None, "missing": 0}

    def point(speed: float, passed: bool, ttft_result: dict[str, Any]) -> dict[str, Any]:
        return {
            "speed": speed,
            "passed": passed,
            "lost_early": False,
            "replayer_behind": False,
            "unmeasured": ["nothing here measures tpot:p50<=50ms (no answer has the metric)"] if passed else [],
            "not_carried": None,
            "requests": 20,
            "attainment": 0.5,
            "error_rate": 0.0,
            "slos": [{**ttft, **ttft_result}, unmeasurable],
        }

    points = [
        point(1.0, True, {"observed": 2e8, "met": True, "missing": 2}),
        point(2.0, False, {"observed": None, "met": False, "missing": 10}),
    ]
    result = {"kind": "speed", "slo": [ttft, tpot], "points": points, "capacity": None, "knee": {"passed": None, "failed": 2.0}}
    print_sweep(result)
    text = " ".join(capsys.readouterr().out.split())
    assert "not measurable" in text and "over ✗" in text and "pass (not measured)" in text, text
    assert "speed 2: ttft:p99<=300ms could not be measured on 10 of 20 exchanges (ok answers without a ttft" in text
    assert "speed 1: ttft:p99<=300ms could not be measured on 2 of 20" in text
    assert "speed 1 passed without measuring the target there, not counted: nothing here measures tpot:p50<=50ms" in text
    assert "capacity: none measured" in text


def test_the_command_prints_each_figure_on_the_side_of_its_bound_and_small_ones_unrounded_to_zero(capsys, monkeypatch):
    """Rounded for show, an e2e of 150.04 ms over its 150 ms bound read "150.0 ms ✗", an error rate
    of 1/96 over 1% "1.0% ✗", a ttft of 120 µs over 100 µs "0.1 ms ✗"; one error in 5,000 read
    "errors 0.0%", one request of 300 over a bound "attainment 100%", and a recorded agent
    workload's 0.004 requests/s "0.00". Each shows as many digits as tell it apart; figures that
    rounding leaves on their side print as before."""
    from infertap.cli_sweep import capacity_line, print_sweep

    monkeypatch.setenv("COLUMNS", "300")
    e2e = {"slo": "e2e:p90<=150ms", "metric": "e2e", "stat": "p90", "bound": 150e6}
    ttft = {"slo": "ttft:p99<=100us", "metric": "ttft", "stat": "p99", "bound": 100e3}
    errors = {"slo": "error_rate<=1%", "metric": "error_rate", "stat": "rate", "bound": 0.01}

    def point(speed: float, passed: bool, observed: tuple[float, float, float], attainment: float, rate: float) -> dict:
        slos = [
            {**s, "observed": v, "met": v <= s["bound"], "missing": 0} for s, v in zip((e2e, ttft, errors), observed, strict=True)
        ]
        return {
            "speed": speed, "passed": passed, "lost_early": False, "replayer_behind": False, "unmeasured": [],
            "not_carried": None, "requests": 5000, "ok": 5000, "attainment": attainment, "error_rate": rate,
            "offered_requests_per_s": 0.0042 * speed, "requests_per_s": 0.004 * speed,
            "goodput": {"requests_per_s": 0.0035 * speed}, "schedule_lag_ms": {"p99": 0.5}, "slos": slos,
        }  # fmt: skip

    points = [
        point(1.0, True, (104.4e6, 80e3, 0.0), 299 / 300, 1 / 5000),  # within every bound
        point(2.0, False, (150.04e6, 120e3, 1 / 96), 0.5, 1 / 96),  # just over each
        point(4.0, False, (300e6, 400e3, 0.5), 0.0, 0.5),  # far over each
    ]
    capacity = {"speed": 1.0, "requests_per_s": 0.004, "output_tokens_per_s": 0.02, "goodput": {"requests_per_s": 0.0035}}
    result = {"kind": "speed", "slo": [e2e, ttft, errors], "points": points, "capacity": capacity}
    result["knee"] = {"passed": 1.0, "failed": 2.0}
    print_sweep(result)
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]] for line in capsys.readouterr().out.splitlines() if line.startswith("│")}  # fmt: skip
    assert rows["1"] == ["pass", "0.0042", "0.0040", "0.0035", "99.7%", "0.02%", "104.4 ms", "0.1 ms", "0.0%", "0.50"]
    assert rows["2"] == ["fail", "0.0084", "0.0080", "0.0070", "50%", "1.04%", "150.04 ms ✗", "0.12 ms ✗", "1.04% ✗", "0.50"]
    assert rows["4"] == ["fail", "0.017", "0.016", "0.014", "0%", "50.0%", "300.0 ms ✗", "0.4 ms ✗", "50.0% ✗", "0.50"]
    assert capacity_line(result) == (
        "capacity: speed 1, 0.0040 requests/s, of which 0.0035/s met every SLO (goodput), 0.020 output tokens/s; "
        "the knee lies between 1 and 2"
    )
    capacity.update(requests_per_s=1.9, output_tokens_per_s=240.0, goodput={"requests_per_s": 1.8})  # docs/capacity.md's
    assert capacity_line(result).startswith(
        "capacity: speed 1, 1.90 requests/s, of which 1.80/s met every SLO (goodput), 240.00 output tokens/s"
    )


def test_the_command_names_each_load_as_tried_not_rounded_to_six_digits():
    """A search bisected at --tolerance 0.01 tries speed 1.015625: ``:g`` printed it 1.01562, a load
    never tried (its folder is speed-1.015625), in the table and the knee. Loads six digits hold
    print as before."""
    from infertap.cli_sweep import capacity_line, notes

    def point(speed: float, passed: bool) -> dict[str, Any]:
        return {"speed": speed, "passed": passed, "lost_early": False, "replayer_behind": False, "slos": []}

    cap = {"requests_per_s": 10.0, "output_tokens_per_s": 50.0, "goodput": {"requests_per_s": 9.0}}
    result = {"kind": "speed", "points": [point(1.015625, True), point(1.03125, False), point(1.0000001, True)]}
    result.update(capacity={"speed": 1.015625, **cap}, knee={"passed": 1.015625, "failed": 1.03125}, inconsistent=[1.0000001])
    line = capacity_line(result)
    assert line.startswith("capacity: speed 1.015625, 10.00 requests/s") and line.endswith("between 1.015625 and 1.03125"), line
    assert "speed 1.0000001 passed above a load that failed" in notes(result)[0]
    assert Load("speed", 1.015625).name == "speed-1.015625"  # the folder it names
    result.update(capacity={"speed": 2.0, **cap}, knee={"passed": 2.0, "failed": 4.5})
    assert capacity_line(result).endswith("the knee lies between 2 and 4.5")


def test_a_sweep_replays_the_sampled_sessions_and_refuses_closed_ones_at_speeds(slot_engine, tmp_path):
    """--sample-sessions: each point sent the sample while its offered rate and progress total were
    the whole workload's (12 of 40 sent, 'not carried', no capacity). Closed sessions follow their
    parents, not the arrival times a speed scales, and a concurrency level is a closed loop already
    (replay refuses closed sessions on one): refused up front for every mode."""
    from infertap.replay import SessionSample
    from infertap.replay.workload import load
    from tests.replay.test_sessions import agent_capture

    engine, url = slot_engine
    src = agent_capture(tmp_path / "agents")
    sample = SessionSample(limit=2)
    kept = len(load(src, sample=sample)[0])
    started: list[int] = []
    result = run_sweep(
        SweepConfig(ReplayConfig(src, url, tmp_path / "sweep", probe=False, sample=sample), speeds=(1,)),
        parse_slos(["error_rate<=1%"]),
        on_point_start=lambda point_load, total: started.append(total),
    )
    assert started == [kept] and result["points"][0]["sent"] == kept < len(load(src)[0])
    offered = [(len(items) - 1) / _arrival_span(items) for items in (load(src, sample=sample)[0], load(src)[0])]
    assert offered[0] != pytest.approx(offered[1])  # the sample's rate is not the whole workload's
    assert result["points"][0]["offered_requests_per_s"] == pytest.approx(offered[0])
    for mode in ({"speeds": (1, 2)}, {"concurrency_levels": (1, 2)}, {"search": True}):
        with pytest.raises(SweepError, match="--sessions closed has no load a sweep can vary.*--sessions open"):
            SweepConfig(ReplayConfig(src, url, tmp_path / "x", sessions="closed"), **mode)


def _arrival_span(items) -> float:
    offsets = [i.offset_ns for i in items]
    return (max(offsets) - min(offsets)) / 1e9


@pytest.mark.parametrize("slot_engine", [(1, 0.1)], indirect=True)
@pytest.mark.parametrize(("slo", "held"), [("tpot:p50<=1s", True), ("ttft:p50<=1ms", False)])
def test_the_command_says_a_load_not_carried_held_its_slos_only_where_they_held(slot_engine, tmp_path, monkeypatch, slo, held):
    """40 requests/s to a target that answers 10 a second: not carried either way. The note said
    'failed though its SLOs held' of a point whose ttft bound failed too."""
    engine, url = slot_engine
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the replayer taken as on time, as above
    src = workload(tmp_path / "src", 30, 0.025)
    run = sweep_cli(str(src), "--target", url, "--out", str(tmp_path / "s"), "--speeds", "1", "--no-probe", "--slo", slo)
    [point] = read_sweep(tmp_path / "s")["points"]
    assert point["not_carried"] and point["slos"][0]["met"] is held, point
    output = " ".join(run.output.split())
    assert f"speed 1 did not carry its load: {point['not_carried']}" in output, output
    assert ("though its SLOs held" in output) is held, output


def test_docs_capacity_names_every_key_of_sweep_json():
    """docs/capacity.md is sweep.json's spec: each key a sweep writes (the sets the sweeps above
    check against real sweeps) is named there; it named none of a point's out, sent, wall_s,
    span_s, latency_ms, nor an SLO's metric, stat and bound."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "capacity.md").read_text()
    named = set(re.findall(r"`([a-z_0-9]+)`", doc))
    slo = parse_slos(["ttft:p99<=2s"])[0].describe()
    written = SWEEP_KEYS | POINT_KEYS | {"span_s", "not_in_file", "too_large", "response_not_kept"} | set(slo)
    assert written - named == set()
    assert {"observed", "met", "missing"} <= named and {"p50", "p90", "p99"} <= named


def test_a_workload_whose_requests_failed_when_recorded_says_so(slot_engine, tmp_path):
    """A capture holding its own failures (two prompts past the context, answered 400 when recorded)
    replays them as recorded: against llama-server they failed again at every point, and the sweep
    read "capacity: none (the lowest speed tried, 1, failed)" with nothing saying the failures were
    the workload's, not the load's. sweep.json, the command and the report now say how many; a
    workload with none says nothing."""
    _, url = slot_engine
    exchanges = [{"offset_s": i * 0.1, "body": chat(i), **({"status": 400} if i in (3, 10) else {})} for i in range(20)]
    write_capture(tmp_path / "failing", exchanges)
    clean = workload(tmp_path / "clean", 20, 0.1)
    said = {}
    for src in (tmp_path / "failing", clean):
        out = tmp_path / f"sweep-{src.name}"
        result = sweep_cli(str(src), "--target", url, "--no-probe", "--speeds", "1", "--slo", "e2e:p90<=1s", "--out", str(out))
        assert result.exit_code == 0, result.output
        said[src.name] = (read_sweep(out)["source_failed"], " ".join(result.output.split()), render_sweeps(out))
    failed, output, page = said["failing"]
    assert failed == {"400": 2}
    assert "note: 2 of the workload's requests failed when recorded (400 ×2)" in output
    assert "--filter status=200 sweeps only those that succeeded" in output
    assert "2 of the workload&#x27;s requests failed when recorded (400 ×2)" in page
    failed, output, page = said["clean"]
    assert failed == {}
    assert "failed when recorded" not in output and "failed when recorded" not in page


def test_a_sweep_json_without_the_points_requests_still_says_what_was_not_sent(slot_engine, tmp_path, monkeypatch):
    """A sweep.json whose points lack ``requests`` (written before the field): the note on the
    requests the replayer never sent was dropped, as if none had been sent, since the rule read a
    missing count as none; a cancelled count beside it raised KeyError. The file is read as it says:
    its not-sent requests are said, and a count it lacks is not made up."""
    from infertap.analysis.sweep_notes import point_notes

    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the notes, not this machine's replayer lag
    _, url = slot_engine
    orphans = [
        {
            "offset_s": 0.1 * (i + 1),
            "path": "/v1/responses",
            "body": {"model": "m", "input": "and?", "previous_response_id": f"resp_gone_{i}"},
        }
        for i in range(3)
    ]
    write_capture(tmp_path / "some", [{"offset_s": 0.0, "body": chat(0)}, *orphans])  # one sent, three refused
    write_capture(tmp_path / "none", orphans)  # none sent
    args = ["--target", url, "--no-probe", "--grace", "1", "--speeds", "1", "--slo", "e2e:p90<=2s"]
    for name in ("some", "none"):
        run = sweep_cli(str(tmp_path / name), *args, "--out", str(tmp_path / f"{name}_out"))
        assert run.exit_code == 0, run.output
    note = (
        "speed 1: 3 requests not sent (refused by the replayer, such as a turn continuing a response outside the "
        "replay: each says why in the point's capture), left out of its figures"
    )
    current = read_sweep(tmp_path / "some_out")
    assert note in point_notes("speed", current["points"][0])
    old = tmp_path / "old"
    old.mkdir()
    for point in current["points"]:
        del point["requests"]
    current["points"][0]["cancelled"] = 1  # a count beside it that reads the missing one
    (old / RESULT).write_text(json.dumps(current))
    said = point_notes("speed", read_sweep(old)["points"][0])
    assert note in said, said
    assert "speed 1: 1 of its requests were cancelled by the replayer in flight" in " ".join(said)
    page = CliRunner().invoke(cli, ["report", str(old), "-o", str(tmp_path / "old.html")])
    assert page.exit_code == 0, page.output
    assert html.escape(note) in (tmp_path / "old.html").read_text()
    # Must stay: a point that sent none says it once, in its unjudged sentence, the field there or not.
    none = read_sweep(tmp_path / "none_out")
    assert none["points"][0]["requests"] == 0 and not any(
        "left out of its figures" in n for n in point_notes("speed", none["points"][0])
    )
    del none["points"][0]["requests"]
    assert not any("left out of its figures" in n for n in point_notes("speed", none["points"][0]))


def test_a_point_whose_every_request_the_replayer_refused_is_no_pass_and_the_sweep_goes_on(slot_engine, tmp_path, monkeypatch):
    """Responses turns each continuing a response the capture doesn't hold (it starts mid-conversation):
    the replayer refuses every one, nothing is sent. The point raised "no generation exchanges sent in
    this run" and the sweep ended there; it is now a point whose figures are unknown, counted as no
    pass, saying why, and the next point runs. Beside a turn it can send, the point is judged."""
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the verdicts, not this machine's replayer lag
    _, url = slot_engine
    orphans = [
        {
            "offset_s": i * 0.1,
            "path": "/v1/responses",
            "body": {"model": "m", "input": f"and {i}?", "previous_response_id": f"resp_gone_{i}"},
        }
        for i in range(3)
    ]
    write_capture(tmp_path / "src", orphans)
    args = ["--target", url, "--no-probe", "--grace", "1", "--speeds", "0.5,1", "--slo", "e2e:p90<=2s"]
    run = sweep_cli(str(tmp_path / "src"), *args, "--out", str(tmp_path / "none"))
    assert run.exit_code == 0, run.output
    result = read_sweep(tmp_path / "none")
    assert [p["speed"] for p in result["points"]] == [0.5, 1]  # the sweep went on past the first
    reason = (
        "3 requests refused by the replayer (such as a turn continuing a response outside the replay; "
        "each says why in the point's capture), none sent"
    )
    for p in result["points"]:
        assert (p["passed"], p["unjudged"], p["requests"], p["not_sent"], p["span_s"]) == (False, reason, 0, 3, None), p
        assert [(s["observed"], s["met"]) for s in p["slos"]] == [(None, None)]
    assert result["capacity"] is None and result["knee"] == {"passed": None, "failed": 0.5}
    text = " ".join(run.output.split())
    assert f"speed 0.5: {reason}: its figures are unknown, and it counts as no pass" in text, text
    assert "left out of its figures" not in text  # the unjudged sentence says they were not sent, once
    report = CliRunner().invoke(cli, ["report", str(tmp_path / "none"), "-o", str(tmp_path / "r.html")])
    assert report.exit_code == 0, report.output
    assert html.escape(f"speed 1: {reason}") in (tmp_path / "r.html").read_text()

    write_capture(tmp_path / "some", [{"offset_s": 0.0, "body": chat(0)}, *orphans])  # one it sends
    run = sweep_cli(str(tmp_path / "some"), *args, "--out", str(tmp_path / "some_out"))
    assert run.exit_code == 0, run.output
    some = read_sweep(tmp_path / "some_out")
    assert [(p["passed"], p["unjudged"], p["requests"], p["not_sent"]) for p in some["points"]] == [(True, None, 1, 3)] * 2
    assert "3 requests not sent (refused by the replayer" in " ".join(run.output.split())
