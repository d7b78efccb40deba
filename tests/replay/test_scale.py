"""Scale-out: sharding, distributed replay on a local Ray cluster, partitioned Parquet export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from pathlib import Path
from typing import Any

import duckdb
import pytest
import ray

from infertap.analysis import Analysis
from infertap.capture.identity import workload_identity
from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED
from infertap.replay import ReplayConfig, ReplayError, ReplayStats, Schedule, ScheduleError, Transforms, load, run_replay
from infertap.replay.api import _prepare, _recorder
from infertap.replay.distributed import (
    DistributedReplayError,
    ShardWorker,
    _clock_offset,
    _start_workers,
    merge_segments,
    run_sharded,
)
from infertap.replay.shards import shard_schedules, split
from infertap.replay.workload import Item
from tests.helpers import decompressed_bytes, write_capture


def workload(tmp_path: Path, *, turns: int = 3, conversations: int = 4, singles: int = 12, span_s: float = 1.2) -> Path:
    """Conversations (a session header each) interleaved with single requests, spread over ``span_s``."""
    xs = []
    n = conversations * turns + singles
    for i in range(n):
        conv = i % (conversations + 3)
        session = (
            f"conv-{conv}" if conv < conversations and sum(1 for x in xs if x.get("session") == f"conv-{conv}") < turns else None
        )
        tag = f"t{i}"
        xs.append(
            {
                "offset_s": i * span_s / n,
                "session": session,
                "body": {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": True, "n_chunks": 3, "tag": tag},
            }
        )
    write_capture(tmp_path / "src", xs)
    return tmp_path / "src"


def test_shards_keep_conversations_whole_and_balance_the_load(tmp_path: Path) -> None:
    items, _ = load(workload(tmp_path, conversations=5, turns=4, singles=9))
    assert sum(1 for item in items if item.parent is not None) == 5 * 3
    parts = split(items, 3)
    assert sorted(g for part in parts for g in part.origin) == list(range(len(items)))  # each item once
    shard_of = {g: part.index for part in parts for g in part.origin}
    for item in items:
        if item.parent is not None:
            assert shard_of[item.index] == shard_of[item.parent]  # a conversation on one shard
    for part in parts:
        for local in part.items:  # parents re-indexed within the shard, pointing at the same exchange
            assert part.items[local.index] is local
            if local.parent is not None:
                assert part.origin[local.parent] == items[part.origin[local.index]].parent
    sizes = [len(part.items) for part in parts]
    assert max(sizes) - min(sizes) <= 4  # dealt by load, within one conversation's length
    assert len(split(items, 100)) == 5 + 9  # no more shards than conversations
    with pytest.raises(ScheduleError):
        split(items, 0)


def test_a_turn_stays_on_the_shard_of_the_turn_its_think_time_runs_from() -> None:
    """Two trees of one explicit session: a turn of the first measured its think time from the
    end of the second's turn (it ended later), and waits for it with --sessions closed."""

    def item(index: int, parent: int | None = None, think_from: int | None = None) -> Item:
        return Item(index, f"x{index}", "POST", "/v1/chat/completions", "", [], index, 1, parent=parent, think_from=think_from)

    items = [item(0), item(1), item(2), item(3, parent=0, think_from=2)]
    parts = split(items, 3)
    assert sorted(part.origin for part in parts) == [[0, 2, 3], [1]]
    (together,) = [part for part in parts if len(part.items) == 3]
    assert [(i.parent, i.think_from) for i in together.items] == [(None, None), (None, None), (0, 1)]  # re-indexed


def test_shard_schedules_divide_closed_loop_limits() -> None:
    assert [s.concurrency for s in shard_schedules(Schedule("concurrency", concurrency=7), 3)] == [3, 2, 2]
    assert [s.max_concurrency for s in shard_schedules(Schedule("rate", rate=5, max_concurrency=4), 2)] == [2, 2]
    assert shard_schedules(Schedule("original", speed=2), 2) == [Schedule("original", speed=2)] * 2
    with pytest.raises(ScheduleError, match="can't be split"):
        shard_schedules(Schedule("concurrency-original"), 2)
    with pytest.raises(ScheduleError, match="--shards 2 or fewer"):
        shard_schedules(Schedule("concurrency", concurrency=2), 3)


