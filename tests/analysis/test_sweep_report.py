"""``infertap report`` of sweeps: on sweep.json written by hand (known capacities), and on one real
tiny sweep against the simulated engine of known capacity (tests/slot_engine.py)."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.analysis.capacity import run_sweep
from infertap.analysis.report import render
from infertap.analysis.slo import parse_slos
from infertap.analysis.svg import BOTTOM, PLOT_H, H
from infertap.analysis.sweep_report import capacity_sentence, load_sweeps
from infertap.cli import cli
from infertap.errors import ConfigError
from infertap.replay import ReplayConfig, sweep_checks
from infertap.replay.sweep import SweepConfig
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture
from tests.slot_engine import SlotEngine

E2E = {"slo": "e2e:p90<=150ms", "metric": "e2e", "stat": "p90", "bound": 150e6}
ERRORS = {"slo": "error_rate<=1%", "metric": "error_rate", "stat": "rate", "bound": 0.01}


def _point(load: float, capacity: float, slos: list[dict], kind: str) -> dict:
    """A point of a target that carries ``capacity`` (in load units, 10 requests/s each): within it
    every request meets the SLOs, above it e2e doubles and the surplus is not served in time."""
    passed = load <= capacity
    achieved = 10 * min(load, capacity)
    observed = {"e2e": 100e6 if passed else 300e6, "error_rate": 0.0}
    return {
        kind: load,
        "passed": passed,
        "out": f"/sweeps/{kind}-{load:g}",
        "lost_early": False,
        "replayer_behind": False,
        "sent": 100,
        "wall_s": 10 / load,
        "offered_requests_per_s": 10 * load if kind == "speed" else None,
        "schedule_lag_ms": {"p50": 0.1, "p99": 0.4, "max": 0.9},
        "requests": 100,
        "ok": 100,
        "error_rate": 0.0,
        "attainment": 1.0 if passed else 0.4,
        "span_s": 10 / load,
        "requests_per_s": achieved,
        "output_tokens_per_s": 5 * achieved,
        "goodput": {"requests_per_s": achieved if passed else 0.4 * achieved, "output_tokens_per_s": 0.0},
        "in_flight": {"mean": min(load, capacity), "max": load},  # achieved concurrency, apart from the load
        "slos": [{**s, "observed": observed[s["metric"]], "met": observed[s["metric"]] <= s["bound"]} for s in slos],
        "latency_ms": {"e2e": {"p50": 90.0, "p90": observed["e2e"] / 1e6, "p99": observed["e2e"] / 1e6}},
    }


def _sweep(folder: Path, capacity: float, *, loads=(1, 2, 4, 8), slos=(E2E, ERRORS), kind="speed", target="http://gpu:8000"):
    points = [_point(v, capacity, list(slos), kind) for v in loads]
    best = max((i for i, v in enumerate(loads) if v <= capacity), default=None, key=lambda i: loads[i])
    cap = None if best is None else {k: points[best][k] for k in ("requests_per_s", "output_tokens_per_s", "goodput")}
    folder.mkdir(parents=True)
    result = {
        "kind": kind,
        "source": "captures/run1",
        "target": target,
        "target_kind": "vllm",
        "slo": list(slos),
        "capacity": None if cap is None else {kind: loads[best], **cap},
        "knee": {
            "passed": None if best is None else loads[best],
            "failed": min((v for v in loads if v > capacity), default=None),
        },
        "points": points,
        "stopped_early": False,
    }
    (folder / "sweep.json").write_text(json.dumps(result))
    return folder


def _report(*args: Path, out: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["report", *map(str, args), "-o", str(out)])
    return result.exit_code, result.output, out.read_text() if out.exists() else ""


def _plots(page: str) -> dict[str, str]:
    return dict(re.findall(r'<svg [^>]*aria-label="([^"]*)"[^>]*>(.*?)</svg>', page, re.S))


def test_a_target_carrying_more_load_at_fewer_requests_per_s_is_never_said_to_carry_less(tmp_path):
    """A concurrency sweep: B holds its SLOs at concurrency 8 where A fails above 4, but B's answers
    take longer (within the bounds), so it serves fewer requests/s. The sentence named B the winner by
    load and gave the ratio of requests/s: "B carries 0.75x as much of this workload as A"."""
    a = _sweep(tmp_path / "a", 4, kind="concurrency")
    b = _sweep(tmp_path / "b", 8, kind="concurrency", target="http://gpu2:8000", loads=(1, 2, 4, 8, 16))
    result = json.loads((b / "sweep.json").read_text())
    result["capacity"]["requests_per_s"] = 30.0  # A's capacity: 40 requests/s
    (b / "sweep.json").write_text(json.dumps(result))
    sentence = capacity_sentence(load_sweeps(a, b))
    assert sentence.startswith("B carries 2x the concurrency of A within the SLOs (concurrency 8 vs 4)"), sentence
    assert "fewer requests/s: 30 vs 40" in sentence and "0.75x" not in sentence
    # More load and more requests/s: the ratio of requests/s, as before.
    assert capacity_sentence(load_sweeps(a, _sweep(tmp_path / "c", 8, kind="concurrency", loads=(1, 2, 4, 8, 16)))).startswith(
        "B carries 2x as much of this workload as A: 80 vs 40 requests/s"
    )


def test_a_target_carrying_twice_the_other_is_named_with_the_ratio(tmp_path):
    a, b = _sweep(tmp_path / "a", 2), _sweep(tmp_path / "b", 4, target="http://gpu2:8000")
    code, output, page = _report(a, b, out=tmp_path / "r.html")
    assert code == 0, output
    assert page.startswith("<!doctype html>") and "<script" not in page and not re.search(r"\b(src|href)=", page)
    sentence = re.search(r'<p class="verdict"><b>(.*?)</b>', page).group(1)
    assert sentence.startswith("B carries 2x as much of this workload as A: 40 vs 20 requests/s"), sentence
    assert "speed 4 vs 2 (2x)" in sentence
    assert "http://gpu2:8000 (vllm); SLOs: e2e:p90&lt;=150ms, error_rate&lt;=1%; 4 points" in page
    plots = _plots(page)
    assert set(plots) == {"requests/s against speed (× the recorded arrival rate)", "p90 of e2e (ms) against speed (× the recorded arrival rate)", "error rate (%) against speed (× the recorded arrival rate)"}  # fmt: skip
    throughput = plots["requests/s against speed (× the recorded arrival rate)"]
    assert (
        throughput.count("<polyline") == 4 and "#1f77b4" in throughput and "#d62728" in throughput
    )  # A and B, goodput and achieved
    assert throughput.count('stroke-dasharray="5 3"') == 2  # achieved dashed
    assert throughput.count('fill="#fff"') == 2 * 2 + 1 * 2  # hollow marks: A fails at 4 and 8, B at 8
    # The SLO's bound, across the e2e plot at its height: y ticks 0-300 ms, 150 ms halfway up.
    e2e = plots["p90 of e2e (ms) against speed (× the recorded arrival rate)"]
    hline = re.search(r'<g class="hline"><line [^>]*y1="([\d.]+)"[^>]*/><text[^>]*>([^<]*)</text>', e2e)
    assert hline.group(2) == "SLO e2e:p90&lt;=150ms"
    assert float(hline.group(1)) == pytest.approx(H - BOTTOM - PLOT_H / 2, abs=0.1)
    assert page.count("<h3>A</h3>") == 1 and page.count("<tr class=diff>") == 2 + 1  # every failed point, in both tables
    assert "300 ms ✗" in page and "100 ms" in page


def _goodput_at_capacity(folder: Path, goodput: float | None) -> Path:
    """The sweep with its capacity's goodput set (None: a sweep.json whose capacity holds none)."""
    result = json.loads((folder / "sweep.json").read_text())
    if goodput is None:
        del result["capacity"]["goodput"]
    else:
        result["capacity"]["goodput"]["requests_per_s"] = goodput
    (folder / "sweep.json").write_text(json.dumps(result))
    return folder


