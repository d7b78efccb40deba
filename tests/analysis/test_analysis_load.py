"""Loading captures into DuckDB: tables, many captures at once, the Parquet cache, export, bad input."""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from infertap.analysis import EXPORTED, Analysis, NoCapturesError, find_captures, locate_captures
from infertap.analysis.errors import AnalysisError
from infertap.capture.errors import CaptureCorruptError, UnsupportedFormatError
from infertap.capture.framing import Block, iter_blocks
from infertap.capture.identity import request_digest
from infertap.capture.reader import CaptureReader
from infertap.capture.segments import segment_paths
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from tests.analysis_builders import MS, RECORDER, body, enrichment, event, exchange, sse, write_capture
from tests.helpers import reseal_head

NOT_UTF8 = b"\xff\xfe raw \xc3"


def blocks(segment: Path) -> list[tuple[int, int]]:
    """(start, end) of each block of a segment."""
    data = segment.read_bytes()
    with open(segment, "rb") as f:
        return [(b.offset, b.offset + 28 + len(b.zframe)) for b in iter_blocks(f, len(data)) if isinstance(b, Block)]


def flip_a_byte(segment: Path) -> int:
    """Damages the first block's zstd frame in its middle; returns the block's offset."""
    data = bytearray(segment.read_bytes())
    start, end = blocks(segment)[0]
    data[(start + 28 + end) // 2] ^= 0x40
    segment.write_bytes(bytes(data))
    return start


def simple(path: Path, n: int = 3, first: int = 0) -> Path:
    return write_capture(
        path,
        [exchange(f"x{i}", sent_ms=10 * i, chunks=[(5, sse(event("a"))), (9, sse(event("b")))]) for i in range(first, first + n)],
    )


def test_every_table_holds_what_the_capture_says(tmp_path: Path) -> None:
    snapshot = {
        "type": "engine",
        "url": "http://engine.test",
        "wall": 1.8e9,
        "kind": "llama-server",
        "fingerprint": "f00d",
        "facts": {
            "version": {"value": "b5000", "source": "/props"},
            "models": {"value": ["m"], "source": "/v1/models"},
            "parallel_slots": {"value": 4, "source": "/props"},
            "quantization": {"value": None, "source": "not exposed"},
            "dtype": {"value": "Q4_1 79%, Q8_0 21%, F32 <1%", "source": "GGUF tensor types"},
        },
        "unknown": ["quantization"],
        "labels": {"gpu": "none"},
        "host": {"cpu": "x"},
    }
    records = [
        snapshot,
        exchange(
            "x",
            sent_ms=7,
            request=body("héllo", model="m", stream=True),
            query="a=1",
            session="s1",
            chunks=[(5, sse(event("a"))), (6, NOT_UTF8)],
            end_ms=8,
        ),
        exchange("replayed", sent_ms=20, chunks=[], source_id="x", repeat=0, scheduled_ns=19 * MS, lag_ns=1000, queue_ns=0),
        enrichment("x", prompt_ids=[5, 6, 7], output_count=1, server_timings={"source": "s", "prompt_ms": 1.0}),
    ]
    path = write_capture(tmp_path / "cap", records)
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        [x] = a.query("SELECT * FROM exchanges WHERE exchange_id = 'x'").records()
        [rep] = a.query(
            "SELECT source_id, repeat, scheduled_ns, lag_ns, queue_ns FROM exchanges WHERE exchange_id = 'replayed'"
        ).rows
        chunks = a.query("SELECT index, t_ns, size, bytes FROM chunks WHERE exchange_id = 'x' ORDER BY index").rows
        [engine] = a.query("SELECT * FROM engines").records()
        [enr] = a.query("SELECT * FROM enrichments").records()
        [run] = a.query("SELECT * FROM runs").records()
        [cap] = a.query("SELECT * FROM captures").records()
    req = body("héllo", model="m", stream=True)
    assert (x["capture"], x["recorder"], x["run_id"], x["capture_id"]) == (
        str(path.resolve()),
        "proxy",
        run["run_id"],
        cap["capture_id"],
    )
    assert (x["method"], x["path"], x["query"], x["session"], x["status"], x["end"]) == (
        "POST",
        "/v1/chat/completions",
        "a=1",
        "s1",
        200,
        "complete",
    )
    assert (x["model"], x["stream"], x["generation"], x["request_bytes"]) == ("m", True, True, len(req))
    assert (x["response_bytes"], x["n_chunks"], x["headers_ns"], x["end_ns"]) == (
        len(sse(event("a"))) + len(NOT_UTF8),
        2,
        5 * MS,
        8 * MS,
    )
    assert x["sent_wall_ns"] == round(run["wall"] * 1e9) + 7 * MS
    assert x["source_id"] is None and x["lag_ns"] is None  # a recording, not a replay
    assert rep == ("x", 0, 19 * MS, 1000, 0)
    assert chunks == [(0, 5 * MS, len(sse(event("a"))), sse(event("a"))), (1, 6 * MS, len(NOT_UTF8), NOT_UTF8)]
    assert (engine["kind"], engine["version"], engine["fingerprint"], engine["parallel_slots"], engine["quantization"]) == (
        "llama-server",
        "b5000",
        "f00d",
        "4",
        None,
    )
    assert json.loads(engine["models"]) == ["m"] and json.loads(engine["facts"])["version"]["source"] == "/props"
    assert engine["dtype"] == "Q4_1 79%, Q8_0 21%, F32 <1%"  # a column of its own; its source stays in facts
    assert (enr["exchange_id"], enr["prompt_tokens"], enr["prompt_ids"], enr["output_tokens"]) == ("x", 3, [5, 6, 7], 1)
    assert json.loads(enr["settings"])["temperature"]["source"] == "request"
    assert json.loads(enr["server_timings"])["prompt_ms"] == 1.0
    assert (run["recorder"], run["upstream"], json.loads(run["labels"])) == ("proxy", RECORDER["upstream"], {"gpu": "none"})
    assert (cap["closed_cleanly"], json.loads(cap["torn"]), cap["segments"]) == (True, [], 1)


def test_many_captures_from_folders_globs_and_files(tmp_path: Path) -> None:
    shards = tmp_path / "shards"
    simple(shards / "b", n=2)
    simple(shards / "a", n=3)
    (shards / "notes.txt").write_text("not a capture")
    single = simple(tmp_path / "single", n=1)
    (segment,) = segment_paths(single)
    found = find_captures([shards, str(tmp_path / "shard*" / "a"), segment])
    assert found == [shards / "a", shards / "b", segment]  # the glob's match was already there: once
    with Analysis([shards, segment], cache_dir=tmp_path / "cache") as a:
        per_capture = dict(a.query("SELECT capture, count(*) FROM metrics GROUP BY capture").rows)
        # x0 exists in all three captures: rows are told apart by capture
        assert a.query("SELECT count(*) FROM metrics WHERE exchange_id = 'x0' AND ttft_ns = 5 * 1000000").rows == [(3,)]
    assert per_capture == {str((shards / "a").resolve()): 3, str((shards / "b").resolve()): 2, str(segment.resolve()): 1}


def test_arguments_that_name_no_capture(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(NoCapturesError, match="no such capture"):
        find_captures([tmp_path / "missing"])
    with pytest.raises(NoCapturesError, match="matches"):
        find_captures([str(tmp_path / "nothing-*")])
    with pytest.raises(NoCapturesError, match=f"{tmp_path / 'empty'}: not a capture"):
        find_captures([tmp_path / "empty"])


def test_a_glob_leaves_out_its_matches_that_hold_no_capture_and_says_so(tmp_path: Path) -> None:
    run = simple(tmp_path / "run-1", n=1)
    (tmp_path / "run-notes.txt").write_text("not a capture")
    found = locate_captures([str(tmp_path / "run-*")])
    assert found.captures == find_captures([str(tmp_path / "run-*")]) == [run]
    assert [(x.pattern, x.path.name) for x in found.left_out] == [(str(tmp_path / "run-*"), "run-notes.txt")]
    assert locate_captures([run]).left_out == []  # must match: nothing left out of a capture named as it is
    with Analysis([str(tmp_path / "run-*")], cache_dir=tmp_path / "cache") as a:
        assert a.query("SELECT count(*) FROM exchanges").rows == [(1,)]
        assert [w for w in a.warnings if "left out" in w] == [f"{tmp_path / 'run-*'}: left out {tmp_path / 'run-notes.txt'}: "
                                                            "not a capture (a segment starts with an infertap block head; this file doesn't)"]  # fmt: skip
    with pytest.raises(NoCapturesError, match="run-notes.txt: not a capture"):
        find_captures([run, tmp_path / "run-notes.txt"])


def _entries(cache: Path) -> list[Path]:
    return sorted(p for p in (cache / "captures").glob("*/*") if p.is_dir())


def test_a_lone_surrogate_escape_in_an_answer_is_read_not_a_crash(tmp_path: Path) -> None:
    """`{"content": "a\\ud800b"}` is valid JSON whose string UTF-8 can't hold: the decode of the
    whole capture failed (stats, sql, compare). Now the text keeps U+FFFD in its place."""
    whole = json.dumps(
        {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "c\ud800d"}}]}
    )
    cap = write_capture(
        tmp_path / "cap",
        [
            exchange(
                "s", chunks=[(5, b'data: {"choices":[{"index":0,"delta":{"content":"a\\ud800b"}}]}\n\n'), (6, sse("[DONE]"))]
            ),
            exchange("w", request=body(stream=False), chunks=[(5, whole.encode())]),
            exchange("t", chunks=[(5, sse(event("plain"))), (6, sse("[DONE]"))]),
        ],
    )
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        content = dict(a.sql("SELECT exchange_id, string_agg(content, '') FROM events GROUP BY ALL").fetchall())
        assert content["s"] == "a\ufffdb" and content["t"] == "plain"
        assert a.count("exchanges") == 3 and a.count("metrics") == 3