def sent_as_scheduled(path: Path) -> dict[str, dict[str, Any]]:
    """Each replayed exchange of a capture by its source's id: its run, the request it sent, when it
    was due (``scheduled_ns``, since its run's start) and the lag infertap measured sending it."""
    run, out = None, {}
    for r in CaptureReader(path).records():
        if r["type"] == "header":
            run = r["run_id"]
        elif r["type"] == "exchange":
            request = (r["method"], r["path"], r["query"], bytes(r["request_body"]))
            out[r["source_id"]] = {"run": run, "request": request, "scheduled_ns": r["scheduled_ns"], "lag_ns": r.get("lag_ns")}
    return out


def test_sharded_replay_sends_what_a_single_process_sends_at_the_same_times(fake, tmp_path, ray_cluster) -> None:
    app, url = fake
    src = workload(tmp_path)
    single = run_replay(ReplayConfig(src, url, tmp_path / "single", probe=False))
    single_bodies = sorted(r["body"] for r in app.requests)
    app.requests.clear()
    sharded = run_replay(ReplayConfig(src, url, tmp_path / "sharded", probe=False, ray=ray_cluster, shards=2))
    sharded_bodies = sorted(r["body"] for r in app.requests)

    assert sharded_bodies == single_bodies and len(sharded_bodies) == 24  # the same exchanges, each once
    assert sharded["sent"] == single["sent"] == 24 and sharded["ends"] == {"complete": 24}
    assert len(sharded["workers"]) == 2 and sum(w["sent"] for w in sharded["workers"]) == 24
    # The same times, as scheduled, not as this host managed to send them (a loaded machine is late
    # by its own lag, which infertap records and which is no part of the schedule): every exchange,
    # in either capture, due at its source's offset, to the nanosecond, from the start of its run...
    alone, together = sent_as_scheduled(tmp_path / "single"), sent_as_scheduled(tmp_path / "sharded")
    assert set(alone) == set(together) == {f"src-{i}" for i in range(24)}
    assert {s: x["request"] for s, x in together.items()} == {s: x["request"] for s, x in alone.items()}
    items, _ = load(src)
    offset = dict(zip((i.source_id for i in items), Schedule("original").offsets(items), strict=True))
    for name, sent in (("single", alone), ("sharded", together)):
        starts = defaultdict(set)  # each run's start, as its exchanges' schedules give it
        for s, x in sent.items():
            starts[x["run"]].add(x["scheduled_ns"] - offset[s])
        assert len(starts) == (2 if name == "sharded" else 1) and all(len(t) == 1 for t in starts.values()), (name, starts)
    # ...and the shards' runs started together, one schedule: the same schedule identity (send times
    # from the first request's, whole milliseconds) as the single process's, and the same requests.
    assert workload_identity(tmp_path / "sharded") == workload_identity(tmp_path / "single")
    # The lag is what infertap measured, recorded for every exchange; how small it is is this host's.
    assert all(isinstance(x["lag_ns"], int) and x["lag_ns"] >= 0 for x in [*alone.values(), *together.values()])
    assert all(w["lag_ms"]["p99"] is not None for w in sharded["workers"]) and sharded["lag_ms"]["max"] is not None
    # The shards' one schedule, on the driver's clock: the rate it asked is the single process's.
    assert sharded["request_rate"]["scheduled"] == pytest.approx(single["request_rate"]["scheduled"], rel=1e-3)

    reader = CaptureReader(tmp_path / "sharded")
    records = list(reader.records())
    assert reader.closed_cleanly and reader.torn == []
    every = [r for r in records if r["type"] == "header"]
    headers = [h for h in every if h["recorder"]["kind"] != "telemetry"]
    assert len({h["capture_id"] for h in every}) == 1 and len({h["run_id"] for h in headers}) == 2
    # The driver's telemetry (this machine's host, the target's /metrics) is a run of its own, after the shards'.
    [telemetry_run] = {h["run_id"] for h in every if h["recorder"]["kind"] == "telemetry"}
    samples = [r for r in records if r["type"] == "telemetry" and r["source"] == "host"]
    sent = [r["wall"] for r in records if r["type"] == "exchange"]
    assert samples and min(r["wall"] for r in samples) <= max(sent)  # sampled while the shards ran
    recorder_of_run = {h["run_id"]: h["recorder"]["id"] for h in headers}
    assert sorted(w["recorder_id"] for w in sharded["workers"]) == sorted(recorder_of_run.values())
    # Conversations stayed on one shard: every exchange of a session was recorded by one worker.
    run, session_runs = None, defaultdict(set)
    for r in records:
        if r["type"] == "header":
            run = r["run_id"]
        elif r["type"] == "exchange" and r.get("session"):
            session_runs[r["session"]].add(run)
    # Every exchange records its session: the four conversations, and each lone request as a session of its own.
    assert {s for s in session_runs if s.startswith("conv-")} == {f"conv-{c}" for c in range(4)}
    assert all(len(runs) == 1 for runs in session_runs.values())
    sources = Counter(r["source_id"] for r in records if r["type"] == "exchange")
    assert set(sources) == {f"src-{i}" for i in range(24)} and set(sources.values()) == {1}


