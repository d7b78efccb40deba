"""``infertap stats``, ``sql`` and ``export``: each opens the captures, calls one analysis function, prints.

Metric names are printed exactly as docs/metrics.md defines them.
"""

from __future__ import annotations

import csv
import functools
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .analysis.groupings import GROUPINGS
from .analysis.in_no_group import apart_line, no_group_line, not_text_line
from .analysis.stats_energy import figures_line, measured_by, not_measured, notes
from .analysis.stats_energy import fixed as _num  # a figure as stats prints it, the energy line's too
from .capture.jsonable import jsonable
from .errors import InfertapError
from .options import ray_option
from .wording import counted

if TYPE_CHECKING:
    from rich.table import Table

    from .analysis import Analysis, QueryResult

_SQL_START = re.compile(
    r"^\s*(select|with|from|describe|show|summarize|pivot|unpivot|explain|values|table|pragma|copy|create)\b", re.I
)

_captures = click.argument("captures", nargs=-1, required=True, metavar="CAPTURE...")
_cache_dir = click.option(
    "--cache-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where decoded captures are kept [default: $INFERTAP_CACHE or ~/.cache/infertap].",
)


def _warn(message: str) -> None:
    click.secho(f"warning: {message}", fg="yellow", err=True)


@contextmanager
def _opened(captures: tuple[str, ...], cache_dir: Path | None) -> Iterator[Analysis]:
    """The loaded captures, torn tails and repeated ids as warnings, closed on every path."""
    from .analysis import Analysis  # DuckDB and Arrow load here, not for --help

    analysis = Analysis(captures, cache_dir=cache_dir)
    try:
        for torn in analysis.warnings:
            _warn(str(torn))
        yield analysis
    finally:
        analysis.close()


# -- stats ---------------------------------------------------------------------------------------


@click.command()
@_captures
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option(
    "--by",
    "by",
    multiple=True,
    type=click.Choice(list(GROUPINGS)),
    default=("run",),
    show_default=True,
    help="Group exchanges by run, model, path, api, session (an agent's conversation: a table of one row "
    "each) or stream (streamed answers apart from whole bodies, whose ttft is the time to all of it); "
    "repeat to combine (--by run --by model).",
)
@_cache_dir
def stats(captures: tuple[str, ...], as_json: bool, by: tuple[str, ...], cache_dir: Path | None) -> None:
    """Speed of the generation requests in captures: latency percentiles, throughput, concurrency,
    errors, server-measured timings and the workload profile. Definitions: docs/metrics.md.

    \b
    infertap stats captures/run1
    infertap stats 'captures/shard-*' --by model --json
    """
    with _opened(captures, cache_dir) as analysis:
        from .analysis import speed_stats

        result = speed_stats(analysis, by)
    for warning in result["warnings"]:
        _warn(warning)
    if as_json:
        click.echo(json.dumps(jsonable(result), indent=2, default=str, allow_nan=False))
    else:
        _print_stats(result)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _mixed_sources(by_source: dict[str, Any]) -> str:
    """How the output-token sources present count differently, each said only where it is present."""
    said = []
    if "usage" in by_source:
        said.append("an engine's usage may count the end-of-sequence token (llama-server's does)")
    if "tokenize" in by_source:
        said.append("a re-tokenized count does not" if "usage" in by_source else "a re-tokenized count counts the text's tokens")
    if "chunks" in by_source:
        said.append(
            "a count of token-bearing events (chunks) is an approximation: an event usually carries one token, not always"
        )
    return ", ".join(said)


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} ×{v}" for k, v in d.items()) or "-"


def _group_title(key: dict[str, Any]) -> str:
    """The group's key as plain text: model names, paths and sessions are recorded text, never rich
    markup (``llama-3-8b[q4_k_m]`` would lose its quantization), so print it with markup off."""
    parts = []
    for name, value in key.items():
        if name == "run":
            parts.append(f"run {str(value)[:12]} ({key.get('recorder') or '?'}, {key.get('capture')})")
        elif name in GROUPINGS:
            parts.append(f"{name} {value}")
    return ", ".join(parts)


