"""``infertap sweep``: options -> SweepConfig and SLOs -> analysis.capacity.run_sweep -> the capacity."""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .cli_replay import base_config, captures_argument, given_captures, note_fixed_session, workload_options
from .errors import INTERRUPTED, interrupted
from .options import progress_bars

if TYPE_CHECKING:
    from rich.table import Table

    from .replay import ReplayStats
    from .replay.sweep import Load, Point


@click.command()
@captures_argument
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
@click.option(
    "--warmup",
    default=0,
    show_default=True,
    help="Send the workload's first N requests at the first point's load before it (not judged: a cold engine would fail it).",
)
@click.option("--min-duration", default=0.0, show_default=True, help="Repeat the workload until a point lasts this many seconds.")
@click.option("--max-concurrency", type=int, default=None, help="A cap on requests in flight at every speed.")
@click.option("--idle-timeout", default=120.0, show_default=True, help="Seconds to wait for the target to empty between points.")
@workload_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (no progress bars).")
def sweep(
    captures: tuple[Path, ...],
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
    warmup: int,
    min_duration: float,
    max_concurrency: int | None,
    idle_timeout: float,
    as_json: bool,
    **options: Any,
) -> None:
    """How much of the captured workload TARGET carries under the SLOs: the workload replayed at
    rising load (its shape, lengths, prefix reuse and conversation order intact), one capture per
    point under --out, with sweep.json holding every point, the capacity and the knee.

    Several captures (or a folder of them: one per recorder) are one workload, as replay takes them:
    every point sends the requests of all of them.

    \b
    infertap sweep captures/run1 --target http://127.0.0.1:8080 --slo 'ttft:p99<=2s' --slo 'error_rate<=1%' --search
    infertap sweep captures/gw-a captures/gw-b --target http://gpu:8000 --slo 'e2e:p90<=30s' --speeds 1,2,4
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
            given_captures(captures),
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
        warmup=warmup,
        min_duration_s=min_duration,
        idle_timeout_s=idle_timeout,
    )
    note_fixed_session(config.replay, "every point and pass of the sweep")
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
    if result.get("aborted"):  # a point could not run (the target died under load): what was found is kept
        raise click.ClickException(f"the sweep stopped: {_aborted(result)}")


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
    """The sweep under one bar per point and an overall line; Ctrl-C between points keeps what was found.
    The bars draw on a console of their own (options.progress_bars), as print_sweep's table does."""
    from .analysis.capacity import run_sweep

    progress = progress_bars("{task.description}")
    overall = progress.add_task("[bold]sweep", total=None if config.search else len(config.loads()), detail="")
    state: dict[str, Any] = {"task": None, "passed": 0, "failed": 0}

    def start(point_load: Load, requests: int) -> None:
        progress.start()  # at the first point: the checks before it print no empty bar
        state["task"] = progress.add_task(f"  {point_load.name}", total=requests, detail="")
        progress.update(overall, detail=f"now {point_load.name}; {state['passed']} passed, {state['failed']} failed")

    def tick(stats: ReplayStats) -> None:
        if state["task"] is None:  # the warm-up, before the first point: no bar of its own
            return
        errors = stats.generation_failed  # not answered 2xx in full, unfinished, or a 2xx error body
        progress.update(state["task"], completed=stats.completed, detail=f"in flight {stats.in_flight}, errors {errors}")

    def done(point: Point) -> None:
        state["passed" if point.passed else "failed"] += 1
        verdict = (
            "passed"
            if point.counts
            else "passed, not measured"
            if point.passed
            else "lost, ended early"
            if point.lost_early
            else "unknown, no answer to judge"
            if point.verdict.get("unjudged")
            else "failed"
        )
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
    """The points as a table where it fits the terminal unabridged, else a few lines per point (at 80
    columns eleven columns cut every header to "offe…"); notes and the capacity under either."""
    from rich.console import Console
    from rich.measure import Measurement

    console = Console()
    table = _points_table(result)
    # Markup off: SLOs, notes and the capacity line hold text from the sweep's spec and its captures.
    if Measurement.get(console, console.options.update_width(10_000), table).maximum <= console.width:  # not a cell cut
        console.print(table, markup=False)
    else:
        for line in _points_lines(result):
            console.print(line, markup=False, highlight=False)
    for line in notes(result):
        console.print(f"note: {line}", markup=False, highlight=False)
    console.print(capacity_line(result), markup=False, highlight=False)


def _points_table(result: dict[str, Any]) -> Table:
    from rich.table import Table

    from .analysis.sweep_report import verdict_of

    kind = result["kind"]
    headers = [kind, "verdict", "offered req/s", "req/s", "goodput req/s", "attainment", "errors"]
    table = Table(*headers, *[s["slo"] for s in result["slo"]], "lag p99 ms")
    for p in result["points"]:
        f = _figures(p, result["slo"])
        table.add_row(
            _load(p[kind]), verdict_of(p), f["offered"], f["achieved"], f["goodput"], f["attainment"], f["errors"],
            *[_observed(p, s) for s in p["slos"]], f["lag"],
        )  # fmt: skip
    return table


def _points_lines(result: dict[str, Any]) -> list[str]:
    """The table's figures, a point at a time, for a terminal too narrow for its columns."""
    from .analysis.sweep_report import verdict_of

    kind, lines = result["kind"], []
    for p in result["points"]:
        f = _figures(p, result["slo"])
        lines += [
            f"{kind} {_load(p[kind])}: {verdict_of(p)}",
            f"  req/s offered {f['offered']}, achieved {f['achieved']}, goodput {f['goodput']}",
            f"  attainment {f['attainment']}, errors {f['errors']}, schedule lag p99 {f['lag']} ms",
            *(f"  {s['slo']}: {_observed(p, s)}" for s in p["slos"]),
        ]
    return lines


