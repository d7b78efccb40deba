"""The ``infertap`` command: each subcommand parses, calls one library function, prints."""

from __future__ import annotations

import datetime as _dt
import errno
import importlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import click

from .capture.records import RecordType
from .errors import INTERRUPTED, InfertapError, interrupted
from .options import OnePath, OneWithLeftOut, host_port, key_value, redact_options, telemetry_options
from .stopping import interrupting
from .version import installed_version

if TYPE_CHECKING:
    from .analysis.sources import One

DEFAULT_CAPTURES = Path("captures")


_probe_header = click.option(
    "--probe-header",
    "probe_headers",
    multiple=True,
    callback=key_value,
    metavar="NAME=VALUE",
    help="A header for infertap's own requests to the engine (e.g. its API key); never stored. Repeatable.",
)


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``, as click's ``version_option`` prints it, the version read only when asked for."""
    if value and not ctx.resilient_parsing:
        click.echo(f"infertap, version {installed_version()}")
        ctx.exit()


def _default_out() -> Path:
    return DEFAULT_CAPTURES / _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def _capture_arg(f: Any) -> Any:
    return click.argument("capture", type=OnePath())(f)


#: The commands kept in modules of their own, by name: a module is imported when one of its commands
#: runs or is listed (``--help``), so that ``infertap stats`` doesn't import replay's, compare's,
#: the sweep's and mitm's command modules (a tenth of a warm ``stats``'s imports, compiled anew
#: where Python keeps no bytecode).
_ELSEWHERE = {
    "claim": "cli_claim",
    "compare": "cli_compare",
    "export": "cli_analysis",
    "import": "cli_mitm",
    "mitm": "cli_mitm",
    "replay": "cli_replay",
    "report": "cli_compare",
    "sql": "cli_analysis",
    "stats": "cli_analysis",
    "sweep": "cli_sweep",
}


