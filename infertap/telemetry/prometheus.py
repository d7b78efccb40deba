"""Prometheus text exposition, scraped and parsed with prometheus_client's parser: an engine's own
``/metrics`` (vLLM ``vllm:*``, SGLang ``sglang:*``, llama-server ``llamacpp:*`` when started with
``--metrics``, TGI ``tgi_*``) or any exporter (a DCGM exporter's ``DCGM_FI_DEV_POWER_USAGE``).
Counters are kept raw (their running totals): rates and deltas are the analysis's business."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

from infertap.capture.redact import Redactor

from .samples import Sample, SourceError

#: Sample names that are summaries of a histogram's buckets: kept, the buckets themselves dropped
#: (a latency histogram has dozens per series, and the engine's latency is what infertap measures).
_BUCKET = "_bucket"


class PrometheusSource:
    """One endpoint; ``name`` is the telemetry source it is recorded as (``engine`` or ``exporter``)."""

    def __init__(self, url: str, name: str, *, headers: Mapping[str, str] | None = None, timeout: float = 2.0) -> None:
        self.url = url  # credentials included: used, never recorded
        self.shown = Redactor().url(url)  # what messages (recorded when the source is unknown) say
        self.name = name
        self._http = httpx.Client(headers=dict(headers or {}), timeout=timeout, trust_env=False, follow_redirects=False)

    def sample(self) -> list[Sample]:
        try:
            response = self._http.get(self.url)
        except httpx.HTTPError as exc:
            raise SourceError(f"{self.shown}: {str(exc).replace(self.url, self.shown)}") from None
        if response.status_code != 200:
            # llama-server started without --metrics answers 501 (ERROR_TYPE_NOT_SUPPORTED); a 404 is
            # another engine that serves none (llama-cpp-python), and an exporter is no llama-server.
            hint = (
                " (llama-server serves /metrics only with --metrics)"
                if self.name == "engine" and response.status_code == 501
                else ""
            )
            raise SourceError(f"{self.shown} answered {response.status_code}{hint}")
        return parse(response.text, self.shown)

    def close(self) -> None:
        self._http.close()


def parse(text: str, where: str = "metrics") -> list[Sample]:
    """Every sample of an exposition but histogram buckets, as (name, labels, value), under the name
    the endpoint exposed (the parser adds ``_total`` to a counter that lacks it, as DCGM's and some
    of llama-server's do)."""
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        raise SourceError(f"{where}: not Prometheus text: {exc}") from exc
    exposed = {line.split("{", 1)[0].split(" ", 1)[0] for line in text.splitlines() if line and line[0] != "#"}
    return [
        Sample(_as_exposed(sample.name, exposed), dict(sample.labels), float(sample.value))
        for family in families
        for sample in family.samples
        if not sample.name.endswith(_BUCKET)
    ]


def _as_exposed(name: str, exposed: set[str]) -> str:
    if name not in exposed and name.endswith("_total") and name.removesuffix("_total") in exposed:
        return name.removesuffix("_total")
    return name
