"""Every ``infertap <command> ...`` the docs (README.md, docs/*.md) give, in a shell block or in
running text, names a command that exists and only options that command takes: an option renamed
or dropped in the code, or one the docs made up, fails here."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from infertap.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL_END = {"|", "&&", ";", ">", ">>", "<"}


def command_lines() -> Iterator[tuple[str, str]]:
    """Each ``infertap ...`` command line of the docs (a ``\\`` continuation joined), where it is."""
    for doc in DOCS:
        fenced, held = False, ""
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                fenced, held = not fenced, ""
                continue
            if not fenced:
                for span in re.findall(r"`(infertap [^`]+)`", line):
                    yield f"{doc.name}:{n}", span
                continue
            text = (held + " " + line.strip()) if held else line.strip()
            if text.endswith("\\"):
                held = text[:-1]
                continue
            held = ""
            if text.startswith("infertap "):
                yield f"{doc.name}:{n}", text


def options(command: click.Command) -> set[str]:
    names = {"--help", "-h"}
    for param in command.params:
        names.update(param.opts, param.secondary_opts)
    return names


def flags(line: str) -> tuple[str, list[str]]:
    """The command a line names and the options it gives it (``[--json | --markdown]`` read as both)."""
    words = shlex.split(line.replace("[", " ").replace("]", " "), comments=True)
    taken = []
    for word in words[2:]:
        if word in SHELL_END:
            break
        if word.startswith("-") and word != "-" and not re.fullmatch(r"-\d[\d.]*", word):
            taken.append(word.split("=", 1)[0])
    return words[1], taken


LINES = list(command_lines())


def _command(name: str) -> click.Command | None:
    """A command as the CLI finds it (a command module is imported on first use: infertap/cli.py)."""
    return cli.get_command(click.Context(cli), name)


def test_the_docs_give_command_lines() -> None:
    assert len(LINES) > 50  # the extraction still finds them


@pytest.mark.parametrize(("where", "line"), LINES, ids=[where for where, _ in LINES])
def test_a_documented_command_line_names_what_infertap_takes(where: str, line: str) -> None:
    name, given = flags(line)
    if name.startswith("-"):  # infertap --version, --help
        assert name in options(cli), line
        return
    command = _command(name)
    assert command is not None, f"{where}: no command {name!r}: {line}"
    unknown = [flag for flag in given if flag not in options(command)]
    assert not unknown, f"{where}: `infertap {name}` has no {unknown}: {line}"


def test_a_misnamed_option_is_caught() -> None:
    name, given = flags("infertap stats captures/run1 --by model --jsn")
    assert name == "stats" and [f for f in given if f not in options(_command(name))] == ["--jsn"]
    name, given = flags("infertap claim RUN [--json | --markdown] [--strict]")
    assert [f for f in given if f not in options(_command(name))] == []


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    from click.testing import CliRunner

    done = CliRunner().invoke(cli, ["--version"])
    assert done.exit_code == 0, done.output
    assert done.output == f"infertap, version {version('infertap')}\n"
    assert done.output != "infertap, version 0.0.0+unknown\n"
