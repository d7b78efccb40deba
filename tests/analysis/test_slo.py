"""SLOs (analysis/slo.py): their syntax, and how a run is held to them, on hand-built captures whose
every chunk time and token count is set by the test."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.slo import LATENCY, SLO, evaluate, parse_slo, parse_slos
from infertap.errors import ConfigError
from infertap.mitm.importer import import_file
from infertap.quantiles import quantile
from tests import sdk_shapes
from tests.analysis_builders import JSON_HEADERS, MS, Load, body, event, exchange, sse


def streamed(
    xid: str,
    *,
    sent_ms: float = 0.0,
    ttft_ms: float = 50.0,
    gaps_ms: list[float] | None = None,
    tokens: int | None = None,
    end_ms: float | None = None,
    status: int = 200,
    end: str = "complete",
) -> dict[str, Any]:
    """A streamed chat answer: its first token at ``ttft_ms``, one token per chunk after each gap,
    the last one carrying the finish reason and the engine's usage (``tokens``, default one per
    chunk), ``[DONE]`` and the end of the body 1 ms later (``end_ms`` overrides)."""
    gaps_ms = [10.0, 10.0] if gaps_ms is None else gaps_ms
    times = [ttft_ms]
    for gap in gaps_ms:
        times.append(times[-1] + gap)
    n = len(times)
    usage = {"prompt_tokens": 7, "completion_tokens": n if tokens is None else tokens}
    chunks = [(t, sse(event(f"t{i} "))) for i, t in enumerate(times[:-1])]
    chunks.append((times[-1], sse(event(f"t{n - 1}", finish="stop"), event(choices=False, usage=usage), "[DONE]")))
    return exchange(
        xid, sent_ms=sent_ms, chunks=chunks, end_ms=times[-1] + 1 if end_ms is None else end_ms, status=status, end=end
    )


def failed(xid: str, *, sent_ms: float = 0.0, status: int = 500) -> dict[str, Any]:
    """A generation request the engine refused, answered at once."""
    return exchange(
        xid,
        sent_ms=sent_ms,
        chunks=[(5, json.dumps(sdk_shapes.error_body("boom")).encode())],
        status=status,
        headers=JSON_HEADERS,
    )


def slo(metric_stat: str, bound_ns: float) -> SLO:
    """An SLO in ns, through the parser, as a user would write it."""
    return parse_slo(f"{metric_stat}<={float(bound_ns):f}ns")


def by_metric(verdict: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["metric"]: s for s in verdict["slos"]}


# -- syntax ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "metric", "stat", "bound"),
    [
        ("ttft:p99<=2s", "ttft", "p99", 2e9),
        ("ttft_content:p50<=250ms", "ttft_content", "p50", 250e6),
        ("t_first_byte:p99.9<=1500us", "t_first_byte", "p99.9", 1.5e6),
        ("tpot:mean<=40µs", "tpot", "mean", 40e3),
        ("e2e:max<=0.5s", "e2e", "max", 0.5e9),
        ("itl:p90<=120000ns", "itl", "p90", 120e3),
        ("  e2e:p90 <= 30 s ", "e2e", "p90", 30e9),
        ("e2e:p100<=1ms", "e2e", "p100", 1e6),
        ("error_rate<=1%", "error_rate", "rate", 0.01),
        ("error_rate<=0.5%", "error_rate", "rate", 0.005),
        ("error_rate<=0.02", "error_rate", "rate", 0.02),
        ("error_rate <= 0", "error_rate", "rate", 0.0),
    ],
)
def test_parse_slo_accepts_every_metric_stat_and_unit(text: str, metric: str, stat: str, bound: float) -> None:
    parsed = parse_slo(text)
    assert (parsed.metric, parsed.stat) == (metric, stat)
    assert parsed.bound == pytest.approx(bound)
    assert parsed.latency == (metric != "error_rate")
    assert parsed.text == text.strip()


def test_every_latency_metric_the_parser_names_is_one_the_metrics_view_has(load: Load) -> None:
    a = load([streamed("x")])
    columns = {r[0] for r in a.sql("DESCRIBE metrics").fetchall()}
    for metric, column in LATENCY.items():
        assert parse_slo(f"{metric}:p50<=1s").metric == metric
        assert column in columns or metric == "itl", column


@pytest.mark.parametrize(
    "text",
    [
        "e2e<=1s",  # no statistic
        "e2e:p99<1s",  # < is not <=
        "e2e:p99>=1s",
        "e2e:p99<=1",  # no unit
        "e2e:p99<=1min",  # unknown unit
        "e2e:p99<=-1s",
        "e2e:median<=1s",  # unknown statistic
        "e2e:p99",
        "",
        "error_rate<=1ms",  # a rate is not a time
        "error_rate:p99<=1%",
    ],
)
def test_parse_slo_rejects_what_does_not_parse_naming_the_syntax_and_the_metrics(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_slo(text)
    message = str(info.value)
    assert repr(text) in message and "does not parse" in message
    assert "METRIC:STAT<=VALUE" in message
    assert all(metric in message for metric in [*LATENCY, "error_rate"]), message


@pytest.mark.parametrize("text", ["latency:p99<=1s", "ttfb:p50<=10ms", "tpot_ns:p50<=10ms"])
def test_parse_slo_rejects_an_unknown_metric_by_name(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_slo(text)
    message = str(info.value)
    assert f"unknown metric {text.split(':')[0]!r}" in message
    assert "METRIC:STAT<=VALUE" in message and all(metric in message for metric in [*LATENCY, "error_rate"]), message


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("e2e:p0<=1s", "percentile"),
        ("e2e:p101<=1s", "percentile"),
        ("error_rate<=101%", "error rate"),
        ("error_rate<=1.5", "error rate"),
    ],
)
def test_parse_slo_rejects_out_of_range_values(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_slo(text)


@pytest.mark.parametrize(
    ("text", "bound"), [("error_rate<=1", None), ("error_rate<=1.0", None), ("error_rate<=100%", 1), ("error_rate<=0.99", 0.99)]
)
def test_a_bare_error_rate_of_one_is_refused_as_ambiguous(text: str, bound: float | None) -> None:
    """'error_rate<=1' read as the fraction 1 was a bound of 100%, which no point fails: most who type
    it mean 1%. A bare number under 1 stays a fraction, and 100% is said as such."""
    if bound is None:
        with pytest.raises(ConfigError, match=r"write 1% for one request in a hundred, or 100%"):
            parse_slo(text)
    else:
        assert parse_slo(text).bound == bound


@pytest.mark.parametrize("text", ["e2e:p99<=1.2.3s", "e2e:p99<=.ms", "error_rate<=.%"])
def test_parse_slo_rejects_a_malformed_number(text: str) -> None:
    with pytest.raises(ConfigError, match="METRIC:STAT<=VALUE"):
        parse_slo(text)


def test_parse_slos_needs_at_least_one_and_keeps_their_order() -> None:
    with pytest.raises(ConfigError, match="at least one --slo"):
        parse_slos([])
    assert [s.metric for s in parse_slos(["error_rate<=1%", "ttft:p99<=2s"])] == ["error_rate", "ttft"]


# -- evaluation -------------------------------------------------------------------------------------


def test_an_slo_just_above_the_observed_percentile_passes_and_just_below_fails(load: Load) -> None:
    e2e_ms = [100, 180, 120, 160, 140, 110, 190, 130, 150, 170, 400]
    a = load([streamed(f"x{i}", sent_ms=i * 1000, end_ms=ms) for i, ms in enumerate(e2e_ms)])
    p99 = quantile(sorted(ms * MS for ms in e2e_ms), 0.99)
    p50 = quantile(sorted(ms * MS for ms in e2e_ms), 0.50)
    above, below = math.floor(p99) + 1, math.ceil(p99) - 1

    held = evaluate(a, [slo("e2e:p99", above)])
    assert held["passed"] is True
    [result] = held["slos"]
    assert result["observed"] == pytest.approx(p99) and result["met"] is True

    missed = evaluate(a, [slo("e2e:p99", below)])
    assert missed["passed"] is False and missed["slos"][0]["met"] is False

    # Every SLO must hold: one that holds does not rescue one that doesn't.
    both = evaluate(a, [slo("e2e:p50", math.floor(p50) + 1), slo("e2e:p99", below)])
    assert [s["met"] for s in both["slos"]] == [True, False] and both["passed"] is False
    assert evaluate(a, [slo("e2e:max", max(e2e_ms) * MS)])["passed"] is True  # the bound itself is within it
    assert evaluate(a, [slo("e2e:max", max(e2e_ms) * MS - 1)])["passed"] is False
    assert evaluate(a, [slo("e2e:mean", sum(e2e_ms) * MS / len(e2e_ms) + 1)])["passed"] is True
    assert evaluate(a, [slo("e2e:mean", sum(e2e_ms) * MS / len(e2e_ms) - 1)])["passed"] is False


def test_goodput_counts_only_ok_exchanges_that_meet_every_per_request_bound(load: Load) -> None:
    ttft_bound, e2e_bound = 100 * MS, 500 * MS
    records = [
        streamed("good-1", sent_ms=0, ttft_ms=50, end_ms=200, tokens=3),
        streamed("good-2", sent_ms=100, ttft_ms=60, end_ms=210, tokens=3),
        streamed("slow-first-token", sent_ms=200, ttft_ms=300, end_ms=350, tokens=3),
        streamed("slow-end", sent_ms=300, ttft_ms=40, end_ms=900, tokens=3),
        failed("refused", sent_ms=400),
        streamed("cut", sent_ms=500, ttft_ms=40, end_ms=100, end="upstream_error"),  # within the bounds, not ok
        streamed("good-one-token", sent_ms=600, ttft_ms=30, gaps_ms=[], end_ms=40, tokens=1),
        # Not a generation request: neither counted nor held to anything.
        exchange(
            "models", sent_ms=5_000, chunks=[(1, b"{}")], request=b"", headers=JSON_HEADERS, method="GET", path="/v1/models"
        ),
    ]
    a = load(records)
    good, ok, generation = {"good-1", "good-2", "good-one-token"}, 5, 7
    tokens = {"good-1": 3, "good-2": 3, "slow-first-token": 3, "slow-end": 3, "good-one-token": 1}
    # First generation request sent -> last one ended, failed ones included; the GET left out.
    span_s = (max(r["sent_ns"] + r["end_ns"] for r in records[:-1]) - min(r["sent_ns"] for r in records[:-1])) / 1e9

    v = evaluate(a, [slo("ttft:p99", ttft_bound), slo("e2e:p90", e2e_bound)])
    assert (v["requests"], v["ok"]) == (generation, ok)
    assert v["error_rate"] == pytest.approx(2 / generation)
    assert v["attainment"] == pytest.approx(len(good) / generation)
    assert v["span_s"] == pytest.approx(span_s)
    assert v["requests_per_s"] == pytest.approx(ok / span_s)
    assert v["output_tokens_per_s"] == pytest.approx(sum(tokens.values()) / span_s)
    assert v["goodput"]["requests_per_s"] == pytest.approx(len(good) / span_s)
    assert v["goodput"]["output_tokens_per_s"] == pytest.approx(sum(tokens[x] for x in good) / span_s)

    # With bounds every ok exchange meets, goodput is the ok throughput; failed ones still don't count,
    # and two failures of seven are over any p90 bound (a failed request fails every bound).
    loose = evaluate(a, [slo("ttft:p99", 10_000 * MS), slo("e2e:p90", 10_000 * MS)])
    assert loose["passed"] is False and [s["met"] for s in loose["slos"]] == [False, False]
    assert loose["goodput"]["requests_per_s"] == pytest.approx(loose["requests_per_s"]) == pytest.approx(ok / span_s)
    assert loose["attainment"] == pytest.approx(ok / generation)


def whole(xid: str, *, sent_ms: float = 0.0, usage: int | None = None) -> dict[str, Any]:
    """A chat answer sent whole 80 ms after its request, with the engine's usage or none."""
    answer: dict[str, Any] = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]
    }
    if usage is not None:
        answer["usage"] = {"prompt_tokens": 7, "completion_tokens": usage}
    chunk = json.dumps(answer).encode()
    return exchange(xid, sent_ms=sent_ms, chunks=[(80, chunk)], end_ms=81, headers=JSON_HEADERS, request=body(stream=False))