class _Commands(click.Group):
    """Every library error (``InfertapError``, see infertap/errors.py) becomes a one-line CLI error
    here, once for all commands; commands catch only what they add words to. So does a file the
    system refuses (a cache folder that is a file, a folder not writable, a full disk), and a
    DuckDB query that Ctrl-C interrupted is the abort it is. The commands of ``_ELSEWHERE`` are
    added by their module's ``register`` when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *_ELSEWHERE})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in _ELSEWHERE:
            module = importlib.import_module(f"{__package__}.{_ELSEWHERE[cmd_name]}")
            module.register(self)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except InfertapError as exc:
            raise click.ClickException(str(exc)) from exc
        except OSError as exc:
            if exc.errno == errno.EPIPE and exc.filename is None:
                raise  # the reader went away (`| head`): click ends quietly, as any filter does
            where = f"{exc.filename}: " if exc.filename else ""
            raise click.ClickException(f"{where}{exc.strerror or exc}") from exc
        except RuntimeError as exc:
            if not interrupted(exc):
                raise
            raise click.Abort() from exc


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version, help="Show the version and exit."
)
def cli() -> None:
    """Record, replay and diff LLM inference traffic.

    \b
    infertap demo                                          # the whole story on two embedded engines
    infertap record --upstream http://127.0.0.1:8080 --out captures/run1
    infertap replay captures/run1 --target http://127.0.0.1:8000 --out captures/run1-b
    infertap compare captures/run1 captures/run1-b
    infertap stats captures/run1 captures/run1-b
    """


@cli.command()
@click.option("--upstream", required=True, metavar="URL", help="The engine to forward to, e.g. http://127.0.0.1:8080.")
@click.option("--listen", default="127.0.0.1:8787", show_default=True, callback=host_port, help="HOST:PORT to listen on.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Capture directory [default: captures/<time>].")
@click.option(
    "--label", "labels", multiple=True, callback=key_value, metavar="KEY=VALUE", help="Stored in the capture header; repeatable."
)
@redact_options
@click.option("--max-body-mb", default=64.0, show_default=True, help="Larger request bodies get 413 and are recorded as refused.")
@click.option(
    "--max-response-mb",
    default=64.0,
    show_default=True,
    help="Of a larger response only this much is kept (marked response_body_size); the client still gets all of it.",
)
@click.option("--max-segment-mb", default=256.0, show_default=True, help="Start a new segment file past this size.")
@click.option("--connect-timeout", default=10.0, show_default=True, help="Seconds to connect to the upstream.")
@click.option(
    "--read-timeout", default=600.0, show_default=True, help="Seconds to wait for the upstream between bytes (0: forever)."
)
@click.option("--graceful-timeout", default=5.0, show_default=True, help="On SIGTERM, seconds to let in-flight exchanges finish.")
@click.option(
    "--header-timeout",
    default=30.0,
    show_default=True,
    help="Seconds for a client's request head to arrive whole; past it 408, recorded as refused (0: forever).",
)
@click.option(
    "--max-header-kb",
    default=64.0,
    show_default=True,
    help="Larger request heads (or a chunked body's trailer sections) get 431 and are recorded as refused.",
)
@click.option(
    "--body-timeout",
    default=60.0,
    show_default=True,
    help="Seconds a client's request body may go without a byte; past it 408, recorded as refused (0: forever).",
)
@click.option(
    "--body-wait",
    default=0.5,
    show_default=True,
    help="Seconds a POST, PUT or PATCH head with neither Content-Length nor chunked encoding, sent alone, waits "
    "for a body sent so (refused, recorded) before it goes on bodiless (0: at once).",
)
@click.option(
    "--model-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The engine's GGUF, for facts it doesn't publish (template, hash).",
)
@click.option(
    "--probe-interval",
    default=60.0,
    show_default=True,
    help="Seconds between engine snapshots (a new one is stored only when it changed).",
)
@click.option("--no-probe", is_flag=True, help="Store no engine snapshots and no enrichments.")
@click.option("--no-enrich", is_flag=True, help="No per-exchange effective tokens and settings (snapshots still taken).")
@_probe_header
@click.option(
    "--auth-token",
    envvar="INFERTAP_AUTH_TOKEN",
    default=None,
    help="Clients must present it (X-Infertap-Token: T, or Proxy-Authorization: Bearer T); never recorded. Env INFERTAP_AUTH_TOKEN.",
)
@click.option(
    "--on-capture-error",
    type=click.Choice(["serve", "fail"]),
    default="serve",
    show_default=True,
    help="When the capture can't be written: keep serving (and say so loudly), or refuse traffic with 503.",
)
@click.option("--log-level", default="warning", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
@telemetry_options
def record(
    upstream: str,
    listen: tuple[str, int],
    out: Path | None,
    labels: dict[str, str],
    redact_header: tuple[str, ...],
    redact_query: tuple[str, ...],
    max_body_mb: float,
    max_response_mb: float,
    max_segment_mb: float,
    connect_timeout: float,
    read_timeout: float,
    graceful_timeout: float,
    header_timeout: float,
    max_header_kb: float,
    body_timeout: float,
    body_wait: float,
    model_file: str | None,
    probe_interval: float,
    no_probe: bool,
    no_enrich: bool,
    probe_headers: dict[str, str],
    auth_token: str | None,
    on_capture_error: str,
    log_level: str,
    no_telemetry: bool,
    telemetry_urls: tuple[str, ...],
    telemetry_interval: float,
) -> None:
    """Record every exchange between clients and an engine, as an OpenAI-compatible reverse proxy.

    Point clients at the listen address instead of the engine (e.g. OPENAI_BASE_URL=http://127.0.0.1:8787/v1).
    Ctrl-C or SIGTERM stops it and closes the capture cleanly.
    """
    from .proxy.server import RecordConfig, serve

    host, port = listen
    for option, mb in (
        ("--max-body-mb", max_body_mb),
        ("--max-response-mb", max_response_mb),
        ("--max-segment-mb", max_segment_mb),
    ):
        if not math.isfinite(mb) or mb > 1 << 20:  # before int(): NaN has none; the rest RecordConfig checks
            raise click.ClickException(f"{option}: a size above 0 and finite, at most 1 TiB ({mb} MB)")
    if not math.isfinite(max_header_kb) or max_header_kb > 1 << 20:
        raise click.ClickException(f"--max-header-kb: a size above 0 and finite, at most 1 GiB ({max_header_kb} KB)")
    config = RecordConfig(
        upstream=upstream,
        out=out or _default_out(),
        host=host,
        port=port,
        labels=labels,
        redact_headers=redact_header,
        redact_query_params=redact_query,
        max_body_bytes=int(max_body_mb * 1024 * 1024),
        max_response_bytes=int(max_response_mb * 1024 * 1024),
        connect_timeout=connect_timeout,
        read_timeout=read_timeout or None,
        max_segment_bytes=int(max_segment_mb * 1024 * 1024),
        graceful_timeout=graceful_timeout,
        header_timeout=header_timeout or None,
        max_header_bytes=int(max_header_kb * 1024),
        body_timeout=body_timeout or None,
        body_wait=body_wait,
        log_level=log_level,
        probe=not no_probe,
        enrich=not no_enrich,
        probe_interval=probe_interval,
        model_file=model_file,
        probe_headers=probe_headers,
        auth_token=auth_token,
        on_capture_error=on_capture_error,
        telemetry=not no_telemetry,
        telemetry_urls=telemetry_urls,
        telemetry_interval_s=telemetry_interval,
    )
    sock = _listen(host, port)

    def ready(url: str, writer: Any) -> None:
        from .capture.redact import Redactor

        click.echo(f"infertap record: listening on {url}, forwarding to {Redactor().url(upstream)}, capturing to {writer.path}")

    result = serve(config, sock=sock, on_ready=ready)
    click.echo(
        f"infertap record: {result.exchanges} exchanges in {result.out} ({result.bytes_written} bytes); "
        f"{result.snapshots} engine snapshots, {result.enriched} enriched"
        + (f", {result.enrich_dropped} left unenriched (queue full)" if result.enrich_dropped else "")
    )
    if result.error:
        raise click.ClickException(f"capture write failed, {result.dropped} records lost: {result.error}")


def _listen(host: str, port: int) -> Any:
    """The bound socket, after a warning when it is reachable from other machines."""
    from .proxy.server import bind, is_loopback

    if not is_loopback(host):
        click.secho(
            f"WARNING: listening on {host}, reachable from other machines; captures hold prompts and outputs.",
            fg="red",
            bold=True,
            err=True,
        )
    try:
        sock = bind(host, port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from exc
    return sock


@cli.command()
@click.argument("url")
@click.option("--json", "as_json", is_flag=True, help="Print the snapshot as JSON.")
@click.option(
    "--label", "labels", multiple=True, callback=key_value, metavar="KEY=VALUE", help="Stored with the snapshot; repeatable."
)
@click.option(
    "--model-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The engine's GGUF, for facts it doesn't publish.",
)
@click.option("--timeout", default=10.0, show_default=True, help="Seconds per request to the engine.")
@_probe_header
def probe(
    url: str, as_json: bool, labels: dict[str, str], model_file: str | None, timeout: float, probe_headers: dict[str, str]
) -> None:
    """Detect the engine at URL and print its configuration, each fact with where it came from.

    \b
    infertap probe http://127.0.0.1:8080
    infertap probe http://127.0.0.1:8000 --json --label gpu=H200
    """
    from .engines.probe import probe as probe_engine

    snap = probe_engine(url, labels=labels, model_file=model_file, timeout=timeout, headers=probe_headers)
    if as_json:
        click.echo(json.dumps(snap, indent=2, default=str))
    else:
        _print_snapshot(snap)


def _print_snapshot(snap: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{snap['kind']} at {snap['url']}", title_justify="left", show_lines=False)
    table.add_column("fact", style="bold")
    table.add_column("value")
    table.add_column("source", style="dim")
    for name, f in snap["facts"].items():
        value = f["value"]
        if value is None:
            shown = "unknown"
        elif name in ("chat_template", "chat_template_tool_use"):
            shown = f"{len(value)} chars: {value[:60]!r}…"
        elif isinstance(value, dict):
            shown = ", ".join(f"{k}={v}" for k, v in value.items() if not isinstance(v, (list, dict)))
        else:
            shown = str(value)
        table.add_row(name, shown, f["source"])
    host = snap["host"]
    gpus = host.get("gpus")
    gpu_text = (
        "; ".join(f"{g['name']} (driver {g['driver']}, {g['memory_mib']} MiB)" for g in gpus)
        if gpus
        else f"unknown: {host['gpus_unknown']}"  # nvidia-smi hung or failed: not a machine without one
        if gpus is None and host.get("gpus_unknown")
        else "none found (no nvidia-smi)"
        if gpus is None
        else "none"
    )
    where = "this machine" if snap["host_is_engine_host"] else "this machine (the engine is elsewhere: its host is unknown)"
    table.add_row("host", f"{host['cpu']} ×{host['cpu_count']}, {host['memory_bytes'] / 2**30:.1f} GiB, {host['os']}", where)
    table.add_row("gpus", gpu_text, "nvidia-smi")
    if snap["labels"]:
        table.add_row("labels", ", ".join(f"{k}={v}" for k, v in snap["labels"].items()), "--label")
    table.add_row("fingerprint", snap["fingerprint"], "hash of the facts above")
    console = Console()
    console.print(table, markup=False, highlight=False)
    for note in snap["notes"]:
        console.print(f"note: {note}", markup=False, highlight=False)


@cli.command()
@_capture_arg
@click.option(
    "--engine", "engine_url", required=True, metavar="URL", help="An engine serving the capture's model and configuration."
)
@click.option(
    "--model-file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="The engine's GGUF, for facts it doesn't publish.",
)
@click.option(
    "--label", "labels", multiple=True, callback=key_value, metavar="KEY=VALUE", help="Stored with the snapshot; repeatable."
)
@_probe_header
def enrich(capture: Path, engine_url: str, model_file: str | None, labels: dict[str, str], probe_headers: dict[str, str]) -> None:
    """Add effective prompt tokens and settings to a capture recorded without them.

    Appends a run holding the engine's snapshot and one enrichment record per generation
    exchange; the exchanges themselves are not rewritten.
    """
    from .engines.enrich import enrich_capture

    counts = enrich_capture(capture, engine_url, model_file=model_file, labels=labels, headers=probe_headers)
    click.echo(
        f"enriched {counts['enriched']} of {counts['exchanges']} exchanges in {capture} ({counts['skipped']} not generation requests or not complete)"
    )


@cli.command()
@_capture_arg
@click.option(
    "--type",
    "types",
    multiple=True,
    type=click.Choice([*get_args(RecordType), "dictionary"]),
    help="Only records of this type.",
)
def cat(capture: Path, types: tuple[str, ...]) -> None:
    """Print every record as one JSON object per line.

    Bytes are shown as text when they are valid UTF-8, else as {"base64": "..."}; a number JSON
    has no form for (NaN, an infinity) as null.
    """
    from .capture.jsonable import dumps
    from .capture.reader import CaptureReader

    reader = CaptureReader(capture)
    for record in reader.records():
        if not types or record.get("type") in types:
            click.echo(dumps(record))
    for torn in reader.torn:
        click.secho(f"warning: {torn}", fg="yellow", err=True)


@cli.command()
@click.argument("capture", type=OneWithLeftOut())
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
def info(capture: One, as_json: bool) -> None:
    """Counts, time span, engines seen, paths, status codes, and whether the capture closed cleanly."""
    from .capture.info import summarize
    from .recorders import unsearched_warning

    for left in capture.left_out:
        click.secho(f"warning: {left}", fg="yellow", err=True)
    # ``capture.info`` reads a capture alone and knows no globs: what this one left out is the CLI's to add
    summary = {**summarize(capture.path), "left_out": [x.as_json() for x in capture.left_out]}
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    else:
        _print_info(summary)
    for torn in summary["torn"]:
        click.secho(f"warning: {torn}", fg="yellow", err=True)
    if (unsearched := unsearched_warning(summary["unsearched"])) is not None:
        click.secho(f"warning: {unsearched}", fg="yellow", err=True)


def _print_info(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from .capture.identity import describe as describe_workload
    from .capture.info import no_snapshot_reason, not_imported_text

    console = Console()

    def when(t: float | None) -> str:
        return _dt.datetime.fromtimestamp(t).isoformat(sep=" ", timespec="seconds") if t else "-"

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} ×{v}" for k, v in d.items()) or "-"

    ratio = f" (request and response bodies: {s['body_bytes']:,} bytes)"
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")  # a path or URL folded whole, never cut short
    rows = [
        ("capture", s["path"]),
        ("exchanges", str(s["exchanges"])),
        ("workload", describe_workload(s["workload"])),
        ("records", counts(s["records"])),
        ("segments", f"{s['segments']}, {s['bytes_on_disk']:,} bytes on disk{ratio}"),
        ("runs", f"{s['runs']} ({', '.join(s['recorders'])})"),
        ("time span", f"{when(s['first_wall'])} → {when(s['last_wall'])} ({s['span_s']:.1f} s)"),
        ("upstreams", counts(s["upstreams"])),
        ("telemetry urls", ", ".join(s["telemetry_urls"]) or "-"),
        ("engines", counts(s["engines"]) if s["engines"] else f"no snapshot ({no_snapshot_reason(s['traffic_recorders'])})"),
        ("server header", counts(s["server_headers"])),
        ("models", counts(s["models"])),
        ("paths", counts(s["paths"])),
        ("status codes", counts(s["statuses"])),
        ("endings", counts(s["ends"])),
        ("labels", ", ".join(f"{k}={v}" for k, v in s["labels"].items()) or "-"),
        ("recorder loop lag", "; ".join(_lag(lag) for lag in s["loop_lag"].values()) or "-"),
        (
            "closed cleanly",
            "yes"
            if s["closed_cleanly"]
            else f"no: still being written (its recorder, pid {s['writing']}, runs on this machine)"
            if s.get("writing")
            else "no (the recorder did not shut down cleanly)",
        ),
        ("torn tail or missing records", "yes" if s["torn"] else "no"),
        ("bodies not searched", _unsearched(s["unsearched"])),
    ]
    if "import" in s["recorders"]:  # what of the imported files is in no exchange
        what = not_imported_text(s["not_imported"])
        rows.insert(2, ("not imported", f"{what} (only HTTP requests and responses are imported)" if what else "nothing"))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table, markup=False, highlight=False)


def _unsearched(unsearched: dict[str, int]) -> str:
    """Bodies kept compressed that no credential search read: a credential may be inside."""
    if not unsearched["exchanges"]:
        return "none (every body was searched for credentials)"
    return (
        f"{unsearched['exchanges']} exchanges ({unsearched['request']} requests, {unsearched['response']} responses): "
        "kept compressed as sent, not searched for credentials; check before sharing"
    )


def _lag(lag: dict[str, Any]) -> str:
    """A recorder's event-loop lag: how coarse its timestamps may be."""

    def at_most(v: float | None) -> str:
        return f"<= {v:g} ms" if v is not None else f"> {lag['bounds_ms'][-1]:g} ms"

    return f"p50 {at_most(lag['p50_at_most_ms'])}, p99 {at_most(lag['p99_at_most_ms'])}, max {lag['max_ms']:.2f} ms ({lag['samples']} samples)"


@cli.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Folder for the captures and the report [default: captures/demo-<time>].",
)
@click.option(
    "--engine-a", default=None, metavar="URL", help="Your own engine A instead of the embedded llama-cpp-python server."
)
@click.option("--engine-b", default=None, metavar="URL", help="Your own engine B instead of the embedded llama-server.")
@click.option(
    "--engine-c", default=None, metavar="URL", help="Your own engine C instead of the embedded vLLM (also with --quick)."
)
@click.option("--quick", is_flag=True, help="A shorter workload (no long-context request) and no embedded vLLM.")
@click.option("--keep", is_flag=True, help="Leave the engines running afterwards and print their URLs (Ctrl-C ends them).")
def demo(out: Path | None, engine_a: str | None, engine_b: str | None, engine_c: str | None, quick: bool, keep: bool) -> None:
    """The whole story on the embedded engines: record a workload on A, replay it on B and C, compare.

    A is llama-cpp-python's server and B llama.cpp's own llama-server, on the same SmolLM2 GGUF,
    C vLLM on the same weights converted to float32 (where `make vllm` could build it), each with
    its own defaults. Each pair is compared, configuration first.
    """
    import time

    from .cli_compare import print_comparison
    from .demo import known_answers_lines, pair_summary, run_demo

    out = out or DEFAULT_CAPTURES / f"demo-{_dt.datetime.now():%Y%m%d-%H%M%S}"

    def show(result: dict[str, Any]) -> None:
        for each in result["comparisons"]:
            x, y = each["pair"].split(" vs ")
            click.echo(f"\n===== {each['pair']} (below, A is {x}'s capture and B is {y}'s) =====")
            print_comparison(each["result"])
        click.echo("\nin short:")
        for each in result["comparisons"]:
            click.echo(f"  {each['pair']}: {pair_summary(each['result'])}")
        if result["known_answers"]:
            click.echo("\nknown answers (--extract number against answers.json), each run against A:")
            for line in known_answers_lines(result["known_answers"]):
                click.echo(line)
        click.echo(
            f"\ncaptures: {', '.join(result['captures'])}\nreports:  {', '.join(result['reports'])}\n\nrepeat each step by hand:"
        )
        for command in result["commands"]:
            click.echo(f"  {command}")

    def hold(urls: list[str], result: dict[str, Any]) -> None:
        show(result)
        running = "  ".join(f"{name} {url}" for name, url in zip("ABC", urls, strict=False))
        click.echo(f"\nengines kept running: {running}  (Ctrl-C to stop them)")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass

    try:
        # SIGTERM and SIGHUP end it as Ctrl-C does: the engines it started are stopped on the way out.
        with interrupting():
            result = run_demo(
                out,
                say=click.echo,
                engine_a=engine_a,
                engine_b=engine_b,
                engine_c=engine_c,
                quick=quick,
                keep=hold if keep else None,
            )
    except (KeyboardInterrupt, InfertapError, OSError, RuntimeError) as exc:
        if not interrupted(exc):  # a DuckDB query the signal landed in raises a RuntimeError instead
            raise click.ClickException(f"demo failed: {exc}") from exc
        click.echo(f"\nstopped: the engines it started are stopped, the captures made so far closed in {out}", err=True)
        click.get_current_context().exit(INTERRUPTED)
    if not keep:
        show(result)


def main() -> None:
    cli(prog_name="infertap")


if __name__ == "__main__":
    main()
