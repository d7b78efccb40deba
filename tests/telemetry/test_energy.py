"""Energy and engine state end to end: a workload replayed against a simulated engine
(tests/slot_engine.py) while the replay samples telemetry, then ``speed_stats``, ``compare`` and
the CLI read it back. The GPU is a stand-in (an nvidia-smi at a constant power, a DCGM exporter);
the replay, the capture, the analysis and the CLI are the real ones.

Expected values come from each run's own span (first send to last end) and output tokens: at a
constant power P the GPU drew P x span joules over the run, whatever the timing turned out to be.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.compare import compare
from infertap.analysis.compare_lines import NO_IDLE
from infertap.analysis.stats_energy import figure, measured_by
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.errors import ConfigError
from infertap.replay import ReplayConfig, run_replay
from tests.fake_upstream import ServerThread
from tests.helpers import REFUSED_OVER_LIMIT, write_capture
from tests.slot_engine import SlotEngine
from tests.telemetry.stand_ins import (
    DcgmExporter,
    Exposition,
    VllmGauges,
    WithoutMetrics,
    constant_gpus,
    gpus_on_path,
    no_gpu,
    nvidia_smi,
)

WATTS = 240.0
SMI_SOURCE = "GPU power samples, integrated (NVML, amdsmi or nvidia-smi)"


def chat(i: int) -> dict[str, Any]:
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"question {i}"}]}


def workload(path: Path, n: int, interval_s: float) -> Path:
    write_capture(path, [{"offset_s": i * interval_s, "body": chat(i)} for i in range(n)])
    return path


@pytest.fixture(scope="module", autouse=True)
def _cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INFERTAP_CACHE", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 streamed chats, one every 0.1 s: 10 a second, half what the engine carries."""
    return workload(tmp_path_factory.mktemp("src") / "src", 20, 0.1)


@pytest.fixture(scope="module")
def slot_engine() -> Iterator[tuple[WithoutMetrics, str]]:
    """4 slots of 0.2 s, 5 output tokens each, and no /metrics (as most engines)."""
    app = WithoutMetrics(SlotEngine(4, 0.2))
    with ServerThread(app) as server:
        yield app, server.url


def replay(
    folder: Path,
    capture: Path,
    target: str,
    *,
    watts: float | None = None,
    exporter: str | None = None,
    telemetry: bool = True,
) -> Path:
    """``capture`` replayed at its original timing with a stand-in GPU drawing ``watts`` (None:
    no GPU telemetry at all), sampling ``exporter`` too when given; the replay's capture."""
    folder.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        if watts is None:
            no_gpu(mp, folder)
        else:
            gpus_on_path(mp, folder, nvidia_smi(folder / "bin", constant_gpus(watts)))
        out = folder / "out"
        config = ReplayConfig(
            capture, target, out, probe=False, telemetry=telemetry, telemetry_urls=(exporter,) if exporter else ()
        )
        summary = run_replay(config)
    assert summary["completed"] == summary["sent"] and summary["ends"] == {"complete": summary["sent"]}
    return out


def stats(out: Path) -> dict[str, Any]:
    with Analysis([out]) as a:
        [group] = speed_stats(a)["groups"]
    return group


def measured(out: Path) -> tuple[float, int, int]:
    """The run's own span (s), output tokens and completed requests, from its exchanges."""
    with Analysis([out]) as a:
        first, last, tokens, ok = a.sql(
            "SELECT min(sent_wall_ns), max(end_wall_ns), sum(output_tokens) FILTER (WHERE ok), count(*) FILTER (WHERE ok) FROM metrics"
        ).fetchall()[0]
    return (last - first) / 1e9, int(tokens), int(ok)


def telemetry_records(out: Path) -> list[dict[str, Any]]:
    return [r for r in CaptureReader(out).records() if r["type"] == "telemetry"]


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def full(tmp_path_factory, source, slot_engine) -> Path:
    return replay(tmp_path_factory.mktemp("full"), source, slot_engine[1], watts=WATTS)


@pytest.fixture(scope="module")
def half(tmp_path_factory, source, slot_engine) -> Path:
    return replay(tmp_path_factory.mktemp("half"), source, slot_engine[1], watts=WATTS / 2)


@pytest.fixture(scope="module")
def dark(tmp_path_factory, source, slot_engine) -> Path:
    """No NVML, no nvidia-smi, no RAPL: a machine with no power telemetry."""
    return replay(tmp_path_factory.mktemp("dark"), source, slot_engine[1], watts=None)


@pytest.fixture(scope="module")
def dcgm_power(tmp_path_factory, source, slot_engine) -> Path:
    """The GPU seen only through a DCGM exporter reporting its power (no energy counter)."""
    with ServerThread(DcgmExporter(180.0, energy_counter=False)) as exporter:
        return replay(tmp_path_factory.mktemp("dcgm"), source, slot_engine[1], watts=None, exporter=exporter.url + "/metrics")


# -- energy per output token -------------------------------------------------------------------------


def test_energy_per_output_token_is_power_times_span_over_tokens(full):
    span_s, tokens, ok = measured(full)
    assert (tokens, ok) == (100, 20)  # 20 requests of 5 tokens: the engine's own count, from usage
    energy = stats(full)["energy"]
    assert energy["source"] == SMI_SOURCE and energy["devices"] == 1
    assert energy["mean_watts"] == pytest.approx(WATTS, rel=0.02)
    assert energy["joules"] == pytest.approx(WATTS * span_s, rel=0.02)
    assert energy["joules_per_output_token"] == pytest.approx(WATTS * span_s / tokens, rel=0.02)
    assert energy["joules_per_request"] == pytest.approx(WATTS * span_s / ok, rel=0.02)
    # No request continues another here: each is a session of its own (docs/metrics.md, Sessions).
    assert energy["watt_hours_per_session"] == pytest.approx(WATTS * span_s / 3600 / ok, rel=0.02)


