"""A llama-server capture replayed on a real vLLM on the same weights, and compared: the
configuration that differs comes first, named, and vLLM's 400 on ``tool_choice: auto`` is counted
as a status difference (tests/engines/test_vllm_real.py tests the adapter itself).
"""

from __future__ import annotations

import httpx
import pytest

from infertap.analysis.compare import compare
from infertap.cli_compare import print_comparison
from infertap.launch import SMOLLM2_ALIAS
from infertap.replay import ReplayConfig, run_replay

pytestmark = pytest.mark.engine

TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}


def _send(url: str) -> list[int]:
    question = {"model": SMOLLM2_ALIAS, "temperature": 0, "max_tokens": 24}
    bodies = [
        {**question, "messages": [{"role": "user", "content": "What is 17 + 25?"}]},
        {**question, "messages": [{"role": "user", "content": "What is 12 + 30?"}], "stream": True},
        {**question, "messages": [{"role": "user", "content": "Add 2 and 3."}], "tools": [TOOL], "tool_choice": "auto"},
    ]
    with httpx.Client(timeout=120, trust_env=False) as client:
        return [client.post(f"{url}/v1/chat/completions", json=body).status_code for body in bodies]


def test_llama_server_capture_replayed_on_vllm(llama_server_engine, vllm_engine, record, tmp_path, capsys, monkeypatch):
    rec = record(llama_server_engine.url)
    assert _send(rec.url) == [200, 200, 200]  # llama-server answers tool_choice auto
    rec.stop()
    summary = run_replay(ReplayConfig(rec.out, vllm_engine.url, tmp_path / "on-vllm"))
    assert summary["sent"] == 3

    result = compare(rec.out, tmp_path / "on-vllm", extract="number")
    facts = {row["fact"]: row for row in result["config"]["snapshots"]}
    assert (facts["kind"]["a"], facts["kind"]["b"]) == ("llama-server", "vllm") and facts["kind"]["differs"]
    # llama-server's pip build carries no version: known on vLLM's side only, not a difference.
    assert facts["version"]["b"] == "0.32.0" and facts["version"]["one_side"]
    assert not facts["version"]["differs"] and "don't compare" in facts["version"]["not_compared"]  # two engines
    # The same weights in different types: the GGUF's tensor types against the float32 checkpoint.
    assert facts["dtype"]["a"].startswith("Q4_1") and facts["dtype"]["b"] == "float32" and facts["dtype"]["differs"]
    assert facts["quantization"]["differs"] and facts["quantization"]["b"] == "none"
    assert facts["context_size"]["b"] == 2048 and facts["context_size"]["differs"]
    # Sampling defaults: llama.cpp's top_k 40 and min_p 0.05 against vLLM's neutral ones.
    assert (facts["default top_k"]["a"], facts["default top_k"]["b"]) == (40, 0)
    assert facts["default min_p"]["differs"]

    # vLLM refuses tool_choice auto without a tool parser: B failed, said with B's answers and
    # counted apart from the outputs that differ (no output of B's to compare).
    assert result["outcomes"]["pairs"]["failed_b"].get("status 400") == 1
    assert result["divergence"]["failed"]["b_only"] == 1 and "status_or_end_differs" not in result["divergence"]["counts"]
    assert all("status" not in p for p in result["divergence"]["most_divergent"])

    # Printed, the configuration comes first: engine, dtype, context length and defaults named
    # before the divergence.
    monkeypatch.setenv("COLUMNS", "200")
    print_comparison(result)
    text = capsys.readouterr().out
    config, divergence = text.index("1. Configuration"), text.index("3. Divergence")
    for name in ("kind", "dtype", "quantization", "context_size", "default top_k"):
        assert config < text.index(name) < divergence, name
    assert "vllm 0.32.0" in text[config:divergence] and "float32" in text[config:divergence]  # the version beside its kind
    assert "known on one side only: version" not in text