def test_integers_beyond_64_bits_read_as_unknown_not_a_crash(tmp_path: Path) -> None:
    """JSON's integers are unbounded: a seed of 2**64-1, a usage count of 10**20 or llama.cpp's
    prompt_n of 2**63 made every analysis command fail with an OverflowError. Each is unknown now,
    its neighbours kept."""
    usage = {"prompt_tokens": 10**20, "completion_tokens": 2, "total_tokens": 10**20 + 2}
    timings = {"prompt_n": 2**63, "predicted_n": 2, "prompt_ms": 1.0, "cache_n": 10**400}
    answer = sse(event("x", role="assistant"), event(finish="stop", usage=usage, timings=timings))
    request = body(seed=2**64 - 1, max_tokens=2**63, top_k=10**30, temperature=0.5)
    cap = write_capture(
        tmp_path / "cap",
        [
            exchange("h", request=request, chunks=[(5, answer)]),
            enrichment("h", prompt_ids=[1, 2**64 - 1], output_count=2**63),
        ],
    )
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        assert a.sql("SELECT seed, max_tokens, top_k, temperature FROM requests").fetchall() == [(None, None, None, 0.5)]
        row = a.sql(
            "SELECT usage_prompt_tokens, usage_completion_tokens, server_prompt_tokens, server_decode_tokens, server_cached_tokens,"
            " server_prompt_ms FROM exchanges"
        ).fetchall()
        assert row == [(None, 2, None, 2, None, 1.0)]
        assert a.sql("SELECT prompt_ids, output_tokens FROM enrichments").fetchall() == [([1, None], None)]
    result = CliRunner().invoke(cli, ["stats", str(cap), "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert "workload: prompt_tokens 2 " in result.output  # the enrichment's count, not the usage's


def test_the_cache_is_reused_then_rebuilt_when_a_segment_is_appended(tmp_path: Path) -> None:
    cap, cache = simple(tmp_path / "cap", n=3), tmp_path / "cache"
    with Analysis([cap], cache_dir=cache) as a:
        assert a.decoded == [cap.resolve()] and a.count("exchanges") == 3
    [entry] = _entries(cache)
    stamp = (entry / "exchanges.parquet").stat().st_mtime_ns
    with Analysis([cap], cache_dir=cache) as a:
        assert a.decoded == [] and a.count("exchanges") == 3
    assert _entries(cache) == [entry] and (entry / "exchanges.parquet").stat().st_mtime_ns == stamp

    simple(cap, n=2, first=3)  # a second run appends a segment
    with Analysis([cap], cache_dir=cache) as a:
        assert a.decoded == [cap.resolve()]
        assert a.count("exchanges") == 5 and a.count("runs") == 2
    [new] = _entries(cache)
    assert new != entry and not entry.exists()  # the stale version is gone

    os.utime(segment_paths(cap)[0], ns=(1, 1))  # a capture touched in place is decoded again too
    with Analysis([cap], cache_dir=cache) as a:
        assert a.decoded == [cap.resolve()]


def test_an_open_analysis_keeps_its_entry_while_a_newer_decode_is_made(tmp_path: Path) -> None:
    """A `sql` session open while a run is appended, and another command decodes the newer capture:
    the session's tables were removed under it. Now the older entry stays until the session ends."""
    cap, cache = simple(tmp_path / "cap", n=3), tmp_path / "cache"
    with Analysis([cap], cache_dir=cache) as session:
        [entry] = _entries(cache)
        simple(cap, n=2, first=3)  # a second run appends a segment
        with Analysis([cap], cache_dir=cache) as newer:
            assert newer.decoded == [cap.resolve()] and newer.count("exchanges") == 5
        assert entry.exists() and session.count("exchanges") == 3  # still readable, as it was loaded
        assert len(_entries(cache)) == 2
    assert not entry.exists() and len(_entries(cache)) == 1  # gone with its reader
    assert not [p for p in cache.rglob(".reader-*")]

    # Not held (no session open): a newer decode removes the older entry at once, as before.
    with Analysis([cap], cache_dir=cache) as a:
        assert a.decoded == [] and a.count("exchanges") == 5
    [current] = _entries(cache)
    simple(cap, n=1, first=5)
    with Analysis([cap], cache_dir=cache) as a:
        assert a.count("exchanges") == 6
    assert not current.exists() and len(_entries(cache)) == 1


def test_a_reader_that_died_holds_no_entry(tmp_path: Path) -> None:
    import subprocess
    import sys

    cap, cache = simple(tmp_path / "cap", n=2), tmp_path / "cache"
    with Analysis([cap], cache_dir=cache):
        pass
    [entry] = _entries(cache)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    (entry / f".reader-{int(ended.stdout)}-deadbeef").touch()  # a session killed before it could release
    simple(cap, n=1, first=2)
    with Analysis([cap], cache_dir=cache) as a:
        assert a.count("exchanges") == 3
    assert not entry.exists() and len(_entries(cache)) == 1


def test_the_cache_lives_under_infertap_cache_and_is_owner_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "envcache"))
    cap = simple(tmp_path / "cap")
    with Analysis([cap]) as a:
        assert a.decoded == [cap.resolve()]
    [entry] = _entries(tmp_path / "envcache")
    assert json.loads((entry / "meta.json").read_text())["rows"]["exchanges"] == 3
    for folder in (tmp_path / "envcache" / "captures", entry.parent, entry):
        assert folder.stat().st_mode & 0o077 == 0, folder