def test_output_tokens_per_s_of_answers_of_no_count_is_unknown_not_zero(load: Load) -> None:
    """Answers sent whole with no usage have no output token count: the sweep said 0.00 output
    tokens/s at its capacity (and in goodput), where ``stats`` on the same point says unknown."""
    e2e = slo("e2e:p90", 1_000 * MS)
    uncounted = evaluate(load([whole("a"), whole("b", sent_ms=100)]), [e2e])
    assert uncounted["ok"] == 2 and uncounted["requests_per_s"] > 0
    assert uncounted["output_tokens_per_s"] is None and uncounted["goodput"]["output_tokens_per_s"] is None
    assert uncounted["output_tokens_unknown"] == 2

    # Some counted: the rate is of those, and the others are said; every one counted: none unknown.
    mixed = evaluate(load([whole("a", usage=6), whole("b", sent_ms=100)]), [e2e])
    assert mixed["output_tokens_per_s"] == pytest.approx(6 / mixed["span_s"]) and mixed["output_tokens_unknown"] == 1
    assert mixed["goodput"]["output_tokens_per_s"] == pytest.approx(6 / mixed["span_s"])
    counted = evaluate(load([whole("a", usage=6), whole("b", sent_ms=100, usage=4)]), [e2e])
    assert counted["output_tokens_per_s"] == pytest.approx(10 / counted["span_s"]) and counted["output_tokens_unknown"] == 0

    # No ok answer at all: nothing was served, 0 tokens/s, known.
    none_ok = evaluate(load([failed("e0"), failed("e1", sent_ms=10)]), [e2e])
    assert none_ok["output_tokens_per_s"] == 0.0 and none_ok["goodput"]["output_tokens_per_s"] == 0.0
    assert none_ok["output_tokens_unknown"] == 0


