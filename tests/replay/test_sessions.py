"""Agent sessions in replay: with --sessions closed a turn is sent its recorded think time after the
turn it continues ends on the target, so a slower (or faster) target is judged on sessions paced as
the agent paced them; --sessions open keeps the recorded send times (a turn never before its parent)."""

from __future__ import annotations

from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.errors import ConfigError
from infertap.replay import ReplayConfig, Schedule, run_replay
from infertap.replay.workload import load
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture
from tests.slot_engine import SlotEngine

THINK_S = 0.5  # the agent's own time between a reply and its next request, as recorded
TURN_S = 0.1  # each turn took this long on the recorded engine
SESSIONS, TURNS = 3, 3


def agent_capture(path: Path) -> Path:
    """Three sessions of three turns: each turn sent THINK_S after the previous one ended."""
    exchanges = []
    for s in range(SESSIONS):
        for t in range(TURNS):
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"s{s} turn {t}"}]}
            start = s * 0.05 + t * (TURN_S + THINK_S)
            exchanges.append({"offset_s": start, "session": f"s{s}", "duration_ns": int(TURN_S * 1e9), "body": body})
    exchanges.sort(key=lambda x: x["offset_s"])
    write_capture(path, exchanges)
    return path


def gaps(capture: Path) -> dict[str, list[float]]:
    """Per session, each turn's send minus the previous turn's end (s), as the replay recorded them."""
    by_session: dict[str, list[dict[str, Any]]] = {}
    for x in CaptureReader(capture).exchanges():
        by_session.setdefault(x["session"], []).append(x)
    out = {}
    for session, turns in by_session.items():
        turns.sort(key=lambda x: x["turn"])
        assert [x["turn"] for x in turns] == list(range(TURNS))
        out[session] = [(b["sent_ns"] - (a["sent_ns"] + a["end_ns"])) / 1e9 for a, b in zip(turns, turns[1:], strict=False)]
    return out


def test_the_workload_knows_each_turn_and_its_think_time(tmp_path):
    items, _ = load(agent_capture(tmp_path / "src"))
    assert sorted(i.turn for i in items) == sorted(list(range(TURNS)) * SESSIONS)
    firsts = [i for i in items if i.turn == 0]
    assert all(i.think_ns is None and i.parent is None for i in firsts)
    later = [i for i in items if i.turn > 0]
    assert all(i.think_ns == pytest.approx(THINK_S * 1e9, abs=1e6) for i in later)  # end to next send, as recorded


def test_closed_sessions_keep_the_agents_think_time_on_a_slower_target(tmp_path):
    src = agent_capture(tmp_path / "src")
    slower = SlotEngine(slots=1, service_s=0.3)  # one request at a time, three times slower than recorded
    with ServerThread(slower) as server:
        run_replay(ReplayConfig(src, server.url, tmp_path / "closed", probe=False, sessions="closed", telemetry=False))
        run_replay(ReplayConfig(src, server.url, tmp_path / "open", probe=False, telemetry=False))
    closed = [g for session in gaps(tmp_path / "closed").values() for g in session]
    opened = [g for session in gaps(tmp_path / "open").values() for g in session]
    assert len(closed) == len(opened) == SESSIONS * (TURNS - 1)
    assert all(g == pytest.approx(THINK_S, abs=0.1) for g in closed), closed  # the agent's pacing, whatever the target
    assert mean(opened) < THINK_S - 0.15, opened  # open: the recorded times, squeezed by the slower target's turns
    records = list(CaptureReader(tmp_path / "closed").exchanges())
    kept = [x["think_ns"] for x in records if x["turn"] > 0]
    assert kept and all(t == pytest.approx(THINK_S * 1e9, abs=1e6) for t in kept)
    assert all("think_ns" not in x for x in CaptureReader(tmp_path / "open").exchanges())


def test_think_scale_scales_the_kept_think_time(tmp_path):
    src = agent_capture(tmp_path / "src")
    with ServerThread(SlotEngine(slots=4, service_s=0.05)) as server:
        run_replay(
            ReplayConfig(src, server.url, tmp_path / "half", probe=False, sessions="closed", think_scale=0.5, telemetry=False)
        )
    halved = [g for session in gaps(tmp_path / "half").values() for g in session]
    assert all(g == pytest.approx(THINK_S / 2, abs=0.1) for g in halved), halved


def test_bad_session_options_are_refused_before_anything_is_sent(tmp_path):
    src = agent_capture(tmp_path / "src")
    with pytest.raises(ConfigError, match="--think-scale 0"):
        ReplayConfig(src, "http://127.0.0.1:1", tmp_path / "o", sessions="closed", think_scale=0)
    with pytest.raises(ConfigError, match="--sessions 'half': open or closed"):
        ReplayConfig(src, "http://127.0.0.1:1", tmp_path / "o", sessions="half")
    with pytest.raises(ConfigError, match="open-loop schedule"):
        ReplayConfig(
            src, "http://127.0.0.1:1", tmp_path / "o", sessions="closed", schedule=Schedule("concurrency", concurrency=2)
        )
    said = CliRunner().invoke(
        cli, ["replay", str(src), "--target", "http://127.0.0.1:1", "--sessions", "closed", "--think-scale", "0"]
    )
    assert said.exit_code == 2 and "--think-scale" in said.output
    assert not (tmp_path / "o").exists()
