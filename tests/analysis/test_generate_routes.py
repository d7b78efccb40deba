"""SGLang's and TGI's native ``/generate`` routes (and TGI's ``/generate_stream``), shaped as their
servers send them (SGLang's ``http_server.py`` and its docs' streaming example; TGI's
``server.rs`` ``GenerateResponse``/``StreamResponse``): requests nothing read before, in no figure
and no workload identity, and compare found no generation requests in them. SGLang's stream
repeats the text so far in every event: its new text is the difference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infertap.analysis.compare import compare
from infertap.apis import read_request, read_response
from infertap.capture.identity import workload_identity
from tests.analysis_builders import MS, Load, exchange
from tests.helpers import pair_captures, write_capture

_SSE, _JSON = "text/event-stream", "application/json"
_SGLANG = {"text": "The capital of France is", "sampling_params": {"temperature": 0, "max_new_tokens": 8}}
_TGI = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8, "details": True}}


def _meta(tokens: int, finish: dict[str, Any] | None = None, latency: float = 0.25) -> dict[str, Any]:
    """SGLang's ``meta_info``: its request id and latency new on every run."""
    said = {"id": f"a{latency}", "prompt_tokens": 6, "completion_tokens": tokens, "cached_tokens": 0, "finish_reason": finish}
    return said | {"e2e_latency": latency}


def _sglang_stream(*texts: str, finish: dict[str, Any] | None = None, latency: float = 0.25) -> list[bytes]:
    """SGLang's stream: each event the text so far (cumulative), the last with its finish, then [DONE]."""
    finish = finish or {"type": "length", "length": len(texts)}
    last = len(texts) - 1
    events = [{"text": t, "meta_info": _meta(i + 1, finish if i == last else None, latency)} for i, t in enumerate(texts)]
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def _sglang_whole(text: str, finish: dict[str, Any] | None = None, latency: float = 0.25) -> list[bytes]:
    return [json.dumps({"text": text, "meta_info": _meta(3, finish or {"type": "stop", "matched": 2}, latency)}).encode()]


def _tgi_stream(*tokens: str, reason: str = "eos_token") -> list[bytes]:
    """TGI's stream: one event per token, the last (end of sequence, a special token) with the whole text and details."""
    events: list[dict[str, Any]] = [
        {
            "index": i + 1,
            "token": {"id": 10 + i, "text": t, "logprob": -0.5, "special": False},
            "generated_text": None,
            "details": None,
        }
        for i, t in enumerate(tokens)
    ]
    last = {"id": 2, "text": "</s>", "logprob": -0.1, "special": True}
    details = {"finish_reason": reason, "generated_tokens": len(tokens) + 1, "seed": None}
    events.append({"index": len(tokens) + 1, "token": last, "generated_text": "".join(tokens), "details": details})
    return [b"data:" + json.dumps(e).encode() + b"\n\n" for e in events]


def _tgi_whole(text: str, reason: str = "length") -> list[bytes]:
    details = {"finish_reason": reason, "generated_tokens": 2, "seed": None, "prefill": [], "tokens": []}
    return [json.dumps({"generated_text": text, "details": details}).encode()]


_SG_STREAM = ("/generate", {**_SGLANG, "stream": True}, _SSE)
_SG_WHOLE = ("/generate", _SGLANG, _JSON)
_TGI_STREAM = ("/generate_stream", _TGI, _SSE)
_TGI_WHOLE = ("/generate", _TGI, _JSON)

#: name -> (API, A's chunks, B's chunks): each pair's answers differ.
DIFFER: dict[str, Any] = {
    "sglang stream text": (
        _SG_STREAM,
        _sglang_stream(" Paris", " Paris.", " Paris. It"),
        _sglang_stream(" Paris", " Paris,", " Paris, a"),
    ),
    "sglang stream finish": (
        _SG_STREAM,
        _sglang_stream(" Paris"),
        _sglang_stream(" Paris", finish={"type": "stop", "matched": 2}),
    ),
    "sglang whole text": (_SG_WHOLE, _sglang_whole(" Paris."), _sglang_whole(" Lyon.")),
    "tgi stream text": (_TGI_STREAM, _tgi_stream(" Paris", "."), _tgi_stream(" Lyon", ".")),
    "tgi stream finish": (_TGI_STREAM, _tgi_stream(" Paris"), _tgi_stream(" Paris", reason="length")),
    "tgi whole text": (_TGI_WHOLE, _tgi_whole(" Paris."), _tgi_whole(" Lyon.")),
}