def test_requests_cut_in_flight_by_infertap_are_counted_apart_among_the_failures(load: Load) -> None:
    """A request cancelled in flight (a sweep's point ended early) is a failure as stats counts it,
    and ``cancelled`` says it was infertap's cut, not an error the target sent; a 500 is not one."""
    a = load([streamed("ok"), streamed("cut", sent_ms=10, end="cancelled"), failed("500", sent_ms=20)])
    v = evaluate(a, [slo("e2e:p90", 1_000 * MS)])
    assert (v["ok"], v["cancelled"], v["error_rate"]) == (1, 1, pytest.approx(2 / 3))
    assert evaluate(load([streamed("ok"), failed("500", sent_ms=20)]), [slo("e2e:p90", 1_000 * MS)])["cancelled"] == 0


def test_latency_statistics_are_over_the_ok_exchanges_with_each_failure_over_the_bound(load: Load) -> None:
    """A failed request's own latency (a fast 429, a long cut stream) is no measurement: it enters the
    statistic as +infinity, never as its time."""
    a = load(
        [
            streamed("a", sent_ms=0, end_ms=100),
            streamed("b", sent_ms=10, end_ms=120),
            streamed("cut", sent_ms=20, end_ms=9_000, end="upstream_error"),  # e2e is its last chunk's time: 70 ms
            streamed("error-status", sent_ms=30, end_ms=5_000, status=503),
        ]
    )
    v = evaluate(a, [slo("e2e:max", 120 * MS)])
    assert by_metric(v)["e2e"]["observed"] is None and by_metric(v)["e2e"]["met"] is False and v["passed"] is False
    assert v["latency_ms"]["e2e"]["p50"] == pytest.approx(110)  # the distributions shown are the ok exchanges'
    # p25 of [100, 120, inf, inf] lies between the two ok ones: the failures are above it.
    assert by_metric(evaluate(a, [slo("e2e:p25", 120 * MS)]))["e2e"]["observed"] == pytest.approx(115 * MS)


