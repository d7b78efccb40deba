"""compare's energy where some ok answers have no output token count: J per output token is then per
request over the counted answers' mean, and compare says so as ``stats`` does (analysis/partly_counted.py),
beside the figure, in a note, in the B/A line and in --json. Captures written by the project's own writer,
the GPU's power as telemetry records in them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.compare import compare
from infertap.analysis.partly_counted import OVER_MEAN, note
from infertap.capture.records import new_telemetry
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from tests.analysis_builders import body, exchange

_JSON = [["content-type", "application/json"]]
_UPSTREAM = "http://127.0.0.1:8080"


def _answer(usage: bool) -> bytes:
    """A chat answer not streamed, of 3 output tokens by its usage, or of no count (no usage)."""
    said: dict[str, Any] = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": "stop"}]}
    if usage:
        said["usage"] = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    return json.dumps(said).encode()


def _run(path: Path, *, uncounted: int = 0, cut: bool = False) -> Path:
    """Four answers a second apart, the last ``uncounted`` with no usage; then, with ``cut``, a fifth
    the recorder kept only in part, with no usage in its kept tail; the GPU at 200 W throughout."""
    with CaptureWriter(path, recorder={"kind": "proxy", "upstream": _UPSTREAM}) as writer:
        for i in range(4):
            writer.write(
                exchange(
                    f"x{i}", sent_ms=i * 1000, chunks=[(900.0, _answer(i < 4 - uncounted))], end_ms=1000, seq=i,
                    request=body(stream=False), headers=_JSON, upstream=_UPSTREAM,
                )
            )  # fmt: skip
        if cut:
            whole = _answer(False)
            writer.write(
                exchange(
                    "x4", sent_ms=4000, chunks=[(900.0, whole[:20])], end_ms=1000, seq=4, request=body(stream=False),
                    headers=_JSON, upstream=_UPSTREAM, response_body_size=1 << 20, response_tail=whole[-20:],
                )
            )  # fmt: skip
        for at in range(0, 4001 + 1000 * cut, 250):
            writer.write(new_telemetry("gpu", writer.started_wall + at / 1e3, [["gpu_power_watts", {"gpu": "0"}, 200.0]]))
    return path


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))


def _stats(path: Path) -> dict[str, Any]:
    with Analysis([path]) as a:
        [group] = speed_stats(a)["groups"]
    return group


def _printed(a: Path, b: Path) -> tuple[str, dict[str, Any]]:
    """compare's text (unwrapped) and its --json energy."""
    args = ["compare", str(a), str(b)]
    text, as_json = (CliRunner().invoke(cli, [*args, *more]) for more in ((), ("--json",)))
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output + as_json.output
    return " ".join(text.output.split()), json.loads(as_json.stdout)["energy"]


def test_compare_says_j_per_output_token_is_over_the_counted_answers_as_stats_does(tmp_path: Path) -> None:
    counted, part = _run(tmp_path / "counted"), _run(tmp_path / "part", uncounted=1)
    said = note(1, 4)
    assert said is not None
    stats = _stats(part)
    assert said in stats["partly_counted"]["note"]  # stats' own note (with its prompt total's after it)
    assert stats["partly_counted"]["figures"]["energy.joules_per_output_token"] == OVER_MEAN
    e = compare(counted, part, top=1)["energy"]
    assert e["partly_counted"] == {"a": None, "b": said}
    assert e["b"]["joules_per_output_token"] == pytest.approx(stats["energy"]["joules_per_output_token"])
    text, as_json = _printed(counted, part)
    assert as_json["partly_counted"] == {"a": None, "b": said}
    b_line = text.split("energy B: ")[1]
    assert b_line.startswith(f"{e['b']['joules_per_output_token']:.3g} J per output token ({OVER_MEAN}), "), b_line
    assert f"energy B: note: {said}" in text
    a_line = text.split("energy A: ")[1].split(" energy ")[0]
    assert OVER_MEAN not in a_line and "energy A: note:" not in text  # must differ: A's answers all counted
    assert f"x per request (B: J per output token {OVER_MEAN})" in text.split("energy B/A: ")[1]
    # Every answer uncounted: no J per output token, and the note says why.
    none = _run(tmp_path / "none", uncounted=4)
    e = compare(counted, none, top=1)["energy"]
    assert e["b"]["joules_per_output_token"] is None and e["partly_counted"]["b"] == note(4, 4)
    text, _ = _printed(counted, none)
    assert "energy B: unknown J per output token, " in text and f"energy B: note: {note(4, 4)}" in text
    assert "energy B/A:" not in text


def test_compare_says_nothing_where_every_ok_answer_is_counted(tmp_path: Path) -> None:
    """Must match: every ok answer counted, and an answer kept only in part with no usage in its kept
    tail, which is in no energy figure (energy is per ok answer): stats flags its output totals, not
    its J per output token, and compare says nothing of it either."""
    counted, cut = _run(tmp_path / "counted"), _run(tmp_path / "cut", cut=True)
    stats = _stats(cut)
    assert stats["response_not_kept_uncounted"] == 1 and stats["throughput"]["output_tokens_unknown"] == 0
    assert "energy.joules_per_output_token" not in stats["partly_counted"]["figures"]
    e = compare(counted, cut, top=1)["energy"]
    assert e["partly_counted"] == {"a": None, "b": None} and e["b"]["joules_per_output_token"] is not None
    text, as_json = _printed(counted, cut)
    assert as_json["partly_counted"] == {"a": None, "b": None}
    assert OVER_MEAN not in text and "note:" not in text.split("energy A: ")[1].split("engine state")[0]


def test_the_reports_energy_table_flags_the_side_over_its_counted_answers(tmp_path: Path) -> None:
    """The two-run report states each side's figures once, in its table: B's J per output token
    flagged as stats flags it, its note said once; A's, every answer counted, not."""
    import html
    import re

    counted, part = _run(tmp_path / "counted"), _run(tmp_path / "part", uncounted=1)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(counted), str(part), "-o", str(out)])
    assert result.exit_code == 0, result.output
    section = html.unescape(out.read_text().split("<h3>Energy and the engines&#x27; state</h3>")[1].split("<h3>")[0])
    [row] = re.findall(r"<tr><td>joules_per_output_token</td>(.*?)</tr>", section)
    _, a_cell, b_cell = re.findall(r"<td>(.*?)</td>", row)
    assert b_cell.endswith(f" ({OVER_MEAN})") and OVER_MEAN not in a_cell, row
    e = compare(counted, part, top=1)["energy"]
    assert b_cell == f"{e['b']['joules_per_output_token']:,.4f} ({OVER_MEAN})"
    assert section.count(f"energy B: note: {note(1, 4)}") == 1 and "energy A: note" not in section
    assert section.count(OVER_MEAN) == 2  # the table's cell and the B/A line's clause, nowhere else
