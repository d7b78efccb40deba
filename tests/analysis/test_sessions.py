"""Sessions as a unit in analysis: every generation request knows its session, its turn and the
agent's think time before it; stats --by session splits a session's makespan into engine and think
time; compare gives B's session makespans over A's and the turn at which answers first differ."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis, speed_stats
from infertap.analysis.compare import compare
from infertap.analysis.report import render
from infertap.cli import cli
from infertap.replay import ReplayConfig, run_replay
from tests import sdk_shapes
from tests.fake_upstream import ServerThread
from tests.helpers import write_capture
from tests.slot_engine import SlotEngine

THINK_S, TURN_S = 0.4, 0.05


def _reply(text: str) -> bytes:
    return json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    ).encode()


def conversations(path: Path, sessions: int = 2, turns: int = 3, lone: int = 2) -> Path:
    """Chat conversations with no session header, linked only by their content (each turn's messages
    are the previous turn's plus its reply), sent THINK_S after the previous turn ended; and lone requests."""
    exchanges: list[dict[str, Any]] = []
    for s in range(sessions):
        messages: list[dict[str, str]] = []
        for t in range(turns):
            messages = [*messages, {"role": "user", "content": f"s{s} question {t}"}]
            start = s * 0.01 + t * (TURN_S + THINK_S)
            reply = f"s{s} answer {t}"
            exchanges.append(
                {"id": f"s{s}t{t}", "offset_s": start, "body": {"model": "m", "messages": messages}, "chunks": [_reply(reply)]}
            )
            messages = [*messages, {"role": "assistant", "content": reply}]
    for i in range(lone):
        exchanges.append({"id": f"lone{i}", "offset_s": 0.005 + i * 0.3, "chunks": [_reply("alone")]})
    exchanges.sort(key=lambda x: x["offset_s"])
    for x in exchanges:
        x["duration_ns"] = int(TURN_S * 1e9) - 1000  # write_capture sends 1 µs after the start
    write_capture(path, exchanges)
    return path


def test_each_request_knows_its_session_turn_and_think_time(tmp_path):
    with Analysis([conversations(tmp_path / "cap")], cache_dir=tmp_path / "cache") as a:
        rows = {r["exchange_id"]: r for r in a.query("SELECT * FROM metrics").records()}
    for s in range(2):
        assert [rows[f"s{s}t{t}"]["session"] for t in range(3)] == [f"s{s}t0"] * 3  # named after its first turn
        assert [rows[f"s{s}t{t}"]["turn"] for t in range(3)] == [0, 1, 2]
        assert [rows[f"s{s}t{t}"]["parent_id"] for t in range(3)] == [None, f"s{s}t0", f"s{s}t1"]
        assert [rows[f"s{s}t{t}"]["link"] for t in range(3)] == [None, "conversation", "conversation"]
        for t in (1, 2):
            child, parent = rows[f"s{s}t{t}"], rows[f"s{s}t{t - 1}"]
            assert child["think_ns"] == child["sent_wall_ns"] - parent["end_wall_ns"]
            assert child["think_ns"] == pytest.approx(THINK_S * 1e9, abs=2e3)
    assert all(rows[f"lone{i}"]["session"] == f"lone{i}" and rows[f"lone{i}"]["turn"] == 0 for i in range(2))


def test_a_session_header_and_previous_response_ids_make_sessions_too(tmp_path):
    exchanges = [
        {"id": "h0", "offset_s": 0.0, "session": "agent-7"},
        {"id": "h1", "offset_s": 1.0, "session": "agent-7"},
        {
            "id": "r0",
            "offset_s": 2.0,
            "path": "/v1/responses",
            "body": {"model": "m", "input": "one"},
            "chunks": [json.dumps({"id": "resp_1", "object": "response", "status": "completed", "output": []}).encode()],
        },
        {
            "id": "r1",
            "offset_s": 3.0,
            "path": "/v1/responses",
            "body": {"model": "m", "input": "two", "previous_response_id": "resp_1"},
        },
    ]
    write_capture(tmp_path / "cap", exchanges)
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        rows = {r["exchange_id"]: r for r in a.query("SELECT exchange_id, session, turn, link FROM metrics").records()}
    assert rows["h1"] == {"exchange_id": "h1", "session": "agent-7", "turn": 1, "link": "session"}
    assert rows["r1"] == {"exchange_id": "r1", "session": "r0", "turn": 1, "link": "previous_response_id"}


def test_stats_by_session_makespans_are_the_sums_they_are_made_of(tmp_path):
    cap = conversations(tmp_path / "cap")
    with Analysis([cap], cache_dir=tmp_path / "cache") as a:
        groups = {g["key"]["session"]: g for g in speed_stats(a, ["session"])["groups"]}
    assert set(groups) == {"s0t0", "s1t0", "lone0", "lone1"}
    for name in ("s0t0", "s1t0"):
        s = groups[name]["session"]
        assert s["turns"] == s["depth"] == 3 and s["think_gaps"] == 2
        assert s["makespan_s"] == pytest.approx(s["engine_s"] + s["think_s"], abs=1e-9)  # one chain: no overlap
        assert s["think_s"] == pytest.approx(2 * THINK_S, abs=1e-5) and s["engine_s"] == pytest.approx(3 * TURN_S, abs=1e-5)
        assert s["cached_share_by_turn"] == [None, None, None]  # no usage in these answers: unknown, not 0
    assert groups["lone0"]["session"]["turns"] == 1 and groups["lone0"]["session"]["think_s"] == 0
    said = CliRunner().invoke(cli, ["stats", str(cap), "--by", "session", "--cache-dir", str(tmp_path / "cache")])
    assert said.exit_code == 0 and "makespan" in said.output and "s0t0" in said.output, said.output


def test_compare_judges_sessions_and_finds_the_first_differing_turn(tmp_path):
    src = conversations(tmp_path / "src")
    same = tmp_path / "same"
    shutil.copytree(src, same)
    matched = compare(src, same)["sessions"]
    # The same run against itself: every session identical, makespans equal.
    assert matched["sessions"] == 4 and matched["compared"] == 4 and matched["multi_turn"] == 2
    assert matched["ratio_p50"] == pytest.approx(1.0) and matched["first_differing_turn"]["differing"] == 0
    # A replay on a slower engine whose answers differ from the recorded ones, sessions closed: B's
    # sessions are longer by their turns' extra time and differ at their first turn.
    with ServerThread(SlotEngine(slots=4, service_s=0.2)) as server:
        run_replay(ReplayConfig(src, server.url, tmp_path / "slow", probe=False, sessions="closed", telemetry=False))
    differed = compare(src, tmp_path / "slow")["sessions"]
    assert differed["compared"] == 4 and differed["ratio_p50"] > 1.1
    assert differed["first_differing_turn"] == {"identical": 0, "differing": 4, "by_turn": {"0": 4}}
    chains = [x for x in differed["slowest"] if x["turns"] == 3]
    assert len(chains) == 2 and all(x["b_s"] > x["a_s"] + 3 * 0.1 for x in chains)  # three turns, each 0.15 s slower
    assert all(x["b_s"] - x["a_s"] < 3 * 0.15 + 0.3 for x in chains)  # the think time kept, not added to
    said = CliRunner().invoke(cli, ["compare", str(src), str(tmp_path / "slow")])
    assert said.exit_code == 0 and "answers first differ at: turn 0 ×4" in " ".join(said.output.split()), said.output


def test_the_report_draws_the_sessions_that_grew_most(tmp_path):
    src = conversations(tmp_path / "src")
    with ServerThread(SlotEngine(slots=4, service_s=0.2)) as server:
        run_replay(ReplayConfig(src, server.url, tmp_path / "slow", probe=False, sessions="closed", telemetry=False))
    page = render(src, tmp_path / "slow")
    section = page.split("Sessions that grew most on B")[1].split("</svg>")[0]
    assert section.count("<rect") == 2 * 2 * 3  # two sessions, on A and on B, three turns each
    assert section.count("think ") == 2 * 2 * 2  # the gaps between them
    alone = render(src)
    assert "Longest sessions" in alone and "grew most" not in alone
    lone = tmp_path / "lone"
    write_capture(lone, [{"offset_s": i * 0.1} for i in range(3)])
    assert "Longest sessions" not in render(lone)  # no session of more than one request: no timeline


def test_a_session_b_left_unfinished_is_not_identical(tmp_path):
    """A has turns 0 and 1 of a session, B only turn 0, the same answer: it was counted "identical"
    beside "partial 1, compared 0". Undecided now; one differing turn still makes a session differ."""

    first = [{"role": "user", "content": "q"}]
    second = [*first, {"role": "assistant", "content": "a0"}, {"role": "user", "content": "again"}]
    turns = [{"session": "s1", "body": {"model": "m", "messages": m}} for m in (first, second)]
    write_capture(tmp_path / "a", turns)
    write_capture(tmp_path / "b", turns[:1])
    unfinished = compare(tmp_path / "a", tmp_path / "b")["sessions"]
    assert unfinished["partial"] == 1 and unfinished["compared"] == 0
    assert unfinished["first_differing_turn"] == {"identical": 0, "differing": 0, "by_turn": {}}
    whole = compare(tmp_path / "a", tmp_path / "a")["sessions"]  # the counter-case: every turn paired and equal
    assert whole["first_differing_turn"]["identical"] == 1
    other = [{"session": "s1", "body": {"model": "m", "messages": first}, "chunks": [b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "zz"}}]}']}]  # fmt: skip
    write_capture(tmp_path / "c", other)
    differs = compare(tmp_path / "a", tmp_path / "c")["sessions"]  # unfinished: left out as its makespan is
    assert differs["first_differing_turn"] == {"identical": 0, "differing": 0, "by_turn": {}}
    assert compare(tmp_path / "c", tmp_path / "c")["sessions"]["first_differing_turn"]["identical"] == 1


