"""The statistics' means are the values' exact mean rounded once, whatever order DuckDB adds them in."""

from __future__ import annotations

import math

import duckdb

from infertap.analysis.stats import _aggs


def _mean(rows: str, threads: int) -> float:
    """The mean ``_aggs`` gives of the values ``rows`` (SQL) selects, on ``threads`` threads."""
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    con.execute(f"CREATE TABLE m AS SELECT * FROM ({rows}) AS r(x)")  # a table's row groups are read in parallel
    (row,) = con.execute(f"SELECT {_aggs('x', 'x IS NOT NULL')} FROM m").fetchall()
    return row[1]


def test_a_mean_of_values_that_cancel_is_their_exact_mean():
    # Added in order, 1e16 + 1 loses the 1 (a double's step there is 2): a plain sum says 0.25.
    values = [1e16, 1.0, -1e16, 1.0]
    rows = " UNION ALL ".join(f"SELECT {v!r}::DOUBLE" for v in values)
    assert _mean(rows, 1) == math.fsum(values) / len(values) == 0.5


def test_the_mean_of_many_values_is_the_same_on_any_number_of_threads():
    n = 3_000_000  # many row groups, added by several threads
    rows = f"SELECT (i * 7919 % 1000003)::DOUBLE / 7 FROM range({n}) AS r(i)"
    exact = math.fsum((i * 7919 % 1000003) / 7 for i in range(n)) / n
    means = {_mean(rows, threads) for threads in (1, 2, 4, 8) for _ in range(3)}
    assert len(means) == 1
    assert math.isclose(means.pop(), exact, rel_tol=1e-15)
    assert _mean("SELECT 2.0 UNION ALL SELECT 4.0", 1) != _mean("SELECT 2.0 UNION ALL SELECT 5.0", 1)
