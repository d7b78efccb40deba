"""The ``token_chunks`` table: each exchange's token-bearing chunks and the gap since the one before.

Computed from a batch of the ``events`` table's Arrow columns as the decode writes them (a batch
holds whole exchanges), so that the ``itl`` view is a scan of this table: as a window over every
event at query time it was a third of a cached ``stats``. The rule is the one the views had in SQL
(``tests/analysis_builders.py`` keeps it and checks every loaded capture against it):

    SELECT exchange_id, chunk, min(t_ns) AS t_ns, count(*) AS events, bool_or(content <> '') AS has_content
    FROM events WHERE content <> '' OR reasoning <> '' OR tool_calls > 0 GROUP BY exchange_id, chunk

and ``gap_ns``: ``t_ns`` less the ``t_ns`` of the exchange's token chunk before it (by ``chunk``),
null for its first, or where either time is unknown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

#: The table's columns after ``capture`` (schema.py's TOKEN_CHUNKS), as ``token_chunks`` returns them.
COLUMNS = ("exchange_id", "chunk", "t_ns", "events", "has_content", "gap_ns")


def token_chunks(
    exchange_id: pa.Array, chunk: pa.Array, t_ns: pa.Array, content: pa.Array, reasoning: pa.Array, tool_calls: pa.Array
) -> list[pa.Array]:
    """The token chunks of a batch of events (each exchange's events together, as the decode adds
    them), in exchange then chunk order: ``COLUMNS``' arrays. In NumPy over runs of rows: Arrow's
    group by and sort cost twice as much for the few rows of one batch."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(exchange_id)
    # Which exchange each event is of: a run of one id (the decode adds an exchange's events at once).
    nulls = _numpy(exchange_id.is_null())
    same = _numpy(pc.fill_null(pc.equal(exchange_id[1:], exchange_id[:-1]), False))
    same |= nulls[1:] & nulls[:-1]
    exchange = np.zeros(n, np.int64)
    np.cumsum(~same, out=exchange[1:])
    # As SQL's WHERE: a comparison with NULL is unknown, which keeps no row.
    carries = pc.or_kleene(pc.or_kleene(pc.not_equal(content, ""), pc.not_equal(reasoning, "")), pc.greater(tool_calls, 0))
    keep = np.flatnonzero(_numpy(pc.fill_null(carries, False)))
    if not len(keep):
        return [pa.array([], field.type) for field in _fields()]
    x = exchange[keep]
    # A chunk unknown (NULL) is grouped with the exchange's others and ordered last, as in SQL.
    c = np.where(_numpy(chunk.is_valid()), _numpy(chunk.fill_null(0)).astype(np.int64), _NULL_CHUNK)[keep]
    if len(keep) > 1 and not np.all((x[1:] > x[:-1]) | ((x[1:] == x[:-1]) & (c[1:] >= c[:-1]))):
        order = np.lexsort((c, x))  # stable: each exchange's events by chunk
        keep, x, c = keep[order], x[order], c[order]
    new = np.ones(len(keep), dtype=bool)
    new[1:] = (x[1:] != x[:-1]) | (c[1:] != c[:-1])
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(keep))
    # min(t_ns) and bool_or(content <> ''), each NULL where every value of the chunk is.
    times, timed = _numpy(t_ns.fill_null(0)).astype(np.int64)[keep], _numpy(t_ns.is_valid())[keep]
    t_min, t_known = _reduce(np.minimum, np.where(timed, times, np.iinfo(np.int64).max), timed, starts)
    text = pc.not_equal(content, "")
    has, has_known = _reduce(np.logical_or, _numpy(pc.fill_null(text, False))[keep], _numpy(text.is_valid())[keep], starts)
    # The gap since the exchange's token chunk before: none for its first, or where a time is unknown.
    first = np.ones(len(starts), dtype=bool)
    first[1:] = x[starts[1:]] != x[starts[:-1]]
    gap = np.zeros(len(starts), np.int64)
    gap[1:] = t_min[1:] - t_min[:-1]
    gap_known = ~first & t_known & np.roll(t_known, 1)
    chunks = c[starts]
    return [
        pc.take(exchange_id, pa.array(keep[starts])),
        pa.array(chunks.astype(np.int32), pa.int32(), mask=chunks == _NULL_CHUNK),
        pa.array(t_min, pa.int64(), mask=~t_known),
        pa.array(ends - starts, pa.int64()),
        pa.array(has, pa.bool_(), mask=~has_known),
        pa.array(gap, pa.int64(), mask=~gap_known),
    ]


def _fields() -> list[pa.Field]:
    from .schema import arrow_schema

    return list(arrow_schema("token_chunks"))[1:]


#: Where a NULL chunk sorts: after every chunk an int32 holds.
_NULL_CHUNK = 1 << 40


def _numpy(array: pa.Array | pa.ChunkedArray) -> Any:
    """A column with no NULLs as a NumPy array."""
    return array.to_numpy(zero_copy_only=False)


def _reduce(op: Any, values: Any, known: Any, starts: Any) -> tuple[Any, Any]:
    """``op`` over each run of rows from ``starts`` (values where unknown must not change it), and
    whether the run had a known value at all."""
    import numpy as np

    return op.reduceat(values, starts), np.add.reduceat(known.astype(np.int64), starts) > 0
