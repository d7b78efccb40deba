"""``infertap compare``: configuration first, then speed, then divergence, then the worst examples."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from infertap.capture.jsonable import jsonable
from infertap.options import OneCapture, OneWithLeftOut
from infertap.wording import counted

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from infertap.analysis.sources import One


reference_option = click.option(
    "--reference",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help='JSON {"question": "answer"} keyed by the last user message: with --extract, flips are counted '
    "right->wrong and wrong->right, and each side's accuracy is given with its interval.",
)


def load_references(reference: Path | None, extract: str | None) -> dict[str, str] | None:
    """The known answers of --reference, checked: a question maps to its answer, both strings."""
    if reference is None:
        return None
    if extract is None:
        raise click.UsageError("--reference needs --extract: answers are compared after extraction (e.g. --extract number)")
    try:
        refs = json.loads(reference.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"--reference {reference}: not JSON: {exc}") from exc
    if not isinstance(refs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in refs.items()):
        raise click.ClickException(f'--reference {reference}: expected one JSON object of "question": "answer" strings')
    return refs


@click.command()
@click.argument("a", type=OneCapture())
@click.argument("b", type=OneCapture())
@click.option(
    "--baseline",
    type=OneCapture(),
    default=None,
    help="A second run of A's own configuration: B's divergence is shown next to A's divergence from itself.",
)
@click.option(
    "--extract",
    default=None,
    metavar="number|math|choice|json|regex:PATTERN",
    help="Compare answers extracted from the outputs (flips): math grades them by math-verify (the math extra).",
)
@reference_option
@click.option(
    "--top",
    default=5,
    type=click.IntRange(min=0),
    show_default=True,
    help=(
        "How many of the most divergent exchanges to show; of the embeddings pairs whose vectors differ, how many "
        "(the least similar first) to list in --json, and to name on the terminal (3 at most); and of the pairs a "
        "side failed, how many to list by id in --json."
    ),
)
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def compare(
    a: Path, b: Path, baseline: Path | None, extract: str | None, reference: Path | None, top: int, as_json: bool
) -> None:
    """Compare run B with run A of the same workload (a replay, or the same requests).

    A, B and --baseline are one capture each: a folder holding several (shards) is refused.

    \b
    infertap compare captures/run-llamacpp captures/run-vllm
    infertap compare captures/a captures/b --baseline captures/a-again --extract number
    infertap compare captures/a captures/b --extract math --reference answers.json
    """
    from .analysis.compare import compare as run_compare

    references = load_references(reference, extract)
    if a.resolve() == b.resolve():  # the same run on both sides: every figure is equal by construction
        click.secho(f"warning: A and B are the same capture ({a}): compare a run with another", fg="yellow", err=True)
    result = run_compare(a, b, baseline=baseline, extract=extract, top=top, references=references)
    if as_json:
        for item in result["divergence"]["most_divergent"]:
            item.pop("text", None)
        # jsonable: a NaN or infinite figure, which JSON has no form for, as null
        click.echo(json.dumps(jsonable(result), indent=2, default=str, allow_nan=False))
    else:
        print_comparison(result)


def _fmt(v: Any) -> str:
    if v is None:
        return "unknown"
    if isinstance(v, float):
        return _number(v)
    text = str(v)
    return text if len(text) <= 48 else text[:45] + "…"


def _number(v: float, digits: int = 4, *, trim: bool = True) -> str:
    """Plain notation, never 1.289e+04, as the HTML report writes it."""
    from .analysis.svg import number  # imported on use, as the commands import the analysis: --help stays quick

    return number(v, digits, trim=trim)


def _ms(v: float | None) -> str:
    return "-" if v is None else _number(v, 3)


def _ratio(v: float | None) -> str:
    return "-" if v is None else _number(v, 3, trim=False)


def _interval(ci: Sequence[float] | None) -> str:
    return f"{_ratio(ci[0])}–{_ratio(ci[1])}" if ci else "-"


def _speed_table(rows: list[dict[str, Any]]) -> Table:
    """The speed table, narrow enough for 80 columns: no outer frame, short headers, numbers never cut."""
    from rich.table import Table

    cis = [_interval(row["ratio_ci95"]) for row in rows]
    table = Table(show_edge=False, pad_edge=False)
    table.add_column("metric", no_wrap=True)
    for header in ("A p50", "A p99", "B p50", "B p99", "B/A"):
        table.add_column(header, justify="right", no_wrap=True)
    # Kept whole even on a terminal too narrow for the table: the other columns give way first.
    table.add_column("95% CI", justify="right", no_wrap=True, min_width=max(map(len, cis), default=1))
    table.add_column("n", justify="right", no_wrap=True)
    for row, ci in zip(rows, cis, strict=True):
        a, b = row["a"], row["b"]
        table.add_row(
            row["metric"], _ms(a["p50"]), _ms(a["p99"]), _ms(b["p50"]), _ms(b["p99"]), _ratio(row["ratio_p50"]), ci, f"{a['n']:,}"
        )
    return table


def print_comparison(r: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console()
    _print_runs(console, r)
    _print_configuration(console, r)
    if (r.get("traffic") or {}).get("no_text"):
        # Media or embeddings requests alone: a text speed table would time none ("answers A: 0 requests").
        _say(console, "\n2. Speed (no text generation request on either side: the requests below, end to end)", "bold")
    else:
        _say(console, "\n2. Speed (paired exchanges that succeeded on both sides)", "bold")
        _print_text_speed(console, r)
    from infertap.analysis.compare import speed_notes
    from infertap.analysis.compare_load import concurrency_line

    if r.get("concurrency"):
        _say(console, concurrency_line(r["concurrency"]))
    for note in speed_notes(r["speed"], r.get("concurrency")):
        _say(console, note, "yellow")
    from infertap.analysis.compare_model_load import model_load_lines

    for line, warn in model_load_lines(r.get("model_load")):  # none where neither side waited for a load
        _say(console, line, "yellow" if warn else None)
    from infertap.analysis.compare_apart import apart_lines

    for line, warn in apart_lines(r.get("apart_speed")):  # image, video, speech, embeddings: in no row above
        _say(console, line, "yellow" if warn else None)
    if r["speed"] and r["speed"][0].get("same_workload") is False and not r["traffic"].get("no_text"):
        if r["speed"][0].get("same_text_workload"):  # the figures' requests are the same; what ran beside them is not
            from infertap.capture.identity import APART_WORDS

            t = r["traffic"]
            other = " or ".join(w for n, w in APART_WORDS.items() if t["a"][n] != t["b"][n]) or "other requests"
            what = f"the same text requests, sent beside different {other} (see traffic above)"
            _say(console, f"B/A compares {what}: the engine's load was not the same", "yellow")
        elif not r["traffic"]["only_a"] and not r["traffic"]["only_b"]:
            what = "the same requests sent in another order (see traffic above): its schedule's doing as much as the engine's"
            _say(console, f"B/A compares {what}", "yellow")
        else:
            _say(console, "B/A compares different workloads (see traffic above): not a like-for-like speed ratio", "yellow")
    _print_energy(console, r["energy"])
    _print_sessions(console, r.get("sessions"))
    _print_divergence(console, r["divergence"], (r.get("baseline") or {}).get("divergence"))
    _print_accuracy(console, r.get("accuracy"))
    from infertap.analysis.accuracy import none_graded

    if r.get("accuracy") is None and (graded := none_graded(r["divergence"]["counts"])):
        _say(console, graded)
    _print_most_divergent(console, r["divergence"]["most_divergent"])


def _print_text_speed(console: Console, r: dict[str, Any]) -> None:
    """The text generation requests' answers and their speed table, with how to read it."""
    _print_outcomes(console, r.get("outcomes"))
    console.print(_speed_table(r["speed"]), markup=False)
    _say(console, "times in ms; B/A: B's p50 over A's (95% CI); metric definitions: docs/metrics.md")
    from infertap.analysis.ratios import MIN_INTERVAL_PAIRS

    if any(0 < row["a"]["n"] < MIN_INTERVAL_PAIRS for row in r["speed"]):
        _say(console, f"no interval below {MIN_INTERVAL_PAIRS} pairs: a resampled one would be narrower than 95%")


