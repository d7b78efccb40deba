"""compare's KL on legacy completions (``/v1/completions``: vLLM, llama-cpp-python, OpenAI) and
llama.cpp's native ``/completion``: their logprobs come in shapes of their own, parallel lists
(``tokens``, ``token_logprobs``, ``top_logprobs``) and ``completion_probabilities``, and a changed
distribution behind the same text must show, the same one must not."""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.analysis.divergence import logprob_positions, post_sampling
from infertap.analysis.kl_notes import POST_SAMPLING_KL, POST_SAMPLING_TOP1, logprob_rows
from infertap.analysis.report import render
from infertap.apis import read_response
from infertap.cli import cli
from tests import sdk_shapes
from tests.helpers import pair_captures

_SSE, _JSON = "text/event-stream", "application/json"
#: Each position: the token chosen, then its top-k as the engine reported it.
_CAT = [("The", {"The": -0.1, "A": -2.4}), (" cat", {" cat": -0.5, " dog": -0.9})]
_DOG = [("The", {"The": -0.1, "A": -2.4}), (" cat", {" cat": -1.2, " dog": -0.4})]


def _legacy(positions: list[tuple[str, dict[str, float]]], offset: int = 0) -> dict[str, Any]:
    """A completion choice's ``logprobs`` (openai.types.completion_choice.Logprobs)."""
    offsets = [offset + sum(len(t) for t, _ in positions[:i]) for i in range(len(positions))]
    return {
        "tokens": [t for t, _ in positions],
        "token_logprobs": [top[t] for t, top in positions],
        "top_logprobs": [top for _, top in positions],
        "text_offset": offsets,
    }


def _completion(choices: list[dict[str, Any]]) -> dict[str, Any]:
    return sdk_shapes.completion({"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": choices})


def _whole(positions: list[tuple[str, dict[str, float]]]) -> list[bytes]:
    text = "".join(t for t, _ in positions)
    choice = {"index": 0, "text": text, "logprobs": _legacy(positions), "finish_reason": "stop"}
    return [json.dumps(_completion([choice])).encode()]


def _streamed(positions: list[tuple[str, dict[str, float]]]) -> list[bytes]:
    """One chunk per token, each with that token's logprobs (vLLM's and llama-cpp-python's streams)."""
    chunks = []
    for i, (token, top) in enumerate(positions):
        last = "stop" if i == len(positions) - 1 else None
        offset = sum(len(t) for t, _ in positions[:i])
        choice = {"index": 0, "text": token, "logprobs": _legacy([(token, top)], offset), "finish_reason": last}
        # Not through the SDK's model: a chunk's finish_reason is null until the last, which its
        # ``Completion`` (the type of its stream's chunks too, built there unvalidated) refuses.
        chunk = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": [choice]}
        chunks.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    return [*chunks, b"data: [DONE]\n\n"]


#: llama.cpp's token ids of the tokens above (made up: the model's vocabulary is not what is read).
_IDS = {"The": 1, "A": 2, " cat": 3, " dog": 4}


def _llamacpp_entry(token: str, top: dict[str, float]) -> dict[str, Any]:
    """One ``completion_probabilities`` entry as llama-server sends it (``n_probs``)."""
    alternatives = [{"id": _IDS[t], "token": t, "bytes": list(t.encode()), "logprob": v} for t, v in top.items()]
    return {"id": _IDS[token], "token": token, "bytes": list(token.encode()), "logprob": top[token], "top_logprobs": alternatives}


def _llamacpp_whole(positions: list[tuple[str, dict[str, float]]]) -> list[bytes]:
    body = {"index": 0, "content": "".join(t for t, _ in positions), "id_slot": 0, "stop": True, "stop_type": "eos"}
    body["completion_probabilities"] = [_llamacpp_entry(t, top) for t, top in positions]
    return [json.dumps(body).encode()]


def _llamacpp_streamed(positions: list[tuple[str, dict[str, float]]]) -> list[bytes]:
    events = [
        {"index": 0, "content": t, "stop": False, "id_slot": 0, "completion_probabilities": [_llamacpp_entry(t, top)]}
        for t, top in positions
    ]
    events.append({"index": 0, "content": "", "stop": True, "stop_type": "eos", "id_slot": 0, "tokens_predicted": len(positions)})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]


