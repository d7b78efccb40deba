"""A request sent with a body that was not kept reads as no generation (its body is empty): ``stats``
counts it as of unknown kind (``request_body_unknown``) and says so, never silently leaving it out."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture


def _stats(capture: Path, *extra: str) -> str:
    result = CliRunner().invoke(cli, ["stats", str(capture), "--cache-dir", str(capture.parent / "cache"), *extra])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_request_body_not_kept_is_counted_unknown_and_said(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{}, {"body": b"", "fields": {"request_body_size": 9000}}])
    [group] = json.loads(_stats(tmp_path / "cap", "--json"))["groups"]
    assert (group["requests"], group["request_body_unknown"]) == (1, 1)
    assert "request body unknown 1" in _stats(tmp_path / "cap")


def test_every_body_kept_says_nothing_of_unknown_bodies(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{}, {"method": "GET", "path": "/v1/models", "body": b""}])
    [group] = json.loads(_stats(tmp_path / "cap", "--json"))["groups"]
    assert (group["requests"], group["request_body_unknown"]) == (1, 0)
    assert "request body unknown" not in _stats(tmp_path / "cap")


def test_a_body_refused_over_the_limit_counts_as_refused_not_as_unknown(tmp_path: Path) -> None:
    """A body over --max-body-mb was refused by the proxy (413), never sent: it counts once, as
    refused, not a second time as a request of unknown body that went to the engine."""
    refused = {"body": b"", "status": 413, "end": "refused", "chunks": [b'{"error": "too large"}'],
               "fields": {"request_body_size": 9000, "proxy_generated": True}}  # fmt: skip
    write_capture(tmp_path / "cap", [{}, refused])
    [group] = json.loads(_stats(tmp_path / "cap", "--json"))["groups"]
    assert (group["requests"], group["refused"], group["request_body_unknown"]) == (1, 1, 0)
    assert "request body unknown" not in _stats(tmp_path / "cap")