def _print_outcomes(console: Console, o: dict[str, Any] | None) -> None:
    """Before the table: each side's answers and failures, and the pairs the speed leaves out."""
    if not o:
        return
    from infertap.analysis.compare_outcomes import side_line

    for side in ("a", "b"):
        _say(console, "answers " + side_line(side.upper(), o[side]), "yellow" if o[side]["failed"] else None)
    if o["note"]:
        _say(console, o["note"], "yellow")


def _print_energy(console: Console, e: dict[str, Any]) -> None:
    """Energy beside speed, and the engine's state on each side (worded once: ``compare_lines``, as the report shows them)."""
    from infertap.analysis.compare_lines import energy_lines

    for text, warn in energy_lines(e):
        _say(console, text, "yellow" if warn else None)


def _print_sessions(console: Console, s: dict[str, Any] | None) -> None:
    """Sessions as units of work: makespan B/A, and the turn at which answers first differ."""
    from infertap.analysis.compare_lines import session_lines

    for text in session_lines(s):
        _say(console, text)


def _say(console: Console, text: str = "", style: str | None = None) -> None:
    """A line as given: paths and model output are not rich markup, nor numbers to highlight."""
    console.print(text, style=style, markup=False, highlight=False)


def _print_runs(console: Console, r: dict[str, Any]) -> None:
    """Which two runs, how they were paired, and any torn tail (its data counts, but the reader should know)."""
    _say(
        console,
        f"A: {r['a']['path']} ({counted(r['a']['exchanges'], 'exchange')})   B: {r['b']['path']} ({counted(r['b']['exchanges'], 'exchange')})",
    )
    _say(console, f"paired: {r['pairing']['explain']}")
    _print_traffic(console, r.get("traffic"))
    for side in ("a", "b"):
        for torn in [*r[side]["torn"], *filter(None, [r[side].get("repeated_ids")])]:
            _say(console, f"warning: {torn}", "yellow")


