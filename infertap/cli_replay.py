"""``infertap replay``: options -> one ReplayConfig -> replay.run_replay -> a summary."""

from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .errors import INTERRUPTED
from .options import TELEMETRY_OPTIONS, note_if_appending, pairs, progress_bars, ray_option, redact_option_pair
from .wording import counted

if TYPE_CHECKING:
    from .replay import ReplayConfig, ReplayStats, Schedule, Transforms

#: What replay and sweep share: how requests are transformed and chosen, how the target is
#: described and reached, and Ray (see ``base_config``).
_WORKLOAD_OPTIONS = [
    click.option(
        "--sessions",
        type=click.Choice(["open", "closed"]),
        default="open",
        show_default=True,
        help="open: each request at its recorded time, a turn never before the one it continues ends; closed: a turn "
        "its recorded think time after that one ends on the target (the agent's pacing kept).",
    ),
    click.option(
        "--think-scale",
        type=click.FloatRange(min=0, min_open=True),
        default=1.0,
        show_default=True,
        help="With --sessions closed: scale the recorded think time.",
    ),
    click.option(
        "--sample-sessions",
        type=float,
        default=None,
        metavar="FRACTION",
        help="Replay about this fraction of the sessions, whole (every turn of a session kept, or none), chosen by --seed.",
    ),
    click.option("--limit-sessions", type=int, default=None, metavar="N", help="Replay only the first N sessions, whole."),
    click.option(
        "--seed", default=0, show_default=True, help="Seed of the random choices: the sessions sampled, Poisson arrivals."
    ),
    click.option(
        "--model-map", multiple=True, callback=pairs, metavar="SRC=DST", help="Rename a model in request bodies; repeatable."
    ),
    click.option("--model", default=None, help="Set the model of every request."),
    click.option(
        "--set",
        "set_values",
        multiple=True,
        callback=pairs,
        metavar="PATH=VALUE",
        help="Body override, JSON value, dotted path; repeatable.",
    ),
    click.option("--unset", multiple=True, metavar="PATH", help="Remove a body key (dotted path); repeatable."),
    click.option(
        "--header", "headers", multiple=True, callback=pairs, metavar="NAME=VALUE", help="Set a request header; repeatable."
    ),
    click.option("--drop-header", multiple=True, metavar="NAME", help="Drop a captured request header; repeatable."),
    *redact_option_pair(
        "Another header whose value is a secret, redacted in the replay's capture (as record's; those the "
        "source capture redacted are too); repeatable.",
        "Another query parameter whose value is a secret, redacted in the replay's capture; repeatable.",
    ),
    click.option(
        "--api-key",
        envvar="INFERTAP_TARGET_API_KEY",
        default=None,
        help="The target's key, in the header each request's API reads: 'x-api-key' for Anthropic's /v1/messages, "
        "'Authorization: Bearer ...' for the others (env INFERTAP_TARGET_API_KEY). Captured credentials are never replayed.",
    ),
    click.option(
        "--pin-defaults",
        is_flag=True,
        help="Write the source engine's effective sampling defaults into each request (needs enrichment).",
    ),
    click.option(
        "--filter",
        "filters",
        multiple=True,
        metavar="KEY=VALUE",
        help="path=GLOB, model=NAME, status=CODE, after=S, before=S; repeatable.",
    ),
    click.option("--limit", type=int, default=None, help="Replay only the first N exchanges."),
    click.option(
        "--label",
        "labels",
        multiple=True,
        callback=pairs,
        metavar="KEY=VALUE",
        help="Stored in the replay's capture header; repeatable.",
    ),
    click.option(
        "--model-file",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="The target's GGUF, for facts it doesn't publish.",
    ),
    click.option("--no-probe", is_flag=True, help="Don't probe the target (no snapshot, no enrichment)."),
    click.option("--no-enrich", is_flag=True, help="No per-exchange effective tokens and settings."),
    click.option(
        "--grace",
        default=5.0,
        show_default=True,
        help="On Ctrl-C, seconds in-flight requests may finish (a second Ctrl-C: none).",
    ),
    click.option("--connect-timeout", default=10.0, show_default=True, help="Seconds to connect to the target."),
    click.option(
        "--read-timeout", default=600.0, show_default=True, help="Seconds to wait for the target between bytes (0: forever)."
    ),
    click.option(
        "--max-response-mb",
        default=64.0,
        show_default=True,
        help="Of a larger response only this much is kept (marked response_body_size); it is still read whole, as record's.",
    ),
    ray_option("Replay in shards"),
    click.option(
        "--shards",
        type=click.IntRange(min=1),
        default=None,
        help="With --ray: how many replay workers [default: the cluster's CPUs].",
    ),
]


