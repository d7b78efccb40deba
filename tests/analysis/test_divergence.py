"""Divergence, extraction, pairing and configuration diffs, checked against hand-computed values."""

from __future__ import annotations

import json
import math
import re
import struct

import pytest

from infertap.analysis.configdiff import prompt_diff, settings_diff, snapshot_diff
from infertap.analysis.divergence import (
    first_divergence,
    kl_shared_prefix,
    logprob_positions,
    similarity,
    text_diff,
    tool_call_diff,
)
from infertap.analysis.extract import choice, extractor, json_value, number
from infertap.analysis.pairing import pair


def test_first_divergence():
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 9, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2
    assert first_divergence("17 + 25 = 32", "17 + 25 = 34") == 11


def test_similarity_and_diff():
    assert similarity("abc", "abc") == 1.0
    assert similarity("abcd", "abxd") == pytest.approx(0.75)  # 2*3 matches / 8 chars
    assert text_diff("the answer is 32.", "the answer is 34.") == "the answer is [-32-]{+34+}."


def test_kl_over_the_shared_prefix_by_hand():
    a = [{1: math.log(0.5), 2: math.log(0.5)}, {5: math.log(0.9), 6: math.log(0.1)}, {7: 0.0}]
    b = [{1: math.log(0.5), 2: math.log(0.5)}, {5: math.log(0.5), 6: math.log(0.5)}, {8: 0.0}]
    out = kl_shared_prefix(a, b, upto=2)  # position 2 is where they diverged: excluded
    kl1 = 0.9 * math.log(0.9 / 0.5) + 0.1 * math.log(0.1 / 0.5)
    assert out["positions"] == 2
    assert out["kl_mean"] == pytest.approx((0 + kl1) / 2)
    assert out["top1_agreement"] == 1.0  # top-1 of {0.5, 0.5} ties resolve to the same first id
    # Ids missing on one side: renormalised over the union with half the side's smallest probability.
    c = [{1: math.log(0.6), 2: math.log(0.4)}]
    d = [{1: math.log(0.6), 3: math.log(0.4)}]
    qa = {1: 0.6, 2: 0.4, 3: 0.2}
    qb = {1: 0.6, 2: 0.2, 3: 0.4}
    za, zb = sum(qa.values()), sum(qb.values())
    expected = sum(qa[t] / za * math.log((qa[t] / za) / (qb[t] / zb)) for t in qa)
    assert kl_shared_prefix(c, d, upto=1)["kl_mean"] == pytest.approx(expected)
    assert kl_shared_prefix(a, b, upto=0) is None


def test_kl_of_probabilities_too_small_for_exp_is_finite():
    """vLLM reports -9999.0 for -inf: every probability of a position underflowed to 0 and the KL
    divided by a zero sum (ZeroDivisionError crashed compare). Same shape, scaled: the same KL."""
    tiny = [{1: -9999.0, 2: -9999.0 + math.log(0.25)}]
    other = [{1: -0.5, 2: -0.5 + math.log(0.25)}]  # the same distribution once renormalised
    out = kl_shared_prefix(tiny, other, upto=1)
    assert out is not None and out["kl_mean"] == pytest.approx(0.0, abs=1e-12)
    skewed = [{1: math.log(0.9), 2: math.log(0.1)}]
    assert kl_shared_prefix([{1: -math.inf, 2: 0.0}], skewed, upto=1)["kl_mean"] > 0  # -inf: the least, finite
    assert kl_shared_prefix([{1: math.nan, 2: 0.0}], skewed, upto=1) is None  # no number: the position skipped


def test_logprob_positions_from_events():
    events = [
        {
            "choices": [
                {
                    "index": 0,
                    "logprobs": {
                        "content": [
                            {
                                "id": 33,
                                "token": "1",
                                "logprob": -0.1,
                                "top_logprobs": [{"id": 33, "logprob": -0.1}, {"id": 40, "logprob": -2.5}],
                            }
                        ]
                    },
                }
            ]
        }
    ]
    assert logprob_positions(events) == [(33, {33: -0.1, 40: -2.5})]  # the token chosen, and the top-k


def test_tool_call_diff():
    a = [{"name": "get_weather", "arguments": '{"city": "Paris", "unit": "C"}'}]
    b = [{"name": "get_weather", "arguments": '{"unit": "C", "city": "Paris"}'}]
    same = {"a": ["get_weather"], "b": ["get_weather"], "names_equal": True, "arguments_equal": True, "equal": True}
    assert tool_call_diff(a, b) == same
    assert not tool_call_diff(a, [{"name": "get_weather", "arguments": '{"city": "Lyon"}'}])["arguments_equal"]
    # The API's own call (its result in the answer) against the client's call of the same tool name.
    ran = [{**b[0], "server": True}]
    assert tool_call_diff(ran, b) == {**same, "equal": False, "server": [[0], []]}
    assert tool_call_diff(ran, [{**a[0], "server": True}]) == {**same, "server": [[0], [0]]}


