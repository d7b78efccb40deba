"""Bad inputs an audit of the command line found to end in a traceback, a hang, an exit code 0 or
lost data: each must end in a one-line error naming what is wrong, and leave the captures as they were."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from infertap.capture.reader import CaptureReader
from infertap.capture.segments import segment_paths
from infertap.cli import cli
from tests.helpers import write_capture


def invoke(*args: str, stdin: str | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=stdin, env=env)


def refused(result: Result, *words: str) -> None:
    """A clean refusal: exit code not 0, a click error (no other exception), the words in its message."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    for word in words:
        assert word in result.output, (word, result.output)


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    write_capture(tmp_path / "cap", [{}, {}])
    return tmp_path / "cap"


def test_a_report_is_never_written_into_a_capture(capture: Path) -> None:
    (segment,) = segment_paths(capture)
    before = segment.read_bytes()
    refused(invoke("report", str(capture), "-o", str(segment)), "a capture's segment")
    refused(invoke("report", str(capture), "-o", str(capture / "report.html")), "inside the capture")
    assert segment.read_bytes() == before and len(list(CaptureReader(capture).exchanges())) == 2


def test_an_export_is_never_written_into_a_capture(capture: Path, tmp_path: Path) -> None:
    """export --parquet into a capture folder put its table folders beside the segments (report -o
    and replay --out were refused there)."""
    env = {"INFERTAP_CACHE": str(tmp_path / "cache")}
    (segment,) = segment_paths(capture)
    for folder in (capture, capture / "warehouse"):
        refused(invoke("export", str(capture), "--parquet", str(folder), env=env), "inside the capture", "export")
    assert [p.name for p in capture.iterdir()] == [segment.name]
    done = invoke("export", str(capture), "--parquet", str(tmp_path / "warehouse"), env=env)  # elsewhere: written
    assert done.exit_code == 0 and (tmp_path / "warehouse" / "metrics").is_dir(), done.output


def test_a_cache_inside_a_capture_is_refused_before_anything_is_written(capture: Path, tmp_path: Path) -> None:
    """Its Parquet files would sit among the capture's segments, to be exported or copied with it."""
    (segment,) = segment_paths(capture)
    out = ("--parquet", str(tmp_path / "wh"))
    target = (
        "--target",
        f"http://127.0.0.1:{_closed_port()}",
        "--out",
        str(tmp_path / "s"),
        "--slo",
        "e2e:p90<=1s",
        "--speeds",
        "1",
    )
    for cache in (capture, capture / "cache", capture / "deep" / "cache"):
        given = ("--cache-dir", str(cache))
        for args in (("stats", *given), ("sql", "-q", "SELECT 1", *given), ("export", *out, *given), ("claim", *given)):
            refused(invoke(args[0], str(capture), *args[1:]), f"{cache} (--cache-dir)", f"inside the capture {capture}")
        refused(invoke("export", str(capture), *out, *given, "--ray", "127.0.0.1:1"), "--cache-dir", "inside the capture")
        env = {"INFERTAP_CACHE": str(cache)}
        for args in (("stats",), ("compare", str(capture)), ("report", "-o", str(tmp_path / "r.html")), ("sweep", *target)):
            refused(invoke(args[0], str(capture), *args[1:], env=env), "($INFERTAP_CACHE)", f"inside the capture {capture}")
    assert [p.name for p in capture.iterdir()] == [segment.name] and not (tmp_path / "wh").exists()
    assert not (tmp_path / "s").exists() and not (tmp_path / "r.html").exists()
    # Beside the capture, or above it, the cache is no part of it.
    for cache in (tmp_path / "cap-cache", tmp_path):
        assert invoke("stats", str(capture), "--cache-dir", str(cache)).exit_code == 0
        assert invoke("claim", str(capture), env={"INFERTAP_CACHE": str(cache)}).exit_code == 0
    assert [p.name for p in capture.iterdir()] == [segment.name]


