"""compare's traffic line: whether the two runs saw the same requests on the same schedule."""

from __future__ import annotations

import json

from click.testing import CliRunner

from infertap.analysis.report import render
from infertap.cli import cli
from infertap.replay import ReplayConfig, Schedule, run_replay
from tests.helpers import write_capture


def test_a_replay_that_waited_for_its_cap_is_not_on_the_same_schedule(fake, tmp_path):
    """Its schedule hash is its source's (the times it was given), but it didn't keep them."""
    app, url = fake
    body = {"model": "m", "stream": False, "pace_ms": 150}
    write_capture(
        tmp_path / "src",
        [{"offset_s": i * 0.02, "body": {**body, "messages": [{"role": "user", "content": f"q{i}"}]}} for i in range(3)],
    )
    for name, cap in (("free", None), ("capped", 1)):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, schedule=Schedule(max_concurrency=cap)))
    free = CliRunner().invoke(cli, ["compare", str(tmp_path / "src"), str(tmp_path / "free")], env={"COLUMNS": "250"})
    assert "same schedule)" in free.output, free.output
    capped = CliRunner().invoke(cli, ["compare", str(tmp_path / "src"), str(tmp_path / "capped")], env={"COLUMNS": "250"})
    line = next(line for line in capped.output.splitlines() if line.startswith("traffic:"))
    assert "same schedule" not in line
    assert "a different schedule (send times); B's schedule not kept: 2 requests waited for --max-concurrency 1" in line
    # the claim card's workload says so too (its identity is read from the tables, not the capture package's pass)
    card = CliRunner().invoke(cli, ["claim", str(tmp_path / "capped")], env={"COLUMNS": "250"})
    assert card.exit_code == 0, card.output
    assert "schedule not kept: 2 requests waited for --max-concurrency 1" in card.output, card.output
    free_card = CliRunner().invoke(cli, ["claim", str(tmp_path / "free")], env={"COLUMNS": "250"})
    assert "schedule not kept" not in free_card.output


def test_two_replays_of_a_responses_conversation_are_the_same_workload(tmp_path):
    """Each replay rewrites previous_response_id to the ids its target gave: two replays of one
    Responses conversation were never the same traffic ("NOT identical", speed ratios flagged),
    even on one target. Told apart from a replay that changed anything else."""
    from infertap.analysis.compare import compare
    from infertap.replay import Transforms
    from tests.fake_upstream import ServerThread
    from tests.replay.test_sessions import ResponsesStore, chain_capture

    chain = chain_capture(tmp_path / "chain")
    with ServerThread(ResponsesStore()) as server:
        for name, transforms in (
            ("one", Transforms()),
            ("two", Transforms()),
            ("set", Transforms(set_values=[("temperature", 0)])),
        ):
            run_replay(ReplayConfig(chain, server.url, tmp_path / name, probe=False, telemetry=False, transforms=transforms))
    same = compare(tmp_path / "one", tmp_path / "two")
    t = same["traffic"]
    assert not t["identical"] and t["rechained_only"] == 2 and all(row["same_workload"] for row in same["speed"])
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "one"), str(tmp_path / "two")], env={"COLUMNS": "250"}).output
    line = next(line for line in out.splitlines() if line.startswith("traffic:"))
    assert line.startswith("traffic: the same workload") and "previous_response_id of 2" in line, line
    changed = compare(tmp_path / "one", tmp_path / "set")["traffic"]
    assert not changed["identical"] and not changed["rechained_only"]


def test_a_replay_that_sent_the_same_requests_in_another_order_names_its_schedule(fake, tmp_path):
    """A closed loop (as --sessions closed) sends the same requests in another order: a new
    workload identity. compare said "B replays the other's workload with no transform recorded;
    speed ratios below compare different workloads", where `info` said the same requests, sent in
    another order on another schedule. A replay that did change its requests is still flagged so."""
    import json

    from infertap.capture.identity import request_digest
    from infertap.replay import Transforms

    app, url = fake

    def chat(tag):
        return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False}

    bodies = sorted(
        (chat(f"tie{i}") for i in range(2)),
        key=lambda b: request_digest("POST", "/v1/chat/completions", None, json.dumps(b).encode()),
    )
    # Written at one time in the reverse of digest order: the closed loop sends them the other way round.
    write_capture(
        tmp_path / "src",
        [{"offset_s": 0.1, "body": bodies[1]}, {"offset_s": 0.1, "body": bodies[0]}, {"offset_s": 0.3, "body": chat("after")}],
    )
    loop = Schedule("concurrency", concurrency=1)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "closed", probe=False, schedule=loop))
    changed = Transforms(set_values=[("temperature", 0)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "set", probe=False, schedule=loop, transforms=changed))
    env = {"COLUMNS": "400"}
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "src"), str(tmp_path / "closed")], env=env).output
    line = next(line for line in out.splitlines() if line.startswith("traffic:"))
    assert "the same requests in a different order; B replays the other's workload unchanged on another schedule" in line
    assert "(--concurrency 1)" in line and "no transform recorded" not in line, line
    assert line.endswith("speed ratios below compare the same requests sent in another order"), line
    assert "different workloads" not in out
    assert "B/A compares the same requests sent in another order" in out
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "src"), str(tmp_path / "set")], env=env).output
    line = next(line for line in out.splitlines() if line.startswith("traffic:"))
    assert "B replays the other's workload with --set temperature" in line, line
    assert line.endswith("speed ratios below compare different workloads") and "compares different workloads" in out


def test_compare_says_when_its_ttft_mixes_streamed_and_whole_answers(fake, tmp_path):
    """A pair not streamed has a ttft that is the time to its whole body: stats and the claim card
    said "ttft mixes 1 streamed answers ... with 1 not streamed", compare and the report gave the
    same percentiles unsaid."""
    app, url = fake

    def chat(tag, stream):
        # A stream asked for usage ends with a finish reason, as an engine's does: the fake's other
        # streams have none before [DONE], an answer the engine cut (unfinished), not ok, in no speed row.
        usage = {"stream_options": {"include_usage": True}} if stream else {}
        return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": stream, **usage}

    write_capture(tmp_path / "mixed", [{"offset_s": 0.1, "body": chat("a", True)}, {"offset_s": 0.2, "body": chat("b", False)}])
    write_capture(tmp_path / "streams", [{"offset_s": 0.1, "body": chat("a", True)}, {"offset_s": 0.2, "body": chat("b", True)}])
    for name in ("mixed", "streams"):
        for side in ("a", "b"):
            run_replay(ReplayConfig(tmp_path / name, url, tmp_path / f"{name}-{side}", probe=False))
    env = {"COLUMNS": "400"}
    note = "ttft mixes 1 streamed pairs (time to the first token) with 1 not streamed (time to the whole body)"
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "mixed-a"), str(tmp_path / "mixed-b")], env=env).output
    assert note in out, out
    assert render(tmp_path / "mixed-a", tmp_path / "mixed-b").count(note) == 1
    data = json.loads(CliRunner().invoke(cli, ["compare", str(tmp_path / "mixed-a"), str(tmp_path / "mixed-b"), "--json"]).output)
    assert [(r["metric"], r["streamed"], r["not_streamed"], r["a"]["n"]) for r in data["speed"] if "streamed" in r] == [
        ("ttft", 1, 1, 2),
        ("ttft_content", 1, 1, 2),
    ]
    # All streamed: a ttft of first tokens only, no note.
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "streams-a"), str(tmp_path / "streams-b")], env=env).output
    assert "2. Speed" in out and "mixes" not in out, out
    assert "ttft mixes" not in render(tmp_path / "streams-a", tmp_path / "streams-b")