def test_duckdb_keeps_its_memory_limit_and_spills_to_a_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cap = simple(tmp_path / "cap", n=3)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INFERTAP_DUCKDB_MEMORY", "64MB")
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        assert a.sql("SELECT current_setting('memory_limit')").fetchall()[0][0] == "61.0 MiB"  # 64 MB, as DuckDB prints it
        # A table of ~200 MB can't stay in 64 MB: it spills, into the analysis's own folder.
        spill = Path(a.sql("SELECT current_setting('temp_directory')").fetchall()[0][0])
        assert spill.parent == Path(tempfile.gettempdir()) and spill.name.startswith("infertap-duckdb-")
        a.sql("CREATE TEMP TABLE big AS SELECT i, md5(i::VARCHAR) AS h FROM range(3000000) t(i)")
        assert a.sql("SELECT count(*) FROM big").fetchall()[0][0] == 3_000_000
        assert any(spill.iterdir())
    assert not spill.exists()  # removed with the analysis
    assert not (tmp_path / ".tmp").exists()  # never DuckDB's default, the working directory
    with Analysis([cap], cache_dir=tmp_path / "cache", memory_limit="128MB") as a:  # the argument wins
        assert a.sql("SELECT current_setting('memory_limit')").fetchall()[0][0] == "122.0 MiB"
    with pytest.raises(AnalysisError, match="memory limit 'lots'"):
        Analysis([cap], cache_dir=tmp_path / "cache", memory_limit="lots")