def workload_options(command: Any) -> Any:
    for option in reversed([*_WORKLOAD_OPTIONS, *TELEMETRY_OPTIONS]):
        command = option(command)
    return command


def base_config(
    capture: Path | tuple[Path, ...],
    target: str,
    out: Path,
    schedule: Schedule,
    *,
    repeat: int = 1,
    model_map: list[tuple[str, str]],
    model: str | None,
    set_values: list[tuple[str, str]],
    unset: tuple[str, ...],
    headers: list[tuple[str, str]],
    drop_header: tuple[str, ...],
    api_key: str | None,
    pin_defaults: bool,
    filters: tuple[str, ...],
    limit: int | None,
    labels: list[tuple[str, str]],
    model_file: str | None,
    no_probe: bool,
    no_enrich: bool,
    grace: float,
    connect_timeout: float,
    read_timeout: float,
    ray_address: str | None,
    shards: int | None,
    no_telemetry: bool,
    telemetry_urls: tuple[str, ...],
    telemetry_interval: float,
    sessions: str = "open",
    think_scale: float = 1.0,
    sample_sessions: float | None = None,
    limit_sessions: int | None = None,
    seed: int = 0,
    redact_header: tuple[str, ...] = (),
    redact_query: tuple[str, ...] = (),
    max_response_mb: float = 64.0,
) -> ReplayConfig:
    """One ReplayConfig from the shared options."""
    from .replay import Filters, ReplayConfig, SessionSample

    if shards is not None and ray_address is None:
        raise click.UsageError("--shards needs --ray")
    if not math.isfinite(max_response_mb) or max_response_mb > 1 << 20:  # before int(): NaN has none
        raise click.ClickException(f"--max-response-mb: a size above 0 and finite, at most 1 TiB ({max_response_mb} MB)")
    return ReplayConfig(
        capture=capture,
        target=target,
        out=out,
        schedule=schedule,
        transforms=_transforms(model_map, model, set_values, unset, headers, drop_header, api_key, pin_defaults),
        filters=Filters.parse(filters),
        limit=limit,
        repeat=repeat,
        labels=dict(labels),
        probe=not no_probe,
        enrich=not no_enrich,
        model_file=model_file,
        grace_s=grace,
        ray=ray_address,
        shards=shards,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout or None,  # 0: no limit
        max_response_bytes=int(max_response_mb * 1024 * 1024),
        sessions=sessions,
        think_scale=think_scale,
        sample=None
        if sample_sessions is None and limit_sessions is None
        else SessionSample(sample_sessions, seed, limit_sessions),
        telemetry=not no_telemetry,
        telemetry_urls=telemetry_urls,
        telemetry_interval_s=telemetry_interval,
        redact_headers=tuple(redact_header),
        redact_query=tuple(redact_query),
    )


#: The CAPTURE... argument that replay and sweep share: one capture, several, or a folder of them,
#: resolved by ``given_captures`` (globs too: a quoted one reaches us unexpanded).
captures_argument = click.argument("captures", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="CAPTURE...")


