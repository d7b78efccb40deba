"""``report``: one self-contained HTML file (no scripts, no network) with the tables and plots.

Plots are inline SVG drawn here: TTFT and TPOT distributions side by side, latency over time,
the positions of first divergence, with the configuration diff at the top; the drawing itself is
in ``svg`` (shared with the sweep report and the telemetry plots).
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from infertap.capture.segments import SEGMENT_SUFFIX
from infertap.errors import ConfigError

from .accuracy import none_graded
from .capacity import RESULT
from .claim import card
from .compare import compare, speed_notes
from .compare_apart import apart_lines
from .compare_lines import Said, energy_lines, session_lines
from .compare_load import concurrency_line
from .compare_model_load import model_load_lines
from .compare_outcomes import side_line
from .compare_traffic import traffic_line
from .configdiff import probed_lines, why_unknown_lines
from .divergence_notes import embedding_notes, failed_ids_note, failed_note, limit_note, media_notes, path_notes
from .errors import AnalysisError
from .extract import grader
from .kl_notes import logprob_rows
from .paired_divergence import compared_share, differ_share, exact_share, histogram_bars, position_unit
from .ratios import MIN_INTERVAL_PAIRS
from .report_claims import claim_cards
from .report_energy import compared_energy, stated_energy
from .report_sessions import session_timelines
from .report_telemetry import telemetry_plots
from .sources import LeftOut, refuse_inside_capture
from .stats import speed_stats
from .store import Analysis
from .svg import (
    COLORS,
    MARKS,
    STYLE,
    _table,
    bars_svg,
    cdf_svg,
    number,
    scatter_svg,
)


def _metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    with Analysis([path]) as analysis:
        return analysis.query("SELECT * FROM metrics WHERE generation AND ok").records()


def _speed_table(speed: Sequence[dict[str, Any]]) -> str:
    """A and B side by side, times in ms; ratios to three significant digits, as ``infertap compare`` prints them."""

    def ratio(v: float | None) -> str:
        return "-" if v is None else number(v, 3, trim=False)

    rows = [
        [
            r["metric"],
            r["a"]["p50"],
            r["a"]["p99"],
            r["b"]["p50"],
            r["b"]["p99"],
            ratio(r["ratio_p50"]),
            "–".join(map(ratio, r["ratio_ci95"])) if r["ratio_ci95"] else "-",
            r["a"]["n"],
        ]
        for r in speed
    ]
    return _table(["metric", "A p50 ms", "A p99 ms", "B p50 ms", "B p99 ms", "B/A p50", "95% CI", "pairs"], rows)


def _speed(
    speed: Sequence[dict[str, Any]],
    load: dict[str, Any] | None = None,
    model: dict[str, Any] | None = None,
    *,
    table: bool = True,
) -> list[str]:
    """The table with what it is over and what ``compare`` says under it: its B p50 is over the pairs,
    not B's every answer, and read beside the claim card's B p50 of the same run it looked wrong.
    ``table`` False: what is said under it alone (no text generation request to tabulate)."""
    out = (
        ["<p>Paired exchanges that succeeded on both sides; B/A: B's p50 over A's (95% CI).</p>", _speed_table(speed)]
        if table
        else ["<p>No text generation request on either side: the requests below, end to end.</p>"]
    )
    if table and any(0 < row["a"]["n"] < MIN_INTERVAL_PAIRS for row in speed):  # a "-" in the CI column, said why
        out.append(f"<p>No interval below {MIN_INTERVAL_PAIRS} pairs: a resampled one would be narrower than 95%.</p>")
    if load:
        out.append(f"<p>{html.escape(concurrency_line(load))}</p>")
    out += [f"<p>{html.escape(note)}</p>" for note in speed_notes(speed, load)]
    # A model load inside either side's ttft and e2e (``model``: compare's ``model_load``), as compare says it.
    return out + [('<p class="warn">' if warn else "<p>") + f"{html.escape(line)}</p>" for line, warn in model_load_lines(model)]


def _plotted(runs: _Runs) -> str:
    """What the plots are over: each run's every ok generation request, as ``stats`` and the claim
    cards count them, not the table's pairs."""
    counts = ", ".join(f"{len(rows)} in {name}" for name, _, rows in runs)
    return f"The plots: every successful generation request of each run, as stats and the claim cards count them ({counts})."


#: Each run shown: its name (A, B), its path and the metrics of its ok generation requests.
_Runs = list[tuple[str, str, list[dict[str, Any]]]]


