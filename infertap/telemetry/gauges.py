"""The engines' Prometheus gauges of load (requests running and waiting, KV cache usage) and how one
scrape of them reads.

Apart from ``infertap.engines.load``, which asks an engine over HTTP, so that the analysis
(``stats``, ``report``) reads recorded gauges without importing httpx and every engine's adapter:
a tenth of a warm ``infertap stats``'s imports.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Each engine's Prometheus gauges of requests running and waiting (llama-server's with --metrics):
#: read between a sweep's points, and by the analysis from the captures' telemetry.
RUNNING = {
    "vllm": "vllm:num_requests_running",
    "sglang": "sglang:num_running_reqs",
    "llama-server": "llamacpp:requests_processing",
}
WAITING = {"vllm": "vllm:num_requests_waiting", "sglang": "sglang:num_queue_reqs", "llama-server": "llamacpp:requests_deferred"}
#: Each engine's KV cache usage gauge, a fraction of the cache: vLLM (and its older name), SGLang,
#: llama-server builds that served it with --metrics (the bundled build serves none: unknown).
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "llamacpp:kv_cache_usage_ratio")


def per_scrape(name: str, values: Iterable[float]) -> float:
    """One scrape's series of gauge ``name`` as the server's reading. A server may run several
    engines, one series each (vLLM's data parallelism labels them ``engine``): its queue holds the
    requests of all of them, so queue and running gauges add up; each engine has a KV cache of its
    own, so the reading of a cache gauge is the fullest engine's, a fraction still. The sweep's
    waits, ``stats`` and ``report`` all read engine state through this one rule."""
    return max(values) if name in KV_CACHE else sum(values)


__all__ = ["KV_CACHE", "RUNNING", "WAITING", "per_scrape"]