def _print_stats(result: dict[str, Any]) -> None:
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 200)
    _print_engines(result["engines"])
    for capture in result["captures"]:
        if capture.get("derivation"):  # a replay's speeds compare only beside what it changed of its source
            _out(f"replay {capture['capture']}: {capture['derivation']['words']}")
    if said := not_text_line(result.get("not_text") or {}, result.get("embeddings_requests") or 0):
        _out(said)
    if not result["groups"]:
        _out(no_group_line(result["in_no_group"]))
        return
    if "session" in result["by"]:
        groups = result["groups"]
        longest = sorted(groups, key=lambda g: g["session"]["makespan_s"] or 0, reverse=True)[:_SESSIONS_SHOWN]
        shown = {id(g) for g in longest}
        console.print(_sessions_table([g for g in groups if id(g) in shown]), markup=False)
        if len(groups) > len(longest):
            _out(f"  the {len(longest)} longest of {counted(len(groups), 'session')}; --json for every one")
        if said := apart_line(result["in_no_group"], "session"):
            _out(said)
        return
    for group in result["groups"]:
        console.print(_stats_table(group), markup=False)
        _print_throughput(group)
        _print_output(group)
        _print_server_timings(group["server_timings"])
        _print_energy(
            group["energy"], group["engine_state"], _partly(group, "energy.joules_per_output_token"), group["telemetry"]
        )
        if group["telemetry_urls"]:  # where the exporters' figures above came from
            _out(f"  telemetry scraped (--telemetry-url): {', '.join(group['telemetry_urls'])}")
        for why in group["telemetry_unread"]:  # what the recorder could not sample, and why
            _out(f"  telemetry unread: {why}")
        _print_workload(group["workload"], functools.partial(_partly, group))
    if said := apart_line(result["in_no_group"]):
        _out(said)


#: Sessions printed by `stats --by session` (the longest, in order of their first request).
_SESSIONS_SHOWN = 40


def _sessions_table(groups: list[dict[str, Any]]) -> Table:
    """One row a session: its makespan split into time in the engine and the agent's own time."""
    from rich.table import Table

    table = Table(title="sessions (makespan: first send to last end; think: the agent's time between turns)")
    for name in ("session", "turns", "makespan s", "engine s", "think s", "ttft p50 ms", "e2e p50 ms", "Wh", "cached by turn"):
        table.add_column(name, justify="left" if name in ("session", "cached by turn") else "right")
    for g in groups:
        s, m = g["session"], g["metrics"]
        shares = " ".join("-" if v is None else f"{v:.0%}" for v in s["cached_share_by_turn"])
        table.add_row(
            _group_title(g["key"]),
            str(s["turns"]),
            _num(s["makespan_s"], 2),
            _num(s["engine_s"], 2),
            _num(s["think_s"], 2),
            _num(m["ttft"]["p50"], 1),
            _num(m["e2e"]["p50"], 1),
            _num(s["watt_hours"], 4),
            shares,
        )
    return table


def _out(line: str) -> None:
    """A plain line: never wrapped at the terminal's width, unlike rich's."""
    click.echo(line)


def _print_engines(engines: list[dict[str, Any]]) -> None:
    """The engines first: a number without its configuration is gossip."""
    for engine in engines:
        dtype = f", weights {engine['dtype']}" if engine.get("dtype") else ""
        _out(
            f"engine: {engine['kind'] or 'unknown'} {engine['version'] or '(version unknown)'} at {engine['url'] or '?'} "
            f"(fingerprint {engine['fingerprint']}{dtype})"
        )


def _stats_table(group: dict[str, Any]) -> Table:
    """One group's latency distributions, times in ms and token counts in tokens."""
    from rich.table import Table
    from rich.text import Text

    # A Text: a title is parsed as markup even where the table is printed with markup off.
    table = Table(title=Text(_group_title(group["key"])), title_justify="left")
    for column in ("metric", "unit", "n", "p50", "p90", "p99", "mean"):
        table.add_column(column, justify="left" if column in ("metric", "unit") else "right")
    for name, dist in group["metrics"].items():
        unit = "tokens" if name == "output_tokens" else "ms"
        digits = 1 if name == "output_tokens" else 2
        table.add_row(name, unit, str(dist["n"]), *(_num(dist[k], digits) for k in ("p50", "p90", "p99", "mean")))
    return table