def test_extractors():
    assert number("17 + 25 = 42.") == "42" and number("about 1,234.50 units") == "1234.5" and number("none") is None
    assert choice("The answer is (B).") == "B" and choice("no letter here!") is None
    assert json_value('Sure: {"b": 1, "a": [2]} done') == '{"a":[2],"b":1}'
    assert extractor("regex:ANSWER: (\\w+)")("... ANSWER: yes") == "yes"
    with pytest.raises(ValueError, match="unknown extractor"):
        extractor("vibes")


def _x(i, body=b"{}", **kw):
    return {"id": i, "method": "POST", "path": "/v1/chat/completions", "request_body": body, **kw}


def test_pairing_rules_in_order():
    a = [_x("a1", b"1"), _x("a2", b"2"), _x("a3", b"3"), _x("a4", b"4"), _x("a5", b"5")]
    b = [_x("b1", b"x", source_id="a2"), _x("b2", b"1"), _x("b3", b"3"), _x("b4", b"3"), _x("b9", b"9")]
    p = pair(a, b)
    assert [(x["id"], y["id"]) for x, y in p.pairs] == [("a1", "b2"), ("a2", "b1"), ("a3", "b3")]
    assert p.by == {"replay link": 1, "shared source": 0, "identical request": 2}
    assert [x["id"] for x in p.unpaired_a] == ["a4", "a5"] and [y["id"] for y in p.unpaired_b] == ["b4", "b9"]
    assert "3 pairs" in p.explain() and "2 exchanges of A and 2 of B have no counterpart" in p.explain()
    # Two replays of the same source pair through it.
    r1 = [_x("r1", b"q", source_id="s1"), _x("r2", b"q", source_id="s1", repeat=1)]
    r2 = [_x("t2", b"q", source_id="s1", repeat=1), _x("t1", b"q", source_id="s1")]
    assert [(x["id"], y["id"]) for x, y in pair(r1, r2).pairs] == [("r1", "t1"), ("r2", "t2")]


def _snap(kind, **facts):
    return {"kind": kind, "facts": {k: {"value": v, "source": "test"} for k, v in facts.items()}, "host": {"cpu": "x"}}


def test_a_version_differs_between_versions_of_one_engine_kind_only():
    same_kind = {r["fact"]: r for r in snapshot_diff(_snap("vllm", version="0.31.0"), _snap("vllm", version="0.32.0"))}
    assert same_kind["version"]["differs"] and "not_compared" not in same_kind["version"]
    assert not same_kind["kind"]["differs"]
    kinds = {r["fact"]: r for r in snapshot_diff(_snap("llama-cpp-python", version="0.3.36"), _snap("vllm", version="0.32.0"))}
    assert kinds["kind"]["differs"] and not kinds["version"]["differs"]
    assert (kinds["version"]["a"], kinds["version"]["b"]) == ("0.3.36", "0.32.0")  # kept, for display
    assert kinds["version"]["not_compared"] == "versions of different engines (llama-cpp-python, vllm) don't compare"


def test_a_build_and_a_model_file_differ_and_a_client_machine_does_not():
    """Two builds of one unknown version, and two model files under one alias, were no difference; a
    remote engine recorded from two client machines was listed as a host difference."""
    rows = {r["fact"]: r for r in snapshot_diff(_snap("llama-server", runtime_sha256="a4b7"), _snap("llama-server", runtime_sha256="99c0"))}  # fmt: skip
    assert rows["runtime_sha256"]["differs"] and not rows["version"]["differs"]
    kinds = {r["fact"]: r for r in snapshot_diff(_snap("llama-server", runtime_sha256="a4b7"), _snap("vllm", runtime_sha256="99c0"))}  # fmt: skip
    assert not kinds["runtime_sha256"]["differs"] and "don't compare" in kinds["runtime_sha256"]["not_compared"]
    files = {r["fact"]: r for r in snapshot_diff(_snap("llama-server", model_path="/a.gguf"), _snap("llama-server", model_path="/b.gguf"))}  # fmt: skip
    assert files["model_path"]["differs"]
    moved = {
        r["fact"]: r
        for r in snapshot_diff(
            _snap("llama-server", model_path="/a.gguf", model_sha256="b179"),
            _snap("llama-server", model_path="/b.gguf", model_sha256="b179"),
        )
    }
    assert (
        not moved["model_path"]["differs"]
        and moved["model_path"]["not_compared"] == "the same file (model_sha256) at another path"
    )
    here, there = _snap("vllm"), _snap("vllm")
    there["host"] = {"cpu": "y"}
    assert not {r["fact"]: r for r in snapshot_diff(here, there)}["host cpu"]["differs"]  # neither ran the engine
    here["host_is_engine_host"] = there["host_is_engine_host"] = True
    assert {r["fact"]: r for r in snapshot_diff(here, there)}["host cpu"]["differs"]


