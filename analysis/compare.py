"""``compare``: two runs of the same workload, in the order that explains them.

1. configuration (engine snapshots, effective settings, effective prompts), 2. speed side by side
with B/A ratios and bootstrap intervals, 3. divergence of the outputs, 4. the most divergent
exchanges with an inline diff. With a baseline (a second run of A's own configuration), B's
divergence is shown next to A's divergence from itself: the noise floor.

Neither run is held in Python: each is summarized (summaries.py) into compare's own DuckDB database
(``Workspace``) beside its metrics; pairing (pairing.py's ``pair_in``), speed and sessions run as
SQL there, and divergence reads the pairs back in batches (paired_divergence.py).
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import duckdb
import numpy as np

from infertap.capture.info import no_snapshot_reason

from .accuracy import accuracy
from .active import COUNTED, PART, run_parts
from .cache import lookup
from .compare_apart import apart_speed
from .compare_load import concurrency, concurrency_note
from .compare_model_load import model_load
from .compare_outcomes import outcomes
from .compare_traffic import traffic
from .configdiff import input_changes, served, settings_diff, several_configurations, snapshot_diff
from .energy import Telemetry
from .errors import AnalysisError, QueryError
from .extract import grader
from .fetch import columns
from .machines import IMPORTED, counted_runs, imported_only, probed_by
from .near_pairs import near_pairs
from .paired_divergence import BATCH_PAIRS, divergence
from .pairing import PairTable, pair_in
from .partly_counted import Origin, origin
from .partly_counted import note as partly_counted_note
from .ratios import bootstrap_ratio, distribution
from .sampled import NOT_SAMPLED, all_imported, all_unsampled
from .sessions import session_comparison
from .stats import telemetry_sampled, telemetry_urls, ttft_mix
from .store import MEMORY_ENV, Analysis
from .summaries import cached_side, load
from .unpaired import nothing_to_compare
from .views import OUTPUT_FROM, PROMPT_FROM, SETTINGS_FROM

SPEED_METRICS = ("ttft", "ttft_content", "tpot", "e2e")
#: Metrics that mean another thing for a body not streamed (the time to all of it): compared only
#: between pairs answered alike, streamed on both sides or on neither.
_FRAMED = ("ttft", "ttft_content")


#: DuckDB's buffer in compare's own database (spilled to its temporary folder beyond that), and in
#: each run's ``Analysis`` while compare reads its metrics; ``$INFERTAP_DUCKDB_MEMORY`` when set.
#: Ten million pairs run in it (each step a query of its own, that DuckDB can spill).
MEMORY_LIMIT = "256MB"


def memory_limit() -> str:
    return os.environ.get(MEMORY_ENV) or MEMORY_LIMIT


#: What compare reads of each run's ``metrics`` view.
_METRICS = (
    'capture, run_id, exchange_id, generation, method, path, status, "end", readable, session, session_capture, turn, link, ok, unfinished, streamed, sent_wall_ns, end_wall_ns, output_tokens, '
    "server_load_ns, server_total_ns, " + ", ".join(f"{name}_ns" for name in SPEED_METRICS)
)


def _lit(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


class Workspace:
    """compare's own DuckDB database, in a private temporary folder: each run's summarized exchanges
    and metrics, the pairs, the per-pair results; DuckDB spills beyond ``MEMORY_LIMIT`` to disk."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="infertap-compare-")
        self.folder = Path(self._tmp.name)
        self.con = duckdb.connect(
            str(self.folder / "compare.duckdb"),
            config={"memory_limit": memory_limit(), "temp_directory": str(self.folder / "spill")},
        )

    def close(self) -> None:
        self.con.close()
        self._tmp.cleanup()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Run:
    """One side of a comparison, in the workspace: ``<name>_x`` its exchanges summarized
    (summaries.py), ``<name>_e`` the enrichment of each (each field as ``enrichment_latest`` takes
    it), ``<name>_m`` its metrics; its last engine snapshot and every engine configuration it ran
    under, torn tails, energy and engine state."""

    def __init__(
        self, path: str | os.PathLike[str], ws: Workspace, name: str, *, last_user: bool = False, metrics: bool = True
    ) -> None:
        self.path = str(path)
        self.name = name
        self.energy: dict[str, Any] | None = None
        self.engine_state: dict[str, Any] | None = None
        self.telemetry_urls: list[str] = []  # the exporters its energy and engine state may come from
        self.telemetry: dict[str, Any] | None = None  # its runs, and those recorded with --no-telemetry
        # What J per output token is over where some ok answers have no output token count (stats' rule, partly_counted.note).
        self.partly_counted: str | None = None
        con = ws.con
        counted: set[str] = set()  # the runs its figures (speed, energy) are over
        if metrics:  # decoded (or found in the cache) first: a corrupt capture fails there, as before
            target = ws.folder / name / "metrics.parquet"
            target.parent.mkdir(parents=True, exist_ok=True)
            with Analysis([path]) as analysis:
                # The metrics view computed once, in bounded memory, and kept: the rest reads the copy.
                analysis.con.execute(f"SET memory_limit = '{memory_limit()}'")
                analysis.con.execute("SET preserve_insertion_order = false")
                analysis.con.execute(f"COPY (SELECT {_METRICS} FROM metrics) TO {_lit(target)} (FORMAT parquet)")
                copy = f"read_parquet({_lit(target)}, hive_partitioning = false)"
                self.energy, self.engine_state = _power(analysis, copy)
                runs = analysis.sql(f"SELECT capture, run_id FROM {copy} WHERE {COUNTED} GROUP BY ALL").fetchall()
                counted = {str(run_id) for _, run_id in runs}
                self.telemetry_urls = telemetry_urls(analysis, [list(r) for r in runs])
                self.telemetry = telemetry_sampled(analysis, [list(r) for r in runs])
                self.partly_counted = _partly_counted(analysis, copy, origin(self.telemetry)) if self.energy else None
                cached = _cached_share(analysis)
                if cached is not None:  # the engine's own prompt cache, from usage: a cause of ttft any engine reports
                    self.engine_state = {**(self.engine_state or {}), "cached_prompt_share": cached}
        side = cached_side(path, lookup(path), ws.folder / name, last_user=last_user)
        self.exchanges, self.snapshot, self.torn = side.exchanges, side.snapshot, side.torn
        self.configurations = side.configurations
        self.snapshot_run = side.snapshot_run
        # The runs its configuration describes (imported or not, why no snapshot): those its figures
        # are over, as the energy's telemetry is (the claim card's rule too).
        self.carried = counted_runs(side.carried, counted)
        self.repeated = side.repeated
        self.vectors_file = side.vectors_file  # its embeddings answers' vectors, read by pair in divergence
        con.execute(
            f"CREATE OR REPLACE VIEW {name}_x AS SELECT * FROM read_parquet({_lit(side.exchanges_file)}, hive_partitioning = false)"
        )
        # Each field from the enrichment enrichment_latest takes it from (views.py's orders): a later
        # enrichment that could not count (its probe failed) erases no earlier count, ids or settings.
        # Chosen by their narrow columns, then the blobs joined by place: sorting the blobs in the
        # aggregates took twice as long.
        rows = f"read_parquet({_lit(side.enrichments_file)}, hive_partitioning = false)"
        con.execute(
            f"CREATE OR REPLACE TABLE {name}_e AS WITH chosen AS (SELECT exchange_id, "
            f"first(ord ORDER BY {SETTINGS_FROM}) AS s_ord, first(ord ORDER BY {PROMPT_FROM}) AS p_ord, "
            f"first(ord ORDER BY {OUTPUT_FROM}) AS o_ord FROM {rows} GROUP BY exchange_id) "
            "SELECT c.exchange_id, s.settings, list_value(p.prompt, o.output, s.settings) AS enrichment, p.prompt_disagrees "
            f"FROM chosen c JOIN {rows} s ON s.ord = c.s_ord JOIN {rows} p ON p.ord = c.p_ord JOIN {rows} o ON o.ord = c.o_ord"
        )
        # Whether any rebuilt prompt taken disagreed with the engine's own count: then none is the
        # prompt the engine ran (it renders otherwise than its probed template says). A superseded
        # one is not asked, as enrichment_latest's prompt_trusted doesn't ask it.
        (disagreed,) = con.execute(f"SELECT coalesce(bool_or(prompt_disagrees), false) FROM {name}_e").fetchall()[0]
        self.prompts_distrusted = bool(disagreed)
        if metrics:
            con.execute(
                f"CREATE OR REPLACE TABLE {name}_m AS SELECT m.*, x.ord FROM read_parquet({_lit(target)}, hive_partitioning = false) m "
                f"LEFT JOIN (SELECT id, max(ord) AS ord FROM {name}_x GROUP BY id) x ON x.id = m.exchange_id"
            )