def _print_throughput(group: dict[str, Any]) -> None:
    """How many requests, how many failed, and the rates and concurrency they ran at."""
    tp, cc = group["throughput"], group["concurrency"]
    _out(
        f"  requests {group['requests']}, ok {group['ok']}, error_rate {_pct(group['error_rate'])}, "
        + _over(group)
        + (f"; {group['refused']} more refused by infertap, never sent (counted in none of these)" if group["refused"] else "")
    )
    _out(
        f"  requests_per_s {_num(tp['requests_per_s'], 2)}, "
        f"output_tokens_per_s {_num(tp['output_tokens_per_s'], 1)}{_partly(group, 'throughput.output_tokens_per_s')}, "
        f"concurrency_mean {_num(cc['mean'], 2)}, concurrency_max {_num(cc['max'])}"
    )


def _partly(group: dict[str, Any], figure: str) -> str:
    """Beside a figure over the answers whose output tokens were counted only: what it then is."""
    how = (group.get("partly_counted") or {}).get("figures", {}).get(figure)
    return f" ({how})" if how else ""


def _over(group: dict[str, Any]) -> str:
    """The time the rates are over: a group of several runs is timed over their active time only."""
    if group["runs"] < 2:
        return f"over {_num(group['span_s'], 2)} s"
    return (
        f"over {_num(group['active_s'], 2)} s active in {group['runs']} runs ({_num(group['span_s'], 2)} s from the "
        "first send to the last end; rates and concurrency_mean leave out the time between runs)"
    )


def _print_output(group: dict[str, Any]) -> None:
    """Where the output token counts came from (sources count differently), and how the answers ended."""
    _out(
        f"  output_tokens source: {_counts(group['output_tokens_source'])}; "
        f"tokens_per_chunk {_num(group['tokens_per_chunk'], 2)} (streamed)"
    )
    if group["throughput"]["output_tokens_source"] == "mixed":
        _out(
            "  note: output_tokens adds counts of different sources ("
            # tokens, not answers: the line above counts answers as ``usage ×6``
            + ", ".join(f"{k} {v} tokens" for k, v in group["workload"]["output_tokens"]["by_source"].items())
            + "): "
            + _mixed_sources(group["workload"]["output_tokens"]["by_source"])
        )
    if group.get("partly_counted"):  # the rule claim's card gives (analysis/partly_counted.py)
        _out(f"  note: {group['partly_counted']['note']}")
    from .analysis.stats import ttft_mix

    if mixed := ttft_mix(group["ttft_kinds"]["streamed"], group["ttft_kinds"]["whole_body"]):
        _out(f"  note: {mixed}; --by stream splits them")
    tools = group["tool_calls"]
    _out(
        f"  finish_reason: {_counts(group['finish_reasons'])}; tool calls {tools['calls']} in {counted(tools['exchanges'], 'exchange')}"
        + (
            f"; unreadable {group['unreadable']} (no API adapter understood the body: not counted as answers)"
            if group["unreadable"]
            else ""
        )
        + (
            f"; unfinished {group['unfinished']} (a 200 stream that ended with no finish reason, by [DONE] or the body's end: the engine cut "
            "the answer, as llama-cpp-python's interrupt_requests does when the next request waits: counted as errors)"
            if group.get("unfinished")
            else ""
        )
        + (
            f"; error body unread {group['error_body_unread']} (an error status whose body is no API's, as a 404 "
            "for a path the engine doesn't serve, or bytes with no response head: counted as errors)"
            if group.get("error_body_unread")
            else ""
        )
        + (
            f"; not in the file {group['not_in_file']} (imported without the answer's body: no answers, and no errors where the status was 2xx)"
            if group.get("not_in_file")
            else ""
        )
        + (
            f"; too large {group['too_large']} (the body decodes past what analysis reads of one answer: "
            "unknown, no answers, and no errors where the status was 2xx)"
            if group.get("too_large")
            else ""
        )
        + (
            f"; response not kept {group['response_not_kept']} (over the recorder's response limit, only its head "
            "kept: unknown, no answers, and no errors where the status was 2xx"
            + (
                f"; {group['response_not_kept_counted']} counted in the output tokens by the usage in their kept tail)"
                if group.get("response_not_kept_counted")
                else ")"
            )
            if group.get("response_not_kept")
            else ""
        )
        + (
            f"; request body unknown {group['request_body_unknown']} (sent with a body that was not kept or came cut short: "
            "whether each asked for a generation is unknown, so none is in any figure, not even requests)"
            if group.get("request_body_unknown")
            else ""
        )
    )
    held = group["client_wait"]
    if held["exchanges"]:
        its = "its" if held["exchanges"] == 1 else "their"
        _out(
            f"  note: {counted(held['exchanges'], 'exchange')} waited for {its} client to take the body (up to {_num(held['max_ms'], 1)} ms): "
            f"the proxy reads the next chunk only once the last is handed on, so {its} token times include the client's slowness"
        )


