"""Inline SVG plots and HTML tables for the offline reports: no scripts, no network, plain notation."""

from __future__ import annotations

import bisect
import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .axes import LogAxis, ticks, wants_log

COLORS = ("#1f77b4", "#d62728")
W, H = 560, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 10, 42  # room for tick labels like 20,000 and the axis titles
PLOT_W, PLOT_H = W - LEFT - RIGHT, H - TOP - BOTTOM
LABEL_H = 12  # a label's height above its baseline, at the 11 px of the style's svg text, with a margin
CHAR_W = 7.0  # a character's width at most in that text (system-ui's digits, - and + are ~6.2 px at 11 px)
LABEL_GAP = 6  # px between two labels side by side


def number(v: float, digits: int = 4, *, trim: bool = True) -> str:
    """``v`` in plain notation, never 1.289e+04: 0.85, 12.3, 1,289, 64,213.

    ``digits`` significant digits, but the whole part is never rounded; ``trim``: trailing zeros
    dropped (2.5, not 2.500); else kept, so a column of ratios reads alike (1.00, 0.987, 12.3).
    """
    rounded = abs(float(f"{v:.{digits}g}"))  # 9.996 rounds to 10.0: one decimal, not two
    places = max(0, digits - 1 - math.floor(math.log10(rounded))) if rounded and math.isfinite(rounded) else 0
    text = f"{v:,.{places}f}"
    return text.rstrip("0").rstrip(".") if trim and "." in text else text


def width(i: int, n: int) -> float:
    """The stroke of run ``i`` of ``n`` drawn in turn on one set of axes: each wider than the ones
    drawn after it, so where two runs coincide (the same run twice, a shared stretch of two curves)
    the later one leaves the earlier showing as a rim around it, not hidden under it."""
    return 2.0 + 2.0 * (n - 1 - i)


#: How each run's lines and dots look beyond their colour, A's then B's: a page printed in grey,
#: or read by one who can't tell the two colours apart, told the runs by the legend's colours alone.
MARKS = ("solid line, filled dots", "dashed line, hollow dots")


def dash(i: int) -> str:
    """Run ``i``'s line pattern (``MARKS``): the first solid, later ones dashed."""
    return ' stroke-dasharray="6 3"' if i else ""


def _esc(value: Any) -> str:
    return html.escape("unknown" if value is None else number(value) if isinstance(value, float) else str(value))


def _svg_open(w: float, h: float, label: str, left: float = 0.0) -> str:
    """A drawing's opening tag, its own coordinates in a viewBox: the style's ``svg{max-width:100%}``
    then shrinks it whole in a window narrower than ``w``, where a fixed width ran off the page's edge
    and cut the plot and its labels. ``left``: px drawn left of x 0 (``w`` includes them)."""
    box = f"{-left if left else 0:g} 0 {w:g} {h:g}"
    return f'<svg width="{w:g}" height="{h:g}" viewBox="{box}" role="img" aria-label="{html.escape(label)}">'


def _x(v: float, ticks: Sequence[float]) -> float:
    return LEFT + v / ticks[-1] * PLOT_W


def _y(v: float, ticks: Sequence[float]) -> float:
    return H - BOTTOM - v / ticks[-1] * PLOT_H


#: Where the y axis's title stands (the baseline of its letters, turned upright), and the px its
#: letters reach right of it, with a margin: the y tick labels start no further left than that.
TITLE_X, TITLE_REACH = 14, 6