def _sentence(*sweeps: Path, out: Path) -> str:
    code, output, page = _report(*sweeps, out=out)
    assert code == 0, output
    return html.unescape(re.search(r'<p class="verdict"><b>(.*?)</b>', page).group(1))


def test_the_capacity_sentence_says_the_goodput_at_capacity_beside_the_achieved_requests_per_s(tmp_path):
    """The sentence said only the achieved requests/s at capacity, every ok answer, some of them over a
    bound the percentile allowed: read as what the target carries under the SLOs. It says the
    goodput (the requests/s that met every SLO) beside it, for one sweep and for two."""
    a = _goodput_at_capacity(_sweep(tmp_path / "a", 2), 18.0)
    assert _sentence(a, out=tmp_path / "a.html") == (
        "A carries this workload up to speed 2 under the SLOs (20 requests/s, of which 18/s met every SLO (goodput), "
        "100 output tokens/s); the knee lies between 2 and 4."
    )
    b = _goodput_at_capacity(_sweep(tmp_path / "b", 4), 35.0)
    assert _sentence(a, b, out=tmp_path / "ab.html") == (
        "B carries 2x as much of this workload as A: 40 vs 20 requests/s within the SLOs, "
        "of which 35 vs 18/s met every SLO (goodput), at speed 4 vs 2 (2x)."
    )
    c = _goodput_at_capacity(_sweep(tmp_path / "c", 2), 19.0)
    assert _sentence(a, c, out=tmp_path / "ac.html").endswith(
        ": 20 vs 20 requests/s at capacity, of which 18 vs 19/s met every SLO (goodput)."
    )
    # More load at fewer requests/s: the goodput beside them too.
    d = _sweep(tmp_path / "d", 8, loads=(1, 2, 4, 8, 16))
    result = json.loads((d / "sweep.json").read_text())
    result["capacity"]["requests_per_s"], result["capacity"]["goodput"]["requests_per_s"] = 15.0, 14.0
    (d / "sweep.json").write_text(json.dumps(result))
    assert "fewer requests/s: 15 vs 20, of which 14 vs 18/s met every SLO (goodput) (its answers" in _sentence(
        a, d, out=tmp_path / "ad.html"
    )
    # Only one met them: its goodput said; a capacity that holds no goodput says it is unknown.
    low = _sweep(tmp_path / "low", 0.5)
    assert _sentence(low, a, out=tmp_path / "la.html").startswith(
        "Only B met the SLOs (up to speed 2, 20 requests/s, of which 18/s met every SLO (goodput)); "
    )
    old = _goodput_at_capacity(_sweep(tmp_path / "old", 2), None)
    assert "(20 requests/s, goodput (requests/s that met every SLO) unknown, 100 output tokens/s)" in _sentence(
        old, out=tmp_path / "old.html"
    )


def _with_source(folder: Path, source: object) -> Path:
    result = json.loads((folder / "sweep.json").read_text())
    result["source"] = source
    (folder / "sweep.json").write_text(json.dumps(result))
    return folder


