"""Service-level objectives over the per-exchange metrics of docs/metrics.md, and goodput.

An SLO is ``METRIC:STAT<=VALUE`` (``ttft:p99<=2s``, ``tpot:p50<=50ms``, ``e2e:p90<=30s``) or
``error_rate<=1%``. A run meets its SLOs when every one holds over its generation exchanges.
Goodput is DistServe's: the exchanges per second that are ``ok`` and meet every SLO's bound on their
own (``ttft <= 2 s`` for ``ttft:p99<=2s``), and their output tokens per second; attainment is the
share of exchanges that do. A bound on a metric an exchange doesn't have (``tpot`` of a one-token
answer) is not held against it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infertap.errors import ConfigError
from infertap.quantiles import quantile

from .store import Analysis

#: Per-exchange latency metrics an SLO may bound: the metrics view's column for each.
LATENCY = {
    "ttft": "ttft_ns",
    "ttft_content": "ttft_content_ns",
    "t_first_byte": "t_first_byte_ns",
    "tpot": "tpot_ns",
    "e2e": "e2e_ns",
    "itl": "itl_max_ns",  # per exchange: its longest gap; the SLO's statistic pools every gap
}
_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_SYNTAX = "METRIC:STAT<=VALUE (e.g. ttft:p99<=2s, tpot:p50<=50ms, e2e:p90<=30s) or error_rate<=1%"
_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
_LATENCY_SLO = re.compile(r"^(\w+):(p\d+(?:\.\d+)?|mean|max)\s*<=\s*" + _NUMBER + r"\s*(ns|us|µs|ms|s)$")
_ERROR_SLO = re.compile(r"^error_rate\s*<=\s*" + _NUMBER + r"\s*(%?)$")


@dataclass(frozen=True, slots=True)
class SLO:
    """One objective: ``stat`` of ``metric`` at most ``bound`` (ns, or a fraction for error_rate)."""

    metric: str
    stat: str  # "p99", "p50", "mean", "max"; "rate" for error_rate
    bound: float
    text: str

    @property
    def latency(self) -> bool:
        return self.metric != "error_rate"

    def describe(self) -> dict[str, Any]:
        return {"slo": self.text, "metric": self.metric, "stat": self.stat, "bound": self.bound}


def parse_slo(text: str) -> SLO:
    """One SLO from its text; a ConfigError naming the syntax and the metrics when it doesn't parse."""
    spec = text.strip()
    if m := _ERROR_SLO.match(spec):
        value = float(m.group(1)) / (100 if m.group(2) else 1)
        if not 0 <= value <= 1:
            raise ConfigError(f"--slo {text!r}: an error rate is between 0 and 1 (or 0% and 100%)")
        return SLO("error_rate", "rate", value, spec)
    m = _LATENCY_SLO.match(spec)
    if m is None or m.group(1) not in LATENCY:
        metrics = ", ".join([*LATENCY, "error_rate"])
        what = f"unknown metric {m.group(1)!r}" if m else "does not parse"
        raise ConfigError(f"--slo {text!r}: {what}. Syntax: {_SYNTAX}; metrics: {metrics}")
    metric, stat, number, unit = m.groups()
    if stat.startswith("p") and not 0 < float(stat[1:]) <= 100:
        raise ConfigError(f"--slo {text!r}: a percentile is between p0 and p100")
    return SLO(metric, stat, float(number) * _UNITS[unit], spec)


def parse_slos(texts: Sequence[str]) -> list[SLO]:
    if not texts:
        raise ConfigError(f"at least one --slo is needed: {_SYNTAX}")
    return [parse_slo(t) for t in texts]


def _stat(values: list[float], stat: str) -> float | None:
    if not values:
        return None
    values = sorted(values)
    if stat == "mean":
        return sum(values) / len(values)
    if stat == "max":
        return values[-1]
    return quantile(values, float(stat[1:]) / 100)


_ROWS = """
SELECT m.exchange_id, m.ok, m.sent_wall_ns, m.end_wall_ns, m.output_tokens,
       m.ttft_ns, m.ttft_content_ns, m.t_first_byte_ns, m.tpot_ns, m.e2e_ns, g.itl_max_ns
FROM metrics m
LEFT JOIN (SELECT capture, exchange_id, max(gap_ns) AS itl_max_ns FROM itl GROUP BY ALL) g
  ON g.capture = m.capture AND g.exchange_id = m.exchange_id
WHERE m.generation
ORDER BY m.sent_wall_ns
"""


def evaluate(analysis: Analysis, slos: Sequence[SLO]) -> dict[str, Any]:
    """How a loaded run did against ``slos``: each SLO's observed value and verdict, goodput,
    attainment, achieved throughput and error rate, over its generation exchanges."""
    rows = [dict(zip(_COLUMNS, r, strict=True)) for r in analysis.sql(_ROWS).fetchall()]
    if not rows:
        raise ConfigError("no generation exchanges in this run: nothing to hold to an SLO")
    gaps = [
        g
        for (g,) in analysis.sql(
            "SELECT gap_ns FROM itl JOIN metrics USING (capture, exchange_id) WHERE generation AND ok"
        ).fetchall()
    ]
    ok = [r for r in rows if r["ok"]]
    good = [r for r in ok if all(_meets(r, s) for s in slos if s.latency)]
    span_s = (max(r["end_wall_ns"] for r in rows) - min(r["sent_wall_ns"] for r in rows)) / 1e9 if rows else 0.0
    error_rate = (len(rows) - len(ok)) / len(rows)  # exact at a bound: 1 - 99/100 is 0.010000000000000009
    results = []
    for slo in slos:
        if slo.latency:
            values = gaps if slo.metric == "itl" else [r[LATENCY[slo.metric]] for r in ok if r[LATENCY[slo.metric]] is not None]
            observed = _stat([float(v) for v in values], slo.stat)
        else:
            observed = error_rate
        results.append({**slo.describe(), "observed": observed, "met": observed is not None and observed <= slo.bound})
    per_s = (lambda n: n / span_s) if span_s > 0 else (lambda n: None)
    return {
        "passed": all(r["met"] for r in results),
        "slos": results,
        "requests": len(rows),
        "ok": len(ok),
        "error_rate": error_rate,
        "attainment": len(good) / len(rows),
        "span_s": span_s,
        "requests_per_s": per_s(len(ok)),
        "output_tokens_per_s": per_s(sum(r["output_tokens"] or 0 for r in ok)),
        "goodput": {"requests_per_s": per_s(len(good)), "output_tokens_per_s": per_s(sum(r["output_tokens"] or 0 for r in good))},
        "latency_ms": {
            name: {s: (None if v is None else v / 1e6) for s, v in _spread([r[col] for r in ok if r[col] is not None]).items()}
            for name, col in LATENCY.items()
            if name != "itl"
        },
    }


_COLUMNS = (
    "exchange_id",
    "ok",
    "sent_wall_ns",
    "end_wall_ns",
    "output_tokens",
    "ttft_ns",
    "ttft_content_ns",
    "t_first_byte_ns",
    "tpot_ns",
    "e2e_ns",
    "itl_max_ns",
)


def _meets(row: dict[str, Any], slo: SLO) -> bool:
    value = row[LATENCY[slo.metric]]
    return value is None or value <= slo.bound


def _spread(values: list[float]) -> dict[str, float | None]:
    return {s: _stat(values, s) for s in ("p50", "p90", "p99")}