def _power(analysis: Analysis, metrics: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The run's energy and engine state over its active time, as ``stats`` reads them
    (docs/metrics.md); ``metrics``: the run's metrics rows (a copy of the view's columns that this reads)."""
    ok, tokens, sessions = analysis.sql(
        "SELECT count(*) FILTER (WHERE ok), coalesce(sum(output_tokens) FILTER (WHERE ok), 0), "
        f"count(DISTINCT session_capture || chr(0) || session) FROM {metrics} WHERE {COUNTED}"
    ).fetchall()[0]
    parts = run_parts(
        analysis.sql(f"SELECT capture, run_id, {PART} FROM {metrics} WHERE {COUNTED} GROUP BY capture, run_id").fetchall()
    )
    if not parts:
        return None, None
    if not analysis.sql("SELECT count(*) FROM telemetry WHERE value IS NOT NULL").fetchall()[0][0]:
        # No samples: Telemetry would find no series, after reading every exchange's span into Python.
        return None, None
    telemetry = Telemetry(analysis)
    return telemetry.energy(parts, ok, tokens, sessions), telemetry.engine_state(parts)


def _partly_counted(analysis: Analysis, metrics: str, where: Origin = "recorded") -> str | None:
    """stats' note on the run's ok answers of no output token count (``partly_counted.note``): its J
    per output token is then per request over the counted answers' mean; None where all are counted.
    Energy is per ok answer: an answer kept only in part is in none of its figures."""
    ok, uncounted = analysis.sql(
        f"SELECT count(*) FILTER (WHERE ok), count(*) FILTER (WHERE ok AND output_tokens IS NULL) FROM {metrics} WHERE {COUNTED}"
    ).fetchall()[0]
    return partly_counted_note(uncounted, ok, where)


def _cached_share(analysis: Analysis) -> float | None:
    """The share of prompt tokens the engine read from its cache (usage's cached tokens, or the
    server's), over the ok generation requests that say: vLLM's prefix-cache metric is one engine's,
    this is every API's that reports cached tokens (llama-server, OpenAI, Anthropic)."""
    (share,) = analysis.sql(
        "SELECT sum(cached_tokens)::DOUBLE / nullif(sum(prompt_tokens), 0) FROM metrics "
        "WHERE generation AND ok AND cached_tokens IS NOT NULL AND prompt_tokens IS NOT NULL"
    ).fetchall()[0]
    return share


def speed(ws: Workspace, a: Run, b: Run, pairs: PairTable) -> list[dict[str, Any]]:
    """Per metric, A and B over the generation requests paired and ok on both sides, with B/A and its interval."""
    # Each pair's values joined once into a table, then read back a metric at a time in pair order:
    # the join and the sort as one query held both at once (ten million pairs failed in 256 MB).
    table = f"{pairs.name}_speed"
    values_of = ", ".join(f"ma.{n}_ns AS a_{n}, mb.{n}_ns AS b_{n}" for n in SPEED_METRICS)
    ws.con.execute(
        f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT p.ord, ma.streamed IS NOT DISTINCT FROM mb.streamed AS alike, "
        "ma.streamed AS a_streamed, "
        f"{values_of} FROM {pairs.name} p "
        f"JOIN {a.name}_m ma ON ma.exchange_id = p.a_id JOIN {b.name}_m mb ON mb.exchange_id = p.b_id "
        "WHERE ma.ok AND mb.ok AND ma.generation AND mb.generation"  # as stats: a GET /v1/models has an e2e, no tokens
    )
    rows = []
    for name in SPEED_METRICS:
        both = f"a_{name} IS NOT NULL AND b_{name} IS NOT NULL"
        values = columns(
            ws.con,
            f"SELECT a_{name} AS a, b_{name} AS b FROM {table} WHERE {both}{' AND alike' if name in _FRAMED else ''} ORDER BY ord",
        )
        va, vb = _ms(values.pop("a")), _ms(values.pop("b"))
        da, db = distribution(va), distribution(vb)
        ratio = db["p50"] / da["p50"] if da["p50"] and db["p50"] is not None else None
        row = {"metric": name, "unit": "ms", "a": da, "b": db, "ratio_p50": ratio, "ratio_ci95": bootstrap_ratio(va, vb)}
        if name in _FRAMED:  # streamed on one side only: a first token against a whole body
            row["stream_differs"] = ws.con.execute(f"SELECT count(*) FROM {table} WHERE {both} AND NOT alike").fetchall()[0][0]
            # Of the pairs compared (answered alike), those streamed (a first token) and not (a whole body): speed_notes.
            streamed, whole = ws.con.execute(
                f"SELECT count(*) FILTER (WHERE a_streamed), count(*) FILTER (WHERE NOT a_streamed) FROM {table} WHERE {both} AND alike"
            ).fetchall()[0]
            row["streamed"], row["not_streamed"] = int(streamed), int(whole)
        rows.append(row)
    ws.con.execute(f"DROP TABLE {table}")
    return rows


def speed_notes(rows: Sequence[dict[str, Any]], load: dict[str, Any] | None = None) -> list[str]:
    """What the speed rows' ttft is over, said under the table by ``compare`` and the report alike:
    the pairs left out as streamed on one side only, and a ttft of streamed pairs and of whole bodies
    (in stats' and claim's words), whose percentiles would read as a first token's; and, with ``load``
    (compare's ``concurrency``), a side that ran at a much higher concurrency, its latencies queued."""
    notes = []
    if piled := concurrency_note(load):
        notes.append(piled)
    if apart := max((row.get("stream_differs") or 0 for row in rows), default=0):
        notes.append(f"ttft left out for {apart} pairs streamed on one side only (the other's is the time to the whole body)")
    ttft = next((row for row in rows if row["metric"] == "ttft"), {})
    if mixed := ttft_mix(ttft.get("streamed") or 0, ttft.get("not_streamed") or 0, "pairs"):
        notes.append(f"{mixed}; stats --by stream splits them")
    return notes


def _ms(ns: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Nanoseconds as milliseconds, one array made (ten million pairs: 80 MB a side, not 240)."""
    out = ns.astype(np.float64)
    out /= 1e6
    return out


def energy(a: Run, b: Run) -> dict[str, Any]:
    """Each run's energy over its whole span (attributed by time, docs/metrics.md), B/A per request
    and per output token, and the engine's state (peak KV cache, queue, preemptions) on each side."""
    ea, eb = a.energy or {}, b.energy or {}
    ka, kb = _kinds(a.energy), _kinds(b.energy)
    ratios = {
        f"ratio_{k}": _ratio_of(eb.get(k), ea.get(k)) for k in ("joules_per_request", "joules_per_output_token", "mean_watts")
    }
    return {
        "a": a.energy,
        "b": b.energy,
        **ratios,
        # Which sides have an energy figure: "both", "a", "b" or "neither".
        "measured": "both" if ka and kb else "a" if ka else "b" if kb else "neither",
        # Alike by the kind of source (energy.kinds), not by ``source``'s text: that also says how much was
        # measured. Null where neither side measured energy: no sources to be alike or not.
        "same_source": set(ka) == set(kb) if ka or kb else None,
        "partly_measured": {"a": ea.get("partly_measured"), "b": eb.get("partly_measured")},
        # stats' note where some of a side's ok answers have no output token count: its J per output
        # token is per request over the counted answers' mean (analysis/partly_counted.py); None where all are counted.
        "partly_counted": {"a": a.partly_counted, "b": b.partly_counted},
        "telemetry_urls": {"a": a.telemetry_urls, "b": b.telemetry_urls},
        # Each side's runs and those recorded with --no-telemetry (stats' ``telemetry``).
        "telemetry": {"a": a.telemetry, "b": b.telemetry},
        "kinds": {"a": ka, "b": kb},
        "unlike": _unlike(a, b),
        "engine_state": {"a": a.engine_state, "b": b.engine_state},
    }


def _kinds(energy: dict[str, Any] | None) -> list[str]:
    """The kinds of source a run's energy was measured by (``energy.KINDS``); none where it has no figure."""
    return list(energy.get("kinds", [])) if energy and energy.get("joules") is not None else []


def _unlike(a: Run, b: Run) -> str | None:
    """Why the two runs' energy is not like for like: measured by different kinds of source (an
    exporter's against the machine's own NVML readings), or on one side only; None where alike, or
    where neither side measured any (``measured`` says that plainly)."""
    ka, kb = _kinds(a.energy), _kinds(b.energy)
    if set(ka) == set(kb):
        return None

    def said(kinds: list[str], run: Run) -> str:
        scraped = f" ({', '.join(run.telemetry_urls)})" if run.telemetry_urls and "DCGM exporter" in kinds else ""
        if kinds:
            return " and ".join(kinds) + scraped
        if all_unsampled(run.telemetry):
            return f"none ({NOT_SAMPLED})"
        if all_imported(run.telemetry):  # no telemetry here is of its machine
            return "none (imported from a file, which does not say the machine its traffic ran on)"
        return "none (no power telemetry of its engine)"

    return (
        f"A's energy is from {said(ka, a)}, B's from {said(kb, b)}: "
        "not measured alike, so their energy figures are not like for like"
    )


def engine_state_diff(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[dict[str, Any]]:
    """What the engine went through that differs between the runs (queueing, cache, preemptions):
    a cause to read before the speed, listed where both sides know it and the values differ."""
    if not a or not b:
        return []
    return [
        {"name": name, "a": a[name], "b": b[name]}
        for name in a
        if name != "unknown"  # why a figure is unknown: no figure
        and a[name] is not None
        and b.get(name) is not None
        and not math.isclose(a[name], b[name], rel_tol=0.05, abs_tol=1e-9)
    ]


def _imported_only(run: Run) -> bool:
    """Whether all of a side's traffic was imported, judged by the runs its figures are over (``Run.carried``)."""
    return imported_only(run.carried.values())


def _probed_after(run: Run) -> str | None:
    """Whose engine a side's snapshot is, where some of its traffic was imported (``probed_by``):
    enrich's afterwards, or another run's, never the import's; None otherwise."""
    if run.snapshot is None:
        return None
    kind, run_id = (run.snapshot_run[1], run.snapshot_run[0]) if run.snapshot_run else (None, None)
    imported = [r for r, k in run.carried.items() if k == "import"]
    return probed_by(kind, run_id, run.snapshot.get("wall"), imported, only=_imported_only(run))


def _ratio_of(b: float | None, a: float | None) -> float | None:
    return b / a if a and b is not None else None


def _settings(ws: Workspace, a: Run, b: Run, pairs: PairTable) -> list[dict[str, Any]]:
    """``settings_diff`` over every pair enriched on both sides, fed each distinct pair of settings
    as many times as it occurs, in order of first occurrence: the same rows as over every pair."""
    groups = ws.con.execute(
        f"SELECT ea.settings, eb.settings, count(*) FROM {pairs.name} p JOIN {a.name}_e ea ON ea.exchange_id = p.a_id "
        f"JOIN {b.name}_e eb ON eb.exchange_id = p.b_id GROUP BY ea.settings, eb.settings ORDER BY min(p.ord)"
    ).fetchall()
    enriched = [({"settings": load(sa)}, {"settings": load(sb)}, n) for sa, sb, n in groups]
    every = itertools.chain.from_iterable(itertools.repeat((ea, eb), n) for ea, eb, n in enriched)
    return settings_diff(cast("Sequence[tuple[dict[str, Any] | None, dict[str, Any] | None]]", every))


def _prompts(ws: Workspace, a: Run, b: Run, pairs: PairTable, why: Counter[str]) -> dict[str, Any]:
    """Effective prompt tokens over the pairs enriched on both sides; none, ``not_compared`` says
    why, by the sides without an enrichment: "0 of 0 pairs identical" said nothing of it."""
    out: dict[str, Any] = {"compared": sum(why.values()), "equal": why.pop("equal", 0), "differences": dict(why.most_common())}
    if out["compared"]:
        return out
    enriched = ws.con.execute(
        f"SELECT count(ea.enrichment), count(eb.enrichment) FROM {pairs.name} p "
        f"LEFT JOIN {a.name}_e ea ON ea.exchange_id = p.a_id LEFT JOIN {b.name}_e eb ON eb.exchange_id = p.b_id"
    ).fetchone() or (0, 0)
    bare = {
        side: no_snapshot_reason(run.carried.values()) for side, run, n in (("A", a, enriched[0]), ("B", b, enriched[1])) if not n
    }
    if len(bare) == 2 and len(set(bare.values())) == 1:
        lacking = f"neither side has one ({bare['A']})"
    else:
        lacking = "; ".join(f"{side} has none ({reason})" for side, reason in bare.items())
    out["not_compared"] = "no pair has an enrichment (the probe's rebuilt prompt tokens) on both sides: " + (
        f"{lacking}; infertap enrich adds one"
        if bare
        else f"A's {enriched[0]} and B's {enriched[1]} enriched pairs are never the same pair"
    )
    return out


def compare(
    a_path: str | os.PathLike[str],
    b_path: str | os.PathLike[str],
    *,
    baseline: str | os.PathLike[str] | None = None,
    extract: str | None = None,
    top: int = 5,
    references: Mapping[str, str] | None = None,
    batch: int = BATCH_PAIRS,
) -> dict[str, Any]:
    """The full comparison of B against A (and of A's baseline run against A, when given).

    ``references`` maps a request's last user message (or prompt) to its known answer: with an
    extractor, flips are then counted in both directions, right-to-wrong and wrong-to-right.

    Neither run is held in Python: each is summarized into compare's own DuckDB database (on disk,
    its buffer bounded by ``memory_limit()``), pairs are made there, and their outputs are diffed
    ``batch`` pairs at a time (docs/analysis.md, Scale).
    """
    try:
        return _compare(a_path, b_path, baseline, extract, top, references, batch)
    except (duckdb.OutOfMemoryException, QueryError) as exc:
        cause = exc if isinstance(exc, duckdb.OutOfMemoryException) else exc.__cause__
        if not isinstance(cause, duckdb.OutOfMemoryException):
            raise
        raise AnalysisError(
            f"compare needs more than its DuckDB buffer of {memory_limit()} for these runs "
            f"({str(cause).splitlines()[0]}); give it more with {MEMORY_ENV}=4GB (ten million pairs of short answers "
            f"fit in {MEMORY_LIMIT})"
        ) from exc


def _compare(
    a_path: str | os.PathLike[str],
    b_path: str | os.PathLike[str],
    baseline: str | os.PathLike[str] | None,
    extract: str | None,
    top: int,
    references: Mapping[str, str] | None,
    batch: int,
) -> dict[str, Any]:
    extract_fn = grader(extract) if extract else None
    with Workspace() as ws:
        last_user = extract_fn is not None and references is not None
        a, b = Run(a_path, ws, "a", last_user=last_user), Run(b_path, ws, "b")
        pairs = pair_in(ws.con, f"{a.name}_x", f"{b.name}_x", "pairs_b")
        if not pairs.pairs:  # a side with no generation request is why, said before the rules that found nothing
            if empty := [said for said in map(nothing_to_compare, (a_path, b_path)) if said]:
                raise AnalysisError(f"nothing to compare: {'; '.join(empty)}")
            if near := near_pairs(ws.con, a_path, b_path, "near_b"):  # what kept requests of one body apart
                raise AnalysisError(f"no request of {a_path} is identical to one of {b_path}: {near}; {pairs.explain()}")
            raise AnalysisError(f"no exchange of {b_path} matches one of {a_path}: {pairs.explain()}")
        if baseline is not None:  # a baseline that pairs nothing would leave the noise floor out unsaid
            base = Run(baseline, ws, "base", metrics=False)
            base_pairs = pair_in(ws.con, f"{a.name}_x", f"{base.name}_x", "pairs_base")
            if not base_pairs.pairs:
                if empty_base := nothing_to_compare(baseline):
                    raise AnalysisError(f"the baseline has nothing to compare: {empty_base}")
                if near := near_pairs(ws.con, a_path, baseline, "near_base", "the baseline"):
                    raise AnalysisError(
                        f"no request of {a_path} is identical to one of the baseline {baseline}: {near}; {base_pairs.explain()}"
                    )
                raise AnalysisError(f"no exchange of the baseline {baseline} matches one of {a_path}: {base_pairs.explain()}")
        why: Counter[str] = Counter()
        result: dict[str, Any] = {
            "a": {"path": a.path, "exchanges": a.exchanges, "torn": a.torn, "repeated_ids": a.repeated},
            "b": {"path": b.path, "exchanges": b.exchanges, "torn": b.torn, "repeated_ids": b.repeated},
            "pairing": {
                "pairs": pairs.pairs,
                "by": pairs.by,
                "unpaired_a": pairs.unpaired_a,
                "unpaired_b": pairs.unpaired_b,
                "explain": pairs.explain(),
            },
        }
        # Before the speed: how each side answered, and over which pairs the speed is.
        result["outcomes"] = outcomes(ws.con, a.name, b.name, pairs.name)
        speed_rows = speed(ws, a, b, pairs)
        # The image, video, speech and embeddings requests, in no row above: their answers and e2e, by kind.
        result["apart_speed"] = apart_speed(ws.con, a.name, b.name, pairs.name)
        result["concurrency"] = concurrency(ws.con, a.name, b.name)  # the load each side ran under, beside its speed
        # A model load (Ollama's load_duration) inside either side's ttft and e2e, over the speed's pairs.
        result["model_load"] = model_load(ws.con, a.name, b.name, pairs.name)
        exact = f"{pairs.name}_exact"  # each pair's answers equal: sessions are judged on it
        diverged = divergence(
            ws.con,
            ws.folder / "pairs_b",
            a.name,
            b.name,
            pairs,
            extract_fn,
            top,
            references,
            exact=exact,
            prompts=why,
            distrusted=(a.prompts_distrusted, b.prompts_distrusted),
            batch=batch,
            metrics=(f"{a.name}_m", f"{b.name}_m"),
            vectors=(a.vectors_file, b.vectors_file),
        )
        result["config"] = {
            # An import's engine machine is unknown, whatever host an enrich's snapshot (of this machine) names.
            # Its engine facts are enrich's, probed after the import: kept, and said so.
            "snapshots": snapshot_diff(
                a.snapshot,
                b.snapshot,
                (IMPORTED if _imported_only(a) else None, IMPORTED if _imported_only(b) else None),
                (_probed_after(a), _probed_after(b)),
            ),
            "snapshot_missing": [side for side, run in (("A", a), ("B", b)) if run.snapshot is None],
            # why, by how each side's counted runs were recorded: an import or a mitm run probes no engine
            "snapshot_missing_reason": {
                side: no_snapshot_reason(run.carried.values()) for side, run in (("A", a), ("B", b)) if run.snapshot is None
            },
            # Each side's engine configurations (fingerprints): more than one on a side, and its last
            # snapshot is not the configuration of all its exchanges (several_configurations says so).
            "configurations": {"A": a.configurations, "B": b.configurations},
            "several_configurations": several_configurations(a.configurations, b.configurations),
            "settings": _settings(ws, a, b, pairs),
            "engine_state": engine_state_diff(a.engine_state, b.engine_state),
            "prompts": _prompts(ws, a, b, pairs, why),
            "input_changes": input_changes(diverged["counts"]),
            "served": served(diverged["counts"]),
        }
        result["speed"] = speed_rows
        result["energy"] = energy(a, b)
        result["divergence"] = diverged
        result["sessions"] = session_comparison(ws.con, f"{a.name}_m", f"{b.name}_m", pairs.name, exact)
        # Did A and B see identical traffic?
        result["traffic"] = traffic(ws.con, ws.folder, a_path, b_path, memory_limit=memory_limit())
        t = result["traffic"]
        for row in result["speed"]:
            # same_workload: all the traffic (the media requests beside the text too); same_text_workload:
            # the text generation requests the speed figures are over.
            row["same_workload"] = t["identical"] or bool(t["rechained_only"])
            row["same_text_workload"] = t["text_identical"] or bool(t["rechained_only"])
        if baseline is not None:
            result["baseline"] = {
                "path": str(baseline),
                "pairing": base_pairs.explain(),
                "divergence": divergence(
                    ws.con,
                    ws.folder / "pairs_base",
                    a.name,
                    base.name,
                    base_pairs,
                    extract_fn,
                    0,
                    references,
                    batch=batch,
                    vectors=(a.vectors_file, base.vectors_file),
                ),
            }
    noise = (result.get("baseline") or {}).get("divergence")
    result["accuracy"] = accuracy(result["divergence"]["counts"], noise["counts"] if noise else None)
    return result
