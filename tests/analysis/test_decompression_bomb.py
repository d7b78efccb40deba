"""A response whose content-encoding inflates without end (a decompression bomb) is not read past
``apis.body.DECODED_LIMIT``: its answer unknown and said so, every other exchange analysed."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import brotli
import pytest
import zstandard
from click.testing import CliRunner

from infertap.apis import TOO_LARGE, body
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests.helpers import write_capture

LIMIT = 1 << 20  # lowered for the test: the bomb inflates to 4 MiB from a few KiB recorded
ANSWER = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}]}'


def _encoded(encoding: str, data: bytes) -> bytes:
    if encoding == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if encoding == "zstd":
        return zstandard.ZstdCompressor(level=19).compress(data)
    return brotli.compress(data)


@pytest.mark.parametrize("encoding", ["gzip", "zstd", "br"])
def test_a_decompression_bomb_is_unknown_and_the_rest_analysed(tmp_path: Path, monkeypatch, encoding: str) -> None:
    monkeypatch.setattr(body, "DECODED_LIMIT", LIMIT)
    bomb = _encoded(encoding, b"0" * (4 * LIMIT))
    assert len(bomb) < 64 * 1024
    headers = [["content-encoding", encoding]]
    cap = tmp_path / "cap"
    write_capture(
        cap,
        [
            {"id": "bomb", "chunks": [bomb[: len(bomb) // 2], bomb[len(bomb) // 2 :]], "response_headers": headers},
            {"id": "fits", "chunks": [_encoded(encoding, ANSWER)], "response_headers": headers},
        ],
    )
    before = {s: s.read_bytes() for s in CaptureReader(cap).segments}
    cache = str(tmp_path / "cache")

    result = CliRunner().invoke(cli, ["stats", str(cap), "--json", "--cache-dir", cache])
    assert result.exit_code == 0, result.output
    [group] = json.loads(result.output)["groups"]
    # The bomb: unknown, neither ok nor an error nor unreadable; the other answer read.
    assert (group["requests"], group["ok"], group["errors"], group["too_large"], group["unreadable"]) == (2, 1, 0, 1, 0)
    assert "too large 1" in CliRunner().invoke(cli, ["stats", str(cap), "--cache-dir", cache]).output

    # compare leaves it out, said, and compares the other.
    monkeypatch.setenv("INFERTAP_CACHE", cache)
    result = CliRunner().invoke(cli, ["compare", str(cap), str(cap), "--json"])
    assert result.exit_code == 0, result.output
    divergence = json.loads(result.stdout)["divergence"]
    assert divergence["pairs"] == 1 and divergence["counts"]["too_large"] == 1
    assert {s: s.read_bytes() for s in CaptureReader(cap).segments} == before  # the recorded data untouched

    # Under the limit the same bytes are read whole; over it, unread with the reason.
    [record] = [r for r in CaptureReader(cap).records() if r.get("id") == "bomb"]
    assert body.decoding(record) == (None, TOO_LARGE)
    monkeypatch.setattr(body, "DECODED_LIMIT", 8 * LIMIT)
    pieces, why = body.decoding(record)
    assert why is None and pieces is not None and b"".join(pieces) == b"0" * (4 * LIMIT)
