"""The divergence of paired outputs, over pairs read from DuckDB in bounded batches.

compare.py keeps both runs summarized and paired in its own DuckDB database; here the pairs come
back a batch at a time in A's order, each pair's differences are measured (divergence.py's
definitions) and only what the result shows is kept: counts, exact sums for the means, the first
divergence positions (in DuckDB, for their median), and the few most divergent pairs.

Pair order is made without a sort of the summaries: DuckDB can't spill a sort whose rows carry
large blobs in a small buffer, nor four joins of them at once (ten million pairs failed in 256 MB),
so each side's summaries (then the enrichments) are joined to the pairs and written, unsorted, to
Parquet files by range of pair number (``PARTITION_BY``, streamed), each range about
``BUCKET_BYTES``; a range's files are read back and sorted in memory, one range at a time.
"""

from __future__ import annotations

import heapq
import json
import math
import shutil
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from infertap.apis.body import TOO_LARGE
from infertap.apis.read import NOT_IN_FILE, NOT_KEPT, UNKNOWN
from infertap.apis.shapes import finish_words
from infertap.apis.unfinished import cut_short

from .configdiff import prompt_diff
from .divergence import (
    PART,
    first_divergence,
    kl_shared_prefix,
    output_text,
    shared_positions,
    similarity,
    text_diff,
    tool_call_diff,
)
from .embedding_divergence import EmbeddingPairs
from .extract import Grader
from .media_divergence import MediaPairs
from .pairing import PairTable
from .summaries import Summary, load_enrichment, load_summary

#: Pairs diffed per batch: their summaries, and nothing else of the runs, are in Python at once.
BATCH_PAIRS = 5_000
#: About how many bytes of summaries and enrichments a range of pairs holds when it is read back
#: and sorted in memory (an average: a range of longer outputs holds more).
BUCKET_BYTES = 64 << 20
#: Rows a thread of the partitioned write holds before writing them out.
FLUSH_ROWS = 8_192


class _ExactSum:
    """A running sum of floats, exact until read: ``mean()`` divides ``math.fsum`` of every value added
    by their count (Shewchuk's partials, as fsum keeps them): over a million pairs, ``fmean``'s mean."""

    def __init__(self) -> None:
        self.partials: list[float] = []
        self.special: list[float] = []  # inf and nan: fsum decides what they make
        self.n = 0

    def add(self, x: float) -> None:
        self.n += 1
        if not math.isfinite(x):
            self.special.append(x)
            return
        partials, i = self.partials, 0
        for y in partials:
            if abs(x) < abs(y):
                x, y = y, x
            hi = x + y
            lo = y - (hi - x)
            if lo:
                partials[i] = lo
                i += 1
            x = hi
        partials[i:] = [x]

    def mean(self) -> float:
        return math.fsum(self.partials + self.special) / self.n


class _KlSums:
    """The pairs' logprob KL and top-1 agreement of one kind, each summed exactly (``_ExactSum``)."""

    def __init__(self) -> None:
        self.kl, self.top1 = _ExactSum(), _ExactSum()

    @property
    def n(self) -> int:
        return self.kl.n

    def add(self, pair_kl: Mapping[str, Any]) -> None:
        self.kl.add(pair_kl["kl_mean"])
        self.top1.add(pair_kl["top1_agreement"])

    def figures(self) -> dict[str, Any]:
        """``pairs``, ``kl_mean``, ``top1_agreement``: the means null where no pair was added."""
        return {
            "pairs": self.n,
            "kl_mean": self.kl.mean() if self.n else None,
            "top1_agreement": self.top1.mean() if self.n else None,
        }


