"""Service-level objectives over the per-exchange metrics of docs/metrics.md, and goodput.

An SLO is ``METRIC:STAT<=VALUE`` (``ttft:p99<=2s``, ``tpot:p50<=50ms``, ``e2e:p90<=30s``) or
``error_rate<=1%``. A run meets its SLOs when every one holds over its generation exchanges.
Goodput is DistServe's: the exchanges per second that are ``ok`` and meet every SLO's bound on their
own (``ttft <= 2 s`` for ``ttft:p99<=2s``; for ``itl``, the SLO's statistic of its own gaps), and their output tokens per second; attainment is the
share of exchanges that do.

A request that failed fails every bound (as AIPerf's good-request fraction and GuideLLM's
non-conforming errors have it): it is no goodput, and it enters the statistic an SLO reads as
+infinity, so that ``e2e:p90`` fails once more than about a tenth of the requests fail. An ``ok``
answer that lacks a moment the bound names (no token came: no ``ttft``; only tool calls or
reasoning: no visible content, no ``ttft_content``) is missing it, and counts the same way. Only
``tpot`` and ``itl`` may be absent by the answer's shape (one token, one chunk, a body not
streamed): such a bound is not held against that exchange, and when no ``ok`` exchange has the
metric the SLO is not measurable there, which is not the target's failure.

An imported 2xx answer whose body the file doesn't hold (``body_not_in_file``) is unknown, neither
``ok`` nor failed, as ``stats`` has it: counted among ``requests`` (``not_in_file`` says how many
answers are not in their file) and in the span, and in no other figure.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from infertap.apis import NOT_IN_FILE, NOT_KEPT, TOO_LARGE
from infertap.errors import ConfigError
from infertap.quantiles import quantile
from infertap.wording import counted

from .store import Analysis

#: Per-exchange latency metrics an SLO may bound: the metrics view's column for each.
LATENCY = {
    "ttft": "ttft_ns",
    "ttft_content": "ttft_content_ns",
    "t_first_byte": "t_first_byte_ns",
    "tpot": "tpot_ns",
    "e2e": "e2e_ns",
    "itl": "itl_max_ns",  # per exchange: whether it has gaps; the SLO's statistic pools every gap
}
#: The metrics an ``ok`` answer may lack by its shape (one token, one chunk, not streamed): a bound on
#: them is not held against it. Any other metric an ``ok`` answer lacks counts as over its bound.
BY_SHAPE = frozenset({"tpot", "itl"})
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
    #: The bound exactly as written (1.4% is 7/500, which the float 0.014 is not): what is compared.
    limit: Fraction = field(default=Fraction(0), compare=False)

    def holds(self, value: float | Fraction) -> bool:
        """Whether ``value`` is within the bound, compared exactly (error_rate<=1.4% holds at 7 of 500)."""
        return value <= self.limit

    @property
    def latency(self) -> bool:
        return self.metric != "error_rate"

    def describe(self) -> dict[str, Any]:
        return {"slo": self.text, "metric": self.metric, "stat": self.stat, "bound": self.bound}


def parse_slo(text: str) -> SLO:
    """One SLO from its text; a ConfigError naming the syntax and the metrics when it doesn't parse."""
    spec = text.strip()
    if m := _ERROR_SLO.match(spec):
        exact = Fraction(m.group(1)) / (100 if m.group(2) else 1)
        if exact == 1 and not m.group(2):  # a bound no point fails, where most who write it mean 1%
            raise ConfigError(f"--slo {text!r} is ambiguous: write 1% for one request in a hundred, or 100% for no bound")
        if not 0 <= exact <= 1:
            raise ConfigError(f"--slo {text!r}: an error rate is between 0 and 1 (or 0% and 100%)")
        return SLO("error_rate", "rate", float(exact), spec, exact)
    m = _LATENCY_SLO.match(spec)
    if m is None or m.group(1) not in LATENCY:
        metrics = ", ".join([*LATENCY, "error_rate"])
        what = f"unknown metric {m.group(1)!r}" if m else "does not parse"
        raise ConfigError(f"--slo {text!r}: {what}. Syntax: {_SYNTAX}; metrics: {metrics}")
    metric, stat, number, unit = m.groups()
    if stat.startswith("p") and not 0 < float(stat[1:]) <= 100:
        raise ConfigError(f"--slo {text!r}: a percentile is between p0 and p100")
    exact = Fraction(number) * _UNITS[unit]
    return SLO(metric, stat, float(exact), spec, exact)


