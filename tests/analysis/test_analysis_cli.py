"""`infertap stats`, `sql` and `export` through click's CliRunner."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import duckdb
import pytest
from click.testing import CliRunner, Result

from infertap.capture.hostfacts import host_facts
from infertap.capture.segments import segment_paths
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from tests.analysis_builders import MS, RECORDER, body, event, exchange, sse, write_capture


@pytest.fixture
def cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    usage = {"prompt_tokens": 10, "completion_tokens": 3}
    return write_capture(
        tmp_path / "cap",
        [
            exchange(
                "a",
                sent_ms=0,
                request=body(model="alpha"),
                end_ms=60,
                chunks=[
                    (10, sse(event(role="assistant"))),
                    (20, sse(event("x"))),
                    (40, sse(event("y"), event("z", finish="stop"))),
                    (50, sse(event(choices=False, usage=usage))),
                ],
            ),
            exchange(
                "b",
                sent_ms=30,
                request=body(model="beta"),
                end_ms=50,
                chunks=[(25, sse(event("q"))), (45, sse(event("r", finish="stop")))],
            ),
            exchange("c", sent_ms=100, request=body(model="beta"), end="upstream_error", status=None, chunks=[]),
        ],
    )


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=True)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_stats_json(cap: Path) -> None:
    out = json.loads(ok(run("stats", str(cap), "--json")).stdout)
    assert out["by"] == ["run"] and out["captures"][0]["capture"] == str(cap.resolve())
    [g] = out["groups"]
    assert set(g) >= {
        "key",
        "requests",
        "ok",
        "errors",
        "error_rate",
        "metrics",
        "throughput",
        "concurrency",
        "output_tokens_source",
        "server_timings",
        "workload",
        "tokens_per_chunk",
    }
    assert set(g["metrics"]) == {"ttft", "ttft_content", "t_first_byte", "tpot", "itl", "e2e", "output_tokens"}
    assert set(g["metrics"]["ttft"]) == {"n", "p50", "p90", "p99", "mean"}
    assert g["metrics"]["ttft"]["p50"] == pytest.approx((20 + 25) / 2)  # ms; a role-only first chunk doesn't count
    assert (g["requests"], g["ok"], g["output_tokens_source"]) == (3, 2, {"usage": 1, "chunks": 1})


def test_stats_says_the_mixed_sources_note_in_tokens_not_in_answers(cap: Path) -> None:
    # One answer counted by usage (3 tokens), one by its chunks (2): the line above counts answers
    # (``usage ×1, chunks ×1``), so the note's token totals must not be written the same way.
    text = ok(run("stats", str(cap))).stdout
    assert "output_tokens source: usage ×1, chunks ×1;" in text
    assert "different sources (usage 3 tokens, chunks 2 tokens)" in text
    assert "usage ×3" not in text


def test_stats_by_model_prints_the_documented_names(cap: Path) -> None:
    text = ok(run("stats", str(cap), "--by", "model")).stdout
    for name in (
        "ttft",
        "ttft_content",
        "t_first_byte",
        "tpot",
        "itl",
        "e2e",
        "output_tokens",
        "requests_per_s",
        "output_tokens_per_s",
        "concurrency_mean",
        "concurrency_max",
        "error_rate",
        "server-measured",
        "prompt_tokens",
        "output_per_prompt",
        "cached_share",
        "prefix_reuse (bytes)",
    ):
        assert name in text, name
    assert "model alpha" in text and "model beta" in text
    assert "error_rate 50.0%" in text  # beta: one of two failed
    documented = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    for name in (
        "ttft",
        "ttft_content",
        "t_first_byte",
        "tpot",
        "itl",
        "e2e",
        "requests_per_s",
        "concurrency_max",
        "cached_share",
    ):
        assert f"`{name}`" in documented, name


def test_stats_prints_recorded_names_as_they_are_never_as_markup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rich read a model name as markup: two quantizations ``llama-3-8b[q4_k_m]`` and ``[q8_0]`` were both
    titled ``llama-3-8b``, and a name or session like ``[/]x[bold]y`` failed the command with a MarkupError."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    names = ["llama-3-8b[q4_k_m]", "llama-3-8b[q8_0]", "[/]x[bold]y"]
    answer = [(10, sse(event("x", role="assistant"), event(finish="stop")))]
    cap = write_capture(
        tmp_path / "cap",
        [
            exchange(f"x{i}", seq=i + 1, sent_ms=i * 10, request=body(model=name), session=f"[/]s{i}[bold]", chunks=answer)
            for i, name in enumerate(names)
        ],
    )
    text = ok(run("stats", str(cap), "--by", "model")).stdout
    for name in names:
        assert f"model {name}" in text, name
    sessions = ok(run("stats", str(cap), "--by", "session")).stdout
    assert all(f"[/]s{i}[bold]" in sessions for i in range(3)), sessions


def test_stats_rejects_an_unknown_grouping_and_a_missing_capture(tmp_path: Path) -> None:
    bad = run("stats", str(tmp_path), "--by", "colour")
    assert bad.exit_code == 2 and "colour" in bad.stderr
    missing = run("stats", str(tmp_path / "nope"))
    assert missing.exit_code == 1 and f"{tmp_path / 'nope'}: no such capture" in missing.stderr


def test_sql_query_first_as_table_csv_and_json(cap: Path) -> None:
    query = "SELECT exchange_id, ttft_ns, output_tokens_source FROM metrics ORDER BY exchange_id"
    table = ok(run("sql", query, str(cap))).stdout
    assert "exchange_id" in table and "20000000" in table and "3 row(s)" in table
    rows = list(csv.reader(io.StringIO(ok(run("sql", str(cap), "-q", query, "--csv")).stdout)))
    assert rows == [
        ["exchange_id", "ttft_ns", "output_tokens_source"],
        ["a", str(20 * MS), "usage"],
        ["b", str(25 * MS), "chunks"],
        ["c", "", ""],  # no answer at all: no count, nor a source of one
    ]
    records = json.loads(ok(run("sql", query, str(cap), "--json")).stdout)
    assert records[0] == {"exchange_id": "a", "ttft_ns": 20 * MS, "output_tokens_source": "usage"}


def test_sql_and_stats_show_the_engines_dtype(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    dtype = "Q4_1 79%, Q8_0 21%, F32 <1%"
    snapshot = {
        "type": "engine",
        "url": "http://engine.test",
        "wall": 1.8e9,
        "kind": "llama-server",
        "fingerprint": "f00d",
        "facts": {"quantization": {"value": "Q4_1", "source": "/props"}, "dtype": {"value": dtype, "source": "GGUF"}},
    }
    cap = write_capture(tmp_path / "cap", [snapshot, exchange("a", chunks=[(5, sse(event("x")))])])
    rows = json.loads(ok(run("sql", "SELECT kind, quantization, dtype FROM engines", str(cap), "--json")).stdout)
    assert rows == [{"kind": "llama-server", "quantization": "Q4_1", "dtype": dtype}]
    assert json.loads(ok(run("stats", str(cap), "--json")).stdout)["engines"][0]["dtype"] == dtype


def _strict(text: str) -> object:
    """JSON as every strict reader (jq, JavaScript) takes it: NaN and Infinity are no JSON."""

    def refuse(constant: str) -> object:
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def test_json_output_holds_no_nan_or_infinity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`sql --json "select 1/0"`, `stats --json` over server timings of 1e309 and `cat` of a NaN
    gauge printed NaN / Infinity, which no strict JSON reader takes: each is null now, and a
    non-finite server timing is unknown where it is decoded."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    timings = {"prompt_ms": 1e309, "predicted_ms": float("nan"), "prompt_n": 3, "predicted_n": 1}
    telemetry = {"type": "telemetry", "wall": 1.7e9, "source": "engine", "samples": [["gauge", {}, float("nan")]]}
    cap = write_capture(
        tmp_path / "cap",
        [
            exchange("a", request=body(), chunks=[(5, sse(event("x", role="assistant"), event(finish="stop", timings=timings)))]),
            telemetry,
        ],
    )
    assert _strict(ok(run("sql", "SELECT 1/0 AS x, 'nan'::DOUBLE AS y", str(cap), "--json")).stdout) == [{"x": None, "y": None}]
    st = _strict(ok(run("stats", str(cap), "--json")).stdout)
    assert isinstance(st, dict) and st["groups"][0]["server_timings"]["source"]
    cells = ok(run("sql", "SELECT server_prompt_ms, server_decode_ms, server_prompt_tokens FROM exchanges", str(cap), "--json"))
    assert _strict(cells.stdout) == [{"server_prompt_ms": None, "server_decode_ms": None, "server_prompt_tokens": 3}]
    lines = [_strict(line) for line in ok(run("cat", str(cap))).stdout.splitlines()]
    [sample] = [r for r in lines if isinstance(r, dict) and r["type"] == "telemetry"]
    assert sample["samples"] == [["gauge", {}, None]]


def test_report_charts_leave_out_nan_and_infinite_points() -> None:
    """A non-finite value drew `nan` coordinates (or an axis up to infinity) into the report's SVG."""
    from infertap.analysis.svg import Line, cdf_svg, line_svg, scatter_svg

    nan, inf = float("nan"), float("inf")
    charts = [
        cdf_svg([("a", [1.0, nan, inf, 2.0])], "ttft"),
        scatter_svg([("a", [(1.0, 2.0), (nan, 1.0), (2.0, inf)])], "t", "ms"),
        line_svg([Line("a", [(1.0, 2.0), (2.0, nan), (inf, 1.0), (3.0, 4.0)])], "load", "ms", hlines=[(inf, "slo")]),
    ]
    for chart in charts:
        assert "<svg" in chart and "nan" not in chart.lower() and "inf" not in chart.lower(), chart


