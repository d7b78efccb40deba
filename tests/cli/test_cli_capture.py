"""`infertap cat` and `infertap info` on captures written by CaptureWriter."""

from __future__ import annotations

import base64
import json
import os
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from infertap.capture.framing import HEAD_SIZE
from infertap.capture.records import FORMAT_MINOR, new_exchange
from infertap.capture.segments import segment_paths
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from tests.helpers import reseal_head

RECORDER = {"kind": "proxy", "upstream": "http://127.0.0.1:9", "pid": 1}
NOT_UTF8 = b"\xff\xfe\x00\x80 raw \xc3"


def exchange(seq: int, **over: Any) -> dict[str, Any]:
    rec: dict[str, Any] = new_exchange(
        id=f"ex-{seq}",
        seq=seq,
        session=None,
        wall=1_700_000_000.0 + seq,
        start_ns=1_000_000_000 * seq,
        sent_ns=1_000_000_000 * seq + 1_000,
        client="127.0.0.1:40000",
        method="POST",
        path="/v1/chat/completions",
        query="",
        http_version="1.1",
        request_headers=[["content-type", "application/json"]],
        request_body=json.dumps({"model": "smol", "messages": [{"role": "user", "content": "héllo"}]}).encode(),
        status=200,
        response_headers=[["content-type", "text/event-stream"], ["server", "llama.cpp"]],
        headers_ns=500,
        chunk_ns=[600, 700],
        chunks=['data: {"choices":[{"delta":{"content":"ü"}}]}\n\n'.encode(), NOT_UTF8],
        end_ns=2_000_000,
        end="complete",
        error=None,
        upstream="http://127.0.0.1:9",
    )
    rec.update(over)
    return rec


EXCHANGES = [
    exchange(0),
    exchange(1, path="/v1/completions"),
    exchange(
        2,
        status=None,
        response_headers=None,
        headers_ns=None,
        chunks=[],
        chunk_ns=[],
        end="upstream_error",
        error="connection refused",
    ),
    exchange(3, method="GET", path="/v1/models", request_body=b"", status=200),
]


def make_capture(path: Path, records: list[dict[str, Any]] = EXCHANGES, **kw: Any) -> Path:
    with CaptureWriter(path, recorder=RECORDER, labels={"gpu": "none"}, **kw) as writer:
        writer.write({"type": "engine", "kind": "llama.cpp", "version": "b1234"})
        for rec in records:
            writer.write(rec)
    assert writer.error is None
    return path


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=True)


def stdout_of(result: Result) -> str:
    return result.stdout


def stderr_of(result: Result) -> str:
    return result.stderr


def assert_clean_exit(result: Result, code: int) -> None:
    """Exited with `code` through click (SystemExit), not through an uncaught exception."""
    assert result.exit_code == code, (result.output, result.exception)
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def block_starts(data: bytes) -> list[int]:
    starts, off = [], 0
    while off < len(data):
        starts.append(off)
        zlen = struct.unpack_from("<I", data, off + 16)[0]
        off += HEAD_SIZE + zlen
    return starts


# -- cat -----------------------------------------------------------------------------------------