def test_half_the_power_is_half_the_energy_per_token_and_compare_says_so(full, half):
    span_f, tokens_f, _ = measured(full)
    span_h, tokens_h, _ = measured(half)
    ef, eh = stats(full)["energy"], stats(half)["energy"]
    assert eh["mean_watts"] == pytest.approx(WATTS / 2, rel=0.02)
    assert eh["joules_per_output_token"] == pytest.approx(WATTS / 2 * span_h / tokens_h, rel=0.02)
    # Must differ: half the power, half the energy per token (up to the two runs' spans).
    expected = 0.5 * (span_h / tokens_h) / (span_f / tokens_f)
    assert eh["joules_per_output_token"] / ef["joules_per_output_token"] == pytest.approx(expected, rel=0.02)
    assert expected == pytest.approx(0.5, rel=0.05)
    result = compare(full, half)["energy"]
    assert result["same_source"] is True
    assert result["ratio_joules_per_output_token"] == pytest.approx(expected, rel=0.02)
    assert result["ratio_joules_per_output_token"] == pytest.approx(0.5, rel=0.05)
    assert result["ratio_mean_watts"] == pytest.approx(0.5, rel=0.02)
    # Must match: a run against itself.
    itself = compare(full, full)["energy"]
    assert itself["same_source"] is True
    assert itself["ratio_joules_per_output_token"] == pytest.approx(1.0, abs=1e-9)
    assert itself["ratio_joules_per_request"] == pytest.approx(1.0, abs=1e-9)


def test_compare_prints_energy_beside_speed(full, half):
    output = " ".join(invoke("compare", str(full), str(half)).split())  # rich wraps at the terminal's width
    per_token_a = float(output.split("energy A: ")[1].split(" J per output token")[0])
    assert per_token_a == pytest.approx(stats(full)["energy"]["joules_per_output_token"], rel=0.01)
    assert "240 W mean, " in output and "120 W mean, " in output and output.count(f"({SMI_SOURCE}, 1 device(s))") == 2
    ratio = float(output.split("energy B/A: ")[1].split("x per output token")[0])
    assert ratio == pytest.approx(0.5, rel=0.05)
    assert "different sources" not in output
    as_json = json.loads(invoke("compare", str(full), str(half), "--json"))
    assert as_json["energy"]["ratio_joules_per_output_token"] == pytest.approx(ratio, abs=0.001)


# -- a DCGM exporter ----------------------------------------------------------------------------------


def test_a_dcgm_exporters_power_is_integrated_when_there_is_no_other_gpu_telemetry(dcgm_power):
    span_s, tokens, _ = measured(dcgm_power)
    energy = stats(dcgm_power)["energy"]
    assert energy["source"] == "GPU power samples, integrated (DCGM exporter)"
    assert "DCGM" in energy["source"] and energy["devices"] == 1
    assert energy["joules"] == pytest.approx(180.0 * span_s, rel=0.02)
    assert energy["joules_per_output_token"] == pytest.approx(180.0 * span_s / tokens, rel=0.02)
    with Analysis([dcgm_power]) as a:
        sources = dict(
            a.sql("SELECT source, count(*) FILTER (WHERE name = 'DCGM_FI_DEV_POWER_USAGE') FROM telemetry GROUP BY 1").fetchall()
        )
    assert sources["exporter"] >= 2 and "gpu" in sources  # the gpu source: one row saying why it is unknown


def test_the_exporters_scraped_are_recorded_redacted_and_shown_beside_the_figures(record, fake, slot_engine, tmp_path):
    """--telemetry-url is in the run's header, its credentials redacted as an upstream's, and info,
    stats and the claim card say where the figures came from; a run without telemetry names none."""
    with ServerThread(DcgmExporter(180.0)) as exporter:
        port = exporter.url.rsplit(":", 1)[1]
        asked = f"http://user:s3cr3tpass@127.0.0.1:{port}/metrics?token=t0k3nvalue&gpu=0"
        shown = f"http://user:REDACTED@127.0.0.1:{port}/metrics?token=[REDACTED]&gpu=0"
        rec = record(fake[1], "--no-probe", "--telemetry-interval", "0.1", "--telemetry-url", asked, name="rec")
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10).status_code == 200
        assert rec.stop() == 0
        src = workload(tmp_path / "src", 3, 0.1)
        replayed = tmp_path / "replayed"
        with pytest.MonkeyPatch.context() as mp:
            no_gpu(mp, tmp_path)
            run_replay(ReplayConfig(src, slot_engine[1], replayed, probe=False, telemetry_urls=(asked,)))
        off = tmp_path / "off"
        run_replay(ReplayConfig(src, slot_engine[1], off, probe=False, telemetry=False, telemetry_urls=(asked,)))
    for capture in (rec.out, replayed):
        records = list(CaptureReader(capture).records())
        assert [r["recorder"]["telemetry_urls"] for r in records if r["type"] == "header"] == [[shown]]
        every = 0.1 if capture == rec.out else 0.25  # --telemetry-interval, else its default: analysis judges gaps by it
        intervals = [r["recorder"]["telemetry_intervals_s"] for r in records if r["type"] == "header"]
        assert intervals == [{"gpu": every, "host": every, "engine": 1.0, "exporter": 1.0}]
        assert "s3cr3tpass" not in repr(records) and "t0k3nvalue" not in repr(records)
        assert any(r["type"] == "telemetry" and r["source"] == "exporter" and r["samples"] for r in records)
        assert json.loads(invoke("info", str(capture), "--json"))["telemetry_urls"] == [shown]
        assert shown in "".join(invoke("info", str(capture)).split())  # folded, whole
        assert stats(capture)["telemetry_urls"] == [shown]
        assert f"telemetry scraped (--telemetry-url): {shown}" in invoke("stats", str(capture))
        assert json.loads(invoke("claim", str(capture), "--json"))["figures"]["telemetry_urls"] == [shown]
        assert f"telemetry scraped from {shown}" in " ".join(invoke("claim", str(capture)).split())
    # Telemetry off: nothing scraped, nothing named.
    [header] = [r for r in CaptureReader(off).records() if r["type"] == "header"]
    assert "telemetry_urls" not in header["recorder"] and stats(off)["telemetry_urls"] == []
    assert "telemetry scraped" not in invoke("stats", str(off)) and "telemetry scraped" not in invoke("claim", str(off))
    assert json.loads(invoke("info", str(off), "--json"))["telemetry_urls"] == []


def test_runs_measured_by_different_sources_are_flagged(full, dcgm_power):
    result = compare(full, dcgm_power)["energy"]
    assert result["same_source"] is False
    assert result["ratio_mean_watts"] == pytest.approx(180.0 / WATTS, rel=0.02)
    output = " ".join(invoke("compare", str(full), str(dcgm_power)).split())
    assert "(measured by different sources: compare with care)" in output
    assert "180 W mean, " in output and "J in all (GPU power samples, integrated (DCGM exporter), 1 device(s))" in output


