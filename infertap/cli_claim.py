"""``infertap claim``: a run's numbers with the facts that make them reproducible (analysis/claim.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .capture.jsonable import jsonable
from .options import OneWithLeftOut

if TYPE_CHECKING:
    from .analysis.sources import One


@click.command()
@click.argument("run", type=OneWithLeftOut())
@click.option("--json", "as_json", is_flag=True, help="Print the card as one JSON object.")
@click.option("--markdown", "as_markdown", is_flag=True, help="Print the card as Markdown, for a README or an issue.")
@click.option("--strict", is_flag=True, help="Exit non-zero, naming each field that is not fully known.")
@click.option("--cache-dir", type=click.Path(path_type=Path), default=None, help="Where decoded captures are kept.")
def claim(run: One, as_json: bool, as_markdown: bool, strict: bool, cache_dir: Path | None) -> None:
    """The claim card of RUN (a capture): device, runtime, model, quantization, workload, concurrency,
    sampling, measuring side and aggregation, each with its source or the reason it is unknown, and
    the run's headline figures.

    \b
    infertap claim captures/run1
    infertap claim captures/run1 --markdown >> RESULTS.md
    infertap claim captures/run1 --json --strict
    """
    if as_json and as_markdown:
        raise click.UsageError("--json and --markdown exclude each other")
    from .analysis.claim import claim as make_claim
    from .analysis.claim import unknown_fields
    from .capture.reader import CaptureReader

    CaptureReader(run.path)  # not a capture: a clear error before DuckDB loads
    card = make_claim(run.path, cache_dir=cache_dir, left_out=run.left_out)
    for warning in card["warnings"]:  # as stats warns: a glob's matches left out, a capture still growing
        click.secho(f"warning: {warning}", fg="yellow", err=True)
    if as_json:
        click.echo(json.dumps(jsonable(card), indent=2, default=str, allow_nan=False))
    elif as_markdown:
        click.echo(markdown(card))
    else:
        click.echo(text(card))
    missing = unknown_fields(card)
    if strict and missing:
        for name, why in missing.items():
            click.secho(f"unknown {name}: {why}", fg="red", err=True)
        raise click.ClickException(f"--strict: {len(missing)} field(s) not fully known: {', '.join(missing)}")


def _rows(card: dict[str, Any]) -> list[tuple[str, str, str]]:
    from .analysis.claim import FIELDS, field_text

    return [(name, field_text(name, card[name]), card[name]["source"]) for name in FIELDS]


def _figures(fig: dict[str, Any]) -> list[str]:
    from .analysis.claim import figure_lines

    return figure_lines(fig)


def text(card: dict[str, Any]) -> str:
    lines = [f"claim card of {card['capture']}"]
    for name, value, source in _rows(card):
        lines.append(f"  {name}: {value}\n      source: {source}")
    lines += [f"  figures: {line}" for line in _figures(card["figures"])]
    return "\n".join(lines)


def markdown(card: dict[str, Any]) -> str:
    def cell(s: str) -> str:
        return s.replace("|", "\\|").replace("\n", " ")

    lines = [
        f"### Claim card: `{Path(card['capture']).name}`",
        "",
        "| field | value | source |",
        "|---|---|---|",
        *(f"| {name} | {cell(value)} | {cell(source)} |" for name, value, source in _rows(card)),
        "",
        *(f"**Figures**: {cell(line)}" for line in _figures(card["figures"])),
        "",
        "_Made by `infertap claim`; unknowns are stated, not guessed._",
    ]
    return "\n".join(lines)


def register(cli: click.Group) -> None:
    cli.add_command(claim)