def _axes(
    label: str,
    xticks: Sequence[float] | None,
    yticks: Sequence[float],
    xlabel: str,
    ylabel: str,
    *,
    xlog: LogAxis | None = None,
    ylog: LogAxis | None = None,
    xtext: Callable[[float], str] = number,
) -> str:
    """The drawing's opening tag (``label``: what it shows, for a screen reader) and both axes with
    faint grid lines; ``xticks`` None: the caller labels x (categories); ``xtext``: an x tick's label.

    ``xlog``, ``ylog``: that axis by log10 from its ticks' ends (``xticks`` or ``yticks`` its ticks),
    its title saying "log scale", every tick labelled where they fit apart, else its ends and decades
    (``LogAxis.labelled``); linear from 0 when None, every tick labelled. The drawing widens past
    ``W`` where labels need it: y labels like 200,000 ms (a slow run's e2e) reached over the y title,
    and the last x label past the right edge."""
    ylabels = set(ylog.labelled(PLOT_H, lambda _: LABEL_H) if ylog else yticks)
    xlabels = set(xlog.labelled(PLOT_W, lambda t: len(xtext(t)) * CHAR_W + LABEL_GAP) if xlog else xticks or ())
    widest = max(len(number(t)) * CHAR_W for t in ylabels)
    left = max(0.0, widest - (LEFT - 6 - TITLE_X - TITLE_REACH))
    last = max(xlabels, default=None)
    right = 0.0 if last is None else max(0.0, _xpos(last, xticks or (), xlog) + len(xtext(last)) * CHAR_W / 2 - W)
    parts = [_svg_open(W + left + right, H, label, left)]
    parts += [
        f'<line x1="{LEFT}" y1="{_ypos(t, yticks, ylog):.1f}" x2="{W - RIGHT}" y2="{_ypos(t, yticks, ylog):.1f}" stroke="#eee"/>'
        for t in yticks[1:]
    ]
    parts += [
        f'<line x1="{LEFT}" y1="{H - BOTTOM}" x2="{W - RIGHT}" y2="{H - BOTTOM}" stroke="#444"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{H - BOTTOM}" stroke="#444"/>',
    ]
    for t in yticks:
        y = _ypos(t, yticks, ylog)
        parts.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#444"/>')
        if t in ylabels:
            parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{number(t)}</text>')
    for t in xticks or ():
        x = _xpos(t, xticks or (), xlog)
        parts.append(f'<line x1="{x:.1f}" y1="{H - BOTTOM}" x2="{x:.1f}" y2="{H - BOTTOM + 4}" stroke="#444"/>')
        if t in xlabels:
            parts.append(
                f'<text class="tick" x="{x:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{html.escape(xtext(t))}</text>'
            )
    mid, tx = TOP + PLOT_H / 2, TITLE_X - left
    xlabel, ylabel = (f"{title} (log scale)" if log else title for title, log in ((xlabel, xlog), (ylabel, ylog)))
    parts.append(
        f'<text x="{LEFT + PLOT_W / 2}" y="{H - 6}" text-anchor="middle">{html.escape(xlabel)}</text>'
        f'<text x="{tx:g}" y="{mid}" transform="rotate(-90 {tx:g} {mid})" text-anchor="middle">{html.escape(ylabel)}</text>'
    )
    return "".join(parts)


def _xpos(v: float, ticks: Sequence[float], log: LogAxis | None) -> float:
    return LEFT + log.share(v) * PLOT_W if log else _x(v, ticks)


def _ypos(v: float, ticks: Sequence[float], log: LogAxis | None) -> float:
    return H - BOTTOM - log.share(v) * PLOT_H if log else _y(v, ticks)


def steps(ordered: Sequence[float]) -> list[tuple[float, float]]:
    """The corners of the empirical CDF of ``ordered`` (sorted values): a step function, flat
    between values and rising at each by its share, so a line between the corners draws it. A line
    through the values' own points alone slopes across the flats: a share reached at 80 ms read as
    partly reached at 50 ms, where no value lies."""
    n, out, i = len(ordered), [], 0
    while i < n:
        j = bisect.bisect_right(ordered, ordered[i], i)  # the values equal to this one rise together
        out += [(ordered[i], i / n), (ordered[i], j / n)]  # flat up to it at the share below it, then up
        i = j
    return out


def cdf_svg(series: Sequence[tuple[str, Sequence[float]]], label: str) -> str:
    """Empirical CDFs, one line per series: the whole distribution, tails included. A NaN or
    infinite value has no place on an axis: left out, as unknown, not a broken drawing. Runs far
    apart, or a run with a long tail (``wants_log``), are drawn on a log x axis, its title saying so."""
    series = [(name, [v for v in s if math.isfinite(v)]) for name, s in series]
    values = [v for _, s in series for v in s]
    if not values:
        return f"<p>no {html.escape(label)} values</p>"
    log = LogAxis.over(min(values), max(values)) if wants_log([s for _, s in series]) else None
    xt, yt = log.ticks() if log else ticks(max(values)), ticks(1.0)
    parts = [_axes(f"{label} CDF", xt, yt, label, "share ≤ x", xlog=log)]
    for n, ((name, s), color) in enumerate(zip(series, COLORS, strict=False)):
        ordered = sorted(s)
        if not ordered:
            continue
        pts = " ".join(f"{_xpos(x, xt, log):.1f},{_y(y, yt):.1f}" for x, y in steps(ordered))
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="{width(n, len(series)):g}"{dash(n)} points="{pts}">'
            f"<title>{html.escape(name)}</title></polyline>"
        )
    parts.append("</svg>")
    return "".join(parts)


