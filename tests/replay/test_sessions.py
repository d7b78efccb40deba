"""Agent sessions in replay: with --sessions closed a turn is sent its recorded think time after the
turn it continues ends on the target, so a slower (or faster) target is judged on sessions paced as
the agent paced them; --sessions open keeps the recorded send times (a turn never before its parent)."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.errors import ConfigError
from infertap.replay import Filters, ReplayConfig, Schedule, SessionSample, WorkloadError, run_replay
from infertap.replay.transforms import TransformError, rechained
from infertap.replay.workload import load
from tests import sdk_shapes
from tests.fake_upstream import FakeUpstream, ServerThread, lifespan, read_body
from tests.helpers import write_capture
from tests.slot_engine import SlotEngine


def _chat_reply(text: str) -> list[bytes]:
    """A whole chat answer saying ``text``, checked."""
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
    return [json.dumps(sdk_shapes.chat_completion(body)).encode()]


def _response(rid: str, text: str | None = None, **more: Any) -> dict[str, Any]:
    """A whole Responses answer of id ``rid`` (saying ``text``, if any), checked."""
    content = [{"type": "output_text", "text": text, "annotations": []}]
    output = [] if text is None else [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": content}]  # fmt: skip
    return sdk_shapes.response({"id": rid, "object": "response", "model": "m", "status": "completed", "output": output, **sdk_shapes.RESPONSE_REST, **more})  # fmt: skip


THINK_S = 0.5  # the agent's own time between a reply and its next request, as recorded
LATE_S = 0.2  # how late the replay's thread may send on a loaded 2-core machine; under the scaled think time
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
    assert all(THINK_S - 0.001 <= g < THINK_S + LATE_S for g in closed), closed  # the agent's pacing, whatever the target
    assert mean(opened) < THINK_S - 0.15, opened  # open: the recorded times, squeezed by the slower target's turns
    records = list(CaptureReader(tmp_path / "closed").exchanges())
    kept = [x["think_ns"] for x in records if x["turn"] > 0]
    assert kept and all(t == pytest.approx(THINK_S * 1e9, abs=1e6) for t in kept)
    assert all("think_ns" not in x for x in CaptureReader(tmp_path / "open").exchanges())


def _turn(tag: str, pace_ms: int, *said: str) -> dict[str, Any]:
    """A chat turn saying ``said`` (user and assistant in turn) that the fake upstream answers after ``pace_ms``."""
    roles = ["user", "assistant"] * len(said)
    messages = [{"role": role, "content": text} for role, text in zip(roles, said, strict=False)]
    return {"model": "m", "stream": False, "tag": tag, "pace_ms": pace_ms, "messages": messages}


def test_a_turn_s_think_time_runs_from_the_end_it_was_measured_from(tmp_path):
    """A and B continue R side by side; C continues A but was sent 0.2 s after B, the slower one,
    ended. Closed sessions sent C 0.2 s after A's end, while B was still running: the think time
    was kept from another end than the one it was measured from."""

    write_capture(
        tmp_path / "src",
        [  # the recorded replies are a0, a1, ...: A and B extend R's, C extends A's
            {"offset_s": 0.0, "duration_ns": 200_000_000, "body": _turn("R", 200, "q")},
            {"offset_s": 0.5, "duration_ns": 100_000_000, "body": _turn("A", 100, "q", "a0", "x")},
            {"offset_s": 0.5, "duration_ns": 1_000_000_000, "body": _turn("B", 1000, "q", "a0", "y")},
            {"offset_s": 1.7, "duration_ns": 50_000_000, "body": _turn("C", 50, "q", "a0", "x", "a1", "z")},
        ],
    )
    items, _ = load(tmp_path / "src")
    assert [i.parent for i in items] == [None, 0, 0, 1]
    assert items[3].think_from == 2 and items[3].think_ns == pytest.approx(0.2e9, abs=1e6)  # from B's end
    app = FakeUpstream()
    with ServerThread(app) as server:
        run_replay(ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", probe=False, sessions="closed", telemetry=False))
    at = {json.loads(r["body"])["tag"]: r["at"] for r in app.requests}
    assert at["C"] >= at["B"] + 1.0 + 0.2  # after B's answer (1 s, by its pace) and the think time
    sent = {json.loads(x["request_body"])["tag"]: x for x in CaptureReader(tmp_path / "out").exchanges()}
    b, c = sent["B"], sent["C"]
    assert c["think_ns"] == pytest.approx(0.2e9, abs=1e6)
    assert c["scheduled_ns"] == pytest.approx(b["sent_ns"] + b["end_ns"] + c["think_ns"], abs=50e6)  # B's end here + think
    assert c["parent_id"] == sent["A"]["id"]


def test_think_scale_scales_the_kept_think_time(tmp_path):
    src = agent_capture(tmp_path / "src")
    with ServerThread(SlotEngine(slots=4, service_s=0.05)) as server:
        run_replay(
            ReplayConfig(src, server.url, tmp_path / "half", probe=False, sessions="closed", think_scale=0.5, telemetry=False)
        )
    halved = [g for session in gaps(tmp_path / "half").values() for g in session]
    assert all(THINK_S / 2 - 0.001 <= g < THINK_S / 2 + LATE_S for g in halved), halved


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


def test_the_summary_says_which_waits_were_the_targets(tmp_path):
    src = agent_capture(tmp_path / "src")
    with ServerThread(SlotEngine(slots=1, service_s=0.3)) as server:
        closed = run_replay(ReplayConfig(src, server.url, tmp_path / "closed", probe=False, sessions="closed", telemetry=False))
        opened = run_replay(ReplayConfig(src, server.url, tmp_path / "open", probe=False, telemetry=False))
    later_turns = SESSIONS * (TURNS - 1)
    assert closed["sessions"]["mode"] == "closed" and closed["sessions"]["turns"] == later_turns
    assert closed["sessions"]["waited_for_parent"] == 0  # closed: due at the parent's end + think, never waiting on it
    assert closed["sessions"]["turn_lag_ms"]["max"] < THINK_S * 1e3 / 5
    # Open: the slower target's turns end after the next turn's recorded time, which then waits for them.
    assert opened["sessions"]["mode"] == "open" and opened["sessions"]["waited_for_parent"] > 0
    assert opened["sessions"]["parent_wait_ms"]["max"] > 50


def test_each_replayed_turn_names_the_exchange_it_continued(tmp_path):
    src = agent_capture(tmp_path / "src")
    with ServerThread(SlotEngine(slots=4, service_s=0.01)) as server:
        run_replay(ReplayConfig(src, server.url, tmp_path / "out", probe=False, telemetry=False))
    records = list(CaptureReader(tmp_path / "out").exchanges())
    by_place = {(x["session"], x["turn"]): x for x in records}
    assert len(by_place) == SESSIONS * TURNS
    for (session, turn), x in by_place.items():
        if turn == 0:
            assert "parent_id" not in x
        else:
            assert x["parent_id"] == by_place[(session, turn - 1)]["id"]  # the target-side exchange, not the source's


def test_a_turn_sent_while_a_longer_conversation_was_answered_links_as_the_analysis_links(tmp_path):
    """B carries A's conversation and reply (another agent's, alike) but was sent while A was still
    answered: no parent, so it continues C, whose answer it carries too. Replay kept only B's
    candidates down to A's, as A started before it, and left B continuing nothing; D, sent after
    A ended, continues A. The workload's links, pruned or not (a filter that keeps every request
    turns pruning off), are the analysis' ``turns``."""
    from infertap.analysis import Analysis

    def asked(*contents: str) -> dict:
        roles = ["user", "assistant"] * len(contents)
        messages = [{"role": role, "content": c} for role, c in zip(roles, contents, strict=False)]
        return {"model": "m", "messages": messages}

    def answer(text: str) -> list[bytes]:
        return _chat_reply(text)

    src = tmp_path / "src"
    write_capture(
        src,
        [  # in the order they ended, as a recorder writes them
            {"id": "C", "offset_s": 0, "body": asked("u1"), "chunks": answer("aC"), "duration_ns": 3_000_000},
            {"id": "A", "offset_s": 1, "body": asked("u1", "aC", "u2"), "chunks": answer("aA"), "duration_ns": 10 * 10**9},
            {"id": "D", "offset_s": 12, "body": asked("u1", "aC", "u2", "aA", "u4"), "chunks": answer("aD")},
            {
                "id": "B",
                "offset_s": 2,
                "body": asked("u1", "aC", "u2", "aA", "u3"),
                "chunks": answer("aB"),
                "duration_ns": 20 * 10**9,
            },
        ],
    )
    with Analysis([src], cache_dir=tmp_path / "cache") as a:
        analysed = dict(a.sql("SELECT exchange_id, parent_id FROM turns").fetchall())
    assert analysed == {"C": None, "A": "C", "B": "C", "D": "A"}
    for filters in (None, Filters.parse(["path=/v1/*"])):
        items, _ = load(src, filters=filters)
        assert {i.source_id: None if i.parent is None else items[i.parent].source_id for i in items} == analysed


