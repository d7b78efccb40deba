"""Several captures replayed as one workload: two recorders in front of one fleet each took some of
an agent's turns. Replayed alone, a capture split the session, its think times holding the turns
that went to the other recorder; together they are one session, on one clock, as the analysis
links them (analysis/joined_sessions.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.replay.workload import load
from tests import sdk_shapes
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import write_capture

WALL = 1_800_000_000.0
# One session of four turns: (recorder, absolute send s, duration s). Think times 0.3, 0.2, 0.4 s.
TURNS = [("a", 0.0, 0.1), ("b", 0.4, 0.1), ("a", 0.7, 0.1), ("b", 1.2, 0.1)]
B_START = 0.2  # recorder b's run started later: its offsets count from its own start


def _body(t: int) -> dict[str, Any]:
    """Turn t's conversation: every earlier question with its recorded reply, then its own."""
    said = [m for k in range(t) for m in ({"role": "user", "content": f"q{k}"}, {"role": "assistant", "content": f"r{k}"})]
    return {"model": "m", "stream": False, "tag": f"t{t}", "messages": [*said, {"role": "user", "content": f"q{t}"}]}


def two_recorders(folder: Path) -> tuple[Path, Path]:
    """Captures gw-a and gw-b under ``folder``, written by the project's writer, each with alternate turns."""
    for name, start in (("a", 0.0), ("b", B_START)):
        exchanges = [
            {
                "id": f"{name}-{t}",
                "offset_s": at - start,
                "duration_ns": round(took * 1e9),
                "body": _body(t),
                "chunks": [json.dumps(sdk_shapes.chat_answer({"role": "assistant", "content": f"r{t}"})).encode()],
            }
            for t, (who, at, took) in enumerate(TURNS)
            if who == name
        ]
        write_capture(folder / f"gw-{name}", exchanges, wall0=WALL + start, run_wall=WALL + start)
    return folder / "gw-a", folder / "gw-b"


def test_captures_of_two_recorders_are_one_workload_with_the_sessions_think_times(tmp_path):
    a, b = two_recorders(tmp_path / "gws")
    items, source = load((a, b))
    assert [json.loads(i.body)["tag"] for i in items] == ["t0", "t1", "t2", "t3"]  # one order of sending
    assert [i.parent for i in items] == [None, 0, 1, 2] and len({i.session for i in items}) == 1
    assert [i.think_ns for i in items] == [None, 300_000_000, 200_000_000, 400_000_000]  # from the other capture's end
    assert [c["path"] for c in source["captures"]] == [str(a), str(b)]
    # One capture alone, as before: turn 2 continues turn 0, its think time holding turn 1's.
    alone, _ = load(a)
    assert [i.parent for i in alone] == [None, 0] and alone[1].think_ns == 600_000_000


def test_replay_takes_a_folder_of_captures_and_sends_the_turns_in_recorded_order(tmp_path):
    two_recorders(tmp_path / "gws")
    app = FakeUpstream()
    with ServerThread(app) as server:
        said = CliRunner().invoke(
            cli,
            ["replay", str(tmp_path / "gws"), "--target", server.url, "--out", str(tmp_path / "out")]
            + ["--no-probe", "--no-telemetry", "--sessions", "closed", "--json"],
        )
    assert said.exit_code == 0, said.output
    assert [json.loads(r["body"])["tag"] for r in app.requests] == ["t0", "t1", "t2", "t3"]
    sent = sorted(CaptureReader(tmp_path / "out").exchanges(), key=lambda x: x["turn"])  # one capture
    assert [json.loads(x["request_body"])["tag"] for x in sent] == ["t0", "t1", "t2", "t3"]
    assert [x["source_id"] for x in sent] == ["a-0", "b-1", "a-2", "b-3"]
    assert [x.get("think_ns") for x in sent] == [None, 300_000_000, 200_000_000, 400_000_000]
    assert [x.get("parent_id") for x in sent[1:]] == [x["id"] for x in sent[:-1]] and len({x["session"] for x in sent}) == 1
    for before, turn in zip(sent, sent[1:], strict=False):  # each due its think time after the turn before ended here
        assert turn["scheduled_ns"] >= before["sent_ns"] + before["end_ns"] + turn["think_ns"]
    assert json.loads(said.output[said.output.index("{") :])["source"]["captures"][1]["path"].endswith("gw-b")


def test_a_capture_given_twice_or_a_replay_among_them_is_refused(tmp_path):
    a, b = two_recorders(tmp_path / "gws")
    shutil.copytree(a, tmp_path / "copy")
    with ServerThread(FakeUpstream()) as server:
        args = ["--target", server.url, "--no-probe", "--no-telemetry"]
        copied = CliRunner().invoke(cli, ["replay", str(a), str(tmp_path / "copy"), *args, "--out", str(tmp_path / "o1")])
        assert copied.exit_code == 1 and "is a copy of capture 1" in copied.output, copied.output
        replayed = CliRunner().invoke(cli, ["replay", str(a), *args, "--out", str(tmp_path / "r")])
        assert replayed.exit_code == 0, replayed.output
        mixed = CliRunner().invoke(cli, ["replay", str(b), str(tmp_path / "r"), *args, "--out", str(tmp_path / "o2")])
    assert mixed.exit_code == 1 and "capture 2 of those given is a replay's" in mixed.output, mixed.output
