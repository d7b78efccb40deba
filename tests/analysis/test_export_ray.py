"""`infertap export --ray`: a fleet's captures decoded on a local Ray cluster give the local export's rows."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from infertap.analysis import EXPORTED, MANIFEST, DistributedExportError, export_on_ray
from infertap.analysis.distributed_export import export_capture
from infertap.capture.segments import segment_paths
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from tests.analysis.test_joined_sessions import _WALL, _sessions, _traffic
from tests.analysis_builders import body, enrichment, event, exchange, sse, write_capture
from tests.extras import needs
from tests.helpers import write_capture as write_traffic

needs("ray", "scale")


def recorder(name: str) -> dict[str, object]:
    return {"kind": "proxy", "upstream": "http://engine.test", "id": name}


def streamed(xid: str, sent_ms: float, text: str, model: str = "m") -> dict[str, object]:
    return exchange(
        xid,
        sent_ms=sent_ms,
        request=body(text, model=model),
        chunks=[(5, sse(event(role="assistant"))), (12, sse(event(text))), (20, sse(event(f"{text}!"), event(finish="stop")))],
        end_ms=25,
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four captures as four recorders leave them: two share a recorder id (one partition, two
    captures), one holds two runs of different recorders, one is empty; only one was enriched, and
    no engine snapshot or telemetry anywhere (tables empty in every capture)."""
    root = tmp_path_factory.mktemp("fleet")
    write_capture(
        root / "gw-a-1",
        [streamed("a1", 0, "one"), streamed("a2", 30, "two", model="beta"), enrichment("a1", prompt_ids=[1, 2, 3])],
        recorder("gw-a"),
    )
    write_capture(root / "gw-b", [streamed("b1", 0, "three")], recorder("gw-b"))
    write_capture(
        root / "gw-b",
        [streamed("b2", 0, "four"), exchange("b3", sent_ms=9, end="upstream_error", status=None)],
        recorder("gw-b2"),
    )
    write_capture(root / "gw-a-2", [streamed("a1", 0, "five")], recorder("gw-a"))  # same id as gw-a-1's: a restarted proxy
    write_capture(root / "gw-e", [], recorder("gw-e"))
    return root


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def export(captures: list[Path], out: Path, cache: Path, *extra: str) -> Result:
    return run("export", *map(str, captures), "--parquet", str(out), "--cache-dir", str(cache), *extra)


def tables(folder: Path) -> dict[str, tuple[list[str], list[str], list[tuple[object, ...]]]]:
    """Every exported table as DuckDB reads it back by the documented pattern (every table a folder
    of partitions, even one with no rows, but ``captures``): columns, types, and its rows in order."""
    out = {}
    for name in EXPORTED:
        files = f"{folder}/{name}/{'' if name == 'captures' else '*/'}*.parquet"
        rel = duckdb.sql(f"SELECT * FROM read_parquet('{files}', hive_partitioning = true) ORDER BY ALL")
        out[name] = (rel.columns, [str(t) for t in rel.types], rel.fetchall())
    return out


def partitions(folder: Path) -> set[Path]:
    return {p.parent.relative_to(folder) for p in folder.rglob("*.parquet")}