@click.command()
@captures_argument
@click.option("--target", required=True, metavar="URL", help="The engine to replay against.")
@click.option(
    "--out", type=click.Path(path_type=Path), default=None, help="Capture of the replay [default: captures/replay-<time>]."
)
@click.option(
    "--schedule",
    "schedule_kind",
    type=click.Choice(["original"]),
    default=None,
    help="Original timing (the default unless --concurrency or --rate is given).",
)
@click.option("--speed", default=1.0, show_default=True, help="With original timing: time scale (2 = twice as fast).")
@click.option(
    "--concurrency",
    default=None,
    metavar="N|original",
    help="Closed loop: N in flight, or as many as the capture had at each request.",
)
@click.option("--rate", type=float, default=None, help="Open loop at R requests/s.")
@click.option("--poisson", is_flag=True, help="With --rate: Poisson arrivals.")
@click.option(
    "--max-concurrency",
    type=int,
    default=None,
    help="A cap on requests in flight, on any schedule (waits are recorded apart from latency).",
)
@click.option("--repeat", type=int, default=1, show_default=True, help="Replay the workload N times, back to back.")
@click.option(
    "--warmup",
    type=click.IntRange(0, 1_000_000),
    default=0,
    show_default=True,
    help="Send the workload's first N requests on the same schedule first, recorded apart in OUT/warmup "
    "(not in the replay's capture, so no stats count them): a cold engine's start-up lands there.",
)
@workload_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (no progress bar).")
def replay(
    captures: tuple[Path, ...],
    target: str,
    out: Path | None,
    schedule_kind: str | None,
    speed: float,
    concurrency: str | None,
    rate: float | None,
    poisson: bool,
    seed: int,
    max_concurrency: int | None,
    repeat: int,
    warmup: int,
    as_json: bool,
    **options: Any,
) -> None:
    """Re-issue a captured workload against TARGET, at the original timing by default, recording it as a capture.

    Several captures (or a folder of them: one per recorder) are replayed as one workload, in one
    order of sending on their wall clocks, a session whose turns two recorders took linked as one.

    \b
    infertap replay captures/run1 --target http://127.0.0.1:8080
    infertap replay captures/gw-a captures/gw-b --target http://127.0.0.1:8080
    infertap replay captures/run1 --target http://127.0.0.1:8000 --concurrency 8 --model-map smol=Qwen/Qwen3-8B
    infertap replay captures/run1 --target http://127.0.0.1:8080 --rate 20 --poisson --set temperature=0 --pin-defaults
    infertap replay captures/agents --target http://gpu-node:8000 --ray ray://head:10001 --shards 16
    """
    _check_usage(schedule_kind, concurrency, rate, poisson)
    config = base_config(
        given_captures(captures),
        target,
        out or Path("captures") / f"replay-{_dt.datetime.now():%Y%m%d-%H%M%S}",
        _schedule(speed, concurrency, rate, poisson, seed, max_concurrency),
        repeat=repeat,
        seed=seed,
        **options,
    )
    note_if_appending("replay", Path(config.out))
    if repeat > 1:
        note_fixed_session(config, f"each of the {repeat} passes")
    warm = _warm_up(config, warmup, quiet=as_json) if warmup else None
    if warm is not None and warm["stopped_early"]:  # Ctrl-C in the warm-up: nothing measured
        click.echo(f"stopped in the warm-up ({warm['sent']} sent, recorded in {warm['out']}); nothing measured", err=True)
        click.get_current_context().exit(INTERRUPTED)
    summary = _run(config, quiet=as_json)
    if warm is not None:
        from .replay.warmup import warmup_facts

        summary["warmup"] = warmup_facts(warm)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        _print_summary(summary)
    from .replay import no_response

    if (why := no_response(summary)) is not None:
        raise click.ClickException(f"{why} ({target}); the replay's capture has every request, as sent")
    if summary["stopped_early"]:  # Ctrl-C: the capture is whole and closed, the run is not (`replay && compare`)
        click.get_current_context().exit(INTERRUPTED)


def given_captures(given: tuple[Path, ...]) -> Path | tuple[Path, ...]:
    """The capture given, or the captures that the arguments name (a folder of captures, several
    arguments, globs), found as ``stats`` finds them: several are one workload, to replay or sweep;
    a glob's matches that hold no capture are left out, each said."""
    from .analysis.errors import NoCapturesError
    from .analysis.sources import locate_captures

    try:
        found = locate_captures(given)
    except NoCapturesError as exc:
        raise click.ClickException(str(exc)) from None
    for left in found.left_out:
        click.secho(f"warning: {left}", fg="yellow", err=True)
    return found.captures[0] if len(found.captures) == 1 else tuple(found.captures)


def note_fixed_session(config: ReplayConfig, runs: str) -> None:
    """Say so where ``--header`` sets a session header beside runs that would send ids of their own:
    it is sent as given, so a gateway keyed by it (sticky routing, a per-session cache) puts them
    all in one session. Kept, not refused: the user named it, as AIPerf's and vLLM's --header send it."""
    name = config.transforms.session_header
    if name is not None:
        click.echo(
            f"warning: --header {name} is sent as given in {runs}, in place of their own session ids "
            f"(<id>#k, <id>@<point>): a gateway keyed by {name} puts them in one session; leave it out "
            "to send the recorded ids, each run's apart",
            err=True,
        )


