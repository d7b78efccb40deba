"""``infertap sweep``: options -> SweepConfig and SLOs -> analysis.capacity.run_sweep -> the capacity."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .cli_replay import base_config, workload_options
from .errors import INTERRUPTED, interrupted

if TYPE_CHECKING:
    from .replay import ReplayStats
    from .replay.sweep import Load, Point


@click.command()
@click.argument("capture", type=click.Path(exists=True, path_type=Path))
@click.option("--target", required=True, metavar="URL", help="The engine to sweep.")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="The sweep's folder, a capture per point [default: captures/sweep-<time>].",
)
@click.option(
    "--slo",
    "slos",
    multiple=True,
    required=True,
    metavar="METRIC:STAT<=VALUE",
    help="e.g. ttft:p99<=2s, tpot:p50<=50ms, e2e:p90<=30s, error_rate<=1% (quoted in a shell, which reads < as a redirect); repeatable, every one must hold.",
)
@click.option("--speeds", default=None, metavar="1,2,4,8", help="Multipliers of the original arrival rate, one point each.")
@click.option("--concurrency-levels", default=None, metavar="1,4,16,64", help="Closed loop at each N in flight.")
@click.option("--search", is_flag=True, help="Find the knee: double the speed until a point fails, then bisect.")
@click.option("--start-speed", default=1.0, show_default=True, help="With --search: the first speed.")
@click.option(
    "--tolerance", default=0.1, show_default=True, help="With --search: stop when pass and fail are this close (relative)."
)
@click.option("--max-points", default=16, show_default=True, help="With --search: at most this many points.")
@click.option("--min-requests", default=0, show_default=True, help="Repeat the workload until a point has this many requests.")
@click.option("--min-duration", default=0.0, show_default=True, help="Repeat the workload until a point lasts this many seconds.")
@click.option("--max-concurrency", type=int, default=None, help="A cap on requests in flight at every speed.")
@click.option("--idle-timeout", default=120.0, show_default=True, help="Seconds to wait for the target to empty between points.")
@workload_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (no progress bars).")
def sweep(
    capture: Path,
    target: str,
    out: Path | None,
    slos: tuple[str, ...],
    speeds: str | None,
    concurrency_levels: str | None,
    search: bool,
    start_speed: float,
    tolerance: float,
    max_points: int,
    min_requests: int,
    min_duration: float,
    max_concurrency: int | None,
    idle_timeout: float,
    as_json: bool,
    **options: Any,
) -> None:
    """How much of the captured workload TARGET carries under the SLOs: the workload replayed at
    rising load (its shape, lengths, prefix reuse and conversation order intact), one capture per
    point under --out, with sweep.json holding every point, the capacity and the knee.

    \b
    infertap sweep captures/run1 --target http://127.0.0.1:8080 --slo 'ttft:p99<=2s' --slo 'error_rate<=1%' --search
    infertap sweep captures/run1 --target http://gpu:8000 --slo 'e2e:p90<=30s' --speeds 1,2,4,8 --min-requests 500
    infertap sweep captures/run1 --target http://gpu:8000 --slo 'tpot:p50<=50ms' --concurrency-levels 1,4,16,64
    """
    from .analysis.capacity import run_sweep
    from .analysis.slo import parse_slos
    from .replay import Schedule
    from .replay.sweep import SweepConfig, parse_numbers

    parsed = parse_slos(slos)
    config = SweepConfig(
        replay=base_config(
            capture,
            target,
            out or Path("captures") / f"sweep-{_dt.datetime.now():%Y%m%d-%H%M%S}",
            Schedule(max_concurrency=max_concurrency),
            **options,
        ),
        speeds=parse_numbers(speeds, float, "--speeds") if speeds else (),
        concurrency_levels=parse_numbers(concurrency_levels, int, "--concurrency-levels") if concurrency_levels else (),
        search=search,
        start_speed=start_speed,
        tolerance=tolerance,
        max_points=max_points,
        min_requests=min_requests,
        min_duration_s=min_duration,
        idle_timeout_s=idle_timeout,
    )
    if as_json:
        try:
            result = run_sweep(config, parsed)
        except (KeyboardInterrupt, RuntimeError) as exc:
            result = _interrupted(config, exc)
        click.echo(json.dumps(result, indent=2, default=str))
    else:
        result = _run_with_progress(config, parsed)
        print_sweep(result)
    if result.get("stopped_early"):  # Ctrl-C: what was found is printed and kept; the sweep is not whole
        click.get_current_context().exit(INTERRUPTED)


def _interrupted(config: Any, exc: BaseException) -> dict[str, Any]:
    """Ctrl-C between points (while one was judged, or the target drained): the points found so far,
    and sweep.json saying the sweep was stopped early, as a Ctrl-C during a point says it."""
    from .analysis.capacity import RESULT, read_sweep, write_result

    if not interrupted(exc):  # a RuntimeError of another kind: a bug
        raise exc
    folder = Path(config.replay.out)
    if not (folder / RESULT).exists():
        raise click.ClickException("sweep interrupted before any point was judged") from None
    click.echo("sweep interrupted: what was found so far", err=True)
    result = {**read_sweep(folder), "stopped_early": True}
    write_result(folder, result)
    return result


def _run_with_progress(config: Any, slos: Any) -> dict[str, Any]:
    """The sweep under one bar per point and an overall line; Ctrl-C between points keeps what was found."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .analysis.capacity import run_sweep

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
    )
    overall = progress.add_task("[bold]sweep", total=None if config.search else len(config.loads()), detail="")
    state: dict[str, Any] = {"task": None, "passed": 0, "failed": 0}

    def start(point_load: Load, requests: int) -> None:
        progress.start()  # at the first point: the checks before it print no empty bar
        state["task"] = progress.add_task(f"  {point_load.name}", total=requests, detail="")
        progress.update(overall, detail=f"now {point_load.name}; {state['passed']} passed, {state['failed']} failed")

    def tick(stats: ReplayStats) -> None:
        errors = stats.completed - stats.ends.get("complete", 0)
        progress.update(state["task"], completed=stats.completed, detail=f"in flight {stats.in_flight}, errors {errors}")

    def done(point: Point) -> None:
        state["passed" if point.passed else "failed"] += 1
        verdict = "passed" if point.passed else ("lost, ended early" if point.lost_early else "failed")
        progress.update(state["task"], detail=verdict)
        judged = state["passed"] + state["failed"]
        progress.update(overall, completed=judged, detail=f"{state['passed']} passed, {state['failed']} failed")

    try:
        return run_sweep(config, slos, on_point=done, on_point_start=start, progress=tick)
    except (KeyboardInterrupt, RuntimeError) as exc:
        return _interrupted(config, exc)
    finally:
        if progress.live.is_started:
            progress.stop()