def test_compare_names_each_sides_exporters_and_says_when_the_kinds_of_source_differ(full, half, dcgm_power, dark, tmp_path):
    """An exporter's readings against nvidia-smi's, or against none, are not like for like: compare
    says so, naming the exporter scraped; two runs measured alike: nothing said; neither measured:
    said plainly, and no sources called alike or unlike (same_source null, not false)."""
    [url] = stats(dcgm_power)["telemetry_urls"]
    also_dark = tmp_path / "also-dark"  # another capture of no power telemetry
    (shutil.copytree if dark.is_dir() else shutil.copyfile)(dark, also_dark)
    for a, b, kinds, says in (
        (full, dcgm_power, (["NVML or nvidia-smi"], ["DCGM exporter"]), f"B's from DCGM exporter ({url})"),
        (dark, full, ([], ["NVML or nvidia-smi"]), "A's energy is from none (no power telemetry of its engine)"),
        (full, half, (["NVML or nvidia-smi"], ["NVML or nvidia-smi"]), None),
        (dark, also_dark, ([], []), None),
    ):
        result = json.loads(invoke("compare", str(a), str(b), "--json"))["energy"]
        assert (result["kinds"]["a"], result["kinds"]["b"]) == kinds
        measured = {(True, True): "both", (True, False): "a", (False, True): "b", (False, False): "neither"}
        assert result["measured"] == measured[bool(kinds[0]), bool(kinds[1])]
        assert result["same_source"] == (None if result["measured"] == "neither" else set(kinds[0]) == set(kinds[1]))
        assert ("neither run measured energy" in " ".join(invoke("compare", str(a), str(b)).split())) == (b == also_dark)
        assert [result["telemetry_urls"][s] for s in "ab"] == [stats(a)["telemetry_urls"], stats(b)["telemetry_urls"]]
        text = " ".join(invoke("compare", str(a), str(b)).split())
        assert (says is None) == (result["unlike"] is None) and ("not like for like" in text) == (says is not None)
        if says:
            assert says in result["unlike"] and f"energy: {result['unlike']}" in text
    text = " ".join(invoke("compare", str(full), str(dcgm_power)).split())
    assert f"energy B: telemetry scraped (--telemetry-url): {url}" in text and "energy A: telemetry scraped" not in text


def test_a_dcgm_energy_counter_is_preferred_and_gives_rate_times_span(tmp_path, slot_engine):
    src = workload(tmp_path / "src", 8, 0.2)  # 1.6 s of traffic: the run ends well after a 1 s round
    rate_watts = 300.0
    exporter_app = DcgmExporter(rate_watts)  # its counter rises 300 000 mJ a second
    with ServerThread(exporter_app) as exporter:
        out = replay(tmp_path / "run", src, slot_engine[1], watts=None, exporter=exporter.url + "/metrics")
    span_s, tokens, _ = measured(out)
    energy = stats(out)["energy"]
    assert energy["source"] == "GPU energy counter (DCGM exporter)"
    assert energy["joules"] == pytest.approx(rate_watts * span_s, rel=0.03)
    assert energy["joules_per_output_token"] == pytest.approx(rate_watts * span_s / tokens, rel=0.03)


# -- no power telemetry, no telemetry ------------------------------------------------------------------


def test_without_power_telemetry_energy_is_unknown_and_the_cli_says_so(dark, full):
    group = stats(dark)
    assert group["energy"] is None and group["engine_state"] is None
    with Analysis([dark]) as a:
        rows = a.sql("SELECT source, name, unknown FROM telemetry WHERE source = 'gpu'").fetchall()
    assert len(rows) == 1 and rows[0][1] is None and "no nvidia-smi on PATH" in rows[0][2]
    said = invoke("stats", str(dark))
    assert "energy: no power telemetry (a GPU through NVML or nvidia-smi, a DCGM exporter, or RAPL)" in said
    # Must differ: with a GPU, the same command prints the energy line instead.
    said = invoke("stats", str(full))
    assert "energy: no power telemetry" not in said
    [line] = [x for x in said.splitlines() if x.strip().startswith("energy (")]
    assert f"energy ({SMI_SOURCE}, 1 device(s))" in line and f"mean_watts {WATTS:.1f}" in line
    assert "engine: kv_cache_usage_max" not in said  # this engine has no /metrics: no engine state
    as_json = json.loads(invoke("stats", str(dark), "--json"))
    assert as_json["groups"][0]["energy"] is None


def test_no_telemetry_means_no_telemetry_records_and_no_metrics_asked(tmp_path, source, slot_engine, full):
    app, url = slot_engine
    asked = app.metrics_asked
    with pytest.MonkeyPatch.context() as mp:
        gpus_on_path(mp, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(WATTS)))
        out = tmp_path / "off"
        invoke("replay", str(source), "--target", url, "--out", str(out), "--no-probe", "--no-telemetry", "--json")
    assert app.metrics_asked == asked, "--no-telemetry: the engine's /metrics is never asked"
    assert telemetry_records(out) == []
    assert len([r for r in CaptureReader(out).records() if r["type"] == "exchange"]) == 20
    assert stats(out)["energy"] is None
    assert json.loads(invoke("sql", "-q", "SELECT count(*) AS n FROM telemetry", str(out), "--json")) == [{"n": 0}]
    # Must differ: telemetry on (the default), the same workload has records from every source.
    assert {r["source"] for r in telemetry_records(full)} == {"engine", "gpu", "host"}


def test_the_telemetry_table_in_infertap_sql(full):
    query = "SELECT source, count(*) AS n, count(name) AS named, count(unknown) AS unknown FROM telemetry GROUP BY 1 ORDER BY 1"
    rows = {r["source"]: r for r in json.loads(invoke("sql", query, str(full), "--json"))}
    assert set(rows) == {"engine", "gpu", "host"}
    # The engine (no /metrics): one row saying why, no samples.
    assert rows["engine"] == {"source": "engine", "n": 1, "named": 0, "unknown": 1}
    assert rows["gpu"]["named"] == rows["gpu"]["n"] >= 6 * 2  # six readings a round, a round each 0.25 s
    assert rows["host"]["named"] >= 2 and rows["host"]["unknown"] == 0
    power = json.loads(
        invoke(
            "sql",
            "-q",
            "SELECT device, min(value) AS lo, max(value) AS hi, count(*) AS n FROM telemetry WHERE name = 'gpu_power_watts' GROUP BY 1",
            str(full),
            "--json",
        )
    )
    assert len(power) == 1 and power[0]["device"] == "0" and power[0]["lo"] == power[0]["hi"] == WATTS
    reason = json.loads(invoke("sql", "-q", "SELECT unknown FROM telemetry WHERE source = 'engine'", str(full), "--json"))
    assert reason[0]["unknown"].endswith("/metrics answered 404")  # the fake engine serves none: no flag to name
    # Joinable with exchanges on wall time: samples were taken while the requests ran.
    [row] = json.loads(
        invoke(
            "sql",
            "-q",
            "SELECT count(*) AS during FROM telemetry t, (SELECT min(sent_wall_ns) a, max(end_wall_ns) b FROM metrics) m "
            "WHERE t.name = 'gpu_power_watts' AND t.wall_ns BETWEEN m.a AND m.b",
            str(full),
            "--json",
        )
    )
    assert row["during"] >= 4  # a 2 s run sampled each 0.25 s