def _turns_and_workload(path: Path, cache: Path) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[Any, ...]]]:
    """The analysis's turns (by exchange id) and the replay workload's (parent id, turn, session, think)."""
    from infertap.replay.workload import load_workload

    with Analysis([path], cache_dir=cache) as a:
        rows = {r["exchange_id"]: r for r in a.query("SELECT * FROM metrics WHERE generation").records()}
    items = load_workload(path).items
    plan = {i.source_id: (None if i.parent is None else items[i.parent].source_id, i.turn, i.session, i.think_ns) for i in items}
    return rows, plan


def _messages(*texts: str) -> dict[str, Any]:
    roles = ("user", "assistant")
    return {"model": "m", "messages": [{"role": roles[k % 2], "content": t} for k, t in enumerate(texts)]}


def test_a_turn_continues_only_what_had_ended_when_it_was_sent(tmp_path):
    """Two turns sent side by side in a header session were chained (the second waited for the first
    in replay, counted as the target's fault); an identical conversation of another agent, still in
    flight, was taken for a turn's past."""
    exchanges = [
        {"id": "t0", "session": "S", "offset_s": 0.0, "duration_ns": 300_000_000},
        {"id": "p1", "session": "S", "offset_s": 0.5, "duration_ns": 300_000_000},
        {"id": "p2", "session": "S", "offset_s": 0.5, "duration_ns": 300_000_000},
        {"id": "t3", "session": "S", "offset_s": 1.0},
        # Agents A and B ask the same first question and get the same answer; B's is slow.
        {"id": "A0", "offset_s": 2.0, "body": _messages("q"), "chunks": [_reply("a")], "duration_ns": 1_000_000_000},
        {"id": "B0", "offset_s": 3.2, "body": _messages("q"), "chunks": [_reply("a")], "duration_ns": 1_800_000_000},
        {"id": "A1", "offset_s": 3.5, "body": _messages("q", "a", "next"), "chunks": [_reply("b")]},
    ]
    write_capture(tmp_path / "cap", exchanges)
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert {x: (rows[x]["parent_id"], rows[x]["turn"]) for x in ("p1", "p2", "t3")} == {
        "p1": ("t0", 1),
        "p2": ("t0", 1),  # side by side with p1: the same parent, the same depth
        "t3": ("p2", 2),  # the one that ended last before it (p1 and p2 end together: the later sent)
    }
    assert rows["A1"]["parent_id"] == "A0" and rows["A1"]["session"] == "A0"  # not B0, in flight at 3.5 s
    assert {x: plan[x][:3] for x in rows} == {x: (rows[x]["parent_id"], rows[x]["turn"], rows[x]["session"]) for x in rows}
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        depth = {g["key"]["session"]: g["session"]["depth"] for g in speed_stats(a, ["session"])["groups"]}
    assert depth["S"] == 3 and depth["A0"] == 2 and depth["B0"] == 1