def test_the_captures_a_sweep_replayed_are_a_list_and_an_older_string_is_read_as_one(tmp_path):
    """sweep.json's ``source`` was the captures joined by ", " (a path holding ", " could not be told
    from two); it is a list, each shown on its own. A sweep.json written before, its ``source`` a
    string, is read as a list of that one entry; A and B are the same workload in any order."""
    a = _with_source(_sweep(tmp_path / "a", 2), ["gw/a, b", "gw/c"])
    b = _with_source(_sweep(tmp_path / "b", 2), ["gw/c", "gw/a, b"])
    old = _sweep(tmp_path / "old", 2)  # written with "source": "captures/run1"
    assert json.loads((old / "sweep.json").read_text())["source"] == "captures/run1"
    assert load_sweeps(old)[0][2]["source"] == ["captures/run1"]
    code, output, page = _report(a, b, out=tmp_path / "ab.html")
    assert code == 0, output
    assert "a speed sweep of 2 captures as one workload (<code>gw/a, b</code>, <code>gw/c</code>) against" in page
    assert "replayed different captures" not in page
    code, output, page = _report(a, old, out=tmp_path / "old.html")
    assert code == 0, output
    assert "a speed sweep of <code>captures/run1</code> against" in page and "replayed different captures" in page


def test_an_older_joined_source_is_read_back_as_its_captures_where_the_disk_tells_them(tmp_path, monkeypatch):
    """An older sweep.json of several captures joined them by ", ": read back as each capture where
    each names one and the joined string names none; a capture whose own name holds ", ", or parts
    that name nothing (moved since), stay one entry, as nothing tells them apart."""
    monkeypatch.chdir(tmp_path)
    for name in ("gw-a", "gw-b", "gw-c, d"):
        write_capture(tmp_path / name, [{"offset_s": 0.0}])

    def read(source: str) -> list[str]:
        folder = _with_source(_sweep(tmp_path / f"s{len(list(tmp_path.iterdir()))}", 2), source)
        return load_sweeps(folder)[0][2]["source"]

    assert read("gw-a, gw-b") == ["gw-a", "gw-b"]
    assert read("gw-c, d") == ["gw-c, d"]
    assert read("gw-a, gone") == ["gw-a, gone"]
    assert read("gone, gw-b") == ["gone, gw-b"]
    old = _with_source(_sweep(tmp_path / "old", 2), "gw-a, gw-b")
    new = _with_source(_sweep(tmp_path / "new", 2), ["gw-b", "gw-a"])
    code, output, page = _report(old, new, out=tmp_path / "same.html")
    assert code == 0, output
    assert "2 captures as one workload (<code>gw-a</code>, <code>gw-b</code>)" in page
    assert "replayed different captures" not in page
    other = _with_source(_sweep(tmp_path / "other", 2), ["gw-a", "gw-c, d"])
    code, output, page = _report(old, other, out=tmp_path / "other.html")
    assert code == 0, output
    assert "replayed different captures" in page


def test_equal_capacities_name_no_winner(tmp_path):
    a, b = _sweep(tmp_path / "a", 2), _sweep(tmp_path / "b", 3)  # both pass 2 and fail 4: the knees overlap
    code, output, page = _report(a, b, out=tmp_path / "r.html")
    assert code == 0, output
    sentence = re.search(r'<p class="verdict"><b>(.*?)</b>', page).group(1)
    assert sentence.startswith("A and B carry this workload about equally"), sentence
    assert "as much" not in sentence and "between 2 and 4" in sentence
    # Within the sweeps' resolution even when the knees touch: 2 against 2.1 is no finding.
    c = _sweep(tmp_path / "c", 2.1, loads=(1, 2, 2.1, 4))
    d = _sweep(tmp_path / "d", 2, loads=(1, 2, 2.1, 4))
    assert "about equally" in capacity_sentence(load_sweeps(c, d))


def test_one_side_never_passing_and_both_never_failing(tmp_path):
    a, b = _sweep(tmp_path / "a", 0.5), _sweep(tmp_path / "b", 2)
    assert capacity_sentence(load_sweeps(a, b)).startswith(
        "Only B met the SLOs (up to speed 2, 20 requests/s, of which 20/s met every SLO (goodput)); A met them at no"
    )
    assert capacity_sentence(load_sweeps(a, _sweep(tmp_path / "c", 0.1))).startswith("Neither target met the SLOs")
    high = _sweep(tmp_path / "d", 100), _sweep(tmp_path / "e", 100)
    assert "sweep higher" in capacity_sentence(load_sweeps(*high))
    assert capacity_sentence(load_sweeps(b, high[0])).startswith("B carries at least 4x as much of this workload as A: 80 vs 20")
    alone = capacity_sentence(load_sweeps(b))
    assert alone == (
        "A carries this workload up to speed 2 under the SLOs (20 requests/s, of which 20/s met every SLO (goodput), "
        "100 output tokens/s); "
        "the knee lies between 2 and 4."
    )


def test_a_pass_with_the_replayer_behind_states_no_capacity(tmp_path):
    """A target that met the SLOs only where the replayer fell behind its schedule has no measured
    capacity: never "met them at no load tried", never a capacity at that load."""
    folder = _sweep(tmp_path / "a", 2, loads=(1, 2, 4))
    result = json.loads((folder / "sweep.json").read_text())
    for p in result["points"][:2]:
        p["replayer_behind"] = True
    result["capacity"], result["knee"], result["replayer_behind"] = None, {"passed": None, "failed": 4}, [1, 2]
    (folder / "sweep.json").write_text(json.dumps(result))
    alone = capacity_sentence(load_sweeps(folder))
    assert alone == "A: no capacity is stated: it met the SLOs only where the replayer fell behind its schedule (speed 1, 2)."
    b = _sweep(tmp_path / "b", 2)
    assert capacity_sentence(load_sweeps(folder, b)) == (
        "Only B's capacity is stated (up to speed 2, 20 requests/s, of which 20/s met every SLO (goodput)); A's is not: "
        "it met the SLOs only where the replayer fell behind its schedule (speed 1, 2)."
    )
    both = capacity_sentence(load_sweeps(folder, _sweep(tmp_path / "c", 0.1)))
    assert "only where the replayer fell behind" in both and "met the SLOs at no load tried" in both