def test_the_live_progress_of_a_sharded_replay_counts_its_errors_as_one_process_does(fake, tmp_path, ray_cluster) -> None:
    """The progress display's errors (generation requests not answered 2xx in full) stayed 0 on Ray."""
    _, url = fake
    chat = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True, "n_chunks": 2}
    write_capture(
        tmp_path / "src",
        [{"offset_s": i * 0.02, "body": chat, **({"path": "/status/500"} if i % 3 == 0 else {})} for i in range(12)],
    )
    seen: dict[str, list[int]] = {}
    for name, address in (("single", None), ("sharded", ray_cluster)):
        ticks = seen[name] = []
        config = ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, ray=address, shards=2 if address else None)
        run_replay(config, progress=lambda live, ticks=ticks: ticks.append(live.generation_failed))
    assert seen["single"][-1] == seen["sharded"][-1] == 4, seen


def test_each_shard_s_unfinished_answers_reach_the_merged_summary(fake, tmp_path, ray_cluster) -> None:
    """A stream the target ended with [DONE] and no finish reason is unfinished, not ok: counted by
    the shard that sent it and added up by the driver, as one process counts them (summary and live errors)."""
    _, url = fake
    chat = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True, "n_chunks": 2}
    bodies = [{**chat, "tag": f"t{i}", **({"no_finish": True} if i % 3 == 0 else {})} for i in range(12)]
    write_capture(tmp_path / "src", [{"offset_s": i * 0.02, "body": b} for i, b in enumerate(bodies)])
    for name, address in (("single", None), ("sharded", ray_cluster)):
        ticks: list[int] = []
        config = ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, ray=address, shards=2 if address else None)
        summary = run_replay(config, progress=lambda live, ticks=ticks: ticks.append(live.generation_failed))
        assert (summary["ok"], summary["unfinished"], summary["failed"]) == (8, 4, 0), name
        assert ticks[-1] == 4, (name, ticks)
    # Both shards sent some of the cut ones: the merged 4 is a sum, not one shard's count.
    run, cut_runs = None, Counter()
    for r in CaptureReader(tmp_path / "sharded").records():
        if r["type"] == "header":
            run = r["run_id"]
        elif r["type"] == "exchange" and b'"no_finish"' in r["request_body"]:
            cut_runs[run] += 1
    assert sum(cut_runs.values()) == 4 and len(cut_runs) == 2, cut_runs