def _check_usage(schedule_kind: str | None, concurrency: str | None, rate: float | None, poisson: bool) -> None:
    """Options that can't go together, refused before anything is read."""
    if concurrency is not None and rate is not None:
        raise click.UsageError("choose one of --concurrency and --rate")
    if schedule_kind == "original" and (concurrency is not None or rate is not None):
        raise click.UsageError("--schedule original can't be combined with --concurrency or --rate")
    if poisson and rate is None:
        raise click.UsageError("--poisson needs --rate")


def _schedule(
    speed: float, concurrency: str | None, rate: float | None, poisson: bool, seed: int, max_concurrency: int | None
) -> Schedule:
    """--concurrency (closed loop), else --rate (open loop), else the original timing."""
    from .replay import Schedule

    if concurrency is not None:
        if concurrency == "original":
            return Schedule("concurrency-original", max_concurrency=max_concurrency)
        if concurrency.isascii() and concurrency.isdigit():  # '²' is a digit to isdigit, not to int
            return Schedule("concurrency", concurrency=int(concurrency), max_concurrency=max_concurrency)
        raise click.BadParameter(f"expected a number or 'original', got {concurrency!r}", param_hint="--concurrency")
    if rate is not None:
        return Schedule("poisson" if poisson else "rate", rate=rate, seed=seed, max_concurrency=max_concurrency)
    return Schedule("original", speed=speed, max_concurrency=max_concurrency)


def _transforms(
    model_map: list[tuple[str, str]],
    model: str | None,
    set_values: list[tuple[str, str]],
    unset: tuple[str, ...],
    headers: list[tuple[str, str]],
    drop_header: tuple[str, ...],
    api_key: str | None,
    pin_defaults: bool,
) -> Transforms:
    """What changes in each request; --api-key goes in the header of each request's API (Transforms.key_header)."""
    from .replay import Transforms, parse_value

    header_map = dict(headers)
    if api_key:
        for name in header_map:
            if name.lower() in ("authorization", "x-api-key"):
                raise click.UsageError(f"--api-key (or INFERTAP_TARGET_API_KEY) and --header {name}=...: give one of them")
    return Transforms(
        model_map=dict(model_map),
        model=model,
        set_values=[(k, parse_value(v)) for k, v in set_values],
        unset=list(unset),
        headers=header_map,
        drop_headers=set(drop_header),
        pin_defaults=pin_defaults,
        api_key=api_key or None,
    )


def _note(info: dict[str, Any]) -> None:
    """What the replay sends otherwise than asked, on stderr before it starts."""
    each = _per_pass(info)
    if info["not_kept"]:
        click.echo(f"note: {_not_kept(info['not_kept'])}{each}", err=True)
    if info.get("source_refused"):
        click.echo(f"note: {_source_refused(info['source_refused'])}{each}", err=True)
    if info.get("unpinned"):
        click.echo(f"note: {_unpinned(info['unpinned'])}{each}", err=True)
    for given, apis in (info.get("placed") or {}).items():
        where = ", ".join(f"{name} on {api}" for api, name in apis.items())
        click.echo(f"note: {given} goes where each API reads it: {where} requests", err=True)
    for line in _pins_without_place(info):
        click.echo(f"note: {line}{each}", err=True)
    if info["as_recorded"]:
        click.echo(
            f"note: {info['as_recorded']} request bodies are no JSON object --model-map can read (multipart uploads; "
            "a compressed body cut short, or plain JSON under a Content-Encoding): "
            f"--model-map can't apply to them, they are sent as recorded{each}",
            err=True,
        )


def _per_pass(s: dict[str, Any]) -> str:
    """What the counts of the source's exchanges left out (or sent as recorded) are of, with --repeat."""
    return f" (in each of the {s['repeat']} passes)" if s.get("repeat", 1) > 1 else ""


def _warm_up(config: ReplayConfig, n: int, *, quiet: bool) -> dict[str, Any]:
    """The warm-up (replay.warmup), into OUT/warmup: the measured capture holds none of it."""
    from .replay.warmup import warm_up

    out = Path(config.out) / "warmup"
    if not quiet:
        click.echo(f"warming up: the workload's first {n} requests, recorded apart in {out}", err=True)
    return warm_up(config, n, out)