def test_spill_folders_of_ended_processes_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    """A process killed inside an analysis leaves its spill folder: the next analysis removes it (its
    pid names no process), never the folder of one still running."""
    import subprocess
    import sys

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    root = Path(tempfile.gettempdir())
    stale = root / f"infertap-duckdb-{int(ended.stdout)}-test"
    live = root / f"infertap-duckdb-{os.getpid()}-test"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "duckdb_temp_storage-0.tmp").write_bytes(b"x")
    try:
        with Analysis([simple(tmp_path / "cap", n=1)], cache_dir=tmp_path / "cache") as a:
            mine = Path(a.sql("SELECT current_setting('temp_directory')").fetchall()[0][0])
            assert mine.name.startswith(f"infertap-duckdb-{os.getpid()}-") and mine.stat().st_mode & 0o077 == 0
        assert not stale.exists() and (live / "duckdb_temp_storage-0.tmp").exists() and not mine.exists()
    finally:
        shutil.rmtree(stale, ignore_errors=True)
        shutil.rmtree(live, ignore_errors=True)


def test_requests_carry_each_generation_requests_digest_as_the_capture_package_takes_it(tmp_path: Path) -> None:
    cap = write_capture(
        tmp_path / "cap",
        [
            exchange("gen", request=body("é and more")),
            exchange("models", request=b"", path="/v1/models", method="GET"),
        ],
    )
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        rows = dict(a.sql("SELECT exchange_id, digest FROM requests").fetchall())
    [record] = [r for r in CaptureReader(cap).records() if r.get("id") == "gen"]
    assert rows["gen"] == request_digest("POST", "/v1/chat/completions", "", record["request_body"])
    assert rows["gen"] != request_digest("POST", "/v1/chat/completions", "", body("e and more"))  # must differ
    assert rows["models"] is None  # not a generation request: no digest


def test_exchanges_that_repeat_an_id_are_named_apart_and_said(tmp_path: Path) -> None:
    """A segment copied in twice: each exchange is still one row, joined with its own rows only, and
    the workload identity is the capture package's (joined by id, 3 copies counted 3 x 3 x 3 times)."""
    from click.testing import CliRunner

    from infertap.analysis.workload_identity import capture_identity
    from infertap.capture.identity import workload_identity
    from infertap.cli import cli

    copies = [exchange("same", sent_ms=10 * i, request=body(f"q{i}"), chunks=[(5, sse(event(f"a{i}")))]) for i in range(3)]
    records = [
        *copies,
        exchange("other", sent_ms=40, chunks=[(5, sse(event("b"), event("c")))]),
        enrichment("same", output_count=7),
    ]
    cap = write_capture(tmp_path / "cap", records)
    unique = write_capture(tmp_path / "unique", [exchange(f"x{i}", sent_ms=10 * i, request=body(f"q{i}")) for i in range(3)])
    with Analysis([cap, unique], cache_dir=tmp_path / "cache") as a:
        ids = [r[0] for r in a.sql("SELECT exchange_id FROM exchanges WHERE capture = ? ORDER BY sent_ns", [str(cap)]).fetchall()]
        assert ids == ["same", "same~2", "same~3", "other"]
        assert a.count("metrics") == 4 + 3 and a.count("requests") == 4 + 3
        events = dict(a.sql("SELECT exchange_id, count(*) FROM events WHERE capture = ? GROUP BY ALL", [str(cap)]).fetchall())
        assert events == {"same": 1, "same~2": 1, "same~3": 1, "other": 2}
        tokens = dict(a.sql("SELECT exchange_id, output_tokens FROM metrics WHERE capture = ?", [str(cap)]).fetchall())
        # The enrichment names "same" alone: which copy it was written for is unknown, so it is attached to none.
        assert tokens["same"] == 1 and tokens["same~2"] == 1
        for path in (cap, unique):
            assert capture_identity(a, str(path)) == workload_identity(path)
        assert capture_identity(a, str(cap)).requests == 4
        [warning] = a.warnings  # the capture without repeats says nothing
        assert str(cap) in warning and "2 exchanges carry the id of an earlier one" in warning and "'same'" in warning
        assert (
            "1 enrichment names no exchange the capture holds (an id several exchanges carry with no occurrence, "
            "or an occurrence past the id's exchanges): attached to none" in warning
        )
    said = CliRunner().invoke(cli, ["stats", str(cap), "--cache-dir", str(tmp_path / "cache")])
    assert said.exit_code == 0 and "carry the id of an earlier one" in said.output


