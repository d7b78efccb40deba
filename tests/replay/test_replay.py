"""Replay against a fake upstream (schedules, transforms, conversations, faults) and a real engine."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner

from infertap.capture.info import summarize
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.launch import free_port
from infertap.replay import Filters, ReplayConfig, ReplayError, Schedule, Transforms, run_replay
from infertap.replay.transforms import pinned_settings
from tests import sdk_shapes
from tests.helpers import decompressed_bytes, write_capture


def _exchanges(path) -> list[dict]:
    return list(CaptureReader(path).exchanges())


def _bodies(app) -> list[dict]:
    return [json.loads(r["body"]) for r in app.requests if r["path"].startswith("/v1/")]


def _chat(tag: str, content: str | None = None, **extra) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": content or tag}], "stream": False, "tag": tag, **extra}


def test_original_timing_links_every_exchange_to_its_source(fake, tmp_path):
    app, url = fake
    src = write_capture(tmp_path / "src", [{"offset_s": t, "body": _chat(f"t{i}")} for i, t in enumerate([0, 0.2, 0.25, 0.6])])
    summary = run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    assert summary["sent"] == summary["completed"] == 4 and summary["ends"] == {"complete": 4}
    xs = _exchanges(tmp_path / "out")
    assert [x["source_id"] for x in xs] == [r["id"] for r in src]
    # Due at the original offsets, exactly; sent no earlier than due.
    due = [x["scheduled_ns"] - xs[0]["scheduled_ns"] for x in xs]
    assert due == [0, 200_000_000, 250_000_000, 600_000_000]
    assert all(x["sent_ns"] >= x["scheduled_ns"] and x["lag_ns"] >= 0 for x in xs)
    assert [json.loads(x["request_body"])["tag"] for x in xs] == ["t0", "t1", "t2", "t3"]
    assert all(x["status"] == 200 and b"reply to" in b"".join(x["chunks"]) for x in xs)
    header = next(r for r in CaptureReader(tmp_path / "out").records() if r["type"] == "header")
    assert header["recorder"]["kind"] == "replay" and header["recorder"]["source"]["path"] == str(tmp_path / "src")
    assert summarize(tmp_path / "out")["closed_cleanly"]


def test_speed_scales_the_schedule(fake, tmp_path):
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": t, "body": _chat(f"t{i}")} for i, t in enumerate([0, 1.0, 2.0])])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, schedule=Schedule("original", speed=4)))
    xs = _exchanges(tmp_path / "out")
    assert [x["scheduled_ns"] - xs[0]["scheduled_ns"] for x in xs] == [0, 250_000_000, 500_000_000]


def test_a_conversation_waits_for_the_turn_it_continues(fake, tmp_path):
    """The second turn (messages = first turn + its reply + more) was due before the first finished."""
    app, url = fake
    first = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False, "tag": "turn1", "pace_ms": 300}
    reply = json.dumps(_chat_answer({"role": "assistant", "content": "hello!"})).encode()
    second = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello!"},
            {"role": "user", "content": "more"},
        ],
        "stream": False,
        "tag": "turn2",
    }
    other = _chat("other")
    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0, "body": first, "chunks": [reply]},
            {"offset_s": 0.05, "body": other},
            {"offset_s": 0.1, "body": second},
        ],
    )
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    xs = {json.loads(x["request_body"])["tag"]: x for x in _exchanges(tmp_path / "out")}
    t1, t2, o = xs["turn1"], xs["turn2"], xs["other"]
    assert t2["sent_ns"] >= t1["sent_ns"] + t1["end_ns"], "the second turn started before the first had finished"
    assert t2["dep_wait_ns"] > 0
    assert o["sent_ns"] < t1["sent_ns"] + t1["end_ns"], "an unrelated request must not wait"
    assert o["dep_wait_ns"] == 0


def test_a_session_header_orders_requests_too(fake, tmp_path):
    app, url = fake
    slow = _chat("s1", pace_ms=300)
    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0, "body": slow, "session": "abc"},
            {"offset_s": 0.05, "body": _chat("s2"), "session": "abc"},
        ],
    )
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    a, b = _exchanges(tmp_path / "out")
    assert b["sent_ns"] >= a["sent_ns"] + a["end_ns"]


def test_transforms_reach_the_target(fake, tmp_path):
    app, url = fake
    body = {
        "model": "small",
        "messages": [{"role": "user", "content": "x"}],
        "stream": False,
        "tag": "t",
        "temperature": 0.7,
        "extra": {"drop": 1, "keep": 2},
    }
    headers = [["content-type", "application/json"], ["authorization", "Bearer [REDACTED]"], ["x-trace", "abc"], ["x-keep", "1"]]
    write_capture(
        tmp_path / "src", [{"body": body, "headers": headers}, {"body": {**body, "model": "other"}, "headers": headers}]
    )
    transforms = Transforms(
        model_map={"small": "big"},
        set_values=[("temperature", 0), ("extra.new", [1, 2])],
        unset=["extra.drop"],
        headers={"X-Added": "yes", "Authorization": "Bearer target-key-123"},
        drop_headers={"x-trace"},
    )
    run_replay(
        ReplayConfig(
            tmp_path / "src",
            url,
            tmp_path / "out",
            probe=False,
            transforms=transforms,
            schedule=Schedule("concurrency", concurrency=1),
        )
    )
    sent = _bodies(app)
    assert [b["model"] for b in sent] == ["big", "other"]
    assert all(b["temperature"] == 0 and b["extra"] == {"keep": 2, "new": [1, 2]} for b in sent)
    headers_seen = [{n.decode(): v.decode() for n, v in r["headers"]} for r in app.requests]
    assert all(h["x-added"] == "yes" and "x-trace" not in h and h["x-keep"] == "1" for h in headers_seen)
    assert all(h["authorization"] == "Bearer target-key-123" for h in headers_seen)
    assert b"target-key-123" not in decompressed_bytes(tmp_path / "out")
    app.requests.clear()
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out2", probe=False, transforms=Transforms(model="all-the-same")))
    assert [b["model"] for b in _bodies(app)] == ["all-the-same"] * 2
    # A redacted credential is never replayed: without a new one, no Authorization at all.
    assert all(b"authorization" not in dict(r["headers"]) for r in app.requests)


def test_pin_defaults_writes_the_sources_engine_defaults(fake, tmp_path):
    app, url = fake
    enrichment = {
        "exchange_id": "src-0",
        "settings": {
            "temperature": {"value": 0, "source": "request"},
            "repeat_penalty": {"value": 1.1, "source": "engine_default"},
            "top_k": {"value": 40, "source": "engine_default"},
            "seed": {"value": None, "source": "unknown"},
        },
    }
    write_capture(tmp_path / "src", [{"body": _chat("p", temperature=0)}], enrichments=[enrichment])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=Transforms(pin_defaults=True)))
    (sent,) = _bodies(app)
    assert (sent["repeat_penalty"], sent["top_k"], sent["temperature"]) == (1.1, 40, 0)
    assert "seed" not in sent
    write_capture(tmp_path / "bare", [{"body": _chat("p")}])
    with pytest.raises(ReplayError, match="no enrichment records"):
        run_replay(ReplayConfig(tmp_path / "bare", url, tmp_path / "out2", probe=False, transforms=Transforms(pin_defaults=True)))


@pytest.mark.parametrize(("target_kind", "sent_name"), [("llama-server", "repeat_penalty"), ("vllm", "repetition_penalty")])
def test_pin_defaults_replaces_a_field_the_source_ignored_that_the_target_reads(target_kind, sent_name):
    """The body's penalty never applied on the source (it reads the other spelling): pinned, the
    target gets the source's default, not the value the source ignored."""
    settings = {
        "repeat_penalty": {"value": 1.0, "source": "engine_default", "ignored": {sent_name: 1.3}},
        "temperature": {"value": 0.7, "source": "engine_default"},
    }
    raw = json.dumps(_chat("p", temperature=0.2, **{sent_name: 1.3})).encode()
    pinned = pinned_settings(settings)
    sent = json.loads(
        Transforms(pin_defaults=True).body(raw, pinned=pinned, target_kind=target_kind, path="/v1/chat/completions")
    )
    assert sent[sent_name] == 1.0
    assert sent["temperature"] == 0.2  # sent, and not ignored: the request's own value stays