def lone_capture(path: Path, n: int = 6) -> Path:
    """Requests that continue nothing: each its own session."""
    write_capture(path, [{"offset_s": 0.05 * i} for i in range(n)])
    return path


def test_sessions_are_sampled_whole_and_stably_for_a_seed(tmp_path):
    src = agent_capture(tmp_path / "src")
    every = {i.session for i in load(src)[0]}
    picks = {}
    for seed in range(12):
        try:
            items, _ = load(src, sample=SessionSample(0.5, seed))
        except WorkloadError as exc:  # three sessions, each kept at even odds: a seed may keep none
            assert "keeps none of the 3 sessions" in str(exc)
            picks[seed] = frozenset()
            continue
        kept = {i.session for i in items}
        assert kept <= every
        for session in kept:  # whole sessions: every turn, each after the turn it continues
            turns = [i for i in items if i.session == session]
            assert sorted(i.turn for i in turns) == list(range(TURNS))
            assert all(i.parent is None or items[i.parent].session == session for i in turns)
        assert [i.index for i in items] == list(range(len(items))) and items[0].offset_ns == 0
        assert {i.session for i in load(src, sample=SessionSample(0.5, seed))[0]} == kept  # stable for a seed
        picks[seed] = frozenset(kept)
    assert len(set(picks.values())) > 1  # the seed matters
    first_two = sorted(every)[:2]  # s0 and s1 start first
    assert {i.session for i in load(src, sample=SessionSample(limit=2))[0]} == set(first_two)
    # Lone requests are sessions of one: sampling keeps about the fraction of them.
    assert 0 < len(load(lone_capture(tmp_path / "lone", 40), sample=SessionSample(0.5, 1))[0]) < 40


