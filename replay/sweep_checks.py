"""Whether a sweep point measured the target at the load it names: the rules, in one place.

A point's SLO verdict says how the target did on what it was sent; these rules say whether what
it was sent was the load named. A pass that fails one of them is **unmeasured**: not counted
towards the capacity, and ``--search`` stops there, as going higher would only measure the same
shortfall more:

- the replayer fell behind its schedule, or held requests in its own ``--max-concurrency`` queue
  (either wait kept out of the latencies): the target was offered less than the load named;
- a closed-loop level was never reached (more slots than the workload has requests to fill them);
- too few requests to judge (``MIN_REQUESTS``): a queue can't build up in a handful of requests;
- an SLO that nothing in the point measures (``tpot`` of answers not streamed).

A point that passed its SLOs while answers came back at under half the rate they were offered at
(``NOT_CARRIED``), the replayer on its schedule, did not carry its load: it is a failure, whatever
the SLOs said (a ``tpot`` bound holds while a queue grows in front of the engine). The answers' rate
is judged over a window as long as the arrivals, where a typical answer lands (analysis.slo's
``answered_per_s``), not over the span of every end, which long answers stretch on a target that
keeps up.

Each rule reads the replay's summary and the verdict, as ``Sweep`` hands them over, and returns why
it holds (a sentence for the table and the report) or nothing.
"""

from __future__ import annotations

from typing import Any, Protocol


class Load(Protocol):
    """A point's load (infertap.replay.sweep.Load, which imports this module)."""

    @property
    def kind(self) -> str: ...

    @property
    def value(self) -> float: ...


#: The fewest generation requests a point is judged on.
MIN_REQUESTS = 20

#: Answers coming back at under this share of the offered rate: the load was not carried.
NOT_CARRIED = 0.5


def late_ms(point_load: Load, summary: dict[str, Any], verdict: dict[str, Any]) -> float:
    """How late (ms, at p99) the replayer may hold a request before it shapes the load itself: 2 ms,
    or a tenth of the time it schedules by when that is longer: the mean gap between arrivals (speed),
    a request's median e2e (closed loop, where a slot's next request follows its last one)."""
    if point_load.kind == "speed":
        offered = summary.get("offered_requests_per_s")
        scale_ms = 1000.0 / offered if offered else None
    else:
        scale_ms = ((verdict.get("latency_ms") or {}).get("e2e") or {}).get("p50")
    return max(2.0, scale_ms / 10 if scale_ms else 0.0)


def behind(point_load: Load, summary: dict[str, Any], verdict: dict[str, Any]) -> str | None:
    """Why the replayer, not the target, held requests past their time: its schedule lag, or its own
    ``--max-concurrency`` queue (neither inside an exchange's latency), at p99 over ``late_ms``."""
    allowed = late_ms(point_load, summary, verdict)
    lag = (summary.get("lag_ms") or {}).get("p99")
    queued = (summary.get("queue_wait_ms") or {}).get("p99")
    why = []
    if lag is not None and lag > allowed:
        why.append(f"the replayer fell behind its schedule (lag p99 {lag:.3g} ms, over {allowed:.3g} ms)")
    if queued is not None and queued > allowed:
        why.append(
            f"requests waited in the replayer's --max-concurrency queue (p99 {queued:.3g} ms, over {allowed:.3g} ms), "
            "a wait no latency holds"
        )
    return "; ".join(why) or None


def unmeasured(point_load: Load, summary: dict[str, Any], verdict: dict[str, Any]) -> list[str]:
    """Why a pass at this point doesn't measure the target at ``point_load``; empty when it does."""
    why = [reason] if (reason := behind(point_load, summary, verdict)) else []
    reached = (summary.get("concurrency") or {}).get("max")
    if point_load.kind == "concurrency" and reached is not None and reached < point_load.value:
        why.append(
            f"concurrency {point_load.value:g} was never reached (at most {reached} in flight): "
            "too few requests to fill its slots (--min-requests repeats the workload)"
        )
    requests = verdict.get("requests") or 0
    if requests < MIN_REQUESTS:
        why.append(f"{requests} requests are too few to judge (at least {MIN_REQUESTS}: --min-requests repeats the workload)")
    for slo in verdict.get("unmeasurable") or ():
        why.append(f"nothing here measures {slo} (no answer has the metric: tpot and itl need streamed answers)")
    return why


def not_carried(point_load: Load, summary: dict[str, Any], verdict: dict[str, Any]) -> str | None:
    """Why the target did not carry the offered load (speed points): its answers, ok or not (a
    request cancelled or timed out is none), came back at under ``NOT_CARRIED`` of the rate the requests were offered at (``answered_per_s``: over
    a window as long as the sends' span, shifted by the median e2e, so a queue shows and a spread of
    answer lengths doesn't), the replayer on its schedule (when it held them, ``behind``, the target
    was never offered that rate)."""
    offered, answered = summary.get("offered_requests_per_s"), verdict.get("answered_per_s")
    if not offered or answered is None or answered >= NOT_CARRIED * offered or behind(point_load, summary, verdict):
        return None
    return f"answers came back at {answered:.3g} requests/s, under half the {offered:.3g} offered"