@pytest.mark.parametrize(("failures", "met"), [(1, True), (2, False)], ids=["10%", "over 10%"])
def test_a_p90_bound_fails_once_more_than_a_tenth_of_the_requests_fail(load: Load, failures: int, met: bool) -> None:
    """A target that sheds load (429s at once) passed a latency-only SLO however many it refused."""
    ok = [streamed(f"ok{i}", sent_ms=i * 10) for i in range(11 - failures)]
    a = load(ok + [failed(f"e{i}", sent_ms=500 + i, status=429) for i in range(failures)])
    v = evaluate(a, [slo("e2e:p90", 1_000 * MS)])
    assert by_metric(v)["e2e"]["met"] is met and v["passed"] is met
    assert v["attainment"] == pytest.approx((11 - failures) / 11)  # the failed ones are no goodput either


@pytest.mark.parametrize(
    ("stat", "n", "failures", "met"),
    [("p99.9", 1001, 1, True), ("p99.9", 1001, 2, False), ("p90", 11, 1, True), ("p90", 10, 1, False), ("p50", 2, 1, False)],
)
def test_a_percentile_falls_exactly_where_the_misses_it_allows_say(
    load: Load, stat: str, n: int, failures: int, met: bool
) -> None:
    """(1001 - 1) x 0.999 is 999.0000000000001 in floats: p99.9 of 1,001 requests with one failure
    fell between the last ok value and the failure's +infinity and failed, where the live check
    (capacity._allowed) allows that one miss. And the live check allowed floor(n (1 - q)): one
    failure of ten under a p90, one of two under a p50, which the statistic fails."""
    from infertap.analysis.capacity import _allowed

    ok = [streamed(f"ok{i}", sent_ms=i) for i in range(n - failures)]
    v = evaluate(load(ok + [failed(f"e{i}", sent_ms=2_000 + i) for i in range(failures)]), [slo(f"e2e:{stat}", 1_000 * MS)])
    assert by_metric(v)["e2e"]["met"] is met and (by_metric(v)["e2e"]["observed"] is not None) is met
    assert (failures <= _allowed(slo(f"e2e:{stat}", 1_000 * MS), n)) is met


@pytest.mark.parametrize("metric", ["ttft", "ttft_content"])
def test_an_ok_answer_with_nothing_in_it_is_over_a_ttft_bound_and_counted(load: Load, metric: str) -> None:
    """An answer of no tokens has no ttft (nor ttft_content): it was counted as meeting every ttft
    bound, so half the answers empty still gave 100% attainment."""
    empty = exchange("empty", sent_ms=500, chunks=[(1500, sse(event(finish="stop"), "[DONE]"))], end_ms=1501)
    a = load([streamed(f"ok{i}", sent_ms=i * 10, ttft_ms=20) for i in range(3)] + [empty])
    assert dict(a.query("SELECT exchange_id, ok FROM metrics").rows)["empty"] is True
    v = evaluate(a, [slo(f"{metric}:p50", 100 * MS)])
    assert by_metric(v)[metric]["missing"] == 1 and v["attainment"] == pytest.approx(3 / 4)
    assert by_metric(v)[metric]["met"] is True  # one of four over: the median holds
    v = evaluate(a, [slo(f"{metric}:max", 100 * MS)])
    assert by_metric(v)[metric]["met"] is False and by_metric(v)[metric]["observed"] is None


def test_a_tool_call_only_answer_is_over_a_ttft_content_bound_but_has_a_ttft(load: Load) -> None:
    """ttft_content is the first visible text, which a turn of tool calls never shows (docs/metrics.md):
    missing, as an empty answer's ttft is; its ttft is the tool call's first token."""
    tools = exchange("tools", sent_ms=50, chunks=[(30, sse(event(tools=1))), (40, sse(event(finish="tool_calls"), "[DONE]"))])
    a = load([streamed("text", ttft_ms=20), tools])
    values = dict(a.query("SELECT exchange_id, ttft_content_ns FROM metrics").rows)
    assert values["tools"] is None and values["text"] is not None
    content = by_metric(evaluate(a, [slo("ttft_content:max", 100 * MS)]))["ttft_content"]
    assert (content["met"], content["missing"]) == (False, 1)
    ttft = by_metric(evaluate(a, [slo("ttft:max", 100 * MS)]))["ttft"]
    assert (ttft["met"], ttft["missing"]) == (True, 0)


@pytest.mark.parametrize("metric", ["tpot", "itl"])
def test_an_slo_no_answer_can_measure_is_not_measurable_not_failed(load: Load, metric: str) -> None:
    """tpot and itl of answers not streamed: nothing to measure. Reported as the target failing, with
    attainment 100% beside it."""
    whole = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "a b c"}, "finish_reason": "stop"}]}'
    answers = [
        exchange(f"j{i}", sent_ms=i * 10, chunks=[(50, whole)], headers=JSON_HEADERS, request=body(stream=False))
        for i in range(3)
    ]
    v = evaluate(load(answers), [slo(f"{metric}:p50", 50 * MS), slo("e2e:p90", 1_000 * MS)])
    assert by_metric(v)[metric]["met"] is None and by_metric(v)[metric]["observed"] is None
    assert v["unmeasurable"] == [f"{metric}:p50<={50 * MS:f}ns"] and v["passed"] is True  # what could be measured held
    # With one streamed answer among them, it is measured (over that answer alone).
    mixed = evaluate(load([*answers, streamed("s", sent_ms=100, gaps_ms=[10, 10])]), [slo(f"{metric}:p50", 50 * MS)])
    assert by_metric(mixed)[metric]["met"] is True and mixed["unmeasurable"] == []