def print_sweep(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    kind = result["kind"]
    table = Table(
        kind,
        "verdict",
        "offered req/s",
        "req/s",
        "goodput req/s",
        "attainment",
        "errors",
        *[s["slo"] for s in result["slo"]],
        "lag p99 ms",
    )
    for p in result["points"]:
        verdict = "pass" if p["passed"] else ("lost (ended early)" if p["lost_early"] else "fail")
        observed = [_observed(s) for s in p["slos"]]
        lag = (p.get("schedule_lag_ms") or {}).get("p99")
        table.add_row(
            f"{p[kind]:g}",
            verdict + (" (replayer behind)" if p["replayer_behind"] else ""),
            _num(p.get("offered_requests_per_s")),
            _num(p.get("requests_per_s")),
            _num((p.get("goodput") or {}).get("requests_per_s")),
            f"{p['attainment']:.0%}",
            f"{p['error_rate']:.1%}",
            *observed,
            _num(lag),
        )
    console = Console()
    console.print(table)
    cap = result["capacity"]
    if result.get("inconsistent"):
        loads = ", ".join(f"{v:g}" for v in result["inconsistent"])
        console.print(f"note: {kind} {loads} passed above a load that failed (noise, or a target that recovered): not counted")
    if result.get("replayer_behind"):
        loads = ", ".join(f"{v:g}" for v in result["replayer_behind"])
        console.print(
            f"note: {kind} {loads} passed while the replayer fell behind its schedule (it, not the target, set the load "
            "there): not counted; replay from more hosts (--ray) to measure higher"
        )
    if cap is None:
        lowest = result["points"][0] if result["points"] else None
        console.print(
            "capacity: no point ran"
            if lowest is None
            else f"capacity: none (the lowest {kind} tried, {lowest[kind]:g}, failed)"
            if not lowest["passed"]
            else "capacity: none measured (no point passed with the replayer on its schedule)"
        )
        return
    knee = result["knee"]
    console.print(
        f"capacity: {kind} {cap[kind]:g}, {_num(cap['requests_per_s'])} requests/s, {_num(cap['output_tokens_per_s'])} output tokens/s"
        + (
            f"; the knee lies between {knee['passed']:g} and {knee['failed']:g}"
            if knee["failed"] is not None
            else "; no failing point above it"
        )
    )


def _observed(slo: dict[str, Any]) -> str:
    value = slo["observed"]
    if value is None:
        return "-"
    text = f"{value:.1%}" if slo["metric"] == "error_rate" else f"{value / 1e6:.1f} ms"
    return text + ("" if slo["met"] else " ✗")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def register(cli: click.Group) -> None:
    cli.add_command(sweep)