def _read_both(d: dict[str, Any]) -> int:
    """The pairs whose answers compare read on both sides (by their API's adapter, not as bytes)."""
    return sum(r["read_both"] for r in d["readable"].values())


def test_generate_answers_that_differ_differ(tmp_path: Path) -> None:
    a, b = pair_captures(tmp_path, DIFFER)
    d = compare(a, b, top=len(DIFFER))["divergence"]
    assert d["counts"].get("exact", 0) == 0 and d["counts"]["finish_reason_changed"] == 2, d["counts"]
    assert len(d["most_divergent"]) == len(DIFFER) and _read_both(d) == len(DIFFER)
    assert all(
        p["answers_compared"] and p["api"][0] in ("sglang-generate", "tgi-generate", "tgi-generate-stream")
        for p in d["most_divergent"]
    )


def test_the_same_generate_answers_match(tmp_path: Path) -> None:
    """The same answers, SGLang's with the request id and latency of another run in its ``meta_info``."""
    again = {
        "sglang stream text": (_SG_STREAM, _sglang_stream(" Paris", " Paris."), _sglang_stream(" Paris", " Paris.", latency=0.5)),
        "sglang whole text": (_SG_WHOLE, _sglang_whole(" Paris."), _sglang_whole(" Paris.", latency=0.5)),
    }
    twins = {k: (api, x, x) for k, (api, x, _) in DIFFER.items()} | again
    a, b = pair_captures(tmp_path, twins)
    d = compare(a, b, top=len(twins))["divergence"]
    assert d["pairs"] == len(twins) and _read_both(d) == len(twins)
    assert d["exact_match_rate"] == 1 and d["most_divergent"] == [], d


@pytest.mark.parametrize(
    ("path", "body", "chunks", "text", "stream"),
    [
        ("/generate", {**_SGLANG, "stream": True}, _sglang_stream("The", "The cat", "The cat sat"), "The cat sat", True),
        ("/generate", _SGLANG, _sglang_whole("The cat sat"), "The cat sat", False),
        ("/generate_stream", _TGI, _tgi_stream("The", " cat", " sat"), "The cat sat", True),
        ("/generate", _TGI, _tgi_whole("The cat sat"), "The cat sat", False),
    ],
)
def test_generate_requests_and_answers_are_read(
    path: str, body: dict[str, Any], chunks: list[bytes], text: str, stream: bool
) -> None:
    ctype = _SSE if stream else _JSON
    record = {
        "path": path,
        "request_body": json.dumps(body).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", ctype]],
        "chunks": chunks,
    }
    asked = read_request(record)
    assert asked.generation and asked.stream is stream and asked.max_tokens == 8
    assert asked.turns[-1].text == "The capital of France is"
    out = read_response(record)
    assert out.readable and out.error is None and out.text == text
    assert out.finish_reason in ("stop", "length")


def test_an_sglang_stream_is_timed_by_its_new_text(load: Load) -> None:
    """Each event repeats the text so far: the answer is the last event's text, each event's token
    the text it adds; an event that adds none (the finish's) bears no token."""
    texts = ("The", "The cat", "The cat sat")
    events = _sglang_stream(*texts)
    chunks = [(100, events[0]), (130, events[1]), (170, events[2]), (180, events[3])]
    request = json.dumps({**_SGLANG, "stream": True}).encode()
    a = load([exchange("x", chunks=chunks, request=request, path="/generate")])
    [m] = a.query("SELECT * FROM metrics WHERE exchange_id = 'x'").records()
    assert m["generation"] is True and m["ttft_ns"] == 100 * MS
    assert (m["output_tokens"], m["output_tokens_source"]) == (len(texts), "usage")
    assert (m["prompt_tokens"], m["prompt_tokens_source"]) == (6, "usage")
    gaps = [r[0] for r in a.query("SELECT gap_ns FROM itl WHERE exchange_id = 'x' ORDER BY chunk").rows]
    assert gaps == [30 * MS, 40 * MS]
    said = [r[0] for r in a.query("SELECT content FROM events WHERE exchange_id = 'x' AND content <> '' ORDER BY index").rows]
    assert said == ["The", " cat", " sat"]
    assert m["ok"] is True and m["unfinished"] is False


