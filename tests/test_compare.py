"""compare: on hand-built captures with known differences, and on two real engines."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from analysis.compare import compare
from analysis.errors import AnalysisError
from infertap.cli import cli
from tests.helpers import write_capture


def _chat(content: str, i: int) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": content}], "temperature": 0, "n": i}


def _reply(text: str, finish: str = "stop") -> list[bytes]:
    return [json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 3}}).encode()]  # fmt: skip


def _enrich(i: int, penalty: float, ids: list[int]) -> dict:
    return {"exchange_id": f"src-{i}", "settings": {"repeat_penalty": {"value": penalty, "source": "engine_default"},
                                                    "temperature": {"value": 0, "source": "request"}},
            "prompt_tokens": {"ids": ids, "count": len(ids), "source": "test"}, "output_tokens": {"ids": None}}  # fmt: skip


def _runs(tmp_path, answers_a, answers_b, *, prompts_b=None):
    xs_a = [{"body": _chat(f"q{i}", i), "chunks": _reply(t), "duration_ns": 10_000_000} for i, t in enumerate(answers_a)]
    xs_b = [{"body": _chat(f"q{i}", i), "chunks": _reply(t), "duration_ns": 20_000_000} for i, t in enumerate(answers_b)]
    write_capture(tmp_path / "a", xs_a, enrichments=[_enrich(i, 1.1, [1, 2, 3]) for i in range(len(xs_a))])
    write_capture(tmp_path / "b", xs_b, enrichments=[_enrich(i, 1.0, (prompts_b or [1, 2, 3])) for i in range(len(xs_b))])
    return tmp_path / "a", tmp_path / "b"


def test_compare_by_construction(tmp_path):
    a, b = _runs(tmp_path, ["The answer is 42.", "Paris.", "blue"], ["The answer is 41.", "Paris.", "blue sky"], prompts_b=[1, 1, 2, 3])
    r = compare(a, b, extract="number", top=2)
    assert r["pairing"]["pairs"] == 3 and r["pairing"]["by"]["identical request"] == 3
    (setting,) = r["config"]["settings"]
    assert (setting["setting"], setting["a"], setting["b"], setting["exchanges"]) == ("repeat_penalty", "1.1 (engine_default)", "1.0 (engine_default)", 3)
    assert r["config"]["prompts"] == {"compared": 3, "equal": 0, "differences": {"B repeats its first token (1): a duplicated BOS": 3}}
    d = r["divergence"]
    assert d["exact_match_rate"] == pytest.approx(1 / 3)
    assert d["counts"]["answer_changed"] == 1 and d["counts"]["answer_unchanged"] == 2
    assert [p["text"][1] for p in d["most_divergent"]] == ["blue sky", "The answer is 41."]  # least similar first
    worst = d["most_divergent"][1]
    assert worst["answer"] == ["42", "41"] and worst["first_divergence"] == {"at": 15, "unit": "character"}
    assert worst["diff"] == "The answer is [-42-]{+41+}."
    e2e = next(row for row in r["speed"] if row["metric"] == "e2e")
    assert e2e["a"]["p50"] == pytest.approx(10.0) and e2e["b"]["p50"] == pytest.approx(20.0) and e2e["ratio_p50"] == pytest.approx(2.0)


def test_baseline_gives_the_noise_floor(tmp_path):
    a, b = _runs(tmp_path, ["x", "y"], ["x", "z"])
    write_capture(tmp_path / "a2", [{"body": _chat(f"q{i}", i), "chunks": _reply(t)} for i, t in enumerate(["x", "y"])])
    r = compare(a, b, baseline=tmp_path / "a2")
    assert r["divergence"]["exact_match_rate"] == 0.5
    assert r["baseline"]["divergence"]["exact_match_rate"] == 1.0


def test_workloads_that_do_not_match_say_why(tmp_path):
    write_capture(tmp_path / "a", [{"body": _chat("one", 0)}])
    write_capture(tmp_path / "b", [{"body": _chat("two", 0)}])
    with pytest.raises(AnalysisError, match="no exchange .* matches.*1 exchanges of A and 1 of B have no counterpart"):
        compare(tmp_path / "a", tmp_path / "b")
    result = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 1 and "no counterpart" in result.output and "Traceback" not in result.output


def test_compare_cli_prints_configuration_first(tmp_path):
    a, b = _runs(tmp_path, ["The answer is 42."], ["The answer is 41."])
    result = CliRunner().invoke(cli, ["compare", str(a), str(b), "--extract", "number"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.index("1. Configuration") < out.index("repeat_penalty") < out.index("2. Speed") < out.index("3. Divergence") < out.index("4. Most divergent")
    as_json = json.loads(CliRunner().invoke(cli, ["compare", str(a), str(b), "--json"]).output)
    assert as_json["config"]["settings"][0]["setting"] == "repeat_penalty"


@pytest.mark.engine
def test_llama_cpp_python_against_llama_server_shows_the_setting_then_the_divergence(engine, llama_server_engine, record, gguf, tmp_path):
    """Same GGUF, same requests, temperature 0: the repeat_penalty default explains the answers."""
    import httpx

    from replay import Schedule, run_replay

    rec = record(engine.url, "--model-file", str(gguf))
    for question in ["What is 17 + 25?", "What is 12 + 30?"]:
        httpx.post(f"{rec.url}/v1/chat/completions", json={"model": "SmolLM2-135M-Instruct", "messages": [{"role": "user", "content": question}],
                                                          "temperature": 0, "max_tokens": 24}, timeout=120)  # fmt: skip
    rec.stop()
    run_replay(rec.out, llama_server_engine.url, tmp_path / "on-llama-server", schedule=Schedule("concurrency", concurrency=1))
    r = compare(rec.out, tmp_path / "on-llama-server", extract="number")
    snapshots = {row["fact"]: row for row in r["config"]["snapshots"]}
    assert (snapshots["kind"]["a"], snapshots["kind"]["b"]) == ("llama-cpp-python", "llama-server")
    assert snapshots["default repeat_penalty"]["differs"] and not snapshots["chat_template_sha256"]["differs"]
    known = [s for s in r["config"]["settings"] if "(unknown)" not in s["a"] + s["b"]]
    assert known[0]["setting"] == "repeat_penalty" and known[0]["exchanges"] == 2
    assert r["config"]["prompts"]["equal"] == 2  # same template, same tokens: the prompt is not the difference
    assert r["divergence"]["exact_match_rate"] < 1.0
    assert r["divergence"]["counts"]["answer_changed"] >= 1


def test_report_is_one_offline_html_file(tmp_path):
    a, b = _runs(tmp_path, ["The answer is 42.", "Paris."], ["The answer is 41.", "Paris."])
    out = tmp_path / "r.html"
    result = CliRunner().invoke(cli, ["report", str(a), str(b), "-o", str(out), "--extract", "number"])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.startswith("<!doctype html>") and "<script" not in page and "http://" not in page and "https://" not in page
    assert page.index("1. Configuration") < page.index("repeat_penalty") < page.index("2. Speed") < page.index("3. Divergence")
    assert page.count("<svg") == 4  # ttft and e2e CDFs, e2e over time, divergence positions
    assert "no tpot ms values" in page  # non-streamed answers: token spacing was never observed
    assert "The answer is [-42-]{+41+}." in page
    single = CliRunner().invoke(cli, ["report", str(a), "-o", str(tmp_path / "one.html")])
    assert single.exit_code == 0 and "<svg" in (tmp_path / "one.html").read_text()
