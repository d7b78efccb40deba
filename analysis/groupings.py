"""What ``stats --by`` may group on, and the SQL of each key (here, apart from the queries, so
that the command line can offer the choices without loading DuckDB)."""

GROUPINGS = {
    "run": "run_id",
    "model": "coalesce(model, '(no model)')",
    "path": "method || ' ' || path",
    "api": "api",
    "session": "session",
    "stream": "CASE WHEN streamed THEN 'streamed' ELSE 'whole body' END",  # ttft means another thing in each
}