def test_bad_sampling_is_refused_before_anything_is_sent(tmp_path):
    src = agent_capture(tmp_path / "src")
    with pytest.raises(WorkloadError, match="keeps none of the 3 sessions"):
        load(src, sample=SessionSample(1e-12, 0))
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ConfigError, match="--sample-sessions"):
            SessionSample(bad)
    with pytest.raises(ConfigError, match="--limit-sessions 0"):
        SessionSample(limit=0)
    for args in (["--sample-sessions", "0"], ["--limit-sessions", "0"], ["--sample-sessions", "1e-12"]):
        said = CliRunner().invoke(
            cli, ["replay", str(src), "--target", "http://127.0.0.1:1", "--out", str(tmp_path / "o"), *args]
        )
        assert said.exit_code != 0 and ("sessions" in said.output), said.output
    assert not (tmp_path / "o").exists()
    with pytest.raises(ConfigError, match="--think-scale nan"):
        ReplayConfig(src, "http://127.0.0.1:1", tmp_path / "o", sessions="closed", think_scale=float("nan"))


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "-1", "0", "1.5"])
@pytest.mark.parametrize("command", ["replay", "sweep"])
def test_a_sample_fraction_that_is_no_fraction_is_one_line_naming_the_option(tmp_path, command, value):
    """nan and inf parse as floats: each ends in one line naming --sample-sessions and the value, as
    the other nan and inf options do ("not a finite number", not "a fraction": nan is no number at
    all), and a number out of (0, 1] in one that asks for a fraction, before anything is sent."""
    src = agent_capture(tmp_path / "src")
    args = [command, str(src), "--target", "http://127.0.0.1:1", "--out", str(tmp_path / "o"), f"--sample-sessions={value}"]
    said = CliRunner().invoke(cli, [*args, *(["--slo", "e2e:p90<=30s", "--speeds", "1"] if command == "sweep" else [])])
    shown = "inf" if value == "1e400" else str(float(value))  # as it parsed
    why = (
        "not a finite number" if value in ("nan", "inf", "-inf", "1e400") else "a fraction of the sessions, above 0 and at most 1"
    )
    assert said.exit_code == 1 and said.output == f"Error: --sample-sessions {shown}: {why}\n", said.output
    assert not (tmp_path / "o").exists()


def test_a_sample_of_every_session_replays_them_all(tmp_path):
    """Must match: 1, the whole fraction, is a fraction; every session is replayed."""
    src = agent_capture(tmp_path / "src")
    with ServerThread(SlotEngine(slots=4, service_s=0.01)) as server:
        args = ["replay", str(src), "--target", server.url, "--out", str(tmp_path / "o"), "--no-probe", "--json"]
        said = CliRunner().invoke(cli, [*args, "--no-telemetry", "--sample-sessions", "1"])
    assert said.exit_code == 0, said.output
    assert json.loads(said.stdout)["sent"] == SESSIONS * TURNS