def test_exporters_that_cannot_be_read_are_recorded_as_such_and_nothing_is_lost(tmp_path, source, slot_engine):
    page = Exposition("<html><body>Grafana login</body></html>")
    with ServerThread(page) as html:
        with pytest.raises(ConfigError, match="--telemetry-url 'gpu-node:9400/metrics': an http"):
            ReplayConfig(source, slot_engine[1], tmp_path / "refused", telemetry_urls=("gpu-node:9400/metrics",))
        assert not (tmp_path / "refused").exists()  # refused before anything was written or sent
        exporters = (html.url + "/metrics", "http://127.0.0.1:1/metrics")
        with pytest.MonkeyPatch.context() as mp:
            gpus_on_path(mp, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(WATTS)))
            out = tmp_path / "out"
            summary = run_replay(ReplayConfig(source, slot_engine[1], out, probe=False, telemetry_urls=exporters))
    assert summary["completed"] == 20 and summary["ends"] == {"complete": 20}
    reasons = [r["unknown"] for r in telemetry_records(out) if r["source"] == "exporter"]
    assert len(reasons) == 2, reasons  # one each: a source is retried each 30 s, and recorded once per reason
    assert any(r.startswith(f"{html.url}/metrics: not Prometheus text") for r in reasons), reasons
    assert any(r.startswith("http://127.0.0.1:1/metrics: ") for r in reasons), reasons
    assert not [r for r in telemetry_records(out) if r["source"] == "exporter" and r["samples"]]
    span_s, tokens, _ = measured(out)
    assert stats(out)["energy"]["joules_per_output_token"] == pytest.approx(WATTS * span_s / tokens, rel=0.02)
    shown = invoke("stats", str(out))  # named as scraped, and said why it gave nothing
    assert f"telemetry scraped (--telemetry-url): {html.url}/metrics, http://127.0.0.1:1/metrics" in shown
    assert f"telemetry unread: exporter: {html.url}/metrics: not Prometheus text" in shown
    assert "telemetry unread: exporter: http://127.0.0.1:1/metrics: " in shown


def test_stats_says_why_telemetry_is_missing_as_the_recorder_recorded_it(tmp_path, source, slot_engine, full):
    with pytest.MonkeyPatch.context() as mp:
        gpus_on_path(mp, tmp_path, nvidia_smi(tmp_path / "bin", ["NVIDIA-SMI couldn't find libnvidia-ml.so library"]))
        out = tmp_path / "out"
        run_replay(ReplayConfig(source, slot_engine[1], out, probe=False))
    group = stats(out)
    assert group["energy"] is None
    assert any(why.startswith("gpu: nvidia-smi answered what is not its --query-gpu CSV") for why in group["telemetry_unread"])
    assert "telemetry unread: gpu: nvidia-smi answered what is not its --query-gpu CSV: \"NVIDIA-SMI couldn't" in invoke(
        "stats", str(out)
    )
    assert not [why for why in stats(full)["telemetry_unread"] if why.startswith("gpu:")]  # a GPU read throughout: none
    assert "telemetry unread: gpu" not in invoke("stats", str(full))


@pytest.mark.parametrize("interval", ["0", "-1"])
def test_a_telemetry_interval_that_is_not_positive_is_refused(tmp_path, slot_engine, interval):
    src = workload(tmp_path / "src", 1, 0.1)
    out = tmp_path / "out"
    with pytest.MonkeyPatch.context() as mp:
        no_gpu(mp, tmp_path)
        result = CliRunner().invoke(
            cli,
            ["replay", str(src), "--target", slot_engine[1], "--out", str(out), "--no-probe", "--telemetry-interval", interval],
        )
    assert result.exit_code == 2, f"accepted; {len(telemetry_records(out))} telemetry records for one request"
    assert "--telemetry-interval" in result.output
    assert not out.exists()


# -- engine state ----------------------------------------------------------------------------------------


def test_engine_state_shows_a_queue_only_when_the_engine_is_overloaded(tmp_path):
    slots = 4
    app = VllmGauges(SlotEngine(slots, 0.2), slots)
    with ServerThread(app) as server:
        calm = replay(tmp_path / "calm", workload(tmp_path / "calm-src", 20, 0.1), server.url, watts=WATTS)
        # 40 requests in 0.8 s: 50 a second against a capacity of 20, a queue for about 2 s.
        busy = replay(tmp_path / "busy", workload(tmp_path / "busy-src", 40, 0.02), server.url, watts=WATTS)
    calm_state, busy_state = stats(calm)["engine_state"], stats(busy)["engine_state"]
    assert calm_state["requests_waiting_max"] == 0.0
    assert busy_state["requests_waiting_max"] >= 5.0
    assert 0.0 < calm_state["kv_cache_usage_max"] <= 1.0
    assert busy_state["kv_cache_usage_max"] == 1.0
    assert busy_state["preemptions"] is None and busy_state["prefix_cache_hit_rate"] is None  # not exposed
    said = invoke("stats", str(busy))
    [line] = [x for x in said.splitlines() if x.strip().startswith("engine: kv_cache_usage_max")]
    assert "kv_cache_usage_max 1.000" in line and f"requests_waiting_max {busy_state['requests_waiting_max']:,.1f}" in line
    differs = {row["name"]: (row["a"], row["b"]) for row in compare(calm, busy)["config"]["engine_state"]}
    assert differs["requests_waiting_max"] == (0.0, busy_state["requests_waiting_max"])  # a cause, listed before speed
    assert compare(calm, calm)["config"]["engine_state"] == []  # the same run: nothing differs
    assert "engine state differs: requests_waiting_max A 0" in invoke("compare", str(calm), str(busy))