def test_two_agents_that_began_alike_are_two_sessions_in_analysis_and_replay(tmp_path):
    """Two agents with the same system prompt and task got the same first answer: both next turns
    continued the later copy, one session of 4 turns and an orphaned first turn."""
    system = {"role": "system", "content": "You are an agent"}

    def body(*texts: str) -> dict[str, Any]:
        return {"model": "m", "messages": [system, *_messages(*texts)["messages"]]}

    second = 1_000_000_000
    exchanges = [
        {"id": "A0", "offset_s": 0.0, "body": body("fix bug"), "chunks": [_reply("look")], "duration_ns": second},
        {"id": "B0", "offset_s": 0.1, "body": body("fix bug"), "chunks": [_reply("look")], "duration_ns": second},
        {"id": "A1", "offset_s": 1.5, "body": body("fix bug", "look", "ra"), "chunks": [_reply("a1")], "duration_ns": second},
        {"id": "B1", "offset_s": 1.6, "body": body("fix bug", "look", "rb"), "chunks": [_reply("b1")], "duration_ns": second},
        {"id": "A2", "offset_s": 3.0, "body": body("fix bug", "look", "ra", "a1", "ra2"), "duration_ns": second},
    ]
    write_capture(tmp_path / "cap", exchanges)
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert {x: (r["parent_id"], r["session"], r["turn"]) for x, r in rows.items()} == {
        "A0": (None, "A0", 0),
        "B0": (None, "B0", 0),
        "A1": ("A0", "A0", 1),
        "B1": ("B0", "B0", 1),
        "A2": ("A1", "A0", 2),
    }
    assert {x: plan[x][:3] for x in rows} == {x: (rows[x]["parent_id"], rows[x]["turn"], rows[x]["session"]) for x in rows}


def test_a_side_request_in_a_header_session_is_no_step_of_its_conversation(tmp_path):
    """A title request sent between two turns of a session ended last before the second: it became
    the second's parent, the turn numbers and the session's depth one too many."""
    second = 1_000_000_000
    exchanges = [
        {
            "id": "t0",
            "session": "S",
            "offset_s": 0.0,
            "body": _messages("fix bug"),
            "chunks": [_reply("look")],
            "duration_ns": second,
        },
        {
            "id": "title",
            "session": "S",
            "offset_s": 1.0,
            "body": _messages("Write a 5-word title for: fix bug"),
            "chunks": [_reply("Bug fix")],
            "duration_ns": second // 5,
        },
        {"id": "t1", "session": "S", "offset_s": 1.5, "body": _messages("fix bug", "look", "out"), "chunks": [_reply("done")]},
        {"id": "t2", "session": "S", "offset_s": 3.0, "body": _messages("fix bug", "look", "out", "done", "thanks")},
    ]
    write_capture(tmp_path / "cap", exchanges)
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert {x: (r["parent_id"], r["turn"], r["link"]) for x, r in rows.items()} == {
        "t0": (None, 0, None),
        "title": ("t0", 1, "session"),  # its conversation continues none: the session's latest end
        "t1": ("t0", 1, "session"),
        "t2": ("t1", 2, "session"),
    }
    assert {x: plan[x][:3] for x in rows} == {x: (rows[x]["parent_id"], rows[x]["turn"], rows[x]["session"]) for x in rows}
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        (group,) = speed_stats(a, ["session"])["groups"]
    assert group["session"]["turns"] == 4 and group["session"]["depth"] == 3


def test_a_session_is_a_whole_tree_of_turns_and_a_blank_header_names_none(tmp_path):
    """A client that sends its session header from the second turn on split one conversation in two
    sessions (depth 3 for 2 turns; replay's --sample-sessions crashed on the parent in the other
    session); a header sent empty put unrelated requests in one session. A turn under another
    header session (t2) is that session's, as its client said, not a turn of agent-7's tree."""
    from infertap.capture.records import session_of

    assert session_of([(b"x-session-id", b"")]) is None and session_of([(b"X-Session-Id", b"  ")]) is None
    assert session_of([(b"x-session-id", b"a7")]) == "a7"
    exchanges = [
        {"id": "t0", "offset_s": 0.0, "body": _messages("q"), "chunks": [_reply("a")]},
        {"id": "t1", "session": "agent-7", "offset_s": 1.0, "body": _messages("q", "a", "more"), "chunks": [_reply("b")]},
        {"id": "t2", "session": "other", "offset_s": 2.0, "body": _messages("q", "a", "more", "b", "end")},
        *({"id": f"u{i}", "session": "", "offset_s": 3.0} for i in range(3)),  # as earlier versions recorded it
    ]
    write_capture(tmp_path / "cap", exchanges)
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert [rows[x]["session"] for x in ("t0", "t1", "t2")] == ["agent-7", "agent-7", "other"]
    assert (rows["t1"]["parent_id"], rows["t2"]["parent_id"], rows["t2"]["turn"]) == ("t0", None, 0)
    assert [rows[f"u{i}"]["session"] for i in range(3)] == ["u0", "u1", "u2"] and plan["u2"][:2] == (None, 0)
    from infertap.replay.workload import SessionSample, load_workload

    for seed in range(4):  # some seeds keep agent-7 and drop others: never a parent left behind
        try:
            kept = load_workload(tmp_path / "cap", sample=SessionSample(0.5, seed)).items
        except Exception as e:  # a sample that keeps nothing says so
            assert "keeps none" in str(e)
            continue
        assert all(i.parent is None or kept[i.parent].session == i.session for i in kept)