def parse_slos(texts: Sequence[str]) -> list[SLO]:
    if not texts:
        raise ConfigError(f"at least one --slo is needed: {_SYNTAX}")
    return [parse_slo(t) for t in texts]


def _stat(values: list[float], stat: str) -> float | None:
    """``stat`` of ``values``, where +infinity stands for a request over every bound (it failed, or
    lacked the moment measured): a percentile that reaches one is +infinity. Where it falls is
    computed exactly, as capacity's live check counts the misses a percentile allows: in floats, p99.9
    of 1,001 values sits at 999.0000000000001, past the last value and on a failure's +infinity."""
    if not values:
        return None
    values = sorted(values)
    if stat == "mean":
        return sum(values) / len(values)
    if stat == "max":
        return values[-1]
    q = Fraction(stat[1:]) / 100
    h = (len(values) - 1) * q
    lo = math.floor(h)
    if h == lo:  # on an order statistic (quantile would give nan, 0 * inf, next to +infinity)
        return values[lo]
    if math.isinf(values[lo + 1]):
        return math.inf  # between a value and +infinity: beyond any bound
    return quantile(values, float(q))  # strictly between two finite values: the one definition, as stats prints it


#: An answer the file it was imported from doesn't hold, or one that decodes past what analysis
#: reads (``TOO_LARGE``); one that came 2xx and complete is unknown (``stats``' rule: one that failed
#: otherwise is still a failure).
_UNSAVED = "(m.parse_error = '" + NOT_IN_FILE.replace("'", "''") + "') IS TRUE"
_TOO_LARGE = "(m.parse_error = '" + TOO_LARGE.replace("'", "''") + "') IS TRUE"
#: One the recorder kept only the head of, over its response limit (``NOT_KEPT``): unknown as well.
_NOT_KEPT = "(m.parse_error = '" + NOT_KEPT.replace("'", "''") + "') IS TRUE"
_ROWS = f"""
SELECT m.capture, m.exchange_id, m.ok, (m."end" = 'complete') IS TRUE, (m."end" = 'cancelled') IS TRUE, m.sent_wall_ns, m.end_wall_ns, m.output_tokens,
       m.ttft_ns, m.ttft_content_ns, m.t_first_byte_ns, m.tpot_ns, m.e2e_ns, g.itl_max_ns,
       {_UNSAVED}, {_TOO_LARGE}, {_NOT_KEPT}, ({_UNSAVED} OR {_TOO_LARGE} OR {_NOT_KEPT}) AND m.status BETWEEN 200 AND 299 AND m."end" = 'complete'
FROM metrics m
LEFT JOIN (SELECT capture, exchange_id, max(gap_ns) AS itl_max_ns FROM itl GROUP BY ALL) g
  ON g.capture = m.capture AND g.exchange_id = m.exchange_id
WHERE m.generation AND m."end" IS DISTINCT FROM 'refused'
ORDER BY m.sent_wall_ns
"""
#: Generation requests the replayer recorded but never sent (a Responses turn whose
#: ``previous_response_id`` names a response outside the replay, or one the target gave no id):
#: the target never saw them.
_NOT_SENT = """SELECT count(*) FROM metrics WHERE generation AND "end" = 'refused'"""