def _run(config: ReplayConfig, *, quiet: bool) -> dict[str, Any]:
    """The replay, under a live progress bar unless ``quiet``, on a console of its own
    (options.progress_bars): rich's shared one keeps the width of the first command in the process."""
    from .replay import run_replay

    if quiet:
        return run_replay(config, on_start=_note)
    progress = progress_bars("[bold]replay")
    task = progress.add_task("replay", total=None, detail="")

    def on_start(info: dict[str, Any]) -> None:
        progress.update(task, total=info["items"])
        progress.console.print(
            f"replaying {counted(info['items'], 'exchange')} from {', '.join(map(str, config.captures))} against {info['target']} "
            f"({info['target_kind'] or 'unknown kind'}) into {info['out']}"
            + (f" in {info['shards']} Ray shards" if "shards" in info else ""),
            markup=False,
            highlight=False,
        )
        _note(info)

    def tick(stats: ReplayStats) -> None:
        errors = stats.generation_failed  # generation requests not answered 2xx in full, unfinished, or a 2xx error body
        lag = f", lag {stats.lags_ns[-1] / 1e6:.2f} ms" if stats.lags_ns else ""
        progress.update(task, completed=stats.completed, detail=f"in flight {stats.in_flight}, errors {errors}{lag}")

    with progress:
        return run_replay(config, progress=tick, on_start=on_start)


def _session_rows(sessions: dict[str, Any] | None, ms: Any) -> list[tuple[str, str]]:
    """How turns kept their rule, and the waits that were the target's (open mode only)."""
    if not sessions:
        return []
    if not sessions["turns"]:
        if sessions["mode"] == "closed":
            return [("sessions", "closed: no request continues another here, so each is its own session, sent at its time")]
        return []
    if sessions["mode"] == "closed":
        rule = f"closed: each sent its think time ×{sessions['think_scale']:g} after the turn it continues ended"
        return [
            ("sessions", f"{counted(sessions['turns'], 'turn')} {rule}"),
            ("turn lag ms", f"{ms(sessions['turn_lag_ms'])}  (p50 / p99 / max)"),
        ]
    waited = sessions["waited_for_parent"]
    schedule = sessions.get("schedule", "original")
    if schedule == "original":
        return [
            ("sessions", f"open: {counted(sessions['turns'], 'turn')} at their recorded times, {waited} held back by the target"),
            (
                "parent wait ms",
                f"{ms(sessions['parent_wait_ms'])}  (p50 / p99 / max; the target's turn ended later than recorded)",
            ),
        ]
    when = "as a slot freed" if schedule.startswith("concurrency") else "at their scheduled arrivals"
    return [
        (
            "sessions",
            f"open: {counted(sessions['turns'], 'turn')} sent {when}, none before the turn it continues ended; {waited} waited for it",
        ),
        ("parent wait ms", f"{ms(sessions['parent_wait_ms'])}  (p50 / p99 / max; due, and waiting for the turn it continues)"),
    ]


def _source_refused(n: int) -> str:
    return f"{counted(n, 'exchange')} not replayed: the recorder refused them (end refused), so the engine never saw them"


def _source_failed(failed: dict[str, int]) -> str:
    """The workload's own failures, beside the replay's: a prompt past the context fails on any target."""
    statuses = ", ".join(f"{'no answer' if status == 'none' else status} ×{n}" for status, n in failed.items())
    return (
        f"{sum(failed.values())} of these requests ({statuses}): replayed as recorded, they are likely to fail "
        "again, not for the target; --filter status=200 replays only those that succeeded"
    )


def _pins_without_place(s: dict[str, Any]) -> list[str]:
    """The pins left out of the requests of an API that has no place for them (or refuses their
    value): one line for the settings left out of as many requests of one API for one reason."""
    why = s.get("pins_without_place_why") or {}
    grouped: dict[tuple[str, int, str], list[str]] = {}
    for name, apis in (s.get("pins_without_place") or {}).items():
        for api, n in apis.items():
            grouped.setdefault((api, n, why.get(name, {}).get(api, "no place for it")), []).append(name)
    return [
        f"--pin-defaults left {', '.join(names)} out of {counted(n, f'{api} request')}, "
        f"the target's own default{'s' if len(names) > 1 else ''} applying there: {words}"
        for (api, n, words), names in grouped.items()
    ]


def _unpinned(n: int) -> str:
    return (
        f"--pin-defaults pinned nothing of {counted(n, 'exchange')}: an enrichment names its id but no exchange of "
        "it the capture holds (an id other exchanges carry too with no occurrence, or an occurrence past the id's "
        "exchanges), so the analysis attaches it to none"
    )