def files(folder: Path) -> dict[Path, bytes]:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("partition_by", ["recorder", "run"])
def test_an_export_on_ray_has_the_rows_of_a_local_one(fleet: Path, tmp_path: Path, ray_cluster: str, partition_by: str) -> None:
    captures = sorted(fleet.iterdir())
    local = ok(export(captures, tmp_path / "local", tmp_path / "cache", "--partition-by", partition_by))
    spread = ok(export(captures, tmp_path / "ray", tmp_path / "cache-ray", "--partition-by", partition_by, "--ray"))

    here, there = tables(tmp_path / "local"), tables(tmp_path / "ray")
    assert here == there
    assert len(here["exchanges"][2]) == 6 and len(here["enrichments"][2]) == 1 and here["engines"][2] == []
    assert partitions(tmp_path / "local") == partitions(tmp_path / "ray")
    key = {"recorder": "recorder_id", "run": "run_id"}[partition_by]
    # The same counts, printed the same way; two captures of recorder gw-a share its partition.
    assert local.stdout.replace("local", "ray") == spread.stdout.splitlines(keepends=True)[0]
    if partition_by == "recorder":
        shared = sorted(p.name for p in (tmp_path / "ray" / "chunks" / "recorder_id=gw-a").iterdir())
        assert shared == ["data_0.parquet", "data_1.parquet"]
    manifest = json.loads((tmp_path / "ray" / MANIFEST).read_text())
    assert [c["capture"] for c in manifest["captures"]] == [str(c.resolve()) for c in captures]
    assert manifest["partition_by"] == key and sum(manifest["hosts"].values()) == len(captures)
    assert not list((tmp_path / "ray").glob(".infertap-export-*"))  # the workers' folders are gone


def test_a_capture_left_out_changes_the_rows_and_a_new_export_replaces_the_old(
    fleet: Path, tmp_path: Path, ray_cluster: str
) -> None:
    captures = sorted(fleet.iterdir())
    fewer = [c for c in captures if c.name != "gw-a-2"]
    ok(export(captures, tmp_path / "all", tmp_path / "cache"))
    ok(export(fewer, tmp_path / "fewer", tmp_path / "cache"))
    out = tmp_path / "ray"
    ok(export(captures, out, tmp_path / "cache", "--ray"))
    assert tables(out) == tables(tmp_path / "all")
    ok(export(fewer, out, tmp_path / "cache", "--ray"))  # into the same folder: replaced, not added to
    assert tables(out) == tables(tmp_path / "fewer") != tables(tmp_path / "all")
    gw_a = "SELECT count(*) FROM read_parquet('{}/exchanges/recorder_id=gw-a/*.parquet')"
    assert duckdb.sql(gw_a.format(out)).fetchall() == [(2,)] != duckdb.sql(gw_a.format(tmp_path / "all")).fetchall()
    # Over an export of the other form, and the other way round: nothing of the earlier one is left.
    ok(export(fewer, out, tmp_path / "cache", "--partition-by", "none"))
    assert (out / "exchanges.parquet").exists() and not (out / MANIFEST).exists()  # the manifest described the ray export
    ok(export(captures, out, tmp_path / "cache", "--ray"))
    assert not list(out.glob("*.parquet")) and (out / MANIFEST).exists() and tables(out) == tables(tmp_path / "all")


def exported_sessions(folder: Path) -> list[tuple[object, ...]]:
    """Each session of an export's ``turns`` as ``_sessions`` gives stats': name, turns, depth; and
    the same read from its ``metrics``."""
    by = "SELECT session, count(*), max(turn) + 1 FROM read_parquet('{}/{}/*/*.parquet') {} GROUP BY session_capture, session"
    turns = sorted(duckdb.sql(by.format(folder, "turns", "")).fetchall())
    assert sorted(duckdb.sql(by.format(folder, "metrics", "WHERE turn IS NOT NULL")).fetchall()) == turns
    return turns