def evaluate(analysis: Analysis, slos: Sequence[SLO]) -> dict[str, Any]:
    """How a loaded run did against ``slos``: each SLO's observed value and verdict, goodput,
    attainment, achieved throughput and error rate, over its generation exchanges.

    ``passed`` is whether every SLO that could be measured held; ``unmeasurable`` names those that
    couldn't (no ``ok`` exchange has the metric: ``tpot`` of answers not streamed), which a caller
    must not read as the target's pass or failure. Requests the replayer never sent (``end``
    ``refused``) are no part of any figure, as the workload identity leaves them out: the target
    can't fail what it never saw. ``not_sent`` counts them. An imported 2xx answer not in its file
    is in ``requests`` and the span, and in none of the other figures (``not_in_file`` counts the
    answers not in their file, as ``stats`` does); so is one the recorder kept only the head of
    (``response_not_kept``) or that decodes too large (``too_large``). Where every answer sent is
    unknown, or the replayer refused every request (none sent), ``passed`` is False, every figure
    None, and ``unjudged`` says why (None otherwise). A run with no generation request at all,
    sent or refused, is an error: there is nothing to judge."""
    sent = [dict(zip(_COLUMNS, r, strict=True)) for r in analysis.sql(_ROWS).fetchall()]
    rows = [r for r in sent if not r["unknown"]]
    [(not_sent,)] = analysis.sql(_NOT_SENT).fetchall()
    if not sent and not not_sent:
        raise ConfigError("no generation exchanges in this run, sent or refused: nothing to hold to an SLO")
    if not rows:
        return _unjudged(sent, slos, not_sent)
    own: dict[tuple[str, str], list[float]] = {}  # each ok answer's gaps, which goodput holds it to
    for capture, exchange_id, gap in analysis.sql(
        "SELECT capture, exchange_id, gap_ns FROM itl JOIN metrics USING (capture, exchange_id) WHERE generation AND ok"
    ).fetchall():
        own.setdefault((capture, exchange_id), []).append(float(gap))
    gaps = [g for answer in own.values() for g in answer]
    ok = [r for r in rows if r["ok"]]
    good = [r for r in ok if all(_meets(r, s, own) for s in slos if s.latency)]
    span_s = (max(r["end_wall_ns"] for r in sent) - min(r["sent_wall_ns"] for r in sent)) / 1e9  # they took time too
    failed = len(rows) - len(ok)
    error_rate = failed / len(rows)
    results = [_held(slo, rows, ok, gaps) for slo in slos]
    per_s = (lambda n: n / span_s) if span_s > 0 else (lambda n: None)
    return {
        "passed": all(r["met"] for r in results if r["met"] is not None),
        "unjudged": None,
        "unmeasurable": [r["slo"] for r in results if r["met"] is None],
        "slos": results,
        **_counts(sent, not_sent),
        "ok": len(ok),
        # Of the failures, those infertap cut in flight (a point ended early, its grace over): errors
        # as stats counts them, but none the target sent, which the command says apart.
        "cancelled": sum(1 for r in rows if r["cancelled"]),
        "error_rate": error_rate,
        "attainment": len(good) / len(rows),
        "span_s": span_s,
        "requests_per_s": per_s(len(ok)),
        "answered_per_s": _answered_per_s(rows),
        "output_tokens_per_s": _tokens_per_s(ok, per_s),
        # ok answers of no count (a body not streamed, with no usage): the tokens/s are of the others
        "output_tokens_unknown": sum(1 for r in ok if r["output_tokens"] is None),
        "goodput": {"requests_per_s": per_s(len(good)), "output_tokens_per_s": _tokens_per_s(good, per_s)},
        "latency_ms": {
            name: {s: (None if v is None else v / 1e6) for s, v in _spread([r[col] for r in ok if r[col] is not None]).items()}
            for name, col in LATENCY.items()
            if name != "itl"
        },
    }


