"""Probes of engines that can't run here, and the enricher's guarantees, against documented fakes."""

from __future__ import annotations

import gzip
import json
import threading
import time

import httpx
import pytest
from click.testing import CliRunner

from infertap.apis import read_response
from infertap.capture.records import new_exchange
from infertap.cli import cli
from infertap.engines import ProbeError
from infertap.engines.enrich import Enricher, effective_settings
from infertap.engines.ollama import parse_parameters
from infertap.engines.probe import open_engine, probe
from infertap.launch import free_port
from tests import sdk_shapes
from tests.fake_engines import JSONRoutes, llama_server_app, ollama_app, sglang_app, vllm_app
from tests.fake_upstream import ServerThread


def _facts(snap: dict) -> dict:
    return {k: v["value"] for k, v in snap["facts"].items()}


def test_vllm_facts_and_tokenize_with_messages():
    app = vllm_app()
    with ServerThread(app) as server:
        snap = probe(server.url)
        engine = open_engine(server.url)
        tokens = engine.prompt_tokens(
            "/v1/chat/completions", {"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}]}
        )
        engine.http.close()
    facts = _facts(snap)
    assert snap["kind"] == "vllm"
    assert (facts["version"], facts["context_size"], facts["model_path"]) == ("0.32.0", 32768, "/models/Qwen3-8B")
    # The model folder isn't on this host: what it would say stays unknown, with why.
    assert facts["defaults"] is None and "generation-config" in snap["facts"]["defaults"]["source"]
    assert facts["chat_template"] is None and "/models/Qwen3-8B" in snap["facts"]["chat_template"]["source"]
    assert facts["parallel_slots"] is None and "23296 tokens" in snap["facts"]["parallel_slots"]["source"]
    assert snap["raw"]["/metrics cache_config_info"]["kv_cache_max_concurrency"] == "11.375"
    assert tokens.ids == list(range(100, 112)) and tokens.source == "vLLM /tokenize with messages"
    sent = [
        body for method, path, body in app.calls if path == "/tokenize" and "<|start|>" not in str(body)
    ]  # less the harmony check
    assert sent == [{"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}]


def test_vllm_defaults_come_from_the_model_folder_with_their_source(tmp_path):
    """vLLM applies generation_config.json's sampling settings over its neutral defaults and says so
    only in its log: read from the model folder (/v1/models root) where this host can see it."""
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.6, "top_p": 0.9, "max_new_tokens": 256}))
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": {"content": "<s>"}, "eos_token": "</s>", "chat_template": "{{ messages }}"})
    )
    (tmp_path / "config.json").write_text(json.dumps({"dtype": "bfloat16", "quantization_config": {"quant_method": "awq"}}))
    with ServerThread(vllm_app(root=str(tmp_path))) as server:
        snap = probe(server.url)
        engine = open_engine(server.url)
        defaults = engine.defaults_for("/v1/chat/completions")
        engine.http.close()
    facts = _facts(snap)
    assert facts["defaults"]["temperature"] == 0.6 and facts["defaults"]["max_tokens"] == 256
    assert facts["defaults"]["repetition_penalty"] == 1.0  # vLLM's own, where the model sets none
    source = snap["facts"]["defaults"]["source"]
    assert "max_tokens, temperature, top_p from" in source and str(tmp_path / "generation_config.json") in source
    assert defaults is not None and defaults["repeat_penalty"] == 1.0 and defaults["top_p"] == 0.9
    assert (facts["chat_template"], facts["bos_token"], facts["eos_token"]) == ("{{ messages }}", "<s>", "</s>")
    assert facts["quantization"] == "awq"
    assert facts["dtype"] == "bfloat16" and "doesn't publish the dtype it serves in" in snap["facts"]["dtype"]["source"]
    assert any("--generation-config" in note for note in snap["notes"])


def test_sglang_facts():
    with ServerThread(sglang_app()) as server:
        snap = probe(server.url)
    facts = _facts(snap)
    assert snap["kind"] == "sglang"
    assert (facts["version"], facts["parallel_slots"], facts["model_path"]) == ("0.5.9", 128, "qwen/qwen2.5-0.5b-instruct")
    assert facts["context_size"] is None and "unset" in snap["facts"]["context_size"]["source"]
    assert facts["defaults"] is None