def _print_traffic(console: Console, t: dict[str, Any] | None) -> None:
    """Up front: whether A and B saw identical traffic (their workload identities, docs/analysis.md)."""
    from infertap.analysis.compare_traffic import traffic_line

    if t is not None:
        _say(console, traffic_line(t), "green" if t["identical"] or t.get("rechained_only") else "yellow")


def _print_configuration(console: Console, r: dict[str, Any]) -> None:
    """Section 1, first because a configuration that differs explains what follows."""
    _say(console, "\n1. Configuration", "bold")
    cfg = r["config"]
    why = cfg.get("snapshot_missing_reason") or {}
    if why and len(set(why.values())) == 1:
        _say(console, f"no engine snapshot in {' and '.join(why)}: {next(iter(why.values()))}", "yellow")
    elif why:
        _say(console, "no engine snapshot in " + "; in ".join(f"{side}: {reason}" for side, reason in why.items()), "yellow")
    several = cfg.get("several_configurations")
    if several:  # then no row's sameness holds for every exchange of that side
        _say(console, several, "yellow")
    _print_snapshots(console, cfg["snapshots"], last=bool(several))
    # not_compared: a version of another engine kind, shown in the kind row
    one_side = [f for f in cfg["snapshots"] if f.get("one_side") and not f.get("not_compared")]
    if one_side:  # not differences: an unknown may not differ at all
        known = "; ".join(
            f"{f['fact']} ({'A' if f['a'] is not None else 'B'}: {_fact_value(f, 0 if f['a'] is not None else 1)})"
            for f in one_side
        )
        _say(console, f"known on one side only: {known}")
    from infertap.analysis.configdiff import probed_lines, why_unknown_lines

    for line in why_unknown_lines(cfg["snapshots"]):  # facts a side's snapshot holds that are not its engine's
        _say(console, line, "yellow")
    for line in probed_lines(cfg["snapshots"]):  # an import's engine facts, probed after it by enrich
        _say(console, line, "yellow")
    both = [row for row in cfg["settings"] if not _one_sided(row)]
    if both:
        console.print(_settings_table(both), markup=False)
    if one := [row for row in cfg["settings"] if _one_sided(row)]:
        _say(
            console,
            "settings known on one side only: "
            + "; ".join(
                f"{row['setting']} (A: {row['a']}, B: {row['b']}, {counted(row['exchanges'], 'exchange')})" for row in one
            ),
        )
    if not cfg["settings"]:
        _say(
            console, "effective sampling settings: no difference found" + ("" if r["divergence"]["pairs"] else " (no enrichment)")
        )
    for row in cfg.get("engine_state", []):
        _say(
            console,
            f"engine state differs: {row['name']} A {_fmt(row['a'])}, B {_fmt(row['b'])} (from the engines' /metrics)",
            "yellow",
        )
    p = cfg["prompts"]
    if p.get("not_compared"):
        _say(console, f"effective prompt tokens: none compared, {p['not_compared']}")
    else:
        _say(console, f"effective prompt tokens: {p['equal']} of {p['compared']} pairs identical")
    for why, n in p["differences"].items():
        _say(console, f"  {n} × {why}")
    if changed := cfg.get("input_changes"):
        _say(
            console,
            f"input changed by the API before the model read it (context edits, thinking dropped, MCP tools listed): "
            f"A {counted(changed['a'], 'exchange')}, B {counted(changed['b'], 'exchange')}; "
            f"differs in {counted(changed['pairs_differ'], 'pair')}",
            "yellow" if changed["pairs_differ"] else None,
        )
    if said := cfg.get("served"):
        _say(
            console,
            f"served as (Bedrock trace, performanceConfig, model response fields): A {counted(said['a'], 'exchange')}, "
            f"B {counted(said['b'], 'exchange')}; differs in {counted(said['pairs_differ'], 'pair')}",
            "yellow" if said["pairs_differ"] else None,
        )