def test_error_rate_slo(load: Load) -> None:
    records = [streamed(f"ok{i}", sent_ms=i * 10) for i in range(7)] + [failed(f"e{i}", sent_ms=100 + i) for i in range(2)]
    a = load(records)
    rate = 2 / 9
    held = evaluate(a, [parse_slo(f"error_rate<={rate * 100 + 0.01}%")])
    missed = evaluate(a, [parse_slo(f"error_rate<={rate - 0.0001}")])
    assert held["passed"] is True and by_metric(held)["error_rate"]["observed"] == pytest.approx(rate)
    assert missed["passed"] is False and by_metric(missed)["error_rate"]["met"] is False
    # An error-rate SLO bounds no single request: goodput is every ok exchange.
    assert held["attainment"] == pytest.approx(7 / 9) and held["goodput"]["requests_per_s"] == pytest.approx(
        held["requests_per_s"]
    )


def test_a_run_where_every_request_failed_misses_its_latency_slo(load: Load) -> None:
    a = load([failed("e0"), failed("e1", sent_ms=10, status=429)])
    v = evaluate(a, [slo("ttft:p99", 10_000 * MS), parse_slo("error_rate<=100%")])
    assert (by_metric(v)["ttft"]["observed"], by_metric(v)["ttft"]["met"]) == (None, False)
    assert by_metric(v)["error_rate"]["met"] is True
    assert v["passed"] is False
    assert (v["ok"], v["error_rate"], v["attainment"], v["requests_per_s"]) == (0, 1.0, 0.0, 0.0)
    assert v["goodput"] == {"requests_per_s": 0.0, "output_tokens_per_s": 0.0}


def test_a_tpot_bound_is_not_held_against_a_one_token_answer(load: Load) -> None:
    a = load(
        [
            streamed("steady", sent_ms=0, gaps_ms=[10, 10, 10]),  # tpot 10 ms
            streamed("one-token", sent_ms=100, gaps_ms=[], tokens=1),  # no tpot at all
            streamed("slow", sent_ms=200, gaps_ms=[40, 40]),  # tpot 40 ms
        ]
    )
    tpots = dict(a.query("SELECT exchange_id, tpot_ns FROM metrics").rows)
    assert tpots["one-token"] is None and tpots["steady"] == pytest.approx(10 * MS) and tpots["slow"] == pytest.approx(40 * MS)

    v = evaluate(a, [slo("tpot:p50", 20 * MS)])
    # Observed over the two exchanges that have a tpot: their median is 25 ms, not 10 ms.
    assert by_metric(v)["tpot"]["observed"] == pytest.approx(25 * MS) and v["passed"] is False
    assert v["attainment"] == pytest.approx(2 / 3)  # steady and one-token meet the bound, slow doesn't
    assert evaluate(a, [slo("tpot:max", 40 * MS)])["attainment"] == pytest.approx(1.0)


def test_an_itl_slo_pools_every_gap_and_goodput_holds_each_exchange_to_its_own_gaps(load: Load) -> None:
    """Nine 10 ms gaps and one 200 ms gap: pooled, the median gap is 10 ms; a median of each
    exchange's longest gap would be 105 ms. Goodput holds each exchange to the statistic of its own
    gaps (the stalled one's median is 200 ms)."""
    a = load([streamed("smooth", sent_ms=0, gaps_ms=[10] * 9), streamed("stall", sent_ms=100, gaps_ms=[200])])
    gaps = sorted(g for (g,) in a.sql("SELECT gap_ns FROM itl").fetchall())
    assert len(gaps) == 10

    v = evaluate(a, [slo("itl:p50", 20 * MS)])
    assert by_metric(v)["itl"]["observed"] == pytest.approx(quantile(gaps, 0.5)) == pytest.approx(10 * MS)
    assert v["passed"] is True
    assert v["attainment"] == pytest.approx(1 / 2)  # the stalled exchange's longest gap is past 20 ms
    assert evaluate(a, [slo("itl:p50", 5 * MS)])["passed"] is False
    assert by_metric(evaluate(a, [slo("itl:max", 200 * MS)]))["itl"]["met"] is True
    assert by_metric(evaluate(a, [slo("itl:max", 200 * MS - 1)]))["itl"]["met"] is False