def test_ollama_facts_parameters_and_digest():
    with ServerThread(ollama_app()) as server:
        snap = probe(server.url)
    facts = _facts(snap)
    assert snap["kind"] == "ollama"
    assert facts["version"] == "0.5.7"
    assert facts["model_sha256"].startswith("a80c4f17")
    assert facts["quantization"] == "Q4_K_M"
    assert facts["defaults"] == {
        "num_ctx": 4096,
        "stop": ["<|start_header_id|>", "<|eot_id|>"],
        "temperature": 0.6,
        "repeat_penalty": 1.1,
    }
    assert facts["context_size"] == 4096
    assert facts["chat_template"].startswith("{{ if .System }}")
    assert snap["facts"]["chat_template_sha256"]["value"]


def test_a_generic_openai_server_marks_everything_else_unknown():
    app = JSONRoutes({("GET", "/v1/models"): {"object": "list", "data": [{"id": "gpt-x", "object": "model"}]}})
    with ServerThread(app) as server:
        snap = probe(server.url)
    assert snap["kind"] == "openai-compatible"
    assert _facts(snap)["models"] == ["gpt-x"]
    assert set(snap["unknown"]) >= {"version", "defaults", "chat_template", "context_size", "parallel_slots"}


def test_a_url_that_is_no_llm_engine_is_a_clear_error(fake):
    app, url = fake
    with pytest.raises(ProbeError, match="does not look like an LLM engine"):
        probe(url)
    result = CliRunner().invoke(cli, ["probe", url])
    assert result.exit_code == 1 and "does not look like an LLM engine" in result.output


def test_an_unreachable_url_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ProbeError, match="cannot reach"):
        probe(url)
    result = CliRunner().invoke(cli, ["probe", url])
    assert result.exit_code == 1 and "cannot reach" in result.output and "Traceback" not in result.output


def test_a_hanging_tokenizer_does_not_delay_the_clients_response(record):
    """While the enricher is stuck in the engine's /apply-template, responses keep flowing."""
    released = threading.Event()
    app = llama_server_app(on_tokenize=lambda: released.wait(60))
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with ServerThread(app) as server:
        rec = record(server.url)
        first = httpx.post(f"{rec.url}/v1/chat/completions", json=chat, timeout=30)
        deadline = time.monotonic() + 10
        while not any(path == "/apply-template" for _, path, _ in app.calls) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert any(path == "/apply-template" for _, path, _ in app.calls), "the enricher never asked the engine"
        # The enricher is now blocked inside the engine; the proxy must not be.
        second = httpx.post(f"{rec.url}/v1/chat/completions", json=chat, timeout=30)
        assert first.status_code == second.status_code == 200
        assert second.json()["choices"][0]["message"]["content"] == "ok"
        assert not released.is_set()
        released.set()
        while sum(path == "/tokenize" for _, path, _ in app.calls) < 4 and time.monotonic() < deadline + 10:
            time.sleep(0.05)
        rec.stop()
    enrichments = [x for x in rec.records() if x["type"] == "enrichment"]
    assert len(enrichments) == 2
    assert all(e["prompt_tokens"]["ids"] == [1, 2, 3] and e["prompt_tokens"]["agrees_with_usage"] for e in enrichments)


def test_a_full_enrichment_queue_drops_and_counts_instead_of_blocking(caplog):
    released = threading.Event()
    app = llama_server_app(on_tokenize=lambda: released.wait(60))
    written: list[dict] = []
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()

    def exchange(i: int) -> dict:
        return new_exchange(
            id=f"x{i}",
            wall=0.0,
            start_ns=0,
            upstream="test",
            end="complete",
            method="POST",
            path="/v1/chat/completions",
            request_body=body,
            response_headers=[["content-type", "application/json"]],
            chunks=[b'{"choices": [], "usage": {"prompt_tokens": 3}}'],
        )

    with ServerThread(app) as server:
        enricher = Enricher(server.url, written.append, maxsize=1).start()
        deadline = time.monotonic() + 10
        while not any(r["type"] == "engine" for r in written) and time.monotonic() < deadline:
            time.sleep(0.02)
        enricher.submit(exchange(0))
        while not any(path == "/apply-template" for _, path, _ in app.calls) and time.monotonic() < deadline:
            time.sleep(0.02)
        started = time.monotonic()
        for i in range(1, 5):
            enricher.submit(exchange(i))  # one fits in the queue, three don't
        assert time.monotonic() - started < 5, "submit blocked"
        assert enricher.dropped == 3
        released.set()
        enricher.close()
    assert sorted(r["exchange_id"] for r in written if r["type"] == "enrichment") == ["x0", "x1"]
    assert "enrichment queue full" in caplog.text