def test_record_samples_telemetry_unless_told_not_to(record, fake, tmp_path, monkeypatch):
    app, url = fake
    exe = nvidia_smi(tmp_path / "bin", constant_gpus(WATTS))
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")  # for the recorder's process
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for name, extra in (("on", ()), ("off", ("--no-telemetry",))):
        asked = app.metrics_asked
        rec = record(url, "--telemetry-interval", "0.1", *extra, name=name)
        assert httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10).status_code == 200
        rec.stop()
        assert len(rec.exchanges()) == 1
        telemetry = [r for r in rec.records() if r["type"] == "telemetry"]
        if name == "off":
            assert telemetry == [] and app.metrics_asked == asked
        else:
            assert app.metrics_asked > asked
            assert {r["source"] for r in telemetry} >= {"engine", "host"}
            [engine] = [r for r in telemetry if r["source"] == "engine"]
            assert engine["samples"] == [] and "answered 404" in engine["unknown"]


# -- the report ------------------------------------------------------------------------------------------


def test_the_report_draws_power_over_time_for_each_run_and_says_when_there_is_none(tmp_path, full, half, dark):
    from infertap.analysis.report import render

    both = render(full, half)
    section = both.split("What the engine and the machine did", 1)[1]
    power = section.split("<h3>power over time</h3>", 1)[1].split("</svg>", 1)[0]
    lines = re.findall(r'<polyline[^>]*stroke="([^"]+)"[^>]*points="([^"]+)"', power)
    assert len(lines) == 2 and lines[0][0] != lines[1][0]  # one line per run, in the runs' colors
    strokes = [float(w) for w in re.findall(r'<polyline[^>]*stroke-width="([\d.]+)"', power)]
    assert strokes[0] > strokes[1]  # A's wider: where B's line lies on it, A still shows
    heights = [{float(p.split(",")[1]) for p in pts.split()} for _, pts in lines]
    assert all(len(h) == 1 for h in heights)  # constant power draws a flat line...
    assert heights[0] != heights[1]  # ...at a different height for half the power
    assert "GPU power samples" in power
    alone = render(dark)
    assert "No power, KV cache or queue telemetry in these runs" in alone
    assert "<h3>power over time</h3>" not in alone
    # The recording machine's own GPU, in front of a remote engine, is not the engine's power: not drawn.
    samples = [(t, 120.0) for t in range(0, 4001, 250)]
    remote = _spans_and_power(tmp_path / "remote", [(0, 4000)], samples, upstream="http://gpu-node:8000")
    assert "<h3>power over time</h3>" not in render(remote)
    assert "<h3>power over time</h3>" in render(_spans_and_power(tmp_path / "here", [(0, 4000)], samples))


# -- idle power ----------------------------------------------------------------------------------------


def _spans_and_power(
    path: Path, busy_ms: list[tuple[float, float]], samples: list[tuple[float, float]], upstream: str = "http://127.0.0.1:8080"
) -> Path:
    """A capture with one exchange per busy span and GPU power samples at (ms, watts), on the capture's own clock."""
    from infertap.capture.records import new_telemetry
    from infertap.capture.writer import CaptureWriter
    from tests.analysis_builders import exchange, sse

    with CaptureWriter(path, recorder={"kind": "test"}) as writer:
        wall = writer.started_wall
        for i, (start, end) in enumerate(busy_ms):
            chunks = [(1.0, sse({"choices": [{"index": 0, "delta": {"content": "x"}}]}, "[DONE]"))]
            writer.write(exchange(f"x{i}", sent_ms=start, chunks=chunks, end_ms=end - start, seq=i, upstream=upstream))
        for at, watts in samples:
            writer.write(new_telemetry("gpu", wall + at / 1e3, [["gpu_power_watts", {"gpu": "0"}, watts]]))
    return path


def test_idle_watts_are_the_samples_taken_while_nothing_was_in_flight(tmp_path):
    # Two requests, 0-1000 ms and 3000-4000 ms; 300 W while they run, 50 and 70 W between them.
    samples = [(500, 300.0), (2000, 50.0), (2500, 70.0), (3500, 300.0), (4000, 300.0)]
    gap = _spans_and_power(tmp_path / "gap", [(0, 1000), (3000, 4000)], samples)
    energy = stats(gap)["energy"]
    assert energy["source"] == SMI_SOURCE
    # Only the gap's samples count, each for the time it stands for: 50 W from 1250 to 2250 ms
    # (half way to each neighbour), 70 W from 2250 ms to the gap's end at 3000 ms.
    idle = (50.0 * 1000 + 70.0 * 750) / 1750
    assert energy["idle_watts"] == pytest.approx(idle)
    # Must match the busy case: one request spanning every sample leaves no idle sample at all.
    covered = _spans_and_power(tmp_path / "covered", [(0, 4000)], samples)
    assert stats(covered)["energy"]["idle_watts"] is None
    # The same in compare, side by side.
    result = compare(gap, covered)["energy"]
    assert result["a"]["idle_watts"] == pytest.approx(idle)
    assert result["b"]["idle_watts"] is None


#: compare's words for each figure stats prints on its energy line: (stats' key, what follows the number).
COMPARED_FIGURES = (
    ("joules_per_output_token", " J per output token"),
    ("joules_per_request", " J per request"),
    ("mean_watts", " W mean"),
    ("idle_watts", " W idle"),
    ("watt_hours_per_session", " Wh per session"),
    ("joules", " J in all"),
)


def _compared_figures(line: str) -> dict[str, float | None]:
    """compare's energy line of one side, figure by figure (None: "unknown", or idle power unknown)."""
    said: dict[str, float | None] = {}
    for key, unit in COMPARED_FIGURES:
        found = re.search(rf"(?:^|, )(unknown|\d[\d,]*(?:\.\d+)?){re.escape(unit)}", line)
        said[key] = None if found is None or found.group(1) == "unknown" else float(found.group(1).replace(",", ""))
    return said


