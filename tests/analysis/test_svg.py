"""The report's drawings as a reader sees them: every label inside its picture."""

from __future__ import annotations

import html
import math
import re

import pytest

from infertap.analysis.paired_divergence import histogram_bars
from infertap.analysis.svg import (
    BOTTOM,
    CHAR_W,
    COLORS,
    LABEL_H,
    LEFT,
    MARKS,
    PLOT_H,
    PLOT_W,
    STYLE,
    H,
    Lane,
    Line,
    bars_svg,
    cdf_svg,
    line_svg,
    scatter_svg,
    ticks,
    timeline_svg,
    width,
)


def _texts(svg: str) -> dict[str, float]:
    """Each text's content and its baseline's y."""
    return {html.unescape(text): float(y) for y, text in re.findall(r'<text[^>]* y="([\d.]+)"[^>]*>([^<]*)</text>', svg)}


def _bar_labels(svg: str) -> list[tuple[str, float]]:
    """Each bar's label (a text centred under the plot, not the y axis's ticks), with its centre's x."""
    found = re.findall(r'<text class="tick" x="([\d.]+)" y="[\d.]+" text-anchor="middle">([^<]*)</text>', svg)
    return [(html.unescape(t), float(x)) for x, t in found]


def test_a_histogram_s_bar_labels_never_overlap():
    # Every bucket 0-7 to 256+: 33 bars ~14 px apart, each labelled with ~45 px of "248-255", the
    # labels printed over one another. At most 7 px a character at the style's 11 px.
    svg = bars_svg(histogram_bars({start: 1 for start in range(0, 257, 8)}), "position")
    labels = _bar_labels(svg)
    extents = sorted((x - len(t) * 3.5, x + len(t) * 3.5) for t, x in labels)
    assert all(right < next_left for (_, right), (next_left, _) in zip(extents, extents[1:], strict=False))
    assert len(labels) >= 5 and labels[0][0] == "0-7" and labels[-1][0] == "256+"  # the open end still said
    assert svg.count("<rect") == 33  # every bar drawn, and named in its tooltip
    # Few bars: every one keeps its label.
    assert [t for t, _ in _bar_labels(bars_svg(histogram_bars({0: 2, 8: 1, 16: 4}), "position"))] == ["0-7", "8-15", "16-23"]


def test_a_histogram_s_empty_buckets_are_drawn_so_its_spacing_is_honest():
    # Pairs parting at 3 and at 125: the buckets between are there, at 0, not 0-7 beside 120-127.
    bars = histogram_bars({0: 2, 120: 1})
    assert list(bars) == [f"{s}-{s + 7}" for s in range(0, 121, 8)] and bars["0-7"] == 2 and bars["8-15"] == 0
    assert list(histogram_bars({256: 1}))[-1] == "256+" and histogram_bars({}) == {}


def test_a_bound_at_the_top_of_the_plot_has_its_label_inside_the_drawing():
    # error_rate<=1% drawn in %: the bound (1) sets the axis, its line the plot's top edge; the label
    # above the line had its baseline 7 px from the top, the top of its letters cut off.
    svg = line_svg([Line("A", [(1, 0.0), (2, 0.0)])], "speed", "error rate (%)", hlines=[(1.0, "SLO error_rate<=1%")])
    assert _texts(svg)["SLO error_rate<=1%"] >= LABEL_H
    lower = line_svg([Line("A", [(1, 10.0), (2, 300.0)])], "speed", "ms", hlines=[(150.0, "SLO e2e:p90<=150ms")])
    line_y = float(re.search(r'<g class="hline"><line x1="\d+" y1="([\d.]+)"', lower).group(1))
    assert _texts(lower)["SLO e2e:p90<=150ms"] < line_y  # where there is room, above its line as before


def test_two_runs_that_coincide_both_show():
    # The same run twice (or two runs alike): B drawn over A at the same width hid A wholly, and the
    # page read as if A had no values. A is drawn wider, a rim around B wherever they meet.
    same = [1.0, 2.0, 3.0]
    cdf = cdf_svg([("A", same), ("B", same)], "ttft ms")
    widths = [(c, float(w)) for c, w in re.findall(r'<polyline[^>]* stroke="(#\w+)" stroke-width="([\d.]+)"', cdf)]
    assert [c for c, _ in widths] == list(COLORS) and widths[0][1] > widths[1][1]
    dots = scatter_svg([("A", [(1.0, 2.0)]), ("B", [(1.0, 2.0)])], "s", "e2e ms")
    radii = [(c, float(r)) for r, c in re.findall(r'<circle[^>]* r="([\d.]+)" fill="[^"]+" stroke="(#\w+)"', dots)]
    assert [c for c, _ in radii] == list(COLORS) and radii[0][1] > radii[1][1]
    lines = line_svg(
        [Line("A", [(1, 2.0)], COLORS[0], stroke=width(0, 2)), Line("B", [(1, 2.0)], COLORS[1], stroke=width(1, 2))], "x", "y"
    )
    strokes = [float(w) for w in re.findall(r'<polyline[^>]* stroke-width="([\d.]+)"', lines)]
    marks = [float(r) for r in re.findall(r'<circle[^>]* r="([\d.]+)"', lines)]
    assert strokes[0] > strokes[1] and marks[0] > marks[1]
    assert cdf_svg([("A", same)], "ttft ms").count('stroke-width="2"') == 1  # one run: as thin as before