def test_closed_sessions_on_requests_that_continue_nothing_keep_their_times(tmp_path):
    src = lone_capture(tmp_path / "src")
    with ServerThread(SlotEngine(slots=4, service_s=0.01)) as server:
        summary = run_replay(ReplayConfig(src, server.url, tmp_path / "out", probe=False, sessions="closed", telemetry=False))
        said = CliRunner().invoke(
            cli,
            ["replay", str(src), "--target", server.url, "--out", str(tmp_path / "cli"), "--sessions", "closed", "--no-probe"],
        )
    assert summary["sent"] == 6 and summary["sessions"]["turns"] == 0
    assert said.exit_code == 0 and " ".join(said.output.split()).count("each is its own session") == 1, said.output


class ResponsesStore:
    """A Responses API server: each answer gets an id of its own; ``stores`` False forgets them all
    (a target that doesn't keep responses), so a turn naming one gets the API's 404."""

    def __init__(self, *, stores: bool = True, fail: set[int] = frozenset()) -> None:
        self.stores, self.fail = stores, fail
        self.kept: set[str] = set()
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        request = json.loads(await read_body(receive))
        self.seen.append(request)
        n = len(self.seen)
        previous = request.get("previous_response_id")
        if n - 1 in self.fail:
            status, answer = 500, {"error": {"message": "engine fell over", "type": "server_error"}}
        elif previous is not None and previous not in self.kept:
            status, answer = (
                404,
                {"error": {"message": f"Previous response with id '{previous}' not found.", "type": "invalid_request_error"}},
            )
        else:
            rid = f"resp_target_{n}"
            if self.stores:
                self.kept.add(rid)
            status = 200
            answer = _response(rid, f"answer {n}", usage=sdk_shapes.response_usage(3, 2))
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})


def chain_capture(path: Path, turns: int = 3) -> Path:
    """One Responses conversation kept by the engine: each turn names the previous response's id."""
    exchanges = []
    for t in range(turns):
        body: dict[str, Any] = {"model": "m", "input": f"step {t}"}
        if t:
            body["previous_response_id"] = f"resp_src_{t - 1}"
        answer = _response(f"resp_src_{t}", f"src {t}")
        exchanges.append({"offset_s": 0.2 * t, "path": "/v1/responses", "body": body, "chunks": [json.dumps(answer).encode()]})
    write_capture(path, exchanges)
    return path


def test_a_stateful_chain_is_replayed_with_the_targets_own_response_ids(tmp_path):
    src = chain_capture(tmp_path / "src")
    items, _ = load(src)
    assert [i.parent for i in items] == [None, 0, 1] and [i.turn for i in items] == [0, 1, 2]
    target = ResponsesStore()
    with ServerThread(target) as server:
        summary = run_replay(ReplayConfig(src, server.url, tmp_path / "out", probe=False, telemetry=False))
    assert [r.get("previous_response_id") for r in target.seen] == [None, "resp_target_1", "resp_target_2"]
    assert summary["statuses"] == {"200": 3}
    sent = [json.loads(x["request_body"]) for x in CaptureReader(tmp_path / "out").exchanges()]
    assert [b.get("previous_response_id") for b in sent] == [None, "resp_target_1", "resp_target_2"]  # recorded as sent
    assert [b["input"] for b in sent] == ["step 0", "step 1", "step 2"]  # nothing else in the body changed