def _print_server_timings(st: dict[str, Any]) -> None:
    """The engine's own timings, apart from the client-side ones: they exclude the network and queueing.
    The source names itself server-measured ("Ollama durations (server-measured)"); one that carried
    none of these figures (an Ollama done line of ``eval_count`` alone) says so. Then Ollama's model
    load, and the engine's token counts where they differ from infertap's (analysis/server_figures.py)."""
    shown = ", ".join(
        f"server_{k} p50 {_num(st[k]['p50'], 1)} mean {_num(st[k]['mean'], 1)}"
        for k in ("prompt_ms", "decode_ms", "cached_tokens", "total_ms")
        if st[k]["n"]
    )
    if not st["source"]:
        _out("  server-measured: none reported by the engine")
    elif not shown:
        _out(f"  {st['source']}: no prompt, decode or total time or cached tokens among them")
    else:
        _out(f"  {st['source']}: {shown}")
    if load := st.get("load"):
        _print_model_load(load)
    for name, differ in (st.get("counts_differ") or {}).items():
        if differ["requests"]:
            _out(
                f"  server counts differ from infertap's: {name} tokens of {counted(differ['requests'], 'request')} "
                f"(the engine's {differ['server']} in all, infertap's {differ['infertap']}; the figures use infertap's)"
            )


def _print_model_load(load: dict[str, Any]) -> None:
    """Ollama's model load, said apart from the speed figures: a cold load is not the engine's speed."""
    reported = (
        f"{counted(load['requests'], 'answer')} reported a load time, {_duration(load['total_ms'])} in all, "
        f"longest {_duration(load['max_ms'])}"
    )
    if not load["waited"]:
        _out(f"  model load ({load['source']}, server-measured): no request waited for a load ({reported})")
        return
    _out(
        f"  model load ({load['source']}, server-measured): {counted(load['waited'], 'request')} waited for a load, "
        f"{_duration(load['waited_ms'])} in all ({reported})"
    )
    in_ttft = load["in_ttft"]
    if in_ttft["requests"]:
        ids = in_ttft["exchange_ids"][:_IDS_SHOWN]
        more = in_ttft["requests"] - len(ids)
        named = ", ".join(ids) + (f" and {more} more (--json lists {len(in_ttft['exchange_ids'])})" if more else "")
        _out(
            f"  note: the ttft and e2e above include a model load for {counted(in_ttft['requests'], 'request')} ({named}): "
            "each load took at least half its request's ttft: Ollama getting the model ready, not the engine's speed"
        )


#: Exchange ids printed in the model-load note (``--json`` lists more).
_IDS_SHOWN = 5


def _duration(ms: float | None) -> str:
    from infertap.analysis.server_figures import duration_text

    return duration_text(ms)


def _print_energy(
    energy: dict[str, Any] | None, state: dict[str, Any] | None, per_token: str = "", sampled: dict[str, Any] | None = None
) -> None:
    """Energy over the group's span (attributed by time) and the engine's state, when telemetry had
    them; ``per_token``: what J per output token is over, where some answers' tokens are unknown;
    ``sampled``: the group's ``telemetry`` (which runs were recorded with --no-telemetry)."""
    why = not_measured(energy, sampled)
    if why is not None or energy is None:
        _out(f"  energy: {why}")
    else:
        _out(f"  energy ({measured_by(energy)}): {figures_line(energy, per_token)}")
        for note in notes(energy, sampled):  # interpolated; the runs that did not sample (the figure is over the others)
            _out(f"  energy: {note}")
    if state is not None:
        _out(
            f"  engine: kv_cache_usage_max {_num(state['kv_cache_usage_max'], 3)}, "
            f"requests_waiting_max {_num(state['requests_waiting_max'])}, preemptions {_num(state['preemptions'])}, "
            f"prefix_cache_hit_rate {_num(state['prefix_cache_hit_rate'], 3)}"
        )
        for name, why in state.get("unknown", {}).items():
            _out(f"  engine: {name} unknown: {why}")