def test_a_lowest_point_with_no_answer_to_judge_is_said_as_the_command_says_it(tmp_path):
    """A's lowest point judged nothing (``unjudged``): the report said A "met the SLOs at no load
    tried", a failure nothing showed, where ``infertap sweep`` says it "had no answer to judge". Both
    print one sentence now; a lowest point that failed is said as before."""
    from infertap.cli_sweep import capacity_line

    folder = _sweep(tmp_path / "a", 0.1, loads=(1, 2))
    result = json.loads((folder / "sweep.json").read_text())
    result["points"][0]["unjudged"] = "20 requests sent, none whose answer could be judged (...)"
    (folder / "sweep.json").write_text(json.dumps(result))
    said = "the lowest speed tried, 1, had no answer to judge (see the notes)"
    assert capacity_line(result) == f"capacity: none ({said})"
    assert capacity_sentence(load_sweeps(folder)) == f"A: no capacity is stated: {said}."
    beside = capacity_sentence(load_sweeps(folder, _sweep(tmp_path / "b", 4, loads=(4, 8))))
    assert beside.endswith(f"; A's is not stated: {said}."), beside
    neither = capacity_sentence(load_sweeps(folder, _sweep(tmp_path / "c", 0.1)))
    assert neither == f"A: no capacity is stated: {said}. B met the SLOs at no load tried (lowest speed tried: 1)."

    failed = _sweep(tmp_path / "f", 0.1, loads=(1, 2))  # the same, failed: as before
    assert capacity_line(json.loads((failed / "sweep.json").read_text())) == "capacity: none (the lowest speed tried, 1, failed)"
    assert capacity_sentence(load_sweeps(failed)) == "A met the SLOs at no load tried (lowest speed tried: 1)."
    assert capacity_sentence(load_sweeps(failed, _sweep(tmp_path / "g", 4, loads=(4, 8)))).endswith(
        "; A met them at no speed tried (lowest: 1)."
    )
    assert capacity_sentence(load_sweeps(failed, _sweep(tmp_path / "h", 0.1))) == (
        "Neither target met the SLOs at any load tried (lowest speed: A 1, B 1)."
    )


def test_a_lowest_point_with_no_answer_to_judge_still_says_where_the_sweep_met_the_slos(tmp_path):
    """Lowest point unjudged, speed 2 passed, speed 4 failed: the sentence said only that the lowest
    point had no answer to judge, leaving out that the sweep met the SLOs at 2, which a lowest point
    that failed says ("then met them at 2"). Both say where it met them now."""

    def sweep(folder: Path, unjudged: bool) -> Path:
        _sweep(folder, 2, loads=(1, 2, 4))
        result = json.loads((folder / "sweep.json").read_text())
        result["points"][0].update(
            passed=False, unjudged="20 requests sent, none whose answer could be judged (...)" if unjudged else None
        )
        result.update(capacity=None, knee={"passed": None, "failed": 1}, inconsistent=[2])  # as capacity_of reads it
        (folder / "sweep.json").write_text(json.dumps(result))
        return folder

    lowest = "the lowest speed tried, 1, had no answer to judge (see the notes)"
    met = "then met the SLOs at speed 2 (not counted: above a point that counts as no pass)"
    unjudged = sweep(tmp_path / "u", unjudged=True)
    assert capacity_sentence(load_sweeps(unjudged)) == f"A: no capacity is stated: {lowest}, {met}."
    beside = capacity_sentence(load_sweeps(unjudged, _sweep(tmp_path / "b", 4, loads=(4, 8))))
    assert beside.endswith(f"; A's is not stated: {lowest}, {met}."), beside
    assert html.escape(f"{lowest}, {met}") in _report(unjudged, out=tmp_path / "r.html")[2]
    # Must stay: with nothing passed above it, the sentence is the command's alone.
    alone = _sweep(tmp_path / "alone", 0.1, loads=(1, 2))
    result = json.loads((alone / "sweep.json").read_text())
    result["points"][0]["unjudged"] = "20 requests sent, none whose answer could be judged (...)"
    (alone / "sweep.json").write_text(json.dumps(result))
    assert capacity_sentence(load_sweeps(alone)) == f"A: no capacity is stated: {lowest}."
    # Must differ: a lowest point that failed says it failed, then met them at 2, as before.
    failed = capacity_sentence(load_sweeps(sweep(tmp_path / "f", unjudged=False)))
    assert failed.startswith("A failed the SLOs at its lowest speed tried (1), then met them at 2"), failed
    # The command's note on the pass above: above a point with no answer to judge, not "a load that failed".
    from infertap.cli_sweep import notes

    [above] = [n for n in notes(json.loads((unjudged / "sweep.json").read_text())) if "passed above" in n]
    assert above == "speed 2 passed above speed 1, which had no answer to judge: not counted"
    [above] = [n for n in notes(json.loads((tmp_path / "f" / "sweep.json").read_text())) if "passed above" in n]
    assert above == "speed 2 passed above a load that failed (noise, or a target that recovered): not counted"