class _Worst:
    """The ``top`` least similar inexact pairs seen so far (ties: the earlier pair first), as sorting
    every pair by similarity would list them, without keeping the others."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.heap: list[tuple[float, int, dict[str, Any]]] = []  # (-similarity, -ord, item): the worst kept on top

    def offer(self, ord_: int, item: dict[str, Any]) -> None:
        if self.top <= 0:
            return
        key = (-item["similarity"], -ord_, item)
        if len(self.heap) < self.top:
            heapq.heappush(self.heap, key)
        elif (item["similarity"], ord_) < (-self.heap[0][0], -self.heap[0][1]):
            heapq.heapreplace(self.heap, key)

    def items(self) -> list[dict[str, Any]]:
        return [item for _, _, item in sorted(self.heap, key=lambda k: (-k[0], -k[1]))]


#: The first divergence histogram's last bucket: every position from here on.
HISTOGRAM_CAP = 256


def bucket_label(start: int) -> str:
    """A histogram bucket's positions, 8 wide: 16-23; the last one open-ended (256+), since it holds
    every later position: labelled 256-263, a divergence at 1,000 read as one near 260."""
    return f"{start}+" if start >= HISTOGRAM_CAP else f"{start}-{start + 7}"


def histogram_bars(histogram: Mapping[int, int]) -> dict[str, int]:
    """The histogram as drawn: every bucket from 0 to the last that holds a pair, the empty ones at
    0, each by its label; with only the buckets holding pairs, 0-7 and 120-127 stood side by side
    as if they were neighbours."""
    last = max(histogram, default=-1)
    return {bucket_label(start): histogram.get(start, 0) for start in range(0, last + 1, 8)}


def exact_share(d: Mapping[str, Any]) -> str:
    """The exact match rate rounded down, with its counts: 1999 of 2000 pairs is no "100.0%"."""
    pairs, exact = d.get("pairs"), d.get("counts", {}).get("exact", 0)
    if d.get("exact_match_rate") is None or not pairs:
        return "-"
    tenths = exact * 1000 // pairs  # in integers: no float rounds 99.95% up
    return f"{tenths // 10}.{tenths % 10}% ({exact} of {pairs})"


def compared_share(d: Mapping[str, Any]) -> str:
    """``1988 of 2000``: the pairs whose outputs were compared (no side failed), of every pair."""
    return "-" if d.get("outputs_compared") is None or not d.get("pairs") else f"{d['outputs_compared']} of {d['pairs']}"


def differ_share(d: Mapping[str, Any]) -> str:
    """``12 of 1988``: the pairs compared whose outputs differ (no exact match), of those compared."""
    return "-" if not d.get("outputs_compared") else f"{d['outputs_differ']} of {d['outputs_compared']}"


def divergence(
    con: Any,
    folder: Path,
    a: str,
    b: str,
    pairs: PairTable,
    extract: Grader | None,
    top: int,
    references: Mapping[str, str] | None = None,
    *,
    exact: str | None = None,
    prompts: Counter[str] | None = None,
    distrusted: tuple[bool, bool] = (False, False),
    batch: int = BATCH_PAIRS,
    metrics: tuple[str, str] | None = None,
    vectors: tuple[Path | None, Path | None] = (None, None),
) -> dict[str, Any]:
    """How the paired outputs differ, exchange by exchange and in total, over pairs read ``batch`` at a
    time in A's order. ``a``, ``b``: the runs' names in ``con`` (tables ``<name>_x`` of summarized
    exchanges and ``<name>_e`` of enrichments, compare.py's ``Run``); ``folder``: an empty place for
    the pairs' files, removed after; ``top``: how many of the most divergent pairs, and of the pairs
    a side failed (the first, by id), are listed. Each pair's exactness goes to
    table ``exact`` (``ord, exact, embeddings``) when named (sessions are judged on it; an embeddings
    pair's is whether its vectors are identical); each pair's prompt
    comparison is counted in ``prompts`` when given (``distrusted``: whether each side's rebuilt
    prompts disagreed with its engine's own counts, configdiff.prompt_diff); ``metrics``: each side's
    metrics table (compare's ``<name>_m``), where known: then ``failed`` says how many of its pairs are
    of no generation request on a side, which outcomes and speed leave out (compare_outcomes);
    ``vectors``: each side's embeddings vectors file (summaries.Side.vectors_file), where it has one."""
    counts: Counter[str] = Counter()
    readability: dict[str, Counter[str]] = {}
    similarity_sum = _ExactSum()
    # The logprob KL and top-1 agreement, apart by what they are over: the model's own logprobs on both
    # sides, and llama.cpp's post-sampling probabilities on both (kl_notes): a mean of both is neither.
    kl = {"model": _KlSums(), "post_sampling": _KlSums()}
    histogram: Counter[int] = Counter()
    units: Counter[str] = Counter()  # what the placed positions count: tokens of one kind or characters
    # Of the pairs with logprobs on both sides, those with no KL: one side's post-sampling and the
    # other's the model's ("a": A's post-sampling).
    kl_not_comparable: Counter[str] = Counter()
    worst = _Worst(top)
    embedded = EmbeddingPairs(top, vectors)
    made = MediaPairs(top)
    results = f"{pairs.name}_results"
    con.execute(
        f"CREATE OR REPLACE TABLE {results} (ord BIGINT, exact BOOLEAN, position BIGINT, failed BOOLEAN, embeddings BOOLEAN)"
    )
    writer = con.cursor()
    n = compared = differ = 0
    failed = dict.fromkeys(FAILED_KEYS, 0)
    failed_pairs: list[dict[str, Any]] = []
    for chunk in _in_order(con, folder, a, b, pairs, batch):
        ords: list[int] = []
        exacts: list[bool | None] = []
        ats: list[int | None] = []
        fails: list[bool] = []
        embeds: list[bool] = []  # a pair of embeddings answers: its exactness is of its vectors
        columns = [chunk.column(i).to_pylist() for i in range(5)]
        for ord_, blob_a, blob_b, blob_ea, blob_eb in zip(*columns, strict=True):
            sa, sb = load_summary(blob_a), load_summary(blob_b)
            ea = load_enrichment(blob_ea) if blob_ea is not None else None
            eb = load_enrichment(blob_eb) if blob_eb is not None else None
            if prompts is not None:
                d = prompt_diff(ea, eb, distrusted)
                if d is not None:
                    prompts[d.get("why", "equal") if d.get("equal") is not True else "equal"] += 1
            if sa.embeddings is not None and sb.embeddings is not None:
                # Two embeddings answers: their vectors, not their text, are compared (embedding_divergence),
                # and whether they are identical is the pair's exactness (None: a side failed or not read).
                ords.append(ord_)
                exacts.append(embedded.add(ord_, sa, sb))
                ats.append(None)
                fails.append(False)
                embeds.append(True)
                continue
            if sa.media is not None and sb.media is not None:
                # Two image, video or speech answers: what they made is the same bytes or not (media_divergence).
                ords.append(ord_)
                exacts.append(made.add(sa, sb))
                ats.append(None)
                fails.append(False)
                embeds.append(False)
                continue
            unknown = sa.api == sb.api == UNKNOWN.name
            unread = {sa.parse_error, sb.parse_error}
            if unknown or NOT_IN_FILE in unread or TOO_LARGE in unread or NOT_KEPT in unread:
                # A request no API's adapter reads (a model list, /tokenize, a rerank), an answer
                # imported from a file that doesn't hold it, one that decodes past what analysis
                # reads, or one the recorder kept only the head of: nothing to compare; counted, and
                # listed by path, but neither a match nor a divergence.
                why = (
                    "not_compared"
                    if unknown
                    else "not_in_file"
                    if NOT_IN_FILE in unread
                    else "too_large"
                    if TOO_LARGE in unread
                    else "response_not_kept"
                )
                read = readability.setdefault(_path_of(sa), Counter())
                read["pairs"] += 1
                read[why] += 1
                counts[why] += 1
                ords.append(ord_)
                exacts.append(None)
                ats.append(None)
                fails.append(False)
                embeds.append(False)
                continue
            item = _pair_divergence(sa, sb, ea, eb, counts, readability, extract, references)
            n += 1
            at = None
            if "failed" in item:
                # A side failed: a difference of reliability, which outcomes says, not of output.
                # Counted apart, in no figure of the outputs; the same failure on both is still exact.
                _count_failed(failed, item)
                if len(failed_pairs) < top:  # the first, in A's order: by id, to be found in the captures
                    failed_pairs.append(
                        {"a_id": sa.id, "b_id": sb.id, "path": item["path"], "a": failure_of(sa), "b": failure_of(sb)}
                    )
            else:
                compared += 1
                differ += not item["exact"]
                similarity_sum.add(item["similarity"])
                # Where two answers part: a pair whose side can't be read has no such place (nothing
                # read against an answer differs "at 0"), so it is counted apart, not in the median.
                at = item["first_divergence"]["at"] if item["answers_compared"] else None
                if at is not None:
                    histogram[min(at // 8 * 8, HISTOGRAM_CAP)] += 1
                    units[item["first_divergence"]["unit"]] += 1
                elif not item["exact"] and not item["answers_compared"]:
                    counts["divergence_not_placed"] += 1
                if "kl" in item:
                    kl["post_sampling" if item["kl"].get("post_sampling") else "model"].add(item["kl"])
                if "kl_not_comparable" in item:
                    kl_not_comparable[item["kl_not_comparable"]] += 1
                if not item["exact"]:
                    worst.offer(ord_, item)
            ords.append(ord_)
            exacts.append(bool(item["exact"]))
            ats.append(at)
            fails.append("failed" in item)
            embeds.append(False)
        done = pa.table(
            {
                "ord": pa.array(ords, pa.int64()),
                "exact": pa.array(exacts, pa.bool_()),
                "position": pa.array(ats, pa.int64()),
                "failed": pa.array(fails, pa.bool_()),
                "embeddings": pa.array(embeds, pa.bool_()),
            }
        )
        writer.register("done_batch", done)
        writer.execute(f"INSERT INTO {results} SELECT * FROM done_batch")
        writer.unregister("done_batch")
    writer.close()
    summary: dict[str, Any] = {
        "pairs": n,
        # Over every pair: the same answer, or the same failure (status, ending, error and bytes), on both sides.
        "exact_match_rate": counts["exact"] / n if n else None,
        # The pairs whose outputs are compared, no side failed: what every figure of the outputs is over.
        "outputs_compared": compared,
        "outputs_differ": differ,
        "failed": failed,
        # The first ``top`` of those pairs by id, each side's failure or null, and how many more there are.
        "failed_pairs": failed_pairs,
        "failed_pairs_left_out": failed["pairs"] - len(failed_pairs),
        "similarity_mean": similarity_sum.mean() if similarity_sum.n else None,
        "first_divergence_median": _median(con, results),
        "first_divergence_histogram": dict(sorted(histogram.items())),
        "first_divergence_units": dict(units),  # of the positions above: by token (whose ids) or character
        "counts": dict(counts),
        # Per method and path: how many pairs had a body on each side that its API adapter could read.
        "readable": {
            path: {
                k: c[k]
                for k in (
                    "pairs",
                    "read_both",
                    "unreadable_a",
                    "unreadable_b",
                    "error_body_unread_a",
                    "error_body_unread_b",
                    "not_compared",
                    "not_in_file",
                    "too_large",
                    "response_not_kept",
                    "partly_unreadable",
                )
            }
            for path, c in readability.items()
        },
    }
    if kl["model"].n or kl["post_sampling"].n or kl_not_comparable:
        # The headline figures over the model's own logprobs only: null, not 0, where no pair has them.
        summary["logprobs"] = kl["model"].figures()
        if kl["post_sampling"].n:  # the pairs whose KL moves with top_k/top_p as well as the model, apart
            summary["logprobs"]["post_sampling"] = kl["post_sampling"].figures()
        if kl_not_comparable:
            summary["logprobs"]["not_comparable"] = {f"{side}_post_sampling": n for side, n in sorted(kl_not_comparable.items())}
    summary["most_divergent"] = _most_divergent(worst.items())
    if (embeddings := embedded.result()) is not None:
        summary["embeddings"] = embeddings  # the pairs of embeddings answers, apart from the text pairs above
    if (media := made.result()) is not None:
        summary["media"] = media  # the pairs of image, video and speech answers: byte-identical or not
    if metrics is not None:
        failed["not_generation"] = _not_generation(con, results, pairs.name, *metrics)
    if exact is not None:
        con.execute(f"CREATE OR REPLACE VIEW {exact} AS SELECT ord, exact, embeddings FROM {results}")
    return summary


def _in_order(con: Any, folder: Path, a: str, b: str, pairs: PairTable, batch: int) -> Iterator[pa.RecordBatch]:
    """Each pair's ``ord``, both sides' summaries (``sa``, ``sb``) and enrichments (``ea``, ``eb``),
    ``batch`` pairs at a time in pair order: each side written by range of ``ord`` to ``folder`` in
    a streamed pass, then read back a range at a time and sorted there (see the module's docstring)."""
    if not pairs.pairs:
        return
    total = sum(
        con.execute(f"SELECT coalesce(sum({size}), 0) FROM {table}").fetchall()[0][0]
        for table, size in (
            (f"{a}_x", "octet_length(summary)"),
            (f"{b}_x", "octet_length(summary)"),
            (f"{a}_e", "list_sum(list_transform(enrichment, lambda f: octet_length(f)))"),  # its fields' blobs
            (f"{b}_e", "list_sum(list_transform(enrichment, lambda f: octet_length(f)))"),
        )
    )
    ranges = max(1, min(pairs.pairs, -(-total // BUCKET_BYTES)))
    folder.mkdir(parents=True, exist_ok=True)
    # Each writing thread keeps up to this many rows before it writes them out (524,288 by default:
    # more than a small buffer holds; a million pairs then failed in 64 MB, and pass with this).
    con.execute(f"SET partitioned_write_flush_threshold = {FLUSH_ROWS}")
    bucket = f"p.ord * {ranges} // {pairs.pairs} AS bucket"
    # One join a step, each spilled on its own: as one query (four joins, both sides' summaries),
    # ten million pairs failed in 256 MB; like this they pass.
    for side, query in (
        ("a", f"SELECT p.ord, {bucket}, x.summary AS s FROM {a}_x x JOIN {pairs.name} p ON p.a_ord = x.ord"),
        ("b", f"SELECT p.ord, {bucket}, x.summary AS s FROM {b}_x x JOIN {pairs.name} p ON p.b_ord = x.ord"),
        (
            "e",
            f"SELECT p.ord, {bucket}, ea.enrichment AS ea, eb.enrichment AS eb FROM {pairs.name} p "
            f"LEFT JOIN {a}_e ea ON ea.exchange_id = p.a_id LEFT JOIN {b}_e eb ON eb.exchange_id = p.b_id "
            "WHERE ea.enrichment IS NOT NULL OR eb.enrichment IS NOT NULL",
        ),
    ):
        target = "'" + str(folder / side).replace("'", "''") + "'"
        con.execute(f"COPY ({query}) TO {target} (FORMAT parquet, PARTITION_BY (bucket), OVERWRITE_OR_IGNORE)")
    try:
        for k in range(ranges):
            yield from _range(folder, k, batch)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _range(folder: Path, k: int, batch: int) -> Iterator[pa.RecordBatch]:
    """Range ``k`` of the pairs, sorted: ``ord, sa, sb, ea, eb`` (a pair without enrichments: nulls)."""
    sa, sb, e = (_read(folder / side / f"bucket={k}") for side in "abe")
    if sa is None and sb is None:
        return
    if sa is None or sb is None or not sa.column("ord").equals(sb.column("ord")):
        raise AssertionError(f"pairs of range {k} without both sides")  # each pair has both: inner joins on it
    ea = eb = pa.nulls(sa.num_rows, pa.list_(pa.binary()))
    if e is not None and e.num_rows:  # the enriched pairs only: each pair's place among them, or null
        at = pc.index_in(sa.column("ord"), value_set=e.column("ord"))
        ea, eb = pc.take(e.column("ea"), at), pc.take(e.column("eb"), at)
    rows = pa.table({"ord": sa.column("ord"), "sa": sa.column("s"), "sb": sb.column("s"), "ea": ea, "eb": eb})
    yield from rows.to_batches(batch)


def _read(part: Path) -> pa.Table | None:
    """A range's rows of one side, sorted by ``ord``; None when it has none."""
    return pq.read_table(part).sort_by("ord") if part.exists() else None


def position_unit(d: dict[str, Any]) -> str:
    """What the median and histogram of first divergence positions count, in words: a position is a
    token's where both sides' ids are known, else a character's, so a figure with no unit can't be read."""
    units = d.get("first_divergence_units") or {}
    if len(units) == 1:
        return {"token (engine ids)": "tokens, engine ids", "token (re-tokenized)": "tokens, re-tokenized"}.get(
            next(iter(units)), "characters"
        )
    return "mixed units: " + ", ".join(f"{unit} ×{n}" for unit, n in units.items()) if units else "no pair placed"


def _not_generation(con: Any, results: str, pairs: str, ma: str, mb: str) -> int:
    """How many pairs a side failed are of no generation request on a side (a chat request with no
    messages): counted in ``failed``, which is over every pair an API reads, and in none of
    outcomes' pairs, which are speed's, the generation requests."""
    (n,) = con.execute(
        f"SELECT count(*) FROM {results} r JOIN {pairs} p ON p.ord = r.ord "
        f"JOIN {ma} ma ON ma.exchange_id = p.a_id JOIN {mb} mb ON mb.exchange_id = p.b_id "
        "WHERE r.failed AND NOT (coalesce(ma.generation, false) AND coalesce(mb.generation, false))"
    ).fetchall()[0]
    return int(n)


def _median(con: Any, results: str) -> float | int | None:
    """``statistics.median`` of the first divergence positions, picked from the sorted column in DuckDB."""
    m = con.execute(f"SELECT count(position) FROM {results}").fetchall()[0][0]
    if not m:
        return None
    middle = [
        v
        for (v,) in con.execute(
            f"SELECT position FROM {results} WHERE position IS NOT NULL ORDER BY position LIMIT 2 OFFSET ?", [(m - 1) // 2]
        ).fetchall()
    ]
    return middle[0] if m % 2 else (middle[0] + middle[1]) / 2


def _pair_divergence(
    sa: Summary,
    sb: Summary,
    ea: dict[str, Any] | None,
    eb: dict[str, Any] | None,
    counts: Counter[str],
    readability: dict[str, Counter[str]],
    extract: Grader | None,
    references: Mapping[str, str] | None,
) -> dict[str, Any]:
    """One pair's differences; adds to ``counts`` as it goes, since their first-seen order is the output's."""
    item: dict[str, Any] = {"a_id": sa.id, "b_id": sb.id, "path": sa.path, "api": [sa.api, sb.api]}
    _count_readable(readability, sa, sb)
    if _unreadable(sa) or _unreadable(sb):
        # Nothing to compare is not agreement: two bodies no adapter read are never equal.
        counts["unreadable"] += 1
        item["unreadable"] = [sa.parse_error if _unreadable(sa) else None, sb.parse_error if _unreadable(sb) else None]
    if sa.error_body is not None or sb.error_body is not None:
        # An error status whose body is no API's (a 404 for a path the engine doesn't serve): an
        # error, compared as two errors are, by status, ending and (here) the body's bytes.
        counts["error_body_unread"] += 1
        item["error_body_unread"] = [sa.error_body is not None, sb.error_body is not None]
    same_text = (
        sa.text == sb.text
        and sa.reasoning == sb.reasoning
        and sa.refusal == sb.refusal
        and sa.audio == sb.audio
        and sa.error_message == sb.error_message
    )
    tools = tool_call_diff(sa.tool_calls, sb.tool_calls)
    # A stream cut short (reset, timeout, or closed before its end marker) is not the answer it began,
    # even where its text so far is; nor is an answer that stopped for another reason (length, a filter).
    same_ending = (
        sa.status == sb.status
        and sa.end == sb.end
        and _whole(sa) == _whole(sb)
        and _finishes(sa) == _finishes(sb)
        and not _stops_differ(sa.stop_sequence, sb.stop_sequence)
        and not _stop_reasons_differ(sa.stop_reason, sb.stop_reason)
        and not _stop_reasons_differ(sa.matched_stop, sb.matched_stop)
        and sa.stop_details == sb.stop_details
    )
    # What else the answer holds: encrypted reasoning (counted), the other answers n > 1 asked for,
    # and which of its answers carry logprobs (an engine that dropped the logprobs asked for).
    # What the server's tools gave back (a search's results, code's output, an image): not the
    # model's words, yet what the client received.
    same_rest = (
        sa.encrypted_reasoning == sb.encrypted_reasoning
        and sa.citations == sb.citations
        and sa.tool_results == sb.tool_results
        and sa.others == sb.others
        and sa.layout == sb.layout
        and _same_choices(sa.choices, sb.choices)
        and logprob_choices(sa) == logprob_choices(sb)
    )
    # What the reading could not tell apart: payloads that are not JSON, bytes that are not UTF-8
    # (each read as U+FFFD), data after the end marker. Equal only where those bytes are.
    same_bytes = (
        sa.unparsed == sb.unparsed
        and sa.invalid_utf8 == sb.invalid_utf8
        and sa.after_end == sb.after_end
        and sa.error_body == sb.error_body
    )
    item["exact"] = (
        not _unreadable(sa) and not _unreadable(sb) and same_text and tools["equal"] and same_ending and same_rest and same_bytes
    )
    counts["exact"] += item["exact"]
    failed = [_failed(sa), _failed(sb)]
    if any(failed):
        # No answer on a side to compare with the other's (an error, no response, a stream cut):
        # exact where both failed alike, else no divergence of the outputs, but counted apart.
        item["failed"] = failed
        if extract is not None and (reference := _known(sa, sb, references)) is not None:
            item["reference"] = reference
            counts["known_unanswered"] += 1  # no wrong answer either
        return item
    # The whole output, tool calls, a reported error and other choices included: what differs there is a divergence too.
    oa, ob = _whole_output(sa), _whole_output(sb)
    at, unit = _first_divergence(sa, sb, ea, eb, oa, ob)
    item["first_divergence"] = {"at": at, "unit": unit}
    # Similarity of outputs needs two outputs: an unreadable side scores 0.
    item["answers_compared"] = sa.readable and sb.readable
    item["similarity"] = similarity(oa, ob) if item["answers_compared"] else 0.0
    _count_changes(item, counts, sa, sb, tools)
    if extract is not None:
        _count_answers(item, counts, sa, sb, extract, references)
    both = bool(sa.logprobs and sb.logprobs) or bool(sa.choice_logprobs.keys() & sb.choice_logprobs.keys())
    if both and sa.post_sampling != sb.post_sampling:  # two different things: no KL of them
        item["kl_not_comparable"] = "a" if sa.post_sampling else "b"
    elif kl := _logprob_kl(sa, sb, at, unit):
        item["kl"] = {**kl, "post_sampling": True} if sa.post_sampling else kl
    item["text"] = [sa.text, sb.text]
    if oa != sa.text or ob != sb.text:
        item["output"] = [oa.replace(PART, "\n"), ob.replace(PART, "\n")]  # what the diff shows
    return item


def _unreadable(s: Summary) -> bool:
    """A body no adapter read that is not an error status's (``Summary.error_body``): an answer unknown."""
    return not s.readable and s.error_body is None


def _failed(s: Summary) -> bool:
    """The side gave no answer, as speed and known answers judge it (``_answered``, the metrics' ok):
    an error status, an error its body reports, no response at all, a stream cut short or unfinished.
    A body no adapter read is no failure: its answer is unknown (``_unreadable``, counted as such)."""
    return not _answered(s) and not _unreadable(s)


#: How the pairs that a side failed are counted (``failed`` of the divergence): A's side alone, B's
#: alone, both; of those, both failed alike (an exact match) or otherwise.
FAILED_KEYS = ("pairs", "a_only", "b_only", "both", "both_same", "both_differ")


def _count_failed(failed: dict[str, int], item: dict[str, Any]) -> None:
    fa, fb = item["failed"]
    failed["pairs"] += 1
    if fa and fb:
        failed["both"] += 1
        failed["both_same" if item["exact"] else "both_differ"] += 1
    else:
        failed["a_only" if fa else "b_only"] += 1


def _finishes(s: Summary) -> tuple[Any, ...]:
    """How the answer ended as the engine said it: the reason, in its words, and every one it said
    (``_worded``)."""
    calls = s.finish_reason == "tool_calls"
    raw = s.finish_reason_raw and _worded(s.finish_reason_raw, calls)
    return s.finish_reason, raw, finish_words([_worded(w, calls) for w in s.finish_reasons])


def _at_limit_against_length(x: Summary, y: Summary) -> bool:
    """``x`` said completed with its request's max_output_tokens of output where ``y`` said length."""
    return x.completed_at_limit is not None and y.finish_reason == "length"


def _worded(word: str, calls: bool) -> str:
    """An engine's word for how its answer ended, its "stop" of an answer that calls a tool read as
    the "tool_calls" other engines say of the same answer (``Chat.finish``): OpenAI's forced
    ``tool_choice``, older vLLM, Ollama. The engine's wording, not another ending of the answer;
    other words one common reason covers (Anthropic's end_turn, stop_sequence) stay apart: those
    are other endings."""
    return "tool_calls" if word == "stop" and calls else word


def _whole_output(s: Summary) -> str:
    """``output_text`` of the answer, then of each other choice (``choice 1: ...``), ``PART`` between."""
    first = output_text(
        s.reasoning, s.text, s.tool_calls, s.error_message, s.refusal, s.audio, s.citations, s.tool_results, s.others
    )
    if not s.choices:
        return first
    rest = (
        f"choice {c['index']}: "
        + output_text(
            c["reasoning"], c["text"], c["tool_calls"], None, c["refusal"], c["audio"], c["citations"], c["tool_results"]
        )
        for c in s.choices
    )
    return PART.join((first, *rest))


def _same_choices(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Whether the choices other than the first are the same answers, as the first is judged."""
    keys = ("index", "text", "reasoning", "refusal", "audio", "citations", "tool_results")
    return len(a) == len(b) and all(
        [x[k] for k in keys] == [y[k] for k in keys]
        and _choice_finish(x) == _choice_finish(y)
        and tool_call_diff(x["tool_calls"], y["tool_calls"])["equal"]
        and not _stops_differ(x["stop_sequence"], y["stop_sequence"])
        and not _stop_reasons_differ(x["stop_reason"], y["stop_reason"])
        and not _stop_reasons_differ(x["matched_stop"], y["matched_stop"])
        for x, y in zip(a, b, strict=True)
    )


def logprob_choices(s: Summary) -> list[int]:
    """The indexes of the answer's choices that carry logprobs (0 the first): logprobs the client
    asked for and one engine sent while the other sent none (or sent them for other choices) are
    part of the answer its client got, so two such answers are no exact match, whatever their text."""
    return ([0] if s.logprobs else []) + sorted(s.choice_logprobs)


def _choice_finish(c: dict[str, Any]) -> str | None:
    """A choice's finish reason as ``_finishes`` reads the first's (``_worded``)."""
    word = c["finish_reason"]
    return _worded(word, bool(c["tool_calls"])) if isinstance(word, str) else word


def _stops_differ(a: str | None, b: str | None) -> bool:
    """Stopped at another of the request's stop sequences. Only where both engines say which: one
    that names none (llama.cpp's OpenAI routes, Ollama) is no evidence that it stopped elsewhere."""
    return a is not None and b is not None and a != b


def _stop_reasons_differ(a: str | None, b: str | None) -> bool:
    """vLLM's ``stop_reason`` (as JSON) differs where both answers carry it: a stop string against
    null (an end of sequence) is another ending with the same finish reason. An answer without the
    key (another engine) says nothing of it. So does SGLang's ``matched_stop``, each compared only
    with its own: SGLang names the end-of-sequence token where vLLM says null."""
    return a is not None and b is not None and a != b


def _said(value: str | None) -> Any:
    """A value kept as JSON, as it was sent (``"###"``, ``106``, None for null)."""
    try:
        return json.loads(value) if value is not None else None
    except ValueError:
        return value


def _path_of(s: Summary) -> str:
    return f"{s.method} {s.path.split('?')[0]}"


def _count_readable(readability: dict[str, Counter[str]], sa: Summary, sb: Summary) -> None:
    """Per method and path, so that a body no adapter reads shows where it came from."""
    read = readability.setdefault(_path_of(sa), Counter())
    read["pairs"] += 1
    read["read_both"] += sa.readable and sb.readable
    read["unreadable_a"] += _unreadable(sa)
    read["unreadable_b"] += _unreadable(sb)
    read["error_body_unread_a"] += sa.error_body is not None
    read["error_body_unread_b"] += sb.error_body is not None
    read["partly_unreadable"] += bool(sa.unparsed or sb.unparsed)


def _first_divergence(
    sa: Summary, sb: Summary, ea: dict[str, Any] | None, eb: dict[str, Any] | None, oa: str, ob: str
) -> tuple[int | None, str]:
    """In the finest unit both sides have: the engine's token ids, else re-tokenized ids, else
    characters of the whole outputs ``oa``, ``ob`` (``output_text``). None where the outputs are
    equal (other token ids for the same text are no divergence of the answer); characters where
    the ids agree and the outputs don't (ids are of the text: not of tool calls, reasoning, errors)."""
    if oa == ob:
        return None, "character"
    out_a = (ea or {}).get("output_tokens") or {}
    out_b = (eb or {}).get("output_tokens") or {}
    if sa.token_ids and sb.token_ids and (at := first_divergence(sa.token_ids, sb.token_ids)) is not None:
        return at, "token (engine ids)"
    ids_a, ids_b = out_a.get("ids"), out_b.get("ids")
    if ids_a is not None and ids_b is not None and (at := first_divergence(ids_a, ids_b)) is not None:
        return at, "token (re-tokenized)"
    return first_divergence(oa, ob), "character"


def _count_changes(item: dict[str, Any], counts: Counter[str], sa: Summary, sb: Summary, tools: dict[str, Any]) -> None:
    """What changed besides the text: finish reason, tool calls, where the text landed, status and
    ending, the stop sequence, citations, what server tools gave back, encrypted reasoning, the other
    choices, and what could not be read alike."""
    if _finishes(sa) != _finishes(sb):
        counts["finish_reason_changed"] += 1
        item["finish_reason"] = [sa.finish_reason, sb.finish_reason]
        item["finish_reason_raw"] = [sa.finish_reason_raw, sb.finish_reason_raw]
        if _at_limit_against_length(sa, sb) or _at_limit_against_length(sb, sa):
            # "completed" at the limit against "length": maybe only llama-server's wording (completed_at_limit.py)
            counts["finish_completed_at_limit"] += 1
            item["completed_at_limit"] = [sa.completed_at_limit, sb.completed_at_limit]
        if sa.finish_reasons != sb.finish_reasons:
            item["finish_reasons"] = [sa.finish_reasons, sb.finish_reasons]
    if sa.tool_calls or sb.tool_calls:
        counts["with_tool_calls"] += 1
        counts["tool_calls_differ"] += not tools["equal"]
        item["tool_calls"] = tools
    landed_a = "reasoning" if sa.reasoning and not sa.text else "content"
    landed_b = "reasoning" if sb.reasoning and not sb.text else "content"
    if landed_a != landed_b:
        counts["text_moved"] += 1
        item["landed"] = [landed_a, landed_b]
    if sa.status != sb.status or sa.end != sb.end:
        counts["status_or_end_differs"] += 1
        item["status"] = [[sa.status, sa.end, sa.error], [sb.status, sb.end, sb.error]]
    if _whole(sa) != _whole(sb):
        counts["end_marker_differs"] += 1  # a stream closed without its [DONE] (message_stop, "done": true), the other whole
        item["stream_done"] = [sa.done if sa.streamed else None, sb.done if sb.streamed else None]  # None: sent whole
    if _stops_differ(sa.stop_sequence, sb.stop_sequence):
        counts["stop_sequence_differs"] += 1
        item["stop_sequence"] = [sa.stop_sequence, sb.stop_sequence]
    elif _stop_reasons_differ(sa.stop_reason, sb.stop_reason):  # not said twice: a string that differs is above
        counts["stop_reason_differs"] += 1
        item["stop_reason"] = [_said(sa.stop_reason), _said(sb.stop_reason)]
    elif _stop_reasons_differ(sa.matched_stop, sb.matched_stop):
        counts["matched_stop_differs"] += 1
        item["matched_stop"] = [_said(sa.matched_stop), _said(sb.matched_stop)]
    if sa.stop_details != sb.stop_details:
        counts["stop_details_differ"] += 1  # a refusal's category (Anthropic's), or details on one side only
        item["stop_details"] = [sa.stop_details, sb.stop_details]
    # What the API did to the input before the model read it (the effective input), and how the server
    # served the answer (Bedrock's trace, latency tier): config or outcome facts, not the answer.
    for fact, stem, a_said, b_said, differ in (
        ("input_changes", "input_changed", sa.input_changes, sb.input_changes, "input_changes_differ"),
        ("served", "served", sa.served, sb.served, "served_differ"),
    ):
        if a_said is not None:
            counts[f"{stem}_a"] += 1
        if b_said is not None:
            counts[f"{stem}_b"] += 1
        if a_said != b_said:
            counts[differ] += 1
            item[fact] = [a_said, b_said]
    if sa.citations != sb.citations:
        counts["citations_differ"] += 1
    if sa.tool_results or sb.tool_results:
        counts["with_tool_results"] += 1
        if sa.tool_results != sb.tool_results:
            counts["tool_results_differ"] += 1
            item["tool_results"] = [len(sa.tool_results), len(sb.tool_results)]
    if sa.others or sb.others:
        counts["with_other_items"] += 1
        if sa.others != sb.others:
            counts["other_items_differ"] += 1
            item["other_items"] = [len(sa.others), len(sb.others)]
    if sa.layout != sb.layout:
        counts["layout_differs"] += 1  # the same words in other blocks, or a source cited by another one
        item["layout"] = [sa.layout, sb.layout]
    _count_unread(item, counts, sa, sb)
    if sa.encrypted_reasoning != sb.encrypted_reasoning:
        counts["encrypted_reasoning_differs"] += 1
        item["encrypted_reasoning"] = [sa.encrypted_reasoning, sb.encrypted_reasoning]
    if (carried_a := logprob_choices(sa)) != (carried_b := logprob_choices(sb)):
        counts["logprobs_one_side"] += 1  # an answer with logprobs against the same answer without
        item["logprob_choices"] = [carried_a, carried_b]
    if sa.choices or sb.choices:
        counts["with_other_choices"] += 1
        if not _same_choices(sa.choices, sb.choices):
            counts["other_choices_differ"] += 1
            item["choices"] = [1 + len(sa.choices), 1 + len(sb.choices)]


def _count_unread(item: dict[str, Any], counts: Counter[str], sa: Summary, sb: Summary) -> None:
    """What the reading left unread on either side: payloads that are not JSON (``partly_unreadable``),
    bytes that are not UTF-8, data after the end marker."""
    if sa.unparsed or sb.unparsed:
        counts["partly_unreadable"] += 1
        item["unparsed"] = [(sa.unparsed or (0, b""))[0], (sb.unparsed or (0, b""))[0]]
    if sa.invalid_utf8 or sb.invalid_utf8:
        counts["not_utf8"] += 1
        item["not_utf8"] = [[b.hex() for b in sa.invalid_utf8], [b.hex() for b in sb.invalid_utf8]]
    if sa.after_end or sb.after_end:
        counts["data_after_end_marker"] += 1
        item["after_end_marker"] = [sa.after_end is not None, sb.after_end is not None]


_FLIPS = {
    (True, True): "right_both",
    (False, False): "wrong_both",
    (True, False): "right_to_wrong",
    (False, True): "wrong_to_right",
}


def _count_answers(
    item: dict[str, Any],
    counts: Counter[str],
    sa: Summary,
    sb: Summary,
    extract: Grader,
    references: Mapping[str, str] | None,
) -> None:
    """Different words can carry the same answer: extracted answers, and flips against a known one.

    The known answer is read by the same grader ("3.50" is the number 3.5). A turn on which both
    sides only called tools their clients run is a step towards the answer, not one; a side that answered nothing (an
    error, a failed request) gave no wrong answer: such items are counted apart (``known_unanswered``), and so are
    a side's answer the grader read nothing in (``decides``: no number, letter, JSON value or match) is wrong, and
    counted apart (``known_unread_a``, ``known_unread_b``): a side cut short before its answer is worse, not
    less counted.
    A reading or comparison the grader gave up on (math-verify's timeout) is no answer, and counted
    (``extract_timed_out``).
    """
    gave_up = extract.timed_out()
    read_a, read_b = extract.read(sa.text), extract.read(sb.text)
    item["answer"] = [extract.shown(read_a), extract.shown(read_b)]
    counts["answer_unchanged" if _same_answer(extract, read_a, read_b) else "answer_changed"] += 1
    reference = _known(sa, sb, references)
    if reference is not None:
        item["reference"] = reference
        if not (_answered(sa) and _answered(sb)):
            counts["known_unanswered"] += 1
        else:
            known = extract.known(reference)
            read = (extract.decides(read_a), extract.decides(read_b))
            counts[_FLIPS[(read[0] and extract.same(known, read_a), read[1] and extract.same(known, read_b))]] += 1
            if not all(read):  # graded wrong, and said: the grader read no answer in it
                item["unread"] = [not read[0], not read[1]]
                for side, was_read in zip("ab", read, strict=True):
                    if not was_read:
                        counts[f"known_unread_{side}"] += 1
    if extract.timed_out() > gave_up:
        counts["extract_timed_out"] += extract.timed_out() - gave_up


def _known(sa: Summary, sb: Summary, references: Mapping[str, str] | None) -> str | None:
    """The pair's known answer, where it is scored: none on a turn where both sides only called
    tools their clients run (``_only_calls``)."""
    reference = (references or {}).get(sa.last_user or "")
    return None if reference is None or (_only_calls(sa) and _only_calls(sb)) else reference


def _same_answer(extract: Grader, a: Any, b: Any) -> bool:
    """A's answer and B's are one answer (A, the baseline, as the gold); two texts with nothing
    read in them are unchanged, as two equal readings are."""
    if extract.shown(a) is None and extract.shown(b) is None:
        return True
    return extract.same(a, b)


def _only_calls(s: Summary) -> bool:
    """Whether the answer is a step towards one: calls its client must make, and no text. Calls the
    API ran itself (``"server"``: Responses' built-in tools, Anthropic's search before its turn
    paused) are no step of the client's: an answer of only those is graded as it stands."""
    return any(not c.get("server") for c in s.tool_calls) and not s.text.strip()


def _whole(s: Summary) -> bool:
    """Whether the body held all of its answer as far as its framing tells: a stream that carried its
    end marker, or one JSON body (which carries none: streamed against sent whole, the same answer is
    equal, while a stream cut short is still not the whole answer)."""
    return s.done or not s.streamed


def _ok_status(s: Summary) -> bool:
    return isinstance(s.status, int) and 200 <= s.status < 300


def _ended(s: Summary) -> bool:
    """Not cut short: a client gone after the stream's end marker got the whole answer, as ``ok`` has it."""
    return s.end in (None, "complete") or (s.end == "client_disconnected" and s.done)


def _unfinished(s: Summary) -> bool:
    """A stream that said no finish reason: an answer the engine cut (the metrics' unfinished)."""
    return cut_short(
        status=s.status if isinstance(s.status, int) else None,
        generation=True,  # an API that says a finish reason (FINISHING_APIS) is asked for tokens
        streamed=s.streamed,
        api=s.api,
        stream_done=s.done,
        finish_reason=s.finish_reason,
        choices_unfinished=sum(c.get("finish_reason") is None for c in s.choices),
        end=s.end,
        readable=s.readable,
        error_message=s.error_message,
    )


def _answered(s: Summary) -> bool:
    """Whether the engine gave an answer at all: a body read, no error, a success status, not cut short."""
    return s.readable and s.error_message is None and _ok_status(s) and _ended(s) and not _unfinished(s)


def failure_of(s: Summary) -> str | None:
    """Why a side failed, in compare_outcomes.failure's words (``status 500``, ``unfinished``), so a
    failed pair listed by id says what outcomes counted it as; None where it did not fail."""
    if not _failed(s):
        return None
    if s.status is None:
        return f"no response ({s.end or 'unknown'})"
    if not _ok_status(s):
        return f"status {s.status}"
    if not _ended(s):
        return f"cut short ({s.end})"
    if s.error_message is not None:
        return f"an error in a {s.status} body"
    return "unfinished"


def _logprob_kl(sa: Summary, sb: Summary, at: int | None, unit: str) -> dict[str, Any] | None:
    """KL over the positions before the first divergence, when both engines reported logprobs: by
    token where it is known by token, else up to the first position whose chosen tokens differ.
    n > 1: each choice is an answer, taken against the other side's choice of its index up to the
    first position whose chosen tokens differ, and the pair's figures are over every choice's
    positions pooled (``choices``: how many gave any, where more than one did)."""
    parts = []
    lp_a, lp_b = sa.logprobs, sb.logprobs
    if lp_a and lp_b:
        if unit == "character":
            upto = shared_positions(lp_a, lp_b)
        else:
            upto = min(len(lp_a), len(lp_b)) if at is None else at
        parts.append(kl_shared_prefix([top for _, top in lp_a], [top for _, top in lp_b], upto))
    for k in sorted(sa.choice_logprobs.keys() & sb.choice_logprobs.keys()):
        a, b = sa.choice_logprobs[k], sb.choice_logprobs[k]
        parts.append(kl_shared_prefix([top for _, top in a], [top for _, top in b], shared_positions(a, b)))
    return _pooled([p for p in parts if p is not None])


def _pooled(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Choices' KL figures as one over all their positions; one choice's as it is."""
    if len(parts) <= 1:
        return parts[0] if parts else None
    n = sum(p["positions"] for p in parts)
    return {
        "kl_mean": sum(p["kl_mean"] * p["positions"] for p in parts) / n,
        "kl_max": max(p["kl_max"] for p in parts),
        "top1_agreement": sum(p["top1_agreement"] * p["positions"] for p in parts) / n,
        "positions": n,
        "choices": len(parts),
    }


def _most_divergent(worst: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The least similar inexact pairs, each with an inline diff (computed for those only: it is slow)."""
    for p in worst:
        p["diff"] = text_diff(*p.pop("output", p["text"]))
    return worst