def test_goodput_holds_each_answer_to_the_itl_slos_statistic_of_its_own_gaps(load: Load) -> None:
    """A long answer with one slow gap among many fast ones (a scheduler hiccup) meets an itl:p90
    bound on its own gaps, as the pooled statistic does; held to its longest gap it was no goodput,
    and a point meeting itl:p90 counted none. A max bound still holds each to its longest gap, a
    mean bound to its mean (AIPerf's per-request ITL)."""
    hiccup = [10.0] * 19 + [60.0]  # p90 of its own gaps: 10 ms; mean 12.5 ms; longest 60 ms
    a = load([streamed("hiccup", gaps_ms=hiccup), streamed("smooth", sent_ms=100, gaps_ms=[10.0] * 20)])
    p90 = evaluate(a, [slo("itl:p90", 20 * MS)])
    assert p90["passed"] is True and p90["attainment"] == 1.0
    assert p90["goodput"]["requests_per_s"] == pytest.approx(p90["requests_per_s"])
    assert evaluate(a, [slo("itl:max", 20 * MS)])["attainment"] == pytest.approx(1 / 2)  # 60 ms > 20 ms
    assert evaluate(a, [slo("itl:mean", 12 * MS)])["attainment"] == pytest.approx(1 / 2)  # 12.5 ms > 12 ms
    assert evaluate(a, [slo("itl:mean", 13 * MS)])["attainment"] == 1.0


def test_an_itl_slo_counts_a_failed_exchange_as_an_average_answers_gaps_over_the_bound(load: Load) -> None:
    """A failed request's own gaps are no measurement; it weighs in the pooled gaps as an ok answer's
    share of them, over the bound, so that failures count for itl as for any other SLO."""
    a = load(
        [
            *(streamed(f"smooth{i}", sent_ms=i * 100, gaps_ms=[10] * 4) for i in range(9)),
            streamed("broken", sent_ms=1_000, gaps_ms=[900] * 6, end="upstream_error"),  # not ok
        ]
    )
    v = evaluate(a, [slo("itl:p85", 20 * MS)])  # 36 gaps of 10 ms, and 4 over the bound: one in ten
    assert by_metric(v)["itl"]["met"] is True and by_metric(v)["itl"]["observed"] == pytest.approx(10 * MS)
    assert evaluate(a, [slo("itl:p95", 20 * MS)])["passed"] is False


def test_no_generation_exchanges_is_an_error_not_a_pass(load: Load) -> None:
    a = load([exchange("models", chunks=[(1, b"{}")], request=b"", headers=JSON_HEADERS, method="GET", path="/v1/models")])
    with pytest.raises(ConfigError, match="no generation exchanges"):
        evaluate(a, [slo("e2e:p99", 1e12)])


def test_a_non_streamed_answer_is_held_to_ttft_at_its_whole_body(load: Load) -> None:
    whole = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}'
    a = load(
        [
            exchange("json", chunks=[(80, whole)], end_ms=81, headers=JSON_HEADERS, request=body(stream=False)),
            streamed("sse", sent_ms=10, ttft_ms=20),
        ]
    )
    held = evaluate(a, [slo("ttft:max", 80 * MS)])
    assert by_metric(held)["ttft"]["observed"] == pytest.approx(80 * MS) and held["passed"] is True
    assert evaluate(a, [slo("ttft:max", 80 * MS - 1)])["passed"] is False


@pytest.mark.parametrize(("failures", "total"), [(1, 100), (5, 100), (3, 300)])
def test_an_error_rate_exactly_at_its_bound_passes(load: Load, failures: int, total: int) -> None:
    """``<=`` at the bound itself: 1 - 99/100 is 0.010000000000000009, which failed error_rate<=1%."""
    ok = [streamed(f"ok{i}", sent_ms=i) for i in range(total - failures)]
    a = load(ok + [failed(f"e{i}", sent_ms=total + i) for i in range(failures)])
    v = evaluate(a, [parse_slo(f"error_rate<={failures * 100 // total}%")])
    assert by_metric(v)["error_rate"]["observed"] == failures / total and v["passed"] is True


@pytest.mark.parametrize(("bound", "failures", "total"), [("1.4", 7, 500), ("0.7", 7, 1000), ("2.9", 29, 1000), ("0.1", 1, 1000)])
def test_an_error_rate_bound_is_compared_exactly(bound: str, failures: int, total: int) -> None:
    """1.4 / 100 is 0.013999999999999999 in floats, under 7 / 500: error_rate<=1.4% failed at 1.4%."""
    held = parse_slo(f"error_rate<={bound}%")
    assert held.holds(Fraction(failures, total)) and not held.holds(Fraction(failures + 1, total))
    assert parse_slo("e2e:p99<=1.4ms").holds(1_400_000) and not parse_slo("e2e:p99<=1.4ms").holds(1_400_001)


def test_an_error_rate_exactly_at_a_fractional_percent_bound_passes(load: Load) -> None:
    a = load([streamed(f"ok{i}", sent_ms=i) for i in range(993)] + [failed(f"e{i}", sent_ms=1_000 + i) for i in range(7)])
    assert evaluate(a, [parse_slo("error_rate<=0.7%")])["passed"] is True
    assert evaluate(a, [parse_slo("error_rate<=0.69%")])["passed"] is False


# -- imported answers not in their file ------------------------------------------------------------

