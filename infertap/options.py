"""Click callbacks shared by the commands."""

from __future__ import annotations

import click


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
    if not sep or not port.isdigit():
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)