def _figures(p: dict[str, Any], slos: list[dict[str, Any]]) -> dict[str, str]:
    """A point's figures as printed, in the table or a line at a time ("-" where unknown)."""
    from .analysis.sweep_report import errors_text, share_text

    return {
        "offered": _num(p.get("offered_requests_per_s")),
        "achieved": _num(p.get("requests_per_s")),
        "goodput": _num((p.get("goodput") or {}).get("requests_per_s")),
        "attainment": "-" if p.get("attainment") is None else share_text(p["attainment"], 0),
        "errors": errors_text(p, slos) or "-",
        "lag": _num((p.get("schedule_lag_ms") or {}).get("p99")),
    }


def notes(result: dict[str, Any]) -> list[str]:
    """What the table can't say: passes not counted and why, failures that were the load's, SLOs
    measured on fewer exchanges than the point had, requests the replayer never sent, answers not kept
    whole, the workload's own failures, a first point run with no warm-up."""
    from .analysis.sweep_notes import point_notes
    from .analysis.sweep_report import failed_when_recorded

    kind, lines = result["kind"], []
    if result.get("inconsistent"):
        loads = ", ".join(map(_load, result["inconsistent"]))
        below = min((p for p in result["points"] if not p["passed"]), key=lambda p: float(p[kind]), default=None)
        if below is not None and below.get("unjudged"):  # no failure there to recover from: said as it was
            lines.append(f"{kind} {loads} passed above {kind} {_load(below[kind])}, which had no answer to judge: not counted")
        else:
            lines.append(f"{kind} {loads} passed above a load that failed (noise, or a target that recovered): not counted")
    for p in result["points"]:
        where = f"{kind} {_load(p[kind])}"
        if p["passed"] and p.get("unmeasured"):
            lines.append(f"{where} passed without measuring the target there, not counted: {'; '.join(p['unmeasured'])}")
        elif p["passed"] and p["replayer_behind"]:
            lines.append(f"{where} passed while the replayer fell behind its schedule: not counted")
        if p.get("not_carried"):  # set whatever its SLOs did: said to have held only where each did
            held = "; it failed though its SLOs held" if all(s["met"] for s in p["slos"]) else ""
            lines.append(f"{where} did not carry its load: {p['not_carried']}{held}")
        lines += point_notes(kind, p)
    if line := failed_when_recorded(result):
        lines.append(line)
    if result["points"] and not result.get("warmup"):  # a fresh llama-server's first prompt: 20x its later ones, measured
        lines.append(
            "no warm-up (--warmup 0): the first point met the target as it was, and an engine just started pays its "
            "cold start there (empty prompt cache, first allocations); --warmup N sends N requests first, unjudged"
        )
    if any(p["passed"] and p["replayer_behind"] for p in result["points"]):
        lines.append("replay from more hosts (--ray) to measure where the replayer fell behind")
    return lines


def capacity_line(result: dict[str, Any]) -> str:
    kind, cap, knee = result["kind"], result["capacity"], result["knee"]
    stopped = f"; the sweep stopped at {_aborted(result)}" if result.get("aborted") else ""
    if cap is None:
        lowest = result["points"][0] if result["points"] else None
        if lowest is None:
            return "capacity: no point ran" + stopped
        if not lowest["passed"]:
            from .analysis.sweep_notes import lowest_not_passed

            return f"capacity: none ({lowest_not_passed(kind, lowest)})" + stopped
        return "capacity: none measured (no point passed while measuring the target at its load: see the notes)" + stopped
    if knee["failed"] is not None:
        where = f"; the knee lies between {_load(knee['passed'])} and {_load(knee['failed'])}{stopped}"
    else:
        above = [u[kind] for u in result.get("unmeasured") or () if u[kind] > cap[kind]]
        where = (
            f"{stopped}: how much higher it goes is unknown"
            if stopped
            else f"; above it, {kind} {', '.join(map(_load, above))} passed without measuring the target (see the notes)"
            if above
            else "; no failing point above it"
        )
    goodput = (cap.get("goodput") or {}).get("requests_per_s")
    good = "goodput unknown" if goodput is None else f"of which {_num(goodput)}/s met every SLO (goodput)"
    tokens = cap["output_tokens_per_s"]  # unknown where no answer's tokens were counted: not 0
    return (
        f"capacity: {kind} {_load(cap[kind])}, {_num(cap['requests_per_s'])} requests/s, {good}, "
        f"{'output tokens/s unknown' if tokens is None else f'{_num(tokens)} output tokens/s'}{where}"
    )


def _aborted(result: dict[str, Any]) -> str:
    aborted, kind = result["aborted"], result["kind"]
    return f"{kind} {_load(aborted[kind])} ({aborted['error']})"


def _observed(point: dict[str, Any], slo: dict[str, Any]) -> str:
    from .analysis.sweep_report import observed_text

    if point.get("unjudged"):  # no answer to judge: not the shape of the answers, as "not measurable" says
        return "unknown"
    if slo["met"] is None:
        return "not measurable"
    value = slo["observed"]
    if value is None:
        return "over ✗"  # the statistic falls on a request that failed, or lacked the metric
    return observed_text(slo, value, slo["met"]) + ("" if slo["met"] else " ✗")


def _load(value: float) -> str:
    from .replay.sweep import load_text

    return load_text(value)


def _num(value: float | None) -> str:
    """Two decimals, or as many as show two significant digits: a recorded agent workload's 0.004
    requests/s (one every four minutes) read "0.00", as if nothing were served."""
    if value is None:
        return "-"
    places = 2 if not value or not math.isfinite(value) else max(2, 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{places}f}"


def register(cli: click.Group) -> None:
    cli.add_command(sweep)