def test_compares_energy_lines_carry_each_figure_stats_energy_line_carries(tmp_path, full, half):
    # compare's energy line gave J per output token, J per request and mean W: no idle W, no Wh per
    # session, no joules nor device count, which stats prints on its line for the same capture.
    samples = [(500, 300.0), (2000, 50.0), (2500, 70.0), (3500, 300.0), (4000, 300.0)]
    gap = _spans_and_power(tmp_path / "gap", [(0, 1000), (3000, 4000)], samples)
    covered = _spans_and_power(tmp_path / "covered", [(0, 4000)], samples)
    for a, b in ((gap, covered), (full, half)):
        printed = " ".join(invoke("compare", str(a), str(b)).split())  # rich wraps at the terminal's width
        for side, run in (("A", a), ("B", b)):
            line = printed.split(f"energy {side}: ")[1].split(" energy ")[0]
            energy, stated = stats(run)["energy"], _stats_energy(run)
            assert f"({measured_by(energy)})" in line and f"({measured_by(energy)})" in stated  # source, 1 device(s)
            said = _compared_figures(line)
            for key, _ in COMPARED_FIGURES:  # compare's 3 significant digits, stats' own figure
                assert said[key] == (None if energy[key] is None else pytest.approx(energy[key], rel=5e-3)), (key, line)
                assert f"{key} -" in stated if energy[key] is None else f"{key} {figure(energy, key)}" in stated
    # Must differ: idle power between A's two requests, none on B, busy all along (stats' "-").
    line = " ".join(invoke("compare", str(gap), str(covered)).split())
    idle = (50.0 * 1000 + 70.0 * 750) / 1750
    assert f"energy A: unknown J per output token, unknown J per request, 194 W mean, {idle:.1f} W idle, 0.108 Wh" in line
    assert f"{NO_IDLE}, 0.216 Wh per session" in line.split("energy B: ")[1]
    # Must match: the same capture on both sides states the same figures.
    itself = " ".join(invoke("compare", str(full), str(full)).split())
    assert itself.split("energy A: ")[1].split(" energy ")[0] == itself.split("energy B: ")[1].split(" energy ")[0]


def _report_lines(tmp_path: Path, a: Path, b: Path, heading: str) -> list[str]:
    """The paragraphs of the report's section under ``heading``, as text."""
    out = tmp_path / f"{a.parent.name}-{b.parent.name}.html"
    invoke("report", str(a), str(b), "-o", str(out))
    section = out.read_text().split(f"<h3>{heading}</h3>")[1].split("<h3>")[0]
    return [html.unescape(p) for p in re.findall(r"<p[^>]*>(.*?)</p>", section)]


def _figure(line: str, before: str, after: str) -> float:
    return float(line.split(before)[1].split(after)[0].replace(",", ""))


def test_the_report_gives_each_sides_energy_once_in_its_table_and_compares_other_lines(full, half, dark, tmp_path):
    # The A/B report gave each side's figures twice: compare's "energy A: ..." lines, then the table
    # of the same figures under them. Once now, in the table (as stats states them), no figure of
    # compare's lines lost; compare's B/A line, and why neither run measured any, stay as it prints them.
    as_json = json.loads(invoke("compare", str(full), str(half), "--json"))["energy"]
    printed = " ".join(invoke("compare", str(full), str(half)).split())  # rich wraps at the terminal's width
    section = _energy_section(tmp_path, full, half)
    rows = _energy_rows(section)
    lines = [html.unescape(p) for p in re.findall(r"<p[^>]*>(.*?)</p>", section)]
    for i, (side, run) in enumerate((("a", full), ("b", half))):
        said = _compared_figures(printed.split(f"energy {side.upper()}: ")[1].split(" energy ")[0])
        for key, _ in COMPARED_FIGURES:  # each figure of compare's line, in the table to stats' decimals
            cell = rows[key][i]
            assert cell == _stats_figures(run)[key], (key, cell)
            if said[key] is None:
                assert cell == "-", key
            else:
                assert float(cell.replace(",", "")) == pytest.approx(said[key], rel=5e-3, abs=0.51 * 10 ** -STATS_FIGURES[key]), (
                    key
                )
        assert rows["measured by"][i] == measured_by(as_json[side]) and f"({measured_by(as_json[side])})" in printed
        assert not [x for x in lines if x.startswith(f"energy {side.upper()}: ")], lines  # not in a line as well
    ratio = next(x for x in lines if x.startswith("energy B/A: "))
    assert _figure(ratio, "B/A: ", "x per output token") == pytest.approx(as_json["ratio_joules_per_output_token"], rel=5e-3)
    assert _figure(ratio, "token, ", "x per request") == pytest.approx(as_json["ratio_joules_per_request"], rel=5e-3)
    assert ratio in printed
    assert as_json["ratio_joules_per_output_token"] == pytest.approx(0.5, rel=0.05)  # must differ: half the power
    # One side measured: its figures in the table, the other's reason in its column, each once.
    one = _energy_section(tmp_path, full, dark)
    rows = _energy_rows(one)
    assert rows["joules"][1] == "-" and rows["measured by"][1].startswith("energy: no power telemetry (")
    assert not re.findall(r"<p[^>]*>energy [AB]: ", one)
    # Must match: compare's words where neither run measured energy, and why; no table.
    neither = _report_lines(tmp_path, dark, dark, "Energy and the engines&#x27; state")
    assert "<table>" not in _energy_section(tmp_path, dark, dark)
    assert neither[0] == (
        "energy: neither run measured energy: no power telemetry in either run (a GPU through NVML or nvidia-smi, "
        "a DCGM exporter, or RAPL)"
    )
    printed = " ".join(invoke("compare", str(dark), str(dark)).split())
    assert neither[0] in printed


def _report_energy(tmp_path: Path, run: Path) -> str:
    """The energy clause of the claim card's figures in the one-run report of ``run``, as text."""
    out = tmp_path / f"{run.parent.name}.html"
    invoke("report", str(run), "-o", str(out))
    [figures] = re.findall(r"<td>figures</td><td>([^<]*)</td>", out.read_text())
    return html.unescape(figures).split("; energy", 1)[1]


def _stats_energy(run: Path) -> str:
    [line] = [x for x in invoke("stats", str(run)).splitlines() if x.strip().startswith("energy")]
    return line.strip()


def test_a_one_run_report_states_the_energy_stats_states(full, half, dark, tmp_path):
    # A one-run report gives its energy in the claim card's figures only, worded by claim, and nothing
    # held it to stats' own figures for the same capture and the same stand-in GPU.
    said = {}
    for run in (full, half):
        report, stats_line = _report_energy(tmp_path, run), _stats_energy(run)
        figures = {
            "joules": _figure(report, " ", " J,"),
            "joules_per_request": _figure(report, "J, ", " J/request"),
            "joules_per_output_token": _figure(report, "J/request, ", " J/output token"),
            "mean_watts": _figure(report, "J/output token, ", " W mean"),
        }
        for key, value in figures.items():  # the report's 4 significant digits against stats' decimals
            assert value == pytest.approx(_figure(stats_line, f"{key} ", ","), rel=1e-3), (key, report, stats_line)
            assert value == pytest.approx(stats(run)["energy"][key], rel=1e-3), key
        assert f"({SMI_SOURCE})" in report and f"({SMI_SOURCE}, 1 device(s))" in stats_line
        said[run] = figures
    # Must differ: half the power, half the energy per token, in the report as in stats.
    assert said[half]["joules_per_output_token"] / said[full]["joules_per_output_token"] == pytest.approx(0.5, rel=0.05)
    # Must match: neither measured any energy, and both say why in the same words.
    assert _report_energy(tmp_path, dark) == ": no power telemetry"
    assert _stats_energy(dark).startswith("energy: no power telemetry (")