def test_each_shard_s_output_tokens_reach_the_merged_summary(fake, tmp_path, ray_cluster) -> None:
    """Output tokens/s over the merged span, of every shard's answers' counts: the same as one process
    gives, not one shard's (each counts its answers' tokens, the driver adds them up)."""
    _, url = fake
    chat = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True, "n_chunks": 3}
    usage = {"stream_options": {"include_usage": True}}
    whole = {"path": "/v1/responses", "body": {"model": "m", "input": "q", "stream": False}}  # a body of no count
    records = [{"body": {**chat, "tag": f"t{i}", **usage}} if i % 4 else whole for i in range(12)]  # every fourth has none
    write_capture(tmp_path / "src", [{"offset_s": i * 0.02, **r} for i, r in enumerate(records)])
    for name, address in (("single", None), ("sharded", ray_cluster)):
        config = ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, ray=address, shards=2 if address else None)
        summary = run_replay(config)
        counts = {"total": 9 * 3, "counted": 9, "unknown": 3, "source": {"usage": 9}, "by_source": {"usage": 27}}
        assert summary["output_tokens"] == counts, (name, summary["output_tokens"])
        tp = summary["throughput"]
        assert tp["output_tokens_per_s"] == pytest.approx(27 / tp["span_s"]), name


def test_each_shard_s_own_unfinished_count_is_in_its_workers_entry(fake, tmp_path, ray_cluster) -> None:
    """--json's ``workers`` says how many answers each shard's target cut, not the merged total
    alone: a shard that got 3 of them says 3, the one that got 1 says 1."""
    _, url = fake
    chat = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True, "n_chunks": 2}
    bodies = [{**chat, "tag": f"t{i}", **({"no_finish": True} if i in (0, 2, 4, 5) else {})} for i in range(8)]
    write_capture(tmp_path / "src", [{"offset_s": i * 0.02, "body": b} for i, b in enumerate(bodies)])
    config = ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, ray=ray_cluster, shards=2)
    summary = json.loads(json.dumps(run_replay(config)))  # as --json prints it
    assert (summary["ok"], summary["unfinished"]) == (4, 4)
    run, recorder_of_run, cut = None, {}, Counter()
    for r in CaptureReader(tmp_path / "out").records():
        if r["type"] == "header":
            run = r["run_id"]
            recorder_of_run[run] = r["recorder"]["id"]
        elif r["type"] == "exchange" and b'"no_finish"' in r["request_body"]:
            cut[recorder_of_run[run]] += 1
    by_worker = {w["recorder_id"]: w["unfinished"] for w in summary["workers"]}
    assert by_worker == dict(cut) and sorted(by_worker.values()) == [1, 3], (by_worker, cut)


def test_sharded_capture_exports_partitioned_parquet_that_round_trips(fake, tmp_path, ray_cluster) -> None:
    app, url = fake
    run_replay(ReplayConfig(workload(tmp_path), url, tmp_path / "sharded", probe=False, ray=ray_cluster, shards=2))
    out = tmp_path / "parquet"
    with Analysis([tmp_path / "sharded"], cache_dir=tmp_path / "cache") as a:
        counts = a.export_parquet(out)
        by_recorder = dict(a.query("SELECT recorder_id, count(*) FROM exchanges GROUP BY ALL").rows)
    assert len(by_recorder) == 2 and sum(by_recorder.values()) == 24
    for name, n in counts.items():
        got = duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}/{name}/**/*.parquet', hive_partitioning=true)").fetchall()
        assert got == [(n,)], name
    parts = {p.name for p in (out / "chunks").iterdir()}
    assert parts == {f"recorder_id={r}" for r in by_recorder}
    chunks = dict(
        duckdb.sql(f"SELECT recorder_id, count(DISTINCT exchange_id) FROM '{out}/chunks/*/*.parquet' GROUP BY ALL").fetchall()
    )
    assert chunks == by_recorder  # each exchange's chunks sit in its recorder's partition