def test_headings_and_row_names_are_never_cut_mid_word():
    # At 800 px the claim card's long values squeezed its first column, and overflow-wrap:anywhere cut
    # the names to fit ("quantizati|on", "measuring|_side"); values may still wrap anywhere.
    rules = {k.strip(): v for k, v in re.findall(r"([^{}]+)\{([^{}]*)\}", STYLE)}
    assert "overflow-wrap:normal" in rules["th,td:first-child"]
    assert "overflow-wrap:anywhere" in rules["td,th"]


def test_a_cdf_is_drawn_as_steps():
    # An empirical CDF is a step function: flat between values, rising at each. It was drawn as a
    # line through (value, share) points, sloping across the flats: 0.5 reached at 40 ms read as
    # partly reached at 20 ms, where no value lies.
    svg = cdf_svg([("A", [40.0, 10.0, 40.0, 100.0])], "ttft ms")
    (points,) = re.findall(r'<polyline[^>]* points="([^"]+)"', svg)
    xt, yt = ticks(100.0), ticks(1.0)
    px = lambda v: f"{LEFT + v / xt[-1] * PLOT_W:.1f}"  # noqa: E731
    py = lambda v: f"{H - BOTTOM - v / yt[-1] * PLOT_H:.1f}"  # noqa: E731
    corners = [(10, 0), (10, 0.25), (40, 0.25), (40, 0.75), (100, 0.75), (100, 1)]  # ties rise together
    assert points.split() == [f"{px(x)},{py(y)}" for x, y in corners]
    # Must differ: each flat is level (one y for two x), each rise upright (one x for two y).
    xy = [p.split(",") for p in points.split()]
    assert all(xy[k][0] == xy[k + 1][0] for k in range(0, len(xy), 2))
    assert all(xy[k][1] == xy[k + 1][1] for k in range(1, len(xy) - 1, 2))
    # Must match: one value is one rise, from 0 to 1.
    (one,) = re.findall(r'<polyline[^>]* points="([^"]+)"', cdf_svg([("A", [5.0])], "ttft ms"))
    xt = ticks(5.0)
    assert one.split() == [f"{LEFT + 5 / xt[-1] * PLOT_W:.1f},{py(0)}", f"{LEFT + 5 / xt[-1] * PLOT_W:.1f},{py(1)}"]


def test_every_drawing_shrinks_whole_in_a_narrow_window():
    # At 560 px wide with no viewBox, a phone's or a split screen's narrower page ran the plots off its
    # edge, their right half and x axis title cut. Each drawing now carries its own coordinates and the
    # style caps its width at the page's: the browser scales it, labels and all.
    drawings = [
        cdf_svg([("A", [1.0, 2.0])], "ttft ms"),
        scatter_svg([("A", [(1.0, 2.0)])], "s", "e2e ms"),
        bars_svg({"0-7": 1}, "position"),
        line_svg([Line("A", [(1, 2.0)])], "x", "y"),
        timeline_svg([Lane("A s1", COLORS[0], [(0.0, 1.0), (2.0, 3.0)])], "s"),
    ]
    boxes = []
    for svg in drawings:
        tag = re.match(r"<svg [^>]*>", svg).group(0)
        w, h = float(re.search(r' width="([\d.]+)"', tag).group(1)), float(re.search(r' height="([\d.]+)"', tag).group(1))
        boxes.append(re.search(r' viewBox="([^"]+)"', tag).group(1).split())
        assert boxes[-1] == ["0", "0", f"{w:g}", f"{h:g}"], tag  # must match: the drawing's own size
    assert boxes[-1] != boxes[0]  # must differ: the timeline's box is its own, wider for its lanes' names
    rules = {k.strip(): v for k, v in re.findall(r"([^{}]+)\{([^{}]*)\}", STYLE)}
    assert "max-width:100%" in rules["svg"] and "height:auto" in rules["svg"]


