"""The report's drawings as a reader sees them: every label inside its picture."""

from __future__ import annotations

import html
import re

from infertap.analysis.svg import LABEL_H, Line, line_svg


def _texts(svg: str) -> dict[str, float]:
    """Each text's content and its baseline's y."""
    return {html.unescape(text): float(y) for y, text in re.findall(r'<text[^>]* y="([\d.]+)"[^>]*>([^<]*)</text>', svg)}


def test_a_bound_at_the_top_of_the_plot_has_its_label_inside_the_drawing():
    # error_rate<=1% drawn in %: the bound (1) sets the axis, its line the plot's top edge; the label
    # above the line had its baseline 7 px from the top, the top of its letters cut off.
    svg = line_svg([Line("A", [(1, 0.0), (2, 0.0)])], "speed", "error rate (%)", hlines=[(1.0, "SLO error_rate<=1%")])
    assert _texts(svg)["SLO error_rate<=1%"] >= LABEL_H
    lower = line_svg([Line("A", [(1, 10.0), (2, 300.0)])], "speed", "ms", hlines=[(150.0, "SLO e2e:p90<=150ms")])
    line_y = float(re.search(r'<g class="hline"><line x1="\d+" y1="([\d.]+)"', lower).group(1))
    assert _texts(lower)["SLO e2e:p90<=150ms"] < line_y  # where there is room, above its line as before