def test_two_header_sessions_that_began_alike_are_two_trees_each_its_own_root(tmp_path):
    """A header session whose first turn extended another header session's conversation (two
    Claude Code sessions begun alike, a conversation resumed under a new id) became a turn of that
    session: its parent, turns, think time and depth were the other's. Now a request of a header
    session continues no request of another, in analysis and replay alike; a session's own second
    turn, and requests of no session, link as before."""
    second = 1_000_000_000
    exchanges = [
        {
            "id": "A0",
            "session": "A",
            "offset_s": 0.0,
            "body": _messages("fix bug"),
            "chunks": [_reply("look")],
            "duration_ns": second,
        },
        {"id": "A1", "session": "A", "offset_s": 1.5, "body": _messages("fix bug", "look", "ra"), "duration_ns": second},
        # B resumes A's first turn under an id of its own, after A's turn ended.
        {
            "id": "B0",
            "session": "B",
            "offset_s": 2.0,
            "body": _messages("fix bug", "look", "rb"),
            "chunks": [_reply("b0")],
            "duration_ns": second,
        },
        {"id": "B1", "session": "B", "offset_s": 3.5, "body": _messages("fix bug", "look", "rb", "b0", "more")},
        # Of no session: linked by conversation, as before; C names the tree its second turn joins.
        {"id": "n0", "offset_s": 4.0, "body": _messages("q"), "chunks": [_reply("a")], "duration_ns": second},
        {"id": "n1", "offset_s": 5.5, "body": _messages("q", "a", "go"), "chunks": [_reply("b")], "duration_ns": second},
        {"id": "C1", "session": "C", "offset_s": 7.0, "body": _messages("q", "a", "go", "b", "on"), "duration_ns": second},
        # D's first turn extends that tree too, now C's: D's own.
        {"id": "D0", "session": "D", "offset_s": 9.0, "body": _messages("q", "a", "go", "b", "off")},
    ]
    write_capture(tmp_path / "cap", exchanges)
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert {x: (r["parent_id"], r["session"], r["turn"], r["link"]) for x, r in rows.items()} == {
        "A0": (None, "A", 0, None),
        "A1": ("A0", "A", 1, "session"),
        "B0": (None, "B", 0, None),  # was ("A0", "A", 1, "conversation")
        "B1": ("B0", "B", 1, "session"),
        "n0": (None, "C", 0, None),
        "n1": ("n0", "C", 1, "conversation"),
        "C1": ("n1", "C", 2, "conversation"),
        "D0": (None, "D", 0, None),
    }
    assert rows["B0"]["think_ns"] is None
    assert {x: plan[x][:3] for x in rows} == {x: (rows[x]["parent_id"], rows[x]["turn"], rows[x]["session"]) for x in rows}
    assert {x: plan[x][3] for x in rows} == {x: rows[x]["think_ns"] for x in rows}
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        groups = {g["key"]["session"]: g["session"] for g in speed_stats(a, ["session"])["groups"]}
    assert {k: (g["turns"], g["depth"]) for k, g in groups.items()} == {"A": (2, 2), "B": (2, 2), "C": (3, 3), "D": (1, 1)}


def test_think_time_runs_from_the_last_end_in_the_session(tmp_path):
    """A turn sent again after its first answer (a retry, a regenerated answer) continues the same
    parent; its think time ran from its parent's end, so the session's think time was counted twice."""
    exchanges = [
        {"id": "t0", "offset_s": 0.0, "body": _messages("q"), "chunks": [_reply("a")], "duration_ns": 1_000_000_000},
        {"id": "t1", "offset_s": 2.0, "body": _messages("q", "a", "go"), "chunks": [_reply("b")], "duration_ns": 1_000_000_000},
        {"id": "t1b", "offset_s": 4.0, "body": _messages("q", "a", "go"), "chunks": [_reply("c")], "duration_ns": 1_000_000_000},
    ]
    write_capture(tmp_path / "cap", exchanges)
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert rows["t1b"]["parent_id"] == "t0" and rows["t1b"]["think_ns"] == pytest.approx(1e9, abs=1e4)
    assert plan["t1b"][3] == rows["t1b"]["think_ns"]
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        s = speed_stats(a, ["session"])["groups"][0]["session"]
    assert s["makespan_s"] == pytest.approx(s["engine_s"] + s["think_s"], abs=1e-5) and s["think_s"] == pytest.approx(2, abs=1e-5)


def _anthropic_call(name: str, partial: str) -> bytes:
    events = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "c", "content": []},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "tu_1", "name": name, "input": {}},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": partial}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


@pytest.mark.parametrize("streamed, sent_back", [('{"tz": "UTC"}', {"tz": "UTC"}), ("", {})])
def test_a_call_of_no_arguments_links_the_turn_that_answers_it(tmp_path, streamed, sent_back):
    """Anthropic streams a call of no arguments as "" and the client sends it back as {}: the turn that
    answered it started a session of its own."""
    asked = [{"role": "user", "content": "time?"}]
    answered = [
        *asked,
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_1", "name": "now", "input": sent_back}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_1", "content": "noon"}]},
    ]
    common = {"path": "/v1/messages", "content_type": "text/event-stream"}
    exchanges = [
        {
            **common,
            "id": "m0",
            "body": {"model": "c", "max_tokens": 9, "stream": True, "messages": asked},
            "chunks": [_anthropic_call("now", streamed)],
        },  # fmt: skip
        {
            **common,
            "id": "m1",
            "offset_s": 1.0,
            "body": {"model": "c", "max_tokens": 9, "stream": True, "messages": answered},
        },  # fmt: skip
    ]
    write_capture(tmp_path / "cap", exchanges)
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert rows["m1"]["parent_id"] == "m0" and plan["m1"][0] == "m0"


