"""Stats on a real capture: streamed chat completions through `infertap record` to the real engine."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.apis import read_response
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.launch import SMOLLM2_ALIAS

pytestmark = pytest.mark.engine

QUESTIONS = ["What is 2 + 2?", "Name a colour.", "Say hello."]


def test_stats_of_a_recorded_streamed_session(engine, record, gguf: Path, tmp_path: Path) -> None:
    rec = record(engine.url, "--model-file", str(gguf))
    streamed: dict[str, str] = {}
    with httpx.Client(base_url=rec.url, timeout=120, trust_env=False) as client:
        for i, question in enumerate(QUESTIONS):
            request = {
                "model": SMOLLM2_ALIAS,
                "messages": [{"role": "user", "content": question}],
                "max_tokens": 16,
                "temperature": 0,
                "stream": True,
                "user": f"u{i}",
            }
            # Read to the end of the body, so the recorder sees the exchange complete (a client that
            # closes right after [DONE] can race the engine's end of body; see the report).
            with client.stream("POST", "/v1/chat/completions", json=request) as response:
                body = b"".join(response.iter_bytes())
            assert response.status_code == 200
            text = ""
            for line in body.decode().splitlines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    choices = json.loads(line[6:]).get("choices") or [{}]
                    text += choices[0].get("delta", {}).get("content") or ""
            streamed[f"u{i}"] = text
    assert rec.stop() == 0

    records = list(CaptureReader(rec.out).records())
    exchanges = {r["id"]: r for r in records if r["type"] == "exchange"}
    enriched = {r["exchange_id"]: r for r in records if r["type"] == "enrichment"}
    assert len(exchanges) == 3
    with Analysis([rec.out], cache_dir=tmp_path / "cache") as a:
        metrics = {m["exchange_id"]: m for m in a.query("SELECT * FROM metrics").records()}
        gaps = dict(a.query("SELECT exchange_id, count(*) FROM itl GROUP BY exchange_id").rows)
        texts = dict(a.query("SELECT exchange_id, string_agg(content, '' ORDER BY index) FROM events GROUP BY exchange_id").rows)
        [engine_row] = a.query("SELECT kind, version, dtype FROM engines").rows
        result = speed_stats(a, ["run"])

    for xid, m in metrics.items():
        record_ = exchanges[xid]
        user = json.loads(record_["request_body"])["user"]
        assert m["ok"] and m["stream"] and m["generation"]
        assert 0 < m["t_first_byte_ns"] <= m["ttft_ns"] <= m["e2e_ns"] == record_["end_ns"]
        assert m["ttft_content_ns"] >= m["ttft_ns"]
        assert texts[xid] == streamed[user]  # the events are exactly what the client read
        usage = read_response(record_).usage
        if usage and "completion_tokens" in usage:
            assert (m["output_tokens"], m["output_tokens_source"]) == (usage["completion_tokens"], "usage")
        elif (enriched.get(xid) or {}).get("output_tokens", {}).get("count") is not None:
            assert (m["output_tokens"], m["output_tokens_source"]) == (enriched[xid]["output_tokens"]["count"], "tokenize")
        else:
            assert m["output_tokens_source"] == "chunks"
        assert 0 < m["output_tokens"] <= 16
        assert gaps.get(xid, 0) == m["token_chunks"] - 1
        if m["tpot_ns"] is not None:
            finish = (
                m["t_finish_ns"]
                if m["output_tokens_source"] == "usage" and (m["t_finish_ns"] or 0) > m["t_last_token_ns"]
                else None
            )
            assert m["tpot_ns"] == pytest.approx(((finish or m["t_last_token_ns"]) - m["ttft_ns"]) / (m["output_tokens"] - 1))
    assert engine_row[0] == "llama-cpp-python"
    assert engine_row[2].startswith("Q4_1 ")  # the GGUF's tensor types by share, from --model-file

    [g] = result["groups"]
    assert (g["requests"], g["ok"], g["error_rate"]) == (3, 3, 0.0)
    assert g["metrics"]["ttft"]["n"] == 3 and g["metrics"]["ttft"]["p50"] <= g["metrics"]["e2e"]["p50"]
    assert sum(g["output_tokens_source"].values()) == 3
    # llama-cpp-python's server serializes requests; these were sent one after another anyway.
    assert g["concurrency"]["max"] == 1 and 0 < g["concurrency"]["mean"] <= 1
    assert g["throughput"]["output_tokens_per_s"] > 0
    w = g["workload"]
    assert w["prompt_tokens"]["known"] == 3
    # Every request was enriched with its prompt ids (the GGUF's template and tokenizer): reuse in tokens.
    assert len(enriched) == 3 and all(e["prompt_tokens"]["ids"] for e in enriched.values())
    [reuse] = w["prefix_reuse"]
    assert reuse["unit"] == "tokens" and reuse["requests"] == 3
    assert reuse["shared"] > 0  # the template's default system prompt starts every request

    cli_result = CliRunner().invoke(cli, ["stats", str(rec.out), "--cache-dir", str(tmp_path / "cache")])
    assert cli_result.exit_code == 0, cli_result.output
    assert "ttft" in cli_result.stdout and "llama-cpp-python" in cli_result.stdout
