"""Engine snapshots follow the engine: periodic re-probes and responses from a new model."""

from __future__ import annotations

import os
import stat
import time

import httpx

from infertap.capture.hostfacts import gpu_facts
from tests.fake_engines import JSONRoutes
from tests.fake_upstream import ServerThread


def _changing_llama_server(state: dict) -> JSONRoutes:
    def props(_: object) -> tuple[int, dict]:
        return 200, {
            "default_generation_settings": {"params": {"temperature": 0.8}, "n_ctx": 4096},
            "total_slots": 1,
            "model_path": state["model"],
            "build_info": "b1-x",
        }

    def chat(_: object) -> tuple[int, dict]:
        return 200, {
            "model": state["model"],
            "choices": [{"index": 0, "message": {"content": "ok"}}],
            "usage": {"prompt_tokens": 1},
        }

    return JSONRoutes(
        {
            ("GET", "/props"): props,
            ("GET", "/v1/models"): {"data": [{"id": "m"}]},
            ("POST", "/apply-template"): {"prompt": "p"},
            ("POST", "/tokenize"): {"tokens": [1]},
            ("POST", "/v1/chat/completions"): chat,
        }
    )


def _snapshots(rec) -> list[dict]:
    return [r for r in rec.records() if r["type"] == "engine"]


def test_a_response_from_another_model_triggers_a_new_snapshot(record):
    state = {"model": "a.gguf"}
    with ServerThread(_changing_llama_server(state)) as server:
        rec = record(server.url, "--probe-interval", "3600")
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10)
        httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10)  # same model: no new snapshot
        state["model"] = "b.gguf"  # the engine was restarted on another model
        httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10)
        rec.stop()
    snaps = _snapshots(rec)
    assert [s["facts"]["model_path"]["value"] for s in snaps] == ["a.gguf", "b.gguf"]
    enrichments = [r for r in rec.records() if r["type"] == "enrichment"]
    assert [e["engine"] for e in enrichments] == [snaps[0]["fingerprint"]] * 2 + [snaps[1]["fingerprint"]]


def test_a_periodic_reprobe_stores_a_snapshot_only_when_it_changed(record):
    state = {"model": "a.gguf"}
    with ServerThread(_changing_llama_server(state)) as server:
        rec = record(server.url, "--probe-interval", "0.2")
        time.sleep(1.0)  # several re-probes of an unchanged engine
        state["model"] = "c.gguf"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if len(_snapshots(rec)) >= 2:
                break
        rec.stop()
    assert [s["facts"]["model_path"]["value"] for s in _snapshots(rec)] == ["a.gguf", "c.gguf"]


def test_gpu_facts_from_nvidia_smi(tmp_path, monkeypatch):
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA H200, 570.86.15, 143771'\necho 'NVIDIA H200, 570.86.15, 143771'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    # A driver that answers no VBIOS and prints no CUDA version: those are unknown (None).
    gpu = {"name": "NVIDIA H200", "driver": "570.86.15", "memory_mib": 143771, "vbios": None, "cuda": None}
    assert gpu_facts() == [gpu] * 2
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    assert gpu_facts() is None  # no nvidia-smi: unknown, not "no GPU"
