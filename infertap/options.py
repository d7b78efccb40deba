"""Click callbacks, option groups and progress bars shared by the commands."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.progress import Progress

    from .analysis.sources import One


def note_if_appending(command: str, out: Path) -> None:
    """Say so where ``--out`` already holds a capture: the new run is added to it, and ``stats`` and
    ``compare`` read all its runs together (another workload's among them)."""
    from .capture.reader import capture_id_of
    from .errors import InfertapError

    try:
        holds = capture_id_of(out) is not None
    except InfertapError:
        return  # a damaged capture: the writer says what is wrong with it
    if holds:
        click.echo(
            f"infertap {command}: {out} already holds a capture; this {command} is added to it as another run "
            "(stats and compare read its runs together)",
            err=True,
        )


def progress_bars(label: str) -> Progress:
    """A rich Progress of bars labelled ``label`` (markup; ``{task.description}`` for one label per bar),
    with a count, each task's ``detail`` field and the time elapsed, drawn on a console of its own at the
    terminal's width now: rich's shared console keeps the width of the first command run in the process,
    and a command run in-process at COLUMNS=80 after one at 300 drew 92-character bars."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        console=Console(),
    )


class _OneArg(click.ParamType):
    """What the one-path arguments share: the glob's one match, and its other matches left out."""

    name = "path"

    def __init__(self, *, sweeps: bool = False) -> None:
        self.sweeps = sweeps

    def _one(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> One:
        from .analysis.errors import NoCapturesError
        from .analysis.sources import one_path

        try:
            return one_path(value, _is_sweep if self.sweeps else None)
        except NoCapturesError as exc:
            self.fail(str(exc), param, ctx)


class OnePath(_OneArg):
    """A capture (or sweep) argument that takes one path: a glob the shell left quoted is expanded
    here, as stats expands its CAPTURE..., and takes the one capture it matches, each other match
    (notes beside the runs) said in a warning, as stats says them; ``sweeps``: a sweep's folder is
    taken too (``report``)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        one = self._one(value, param, ctx)
        for left in one.left_out:
            click.secho(f"warning: {left}", fg="yellow", err=True)
        return one.path


class OneWithLeftOut(_OneArg):
    """As ``OnePath``, but the command gets the ``One`` (path and the matches left out) and says what
    was left out itself: in its JSON's ``left_out``, as ``stats --json`` lists them, since a script
    reading the JSON never sees stderr."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> One:
        return self._one(value, param, ctx)


def _is_sweep(path: Path) -> bool:
    from .analysis.sweep_report import is_sweep  # imported only where a glob matches no capture

    return is_sweep(path)


class OneCapture(OnePath):
    """A run of ``compare``: one capture. A folder holding one capture is that capture (as replay
    finds it); one holding several is refused here, naming them, before any is read: a run on a
    side is one capture, its speed, snapshots and traffic identity each of one recorder."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        from .analysis.errors import NoCapturesError
        from .analysis.sources import find_captures

        path = super().convert(value, param, ctx)
        try:
            found = find_captures([path])
        except NoCapturesError as exc:
            self.fail(str(exc), param, ctx)
        if len(found) > 1:
            shown = ", ".join(str(c) for c in found[:3]) + (", ..." if len(found) > 3 else "")
            self.fail(
                f"{value}: holds {len(found)} captures ({shown}), and compare takes one capture a side: name one "
                "(replay and sweep take such a folder as one workload, and their run is one capture to compare)",
                param,
                ctx,
            )
        return found[0]


def pairs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[tuple[str, str]]:
    """KEY=VALUE options, in order, repeats kept."""
    out = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}")
        out.append((key, value))
    return out


def key_value(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """KEY=VALUE options as a dict (a later repeat wins)."""
    return dict(pairs(ctx, param, values))


def host_port(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()):  # '²' is a digit to isdigit, not to int
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}")
    if int(port) > 65535:
        raise click.BadParameter(f"port {port}: 0 to 65535")
    return host.strip("[]") or "127.0.0.1", int(port)


def ray_option(what: str) -> Any:
    """``--ray [ADDRESS]`` (``ray_address``: None without it, "" bare): ``what`` is done on a Ray cluster."""
    return click.option(
        "--ray",
        "ray_address",
        is_flag=False,
        flag_value="",
        default=None,
        metavar="[ADDRESS]",
        help=f"{what} on a Ray cluster (ADDRESS, or RAY_ADDRESS, or a new local one); needs infertap[scale].",
    )


#: Telemetry options, the same on every command that records (record, replay, sweep, mitm).
TELEMETRY_OPTIONS = [
    click.option("--no-telemetry", is_flag=True, help="Don't sample the engine's /metrics, GPUs and the host into the capture."),
    click.option(
        "--telemetry-url",
        "telemetry_urls",
        multiple=True,
        metavar="URL",
        help="Another Prometheus endpoint to sample (e.g. a DCGM exporter's /metrics); repeatable.",
    ),
    click.option(
        "--telemetry-interval",
        type=click.FloatRange(min=0, min_open=True),
        default=0.25,
        show_default=True,
        help="Seconds between GPU and host samples (engine metrics: 1 s).",
    ),
]


def telemetry_options(command: Any) -> Any:
    for option in reversed(TELEMETRY_OPTIONS):
        command = option(command)
    return command


def redact_option_pair(
    header_help: str = "Another header whose value is a secret; repeatable.",
    query_help: str = "Another query parameter whose value is a secret; repeatable.",
) -> list[Any]:
    """``--redact-header`` and ``--redact-query`` (``redact_header``, ``redact_query``: tuples of
    names), as every command that writes a capture takes them; only the help may say more of one."""
    return [
        click.option("--redact-header", multiple=True, metavar="NAME", help=header_help),
        click.option("--redact-query", multiple=True, metavar="NAME", help=query_help),
    ]


#: More secrets than the defaults, as every recorder takes them (record, mitm, import; replay's
#: with its own help): one ``Redactor(headers, query)`` reads them, by name in any case.
REDACT_OPTIONS = redact_option_pair()


def redact_options(command: Any) -> Any:
    """``--redact-header`` and ``--redact-query`` (``redact_header``, ``redact_query``: tuples of names)."""
    for option in reversed(REDACT_OPTIONS):
        command = option(command)
    return command