def _counts(sent: list[dict[str, Any]], not_sent: int) -> dict[str, int]:
    """The requests sent, those never sent, and the answers unknown, by why."""
    return {
        "requests": len(sent),
        "not_sent": not_sent,
        "not_in_file": sum(1 for r in sent if r["not_in_file"]),
        "too_large": sum(1 for r in sent if r["too_large"]),
        "response_not_kept": sum(1 for r in sent if r["not_kept"] and r["unknown"]),
    }


def _unjudged(sent: list[dict[str, Any]], slos: Sequence[SLO], not_sent: int) -> dict[str, Any]:
    """A run whose every answer is unknown (all cut at ``--max-response-mb``, not in their file), or
    whose every request the replayer refused (``sent`` empty: turns continuing a response outside
    the replay): none can be held to an SLO. Not a pass, and no failure the target's figures show:
    each figure unknown (None), ``unjudged`` saying why, so a sweep goes on past it (one such point
    aborted the whole sweep with "no generation exchanges sent"). Nothing sent has no span (None)."""
    if not sent:
        reason = (
            f"{counted(not_sent, 'request')} refused by the replayer (such as a turn continuing a response outside "
            "the replay; each says why in the point's capture), none sent"
        )
    else:
        why = "; ".join(f"{n} answered 2xx, {reason}" for n, reason in _unknown(sent) if n)
        reason = f"{counted(len(sent), 'request')} sent, none whose answer could be judged ({why})"
    span_s = (max(r["end_wall_ns"] for r in sent) - min(r["sent_wall_ns"] for r in sent)) / 1e9 if sent else None
    return {
        "passed": False,
        "unjudged": reason,
        "unmeasurable": [],
        "slos": [{**s.describe(), "observed": None, "met": None, "missing": 0} for s in slos],
        **_counts(sent, not_sent),
        "ok": None,
        "cancelled": 0,
        "error_rate": None,
        "attainment": None,
        "span_s": span_s,
        "requests_per_s": None,
        "answered_per_s": None,
        "output_tokens_per_s": None,
        "output_tokens_unknown": 0,
        "goodput": {"requests_per_s": None, "output_tokens_per_s": None},
        "latency_ms": {name: dict.fromkeys(("p50", "p90", "p99")) for name in LATENCY if name != "itl"},
    }


def _tokens_per_s(rows: list[dict[str, Any]], per_s: Callable[[int], float | None]) -> float | None:
    """Output tokens per second of ``rows``, over those whose count is known, as ``stats`` has it:
    unknown (None) where answers came and none was counted (bodies not streamed, with no usage),
    which 0 tokens/s would misread as answers of nothing; 0 where no answer came."""
    counted = [r["output_tokens"] for r in rows if r["output_tokens"] is not None]
    return per_s(sum(counted)) if counted or not rows else None


