"""How many requests an engine holds right now (running and queued), where it says so.

A capacity sweep waits for this to reach zero between points, so one point's backlog is never
charged to the next. llama-server answers from ``/slots`` (``is_processing``); vLLM and SGLang from
their Prometheus ``/metrics`` (parsed with prometheus_client's parser); other engines can't tell,
and the caller falls back to what it has in flight itself.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from infertap.telemetry.gauges import RUNNING, WAITING, per_scrape
from infertap.telemetry.prometheus import parse
from infertap.telemetry.samples import SourceError

#: Engine kinds that can say how many requests they hold.
REPORTS_LOAD = frozenset({"llama-server", "vllm", "sglang"})
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


def _gauges(text: str, names: tuple[str, ...]) -> int | None:
    try:
        samples = parse(text)
    except SourceError:
        return None
    found = {name: [s.value for s in samples if s.name == name] for name in names}
    readings = [per_scrape(name, values) for name, values in found.items() if values]
    return int(sum(readings)) if readings else None