def render(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str] | None = None,
    *,
    extract: str | None = None,
    references: Mapping[str, str] | None = None,
    left_out: Mapping[str, Sequence[LeftOut]] | None = None,
) -> str:
    """The report of one run, or of B compared with A (captures; sweeps: infertap.analysis.sweep_report);
    ``references``: known answers, as ``compare`` takes them; ``left_out``: by run name ("A", "B"),
    the matches of the glob that named it left out, which its claim cards list as ``claim`` does."""
    for path in (a, b):
        if path is not None and os.path.isfile(os.path.join(path, "sweep.json")):
            raise ConfigError(f"{path} is a sweep, not a capture: render it with infertap.analysis.sweep_report.render_sweeps")
    if extract is not None:
        grader(extract)  # an extractor it doesn't know is refused before either run is decoded, not after
    runs = [("A", str(a), _metrics(a))] + ([("B", str(b), _metrics(b))] if b is not None else [])
    out = _head(runs)
    result = compare(a, b, extract=extract, references=references) if b is not None else None
    if result is not None:
        out += _configuration(result)
    no_text = result is not None and bool((result.get("traffic") or {}).get("no_text"))
    out.append(f"<h2>{'2. ' if result else ''}Speed</h2>")
    if result is not None:
        # Media or embeddings requests alone (no_text), as compare prints them: no text table timing none.
        out += [] if no_text else _outcomes(result.get("outcomes"))
        out += _speed(result["speed"], result.get("concurrency"), result.get("model_load"), table=not no_text)
        # The image, video, speech and embeddings requests: their answers and e2e by kind, as compare says them.
        out += [
            ('<p class="warn">' if warn else "<p>") + f"{html.escape(line)}</p>"
            for line, warn in apart_lines(result.get("apart_speed"))
        ]
    out.append(f"<p>{html.escape(_plotted(runs))}</p>")
    out.append(_plots(runs))
    out.append(
        "<p>Definitions: docs/metrics.md (ttft: request sent to the first chunk carrying generated text, reasoning or a tool call).</p>"
    )
    one = _stated(a) if result is None else None
    if result is not None:  # compare's own lines, as it prints them (``compare_lines``), each side's figures first
        # Each side's figures once: in the table, as stats states them, where either side has any;
        # else compare's lines, which say why neither has.
        table = compared_energy(result["energy"])
        out += _said("Energy and the engines' state", energy_lines(result["energy"], tabled=bool(table)), table)
        out += _said("Sessions", [(line, False) for line in session_lines(result["sessions"])])
    elif one is not None:
        out += stated_energy(one[0], f"A: {os.path.basename(str(a))}")
    out += session_timelines(a, b, result["sessions"] if result is not None else None)
    if result is not None:
        out += _divergence(result["divergence"])
        out += _accuracy(result.get("accuracy"))
        if result.get("accuracy") is None and (line := none_graded(result["divergence"]["counts"])):
            out.append(f"<h3>Known answers</h3><p>{html.escape(line)}</p>")
        out += _most_divergent(result["divergence"]["most_divergent"])
    carded = [(name, path) for name, path, _ in runs] if one is None else [(runs[0][0], c) for c in one[1]]
    out += claim_cards(carded, [one[1][c] for _, c in carded] if one is not None else None, left_out)
    out.append("</body></html>")
    return "\n".join(out)