def test_sql_takes_a_query_longer_than_a_file_name_can_be(cap: Path) -> None:
    columns = ", ".join(f"exchange_id AS column_{i:02d}" for i in range(20))
    query = f"SELECT {columns}, ttft_ns FROM metrics WHERE exchange_id IN ('a', 'b') ORDER BY exchange_id"
    assert len(query) > 300  # over NAME_MAX (255): checking whether it is a path fails with ENAMETOOLONG
    rows = list(csv.reader(io.StringIO(ok(run("sql", query, str(cap), "--csv")).stdout)))
    assert rows[0] == [f"column_{i:02d}" for i in range(20)] + ["ttft_ns"]
    assert rows[1:] == [["a"] * 20 + [str(20 * MS)], ["b"] * 20 + [str(25 * MS)]]


def test_sql_bytes_print_as_text_or_base64(cap: Path) -> None:
    out = json.loads(ok(run("sql", "SELECT bytes FROM chunks WHERE exchange_id = 'b' ORDER BY index", str(cap), "--json")).stdout)
    assert out[0]["bytes"] == sse(event("q")).decode()


def test_sql_reads_queries_from_stdin_and_survives_a_bad_one(cap: Path) -> None:
    result = run(
        "sql",
        str(cap),
        "--json",
        input="SELECT count(*) AS n FROM chunks;\nSELECT nope FROM\n  metrics;\nSELECT 42\n  AS answer",
    )
    assert result.stdout.splitlines() == ['[{"n": 6}]', '[{"answer": 42}]']  # the queries after the bad one ran
    assert "error:" in result.stderr and "nope" in result.stderr
    assert result.exit_code == 1 and "1 query failed" in result.stderr  # and a script of them says it failed