def test_a_pass_not_counted_for_another_reason_is_named_beside_the_other_sweep(tmp_path):
    """A's lowest point passed on too few requests: beside B it was said to have met the SLOs only
    where its replayer fell behind (it never did), and B the only one to meet them."""
    folder = _sweep(tmp_path / "a", 1, loads=(1, 2))
    result = json.loads((folder / "sweep.json").read_text())
    why = ["12 requests are too few to judge (at least 20: --min-requests repeats the workload)"]
    result["points"][0]["unmeasured"], result["unmeasured"] = why, [{"speed": 1, "why": why}]
    result["capacity"], result["knee"] = None, {"passed": None, "failed": 2}
    (folder / "sweep.json").write_text(json.dumps(result))
    sentence = capacity_sentence(load_sweeps(folder, _sweep(tmp_path / "b", 4, loads=(4, 8))))
    assert sentence == (
        "Only B's capacity is stated (up to speed 4, 40 requests/s, of which 40/s met every SLO (goodput)); A's is not: "
        "no pass measured the target "
        f"at its load (speed 1: {why[0]})."
    )
    assert (
        capacity_sentence(load_sweeps(folder))
        == f"A: no capacity is stated: no pass measured the target at its load (speed 1: {why[0]})."
    )


def test_a_sweep_stopped_before_its_first_point_ended_is_not_judged(tmp_path):
    """Ctrl-C during the first point: no point, and the report said B "met them at no load tried"."""
    from infertap.analysis.capacity import _result
    from infertap.analysis.slo import parse_slos
    from infertap.replay import ReplayConfig
    from infertap.replay.sweep import SweepConfig

    config = SweepConfig(ReplayConfig(tmp_path / "src", "http://u:secret-pass@gpu2:8000", tmp_path / "o"), speeds=(1.0, 2.0))
    stopped = _result(config, parse_slos(["e2e:p90<=150ms"]), [])
    assert stopped["target"] == "http://u:REDACTED@gpu2:8000" and stopped["points"] == [] and stopped["capacity"] is None
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "sweep.json").write_text(json.dumps({**stopped, "slo": [E2E, ERRORS], "stopped_early": True}))
    a = _sweep(tmp_path / "a", 2)
    sentence = capacity_sentence(load_sweeps(a, folder))
    assert sentence.endswith("B has no judged point (its sweep stopped before the first one ended)."), sentence
    assert "no load tried" not in sentence and "met them at no" not in sentence
    neither = capacity_sentence(load_sweeps(_sweep(tmp_path / "c", 0.1), folder))
    assert "B: no point ran to its end" in neither and "Neither target met" not in neither


def test_sweeps_judged_by_different_slos_are_refused(tmp_path):
    a = _sweep(tmp_path / "a", 2)
    b = _sweep(tmp_path / "b", 4, slos=(E2E,))
    code, output, _ = _report(a, b, out=tmp_path / "r.html")
    assert code != 0 and "different SLOs (A: e2e:p90<=150ms, error_rate<=1%; B: e2e:p90<=150ms)" in output
    assert not (tmp_path / "r.html").exists()
    code, output, page = _report(b, out=tmp_path / "one.html")  # alone, any SLOs
    assert code == 0 and page.count("<svg") == 2
    # The same bounds written another way, in another order, are the same SLOs.
    c = _sweep(tmp_path / "c", 4, slos=({**ERRORS, "slo": "error_rate<=0.01"}, {**E2E, "slo": "e2e:p90<=0.15s"}))
    assert len(load_sweeps(a, c)) == 2
    with pytest.raises(ConfigError, match="a speed sweep and B a concurrency sweep"):
        load_sweeps(a, _sweep(tmp_path / "d", 4, kind="concurrency"))


def test_concurrency_sweeps_are_reported_by_their_levels(tmp_path):
    a = _sweep(tmp_path / "a", 4, loads=(1, 4, 16), kind="concurrency")
    b = _sweep(tmp_path / "b", 16, loads=(1, 4, 16, 64), kind="concurrency")
    assert json.loads((a / "sweep.json").read_text())["points"][1]["concurrency"] == 4
    assert capacity_sentence(load_sweeps(a, b)).startswith("B carries 4x as much of this workload as A: 160 vs 40 requests/s")
    code, output, page = _report(a, b, out=tmp_path / "r.html")
    assert code == 0, output
    throughput = _plots(page)["requests/s against concurrency (requests in flight)"]
    assert re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', throughput)[-5:] == ["0", "20", "40", "60", "80"]  # x: 1 to 64
    assert "<td>16</td><td>pass</td>" in page and "<td>64</td><td>fail</td>" in page


def test_a_load_axis_labels_its_ticks_as_the_loads_are_written(tmp_path):
    """The x axis is the load: its ticks read "1500", as the points table and the command write a
    concurrency, where number() wrote "1,500"; the y axis (requests/s, not a load) keeps its
    "10,000". A step's float noise (0.1 x 3) still reads 0.3."""
    ticks = lambda plot: re.findall(r'<text class="tick"[^>]*text-anchor="(end|middle)">([^<]*)</text>', plot)  # noqa: E731
    big = _sweep(tmp_path / "big", 1000, loads=(500, 1000, 1500), kind="concurrency")
    code, output, page = _report(big, out=tmp_path / "big.html")
    assert code == 0, output
    plot = _plots(page)["requests/s against concurrency (requests in flight)"]
    assert [t for anchor, t in ticks(plot) if anchor == "middle"] == ["0", "500", "1000", "1500"]
    assert [t for anchor, t in ticks(plot) if anchor == "end"] == ["0", "2,000", "4,000", "6,000", "8,000", "10,000"]
    assert "<td>1500</td>" in page

    small = _sweep(tmp_path / "small", 0.2, loads=(0.1, 0.2, 0.3))
    code, output, page = _report(small, out=tmp_path / "small.html")
    assert code == 0, output
    plot = _plots(page)["requests/s against speed (× the recorded arrival rate)"]
    assert [t for anchor, t in ticks(plot) if anchor == "middle"] == ["0", "0.1", "0.2", "0.3"]


