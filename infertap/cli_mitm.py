"""``infertap mitm`` and ``infertap import``: recording clients that can't be re-pointed."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click

from .options import host_port, key_value, note_if_appending, redact_options, telemetry_options


@click.command()
@click.option("--listen", default="127.0.0.1:8788", show_default=True, callback=host_port, help="HOST:PORT to listen on.")
@click.option(
    "--mode",
    default="regular",
    show_default=True,
    help="mitmproxy mode: regular (an HTTP(S) proxy), reverse:URL, upstream:URL, ...",
)
@click.option(
    "--match",
    multiple=True,
    metavar="PATTERN",
    help="Host or path pattern to record (fnmatch; with '/' it matches paths). Default: the LLM API paths infertap reads (OpenAI-compatible, Anthropic, Ollama, llama.cpp, Bedrock, Vertex AI) on any host.",
)
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Capture directory [default: captures/mitm-<time>].")
@redact_options
@click.option(
    "--label", "labels", multiple=True, callback=key_value, metavar="KEY=VALUE", help="Stored in the capture header; repeatable."
)
@click.option(
    "--set", "set_options", multiple=True, metavar="NAME=VALUE", help="Any mitmproxy option, e.g. ssl_insecure=true; repeatable."
)
@click.option("--confdir", default=None, help="mitmproxy's configuration folder, where its CA lives [default: ~/.mitmproxy].")
@telemetry_options
def mitm(
    listen: tuple[str, int],
    mode: str,
    match: tuple[str, ...],
    out: Path | None,
    redact_header: tuple[str, ...],
    redact_query: tuple[str, ...],
    labels: dict[str, str],
    set_options: tuple[str, ...],
    confdir: str | None,
    no_telemetry: bool,
    telemetry_urls: tuple[str, ...],
    telemetry_interval: float,
) -> None:
    """Record LLM API traffic through mitmproxy, for clients with no base-URL setting or on HTTPS.

    \b
    infertap mitm --out captures/agent
    HTTPS_PROXY=http://127.0.0.1:8788 SSL_CERT_FILE=~/.mitmproxy/mitmproxy-ca-cert.pem my-agent ...
    infertap mitm --mode reverse:http://127.0.0.1:8080 --listen 127.0.0.1:8789
    """
    from .capture.hostfacts import is_loopback
    from .mitm.run import MitmConfig, run_mitm

    label_map = labels
    host, port = listen
    if not is_loopback(host):
        click.secho(f"WARNING: listening on {host}, reachable from other machines.", fg="red", bold=True, err=True)
    config = MitmConfig(
        out=out or Path("captures") / f"mitm-{_dt.datetime.now():%Y%m%d-%H%M%S}",
        host=host,
        port=port,
        mode=mode,
        match=match,
        redact_headers=redact_header,
        redact_query=redact_query,
        labels=label_map,
        set_options=set_options,
        confdir=confdir,
        telemetry=not no_telemetry,
        telemetry_urls=telemetry_urls,
        telemetry_interval_s=telemetry_interval,
    )

    def ready(addrs: list[str], capture: str, ca: Path) -> None:
        click.echo(f"infertap mitm: listening on {', '.join(addrs) or f'{host}:{port}'} ({mode} mode), capturing to {capture}")
        click.echo(f"infertap mitm: CA certificate clients must trust: {ca}")
        # A reverse proxy is a base URL, not a proxy: HTTPS_PROXY pointed at it sends CONNECTs it can't serve.
        if mode.startswith("reverse:"):
            click.echo(f"  e.g. OPENAI_BASE_URL=http://{host}:{port}/v1 ANTHROPIC_BASE_URL=http://{host}:{port} (its base URL)")
        elif mode == "regular" or mode.startswith(("regular@", "upstream:")):
            click.echo(
                f"  e.g. HTTPS_PROXY=http://{host}:{port} SSL_CERT_FILE={ca} REQUESTS_CA_BUNDLE={ca} NODE_EXTRA_CA_CERTS={ca}",
            )

    run_mitm(config, on_ready=ready)


@click.command("import")
@click.argument("source", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Capture directory [default: captures/import-<time>].")
@click.option("--all-paths", is_flag=True, help="Keep every request, not only LLM API paths.")
@redact_options
def import_(
    source: Path, out: Path | None, all_paths: bool, redact_header: tuple[str, ...], redact_query: tuple[str, ...]
) -> None:
    """Convert a mitmproxy flow file or a HAR file holding LLM API traffic into a capture.

    Chunk times are missing from such files: each response becomes one chunk, and the capture is
    marked as imported.
    """
    from .capture.info import not_imported_text
    from .mitm.importer import import_file

    out = out or Path("captures") / f"import-{_dt.datetime.now():%Y%m%d-%H%M%S}"
    note_if_appending("import", out)
    counts = import_file(source, out, all_paths=all_paths, redact_headers=redact_header, redact_query=redact_query)
    click.echo(
        f"imported {counts['kept']} exchanges into {out} ({counts['skipped']} requests to other paths skipped; --all-paths keeps them)"
    )
    if counts["bodies_not_in_file"]:
        click.echo(
            f"warning: {counts['bodies_not_in_file']} exchanges sent a body that is not in the file (saved without "
            "content, or cut short?): kept as the file holds it and marked body_not_in_file",
            err=True,
        )
    if counts["not_imported"]:
        what = not_imported_text(counts["not_imported"])
        ws = (
            f"; {counts['websockets']} WebSockets kept as their upgrade, marked websocket_messages"
            if counts["websockets"]
            else ""
        )
        click.echo(f"warning: not imported: {what} (only HTTP requests and responses are){ws}", err=True)
    if counts["unreadable"] and counts["kind"] == "mitmproxy":
        click.echo(f"warning: {source}: {counts['first_unreadable']}; the flows before it were imported", err=True)
    elif counts["unreadable"]:
        click.echo(
            f"{counts['unreadable']} HAR entries could not be read as exchanges and are not in the capture "
            f"(first: {counts['first_unreadable']})",
            err=True,
        )
        if not counts["kept"] and not counts["skipped"]:  # nothing came of the file: a failure, not an empty import
            raise click.ClickException(f"{source}: none of its {counts['unreadable']} entries could be imported")


def register(cli: click.Group) -> None:
    cli.add_command(mitm)
    cli.add_command(import_)