def test_sql_errors(cap: Path, tmp_path: Path) -> None:
    bad = run("sql", "SELECT nope FROM metrics", str(cap))
    assert bad.exit_code == 1 and "nope" in bad.stderr and "Traceback" not in bad.output
    assert run("sql", "SELECT 1").exit_code == 2  # a query, but no capture
    assert run("sql", str(cap), "--csv", "--json", "-q", "SELECT 1").exit_code == 2


def test_export_writes_parquet_that_duckdb_reads(cap: Path, tmp_path: Path) -> None:
    out = tmp_path / "parquet"
    text = ok(run("export", str(cap), "--parquet", str(out))).stdout
    assert "exchanges (3 rows)" in text and "chunks (6 rows)" in text
    counts = dict(re.findall(r"(\w+) \((\d+) rows\)", text))
    for name, n in counts.items():  # hive partitions by recorder: every row comes back, with its recorder
        files = f"{out}/{name}/**/*.parquet"
        assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{files}', hive_partitioning=true)").fetchall() == [(int(n),)], name
    (recorder,) = duckdb.sql(f"SELECT DISTINCT recorder_id FROM read_parquet('{out}/chunks/*/*.parquet')").fetchall()
    assert recorder[0] and (out / "chunks" / f"recorder_id={recorder[0]}").is_dir()
    flat = tmp_path / "flat"
    ok(run("export", str(cap), "--parquet", str(flat), "--partition-by", "none"))
    assert duckdb.sql(f"SELECT count(*) FROM '{flat}/metrics.parquet'").fetchall() == [(3,)]
    ok(run("export", str(cap), "--parquet", str(out)))  # again over an earlier export: replaced, not doubled
    assert duckdb.sql(f"SELECT count(*) FROM '{out}/exchanges/*/*.parquet'").fetchall() == [(3,)]
    assert run("export", str(cap)).exit_code == 2  # --parquet is required
    assert run("export", str(cap), "--parquet", str(out), "--partition-by", "model").exit_code == 2