def test_a_tgi_stream_is_timed_by_its_tokens(load: Load) -> None:
    events = _tgi_stream("The", " cat")
    request = json.dumps(_TGI).encode()
    chunks = [(100, events[0]), (120, events[1]), (150, events[2])]
    a = load([exchange("x", chunks=chunks, request=request, path="/generate_stream")])
    [m] = a.query("SELECT * FROM metrics WHERE exchange_id = 'x'").records()
    assert m["generation"] is True and m["stream"] is True and m["ttft_ns"] == 100 * MS
    assert (m["output_tokens"], m["output_tokens_source"]) == (3, "usage")  # the end of sequence counted
    assert m["ok"] is True and m["unfinished"] is False


def test_a_tgi_stream_cut_before_its_last_event_is_unfinished(load: Load) -> None:
    events = _tgi_stream("The", " cat")
    a = load(
        [exchange("x", chunks=[(100, events[0]), (120, events[1])], request=json.dumps(_TGI).encode(), path="/generate_stream")]
    )
    [m] = a.query("SELECT ok, unfinished FROM metrics WHERE exchange_id = 'x'").records()
    assert m == {"ok": False, "unfinished": True}


@pytest.mark.parametrize(("path", "body", "key"), [("/generate", _SGLANG, "text"), ("/generate", _TGI, "inputs")])
def test_generate_requests_are_in_the_workload_identity(tmp_path: Path, path: str, body: dict[str, Any], key: str) -> None:
    """Two runs asking other prompts are two workloads; the same prompts one."""

    def run(name: str, prompt: str) -> str:
        cap = tmp_path / name
        write_capture(cap, [{"body": {**body, key: prompt}, "chunks": [b"{}"], "path": path}])
        identity = workload_identity(cap)
        assert identity.requests == 1
        return identity.workload

    assert run("a", "one") == run("b", "one")
    assert run("c", "one") != run("d", "two")


def _trimmed(*texts: str, matched: str) -> list[bytes]:
    """An SGLang stream (0.4's) whose stop string spans tokens: the events before its end said the
    start of it, the last event's text is cut before it (``trim_matched_stop``)."""
    return _sglang_stream(*texts, finish={"type": "stop", "matched": matched})


def test_an_sglang_stream_trimmed_at_its_stop_string_answers_its_last_text(tmp_path: Path) -> None:
    """The answer is the last event's text, shorter than the one before it; it was read as the
    text so far with the last event's text added again ("The cat saThe cat")."""
    trimmed = _trimmed("The", "The cat", "The cat sa", "The cat", matched=" sat")
    record = {
        "path": "/generate",
        "request_body": json.dumps({**_SGLANG, "stream": True}).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", _SSE]],
        "chunks": trimmed,
    }
    out = read_response(record)
    assert out.error is None and out.text == "The cat" and out.finish_reason == "stop"
    pairs = {
        "same": (_SG_STREAM, trimmed, _trimmed("The", "The cat", "The cat", matched=" sat")),
        "other": (
            _SG_STREAM,
            _trimmed("The", "The cat", "The cat sa", "The cat", matched=" sat"),
            _trimmed("The", "The dog", matched=" sat"),
        ),
    }
    a, b = pair_captures(tmp_path, pairs)
    d = compare(a, b, top=2)["divergence"]
    assert d["pairs"] == 2 and _read_both(d) == 2
    assert [p["api"][0] for p in d["most_divergent"]] == ["sglang-generate"], d["most_divergent"]
    assert d["counts"].get("exact") == 1, d["counts"]


_BATCH = {"text": ["The capital of France is", "2 + 2 ="], "sampling_params": {"temperature": 0, "max_new_tokens": 8}}


def _sglang_batch(*answers: tuple[str, str], latency: float = 0.25) -> list[bytes]:
    """SGLang's answer to a batch of prompts: a JSON array, one answer per prompt, each with its own counts."""
    said = []
    for i, (text, finish) in enumerate(answers):
        meta = _meta(len(text.split()), {"type": finish}, latency) | {"prompt_tokens": 6 + i}
        said.append({"text": text, "meta_info": meta})
    return [json.dumps(said).encode()]