def test_recordings_exported_together_have_the_sessions_stats_reads(tmp_path: Path, ray_cluster: str) -> None:
    """An agent's turns split between two gateways' recorders: exported together, on Ray as locally,
    each session is the one ``stats --by session`` gives over the same captures, not a capture's own."""
    traffic = _traffic()
    write_traffic(tmp_path / "gw-a", traffic[0::2], run_wall=_WALL)
    write_traffic(tmp_path / "gw-b", traffic[1::2], run_wall=_WALL)
    split, cache = [tmp_path / "gw-a", tmp_path / "gw-b"], tmp_path / "cache"
    together = _sessions(split, cache)
    apart = sorted(_sessions(split[:1], cache) + _sessions(split[1:], cache))
    assert together != apart  # the case is one where joining changes the sessions
    ok(export(split, tmp_path / "local", cache))
    ok(export(split, tmp_path / "ray", cache, "--ray"))
    assert exported_sessions(tmp_path / "ray") == exported_sessions(tmp_path / "local") == together
    assert tables(tmp_path / "ray") == tables(tmp_path / "local")
    manifest = json.loads((tmp_path / "ray" / MANIFEST).read_text())
    assert manifest["sessions_joined"] == [str(c.resolve()) for c in split]
    # One capture exported alone keeps its own sessions, as stats of it alone gives them.
    ok(export(split[:1], tmp_path / "one", cache, "--ray"))
    assert exported_sessions(tmp_path / "one") == _sessions(split[:1], cache) != together
    assert json.loads((tmp_path / "one" / MANIFEST).read_text())["sessions_joined"] == []


def test_torn_and_corrupt_captures_are_reported_as_a_local_export_reports_them(
    fleet: Path, tmp_path: Path, ray_cluster: str
) -> None:
    cap = tmp_path / "cap"
    write_capture(cap, [streamed("t1", 0, "torn")], recorder("gw-t"))
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    seg.write_bytes(data[:-5])  # cut inside the footer's block: a torn tail
    (tmp_path / "cap-notes.txt").write_text("cut on purpose\n")  # matched by the glob, and left out, said
    captures = [fleet / "gw-b", tmp_path / "cap*"]
    local = ok(export(captures, tmp_path / "local", tmp_path / "cache"))
    spread = ok(export(captures, tmp_path / "ray", tmp_path / "cache-ray", "--ray"))
    assert "torn tail" in local.stderr and str(seg) in local.stderr and spread.stderr == local.stderr
    assert f"cap*: left out {tmp_path / 'cap-notes.txt'}: not a capture" in spread.stderr
    assert json.loads((tmp_path / "ray" / MANIFEST).read_text())["warnings"][0].startswith(f"{tmp_path / 'cap*'}: left out")
    assert tables(tmp_path / "ray") == tables(tmp_path / "local")

    before = files(tmp_path / "ray")
    corrupt = bytearray(data)
    corrupt[40] ^= 0xFF  # inside the first block, which has others after it
    seg.write_bytes(bytes(corrupt))
    local = export(captures, tmp_path / "local2", tmp_path / "cache")
    spread = export(captures, tmp_path / "ray", tmp_path / "cache-ray", "--ray")
    assert local.exit_code == spread.exit_code == 1 and f"{seg}: corrupt capture data" in spread.stderr
    assert spread.stderr == local.stderr and "Traceback" not in spread.output
    assert files(tmp_path / "ray") == before  # the earlier export is untouched; nothing half-written
    assert not list((tmp_path / "ray").glob(".infertap-export-*"))


