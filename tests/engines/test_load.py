"""What an engine holds right now (running and queued), read where it says so: between a sweep's
points, the next one waits for zero."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest

from infertap.engines.load import requests_inside
from infertap.launch import SMOLLM2_ALIAS
from tests.fake_upstream import ServerThread, lifespan, read_body

# vLLM's Prometheus exposition (docs.vllm.ai, "Production metrics"), as its /metrics serves it.
VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="Qwen/Qwen3-8B"}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="Qwen/Qwen3-8B"}} {waiting}
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="Qwen/Qwen3-8B"}} 0.25
"""


class MetricsApp:
    def __init__(self, text: str, status: int = 200) -> None:
        self.text, self.status = text, status

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await lifespan(receive, send)
        await read_body(receive)
        found = scope["path"] == "/metrics"
        await send(
            {
                "type": "http.response.start",
                "status": self.status if found else 404,
                "headers": [(b"content-type", b"text/plain")],
            }
        )
        await send({"type": "http.response.body", "body": self.text.encode() if found else b""})


@pytest.mark.parametrize(("running", "waiting"), [(0, 0), (3, 5)])
def test_vllm_running_and_waiting_are_summed(running: int, waiting: int) -> None:
    with ServerThread(MetricsApp(VLLM_METRICS.format(running=running, waiting=waiting))) as server:
        assert requests_inside(server.url, "vllm") == running + waiting


def test_an_engine_that_cannot_say_gives_none() -> None:
    with ServerThread(MetricsApp("not prometheus {")) as server:
        assert requests_inside(server.url, "vllm") is None  # unparseable
        assert requests_inside(server.url, "ollama") is None  # no such endpoint known
    with ServerThread(MetricsApp(VLLM_METRICS.format(running=1, waiting=0), status=500)) as server:
        assert requests_inside(server.url, "vllm") is None
    assert requests_inside("http://127.0.0.1:1", "vllm") is None  # nobody there


@pytest.mark.engine
def test_llama_server_slots_count_a_request_in_progress(llama_server_engine: Any) -> None:
    url = llama_server_engine.url
    assert requests_inside(url, "llama-server") == 0
    body = {
        "model": SMOLLM2_ALIAS,
        "messages": [{"role": "user", "content": "Count to fifty."}],
        "max_tokens": 200,
        "stream": True,
    }
    seen: list[int | None] = []
    streaming = threading.Event()

    def ask() -> None:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=120) as response:
            for _ in response.iter_bytes():
                streaming.set()

    worker = threading.Thread(target=ask)
    worker.start()
    assert streaming.wait(60)
    seen.append(requests_inside(url, "llama-server"))
    worker.join()
    deadline = time.monotonic() + 10
    while requests_inside(url, "llama-server") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen == [1]
    assert requests_inside(url, "llama-server") == 0