def test_an_sglang_batch_answer_is_read_as_several_choices() -> None:
    """Each prompt's answer a choice, as n > 1 chat's: the first the answer, the others its choices;
    the token counts the batch's (each answer's summed), as chat's usage counts every choice."""
    chunks = _sglang_batch((" Paris, of course.", "stop"), (" 4", "length"))
    record = {
        "path": "/generate",
        "request_body": json.dumps(_BATCH).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", _JSON]],
        "chunks": chunks,
    }
    out = read_response(record)
    assert out.readable and out.error is None
    assert (out.text, out.finish_reason) == (" Paris, of course.", "stop")
    assert [(c["index"], c["text"]) for c in out.choices] == [(1, " 4")] and out.choices_finish == ["length"]
    answers = json.loads(chunks[0])
    assert out.prompt_tokens == sum(a["meta_info"]["prompt_tokens"] for a in answers)
    assert out.output_tokens == sum(a["meta_info"]["completion_tokens"] for a in answers)


def test_sglang_batch_answers_that_differ_in_any_prompt_differ_and_the_same_match(tmp_path: Path) -> None:
    api = ("/generate", _BATCH, _JSON)
    first = (" Paris.", "stop")
    differ = {"second answer": (api, _sglang_batch(first, (" 4", "stop")), _sglang_batch(first, (" 5", "stop")))}
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 0 and _read_both(d) == 1, d["counts"]
    same = {"same": (api, _sglang_batch(first, (" 4", "stop")), _sglang_batch(first, (" 4", "stop"), latency=0.5))}
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 1 and _read_both(d) == 1 and d["most_divergent"] == []


def test_an_sglang_batch_stream_is_read_per_prompt() -> None:
    """A batch's stream interleaves its prompts' events, each with its ``index`` and the text so far
    of its own prompt: each prompt's answer is its own last text, not the events' texts run together."""
    said = [(0, "The"), (1, "4"), (0, "The cat"), (1, "4."), (0, "The cat sat")]
    last = {0: 4, 1: 3}
    events = []
    for i, (index, text) in enumerate(said):
        finish = {"type": "stop"} if i == last[index] else None
        meta = _meta(len(text), finish) | {"prompt_tokens": 6 + index}
        events.append(b"data: " + json.dumps({"index": index, "text": text, "meta_info": meta}).encode() + b"\n\n")
    record = {
        "path": "/generate",
        "request_body": json.dumps({**_BATCH, "stream": True}).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", _SSE]],
        "chunks": [*events, b"data: [DONE]\n\n"],
    }
    out = read_response(record)
    assert out.readable and out.error is None and out.text == "The cat sat" and out.finish_reason == "stop"
    assert [(c["index"], c["text"], c["finish_reason"]) for c in out.choices] == [(1, "4.", "stop")]
    assert out.output_tokens == len("The cat sat") + len("4.") and out.prompt_tokens == 6 + 7


def test_a_batch_with_settings_per_prompt_reads_the_settings_they_share() -> None:
    """``sampling_params`` a list, one object per prompt: a setting every prompt has alike is the
    request's; one they differ in (or one prompt lacks) is none."""
    params = [{"temperature": 0, "top_k": 5, "max_new_tokens": 8}, {"temperature": 0, "top_k": 7}]
    record = {
        "path": "/generate",
        "request_body": json.dumps({**_BATCH, "sampling_params": params}).encode(),
        "request_headers": [["content-type", _JSON]],
    }
    assert read_request(record).sampling == {"temperature": 0}


def _batch_stream(said: list[tuple[int, str]]) -> dict[str, Any]:
    """A batch's stream record: each event (prompt index, that prompt's text so far), the last of each
    prompt with its finish, then [DONE]."""
    last = {index: i for i, (index, _) in enumerate(said)}
    events = []
    for i, (index, text) in enumerate(said):
        finish = {"type": "stop", "matched": " sat"} if i == last[index] else None
        meta = _meta(len(text), finish) | {"prompt_tokens": 6 + index}
        events.append(b"data: " + json.dumps({"index": index, "text": text, "meta_info": meta}).encode() + b"\n\n")
    return {
        "path": "/generate",
        "request_body": json.dumps({**_BATCH, "stream": True}).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", _SSE]],
        "chunks": [*events, b"data: [DONE]\n\n"],
    }


def test_a_batch_prompt_trimmed_at_its_stop_string_answers_its_last_text() -> None:
    """Each prompt's stream is its own: a stop string trimmed from the second prompt's last text
    (SGLang 0.4) makes that text its answer, as it does the first's, not the text before it with
    the last added again; an untrimmed one reads as its last text too."""
    trimmed = read_response(_batch_stream([(0, "A"), (1, "The"), (1, "The cat sa"), (0, "A b"), (1, "The cat")]))
    assert trimmed.text == "A b" and [c["text"] for c in trimmed.choices] == ["The cat"]
    grown = read_response(_batch_stream([(0, "A"), (1, "The"), (1, "The cat sa"), (0, "A b"), (1, "The cat sat")]))
    assert grown.text == "A b" and [c["text"] for c in grown.choices] == ["The cat sat"]