def test_a_stream_without_system_fingerprint_is_no_reason_to_probe_again():
    """vLLM names its system_fingerprint in a stream only with the usage chunk: an exchange that
    doesn't say is not a different engine; one that names another fingerprint is."""
    app = vllm_app()
    written: list[dict] = []
    body = json.dumps({"model": "Qwen/Qwen3-8B", "messages": [{"role": "user", "content": "hi"}]}).encode()

    def exchange(i: int, fingerprint: str | None) -> dict:
        reply: dict = {"model": "Qwen/Qwen3-8B", "choices": [{"index": 0, "message": {"content": "ok"}}]}
        if fingerprint:
            reply["system_fingerprint"] = fingerprint
        return new_exchange(
            id=f"x{i}",
            wall=0.0,
            start_ns=0,
            upstream="test",
            method="POST",
            path="/v1/chat/completions",
            request_body=body,
            response_headers=[["content-type", "application/json"]],
            chunks=[json.dumps(reply).encode()],
        )

    with ServerThread(app) as server:
        enricher = Enricher(server.url, written.append, probe_interval=3600).start()
        for i, fingerprint in enumerate(["vllm-0.32.0-6183c98d", None, "vllm-0.32.0-6183c98d", None]):
            enricher.submit(exchange(i, fingerprint))
        enricher.close()
        probes = sum(1 for _, path, _ in app.calls if path == "/version")
        enricher = Enricher(server.url, written.append, probe_interval=3600).start()
        for i, fingerprint in enumerate(["vllm-0.32.0-6183c98d", "vllm-0.33.0-00000000"]):
            enricher.submit(exchange(i, fingerprint))
        enricher.close()
        reprobed = sum(1 for _, path, _ in app.calls if path == "/version") - probes
    assert probes == 1 and reprobed == 2
    assert len([r for r in written if r["type"] == "enrichment"]) == 6


def test_effective_settings_label_each_value_with_its_source():
    out = effective_settings(
        {"temperature": 0, "n_predict": 32, "repetition_penalty": 1.2}, {"temperature": 0.8, "top_k": 40, "repeat_penalty": 1.0}
    )
    assert out["temperature"] == {"value": 0, "source": "request"}
    assert out["max_tokens"] == {"value": 32, "source": "request"}
    assert out["repeat_penalty"] == {"value": 1.2, "source": "request"}
    assert out["top_k"] == {"value": 40, "source": "engine_default"}
    assert out["min_p"] == {"value": None, "source": "unknown"}
    assert all(v["source"] == "unknown" for v in effective_settings({}, None).values())


def test_ollama_parameters_text():
    assert parse_parameters('stop "a"\nstop "b"\nnum_ctx 8192\ntemperature 0.7\npenalize_newline false') == {
        "stop": ["a", "b"],
        "num_ctx": 8192,
        "temperature": 0.7,
        "penalize_newline": False,
    }