def _unknown(sent: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """How many answers are unknown, by why (every one of ``sent`` is, where this is asked)."""
    not_kept = sum(1 for r in sent if r["not_kept"])
    too_large = sum(1 for r in sent if r["too_large"])
    return [
        (len(sent) - not_kept - too_large, "not in the file they were imported from"),
        (not_kept, "kept only in part (past the recorder's --max-response-mb)"),
        (too_large, "decoding past what analysis reads of one answer"),
    ]


def _answered_per_s(rows: list[dict[str, Any]]) -> float | None:
    """The rate answers came back at: responses read to their end, ok or an error the target sent
    (a request the replayer cancelled, at a stop or the grace period's end, or gave up on at its
    read timeout, is none: it would count a target that answered nothing as carrying the load).
    Over a window as long as the sends' span, shifted by the answers' median e2e: where a typical
    answer to them lands. A target that keeps up answers nearly every request there, however far
    its slowest answers trail (the span of all the ends grows by the spread of the latencies, so a
    few long answers would halve a rate the target keeps up with); one that serves ``r`` requests a
    second ends at most about ``r`` x span in any window that long, however long its queue makes
    the median. ``n`` answers make ``n - 1`` gaps, as the offered rate counts arrivals."""
    first, last = min(r["sent_wall_ns"] for r in rows), max(r["sent_wall_ns"] for r in rows)
    if last <= first:
        return None
    answers = [r for r in rows if r["answered"]]
    if not answers:
        return 0.0
    # whole ns: a float's 256 ns steps at wall-clock ns moved the window's edges off the answers on them
    shift = round(statistics.median(r["end_wall_ns"] - r["sent_wall_ns"] for r in answers))
    answered = sum(1 for r in answers if first + shift <= r["end_wall_ns"] <= last + shift)
    return max(answered - 1, 0) / ((last - first) / 1e9)


def _held(slo: SLO, rows: list[dict[str, Any]], ok: list[dict[str, Any]], gaps: list[float]) -> dict[str, Any]:
    """One SLO over a run: its statistic with every failed request, and every ``ok`` one missing the
    metric, counted as +infinity; ``met`` None when it can't be measured (see the module's docstring).
    ``missing`` counts the ``ok`` exchanges the bound could not be measured on, counted over it."""
    failed = len(rows) - len(ok)
    if not slo.latency:
        return {**slo.describe(), "observed": failed / len(rows), "met": slo.holds(Fraction(failed, len(rows))), "missing": 0}
    column = LATENCY[slo.metric]
    measured = [r[column] for r in ok if r[column] is not None]
    missing = 0 if slo.metric in BY_SHAPE else len(ok) - len(measured)
    if ok and not measured and not missing:  # every ok answer lacks it by its shape: nothing measures it here
        return {**slo.describe(), "observed": None, "met": None, "missing": 0}
    if slo.metric == "itl":  # gaps are pooled: a failed request weighs as many gaps as an ok answer has on average
        values = [float(g) for g in gaps]
        weight = math.ceil(len(gaps) / len(measured)) if measured else 1
    else:
        values, weight = [float(v) for v in measured], 1
    observed = _stat(values + [math.inf] * ((failed + missing) * weight), slo.stat)
    met = observed is not None and not math.isinf(observed) and slo.holds(observed)
    return {
        **slo.describe(),
        "observed": observed if observed is not None and math.isfinite(observed) else None,
        "met": met,
        "missing": missing,
    }


_COLUMNS = (
    "capture",
    "exchange_id",
    "ok",
    "answered",  # the target's response read to its end, whatever its status: an answer that came back
    "cancelled",  # cut by infertap in flight (a sweep's point ended early): no answer, and no error the target sent
    "sent_wall_ns",
    "end_wall_ns",
    "output_tokens",
    "ttft_ns",
    "ttft_content_ns",
    "t_first_byte_ns",
    "tpot_ns",
    "e2e_ns",
    "itl_max_ns",
    "not_in_file",
    "too_large",
    "not_kept",
    "unknown",
)


def _meets(row: dict[str, Any], slo: SLO, own: dict[tuple[str, str], list[float]]) -> bool:
    """An ``ok`` exchange within ``slo``'s bound on its own; lacking the metric, only by its shape.
    For ``itl`` that is the SLO's statistic of the exchange's own gaps (its p99 for ``itl:p99``, its
    mean for ``itl:mean``, its longest for ``itl:max``), as AIPerf's goodput holds a request's own
    mean ITL: held to its longest gap, a long answer with one gap in a hundred over a p99 bound was
    no goodput, and a point meeting ``itl:p99`` could count almost none."""
    if slo.metric == "itl":
        gaps = own.get((row["capture"], row["exchange_id"]))
        value = _stat(gaps, slo.stat) if gaps else None
    else:
        value = row[LATENCY[slo.metric]]
    return slo.metric in BY_SHAPE if value is None else slo.holds(value)


def _spread(values: list[float]) -> dict[str, float | None]:
    return {s: _stat(values, s) for s in ("p50", "p90", "p99")}
