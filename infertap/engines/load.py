"""How many requests an engine holds right now (running and queued), where it says so.

A capacity sweep waits for this to reach zero between points, so one point's backlog is never
charged to the next. llama-server answers from ``/slots`` (``is_processing``); vLLM and SGLang from
their Prometheus ``/metrics`` (parsed with prometheus_client's parser); other engines can't tell,
and the caller falls back to what it has in flight itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import httpx

from infertap.telemetry.prometheus import parse
from infertap.telemetry.samples import SourceError

#: Engine kinds that can say how many requests they hold.
REPORTS_LOAD = frozenset({"llama-server", "vllm", "sglang"})
#: Each engine's Prometheus gauges of requests running and waiting (llama-server's with --metrics):
#: read here between a sweep's points, and by the analysis from the captures' telemetry.
RUNNING = {
    "vllm": "vllm:num_requests_running",
    "sglang": "sglang:num_running_reqs",
    "llama-server": "llamacpp:requests_processing",
}
WAITING = {"vllm": "vllm:num_requests_waiting", "sglang": "sglang:num_queue_reqs", "llama-server": "llamacpp:requests_deferred"}
#: Each engine's KV cache usage gauge, a fraction of the cache: vLLM (and its older name), SGLang,
#: llama-server builds that served it with --metrics (the bundled build serves none: unknown).
KV_CACHE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "llamacpp:kv_cache_usage_ratio")
_FROM_METRICS = ("vllm", "sglang")  # llama-server answers from /slots, which needs no --metrics


def requests_inside(
    base_url: str, kind: str | None, *, headers: Mapping[str, str] | None = None, timeout: float = 5.0
) -> int | None:
    """Requests the engine at ``base_url`` is running or queueing; None when it can't say."""
    try:
        with httpx.Client(base_url=base_url.rstrip("/"), headers=dict(headers or {}), timeout=timeout, trust_env=False) as http:
            if kind == "llama-server":
                slots = http.get("/slots")
                if slots.status_code != 200 or not isinstance(slots.json(), list):
                    return None
                return sum(1 for slot in slots.json() if isinstance(slot, dict) and slot.get("is_processing"))
            if kind in _FROM_METRICS:
                metrics = http.get("/metrics")
                return _gauges(metrics.text, (RUNNING[kind], WAITING[kind])) if metrics.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return None


def per_scrape(name: str, values: Iterable[float]) -> float:
    """One scrape's series of gauge ``name`` as the server's reading. A server may run several
    engines, one series each (vLLM's data parallelism labels them ``engine``): its queue holds the
    requests of all of them, so queue and running gauges add up; each engine has a KV cache of its
    own, so the reading of a cache gauge is the fullest engine's, a fraction still. The sweep's
    waits, ``stats`` and ``report`` all read engine state through this one rule."""
    return max(values) if name in KV_CACHE else sum(values)


def _gauges(text: str, names: tuple[str, ...]) -> int | None:
    try:
        samples = parse(text)
    except SourceError:
        return None
    found = {name: [s.value for s in samples if s.name == name] for name in names}
    readings = [per_scrape(name, values) for name, values in found.items() if values]
    return int(sum(readings)) if readings else None
