"""A request sent with a body that was not kept reads as no generation (its body is empty): ``stats``
counts it as of unknown kind (``request_body_unknown``) and says so, never silently leaving it out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from infertap.cli import cli
from tests.helpers import write_capture


def _stats(capture: Path, *extra: str) -> str:
    result = CliRunner().invoke(cli, ["stats", str(capture), "--cache-dir", str(capture.parent / "cache"), *extra])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_request_body_not_kept_is_counted_unknown_and_said(tmp_path: Path) -> None:
    write_capture(tmp_path / "cap", [{}, {"body": b"", "fields": {"request_body_size": 9000}}])
    out = json.loads(_stats(tmp_path / "cap", "--json"))
    [group] = out["groups"]
    assert (group["requests"], group["request_body_unknown"]) == (1, 1)
    assert out["in_no_group"] == {"refused": 0, "request_body_unknown": 0}  # its group holds it
    assert "request body unknown 1" in _stats(tmp_path / "cap")


def test_requests_of_unknown_body_alone_are_said_with_no_group(tmp_path: Path) -> None:
    """With no counted request beside them there is no group to count them in: ``stats`` said no
    generation requests and nothing of them. They are said apart (``in_no_group``)."""
    write_capture(tmp_path / "cap", [{"body": b"", "fields": {"request_body_size": 9000}}])
    out = json.loads(_stats(tmp_path / "cap", "--json"))
    assert (out["groups"], out["in_no_group"]) == ([], {"refused": 0, "request_body_unknown": 1})
    assert "no counted generation requests in these captures: 1 sent with a body not kept" in _stats(tmp_path / "cap")


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


def test_a_refusal_of_a_key_no_group_has_is_said_below_the_groups(tmp_path: Path) -> None:
    """By model, a refused body (none kept: no model) has no group of its own beside the answered
    request's: said after the groups rather than dropped; by run, the run's group holds it."""
    refused = {"body": b"", "status": 413, "end": "refused", "chunks": [b'{"error": "too large"}'],
               "fields": {"request_body_size": 9000, "proxy_generated": True}}  # fmt: skip
    write_capture(tmp_path / "cap", [{}, refused])
    by_model = json.loads(_stats(tmp_path / "cap", "--json", "--by", "model"))
    assert ([g["refused"] for g in by_model["groups"]], by_model["in_no_group"]["refused"]) == ([0], 1)
    assert "in no group above (no request of their key was counted): 1 refused by infertap" in _stats(
        tmp_path / "cap", "--by", "model"
    )
    by_run = json.loads(_stats(tmp_path / "cap", "--json"))
    assert ([g["refused"] for g in by_run["groups"]], by_run["in_no_group"]["refused"]) == ([1], 0)
    assert "in no group above" not in _stats(tmp_path / "cap")


_ASKED = {"model": "m", "messages": [{"role": "user", "content": "a question cut short"}], "stream": True}


def _old_cut(end: str, error: str) -> dict:
    """A request whose body stopped arriving, as the proxy recorded it before ``request_body_cut``:
    the part that came, no answer, its ending and error, no mark."""
    part = json.dumps(_ASKED).encode()[:30]
    return {"body": part, "status": None, "chunks": [], "fields": {"end": end, "error": error}}


@pytest.mark.parametrize(
    ("end", "error"),
    [
        ("client_disconnected", "client disconnected while sending the request body"),
        ("cancelled", "proxy shut down while the request body was arriving"),
        ("client_disconnected", "client disconnected while sending the request body (30 of 95 bytes came)"),
    ],
)
def test_a_body_cut_short_recorded_before_its_mark_is_counted_unknown(tmp_path: Path, end: str, error: str) -> None:
    """A capture recorded before ``request_body_cut`` holds a body its client's hang-up (or the
    recorder's shutdown) cut short with nothing but its error to say so: it read as no generation and
    ``stats`` counted it nowhere. Its error tells: it is counted of unknown body."""
    write_capture(tmp_path / "cap", [{}, _old_cut(end, error)])
    out = json.loads(_stats(tmp_path / "cap", "--json"))
    [group] = out["groups"]
    assert (group["requests"], group["ok"], group["request_body_unknown"]) == (1, 1, 1)
    assert "request body unknown 1" in _stats(tmp_path / "cap")


@pytest.mark.parametrize(
    ("end", "error"),
    [
        ("client_disconnected", "client disconnected; upstream request cancelled"),  # the body came whole
        ("cancelled", "replay stopped before it was sent"),
    ],
)
def test_another_hang_up_is_no_body_cut_short(tmp_path: Path, end: str, error: str) -> None:
    """A hang-up or a shutdown after the body came whole leaves the request as it was sent: a
    generation, not a body of unknown kind."""
    whole = {"body": _ASKED, "status": None, "chunks": [], "fields": {"end": end, "error": error}}
    write_capture(tmp_path / "cap", [{}, whole])
    [group] = json.loads(_stats(tmp_path / "cap", "--json"))["groups"]
    assert (group["requests"], group["request_body_unknown"]) == (2, 0)


def test_a_refusal_of_no_counted_session_is_said_below_the_sessions(tmp_path: Path) -> None:
    """By session, the same line in its own words (``in_no_group.apart_line``, the report's too)."""
    refused = {"body": b"", "status": 413, "end": "refused", "chunks": [b'{"error": "too large"}'],
               "fields": {"request_body_size": 9000, "proxy_generated": True}}  # fmt: skip
    write_capture(tmp_path / "cap", [{"session": "s1"}, refused])
    said = "in no session above (no request of their session was counted): 1 refused by infertap"
    assert said in _stats(tmp_path / "cap", "--by", "session")
    write_capture(tmp_path / "one", [{"session": "s1"}])  # must stay: nothing apart, nothing said
    assert "in no session above" not in _stats(tmp_path / "one", "--by", "session")
