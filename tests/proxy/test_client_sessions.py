"""The sessions agent clients name of themselves, recorded through `infertap record` as each client
sends them (read from their source: docs/capture-format.md), driven by the real SDKs: Claude Code's
``X-Claude-Code-Session-Id``, Codex CLI's ``session_id``, opencode's ``x-opencode-session``. Each
names a session of its own, one id one session, two ids two; ``x-infertap-session`` wins over them;
and a replay sends each pass and sweep point under ids of its own, in the header the client used."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from anthropic import Anthropic
from click.testing import CliRunner
from openai import OpenAI

from infertap.capture.reader import CaptureReader
from infertap.capture.records import recorded_session, session_of
from infertap.capture.writer import CaptureWriter
from infertap.cli import cli
from tests.helpers import decompressed_bytes

# Two sessions per client, each of a main turn and a side request (a title, a summary) whose
# conversation continues nothing: only the session header can put them together.
SESSIONS = ("a", "b")
TASKS = ("Fix the failing test.", "Write a 5-word title for this chat.")


def _claude_code(url: str, sid: str, task: str) -> None:
    """As Claude Code 2.1.86 sends a request (its cli.js client: ``X-Claude-Code-Session-Id`` and
    ``x-app`` on every request; ``metadata.user_id`` a JSON string holding the session too)."""
    client = Anthropic(
        base_url=url,
        api_key="sk-ant-test",
        max_retries=0,
        default_headers={"x-app": "cli", "X-Claude-Code-Session-Id": sid},
    )
    user_id = json.dumps({"device_id": "d" * 64, "account_uuid": "8c1f0e2a-0000-4000-8000-000000000001", "session_id": sid})
    with client.messages.stream(
        model="claude-test",
        max_tokens=16,
        messages=[{"role": "user", "content": task}],
        metadata={"user_id": user_id},
        extra_body={"n_chunks": 2},
    ) as events:
        assert events.get_final_message().content


def _codex(url: str, sid: str, task: str) -> None:
    """As Codex CLI sends a Responses request (codex-rs: ``session_id``, and ``conversation_id`` in
    versions before codex-api, both the conversation's id; ``prompt_cache_key`` the same id)."""
    client = OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
    final = client.responses.create(
        model="gpt-test",
        input=[{"role": "user", "content": task}],
        prompt_cache_key=sid,
        extra_headers={"session_id": sid, "conversation_id": sid, "originator": "codex_cli_rs"},
        extra_body={"n_chunks": 2},
    )
    assert final.output_text


def _opencode(url: str, sid: str, task: str) -> None:
    """As opencode sends a chat request to one of its own providers (session/llm/request.ts)."""
    client = OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)
    headers = {"x-opencode-session": sid, "x-opencode-request": f"msg_{task[:3]}", "x-opencode-client": "cli"}
    stream = client.chat.completions.create(
        model="big-pickle",
        messages=[{"role": "user", "content": task}],
        stream=True,
        extra_headers=headers,
        extra_body={"n_chunks": 2},
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


CLIENTS = {"claude": _claude_code, "codex": _codex, "opencode": _opencode}


def _record_agents(record: Any, upstream: str) -> Path:
    """Each client's two sessions, their requests interleaved: a1's task, b1's, a1's title, b1's."""
    rec = record(upstream, name="agents")
    for name, send in CLIENTS.items():
        for task in TASKS:
            for s in SESSIONS:
                send(rec.url, f"{name}-{s}", task)
    assert rec.stop() == 0
    return rec.out


def _sessions(capture: Path, cache: Path) -> dict[str, tuple[int, int]]:
    """Each session's turns and depth, as `stats --by session --json` counts them."""
    result = CliRunner().invoke(cli, ["stats", str(capture), "--by", "session", "--json", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["groups"]
    return {g["key"]["session"]: (g["session"]["turns"], g["session"]["depth"]) for g in groups}


def test_each_agent_client_names_its_sessions_by_its_own_header(tmp_path, fake, record):
    """Claude Code's, Codex's and opencode's requests were sessions of one request each (12 for 6):
    none of their headers was read. Now each id is one session of both its requests, two ids two."""
    _, upstream = fake
    capture = _record_agents(record, upstream)
    sessions = _sessions(capture, tmp_path / "cache")
    assert sessions == {f"{name}-{s}": (2, 2) for name in CLIENTS for s in SESSIONS}
    exchanges = list(CaptureReader(capture).exchanges())
    assert Counter(x["session"] for x in exchanges) == {f"{name}-{s}": 2 for name in CLIENTS for s in SESSIONS}
    # Identifiers, no credentials: kept as sent, beside the key the client sent, which is not.
    claude = next(x for x in exchanges if x["path"] == "/v1/messages")
    headers = {n.lower(): v for n, v in claude["request_headers"]}
    assert headers["x-claude-code-session-id"] == claude["session"] and "sk-ant-test" not in str(headers)
    assert json.loads(json.loads(claude["request_body"])["metadata"]["user_id"])["session_id"] == claude["session"]


def test_the_user_s_session_header_wins_over_the_client_s_wherever_it_stands(tmp_path, fake, record):
    """Several session headers on one request: x-infertap-session (the user's, for infertap) first,
    then x-session-id, then the clients' own; a header sent blank names none and the next one
    counts; repeats of one name, the last."""
    assert session_of([(b"X-Claude-Code-Session-Id", b"c"), (b"x-infertap-session", b"u")]) == "u"
    assert session_of([(b"x-infertap-session", b"u"), (b"X-Claude-Code-Session-Id", b"c")]) == "u"
    assert session_of([(b"x-infertap-session", b"u"), (b"x-session-id", b"s")]) == "u"  # was the last sent
    assert session_of([(b"session_id", b"k"), (b"X-Session-Id", b"s")]) == "s"
    assert session_of([(b"session_id", b"k"), (b"x-opencode-session", b"o")]) == "k"
    assert session_of([(b"x-infertap-session", b" "), (b"session_id", b"k")]) == "k"
    assert session_of([(b"session_id", b"k1"), (b"session_id", b"k2")]) == "k2"
    assert session_of([(b"session-id", b"k"), (b"x-session", b"s"), (b"conversation_id", b"c")]) is None
    _, upstream = fake
    rec = record(upstream)
    _claude_code(rec.url, "claude-1", TASKS[0])
    client = Anthropic(base_url=rec.url, api_key="k", max_retries=0, default_headers={"X-Claude-Code-Session-Id": "claude-1"})
    with client.messages.stream(
        model="m", max_tokens=8, messages=[{"role": "user", "content": TASKS[1]}], extra_headers={"x-infertap-session": "mine"}
    ) as events:
        events.get_final_message()
    assert rec.stop() == 0
    assert [x["session"] for x in rec.exchanges()] == ["claude-1", "mine"]


def test_a_replay_sends_each_pass_and_point_under_ids_of_its_own_in_the_client_s_header(tmp_path, fake, record):
    """Codex's session_id and Claude Code's X-Claude-Code-Session-Id were sent as recorded by every
    pass and sweep point, so a gateway keyed by them merged the passes. Now pass k sends <id>#k and
    point P <id>@P in the header the client used, and they are recorded as sessions so."""
    _, upstream = fake
    src = _record_agents(record, upstream)
    source = _sessions(src, tmp_path / "c0")
    behind = record(upstream, name="behind")
    out = tmp_path / "replay"
    args = ["replay", str(src), "--target", behind.url, "--out", str(out), "--no-probe", "--no-telemetry", "--json"]
    result = CliRunner().invoke(cli, [*args, "--repeat", "2"])
    assert result.exit_code == 0, result.output
    sweep = tmp_path / "sweep"
    args = ["sweep", str(src), "--target", behind.url, "--out", str(sweep), "--no-probe", "--no-telemetry", "--json"]
    result = CliRunner().invoke(cli, [*args, "--speeds", "4", "--slo", "error_rate<=100%"])
    assert result.exit_code == 0, result.output
    assert behind.stop() == 0
    names = {**source, **{f"{s}#1": v for s, v in source.items()}, **{f"{s}@speed-4": v for s, v in source.items()}}
    assert _sessions(behind.out, tmp_path / "c1") == names  # as the recorder in front of the target saw them
    assert _sessions(out, tmp_path / "c2") == {n: v for n, v in names.items() if "@" not in n}
    own = {"claude": "x-claude-code-session-id", "codex": "session_id", "opencode": "x-opencode-session"}
    for x in CaptureReader(behind.out).exchanges():
        sent = {n.lower(): v for n, v in x["request_headers"]}
        assert sent[own[x["session"].split("-")[0]]] == x["session"]
        if "codex" in x["session"]:  # its conversation_id, the same id: apart with it; its cache key as recorded
            assert sent["conversation_id"] == x["session"]
            assert json.loads(x["request_body"])["prompt_cache_key"] == x["session"].split("#")[0].split("@")[0]


def test_a_session_header_the_user_redacts_names_no_session_and_reaches_no_byte(tmp_path, fake, record):
    """`record --redact-header X-Claude-Code-Session-Id`: the header was redacted, but its id was
    recorded in clear as the exchange's session. Now a redacted header names none (the next one
    sent counts), and the id is in no byte of the capture; told nothing, the same request keeps it."""
    _, upstream = fake
    told = record(upstream, "--redact-header", "x-CLAUDE-code-session-id", name="told")
    untold = record(upstream, name="untold")
    for rec in (told, untold):
        client = OpenAI(base_url=f"{rec.url}/v1", api_key="sk-test", max_retries=0)
        for extra in ({}, {"session_id": "codex-9"}):
            headers = {"X-Claude-Code-Session-Id": "claude-private-4242", **extra}
            assert list(client.chat.completions.create(model="m", messages=[], stream=True, extra_headers=headers))
        assert rec.stop() == 0
    assert [x["session"] for x in told.exchanges()] == [None, "codex-9"]
    assert b"claude-private-4242" not in decompressed_bytes(told.out)
    assert [x["session"] for x in untold.exchanges()] == ["claude-private-4242"] * 2
    assert b"claude-private-4242" in decompressed_bytes(untold.out)


def _as_recorded_before(src: Path, out: Path, redacted: str) -> Path:
    """``src`` as a recorder before the clients' own headers were read wrote it: no ``session``, the
    headers as sent; the session ``redacted``'s header redacted (``record --redact-header``)."""
    header = next(r for r in CaptureReader(src).records() if r["type"] == "header")
    with CaptureWriter(out, recorder=header["recorder"], wall=header["wall"]) as writer:
        for x in CaptureReader(src).exchanges():
            if x["session"] == redacted:
                x["request_headers"] = [[n, "[REDACTED]" if v == redacted else v] for n, v in x["request_headers"]]
            writer.write({**x, "session": None})
    return out


def test_a_capture_recorded_before_the_client_headers_were_read_has_their_sessions(tmp_path, fake, record):
    """A capture recorded before Claude Code's, Codex's and opencode's headers were read kept no
    session: each request was one of its own (12 for 6) in stats and in replay. Now the headers it
    kept name them, by the recorder's rule (a redacted one names none), in analysis and in replay,
    whose passes send and record them apart as for a new capture."""
    assert recorded_session({"session": "", "request_headers": [["Session_Id", "k"], ["x-session-id", "s"]]}) == "s"
    assert recorded_session({"session": "r", "request_headers": [["x-session-id", "s"]]}) == "r"  # as recorded
    assert recorded_session({"session": None, "request_headers": [["x-session-id", "[REDACTED]"], ["session_id", "k"]]}) == "k"
    assert recorded_session({"session": None, "request_headers": [["x-session-id", "[REDACTED]"]]}) is None
    assert recorded_session({"session": None, "request_headers": [["x-session-id", " "], ["conversation_id", "c"]]}) is None
    _, upstream = fake
    old = _as_recorded_before(_record_agents(record, upstream), tmp_path / "old", redacted="claude-b")
    assert {x["session"] for x in CaptureReader(old).exchanges()} == {None}
    named = {f"{name}-{s}": (2, 2) for name in CLIENTS for s in SESSIONS if f"{name}-{s}" != "claude-b"}
    found = _sessions(old, tmp_path / "c0")
    assert {k: v for k, v in found.items() if k in named} == named
    assert sorted(v for k, v in found.items() if k not in named) == [(1, 1), (1, 1)]  # claude-b's: redacted, none
    behind = record(upstream, name="behind")
    out = tmp_path / "replay"
    args = ["replay", str(old), "--target", behind.url, "--out", str(out), "--no-probe", "--no-telemetry", "--json"]
    result = CliRunner().invoke(cli, [*args, "--repeat", "2"])
    assert result.exit_code == 0, result.output
    assert behind.stop() == 0
    twice = {**named, **{f"{s}#1": v for s, v in named.items()}}
    replayed = _sessions(out, tmp_path / "c1")
    assert {k: v for k, v in replayed.items() if k in twice} == twice and len(replayed) == len(twice) + 4
    seen = _sessions(behind.out, tmp_path / "c2")  # the ids sent, as a recorder in front of the target reads them
    assert {k: v for k, v in seen.items() if k in twice} == twice and len(seen) == len(twice) + 4