def test_a_sweep_and_a_capture_are_refused(tmp_path):
    sweep = _sweep(tmp_path / "sweep", 2)
    write_capture(tmp_path / "capture", [{"body": {"model": "m", "messages": [{"role": "user", "content": "q"}]}}])
    for pair in ((sweep, tmp_path / "capture"), (tmp_path / "capture", sweep)):
        code, output, _ = _report(*pair, out=tmp_path / "r.html")
        assert code != 0 and f"{sweep} is a sweep (sweep.json) and {tmp_path / 'capture'} a capture" in output
    with pytest.raises(ConfigError, match="is a sweep, not a capture"):
        render(sweep)
    extract = CliRunner().invoke(cli, ["report", str(sweep), "-o", str(tmp_path / "r.html"), "--extract", "number"])
    assert extract.exit_code == 2 and "--extract compares the answers of two captures" in extract.output


def test_a_real_sweep_against_an_engine_of_known_capacity_is_reported(tmp_path, monkeypatch):
    # 20 requests at 10/s against an engine carrying 20/s: speed 1 meets e2e p90 <= 400 ms (its service
    # takes 100 ms), speed 4 can't (its queue puts p90 near 530 ms, and a slower machine only adds).
    monkeypatch.setattr(sweep_checks, "late_ms", lambda *_: math.inf)  # the report, not the replayer's lag here
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "q"}]}
    write_capture(tmp_path / "src", [{"offset_s": i * 0.1, "body": body} for i in range(20)])
    with ServerThread(SlotEngine(slots=2, service_s=0.1)) as server:
        config = SweepConfig(ReplayConfig(tmp_path / "src", server.url, tmp_path / "sweep", probe=False), speeds=(1, 4))
        run_sweep(config, parse_slos(["e2e:p90<=400ms"]))
    code, output, page = _report(tmp_path / "sweep", out=tmp_path / "r.html")
    assert code == 0, output
    assert "A carries this workload up to speed 1 under the SLOs" in page and "the knee lies between 1 and 4" in page
    assert page.count("<svg") == 2 and page.count('class="hline"') == 1
    assert "about equally" in capacity_sentence(load_sweeps(tmp_path / "sweep", tmp_path / "sweep"))


def test_a_sweep_never_tried_as_high_as_the_others_capacity_is_no_tie(tmp_path):
    """A met the SLOs at 1 and 2 and was never tried higher; B carries 4: 'about equally' said nothing
    tells A from B's capacity."""
    a = _sweep(tmp_path / "a", 100, loads=(1, 2))
    b = _sweep(tmp_path / "b", 4)
    sentence = capacity_sentence(load_sweeps(a, b))
    assert sentence.startswith("Which carries more can't be told: A met the SLOs up to speed 2 and was not judged higher"), (
        sentence
    )
    assert "below B's capacity (speed 4); sweep A higher" in sentence and "about equally" not in sentence
    assert capacity_sentence(load_sweeps(b, a)).startswith("Which carries more can't be told: B met the SLOs up to speed 2")
    # Tried within B's knee and never failing: at least as much as B, not "about equally".
    c = _sweep(tmp_path / "c", 100, loads=(1, 2, 5))
    sentence = capacity_sentence(load_sweeps(c, b))
    assert sentence.startswith("A carries at least as much of this workload as B: it met the SLOs up to speed 5"), sentence
    assert "B's knee lies between 4 and 8" in sentence


def test_a_sweep_stopped_by_an_error_says_so_not_that_capacity_may_be_higher(tmp_path):
    folder = _sweep(tmp_path / "a", 100, loads=(1, 2))
    result = json.loads((folder / "sweep.json").read_text())
    result["aborted"] = {"speed": 4.0, "error": "the target refuses connections, nothing was sent"}
    (folder / "sweep.json").write_text(json.dumps(result))
    alone = capacity_sentence(load_sweeps(folder))
    assert alone.endswith(
        "the sweep stopped at speed 4 (the target refuses connections, nothing was sent), so how much higher it goes is unknown."
    ), alone
    assert "may be higher" not in alone
    code, output, page = _report(folder, out=tmp_path / "r.html")
    assert code == 0, output
    assert "stopped at speed 4 (the target refuses connections, nothing was sent): what it found so far" in page
    # Beside a sweep that carries more, it was not judged as high: no comparison is made.
    assert "can't be told" in capacity_sentence(load_sweeps(folder, _sweep(tmp_path / "b", 4)))


def test_a_sweep_json_written_between_points_says_the_sweep_did_not_finish(tmp_path):
    """A sweep killed between points left a sweep.json that read as complete ('may be higher')."""
    folder = _sweep(tmp_path / "a", 100, loads=(1, 2))
    result = json.loads((folder / "sweep.json").read_text())
    result["finished"] = False  # as written after each point, before the last write
    (folder / "sweep.json").write_text(json.dumps(result))
    alone = capacity_sentence(load_sweeps(folder))
    assert alone.endswith("the sweep did not finish (killed, or still running), so how much higher it goes is unknown."), alone
    code, output, page = _report(folder, out=tmp_path / "r.html")
    assert code == 0 and "not finished (killed, or still running): what it found so far" in page


def test_a_closed_loop_point_offers_no_rate_and_is_not_said_to_be_unknown(tmp_path):
    """A concurrency level asks for no request rate: its offered column read "unknown", as if a figure
    were lost; a speed point's offered rate is still shown."""
    _, _, closed = _report(_sweep(tmp_path / "c", 2, loads=(1, 2), kind="concurrency"), out=tmp_path / "c.html")
    _, _, open_loop = _report(_sweep(tmp_path / "s", 2, loads=(1, 2)), out=tmp_path / "s.html")
    closed_rows = re.findall(r"<tr><td>[12]</td><td>pass</td><td>([^<]*)</td>", closed)
    open_rows = re.findall(r"<tr><td>[12]</td><td>pass</td><td>([^<]*)</td>", open_loop)
    assert closed_rows == ["closed loop", "closed loop"], closed_rows
    assert open_rows == ["10", "20"], open_rows