def _print_snapshots(console: Console, snapshots: list[dict[str, Any]], last: bool = False) -> None:
    """The facts that differ as a table under a line of its own (a table's title wraps to its width,
    a narrow column at 80); none differing, one line with how many were compared, not an empty table.
    ``last``: a side ran under several engine configurations, and these are its last one's."""
    which = "each side's last engine snapshot" if last else "engine snapshots"
    known = sum(not f["unknown"] for f in snapshots)
    differing = [f for f in snapshots if f["differs"]]  # only a fact known on both sides differs
    if not differing:
        same = (
            f"the {known} facts known on both sides are the same" if known != 1 else "the 1 fact known on both sides is the same"
        )
        _say(console, f"{which}: {same if known else 'no fact known on both sides to compare'}")
        return
    _say(console, f"{which}: what differs ({len(differing)} of the {known} facts known on both sides)")
    console.print(_snapshot_table(snapshots), markup=False)


def _snapshot_table(snapshots: list[dict[str, Any]]) -> Table:
    """Only the facts that differ (an unknown one never does: it may not differ at all)."""
    from rich.table import Table

    table = Table("fact", "A", "B")
    version = next((f for f in snapshots if f["fact"] == "version" and f.get("not_compared")), None)
    for fact in snapshots:
        if fact["differs"]:
            a, b = _fact_value(fact, 0), _fact_value(fact, 1)
            if fact["fact"] == "kind" and version:  # two engines: each one's version beside its kind
                a, b = (f"{k} {v}" if v is not None else k for k, v in ((a, version["a"]), (b, version["b"])))
            table.add_row(fact["fact"], a, b, style="bold")
    return table


def _fact_value(fact: dict[str, Any], side: int) -> str:
    """A snapshot fact's value on one side (0: A), with probe's qualifier: ``1024 (per slot)``."""
    value = _fmt(fact["ab"[side]])
    return f"{value} (per slot)" if (fact.get("per_slot") or [False, False])[side] else value


def _one_sided(row: dict[str, Any]) -> bool:
    """A setting one engine didn't report (or the request didn't carry): not a known difference."""
    return any(f"({why})" in row[side] for why in ("unknown", "absent") for side in ("a", "b"))


