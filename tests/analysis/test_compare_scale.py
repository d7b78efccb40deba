"""compare in bounded memory: pairing in DuckDB gives ``pair``'s pairs, and divergence over many
batches gives what one batch gives, equal to the last digit."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from infertap.analysis import paired_divergence, summaries
from infertap.analysis.compare import compare
from infertap.analysis.pairing import pair, pair_in
from infertap.analysis.summaries import EXCHANGE_SCHEMA, request_key
from tests.helpers import write_capture


def _keys(records: list[dict]) -> pa.Table:
    rows = [
        (i, x["id"], x.get("source_id") or None, repr(x.get("repeat", 0)), request_key(x), b"") for i, x in enumerate(records)
    ]
    return pa.Table.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(zip(*rows, strict=True), EXCHANGE_SCHEMA, strict=True)], schema=EXCHANGE_SCHEMA
    )


def _in_sql(a: list[dict], b: list[dict]) -> tuple[list[tuple[str, str]], dict, int, int]:
    con = duckdb.connect()
    con.register("ka", _keys(a))
    con.register("kb", _keys(b))
    table = pair_in(con, "ka", "kb", "pairs")
    rows = con.execute("SELECT a_id, b_id FROM pairs ORDER BY ord").fetchall()
    assert [o for (o,) in con.execute("SELECT ord FROM pairs ORDER BY a_ord").fetchall()] == list(range(len(rows)))
    return rows, table.by, table.unpaired_a, table.unpaired_b


def _by_place(a: list[dict], b: list[dict], p) -> list[tuple[int, int]]:
    where_a, where_b = {id(x): i for i, x in enumerate(a)}, {id(y): j for j, y in enumerate(b)}
    return [(where_a[id(x)], where_b[id(y)]) for x, y in p.pairs]


def _in_sql_by_place(a: list[dict], b: list[dict]) -> list[tuple[int, int]]:
    con = duckdb.connect()
    con.register("ka", _keys(a))
    con.register("kb", _keys(b))
    pair_in(con, "ka", "kb", "pairs")
    return con.execute("SELECT a_ord, b_ord FROM pairs ORDER BY ord").fetchall()


def test_two_exchanges_with_one_id_are_two_exchanges():
    # A copied capture: A's two "x" are the same request twice; B answers it twice and replays one.
    a = [_x("x", b"1"), _x("x", b"1"), _x("y", b"2")]
    b = [_x("r", b"1", source_id="x"), _x("s", b"1"), _x("s", b"2")]
    p = pair(a, b)
    # The replay link takes the last "x"; the first "x" still pairs by its identical request, and
    # B's two "s" are two exchanges too (the second pairs with "y").
    assert _by_place(a, b, p) == [(0, 1), (1, 0), (2, 2)] == _in_sql_by_place(a, b)
    assert p.by == {"replay link": 1, "shared source": 0, "identical request": 2}
    assert not p.unpaired_a and not p.unpaired_b


def _x(i: str, body: bytes, **kw) -> dict:
    return {"id": i, "method": "POST", "path": "/v1/chat/completions", "request_body": body, **kw}


def test_pairing_in_sql_follows_the_rules_in_order():
    a = [_x("a1", b"1"), _x("a2", b"2"), _x("a3", b"3"), _x("a4", b"4"), _x("a5", b"5")]
    b = [_x("b1", b"x", source_id="a2"), _x("b2", b"1"), _x("b3", b"3"), _x("b4", b"3"), _x("b9", b"9")]
    rows, by, ua, ub = _in_sql(a, b)
    assert rows == [("a1", "b2"), ("a2", "b1"), ("a3", "b3")]
    assert by == {"replay link": 1, "shared source": 0, "identical request": 2} and (ua, ub) == (2, 2)


@pytest.mark.parametrize("seed", range(25))
def test_pairing_in_sql_gives_the_pairs_pair_gives(seed):
    """Random runs mixing replay links both ways, shared sources with repeats, repeated identical
    requests (bodies from a small set, so that queues form) and ids used twice (a copied capture):
    the same pairs, counts and leftovers."""
    rng = random.Random(seed)

    def run(prefix: str, n: int, other: str, m: int) -> list[dict]:
        out = []
        for i in range(n):
            kw: dict = {}
            roll = rng.random()
            if roll < 0.2:
                kw["source_id"] = f"{other}{rng.randrange(m)}"  # a replay of the other run's exchange
            elif roll < 0.45:
                kw["source_id"] = f"s{rng.randrange(4)}"  # both replay the same source
                if rng.random() < 0.5:
                    kw["repeat"] = rng.randrange(2)
            body = b"q%d" % rng.randrange(5)
            xid = f"{prefix}{rng.randrange(i)}" if i and rng.random() < 0.15 else f"{prefix}{i}"  # an id seen before
            out.append(_x(xid, body, **kw) | ({"path": "/v1/completions"} if rng.random() < 0.1 else {}))
        return out

    n, m = rng.randrange(1, 40), rng.randrange(1, 40)
    a, b = run("a", n, "b", m), run("b", m, "a", n)
    expected = pair(a, b)
    rows, by, ua, ub = _in_sql(a, b)
    assert rows == [(x["id"], y["id"]) for x, y in expected.pairs]
    assert _by_place(a, b, expected) == _in_sql_by_place(a, b)  # each pair as the exchanges themselves, not their ids
    assert by == expected.by and (ua, ub) == (len(expected.unpaired_a), len(expected.unpaired_b))


def _chat(i: int) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": f"question {i % 7}"}], "temperature": 0}


def _streamed(text: str, tool: str | None = None) -> list[bytes]:
    deltas = [{"content": text[k : k + 3]} for k in range(0, len(text), 3)]
    if tool:
        deltas.append({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": tool, "arguments": '{"x": 1}'}}]})
    events = [{"choices": [{"index": 0, "delta": d}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if tool else "stop"}]})
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]


def _runs(tmp_path, n: int = 23):
    """Two runs of repeated requests (7 distinct prompts, so that pairing queues), most answers
    differing somewhere, some equal, some with tool calls, one an error; enrichments on some."""
    texts_a = [f"Said once {i}. The answer is {i % 5}." for i in range(n)]
    texts_b = [
        t if i % 4 == 0 else f"Said once {i}. The answer is {i % 5 + i % 2}." + " More." * (i % 3) for i, t in enumerate(texts_a)
    ]
    xs_a, xs_b = [], []
    for i in range(n):
        tool = "lookup" if i % 6 == 0 else None
        xs_a.append(
            {
                "body": _chat(i),
                "chunks": _streamed(texts_a[i], tool),
                "content_type": "text/event-stream",
                "duration_ns": 1_000_000 + 37_000 * i,
            }
        )
        xs_b.append(
            {
                "body": _chat(i),
                "chunks": _streamed(texts_b[i], "other" if i % 12 == 0 else tool),
                "content_type": "text/event-stream",
                "duration_ns": 2_000_000 + 53_000 * (i % 9),
                "status": 500 if i == 5 else 200,
            }
        )

    def enrich(i: int, penalty: float) -> dict:
        ids = [1, 2, 3 + i % 2]
        return {
            "exchange_id": f"src-{i}",
            "settings": {"repeat_penalty": {"value": penalty, "source": "engine_default"}},
            "prompt_tokens": {"ids": ids if penalty > 1 else [1, *ids], "count": 3, "source": "test"},
            "output_tokens": {"ids": [i, i + 1, 7] if i % 3 else None},
        }

    write_capture(tmp_path / "a", xs_a, enrichments=[enrich(i, 1.1) for i in range(0, n, 2)])
    write_capture(tmp_path / "b", xs_b, enrichments=[enrich(i, 1.0 if i % 4 else 1.1) for i in range(0, n, 2)])
    return tmp_path / "a", tmp_path / "b"


def test_many_batches_give_what_one_batch_gives(tmp_path, monkeypatch):
    a, b = _runs(tmp_path)
    whole = compare(a, b, extract="number", top=6, baseline=a)
    monkeypatch.setattr(summaries, "BATCH_ROWS", 4)  # several row groups on disk too...
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "fresh-cache"))  # ...written afresh, not read from the cache
    made = []
    real_in_order = paired_divergence._in_order

    def counted(con, folder, *args):
        made.append(folder)
        for chunk in real_in_order(con, folder, *args):
            made.append(len(list(folder.glob("a/bucket=*"))))  # the ranges written
            yield chunk

    monkeypatch.setattr(paired_divergence, "_in_order", counted)
    monkeypatch.setattr(paired_divergence, "BUCKET_BYTES", 600)  # the pairs read back in several ranges, each sorted
    batched = compare(a, b, extract="number", top=6, baseline=a, batch=3)
    assert json.dumps(batched, default=str) == json.dumps(whole, default=str)  # keys in the same order too: pair order
    ranges = [n for n in made if isinstance(n, int)]
    assert max(ranges) > 3 and min(ranges) >= 1 and not any(f.exists() for f in made if isinstance(f, Path))
    d = whole["divergence"]
    # Not everything agrees: the answers that differ are seen as differing, in every batch.
    assert d["pairs"] == 23 and 0 < d["exact_match_rate"] < 0.5
    assert d["counts"]["answer_changed"] > 0 and d["failed"]["b_only"] == 1  # B's 500: counted apart from the outputs
    assert d["counts"]["tool_calls_differ"] == 2 and len(d["most_divergent"]) == 6
    sims = [p["similarity"] for p in d["most_divergent"]]
    assert sims == sorted(sims) and all(not p["exact"] and "diff" in p for p in d["most_divergent"])
    assert whole["baseline"]["divergence"]["exact_match_rate"] == 1.0  # A against itself
    assert whole["config"]["prompts"]["compared"] == 12 and whole["config"]["settings"][0]["exchanges"] == 6


def _same(x: dict, y: dict) -> bool:
    return json.dumps(x, sort_keys=True, default=str) == json.dumps(y, sort_keys=True, default=str)


def test_each_runs_summary_is_kept_in_its_cache_entry_and_read_back(tmp_path, monkeypatch):
    from infertap.analysis.cache import lookup

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a, b = _runs(tmp_path)
    first = compare(a, b, extract="number")
    kept = [lookup(x).folder / f"summary-v{summaries.SUMMARY_VERSION}" for x in (a, b)]
    assert all((k / "side.pickle").exists() and k.stat().st_mode & 0o077 == 0 for k in kept)  # owner-only

    def no_reading(*args, **kwargs):
        raise AssertionError("a kept summary was read from the capture again")

    with monkeypatch.context() as m:  # the second compare reads no response: it can't summarize at all
        m.setattr(summaries, "summarize", no_reading)
        assert _same(compare(a, b, extract="number"), first)

    # Damaged (a truncated file): summarized again, the same result.
    data = (kept[0] / "exchanges.parquet").read_bytes()
    (kept[0] / "exchanges.parquet").write_bytes(data[: len(data) // 2])
    assert _same(compare(a, b, extract="number"), first)
    assert (kept[0] / "exchanges.parquet").read_bytes() != data[: len(data) // 2]

    # A capture that changed (a second run appended): a new entry, summarized afresh.
    write_capture(a, [{"body": _chat(99), "chunks": _streamed("Late. The answer is 9."), "content_type": "text/event-stream"}])
    grown = compare(a, b, extract="number")
    assert grown["pairing"]["unpaired_a"] == first["pairing"]["unpaired_a"] + 1  # must differ: the new exchange is seen
    assert not kept[0].exists() and (lookup(a).folder / kept[0].name).exists()


def test_a_cache_entry_others_could_write_keeps_no_summary(tmp_path, monkeypatch):
    from infertap.analysis.cache import lookup

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a, b = _runs(tmp_path)
    first = compare(a, b, extract="number")
    entry = lookup(a)
    shutil.rmtree(entry.folder / f"summary-v{summaries.SUMMARY_VERSION}")
    entry.folder.chmod(0o775)  # group-writable: what is kept there could have been put there by another
    assert not entry.private() and lookup(b).private()
    assert _same(compare(a, b, extract="number"), first)
    assert not [p for p in entry.folder.iterdir() if p.name.startswith(("summary-", ".tmp-summary-"))]


def _bootstrap_in_python(a, b, *, rounds=1000, seed=0):
    """bootstrap_ratio as it was written first, one draw and one median at a time."""
    import statistics

    rng = random.Random(seed)
    if len(a) > 5000:
        keep = rng.sample(range(len(a)), 5000)
        a, b = [a[i] for i in keep], [b[i] for i in keep]
    n, ratios = len(a), []
    for _ in range(rounds):
        idx = [rng.randrange(n) for _ in range(n)]
        ma = statistics.median([a[i] for i in idx])
        if ma > 0:
            ratios.append(statistics.median([b[i] for i in idx]) / ma)
    ratios.sort()
    return ratios[int(0.025 * len(ratios))], ratios[min(len(ratios) - 1, int(0.975 * len(ratios)))]


@pytest.mark.parametrize("n", [2, 9, 10, 17, 64, 65, 1000, 4096, 5001, 12_345])
def test_the_bootstrap_draws_what_python_draws(n):
    from infertap.analysis.ratios import bootstrap_ratio, distribution

    rng = random.Random(n)
    a = [rng.lognormvariate(0, 1) for _ in range(n)]
    b = [x * rng.uniform(0.5, 2.5) for x in a]
    rounds = 1000 if n < 2000 else 60
    if n < 10:  # too few pairs for an interval that holds its 95%
        assert bootstrap_ratio(a, b, rounds=rounds, seed=n) is None
    else:
        assert bootstrap_ratio(a, b, rounds=rounds, seed=n) == _bootstrap_in_python(a, b, rounds=rounds, seed=n)
    import statistics

    from infertap.quantiles import quantile

    d = distribution(a)
    assert d["mean"] == statistics.fmean(a) and d["p99"] == quantile(sorted(a), 0.99) and d["n"] == n


def test_a_torn_run_is_compared_and_reported_and_a_corrupt_one_named(tmp_path):
    from infertap.capture.errors import CaptureCorruptError
    from infertap.capture.segments import segment_paths

    a, b = _runs(tmp_path, n=4)
    (seg,) = segment_paths(b)
    data = seg.read_bytes()
    seg.write_bytes(data[:-5])  # cut inside the footer's block: a torn tail, every exchange intact
    r = compare(a, b)
    assert r["pairing"]["pairs"] == 4 and r["a"]["torn"] == []
    (torn,) = r["b"]["torn"]
    assert str(seg) in torn and "torn tail" in torn
    corrupt = bytearray(data)
    corrupt[40] ^= 0xFF  # inside the first block, which has others after it
    seg.write_bytes(bytes(corrupt))
    with pytest.raises(CaptureCorruptError, match="corrupt capture data"):
        compare(a, b)


def test_a_duckdb_buffer_too_small_is_a_clear_error_and_the_environment_sets_it(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from infertap.analysis.errors import AnalysisError
    from infertap.cli import cli

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a, b = _runs(tmp_path)
    monkeypatch.setenv("INFERTAP_DUCKDB_MEMORY", "4MB")  # less than DuckDB needs for anything
    with pytest.raises(AnalysisError, match=r"DuckDB buffer of 4MB .*INFERTAP_DUCKDB_MEMORY=4GB"):
        compare(a, b, extract="number")
    said = CliRunner().invoke(cli, ["compare", str(a), str(b)])
    assert said.exit_code != 0 and "INFERTAP_DUCKDB_MEMORY" in said.output and "Traceback" not in said.output
    monkeypatch.setenv("INFERTAP_DUCKDB_MEMORY", "512MB")
    assert compare(a, b, extract="number")["pairing"]["pairs"] == 23


def test_exchanges_repeating_an_id_are_compared_as_themselves_and_said(tmp_path, monkeypatch):
    """A's three exchanges share one id (a segment copied in three times): each still pairs and
    measures as itself, as the decoded tables name them apart; B, the same requests with their own
    ids and the same timings, must then match A exactly, and only A is warned about."""
    from click.testing import CliRunner

    from infertap.cli import cli

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    xs = [{"body": _chat(i), "duration_ns": 2_000_000 * (i + 1)} for i in range(3)]
    write_capture(tmp_path / "a", [{**x, "id": "same"} for x in xs])
    write_capture(tmp_path / "b", xs)
    r = compare(tmp_path / "a", tmp_path / "b")
    assert r["pairing"]["pairs"] == 3 and r["pairing"]["by"]["identical request"] == 3
    e2e = next(row for row in r["speed"] if row["metric"] == "e2e")
    assert e2e["a"] == e2e["b"] and e2e["a"]["mean"] == 4.0  # each of A's copies measured as itself (2, 4, 6 ms)
    assert r["divergence"]["exact_match_rate"] == 1.0
    assert "2 exchanges carry the id of an earlier one" in r["a"]["repeated_ids"] and r["b"]["repeated_ids"] is None
    said = CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert said.exit_code == 0 and "carry the id of an earlier one" in said.output


def test_the_mean_is_exact_past_the_slices_it_is_summed_in():
    """distribution's mean is fsum over every value, fed a slice at a time: the same to the last bit
    as one fsum over them all, where a sum of slice sums (or numpy's) would not be."""
    import math

    from infertap.analysis.ratios import _SLICE, distribution

    rng = random.Random(3)
    values = [rng.choice([1e16, 1.0, -1e16, 3.3e-7, rng.uniform(0, 1e3)]) for _ in range(2 * _SLICE + 17)]
    exact = math.fsum(values) / len(values)
    assert distribution(values)["mean"] == exact
    per_slice = math.fsum(math.fsum(sorted(values)[i : i + _SLICE]) for i in range(0, len(values), _SLICE)) / len(values)
    assert per_slice != exact  # this data tells exact summation from a sum of partial sums


def test_the_scale_benchmark_compares_every_pair_it_builds_and_fails_where_it_did_not(tmp_path, monkeypatch):
    """bench.compare_scale's runs end each answer as an engine does, so that stats counts every one
    ok and compare times every pair; an empty comparison (the answers left out) fails it."""
    from bench import compare_scale

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a, b = tmp_path / "a", tmp_path / "b"
    compare_scale.build(a, 5, "The answer is 42.")
    compare_scale.build(b, 5, "The answer is 41.")
    stats = compare_scale._phase("stats", str(a), str(b))
    cmp = compare_scale._phase("compare", str(a), str(b))
    assert (stats["ok"], cmp["pairs"], cmp["timed"], cmp["answer_changed"]) == (5, 5, 5, 5)
    compare_scale.check(5, stats, cmp)  # the pairs built, compared
    with pytest.raises(SystemExit, match="compare timed 0, not 5"):
        compare_scale.check(5, {**stats, "ok": 0}, {**cmp, "timed": 0})


def test_the_embeddings_scale_benchmark_compares_every_vector_it_builds_and_fails_where_it_did_not(tmp_path, monkeypatch):
    """bench.compare_scale --embeddings: two runs' answers (JSON floats and base64 alike) are read and
    every pair's vectors differ; a run compared with itself differs in none, and fails the check."""
    from bench import compare_scale

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    a, b = tmp_path / "a", tmp_path / "b"
    compare_scale.build_embeddings(a, 6, 1, dimension=16, inputs=3)
    compare_scale.build_embeddings(b, 6, 2, dimension=16, inputs=3)
    cmp = compare_scale._phase("compare", str(a), str(b))
    assert (cmp["pairs"], cmp["embeddings_compared"], cmp["embeddings_differ"], cmp["vectors"]) == (6, 6, 6, 18)
    compare_scale.check_embeddings(6, 3, cmp)
    same = compare_scale._phase("compare", str(a), str(a))
    assert (same["embeddings_compared"], same["embeddings_differ"]) == (6, 0)
    with pytest.raises(SystemExit, match="embeddings_differ 0, not 6"):
        compare_scale.check_embeddings(6, 3, same)
