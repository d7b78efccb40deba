"""The claim card and workload identity on the two real engines serving the same GGUF."""

from __future__ import annotations

import hashlib
import time
from urllib.parse import urlsplit

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis.claim import claim, unknown_fields
from infertap.capture.identity import workload_identity
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.engines.runtime_digest import runtime_digest
from infertap.launch import SMOLLM2_ALIAS, llama_server_binary
from infertap.replay import ReplayConfig, Transforms, run_replay

pytestmark = pytest.mark.engine


def _record_and_replay(proc, record, gguf, tmp_path):
    rec = record(proc.url, "--model-file", str(gguf))
    for question in ["What is 2 + 2?", "Name a colour."]:
        body = {"model": SMOLLM2_ALIAS, "messages": [{"role": "user", "content": question}], "max_tokens": 6, "temperature": 0}
        assert httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=120).status_code == 200
        time.sleep(0.2)
    rec.stop()
    run_replay(ReplayConfig(rec.out, proc.url, tmp_path / "same", model_file=str(gguf)))
    run_replay(
        ReplayConfig(rec.out, proc.url, tmp_path / "set", model_file=str(gguf), transforms=Transforms(set_values=[("seed", 7)]))
    )
    return rec.out


def _check(kind, src, tmp_path, gguf):
    ids = {name: workload_identity(path) for name, path in (("src", src), ("same", tmp_path / "same"), ("set", tmp_path / "set"))}
    assert ids["same"].workload == ids["src"].workload and ids["src"].requests == 2
    assert ids["set"].workload != ids["src"].workload
    card = claim(tmp_path / "same", cache_dir=tmp_path / "cache")
    assert card["workload"]["value"]["same_as_source"] is True
    assert card["runtime"]["value"]["kind"] == kind
    assert card["model"]["value"]["sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    quantization = card["quantization"]["value"]
    assert quantization["scheme"] == "Q4_1" and quantization["dtype_of"] == "tensor types"
    assert quantization["dtype"].startswith("Q4_1 ") and "F32" in quantization["dtype"]  # norms stay in F32
    assert "unknown" not in card["quantization"], card["quantization"]["unknown"]
    assert card["sampling"]["value"]["temperature"] == [{"value": 0, "source": "request", "requests": 2}]
    assert card["measuring_side"]["value"]["recorder"] == "replay"
    return card


def test_claim_on_llama_cpp_python(engine, record, gguf, tmp_path):
    import llama_cpp

    src = _record_and_replay(engine, record, gguf, tmp_path)
    card = _check("llama-cpp-python", src, tmp_path, gguf)
    runtime = card["runtime"]["value"]
    assert runtime["version"] == llama_cpp.__version__
    digest = runtime["digest"]  # the engine runs in Python: its package's native libraries are hashed
    assert digest["path"] and "libllama" in digest["path"] and "/llama_cpp/" in digest["path"]
    assert "libggml" in digest["found"] and "recorded in the engine snapshot" in card["runtime"]["source"]
    assert digest["sha256"] == runtime_digest(engine.url, "llama-cpp-python").sha256  # as hashed again now
    assert card["sampling"]["value"]["repeat_penalty"][0]["source"] == "engine_default"
    # This machine can't know everything: --strict names it, and says why.
    result = CliRunner().invoke(cli, ["claim", str(tmp_path / "same"), "--strict", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code != 0 and "unknown device" in result.output
    if "device" in unknown_fields(card) and not card["device"]["value"]["gpus"]:
        assert "nvidia-smi" in unknown_fields(card)["device"]


def test_claim_on_llama_server(llama_server_engine, record, gguf, tmp_path):
    src = _record_and_replay(llama_server_engine, record, gguf, tmp_path)
    card = _check("llama-server", src, tmp_path, gguf)
    # The program and the libraries its code lives in (llama-server is a stub over libllama-server-impl).
    binary = runtime_digest(llama_server_engine.url, "llama-server").sha256
    digest = card["runtime"]["value"]["digest"]
    assert digest["sha256"] == binary and "libllama-server-impl" in digest["found"]
    assert binary != hashlib.sha256(llama_server_binary().read_bytes()).hexdigest()
    assert "recorded in the engine snapshot" in card["runtime"]["source"]
    # The recording through the proxy carries the digest in its engine snapshot: it travels with the capture.
    snap = next(r for r in CaptureReader(src).records() if r["type"] == "engine")
    assert snap["facts"]["runtime_sha256"]["value"] == binary
    assert snap["facts"]["runtime_path"]["value"] == str(llama_server_binary().resolve())
    assert f"port {urlsplit(llama_server_engine.url).port}" in snap["facts"]["runtime_sha256"]["source"]
    assert card["concurrency"]["value"]["engine_slots"] == 4
