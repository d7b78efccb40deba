"""The capture format: writer, reader and block framing (see infertap/capture/framing.py and design.md)."""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
import shutil
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zstandard

from infertap.capture.errors import CaptureCorruptError, CaptureError, CaptureWriteError, UnsupportedFormatError
from infertap.capture.info import summarize
from infertap.capture.reader import CaptureReader, Gap
from infertap.capture.records import FORMAT_MAJOR, FORMAT_MINOR, new_exchange
from infertap.capture.segments import segment_paths
from infertap.capture.writer import CaptureWriter
from tests import sdk_shapes
from tests.helpers import reseal_head

# The block head, as documented in infertap/capture/framing.py: a zstd skippable frame carrying
# magic, frame size, tag, major, minor, zlen, crc32 of the frame, crc32 of head bytes 8..24 (little
# endian). Spelled out here on purpose, so a change of the on-disk layout shows up as a failing test.
HEAD = struct.Struct("<II4sHHIII")
SKIPPABLE_MAGIC = 0x184D2A5E
MAJOR_OFFSET = 12
MINOR_OFFSET = 14


RECORDER = {"kind": "test", "upstream": "http://127.0.0.1:1", "pid": 1}


def exchange(seq: int, **over: Any) -> dict[str, Any]:
    """A synthetic exchange record with every key of records.Exchange."""
    rec: dict[str, Any] = new_exchange(
        id=f"ex-{seq:05d}",
        seq=seq,
        session=None if seq % 2 else f"sess-{seq // 4}",
        wall=1_700_000_000.0 + seq,
        start_ns=1_000_000 * seq,
        sent_ns=1_000_000 * seq + 12_345,
        client="127.0.0.1:50000",
        method="POST",
        path="/v1/chat/completions",
        query="",
        http_version="1.1",
        request_headers=[["content-type", "application/json"], ["authorization", "Bearer [REDACTED]"]],
        request_body=b'{"model":"m","messages":[{"role":"user","content":"hi %d"}]}' % seq,
        status=200,
        response_headers=[["content-type", "text/event-stream"]],
        headers_ns=1_000,
        chunk_ns=[2_000, 3_000, 4_000],
        chunks=[b'data: {"x":1}\n\n', b"\xff\xfe\x00 not utf-8", b"data: [DONE]\n\n"],
        end_ns=5_000,
        end="complete",
        error=None,
        upstream="http://127.0.0.1:1",
    )
    rec.update(over)
    return rec


def wait_for(cond: Callable[[], bool], what: str, deadline_s: float = 60.0) -> None:
    """Poll until cond() holds. The deadline only guards against a hang; nothing asserts speed."""
    end = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.002)


def write_flushed(writer: CaptureWriter, records: list[dict[str, Any]]) -> None:
    """Write records one at a time, each in its own block (waits for the writer thread)."""
    for rec in records:
        before = writer.records
        writer.write(rec)
        wait_for(lambda: writer.records > before, "the writer to flush a record")  # noqa: B023 (called at once)


def read_all(path: Path) -> tuple[list[dict[str, Any]], CaptureReader]:
    reader = CaptureReader(path)
    return list(reader.records()), reader


def blocks_of(data: bytes) -> list[tuple[int, int, list[dict[str, Any]]]]:
    """Independently parse an intact segment: (start, end, records) per block."""
    out = []
    off = 0
    dctx = zstandard.ZstdDecompressor()
    while off < len(data):
        magic, fsize, tag, major, minor, zlen, crc, head_crc = HEAD.unpack_from(data, off)
        assert (magic, fsize, tag) == (SKIPPABLE_MAGIC, HEAD.size - 8, b"ITAP")
        assert (major, minor) == (FORMAT_MAJOR, FORMAT_MINOR)
        zframe = data[off + HEAD.size : off + HEAD.size + zlen]
        assert len(zframe) == zlen and zlib.crc32(zframe) == crc
        payload = dctx.decompress(zframe)
        recs = list(msgpack.Unpacker(io.BytesIO(payload), raw=False, strict_map_key=False))
        end = off + HEAD.size + zlen
        out.append((off, end, recs))
        off = end
    return out


def small_capture(path: Path, n: int = 4, **kw: Any) -> list[dict[str, Any]]:
    """A closed capture with one block per record; returns the exchanges written."""
    recs = [exchange(i) for i in range(n)]
    writer = CaptureWriter(path, recorder=RECORDER, **kw).open()
    try:
        write_flushed(writer, recs)
    finally:
        writer.close()
    assert writer.error is None
    return recs


# -- round trip ---------------------------------------------------------------------------------