def test_filters_limit_and_repeat(fake, tmp_path):
    app, url = fake
    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0, "body": _chat("a")},
            {"offset_s": 0.01, "path": "/v1/embeddings", "body": {"model": "m", "input": "x"}},
            {"offset_s": 0.02, "body": {**_chat("b"), "model": "n"}},
            {"offset_s": 0.03, "body": _chat("c"), "status": 500},
            {"offset_s": 5.0, "body": _chat("late")},
        ],
    )
    filters = Filters.parse(["path=/v1/chat/*", "status=200", "before=1"])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, filters=filters, repeat=3))
    tags = [json.loads(x["request_body"])["tag"] for x in _exchanges(tmp_path / "out")]
    assert tags == ["a", "b"] * 3
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out2", probe=False, filters=Filters.parse(["model=n"])))
    assert [json.loads(x["request_body"])["tag"] for x in _exchanges(tmp_path / "out2")] == ["b"]
    run_replay(
        ReplayConfig(
            tmp_path / "src", url, tmp_path / "out3", probe=False, limit=2, schedule=Schedule("concurrency", concurrency=4)
        )
    )
    assert len(_exchanges(tmp_path / "out3")) == 2


@pytest.mark.parametrize("n", [1, 3])
def test_fixed_concurrency_holds_n_in_flight(fake, tmp_path, n):
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": 0, "body": _chat(f"c{i}", pace_ms=100)} for i in range(9)])
    summary = run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, schedule=Schedule("concurrency", concurrency=n))
    )
    assert app.max_in_flight == n
    assert summary["concurrency"]["max"] == n and summary["completed"] == 9