_SSE = (
    'data: {"choices":[{"index":0,"delta":{"content":"t "},"finish_reason":null}]}\n\n'
    'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


def _har(path: Path, answers: list[tuple[int, int, bool]]) -> Path:
    """A HAR of chat requests a second apart, each answered with (status, e2e ms, whether its body
    was saved: Chrome saves ``content`` without its text where it wasn't), imported into a capture."""
    entries = []
    for i, (status, e2e_ms, saved) in enumerate(answers):
        content: dict[str, Any] = {"size": len(_SSE), "mimeType": "text/event-stream"}
        if saved:
            content["text"] = _SSE
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"q{i}"}]}
        entries.append(
            {
                "startedDateTime": f"2025-01-02T10:00:0{i}.000+00:00",
                "time": e2e_ms,
                "timings": {"send": 0, "wait": e2e_ms - 1, "receive": 1},
                "request": {
                    "method": "POST",
                    "url": "https://api.example.com/v1/chat/completions",
                    "httpVersion": "http/1.1",
                    "headers": [],
                    "postData": {"mimeType": "application/json", "text": json.dumps(body)},
                },
                "response": {
                    "status": status,
                    "headers": [{"name": "Content-Type", "value": "text/event-stream"}],
                    "content": content,
                },
            }
        )
    (path.parent / f"{path.name}.har").write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    import_file(path.parent / f"{path.name}.har", path)
    return path


def test_an_imported_answer_not_in_its_file_is_left_out_as_stats_leaves_it_out(tmp_path: Path) -> None:
    """A 2xx answer a HAR didn't save (``body_not_in_file``) is unknown: ``stats`` counts it neither
    ok nor an error, and neither do SLOs nor goodput (they counted it a failed request, over every
    bound: ``error_rate`` 1/4, ``e2e:max`` infinite, attainment 3/4). One whose status says it failed is a
    failure in both, its body saved or not; an answer that really failed is one in SLOs."""
    slos = [parse_slo("error_rate<=0%"), parse_slo("e2e:max<=200ms")]
    fast = (200, 100, True)
    cases = {
        "unsaved": [fast, (200, 150, False), fast, fast],
        "failed": [fast, (500, 150, True), fast, fast],
        "failed_unsaved": [fast, (500, 150, False), fast, fast],
    }
    verdicts, groups = {}, {}
    for name, answers in cases.items():
        with Analysis([_har(tmp_path / name, answers)], cache_dir=tmp_path / "cache") as a:
            verdicts[name] = evaluate(a, slos)
            (groups[name],) = speed_stats(a)["groups"]
    unsaved = verdicts["unsaved"]
    assert (unsaved["error_rate"], unsaved["passed"], unsaved["attainment"]) == (0.0, True, 1.0)
    assert [s["met"] for s in unsaved["slos"]] == [True, True] and unsaved["slos"][1]["observed"] == 100e6
    assert (unsaved["requests"], unsaved["ok"], unsaved["not_in_file"]) == (4, 3, 1)
    assert unsaved["span_s"] == pytest.approx(3.1)  # the unknown answer took its time all the same
    assert unsaved["goodput"]["requests_per_s"] == pytest.approx(3 / 3.1)
    for name, unsaved_n in (("failed", 0), ("failed_unsaved", 1)):  # a failure stays one
        v = verdicts[name]
        assert (v["requests"], v["not_in_file"], v["error_rate"], v["passed"]) == (4, unsaved_n, 0.25, False), name
        assert [s["met"] for s in v["slos"]] == [False, False] and v["attainment"] == 0.75
    for name, v in verdicts.items():  # what stats says, SLOs say
        g = groups[name]
        assert (v["requests"], v["ok"], v["not_in_file"], v["error_rate"]) == (
            g["requests"],
            g["ok"],
            g["not_in_file"],
            g["error_rate"],
        ), name


def test_a_run_of_answers_none_of_which_is_in_its_file_is_unjudged_saying_so(tmp_path: Path) -> None:
    """Sent, with no answer to judge: no pass, its figures unknown, and why (it raised "no generation
    exchanges sent", which was untrue and, in a sweep, ended the sweep)."""
    with Analysis([_har(tmp_path / "none", [(200, 100, False)] * 2)], cache_dir=tmp_path / "cache") as a:
        v = evaluate(a, [parse_slo("error_rate<=1%")])
    assert (
        v["unjudged"]
        == "2 requests sent, none whose answer could be judged (2 answered 2xx, not in the file they were imported from)"
    )
    assert (v["passed"], v["requests"], v["not_in_file"], v["ok"], v["error_rate"], v["attainment"]) == (
        False,
        2,
        2,
        None,
        None,
        None,
    )
    assert [(s["observed"], s["met"]) for s in v["slos"]] == [(None, None)]
    assert v["goodput"] == {"requests_per_s": None, "output_tokens_per_s": None} and v["requests_per_s"] is None


def test_a_run_of_one_answer_in_its_file_is_judged(tmp_path: Path) -> None:
    with Analysis([_har(tmp_path / "one", [(200, 100, False), (200, 100, True)])], cache_dir=tmp_path / "cache") as a:
        v = evaluate(a, [parse_slo("error_rate<=1%")])
    assert (v["unjudged"], v["passed"], v["ok"], v["error_rate"], v["not_in_file"]) == (None, True, 1, 0.0, 1)