@pytest.mark.parametrize(("partition", "key"), [("recorder", "recorder_id"), ("run", "run_id")])
def test_every_partitioned_table_reads_by_the_documented_pattern_with_its_schema_even_empty(
    cap: Path, tmp_path: Path, partition: str, key: str
) -> None:
    """A table with no rows (itl of a run with no multi-token stream; engines, enrichments and
    telemetry here) is one empty file in a partition folder: `<table>/*/*.parquet` finds it."""
    single = write_capture(tmp_path / "single", [exchange("s", sent_ms=0, request=body(), chunks=[(5, sse(event("one")))])])
    full, empty = tmp_path / "full", tmp_path / "empty"
    ok(run("export", str(cap), "--parquet", str(full), "--partition-by", partition))
    ok(run("export", str(single), "--parquet", str(empty), "--partition-by", partition))

    def read(folder: Path, name: str) -> tuple[dict[str, str], int]:
        rel = duckdb.sql(f"SELECT * FROM read_parquet('{folder}/{name}/*/*.parquet', hive_partitioning = true)")
        return dict(zip(rel.columns, map(str, rel.types), strict=True)), len(rel.fetchall())

    from infertap.analysis import EXPORTED

    for name in EXPORTED:
        if name == "captures":  # one row a capture, not partitioned: captures/data_0.parquet
            continue
        schema, rows = read(empty, name)
        assert read(full, name)[0] == schema and schema[key] == "VARCHAR", name  # the schema, whatever the rows
    assert read(full, "itl")[1] > 0 and read(empty, "itl")[1] == 0  # no multi-token stream: no gaps
    assert read(empty, "exchanges")[1] == 1
    empties = {p.relative_to(empty) for p in empty.rglob("*.parquet") if p.parent.name == f"{key}=__HIVE_DEFAULT_PARTITION__"}
    assert {p.parts[0] for p in empties} == {"itl", "engines", "enrichments", "telemetry"}