def test_concurrency_original_follows_what_the_capture_saw(fake, tmp_path):
    app, url = fake
    # Two waves: three overlapping requests, then one alone.
    xs = [{"offset_s": t, "duration_ns": 500_000_000, "body": _chat(f"w{i}", pace_ms=100)} for i, t in enumerate([0, 0.1, 0.2])]
    xs.append({"offset_s": 3.0, "duration_ns": 100_000_000, "body": _chat("alone", pace_ms=100)})
    write_capture(tmp_path / "src", xs)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, schedule=Schedule("concurrency-original")))
    assert app.max_in_flight == 3


def test_max_concurrency_wait_is_recorded_apart_from_latency(fake, tmp_path):
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": 0, "body": _chat(f"q{i}", pace_ms=150)} for i in range(4)])
    summary = run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, schedule=Schedule("original", max_concurrency=1))
    )
    xs = _exchanges(tmp_path / "out")
    assert app.max_in_flight == 1
    waited = sorted(x["queue_ns"] for x in xs)
    assert waited[0] == 0 and waited[-1] > 0
    for x in xs:  # latency starts when the request is sent, after the wait
        assert x["sent_ns"] >= x["scheduled_ns"] + x["queue_ns"]
    assert summary["queue_wait_ms"]["max"] > 0


def test_rate_and_poisson_schedules(fake, tmp_path):
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": 0, "body": _chat(f"r{i}")} for i in range(5)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, schedule=Schedule("rate", rate=50)))
    xs = _exchanges(tmp_path / "out")
    assert [x["scheduled_ns"] - xs[0]["scheduled_ns"] for x in xs] == [0, 20_000_000, 40_000_000, 60_000_000, 80_000_000]
    a = Schedule("poisson", rate=10, seed=7).offsets([None] * 2000)  # type: ignore[list-item]
    b = Schedule("poisson", rate=10, seed=7).offsets([None] * 2000)  # type: ignore[list-item]
    gaps = [y - x for x, y in zip(a, a[1:], strict=False)]
    assert a == b  # seeded: the same arrivals every run
    mean = sum(gaps) / len(gaps) / 1e9
    assert 0.09 < mean < 0.11  # 1/rate, within sampling error of 2000 draws


def test_per_request_failures_are_recorded_and_counted(fake, tmp_path):
    app, url = fake
    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0, "path": "/reset", "body": {"tag": "r"}},
            {"offset_s": 0.01, "path": "/status/503", "body": {"tag": "s"}},
            {"offset_s": 0.02, "body": _chat("ok")},
        ],
    )
    summary = run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    assert summary["ends"] == {"upstream_error": 1, "complete": 2}
    assert summary["statuses"] == {"200": 2, "503": 1}
    reset = next(x for x in _exchanges(tmp_path / "out") if x["path"] == "/reset")
    assert reset["end"] == "upstream_error" and b"partial" in b"".join(reset["chunks"])


def test_streams_the_target_ended_with_no_finish_reason_are_counted_unfinished(fake, tmp_path):
    """llama-cpp-python's interrupt_requests ends a stream in flight with [DONE] alone; a server that
    drops a request may close the body cleanly after some chunks, with no [DONE] either: the replay's
    summary and the analysis count both unfinished, not ok, where they said "ok". A whole stream, and
    an answer not streamed, are ok."""
    app, url = fake
    cut = ({}, {"no_finish": True}, {"no_finish": True, "no_done": True})
    for name, flags, expected in (("whole", (cut[0], cut[0]), (4, 0)), ("cut", cut[1:], (2, 2))):
        src = tmp_path / f"src-{name}"
        args = ["replay", str(src), "--target", url, "--no-probe", "--no-telemetry"]
        chats = [_chat(f"t{name}{i}", stream=True, **f) for i, f in enumerate(flags)]
        chats += [_chat(f"s{name}", stream=True), _chat(f"w{name}", stream=False)]  # finished: a stream, a whole answer
        write_capture(src, [{"offset_s": 0.01 * i, "body": b} for i, b in enumerate(chats)])
        out = tmp_path / f"out-{name}"
        result = CliRunner().invoke(cli, [*args, "--json", "--out", str(out)])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert (summary["ok"], summary["unfinished"], summary["failed"]) == (*expected, 0)
        text = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / f"text-{name}")])
        said = " ".join(text.output.split())
        unfinished = "2 unfinished (a stream ended with no finish reason: the target ended them early)"
        assert f"4 ({expected[0]} ok, " in said and (unfinished in said) is (name == "cut"), said
        stats = CliRunner().invoke(cli, ["stats", str(out), "--json"])
        [group] = json.loads(stats.output)["groups"]
        assert (group["ok"], group["unfinished"]) == expected  # the analysis counts as the replay did
    bodies = {x["id"]: b"".join(x["chunks"]) for x in _exchanges(tmp_path / "out-cut")}
    assert sum(not b.rstrip().endswith(b"[DONE]") and b'finish_reason": "stop' not in b for b in bodies.values()) == 1