def _sse(*events: dict) -> list[bytes]:
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def test_parse_streamed_tool_calls_reasoning_and_usage():
    chunks = _sse(
        {"model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "think "}}]},
        {
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "get_", "arguments": '{"ci'}}]},
                }
            ],
        },
        {
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": 'ty": "Paris"}'}}]},
                }
            ],
        },
        {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}], "system_fingerprint": "fp1"},
        {"model": "m", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}, "timings": {"prompt_n": 9}},
    )
    # Split one event across two chunks: parsing works on the bytes, not on chunk boundaries.
    joined = b"".join(chunks)
    record = {"response_headers": [["Content-Type", "text/event-stream"]], "chunks": [joined[:50], joined[50:]]}
    p = read_response(record)
    assert p.streamed and p.reasoning == "think " and p.text == ""
    assert p.tool_calls == [{"id": "c1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert (p.finish_reason, p.system_fingerprint, p.usage["prompt_tokens"], p.timings) == (
        "tool_calls",
        "fp1",
        9,
        {"prompt_n": 9},
    )


def test_parse_gzip_json_and_ollama_ndjson():
    body = gzip.compress(
        json.dumps({"choices": [{"index": 0, "message": {"content": "hi"}}], "usage": {"prompt_tokens": 2}}).encode()
    )
    p = read_response(
        {"response_headers": [["content-encoding", "gzip"], ["content-type", "application/json"]], "chunks": [body]}
    )
    assert p.text == "hi" and p.usage == {"prompt_tokens": 2}
    nd = [
        b'{"message": {"content": "He"}, "done": false}\n',
        b'{"message": {"content": "y"}, "done": true, "eval_count": 2, "eval_duration": 1000}\n',
    ]
    p = read_response({"response_headers": [["content-type", "application/x-ndjson"]], "chunks": nd})
    assert p.text == "Hey" and p.durations == {"eval_count": 2, "eval_duration": 1000}
    bad = read_response({"response_headers": [["content-type", "application/json"]], "chunks": [b"<html>"]})
    assert bad.error == "the body is not JSON"


def test_an_engine_behind_an_api_key_is_probed_with_probe_headers_never_stored(record):
    key = "sk-engine-key-9999"

    def models(_: object) -> tuple[int, dict]:
        return 200, {"object": "list", "data": [{"id": "m", "object": "model"}]}

    class Guarded(JSONRoutes):
        async def __call__(self, scope, receive, send):  # type: ignore[no-untyped-def]
            if scope["type"] == "http" and (b"authorization", f"Bearer {key}".encode()) not in scope["headers"]:
                await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"application/json")]})
                await send(
                    {
                        "type": "http.response.body",
                        "body": json.dumps(sdk_shapes.string_error({"error": "Unauthorized"})).encode(),
                    }
                )
                return
            await super().__call__(scope, receive, send)

    with ServerThread(Guarded({("GET", "/v1/models"): models})) as server:
        with pytest.raises(ProbeError, match="--probe-header"):
            probe(server.url)
        assert probe(server.url, headers={"Authorization": f"Bearer {key}"})["facts"]["models"]["value"] == ["m"]
        rec = record(server.url, "--probe-header", f"Authorization=Bearer {key}")
        deadline = time.monotonic() + 10
        while not [r for r in rec.records() if r["type"] == "engine"] and time.monotonic() < deadline:
            time.sleep(0.05)
        rec.stop()
    from tests.helpers import decompressed_bytes

    assert [r["kind"] for r in rec.records() if r["type"] == "engine"] == ["openai-compatible"]
    assert key.encode() not in decompressed_bytes(rec.out)


def test_vllm_tokenize_gets_the_request_fields_that_change_its_prompt():
    """A chat request's own chat_template and add_special_tokens (vLLM's default False on chat,
    True on completions) change the prompt vLLM runs: /tokenize must get them too, or it counts
    another prompt. What infertap sends is checked here; vLLM's answer, in test_vllm_real."""
    app = vllm_app()
    chat = {
        "model": "Qwen/Qwen3-8B",
        "messages": [{"role": "user", "content": "hi"}],
        "add_special_tokens": True,
        "chat_template": "{{ messages[0].content }}",
        "mm_processor_kwargs": {"fps": 2},
        "temperature": 0,
    }
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        engine.prompt_tokens("/v1/chat/completions", chat)
        engine.prompt_tokens("/v1/completions", {"model": "Qwen/Qwen3-8B", "prompt": "hi", "add_special_tokens": False})
        engine.http.close()
    sent = [
        body for method, path, body in app.calls if path == "/tokenize" and "<|start|>" not in str(body)
    ]  # less the harmony check
    assert sent == [
        {**{k: v for k, v in chat.items() if k != "temperature"}, "add_generation_prompt": True},
        {"model": "Qwen/Qwen3-8B", "prompt": "hi", "add_special_tokens": False},
    ]


