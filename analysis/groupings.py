"""What ``stats --by`` may group on, and the SQL of each key (here, apart from the queries, so
that the command line can offer the choices without loading DuckDB)."""

GROUPINGS = {
    "run": "run_id",
    "model": "coalesce(model, '(no model)')",
    "path": "method || ' ' || path",
    "api": "api",
    "session": "session",
    # ttft means another thing in each: an answer by how it came, a failure by what was asked (a
    # streamed request answered with a JSON error never asked for a whole body)
    "stream": "CASE WHEN (CASE WHEN ok THEN streamed ELSE coalesce(stream, false) OR streamed END) THEN 'streamed' ELSE 'whole body' END",
}