def test_a_decode_finds_repeated_ids_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The decode counts the ids it reads (in one process, or in the pass over the whole of a decode
    in parts), so that no query over its exchanges table (a DuckDB connection and a scan of every
    id) runs after it; the repeats are said as before."""
    from infertap.analysis import decoding

    queried: list[list[Path]] = []
    query = decoding.repeated_ids

    def counted(files: list[Path], column: str) -> frozenset[str]:
        queried.append(files)
        return query(files, column)

    monkeypatch.setattr(decoding, "repeated_ids", counted)
    unique = write_capture(tmp_path / "unique", [exchange(f"x{i}", sent_ms=i, request=body(f"q{i}")) for i in range(4)])
    assert "repeated_ids" not in decoding.decode_capture(unique, tmp_path / "u", str(unique))
    copies = [exchange(x, sent_ms=i, request=body(f"q{i}")) for i, x in enumerate(["a", "b", "a", "c", "b", "a"])]
    cap = write_capture(tmp_path / "copies", copies)
    meta = decoding.decode_capture(cap, tmp_path / "c", str(cap))
    assert meta["repeated_ids"] == {"ids": 2, "exchanges": 3, "example": "a", "enrichments": 0}
    monkeypatch.setattr(decoding, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(decoding, "PART_EXCHANGES", 1)
    assert decoding.decode_capture(cap, tmp_path / "p", str(cap), workers=2)["repeated_ids"] == meta["repeated_ids"]
    assert (tmp_path / "p" / "part-1").exists() is False  # named apart in one process, after the parts
    assert "repeated_ids" not in decoding.decode_capture(unique, tmp_path / "up", str(unique), workers=2)
    assert (tmp_path / "up" / "part-1" / "exchanges.parquet").exists()
    assert queried == []


def test_export_round_trips_through_duckdb(tmp_path: Path) -> None:
    cap = write_capture(
        tmp_path / "cap",
        [
            exchange("x", chunks=[(5, sse(event("a"))), (9, sse(event("b"))), (12, NOT_UTF8)]),
            exchange("y", sent_ms=20, chunks=[(5, sse(event("a")))]),
            enrichment("x", prompt_ids=[1, 2], output_count=2),
            {"type": "engine", "kind": "llama-server", "facts": {}},
        ],
    )
    out, flat = tmp_path / "export", tmp_path / "flat"
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        counts = a.export_parquet(out)
        assert a.export_parquet(flat, partition_by=None) == counts
        expected = {name: a.count(name) for name in EXPORTED}
        metrics = a.query("SELECT * FROM metrics ORDER BY exchange_id")
    assert counts == expected and expected["chunks"] == 4 and expected["itl"] == 1
    con = duckdb.connect()
    columns = ", ".join(f'"{c}"' for c in metrics.columns)
    for name in EXPORTED:  # hive partitions (recorder_id=...) and flat files hold the same rows
        assert con.sql(f"SELECT count(*) FROM read_parquet('{out / name}/**/*.parquet')").fetchall() == [(expected[name],)], name
        assert con.sql(f"SELECT count(*) FROM read_parquet('{flat / name}.parquet')").fetchall() == [(expected[name],)], name
    for source in (f"'{flat}/metrics.parquet'", f"read_parquet('{out}/metrics/*/*.parquet', hive_partitioning=true)"):
        assert con.sql(f"SELECT {columns} FROM {source} ORDER BY exchange_id").fetchall() == metrics.rows
    assert con.sql(f"SELECT bytes FROM read_parquet('{flat}/chunks.parquet') WHERE index = 2").fetchall() == [(NOT_UTF8,)]
    assert con.sql(f"SELECT bytes FROM read_parquet('{out}/chunks/*/*.parquet') WHERE index = 2").fetchall() == [(NOT_UTF8,)]
    con.close()


def test_a_torn_tail_is_used_and_reported_even_from_the_cache(tmp_path: Path) -> None:
    cap = simple(tmp_path / "cap", n=3)
    (seg,) = segment_paths(cap)
    start, end = blocks(seg)[-1]  # the footer's block
    seg.write_bytes(seg.read_bytes()[: (start + end) // 2])
    for _ in range(2):
        with Analysis([cap], cache_dir=tmp_path / "cache") as a:
            assert a.count("exchanges") == 3
            [warning] = a.warnings
            assert str(seg) in warning and "torn tail" in warning
            assert a.query("SELECT closed_cleanly FROM captures").rows == [(False,)]
    assert a.decoded == []  # the second load came from the cache, warning included


def test_a_corrupt_capture_is_an_error_naming_the_file_and_leaves_no_cache(tmp_path: Path) -> None:
    cap = simple(tmp_path / "cap")
    (seg,) = segment_paths(cap)
    start = flip_a_byte(seg)
    with pytest.raises(CaptureCorruptError, match=f"{seg}: corrupt capture data at byte offset {start}"):
        Analysis([cap], cache_dir=tmp_path / "cache")
    assert [p.name for p in (tmp_path / "cache" / "captures").glob("*/*")] == []


def test_an_unknown_format_version_is_refused(tmp_path: Path) -> None:
    cap = simple(tmp_path / "cap")
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    struct.pack_into("<H", data, 12, 99)
    reseal_head(data, 0)
    seg.write_bytes(bytes(data))
    with pytest.raises(UnsupportedFormatError, match=f"{seg}: capture format 99"):
        Analysis([cap], cache_dir=tmp_path / "cache")


def test_an_empty_capture_loads_as_empty_tables(tmp_path: Path) -> None:
    with CaptureWriter(tmp_path / "cap", recorder=RECORDER):
        pass
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        assert {name: a.count(name) for name in ("exchanges", "chunks", "events", "metrics", "itl")} == dict.fromkeys(
            ("exchanges", "chunks", "events", "metrics", "itl"), 0
        )
        assert a.count("captures") == 1 and a.count("runs") == 1
        assert "ttft_ns" in a.query("SELECT * FROM metrics").columns


def test_decoding_in_worker_processes_gives_the_same_tables(tmp_path: Path) -> None:
    captures = [simple(tmp_path / f"shard{i}", n=2 + i, first=10 * i) for i in range(3)]
    query = "SELECT * EXCLUDE (capture_id, run_id, sent_wall_ns, end_wall_ns) FROM metrics ORDER BY exchange_id"
    with Analysis(captures, cache_dir=tmp_path / "serial", workers=1) as serial:
        expected = serial.query(query).rows
    with Analysis(captures, cache_dir=tmp_path / "parallel", workers=3) as parallel:
        assert sorted(parallel.decoded) == sorted(c.resolve() for c in captures)
        assert [c.capture for c in parallel.captures] == [c.resolve() for c in captures]  # in the order given
        assert parallel.query(query).rows == expected and len(expected) == 9


def test_a_corrupt_shard_fails_the_parallel_load_with_its_name(tmp_path: Path) -> None:
    good, bad = simple(tmp_path / "good"), simple(tmp_path / "bad")
    (seg,) = segment_paths(bad)
    start = flip_a_byte(seg)
    with pytest.raises(CaptureCorruptError, match=f"{seg}: corrupt capture data at byte offset {start}") as info:
        Analysis([good, bad], cache_dir=tmp_path / "cache", workers=2)
    assert (info.value.path, info.value.offset) == (str(seg), start)


def _tables(folder: Path) -> dict[str, list[tuple]]:
    from infertap.analysis.decoding import table_files
    from infertap.analysis.schema import TABLES

    con = duckdb.connect()
    query = "SELECT * FROM read_parquet(?) ORDER BY ALL"
    return {name: con.execute(query, [[str(f) for f in table_files(folder, name)]]).fetchall() for name in TABLES}


def _agent_capture(path: Path, n: int, prompt_ids: str) -> Path:
    """Agent sessions (shared prefixes, tool calls, linking), then a second run: an engine snapshot,
    telemetry, exchanges of other kinds and enrichments (``prompt_ids``: "some" or "all" requests')."""
    from bench.agent_scale import build

    build(path, n, seed=3)
    ids = [r["id"] for r in CaptureReader(path).records() if r["type"] == "exchange"]
    extra = [
        exchange(
            "plain",
            sent_ms=1,
            request=body("not streamed", stream=False),
            headers=[["content-type", "application/json"]],
            chunks=[(3, json.dumps({"choices": [{"index": 0, "message": {"content": "ok"}}]}).encode())],
        ),
        exchange("models", request=b"", path="/v1/models", method="GET"),
    ]
    with CaptureWriter(path, recorder=RECORDER) as writer:
        writer.write({"type": "engine", "url": "http://engine.test", "wall": 1.8e9, "kind": "vllm", "facts": {}})
        writer.write({"type": "telemetry", "wall": 1.8e9 + 1, "source": "gpu", "samples": [["power_w", {"gpu": "0"}, 300.0]]})
        for rec in extra:
            writer.write(rec)
        chosen = [*ids, "plain"] if prompt_ids == "all" else ids[::7]
        for i, xid in enumerate(chosen):
            writer.write(enrichment(xid, prompt_ids=[1, 2, 3, *range(i % 5)], output_count=i % 4))
    return path


@pytest.mark.parametrize("prompt_ids", ["some", "all"])
def test_a_capture_decoded_in_parts_holds_the_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prompt_ids: str) -> None:
    """Several processes, each a part of the exchanges, then the pass over the whole: every table
    holds what one process writes (prefix reuse in bytes and in tokens, session linking across parts)."""
    from infertap.analysis import decoding
    from infertap.analysis.decoding import decode_capture

    cap = _agent_capture(tmp_path / "cap", 300, prompt_ids)
    serial = decode_capture(cap, tmp_path / "serial", str(cap))
    monkeypatch.setattr(decoding, "PARALLEL_BYTES", 0)  # small as it is, decoded in parts
    monkeypatch.setattr(decoding, "PART_EXCHANGES", 7)
    parts = decode_capture(cap, tmp_path / "parts", str(cap), workers=2)
    assert (tmp_path / "parts" / "part-1" / "exchanges.parquet").exists()  # it did run in parts
    assert parts == serial
    expected, got = _tables(tmp_path / "serial"), _tables(tmp_path / "parts")
    assert got == expected
    turns = expected["turns"]
    assert len(expected["exchanges"]) == 302 and sum(t[4] is not None for t in turns) > 200  # linked turns, many across parts
    assert {p[2] for p in expected["prefixes"]} == {"tokens" if prompt_ids == "all" else "bytes"}