def test_a_stream_that_left_a_choice_other_than_the_first_with_no_finish_reason_is_unfinished(fake, tmp_path):
    """``n`` = 2 asks for two answers, each ending on its own finish reason: a stream whose choice 1
    never said one (choice 0 did, then [DONE]) was cut short as a cut choice 0 is, where the replay's
    summary and the analysis counted it ok. A stream that finished both stays ok, however long."""
    app, url = fake
    chats = [
        _chat("both", stream=True, n=2),
        _chat("both_long", stream=True, n=2, n_chunks=60),  # its end past the last events read first
        _chat("cut", stream=True, n=2, cut_choice=1),
        _chat("cut_long", stream=True, n=2, cut_choice=1, n_chunks=60),
    ]
    write_capture(tmp_path / "src", [{"offset_s": 0.01 * i, "body": b} for i, b in enumerate(chats)])
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry", "--json", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["ok"], summary["unfinished"], summary["failed"]) == (2, 2, 0), summary
    stats = CliRunner().invoke(cli, ["stats", str(out), "--json"])
    [group] = json.loads(stats.output)["groups"]
    assert (group["ok"], group["unfinished"]) == (2, 2)  # the analysis counts as the replay did
    bodies = {json.loads(x["request_body"])["tag"]: b"".join(x["chunks"]) for x in _exchanges(out)}
    finishes = {tag: b.count(b'"finish_reason": "stop"') for tag, b in bodies.items()}
    assert finishes == {"both": 2, "both_long": 2, "cut": 1, "cut_long": 1}  # as the fake sent them


def test_a_model_map_passes_a_body_that_is_no_json_as_recorded_and_says_so(fake, tmp_path):
    """A multipart upload (/v1/audio/transcriptions) beside chat: --model-map refused the whole
    replay, although a map can't apply to a body that names no model. Transforms that must edit
    every body still refuse it."""
    app, url = fake
    upload = b'--xx\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper\r\n--xx--\r\n'
    multipart = [["content-type", "multipart/form-data; boundary=xx"]]
    write_capture(
        tmp_path / "src",
        [{"body": _chat("a")}, {"offset_s": 0.05, "path": "/v1/audio/transcriptions", "body": upload, "headers": multipart}],
    )
    args = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry", "--json", "--model-map", "m=m2"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "1 request bodies are no JSON object --model-map can read" in result.stderr and json.loads(result.stdout)["sent"] == 2
    chat, sent_upload = app.requests
    assert json.loads(chat["body"])["model"] == "m2" and sent_upload["body"] == upload  # byte for byte
    header = next(CaptureReader(tmp_path / "out").records())
    assert header["recorder"]["transforms"]["as_recorded"] == 1
    for transforms in (Transforms(model="m2"), Transforms(model_map={"m": "m2"}, set_values=[("temperature", 0)])):
        with pytest.raises(ReplayError, match="src-1.*JSON body"):
            run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "refused", probe=False, transforms=transforms))
    assert len(app.requests) == 2


def test_bad_input_fails_before_anything_is_sent(fake, tmp_path):
    app, url = fake
    write_capture(tmp_path / "src", [{"body": _chat("a")}, {"id": "plain", "body": b"not json at all"}])
    with pytest.raises(ReplayError, match="plain.*JSON body"):
        run_replay(
            ReplayConfig(
                tmp_path / "src", url, tmp_path / "out", probe=False, transforms=Transforms(set_values=[("temperature", 0)])
            )
        )
    with pytest.raises(ReplayError, match="messages.x.*no place in a list of 1"):
        run_replay(
            ReplayConfig(
                tmp_path / "src",
                url,
                tmp_path / "out",
                probe=False,
                filters=Filters.parse(["path=/v1/chat/completions"]),
                limit=1,
                transforms=Transforms(set_values=[("messages.x", 1)]),
            )
        )
    assert app.requests == [] and not (tmp_path / "out").exists()
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ReplayError, match="refuses connections"):
        run_replay(ReplayConfig(tmp_path / "src", dead, tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    runner = CliRunner()
    (tmp_path / "nothing").mkdir()
    for args, message in [
        (["replay", str(tmp_path / "src"), "--target", dead], "refuses connections"),
        (["replay", str(tmp_path / "nothing"), "--target", url], "not a capture, and no capture in it"),
        (["replay", str(tmp_path / "src"), "--target", url, "--filter", "color=red"], "unknown --filter key"),
        (["replay", str(tmp_path / "src"), "--target", url, "--concurrency", "many"], "expected a number or 'original'"),
        (["replay", str(tmp_path / "src"), "--target", url, "--concurrency", "²"], "expected a number or 'original'"),
        (["replay", str(tmp_path / "src"), "--target", url, "--filter", "status=²"], "takes an HTTP status code"),
        (["replay", str(tmp_path / "src"), "--target", url, "--rate", "5", "--concurrency", "2"], "choose one"),
        (["replay", str(tmp_path / "src"), "--target", url, "--repeat", "0"], "--repeat 0: a whole number, 1 or more"),
        (["replay", str(tmp_path / "src"), "--target", url, "--limit", "-1"], "--limit -1: a whole number, 1 or more"),
        (["replay", str(tmp_path / "src"), "--target", url, "--grace", "-1"], "--grace -1.0: seconds, 0 or more"),
        (["replay", str(tmp_path / "src"), "--target", url, "--connect-timeout", "0"], "--connect-timeout 0.0: seconds, above 0"),
        (["replay", str(tmp_path / "src"), "--target", url, "--read-timeout", "-1"], "--read-timeout -1.0: seconds, above 0"),
        (["replay", str(tmp_path / "src"), "--target", url, "--set", "a..b=1"], "a dotted path of keys, none of them empty"),
        (["replay", str(tmp_path / "src"), "--target", url, "--unset", "."], "a dotted path of keys, none of them empty"),
    ]:
        result = runner.invoke(cli, args)
        assert result.exit_code != 0 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output
    assert app.requests == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--speed", "nan"], "--speed nan: not a finite number"),
        (["--speed", "-inf"], "--speed -inf: not a finite number"),
        (["--rate", "inf"], "--rate inf: not a finite number"),
        (["--rate", "nan", "--poisson"], "--rate nan: not a finite number"),
        (["--grace", "inf"], "--grace inf: not a finite number of seconds"),
        (["--think-scale", "inf", "--sessions", "closed"], "--think-scale inf: not a finite number"),
    ],
)
def test_a_speed_or_rate_that_is_no_finite_number_is_said_to_be_none(fake, tmp_path, args, message):
    """``--speed nan`` was refused as "must be > 0"; it is no finite number, and says so. A speed
    of 0 is still one that must be above 0."""
    app, url = fake
    write_capture(tmp_path / "src", [{"body": _chat("a")}])
    base = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, [*base, *args])
    assert result.exit_code == 1 and message in result.output and "> 0" not in result.output, result.output
    zero = CliRunner().invoke(cli, [*base, "--speed", "0"])
    assert zero.exit_code == 1 and "--speed 0.0: must be > 0" in zero.output, zero.output
    assert app.requests == [] and not (tmp_path / "out").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP], ids=["SIGINT", "SIGHUP"])