def _settings_table(settings: list[dict[str, Any]]) -> Table:
    """The sampling settings the engines actually applied, where they differ, with where each value came from."""
    from rich.table import Table

    table = Table(
        "setting",
        "A (source)",
        "B (source)",
        "exchanges",
        title="effective sampling settings that differ",
        title_justify="left",
    )
    for setting in settings:
        table.add_row(setting["setting"], setting["a"], setting["b"], str(setting["exchanges"]), style="bold")
    return table


def _print_divergence(console: Console, d: dict[str, Any], base: dict[str, Any] | None) -> None:
    """Section 3: the table, then what it cannot show (unreadable bodies, where outputs first part)."""
    _say(console, "\n3. Divergence", "bold")
    console.print(_divergence_table(d, base), markup=False)
    from infertap.analysis.divergence_notes import (
        embedding_notes,
        failed_ids_note,
        failed_note,
        limit_note,
        media_notes,
        path_notes,
    )

    for lead, side in (("", d), ("baseline: ", base or {})):
        if note := failed_note(side):
            _say(console, lead + note, "yellow")
        if not lead and (ids := failed_ids_note(side)):  # which they are (the baseline lists none: no --top there)
            _say(console, ids, "yellow")
    for text, warn in path_notes(d) + embedding_notes(d) + media_notes(d):
        _say(console, text, "yellow" if warn else None)
    if limit := limit_note(d):
        _say(console, limit, "yellow")
    if base and (noise := media_notes(base)):  # A's media outputs against A's again: whether they repeat at all
        _say(console, "baseline: " + noise[0][0])
    if base and (noise := embedding_notes(base)):  # A's vectors against A's again: how much rounding alone moves them
        _say(console, "baseline: " + noise[0][0])
    if d["first_divergence_histogram"]:
        from infertap.analysis.paired_divergence import bucket_label, position_unit

        _say(
            console,
            f"first divergence positions ({position_unit(d)}): "
            + ", ".join(f"{bucket_label(k)}: {v}" for k, v in d["first_divergence_histogram"].items()),
        )


_RATES = (
    ("similarity (mean)", "similarity_mean", "{:.3f}"),
    ("first divergence (median position)", "first_divergence_median", "{:g}"),
)


def _unit_of(key: str, d: dict[str, Any]) -> str:
    """Beside a median position, what it counts (tokens or characters): each side's own."""
    from infertap.analysis.paired_divergence import position_unit

    return f" ({position_unit(d)})" if key == "first_divergence_median" else ""


def _divergence_table(d: dict[str, Any], base: dict[str, Any] | None) -> Table:
    """A vs B beside A vs its baseline, when run: a difference within the noise floor is no finding."""
    from rich.table import Table

    from infertap.analysis.kl_notes import logprob_rows
    from infertap.analysis.paired_divergence import compared_share, differ_share, exact_share

    table = Table("", "A vs B", *(["A vs baseline (noise floor)"] if base else []))
    # exact match over every pair; what follows over the pairs whose outputs were compared
    shares = (
        ("exact match", exact_share),
        ("outputs compared (no side failed)", compared_share),
        ("outputs that differ", differ_share),
    )
    for label, share in shares:
        table.add_row(label, share(d), *([share(base)] if base else []))
    for label, key, fmt in _RATES:
        sides = [d] + ([base] if base else [])
        table.add_row(label, *("-" if s.get(key) is None else fmt.format(s[key]) + _unit_of(key, s) for s in sides))
    counts = sorted((set(d["counts"]) | set((base or {}).get("counts", {}))) - {"exact"})
    for key in counts:
        table.add_row(key.replace("_", " "), str(d["counts"].get(key, 0)), *([str(base["counts"].get(key, 0))] if base else []))
    for label, said in logprob_rows(d.get("logprobs") or {}):
        table.add_row(label, said, *(["-"] if base else []))
    return table


def _print_accuracy(console: Console, acc: dict[str, Any] | None) -> None:
    """With known answers: each side's score, then the difference, its interval, the flips and the noise floor."""
    if not acc:
        return
    from rich.table import Table

    table = Table("known answers", "A", "B")
    table.add_row(
        f"right, of {acc['items']}", f"{acc['a_right']} ({acc['a_rate']:.0%})", f"{acc['b_right']} ({acc['b_rate']:.0%})"
    )
    if any((unread := acc.get("unread") or {}).values()):  # wrong, the grader read nothing in them
        table.add_row("of the wrong, no answer read", str(unread["a"]), str(unread["b"]))
    console.print(table, markup=False)
    _say(console, acc["verdict"])


