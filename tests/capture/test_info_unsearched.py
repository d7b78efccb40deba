"""``infertap info`` counts the exchanges whose body was kept compressed, not searched for
credentials (``request_body_unsearched``, ``response_body_unsearched``), and warns whoever would
share the capture: a credential may be inside those bytes on disk."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture


def _info(capture: Path, *extra: str) -> Any:
    done = CliRunner().invoke(cli, ["info", str(capture), *extra])
    assert done.exit_code == 0, done.output
    return done


def test_a_request_body_the_recorder_could_not_decode_is_counted_and_warned_of(fake: Any, record: Any) -> None:
    _, url = fake
    rec = record(url, "--no-probe", "--no-telemetry")
    searched = gzip.compress(b'{"model": "m", "messages": []}')
    assert httpx.post(rec.url + "/echo", content=searched, headers={"content-encoding": "gzip"}).status_code == 200
    assert httpx.post(rec.url + "/echo", content=b"\x00not brotli", headers={"content-encoding": "br"}).status_code == 200
    assert rec.stop() == 0
    as_json = _info(rec.out, "--json")
    assert json.loads(as_json.stdout)["unsearched"] == {"exchanges": 1, "request": 1, "response": 0}
    assert "1 exchanges keep a body compressed as sent" in as_json.stderr and "before sharing" in as_json.stderr
    text = _info(rec.out)
    assert "bodies not searched" in text.stdout and "1 exchanges (1 requests, 0 responses)" in text.stdout
    assert "a credential may be inside" in text.stderr


def test_either_flag_counts_once_per_exchange_and_none_says_none(tmp_path: Path) -> None:
    write_capture(
        tmp_path / "cap",
        [
            {"fields": {"response_body_unsearched": "gzip decodes to more than 67108864 bytes"}},
            {"fields": {"request_body_unsearched": "br does not decode", "response_body_unsearched": "zstd decodes to more"}},
            {},
        ],
    )
    assert json.loads(_info(tmp_path / "cap", "--json").stdout)["unsearched"] == {"exchanges": 2, "request": 1, "response": 2}
    write_capture(tmp_path / "clean", [{}, {}])
    clean = _info(tmp_path / "clean")
    assert json.loads(_info(tmp_path / "clean", "--json").stdout)["unsearched"] == {"exchanges": 0, "request": 0, "response": 0}
    assert "none (every body was searched" in clean.stdout and "credential" not in clean.stderr
