"""Probes and enrichment against the two real engines serving the same GGUF."""

from __future__ import annotations

import hashlib
import json
import os

import httpx
import pytest

from tests.extras import needs

llama_cpp = needs("llama_cpp", "engine")
from click.testing import CliRunner

from infertap.capture.info import summarize
from infertap.cli import cli
from infertap.engines.gguf_meta import read_gguf
from infertap.engines.probe import open_engine, probe
from infertap.launch import SMOLLM2_ALIAS

pytestmark = pytest.mark.engine

QUESTION = {
    "model": SMOLLM2_ALIAS,
    "messages": [{"role": "user", "content": "What is 17 + 25?"}],
    "temperature": 0,
    "max_tokens": 24,
}


def _facts(snap: dict) -> dict:
    return {k: v["value"] for k, v in snap["facts"].items()}


def test_llama_cpp_python_is_detected_with_its_repeat_penalty_default(engine, gguf):
    snap = probe(engine.url, model_file=str(gguf), labels={"gpu": "none"})
    facts = _facts(snap)
    assert snap["kind"] == "llama-cpp-python"
    assert facts["version"] == llama_cpp.__version__
    assert facts["defaults"]["repeat_penalty"] == 1.1
    assert facts["models"] == [SMOLLM2_ALIAS]
    assert facts["model_sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert facts["chat_template"] == read_gguf(gguf).chat_template
    # The GGUF's tensor types by share of the weights: Q4_1, its embedding in Q8_0, its norms in F32.
    assert facts["dtype"] == "Q4_1 79%, Q8_0 21%, F32 <1%" and "210 tensors" in snap["facts"]["dtype"]["source"]
    assert facts["context_size"] is None and "context_size" in snap["unknown"]
    assert "not exposed" in snap["facts"]["context_size"]["source"]
    assert snap["labels"] == {"gpu": "none"} and snap["host_is_engine_host"] is True


def test_llama_cpp_python_without_the_model_file_says_what_it_cannot_know(engine):
    snap = probe(engine.url)
    assert {"chat_template", "model_sha256", "model_path", "bos_token"} <= set(snap["unknown"])
    assert "--model-file" in snap["facts"]["chat_template"]["source"]


def test_llama_server_is_detected_and_says_its_build_is_unknown(llama_server_engine, gguf):
    snap = probe(llama_server_engine.url)
    facts = _facts(snap)
    assert snap["kind"] == "llama-server"
    assert facts["defaults"]["repeat_penalty"] == 1.0
    assert facts["parallel_slots"] == 4
    assert facts["context_size"] > 0
    assert facts["chat_template"] == read_gguf(gguf).chat_template
    assert facts["bos_token"] == "<|im_start|>"
    assert facts["dtype"] == read_gguf(gguf).dtype() and "/props model_path" in snap["facts"]["dtype"]["source"]
    # The GGUF /props names is read here for its tensor types: its hash comes with it.
    assert facts["model_sha256"] == hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert "/props model_path" in snap["facts"]["model_sha256"]["source"]
    build = snap["raw"]["/props"]["build_info"]
    if build.startswith("b0-"):  # built from the sdist without git metadata, as here
        assert facts["version"] is None and build in snap["facts"]["version"]["source"]
    else:
        assert facts["version"] == build


def test_the_two_engines_differ_on_the_same_request_and_the_snapshots_say_why(engine, llama_server_engine):
    a = probe(engine.url)
    b = probe(llama_server_engine.url)
    penalty_a = a["facts"]["defaults"]["value"]["repeat_penalty"]
    penalty_b = b["facts"]["defaults"]["value"]["repeat_penalty"]
    assert penalty_a != penalty_b

    def first_line(url: str, **extra: object) -> str:
        reply = httpx.post(f"{url}/v1/chat/completions", json={**QUESTION, **extra}, timeout=120).json()
        return reply["choices"][0]["message"]["content"].split("\n")[0]

    # llama-server computes the prompt afresh: a prefix cached by an earlier test in its slots
    # changes the arithmetic enough to move a greedy answer ("32" vs "32."; docs/engines.md).
    fresh = {"cache_prompt": False}
    assert first_line(engine.url) != first_line(llama_server_engine.url, **fresh)
    # Pin the one default that differs, and the answers agree.
    assert first_line(engine.url, repeat_penalty=penalty_b) == first_line(llama_server_engine.url, **fresh)


@pytest.mark.parametrize("which", ["engine", "llama_server_engine"])
def test_recording_stores_a_snapshot_and_enriches_each_exchange(which, request, record, gguf):
    upstream = request.getfixturevalue(which)
    rec = record(upstream.url, "--model-file", str(gguf))
    with httpx.Client(timeout=120) as client:
        chat = client.post(f"{rec.url}/v1/chat/completions", json=QUESTION).json()
        streamed = client.post(
            f"{rec.url}/v1/chat/completions",
            json={
                **QUESTION,
                "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                "stream": True,
                "stream_options": {"include_usage": True},
                "top_k": 5,
            },
        )
        completion = client.post(
            f"{rec.url}/v1/completions", json={"model": SMOLLM2_ALIAS, "prompt": "One, two,", "max_tokens": 4, "temperature": 0}
        ).json()
    assert streamed.status_code == 200
    rec.stop()
    records = rec.records()
    snapshots = [r for r in records if r["type"] == "engine"]
    assert len(snapshots) == 1
    kind = snapshots[0]["kind"]
    assert kind == ("llama-cpp-python" if which == "engine" else "llama-server")
    exchanges = {r["id"]: r for r in records if r["type"] == "exchange"}
    enrichments = [r for r in records if r["type"] == "enrichment"]
    assert sorted(e["exchange_id"] for e in enrichments) == sorted(exchanges)
    by_path = {}
    for e in enrichments:
        x = exchanges[e["exchange_id"]]
        by_path.setdefault(x["path"], []).append((x, e))
        assert e["engine"] == snapshots[0]["fingerprint"]
        assert e["prompt_tokens"]["ids"], e["prompt_tokens"]["source"]
    for x, e in by_path["/v1/chat/completions"]:
        # The effective prompt (template applied, system prompt added where missing) agrees
        # with what the engine says it processed.
        if e["response"]["usage"] is None:  # llama-cpp-python ignores stream_options.include_usage
            assert json.loads(x["request_body"]).get("stream") and e["prompt_tokens"]["agrees_with_usage"] is None
        else:
            assert e["prompt_tokens"]["agrees_with_usage"] is True
            assert e["prompt_tokens"]["count"] == e["response"]["usage"]["prompt_tokens"]
        settings = e["settings"]
        assert settings["temperature"] == {"value": 0, "source": "request"}
        assert settings["repeat_penalty"]["source"] == "engine_default"
        assert settings["repeat_penalty"]["value"] == (1.1 if kind == "llama-cpp-python" else 1.0)
    x, e = next((x, e) for x, e in by_path["/v1/chat/completions"] if json.loads(x["request_body"]).get("stream"))
    assert e["settings"]["top_k"] == {"value": 5, "source": "request"}
    assert "You are a helpful AI assistant" not in e["prompt_tokens"]["rendered"]  # it had a system prompt
    plain = next(e for x, e in by_path["/v1/chat/completions"] if not json.loads(x["request_body"]).get("stream"))
    assert "You are a helpful AI assistant named SmolLM" in plain["prompt_tokens"]["rendered"]  # the template added it
    assert plain["response"]["usage"] == chat["usage"]
    (cx, ce) = by_path["/v1/completions"][0]
    assert ce["prompt_tokens"]["count"] == completion["usage"]["prompt_tokens"]
    if kind == "llama-server":
        assert ce["server_timings"]["source"].startswith("llama.cpp timings")
        assert ce["server_timings"]["prompt_n"] <= ce["prompt_tokens"]["count"]
    info = summarize(rec.out)
    assert list(info["engines"]) == [f"{kind} {_facts(snapshots[0])['version'] or '(version unknown)'} at {upstream.url}"]


def test_llama_cpp_python_settings_it_does_not_read_are_not_the_requests(engine, record, gguf):
    """Its request models drop fields they don't have (mirostat: its field is mirostat_mode;
    typical_p) and its server drops n: sent, they change nothing, and the enrichment says so."""
    base = {**QUESTION, "temperature": 1.0, "seed": 7, "max_tokens": 12}

    def ask(**extra: object) -> list[str]:
        body = httpx.post(f"{engine.url}/v1/chat/completions", json={**base, **extra}, timeout=120).json()
        return [c["message"]["content"] for c in body["choices"]]

    plain = ask()
    assert ask(mirostat=2, mirostat_tau=1.0) == plain and ask(typical_p=0.01) == plain and ask(n=3) == plain
    assert ask(mirostat_mode=2, mirostat_tau=1.0) != plain
    rec = record(engine.url, "--model-file", str(gguf))
    sent = {**base, "mirostat": 2, "mirostat_tau": 1.0, "n": 3, "typical_p": 0.01}
    assert httpx.post(f"{rec.url}/v1/chat/completions", json=sent, timeout=120).status_code == 200
    rec.stop()
    (settings,) = [r["settings"] for r in rec.records() if r["type"] == "enrichment"]
    assert settings["mirostat"] == {"value": 0, "source": "engine_default", "ignored": {"mirostat": 2}}
    assert settings["n"] == {"value": 1, "source": "engine_default", "ignored": {"n": 3}}
    assert settings["typical_p"] == {"value": None, "source": "unknown", "ignored": {"typical_p": 0.01}}
    assert settings["mirostat_tau"] == {"value": 1.0, "source": "request"}  # read: it applies with mirostat_mode


def test_a_llama_cpp_python_completion_with_a_suffix_is_the_fill_in_the_middle_prompt_it_ran(engine, record, gguf):
    """A suffix makes llama-cpp-python lay out a fill-in-the-middle prompt (FIM tokens around the
    prompt and the suffix, special-token text read as text): the enrichment's prompt was the plain
    prompt's, 6 tokens where the engine ran 17."""
    prompt = "def f(x):<|im_start|>"  # special-token text: a token of its own only without a suffix
    bodies = [
        {"prompt": prompt},
        {"prompt": prompt, "suffix": " return x"},
        {"prompt": prompt, "suffix": ""},
        {"prompt": [prompt], "suffix": "<|im_end|>"},
        {"prompt": "", "suffix": "z"},
    ]
    rec = record(engine.url, "--model-file", str(gguf))
    usage = []
    for body in bodies:
        reply = httpx.post(f"{rec.url}/v1/completions", json={"model": SMOLLM2_ALIAS, "max_tokens": 1, **body}, timeout=120)
        usage.append(reply.json()["usage"]["prompt_tokens"])
    rec.stop()
    records = rec.records()
    seq = {r["id"]: r["seq"] for r in records if r["type"] == "exchange"}
    enriched = sorted((r for r in records if r["type"] == "enrichment"), key=lambda e: seq[e["exchange_id"]])
    prompts = [e["prompt_tokens"] for e in enriched]
    assert [p["count"] for p in prompts] == usage and all(p["agrees_with_usage"] for p in prompts)
    assert len({tuple(p["ids"]) for p in prompts}) == len(bodies)  # the suffix changed each
    assert prompts[1]["ids"][0] == prompts[1]["ids"][-1] == 0 and usage[0] < usage[2]
    # Where its tokenizer can't run here (another version), the layout is unknown, not the plain prompt's.
    adapter = open_engine(engine.url, model_file=str(gguf))
    try:
        adapter._local = False
        remote = adapter.prompt_tokens("/v1/completions", {"prompt": prompt, "suffix": "x"})
    finally:
        adapter.http.close()
    assert remote.ids is None and "fill-in-the-middle" in remote.source


def test_llama_cpp_python_runs_a_list_of_one_prompt_as_that_prompt_and_says_what_it_refuses(engine, record, gguf):
    """llama-cpp-python's server runs ``["One, two,"]`` as the string (its create_completion takes
    the one item): the enrichment had no prompt tokens for it. It takes text only: token ids are
    refused and two prompts fail (both a 500), which OpenAI and vLLM run: the enrichment said the
    ids were run, and the probe's notes say so now."""
    bodies = [{"prompt": "One, two,"}, {"prompt": ["One, two,"]}, {"prompt": [1, 2, 3]}, {"prompt": ["One,", "two,"]}]
    rec = record(engine.url, "--model-file", str(gguf))
    replies = [
        httpx.post(f"{rec.url}/v1/completions", json={"model": SMOLLM2_ALIAS, "max_tokens": 1, **body}, timeout=120)
        for body in bodies
    ]
    rec.stop()
    records = rec.records()
    seq = {r["id"]: r["seq"] for r in records if r["type"] == "exchange"}
    enriched = sorted((r for r in records if r["type"] == "enrichment"), key=lambda e: seq[e["exchange_id"]])
    string, one, ids, batch = (e["prompt_tokens"] for e in enriched)
    assert [r.status_code for r in replies] == [200, 200, 500, 500]
    assert one["ids"] == string["ids"] and one["count"] == replies[1].json()["usage"]["prompt_tokens"]
    assert one["agrees_with_usage"] is True
    assert ids["ids"] is None and "token ids" in ids["source"] and batch["ids"] is None and "500" in batch["source"]
    (snap,) = (r for r in records if r["type"] == "engine")
    assert any("a prompt of token ids, or of several prompts, fails" in note for note in snap["notes"])


def test_llama_server_responses_max_output_tokens_is_the_requests_max_tokens(llama_server_engine, record):
    rec = record(llama_server_engine.url)
    body = {"model": SMOLLM2_ALIAS, "input": "Tell me a long story.", "max_output_tokens": 5, "temperature": 0}
    answer = httpx.post(f"{rec.url}/v1/responses", json=body, timeout=120).json()
    rec.stop()
    assert answer["usage"]["output_tokens"] == 5  # honoured
    (settings,) = [r["settings"] for r in rec.records() if r["type"] == "enrichment"]
    assert settings["max_tokens"] == {"value": 5, "source": "request"}


def test_prompt_token_ids_equal_the_engines_own_tokenizer_on_the_rendered_prompt(llama_server_engine, record):
    rec = record(llama_server_engine.url)
    httpx.post(f"{rec.url}/v1/chat/completions", json=QUESTION, timeout=120)
    rec.stop()
    (e,) = [r for r in rec.records() if r["type"] == "enrichment"]
    rendered = httpx.post(
        f"{llama_server_engine.url}/apply-template", json={"messages": QUESTION["messages"]}, timeout=30
    ).json()["prompt"]
    ids = httpx.post(
        f"{llama_server_engine.url}/tokenize", json={"content": rendered, "add_special": True, "parse_special": True}, timeout=30
    ).json()["tokens"]
    assert e["prompt_tokens"]["ids"] == ids
    assert e["prompt_tokens"]["rendered"] == rendered


def test_enrich_after_the_fact_adds_records_without_rewriting_exchanges(engine, record, gguf, tmp_path):
    rec = record(engine.url, "--no-probe")
    httpx.post(f"{rec.url}/v1/chat/completions", json=QUESTION, timeout=120)
    httpx.get(f"{rec.url}/v1/models", timeout=30)
    rec.stop()
    before = rec.exchanges()
    assert not [r for r in rec.records() if r["type"] in ("engine", "enrichment")]
    result = CliRunner().invoke(cli, ["enrich", str(rec.out), "--engine", engine.url, "--model-file", str(gguf)])
    assert result.exit_code == 0, result.output
    assert "enriched 1 of 2 exchanges" in result.output
    records = rec.records()
    assert [r for r in records if r["type"] == "exchange"] == before
    (e,) = [r for r in records if r["type"] == "enrichment"]
    assert e["exchange_id"] == before[0]["id"] and e["prompt_tokens"]["agrees_with_usage"] is True
    assert [r["kind"] for r in records if r["type"] == "engine"] == ["llama-cpp-python"]
    enrich_run = [r for r in records if r["type"] == "header" and r["recorder"]["kind"] == "enrich"]
    assert enrich_run and enrich_run[0]["recorder"]["pid"] == os.getpid()  # info tells it writing from it dead


def test_probe_cli_prints_facts_and_json(engine, gguf):
    runner = CliRunner()
    text = runner.invoke(cli, ["probe", engine.url, "--model-file", str(gguf)])
    assert text.exit_code == 0, text.output
    assert "llama-cpp-python" in text.output and "repeat_penalty=1.1" in text.output
    as_json = runner.invoke(cli, ["probe", engine.url, "--json", "--label", "gpu=none"])
    snap = json.loads(as_json.output)
    assert snap["type"] == "engine" and snap["labels"] == {"gpu": "none"}


def test_the_enricher_probes_and_warms_up_before_traffic_and_loads_the_tokenizer_once(engine, gguf):
    """Enricher.start() returns with the snapshot taken and the template and tokenizer loaded: that
    work holds the GIL in long stretches, so it must not happen beside a stream in flight. A
    re-probe reuses the tokenizer instead of loading it again."""
    from infertap.engines import llama_cpp_python as lcp
    from infertap.engines.enrich import Enricher

    lcp._vocab.cache_clear()
    written: list[dict] = []
    enricher = Enricher(engine.url, written.append, model_file=str(gguf), probe_interval=3600).start()
    try:
        assert enricher.snapshot is not None and [r["type"] for r in written] == ["engine"]
        assert lcp._vocab.cache_info().currsize == 1 and lcp._compiled.cache_info().currsize >= 1
        enricher._probe()  # a periodic re-probe: a new adapter, the same loaded tokenizer
        assert enricher.engine.local_tokenizer() is not None
        assert lcp._vocab.cache_info().misses == 1 and lcp._vocab.cache_info().hits >= 1
    finally:
        enricher.close()


def test_clients_naming_different_models_hold_no_traffic_for_a_re_probe(engine, gguf):
    """llama-cpp-python answers with the model name its request gave: two clients naming two
    models are one engine, not a change to re-probe for. A re-probe would hold the proxy's traffic
    (its /v1/models takes the model lock) once per alternation."""
    from infertap.capture.records import new_exchange
    from infertap.engines.enrich import Enricher
    from infertap.engines.trafficgate import TrafficGate

    class CountingGate(TrafficGate):
        holds = 0

        def exclusive(self, wait_s):
            self.holds += 1
            return super().exclusive(wait_s)

    exchanges = []
    with httpx.Client(timeout=120) as client:
        for i, name in enumerate(["client-a", "client-b"] * 2):
            body = json.dumps({**QUESTION, "model": name, "max_tokens": 1}).encode()
            reply = client.post(f"{engine.url}/v1/chat/completions", content=body, headers={"content-type": "application/json"})
            assert reply.json()["model"] == name  # echoed
            exchanges.append(
                new_exchange(
                    id=f"x{i}",
                    method="POST",
                    path="/v1/chat/completions",
                    upstream=engine.url,
                    wall=0.0,
                    start_ns=0,
                    request_body=body,
                    status=200,
                    response_headers=[["content-type", "application/json"]],
                    chunks=[reply.content],
                )
            )
    gate = CountingGate()
    written: list[dict] = []
    enricher = Enricher(engine.url, written.append, gate=gate, model_file=str(gguf), probe_interval=3600).start()
    at_start = gate.holds
    for x in exchanges:
        enricher.submit(x)
    enricher.close()
    assert gate.holds == at_start
    assert [r["type"] for r in written].count("enrichment") == 4 and enricher.snapshots == 1