def test_a_run_whose_every_request_was_refused_unsent_is_no_pass_saying_so(tmp_path: Path) -> None:
    """Every request refused by the replayer: nothing sent, so nothing to judge, and no error (it
    ended a whole sweep at that point). A run with no generation request at all is still an error."""
    from tests.helpers import write_capture

    refused = {"end": "refused", "status": None}
    write_capture(tmp_path / "cap", [{"offset_s": i * 0.1, "fields": refused} for i in range(2)])
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        v = evaluate(a, [parse_slo("error_rate<=1%"), parse_slo("e2e:p90<=1s")])
    assert v["unjudged"] == (
        "2 requests refused by the replayer (such as a turn continuing a response outside the replay; "
        "each says why in the point's capture), none sent"
    )
    assert (v["passed"], v["requests"], v["not_sent"], v["span_s"], v["error_rate"], v["ok"]) == (False, 0, 2, None, None, None)
    assert [(s["observed"], s["met"]) for s in v["slos"]] == [(None, None), (None, None)]

    write_capture(tmp_path / "some", [{"offset_s": 0.0}, {"offset_s": 0.1, "fields": refused}])  # one sent beside it
    with Analysis([tmp_path / "some"], cache_dir=tmp_path / "cache") as a:
        v = evaluate(a, [parse_slo("error_rate<=1%")])
    assert (v["unjudged"], v["passed"], v["requests"], v["not_sent"], v["ok"]) == (None, True, 1, 1, 1)

    write_capture(tmp_path / "models", [{"method": "GET", "path": "/v1/models", "body": b""}])  # no generation at all
    with Analysis([tmp_path / "models"], cache_dir=tmp_path / "cache") as a:
        with pytest.raises(
            ConfigError, match=r"^no generation exchanges in this run, sent or refused: nothing to hold to an SLO$"
        ):
            evaluate(a, [parse_slo("error_rate<=1%")])


@pytest.mark.parametrize(("cut", "counted"), [(True, 1), (False, 0)])
def test_an_answer_not_kept_whole_is_unknown_and_counted_in_the_verdict_and_the_sweep_notes(
    tmp_path: Path, cut: bool, counted: int
) -> None:
    """An answer the recorder kept only the head of (``response_body_size``) is unknown, as ``stats``
    has it, and the verdict says how many (``response_not_kept``), as the sweep's notes do."""
    from infertap.cli_sweep import notes
    from tests.helpers import write_capture

    kept = {"response_body_size": 1 << 20, "response_body_chunks": 9, "response_last_ns": 3_000_000}
    write_capture(tmp_path / "cap", [{"offset_s": i * 0.1, "fields": kept if cut and i == 1 else {}} for i in range(4)])
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        v = evaluate(a, [parse_slo("error_rate<=0%")])
        (g,) = speed_stats(a)["groups"]
    assert (v["requests"], v["ok"], v["error_rate"], v["passed"]) == (4, 4 - counted, 0.0, True)
    assert v["response_not_kept"] == g["response_not_kept"] == counted
    point = {"speed": 1.0, "passed": True, "replayer_behind": False, **v}
    said = [line for line in notes({"kind": "speed", "points": [point]}) if "--max-response-mb" in line]
    assert said == (
        [
            f"speed 1: {counted} answers kept only in part (past --max-response-mb): unknown, held to no SLO and left out of its figures but requests and the span"
        ]
        if cut
        else []
    )


def test_a_run_whose_answers_were_all_cut_is_unjudged_saying_so(tmp_path: Path) -> None:
    from tests.helpers import write_capture

    kept = {"response_body_size": 1 << 20, "response_body_chunks": 9, "response_last_ns": 3_000_000}
    write_capture(tmp_path / "cap", [{"offset_s": i * 0.1, "fields": kept} for i in range(2)])
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        v = evaluate(a, [parse_slo("error_rate<=1%")])
    assert v["unjudged"].endswith("(2 answered 2xx, kept only in part (past the recorder's --max-response-mb))")
    assert (v["passed"], v["response_not_kept"], v["error_rate"]) == (False, 2, None)


def _every_other(xid: str, sent_ms: float, kind: str) -> dict[str, Any]:
    """The odd requests of ``test_answered_per_s_counts_the_answers_that_came_back_only``, by ``kind``."""
    if kind == "error answer":  # a 503 the target sent back: an answer, not ok
        return failed(xid, sent_ms=sent_ms, status=503)
    if kind == "cancelled before headers":  # the replayer stopped while it waited: no status, no byte
        return exchange(xid, sent_ms=sent_ms, status=None, end_ms=71, end="cancelled")
    return streamed(xid, sent_ms=sent_ms, end=kind)  # cut mid-stream, ending where an answer would


@pytest.mark.parametrize(
    ("kind", "rate"),
    [("complete", 10.0), ("error answer", 10.0), ("cancelled", 5.0), ("timeout", 5.0), ("cancelled before headers", 5.0)],
)
def test_answered_per_s_counts_the_answers_that_came_back_only(load: Load, kind: str, rate: float) -> None:
    """Eleven requests a tenth of a second apart, each ending 71 ms after it was sent: answered, the
    rate is 10/s. A request the replayer cancelled (a stop, the grace period's end) or gave up on at
    its read timeout got no answer: with every other one so, 6 answers are 5 gaps in the second, 5/s.
    They were counted as answers, and a target that answered nothing 'carried' its load."""
    records = [streamed(f"r{i}", sent_ms=i * 100) if i % 2 == 0 else _every_other(f"r{i}", i * 100, kind) for i in range(11)]
    assert evaluate(load(records), [parse_slo("error_rate<=100%")])["answered_per_s"] == pytest.approx(rate)


def test_answered_per_s_is_zero_where_nothing_came_back(load: Load) -> None:
    records = [streamed(f"r{i}", sent_ms=i * 100, end="timeout") for i in range(11)]
    assert evaluate(load(records), [parse_slo("error_rate<=100%")])["answered_per_s"] == 0.0