def _both_record(chunks: list[bytes], ctype: str = _JSON) -> dict[str, Any]:
    """A /generate body holding SGLang's prompt and settings and TGI's, each server ignoring the other's."""
    body = {
        "text": "The capital of France is",
        "sampling_params": {"temperature": 0.25, "max_new_tokens": 8},
        "inputs": "La capitale de la France est",
        "parameters": {"temperature": 0.75, "max_new_tokens": 16},
    }
    return {
        "path": "/generate",
        "request_body": json.dumps(body).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", ctype]],
        "chunks": chunks,
    }


def test_a_generate_body_of_both_shapes_reads_as_the_server_its_answer_names_else_ambiguous() -> None:
    """SGLang reads ``text`` and ``sampling_params``, TGI ``inputs`` and ``parameters``: a body of both is
    read as the server whose answer came back (its prompt and settings differ by which); with no answer
    to tell, its API is ``generate-ambiguous``: a generation request whose prompt and settings are unknown,
    never TGI's by guess. A body of one shape reads as its own server's whatever came back (must match)."""
    sglang = read_request(_both_record(_sglang_whole(" Paris.")))
    tgi = read_request(_both_record(_tgi_whole(" Paris.")))
    assert (sglang.api, sglang.sampling["temperature"], sglang.max_tokens) == ("sglang-generate", 0.25, 8)
    assert sglang.turns[-1].text == "The capital of France is"
    assert (tgi.api, tgi.sampling["temperature"], tgi.max_tokens) == ("tgi-generate", 0.75, 16)
    assert tgi.turns[-1].text == "La capitale de la France est"
    streamed = read_request(_both_record(_sglang_stream(" Paris", " Paris."), _SSE))
    assert streamed.api == "sglang-generate"
    for out, text in ((read_response(_both_record(_sglang_whole(" Paris."))), " Paris."), (read_response(_both_record(_tgi_whole(" Lyon."))), " Lyon.")):  # fmt: skip
        assert out.readable and out.text == text
    for unanswered in ([], [b'{"error": "overloaded"}']):
        unknown = read_request(_both_record(unanswered))
        assert unknown.api == "generate-ambiguous" and unknown.generation, unanswered
        assert unknown.sampling == {} and unknown.max_tokens is None and unknown.turns == ()
    # Must match: one shape is its own server's, whatever answered.
    one = {"path": "/generate", "request_headers": [["content-type", _JSON]], "response_headers": [["content-type", _JSON]]}
    assert read_request({**one, "request_body": json.dumps(_TGI).encode(), "chunks": []}).api == "tgi-generate"
    assert read_request({**one, "request_body": json.dumps(_SGLANG).encode(), "chunks": _tgi_whole("x")}).api == "sglang-generate"


def test_an_sglang_batch_answer_to_a_body_of_both_shapes_reads_as_sglangs() -> None:
    """A body of both shapes whose ``text`` is a batch is answered by SGLang with a JSON array: that
    answer names the server as an object answer does (read per prompt, its prompts and settings
    SGLang's), never "the body is not JSON". The same answer to SGLang's body alone must match it."""
    both = {**_BATCH, "inputs": "La capitale de la France est", "parameters": {"max_new_tokens": 16}}
    chunks = _sglang_batch((" Paris.", "stop"), (" 4", "length"))
    alone = read_response({**_both_record(chunks), "request_body": json.dumps(_BATCH).encode()})
    assert alone.readable and alone.api == "sglang-generate"
    record = {**_both_record(chunks), "request_body": json.dumps(both).encode()}
    out, request = read_response(record), read_request(record)
    assert out.readable and out.error is None and out.api == "sglang-generate"
    assert (out.text, out.choices, out.output_tokens, out.prompt_tokens) == (
        alone.text,
        alone.choices,
        alone.output_tokens,
        alone.prompt_tokens,
    )
    assert (request.api, request.max_tokens) == ("sglang-generate", 8)
    # A TGI answer (one object) to the same body still names TGI.
    assert read_request({**record, "chunks": _tgi_whole(" Paris.")}).api == "tgi-generate"
