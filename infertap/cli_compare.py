"""``infertap compare``: configuration first, then speed, then divergence, then the worst examples."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .errors import InfertapError

if TYPE_CHECKING:
    from rich.table import Table


@click.command()
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--baseline",
    type=click.Path(exists=True, path_type=Path),
    default=None,
    help="A second run of A's own configuration: B's divergence is shown next to A's divergence from itself.",
)
@click.option(
    "--extract",
    default=None,
    metavar="number|choice|json|regex:PATTERN",
    help="Compare answers extracted from the outputs (flips).",
)
@click.option(
    "--reference",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help='JSON {"question": "answer"} keyed by the last user message: with --extract, flips are counted right->wrong and wrong->right.',
)
@click.option("--top", default=5, show_default=True, help="How many of the most divergent exchanges to show.")
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def compare(
    a: Path, b: Path, baseline: Path | None, extract: str | None, reference: Path | None, top: int, as_json: bool
) -> None:
    """Compare run B with run A of the same workload (a replay, or the same requests).

    \b
    infertap compare captures/run-llamacpp captures/run-vllm
    infertap compare captures/a captures/b --baseline captures/a-again --extract number
    """
    from .analysis.compare import compare as run_compare

    try:
        references = json.loads(reference.read_text()) if reference else None
        result = run_compare(a, b, baseline=baseline, extract=extract, top=top, references=references)
    except (InfertapError, ValueError) as exc:  # ValueError: a bad --extract or --reference
        raise click.ClickException(str(exc)) from exc
    if as_json:
        for item in result["divergence"]["most_divergent"]:
            item.pop("text", None)
        click.echo(json.dumps(result, indent=2, default=str))
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
    from .analysis.report import number  # imported on use, as the commands import the analysis: --help stays quick

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
    from rich.table import Table

    console = Console()

    def say(text: str = "", style: str | None = None) -> None:
        console.print(text, style=style, markup=False, highlight=False)

    say(f"A: {r['a']['path']} ({r['a']['exchanges']} exchanges)   B: {r['b']['path']} ({r['b']['exchanges']} exchanges)")
    say(f"paired: {r['pairing']['explain']}")
    for side in ("a", "b"):
        for torn in r[side]["torn"]:
            say(f"warning: {torn}", "yellow")

    say("\n1. Configuration", "bold")
    cfg = r["config"]
    if cfg["snapshot_missing"]:
        say(
            f"no engine snapshot in {' and '.join(cfg['snapshot_missing'])}: recorded with --no-probe, or the probe failed",
            "yellow",
        )
    table = Table(
        "fact", "A", "B", title="engine snapshots: what differs (unknown: not exposed by that engine)", title_justify="left"
    )
    for fact in sorted(cfg["snapshots"], key=lambda f: f["unknown"]):  # known on both sides first
        if fact["differs"]:
            table.add_row(fact["fact"], _fmt(fact["a"]), _fmt(fact["b"]), style=None if fact["unknown"] else "bold")
    console.print(table)
    if cfg["settings"]:
        table = Table(
            "setting",
            "A (source)",
            "B (source)",
            "exchanges",
            title="effective sampling settings that differ",
            title_justify="left",
        )
        for setting in cfg["settings"]:
            table.add_row(setting["setting"], setting["a"], setting["b"], str(setting["exchanges"]), style="bold")
        console.print(table)
    else:
        say("effective sampling settings: no difference found" + ("" if r["divergence"]["pairs"] else " (no enrichment)"))
    p = cfg["prompts"]
    say(f"effective prompt tokens: {p['equal']} of {p['compared']} pairs identical")
    for why, n in p["differences"].items():
        say(f"  {n} × {why}")

    say("\n2. Speed (paired exchanges that succeeded on both sides)", "bold")
    console.print(_speed_table(r["speed"]))
    say("times in ms; B/A: B's p50 over A's (95% CI); metric definitions: docs/metrics.md")

    say("\n3. Divergence", "bold")
    d = r["divergence"]
    base = (r.get("baseline") or {}).get("divergence")
    table = Table("", "A vs B", *(["A vs baseline (noise floor)"] if base else []))

    def row(label: str, key: str, fmt: str = "{:.1%}") -> None:
        vals = [d.get(key)] + ([base.get(key)] if base else [])
        table.add_row(label, *("-" if v is None else fmt.format(v) for v in vals))

    row("exact match", "exact_match_rate")
    row("similarity (mean)", "similarity_mean", "{:.3f}")
    row("first divergence (median position)", "first_divergence_median", "{:g}")
    counts = sorted((set(d["counts"]) | set((base or {}).get("counts", {}))) - {"exact"})
    for key in counts:
        table.add_row(key.replace("_", " "), str(d["counts"].get(key, 0)), *([str(base["counts"].get(key, 0))] if base else []))
    if d.get("logprobs"):
        table.add_row("logprob KL over the shared prefix (mean)", f"{d['logprobs']['kl_mean']:.4f}", *(["-"] if base else []))
        table.add_row("top-1 agreement", f"{d['logprobs']['top1_agreement']:.1%}", *(["-"] if base else []))
    console.print(table)
    for path, read in d.get("readable", {}).items():
        if read["read_both"] < read["pairs"]:
            say(
                f"{path}: {read['read_both']} of {read['pairs']} pairs readable on both sides ({read['unreadable_a']} unreadable in A, "
                f"{read['unreadable_b']} in B: no API adapter understood the body; never counted as a match)",
                "yellow",
            )
    if d["first_divergence_histogram"]:
        say("first divergence positions: " + ", ".join(f"{k}-{k + 7}: {v}" for k, v in d["first_divergence_histogram"].items()))

    if d["most_divergent"]:
        say("\n4. Most divergent exchanges", "bold")
        for item in d["most_divergent"]:
            fd = item["first_divergence"]
            extra = f", answers {item['answer'][0]!r} → {item['answer'][1]!r}" if "answer" in item else ""
            say(
                f"{item['path']}  A {item['a_id'][:8]} / B {item['b_id'][:8]}: similarity {item['similarity']:.2f}, "
                f"first divergence at {fd['unit']} {fd['at']}{extra}",
                "bold",
            )
            say("  " + item["diff"][:600].replace("\n", "\n  "))


@click.command()
@click.argument("a", type=click.Path(exists=True, path_type=Path))
@click.argument("b", type=click.Path(exists=True, path_type=Path), required=False)
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=Path("report.html"), show_default=True)
@click.option(
    "--extract", default=None, metavar="number|choice|json|regex:PATTERN", help="Compare answers extracted from the outputs."
)
def report(a: Path, b: Path | None, out: Path, extract: str | None) -> None:
    """Write one self-contained HTML report (works offline) of run A, or of B compared with A."""
    from .analysis.report import write_report

    try:
        write_report(out, a, b, extract=extract)
    except (InfertapError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"report written to {out}")


def register(cli: click.Group) -> None:
    cli.add_command(compare)
    cli.add_command(report)