def test_ctrl_c_mid_run_leaves_a_clean_capture(fake, tmp_path, sig):
    """Ctrl-C, or the terminal closing (SIGHUP killed it, the exchanges in flight lost, no footer)."""
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": i * 0.1, "body": _chat(f"k{i}", pace_ms=400)} for i in range(100)])
    out = tmp_path / "out"
    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)  # the replay inherits it: not under nohup
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infertap",
            "replay",
            str(tmp_path / "src"),
            "--target",
            url,
            "--out",
            str(out),
            "--no-probe",
            "--grace",
            "0.2",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    signal.signal(signal.SIGHUP, previous)
    deadline = time.monotonic() + 30
    while len(app.requests) < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr  # cut short: `replay && compare` goes no further
    summary = json.loads(stdout)
    assert summary["stopped_early"] and 0 < summary["sent"] < 100 and summary["not_sent"] == 100 - summary["sent"]
    info = summarize(out)
    assert info["closed_cleanly"] and info["exchanges"] == summary["sent"]
    assert set(info["ends"]) <= {"complete", "cancelled"}


@pytest.mark.engine
def test_replay_a_real_engine_capture_back_against_it(engine, record, tmp_path):
    from openai import OpenAI

    rec = record(engine.url)
    client = OpenAI(base_url=f"{rec.url}/v1", api_key="sk-test", max_retries=0, timeout=120)
    for question in ["What is 2 + 2?", "Name a colour."]:
        client.chat.completions.create(
            model="SmolLM2-135M-Instruct", messages=[{"role": "user", "content": question}], max_tokens=8, temperature=0
        )
        time.sleep(0.3)
    stream = client.chat.completions.create(
        model="SmolLM2-135M-Instruct", messages=[{"role": "user", "content": "Hi"}], max_tokens=8, temperature=0, stream=True
    )
    original_text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    rec.stop()
    source = rec.exchanges()
    summary = run_replay(ReplayConfig(rec.out, engine.url, tmp_path / "replay"))
    assert summary["sent"] == 3 and summary["ends"] == {"complete": 3} and summary["target_kind"] == "llama-cpp-python"
    records = list(CaptureReader(tmp_path / "replay").records())
    xs = [r for r in records if r["type"] == "exchange"]
    assert [x["source_id"] for x in xs] == [x["id"] for x in source]
    src_offsets = [x["start_ns"] - source[0]["start_ns"] for x in source]  # one run: exact monotonic offsets
    assert [x["scheduled_ns"] - xs[0]["scheduled_ns"] for x in xs] == src_offsets
    # Streams are recorded as streams, chunk by chunk; greedy decoding gives the same text again.
    streamed = xs[-1]
    assert len(streamed["chunks"]) > 1 and streamed["chunk_ns"] == sorted(streamed["chunk_ns"])
    events = [json.loads(line[6:]) for line in b"".join(streamed["chunks"]).decode().split("\n") if line.startswith("data: {")]
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"]) == original_text
    assert [r["kind"] for r in records if r["type"] == "engine"] == ["llama-cpp-python"]
    assert len([r for r in records if r["type"] == "enrichment"]) == 3