def test_a_session_with_a_turn_b_failed_is_not_compared(tmp_path):
    """B's last turn failed fast: the session was 'compared' and B looked faster."""
    turns = [{"session": "s1", "offset_s": t, "body": _messages(*["q", "a"][: 1] * (t + 1)), "duration_ns": 1_000_000_000} for t in range(3)]  # fmt: skip
    write_capture(tmp_path / "a", turns)
    failed = [
        *turns[:2],
        {**turns[2], "status": 502, "chunks": [json.dumps(sdk_shapes.error_body("upstream")).encode()], "duration_ns": 5_000_000},
    ]
    write_capture(tmp_path / "b", failed)
    s = compare(tmp_path / "a", tmp_path / "b")["sessions"]
    assert (s["compared"], s["partial"]) == (0, 1)
    assert compare(tmp_path / "a", tmp_path / "a")["sessions"]["compared"] == 1


def test_every_session_line_counts_the_compared_sessions_alone(tmp_path):
    """B refused one session's first turn (a 404, as llama-cpp-python answers /v1/messages): compare
    said "2 of 3 compared" above "answers first differ at: turn 0", the failed session counted as
    differing there. Each line is now over the compared sessions, and says so."""

    def session(name: str, answers: list[str]) -> list[dict[str, Any]]:
        history: list[str] = []
        turns = []
        for t, answer in enumerate(answers):
            history = [*history, f"{name} q{t}"]
            turns.append({"id": f"{name}{t}", "session": name, "offset_s": t, "body": _messages(*history), "chunks": [_reply(answer)]})  # fmt: skip
            history = [*history, answer]
        return turns

    a = [*session("s1", ["a", "b"]), *session("s2", ["c", "d"]), *session("s3", ["e"])]
    write_capture(tmp_path / "a", a)
    refused = {"status": 404, "chunks": [json.dumps(sdk_shapes.error_body("Not Found", "invalid_request_error")).encode()]}
    write_capture(tmp_path / "b", [{**x, **refused} if x["session"] == "s2" else x for x in a])
    s = compare(tmp_path / "a", tmp_path / "b")["sessions"]
    assert (s["sessions"], s["multi_turn"], s["compared"], s["compared_multi_turn"], s["partial"]) == (3, 2, 2, 1, 1)
    assert s["first_differing_turn"] == {"identical": 2, "differing": 0, "by_turn": {}}
    said = " ".join(CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")]).output.split())
    assert "sessions: 3 in A (2 with more than one turn); 2 compared, every turn answered on B (1 with more than one turn), 1 left out" in said  # fmt: skip
    assert "over the 2 compared: makespan" in said and "over the 2 compared: answers first differ at: none; identical sessions 2" in said  # fmt: skip
    # The same sessions, B answering s3 otherwise: it differs at turn 0, s2 still left out.
    write_capture(tmp_path / "c", [{**x, **refused} if x["session"] == "s2" else {**x, "chunks": [_reply("z")]} if x["session"] == "s3" else x for x in a])  # fmt: skip
    other = compare(tmp_path / "a", tmp_path / "c")["sessions"]
    assert other["compared"] == 2 and other["first_differing_turn"] == {"identical": 1, "differing": 1, "by_turn": {"0": 1}}
    whole = compare(tmp_path / "a", tmp_path / "a")["sessions"]  # all matching: every session in every line
    assert (whole["compared"], whole["partial"]) == (3, 0)
    assert whole["first_differing_turn"] == {"identical": 3, "differing": 0, "by_turn": {}}


def test_a_session_of_two_captures_is_one_as_in_one_capture_and_a_replay_stays_apart(fake, tmp_path):
    """Two gateways each recorded turns of session 's-1': read together, one session of four turns,
    as one recorder would have had it (docs/metrics.md, Sessions). A replay keeps its source's
    session ids: read with its source, each of its sessions is still its own."""
    for name, start in (("gw-a", 0.0), ("gw-b", 5.0)):
        turns = [{"id": f"{name}-{t}", "session": "s-1", "offset_s": start + t * 0.1} for t in range(2)]
        write_capture(tmp_path / name, turns, run_wall=1_800_000_000.0)
    with Analysis([tmp_path / "gw-a", tmp_path / "gw-b"], cache_dir=tmp_path / "cache") as a:
        (group,) = speed_stats(a, ["session"])["groups"]
    assert group["key"] == {"session_capture": str(tmp_path / "gw-a"), "session": "s-1"}
    s = group["session"]
    assert (s["turns"], s["depth"]) == (4, 4) and s["makespan_s"] == pytest.approx(s["engine_s"] + s["think_s"], abs=1e-6)

    _, url = fake
    run_replay(ReplayConfig(tmp_path / "gw-a", url, tmp_path / "replay", probe=False, telemetry=False))
    with Analysis([tmp_path / "gw-a", tmp_path / "gw-b", tmp_path / "replay"], cache_dir=tmp_path / "cache") as a:
        groups = speed_stats(a, ["session"])["groups"]
    assert sorted((g["key"]["session_capture"], g["session"]["turns"]) for g in groups) == [
        (str(tmp_path / "gw-a"), 4),
        (str(tmp_path / "replay"), 2),
    ]


def test_an_image_sent_to_ollama_is_part_of_its_turn(tmp_path):
    """Ollama's ``/api/chat`` sends images beside a message's text (``images``, base64): they were no
    part of the turn, so two conversations that differ only in their image were one, and each next
    turn continued the other's first (the first to end that no turn continued yet)."""

    def body(image: str, *more: dict[str, Any]) -> dict[str, Any]:
        return {"model": "m", "stream": False, "messages": [{"role": "user", "content": "what is this?", "images": [image]}, *more]}  # fmt: skip

    answer = [json.dumps({"model": "m", "message": {"role": "assistant", "content": "a cat"}, "done": True}).encode()]
    again = ({"role": "assistant", "content": "a cat"}, {"role": "user", "content": "sure?"})
    second = 1_000_000_000
    exchanges = [
        {"id": "A0", "offset_s": 0.0, "body": body("AAAA"), "chunks": answer, "duration_ns": second},
        {"id": "B0", "offset_s": 0.1, "body": body("BBBB"), "chunks": answer, "duration_ns": second},
        {"id": "B1", "offset_s": 1.5, "body": body("BBBB", *again), "chunks": answer, "duration_ns": second},
        {"id": "A1", "offset_s": 1.6, "body": body("AAAA", *again), "chunks": answer, "duration_ns": second},
    ]
    write_capture(tmp_path / "cap", [{**x, "path": "/api/chat"} for x in exchanges])
    rows, plan = _turns_and_workload(tmp_path / "cap", tmp_path / "cache")
    assert {x: (r["parent_id"], r["session"], r["turn"]) for x, r in rows.items()} == {
        "A0": (None, "A0", 0),
        "B0": (None, "B0", 0),
        "B1": ("B0", "B0", 1),  # its own image's turn, not the first that ended
        "A1": ("A0", "A0", 1),
    }
    assert {x: plan[x][:3] for x in rows} == {x: (rows[x]["parent_id"], rows[x]["turn"], rows[x]["session"]) for x in rows}


def test_the_sessions_left_out_are_counted_by_why(tmp_path):
    """compare said "0 compared, 6 left out (a turn unpaired, failed or unfinished on B)", not which:
    one session's second turn missing on B, one failed, one cut ([DONE] with no finish reason)."""

    def sse(*events: str) -> bytes:
        return b"".join(b"data: " + e.encode() + b"\n\n" for e in events)

    role = json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
    text = json.dumps({"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": "stop"}]})
    streamed = {"content_type": "text/event-stream", "chunks": [sse(role, text, "[DONE]")]}
    a = []
    for name in ("s1", "s2", "s3", "s4"):
        first = {"model": "m", "stream": True, "messages": [{"role": "user", "content": f"{name} q0"}]}
        second = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "b"}, {"role": "user", "content": "q1"}]}  # fmt: skip
        a += [{"id": f"{name}t{t}", "session": name, "offset_s": t, "body": body, **streamed} for t, body in enumerate((first, second))]  # fmt: skip
    write_capture(tmp_path / "a", a)
    failed = {"status": 500, "content_type": "application/json", "chunks": [json.dumps(sdk_shapes.error_body("boom")).encode()]}
    cut = {"chunks": [sse(role, "[DONE]")]}
    b = [x for x in a if x["id"] != "s2t1"]  # s2: its second turn never sent
    b = [{**x, **failed} if x["id"] == "s3t1" else {**x, **cut} if x["id"] == "s4t1" else x for x in b]
    write_capture(tmp_path / "b", b)
    s = compare(tmp_path / "a", tmp_path / "b")["sessions"]
    assert (s["compared"], s["partial"]) == (1, 3)
    assert s["partial_by_reason"] == {"unpaired": 1, "failed": 1, "unfinished": 1}
    said = " ".join(CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "b")]).output.split())
    assert "1 compared, every turn answered on B (1 with more than one turn), 3 left out (1 a turn unpaired, 1 a turn failed on B, 1 a turn unfinished on B)" in said, said  # fmt: skip
    # Two left out for one reason, none for the others: those unsaid.
    write_capture(tmp_path / "c", [{**x, **failed} if x["id"] in ("s3t1", "s4t1") else x for x in a])
    s = compare(tmp_path / "a", tmp_path / "c")["sessions"]
    assert s["partial_by_reason"] == {"unpaired": 0, "failed": 2, "unfinished": 0}
    said = " ".join(CliRunner().invoke(cli, ["compare", str(tmp_path / "a"), str(tmp_path / "c")]).output.split())
    assert "2 compared, every turn answered on B (2 with more than one turn), 2 left out (2 a turn failed on B)" in said, said  # fmt: skip
    assert compare(tmp_path / "a", tmp_path / "a")["sessions"]["partial_by_reason"] == {"unpaired": 0, "failed": 0, "unfinished": 0}  # fmt: skip