def test_a_vllm_truncation_inside_its_tokenizers_special_tokens_is_unknown_not_a_cut_of_the_ids():
    """Without a truncation_side, vLLM's tokenizer cuts the text to truncate_prompt_tokens, then
    adds its special tokens (a BOS here): the last n of /tokenize's ids would drop the BOS the
    engine kept. A tokenizer that adds none gives the cut; one that does, no ids and why."""
    app, bos = vllm_app(), {"added": False}

    def tokenize(req: dict) -> tuple[int, dict]:
        words = list(range(100, 100 + len(req["prompt"].split())))
        ids = [1, *words] if req.get("add_special_tokens", True) and bos["added"] else words
        return 200, {"count": len(ids), "max_model_len": 32768, "tokens": ids}

    app.routes[("POST", "/tokenize")] = tokenize
    request = {"model": "Qwen/Qwen3-8B", "prompt": "a b c d e", "truncate_prompt_tokens": 3}
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        try:
            plain = engine.prompt_tokens("/v1/completions", request)
            bos["added"] = True
            with_bos = engine.prompt_tokens("/v1/completions", request)
            told = engine.prompt_tokens("/v1/completions", {**request, "truncation_side": "left"})
        finally:
            engine.http.close()
    assert plain.ids == [102, 103, 104] and "last 3" in plain.source
    assert with_bos.ids is None and "special tokens" in with_bos.source
    assert told.ids == [102, 103, 104]  # a side given: vLLM cuts the ids /tokenize gives, BOS and all


def test_llama_servers_tool_use_template_is_in_the_template_hash_and_the_fingerprint():
    """llama-server renders requests with tools through a second template where the GGUF has one
    (/props chat_template_tool_use): a change to it changes what the engine runs."""
    import hashlib

    app = llama_server_app()
    with ServerThread(app) as server:
        plain = probe(server.url)
        app.routes[("GET", "/props")] = {**app.routes[("GET", "/props")], "chat_template_tool_use": "tools: t"}
        with_tools = probe(server.url)
        app.routes[("GET", "/props")] = {**app.routes[("GET", "/props")], "chat_template_tool_use": "tools: t2"}
        other_tools = probe(server.url)
    assert plain["facts"]["chat_template_sha256"]["value"] == hashlib.sha256(b"t").hexdigest()
    assert "chat_template_tool_use" not in plain["facts"]
    assert with_tools["facts"]["chat_template_tool_use"]["value"] == "tools: t"
    hashes = {s["facts"]["chat_template_sha256"]["value"] for s in (plain, with_tools, other_tools)}
    assert len(hashes) == 3 and len({s["fingerprint"] for s in (plain, with_tools, other_tools)}) == 3


def test_a_completions_prompt_sent_as_a_list_of_one_is_tokenized_as_the_prompt_the_engine_ran():
    """vLLM and llama-server run ``["a b"]`` as ``"a b"`` (a batch of one), ``[[5, 6]]`` as its ids:
    the enrichment had no prompt tokens for either; two prompts stay a batch, no one prompt's."""
    vllm, llama = vllm_app(), llama_server_app()
    with ServerThread(vllm) as vllm_server, ServerThread(llama) as llama_server:
        found = {}
        for name, url in (("vllm", vllm_server.url), ("llama-server", llama_server.url)):
            engine = open_engine(url)
            try:
                found[name] = [
                    engine.prompt_tokens("/v1/completions", {"model": "Qwen/Qwen3-8B", "prompt": prompt})
                    for prompt in ("a b", ["a b"], [[5, 6]], ["a b", "c"])
                ]
            finally:
                engine.http.close()
    for name, (string, one, ids, batch) in found.items():
        assert one.ids == string.ids is not None and one.source == string.source, name
        assert ids.ids == [5, 6] and "token ids sent by the client" in ids.source, name
        assert batch.ids is None and "no prompt to tokenize" in batch.source, name
    assert [body["prompt"] for _, path, body in vllm.calls if path == "/tokenize"] == ["a b", "a b"]
