"""The report's drawings read from its HTML, for runs of very different speeds: every run placed
where a reader can tell its values, every axis labelled inside its drawing.

The captures are written by the project's writer (tests/analysis_builders.py), every time chosen
here; the report is the CLI's."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.analysis.svg import CHAR_W, COLORS, LEFT, number
from infertap.cli import cli
from tests.analysis_builders import body, event, exchange, sse, write_capture

#: Requests per run, and the sessions they take turns in.
N, SESSIONS = 12, 3


def e2e_ms(i: int, scale: float) -> float:
    """Request ``i``'s time to its last byte: its first token at (40 + 10 i) x ``scale`` ms, 200 x ``scale`` ms later its end."""
    return (40 + 10 * i + 200) * scale


def run(path: Path, scale: float) -> dict[str, float]:
    """A run whose every time is ``scale`` times the same run's at 1, the requests one after the other
    50 ms apart, turns of 3 sessions in rotation; each session's makespan (s), first send to last byte."""
    records, sent, spans = [], 0.0, {}
    for i in range(N):
        ttft, end = (40 + 10 * i) * scale, e2e_ms(i, scale)
        usage = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        chunks = [
            (ttft, sse(event("a", role="assistant"))),
            (ttft + 100 * scale, sse(event("b"))),
            (end, sse(event(finish="stop", usage=usage), "[DONE]")),
        ]
        session = f"sess{i % SESSIONS}"
        records.append(exchange(f"x{i}", sent_ms=sent, chunks=chunks, request=body(f"q{i}"), seq=i, session=session))
        first, _ = spans.get(session, (sent, 0.0))
        spans[session] = (first, sent + end)
        sent += end + 50
    write_capture(path, records)
    return {session: (last - first) / 1e3 for session, (first, last) in spans.items()}


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))