_ASK = {"model": "m", "prompt": "q", "max_tokens": 8, "logprobs": 2}
_NATIVE = {"prompt": "q", "n_predict": 8, "n_probs": 2}


def _pairs(b: list[tuple[str, dict[str, float]]]) -> dict[str, Any]:
    return {
        "completions whole": (("/v1/completions", _ASK, _JSON), _whole(_CAT), _whole(b)),
        "completions streamed": (("/v1/completions", {**_ASK, "stream": True}, _SSE), _streamed(_CAT), _streamed(b)),
        "llama.cpp whole": (("/completion", _NATIVE, _JSON), _llamacpp_whole(_CAT), _llamacpp_whole(b)),
        "llama.cpp streamed": (
            ("/completion", {**_NATIVE, "stream": True}, _SSE),
            _llamacpp_streamed(_CAT),
            _llamacpp_streamed(b),
        ),
    }


def test_a_changed_logprob_of_a_completion_differs_and_the_same_ones_match(tmp_path: Path) -> None:
    """A legacy completion's logprobs and llama.cpp's ``completion_probabilities`` were not read:
    compare took no KL of them, so a changed distribution behind the same text went unseen."""
    for name, b in (("changed", _DOG), ("same", _CAT)):
        (tmp_path / name).mkdir()
        a_cap, b_cap = pair_captures(tmp_path / name, _pairs(b))
        d = compare(a_cap, b_cap, top=4)["divergence"]
        assert d["exact_match_rate"] == 1, d["counts"]  # the same text: the logprobs alone tell them apart
        assert d["logprobs"]["pairs"] == 4, d.get("logprobs")
        if name == "changed":
            assert d["logprobs"]["kl_mean"] > 0 and d["logprobs"]["top1_agreement"] == 0.5
        else:
            assert d["logprobs"]["kl_mean"] == 0 and d["logprobs"]["top1_agreement"] == 1


def test_each_completion_position_is_read_once_streamed_or_whole() -> None:
    """By token text in a legacy completion (it names no ids), by id in llama.cpp's."""
    by_id = [(_IDS[t], {_IDS[k]: v for k, v in top.items()}) for t, top in _CAT]
    for name, ((path, _body, ctype), chunks, _) in _pairs(_CAT).items():
        out = read_response({"path": path, "chunks": chunks, "response_headers": [["content-type", ctype]]})
        assert logprob_positions(out.objects, out.api) == (by_id if name.startswith("llama") else _CAT), name


def test_only_the_first_answer_positions_are_read() -> None:
    """Positions of choice 1 (n > 1) or of a second prompt's answer (llama.cpp's ``index`` 1) are
    that answer's: the first answer's KL is not taken over them; a position whose logprob is null
    (the echoed prompt's first token) has no top-k."""
    echoed = _legacy([("q", {"q": 0.0}), *_CAT])
    echoed["token_logprobs"][0] = echoed["top_logprobs"][0] = None
    choices = [
        {"index": 1, "text": "The cat", "logprobs": _legacy(_DOG), "finish_reason": "stop"},
        {"index": 0, "text": "qThe cat", "logprobs": echoed, "finish_reason": "stop"},
    ]
    # vLLM's shape (its CompletionLogProbs allows null there), which the openai SDK's model refuses.
    body = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m", "choices": choices}
    out = read_response({"path": "/v1/completions", "chunks": [json.dumps(body).encode()]})
    assert logprob_positions(out.objects, out.api) == [("q", {}), *_CAT]
    answers = [json.loads(_llamacpp_whole(_CAT)[0]), {**json.loads(_llamacpp_whole(_DOG)[0]), "index": 1}]
    out = read_response({"path": "/completion", "chunks": [json.dumps(answers).encode()]})
    assert logprob_positions(out.objects, out.api) == [(_IDS[t], {_IDS[k]: v for k, v in top.items()}) for t, top in _CAT]