def _not_kept(n: int) -> str:
    return (
        f"{counted(n, 'exchange')} left out, not sent: their request bodies were not kept by the recorder "
        "(request_body_size: over its body limit, or not searchable for credentials), and an empty body is another request"
    )


#: What a server answers for a path it doesn't route (llama-cpp-python's /v1/messages is a 404).
_NOT_SERVED = {"404", "405"}


def _path_failures(path: str, p: dict[str, Any]) -> str:
    """A path's failures; a path every request of which was refused as not found may be an API the target lacks."""
    said = ", ".join(f"{'no response' if k == 'None' else k} ×{v}" for k, v in p["failures"].items())
    (only, n), *others = p["failures"].items()
    hint = ": the target may not serve this API" if not others and only in _NOT_SERVED and n == p["sent"] else ""
    return f"{said} on {path}{hint}"


def _sent_line(s: dict[str, Any]) -> str:
    """What was sent and how it went: ok (2xx, in full, finished, no error in the body), unfinished (cut
    by the target), kept only in part (unknown), failed by status, ending or a 2xx body's error (per
    path), not sent."""
    failures = "; ".join(_path_failures(path, p) for path, p in s["failures_by_path"].items())
    failed = f"{s['failed']} failed" + (f": {failures}" if failures else "")
    cut = f"{n} unfinished ({_UNFINISHED}), " if (n := s.get("unfinished")) else ""
    cut += f"{n} response not kept ({_NOT_KEPT}), " if (n := s.get("response_not_kept")) else ""
    return f"{s['sent']} ({s['ok']} ok, {cut}{failed}; {s['not_sent']} not sent)" + (
        " — stopped early" if s["stopped_early"] else ""
    )


_UNFINISHED = "a stream ended with no finish reason: the target ended them early"
_NOT_KEPT = "answered in full past --max-response-mb, only its head kept: unknown, neither ok nor failed"


def _behind_rows(s: dict[str, Any], ms: Any) -> list[tuple[str, str]]:
    """How far behind its schedule each request left, the cap's wait counted; and, when requests
    waited for the cap, that the replay did not keep its schedule (the lag alone would hide it)."""
    rows = [("sent behind the schedule ms", f"{ms(s['behind_ms'])}  (p50 / p99 / max; waits for a slot counted)")]
    if not s["schedule_kept"]:
        p99 = s["behind_ms"]["p99"] or 0.0
        rows.append(
            (
                "schedule",
                f"not kept: capped at {s.get('capped_at') or 'a limit'} (--max-concurrency), {counted(s['capped'], 'request')} waited, "
                f"p99 {p99:.1f} ms behind",
            )
        )
    return rows


def _rate_line(rate: dict[str, float | None]) -> str:
    """The request rate achieved beside the one scheduled, first send to last."""
    if rate["sent"] is None:
        return "- (fewer than two requests sent)"
    asked = "closed loop, none scheduled" if rate["scheduled"] is None else f"{rate['scheduled']:.2f}/s scheduled"
    return f"{rate['sent']:.2f}/s sent, {asked}  (from the first send to the last)"


def _warmup_line(w: dict[str, Any]) -> str:
    ends = ", ".join(f"{k} ×{v}" for k, v in (w["ends"] or {}).items()) or "-"
    return f"{w['sent']} sent first ({ends}), recorded apart in {w['out']}: not in this capture, nor its stats"


def _throughput_line(s: dict[str, Any]) -> str:
    """Ok requests/s and output tokens/s over the replay's span (sends to ends): the tokens as stats
    counts them (usage, else the enrichment's tokenizer count, else a stream's token events), over the
    answers counted (how many had no count, said), which sources (said), unknown where none was."""
    tp, counts = s["throughput"], s["output_tokens"]
    if tp["ok_per_s"] is None:
        return "- (no request ended)"
    if tp["output_tokens_per_s"] is None:
        tokens = (
            "output tokens/s unknown (no answer was streamed or reported its usage)"
            if counts["unknown"]
            else "0 answers to count"
        )
    else:
        tokens = f"{tp['output_tokens_per_s']:.2f} output tokens/s"
        if counts["unknown"]:
            tokens += f" (of {counts['counted']} answers; {counts['unknown']} not streamed reported no usage: a lower bound)"
        tokens += f", {_token_sources(counts.get('source') or {})}"
    return f"{tp['ok_per_s']:.2f} ok requests/s, {tokens}  (from the first send to the last end, {tp['span_s']:.2f} s)"


