"""A replay stopped by Ctrl-C before it sent all of its source's requests holds fewer of them: `info`
and the claim card said it was "derived from <source> by no transform recorded (the target's answers
changed a request)", blaming the target for requests the replay never sent."""

from __future__ import annotations

from pathlib import Path

from infertap.analysis.claim import claim, field_text
from infertap.capture.identity import describe
from infertap.capture.info import summarize
from infertap.replay import ReplayConfig, run_replay
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import write_capture
from tests.replay.test_replay_audit import _interrupted, chat


def test_a_replay_stopped_before_the_end_says_so_not_that_the_target_changed_requests(tmp_path: Path) -> None:
    write_capture(tmp_path / "src", [{"offset_s": t, "body": chat(f"q{i}")} for i, t in enumerate([0, 0.05, 60, 61])])
    app = FakeUpstream()
    with ServerThread(app) as server:
        summary, _, _ = _interrupted(app, server.url, tmp_path / "src", tmp_path / "stopped", after_s=0.5)
        run_replay(ReplayConfig(tmp_path / "src", server.url, tmp_path / "whole", probe=False, limit=2))
    assert summary["stopped_early"] and summary["sent"] == 2
    stopped = summarize(tmp_path / "stopped")["workload"]
    said = "2 of the source's 4 requests not in this capture (the replay stopped before sending them)"
    assert stopped["same_as_source"] is False and stopped["derived_by"] == [said]
    assert said in describe(stopped) and "the target's answers" not in describe(stopped)
    assert said in field_text("workload", claim(tmp_path / "stopped", cache_dir=tmp_path / "c")["workload"])
    # Must differ in cause: a replay limited to the same 2 requests names its --limit, not a stop.
    limited = summarize(tmp_path / "whole")["workload"]
    assert limited["workload"] == stopped["workload"] and limited["derived_by"] == ["--limit 2"]