@pytest.mark.engine
def test_the_real_engines_completion_logprobs_are_read(engine, llama_server_engine, record, tmp_path: Path) -> None:
    """llama-cpp-python's ``/v1/completions`` and llama-server's ``/completion``, recorded: each
    generated token is a position with the top-k asked for, and a capture compared with itself has
    the KL of every answer (0)."""
    asks = [
        (engine, "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 6, "temperature": 0, "logprobs": 2}),
        (
            llama_server_engine,
            "/completion",
            {"prompt": "The capital of France is", "n_predict": 6, "temperature": 0, "n_probs": 2},
        ),
    ]
    captures = []
    for k, (server, path, ask) in enumerate(asks):
        rec = record(server.url, name=f"cap{k}")
        with httpx.Client(base_url=rec.url, timeout=120, trust_env=False) as client:
            for stream in (False, True):
                with client.stream("POST", path, json={**ask, "stream": stream}) as response:
                    assert response.status_code == 200, response.read()
                    response.read()
        assert rec.stop() == 0
        captures.append(rec.out)
        for x in rec.exchanges():
            out = read_response(x)
            positions = logprob_positions(out.objects, out.api)
            if out.api == "completions":  # by token text: the answer's text, token by token
                assert positions and "".join(str(t) for t, _ in positions) == out.text, (positions, out.text)
            else:  # by id: as many as it says it generated
                assert out.output_tokens and len(positions) == out.output_tokens, (positions, out.usage)
            assert all(len(top) == 2 for _, top in positions), (path, positions)
    for capture in captures:
        d = compare(capture, capture, top=2)["divergence"]
        assert d["logprobs"] == {"pairs": 2, "kl_mean": 0.0, "top1_agreement": 1.0}, d.get("logprobs")


def _post_sampled(positions: list[tuple[str, dict[str, float]]]) -> list[bytes]:
    """A ``/completion`` answer as llama-server sends it with ``post_sampling_probs``: ``prob`` and
    ``top_probs`` in place of ``logprob`` and ``top_logprobs`` (server-task.cpp ``probs_vector_to_json``)."""
    entries = [
        {
            "id": _IDS[t],
            "token": t,
            "bytes": list(t.encode()),
            "prob": math.exp(top[t]),
            "top_probs": [{"id": _IDS[k], "token": k, "bytes": list(k.encode()), "prob": math.exp(v)} for k, v in top.items()],
        }
        for t, top in positions
    ]
    body = {"index": 0, "content": "".join(t for t, _ in positions), "stop": True, "stop_type": "eos"}
    return [json.dumps({**body, "completion_probabilities": entries}).encode()]


def test_llamacpp_post_sampling_probabilities_are_read_as_their_logs(tmp_path: Path) -> None:
    """With ``post_sampling_probs``, llama-server sends ``prob`` and ``top_probs`` in place of
    ``logprob`` and ``top_logprobs``: those positions had no top-k, so no KL was taken of them."""
    probs = _post_sampled
    ask = ("/completion", {**_NATIVE, "post_sampling_probs": True}, _JSON)
    out = read_response({"path": "/completion", "chunks": probs(_CAT)})
    assert [(t, {k: round(v, 9) for k, v in top.items()}) for t, top in logprob_positions(out.objects, out.api)] == [
        (_IDS[t], {_IDS[k]: v for k, v in top.items()}) for t, top in _CAT
    ]
    for name, b in (("changed", _DOG), ("same", _CAT)):
        (tmp_path / name).mkdir()
        d = compare(*pair_captures(tmp_path / name, {"probs": (ask, probs(_CAT), probs(b))}), top=1)["divergence"]
        post = d["logprobs"]["post_sampling"]
        assert d["exact_match_rate"] == 1 and post["pairs"] == 1, d.get("logprobs")
        assert (post["kl_mean"] > 0) is (name == "changed") and post["top1_agreement"] == (0.5 if name == "changed" else 1)


def _old_llamacpp_entry(token: str, top: dict[str, float]) -> dict[str, Any]:
    """An entry as llama-server sent it before its late-2024 rewrite (``probs_vector_to_json``):
    the chosen token's text as ``content``, each alternative's as ``tok_str`` with its ``prob``."""
    return {"content": token, "probs": [{"tok_str": t, "prob": math.exp(v)} for t, v in top.items()]}


def _old_llamacpp_whole(positions: list[tuple[str, dict[str, float]]]) -> list[bytes]:
    probabilities = [_old_llamacpp_entry(t, top) for t, top in positions]
    body = {"content": "".join(t for t, _ in positions), "id_slot": 0, "stop": True, "stopped_eos": True}
    return [json.dumps({**body, "completion_probabilities": probabilities}).encode()]


def _old_llamacpp_streamed(positions: list[tuple[str, dict[str, float]]]) -> list[bytes]:
    """Each partial event carries its token's entries; the last (``stop``) restates them all."""
    events: list[dict[str, Any]] = [
        {
            "content": t,
            "stop": False,
            "id_slot": 0,
            "multimodal": False,
            "completion_probabilities": [_old_llamacpp_entry(t, top)],
        }
        for t, top in positions
    ]
    everything = [_old_llamacpp_entry(t, top) for t, top in positions]
    events.append({"content": "", "stop": True, "id_slot": 0, "stopped_eos": True, "completion_probabilities": everything})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]


