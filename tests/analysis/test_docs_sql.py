"""Every `infertap sql` and `infertap export` example of the docs (README.md, docs/*.md), its Python
example, and the DuckDB queries they give for an export, run as written in a folder holding a
capture at each path they name: a table, view or column the docs name that isn't there fails here."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from infertap.cli import cli
from tests.analysis_builders import body, event, exchange, sse, write_capture

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(lang: str) -> Iterator[tuple[str, list[str]]]:
    """Each fenced block of ``lang`` in the docs: where it starts, its lines."""
    for doc in DOCS:
        lines, start = doc.read_text().splitlines(), None
        for n, line in enumerate(lines):
            if start is None and line.strip() == f"```{lang}":
                start = n + 1
            elif start is not None and line.strip() == "```":
                yield f"{doc.name}:{start}", lines[start:n]
                start = None


def commands(verb: str) -> list[tuple[str, list[str]]]:
    """Each ``infertap <verb>`` line of the docs' shell blocks, its arguments as a shell splits them."""
    return [
        (f"{where}+{k}", shlex.split(line, comments=True)[2:])
        for where, lines in blocks("sh")
        for k, line in enumerate(lines)
        if line.startswith(f"infertap {verb} ")
    ]


SQL = commands("sql")
EXPORTS = [(where, args) for where, args in commands("export") if "--ray" not in args]  # Ray: test_export_ray.py


def _capture_args(args: list[str]) -> list[str]:
    return [a for a in args if a.startswith("captures/")]


def _agent_turn(xid: str, sent_ms: float) -> dict[str, object]:
    """A coding agent's request offering a tool, and its streamed answer."""
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "list files"}]
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
    chunks = [(5, sse(event("Let me"))), (9, sse(event(" look."))), (12, sse(event(finish="tool_calls")))]
    return exchange(xid, sent_ms=sent_ms, request=body(messages=messages, tools=tools), chunks=chunks, end_ms=15)


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with a capture wherever the docs' examples name one: a glob's first match, a
    folder of captures (a trailing ``/``) holding one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    named = {a for _, args in SQL + EXPORTS for a in _capture_args(args)} | {"captures/run1"}
    for k, name in enumerate(sorted(named)):
        path = tmp_path / name.replace("*", "1")
        if name.endswith("/"):
            path = path / "shard-1"
        if not path.exists():
            write_capture(path, [_agent_turn(f"x{k}", 0), _agent_turn(f"y{k}", 20)])
    return tmp_path


def run(args: list[str], stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, args, input=stdin, catch_exceptions=True)


def ok(where: str, args: list[str], result: Result) -> None:
    assert result.exit_code == 0, (where, args, result.output, result.exception)


def test_the_docs_have_examples_to_run() -> None:
    assert len(SQL) >= 5 and len(EXPORTS) >= 2
    assert any("tools" in " ".join(args) for _, args in SQL)  # the requests examples of analysis.md


def test_every_sql_example_runs_as_written(workdir: Path) -> None:
    for where, args in SQL:
        stdin = "SELECT count(*) FROM metrics;\n" if len(args) == len(_capture_args(args)) else None
        result = run(["sql", *args], stdin)
        ok(where, args, result)
        assert "Error" not in result.output, (where, result.output)
    # What the harness catches: a query naming a column that isn't there fails.
    bad = run(["sql", "SELECT ttft FROM metrics", "captures/run1"])
    assert bad.exit_code == 1 and "ttft" in bad.output