def _print_workload(w: dict[str, Any], partly: Callable[[str], str] = lambda figure: "") -> None:
    """The workload profile: two runs' speeds compare only if what they were asked compares;
    ``partly``: what a figure (``workload.output_tokens.total``) is, where some of its counts are unknown."""
    if w.get("identity"):
        ident = w["identity"]  # analysis/workload_identity.py
        _out(
            f"  workload_identity: {ident['short']} ({counted(ident['requests'], 'request')}), "
            f"schedule {ident['schedule_short']} (send times at {ident['resolution_ms']:g} ms)"
        )
    pt, ot, ct = w["prompt_tokens"], w["output_tokens"], w["cached_tokens"]
    _out(
        f"  workload: prompt_tokens {_num(pt['total'])}{partly('workload.prompt_tokens.total')} (known for {pt['known']}, "
        f"{_counts(pt['source'])}), output_tokens {_num(ot['total'])}{partly('workload.output_tokens.total')}, "
        f"output_per_prompt {_num(w['output_per_prompt'], 3)}{partly('workload.output_per_prompt')}, "
        f"cached_share {_pct(ct['share'])} (known for {ct['known']}, {_counts(ct['source'])})"
    )
    for reuse in w["prefix_reuse"]:
        _out(
            f"  prefix_reuse ({reuse['unit']}): {_pct(reuse['share'])} ({_num(reuse['shared'])} of {_num(reuse['length'])} "
            f"{reuse['unit']} shared with an earlier request's prefix; mean {_num(reuse['mean'], 1)} per request)"
        )


# -- sql -----------------------------------------------------------------------------------------


@click.command()
@click.argument("args", nargs=-1, required=True, metavar="[QUERY] CAPTURE...")
@click.option(
    "-q",
    "--query",
    "queries",
    multiple=True,
    help="The query (else the first argument, when it starts with SELECT, WITH, ...); repeated: each in turn.",
)
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV: one table, so one statement.")
@click.option("--json", "as_json", is_flag=True, help="Print each result as a JSON array of objects, on a line of its own.")
@_cache_dir
def sql(args: tuple[str, ...], queries: tuple[str, ...], as_csv: bool, as_json: bool, cache_dir: Path | None) -> None:
    """Run SQL (DuckDB) over captures; with no query, read queries from stdin, each ended by ';'.

    Several statements (';'-separated, or several -q) answer each in turn: as tables, each under its own header; with --json, one
    array a line (JSON Lines); --csv, which holds one table, refuses them.

    The first (or last) argument is the query when it starts with a SQL keyword (SELECT, WITH, FROM,
    DESCRIBE, SHOW, SUMMARIZE, ...) and is not a path. Views: captures, runs, exchanges, requests, chunks,
    events, engines, enrichments, prefixes, turns, telemetry, metrics, itl, token_chunks, enrichment_latest.

    \b
    infertap sql "SELECT model, median(ttft_ns)/1e6 AS ttft_ms FROM metrics GROUP BY model" captures/run1
    infertap sql captures/run1 -q "DESCRIBE metrics" --csv
    echo "SELECT count(*) FROM chunks;" | infertap sql captures/run1
    """
    if as_csv and as_json:
        raise click.UsageError("choose one of --csv and --json")
    query = queries[0] if queries else None
    if query is None and _SQL_START.match(args[0]) and not _is_path(args[0]):
        query, args = args[0], args[1:]
    elif query is None and len(args) > 1 and _SQL_START.match(args[-1]) and not _is_path(args[-1]):
        query, args = args[-1], args[:-1]  # the query after the captures: as unmistakable
    if not args:
        raise click.UsageError("give at least one CAPTURE")
    if query is None and (mistaken := next((a for a in args if any(c.isspace() for c in a) and not _names_any(a)), None)):
        # A query that begins with no keyword sql knows ("SELEC 1", "(SELECT ...) UNION ...") read as a capture.
        raise click.UsageError(f"{mistaken!r} is no capture: if it is a query, give it with -q")
    fmt = "csv" if as_csv else "json" if as_json else "table"
    from .analysis.store import split_statements

    # What is refused (several statements to one CSV, a query that doesn't parse) is refused here,
    # before any capture is decoded: a decode of large captures ended in a refusal it didn't need.
    statements: list[str] | None = None
    script: list[str] | None = None
    if query is not None:
        # Every -q, in order, each parsed alone (a -- comment ends with its own text): click's
        # single -q kept only the last of several, dropping the others unsaid.
        statements = [statement for text in queries or (query,) for statement in split_statements(text)]
        if (refused := _several_tables(len(statements), fmt)) is not None:
            raise click.UsageError(refused)
    elif fmt == "csv" and not sys.stdin.isatty():  # a script of several queries into one CSV: refused before any runs
        script = [t for t in _statements(sys.stdin, False) if t.strip().rstrip(";").strip()]
        if (refused := _several_tables(_count(script), fmt)) is not None:
            raise click.UsageError(refused)
    with _opened(args, cache_dir) as analysis:
        if statements is not None:
            for statement in statements:
                _print_result(analysis.query(statement), fmt)
        else:
            _repl(analysis, fmt, script)