#: How each source counts an answer's output tokens (docs/metrics.md, ``output_tokens``), in stats' order.
_SOURCES = {"usage": "the engine's usage", "tokenize": "the engine's tokenizer", "chunks": "token events"}


def _token_sources(source: dict[str, int]) -> str:
    """Which count the output tokens are, by answers: the engine's usage, its tokenizer (the
    target's enrichment), or a stream's token events, an approximation that ``infertap stats``
    replaces by the tokenizer's count once the capture is enriched (``infertap enrich``)."""
    order = [k for k in _SOURCES if k in source] + [k for k in source if k not in _SOURCES]
    if len(order) == 1:
        said = f"counted by {_SOURCES.get(order[0], order[0])}"
    else:
        said = "counted by " + ", ".join(f"{_SOURCES.get(k, k)} ×{source[k]}" for k in order)
    if "chunks" in source:
        said += " (an approximation: no enrichment counted them by the engine's tokenizer)"
    return said


def _print_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    def ms(d: dict[str, float | None]) -> str:
        return " / ".join("-" if d[k] is None else f"{d[k]:.2f}" for k in ("p50", "p99", "max"))

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("replay", s["out"]),
        ("target", f"{s['target']} ({s['target_kind'] or 'kind unknown'})"),
        ("sent", _sent_line(s)),
        *([("warm-up", _warmup_line(s["warmup"]))] if s.get("warmup") else []),
        *([("failed when recorded", _source_failed(s["source_failed"]) + _per_pass(s))] if s.get("source_failed") else []),
        *([("left out", _not_kept(s["not_kept"]) + _per_pass(s))] if s.get("not_kept") else []),
        *([("not replayed", _source_refused(s["source_refused"]) + _per_pass(s))] if s.get("source_refused") else []),
        *([("not pinned", _unpinned(s["unpinned"]) + _per_pass(s))] if s.get("unpinned") else []),
        *(("pin left out", line + _per_pass(s)) for line in _pins_without_place(s)),
        ("endings", ", ".join(f"{k} ×{v}" for k, v in s["ends"].items()) or "-"),
        ("status codes", ", ".join(f"{'no response' if k == 'None' else k} ×{v}" for k, v in s["statuses"].items()) or "-"),
        *(("error", f"{message} ×{n}") for message, n in s.get("errors", {}).items()),
        ("schedule lag ms", f"{ms(s['lag_ms'])}  (p50 / p99 / max; the dispatcher's own)"),
        *_behind_rows(s, ms),
        ("cap wait ms", f"{ms(s['queue_wait_ms'])}  (p50 / p99 / max)"),
        ("request rate", _rate_line(s["request_rate"])),
        ("throughput", _throughput_line(s)),
        ("concurrency", f"{s['concurrency']['mean']:.2f} mean, {s['concurrency']['max']} max"),
        *_session_rows(s.get("sessions"), ms),
        ("wall time", f"{s['wall_s']:.1f} s"),
        ("snapshots", f"{s['snapshots']} of the target, {counted(s['enriched'], 'exchange')} enriched"),
    ]
    for key, value in rows:
        table.add_row(key, value)
    console = Console()
    console.print(table, markup=False, highlight=False)
    if s.get("workers"):
        workers = Table(
            "shard",
            "host",
            "recorder",
            "sent",
            "complete",
            "unfinished",
            "ended/s",
            "lag ms p50 / p99 / max",
            "clock offset ms",
            title="replay workers (Ray)",
            title_justify="left",
        )
        for w in s["workers"]:
            rate = "-" if w["ended_per_s"] is None else f"{w['ended_per_s']:.1f}"
            workers.add_row(
                str(w["shard"]),
                w["host"],
                w["recorder_id"],
                str(w["sent"]),
                str(w["completed"]),
                str(w["unfinished"]),
                rate,
                ms(w["lag_ms"]),
                "same host" if w["clock_rtt_ms"] is None else f"{w['clock_offset_ms']:+.2f} (rtt {w['clock_rtt_ms']:.2f})",
            )
        console.print(workers, markup=False, highlight=False)


def register(cli: click.Group) -> None:
    cli.add_command(replay)