def test_replay_ray_from_the_command_line(fake, tmp_path, ray_cluster) -> None:
    app, url = fake
    src = workload(tmp_path)
    cmd = [sys.executable, "-m", "infertap", "replay", str(src), "--target", url, "--out", str(tmp_path / "out"), "--no-probe"]
    done = subprocess.run([*cmd, "--ray", ray_cluster, "--shards", "2", "--json"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["sent"] == 24 and summary["shards"] == 2 and len(app.requests) == 24
    assert len(list(CaptureReader(tmp_path / "out").exchanges())) == 24
    env = {**os.environ, "COLUMNS": "200"}
    text = subprocess.run([*cmd, "--ray", ray_cluster, "--shards", "2"], capture_output=True, text=True, timeout=180, env=env)
    assert text.returncode == 0 and "replay workers (Ray)" in text.stdout and "shard0" in text.stdout
    assert "errors 0" in text.stdout and "same host" in text.stdout


def test_bad_ray_inputs_fail_clearly_before_sending(fake, tmp_path, monkeypatch) -> None:
    app, url = fake
    src = workload(tmp_path)
    cmd = [sys.executable, "-m", "infertap", "replay", str(src), "--target", url, "--no-probe", "--out", str(tmp_path / "o")]
    usage = subprocess.run([*cmd, "--shards", "2"], capture_output=True, text=True, timeout=60)
    assert usage.returncode == 2 and "--shards needs --ray" in usage.stderr
    nobody = subprocess.run([*cmd, "--ray", "127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert (
        nobody.returncode == 1 and "no Ray cluster answers at 127.0.0.1:1" in nobody.stderr and "Traceback" not in nobody.stderr
    )
    original = subprocess.run(
        [*cmd, "--ray", "127.0.0.1:1", "--concurrency", "original"], capture_output=True, text=True, timeout=60
    )
    assert original.returncode == 1 and "can't be split" in original.stderr
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    with pytest.raises(ReplayError, match=r"infertap\[scale\]"):
        run_replay(ReplayConfig(src, url, tmp_path / "o2", probe=False, ray=""))
    assert app.requests == [] and not (tmp_path / "o").exists() and not (tmp_path / "o2").exists()


class CrashingWorker(ShardWorker):
    """Shard 1's process dies as its replay starts (a lost node, an OOM kill)."""

    def run(self, start_wall: float) -> dict:
        if self.shard.index == 1:
            os._exit(1)
        return super().run(start_wall)


def test_a_dead_worker_loses_only_its_shard_and_is_named(fake, tmp_path, ray_cluster) -> None:
    app, url = fake
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the subclass travels to the workers
    items, _ = load(workload(tmp_path))
    bodies = [item.body for item in items]
    headers = [[tuple(h) for h in item.headers] for item in items]
    with pytest.raises(DistributedReplayError, match=r"1 of 2 replay workers failed, their shards are not in .*: shard 1 on "):
        run_sharded(
            ReplayConfig(tmp_path / "src", url, tmp_path / "out", shards=2),
            items,
            bodies,
            headers,
            {"kind": "replay"},
            worker=CrashingWorker,
        )
    kept = list(CaptureReader(tmp_path / "out").exchanges())
    assert len(kept) == len(split(items, 2)[0].items) == len(app.requests) == 12  # shard 0: recorded, merged, nothing lost


def test_clock_offsets_are_measured_and_captures_append(fake, tmp_path, ray_cluster) -> None:
    app, url = fake
    probe = ray.remote(ShardWorker).remote(
        ReplayConfig(tmp_path / "src", url, tmp_path / "out", grace_s=1.0),
        split(load(workload(tmp_path))[0], 1)[0],
        [],
        [],
        None,
        {},
        "c",
    )
    offset, rtt = _clock_offset(ray, probe)
    assert rtt is not None and abs(offset) <= rtt  # one host, one clock: within the round trip's uncertainty
    ray.kill(probe)
    for _ in range(2):  # a second sharded replay into the same capture adds its shards' runs after the first's
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, ray=ray_cluster, shards=2))
    reader = CaptureReader(tmp_path / "out")
    headers = [r for r in reader.records() if r["type"] == "header"]
    kinds = [h["recorder"]["kind"] for h in headers]  # each replay: its two shards' runs, then its driver's telemetry
    assert kinds == ["replay", "replay", "telemetry"] * 2
    assert len({h["capture_id"] for h in headers}) == 1 and reader.closed_cleanly
    assert len(list(reader.exchanges())) == 48


class _Actor:
    """``ray.remote(cls).options(...)``, the actor built here: a shard's worker without Ray."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def options(self, **_: object) -> _Actor:
        return self

    def remote(self, *args: object) -> object:
        return self.cls(*args)


class _NoRay:
    def remote(self, cls: type) -> _Actor:
        return _Actor(cls)

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 1}


def test_a_header_the_source_redacted_is_redacted_in_each_shard_s_capture(fake, tmp_path) -> None:
    """The workers get no captured headers: the driver tells them which names the source redacted,
    so a value ``--header`` gives one (recorded with --redact-header X-Tenant) is not written in
    clear, as a replay in one process keeps it out."""
    app, url = fake
    headers = [["content-type", "application/json"], ["x-tenant", REDACTED]]
    write_capture(
        tmp_path / "src", [{"body": {"model": "m", "messages": [{"role": "user", "content": "q"}]}, "headers": headers}]
    )
    config = ReplayConfig(
        tmp_path / "src",
        url,
        tmp_path / "out",
        probe=False,
        telemetry=False,
        transforms=Transforms(headers={"X-Tenant": "SECRET-42"}),
    )
    prepared = _prepare(config, url)
    (worker,) = _start_workers(
        _NoRay(), ShardWorker, config, prepared.items, prepared.bodies, prepared.headers, _recorder(config, prepared)
    )
    assert all(item.headers == [] for item in worker.shard.items)  # the captured headers stay with the driver
    result = worker.run(time.time())
    merge_segments(tmp_path / "out", [result["segments"]])
    assert (b"x-tenant", b"SECRET-42") in app.requests[-1]["headers"]  # sent, as given
    assert b"SECRET-42" not in decompressed_bytes(tmp_path / "out")
    (x,) = CaptureReader(tmp_path / "out").exchanges()
    assert ["X-Tenant", REDACTED] in x["request_headers"]


class _Ref:
    def __init__(self, future: Future) -> None:
        self.future = future


class _Method:
    def __init__(self, pool: ThreadPoolExecutor, fn: Callable[..., object]) -> None:
        self.pool, self.fn = pool, fn

    def remote(self, *args: object) -> _Ref:
        return _Ref(self.pool.submit(self.fn, *args))


class _ThreadActor:
    """A Ray actor in threads of this process: each method call runs on the actor's own pool."""

    def __init__(self, cls: type, args: tuple) -> None:
        self.instance = cls(*args)
        self.pool = ThreadPoolExecutor(4)

    def __getattr__(self, name: str) -> _Method:
        return _Method(self.pool, getattr(self.instance, name))


class _ThreadRay(types.ModuleType):
    """What run_sharded asks of Ray, answered in this process, so a signal reaches its driver here."""

    class exceptions:  # noqa: N801 - Ray's own name
        RayError = RuntimeError

    def __init__(self) -> None:
        super().__init__("ray")
        self.actors: list[_ThreadActor] = []

    def remote(self, cls: type) -> Any:
        ray = self

        class Options:
            def options(self, **_: object) -> Options:
                return self

            def remote(self, *args: object) -> _ThreadActor:
                ray.actors.append(_ThreadActor(cls, args))
                return ray.actors[-1]

        return Options()

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2}

    def get(self, refs: Any, timeout: float | None = None) -> Any:
        return [r.future.result(timeout) for r in refs] if isinstance(refs, list) else refs.future.result(timeout)

    def wait(self, refs: list[_Ref], timeout: float) -> tuple[list[_Ref], list[_Ref]]:
        futures_wait([r.future for r in refs], timeout=timeout, return_when=FIRST_COMPLETED)
        return [r for r in refs if r.future.done()], [r for r in refs if not r.future.done()]

    def kill(self, actor: _ThreadActor) -> None:
        actor.pool.shutdown(wait=False)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_kill_stops_every_shard_and_keeps_what_they_sent(fake, tmp_path, monkeypatch, signum) -> None:
    """``kill`` (or the terminal closing) on a ``--ray`` replay: only Ctrl-C stopped the workers,
    so a kill left them sending and their shards unmerged. Now it stops them as Ctrl-C does."""
    app, url = fake
    endless = {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": True}
    write_capture(
        tmp_path / "src", [{"session": f"s{i}", "path": "/slow", "body": {**endless, "tag": f"t{i}"}} for i in range(2)]
    )
    config = ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, telemetry=False, grace_s=0.2, shards=2)
    prepared = _prepare(config, url)
    monkeypatch.setitem(sys.modules, "ray", _ThreadRay())

    def killed(signum: int, frame: object) -> None:
        raise AssertionError("the replay did not handle the signal")

    killed_at: list[int] = []

    def kill_once_both_are_sent(live: ReplayStats) -> None:
        if live.sent == 2 and not killed_at:
            killed_at.append(live.sent)
            os.kill(os.getpid(), signum)

    before = signal.signal(signum, killed)
    try:
        summary = run_sharded(
            config,
            prepared.items,
            prepared.bodies,
            prepared.headers,
            _recorder(config, prepared),
            progress=kill_once_both_are_sent,
        )
        assert signal.getsignal(signum) is killed  # the replay's handler is gone with it
    finally:
        signal.signal(signum, before)
    assert summary["stopped_early"] and summary["shards"] == 2 and summary["failed_shards"] == {}
    # Both workers stopped sending, cancelled their endless requests after the grace, and were merged.
    assert [x["end"] for x in CaptureReader(tmp_path / "out").exchanges()] == ["cancelled", "cancelled"]


