"""A body kept encoded as sent, not searched for credentials (``request_body_unsearched``,
``response_body_unsearched``), is counted and warned of by ``stats`` as ``info`` does: a capture
analysed is often the one then shared."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture

_UNSEARCHED = {"response_body_unsearched": "gzip decodes to more than 67108864 bytes"}


def _run(*args: str) -> tuple[str, str]:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout, result.stderr


def test_stats_counts_and_warns_of_a_body_not_searched(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{}, {"fields": _UNSEARCHED}])
    out, err = _run("stats", str(tmp_path / "cap"), "--cache-dir", str(tmp_path / "cache"), "--json")
    assert json.loads(out)["unsearched"] == {"exchanges": 1, "request": 0, "response": 1}
    assert "1 exchanges keep a body compressed as sent" in err
    info, _ = _run("info", str(tmp_path / "cap"), "--json")
    assert json.loads(info)["unsearched"] == json.loads(out)["unsearched"]  # the same count as info's


def test_stats_says_nothing_of_unsearched_bodies_where_every_body_was_searched(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{}, {}])
    out, err = _run("stats", str(tmp_path / "cap"), "--cache-dir", str(tmp_path / "cache"), "--json")
    assert json.loads(out)["unsearched"] == {"exchanges": 0, "request": 0, "response": 0}
    assert "not be decoded to be searched" not in err
    text, err = _run("stats", str(tmp_path / "cap"), "--cache-dir", str(tmp_path / "cache"))
    assert "compressed as sent" not in text + err