def test_round_trip(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    big = os.urandom(5 * 1024 * 1024)  # larger than one write batch, incompressible
    records = [
        exchange(0),
        exchange(
            1,
            request_body=b"",
            chunks=[],
            chunk_ns=[],
            status=None,
            response_headers=None,
            headers_ns=None,
            end="upstream_error",
            error="connection refused",
        ),
        {"type": "engine", "kind": "llama.cpp", "props": {"n_ctx": 4096, "nested": {"a": [1, -2, 3.5, None, b"\x00\xff"]}}},
        {"type": "enrichment", "id": "ex-00000", "tokens": list(range(300)), "maps": {1: "int key", "s": {"t": True}}},
        exchange(2, request_body=big, chunks=[big[:1000], big[1000:]], chunk_ns=[1, 2]),
        exchange(3, session="s", query="a=1&b=2", http_version="2"),
    ]
    with CaptureWriter(cap, recorder=RECORDER, labels={"gpu": "none"}) as writer:
        for rec in records:
            writer.write(rec)
    assert writer.error is None and writer.dropped == 0
    assert writer.exchanges == 4

    got, reader = read_all(cap)
    assert got[0]["type"] == "header"
    assert got[-1]["type"] == "footer" and got[-1]["final"] is True
    assert [r for r in got[1:-1] if r["type"] != "dictionary"] == records  # a dictionary joins once there is enough
    assert reader.closed_cleanly is True
    assert reader.torn == []

    header = got[0]
    assert header["format"] == [FORMAT_MAJOR, FORMAT_MINOR]
    assert header["capture_id"] == writer.capture_id and header["run_id"] == writer.run_id
    assert header["recorder"] == {"id": f"{socket.gethostname()}-{os.getpid()}", **RECORDER} and header["labels"] == {
        "gpu": "none"
    }
    assert header["segment"] == 0
    footer = got[-1]
    assert footer["exchanges"] == 4 and footer["dropped"] == 0
    # exchanges() is the same stream filtered
    assert list(CaptureReader(cap).exchanges()) == [r for r in records if r["type"] == "exchange"]


def test_reader_accepts_a_single_segment_file(tmp_path: Path) -> None:
    recs = small_capture(tmp_path / "cap", n=2)
    (seg,) = segment_paths(tmp_path / "cap")
    got, reader = read_all(seg)
    assert [r for r in got if r["type"] == "exchange"] == recs
    assert reader.closed_cleanly


def test_reader_can_be_iterated_twice(tmp_path: Path) -> None:
    small_capture(tmp_path / "cap", n=3)
    reader = CaptureReader(tmp_path / "cap")
    first = list(reader)
    second = list(reader)
    assert first == second and len(first) == 5
    assert reader.closed_cleanly


# -- permissions ---------------------------------------------------------------------------------


def test_files_are_owner_only(tmp_path: Path) -> None:
    cap = tmp_path / "new" / "nested" / "cap"
    small_capture(cap, n=3, max_segment_bytes=1)  # several segment files
    assert os.stat(cap).st_mode & 0o777 == 0o700
    segments = segment_paths(cap)
    assert len(segments) > 1
    for seg in segments:
        assert os.stat(seg).st_mode & 0o777 == 0o600, seg


def test_files_are_owner_only_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        small_capture(tmp_path / "cap", n=1)
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "cap").st_mode & 0o777 == 0o700
    for seg in segment_paths(tmp_path / "cap"):
        assert os.stat(seg).st_mode & 0o777 == 0o600


# -- segments ------------------------------------------------------------------------------------


