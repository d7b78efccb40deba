"""Run-level speed statistics and the workload profile, per group of exchanges (docs/metrics.md).

Only generation requests count (as their API reads them: ``messages``, ``prompt`` or ``input``):
a ``GET /v1/models`` is not a request for tokens. Latency distributions and throughput use the ``ok`` ones (complete,
2xx); the error rate, concurrency and the workload profile use all of them. Times come out in
milliseconds; percentiles interpolate linearly (DuckDB's ``quantile_cont``).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from typing import Any

from infertap.apis import NOT_IN_FILE, NOT_KEPT, TOO_LARGE
from infertap.recorders import recorder_running, unsearched_warning, writer_of

from .active import COUNTED, PART, RunPart, active, run_parts, seconds
from .energy import Telemetry
from .errors import AnalysisError
from .groupings import GROUPINGS
from .machines import hostname
from .media import embeddings_sent, not_text
from .partly_counted import partly_counted
from .sampled import sampled
from .server_figures import SELECT as SERVER_SELECT
from .server_figures import server_figures
from .store import Analysis
from .workload_identity import derivation, group_identities

#: Keys implied by a grouping: a run is one process's writing into one capture (copies of a capture
#: share run ids); a session is named within the captures it is linked across (``session_capture``:
#: recordings read together are linked as one; a replay, which keeps its source's session ids, and
#: its source are sessions apart).
_IMPLIED = {"run": ("capture",), "session": ("session_capture",)}
#: The metrics columns the statistics read.
_COLUMNS = (
    "capture, run_id, exchange_id, recorder, ok, sent_wall_ns, end_wall_ns, duration_ns, output_tokens, output_tokens_source, "
    "token_chunks, ttft_ns, ttft_content_ns, t_first_byte_ns, tpot_ns, e2e_ns, server_prompt_ms, server_decode_ms, "
    "server_cached_tokens, server_prompt_tokens, server_decode_tokens, server_load_ns, server_total_ns, server_timings_source, prompt_tokens, prompt_tokens_source, cached_tokens, cached_tokens_source, "
    'prefix_unit, prefix_shared, prefix_length, streamed, readable, parse_error, status, "end", finish_reason, choices_finish_reasons, tool_calls, session, session_capture, turn, think_ns, '
    "choices, hidden_reasoning_tokens, client_wait_ns, unfinished"
)
#: Per-exchange metrics summarised as distributions: name printed -> (column, scale to the unit).
LATENCIES = {
    "ttft": ("ttft_ns", 1e-6),
    "ttft_content": ("ttft_content_ns", 1e-6),
    "t_first_byte": ("t_first_byte_ns", 1e-6),
    "tpot": ("tpot_ns", 1e-6),
    "e2e": ("e2e_ns", 1e-6),
    "output_tokens": ("output_tokens", 1.0),
}
SERVER = {
    "prompt_ms": "server_prompt_ms",
    "decode_ms": "server_decode_ms",
    "cached_tokens": "server_cached_tokens",
    "total_ms": "server_total_ns / 1e6",  # Ollama's total_duration, its load included
}
QUANTILES = (0.5, 0.9, 0.99)


def _dist(q: list[float] | None, mean: float | None, n: int, scale: float) -> dict[str, Any]:
    values = [v * scale for v in q] if q else [None] * len(QUANTILES)
    return {
        "n": n,
        **{f"p{round(p * 100)}": v for p, v in zip(QUANTILES, values, strict=True)},
        "mean": mean * scale if mean is not None else None,
    }


def _aggs(column: str, where: str) -> str:
    """Each metric's quantiles, mean and count. The mean is summed compensated (``favg``): DuckDB's
    ``avg`` of doubles adds its threads' partial sums in whatever order they finish, so the same cache
    gave means that differed in their last digits from run to run."""
    qs = ", ".join(str(q) for q in QUANTILES)
    return (
        f"quantile_cont({column}, [{qs}]) FILTER (WHERE {where}), favg({column}) FILTER (WHERE {where}), "
        f"count({column}) FILTER (WHERE {where})"
    )


class _Query:
    """The group keys as SQL, and one query per aspect keyed on them."""

    def __init__(self, analysis: Analysis, by: Sequence[str]) -> None:
        unknown = [b for b in by if b not in GROUPINGS]
        if unknown or not by:
            raise AnalysisError(f"cannot group by {unknown or 'nothing'}: choose from {', '.join(GROUPINGS)}")
        self.a = analysis
        self.names = list(dict.fromkeys(n for b in by for n in (*_IMPLIED.get(b, ()), b)))
        self.keys = [f"k_{n}" for n in self.names]
        cols = ", ".join(f"{GROUPINGS.get(n, n)} AS k_{n}" for n in self.names)
        # The metrics view is computed once, into a temporary table every aspect then reads. A request
        # infertap refused (a replay's turn whose parent response is not in it, a body over the
        # proxy's limit) never reached the engine: no part of its figures, counted apart.
        analysis.query(f"CREATE OR REPLACE TEMP TABLE _stats_m AS SELECT {_COLUMNS}, {cols} FROM metrics WHERE {COUNTED}")
        self.m = "_stats_m"
        # A request with a body that was not kept reads as no generation: whether it was one is
        # unknown, so it is in no figure, counted apart rather than silently left out; refused by
        # infertap (a body over --max-body-mb), it counts as refused, once.
        body_unknown = (
            "EXISTS (SELECT 1 FROM exchanges x WHERE x.capture = metrics.capture "
            "AND x.exchange_id = metrics.exchange_id AND x.request_body_unknown)"
        )
        refused = f"(\"end\" = 'refused' AND (generation OR {body_unknown}))"
        not_kept = f"({body_unknown} AND \"end\" IS DISTINCT FROM 'refused')"
        # Both kinds in one pass over the metrics view, a few rows kept: each is read twice (their
        # groups' counts, and those of keys with no group), and the view costs a pass each time.
        analysis.query(
            f"CREATE OR REPLACE TEMP TABLE _stats_apart AS SELECT sent_wall_ns, {cols}, "
            f"{refused} AS _refused, {not_kept} AS _unknown FROM metrics WHERE {refused} OR {not_kept}"
        )
        keyed = ", ".join(["sent_wall_ns", *self.keys])
        self.refused = f"(SELECT {keyed} FROM _stats_apart WHERE _refused)"
        self.body_unknown = f"(SELECT {keyed} FROM _stats_apart WHERE _unknown)"

    def close(self) -> None:
        self.a.query("DROP TABLE IF EXISTS _stats_m")
        self.a.query("DROP TABLE IF EXISTS _stats_apart")

    def rows(self, select: str, source: str | None = None, extra_group: str = "") -> dict[tuple[Any, ...], list[Any]]:
        keys = ", ".join(self.keys)
        group = keys + (f", {extra_group}" if extra_group else "")
        sql = f"SELECT {keys}, {select} FROM {source or self.m} m GROUP BY {group} ORDER BY min(m.sent_wall_ns), {group}"
        out: dict[tuple[Any, ...], list[Any]] = {}
        for row in self.a.query(sql).rows:
            out.setdefault(tuple(row[: len(self.keys)]), []).append(row[len(self.keys) :])
        return out


def _one_source(by_source: dict[str, int]) -> str | None:
    """The source of a group's output-token total, or "mixed" when it adds counts of different kinds
    (llama-server's usage counts the end-of-sequence token, a re-tokenized count does not)."""
    counted = [source for source, tokens in by_source.items() if tokens]  # a source of no tokens adds none
    if len(counted) > 1:
        return "mixed"
    return counted[0] if counted else next(iter(by_source), None)


def _histogram(rows: list[list[Any]] | None) -> dict[str, int]:
    return {str(k): int(n) for k, n in (rows or []) if k is not None}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def ttft_mix(streamed: int, whole: int, of: str = "answers") -> str | None:
    """What a ttft over both kinds is, where both are in it (docs/metrics.md): a body not streamed has
    no first token apart from its last, so its ttft is the time to all of it. ``stats``, ``claim``,
    ``compare`` and the report say it in these words; ``of``: what is counted (answers, pairs)."""
    if not streamed or not whole:
        return None
    return f"ttft mixes {streamed} streamed {of} (time to the first token) with {whole} not streamed (time to the whole body)"


def speed_stats(analysis: Analysis, by: Sequence[str] = ("run",), *, derivations: bool = True) -> dict[str, Any]:
    """Per group: latency distributions, throughput, concurrency, error rate, server timings, workload;
    per capture, a replay's ``derivation`` (``derivations`` false: no such key, for a caller that says it
    itself, the claim card, saving the source identity's second reading)."""
    q = _Query(analysis, by)
    try:
        groups = _groups(q)
        identities = group_identities(analysis, q.m, q.keys)  # analysis/workload_identity.py
        for group in groups:
            group["workload"]["identity"] = identities.get(tuple(group["key"][n] for n in q.names))
        apart, apart_by_capture = _in_no_group(q, groups)
    finally:
        q.close()
    captures = capture_info(analysis)
    captures = with_derivations(analysis, captures) if derivations else captures
    return {
        "not_text": not_text(analysis),
        "embeddings_requests": embeddings_sent(analysis),  # in no figure either: their identity is the workload's embeddings
        "by": list(by),
        "captures": captures,
        "engines": engines(analysis),
        "groups": groups,
        "in_no_group": apart,
        "in_no_group_by_capture": apart_by_capture,
        # A glob's matches that hold no capture: warned of on stderr, here so that a script sees them too.
        "left_out": [x.as_json() for x in analysis.left_out],
        "unsearched": (unsearched := unsearched_bodies(analysis)),
        # Compressed request bodies recorded cut short inside their encoding (requests.body_cut): read as far as they go.
        "cut_requests": analysis.query("SELECT count(*) FROM requests WHERE body_cut").rows[0][0],
        "warnings": [*live_warnings(captures), *filter(None, [unsearched_warning(unsearched)])],
    }


def _in_no_group(q: _Query, groups: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The requests counted apart (``refused``, ``request_body_unknown``) whose key has no counted
    request, so no group to be counted in: a capture whose only generation requests infertap refused
    has no group at all, and its refusals would otherwise show nowhere. Also by capture, where the
    capture is in the key (by run: the claim card says its own capture's, of several loaded)."""
    keys = {tuple(group["key"][n] for n in q.names) for group in groups}
    total = {"refused": 0, "request_body_unknown": 0}
    by_capture: dict[str, dict[str, int]] = {}
    at = q.names.index("capture") if "capture" in q.names else None
    for name, source in (("refused", q.refused), ("request_body_unknown", q.body_unknown)):
        for key, [[n]] in q.rows("count(*)", source=source).items():
            if key in keys:
                continue
            total[name] += n
            if at is not None:
                counts = by_capture.setdefault(key[at], {"refused": 0, "request_body_unknown": 0})
                counts[name] += n
    return total, by_capture


def unsearched_bodies(analysis: Analysis) -> dict[str, int]:
    """The exchanges of the loaded captures that keep a body encoded as sent, not searched for
    credentials, and of them the requests and responses: ``infertap info``'s count, which ``stats``
    warns of as well, since its captures are the ones shared."""
    [row] = analysis.query(
        "SELECT count(*) FILTER (WHERE request_body_unsearched OR response_body_unsearched), "
        "count(*) FILTER (WHERE request_body_unsearched), count(*) FILTER (WHERE response_body_unsearched) FROM exchanges"
    ).rows
    return dict(zip(("exchanges", "request", "response"), (int(n or 0) for n in row), strict=True))


#: An answer the file it was imported from doesn't hold (``body_not_in_file``): unknown, not unreadable
#: (no adapter was asked to read it).
_UNSAVED = "parse_error = '" + NOT_IN_FILE.replace("'", "''") + "'"
#: An answer whose body decodes past what analysis reads of one (``TOO_LARGE``): unknown as well.
_TOO_LARGE = "parse_error = '" + TOO_LARGE.replace("'", "''") + "'"
#: An answer the recorder kept only the head of, over its response limit (``NOT_KEPT``): unknown too.
_NOT_KEPT = "parse_error = '" + NOT_KEPT.replace("'", "''") + "'"
_UNKNOWN = f"({_UNSAVED} OR {_TOO_LARGE} OR {_NOT_KEPT})"
#: Such an answer, whole to its client, whose kept tail holds the engine's count (apis.tail_usage):
#: unknown as an answer, yet its tokens are in the output token totals and rates (the longest answers).
_CUT_2XX = f"""({_NOT_KEPT} AND status BETWEEN 200 AND 299 AND "end" = 'complete')"""
_TAIL_COUNTED = f"({_CUT_2XX} AND output_tokens IS NOT NULL)"
#: The answers whose output tokens are counted: the ok ones, and those.
_OUT = f"(ok OR {_TAIL_COUNTED})"
#: A body no adapter read under an error status (a 404's FastAPI {"detail": ...}): an error by its
#: status, not an answer infertap could not read (``unreadable`` is a 2xx body's only).
_ERROR_STATUS = "(status IS NOT NULL AND status NOT BETWEEN 200 AND 299)"
#: Bytes with no response head (a HAR's failed request, status 0, keeping what came before the
#: failure): a failure by its ending whose bytes no adapter read, counted with ``error_body_unread``.
#: With no byte either (refused, reset, timed out) there is no body at all, unreadable or not.
_NO_HEAD = "(status IS NULL AND t_first_byte_ns IS NOT NULL)"

#: One aspect's rows per group key (see _Query.rows).
_Rows = dict[tuple[Any, ...], list[Any]]


def _groups(q: _Query) -> list[dict[str, Any]]:
    """One entry per group, in the order of its first request."""
    aspects = _aspects(q)
    telemetry = Telemetry(q.a)
    scraped = _scraped(q.a)
    unread = _unread(q.a)
    said, kinds = _said(q.a), _kinds(q.a)
    groups = [
        _group(q, key, row, aspects, telemetry, scraped)
        | {"telemetry_unread": _telemetry_unread(aspects["runs"][key], unread, scraped)}
        # Which runs were recorded with --no-telemetry: their energy is not sampled, not absent.
        | {"telemetry": sampled([(c, r) for c, r, *_ in aspects["runs"][key]], said, kinds)}
        for key, [row] in aspects["main"].items()
    ]
    for group in groups:  # its figures over the counted answers only, each flagged (None: every count known)
        group["partly_counted"] = partly_counted(group)
    return groups


#: A run's exporters (``runs.telemetry_urls``) by (capture, run_id), and whether the run is telemetry only.
_Scraped = dict[tuple[str, str], tuple[list[str], bool]]


def _scraped(analysis: Analysis) -> _Scraped:
    rows = analysis.query("SELECT capture, run_id, recorder, telemetry_urls FROM runs").rows
    return {(c, r): (json.loads(urls) if urls else [], kind == "telemetry") for c, r, kind, urls in rows}


def _said(analysis: Analysis) -> dict[tuple[str, str], bool | None]:
    """Whether each run said it sampled telemetry (``runs.telemetry``), by (capture, run_id)."""
    return {(c, r): on for c, r, on in analysis.query("SELECT capture, run_id, telemetry FROM runs").rows}


def _kinds(analysis: Analysis) -> dict[tuple[str, str], str]:
    """Each run's recorder kind, by (capture, run_id): an import's traffic ran on a machine its file does not name."""
    return {(c, r): kind for c, r, kind in analysis.query("SELECT capture, run_id, recorder FROM runs").rows}


def telemetry_sampled(analysis: Analysis, runs: list[list[Any]]) -> dict[str, Any]:
    """Whether the runs (rows starting capture, run id) sampled telemetry, as a group's ``telemetry``."""
    return sampled([(c, r) for c, r, *_ in runs], _said(analysis), _kinds(analysis))


def telemetry_urls(analysis: Analysis, runs: list[list[Any]]) -> list[str]:
    """The exporters the figures of ``runs`` (rows starting capture, run id) may come from, as a
    group's ``telemetry_urls``: what ``compare`` names beside each side's energy."""
    return _telemetry_urls(runs, _scraped(analysis))


def _telemetry_urls(runs: list[list[Any]], scraped: _Scraped) -> list[str]:
    """The exporters a group's energy and engine figures may come from: those its runs scraped, and
    those of its captures' telemetry-only runs (a ``replay --ray`` driver's)."""
    keys = {(c, r) for c, r, *_ in runs}
    captures = {c for c, _ in keys}
    urls = (u for (c, r), (us, alone) in scraped.items() if (c, r) in keys or (alone and c in captures) for u in us)
    return list(dict.fromkeys(urls))


def _unread(analysis: Analysis) -> dict[tuple[str, str], list[str]]:
    """What each run's sampler recorded it could not read (``source: reason``, in order), by (capture, run_id)."""
    rows = analysis.query(
        "SELECT capture, run_id, source, unknown FROM telemetry WHERE unknown IS NOT NULL GROUP BY ALL ORDER BY min(wall_ns)"
    ).rows
    unread: dict[tuple[str, str], list[str]] = {}
    for capture, run, source, reason in rows:
        unread.setdefault((capture, run), []).append(f"{source}: {reason}")
    return unread


def _telemetry_unread(runs: list[list[Any]], unread: dict[tuple[str, str], list[str]], scraped: _Scraped) -> list[str]:
    """Why a group's telemetry lacks something, as its sampler recorded it (a GPU tool that hung or
    answered garbage, an exporter that answered 404), from the runs ``_telemetry_urls`` reads: an
    energy or engine figure left unknown then says why, and an exporter named there as scraped that
    never answered says so."""
    keys = {(c, r) for c, r, *_ in runs}
    captures = {c for c, _ in keys}
    alone = {k for k, (_, only) in scraped.items() if only and k[0] in captures}
    return list(dict.fromkeys(why for k, whys in unread.items() if k in keys or k in alone for why in whys))


def _aspects(q: _Query) -> dict[str, _Rows]:
    """Every aspect's rows for all groups at once: one query each, however many groups there are."""
    lat = ", ".join(_aggs(col, "ok") for col, _ in LATENCIES.values())
    srv = ", ".join(_aggs(col, "ok") for col in SERVER.values())
    sessions = (
        {
            "session": q.rows(
                "count(*), max(turn), sum(think_ns), count(think_ns), "
                "list(CASE WHEN prompt_tokens > 0 THEN cached_tokens / prompt_tokens END ORDER BY sent_wall_ns, turn)"
            )
        }
        if "session" in q.names
        else {}
    )
    return {
        **sessions,
        "main": q.rows(
            "count(*), count(*) FILTER (WHERE ok), min(sent_wall_ns), max(end_wall_ns), sum(duration_ns), "
            # tokens_per_chunk: streams of one choice whose token times are known (an imported
            # answer is one coarse chunk, however many events it holds)
            f"sum(output_tokens) FILTER (WHERE {_OUT}), sum(output_tokens) FILTER (WHERE ok), sum(output_tokens - hidden_reasoning_tokens) FILTER (WHERE ok AND streamed AND token_chunks > 0 AND choices = 1 AND ttft_ns IS NOT NULL), "
            "sum(token_chunks) FILTER (WHERE ok AND streamed AND token_chunks > 0 AND choices = 1 AND ttft_ns IS NOT NULL), any_value(recorder), "
            "string_agg(DISTINCT server_timings_source, '; '), "
            "count(*) FILTER (WHERE ok AND NOT streamed AND ttft_ns IS NOT NULL), "
            f"count(*) FILTER (WHERE ok AND streamed AND ttft_ns IS NOT NULL), {lat}, {srv}"
        ),
        "server": q.rows(SERVER_SELECT),
        "itl": q.rows(
            _aggs("gap_ns", "ok"), source=f"(SELECT x.*, i.gap_ns FROM {q.m} x JOIN itl i USING (capture, exchange_id))"
        ),
        "peak": _peak_concurrency(q),
        "sources": q.rows(
            "output_tokens_source, count(*), sum(output_tokens)",
            extra_group="output_tokens_source",
            source=f"(SELECT * FROM {q.m} WHERE {_OUT})",
        ),
        # Each answer choice by how it ended (n > 1: every choice is an answer, choice 0 and the others).
        "finish": q.rows(
            "histogram(coalesce(f, 'unknown'))",
            source=f"(SELECT *, unnest(list_prepend(finish_reason, coalesce(choices_finish_reasons, []))) AS f FROM {q.m})",
        ),
        "answers": q.rows(
            "count(*) FILTER (WHERE tool_calls > 0), sum(tool_calls), "
            f"count(*) FILTER (WHERE NOT readable AND {_UNKNOWN} IS NOT TRUE AND status BETWEEN 200 AND 299), "
            "count(*) FILTER (WHERE client_wait_ns > 0), "
            f"max(client_wait_ns), count(*) FILTER (WHERE ok AND output_tokens IS NULL), count(*) FILTER (WHERE {_UNSAVED}), "
            f"""count(*) FILTER (WHERE {_UNKNOWN} AND status BETWEEN 200 AND 299 AND "end" = 'complete'), """
            f"count(*) FILTER (WHERE {_TOO_LARGE}), count(*) FILTER (WHERE {_NOT_KEPT}), "
            f"count(*) FILTER (WHERE NOT readable AND {_UNKNOWN} IS NOT TRUE AND ({_ERROR_STATUS} OR {_NO_HEAD})), "
            f"count(*) FILTER (WHERE {_TAIL_COUNTED}), count(*) FILTER (WHERE {_CUT_2XX} AND output_tokens IS NULL), "
            "count(*) FILTER (WHERE unfinished)"
        ),
        "work": q.rows(
            # Output tokens of ok answers only, as vLLM's benchmark_serving and GuideLLM count them, and
            # as output_tokens_unknown counts the answers of none: a failed request's in neither. A cut
            # answer whose tail holds its count (response_not_kept_counted) is counted with them.
            f"sum(prompt_tokens), count(prompt_tokens), sum(output_tokens) FILTER (WHERE {_OUT}), count(output_tokens) FILTER (WHERE {_OUT}), "
            "sum(cached_tokens), sum(prompt_tokens) FILTER (WHERE cached_tokens IS NOT NULL), count(cached_tokens), "
            f"histogram(prompt_tokens_source), histogram(cached_tokens_source), sum(prompt_tokens) FILTER (WHERE {_OUT}), "
            f"count(prompt_tokens) FILTER (WHERE {_OUT})"
        ),
        "session_count": q.rows("count(DISTINCT session_capture || chr(0) || session)"),
        "runs": q.rows(f"capture, run_id, {PART}", extra_group="capture, run_id"),
        "refused": q.rows("count(*)", source=q.refused),
        "body_unknown": q.rows("count(*)", source=q.body_unknown),
        "prefix": q.rows(
            "prefix_unit, count(*), sum(prefix_shared), sum(prefix_length), avg(prefix_shared)",
            extra_group="prefix_unit",
            source=f"(SELECT * FROM {q.m} WHERE prefix_unit IS NOT NULL)",
        ),
    }


def _peak_concurrency(q: _Query) -> _Rows:
    """The most requests in flight at once: a running sum over sends (+1) and ends (-1), ends first on a tie."""
    events = f"(SELECT sent_wall_ns AS t, 1 AS d, * FROM {q.m} UNION ALL SELECT end_wall_ns AS t, -1 AS d, * FROM {q.m})"
    inflight = (
        f"(SELECT *, sum(d) OVER (PARTITION BY {', '.join(q.keys)} ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS n FROM {events})"
    )
    return q.rows("max(n)", source=inflight)


def _group(
    q: _Query, key: tuple[Any, ...], row: list[Any], aspects: dict[str, _Rows], telemetry: Telemetry, scraped: _Scraped
) -> dict[str, Any]:
    """One group's statistics, from its row of each aspect."""
    requests, ok, first, last, busy, out_tokens, ok_tokens, chunk_tokens, token_chunks, recorder, server_src, whole, streamed = (
        row[:13]
    )
    values = row[13:]
    span_s = (last - first) / 1e9 if first is not None and last is not None else None
    parts = run_parts(aspects["runs"][key])
    active_s, runs = _active(parts), len(aspects["runs"][key])
    [itl_row] = aspects["itl"].get(key, [[None, None, 0]])
    [answers] = aspects["answers"][key]
    with_tools, tool_calls, unreadable, held, held_ns, uncounted, unsaved, unknown, too_large, cut, error_unread = answers[:11]
    cut_counted, cut_uncounted, unfinished = answers[11:]
    [[finish]] = aspects["finish"][key]
    # A 2xx answer that is not in the file it was imported from, that decodes past what analysis
    # reads, or that the recorder kept only in part, is neither ok nor an error (one that failed otherwise, a request the page aborted, is
    # still an error).
    known = requests - unknown
    sources = aspects["sources"].get(key, [])
    by_source = {str(src): int(total or 0) for src, _, total in sources if src is not None}
    label = dict(zip(q.names, key, strict=True))
    if "run" in label:
        label["recorder"] = recorder
    # Energy per request and token is over the ok answers (their tokens), as energy.py counts them per run.
    power = _power(telemetry, parts, aspects["session_count"][key][0][0], ok, ok_tokens or 0)
    session = _session(aspects["session"][key][0], span_s, busy, power["energy"]) if "session" in aspects else {}
    return {
        "key": label,
        "requests": requests,
        "refused": aspects["refused"].get(key, [[0]])[0][0],  # never sent: in no figure (``requests`` included)
        "ok": ok,
        "errors": known - ok,
        "error_rate": (known - ok) / known if known else None,
        "not_in_file": unsaved,
        "too_large": too_large,
        "response_not_kept": cut,  # kept only in part, over the recorder's response limit: unknown
        # Of those (2xx, complete), the ones whose kept tail holds the engine's usage: their output
        # tokens are in the output token totals and rates, and the ones whose tail holds none.
        "response_not_kept_counted": cut_counted,
        "response_not_kept_uncounted": cut_uncounted,
        # Sent with a body not kept (exchanges.request_body_unknown): generation or not unknown, in no figure.
        "request_body_unknown": aspects["body_unknown"].get(key, [[0]])[0][0],
        "span_s": span_s,
        # Rates and mean concurrency are over the time its runs were active, not the gaps between them.
        "active_s": active_s,
        "runs": runs,
        "metrics": _latencies(values, itl_row),
        # ttft of a body not streamed is the time to all of it: said apart where both kinds are in a group.
        "ttft_kinds": {"streamed": streamed, "whole_body": whole},
        "unreadable": unreadable,
        # 2xx streams whose end marker came with no finish reason: cut by the engine, errors (in ``errors``).
        "unfinished": unfinished,
        "error_body_unread": error_unread,  # errors (in ``errors``) whose body (or headless bytes) is no API's, apart from ``unreadable``
        # Exchanges whose client was too slow to take the body: their chunk times include its waits.
        "client_wait": {"exchanges": held, "max_ms": held_ns / 1e6 if held_ns is not None else None},
        "finish_reasons": {str(k): int(v) for k, v in (finish or {}).items()},
        "tool_calls": {"exchanges": with_tools, "calls": int(tool_calls or 0)},
        "tokens_per_chunk": _ratio(chunk_tokens, token_chunks),
        "output_tokens_source": _histogram([source[:2] for source in sources]),
        "throughput": {
            "requests_per_s": _ratio(ok, active_s),
            # Of the answers whose tokens were counted: none, when no answer's were.
            "output_tokens_per_s": _ratio(out_tokens, active_s) if out_tokens is not None else None,
            "output_tokens_source": _one_source(by_source),
            "output_tokens_unknown": uncounted,  # answers of no count: a body not streamed, with no usage
        },
        "concurrency": {"mean": _ratio(busy / 1e9 if busy is not None else None, active_s), "max": aspects["peak"][key][0][0]},
        "server_timings": {
            "source": server_src,
            **{name: _dist(*_triple(values, len(LATENCIES) + i), 1.0) for i, name in enumerate(SERVER)},
            **server_figures(aspects["server"][key][0]),
        },
        "workload": _workload(requests, aspects["work"][key][0], by_source, aspects["prefix"].get(key, [])),
        **power,
        # Where the energy and engine figures' exporters were (--telemetry-url, redacted): [] for none.
        "telemetry_urls": _telemetry_urls(aspects["runs"][key], scraped),
        **session,
    }


def _active(parts: list[RunPart]) -> float | None:
    """The time a group's runs were active, in s (analysis/active.py): the idle time between runs
    read together (a replay appended an hour later) is no part of its rates."""
    spans = active(parts)
    return seconds(spans) if spans else None


def _session(row: list[Any], span_s: float | None, busy_ns: int | None, energy: dict[str, Any] | None) -> dict[str, Any]:
    """A session as a unit of work (docs/metrics.md, Sessions): first send to last end, split into the
    time its turns spent in the engine and the agent's own time between them."""
    turns, last_turn, think_ns, thinks, cached_shares = row
    engine_s = busy_ns / 1e9 if busy_ns is not None else None
    think_s = (think_ns or 0) / 1e9
    return {
        "session": {
            "turns": turns,
            "depth": (last_turn or 0) + 1,  # turns in its longest chain (turns sent side by side share a depth)
            "makespan_s": span_s,
            "engine_s": engine_s,
            "think_s": think_s,
            "think_gaps": thinks,
            "cached_share_by_turn": cached_shares,
            "watt_hours": energy["joules"] / 3600
            if energy and energy["joules"] is not None
            else None,  # over its span, shared with what overlapped it
        }
    }


def _power(telemetry: Telemetry, parts: list[RunPart], sessions: int, ok: int, tokens: int) -> dict[str, Any]:
    """Energy and engine state over the group's active time, as its rates (docs/metrics.md: attributed by time)."""
    if not parts:
        return {"energy": None, "engine_state": None}
    return {
        "energy": telemetry.energy(parts, ok, tokens, sessions),
        "engine_state": telemetry.engine_state(parts),
    }


def _triple(values: list[Any], i: int) -> tuple[list[float] | None, float | None, int]:
    """The i-th (quantiles, mean, count) of a row that _aggs wrote three columns at a time."""
    return values[3 * i], values[3 * i + 1], values[3 * i + 2]


def _latencies(values: list[Any], itl_row: list[Any]) -> dict[str, dict[str, Any]]:
    """Each latency distribution in its unit, then the inter-token gaps (a row per gap, hence its own query)."""
    metrics = {name: _dist(*_triple(values, i), scale) for i, (name, (_, scale)) in enumerate(LATENCIES.items())}
    metrics["itl"] = _dist(itl_row[0], itl_row[1], itl_row[2], 1e-6)
    return metrics


def _workload(requests: int, w: list[Any], by_source: dict[str, int], prefix: list[Any]) -> dict[str, Any]:
    """Tokens in and out, cache hits and prefix reuse: what two runs must share before their speeds compare."""
    return {
        "requests": requests,
        # known_ok: of the answers whose output is counted (ok, and cut ones by their tail), those with a prompt count
        "prompt_tokens": {"total": w[0], "known": w[1], "known_ok": w[10], "source": w[7] or {}},
        "output_tokens": {"total": w[2], "known": w[3], "by_source": by_source},
        "output_per_prompt": _ratio(w[2], w[9]),  # of the answers counted in the output total
        "cached_tokens": {"total": w[4], "known": w[6], "share": _ratio(w[4], w[5]), "source": w[8] or {}},
        "prefix_reuse": [
            {"unit": unit, "requests": n, "shared": shared, "length": length, "share": _ratio(shared, length), "mean": mean}
            for unit, n, shared, length, mean in prefix
        ],
    }


def capture_info(analysis: Analysis) -> list[dict[str, Any]]:
    """Each loaded capture: id, segments, clean close and torn tails (their data is used), and
    whether it is still being written: ``writing``, the pid of a recorder of one of its unclosed
    runs that still runs on this machine, else ``writing_elsewhere``, the machines that wrote
    its other unclosed runs (whether those still write can't be told from here), of which
    ``imported_elsewhere`` those that wrote an import (not its traffic's machine: that is unknown)."""
    rows = analysis.query(
        "SELECT capture, capture_id, segments, records, closed_cleanly, torn FROM captures ORDER BY capture"
    ).records()
    unclosed = unclosed_runs(analysis)
    for row in rows:
        row["torn"] = json.loads(row["torn"] or "[]")
        row.update(liveness(unclosed.get(row["capture"], [])))
    return rows


def with_derivations(analysis: Analysis, captures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``captures`` each with ``derivation``: for a replay, what it changed of its source's workload
    (``workload_identity.derivation``), since speeds compare only beside what was asked; else None."""
    return [{**c, "derivation": derivation(analysis, c["capture"])} for c in captures]


def unclosed_runs(analysis: Analysis) -> dict[str, list[list[Any]]]:
    """Each capture's runs not closed, ``[pid, host name, wall, imported]`` in start order: the facts
    ``liveness`` judges, apart so that an export's Ray workers can hand them to the machine that
    asked. An import's are its importer's (``imported`` true): its traffic's machine is unknown."""
    unclosed = {
        capture: set(json.loads(runs or "[]")) for capture, runs in analysis.query("SELECT capture, open_runs FROM captures").rows
    }
    out: dict[str, list[list[Any]]] = {}
    for capture, run_id, pid, host, wall, importer in analysis.query(
        "SELECT capture, run_id, pid, host, wall, importer FROM runs ORDER BY wall"
    ).rows:
        if str(run_id) in unclosed.get(capture, ()):
            # An import's writer is its importer, not its traffic's (unknown) machine at its traffic's start.
            _, name, since = writer_of({"importer": json.loads(importer)} if importer else {}, {"hostname": hostname(host)}, wall)
            out.setdefault(capture, []).append([pid, name, since, bool(importer)])
    return out


def liveness(open_runs: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """``writing``, ``writing_elsewhere`` and, of those machines, ``recorded_elsewhere`` and
    ``imported_elsewhere`` (one machine may be in both) of a capture whose unclosed runs are
    ``open_runs`` (``unclosed_runs``), judged on this machine: the one whose processes can be looked at."""
    alive = [pid for pid, host, wall, *_ in open_runs if recorder_running(pid, host, wall) is not None]
    here = socket.gethostname()
    elsewhere = [(host, bool(rest and rest[0])) for _, host, _, *rest in open_runs if host and host != here] if not alive else []
    return {
        "writing": alive[-1] if alive else None,
        "writing_elsewhere": sorted({host for host, _ in elsewhere}),
        "recorded_elsewhere": sorted({host for host, imported in elsewhere if not imported}),
        "imported_elsewhere": sorted({host for host, imported in elsewhere if imported}),
    }


def live_warnings(captures: list[dict[str, Any]], of: str = "these figures") -> list[str]:
    """What a capture still being written leaves out of every figure (``of``: what was made of it,
    an export's tables), said per capture."""
    out = []
    for c in captures:
        if c["writing"] is not None:
            out.append(
                f"{c['capture']} is still being written (its recorder, pid {c['writing']}, runs on this machine): "
                f"{of} are of what it held when read; exchanges in flight then, and later ones, are in none of them"
            )
        elif c["writing_elsewhere"]:
            out.append(f"{c['capture']} is not closed and {_written_elsewhere(c, of)}")
    return out


def _written_elsewhere(c: dict[str, Any], of: str) -> str:
    """Where a capture's unclosed runs were written, not here: an import's machine is its importer's,
    not the one its traffic ran on (the file does not say which), and is named so."""
    hosts, imported = c["writing_elsewhere"], c.get("imported_elsewhere") or []
    if not imported:
        return (
            f"was recorded on {', '.join(hosts)}, not this machine: "
            f"if its recorder still runs there, exchanges in flight when it was read are in none of {of}"
        )
    # A machine may have left both a recording and an import unclosed: it is named for each.
    recorded = c.get("recorded_elsewhere") or []
    if recorded == imported:
        where = "was recorded and imported on"
    elif recorded:
        where = f"was recorded on {', '.join(recorded)} and imported on"
    else:
        where = "was imported on"
    return (
        f"{where} {', '.join(imported)}, not this machine (the machine its imported traffic ran on is unknown): "
        f"if a writer of it still runs there, exchanges not yet written when it was read are in none of {of}"
    )


def engines(analysis: Analysis) -> list[dict[str, Any]]:
    """The distinct engine configurations seen (a number without its configuration is gossip)."""
    return analysis.query(
        "SELECT kind, version, dtype, url, fingerprint, count(*) AS snapshots FROM engines "
        "GROUP BY ALL ORDER BY min(wall) NULLS LAST, kind, url"
    ).records()