def test_the_two_runs_are_told_apart_without_their_colours():
    # A and B differed by colour (and a stroke's width) alone, and the legend named only the colour:
    # printed in grey, or read by one who can't tell blue from red, which line was B's was a guess.
    cdf = cdf_svg([("A", [1.0, 2.0]), ("B", [1.0, 3.0])], "ttft ms")
    dashes = re.findall(r"<polyline([^>]*)>", cdf)
    assert "stroke-dasharray" not in dashes[0] and 'stroke-dasharray="6 3"' in dashes[1]  # must differ
    dots = scatter_svg([("A", [(1.0, 2.0)]), ("B", [(1.0, 2.0)])], "s", "e2e ms")
    fills = re.findall(r'<circle[^>]* fill="([^"]+)" stroke="(#\w+)"', dots)
    assert fills == [(COLORS[0], COLORS[0]), ("none", COLORS[1])]  # A filled, B hollow
    assert MARKS == ("solid line, filled dots", "dashed line, hollow dots")
    alone = cdf_svg([("A", [1.0])], "ttft ms")  # must match: one run is drawn as A is, solid
    assert "stroke-dasharray" not in alone


def _ticks_x(svg: str) -> dict[float, float]:
    """Each labelled x tick's value and its x."""
    found = re.findall(r'<text class="tick" x="([\d.]+)" y="([\d.]+)" text-anchor="middle">([^<]*)</text>', svg)
    return {float(t.replace(",", "")): float(x) for x, _, t in found}


def test_runs_far_apart_are_drawn_on_a_log_axis_where_each_value_lies(tmp_path):
    # B's ttft ran to 150,000 ms and A's to 2,400: on a linear axis A's whole curve sat in its first
    # 7 px. Far apart, the x axis is log10 (ticks at 1, 2 and 5 of each decade), and says so.
    fast, slow = [300.0, 800.0, 2400.0], [20_000.0, 90_000.0, 150_000.0]
    svg = cdf_svg([("A", fast), ("B", slow)], "ttft ms")
    assert "ttft ms (log scale)" in _texts(svg)
    labelled = _ticks_x(svg)
    assert {200.0, 1000.0, 10_000.0, 200_000.0} <= set(labelled)  # both ends, and decades between
    # A decade is one width wherever it lies: the x of a value is proportional to its log10.
    decade = labelled[10_000.0] - labelled[1000.0]
    assert labelled[200_000.0] - labelled[10_000.0] == pytest.approx(decade * math.log10(20), abs=0.15)
    a_line, b_line = re.findall(r'<polyline[^>]* points="([^"]+)"', svg)
    a_xs = sorted({float(p.split(",")[0]) for p in a_line.split()})
    for v, x in zip(fast, a_xs, strict=True):
        assert x == pytest.approx(labelled[1000.0] + math.log10(v / 1000) * decade, abs=0.15), v
    assert a_xs[-1] - a_xs[0] > 0.85 * decade  # A's 300 to 2,400 ms: 0.9 of a decade's width, not 7 px
    b_xs = sorted({float(p.split(",")[0]) for p in b_line.split()})
    assert b_xs[-1] == pytest.approx(labelled[10_000.0] + math.log10(15) * decade, abs=0.15)
    # Every tick mark, labelled or not, at 1, 2 or 5 of a decade.
    marks = re.findall(rf'<line x1="([\d.]+)" y1="{H - BOTTOM}" x2="[\d.]+" y2="{H - BOTTOM + 4}"', svg)
    for x in marks:
        mantissa = round(10 ** ((float(x) - labelled[1000.0]) / decade % 1), 1)
        assert mantissa in (1.0, 2.0, 5.0, 10.0), x
    # Must match: runs alike stay on the linear axis from 0, as before.
    alike = cdf_svg([("A", fast), ("B", [400.0, 900.0, 3000.0])], "ttft ms")
    assert "log scale" not in alike and _ticks_x(alike)[0.0] == LEFT
    # A run's own long tail (its largest far above its median) is log too; a value of 0 can't be: linear.
    assert "log scale" in cdf_svg([("A", [10.0, 11.0, 12.0, 5000.0])], "e2e ms")
    assert "log scale" not in cdf_svg([("A", [0.0, 11.0, 12.0, 5000.0])], "e2e ms")


def test_the_timelines_last_time_label_stays_inside_the_drawing():
    # A session of 150,000 s: the axis's last label, centred on its end, ran past the drawing's right
    # edge (its 24 px margin), cut where the page shrinks the drawing to its box.
    def right_edges(svg: str) -> tuple[float, float]:
        _, _, w, _ = map(float, re.search(r'viewBox="([^"]+)"', svg).group(1).split())
        last, x = max(_ticks_x(svg).items())
        return x + len(f"{last:,.0f}") * CHAR_W / 2, w

    reach, edge = right_edges(timeline_svg([Lane("A s1", COLORS[0], [(0.0, 100_000.0), (120_000.0, 150_000.0)])], "s"))
    assert reach <= edge
    # Must match: short labels keep the drawing as it was.
    short = timeline_svg([Lane("A s1", COLORS[0], [(0.0, 1.0), (2.0, 3.0)])], "s")
    assert re.search(r'viewBox="0 0 ([\d.]+) ', short).group(1) == "592"
