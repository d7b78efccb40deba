"""A compressed request body recorded cut short inside its content-encoding (a gzip trailer missing,
or the stream stopped mid-JSON) is read as far as its bytes go, and said so: ``requests.body_cut``
marks it for SQL, and stats and sql warn with its count (the meta's ``cut_requests``), as replay
refuses to edit it. Its exchange and request rows stay: no recorded data is lost."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from infertap.analysis import Analysis
from infertap.analysis.stats import speed_stats
from tests.helpers import write_capture

_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi " * 40}], "temperature": 0.5}


def _gzipped(name: str, cut: int) -> dict[str, object]:
    """The same request gzipped, less its last ``cut`` bytes (0: whole)."""
    raw = gzip.compress(json.dumps({**_BODY, "tag": name}).encode(), mtime=7)
    headers = [["content-type", "application/json"], ["content-encoding", "gzip"]]
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}
    return {"id": name, "path": "/v1/chat/completions", "body": raw[: len(raw) - cut], "headers": headers,
            "chunks": [json.dumps(answer).encode()]}  # fmt: skip


def test_a_gzip_body_cut_short_is_marked_counted_and_said_and_a_whole_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    # Its trailer missing (the whole JSON still there), cut mid-JSON, and whole.
    write_capture(tmp_path / "cut", [_gzipped("trailer", 8), _gzipped("middle", 30), _gzipped("whole", 0)])
    with Analysis([tmp_path / "cut"]) as an:
        rows = dict(an.sql("SELECT exchange_id, body_cut FROM requests").fetchall())
        assert rows == {"trailer": True, "middle": True, "whole": False}
        # Read as far as it goes: the trailer-less body's JSON is whole, so it is read (and marked).
        assert an.sql("SELECT temperature FROM requests WHERE exchange_id = 'trailer'").fetchall() == [(0.5,)]
        assert an.sql("SELECT count(*) FROM exchanges").fetchall() == [(3,)]  # none lost
        [warning] = [w for w in an.warnings if "cut short inside" in w]
        assert "2 compressed request bodies were recorded cut short" in warning
        assert speed_stats(an)["cut_requests"] == 2
    # Must match: the same bodies whole are marked nowhere, and nothing is said.
    write_capture(tmp_path / "whole", [_gzipped("trailer", 0), _gzipped("whole", 0)])
    with Analysis([tmp_path / "whole"]) as an:
        assert an.sql("SELECT count(*) FROM requests WHERE body_cut").fetchall() == [(0,)]
        assert not [w for w in an.warnings if "cut short inside" in w] and speed_stats(an)["cut_requests"] == 0