def scatter_svg(series: Sequence[tuple[str, Sequence[tuple[float, float]]]], xlabel: str, ylabel: str) -> str:
    """Each run's points, on one set of axes. The value axis (y) follows the CDFs' rule
    (``wants_log``): runs 10-100x apart in e2e drew the faster one as a line along the x axis. The
    time axis (x) stays linear from 0: a run's first request is at 0, which a log axis can't place,
    and the telemetry plots below share that axis; a run much shorter than the other stays in its
    left part, as it was in time."""
    series = [(name, [(x, y) for x, y in s if math.isfinite(x) and math.isfinite(y)]) for name, s in series]
    points = [p for _, s in series for p in s]
    if not points:
        return "<p>no points</p>"
    ys = [y for _, y in points]
    log = LogAxis.over(min(ys), max(ys)) if wants_log([[y for _, y in s] for _, s in series]) else None
    xt, yt = ticks(max(x for x, _ in points)), log.ticks() if log else ticks(max(ys))
    parts = [_axes(f"{ylabel} over time", xt, yt, xlabel, ylabel, ylog=log)]
    for n, ((name, s), color) in enumerate(zip(series, COLORS, strict=False)):
        r = 0.5 + width(n, len(series))
        for x, y in s:
            parts.append(
                f'<circle cx="{_x(x, xt):.1f}" cy="{_ypos(y, yt, log):.1f}" r="{r:g}" fill="{"none" if n else color}" stroke="{color}" '
                f'stroke-width="1.5" opacity="0.7"><title>{html.escape(name)}: {number(x)}, {number(y)}</title></circle>'
            )
    parts.append("</svg>")
    return "".join(parts)