def test_cat_prints_one_json_object_per_line(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    result = run("cat", str(cap))
    assert_clean_exit(result, 0)
    lines = stdout_of(result).splitlines()
    objs = [json.loads(line) for line in lines]
    assert all(isinstance(o, dict) and "type" in o for o in objs)
    assert [o["type"] for o in objs] == ["header", "engine"] + ["exchange"] * len(EXCHANGES) + ["footer"]
    assert stderr_of(result) == ""

    ex = [o for o in objs if o["type"] == "exchange"]
    assert [o["seq"] for o in ex] == [0, 1, 2, 3]
    # UTF-8 bytes are shown as text
    assert ex[0]["request_body"] == EXCHANGES[0]["request_body"].decode("utf-8")
    assert json.loads(ex[0]["request_body"])["messages"][0]["content"] == "héllo"
    assert ex[0]["chunks"][0] == EXCHANGES[0]["chunks"][0].decode("utf-8")
    assert ex[3]["request_body"] == ""
    # other bytes as {"base64": ...}, which decodes back to exactly what was recorded
    raw = ex[0]["chunks"][1]
    assert set(raw) == {"base64"}
    assert base64.b64decode(raw["base64"]) == NOT_UTF8
    # the rest of the record as written
    assert ex[2]["status"] is None and ex[2]["end"] == "upstream_error" and ex[2]["chunks"] == []
    assert ex[1]["path"] == "/v1/completions"


def test_cat_type_filter(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    result = run("cat", str(cap), "--type", "exchange")
    assert_clean_exit(result, 0)
    objs = [json.loads(line) for line in stdout_of(result).splitlines()]
    assert [o["type"] for o in objs] == ["exchange"] * len(EXCHANGES)
    assert [o["id"] for o in objs] == [e["id"] for e in EXCHANGES]

    result = run("cat", str(cap), "--type", "header", "--type", "footer")
    assert_clean_exit(result, 0)
    assert [json.loads(line)["type"] for line in stdout_of(result).splitlines()] == ["header", "footer"]

    result = run("cat", str(cap), "--type", "enrichment")
    assert_clean_exit(result, 0)
    assert stdout_of(result) == ""


def test_cat_reads_all_segments_and_a_single_segment(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap", max_segment_bytes=1)
    segments = segment_paths(cap)
    result = run("cat", str(cap), "--type", "exchange")
    assert_clean_exit(result, 0)
    assert len(stdout_of(result).splitlines()) == len(EXCHANGES)
    result = run("cat", str(segments[0]))
    assert_clean_exit(result, 0)
    assert json.loads(stdout_of(result).splitlines()[0])["type"] == "header"


def test_cat_on_a_torn_capture_warns(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    seg.write_bytes(data[:-5])
    result = run("cat", str(cap))
    assert_clean_exit(result, 0)
    types = [json.loads(line)["type"] for line in stdout_of(result).splitlines()]
    assert types == ["header", "engine"] + ["exchange"] * len(EXCHANGES)
    err = stderr_of(result)
    assert "warning" in err and str(seg) in err and "torn" in err


def test_cat_on_a_corrupt_capture_fails_cleanly(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    starts = block_starts(bytes(data))
    target = starts[1]  # a block in the middle
    data[(target + HEAD_SIZE + starts[2]) // 2] ^= 0x55
    seg.write_bytes(bytes(data))
    result = run("cat", str(cap))
    assert_clean_exit(result, 1)
    err = stderr_of(result)
    assert "Error" in err
    assert str(seg) in err and f"byte offset {target}" in err
    # what came before the damage was still printed
    assert [json.loads(line)["type"] for line in stdout_of(result).splitlines()] == ["header"]


def test_cat_on_an_unsupported_version_fails_cleanly(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    struct.pack_into("<H", data, 12, 2)  # the first block's major version
    reseal_head(data, 0)
    seg.write_bytes(bytes(data))
    result = run("cat", str(cap))
    assert_clean_exit(result, 1)
    assert f"2.{FORMAT_MINOR}" in stderr_of(result) and "upgrade" in stderr_of(result)


@pytest.mark.parametrize("command", ["cat", "info"])
def test_a_directory_without_segments_fails_cleanly(tmp_path: Path, command: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run(command, str(empty))
    assert_clean_exit(result, 1)
    assert "not a capture" in stderr_of(result)


@pytest.mark.parametrize("command", ["cat", "info"])
def test_a_folder_of_captures_is_refused_naming_them(tmp_path: Path, command: str) -> None:
    """stats, sql and export read a folder of shards as one; cat and info read one capture, and
    said of such a folder only that it held no segments, as of an empty one."""
    for name in ("gw-a", "gw-b"):
        make_capture(tmp_path / "shards" / name)
    result = run(command, str(tmp_path / "shards"))
    assert_clean_exit(result, 1)
    said = " ".join(stderr_of(result).split())
    assert f"it holds captures, give one of them: {tmp_path / 'shards' / 'gw-a'}, {tmp_path / 'shards' / 'gw-b'})" in said


def test_cat_on_a_missing_path(tmp_path: Path) -> None:
    result = run("cat", str(tmp_path / "nope"))
    assert_clean_exit(result, 2)  # click's usage error: the path must exist


# -- info ----------------------------------------------------------------------------------------


def test_info_json(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    result = run("info", str(cap), "--json")
    assert_clean_exit(result, 0)
    s = json.loads(stdout_of(result))
    assert s["exchanges"] == len(EXCHANGES)
    assert s["path"] == str(cap)
    assert s["segments"] == 1
    assert s["records"] == {"header": 1, "engine": 1, "exchange": 4, "footer": 1}
    assert s["paths"] == {"POST /v1/chat/completions": 2, "POST /v1/completions": 1, "GET /v1/models": 1}
    assert s["statuses"] == {"200": 3, "None": 1}
    assert s["ends"] == {"complete": 3, "upstream_error": 1}
    assert s["models"] == {"smol": 3}
    assert s["labels"] == {"gpu": "none"}
    assert s["runs"] == 1 and s["recorders"] == ["proxy"]
    assert s["upstreams"] == {"http://127.0.0.1:9": 1}
    assert s["first_wall"] == pytest.approx(1_700_000_000.0)
    assert s["closed_cleanly"] is True
    assert s["torn"] == []
    assert stderr_of(result) == ""


def test_info_json_on_a_torn_capture(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    (seg,) = segment_paths(cap)
    seg.write_bytes(seg.read_bytes()[:-3])  # the footer's block is cut short
    result = run("info", str(cap), "--json")
    assert_clean_exit(result, 0)
    s = json.loads(stdout_of(result))
    assert s["exchanges"] == len(EXCHANGES)
    assert s["closed_cleanly"] is False
    assert len(s["torn"]) == 1 and str(seg) in s["torn"][0]
    err = stderr_of(result)
    assert "warning" in err and "torn tail" in err and str(seg) in err


def test_info_tells_a_capture_being_written_from_a_crashed_one(tmp_path: Path) -> None:
    """A capture whose recorder still runs said "the recorder did not shut down cleanly"."""
    import subprocess
    import sys

    recorder = {**RECORDER, "pid": os.getpid()}
    writer = CaptureWriter(tmp_path / "live", recorder=recorder).open()
    try:
        writer.write(EXCHANGES[0])
        deadline = time.monotonic() + 30  # written within the flush window (5 ms)
        while (result := run("info", str(tmp_path / "live"), "--json")).exit_code or json.loads(stdout_of(result))[
            "exchanges"
        ] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        live = json.loads(stdout_of(result))
        assert live["closed_cleanly"] is False and live["writing"] == os.getpid()
        assert "still being written" in " ".join(stdout_of(run("info", str(tmp_path / "live"))).split())
    finally:
        writer.close()
    closed = json.loads(stdout_of(run("info", str(tmp_path / "live"), "--json")))
    assert closed["closed_cleanly"] is True and closed["writing"] is None
    # A recorder that is gone (its pid names no process) crashed.
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    # This process runs, but started after a run that began a day ago: another process with its pid.
    for pid, wall in ((int(ended.stdout), None), (os.getpid(), time.time() - 86400)):
        cap = tmp_path / f"dead-{pid}"
        with CaptureWriter(cap, recorder={**RECORDER, "pid": pid}, wall=wall) as dead:
            dead.write(EXCHANGES[0])
        (seg,) = segment_paths(cap)
        seg.write_bytes(seg.read_bytes()[:-3])  # no footer
        s = json.loads(stdout_of(run("info", str(cap), "--json")))
        assert s["closed_cleanly"] is False and s["writing"] is None, pid
        assert "did not shut down cleanly" in stdout_of(run("info", str(cap)))


def test_info_human_output(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap", max_segment_bytes=1)
    result = run("info", str(cap))
    assert_clean_exit(result, 0)
    out = " ".join(stdout_of(result).split())  # undo rich's wrapping
    assert "exchanges" in out and "closed cleanly" in out
    assert "POST /v1/chat/completions ×2" in out
    assert "gpu=none" in out


def test_info_on_a_corrupt_capture_fails_cleanly(tmp_path: Path) -> None:
    cap = make_capture(tmp_path / "cap")
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    target = block_starts(bytes(data))[2]
    data[target] ^= 0xFF  # a block head's magic
    seg.write_bytes(bytes(data))
    result = run("info", str(cap), "--json")
    assert_clean_exit(result, 1)
    assert str(seg) in stderr_of(result) and f"byte offset {target}" in stderr_of(result)


def test_a_run_left_unclosed_keeps_the_capture_unclosed_after_another_run_closes(tmp_path: Path) -> None:
    """A recorder killed, then a run appended and closed (`infertap enrich` appends one): info and the
    captures table said "closed cleanly" of the whole capture."""
    from infertap.analysis import Analysis

    first = CaptureWriter(tmp_path / "cap", recorder={**RECORDER, "pid": os.getpid()}).open()
    try:
        first.write(EXCHANGES[0])
        deadline = time.monotonic() + 30  # written within the flush window (5 ms)
        while json.loads(stdout_of(run("info", str(tmp_path / "cap"), "--json")))["exchanges"] < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with CaptureWriter(tmp_path / "cap", recorder={"kind": "enrich"}):
            pass
        s = json.loads(stdout_of(run("info", str(tmp_path / "cap"), "--json")))
        assert s["runs"] == 2 and s["closed_cleanly"] is False
        assert s["writing"] == os.getpid()  # the first run's recorder still writes (the last run closed)
        with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
            assert a.sql("SELECT closed_cleanly FROM captures").fetchall() == [(False,)]
    finally:
        first.close()
    assert json.loads(stdout_of(run("info", str(tmp_path / "cap"), "--json")))["closed_cleanly"] is True  # every run closed