def _names_any(arg: str) -> bool:
    """Whether ``arg`` is a path, or a pattern matching one."""
    import glob

    return _is_path(arg) or (glob.has_magic(arg) and bool(glob.glob(arg)))


def _is_path(arg: str) -> bool:
    """Whether ``arg`` names an existing path; one the OS can't even look up (a long query) is not one."""
    try:
        return Path(arg).exists()
    except OSError:  # ENAMETOOLONG: a name over 255 bytes
        return False


def _statements(stream: Any, interactive: bool) -> Iterator[str]:
    """Statements read from ``stream``, each ended by ';' at the end of a line (or by EOF)."""
    pending: list[str] = []
    while True:
        if interactive:
            click.echo("...> " if pending else "sql> ", nl=False, err=True)
        line = stream.readline()
        if not line:
            break
        pending.append(line)
        if line.rstrip().endswith(";"):
            yield "".join(pending)
            pending = []
    if "".join(pending).strip():
        yield "".join(pending)


def _several_tables(statements: int, fmt: str) -> str | None:
    """Why ``statements`` can't be printed in ``fmt``: CSV has no way to say where one table ends
    and the next begins (its header would read as a row), so it holds one; None when they can."""
    if fmt != "csv" or statements <= 1:
        return None
    return f"--csv prints one table, and {statements} statements were given: run one a command, or use --json (one result a line)"


def _count(texts: list[str]) -> int:
    """How many statements ``texts`` hold; one that doesn't parse counts as one (its error comes when it runs)."""
    from .analysis.store import split_statements

    n = 0
    for text in texts:
        try:
            n += len(split_statements(text))
        except InfertapError:
            n += 1
    return n


def _repl(analysis: Analysis, fmt: str, script: list[str] | None) -> None:
    """Queries read from stdin (``script``: already read, where a CSV's were counted before the decode)."""
    stdin = sys.stdin
    interactive = stdin.isatty()
    if interactive:
        from .analysis import VIEWS

        click.echo(f"infertap sql: views {', '.join(VIEWS)}; end each query with ';', Ctrl-D to quit", err=True)
    texts: Iterable[str] = script if script is not None else _statements(stdin, interactive)
    failed = 0
    for text in texts:
        if not text.strip().rstrip(";").strip():
            continue
        try:
            statements = analysis.statements(text)  # several on one line: each answers
            if (refused := _several_tables(len(statements), fmt)) is not None:  # typed at the prompt: that line
                raise click.UsageError(refused)
            for statement in statements:
                _print_result(analysis.query(statement), fmt)
        except (InfertapError, click.UsageError) as exc:  # one bad query doesn't end the session
            failed += 1
            click.secho(f"error: {exc}", fg="red", err=True)
    if failed and not interactive:  # a script of queries that failed fails, as psql -v ON_ERROR_STOP would say
        raise click.ClickException(f"{failed} quer{'y' if failed == 1 else 'ies'} failed")


