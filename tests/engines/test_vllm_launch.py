"""vLLM's launch facts, read from its command line and environment as its own parser reads them:
its API says neither how many sequences it batches (--max-num-seqs) nor its parallelism, dtypes
or CPU threads."""

from __future__ import annotations

from infertap.analysis.configdiff import snapshot_diff
from infertap.engines.launch_args import launch_facts
from infertap.engines.vllm_launch import VLLM_FACTS, is_vllm

SERVE = ["/v/bin/python3.11", "/v/bin/vllm", "serve", "/models/smollm2"]
API_SERVER = ["/v/bin/python3.11", "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/smollm2"]
EVERY_FLAG = [
    "--max-num-seqs",
    "8",
    "--max_num_batched_tokens=4k",
    "-tp",
    "2",
    "--pipeline-parallel-size=3",
    "--dtype",
    "half",
    "--kv-cache-dtype",
    "fp8",
    "--no-enable-prefix-caching",
]
ENV = {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_CPU_KVCACHE_SPACE": "2"}


def _values(facts: dict) -> dict:
    return {k: v["value"] for k, v in facts.items()}


def _snapshot(argv: list[str], environ: dict[str, str]) -> dict:
    return {"kind": "vllm", "facts": launch_facts("vllm", argv, environ, 7)}


def test_each_flag_and_variable_of_a_vllm_serve_command_line():
    facts = launch_facts("vllm", SERVE + EVERY_FLAG, ENV, 7)
    assert _values(facts) == {
        "parallel_slots": 8,
        "max_num_batched_tokens": 4000,  # vLLM's human-readable int: 4k is 4000, 4K 4096
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 3,
        "served_dtype": "float16",  # "half", as config/model.py names it
        "kv_cache_dtype": "fp8",
        "prefix_caching": False,
        "cpu_threads_bind": "0-1",
        "cpu_kvcache_space_gib": 2,
    }
    assert facts["parallel_slots"]["source"] == "--max-num-seqs on the command line of process 7"
    assert facts["tensor_parallel_size"]["source"] == "--tensor-parallel-size on the command line of process 7"
    assert facts["cpu_kvcache_space_gib"]["source"] == "VLLM_CPU_KVCACHE_SPACE in the environment of process 7"
    assert launch_facts("vllm", [*SERVE, "--max-num-batched-tokens", "4K"], {}, 7)["max_num_batched_tokens"]["value"] == 4096


def test_without_a_flag_a_fixed_default_is_said_and_one_that_depends_on_the_device_is_unknown():
    facts = launch_facts("vllm", API_SERVER, {}, 7)
    assert set(facts) == {"parallel_slots", *VLLM_FACTS}
    known = {k: v for k, v in _values(facts).items() if v is not None}
    assert known == {"tensor_parallel_size": 1, "pipeline_parallel_size": 1, "cpu_threads_bind": "auto"}
    assert "vLLM's default (config/parallel.py)" in str(facts["tensor_parallel_size"]["source"])
    for name in ("parallel_slots", "max_num_batched_tokens"):
        assert "get_batch_defaults" in str(facts[name]["source"]) and "not known here" in str(facts[name]["source"])
    assert "--dtype auto" in str(facts["served_dtype"]["source"])
    assert "--gpu-memory-utilization" in str(facts["cpu_kvcache_space_gib"]["source"])
    # auto given is auto's unknown too; an empty VLLM_CPU_KVCACHE_SPACE is not read (platforms/cpu.py)
    given = launch_facts("vllm", [*API_SERVER, "--dtype=auto", "--kv-cache-dtype", "auto"], {"VLLM_CPU_KVCACHE_SPACE": ""}, 7)
    assert (given["served_dtype"]["value"], given["kv_cache_dtype"]["value"], given["cpu_kvcache_space_gib"]["value"]) == (
        None,
    ) * 3


def test_the_last_of_each_flag_wins_in_any_spelling():
    argv = [*SERVE, "--max-num-seqs", "4", "--max_num_seqs=6", "--tensor-parallel-size", "4", "-tp=2"]
    argv += ["--enable-prefix-caching", "--no_enable_prefix_caching", "--enable_prefix_caching"]
    facts = _values(launch_facts("vllm", argv, {}, 7))
    assert (facts["parallel_slots"], facts["tensor_parallel_size"], facts["prefix_caching"]) == (6, 2, True)
    assert launch_facts("vllm", [*SERVE, "--max-num-seqs", "many"], {}, 7)["parallel_slots"]["value"] is None


def test_a_config_file_leaves_what_the_command_line_doesnt_say_unknown():
    """vLLM reads --config's YAML under the command line's flags: those given still hold."""
    facts = launch_facts("vllm", [*SERVE, "--config", "serve.yaml", "--max-num-seqs", "8"], {}, 7)
    assert facts["parallel_slots"]["value"] == 8
    assert facts["tensor_parallel_size"]["value"] is None and "--config serve.yaml" in str(
        facts["tensor_parallel_size"]["source"]
    )


def test_vllm_is_told_from_a_forwarder_by_its_command_line():
    assert is_vllm(SERVE) and is_vllm(API_SERVER) and is_vllm(["/v/bin/vllm", "serve", "m"])
    assert not is_vllm(["ssh", "-L", "8000:localhost:8000", "gpu-box"]) and not is_vllm(["/v/bin/vllm", "bench", "serve"])


def test_compare_shows_a_launch_fact_that_differs_and_none_for_the_same_one_spelled_otherwise():
    a = _snapshot([*SERVE, "--max-num-seqs", "8", "-tp", "2", "--dtype", "half"], ENV)
    b = _snapshot([*SERVE, "--max-num-seqs", "16", "--tensor_parallel_size=2", "--dtype=float16"], ENV)
    rows = {r["fact"]: r for r in snapshot_diff(a, b)}
    assert [name for name, r in rows.items() if r["differs"]] == ["parallel_slots"]
    assert (rows["parallel_slots"]["a"], rows["parallel_slots"]["b"]) == (8, 16)
    assert not rows["tensor_parallel_size"]["differs"] and rows["served_dtype"]["a"] == rows["served_dtype"]["b"] == "float16"
    c = _snapshot([*SERVE, "--max-num-seqs=8", "--tensor-parallel-size", "2", "--dtype", "float16"], ENV)
    assert not any(r["differs"] for r in snapshot_diff(a, c))
    d = _snapshot([*SERVE, "--max-num-seqs", "8", "-tp", "2", "--dtype", "half"], {**ENV, "VLLM_CPU_KVCACHE_SPACE": "4"})
    assert [r["fact"] for r in snapshot_diff(a, d) if r["differs"]] == ["cpu_kvcache_space_gib"]


def test_the_server_is_read_where_its_forked_engine_core_is_the_listener_found(monkeypatch):
    """vLLM forks its engine core after binding its port: the child holds the socket too, retitled
    VLLM::EngineCore, and its parent is the server whose command line has the flags."""
    import subprocess
    import sys
    import time

    import psutil

    from infertap.engines import runtime_digest
    from infertap.engines.launch_args import read_launch_facts

    spawn = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    )
    server = subprocess.Popen([sys.executable, "-c", spawn, "vllm.entrypoints.openai.api_server", "--max-num-seqs", "5"])
    try:
        deadline = time.monotonic() + 20
        while not psutil.Process(server.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        core = psutil.Process(server.pid).children()[0]
        monkeypatch.setattr(runtime_digest, "_listener", lambda port: core.pid)
        facts = read_launch_facts("http://127.0.0.1:8000", "vllm")
        assert facts["parallel_slots"] == {"value": 5, "source": f"--max-num-seqs on the command line of process {server.pid}"}
        monkeypatch.setattr(runtime_digest, "_listener", lambda port: server.pid)  # the server itself, as usual
        assert read_launch_facts("http://127.0.0.1:8000", "vllm")["parallel_slots"]["value"] == 5
    finally:
        for proc in psutil.Process(server.pid).children():
            proc.kill()
        server.kill()
        server.wait()