def test_the_points_table_says_over_and_not_measurable(tmp_path):
    folder = _sweep(tmp_path / "a", 2, loads=(1, 2, 4))
    result = json.loads((folder / "sweep.json").read_text())
    result["points"][2]["slos"][0].update(observed=None, met=False)  # its p90 fell on failed requests
    result["points"][0]["slos"][0].update(observed=None, met=None)
    result["points"][0]["unmeasured"] = ["nothing here measures e2e:p90<=150ms"]
    (folder / "sweep.json").write_text(json.dumps(result))
    code, output, page = _report(folder, out=tmp_path / "r.html")
    assert code == 0, output
    assert "<td>over ✗</td>" in page and "<td>not measurable</td>" in page and "<td>pass (not measured)</td>" in page


def test_the_points_table_shows_each_figure_on_the_side_of_its_bound(tmp_path):
    """Rounded to three digits, an e2e p90 of 150.04 ms over its 150 ms bound read "150 ms ✗", an
    error rate of 1/96 over 1% "1.0% ✗", one error in 5,000 "0.0%" and an attainment of 299/300
    "100%": each shows the digits that tell it apart; figures that rounding leaves on their side as before."""
    folder = _sweep(tmp_path / "a", 2, loads=(1, 2, 4))
    result = json.loads((folder / "sweep.json").read_text())
    result["points"][0].update(attainment=299 / 300, error_rate=1 / 5000)
    result["points"][1]["slos"][0].update(observed=150.04e6, met=False)
    result["points"][1]["slos"][1].update(observed=1 / 96, met=False)
    (folder / "sweep.json").write_text(json.dumps(result))
    code, output, page = _report(folder, out=tmp_path / "r.html")
    assert code == 0, output
    rows = re.findall(r"<tr(?: class=diff)?>(<td>.*?)</tr>", page)
    cells = [re.findall(r"<td>([^<]*)</td>", row)[5:9] for row in rows]
    assert cells == [
        ["99.7%", "0.02%", "100 ms", "0.0%"],
        ["100%", "0.0%", "150.04 ms ✗", "1.04% ✗"],
        ["40%", "0.0%", "300 ms ✗", "0.0%"],
    ], cells


def test_the_errors_column_shows_the_digits_of_its_error_rate_slo_cell(tmp_path):
    """An error rate of 1/96 over a 1% bound: the SLO cell read "1.04% ✗" beside an errors column of
    "1.0%". Both show the digits that put it over; one in 200, within the bound, reads "0.5%" in both."""
    folder = _sweep(tmp_path / "a", 2, loads=(1, 2))
    result = json.loads((folder / "sweep.json").read_text())
    for point, rate in zip(result["points"], (1 / 200, 1 / 96), strict=True):
        point["error_rate"] = rate
        point["slos"][1].update(observed=rate, met=rate <= 0.01)
    (folder / "sweep.json").write_text(json.dumps(result))
    code, output, page = _report(folder, out=tmp_path / "r.html")
    assert code == 0, output
    rows = re.findall(r"<tr(?: class=diff)?>(<td>.*?)</tr>", page)
    cells = [re.findall(r"<td>([^<]*)</td>", row) for row in rows]
    assert [(c[6], c[8]) for c in cells] == [("0.5%", "0.5%"), ("1.04%", "1.04% ✗")], cells


def test_loads_print_as_tried_not_rounded_to_four_digits(tmp_path):
    """A search bisected to speed 1.015625 printed it "1.016", a load never tried (its folder is
    speed-1.015625), in the table, the sentence and the knee; loads four digits hold print as before."""
    folder = _sweep(tmp_path / "a", 1.02, loads=(1, 1.015625, 1.03125, 2))
    page = _report(folder, out=tmp_path / "r.html")[2]
    sentence = re.search(r'<p class="verdict"><b>(.*?)</b>', page).group(1)
    assert "up to speed 1.015625 under the SLOs" in sentence and "between 1.015625 and 1.03125" in sentence, sentence
    rows = re.findall(r"<tr(?: class=diff)?>(<td>.*?)</tr>", page)
    assert [re.findall(r"<td>([^<]*)</td>", row)[0] for row in rows] == ["1", "1.015625", "1.03125", "2"]
    assert "1.016" not in page and "1.031<" not in page


def test_the_report_gives_the_commands_notes_on_each_point(tmp_path):
    """The report said nothing of requests the replayer cancelled in flight, nor of answers with no
    token count, which the command's notes say: it says them, worded as the command does."""
    from infertap.cli_sweep import notes

    folder = _sweep(tmp_path / "a", 2, loads=(1, 2, 4))
    result = json.loads((folder / "sweep.json").read_text())
    result["points"][2].update(cancelled=30, error_rate=0.3)
    result["points"][0].update(output_tokens_unknown=40, output_tokens_per_s=12.0)
    (folder / "sweep.json").write_text(json.dumps(result))
    page = _report(folder, out=tmp_path / "r.html")[2]
    said = [line for line in notes(result) if "cancelled" in line or "no output token count" in line]
    assert said == [
        "speed 1: 40 of 100 ok answers have no output token count (sent whole, with no usage): output tokens/s counts the others",
        "speed 4: 30 of its 100 requests were cancelled by the replayer in flight when it cut the point short: among its "
        "errors and over every bound, though the target sent no error for them",
    ]
    for line in said:
        assert f"<li>{html.escape(line)}</li>" in page
    plain = _report(_sweep(tmp_path / "b", 2, loads=(1, 2, 4)), out=tmp_path / "p.html")[2]
    assert "<li>" not in plain and "Notes:" not in plain  # nothing to say: nothing said