def test_an_older_llamacpp_probabilities_shape_is_read(tmp_path: Path) -> None:
    """llama-server before late 2024 answered ``n_probs`` with ``{"content", "probs": [{"tok_str",
    "prob"}]}`` entries: no position had a top-k, so no KL was taken; a stream's last event restates
    every position, which is not read twice."""
    by_text = [(t, {k: round(v, 9) for k, v in top.items()}) for t, top in _CAT]
    for chunks, ctype in ((_old_llamacpp_whole(_CAT), _JSON), (_old_llamacpp_streamed(_CAT), _SSE)):
        out = read_response({"path": "/completion", "chunks": chunks, "response_headers": [["content-type", ctype]]})
        assert out.text == "The cat"
        read = [(t, {k: round(v, 9) for k, v in top.items()}) for t, top in logprob_positions(out.objects, out.api)]
        assert read == by_text, ctype
    for name, b in (("changed", _DOG), ("same", _CAT)):
        (tmp_path / name).mkdir()
        pairs = {
            "whole": (("/completion", _NATIVE, _JSON), _old_llamacpp_whole(_CAT), _old_llamacpp_whole(b)),
            "streamed": (
                ("/completion", {**_NATIVE, "stream": True}, _SSE),
                _old_llamacpp_streamed(_CAT),
                _old_llamacpp_streamed(b),
            ),
        }
        d = compare(*pair_captures(tmp_path / name, pairs), top=2)["divergence"]
        post = d["logprobs"]["post_sampling"]  # an older llama-server's ``probs`` are post-sampling
        assert d["exact_match_rate"] == 1 and post["pairs"] == 2, d.get("logprobs")
        if name == "changed":
            assert post["kl_mean"] > 0 and post["top1_agreement"] == 0.5, d["logprobs"]
        else:
            assert post["kl_mean"] == 0 and post["top1_agreement"] == 1, d["logprobs"]


_NOTE = "KL over post-sampling probabilities (after top_k/top_p): moves with sampling settings as well as the model"