def test_snapshot_and_settings_diff():
    a = _snap("llama-cpp-python", version="0.3.36", defaults={"repeat_penalty": 1.1, "temperature": 0.8})
    b = _snap("llama-server", version=None, defaults={"repeat_penalty": 1.0, "temperature": 0.8, "n_predict": -1})
    rows = {r["fact"]: r for r in snapshot_diff(a, b)}
    assert rows["kind"]["differs"] and rows["default repeat_penalty"]["differs"]
    assert not rows["default temperature"]["differs"]
    assert rows["version"]["unknown"] and rows["default max_tokens"] == {
        "fact": "default max_tokens",
        "a": None,
        "b": -1,
        "differs": False,
        "unknown": True,
        "one_side": True,
    }
    ea = {
        "settings": {
            "repeat_penalty": {"value": 1.1, "source": "engine_default"},
            "temperature": {"value": 0, "source": "request"},
        }
    }
    eb = {
        "settings": {
            "repeat_penalty": {"value": 1.0, "source": "engine_default"},
            "temperature": {"value": 0, "source": "request"},
        }
    }
    assert settings_diff([(ea, eb), (ea, eb), (ea, None)]) == [
        {"setting": "repeat_penalty", "a": "1.1 (engine_default)", "b": "1.0 (engine_default)", "exchanges": 2}
    ]


def test_integers_compare_exactly_and_float32_read_backs_match():
    """Seeds 20241205 and 20241206 are within 1e-6 of each other: the float32 tolerance made them one
    seed, so an engine default and a per-request setting that differed were listed as identical."""
    float32_tenth = struct.unpack("f", struct.pack("f", 0.1))[0]  # 0.10000000149011612, as llama.cpp reads 0.1 back
    a = _snap("llama-server", defaults={"seed": 20241205, "top_p": 0.1})
    b = _snap("llama-server", defaults={"seed": 20241206, "top_p": float32_tenth})
    rows = {r["fact"]: r for r in snapshot_diff(a, b)}
    assert rows["default seed"]["differs"]
    assert not rows["default top_p"]["differs"]

    def settings(seed, top_p):
        return {"settings": {"seed": {"value": seed, "source": "request"}, "top_p": {"value": top_p, "source": "request"}}}

    assert settings_diff([(settings(20241205, 0.1), settings(20241206, float32_tenth))]) == [
        {"setting": "seed", "a": "20241205 (request)", "b": "20241206 (request)", "exchanges": 1}
    ]
    assert settings_diff([(settings(20241205, 0.1), settings(20241205, float32_tenth))]) == []


def test_prompt_diff_explanations():
    def e(ids, rendered=None):
        return {"prompt_tokens": {"ids": ids, "rendered": rendered}}

    assert prompt_diff(e([1, 2, 3]), e([1, 2, 3])) == {"equal": True, "count": 3}
    assert "B has one extra leading token (1)" in prompt_diff(e([5, 6]), e([1, 5, 6]))["why"]
    assert prompt_diff(e([1, 1, 5]), e([1, 5]))["why"] == "A repeats its first token (1): a duplicated BOS"
    assert "different templates" in prompt_diff(e([1, 2], "<s>sys hi"), e([1, 3], "<s>hi"))["why"]
    assert prompt_diff(e([1, 2], "same"), e([1, 3], "same"))["why"] == "the same rendered text, tokenized differently"
    assert prompt_diff(e(None), e([1]))["equal"] is None


def test_the_last_bucket_of_first_divergence_positions_is_open_ended(tmp_path):
    """Positions from 256 on share one bucket: the report and compare labelled it 256-263, and a
    pair parting at character 1,000 read as one parting near 260."""
    from click.testing import CliRunner

    from infertap.analysis.report import render
    from infertap.cli import cli
    from tests.helpers import pair_captures

    def answer(text: str) -> list[bytes]:
        return [json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}).encode()]

    chat = ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "application/json")
    a, b = pair_captures(
        tmp_path,
        {"late": (chat, answer("x" * 1000 + "a"), answer("x" * 1000 + "b")), "early": (chat, answer("ab"), answer("ac"))},
    )
    bars = render(a, b).split("Where outputs first diverge", 1)[1].split("</svg>", 1)[0]
    labels = re.findall(r'<text class="tick"[^>]*text-anchor="middle">([^<]*)</text>', bars)
    assert labels[0] == "0-7" and labels[-1] == "256+" and "256-263" not in bars
    said = CliRunner().invoke(cli, ["compare", str(a), str(b)]).output
    assert "0-7: 1, 256+: 1" in said and "256-263" not in said
