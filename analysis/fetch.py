"""A query's result as numpy columns, streamed.

``fetchnumpy`` materializes the whole result inside DuckDB first, and that copy counts against its
buffer: ten million pairs' values don't fit compare's 256 MB. Read a batch at a time, DuckDB holds
one batch of the result (an ORDER BY still sorts all of it, spilling to disk beyond the buffer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Rows DuckDB hands over at a time.
BATCH_ROWS = 500_000


def columns(con: Any, query: str, rows: int = BATCH_ROWS) -> dict[str, np.ndarray[Any, Any]]:
    """Each column of ``query``'s result as one numpy array, in the result's order."""
    reader = con.sql(query).to_arrow_reader(rows)
    parts: dict[str, list[np.ndarray[Any, Any]]] = {name: [] for name in reader.schema.names}
    for batch in reader:
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            parts[name].append(column.to_numpy(zero_copy_only=False))
    empty = {f.name: np.array([], dtype=f.type.to_pandas_dtype()) for f in reader.schema}
    return {name: np.concatenate(found) if found else empty[name] for name, found in parts.items()}