def _print_result(result: QueryResult, fmt: str) -> None:
    if fmt == "json":
        # jsonable: `select 1/0` is an infinity, which JSON has no form for: null. One line a result,
        # so that several statements' results are told apart by any JSON Lines reader.
        click.echo(json.dumps(jsonable(result.records()), default=str, ensure_ascii=False, allow_nan=False))
    elif fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows([_cell(v) for v in row] for row in result.rows)
    else:
        from rich.console import Console
        from rich.table import Table

        table = Table()
        for name, dtype in zip(result.columns, result.types, strict=True):
            table.add_column(name, justify="right" if dtype.split("(")[0] in _NUMERIC else "left")
        for row in result.rows:
            table.add_row(*(_cell(v) for v in row))
        # Into a pipe or file, nothing is cut to fit a terminal's width.
        console = Console(width=None if sys.stdout.isatty() else 1_000_000)
        console.print(table, markup=False, highlight=False)
        click.echo(f"{len(result.rows)} row(s)")


_NUMERIC = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UBIGINT", "UINTEGER", "FLOAT", "DOUBLE", "DECIMAL"}


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (bytes, dict, list)):
        value = jsonable(value)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


# -- export --------------------------------------------------------------------------------------


@click.command()
@_captures
@click.option(
    "--parquet",
    "folder",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder to write the tables into (created if needed).",
)
@click.option(
    "--partition-by",
    type=click.Choice(["recorder", "run", "none"]),
    default="recorder",
    show_default=True,
    help="Hive-style partitions <table>/recorder_id=.../ (or run_id=...); none: one <table>.parquet each.",
)
@ray_option("Decode and write the captures, a task each,")
@_cache_dir
def export(captures: tuple[str, ...], folder: Path, partition_by: str, ray_address: str | None, cache_dir: Path | None) -> None:
    """Export the decoded tables and per-exchange metrics of captures as Parquet, for any SQL engine.

    Each row sits in its recorder's partition (one per proxy process or replay shard), so the
    shards of a capture stay apart and a reader can prune them; the schema is in docs/analysis.md.
    With --ray, a Ray cluster's workers decode and write them; every node must see the captures and
    the folder at the same paths (docs/scale.md).

    \b
    infertap export 'captures/shard-*' --parquet out/
    infertap export /shared/captures/ --parquet /shared/warehouse/ --ray ray://head:10001
    duckdb -c "SELECT recorder_id, count(*) FROM 'out/metrics/*/*.parquet' GROUP BY ALL"
    """
    key = {"recorder": "recorder_id", "run": "run_id", "none": None}[partition_by]
    if ray_address is None:
        from .analysis.store import check_export_folder

        check_export_folder(folder)  # a folder the export may not write into: refused before decoding
        from .analysis.stats import capture_info, live_warnings

        with _opened(captures, cache_dir) as analysis:
            counts = analysis.export_parquet(folder, partition_by=key)
            # A live capture's export is a snapshot: said, as stats says it, or the warehouse holds it unmarked.
            for warning in live_warnings(capture_info(analysis), of="the tables exported"):
                _warn(warning)
        _print_export(folder, counts)
        return
    if key is None:
        raise click.UsageError("--ray writes partitions; --partition-by none (one file a table) is written by one process")
    from .analysis import MANIFEST, export_on_ray

    manifest = export_on_ray(captures, folder, ray=ray_address, partition_by=key, cache_dir=cache_dir)
    for torn in manifest["warnings"]:
        _warn(torn)
    _print_export(folder, manifest["tables"])
    hosts = ", ".join(f"{host} ×{n}" for host, n in manifest["hosts"].items())
    click.echo(
        f"  on Ray: {len(manifest['captures'])} capture(s) by workers on {hosts}, {manifest['seconds']:.1f} s; "
        f"manifest {folder / MANIFEST}"
    )


def _print_export(folder: Path, counts: dict[str, int]) -> None:
    click.echo(f"wrote {len(counts)} tables to {folder}: " + ", ".join(f"{name} ({n} rows)" for name, n in counts.items()))


def register(cli: click.Group) -> None:
    """Add the analysis commands to the ``infertap`` group."""
    for command in (stats, sql, export):
        cli.add_command(command)