def test_a_damaged_capture_decoded_in_parts_says_what_one_process_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from infertap.analysis import decoding
    from infertap.analysis.decoding import decode_capture

    monkeypatch.setattr(decoding, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(decoding, "PART_EXCHANGES", 1)
    torn = simple(tmp_path / "torn", n=6)
    (seg,) = segment_paths(torn)
    seg.write_bytes(seg.read_bytes()[:-5])  # inside the footer's block
    serial = decode_capture(torn, tmp_path / "t-serial", str(torn))
    parts = decode_capture(torn, tmp_path / "t-parts", str(torn), workers=2)
    assert parts == serial and parts["torn"] and _tables(tmp_path / "t-parts") == _tables(tmp_path / "t-serial")
    bad = simple(tmp_path / "bad", n=6)
    (seg,) = segment_paths(bad)
    start = flip_a_byte(seg)
    with pytest.raises(CaptureCorruptError, match=f"{seg}: corrupt capture data at byte offset {start}"):
        decode_capture(bad, tmp_path / "b-parts", str(bad), workers=2)
    copies = write_capture(tmp_path / "copies", [exchange("same", sent_ms=i, request=body(f"q{i}")) for i in range(4)])
    parts = decode_capture(copies, tmp_path / "c-parts", str(copies), workers=2)  # named apart, in one process
    assert parts["repeated_ids"] == {"ids": 1, "exchanges": 3, "example": "same", "enrichments": 0}
    assert sorted(r[5] for r in _tables(tmp_path / "c-parts")["exchanges"]) == ["same", "same~2", "same~3", "same~4"]


def test_a_script_without_a_main_guard_decodes_in_its_own_process(tmp_path: Path) -> None:
    """A worker process starts by running the caller's script again, all of its top level that
    ``if __name__ == "__main__"`` doesn't guard: called from there, infertap starts no worker (the
    script's statements run once, no worker fails), whether one large capture or several are
    decoded; called under the guard, the workers do the decode."""
    import subprocess
    import sys

    caps = [simple(tmp_path / f"cap{i}", n=5) for i in range(2)]

    def run(name: str, guarded: bool, captures: list[Path]) -> tuple[list[str], str]:
        body = (
            f"with Analysis({[str(c) for c in captures]!r}, cache_dir={str(tmp_path / name)!r}, workers=2) as a:\n"
            "    print('exchanges', a.count('exchanges'), [c.decoded for c in a.captures])\n"
        )
        script = tmp_path / f"{name}.py"
        script.write_text(
            "import os\n"
            "from infertap.analysis import Analysis, decoding\n"
            "decoding.PARALLEL_BYTES = 0\n"
            "os.write(1, b'top level ran\\n')  # one write: the workers' lines never interleave\n"
            + ("if __name__ == '__main__':\n" + "".join(f"    {line}\n" for line in body.splitlines()) if guarded else body)
        )
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines(), done.stderr

    for name, captures in (("one", caps[:1]), ("two", caps)):
        out, err = run(name, False, captures)
        assert out == ["top level ran", f"exchanges {5 * len(captures)} {[True] * len(captures)}"], (out, err)
        assert "Error" not in err  # no worker started, so none failed
    out, _ = run("guarded", True, caps[:1])
    assert out.count("top level ran") == 1 + 2  # the two parts' workers ran the script (its guard held)
    assert out[-1] == "exchanges 5 [True]"


def test_workers_fork_from_a_server_where_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The decode's workers are forked from a forkserver (the modules imported once, not by each),
    and spawned where the platform has none."""
    import multiprocessing

    from infertap.spawning import worker_context

    assert worker_context("infertap.analysis.decoding").get_start_method() == "forkserver"
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["spawn"])
    assert worker_context("infertap.analysis.decoding").get_start_method() == "spawn"


def test_decode_workers_start_with_the_decoder_and_arrow_imported(tmp_path: Path) -> None:
    """Every part's worker wrote Parquet with Arrow and numpy, which each imported again (0.2 s CPU
    a worker) after its fork: the server they are forked from imports them once."""
    import subprocess
    import sys

    script = tmp_path / "pool.py"
    script.write_text(
        "import sys\n"
        "from infertap.analysis.decoding import decode_pool\n"
        "def imported():\n"
        "    return [m in sys.modules for m in ('infertap.analysis.decode', 'pyarrow.parquet', 'numpy')]\n"
        "if __name__ == '__main__':\n"
        "    print('arrow here', 'pyarrow' in sys.modules)\n"
        "    with decode_pool(2, 'infertap.analysis.decoding') as pool:\n"
        "        print([pool.submit(imported).result() for _ in range(2)])\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["arrow here False", str([[True, True, True]] * 2)]


@pytest.mark.parametrize(
    ("source", "guarded"),
    [
        ("if __name__ == '__main__':\n    x()\n", True),
        ("if '__main__' == __name__:\n    x()\n", True),
        ("if __name__ != '__main__':\n    x()\n", False),
        ("if __name__ == '__mp_main__':\n    x()\n", False),
        ("if name == '__main__':\n    x()\n", False),
        ("if __name__ == '__main__' == y:\n    x()\n", False),
        ("x()\n", False),
    ],
)
def test_what_reads_as_a_main_guard(source: str, guarded: bool) -> None:
    import ast

    from infertap.spawning import _main_guard

    assert _main_guard(ast.parse(source).body[0]) is guarded


def test_decode_workers_end_when_their_caller_is_killed(tmp_path: Path) -> None:
    """A killed analysis takes its part workers with it, instead of leaving them decoding."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    cap = simple(tmp_path / "cap", n=5)
    pids = tmp_path / "workers"
    script = tmp_path / "slow.py"
    script.write_text(
        "import os, time\n"
        "from infertap.analysis import Analysis, decoding\n"
        "decoding.PARALLEL_BYTES = 0\n"
        "if __name__ == '__mp_main__':  # in each worker: say so, then take long over its part\n"
        f"    open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "    import infertap.analysis.decode as decode  # the parts' decoder, looked up when a part starts\n"
        "    decode.decode_records = lambda *a, **k: time.sleep(600)\n"
        "if __name__ == '__main__':\n"
        f"    Analysis([{str(cap)!r}], cache_dir={str(tmp_path / 'cache')!r}, workers=2)\n"
    )
    caller = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not (pids.exists() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = [int(p) for p in pids.read_text().split()]
        assert len(workers) == 2 and all(psutil.pid_exists(p) for p in workers)
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + 30
    while any(map(running, workers)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(running, workers))


def test_a_key_value_folder_above_the_cache_is_no_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB reads `key=value` folders of a file's path as hive partitions: a cache under
    `.../status=200/` made every exchange's status 200 (and `model=x/` every model x)."""
    from infertap.analysis.compare import compare
    from tests.helpers import write_capture as write_by_hand

    xs = [{"status": 200}, {"status": 200}, {"status": 500}]
    write_by_hand(tmp_path / "a", xs)
    write_by_hand(tmp_path / "b", xs)
    cache = tmp_path / "model=x" / "status=200" / "team=ml"
    with Analysis([tmp_path / "a"], cache_dir=cache) as a:
        assert sorted(a.sql("SELECT status FROM exchanges").fetchall()) == [(200,), (200,), (500,)]
        assert "team" not in [c for c, *_ in a.sql("DESCRIBE exchanges").fetchall()]
        assert a.sql("SELECT count(*) FROM metrics WHERE ok").fetchall() == [(2,)]
    monkeypatch.setenv("INFERTAP_CACHE", str(cache))  # compare's own reads of the cache
    d = compare(tmp_path / "a", tmp_path / "b")
    assert d["pairing"]["pairs"] == 3 and d["divergence"]["exact_match_rate"] == 1
    assert next(r for r in d["speed"] if r["metric"] == "e2e")["a"]["n"] == 2  # the 500 is no ok request


def test_a_capture_still_written_is_decoded_as_it_was_when_the_decode_began(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parts and the pass over the whole each read the capture: a recorder appending meanwhile
    gave them different records (an IndexError, or exchanges left out). Every reader now reads the
    segments up to their sizes when the decode began."""
    from infertap.analysis import decoding
    from infertap.capture.segments import snapshot

    cap = simple(tmp_path / "live", n=40)
    sizes = snapshot(cap)
    with CaptureWriter(cap, recorder=RECORDER) as w:  # the recorder goes on: a segment of its own...
        w.write(exchange("late-0", sent_ms=1, chunks=[(5, sse(event("a")))]))
    with open(segment_paths(cap)[0], "ab") as f:  # ...and bytes past the first one's end, as a write in progress
        f.write(b"\x00" * 64)
    monkeypatch.setattr(decoding, "snapshot", lambda path: sizes)  # the decode began before both
    monkeypatch.setattr(decoding, "PARALLEL_BYTES", 0)
    parts = decoding.decode_capture(cap, tmp_path / "parts", str(cap), workers=2)
    serial = decoding.decode_capture(cap, tmp_path / "serial", str(cap), workers=1)
    assert parts["rows"]["exchanges"] == serial["rows"]["exchanges"] == 40
    assert _tables(tmp_path / "parts") == _tables(tmp_path / "serial")
    assert [len(list(CaptureReader(cap, sizes).exchanges())), len(list(CaptureReader(cap).exchanges()))] == [40, 41]


def test_the_cache_sees_a_rewrite_that_kept_size_and_mtime_and_clears_dead_decodes(tmp_path: Path) -> None:
    """A segment rewritten at the same size with its mtime put back (os.utime) has a new ctime, so
    a new signature; a decode killed midway leaves a .tmp-<pid> folder, removed once its process is gone."""
    from infertap.analysis.cache import signature

    cap = write_capture(tmp_path / "cap", [exchange("x0", status=200, chunks=[(5, sse(event("a")))])])
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        assert a.count("exchanges") == 1
    before = signature(cap)
    (seg,) = segment_paths(cap)
    st = seg.stat()
    time.sleep(0.01)
    seg.write_bytes(seg.read_bytes())  # rewritten: the same size (here the same bytes: what a key can tell)
    os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert seg.stat().st_size == st.st_size and seg.stat().st_mtime_ns == st.st_mtime_ns
    assert signature(cap) != before
    entry = next(p.parent for p in (tmp_path / "cache").rglob("meta.json"))
    dead = entry.parent / ".tmp-999999999-deadbeef"  # no such process
    dead.mkdir()
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        assert a.count("exchanges") == 1
    assert not dead.exists()


def test_an_export_of_the_other_form_into_the_same_folder_leaves_no_stale_files(tmp_path: Path) -> None:
    cap = simple(tmp_path / "cap", n=2)
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        a.export_parquet(tmp_path / "out")  # partitioned by recorder
    simple(cap, n=1, first=2)  # a run appended
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        a.export_parquet(tmp_path / "out", partition_by=None)
    assert not (tmp_path / "out" / "exchanges").exists()
    assert duckdb.sql(f"SELECT count(*) FROM '{tmp_path / 'out' / 'exchanges.parquet'}'").fetchall() == [(3,)]
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        a.export_parquet(tmp_path / "out")
    assert not (tmp_path / "out" / "exchanges.parquet").exists()


@pytest.mark.parametrize("rows", [1, 2, 3, 65_536])
def test_workload_identities_read_in_batches_of_any_size_are_the_capture_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    """The first batch of digests comes back as rows, the rest as Arrow batches: a group that spans
    the two, or many batches, hashes as the capture package does, and a changed request must differ."""
    from infertap.analysis import workload_identity as wi
    from infertap.capture.identity import workload_identity

    monkeypatch.setattr(wi, "_ROWS", rows)
    models = ["a", "b", "a", "a", "b", "a", "b"]
    records = [exchange(f"x{i}", sent_ms=10 * i, request=body(f"q{i}", model=m)) for i, m in enumerate(models)]
    cap = write_capture(tmp_path / "cap", records)
    # The changed request, read in a later batch, sent an asked header: its identity (and its group's) wl2.
    beta = [["content-type", "application/json"], ["anthropic-beta", "output-128k-2025-02-19"]]
    other = exchange("x6", sent_ms=60, request=body("other", model="b"), request_headers=beta)
    changed = write_capture(tmp_path / "changed", [*records[:-1], other])
    with Analysis([cap, changed], cache_dir=tmp_path / "cache") as a:
        assert wi.capture_identity(a, str(cap)) == workload_identity(cap)
        assert wi.capture_identity(a, str(changed)) == workload_identity(changed)
        assert wi.capture_identity(a, str(cap)).workload != wi.capture_identity(a, str(changed)).workload
        assert (wi.capture_identity(a, str(cap)).version, wi.capture_identity(a, str(changed)).version) == ("wl1", "wl2")
        by_model = wi.group_identities(a, f"(SELECT * FROM metrics WHERE capture = '{cap}')", ["model"])
        changed_by_model = wi.group_identities(a, f"(SELECT * FROM metrics WHERE capture = '{changed}')", ["model"])
    assert {key: ident["version"] for key, ident in changed_by_model.items()} == {("a",): "wl1", ("b",): "wl2"}
    assert {key: ident["requests"] for key, ident in by_model.items()} == {("a",): 4, ("b",): 3}
    monkeypatch.setattr(wi, "_ROWS", 65_536)
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        assert wi.group_identities(a, f"(SELECT * FROM metrics WHERE capture = '{cap}')", ["model"]) == by_model