def test_compare_says_a_chained_responses_turn_continues_the_targets_own_answer(fake, tmp_path):
    """A Responses turn naming its previous response is replayed with the id the target gave it: the
    target continues its own stored answer there, not A's, and compare said every later turn
    "replays the recorded history". It counts such sessions apart and says what they carried."""

    def answer(rid: str, text: str) -> bytes:
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        return json.dumps({"id": rid, "object": "response", "status": "completed", "output": [message]}).encode()

    chain = [
        {
            "id": f"r{t}",
            "offset_s": t * 0.2,
            "path": "/v1/responses",
            "body": {"model": "m", "input": f"tool output {t}", **({"previous_response_id": f"resp_{t - 1}"} if t else {})},
            "chunks": [answer(f"resp_{t}", f"recorded answer {t}")],
            "duration_ns": 50_000_000,
        }
        for t in range(3)
    ]
    write_capture(tmp_path / "chain", chain)
    _, url = fake
    run_replay(ReplayConfig(tmp_path / "chain", url, tmp_path / "chain-b", probe=False, sessions="closed", telemetry=False))
    sent = [json.loads(r["body"]) for r in fake[0].requests if r["path"] == "/v1/responses"]
    assert [b.get("previous_response_id") for b in sent] == [None, "resp_x_1", "resp_x_2"]  # the target's ids
    chained = compare(tmp_path / "chain", tmp_path / "chain-b")["sessions"]
    assert (chained["compared_multi_turn"], chained["compared_chained"]) == (1, 1)
    assert "continues the target's own stored answer" in chained["note"] and "replays the recorded history" not in chained["note"]
    said = " ".join(CliRunner().invoke(cli, ["compare", str(tmp_path / "chain"), str(tmp_path / "chain-b")]).output.split())
    assert "continues the target's own stored answer (chained by previous_response_id)" in said, said
    # Chat conversations replay A's answers: none is chained, and the note says the history is A's.
    src = conversations(tmp_path / "src")
    run_replay(ReplayConfig(src, url, tmp_path / "src-b", probe=False, sessions="closed", telemetry=False))
    plain = compare(src, tmp_path / "src-b")["sessions"]
    assert (plain["compared_multi_turn"], plain["compared_chained"]) == (2, 0)
    assert plain["note"] == "a later turn replays the recorded history, not what the target would have answered before it"