def _stated(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """One run's ``stats`` (by run, as the command prints it) and the claim card of each of its
    captures, by path, whose figures are those stats: read once for the energy section and the cards.
    A card is of one capture, as ``infertap claim`` takes one: a run that is a folder of several
    (shards) has a card each, never one card of the folder's path, which no capture holds."""
    with Analysis([path]) as analysis:
        stats = speed_stats(analysis, ("run",), derivations=False)
        return stats, {c["capture"]: card(analysis, c["capture"], stats) for c in stats["captures"]}


def _said(title: str, lines: Sequence[Said], before: Sequence[str] = ()) -> list[str]:
    """Lines ``compare`` prints, under a heading, a warning highlighted as it is yellow there
    (``before``: what the section shows above them)."""
    if not lines and not before:
        return []
    return [
        f"<h3>{html.escape(title)}</h3>",
        *before,
        *(f"<p{' class="warn"' if warn else ''}>{html.escape(text.strip())}</p>" for text, warn in lines),
    ]


def _head(runs: _Runs) -> list[str]:
    """The page's start, with a legend: the plots' colors name the runs, and their lines' and dots'
    shapes where there are two (``MARKS``), for a reader without the colours."""
    legend = "".join(
        f'<span style="color:{c}">■ {name}: {html.escape(path)}{f" ({m})" if len(runs) > 1 else ""}</span>'
        for (name, path, _), c, m in zip(runs, COLORS, MARKS, strict=False)
    )
    return [
        f"<!doctype html><html><head><meta charset=utf-8><title>infertap report</title><style>{STYLE}</style></head><body>",
        "<h1>infertap report</h1>",
        f'<p class="legend">{legend}</p>',
    ]


def _configuration(result: dict[str, Any]) -> list[str]:
    """Section 1, first because a configuration that differs explains what follows."""
    cfg = result["config"]
    rows = sorted(cfg["snapshots"], key=lambda r: (not r["differs"], r["unknown"]))
    traffic = result.get("traffic")
    out = [
        "<h2>1. Configuration</h2>",
        f"<p>{html.escape(result['pairing']['explain'])}</p>",
        *(
            [
                f'<p class="{"" if traffic["identical"] or traffic.get("rechained_only") else "warn"}">{html.escape(traffic_line(traffic))}</p>'
            ]
            if traffic
            else []
        ),
        *([f'<p class="warn">{html.escape(several)}</p>'] if (several := cfg.get("several_configurations")) else []),
        _table(
            ["fact", "A", "B"], [[r["fact"], r["a"], r["b"]] for r in rows], [r["differs"] and not r["unknown"] for r in rows]
        ),
        *(f'<p class="warn">{html.escape(line)}</p>' for line in why_unknown_lines(cfg["snapshots"])),
        *(f'<p class="warn">{html.escape(line)}</p>' for line in probed_lines(cfg["snapshots"])),
    ]
    if cfg["settings"]:
        out.append("<h3>Effective sampling settings that differ</h3>")
        out.append(
            _table(
                ["setting", "A (source)", "B (source)", "exchanges"],
                [[r["setting"], r["a"], r["b"], r["exchanges"]] for r in cfg["settings"]],
            )
        )
    p = cfg["prompts"]
    if p.get("not_compared"):
        out.append(f"<p>Effective prompt tokens: none compared, {html.escape(p['not_compared'])}.</p>")
        return out
    out.append(
        f"<p>Effective prompt tokens: {p['equal']} of {p['compared']} pairs identical. "
        + " ".join(f"{n} × {html.escape(w)}." for w, n in p["differences"].items())
        + "</p>"
    )
    return out


def _outcomes(o: dict[str, Any] | None) -> list[str]:
    """Before the speed table, as ``infertap compare`` says it: each side's answers and failures,
    and the pairs its speed figures leave out."""
    if not o:
        return []
    warn = ' class="warn"'
    out = [f"<p{warn if o[side]['failed'] else ''}>Answers {html.escape(side_line(side.upper(), o[side]))}</p>" for side in "ab"]
    return out + ([f'<p class="warn">{html.escape(o["note"])}</p>'] if o["note"] else [])


def _plots(runs: _Runs) -> str:
    """Distributions and latency over time, every run on the same axes: shapes say what medians hide."""
    plots = []
    for metric in ("ttft_ns", "tpot_ns", "e2e_ns"):
        series = [(name, [m[metric] / 1e6 for m in rows if m.get(metric) is not None]) for name, _, rows in runs]
        plots.append(f"<div><h3>{metric[:-3]} (ms), CDF</h3>{cdf_svg(series, metric[:-3] + ' ms')}</div>")
    t0 = {name: min((m["sent_wall_ns"] for m in rows), default=0) for name, _, rows in runs}
    over_time = [
        (name, [((m["sent_wall_ns"] - t0[name]) / 1e9, m["e2e_ns"] / 1e6) for m in rows if m.get("e2e_ns") is not None])
        for name, _, rows in runs
    ]
    plots.append(f"<div><h3>e2e over time</h3>{scatter_svg(over_time, 's since the first request', 'e2e ms')}</div>")
    telemetry = telemetry_plots([(name, path, t0[name]) for name, path, _ in runs])
    return f'<div class="plots">{"".join(plots)}</div><h3>What the engine and the machine did</h3>{telemetry}'


def _divergence(d: dict[str, Any]) -> list[str]:
    """Section 3: how often and where the outputs differ, in the rows ``infertap compare`` prints."""
    rows = [
        ["exact match", exact_share(d)],
        ["outputs compared (no side failed)", compared_share(d)],
        ["outputs that differ", differ_share(d)],
        ["similarity (mean)", d["similarity_mean"]],
        [f"first divergence (median position, {position_unit(d)})", d["first_divergence_median"]],
        *[[k.replace("_", " "), v] for k, v in d["counts"].items() if k not in ("exact", "error_body_unread")],
    ]
    if d["counts"].get("error_body_unread"):  # worded as compare says it, each side's count with it
        sides = [sum(r.get(f"error_body_unread_{s}", 0) for r in d.get("readable", {}).values()) for s in "ab"]
        rows.append(
            [
                "errors with no body an API reads (a 404 for a path the engine doesn't serve, or no answer at all)",
                f"{d['counts']['error_body_unread']} pairs ({sides[0]} in A, {sides[1]} in B)",
            ]
        )
    rows += [[label, said] for label, said in logprob_rows(d.get("logprobs") or {})]
    histogram = histogram_bars(d["first_divergence_histogram"])
    # What the table can't show, per path, as compare prints it (pairs not compared and why).
    failed = failed_note(d)  # the pairs a side failed: in no figure above but exact match
    notes = [f'<p class="warn">{html.escape(said)}</p>' for said in (failed, failed_ids_note(d), limit_note(d)) if said]
    notes += [
        ('<p class="warn">' if warn else "<p>") + f"{html.escape(text)}</p>"
        for text, warn in path_notes(d) + embedding_notes(d) + media_notes(d)
    ]
    return [
        "<h2>3. Divergence</h2>",
        _table(["", "A vs B"], rows),
        *notes,
        f"<h3>Where outputs first diverge</h3>{bars_svg(histogram, f'position of first divergence ({position_unit(d)})')}",
    ]


def _accuracy(acc: dict[str, Any] | None) -> list[str]:
    """Known answers: each side's score, the difference with its interval and McNemar's p."""
    if not acc:
        return []
    ci = acc["difference_ci95_points"]
    rows = [
        [
            f"right, of {acc['items']} with a known answer",
            f"A {acc['a_right']} ({acc['a_rate']:.0%}), B {acc['b_right']} ({acc['b_rate']:.0%})",
        ],
        ["B - A", f"{acc['difference_points']:+.1f} points" + (f" (95% CI {ci[0]:+.1f} to {ci[1]:+.1f})" if ci else "")],
        [
            "wrong->right, right->wrong",
            f"{acc['wrong_to_right']}, {acc['right_to_wrong']} (exact McNemar p {acc['mcnemar_p']:.3g})",
        ],
    ]
    if any((unread := acc.get("unread") or {}).values()):  # wrong, the grader read nothing in them
        rows.append(["of the wrong, no answer read in them", f"A {unread['a']}, B {unread['b']}"])
    if acc.get("noise_floor"):
        rows.append(["noise floor: A against its own second run", f"{acc['noise_floor']['flips']} flips"])
    return ["<h3>Known answers</h3>", _table(["", ""], rows), f"<p>{html.escape(acc['verdict'])}</p>"]


def _most_divergent(items: Sequence[dict[str, Any]]) -> list[str]:
    """Section 4, when any pair differs: the diffs themselves, the least similar first."""
    if not items:
        return []
    out = ["<h2>4. Most divergent exchanges</h2>"]
    for item in items:
        fd = item["first_divergence"]
        out.append(
            f"<p><b>{html.escape(item['path'])}</b> A {item['a_id'][:8]} / B {item['b_id'][:8]}: similarity {item['similarity']:.2f}, "
            f"first divergence at {html.escape(fd['unit'])} {fd['at']}</p><pre>{html.escape(item['diff'])}</pre>"
        )
    return out


def write_report(
    out: str | os.PathLike[str],
    a: str | os.PathLike[str],
    b: str | os.PathLike[str] | None = None,
    *,
    extract: str | None = None,
    references: Mapping[str, str] | None = None,
    left_out: Mapping[str, Sequence[LeftOut]] | None = None,
) -> None:
    write_page(out, render(a, b, extract=extract, references=references, left_out=left_out))


def write_page(out: str | os.PathLike[str], page: str) -> None:
    """``page`` into the file ``out``, its folder made when missing; rendered before the file is
    opened, so a report that fails leaves an earlier one as it was."""
    target = Path(out)
    if target.name.endswith(SEGMENT_SUFFIX):
        raise AnalysisError(f"{out}: a capture's segment: write the report elsewhere")
    refuse_inside_capture(target.parent, "the report")
    if target.name == RESULT:
        raise AnalysisError(f"{out}: a sweep's result file: write the report elsewhere")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise AnalysisError(f"{out}: cannot write the report: {exc.strerror or exc}") from exc