def test_a_turn_naming_a_response_continues_that_one_whatever_its_session_sent_between(tmp_path):
    """A session's side request (a title) ended between the main turn and the turn naming the main
    turn's response: the replay sent that turn with the id of the side request's answer."""

    def answer(rid: str) -> list[bytes]:
        return [json.dumps(_response(rid)).encode()]

    session = {"session": "S1", "path": "/v1/responses"}
    write_capture(
        tmp_path / "src",
        [
            {**session, "offset_s": 0.0, "body": {"model": "m", "input": "write a poem"}, "chunks": answer("resp_A")},
            {**session, "offset_s": 0.05, "body": {"model": "m", "input": "a title"}, "chunks": answer("resp_B")},
            {**session, "offset_s": 0.2, "body": {"model": "m", "input": "shorter", "previous_response_id": "resp_A"}},
        ],
    )
    assert [i.parent for i in load(tmp_path / "src")[0]] == [None, 0, 0]
    target = ResponsesStore()
    with ServerThread(target) as server:
        run_replay(ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", probe=False, telemetry=False))
    assert target.seen[2].get("previous_response_id") == "resp_target_1"  # the poem's, not the title's (_2)


def test_a_target_that_keeps_no_responses_fails_the_chain_with_its_own_error(tmp_path):
    src = chain_capture(tmp_path / "src")
    target = ResponsesStore(stores=False)
    with ServerThread(target) as server:
        summary = run_replay(ReplayConfig(src, server.url, tmp_path / "out", probe=False, telemetry=False))
    # The second turn gets the target's own 404, recorded and counted; the third continues a turn that got
    # no response id, so it is refused, not sent with the recorded engine's id.
    assert summary["statuses"] == {"200": 1, "404": 1, "None": 1} and summary["ends"]["refused"] == 1
    assert [r.get("previous_response_id") for r in target.seen] == [None, "resp_target_1"]


def test_a_turn_whose_parent_got_no_id_is_refused_not_sent_stale(tmp_path):
    src = chain_capture(tmp_path / "src")
    target = ResponsesStore(fail={0})  # the first turn fails: the target gives it no response id
    with ServerThread(target) as server:
        summary = run_replay(ReplayConfig(src, server.url, tmp_path / "out", probe=False, telemetry=False))
    assert len(target.seen) == 1  # the later turns were never sent with the recorded engine's ids
    assert summary["ends"]["refused"] == 2
    refused = [x for x in CaptureReader(tmp_path / "out").exchanges() if x["end"] == "refused"]
    assert len(refused) == 2 and all("previous_response_id" in x["error"] for x in refused)
    assert summary["not_sent"] == 2


def test_a_turn_whose_named_response_was_filtered_out_is_refused_not_sent_on_its_session(tmp_path):
    """The turn naming resp_2 is linked by its session header to the first turn once the filter drops
    the second: it was sent with the id the target gave the first turn's answer, so the target
    answered it from another point of the conversation."""

    def answer(rid: str) -> list[bytes]:
        return [json.dumps(_response(rid)).encode()]

    turn = {"session": "s1", "path": "/v1/responses"}
    write_capture(
        tmp_path / "src",
        [
            {**turn, "offset_s": 0.0, "body": {"model": "m", "input": "one"}, "chunks": answer("resp_1")},
            {
                **turn,
                "offset_s": 0.1,
                "body": {"model": "m2", "input": "two", "previous_response_id": "resp_1"},
                "chunks": answer("resp_2"),
            },
            {**turn, "offset_s": 0.2, "body": {"model": "m", "input": "three", "previous_response_id": "resp_2"}},
        ],
    )
    target = ResponsesStore()
    with ServerThread(target) as server:
        summary = run_replay(
            ReplayConfig(
                tmp_path / "src", server.url, tmp_path / "out", probe=False, telemetry=False, filters=Filters.parse(["model=m"])
            )
        )
    assert [r["input"] for r in target.seen] == ["one"]  # "three" never went out with the first turn's new id
    assert summary["ends"] == {"complete": 1, "refused": 1} and summary["not_sent"] == 1
    first, third = CaptureReader(tmp_path / "out").exchanges()
    assert third["end"] == "refused" and "'resp_2' names a response of a turn this replay doesn't send" in third["error"]
    assert third["parent_id"] == first["id"] and "rechained_from" not in third


def test_the_summary_says_recorded_times_only_for_the_original_schedule():
    """`--concurrency 2` with open sessions printed "turns at their recorded times": nothing is sent
    at its recorded time in a closed loop."""
    from infertap.cli_replay import _session_rows

    def rows(schedule: str) -> str:
        ms = {"p50": 1.0, "p99": 2.0, "max": 3.0}
        sessions = {"mode": "open", "schedule": schedule, "turns": 4, "waited_for_parent": 2, "parent_wait_ms": ms}
        return " ".join(v for _, v in _session_rows(sessions, lambda d: "x"))

    assert "at their recorded times" in rows("original") and "later than recorded" in rows("original")
    for schedule, when in (
        ("concurrency", "as a slot freed"),
        ("concurrency-original", "as a slot freed"),
        ("rate", "scheduled"),
    ):
        text = rows(schedule)
        assert when in text and "recorded" not in text, (schedule, text)
    # --speed 2, or a --max-concurrency queue, shape the waits too: not the target's alone.
    from infertap.replay.schedule import Schedule, sessions_timed_by

    assert sessions_timed_by(Schedule("original")) == "original"
    for shaped in (Schedule("original", speed=2), Schedule("original", max_concurrency=1)):
        text = rows(sessions_timed_by(shaped))
        assert "scheduled" in text and "recorded" not in text and "held back by the target" not in text, text


def test_rechaining_rewrites_the_top_level_previous_response_id_only():
    """A ``metadata`` entry of the same name came first and was the one rewritten; every other byte stays."""
    body = (
        b'{"model":"m","metadata":{"previous_response_id":"resp_META"},'
        b'"input":["previous_response_id",{"previous_response_id":"resp_IN"}],"previous_response_id" : "resp_OLD"}'
    )
    assert rechained(body, "resp_NEW") == body.replace(b'"resp_OLD"', b'"resp_NEW"')
    escaped = b'{"previous\\u005fresponse_id":"resp_OLD","x":1.50}'
    assert rechained(escaped, "resp_NEW") == b'{"previous\\u005fresponse_id":"resp_NEW","x":1.50}'
    for ambiguous in (b'{"previous_response_id":"a","previous_response_id":"b"}', b'{"x":{"previous_response_id":"a"}}'):
        with pytest.raises(TransformError, match="previous_response_id"):
            rechained(ambiguous, "resp_NEW")


def _blocked_turn_capture(path: Path, end: str, status: int, *, turns: tuple[int, ...] = (0, 1, 2)) -> Path:
    """Session s1: turn 0 answered (ends at 0.1 s), a turn at 0.5 s that ended at once (``end``,
    ``status``), then at 1.0 s a turn continuing turn 0's conversation; ``turns``: which of them."""

    def reply(text: str) -> list[bytes]:
        return _chat_reply(text)

    first = [{"role": "user", "content": "hi"}]
    after = [*first, {"role": "assistant", "content": "a0"}]
    exchanges = [
        {"id": "t0", "offset_s": 0, "body": {"model": "m", "messages": first}, "chunks": reply("a0"), "duration_ns": 10**8},
        {
            "id": "t1",
            "offset_s": 0.5,
            "body": {"model": "m", "messages": [*after, {"role": "user", "content": "blocked"}]},
            "chunks": [],
            "status": status,
            "end": end,
            "duration_ns": 10**6,
        },
        {
            "id": "t2",
            "offset_s": 1.0,
            "body": {"model": "m", "messages": [*after, {"role": "user", "content": "next"}]},
            "chunks": reply("a2"),
            "duration_ns": 10**8,
        },
    ]
    write_capture(path, [{**exchanges[t], "session": "s1"} for t in turns], run_wall=1_800_000_000.0)  # one clock
    return path


@pytest.mark.parametrize(("end", "status", "think_ms"), [("refused", 444, 900), ("complete", 500, 499)])
def test_a_turn_infertap_refused_is_linked_alike_by_replay_and_the_analysis(tmp_path, end, status, think_ms):
    """A turn infertap refused (never sent; a replay doesn't send it) is a leaf of its session in the
    analysis as in replay: the next turn's think time runs from the last end the engine gave (turn
    0's, 900 ms), not from the refusal's (499 ms), and a session's makespan is its engine time plus
    its think time. A turn that was sent and failed is a turn like any other: the think time runs
    from its end in both. Read together with another recording, the join links it alike."""
    from infertap.analysis import Analysis

    src = _blocked_turn_capture(tmp_path / "src", end, status)
    items, _ = load(src)
    replayed = {i.source_id: (i.turn, i.think_ns) for i in items}
    assert replayed["t2"] == (1, think_ms * 10**6)
    assert ("t1" in replayed) is (end != "refused")  # infertap refused it: never sent, not replayed
    with Analysis([src], cache_dir=tmp_path / "cache") as a:
        turns = {r[0]: (r[1], r[2]) for r in a.sql("SELECT exchange_id, turn, think_ns FROM turns").fetchall()}
    assert {k: v for k, v in turns.items() if k in replayed} == replayed
    assert turns["t1"][0] == 1  # in its session still, as the turn after turn 0
    result = CliRunner().invoke(cli, ["stats", str(src), "--by", "session", "--json", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    (group,) = [g for g in json.loads(result.output)["groups"] if g.get("session")]
    session = group["session"]
    if end == "refused":
        assert session["makespan_s"] == pytest.approx(session["engine_s"] + session["think_s"])
    # Two gateways' recordings of the one session, read together: linked by the same rule.
    gw_a = _blocked_turn_capture(tmp_path / "gw-a", end, status, turns=(0, 2))
    gw_b = _blocked_turn_capture(tmp_path / "gw-b", end, status, turns=(1,))
    with Analysis([gw_a, gw_b], cache_dir=tmp_path / "cache") as a:
        joined = {r[0]: r[1] for r in a.sql("SELECT exchange_id, think_ns FROM metrics WHERE generation").fetchall()}
    assert joined["t2"] == think_ms * 10**6


def test_a_replay_says_how_many_exchanges_the_recorder_refused_and_sends_none(tmp_path):
    """A turn the recorder refused was never sent upstream: the replay sends it not, and says so (on
    stderr, in the summary and in its capture's header); a capture with none says nothing of it."""
    app = FakeUpstream()
    with ServerThread(app) as server:
        for end, status, told in (("refused", 444, 1), ("complete", 500, 0)):
            src = _blocked_turn_capture(tmp_path / f"src-{end}", end, status)
            out = tmp_path / f"out-{end}"
            args = ["replay", str(src), "--target", server.url, "--out", str(out), "--no-probe", "--no-telemetry", "--json"]
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, result.output
            summary = json.loads(result.stdout)
            assert summary["source_refused"] == told and summary["sent"] == 3 - told
            header = next(r for r in CaptureReader(out).records() if r["type"] == "header")
            assert header["recorder"]["source_refused"] == told
            assert ("1 exchange not replayed: the recorder refused them" in result.stderr) is bool(told)
    # Only the turn that was sent and failed reached the target again; the refused one never did.
    assert sum(b"blocked" in r["body"] for r in app.requests) == 1


def test_a_turn_s_think_time_runs_from_its_parent_s_end_when_the_target_ends_that_last(tmp_path):
    """C continues A and was sent 0.2 s after B (beside A) ended, as recorded; on the target A ends
    last. C was sent its think time after B's end, then held for A and sent the instant A ended:
    no think time after the turn it continues, while its capture said 0.2 s was kept. The think
    time runs from the later of the two ends here."""

    write_capture(
        tmp_path / "src",
        [  # recorded: A short, B long; on the target (pace_ms) A is the long one
            {"offset_s": 0.0, "duration_ns": 200_000_000, "body": _turn("R", 0, "q")},
            {"offset_s": 0.5, "duration_ns": 100_000_000, "body": _turn("A", 800, "q", "a0", "x")},
            {"offset_s": 0.5, "duration_ns": 1_000_000_000, "body": _turn("B", 0, "q", "a0", "y")},
            {"offset_s": 1.7, "duration_ns": 50_000_000, "body": _turn("C", 0, "q", "a0", "x", "a1", "z")},
        ],
    )
    items, _ = load(tmp_path / "src")
    assert [i.parent for i in items] == [None, 0, 0, 1] and items[3].think_from == 2
    app = FakeUpstream()
    with ServerThread(app) as server:
        for scale in (1.0, 0.5):
            out = tmp_path / f"out-{scale}"
            run_replay(
                ReplayConfig(
                    tmp_path / "src", server.url, out, probe=False, sessions="closed", think_scale=scale, telemetry=False
                )
            )
            sent = {json.loads(x["request_body"])["tag"]: x for x in CaptureReader(out).exchanges()}
            a, b, c = sent["A"], sent["B"], sent["C"]
            a_end, b_end = a["sent_ns"] + a["end_ns"], b["sent_ns"] + b["end_ns"]
            assert b_end < a_end  # the target ended the parent last
            assert c["think_ns"] == round(0.2e9 * scale)
            assert c["scheduled_ns"] >= a_end + c["think_ns"]  # due its think time after its parent's end here
            assert c["sent_ns"] >= a_end + c["think_ns"]  # never sent before
            assert c["dep_wait_ns"] == 0  # its parent had ended when it was due


class FailingTag(FakeUpstream):
    """The fake upstream, answering a request tagged ``fail`` with a 500."""

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_body(receive)
        if json.loads(body).get("tag") != "fail":
            queue = [{"type": "http.request", "body": body, "more_body": False}]
            await super()._handle(scope, lambda: _pop(queue), send)
            return
        self.requests.append({"path": scope["path"], "headers": scope["headers"], "body": body, "at": 0.0})
        await send({"type": "http.response.start", "status": 500, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps(sdk_shapes.error_body("engine fell over")).encode()})


async def _pop(queue: list[dict[str, Any]]) -> dict[str, Any]:
    return queue.pop(0)


def test_a_turn_whose_parent_failed_on_the_target_is_sent_its_think_time_after_that_failure(tmp_path):
    """A chat turn carries the recorded conversation, not the target's answer: its parent failing
    here doesn't stop it; it is sent, its think time after the failure, and counted apart."""

    def turn(tag: str, *said: str) -> dict[str, Any]:
        roles = ["user", "assistant"] * len(said)
        messages = [{"role": role, "content": text} for role, text in zip(roles, said, strict=False)]
        return {"model": "m", "stream": False, "tag": tag, "messages": messages}

    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0.0, "duration_ns": 100_000_000, "body": turn("fail", "q")},
            {"offset_s": 0.4, "duration_ns": 100_000_000, "body": turn("next", "q", "a0", "x")},
        ],
    )
    app = FailingTag()
    with ServerThread(app) as server:
        summary = run_replay(
            ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", probe=False, sessions="closed", telemetry=False)
        )
    assert summary["failures"] == {"500": 1} and summary["ok"] == 1 and summary["sessions"]["turns"] == 1
    first, second = sorted(CaptureReader(tmp_path / "out").exchanges(), key=lambda x: x["turn"])
    assert first["status"] == 500 and second["status"] == 200 and second["parent_id"] == first["id"]
    assert second["think_ns"] == 300_000_000
    assert second["sent_ns"] >= first["sent_ns"] + first["end_ns"] + second["think_ns"]


