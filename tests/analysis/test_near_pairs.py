"""Two runs whose requests pair nothing only because of what the identical-request rule adds to the
bytes (the query, the headers that change what a request asks) were refused as "no exchange of B
matches one of A", leaving the user to diff the captures. compare now says which kept them apart,
with the first such pair's difference, and the same exit status; runs of other requests keep the old words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture

BODY = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
BASE = [["content-type", "application/json"], ["x-api-key", "[REDACTED]"], ["anthropic-version", "2023-06-01"]]
BETA = ["anthropic-beta", "context-management-2025-06-27"]


def _capture(path: Path, headers: list[list[str]] = BASE, query: str = "", body: dict[str, Any] = BODY) -> str:
    write_capture(path, [{"path": "/v1/messages", "body": body, "headers": headers, "query": query}])
    return str(path)


def _refusal(*args: str) -> tuple[int, str]:
    run = CliRunner().invoke(cli, ["compare", *args])
    return run.exit_code, " ".join(run.output.split())


def test_a_refusal_says_what_kept_requests_of_one_body_apart(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    plain = _capture(tmp_path / "plain")
    beta = _capture(tmp_path / "beta", [*BASE, BETA])
    headers = "1 pair would match but for the headers that change what a request asks"
    code, said = _refusal(beta, plain)
    assert code == 1, said
    assert said.startswith(
        f"Error: no request of {beta} is identical to one of {plain}: {headers} "
        "(A sent anthropic-beta: context-management-2025-06-27, B none); 0 pairs"
    ), said

    old, new = (
        _capture(tmp_path / "old", query="api-version=2024-10-21"),
        _capture(tmp_path / "new", query="api-version=2025-01-01"),
    )
    code, said = _refusal(old, new)
    assert code == 1, said
    assert said.startswith(
        f"Error: no request of {old} is identical to one of {new}: 1 pair would match but for the query "
        "(A sent ?api-version=2024-10-21, B ?api-version=2025-01-01); 0 pairs"
    ), said

    # Both apart: said of both, each difference shown.
    code, said = _refusal(beta, new)
    assert (
        code == 1
        and (
            "1 pair would match but for the query and the headers that change what a request asks "
            "(A sent no query, B ?api-version=2025-01-01; A sent anthropic-beta: context-management-2025-06-27, B none)"
        )
        in said
    ), said

    # The baseline's refusal says so too, naming it.
    code, said = _refusal(plain, plain, "--baseline", beta)
    assert code == 1 and f"no request of {plain} is identical to one of the baseline {beta}: {headers}" in said, said
    assert "(A sent none, the baseline anthropic-beta: context-management-2025-06-27)" in said, said

    # Must stay: requests of other bodies keep the old words and exit status.
    other = _capture(tmp_path / "other", body={**BODY, "max_tokens": 65})
    code, said = _refusal(beta, other)
    assert code == 1 and said.startswith(f"Error: no exchange of {other} matches one of {beta}: 0 pairs"), said
    # Must match: a redacted credential parameter kept nothing apart: they pair, and compare.
    keyed = _capture(tmp_path / "keyed", query="key=[REDACTED]")
    assert _refusal(plain, keyed)[0] == 0