def test_faults_during_a_replay_are_recorded_and_nothing_is_lost(tmp_path):
    """Hangs (with the read timeout), a reset, odd bodies, and the target dying mid-run: every
    exchange ends up in the replay's capture with how it ended."""
    from tests.fake_upstream import FakeUpstream, ServerThread

    paths = ["/hang-headers", "/hang-body", "/reset", "/malformed", "/gzip", "/big", "/status/500", "/html500"]
    write_capture(
        tmp_path / "src",
        [{"offset_s": i * 0.05, "path": p, "body": {"tag": p, "blocks": 40}} for i, p in enumerate(paths)]
        + [{"offset_s": 1.5 + i * 0.05, "body": _chat(f"late{i}")} for i in range(4)],
    )
    app = FakeUpstream()
    server = ServerThread(app).__enter__()
    try:

        def goes_away() -> None:  # the target goes away mid-run: 1 s after the replay's first send reached it
            while not app.requests:  # (timed from there, not from before the replay's own start-up, which load stretches)
                time.sleep(0.005)
            time.sleep(1.0)
            server.__exit__(None, None, None)

        threading.Thread(target=goes_away, daemon=True).start()
        summary = run_replay(ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", probe=False, read_timeout=0.5))
    finally:
        server.__exit__(None, None, None)
    ends = {
        x["path"] + ("" if x["path"] != "/v1/chat/completions" else f"#{i}"): x["end"]
        for i, x in enumerate(_exchanges(tmp_path / "out"))
    }
    assert summary["sent"] == 12 and len(ends) == 12  # nothing lost
    assert ends["/hang-headers"] == "timeout" and ends["/hang-body"] == "timeout" and ends["/reset"] == "upstream_error"
    assert all(ends[p] == "complete" for p in ["/malformed", "/gzip", "/big", "/status/500", "/html500"])
    late = [end for path, end in ends.items() if path.startswith("/v1/")]
    assert late == ["upstream_error"] * 4  # the target was gone: each recorded with the connection error
    errors = [x["error"] for x in _exchanges(tmp_path / "out") if x["path"] == "/v1/chat/completions"]
    assert all("cannot connect" in e for e in errors), errors


def _parents(tmp_path, exchanges: list[dict]) -> dict[str, str | None]:
    """Which source exchange each one continues, as the workload links them (tag -> parent's tag)."""
    from infertap.replay.workload import load

    write_capture(tmp_path / "src", exchanges)
    items, _ = load(tmp_path / "src")
    tags = {item.index: json.loads(item.body).get("tag") for item in items}
    return {tags[item.index]: None if item.parent is None else tags[item.parent] for item in items}


def _whole(obj: dict) -> list[bytes]:
    return [json.dumps(obj).encode()]


def _chat_answer(message: dict, finish: str = "stop") -> dict:
    """A whole chat answer of one choice, checked."""
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return sdk_shapes.chat_completion({"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]})


def _response(rid: str, output: list) -> list[bytes]:
    """A whole Responses answer of ``output``, checked."""
    return _whole(sdk_shapes.response({"id": rid, "object": "response", "model": "m", "status": "completed", "output": output, **sdk_shapes.RESPONSE_REST}))  # fmt: skip


def _message(content: list, stop: str) -> dict:
    """A whole Messages answer of ``content``, checked."""
    return sdk_shapes.message({"id": "msg_1", "type": "message", "role": "assistant", "model": "c", "content": content, "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})  # fmt: skip


def test_responses_turns_continue_the_turn_whose_output_they_carry(tmp_path):
    output = [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "hello!", "annotations": []}],
        },  # fmt: skip
        {"type": "function_call", "id": "f1", "call_id": "c1", "name": "clock", "arguments": "{}", "status": "completed"},
    ]
    first = {"model": "m", "instructions": "Be brief.", "input": "hi", "tag": "turn1"}
    second = {
        "model": "m",
        "instructions": "Be brief.",
        "tag": "turn2",
        "input": [
            {"role": "user", "content": "hi"},
            *output,
            {"type": "function_call_output", "call_id": "c1", "output": "noon"},
        ],
    }
    stranger = {
        **second,
        "tag": "stranger",
        "input": [
            {"role": "user", "content": "hi"},
            {**output[0], "content": [{"type": "output_text", "text": "HELLO", "annotations": []}]},
            {"role": "user", "content": "more"},
        ],
    }
    parents = _parents(
        tmp_path,
        [
            {
                "path": "/v1/responses",
                "body": first,
                "chunks": _response("resp_1", output),
            },
            {
                "path": "/v1/responses",
                "body": second,
                "chunks": _response("resp_2", []),
            },
            {
                "path": "/v1/responses",
                "body": stranger,
                "chunks": _response("resp_3", []),
            },
            {"path": "/v1/responses", "body": {"model": "m", "input": "again", "previous_response_id": "resp_2", "tag": "by_id"}},
        ],
    )
    # The stranger's assistant turn says something turn1 never answered: it continues nothing.
    assert parents == {"turn1": None, "turn2": "turn1", "stranger": None, "by_id": "turn2"}


def test_anthropic_turns_with_tools_continue_their_turn_and_the_system_prompt_counts(tmp_path):
    content = [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}},
    ]
    reply = _message(content, "tool_use")
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
    ]
    parents = _parents(
        tmp_path,
        [
            {
                "path": "/v1/messages",
                "body": {"model": "c", "system": "S", "messages": history[:1], "tag": "turn1"},
                "chunks": _whole(reply),
            },
            {"path": "/v1/messages", "body": {"model": "c", "system": "S", "messages": history, "tag": "turn2"}},
            {"path": "/v1/messages", "body": {"model": "c", "system": "other", "messages": history, "tag": "other_system"}},
        ],
    )
    assert parents == {"turn1": None, "turn2": "turn1", "other_system": None}