def _sessions_capture(path: Path) -> Path:
    """A GET /v1/models, then three sessions: s0 forks (A and B continue R), s1 has a turn the
    recorder refused, s2 is plain."""

    def turn(*said: str) -> dict[str, Any]:
        roles = ["user", "assistant"] * len(said)
        return {"model": "m", "messages": [{"role": r, "content": t} for r, t in zip(roles, said, strict=False)]}

    def reply(text: str) -> list[bytes]:
        return _chat_reply(text)

    exchanges: list[dict[str, Any]] = [{"id": "models", "offset_s": 0.0, "method": "GET", "path": "/v1/models", "body": b""}]
    for s in range(3):
        o = 0.01 + s * 0.05
        exchanges += [
            {"id": f"{s}R", "offset_s": o, "body": turn(f"q{s}"), "chunks": reply(f"a{s}"), "duration_ns": 10**8},
            {"id": f"{s}A", "offset_s": o + 0.3, "body": turn(f"q{s}", f"a{s}", "x"), "chunks": reply(f"b{s}")},
        ]
    exchanges += [
        {"id": "0B", "offset_s": 0.32, "body": turn("q0", "a0", "y"), "chunks": reply("c0")},
        {"id": "1X", "offset_s": 0.2, "body": turn("q1", "a1", "blocked-turn"), "chunks": [], "status": 444, "end": "refused"},
    ]
    write_capture(path, sorted(exchanges, key=lambda x: x["offset_s"]), run_wall=1_800_000_000.0)
    return path


