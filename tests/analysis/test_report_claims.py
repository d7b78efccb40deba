"""The report's claim cards head each column with its capture's path: a folder holding `run/a/out` and
`run/b/out` had two columns both headed "A: out", which could not be told apart."""

from __future__ import annotations

import html
import re

from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture


def _headings(report: str) -> list[str]:
    section = html.unescape(report[report.index("<h2>Claim cards</h2>") :])
    return re.findall(r"<th>(A: [^<]*)</th>", section.split("</tr>")[0])


def test_captures_of_one_base_name_get_headings_that_tell_them_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    write_capture(tmp_path / "run" / "a" / "out", [{}])
    write_capture(tmp_path / "run" / "b" / "out", [{}])
    write_capture(tmp_path / "other" / "a", [{}])  # must match: base names differ already, kept short
    write_capture(tmp_path / "other" / "b", [{}])
    for folder, expected in (("run", ["A: a/out", "A: b/out"]), ("other", ["A: a", "A: b"])):
        out = tmp_path / f"{folder}.html"
        result = CliRunner().invoke(cli, ["report", str(tmp_path / folder), "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert _headings(out.read_text()) == expected