def test_a_corrupt_capture_fails_with_the_file_named_and_a_torn_one_warns(cap: Path) -> None:
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    seg.write_bytes(data[:-5])  # cut inside the footer's block: a torn tail
    torn = ok(run("stats", str(cap), "--json"))
    assert "warning:" in torn.stderr and str(seg) in torn.stderr and "torn tail" in torn.stderr
    assert json.loads(torn.stdout)["captures"][0]["torn"]
    corrupt = bytearray(data)
    corrupt[40] ^= 0xFF  # inside the first block, which has others after it
    seg.write_bytes(bytes(corrupt))
    result = run("stats", str(cap))
    assert result.exit_code == 1 and f"{seg}: corrupt capture data" in result.stderr and "Traceback" not in result.output


def test_an_empty_capture_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    cap = write_capture(tmp_path / "empty", [])
    assert "no generation requests" in ok(run("stats", str(cap))).stdout
    assert json.loads(ok(run("stats", str(cap), "--json")).stdout)["groups"] == []


def test_the_command_line_loads_no_duckdb_or_arrow_until_a_command_needs_them():
    """`infertap --help` (and every command's start) stays quick: analysis loads on first use."""
    import subprocess
    import sys

    code = (
        "import sys; from click.testing import CliRunner; from infertap.cli import cli; "
        "r = CliRunner().invoke(cli, ['stats', '--help']); assert r.exit_code == 0, r.output; "
        "print(sorted(m for m in ('duckdb', 'pyarrow', 'analysis.store') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_stats_names_each_engine_with_its_weights_dtype_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))

    def snapshot(url: str, dtype: str | None) -> dict:
        facts = {"version": {"value": "b5000", "source": "/props"}}
        if dtype is not None:
            facts["dtype"] = {"value": dtype, "source": "GGUF tensor types"}
        return {"type": "engine", "url": url, "wall": 1.8e9, "kind": "llama-server", "fingerprint": "f00d", "facts": facts}

    cap = write_capture(
        tmp_path / "cap",
        [
            snapshot("http://a.test", "Q4_1 79%, Q8_0 21%, F32 <1%"),
            snapshot("http://b.test", None),
            exchange("x", chunks=[(10, sse(event("hi")))]),
        ],
    )
    lines = [x for x in ok(run("stats", str(cap))).stdout.splitlines() if x.startswith("engine: ")]
    assert lines == [
        "engine: llama-server b5000 at http://a.test (fingerprint f00d, weights Q4_1 79%, Q8_0 21%, F32 <1%)",
        "engine: llama-server b5000 at http://b.test (fingerprint f00d)",  # none known: nothing said
    ]


def test_a_mistyped_query_is_said_to_be_one_not_a_missing_capture(cap: Path) -> None:
    """A query that begins with no keyword sql knows was taken for a capture path ("SELEC 1: no such capture")."""
    for query in ("SELEC 1", "(SELECT 1) UNION (SELECT 2)"):
        bad = run("sql", query, str(cap))
        assert bad.exit_code == 2 and "is no capture: if it is a query, give it with -q" in bad.stderr, bad.stderr
    assert ok(run("sql", str(cap), "-q", "(SELECT 1) UNION (SELECT 2)")).stdout.count("row(s)") == 1


def test_a_capture_whose_path_is_not_utf8_is_refused_clearly(cap: Path, tmp_path: Path) -> None:
    """Every analysis command ended in a UnicodeEncodeError traceback (the cache keys captures by their path as text)."""
    import os
    import shutil

    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/odd\xff")
    shutil.copytree(cap, odd)
    bad = run("stats", odd)
    assert bad.exit_code == 1 and "path is not UTF-8" in bad.stderr and "odd\\xff" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr and "Traceback" not in bad.stdout
    assert ok(run("stats", str(cap))).exit_code == 0


def test_stats_says_a_capture_is_still_being_written_and_still_gives_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    done = exchange(
        "done", chunks=[(10, sse(event("a"), event(finish="stop", usage={"prompt_tokens": 2, "completion_tokens": 1})))]
    )
    # A recorder that runs (this process: its pid, this machine, started before the run) and has
    # written one exchange so far.
    writer = CaptureWriter(tmp_path / "live", recorder={**RECORDER, "pid": os.getpid()}).open()
    try:
        writer.write(done)
        deadline = time.monotonic() + 30  # written within the flush window (5 ms)
        while json.loads(ok(run("info", str(tmp_path / "live"), "--json")).stdout)["exchanges"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        live = ok(run("stats", str(tmp_path / "live"), "--json"))
        text = ok(run("stats", str(tmp_path / "live")))
    finally:
        writer.close()
    said = f"{tmp_path / 'live'} is still being written (its recorder, pid {os.getpid()}, runs on this machine)"
    result = json.loads(live.stdout)
    assert result["groups"][0]["requests"] == 1  # not refused: the figures of what it holds
    assert [said in w for w in result["warnings"]] == [True] and result["captures"][0]["writing"] == os.getpid()
    assert "warning: " + said in " ".join(live.stderr.split()) and "warning: " + said in " ".join(text.stderr.split())
    # Closed: nothing to say.
    closed = ok(run("stats", str(tmp_path / "live"), "--json"))
    assert closed.stderr == "" and json.loads(closed.stdout)["warnings"] == []
    assert json.loads(closed.stdout)["captures"][0]["writing"] is None
    # A recorder killed without closing it (its pid names no process now): complete as it is.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    for name, recorder, host, says in (
        ("killed", {**RECORDER, "pid": int(gone.stdout)}, None, None),
        # A container's entrypoint (pid 1 there) sharing this machine's name: this machine's init,
        # running since boot, is no recorder.
        ("container", {**RECORDER, "pid": 1}, None, None),
        ("elsewhere", {**RECORDER, "pid": os.getpid()}, "gpu-box-7", "is not closed and was recorded on gpu-box-7"),
    ):
        facts = {**host_facts(), **({"hostname": host} if host else {})}
        with mock.patch("infertap.capture.writer.host_facts", lambda facts=facts: facts):
            cap = write_capture(tmp_path / name, [done], recorder=recorder)
        (seg,) = segment_paths(cap)
        seg.write_bytes(seg.read_bytes()[:-3])  # no footer
        result = json.loads(ok(run("stats", str(cap), "--json")).stdout)
        assert result["captures"][0]["closed_cleanly"] is False and result["captures"][0]["writing"] is None
        assert [says in w for w in result["warnings"]] == ([True] if says else []), result["warnings"]


def test_an_export_of_a_capture_still_being_written_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Export wrote a live capture's snapshot into the warehouse without a word, where stats warns:
    the exchanges then in flight, and later ones, are in none of its tables."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    done = exchange(
        "done", chunks=[(10, sse(event("a"), event(finish="stop", usage={"prompt_tokens": 2, "completion_tokens": 1})))]
    )
    writer = CaptureWriter(tmp_path / "live", recorder={**RECORDER, "pid": os.getpid()}).open()
    try:
        writer.write(done)
        deadline = time.monotonic() + 30  # written within the flush window (5 ms)
        while json.loads(ok(run("info", str(tmp_path / "live"), "--json")).stdout)["exchanges"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        live = ok(run("export", str(tmp_path / "live"), "--parquet", str(tmp_path / "wh")))
    finally:
        writer.close()
    said = (
        f"warning: {tmp_path / 'live'} is still being written (its recorder, pid {os.getpid()}, runs on this machine): "
        "the tables exported are of what it held when read"
    )
    assert said in " ".join(live.stderr.split()), live.stderr
    assert duckdb.sql(f"SELECT count(*) FROM '{tmp_path}/wh/exchanges/*/*.parquet'").fetchall() == [(1,)]
    closed = ok(run("export", str(tmp_path / "live"), "--parquet", str(tmp_path / "wh")))  # closed: nothing to say
    assert closed.stderr == "" and "wrote 13 tables" in closed.stdout