def _compared(a: Path, b: Path) -> tuple[list[str], dict[str, Any], str]:
    """compare's text lines, its --json divergence and the report's HTML of captures ``a`` and ``b``."""
    runner = CliRunner()
    text = runner.invoke(cli, ["compare", str(a), str(b)], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    data = runner.invoke(cli, ["compare", "--json", str(a), str(b)])
    assert data.exit_code == 0, data.output
    lines = [" ".join(line.replace("│", " ").split()) for line in text.output.splitlines()]
    return [line for line in lines if "KL" in line or "top-1" in line], json.loads(data.output)["divergence"], render(a, b)


def test_post_sampling_probabilities_are_no_kl_against_the_models_own(tmp_path: Path) -> None:
    """llama.cpp's post-sampling probabilities (``post_sampling_probs``; an older llama-server's
    ``probs``) were cut and renormalised by top_k/top_p: compare took their KL against the other
    side's raw logprobs as if both were the model's. Now such a pair has no KL, and says why."""
    post = {
        "today's": ("/completion", {**_NATIVE, "post_sampling_probs": True}, _JSON, _post_sampled),
        "older": ("/completion", _NATIVE, _JSON, _old_llamacpp_whole),
    }
    for name, (path, body, ctype, shape) in post.items():
        out = read_response({"path": path, "chunks": shape(_CAT)})
        assert post_sampling(out.objects, out.api), name
        for side, (a, b) in {"a": (shape(_CAT), _llamacpp_whole(_CAT)), "b": (_llamacpp_whole(_CAT), shape(_CAT))}.items():
            (tmp_path / name / side).mkdir(parents=True)
            lines, d, html = _compared(*pair_captures(tmp_path / name / side, {"q": ((path, body, ctype), a, b)}))
            assert d["logprobs"] == {
                "pairs": 0,
                "kl_mean": None,
                "top1_agreement": None,
                "not_comparable": {f"{side}_post_sampling": 1},
            }, (name, side)
            first, second = ("A", "B") if side == "a" else ("B", "A")
            said = f"logprob KL not comparable: {first}'s post-sampling, {second}'s the model's"
            assert lines == [f"{said} 1 pairs"], (name, side, lines)
            assert said.replace("'", "&#x27;") in html, (name, side)


def test_post_sampling_on_both_sides_has_its_kl_and_says_over_what(tmp_path: Path) -> None:
    """Both sides post-sampling: the KL is taken (a changed distribution shows, the same one does
    not), and compare says it moves with the sampling settings as well as the model."""
    ask = ("/completion", {**_NATIVE, "post_sampling_probs": True}, _JSON)
    for name, b in (("changed", _DOG), ("same", _CAT)):
        (tmp_path / name).mkdir()
        lines, d, html = _compared(*pair_captures(tmp_path / name, {"q": (ask, _post_sampled(_CAT), _post_sampled(b))}))
        post = d["logprobs"]["post_sampling"]
        assert post["pairs"] == 1 and "not_comparable" not in d["logprobs"], d["logprobs"]
        assert (post["kl_mean"] > 0) is (name == "changed"), d["logprobs"]
        # no pair over the model's own logprobs: its figures are null, not 0, and not printed
        assert {k: d["logprobs"][k] for k in ("pairs", "kl_mean", "top1_agreement")} == {
            "pairs": 0,
            "kl_mean": None,
            "top1_agreement": None,
        }, d["logprobs"]
        assert lines == [
            f"{POST_SAMPLING_KL} {post['kl_mean']:.4f}",
            f"{POST_SAMPLING_TOP1} {post['top1_agreement']:.1%}",
            f"{_NOTE} 1 pairs, apart from the 0 over the model's logprobs",
        ], lines
        assert _NOTE in html and html.count("logprob KL over the shared prefix") == 1, html


def test_post_sampling_pairs_are_no_part_of_the_models_logprob_kl(tmp_path: Path) -> None:
    """A comparison with pairs of both kinds averaged the KL over post-sampling probabilities with
    the KL over the model's own logprobs, two different quantities. Now the headline figures are
    the model's pairs' alone, as a comparison of those pairs alone has them, and the post-sampling
    pairs' are apart, as a comparison of those alone has them: a change on one kind shows there only."""
    model = (("/completion", _NATIVE, _JSON), _llamacpp_whole)
    post = (("/completion", {**_NATIVE, "post_sampling_probs": True}, _JSON), _post_sampled)

    def logprobs(name: str, pairs: dict[str, tuple[Any, list[tuple[str, dict[str, float]]]]]) -> dict[str, Any]:
        (tmp_path / name).mkdir()
        shaped = {k: (ask, shape(_CAT), shape(b)) for k, ((ask, shape), b) in pairs.items()}
        lines, d, html = _compared(*pair_captures(tmp_path / name, shaped))
        return {**d["logprobs"], "lines": lines, "html": html}

    for changed in ("model", "post"):
        b_model, b_post = (_DOG, _CAT) if changed == "model" else (_CAT, _DOG)
        alone_model = logprobs(f"{changed}-model", {"m": (model, b_model)})
        alone_post = logprobs(f"{changed}-post", {"p": (post, b_post)})["post_sampling"]
        both = logprobs(f"{changed}-both", {"m": (model, b_model), "p": (post, b_post)})
        assert both["pairs"] == 1 and both["post_sampling"] == alone_post, both
        assert (both["kl_mean"], both["top1_agreement"]) == (alone_model["kl_mean"], alone_model["top1_agreement"]), both
        # the kind that changed shows a KL, the other none
        assert (both["kl_mean"] > 0, both["post_sampling"]["kl_mean"] > 0) == (changed == "model", changed == "post"), both
        assert both["lines"] == [
            f"logprob KL over the shared prefix (mean) {both['kl_mean']:.4f}",
            f"top-1 agreement {both['top1_agreement']:.1%}",
            f"{POST_SAMPLING_KL} {alone_post['kl_mean']:.4f}",
            f"{POST_SAMPLING_TOP1} {alone_post['top1_agreement']:.1%}",
            f"{_NOTE} 1 pairs, apart from the 1 over the model's logprobs",
        ], both["lines"]
        for label, said in logprob_rows(both):
            assert f"<td>{escape(label)}</td><td>{escape(said)}</td>" in both["html"], label


def test_the_models_own_logprobs_on_both_sides_are_said_as_before(tmp_path: Path) -> None:
    """Neither side post-sampling: the logprob figures and lines are what they were, no note."""
    a, b = pair_captures(tmp_path, _pairs(_DOG))
    out = read_response({"path": "/completion", "chunks": _llamacpp_whole(_CAT)})
    assert not post_sampling(out.objects, out.api)
    lines, d, html = _compared(a, b)
    kl = d["logprobs"]
    assert set(kl) == {"pairs", "kl_mean", "top1_agreement"} and kl["pairs"] == 4, kl
    assert lines == [
        f"logprob KL over the shared prefix (mean) {kl['kl_mean']:.4f}",
        f"top-1 agreement {kl['top1_agreement']:.1%}",
    ], lines
    assert "post-sampling" not in html and "not comparable" not in html


@pytest.mark.engine
def test_the_real_llama_server_post_sampling_probabilities_are_told_apart(llama_server_engine, record, tmp_path: Path) -> None:
    """llama-server's ``/completion`` asked with and without ``post_sampling_probs``, whole and
    streamed, recorded: each answer's positions are post-sampling as asked, and a capture against
    itself has its KL (0) and, where post-sampling, the note. (The two captures pair nothing: their
    requests differ; a pair of one request, one side post-sampling, is the writer's tests'.)"""
    ask = {"prompt": "The capital of France is", "n_predict": 4, "temperature": 0, "n_probs": 2}
    captures: dict[bool, Path] = {}
    for post in (True, False):
        rec = record(llama_server_engine.url, name=f"post-{post}")
        with httpx.Client(base_url=rec.url, timeout=120, trust_env=False) as client:
            for stream in (False, True):
                body = {**ask, "stream": stream, "post_sampling_probs": post}
                with client.stream("POST", "/completion", json=body) as response:
                    assert response.status_code == 200, response.read()
                    response.read()
        assert rec.stop() == 0
        captures[post] = rec.out
        for x in rec.exchanges():
            out = read_response(x)
            assert logprob_positions(out.objects, out.api), x["chunks"]
            assert post_sampling(out.objects, out.api) is post, x["chunks"]
    for post, capture in captures.items():
        kl = compare(capture, capture, top=2)["divergence"]["logprobs"]
        figures = kl["post_sampling"] if post else kl
        assert figures["pairs"] == 2 and figures["kl_mean"] == 0, kl
        assert kl["pairs"] == (0 if post else 2) and (kl["kl_mean"] is None) is post, kl
        notes = [row for row in logprob_rows(kl) if row[0] == _NOTE]
        assert notes == ([(_NOTE, "2 pairs, apart from the 0 over the model's logprobs")] if post else []), kl