def test_responses_turns_after_a_custom_tool_call_continue_it(tmp_path):
    """A custom tool call is now part of the answer: the turn that carries it back (with its output)
    still continues the turn that made it, and one that carries another input does not."""
    call = {"type": "custom_tool_call", "id": "ct1", "call_id": "c1", "name": "exec", "input": "ls -la"}
    first = {"model": "m", "input": "list the files", "tag": "turn1"}
    back = [
        {"role": "user", "content": "list the files"},
        call,
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "a b"},
    ]
    second = {"model": "m", "tag": "turn2", "input": back}
    other = {"model": "m", "tag": "other", "input": [back[0], {**call, "input": "rm -rf /"}, back[2]]}
    answer = _response("resp_1", [call])
    empty = _response("resp_x", [])
    parents = _parents(
        tmp_path,
        [
            {"path": "/v1/responses", "body": first, "chunks": answer},
            {"path": "/v1/responses", "body": second, "chunks": empty},
            {"path": "/v1/responses", "body": other, "chunks": empty},
        ],
    )
    assert parents == {"turn1": None, "turn2": "turn1", "other": None}


def test_turns_after_a_refusal_or_a_functions_api_call_continue_it(tmp_path):
    """A refusal's words and a functions-API call are part of the reply now: the turn that carries
    them back continues the turn that said them (streamed, whole; chat and Responses)."""
    q = {"role": "user", "content": "q"}
    refused = {"role": "assistant", "content": None, "refusal": "No."}
    legacy = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": '{"a": 1}'}}

    def chat(message: dict) -> list[bytes]:
        return _whole(_chat_answer(message))

    def chat_sse(delta: dict) -> list[bytes]:
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        events = [sdk_shapes.chat_chunk({**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})]
        return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [b"data: [DONE]\n\n"]

    refusal_part = {"type": "message", "id": "m1", "role": "assistant", "status": "completed", "content": [{"type": "refusal", "refusal": "No."}]}  # fmt: skip
    path, responses = "/v1/chat/completions", "/v1/responses"
    exchanges = [
        {"path": path, "body": {"model": "m", "messages": [q], "tag": "refusal"}, "chunks": chat(refused)},
        {
            "path": path,
            "body": {"model": "m", "messages": [q, refused, {"role": "user", "content": "why"}], "tag": "after refusal"},
        },
        {
            "path": path,
            "body": {"model": "m", "messages": [q], "stream": True, "tag": "refusal streamed"},
            "chunks": chat_sse({"refusal": "No!"}),
            "content_type": "text/event-stream",
        },  # fmt: skip
        {
            "path": path,
            "body": {
                "model": "m",
                "messages": [q, {**refused, "refusal": "No!"}, {"role": "user", "content": "ok"}],
                "stream": True,
                "tag": "after streamed",
            },
        },  # fmt: skip
        {
            "path": path,
            "body": {"model": "m", "messages": [{"role": "user", "content": "call"}], "tag": "call"},
            "chunks": chat(legacy),
        },  # fmt: skip
        {
            "path": path,
            "body": {
                "model": "m",
                "messages": [{"role": "user", "content": "call"}, legacy, {"role": "function", "name": "f", "content": "1"}],
                "tag": "after call",
            },
        },  # fmt: skip
        {
            "path": responses,
            "body": {"model": "m", "input": "r", "tag": "responses refusal"},
            "chunks": _response("resp_r", [refusal_part]),
        },  # fmt: skip
        {
            "path": responses,
            "body": {
                "model": "m",
                "input": [{"role": "user", "content": "r"}, refusal_part, {"role": "user", "content": "why"}],
                "tag": "after responses",
            },
        },  # fmt: skip
    ]
    parents = _parents(tmp_path, exchanges)
    assert parents == {
        "refusal": None,
        "after refusal": "refusal",
        "refusal streamed": None,
        "after streamed": "refusal streamed",
        "call": None,
        "after call": "call",
        "responses refusal": None,
        "after responses": "responses refusal",
    }
    from infertap.analysis import Analysis  # the analysis links them as the replay does

    with Analysis([tmp_path / "src"], cache_dir=tmp_path / "cache") as a:
        linked = a.sql(
            "SELECT r.body->>'$.tag', p.body->>'$.tag' FROM turns t JOIN requests r USING (exchange_id) "
            "LEFT JOIN requests p ON p.exchange_id = t.parent_id"
        ).fetchall()
    assert dict(linked) == parents


