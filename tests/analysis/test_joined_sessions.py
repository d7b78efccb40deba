"""Sessions across captures read together: an agent whose turns went through two gateways'
recorders is one session, with the turns, depth and think times it has when one recorder took all
its traffic; unrelated agents stay apart, and a replay stays apart from its source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.cli import cli
from tests.helpers import write_capture

_WALL = 1_800_000_000.0  # each run's start: the gateways' clocks agree, as on one host
_COLUMNS = "exchange_id, session, turn, parent_id, link, think_ns"


def _reply(text: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}).encode()


def _agent(name: str, turns: int, start: float, session: str | None = None) -> list[dict[str, Any]]:
    """An agent's turns, each its conversation so far plus a question, 0.3 s after the last ended
    (no session header unless ``session``: linked by content alone)."""
    out, messages = [], []
    for t in range(turns):
        messages = [*messages, {"role": "user", "content": f"{name} question {t}"}]
        answer = f"{name} answer {t}"
        x = {"id": f"{name}-{t}", "offset_s": start + t * 0.4, "body": {"model": "m", "messages": messages}}
        out.append({**x, "chunks": [_reply(answer)], "duration_ns": 100_000_000, **({"session": session} if session else {})})
        messages = [*messages, {"role": "assistant", "content": answer}]
    return out


def _traffic() -> list[dict[str, Any]]:
    """Two agents by content (one of them forking: two turns continue its turn 1) and one by header."""
    a, b = _agent("a", 4, 0.0), _agent("b", 3, 0.05)
    fork = {**a[2], "id": "a-fork", "offset_s": a[2]["offset_s"] + 0.01}
    return sorted([*a, fork, *b, *_agent("h", 3, 0.1, session="agent-7")], key=lambda x: x["offset_s"])


def _turns(paths: list[Path], cache: Path) -> dict[str, tuple[Any, ...]]:
    with Analysis(paths, cache_dir=cache) as an:
        return {r[0]: r[1:] for r in an.query(f"SELECT {_COLUMNS} FROM metrics WHERE generation").rows}


def _sessions(paths: list[Path], cache: Path) -> list[tuple[Any, ...]]:
    """Each session's name, turns and depth, from ``stats --by session --json`` (the command)."""
    args = ["stats", *map(str, paths), "--by", "session", "--json", "--cache-dir", str(cache)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    groups = json.loads(result.output)["groups"]
    return sorted((g["key"]["session"], g["session"]["turns"], g["session"]["depth"]) for g in groups)


def test_an_agent_recorded_by_two_gateways_is_one_session_as_by_one(tmp_path):
    """Every other request went through the second gateway: linked per capture, each agent was
    two sessions (or more) of shallow depth; read together, the same as the one recording."""
    traffic = _traffic()
    write_capture(tmp_path / "one", traffic, run_wall=_WALL)
    write_capture(tmp_path / "gw-a", traffic[0::2], run_wall=_WALL)
    write_capture(tmp_path / "gw-b", traffic[1::2], run_wall=_WALL)
    split = [tmp_path / "gw-a", tmp_path / "gw-b"]

    whole = _turns([tmp_path / "one"], tmp_path / "cache")
    # The traffic is what it says: think time from the last end in the session (the fork's, 10 ms later).
    assert whole["a-3"] == ("a-0", 3, "a-2", "conversation", 290_000_000)
    assert whole["a-fork"][:3] == ("a-0", 2, "a-1") and whole["h-2"][:2] == ("agent-7", 2)
    assert _turns(split, tmp_path / "cache") == whole
    assert _turns(split[::-1], tmp_path / "cache") == whole  # whichever is named first
    sessions = _sessions([tmp_path / "one"], tmp_path / "cache")
    assert sessions == [("a-0", 5, 4), ("agent-7", 3, 3), ("b-0", 3, 3)]
    assert _sessions(split, tmp_path / "cache") == sessions
    with Analysis(split, cache_dir=tmp_path / "cache") as an:
        (group,) = speed_stats(an, ["run"])["groups"][:1]
    assert group["runs"] == 1  # each capture's own run: nothing else of stats moved


def test_unrelated_agents_in_two_captures_stay_two_sessions(tmp_path):
    write_capture(tmp_path / "gw-a", _agent("a", 3, 0.0))
    write_capture(tmp_path / "gw-b", _agent("b", 3, 0.05))
    sessions = _sessions([tmp_path / "gw-a", tmp_path / "gw-b"], tmp_path / "cache")
    assert sessions == [("a-0", 3, 3), ("b-0", 3, 3)]


def test_a_capture_changed_after_it_was_read_is_joined_as_it_is_now(tmp_path):
    """The join reads each capture's cached links: a capture appended to decodes again, and its new
    turn continues the other capture's."""
    traffic = _agent("a", 3, 0.0)
    write_capture(tmp_path / "gw-a", traffic[:2])
    write_capture(tmp_path / "gw-b", [])
    split = [tmp_path / "gw-a", tmp_path / "gw-b"]
    assert _sessions(split, tmp_path / "cache") == [("a-0", 2, 2)]
    write_capture(tmp_path / "gw-b", traffic[2:])  # a new run of gw-b
    assert _sessions(split, tmp_path / "cache") == [("a-0", 3, 3)]


def test_a_join_is_kept_in_the_cache_and_made_again_only_for_changed_captures(tmp_path, monkeypatch):
    """The join is linked in Python (about 7 µs a request): kept beside the entries it joins, so
    that every load after the first reads it as it reads a decoded table; a capture decoded anew is
    a new entry, hence a new join, and the old one is removed with the entry it joined."""
    from infertap.analysis import joined_sessions

    traffic = _agent("a", 3, 0.0)
    write_capture(tmp_path / "gw-a", traffic[:2])
    write_capture(tmp_path / "gw-b", traffic[2:3])
    split, cache = [tmp_path / "gw-a", tmp_path / "gw-b"], tmp_path / "cache"
    first = _turns(split, cache)
    assert first["a-2"][:3] == ("a-0", 2, "a-1")
    (kept,) = (cache / "joined").iterdir()

    def no_join(*args: Any) -> Any:
        raise AssertionError("joined again")

    with monkeypatch.context() as m:
        m.setattr(joined_sessions, "join_sessions", no_join)
        assert _turns(split, cache) == first  # read back, not linked again

    write_capture(tmp_path / "gw-b", [{**traffic[2], "id": "a-2b"}])  # a new run of gw-b
    again = _turns(split, cache)
    assert again["a-2b"][:3] == ("a-0", 2, "a-1") and "a-2" in again
    (fresh,) = (cache / "joined").iterdir()
    assert fresh != kept  # the old join went with the entry it joined