def test_sampled_sessions_are_the_analysis_sessions_and_say_only_their_own_refusals(tmp_path):
    """--limit-sessions 1 replayed only the GET /v1/models (a session of its own to sampling, no
    session to the analysis), and every sample said all three exchanges the recorder refused
    were left out, whichever sessions held them."""
    src = _sessions_capture(tmp_path / "src")
    app = FakeUpstream()
    seen = {}
    with ServerThread(app) as server:
        for n, sent, refused in ((1, 3, 0), (2, 5, 1), (3, 7, 1)):
            out = tmp_path / f"out-{n}"
            args = ["replay", str(src), "--target", server.url, "--out", str(out), "--no-probe", "--no-telemetry", "--json"]
            result = CliRunner().invoke(cli, [*args, "--limit-sessions", str(n)])
            assert result.exit_code == 0, result.output
            summary = json.loads(result.stdout)
            assert (summary["sent"], summary["source_refused"]) == (sent, refused)
            assert ("1 exchange not replayed" in result.stderr) is bool(refused)
            header = next(r for r in CaptureReader(out).records() if r["type"] == "header")
            assert header["recorder"]["source_refused"] == refused
            stats = CliRunner().invoke(cli, ["stats", str(out), "--by", "session", "--json", "--cache-dir", str(tmp_path / "c")])
            groups = [g for g in json.loads(stats.stdout)["groups"] if g.get("session")]
            seen[n] = {g["key"]["session"]: g["session"]["turns"] for g in groups}
        every = CliRunner().invoke(
            cli,
            [
                "replay",
                str(src),
                "--target",
                server.url,
                "--out",
                str(tmp_path / "all"),
                "--no-probe",
                "--no-telemetry",
                "--json",
            ],
        )
    assert seen == {1: {"0R": 3}, 2: {"0R": 3, "1R": 2}, 3: {"0R": 3, "1R": 2, "2R": 2}}  # whole sessions, forks too
    assert json.loads(every.stdout)["sent"] == 8 and json.loads(every.stdout)["source_refused"] == 1  # the GET with them
    assert not any(b"blocked-turn" in r["body"] for r in app.requests)  # the refused turn never went out
    with pytest.raises(WorkloadError, match="keeps none of the 3 sessions"):
        load(src, sample=SessionSample(1e-12, 0))


def test_the_summary_counts_one_turn_as_one_turn(tmp_path):
    """A session of two turns replayed closed printed "1 turns closed"."""
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    exchanges = [{"offset_s": t * 0.2, "session": "s0", "duration_ns": 10_000_000, "body": {**body, "n": t}} for t in range(2)]
    src = tmp_path / "src"
    write_capture(src, exchanges)
    with ServerThread(FakeUpstream()) as server:
        said = CliRunner().invoke(
            cli,
            ["replay", str(src), "--target", server.url, "--out", str(tmp_path / "out"), "--no-probe", "--no-telemetry"]
            + ["--sessions", "closed"],
        )
    assert said.exit_code == 0, said.output
    assert "1 turn closed" in said.output and "1 turns" not in said.output, said.output