def test_responses_turns_after_a_built_in_tool_call_continue_it_in_replay_and_analysis(tmp_path):
    """A built-in tool's call (Codex's local shell, web search) was no part of the answer: the turn
    that carried it back, with its output, continued nothing, and two answers calling other commands
    compared as equal. Now the call is the answer's, in replay's linking and the analysis' alike."""
    from infertap.analysis import Analysis

    shell = {"type": "local_shell_call", "id": "ls1", "call_id": "c1", "status": "completed", "action": {"type": "exec", "command": ["ls", "-la"], "env": {}}}  # fmt: skip
    search = {"type": "web_search_call", "id": "ws1", "status": "completed", "action": {"type": "search", "query": "weather"}}
    first = {"model": "m", "input": "list the files", "tag": "turn1"}
    back = [
        {"role": "user", "content": "list the files"},
        shell,
        search,
        {"type": "local_shell_call_output", "call_id": "c1", "output": "a b"},
    ]
    second = {"model": "m", "tag": "turn2", "input": back}
    other = {"model": "m", "tag": "other", "input": [back[0], {**shell, "action": {"type": "exec", "command": ["rm", "-rf", "/"], "env": {}}}, *back[2:]]}  # fmt: skip
    answer = _response("resp_1", [shell, search])
    empty = _response("resp_x", [])
    exchanges = [
        {"id": "turn1", "path": "/v1/responses", "body": first, "chunks": answer},
        {"id": "turn2", "path": "/v1/responses", "body": second, "chunks": empty},
        {"id": "other", "path": "/v1/responses", "body": other, "chunks": empty},
    ]
    assert _parents(tmp_path, exchanges) == {"turn1": None, "turn2": "turn1", "other": None}
    with Analysis([tmp_path / "src"], cache_dir=tmp_path / "cache") as a:
        rows = {r["exchange_id"]: r for r in a.query("SELECT exchange_id, parent_id, tool_calls FROM metrics").records()}
    assert {k: r["parent_id"] for k, r in rows.items()} == {"turn1": None, "turn2": "turn1", "other": None}
    assert rows["turn1"]["tool_calls"] == 2


def test_anthropic_turns_after_a_server_tool_continue_it(tmp_path):
    """A server tool's call (web search) and its result in the assistant's turn: the reply read the
    call as no call (or, streamed, as a call without a name) and the next turn carried the result as
    words the reply never said, so it continued nothing."""
    content = [
        {"type": "text", "text": "Searching."},
        {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "weather Paris"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "s1",
            "content": [{"type": "web_search_result", "url": "u", "title": "t", "encrypted_content": "e", "page_age": None}],
        },  # fmt: skip
        {"type": "text", "text": "Sunny."},
    ]
    reply = _message(content, "end_turn")
    history = [{"role": "user", "content": "weather?"}, {"role": "assistant", "content": content}, {"role": "user", "content": "thanks"}]  # fmt: skip
    searched_otherwise = [history[0], {"role": "assistant", "content": [content[0], {**content[1], "input": {"query": "x"}}, *content[2:]]}, history[2]]  # fmt: skip
    parents = _parents(
        tmp_path,
        [
            {"path": "/v1/messages", "body": {"model": "c", "messages": history[:1], "tag": "turn1"}, "chunks": _whole(reply)},
            {"path": "/v1/messages", "body": {"model": "c", "messages": history, "tag": "turn2"}},
            {"path": "/v1/messages", "body": {"model": "c", "messages": searched_otherwise, "tag": "other"}},
        ],
    )
    assert parents == {"turn1": None, "turn2": "turn1", "other": None}


def test_the_original_concurrency_of_a_replay_counts_what_was_sent_not_what_waited(fake, tmp_path):
    """A replay capped at one in flight, replayed again with --concurrency original: its requests
    were counted in flight from their start, queue waits included, and went out five at once."""
    from infertap.replay.workload import load

    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": 0.0, "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}} for i in range(5)])  # fmt: skip
    run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "capped", probe=False, schedule=Schedule("original", max_concurrency=1))
    )
    assert {i.concurrency for i in load(tmp_path / "src")[0]} == {5}  # the source: all at once
    assert {i.concurrency for i in load(tmp_path / "capped")[0]} == {1}  # the capped replay: one at a time


def test_the_progress_bar_fits_the_terminal(fake, tmp_path, monkeypatch):
    """The bar drew on rich's shared console, whose width is the first command's in the process: at
    COLUMNS=80 after a command at 300 it was wider than 80."""
    import rich
    from rich.console import Console

    monkeypatch.setattr(rich, "_console", Console(width=300))  # made by an earlier, wider command
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": t, "body": _chat(f"t{i}")} for i, t in enumerate([0, 0.05, 0.1])])
    args = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry", "--out", str(tmp_path / "out")]
    run = CliRunner().invoke(cli, args, env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.output
    bars = [line for line in run.output.splitlines() if "━" in line]
    assert bars and all(len(line) <= 80 for line in bars), bars