def bars_svg(counts: dict[Any, int], xlabel: str) -> str:
    """One bar per key, in order, the keys as the x axis's labels: every bar's where they fit, else
    every k-th bar's, counted back from the last (a histogram's open-ended 256+ keeps its label), so
    no two labels overlap; each bar's key and count stay in its tooltip."""
    if not counts:
        return "<p>no divergence</p>"
    keys = list(counts)
    yt = ticks(max(counts.values()), whole=True)
    bw = PLOT_W / len(keys)
    # A label's width at most, and a gap: 33 buckets 14 px apart under labels like 248-255 (~45 px)
    # printed every one of them over its neighbours.
    room = max(len(str(k)) for k in keys) * CHAR_W + LABEL_GAP
    every = math.ceil(room / bw - 1e-9)
    parts = [_axes(xlabel, None, yt, xlabel, "pairs")]
    for i, k in enumerate(keys):
        top = _y(counts[k], yt)
        parts.append(
            f'<rect x="{LEFT + i * bw + 1:.1f}" y="{top:.1f}" width="{bw - 2:.1f}" height="{H - BOTTOM - top:.1f}" fill="{COLORS[0]}">'
            f"<title>{html.escape(str(k))}: {counts[k]}</title></rect>"
        )
        if (len(keys) - 1 - i) % every == 0:
            parts.append(
                f'<text class="tick" x="{LEFT + (i + 0.5) * bw:.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{html.escape(str(k))}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


#: A point's shape on a ``Line``.
Marker = Literal["circle", "square"]

#: How each sweep's points look beyond their colour, A's then B's: there, dashed already means achieved
#: requests/s and hollow a failed point, so the runs are told apart by the points' shape.
SWEEP_MARKERS: tuple[Marker, Marker] = ("circle", "square")
SWEEP_MARKS = ("circles", "squares")


@dataclass(frozen=True, slots=True)
class Line:
    """One line of ``line_svg``: points joined in x order, each marked (hollow where ``hollow``: a sweep's failed
    point, or every point of the report's run B, ``MARKS``)."""

    name: str
    points: Sequence[tuple[float, float | None]]  # (x, y); y None: no value there, left out
    color: str = COLORS[0]
    dashed: bool = False
    hollow: Sequence[bool] = ()
    stroke: float = 2.0  # ``width(run, runs)``: an earlier run's wider, seen where a later one lies on it
    marker: Marker = "circle"  # the sweep report's second cue for its runs (``SWEEP_MARKS``)
    x_text: Callable[[float], str] | None = None  # a point's x in its tooltip (a sweep's load as tried); else number()


def line_svg(
    lines: Sequence[Line],
    xlabel: str,
    ylabel: str,
    *,
    hlines: Sequence[tuple[float, str]] = (),
    xtick_text: Callable[[float], str] = number,
) -> str:
    """Lines through points against a shared x axis from 0, with horizontal reference lines
    (``hlines``: a value and its label, e.g. an SLO's bound) drawn dashed grey across the plot. A
    point with a NaN or infinite coordinate is left out, as one with no value. ``xtick_text``: an x
    tick's label (a sweep's load axis writes its ticks as loads are written, "1500", not "1,500")."""
    lines = [
        replace(
            line, points=[(x, y if y is not None and math.isfinite(x) and math.isfinite(y) else None) for x, y in line.points]
        )
        for line in lines
    ]
    hlines = [(v, label) for v, label in hlines if math.isfinite(v)]
    known = [(x, y) for line in lines for x, y in line.points if y is not None]
    if not known:
        return "<p>no points</p>"
    xt = ticks(max(x for x, _ in known))
    yt = ticks(max([y for _, y in known] + [v for v, _ in hlines]))
    parts = [
        _axes(f"{ylabel} against {xlabel}", xt, yt, xlabel, ylabel, xtext=xtick_text),
    ]
    for value, label in hlines:
        y = _y(value, yt)
        # Its label above the line, or below it where the line is the plot's top (a bound that sets the
        # axis): above, it fell outside the drawing and was cut.
        ty = y - 3 if y - 3 - LABEL_H >= 0 else y + LABEL_H
        parts.append(
            f'<g class="hline"><line x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" y2="{y:.1f}" stroke="#777" stroke-dasharray="6 3"/>'
            f'<text x="{W - RIGHT - 2}" y="{ty:.1f}" text-anchor="end">{html.escape(label)}</text></g>'
        )
    for line in lines:
        marks = sorted((x, y, i < len(line.hollow) and line.hollow[i]) for i, (x, y) in enumerate(line.points) if y is not None)
        if not marks:
            continue
        dash = ' stroke-dasharray="5 3"' if line.dashed else ""
        pts = " ".join(f"{_x(x, xt):.1f},{_y(y, yt):.1f}" for x, y, _ in marks)
        parts.append(
            f'<polyline fill="none" stroke="{line.color}" stroke-width="{line.stroke:g}"{dash} points="{pts}"><title>{html.escape(line.name)}</title></polyline>'
        )
        r = line.stroke + 1.5
        for x, y, hollow in marks:
            cx, cy = _x(x, xt), _y(y, yt)
            shape = (
                f'<rect x="{cx - r:.1f}" y="{cy - r:.1f}" width="{2 * r:g}" height="{2 * r:g}"'
                if line.marker == "square"
                else f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="{r:g}"'
            )
            parts.append(
                f'{shape} stroke="{line.color}" stroke-width="1.5" fill="{"#fff" if hollow else line.color}">'
                f"<title>{html.escape(line.name)}: {(line.x_text or number)(x)}, {number(y)}</title>{'</rect>' if line.marker == 'square' else '</circle>'}"
            )
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class Lane:
    """One session on a timeline: its turns as (start, end) seconds from its first send."""

    label: str
    color: str
    turns: Sequence[tuple[float, float]]


LANE_H = 26


def timeline_svg(lanes: Sequence[Lane], xlabel: str) -> str:
    """Sessions as lanes on a shared time axis: each turn a bar, the agent's think time between
    turns a dashed line, so where a session's time went shows at a glance.

    The axis stays linear, whatever the spread (``wants_log`` is for values): a bar's length is its
    turn's duration and a gap its think time only where a second is one width all along, and a
    session's first send, at 0, has no place on a log axis. So each lane's name says its makespan:
    a session 50x faster than the one below it is a few px of bars, its time still read."""
    ends = [end for lane in lanes for _, end in lane.turns]
    if not ends:
        return "<p>no sessions</p>"
    xt = ticks(max(ends))
    names = [
        f"{lane.label} ({number(max(e for _, e in lane.turns) - min(s for s, _ in lane.turns))} s)" if lane.turns else lane.label
        for lane in lanes
    ]
    label_w = max(LEFT + 96, 12 + max(map(len, names)) * CHAR_W)  # the lanes' names sit left of the plot
    width = PLOT_W + label_w - LEFT
    height = TOP + LANE_H * len(lanes) + BOTTOM

    def x(v: float) -> float:
        return label_w + v / xt[-1] * (width - label_w)

    # The last label, centred on the axis's end, may reach past the margin (12,500 s): the drawing widens for it.
    right = max(float(RIGHT), len(number(xt[-1])) * CHAR_W / 2)
    axis = height - BOTTOM
    parts = [_svg_open(width + right, height, "session timeline")]
    for t in xt:  # a grid line, a tick mark below the axis and its label, as the other plots' x axes
        parts.append(
            f'<line x1="{x(t):.1f}" y1="{TOP}" x2="{x(t):.1f}" y2="{axis}" stroke="#eee"/>'
            f'<line x1="{x(t):.1f}" y1="{axis}" x2="{x(t):.1f}" y2="{axis + 4}" stroke="#444"/>'
            f'<text class="tick" x="{x(t):.1f}" y="{axis + 16}" text-anchor="middle">{number(t)}</text>'
        )
    for i, lane in enumerate(lanes):
        mid = TOP + LANE_H * i + LANE_H / 2
        parts.append(f'<text x="{label_w - 6}" y="{mid + 4:.1f}" text-anchor="end">{html.escape(names[i])}</text>')
        ordered = sorted(lane.turns)
        for (_, prev_end), (start, _) in zip(ordered, ordered[1:], strict=False):
            if start > prev_end:
                parts.append(
                    f'<line x1="{x(prev_end):.1f}" y1="{mid:.1f}" x2="{x(start):.1f}" y2="{mid:.1f}" stroke="#999" '
                    f'stroke-dasharray="3 3"><title>think {number(start - prev_end)} s</title></line>'
                )
        for n, (start, end) in enumerate(ordered):
            parts.append(
                f'<rect x="{x(start):.1f}" y="{mid - 8:.1f}" width="{max(1.0, x(end) - x(start)):.1f}" height="16" '
                f'fill="{lane.color}" opacity="0.8"><title>{html.escape(lane.label)} turn {n}: {number(end - start)} s</title></rect>'
            )
    parts.append(
        f'<line x1="{label_w}" y1="{height - BOTTOM}" x2="{width}" y2="{height - BOTTOM}" stroke="#444"/>'
        f'<text x="{(label_w + width) / 2:.1f}" y="{height - 6}" text-anchor="middle">{html.escape(xlabel)}</text></svg>'
    )
    return "".join(parts)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], highlight: Sequence[bool] | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        f"<tr{' class=diff' if highlight and highlight[i] else ''}>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>"
        for i, row in enumerate(rows)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: The shared style. A value may be cut anywhere (a sha256, a path: long tokens that would widen a
#: table past the page), but not a heading or a row's name, its first cell: a narrow page squeezed
#: the claim card's names to fit its long values ("quantizati|on", "measuring|_side"). A drawing is
#: never wider than the page: it shrinks whole (``_svg_open``'s viewBox).
STYLE = """body{font:14px system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}h1{font-size:22px}h2{margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top;max-width:460px;overflow-wrap:anywhere}
th,td:first-child{overflow-wrap:normal}
tr.diff td{background:#fff3cd;font-weight:600}.plots{display:flex;flex-wrap:wrap;gap:1em}.legend span{margin-right:1.5em}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em;max-width:1100px}svg{max-width:100%;height:auto}.plots>div{min-width:0}svg text{font-size:11px;fill:#333}p.warn{background:#fff3cd;font-weight:600;padding:.3em}"""