#: What a pair's item says differed besides its output text (paired_divergence._count_changes), as labelled.
_BESIDES = (
    ("finish_reason_raw", "finish reason"),
    ("finish_reasons", "finish reasons said"),
    ("tool_results", "server tool results"),
    ("unparsed", "payloads not JSON"),
    ("not_utf8", "bytes not UTF-8"),
    ("after_end_marker", "data after the end marker"),
    ("stop_sequence", "stop sequence"),
    ("stop_reason", "stop reason (vLLM)"),
    ("matched_stop", "matched stop (SGLang)"),
    ("stop_details", "stop details"),
    ("input_changes", "input changed by the API"),
    ("served", "served as (trace, performance tier)"),
    ("stream_done", "end marker"),
    ("encrypted_reasoning", "encrypted reasoning blocks"),
    ("choices", "choices"),
    ("status", "status, end, error"),
)


def _besides_text(item: dict[str, Any]) -> list[tuple[str, Any]]:
    """What differs that the diff of the text can't show: a pair whose words agree is inexact for these."""
    return [(label, item[key]) for key, label in _BESIDES if key in item]


def _print_most_divergent(console: Console, items: list[dict[str, Any]]) -> None:
    """Section 4, when any pair differs: the diffs themselves, each cut to what a terminal shows."""
    if not items:
        return
    _say(console, "\n4. Most divergent exchanges", "bold")
    for item in items:
        fd = item["first_divergence"]
        extra = f", answers {item['answer'][0]!r} → {item['answer'][1]!r}" if "answer" in item else ""
        extra += "".join(f", {label} {a!r} → {b!r}" for label, (a, b) in _besides_text(item))
        _say(
            console,
            f"{item['path']}  A {item['a_id'][:8]} / B {item['b_id'][:8]}: similarity {item['similarity']:.2f}, "
            f"first divergence at {fd['unit']} {fd['at']}{extra}",
            "bold",
        )
        _say(console, "  " + item["diff"][:600].replace("\n", "\n  "))


@click.command()
@click.argument("a", type=OneWithLeftOut(sweeps=True))
@click.argument("b", type=OneWithLeftOut(sweeps=True), required=False)
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("report.html"), show_default=True)
@click.option(
    "--extract", default=None, metavar="number|math|choice|json|regex:PATTERN", help="Compare answers extracted from the outputs."
)
@reference_option
def report(a: One, b: One | None, out: Path, extract: str | None, reference: Path | None) -> None:
    """Write one self-contained HTML report (works offline) of run A, or of B compared with A.

    A and B may also be two sweeps (folders holding sweep.json, from ``infertap sweep``), judged by the
    same SLOs: their capacity curves, and which target carries more of the workload.
    """
    from .analysis.report import write_report
    from .analysis.sweep_report import sweeps_given, write_sweep_report

    left_out = {name: one.left_out for name, one in (("A", a), ("B", b)) if one is not None}
    for left in (x for each in left_out.values() for x in each):  # the report's cards list them too
        click.secho(f"warning: {left}", fg="yellow", err=True)
    a_path, b_path = a.path, b.path if b is not None else None
    if sweeps_given(a_path, b_path):
        if extract is not None or reference is not None:
            raise click.UsageError("--extract compares the answers of two captures; a sweep report has none to compare")
        write_sweep_report(out, a_path, b_path)
    elif b_path is None and (extract is not None or reference is not None):  # refused before A is decoded, never ignored
        raise click.UsageError("--extract compares the answers of two captures; a report of one run has none to compare")
    else:
        write_report(out, a_path, b_path, extract=extract, references=load_references(reference, extract), left_out=left_out)
    click.echo(f"report written to {out}")


def register(cli: click.Group) -> None:
    cli.add_command(compare)
    cli.add_command(report)