def report(tmp_path: Path, *runs: Path) -> str:
    out = tmp_path / f"{'-'.join(r.name for r in runs)}.html"
    result = CliRunner().invoke(cli, ["report", *map(str, runs), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out.read_text()


def drawing(page: str, heading: str) -> str:
    """The SVG under ``heading``."""
    return re.search(rf"<h3>{re.escape(heading)}</h3>\s*(<svg.*?</svg>)", page, re.S).group(1)


def texts(svg: str) -> list[tuple[str, float, float, str]]:
    """Each text: its content, x, y and anchor."""
    found = re.findall(r'<text[^>]* x="(-?[\d.]+)" y="([\d.]+)"(?: text-anchor="(\w+)")?[^>]*>([^<]*)</text>', svg)
    return [(html.unescape(t), float(x), float(y), anchor) for x, y, anchor, t in found]


def box(svg: str) -> tuple[float, float]:
    """The drawing's left and right edges, in its own coordinates."""
    left, _, w, _ = map(float, re.search(r'viewBox="([^"]+)"', svg).group(1).split())
    return left, left + w


def y_ticks(svg: str) -> dict[float, float]:
    """Each labelled y tick's value and its y (its label's baseline sits 4 px below the tick)."""
    return {float(t.replace(",", "")): y - 4 for t, x, y, anchor in texts(svg) if anchor == "end" and x == LEFT - 6}


def x_ticks(svg: str) -> dict[float, float]:
    """Each labelled x tick's value and its x."""
    found = re.findall(r'<text class="tick" x="([\d.]+)" y="[\d.]+" text-anchor="middle">([^<]*)</text>', svg)
    return {float(t.replace(",", "")): float(x) for x, t in found}


def dots(svg: str, color: str) -> list[float]:
    """The y of each dot of the run drawn in ``color``."""
    return [float(y) for y, c in re.findall(r'<circle cx="[\d.]+" cy="([\d.]+)"[^>]*stroke="(#\w+)"', svg) if c == color]


def test_the_latency_scatter_of_runs_far_apart_has_a_log_value_axis(tmp_path):
    # B 50x slower than A: on a linear e2e axis to 20,000 ms, A's 240 to 350 ms lay in one pixel row
    # along the x axis. Its value axis follows the CDFs' rule; time stays linear from 0.
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    run(fast, 1), run(slow, 50)
    svg = drawing(report(tmp_path, fast, slow), "e2e over time")
    titles = [t for t, *_ in texts(svg)]
    assert "e2e ms (log scale)" in titles and "s since the first request" in titles
    ticks = y_ticks(svg)
    (lo, y_lo), (hi, y_hi) = min(ticks.items()), max(ticks.items())

    def y(v: float) -> float:
        return y_lo + math.log10(v / lo) / math.log10(hi / lo) * (y_hi - y_lo)

    a = dots(svg, COLORS[0])
    assert a == pytest.approx([y(e2e_ms(i, 1)) for i in range(N)], abs=0.15)  # each where its value lies by log10
    assert dots(svg, COLORS[1]) == pytest.approx([y(e2e_ms(i, 50)) for i in range(N)], abs=0.15)
    assert max(a) - min(a) > 10  # A's own spread is seen: 240 to 350 ms, a sixth of a decade (1 px of 20,000 ms linear)
    # Must match: runs alike (2x apart) stay linear, from 0.
    alike = tmp_path / "alike"
    run(alike, 2)
    linear = drawing(report(tmp_path, fast, alike), "e2e over time")
    assert "e2e ms" in [t for t, *_ in texts(linear)] and 0.0 in y_ticks(linear)


def test_every_log_axis_labels_its_two_ends(tmp_path):
    # 20 to 50,000 ms: the ticks too close for every label, only the decades' were printed (100,
    # 1,000, 10,000), and the axis's first and last ticks, its range, were bare.
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    run(fast, 1), run(slow, 300)
    page = report(tmp_path, fast, slow)
    svg = drawing(page, "ttft (ms), CDF")
    assert "ttft ms (log scale)" in [t for t, *_ in texts(svg)]
    marks = sorted(float(x) for x in re.findall(r'<line x1="([\d.]+)" y1="198" x2="[\d.]+" y2="202"', svg))
    labelled = x_ticks(svg)
    assert min(labelled.values()) == marks[0] and max(labelled.values()) == marks[-1]
    assert len(labelled) < len(marks)  # crowded: some ticks between are bare...
    inner = [v for v, x in labelled.items() if marks[0] < x < marks[-1]]
    assert inner and all(math.log10(v) == round(math.log10(v)) for v in inner)  # ...and those labelled, decades
    extents = sorted((x - len(f"{v:,g}") * CHAR_W / 2, x + len(f"{v:,g}") * CHAR_W / 2) for v, x in labelled.items())
    assert all(right < left for (_, right), (left, _) in zip(extents, extents[1:], strict=False))  # none overlap
    # Must match: where the ticks fit apart, every one is labelled (runs 30x apart, 200 to 20,000 ms).
    close = tmp_path / "close"
    run(close, 30)
    svg = drawing(report(tmp_path, fast, close), "e2e (ms), CDF")
    marks = re.findall(r'<line x1="([\d.]+)" y1="198" x2="[\d.]+" y2="202"', svg)
    assert "(log scale)" in svg and len(x_ticks(svg)) == len(marks)


def test_a_run_of_one_value_is_not_drawn_on_the_axis_line(tmp_path):
    # Every tpot of A was the same round number, the log axis's first tick: A's CDF, one upright
    # line, lay on the y axis's own line and read as that axis.
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    run(fast, 1), run(slow, 50)
    svg = drawing(report(tmp_path, fast, slow), "tpot (ms), CDF")
    a_line, b_line = re.findall(r'<polyline[^>]* points="([^"]+)"', svg)
    a_x = {float(p.split(",")[0]) for p in a_line.split()}
    assert len(a_x) == 1 and a_x.pop() > LEFT + 10  # one value, right of the axis
    first = min(x_ticks(svg).items(), key=lambda kv: kv[1])
    assert first[1] == LEFT  # the axis starts at a labelled round number below A's value


def test_long_tick_labels_stay_inside_the_drawing_and_clear_of_the_axis_title(tmp_path):
    # B's e2e of 144 to 210 s, in ms: y labels of 7 characters (500,000) reached over the upright y
    # title at x 14, and the last x label ran past the drawing's right edge.
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    run(fast, 1), run(slow, 600)
    page = report(tmp_path, fast, slow)
    for heading in ("e2e over time", "e2e (ms), CDF"):
        svg = drawing(page, heading)
        left, right = box(svg)
        title_x = float(re.search(r'transform="rotate\(-90 (-?[\d.]+) ', svg).group(1))
        labels = [(t, x) for t, x, _, anchor in texts(svg) if anchor == "end" and x == LEFT - 6]
        assert title_x - 11 >= left  # the title's letters, 11 px tall, inside the drawing
        assert all(x - len(t) * CHAR_W >= title_x + 4 for t, x in labels), labels  # every label right of the title
        bottom = [(t, x) for t, x, _, anchor in texts(svg) if anchor == "middle" and t[0].isdigit()]
        assert all(x + len(t) * CHAR_W / 2 <= right for t, x in bottom), (bottom, right)
    assert any(len(t) >= 7 for t, *_ in texts(drawing(page, "e2e over time")))  # the case: labels like 200,000
    # Must match: short labels keep the drawing as it was, 560 px from 0, the title at 14.
    alone = drawing(report(tmp_path, fast), "e2e over time")
    assert box(alone) == (0.0, 560.0) and 'transform="rotate(-90 14 ' in alone


def test_each_session_lane_says_its_makespan(tmp_path):
    # The timeline's time axis stays linear (a bar's length is its turn's time); with B 50x slower,
    # A's sessions were a few pixels of bars and nothing said how long they took.
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    spans_a, spans_b = run(fast, 1), run(slow, 50)
    page = report(tmp_path, fast, slow)
    svg = re.search(r"<h3>Sessions that grew most on B[^<]*</h3>\s*(<svg.*?</svg>)", page, re.S).group(1)
    lanes = {t: x for t, x, _, anchor in texts(svg) if anchor == "end"}
    for session in spans_a:
        assert f"A {session} ({number(spans_a[session])} s)" in lanes
        assert f"B {session} ({number(spans_b[session])} s)" in lanes
        assert number(spans_a[session]) != number(spans_b[session])  # must differ: 50x
    left, _ = box(svg)
    assert all(x - len(t) * CHAR_W >= left for t, x in lanes.items())  # each name inside the drawing
    assert "(log scale)" not in svg
    assert "In brackets: each session's makespan" in html.unescape(page)  # the caption says what the figure is
    # Must match: one run's lanes say theirs too.
    one = re.search(r"<h3>Longest sessions</h3>\s*(<svg.*?</svg>)", report(tmp_path, fast), re.S).group(1)
    assert {t for t, _, _, anchor in texts(one) if anchor == "end"} == {f"A {s} ({number(v)} s)" for s, v in spans_a.items()}


def test_the_session_timeline_marks_and_labels_its_time_axis(tmp_path):
    # The timeline's time axis had grid lines and numbers floating under them, but no tick on the
    # axis itself, unlike every other plot's: where a second falls on the axis was the reader's guess.
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    spans = {"fast": run(fast, 1), "slow": run(slow, 50)}
    ends = {}
    for name, path in (("fast", fast), ("slow", slow)):
        svg = re.search(r"<h3>Longest sessions</h3>\s*(<svg.*?</svg>)", report(tmp_path, path), re.S).group(1)
        axis_y, x0, x1 = next(
            (float(y), float(a), float(b))
            for a, y, b, y2 in re.findall(r'<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)" stroke="#444"/>', svg)
            if y == y2
        )
        labelled = x_ticks(svg)
        marks = {
            float(x): float(y2) - float(y1)
            for x, y1, x2, y2 in re.findall(r'<line x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)" stroke="#444"/>', svg)
            if x == x2 and float(y1) == axis_y
        }
        assert len(labelled) >= 4  # 0 and at least 3 round numbers past it
        assert all(marks.get(x) == 4 for x in labelled.values()), (labelled, marks)  # each label's tick on the axis
        assert min(labelled.items()) == (0.0, x0) and max(labelled.items())[1] == x1  # from the axis's start to its end
        # The ticks place the seconds: the longest session's last bar ends at its makespan on that scale.
        top, at = max(labelled.items())
        longest = max(spans[name].values())
        bar_ends = [float(x) + float(w) for x, w in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg)]
        assert max(bar_ends) == pytest.approx(x0 + longest / top * (at - x0), abs=0.2)
        left, right = box(svg)
        assert all(x + len(number(t)) * CHAR_W / 2 <= right for t, x in labelled.items())  # every label inside the drawing
        ends[name] = top
    assert ends["slow"] == pytest.approx(50 * ends["fast"])  # must differ: a 50x slower run, an axis 50x longer