def test_a_relative_cache_is_judged_where_it_lies_from_each_working_directory(
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative --cache-dir found outside any capture was remembered by its words: the same words
    from inside a capture then passed unrefused."""
    from infertap.analysis.cache import cache_root
    from infertap.analysis.errors import AnalysisError

    monkeypatch.chdir(tmp_path)
    assert cache_root("c") == Path("c")  # beside the capture: allowed
    monkeypatch.chdir(capture)
    with pytest.raises(AnalysisError, match="inside the capture"):
        cache_root("c")
    assert [p.name for p in capture.iterdir()] == [segment_paths(capture)[0].name]


def test_the_engines_cache_inside_a_capture_is_refused_before_anything_runs(
    capture: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """launch's cache (vLLM's converted model, wheels) is $INFERTAP_CACHE too: refused as the analysis
    cache is, and by the demo at its start, not by the comparison after every engine ran."""
    from infertap.launch import EngineError, cache_dir, vllm_model_dir

    (segment,) = segment_paths(capture)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    engines = [arg for x in "abc" for arg in (f"--engine-{x}", f"http://127.0.0.1:{_closed_port()}")]
    for cache in (capture, capture / "cache", capture / "deep" / "cache"):
        monkeypatch.setenv("INFERTAP_CACHE", str(cache))
        for where in (cache_dir, lambda: vllm_model_dir(gguf)):
            with pytest.raises(EngineError, match=f"inside the capture {capture}"):
                where()
        demo = invoke("demo", "--out", str(tmp_path / "demo"), *engines, env={"INFERTAP_CACHE": str(cache)})
        refused(demo, f"{cache} ($INFERTAP_CACHE)", f"inside the capture {capture}", "nothing was written")
    assert [p.name for p in capture.iterdir()] == [segment.name] and not (tmp_path / "demo").exists()
    # Beside the capture, or above it, the cache is no part of it.
    for cache in (tmp_path / "cap-cache", tmp_path):
        monkeypatch.setenv("INFERTAP_CACHE", str(cache))
        assert cache_dir() == cache and vllm_model_dir(gguf).parent == cache / "vllm-model"


def test_a_replay_never_writes_into_its_own_source(capture: Path) -> None:
    for out in (capture, capture / "sub"):
        refused(invoke("replay", str(capture), "--target", "http://127.0.0.1:9", "--out", str(out)), "--out", "source capture")
    assert [p.name for p in capture.iterdir()] == [p.name for p in segment_paths(capture)]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--speed", "nan"], ["--speed"]),
        (["--speed", "1e-300"], ["--speed"]),
        (["--rate", "1e-300"], ["--rate"]),
        (["--concurrency", "99999999999999999999"], ["--concurrency"]),
        (["--max-concurrency", "99999999999999999999"], ["--max-concurrency"]),
        (["--limit", "99999999999999999999"], ["--limit"]),
        (["--repeat", "99999999999999999999"], ["--repeat"]),
        (["--limit-sessions", "99999999999999999999"], ["--limit-sessions"]),
        (["--header", "X=é☃"], ["--header", "Latin-1"]),
        (["--header", "bad name=v"], ["--header", "header name"]),
    ],
)
def test_replay_refuses_numbers_and_headers_it_cannot_use(
    capture: Path, tmp_path: Path, args: list[str], words: list[str]
) -> None:
    out = tmp_path / "out"
    refused(invoke("replay", str(capture), "--target", "http://127.0.0.1:9", "--out", str(out), "--no-probe", *args), *words)
    assert not out.exists() or not any(out.iterdir())  # nothing written before the refusal


def test_an_upstream_on_another_port_or_host_is_no_loop() -> None:
    from infertap.proxy.server import points_at_itself

    assert points_at_itself("http://127.0.0.1:8787", "127.0.0.1", 8787)
    assert not points_at_itself("http://127.0.0.1:8080", "127.0.0.1", 8787)
    assert not points_at_itself("http://[::1]:8787", "127.0.0.1", 8787)  # another socket: IPv6 loopback
    assert not points_at_itself("http://127.0.0.1:8787", "127.0.0.1", 0)  # a port the system picks


@pytest.mark.parametrize("target", ["http://[::1", "http://127.0.0.1:99999", "http://127.0.0.1:abc", "ftp://x"])
def test_an_engine_url_that_is_no_url_is_named(capture: Path, tmp_path: Path, target: str) -> None:
    refused(invoke("replay", str(capture), "--target", target, "--out", str(tmp_path / "o")), "--target")
    refused(invoke("record", "--upstream", target, "--out", str(tmp_path / "r")), "--upstream")
    refused(invoke("probe", target), "URL")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["record", "--upstream", "http://127.0.0.1:9", "--max-body-mb", "nan"], ["--max-body-mb"]),
        (["record", "--upstream", "http://127.0.0.1:9", "--max-segment-mb", "inf"], ["--max-segment-mb"]),
        (["probe", "http://127.0.0.1:9", "--timeout", "nan"], ["--timeout"]),
        (["probe", "http://127.0.0.1:9", "--probe-header", "X=é☃"], ["--probe-header"]),
        # Its own listen address as the upstream: one request forwarded to itself until no socket was left.
        (["record", "--upstream", "http://127.0.0.1:8787"], ["own --listen", "forwarded to itself"]),
        (["record", "--upstream", "http://localhost:18794", "--listen", "127.0.0.1:18794"], ["own --listen"]),
        (["record", "--upstream", "http://127.0.0.1:18794", "--listen", "0.0.0.0:18794"], ["own --listen"]),
    ],
)
def test_record_and_probe_refuse_what_they_cannot_use(tmp_path: Path, args: list[str], words: list[str]) -> None:
    refused(invoke(*args, "--out", str(tmp_path / "r")) if args[0] == "record" else invoke(*args), *words)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--speeds", "nan"], ["speeds"]),
        (["--search", "--start-speed", "nan"], ["--start-speed"]),
        (["--speeds", "1", "--min-duration", "inf"], ["--min-duration"]),
        (["--speeds", "1", "--min-requests", "1000000000000"], ["--min-requests"]),
        (["--concurrency-levels", "99999999999999999999"], ["concurrency levels"]),
    ],
)
def test_sweep_refuses_loads_it_cannot_run(capture: Path, tmp_path: Path, args: list[str], words: list[str]) -> None:
    refused(
        invoke(
            "sweep", str(capture), "--target", "http://127.0.0.1:9", "--out", str(tmp_path / "s"), "--slo", "e2e:p90<=1s", *args
        ),
        *words,
    )


def test_file_system_refusals_and_a_malformed_sweep_are_one_line_errors(capture: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    refused(invoke("stats", str(capture), "--cache-dir", str(afile)))
    refused(invoke("export", str(capture), "--parquet", str(afile / "sub")))
    bad = tmp_path / "bad-sweep"
    bad.mkdir()
    for text in ("{bad", "{}", "[]"):
        (bad / "sweep.json").write_text(text)
        refused(invoke("report", str(bad), "-o", str(tmp_path / "r.html")), "sweep")


def test_failing_queries_piped_into_sql_fail_the_command(capture: Path, tmp_path: Path) -> None:
    env = {"INFERTAP_CACHE": str(tmp_path / "cache")}
    assert invoke("sql", str(capture), stdin="SELECT count(*) FROM exchanges;\n", env=env).exit_code == 0
    refused(invoke("sql", str(capture), stdin="SELEC 1;\nSELECT 1;\n", env=env), "1 query failed")


def test_mitm_with_a_mode_it_cannot_read_ends_at_once(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "infertap", "mitm", "--mode", "bogus", "--out", str(tmp_path / "m"), "--no-telemetry"],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )
    assert run.returncode != 0 and "--mode 'bogus'" in run.stderr and "Traceback" not in run.stderr


def test_small_refusals_and_warnings(capture: Path, tmp_path: Path) -> None:
    refused(
        invoke("replay", str(capture), "--target", "http://127.0.0.1:9", "--out", str(tmp_path / "o"), "--filter", "after=nan"),
        "after=",
    )
    refused(invoke("cat", str(capture), "--type", "bogus"), "bogus")
    assert invoke("cat", str(capture), "--type", "footer").exit_code == 0
    same = invoke("compare", str(capture), str(capture), env={"INFERTAP_CACHE": str(tmp_path / "cache")})
    assert same.exit_code == 0 and "A and B are the same capture" in same.output
    (tmp_path / "bad.har").write_text('{"log": {"entries": ["not an entry", 5]}}')
    refused(invoke("import", str(tmp_path / "bad.har"), "--out", str(tmp_path / "imp")), "none of its 2 entries")


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_replay_no_request_of_which_got_a_response_fails(capture: Path, tmp_path: Path) -> None:
    """A target that is down (here: a port nobody listens on) used to end in exit code 0 and
    'status codes None': now the command fails, naming why, and the capture keeps what was sent."""
    out = tmp_path / "o"
    target = f"http://127.0.0.1:{_closed_port()}"
    for extra in ([], ["--json"]):
        result = invoke("replay", str(capture), "--target", target, "--out", str(out), "--no-probe", *extra)
        refused(result, "none of the 2 requests sent got a response", "connect")
        if not extra:
            assert "no response ×2" in result.output
        ends = [x["end"] for x in CaptureReader(out).exchanges()]
        assert ends == ["upstream_error", "upstream_error"]
        for p in segment_paths(out):
            p.unlink()


def test_a_file_that_is_no_segment_is_not_a_capture(capture: Path, tmp_path: Path) -> None:
    """A text file given as a capture was read as a capture of nothing with a 'torn tail'."""
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    for command in ("info", "stats", "cat"):
        refused(invoke(command, str(text), env={"INFERTAP_CACHE": str(tmp_path / "cache")}), "not a capture")
    # A segment cut inside its first block head is still a capture with a torn tail, not "no capture".
    (segment,) = segment_paths(capture)
    cut = tmp_path / "cut.itap.zst"
    cut.write_bytes(segment.read_bytes()[:20])
    assert CaptureReader(cut).records() is not None and list(CaptureReader(cut).records()) == []
    result = invoke("info", str(cut))
    assert result.exit_code == 0 and "torn tail" in result.output


def test_a_reader_that_went_away_ends_the_command_quietly(capture: Path, tmp_path: Path) -> None:
    """`infertap cat CAP | head -1`: the pipe's reader gone, the command printed 'Error: Broken pipe'."""
    read, write = os.pipe()
    os.close(read)  # every write to ``write`` now fails with EPIPE
    try:
        run = subprocess.run(
            [sys.executable, "-m", "infertap", "cat", str(capture)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env={**os.environ, "INFERTAP_CACHE": str(tmp_path / "cache")},
        )
    finally:
        os.close(write)
    assert run.returncode != 0 and "Error" not in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_a_query_after_the_captures_is_the_query(capture: Path, tmp_path: Path) -> None:
    env = {"INFERTAP_CACHE": str(tmp_path / "cache")}
    last = invoke("sql", str(capture), "SELECT count(*) AS n FROM exchanges", "--json", env=env)
    assert last.exit_code == 0 and '"n": 2' in last.output, last.output
    refused(invoke("sql", str(capture), str(tmp_path / "nothing-here"), env=env), "nothing-here", "no such capture")


def test_several_queries_on_one_line_each_answer(capture: Path, tmp_path: Path) -> None:
    """`SELECT ...; SELECT ...;` on one line printed only the second answer (the first was dropped)."""
    env = {"INFERTAP_CACHE": str(tmp_path / "cache")}
    piped = invoke("sql", str(capture), "--json", stdin="SELECT count(*) AS a FROM exchanges; SELECT ';' AS b;\n", env=env)
    assert piped.exit_code == 0 and [json.loads(line) for line in piped.output.splitlines()] == [[{"a": 2}], [{"b": ";"}]]
    given = invoke("sql", str(capture), "--json", "-q", "SELECT 1 AS x; SELECT 2 AS y", env=env)
    assert given.exit_code == 0 and [json.loads(line) for line in given.output.splitlines()] == [[{"x": 1}], [{"y": 2}]]
    one = invoke("sql", str(capture), "--csv", "-q", "SELECT 3 AS z", env=env)
    assert one.exit_code == 0 and one.output.split() == ["z", "3"]


def test_every_repeated_q_answers_in_turn(capture: Path, tmp_path: Path) -> None:
    """`-q A -q B` ran only B (click kept the last), dropping A unsaid; each -q is parsed alone, so a
    trailing -- comment in one does not swallow the next, and --csv refuses two as it refuses `A; B`."""
    env = {"INFERTAP_CACHE": str(tmp_path / "cache")}
    given = invoke("sql", str(capture), "--json", "-q", "SELECT 1 AS x -- one", "-q", "SELECT 2 AS y", env=env)
    assert given.exit_code == 0, given.output
    assert [json.loads(line) for line in given.output.splitlines()] == [[{"x": 1}], [{"y": 2}]]
    one = invoke("sql", str(capture), "--json", "-q", "SELECT 2 AS y", env=env)
    assert [json.loads(line) for line in one.output.splitlines()] == [[{"y": 2}]]
    twice = invoke("sql", str(capture), "--csv", "-q", "SELECT 1 AS x", "-q", "SELECT 2 AS y", env=env)
    refused(twice, "--csv prints one table", "2 statements")
    assert "x" not in twice.stdout


def test_several_results_are_told_apart_in_every_format(capture: Path, tmp_path: Path) -> None:
    """Two results printed as CSV ran together ("x 1 y 2" read as one table whose second row is its
    header), and as JSON were two indented arrays one after the other, which no JSON reader takes."""
    env = {"INFERTAP_CACHE": str(tmp_path / "cache")}
    two = "SELECT 1 AS x, 'a\nb' AS t; SELECT 2 AS y"
    lines = invoke("sql", str(capture), "--json", "-q", two, env=env).output.splitlines()
    assert [json.loads(line) for line in lines] == [[{"x": 1, "t": "a\nb"}], [{"y": 2}]]  # one result a line
    one = invoke("sql", str(capture), "--json", "-q", "SELECT 1 AS x, 2 AS y", env=env).output
    assert one.splitlines() == ['[{"x": 1, "y": 2}]']  # one statement: one line, one array
    # A table each, under its own header, with its own row count.
    table = invoke("sql", str(capture), "-q", "SELECT 1 AS first_col; SELECT 2 AS second_col", env=env).output
    assert table.count("1 row(s)") == 2
    assert table.index("first_col") < table.index("1 row(s)") < table.index("second_col") < table.rindex("1 row(s)")
    # CSV holds one table: several statements are refused before any runs, from -q and from a script alike.
    for args, stdin in ((("-q", two), None), ((), "SELECT 1 AS x;\nSELECT 2 AS y;\n"), ((), "SELECT 1 AS x;\nSELEC 2;\n")):
        refused(invoke("sql", str(capture), "--csv", *args, stdin=stdin, env=env), "--csv prints one table", "2 statements")
        assert "x" not in invoke("sql", str(capture), "--csv", *args, stdin=stdin, env=env).stdout
    piped = invoke("sql", str(capture), "--csv", stdin="SELECT 3 AS z;\n", env=env)
    assert piped.exit_code == 0 and piped.output.split() == ["z", "3"]


def test_several_statements_typed_at_the_prompt_with_csv_are_refused_and_the_session_goes_on(
    capture: Path, tmp_path: Path
) -> None:
    """At an interactive prompt (a terminal on stdin) a line of two statements is refused as a bad
    query is, and the next line still answers."""
    primary, secondary = os.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "infertap", "sql", str(capture), "--csv"],
            stdin=secondary,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "INFERTAP_CACHE": str(tmp_path / "cache")},
        )
        os.close(secondary)
        os.write(primary, b"SELECT 1 AS x; SELECT 2 AS y;\nSELECT 3 AS z;\n\x04")
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(primary)
    assert proc.returncode == 0, err
    assert out.decode().split() == ["z", "3"]
    assert "error: --csv prints one table, and 2 statements were given" in err.decode()


