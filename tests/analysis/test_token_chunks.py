"""The token chunks and gaps the decode computes from a batch of events (analysis/token_chunks.py),
against the SQL the ``token_chunks`` and ``itl`` views ran over the events, in DuckDB, on the same
batch: every shape the SQL gives a meaning to, the decoder's and the ones it never writes."""

from __future__ import annotations

import random
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from infertap.analysis.schema import arrow_schema
from infertap.analysis.token_chunks import token_chunks
from tests.analysis_builders import ITL_FROM_EVENTS, TOKEN_CHUNKS_FROM_EVENTS

_COLUMNS = ("exchange_id", "chunk", "t_ns", "content", "reasoning", "tool_calls")


def _batch(rng: random.Random, exchanges: int, shuffled: bool) -> pa.Table:
    """Events of ``exchanges`` exchanges, each's together: several a chunk, text, reasoning, tool
    deltas or nothing, NULLs in every column the SQL reads, times past the recorded ones unknown,
    a chunk's events of differing times; ``shuffled``: an exchange's events out of chunk order."""
    rows: list[tuple[Any, ...]] = []
    for x in range(exchanges):
        events = []
        for chunk in range(rng.randrange(0, 8)):
            t = rng.choice([None, chunk * 1_000 + rng.randrange(0, 3) * 7])
            for _ in range(rng.randrange(1, 4)):
                events.append(
                    (
                        f"x{x}",
                        rng.choice([chunk] * 8 + [None]),
                        rng.choice([t, t, t, None, 5]),
                        rng.choice(["", "", "a", None]),
                        rng.choice(["", "", "", "r", None]),
                        rng.choice([0, 0, 0, 2, None]),
                    )
                )
        if shuffled:
            rng.shuffle(events)
        rows += events
    types = [pa.string(), pa.int32(), pa.int64(), pa.string(), pa.string(), pa.int32()]
    return pa.table([pa.array(col, t) for col, t in zip(zip(*rows, strict=True), types, strict=True)], names=_COLUMNS)


def _decoded(batch: pa.Table) -> pa.Table:
    rows = token_chunks(*(batch[name].combine_chunks() for name in _COLUMNS))
    capture = pa.repeat(pa.scalar("c", pa.string()), len(rows[0]))
    return pa.Table.from_arrays([capture, *rows], schema=arrow_schema("token_chunks"))


def _both(batch: pa.Table) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """(decoded token chunks, the SQL's), (decoded gaps, the SQL's), each in one order."""
    con = duckdb.connect()
    con.register("raw", batch)
    con.execute("CREATE VIEW events AS SELECT 'c' AS capture, * FROM raw")
    con.register("token_chunks", _decoded(batch))
    chunks = "SELECT capture, exchange_id, chunk, t_ns, events, has_content FROM token_chunks ORDER BY ALL"
    gaps = "SELECT capture, exchange_id, chunk, t_ns, events, gap_ns FROM token_chunks WHERE gap_ns IS NOT NULL ORDER BY ALL"
    out = (
        con.execute(chunks).fetchall(),
        con.execute(f"SELECT * FROM ({TOKEN_CHUNKS_FROM_EVENTS}) ORDER BY ALL").fetchall(),
        con.execute(gaps).fetchall(),
        con.execute(f"SELECT * FROM ({ITL_FROM_EVENTS}) ORDER BY ALL").fetchall(),
    )
    con.close()
    return out


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_the_decoded_token_chunks_and_gaps_are_what_the_sql_over_the_events_gives(seed: int, shuffled: bool) -> None:
    decoded, sql, decoded_gaps, sql_gaps = _both(_batch(random.Random(seed), 40, shuffled))
    assert decoded == sql and decoded_gaps == sql_gaps
    assert sql_gaps, "no gap at all: the batch tests nothing"


def test_a_token_event_moved_in_time_moves_the_gaps() -> None:
    """The comparison above can fail: the decoded gaps of a batch with one token event's time
    changed are not the SQL's gaps of the batch as it was."""
    batch = pa.table(
        [
            pa.array(["a"] * 4 + ["b"] * 2),
            pa.array([0, 1, 1, 2, 0, 1], pa.int32()),
            pa.array([10, 20, 20, 35, 5, 9], pa.int64()),
            pa.array(["x", "y", "", "z", "p", "q"]),
            pa.array([""] * 6),
            pa.array([0] * 6, pa.int32()),
        ],
        names=_COLUMNS,
    )
    _, _, gaps, sql_gaps = _both(batch)
    assert gaps == sql_gaps and [g[-1] for g in gaps] == [10, 15, 4]  # a: 20-10, 35-20; b: 9-5
    moved = batch.set_column(2, "t_ns", pa.array([10, 20, 20, 36, 5, 9], pa.int64()))
    assert _both(moved)[2] != sql_gaps


def test_a_batch_with_no_token_event_has_no_token_chunk() -> None:
    batch = pa.table(
        [pa.array(["a", "a"]), pa.array([0, 1], pa.int32()), pa.array([1, 2], pa.int64())]
        + [pa.array(["", None]), pa.array([None, ""]), pa.array([0, None], pa.int32())],
        names=_COLUMNS,
    )
    decoded, sql, _, _ = _both(batch)
    assert decoded == sql == []