def test_a_ray_replays_shards_say_who_sampled_them_and_a_lost_shard_keeps_the_drivers_samples(
    fake, tmp_path, ray_cluster, monkeypatch
) -> None:
    """Each shard's header says what it did: it sampled nothing itself, the driver sampled its time
    (``telemetry_by``), or, with --no-telemetry, nobody did, and stats reads 'not sampled' only
    then. A lost shard's error kept the driver's samples out of the capture the surviving shard
    was merged into: they are written all the same."""
    from functools import partial

    from click.testing import CliRunner

    from infertap.cli import cli
    from infertap.replay import distributed

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _, url = fake
    src = workload(tmp_path)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the crashing subclass travels to the workers
    crashing = partial(distributed.run_sharded, worker=CrashingWorker)
    monkeypatch.setattr(distributed, "run_sharded", crashing)
    with pytest.raises(DistributedReplayError, match="1 of 2 replay workers failed"):
        run_replay(ReplayConfig(src, url, tmp_path / "lost", probe=False, ray=ray_cluster, shards=2))
    monkeypatch.undo()
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    run_replay(ReplayConfig(src, url, tmp_path / "off", probe=False, telemetry=False, ray=ray_cluster, shards=2))

    def said(out: Path) -> tuple[list[dict[str, Any]], bool, str]:
        records = list(CaptureReader(out).records())
        recorders = [r["recorder"] for r in records if r["type"] == "header"]
        stats = CliRunner().invoke(cli, ["stats", str(out)], catch_exceptions=False)
        assert stats.exit_code == 0, stats.output
        return recorders, any(r["type"] == "telemetry" for r in records), stats.output

    recorders, samples, stats = said(tmp_path / "lost")
    assert [(r["kind"], r["telemetry"], r.get("telemetry_by")) for r in recorders] == [
        ("replay", True, "driver"),  # the surviving shard
        ("telemetry", True, None),  # the driver's samples, kept
    ]
    assert samples and "not sampled" not in stats
    # Must differ: --no-telemetry, no shard sampled nor the driver, and stats says so.
    recorders, samples, stats = said(tmp_path / "off")
    assert [(r["kind"], r["telemetry"], r.get("telemetry_by")) for r in recorders] == [("replay", False, None)] * 2
    assert not samples and "energy: not sampled (recorded with --no-telemetry)" in stats
    compared = CliRunner().invoke(cli, ["compare", str(tmp_path / "lost"), str(tmp_path / "off")], catch_exceptions=False)
    assert compared.exit_code == 0, compared.output
    words = " ".join(compared.output.split())
    assert "energy B: not sampled (recorded with --no-telemetry)" in words and "energy A: not sampled" not in words