def test_passes_above_the_capacity_that_measured_nothing_leave_it_open(tmp_path):
    folder = _sweep(tmp_path / "a", 100, loads=(1, 2, 4))
    result = json.loads((folder / "sweep.json").read_text())
    result["points"][2]["unmeasured"] = ["requests waited in the replayer's --max-concurrency queue"]
    result["unmeasured"] = [{"speed": 4, "why": result["points"][2]["unmeasured"]}]
    result["capacity"]["speed"], result["knee"]["passed"] = 2, 2
    (folder / "sweep.json").write_text(json.dumps(result))
    alone = capacity_sentence(load_sweeps(folder))
    assert alone.endswith("higher loads passed without measuring the target (speed 4), so how much higher it goes is unknown."), (
        alone
    )


def test_a_warm_up_is_named_with_the_load_it_ran_at(tmp_path):
    """The warm-up runs at the first point's load: the report said "one at a time" of every one,
    which stays true only of a sweep.json written before (no load in its warm-up)."""
    a, b = _sweep(tmp_path / "a", 2, kind="concurrency"), _sweep(tmp_path / "b", 2, kind="concurrency")
    for folder, warmup in ((a, {"sent": 6, "concurrency": 2}), (b, {"sent": 3})):
        result = json.loads((folder / "sweep.json").read_text())
        (folder / "sweep.json").write_text(json.dumps({**result, "warmup": {**warmup, "out": "w", "ends": {}}}))
    code, output, page = _report(a, b, out=tmp_path / "r.html")
    assert code == 0, output
    assert "after a warm-up of 6 requests, at concurrency 2 (not judged)" in page
    assert "after a warm-up of 3 requests, one at a time (not judged)" in page


def test_the_points_table_scrolls_sideways_instead_of_cutting_its_cells(tmp_path):
    """With a column per SLO the table had some 15 columns inside the page's 1200 px, and the shared
    style's overflow-wrap:anywhere broke figures and words mid-way to fit ("0.33|33", "unkno|wn"):
    it now scrolls in a box of its own, its cells breaking at spaces only and its figures never."""
    slos = [E2E, {**E2E, "slo": "e2e:p99<=300ms", "stat": "p99"}, {**E2E, "slo": "e2e:p50<=120ms", "stat": "p50"}, ERRORS]
    a = _sweep(tmp_path / "a", 2.5, loads=(1 / 3, 1, 2, 2.5, 3, 4, 8), slos=slos)
    code, output, page = _report(a, out=tmp_path / "r.html")
    assert code == 0, output
    rules = dict(re.findall(r"([^{}]+)\{([^{}]*)\}", re.search(r"<style>(.*?)</style>", page, re.S).group(1)))
    box = re.search(r'<div class="(\w+)"><table><thead><tr><th>speed</th>', page).group(1)
    assert "overflow-x:auto" in rules[f".{box}"]
    assert "overflow-wrap:normal" in rules[f".{box} td,.{box} th"] and "white-space:nowrap" in rules[f".{box} td"]


def test_two_sweeps_alike_both_show_on_every_curve(tmp_path):
    """Where B's curve lay on A's (the same capacity, a shared stretch below the knee) it hid A
    wholly: A's curves are drawn wider, a rim around B's."""
    a, b = _sweep(tmp_path / "a", 2), _sweep(tmp_path / "b", 2)
    code, output, page = _report(a, b, out=tmp_path / "r.html")
    assert code == 0, output
    for label, svg in _plots(page).items():
        stroke = {
            title: float(w) for w, title in re.findall(r'stroke-width="([\d.]+)"[^>]*><title>([^<]*)</title></polyline>', svg)
        }
        for name in ("goodput", "achieved") if label.startswith("requests/s") else ("",):
            assert stroke[f"A {name}".strip()] > stroke[f"B {name}".strip()], label


def test_the_two_sweeps_are_told_apart_without_their_colours(tmp_path):
    """A and B differed by colour and width alone, and dashed already means achieved, hollow failed:
    A's points are circles and B's squares on every curve, and the legend and caption say so."""
    a, b = _sweep(tmp_path / "a", 2), _sweep(tmp_path / "b", 4)
    code, output, page = _report(a, b, out=tmp_path / "r.html")
    assert code == 0, output
    for label, svg in _plots(page).items():
        circles = set(re.findall(r"<circle[^>]*><title>(\w+)[ :]", svg))
        squares = set(re.findall(r"<rect[^>]*><title>(\w+)[ :]", svg))
        assert circles == {"A"} and squares == {"B"}, label  # must differ: one shape a run
        if label.startswith("requests/s"):  # dashed still achieved, on both runs alike
            dashed = set(re.findall(r'stroke-dasharray="5 3"[^>]*><title>([^<]*)</title>', svg))
            assert dashed == {"A achieved", "B achieved"}
    legend = re.search(r'<p class="legend">(.*?)</p>', page).group(1)
    assert "A: " in legend and "(circles)" in legend.split("B: ")[0] and "(squares)" in legend.split("B: ")[1]
    assert "A's points are circles, B's squares" in page
    # Must match: one sweep alone is drawn as A is, with circles, and no legend of shapes.
    code, output, alone = _report(a, out=tmp_path / "a.html")
    assert code == 0, output
    assert all("<rect" not in svg and "<circle" in svg for svg in _plots(alone).values())
    assert "circles" not in alone