def test_segment_rotation(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    recs = small_capture(cap, n=6, max_segment_bytes=200)
    segments = segment_paths(cap)
    assert len(segments) >= 3
    assert [p.name for p in segments] == [f"{i:06d}.itap.zst" for i in range(len(segments))]

    got, reader = read_all(cap)
    assert [r for r in got if r["type"] == "exchange"] == recs
    assert reader.closed_cleanly and reader.torn == []

    run_ids = set()
    for index, seg in enumerate(segments):
        seg_records, seg_reader = read_all(seg)
        head, last = seg_records[0], seg_records[-1]
        assert head["type"] == "header"
        assert head["format"] == [FORMAT_MAJOR, FORMAT_MINOR]
        assert head["segment"] == index
        run_ids.add(head["run_id"])
        assert last["type"] == "footer"
        is_last = index == len(segments) - 1
        assert last["final"] is is_last
        assert seg_reader.closed_cleanly is is_last
        # a header only at the start, a footer only at the end
        assert [r["type"] for r in seg_records[1:-1]] == ["exchange"] * (len(seg_records) - 2)
    assert len(run_ids) == 1


def test_appending_a_second_run(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    first = small_capture(cap, n=3)
    first_ids = CaptureReader(cap).records().__next__()
    w2 = CaptureWriter(cap, recorder={"kind": "replay"}).open()
    second = [exchange(100 + i) for i in range(2)]
    for rec in second:
        w2.write(rec)
    w2.close()
    assert w2.error is None

    segments = segment_paths(cap)
    assert [p.name for p in segments] == ["000000.itap.zst", "000001.itap.zst"]
    got, reader = read_all(cap)
    headers = [r for r in got if r["type"] == "header"]
    assert len(headers) == 2
    assert headers[0]["capture_id"] == headers[1]["capture_id"] == first_ids["capture_id"] == w2.capture_id
    assert headers[0]["run_id"] != headers[1]["run_id"] == w2.run_id
    assert headers[1]["segment"] == 1
    assert [r for r in got if r["type"] == "exchange"] == first + second
    assert [r["type"] for r in got] == ["header"] + ["exchange"] * 3 + ["footer", "header"] + ["exchange"] * 2 + ["footer"]
    assert reader.closed_cleanly and reader.torn == []


def test_two_writers_on_one_capture_both_rotate_past_each_other(tmp_path: Path) -> None:
    """A second writer (another recorder, an enrich, an import --out) takes the next segment index
    while the first is recording: the first's rotation takes the next free one instead of stopping."""
    cap = tmp_path / "cap"
    a = CaptureWriter(cap, recorder=RECORDER, max_segment_bytes=200).open()  # 000000
    b = CaptureWriter(cap, recorder=RECORDER, max_segment_bytes=200).open()  # 000001, a's next
    first, second = [exchange(i) for i in range(4)], [exchange(100 + i) for i in range(4)]
    for x, y in zip(first, second, strict=True):
        write_flushed(a, [x])  # each past the segment size: a rotation after each record
        write_flushed(b, [y])
    a.close()
    b.close()
    assert a.error is None and b.error is None and a.dropped == b.dropped == 0
    got, reader = read_all(cap)
    assert sorted((r for r in got if r["type"] == "exchange"), key=lambda r: r["seq"]) == first + second
    assert len(segment_paths(cap)) >= 8 and reader.closed_cleanly and reader.torn == []
    headers = [r for r in got if r["type"] == "header"]
    assert {h["run_id"] for h in headers} == {a.run_id, b.run_id}
    assert [h["segment"] for h in headers] == list(range(len(headers)))  # each header names its own file


def test_appending_after_a_crashed_run(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    small_capture(cap, n=2)
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    last_start = blocks_of(data)[-1][0]
    seg.write_bytes(data[: last_start + 10])  # the footer block torn
    w2 = CaptureWriter(cap, recorder=RECORDER).open()
    w2.write(exchange(9))
    w2.close()
    got, reader = read_all(cap)
    assert [r["seq"] for r in got if r["type"] == "exchange"] == [0, 1, 9]
    assert len(reader.torn) == 1 and reader.torn[0].path == str(seg)
    assert not reader.closed_cleanly  # the first run never closed, however the one after it ended


# -- standard zstd -------------------------------------------------------------------------------


def test_segments_are_standard_zstd(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    recs = small_capture(cap, n=5, max_segment_bytes=300)
    expected, _ = read_all(cap)
    assert len(segment_paths(cap)) > 1
    via_stream: list[dict[str, Any]] = []
    via_obj: list[dict[str, Any]] = []
    for seg in segment_paths(cap):
        raw = seg.read_bytes()
        assert struct.unpack_from("<I", raw)[0] == SKIPPABLE_MAGIC  # starts with a skippable frame
        with open(seg, "rb") as f:
            with zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True) as r:
                payload = r.read()
        via_stream.extend(msgpack.Unpacker(io.BytesIO(payload), raw=False, strict_map_key=False))
        obj = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True)
        via_obj.extend(msgpack.Unpacker(io.BytesIO(obj.decompress(raw)), raw=False, strict_map_key=False))
    assert via_stream == expected
    assert via_obj == expected
    assert [r for r in via_stream if r["type"] == "exchange"] == recs


@pytest.mark.skipif(shutil.which("zstd") is None, reason="no zstd command")
def test_segments_decode_with_the_zstd_command(tmp_path: Path) -> None:
    import subprocess

    cap = tmp_path / "cap"
    small_capture(cap, n=3)
    expected, _ = read_all(cap)
    (seg,) = segment_paths(cap)
    out = subprocess.run(["zstd", "-dc", str(seg)], check=True, capture_output=True).stdout
    assert list(msgpack.Unpacker(io.BytesIO(out), raw=False, strict_map_key=False)) == expected


# -- torn tails ----------------------------------------------------------------------------------


def test_torn_tail_at_every_offset(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    small_capture(cap, n=3, max_segment_bytes=400)
    segments = segment_paths(cap)
    assert len(segments) >= 2
    intact, _ = read_all(cap)
    last = segments[-1]
    data = last.read_bytes()
    blocks = blocks_of(data)
    assert len(blocks) >= 2
    earlier = [r for seg in segments[:-1] for r in read_all(seg)[0]]
    assert earlier + [r for _, _, recs in blocks for r in recs] == intact
    boundaries = {start for start, _, _ in blocks}

    for cut in range(len(data)):
        last.write_bytes(data[:cut])
        got, reader = read_all(cap)
        expected = earlier + [r for _, end, recs in blocks for r in recs if end <= cut]
        assert got == expected, f"cut at {cut}"
        assert reader.closed_cleanly is False, f"cut at {cut}"
        if cut in boundaries:
            assert reader.torn == [], f"cut at {cut}"  # a clean block boundary looks like a crash between writes
        else:
            assert len(reader.torn) == 1, f"cut at {cut}"
            torn = reader.torn[0]
            assert torn.path == str(last)
            assert torn.offset == max(b for b in boundaries if b < cut)
            assert str(last) in str(torn)


@pytest.mark.parametrize("zeros", [1, 23, 24, 25, 4096])
def test_trailing_zero_bytes_are_a_torn_tail(tmp_path: Path, zeros: int) -> None:
    cap = tmp_path / "cap"
    small_capture(cap, n=2)
    intact, _ = read_all(cap)
    (seg,) = segment_paths(cap)
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\0" * zeros)
    got, reader = read_all(cap)
    assert got == intact
    assert len(reader.torn) == 1
    assert reader.torn[0].path == str(seg) and reader.torn[0].offset == size


def test_zeroed_pages_inside_the_last_block_are_a_torn_tail(tmp_path: Path) -> None:
    # A crash can leave the size updated but the data pages unwritten (zeros).
    cap = tmp_path / "cap"
    small_capture(cap, n=2)
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    start, end, _ = blocks_of(bytes(data))[-1]
    data[start + HEAD.size : end] = bytes(end - start - HEAD.size)
    seg.write_bytes(bytes(data))
    got, reader = read_all(cap)
    assert [r["type"] for r in got] == ["header", "exchange", "exchange"]
    assert len(reader.torn) == 1 and reader.torn[0].offset == start
    assert not reader.closed_cleanly


def _paged_capture(path: Path) -> tuple[Path, bytes, list[tuple[int, int, list[dict[str, Any]]]]]:
    """A one-segment capture of blocks a few KiB each (random bodies don't compress), spanning pages."""
    recs = [exchange(i, chunks=[os.urandom(1500 + 700 * i)], chunk_ns=[1]) for i in range(8)]
    writer = CaptureWriter(path, recorder=RECORDER).open()
    try:
        write_flushed(writer, recs)
    finally:
        writer.close()
    (seg,) = segment_paths(path)
    data = seg.read_bytes()
    return seg, data, blocks_of(data)


def _zeroed_from(seg: Path, data: bytes, cut: int) -> None:
    """The file as a power loss leaves it: its size saved, its pages from ``cut`` on never written."""
    seg.write_bytes(data[:cut] + bytes(len(data) - cut))


def _assert_torn_at(path: Path, blocks: list[tuple[int, int, list[dict[str, Any]]]], cut: int) -> None:
    got, reader = read_all(path)
    assert got == [r for _, end, recs in blocks if end <= cut for r in recs], f"zeros from {cut}"
    assert [t.offset for t in reader.torn] == [min(s for s, end, _ in blocks if end > cut)], f"zeros from {cut}"
    assert not reader.closed_cleanly


def test_zeroed_pages_from_each_page_boundary_to_the_end_are_a_torn_tail(tmp_path: Path) -> None:
    seg, data, blocks = _paged_capture(tmp_path / "cap")
    cuts = range(4096, len(data), 4096)
    assert len(cuts) >= 4 and any(blocks[-1][0] > cut for cut in cuts)  # zeros running past the block they start in
    for cut in cuts:
        _zeroed_from(seg, data, cut)
        _assert_torn_at(tmp_path / "cap", blocks, cut)


def test_zeros_from_inside_a_block_head_to_the_end_are_a_torn_tail(tmp_path: Path) -> None:
    seg, data, blocks = _paged_capture(tmp_path / "cap")
    start = blocks[3][0]
    for cut in range(start, start + HEAD.size + 2):
        _zeroed_from(seg, data, cut)
        _assert_torn_at(tmp_path / "cap", blocks, cut)


@pytest.mark.parametrize("damage", ["good blocks after", "garbage at the end", "a head that is no head's start"])
def test_zeros_that_do_not_run_to_the_end_stay_corruption(tmp_path: Path, damage: str) -> None:
    """Only zeros to the end of the file look like pages a power loss never wrote."""
    seg, data, blocks = _paged_capture(tmp_path / "cap")
    start, end, _ = blocks[3]
    broken = bytearray(data)
    if damage == "good blocks after":
        broken[(start + end) // 2 : end] = bytes(end - (start + end) // 2)
    elif damage == "garbage at the end":
        broken[(start + end) // 2 :] = bytes(len(data) - (start + end) // 2)
        broken[-1] = 1
    else:
        broken[start + 8 :] = bytes(len(data) - start - 8)
        broken[start + 8] = ord("J")  # ITAP's first letter changed: not a head cut short, a damaged one
    seg.write_bytes(bytes(broken))
    with pytest.raises(CaptureCorruptError) as info:
        list(CaptureReader(tmp_path / "cap"))
    assert info.value.offset == start


# -- corruption ----------------------------------------------------------------------------------


def test_corrupt_block_in_the_middle(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    small_capture(cap, n=4)
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    blocks = blocks_of(data)
    assert len(blocks) >= 4
    for start, end, _ in blocks[:-1]:
        corrupt = bytearray(data)
        corrupt[(start + HEAD.size + end) // 2] ^= 0x40
        seg.write_bytes(bytes(corrupt))
        reader = CaptureReader(cap)
        seen: list[dict[str, Any]] = []
        with pytest.raises(CaptureCorruptError) as info:
            for rec in reader.records():
                seen.append(rec)
        assert str(seg) in str(info.value)
        assert f"byte offset {start}" in str(info.value)
        assert info.value.offset == start and info.value.path == str(seg)
        # everything before the damaged block was delivered
        assert seen == [r for s, _, recs in blocks if s < start for r in recs]


def test_corrupt_block_head_magic_in_the_middle(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    small_capture(cap, n=3)
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    start = blocks_of(data)[2][0]
    corrupt = bytearray(data)
    corrupt[start] ^= 0xFF
    seg.write_bytes(bytes(corrupt))
    with pytest.raises(CaptureCorruptError) as info:
        list(CaptureReader(cap))
    assert info.value.offset == start
    assert str(seg) in str(info.value) and f"byte offset {start}" in str(info.value)


def test_damaged_last_block_of_an_earlier_segment_reads_as_torn_and_reading_goes_on(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    small_capture(cap, n=4, max_segment_bytes=300)
    first = segment_paths(cap)[0]
    data = first.read_bytes()
    start, end, _ = blocks_of(data)[-1]  # the last block of a segment that is not the last one
    corrupt = bytearray(data)
    corrupt[end - 3] ^= 0x01
    first.write_bytes(bytes(corrupt))
    # The last block of a segment is where a torn write would be, so this reads as a torn tail
    # of that segment; reading must still go on into the following segments.
    got, reader = read_all(cap)
    assert [t.path for t in reader.torn] == [str(first)]
    assert reader.closed_cleanly
    assert got[-1]["type"] == "footer" and got[-1]["final"] is True


# -- records missing between segments ---------------------------------------------------------------


def _rotated(path: Path) -> tuple[list[Path], list[list[dict[str, Any]]]]:
    """A closed run over several segments (one exchange or two each); each segment's records."""
    small_capture(path, n=8, max_segment_bytes=200)
    segments = segment_paths(path)
    assert len(segments) >= 4
    return segments, [read_all(seg)[0] for seg in segments]


def _gaps(reader: CaptureReader) -> list[Gap]:
    assert all(isinstance(t, Gap) for t in reader.torn)
    return [t for t in reader.torn if isinstance(t, Gap)]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_a_missing_segment_is_reported_and_the_rest_read(tmp_path: Path, which: int) -> None:
    cap = tmp_path / "cap"
    segments, held = _rotated(cap)
    segments[which].unlink()
    got, reader = read_all(cap)
    assert got == [r for i, recs in enumerate(held) if i != which for r in recs]
    (gap,) = _gaps(reader)
    assert gap.path == str(segments[which + 1]) and segments[which].name in str(gap) and "missing" in str(gap)
    assert summarize(cap)["torn"] == [str(gap)]  # infertap info, analysis and replay warn with these


def test_a_middle_segment_cut_short_at_a_block_boundary_is_reported(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    segments, held = _rotated(cap)
    data = segments[1].read_bytes()
    footer_start = blocks_of(data)[-1][0]
    segments[1].write_bytes(data[:footer_start])  # a whole block short: no torn tail to see
    got, reader = read_all(cap)
    assert got == [r for recs in held for r in recs if r is not held[1][-1]]
    (gap,) = _gaps(reader)
    assert gap.path == str(segments[1]) and gap.offset == footer_start and "without its footer" in gap.reason


def test_a_runs_lost_last_segment_is_reported(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    segments, held = _rotated(cap)
    segments[-1].unlink()
    got, reader = read_all(cap)
    assert got == [r for recs in held[:-1] for r in recs] and not reader.closed_cleanly
    (gap,) = _gaps(reader)
    assert gap.path == str(segments[-2]) and "goes on in a later segment" in gap.reason


def test_a_block_missing_from_a_segment_is_told_by_the_footers_counts(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    small_capture(cap, n=4)
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    start, end, _ = blocks_of(data)[2]
    seg.write_bytes(data[:start] + data[end:])  # an exchange's block gone, every block whole
    got, reader = read_all(cap)
    assert len([r for r in got if r["type"] == "exchange"]) == 3 and reader.closed_cleanly
    (gap,) = _gaps(reader)
    assert "counts 5 records and 4 exchanges" in gap.reason and "hold 4 and 3" in gap.reason


def test_whole_captures_and_segments_read_alone_report_no_gap(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    segments, _ = _rotated(cap)
    assert read_all(cap)[1].torn == []
    for seg in segments:  # a segment alone: its run's other segments are not expected
        assert read_all(seg)[1].torn == []
    segments[-1].write_bytes(b"")  # a crash as the writer began the next segment
    assert read_all(cap)[1].torn == []


def test_a_segment_is_synced_to_disk_before_the_next_is_begun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A power loss then tears only the segment being written; it can't leave a hole before it."""
    events: list[str] = []
    real_fsync, real_open = os.fsync, os.open

    def fsync(fd: int) -> None:
        events.append("sync " + os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def opened(path: Any, flags: int, mode: int = 0o777) -> int:
        events.append("open " + os.path.basename(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "open", opened)
    cap = tmp_path / "cap"
    small_capture(cap, n=6, max_segment_bytes=200)
    names = [p.name for p in segment_paths(cap)]
    assert len(names) >= 3
    assert events == [e for name in names for e in (f"open {name}", f"sync {name}")]


# -- versions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", [0, 2, -1])
def test_unknown_major_version_is_refused(tmp_path: Path, which: int) -> None:
    from infertap.capture.framing import Block, iter_blocks

    cap = tmp_path / "cap"
    small_capture(cap, n=3)
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    start = blocks_of(bytes(data))[which][0]
    struct.pack_into("<H", data, start + MAJOR_OFFSET, FORMAT_MAJOR + 1)
    reseal_head(data, start)
    seg.write_bytes(bytes(data))
    # a writer of that version would seal its head with its own checksum: the block frames validly
    with open(seg, "rb") as f:
        items = list(iter_blocks(f, len(data)))
    assert all(isinstance(i, Block) for i in items)
    assert [i.major for i in items if i.offset == start] == [FORMAT_MAJOR + 1]

    with pytest.raises(UnsupportedFormatError) as info:
        list(CaptureReader(cap))
    msg = str(info.value)
    assert f"{FORMAT_MAJOR + 1}.{FORMAT_MINOR}" in msg
    assert str(seg) in msg


def test_newer_minor_version_is_read(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    recs = small_capture(cap, n=2)
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    for start, _, _ in blocks_of(bytes(data)):
        struct.pack_into("<H", data, start + MINOR_OFFSET, FORMAT_MINOR + 7)
        reseal_head(data, start)
    seg.write_bytes(bytes(data))
    got, reader = read_all(cap)
    assert [r for r in got if r["type"] == "exchange"] == recs
    assert reader.closed_cleanly


# -- the writer ----------------------------------------------------------------------------------


def test_write_from_an_event_loop_loses_nothing(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    n_tasks, per_task = 20, 250
    writer = CaptureWriter(cap, recorder=RECORDER).open()

    async def producer(t: int) -> None:
        for i in range(per_task):
            writer.write(exchange(t * per_task + i))
            if i % 50 == 0:
                await asyncio.sleep(0)

    async def main() -> None:
        await asyncio.gather(*(producer(t) for t in range(n_tasks)))

    asyncio.run(main())
    writer.close()
    assert writer.error is None and writer.dropped == 0
    assert writer.exchanges == n_tasks * per_task
    got, reader = read_all(cap)
    exchanges = [r for r in got if r["type"] == "exchange"]
    assert len(exchanges) == n_tasks * per_task
    assert sorted(r["seq"] for r in exchanges) == list(range(n_tasks * per_task))
    # each task's records keep their order
    for t in range(n_tasks):
        mine = [r["seq"] for r in exchanges if r["seq"] // per_task == t]
        assert mine == sorted(mine)
    assert reader.closed_cleanly
    assert got[-1]["exchanges"] == n_tasks * per_task


def test_write_from_many_threads_loses_nothing(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    n_threads, per_thread = 8, 200
    with CaptureWriter(cap, recorder=RECORDER, max_segment_bytes=20_000) as writer:
        threads = [
            threading.Thread(target=lambda t=t: [writer.write(exchange(t * per_thread + i)) for i in range(per_thread)])
            for t in range(n_threads)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    got, reader = read_all(cap)
    assert sorted(r["seq"] for r in got if r["type"] == "exchange") == list(range(n_threads * per_thread))
    assert reader.closed_cleanly  # (how many segments depends on how the writer batched: rotation is between frames)


def test_records_survive_without_close(tmp_path: Path) -> None:
    """A killed process: what the writer thread has written is readable, minus the footer."""
    cap = tmp_path / "cap"
    recs = [exchange(i) for i in range(50)]
    writer = CaptureWriter(cap, recorder=RECORDER).open()
    try:
        for rec in recs:
            writer.write(rec)
        wait_for(lambda: writer.records >= len(recs) + 1, "all records written")  # + the header
        got, reader = read_all(cap)
        assert [r for r in got if r["type"] == "exchange"] == recs
        assert got[0]["type"] == "header"
        assert all(r["type"] != "footer" for r in got)
        assert reader.closed_cleanly is False
        assert reader.torn == []
    finally:
        writer.close()
    _, reader = read_all(cap)
    assert reader.closed_cleanly is True


def test_header_is_on_disk_right_after_open(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    writer = CaptureWriter(cap, recorder=RECORDER).open()
    try:
        got, reader = read_all(cap)
        assert [r["type"] for r in got] == ["header"]
        assert not reader.closed_cleanly
    finally:
        writer.close()


def test_open_on_a_bad_path_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(CaptureWriteError) as info:
        CaptureWriter(blocker / "cap", recorder=RECORDER).open()
    assert str(blocker / "cap") in str(info.value)


def test_write_failure_sets_error_and_counts_dropped(tmp_path: Path) -> None:
    """Disk full: /dev/full put in place of the segment's fd makes every write fail with ENOSPC
    (root ignores permission bits, so that's the reliable way to get a failing write)."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    cap = tmp_path / "cap"
    writer = CaptureWriter(cap, recorder=RECORDER).open()
    write_flushed(writer, [exchange(0)])
    full = os.open("/dev/full", os.O_WRONLY)
    try:
        os.dup2(full, writer._fd)
    finally:
        os.close(full)
    n = 5
    for i in range(1, n + 1):
        writer.write(exchange(i))  # must not raise into the caller
    wait_for(lambda: writer.error is not None, "the write error to be noticed")
    writer.close()
    assert isinstance(writer.error, OSError)
    assert writer.dropped >= n  # the records (and the footer, which could not be written either)
    assert writer.exchanges == 1
    got, reader = read_all(cap)
    assert [r["seq"] for r in got if r["type"] == "exchange"] == [0]
    assert not reader.closed_cleanly


def test_failed_rotation_sets_error_and_counts_every_dropped_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The next segment can't be created (here: the disk is full): recording stops, but every
    later record is counted as dropped, and the writer thread neither dies nor touches a stale fd."""
    crashes: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: crashes.append(args.exc_value))
    cap = tmp_path / "cap"
    writer = CaptureWriter(cap, recorder=RECORDER, max_segment_bytes=1).open()
    real_open = os.open

    def full(path: Any, flags: int, mode: int = 0o777) -> int:
        if str(path).endswith("000001.itap.zst"):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", full)
    writer.write(exchange(0))
    wait_for(lambda: writer.error is not None, "the rotation to fail")
    later = 4
    for i in range(1, later + 1):
        writer.write(exchange(i))
    writer.close()
    assert writer._thread is not None and not writer._thread.is_alive()
    assert isinstance(writer.error, OSError)
    assert crashes == []
    got, _ = read_all(cap)
    on_disk = [r["seq"] for r in got if r["type"] == "exchange"]
    assert on_disk == [0]
    assert writer.dropped >= later


def test_close_is_idempotent(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    writer = CaptureWriter(cap, recorder=RECORDER).open()
    writer.write(exchange(0))
    writer.close()
    writer.close()
    assert writer.closed
    got, reader = read_all(cap)
    assert [r["type"] for r in got].count("footer") == 1 and reader.closed_cleanly


# -- reader errors -------------------------------------------------------------------------------


def test_reader_on_a_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    with pytest.raises(CaptureError) as info:
        CaptureReader(missing)
    assert str(missing) in str(info.value) and "no such capture" in str(info.value)


def test_reader_on_a_directory_without_segments(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a segment")
    with pytest.raises(CaptureError) as info:
        CaptureReader(empty)
    assert str(empty) in str(info.value) and "not a capture" in str(info.value)


def test_reader_on_a_file_that_is_not_a_capture(tmp_path: Path) -> None:
    bogus = tmp_path / "000000.itap.zst"
    bogus.write_bytes(b"hello, this is not a capture at all" * 3)
    with pytest.raises(CaptureCorruptError) as info:
        list(CaptureReader(bogus))
    assert info.value.offset == 0 and str(bogus) in str(info.value)


@pytest.mark.parametrize("field_offset", [16, 17, 19, 20, 24])  # zlen bytes, frame crc, head crc
def test_a_damaged_block_head_mid_file_is_corruption_not_a_torn_tail(tmp_path: Path, field_offset: int) -> None:
    """A damaged length must not pass for a write cut short: that would silently hide the rest."""
    cap = tmp_path / "cap"
    small_capture(cap, n=4)
    (seg,) = segment_paths(cap)
    data = bytearray(seg.read_bytes())
    start = blocks_of(bytes(data))[1][0]
    data[start + field_offset] ^= 0x40
    seg.write_bytes(bytes(data))
    with pytest.raises(CaptureCorruptError) as info:
        list(CaptureReader(cap))
    assert info.value.offset == start and info.value.path == str(seg)


def test_a_record_that_cannot_be_packed_is_dropped_and_counted_not_fatal(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    writer = CaptureWriter(cap, recorder=RECORDER).open()
    writer.write(exchange(0))
    writer.write({"type": "exchange", "bad": object()})  # msgpack can't pack it
    writer.write(exchange(1))
    writer.close()
    got, reader = read_all(cap)
    assert [r["seq"] for r in got if r["type"] == "exchange"] == [0, 1]
    assert writer.dropped == 1 and reader.closed_cleanly


# -- the run's compression dictionary ------------------------------------------------------------


def streamed_exchange(i: int) -> dict[str, Any]:
    """An exchange shaped like an engine's: a JSON request and ~60 SSE chunks."""
    chunks = [
        b'data: {"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1796000000,"model":"smollm2",'
        b'"choices":[{"index":0,"delta":{"content":"tok%d "},"finish_reason":null}]}\n\n' % (i, k)
        for k in range(60)
    ]
    for chunk in chunks:
        sdk_shapes.chat_chunk(json.loads(chunk.removeprefix(b"data: ")))
    chunks.append(b"data: [DONE]\n\n")
    body = b'{"model":"smollm2","messages":[{"role":"user","content":"question %d"}],"stream":true,"max_tokens":64}' % i
    return exchange(i, request_body=body, chunks=chunks, chunk_ns=[1000 * k for k in range(len(chunks))])


def test_a_dictionary_from_the_runs_first_records_makes_lone_frames_small(tmp_path: Path) -> None:
    """One exchange per frame (an engine's pace): the same records, with and without the run's
    dictionary; all readable, each segment on its own too, the dictionary once per segment."""
    recs = [streamed_exchange(i) for i in range(300)]
    sizes = {}
    for learn in (True, False):
        cap = tmp_path / f"cap-{learn}"
        writer = CaptureWriter(cap, recorder=RECORDER, dictionary=learn, max_segment_bytes=60_000).open()
        write_flushed(writer, recs)
        writer.close()
        got, reader = read_all(cap)
        assert [r for r in got if r["type"] == "exchange"] == recs and reader.closed_cleanly
        dictionaries = [r for r in got if r["type"] == "dictionary"]
        segments = segment_paths(cap)
        assert len(segments) >= 3 and (dictionaries if learn else not dictionaries)
        if learn:
            assert dictionaries[0]["kind"] == "zstd-raw-content" and len(dictionaries[0]["data"]) == 128 * 1024
            assert all(d["data"] == dictionaries[0]["data"] for d in dictionaries)
            types = [[r["type"] for r in read_all(seg)[0]] for seg in segments]  # each segment read on its own
            made = next(k for k, t in enumerate(types) if "dictionary" in t)  # once the run had recorded 1 MiB
            assert made > 0 and all(t[:2] == ["header", "dictionary"] for t in types[made + 1 :])
            assert len(dictionaries) == len(segments) - made and all("exchange" in t for t in types[:-1])
        sizes[learn] = sum(p.stat().st_size for p in segments)
    assert sizes[True] < 0.75 * sizes[False], sizes


def test_a_torn_tail_after_the_dictionary_keeps_everything_before_it(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    recs = [streamed_exchange(i) for i in range(150)]
    writer = CaptureWriter(cap, recorder=RECORDER).open()
    write_flushed(writer, recs)
    writer.close()
    (seg,) = segment_paths(cap)
    data = seg.read_bytes()
    seg.write_bytes(data[: len(data) - 40])  # into the footer's frame
    got, reader = read_all(cap)
    assert [r for r in got if r["type"] == "exchange"] == recs and len(reader.torn) == 1
    assert any(r["type"] == "dictionary" for r in got)


def test_an_unknown_dictionary_kind_is_refused_clearly(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    with CaptureWriter(cap, recorder=RECORDER) as writer:
        writer.write({"type": "dictionary", "kind": "brotli-shared", "data": b"x" * 10})
        writer.write(exchange(0))
    with pytest.raises(UnsupportedFormatError, match="brotli-shared"):
        read_all(cap)


@pytest.mark.skipif(shutil.which("zstd") is None, reason="no zstd command")
def test_a_segment_with_a_dictionary_decodes_with_zstd_given_it(tmp_path: Path) -> None:
    """`zstd -D <dictionary> -dc` reads every frame, those before the dictionary record included."""
    import subprocess

    cap = tmp_path / "cap"
    writer = CaptureWriter(cap, recorder=RECORDER).open()
    write_flushed(writer, [streamed_exchange(i) for i in range(150)])
    writer.close()
    expected, _ = read_all(cap)
    (seg,) = segment_paths(cap)
    dictionary = tmp_path / "dict.bin"
    dictionary.write_bytes(next(r for r in expected if r["type"] == "dictionary")["data"])
    out = subprocess.run(["zstd", "-D", str(dictionary), "-dc", str(seg)], check=True, capture_output=True).stdout
    assert list(msgpack.Unpacker(io.BytesIO(out), raw=False, strict_map_key=False)) == expected