def test_every_export_example_runs_and_its_queries_read_it(workdir: Path) -> None:
    for where, args in EXPORTS:
        ok(where, args, run(["export", *args]))
    queries = [line for _, lines in blocks("sql") for line in lines if re.match(r"(SELECT|WITH) ", line)]
    assert queries  # scale.md's DuckDB query of the warehouse
    for query in queries:
        assert duckdb.sql(query).fetchall(), query
    out = [args[args.index("--parquet") + 1] for _, args in EXPORTS if "--partition-by" not in args][-1]  # not since replaced
    for doc in DOCS:  # inline readers of an export (`read_parquet('DIR/...')`)
        for reader in re.findall(r"`(read_parquet\('DIR/[^`]*\))`", doc.read_text()):
            assert duckdb.sql(f"SELECT count(*) FROM {reader.replace('DIR', out.rstrip('/'))}").fetchall() != [(0,)]


def test_the_python_example_runs(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    examples = [lines for _, lines in blocks("python") if any("Analysis(" in line for line in lines)]
    assert examples
    for lines in examples:
        exec("\n".join(lines), {})  # noqa: S102 - the docs' own code
    assert "ttft_ns" in capsys.readouterr().out


def documented_tables() -> dict[str, str]:
    """analysis.md's table of tables and views: each name, and what it says it holds."""
    text = (ROOT / "docs" / "analysis.md").read_text()
    table = text.split("| name | one row per | holds |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines()[2:]]
    return {name: row[-1] for row in rows for name in re.findall(r"`(\w+)`", row[0])}


def test_the_export_writes_the_tables_and_columns_the_docs_say(workdir: Path) -> None:
    from infertap.analysis import EXPORTED, Analysis
    from infertap.analysis.schema import TABLES

    documented = documented_tables()
    with Analysis(["captures/run1"]) as analysis:
        for name in documented:  # every table and view documented is there
            analysis.query(f"DESCRIBE {name}")
    not_exported = {name for name, holds in documented.items() if "not exported" in holds}
    assert not_exported == {"links", "token_chunks"} and set(TABLES) - set(EXPORTED) == not_exported
    assert set(EXPORTED) == set(TABLES) - not_exported | {"metrics", "itl"}  # "every table and the metrics and itl views"
    out = workdir / "every-column"
    ok("export", [], run(["export", "captures/run1", "--parquet", str(out)]))
    for name in set(EXPORTED) & set(TABLES):  # every decoded column, the newest of the exchanges included
        files = f"{out}/{name}/{'' if name == 'captures' else '*/'}*.parquet"
        columns = set(duckdb.sql(f"SELECT * FROM read_parquet('{files}', hive_partitioning = true)").columns)
        assert {column for column, _ in TABLES[name]} <= columns, name
    exchanges = set(duckdb.sql(f"SELECT * FROM read_parquet('{out}/exchanges/*/*.parquet')").columns)
    new = {"request_body_unknown", "request_body_unsearched", "response_body_unsearched", "undelivered_chunks"}
    assert new <= exchanges and "session_capture" in set(duckdb.sql(f"SELECT * FROM '{out}/turns/*/*.parquet'").columns)


def test_every_exported_column_is_documented(workdir: Path) -> None:
    """A warehouse user reads analysis.md's row of a table for what its columns mean (metrics.md for
    the metrics view): each column the export writes is named there, in backticks. ``capture``,
    ``exchange_id`` and ``recorder_id`` are said once for every table, above it and in Export."""
    from infertap.analysis import EXPORTED

    documented = documented_tables()
    metrics_md = set(re.findall(r"`(\w+)`", (ROOT / "docs" / "metrics.md").read_text()))
    out = workdir / "every-column"
    ok("export", [], run(["export", "captures/run1", "--parquet", str(out)]))
    missing = {}
    for name in EXPORTED:
        files = f"{out}/{name}/{'' if name == 'captures' else '*/'}*.parquet"
        columns = duckdb.sql(f"SELECT * FROM read_parquet('{files}', hive_partitioning = true)").columns
        said = set(re.findall(r"`(\w+)`", documented[name])) | (metrics_md if name == "metrics" else set())
        missing[name] = [c for c in columns if c not in said | {"capture", "exchange_id", "recorder_id"}]
    assert not any(missing.values()), {name: columns for name, columns in missing.items() if columns}