def _one_chain_among_lone(path: Path, lone_ns: int, chain_ns: int, chunks: list[bytes] | None = None) -> Path:
    """One session of three turns and twelve single requests, each request lasting the given ns
    (answering ``chunks`` where given)."""
    chain = [{"role": "user", "content": "q"}]
    exchanges = []
    for t in range(3):
        exchanges.append(
            {
                "id": f"c{t}",
                "session": "chain",
                "offset_s": t * 0.5,
                "duration_ns": chain_ns,
                "body": {"model": "m", "messages": chain},
            }
        )
        chain = [*chain, {"role": "assistant", "content": f"a{t}"}, {"role": "user", "content": f"again {t}"}]
    exchanges += [{"id": f"lone{i}", "offset_s": 0.1 + i * 0.1, "duration_ns": lone_ns} for i in range(12)]
    if chunks is not None:
        exchanges = [{**x, "chunks": chunks} for x in exchanges]
    write_capture(path, sorted(exchanges, key=lambda x: x["offset_s"]))
    return path


def test_the_report_draws_a_session_of_several_turns_however_many_single_requests_grew_more(tmp_path):
    # The timeline drew those of compare's ten slowest sessions with several turns: where single
    # requests grew more on B than the one chain, they filled the ten, and nothing was drawn or said.
    a = _one_chain_among_lone(tmp_path / "a", lone_ns=3_000_000, chain_ns=3_000_000)
    b = _one_chain_among_lone(tmp_path / "b", lone_ns=30_000_000, chain_ns=4_000_000)
    sessions = compare(a, b)["sessions"]
    assert all(x["turns"] == 1 for x in sessions["slowest"])  # the chain is not among the slowest ten
    assert [x["session"] for x in sessions["slowest_multi_turn"]] == ["chain"]
    section = render(a, b).split("Sessions that grew most on B")[1].split("</svg>")[0]
    assert section.count("<rect") == 2 * 3  # the chain, on A and on B, three turns each
    # Must match: where the chain is among the slowest too, it is drawn the same.
    slow = _one_chain_among_lone(tmp_path / "slow", lone_ns=3_000_000, chain_ns=30_000_000)
    assert render(a, slow).split("Sessions that grew most on B")[1].split("</svg>")[0].count("<rect") == 2 * 3


def test_the_report_says_why_no_session_is_drawn(tmp_path):
    a = _one_chain_among_lone(tmp_path / "a", lone_ns=3_000_000, chain_ns=3_000_000)
    b = tmp_path / "b"
    write_capture(b, [{"id": f"lone{i}", "offset_s": 0.1 + i * 0.1} for i in range(12)])  # no chain on B
    page = render(a, b)
    section = page.split("Sessions that grew most on B")[1].split("<h")[0]
    assert "None drawn" in section and "<svg" not in section
    assert "None drawn" not in render(a, _one_chain_among_lone(tmp_path / "same", 3_000_000, 3_000_000))  # must differ


def _section(page: str, heading: str) -> list[str]:
    section = page.split(f"<h3>{heading}</h3>")[1].split("<h3>")[0]
    return [html.unescape(p) for p in re.findall(r"<p[^>]*>(.*?)</p>", section)]


def test_the_report_gives_compares_sessions_and_engine_state_lines(tmp_path):
    # The A/B report drew the sessions that grew but never gave compare's sessions summary (makespan
    # p50 on each side, B/A with its interval), nor the engines' state (B's cached prompt share).
    cached = [json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}, "finish_reason": "stop"}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 6}}}).encode()]  # fmt: skip
    a = _one_chain_among_lone(tmp_path / "a", lone_ns=3_000_000, chain_ns=3_000_000)
    b = _one_chain_among_lone(tmp_path / "b", lone_ns=30_000_000, chain_ns=4_000_000, chunks=cached)
    as_json = json.loads(CliRunner().invoke(cli, ["compare", str(a), str(b), "--json"]).output)
    page = render(a, b)
    s = as_json["sessions"]
    lines = _section(page, "Sessions")
    assert lines[0].startswith(f"sessions: {s['sessions']} in A ({s['multi_turn']} with more than one turn)")
    makespan = lines[1]
    assert float(makespan.split("makespan p50 A ")[1].split(" s,")[0]) == pytest.approx(s["makespan_s"]["a"]["p50"], rel=5e-3)
    assert float(makespan.split(", B ")[1].split(" s,")[0]) == pytest.approx(s["makespan_s"]["b"]["p50"], rel=5e-3)
    assert float(makespan.split("B/A ")[1].split(" ")[0]) == pytest.approx(s["ratio_p50"], rel=5e-3)
    lo, hi = makespan.split("95% CI ")[1].rstrip(")").split("–")
    assert (float(lo), float(hi)) == pytest.approx(tuple(s["ratio_ci95"]), rel=5e-3)
    assert s["ratio_p50"] > 2  # must differ: B's single requests ten times as long
    state = _section(page, "Energy and the engines&#x27; state")
    share = as_json["energy"]["engine_state"]["b"]["cached_prompt_share"]
    assert share == pytest.approx(0.6) and f"engine state B: cached_prompt_share {share:.3g}" in state
    assert not any(x.startswith("engine state A") for x in state)  # A's answers say nothing of a cache
    printed = " ".join(CliRunner().invoke(cli, ["compare", str(a), str(b)]).output.split())
    assert all(" ".join(x.split()) in printed for x in lines + state)  # compare's own words, each of them
    # Must match: one run alone has no comparison to give.
    alone = render(a)
    assert "<h3>Sessions</h3>" not in alone and "engines&#x27; state" not in alone


def _embedded(vector: list[float]) -> bytes:
    data = [{"object": "embedding", "index": 0, "embedding": vector}]
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}}).encode()


