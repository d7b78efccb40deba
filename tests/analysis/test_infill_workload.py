"""llama.cpp's ``/infill`` takes the text before and after a gap (``input_prefix``, ``input_suffix``,
both required) and an optional ``prompt``; code-completion clients send the two texts alone. Such a
request was no generation request: in no figure, no workload identity (two runs completing other
code were the same workload, or "no generation requests" to compare), and replay counted no turn
of it. It is one now, as an ``/infill`` with a ``prompt`` always was."""

from __future__ import annotations

import json
from pathlib import Path

from infertap.analysis.claim import claim
from infertap.analysis.compare import compare
from infertap.apis import read_request
from infertap.capture.identity import workload_identity
from tests.helpers import write_capture


def _infill(prefix: str, **extra: object) -> dict[str, object]:
    """An /infill request as llama.cpp's server README documents it: no ``prompt``."""
    return {"input_prefix": prefix, "input_suffix": "\n    return total\n", "input_extra": [], "n_predict": 16, **extra}


def _answer(content: str) -> bytes:
    """llama.cpp's whole answer to a completion (its /completion and /infill shape)."""
    return json.dumps(
        {"content": content, "stop": True, "stop_type": "eos", "tokens_predicted": 3, "tokens_evaluated": 9}
    ).encode()


def _capture(path: Path, prefixes: list[str], answers: list[str]) -> Path:
    write_capture(path, [{"path": "/infill", "body": _infill(p), "chunks": [_answer(a)]} for p, a in zip(prefixes, answers, strict=True)])  # fmt: skip
    return path


def test_an_infill_without_a_prompt_asks_for_tokens() -> None:
    for body in (_infill("def f():"), {"input_prefix": "def f():"}, _infill("def f():", prompt="    ")):
        assert read_request({"path": "/infill", "request_body": json.dumps(body).encode()}).generation, body
    # No text to complete around, nor a prompt: what the engine refuses, and asks for nothing.
    assert not read_request({"path": "/infill", "request_body": b'{"n_predict": 16}'}).generation
    # Another API's body with an input_prefix is still read by its own keys.
    assert not read_request({"path": "/v1/chat/completions", "request_body": b'{"input_prefix": "x"}'}).generation


def test_infill_requests_are_the_workload_and_are_compared(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    code = ["def add(a, b):\n    total = ", "def sub(a, b):\n    total = "]
    a = _capture(tmp_path / "a", code, ["a + b", "a - b"])
    other = _capture(tmp_path / "other", [code[0], "def mul(a, b):\n    total = "], ["a + b", "a * b"])
    again = _capture(tmp_path / "again", code, ["a + b", "a - b"])
    b = _capture(tmp_path / "b", code, ["a + b", "b - a"])
    ids = {p.name: workload_identity(p) for p in (a, other, again, b)}
    assert ids["a"].requests == len(code)
    # Must differ: other code completed is another workload; must match: the same requests.
    assert ids["a"].workload != ids["other"].workload
    assert ids["a"].workload == ids["again"].workload == ids["b"].workload
    assert claim(a, cache_dir=tmp_path / "cache")["workload"]["value"]["identity"] == ids["a"].workload
    assert not compare(a, other)["traffic"]["identical"]
    # The answers are compared: the same twice is an exact match, another answer to one request is not.
    same = compare(a, again)
    assert same["traffic"]["identical"] and same["divergence"]["exact_match_rate"] == 1
    d = compare(a, b)["divergence"]
    assert d["pairs"] == len(code) and d["counts"]["exact"] == 1 and d["outputs_differ"] == 1
    assert d["most_divergent"][0]["text"] == ["a - b", "b - a"]