def test_a_replay_lists_the_machines_gpus_as_the_recorder_does(source, slot_engine, tmp_path, monkeypatch):
    """A replay's run header lists this machine's GPUs, as record's does (the RAPL rule reads it):
    none where there is no nvidia-smi (must match), the stand-in's two where there is one."""
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an nvidia-smi: the must-match case needs none")
    hosts = {}
    for name in ("none", "listed"):
        if name == "listed":  # two GPUs whose power query answers nothing: no GPU sample
            exe = nvidia_smi(tmp_path / "bin", [], gpus=2)
            monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
        out = tmp_path / name
        run_replay(ReplayConfig(source, slot_engine[1], out, probe=False, limit=2, telemetry_interval_s=0.1))
        hosts[name] = next(r for r in CaptureReader(out).records() if r["type"] == "header")["host"]
    assert hosts["none"]["gpus"] is None
    assert [g["name"] for g in hosts["listed"]["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]


def test_the_recorder_lists_the_machines_gpus_so_rapl_alone_never_measures_them(record, fake, tmp_path, monkeypatch):
    """--no-probe and GPU telemetry that failed: nothing listed the machine's GPUs, and the CPU
    packages' RAPL counters alone were the run's energy, far too low. The recorder lists them in
    its run header (nvidia-smi, once at start): the run is unmeasured. No nvidia-smi: RAPL measures (must match)."""
    from unittest import mock

    from infertap.capture.hostfacts import GpuList
    from infertap.capture.writer import CaptureWriter
    from tests.telemetry.test_energy_arithmetic import PACKAGE0, counter, groups, run

    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an nvidia-smi: the must-match case needs none")
    app, url = fake
    hosts = {}
    for name in ("none", "listed"):
        if name == "listed":  # two GPUs whose power query answers nothing: no GPU sample
            exe = nvidia_smi(tmp_path / "bin", [], gpus=2)
            monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
        rec = record(url, "--no-probe", "--telemetry-interval", "0.1", name=name)
        assert httpx.post(f"{rec.url}/v1/chat/completions", json={"model": "m", "messages": []}, timeout=10).status_code == 200
        rec.stop()
        records = rec.records()
        assert not [r for r in records if r["type"] == "engine"]
        assert not [s for r in records if r["type"] == "telemetry" and r["source"] == "gpu" for s in r["samples"]]
        hosts[name] = next(r for r in records if r["type"] == "header")["host"]
    assert hosts["none"]["gpus"] is None
    assert [g["name"] for g in hosts["listed"]["gpus"]] == ["NVIDIA H200", "NVIDIA H200"]
    # The same run with RAPL read, each header as its recorder wrote it, through decode and energy.
    rapl = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (2000, 120.0), (4000, 140.0), source="host")
    energy = {}
    for name, host in hosts.items():
        with mock.patch("infertap.capture.writer.host_facts", lambda host=host: {k: v for k, v in host.items() if k != "gpus"}):
            with mock.patch("infertap.capture.writer.list_gpus", lambda host=host: GpuList(host["gpus"])):
                with mock.patch(
                    "tests.telemetry.test_energy_arithmetic.CaptureWriter", lambda *a, **k: CaptureWriter(*a, **k, list_gpus=True)
                ):
                    (g,) = groups([run(tmp_path / f"rapl-{name}", [(0, 4000)], rapl)], tmp_path / f"cache-{name}")
        energy[name] = g["energy"]
    assert energy["none"]["joules"] == pytest.approx(40.0) and energy["none"]["kinds"] == ["RAPL"]
    assert energy["listed"]["joules"] is None and "gpu 1 has no power samples in run" in energy["listed"]["unknown"]


#: The figures the report's energy table gives, as stats prints them (its decimals): idle W and Wh per
#: session among them, which the one-run report never stated and the two-run report's lines left out.
STATS_FIGURES = {
    "joules": 1,
    "joules_per_request": 3,
    "joules_per_output_token": 4,
    "watt_hours_per_session": 4,
    "mean_watts": 1,
    "idle_watts": 1,
}


def _energy_section(tmp_path: Path, *runs: Path) -> str:
    """The report's energy section (one run's "Energy", two runs' "Energy and the engines' state"), as HTML."""
    out = tmp_path / f"{'-'.join(r.parent.name for r in runs)}.html"
    invoke("report", *map(str, runs), "-o", str(out))
    heading = "<h3>Energy</h3>" if len(runs) == 1 else "<h3>Energy and the engines&#x27; state</h3>"
    assert heading in out.read_text()
    return re.split(r"<h[23]>", out.read_text().split(heading)[1])[0]


def _energy_rows(section: str) -> dict[str, list[str]]:
    """The energy table's rows: each figure's name -> its cells after the unit, one per run."""
    assert "<tbody>" in section, section  # a table, not only lines
    rows = re.findall(r"<tr>(.*?)</tr>", section.split("<tbody>")[1])
    cells = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", row)] for row in rows]
    return {row[0]: row[2:] for row in cells}


def _stats_figures(run: Path) -> dict[str, str]:
    """Each figure as ``infertap stats`` prints it on its energy line."""
    line = _stats_energy(run)
    return {key: re.search(rf"\b{key} (-|\d[\d,]*(?:\.\d+)?)", line).group(1) for key in STATS_FIGURES}


def test_a_one_run_report_has_an_energy_section_stating_what_stats_states(full, half, dark, tmp_path):
    # The one-run report gave energy only as a clause of the claim card's figures: no idle W, no Wh
    # per session, nothing on what measured it. Its Energy section states each figure stats prints.
    said = {}
    for run in (full, half):
        rows, printed, energy = _energy_rows(_energy_section(tmp_path, run)), _stats_figures(run), stats(run)["energy"]
        for key, digits in STATS_FIGURES.items():
            [cell] = rows[key]
            assert cell == printed[key], (key, cell, printed[key])  # as stats prints it, to the digit
            if energy[key] is None:
                assert cell == "-"
            else:
                assert float(cell.replace(",", "")) == pytest.approx(energy[key], abs=0.51 * 10**-digits), key
        assert rows["measured by"] == [f"{SMI_SOURCE}, 1 device(s)"]
        assert f"({rows['measured by'][0]})" in _stats_energy(run)
        m = energy["measured"]
        assert rows["measured"] == [f"{m['requests']} of {m['of']} ok requests, 1 of 1 runs, over {m['seconds']:,.2f} s active"]
        said[run] = float(rows["joules_per_output_token"][0])
    # Must differ: half the power, half the energy per output token.
    assert said[half] / said[full] == pytest.approx(0.5, rel=0.05)
    # A run with no power telemetry states stats' reason, in its words, and no table of dashes.
    dark_section = _energy_section(tmp_path, dark)
    assert "<table>" not in dark_section
    [reason] = [html.unescape(p) for p in re.findall(r"<p>(energy: .*?)</p>", dark_section)]
    assert reason == _stats_energy(dark)
    assert reason.startswith("energy: no power telemetry (")


def test_the_reports_idle_watts_are_stats_idle_watts(tmp_path):
    # Idle power: 300 W while the two requests ran, 50 and 70 W in the 2 s between them.
    samples = [(500, 300.0), (2000, 50.0), (2500, 70.0), (3500, 300.0), (4000, 300.0)]
    gap = _spans_and_power(tmp_path / "gap" / "out", [(0, 1000), (3000, 4000)], samples)
    covered = _spans_and_power(tmp_path / "covered" / "out", [(0, 4000)], samples)
    idle = (50.0 * 1000 + 70.0 * 750) / 1750  # each gap sample for the time it stands for
    assert stats(gap)["energy"]["idle_watts"] == pytest.approx(idle)
    one = _energy_rows(_energy_section(tmp_path, gap))
    assert one["idle_watts"] == [_stats_figures(gap)["idle_watts"]] == [f"{idle:.1f}"]
    assert one["watt_hours_per_session"] == [_stats_figures(gap)["watt_hours_per_session"]]
    # Must match: a run busy all along has no idle sample, "-" as stats prints it.
    assert _energy_rows(_energy_section(tmp_path, covered))["idle_watts"] == ["-"] == [_stats_figures(covered)["idle_watts"]]
    # The two-run report: each side's idle W and Wh per session in its table too, as stats states them.
    both = _energy_rows(_energy_section(tmp_path, gap, covered))
    for key in ("idle_watts", "watt_hours_per_session", "joules_per_output_token", "mean_watts"):
        assert both[key] == [_stats_figures(gap)[key], _stats_figures(covered)[key]], key
    assert both["idle_watts"][0] != both["idle_watts"][1]  # must differ: idle between the requests on A only


def test_a_report_of_no_generation_request_says_so_where_its_energy_would_be(tmp_path):
    # No group to state energy for: the section says what stats says, not an empty table.
    models = tmp_path / "models" / "out"
    write_capture(models, [{"method": "GET", "path": "/v1/models", "body": b""}])
    section = _energy_section(tmp_path, models)
    assert "<table>" not in section and "<p>no generation requests in these captures</p>" in section
    assert "no generation requests in these captures" in invoke("stats", str(models))


def test_a_report_of_refused_requests_alone_says_what_stats_says_of_them(tmp_path):
    # Every generation request refused by infertap (a body over --max-body-mb): the report said "no
    # generation requests", stats that 2 were refused and none sent. The report says what stats says.
    refused = REFUSED_OVER_LIMIT
    capture = tmp_path / "refused" / "out"
    write_capture(capture, [refused, refused])
    said = "no counted generation requests in these captures: 2 refused by infertap, never sent (counted in no figure)"
    section = _energy_section(tmp_path, capture)
    assert "<table>" not in section and f"<p>{html.escape(said)}</p>" in section
    assert said in invoke("stats", str(capture))
    # Must stay: a capture that only listed the models has no refusal to speak of.
    models = tmp_path / "models" / "out"
    write_capture(models, [{"method": "GET", "path": "/v1/models", "body": b""}])
    assert "<p>no generation requests in these captures</p>" in _energy_section(tmp_path, models)


def test_a_report_of_several_captures_of_refused_requests_states_each_captures_own_count(tmp_path):
    # A run of two captures (a folder), 2 and 3 requests refused: the section said "in these
    # captures: 5 refused", a total read beside the claim cards, each of one capture; it states each
    # capture's own count now, named, as its claim card does.
    run = tmp_path / "run" / "out"
    write_capture(run / "x", [REFUSED_OVER_LIMIT] * 2)
    write_capture(run / "y", [REFUSED_OVER_LIMIT] * 3)
    section = _energy_section(tmp_path, run)
    lines = [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", section)]
    never = "refused by infertap, never sent (counted in no figure)"
    assert lines == [f"no counted generation requests in {run / c}: {n} {never}" for c, n in (("x", 2), ("y", 3))]
    for c, n in (("x", 2), ("y", 3)):  # each as its own card says it
        assert f"no counted generation requests in this capture: {n} {never}" in invoke("claim", str(run / c))
    # Must stay: one capture's section is stats' line, as stats prints it.
    one = tmp_path / "one" / "out"
    write_capture(one, [REFUSED_OVER_LIMIT] * 2)
    said = f"no counted generation requests in these captures: 2 {never}"
    assert [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", _energy_section(tmp_path, one))] == [said]
    assert said in invoke("stats", str(one))


def test_a_report_of_counted_traffic_beside_refusals_alone_says_what_stats_says_of_them(tmp_path):
    # A run of two captures, one with counted traffic, one whose 3 requests infertap all refused:
    # stats says "in no group above ...: 3 refused", the report's energy section said nothing of them.
    run = tmp_path / "run" / "out"
    write_capture(run / "x", [{}, {}])
    write_capture(run / "z", [REFUSED_OVER_LIMIT] * 3)
    said = "in no group above (no request of their key was counted): 3 refused by infertap, never sent (counted in no figure)"
    assert said in invoke("stats", str(run))
    lines = [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", _energy_section(tmp_path, run))]
    assert lines[-1] == said
    # Refusals in two captures: each capture's own count, named, as its claim card states it.
    write_capture(run / "w", [REFUSED_OVER_LIMIT] * 2)
    lines = [html.unescape(p) for p in re.findall(r"<p>(.*?)</p>", _energy_section(tmp_path, run))]
    assert lines[-2:] == [f"{run / c}: {said.replace('3', str(n))}" for c, n in (("w", 2), ("z", 3))]
    # Must stay: counted traffic alone has no such line, as stats prints none.
    alone = tmp_path / "alone" / "out"
    write_capture(alone, [{}, {}])
    assert "in no group" not in invoke("stats", str(alone))
    assert "in no group" not in _energy_section(tmp_path, alone)