def test_an_embeddings_request_whose_vectors_differ_is_a_differing_turn(tmp_path):
    """An embeddings pair had no exactness, so a session whose retrieval's vectors changed on B was
    called identical. Now its vectors are its answer: where they differ the session differs at the
    turn the request feeds (the next one sent after it, else the session's last), where they are
    identical it does not."""

    def session(name: str, turns: int, embed_after: int, vector: list[float]) -> list[dict[str, Any]]:
        history: list[str] = []
        xs: list[dict[str, Any]] = []
        for t in range(turns):
            history = [*history, f"{name} q{t}"]
            answer = f"{name} a{t}"
            xs.append({"id": f"{name}{t}", "session": name, "offset_s": 2 * t, "body": _messages(*history), "chunks": [_reply(answer)]})  # fmt: skip
            history = [*history, answer]
            if t == embed_after:  # sent after this turn ended, before the next
                body = {"model": "m", "input": f"{name} look up {t}"}
                xs.append({"id": f"{name}e", "session": name, "offset_s": 2 * t + 1, "path": "/v1/embeddings", "body": body, "chunks": [_embedded(vector)]})  # fmt: skip
        return xs

    a_vec, b_vec = [0.5, -0.25, 0.125], [0.5, 0.25, 0.125]
    write_capture(tmp_path / "a", [*session("s1", 3, 0, a_vec), *session("s2", 3, 2, a_vec)])
    write_capture(tmp_path / "b", [*session("s1", 3, 0, b_vec), *session("s2", 3, 2, b_vec)])
    write_capture(tmp_path / "same", [*session("s1", 3, 0, a_vec), *session("s2", 3, 2, a_vec)])
    differ = compare(tmp_path / "a", tmp_path / "b")
    assert differ["divergence"]["embeddings"]["differ"] == 2, differ["divergence"]["embeddings"]
    s = differ["sessions"]
    assert (s["sessions"], s["compared"]) == (2, 2), s
    # s1's embeddings feed its turn 1; s2's came after its last turn (2)
    assert s["first_differing_turn"] == {"identical": 0, "differing": 2, "by_turn": {"1": 1, "2": 1}}, s
    assert {row["session"]: row["first_differing_turn"] for row in s["slowest"]} == {"s1": 1, "s2": 2}
    same = compare(tmp_path / "a", tmp_path / "same")
    assert same["divergence"]["embeddings"]["identical"] == 2, same["divergence"]["embeddings"]
    assert same["sessions"]["first_differing_turn"] == {"identical": 2, "differing": 0, "by_turn": {}}


def test_a_session_whose_embeddings_request_failed_on_one_side_is_not_called_identical(tmp_path):
    """An embeddings pair one side failed has no exactness: its session was called identical though B's
    retrieval got no vectors. Now such a session is not compared (as one whose turn B failed is); one
    whose embeddings were answered alike on both sides still is, and identical."""
    vector = [0.5, -0.25, 0.125]

    def run(embedded: dict[str, Any]) -> list[dict[str, Any]]:
        history: list[str] = []
        xs: list[dict[str, Any]] = []
        for t in range(2):
            history = [*history, f"q{t}"]
            xs.append({"id": f"s{t}", "session": "s", "offset_s": 2 * t, "body": _messages(*history), "chunks": [_reply(f"a{t}")]})  # fmt: skip
            history = [*history, f"a{t}"]
            if t == 0:
                xs.append({"id": "se", "session": "s", "offset_s": 1, "path": "/v1/embeddings", "body": {"model": "m", "input": "look up"}, **embedded})  # fmt: skip
        return xs

    answered = {"chunks": [_embedded(vector)]}
    write_capture(tmp_path / "a", run(answered))
    write_capture(tmp_path / "failed", run({"status": 500, "chunks": [b'{"error": "overloaded"}']}))
    write_capture(tmp_path / "same", run(answered))
    failed = compare(tmp_path / "a", tmp_path / "failed")
    assert failed["divergence"]["embeddings"]["failed"] == 1, failed["divergence"]["embeddings"]
    s = failed["sessions"]
    # Must differ from identical: B's retrieval failed, so the session is not compared.
    assert (s["sessions"], s["compared"]) == (1, 0), s
    assert s["first_differing_turn"]["identical"] == 0, s
    same = compare(tmp_path / "a", tmp_path / "same")["sessions"]
    assert (same["sessions"], same["compared"]) == (1, 1), same
    assert same["first_differing_turn"] == {"identical": 1, "differing": 0, "by_turn": {}}, same


def test_a_session_whose_embeddings_request_b_lacks_is_not_called_identical(tmp_path):
    """An embeddings request of A's session with no counterpart on B at all left the session's verdict
    alone: called identical though B never retrieved. Now it is not compared, counted unpaired, as a
    session whose turn B lacks is; with the request on B too it is compared, and identical."""
    vector = [0.5, -0.25, 0.125]

    def run(embeds: bool, turns: int = 2) -> list[dict[str, Any]]:
        history: list[str] = []
        xs: list[dict[str, Any]] = []
        for t in range(turns):
            history = [*history, f"q{t}"]
            xs.append({"id": f"s{t}", "session": "s", "offset_s": 2 * t, "body": _messages(*history), "chunks": [_reply(f"a{t}")]})  # fmt: skip
            history = [*history, f"a{t}"]
            if t == 0 and embeds:
                xs.append({"id": "se", "session": "s", "offset_s": 1, "path": "/v1/embeddings", "body": {"model": "m", "input": "look up"}, "chunks": [_embedded(vector)]})  # fmt: skip
        return xs

    write_capture(tmp_path / "a", run(embeds=True))
    write_capture(tmp_path / "lacks", run(embeds=False))
    write_capture(tmp_path / "turn", run(embeds=True, turns=1))
    write_capture(tmp_path / "same", run(embeds=True))
    lacks = compare(tmp_path / "a", tmp_path / "lacks")["sessions"]
    # Must differ from identical: B has no retrieval for the session, so it is not compared, as below.
    assert (lacks["sessions"], lacks["compared"]) == (1, 0), lacks
    assert lacks["first_differing_turn"]["identical"] == 0, lacks
    turn = compare(tmp_path / "a", tmp_path / "turn")["sessions"]  # B lacks a generation turn instead
    assert lacks["partial_by_reason"] == turn["partial_by_reason"] == {"unpaired": 1, "failed": 0, "unfinished": 0}
    # Must match: with the request on B too, the session is compared and identical.
    same = compare(tmp_path / "a", tmp_path / "same")["sessions"]
    assert (same["sessions"], same["compared"]) == (1, 1), same
    assert same["first_differing_turn"] == {"identical": 1, "differing": 0, "by_turn": {}}, same