def test_a_refused_combination_is_refused_before_any_capture_is_decoded(capture: Path, tmp_path: Path) -> None:
    """`sql --csv` with several -q decoded every capture (minutes for large ones) before refusing,
    as a query that doesn't parse did, and `report A B --extract bogus` decoded both runs first:
    each is refused now before the cache is touched. Must differ: the same commands, allowed, decode."""
    write_capture(tmp_path / "other", [{}, {}])
    a, b = str(capture), str(tmp_path / "other")
    cases = (
        (("sql", a, "--csv", "-q", "SELECT 1", "-q", "SELECT 2"), "--csv prints one table, and 2 statements"),
        (("sql", a, "--csv", "-q", "SELECT 1; SELECT 2"), "--csv prints one table, and 2 statements"),
        (("sql", a, "-q", "SELEC 1"), "syntax error"),
        (("sql", a, "--csv", "--json", "-q", "SELECT 1"), "choose one of --csv and --json"),
        (("compare", a, b, "--extract", "bogus"), "unknown extractor 'bogus'"),
        (("compare", a, b, "--top", "-1"), "--top"),
        (("report", a, b, "--extract", "bogus", "-o", str(tmp_path / "r.html")), "unknown extractor 'bogus'"),
        (("report", a, "--extract", "number", "-o", str(tmp_path / "r.html")), "a report of one run has none to compare"),
    )
    for i, (args, said) in enumerate(cases):
        cache = tmp_path / f"cache{i}"
        refused(invoke(*args, env={"INFERTAP_CACHE": str(cache)}), said)
        assert not cache.exists(), args
    script = invoke("sql", a, "--csv", stdin="SELECT 1;\nSELECT 2;\n", env={"INFERTAP_CACHE": str(tmp_path / "piped")})
    refused(script, "--csv prints one table, and 2 statements")
    assert not (tmp_path / "piped").exists() and not (tmp_path / "r.html").exists()
    for args in (("sql", a, "--csv", "-q", "SELECT 1"), ("compare", a, b, "--top", "0", "--json")):
        cache = tmp_path / f"allowed-{args[0]}"
        done = invoke(*args, env={"INFERTAP_CACHE": str(cache)})
        assert done.exit_code == 0 and cache.is_dir(), (args, done.output)