def test_a_capture_still_being_written_is_said_as_a_local_export_says_it(fleet: Path, tmp_path: Path, ray_cluster: str) -> None:
    """export --ray wrote a live capture's snapshot into the warehouse without a word, where the
    local export warns: its exchanges in flight, and later ones, are in none of the tables."""
    writer = CaptureWriter(tmp_path / "live", recorder={**recorder("gw-live"), "pid": os.getpid()}).open()
    try:
        writer.write(streamed("l1", 0, "live"))
        deadline = time.monotonic() + 30  # written within the flush window (5 ms)
        while json.loads(ok(run("info", str(tmp_path / "live"), "--json")).stdout)["exchanges"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        captures = [fleet / "gw-b", tmp_path / "live"]
        local = ok(export(captures, tmp_path / "local", tmp_path / "cache"))
        spread = ok(export(captures, tmp_path / "ray", tmp_path / "cache-ray", "--ray"))
    finally:
        writer.close()
    said = (
        f"warning: {tmp_path / 'live'} is still being written (its recorder, pid {os.getpid()}, runs on this machine): "
        "the tables exported are of what it held when read"
    )
    assert said in " ".join(spread.stderr.split()) and spread.stderr == local.stderr, spread.stderr
    manifest = json.loads((tmp_path / "ray" / MANIFEST).read_text())
    assert [said.removeprefix("warning: ") in w for w in manifest["warnings"]] == [True]
    assert "open_runs" not in manifest["captures"][1]
    assert tables(tmp_path / "ray") == tables(tmp_path / "local")
    # Closed: nothing to say, on either.
    closed = ok(export(captures, tmp_path / "ray", tmp_path / "cache-ray", "--ray"))
    assert closed.stderr == "" and json.loads((tmp_path / "ray" / MANIFEST).read_text())["warnings"] == []


def test_export_ray_from_the_command_line_joins_a_cluster_by_its_address(fleet: Path, tmp_path: Path, ray_cluster: str) -> None:
    cmd = [sys.executable, "-m", "infertap", "export", str(fleet), "--parquet", str(tmp_path / "out")]
    done = subprocess.run(
        [*cmd, "--cache-dir", str(tmp_path / "cache"), "--ray", ray_cluster], capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr
    assert "wrote 13 tables" in done.stdout and "on Ray: 4 capture(s)" in done.stdout and MANIFEST in done.stdout
    ok(export([fleet], tmp_path / "local", tmp_path / "cache"))
    assert tables(tmp_path / "out") == tables(tmp_path / "local")


def test_bad_inputs_fail_clearly_and_write_nothing(fleet: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "infertap", "export", str(fleet), "--parquet", str(out)]
    nobody = subprocess.run([*cmd, "--ray", "127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert nobody.returncode == 1 and "Traceback" not in nobody.stderr
    assert "no Ray cluster answers at 127.0.0.1:1" in nobody.stderr and "nothing was written" in nobody.stderr
    flat = run("export", str(fleet), "--parquet", str(out), "--partition-by", "none", "--ray", "127.0.0.1:1")
    assert flat.exit_code == 2 and "--partition-by none" in flat.stderr
    missing = run("export", str(tmp_path / "nowhere"), "--parquet", str(out), "--ray", "127.0.0.1:1")
    assert missing.exit_code == 1 and "no such capture" in missing.stderr  # found out before joining a cluster
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    with pytest.raises(DistributedExportError, match=r"export --ray needs Ray: pip install 'infertap\[scale\]'"):
        export_on_ray([fleet], out)
    assert not out.exists()


def test_a_worker_that_cannot_see_a_path_names_it_and_its_host(fleet: Path, tmp_path: Path) -> None:
    host = socket.gethostname()
    with pytest.raises(DistributedExportError, match=re.escape(f"{tmp_path / 'gone'}: no such capture on {host}")):
        export_capture(str(tmp_path / "gone"), str(tmp_path / "part"), "recorder_id", None)
    with pytest.raises(DistributedExportError, match=re.escape(f"{tmp_path / 'x'} is not visible on {host}")):
        export_capture(str(fleet / "gw-b"), str(tmp_path / "x" / "staging" / "0"), "recorder_id", None)


def test_parts_that_cannot_be_put_together_fail_clearly_and_leave_the_export_there(
    fleet: Path, tmp_path: Path, ray_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's own work after the tasks (sessions joined, tables assembled, in the staging
    folder) failing, as on a full disk: a clear error, not a traceback, and the export already in
    the folder kept whole."""
    from infertap.analysis import distributed_export

    captures, out = sorted(fleet.iterdir()), tmp_path / "ray"
    ok(export(captures, out, tmp_path / "cache", "--ray"))
    before = files(out)

    def full(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(distributed_export, "_assemble", full)
    failed = export(captures[:1], out, tmp_path / "cache", "--ray")
    assert failed.exit_code == 1 and not isinstance(failed.exception, OSError), failed.exception
    assert "can't be put together" in failed.stderr and "No space left on device" in failed.stderr
    assert files(out) == before  # the earlier export, every file as it was; no staging left
