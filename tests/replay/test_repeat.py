"""--repeat: each pass after the first is its own sessions, sent so as well as recorded so, and the
summary counts what it leaves out of the source once per pass, each count alike."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests import sdk_shapes
from tests.helpers import write_capture


def session_capture(path: Path) -> Path:
    """Two header-named sessions (s0, s1) of three turns each, every turn continuing the one before."""
    exchanges = []
    for s in range(2):
        said: list[dict[str, str]] = []
        for t in range(3):
            said = [*said, {"role": "user", "content": f"s{s} q{t}"}]
            reply = {"role": "assistant", "content": f"s{s} a{t}"}
            exchanges.append(
                {
                    "id": f"s{s}t{t}",
                    "offset_s": s * 0.01 + t * 0.05,
                    "session": f"s{s}",
                    "headers": [["content-type", "application/json"], ["x-session-id", f"s{s}"]],
                    "body": {"model": "m", "messages": said},
                    "chunks": [json.dumps(sdk_shapes.chat_answer(reply)).encode()],
                }
            )
            said = [*said, reply]
    write_capture(path, sorted(exchanges, key=lambda x: x["offset_s"]))
    return path


def _sessions(capture: Path, cache: Path) -> dict[str, tuple[int, Any]]:
    result = CliRunner().invoke(cli, ["stats", str(capture), "--by", "session", "--json", "--cache-dir", str(cache)])
    assert result.exit_code == 0, result.output
    groups = [g for g in json.loads(result.stdout)["groups"] if g.get("session")]
    return {g["key"]["session"]: (g["session"]["turns"], g["session"]["depth"]) for g in groups}


def test_a_repeated_pass_sends_sessions_of_its_own_through_a_recorder(tmp_path, fake, record):
    """Behind `infertap record`, pass 2's turns joined pass 1's sessions (one of 6 turns each): its
    header was sent as recorded. Now pass k sends <id>#k; pass 0 sends the source's headers."""
    src = session_capture(tmp_path / "src")
    _, upstream = fake
    rec = record(upstream)
    out = tmp_path / "out"
    args = ["replay", str(src), "--target", rec.url, "--out", str(out), "--no-probe", "--no-telemetry", "--json"]
    result = CliRunner().invoke(cli, [*args, "--repeat", "2"])
    assert result.exit_code == 0, result.output
    rec.stop()
    source = _sessions(src, tmp_path / "c1")
    assert set(source) == {"s0", "s1"}
    recorded = _sessions(rec.out, tmp_path / "c2")
    assert recorded == {**source, **{f"{s}#1": v for s, v in source.items()}}
    assert recorded == _sessions(out, tmp_path / "c3")  # as the replay's own capture names them
    by_id = {x["id"]: x for x in CaptureReader(src).exchanges()}
    for x in CaptureReader(out).exchanges():
        sent = by_id[x["source_id"]]["request_headers"]
        if x["repeat"] == 0:
            assert x["request_headers"] == sent
        else:
            assert x["request_headers"] != sent
            assert dict(x["request_headers"])["x-session-id"] == dict(sent)["x-session-id"] + "#1"
    got = {x["id"]: dict(x["request_headers"]).get("x-session-id") for x in CaptureReader(rec.out).exchanges()}
    assert sorted(got.values()) == sorted(["s0", "s1", "s0#1", "s1#1"] * 3)


def test_a_repeated_pass_sends_the_ids_its_client_keyed_its_session_by_apart(tmp_path, fake):
    """Codex's conversation_id and opencode's x-session-affinity (each the session's id, beside its
    session header) went out as recorded in pass k, so a gateway keyed by them kept pass k in pass
    0's conversation. Now they are sent as <id>#k where they hold the session's id, and as recorded
    where they hold anything else; a body's prompt_cache_key, part of the workload, as recorded."""
    keyed = [["session_id", "c1"], ["conversation_id", "c1"], ["x-session-affinity", "c1"]]
    other = [["x-session-id", "o1"], ["conversation_id", "shared"], ["x-session-affinity", "o2"]]
    cached = {"model": "m", "input": "hi", "prompt_cache_key": "c1"}
    plain = {"model": "m", "input": "yo"}
    write_capture(
        tmp_path / "src",
        [
            {"id": "c", "session": "c1", "headers": keyed, "body": cached},
            {"id": "o", "session": "o1", "headers": other, "body": plain, "offset_s": 0.1},
        ],
    )
    app, upstream = fake
    args = ["replay", str(tmp_path / "src"), "--target", upstream, "--out", str(tmp_path / "out"), "--no-probe"]
    result = CliRunner().invoke(cli, [*args, "--no-telemetry", "--json", "--repeat", "2"])
    assert result.exit_code == 0, result.output
    names = {n for n, _ in keyed + other}
    sent = [
        (json.loads(r["body"]), [[n.decode(), v.decode()] for n, v in r["headers"] if n.decode() in names]) for r in app.requests
    ]
    assert sorted(sent, key=repr) == sorted(
        [
            (cached, keyed),  # pass 0: as recorded
            (cached, [["session_id", "c1#1"], ["conversation_id", "c1#1"], ["x-session-affinity", "c1#1"]]),
            (plain, other),
            (plain, [["x-session-id", "o1#1"], ["conversation_id", "shared"], ["x-session-affinity", "o2"]]),  # not its id
        ],
        key=repr,
    )


def _left_out_capture(path: Path) -> Path:
    """One of each the summary counts apart: a multipart body (as_recorded under --model-map), one
    whose body was not kept (not_kept), one the recorder refused (source_refused); and a plain one."""
    multipart = b'--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--b--\r\n'
    write_capture(
        path,
        [
            {"offset_s": 0.0, "headers": [["content-type", "application/json"]]},
            {
                "offset_s": 0.1,
                "path": "/v1/audio/transcriptions",
                "headers": [["content-type", "multipart/form-data; boundary=b"]],
                "body": multipart,
                "chunks": [b'{"text": "hi"}'],
            },
            {"offset_s": 0.2, "headers": [["content-type", "application/json"]], "body": b"", "fields": {"request_body_size": 9}},
            {"offset_s": 0.3, "headers": [["content-type", "application/json"]], "chunks": [], "status": 444, "end": "refused"},
        ],
    )
    return path


def test_the_summary_counts_what_it_leaves_out_once_per_pass_each_alike(tmp_path, fake):
    """as_recorded was multiplied by --repeat (2 of 1 body) while not_kept and source_refused were
    counted once: each is now the source's exchanges, per pass, and the summary says so."""
    src = _left_out_capture(tmp_path / "src")
    _, upstream = fake
    seen = {}
    for repeat in (1, 3):
        out = tmp_path / f"out-{repeat}"
        args = ["replay", str(src), "--target", upstream, "--out", str(out), "--no-probe", "--no-telemetry", "--json"]
        result = CliRunner().invoke(cli, [*args, "--model-map", "m=n", "--repeat", str(repeat)])
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        header = next(r for r in CaptureReader(out).records() if r["type"] == "header")["recorder"]
        seen[repeat] = (summary["as_recorded"], summary["not_kept"], summary["source_refused"], summary["counted"])
        assert (header["transforms"]["as_recorded"], header["not_kept"], header["source_refused"]) == seen[repeat][:3]
        assert summary["sent"] == 2 * repeat  # what is sent is per pass times the passes
        assert ("in each of the 3 passes" in result.stderr) is (repeat == 3)
    assert seen == {1: (1, 1, 1, "per pass"), 3: (1, 1, 1, "per pass")}


def test_a_sweep_point_sends_sessions_of_its_own_through_a_recorder(tmp_path, fake, record):
    """Each point replayed the source's session ids: behind a session-keyed gateway the points'
    sessions merged (s0 of 12 turns over two points). Now point P sends and records <id>@P, a
    repeated pass of it <id>@P#k, the warm-up <id>@warmup: no two runs of a sweep share one."""
    src = session_capture(tmp_path / "src")
    _, upstream = fake
    rec = record(upstream)
    out = tmp_path / "sweep"
    args = ["sweep", str(src), "--target", rec.url, "--out", str(out), "--no-probe", "--no-telemetry", "--json"]
    result = CliRunner().invoke(
        cli, [*args, "--speeds", "4,8", "--slo", "error_rate<=100%", "--min-requests", "12", "--warmup", "2"]
    )
    assert result.exit_code == 0, result.output
    rec.stop()
    source = _sessions(src, tmp_path / "c1")
    names = {f"{s}@speed-{p}{k}": v for s, v in source.items() for p in (4, 8) for k in ("", "#1")}
    warm = {"s0@warmup": (1, 1), "s1@warmup": (1, 1)}  # the first two requests, one of each session
    assert _sessions(rec.out, tmp_path / "c2") == {**names, **warm}  # none merged across points or passes
    for p in (4, 8):
        point = _sessions(out / f"speed-{p}", tmp_path / f"c{p}")
        assert point == {n: v for n, v in names.items() if f"@speed-{p}" in n}  # as the point's capture names them
    sent = [dict(x["request_headers"])["x-session-id"] for x in CaptureReader(rec.out).exchanges()]
    assert Counter(sent) == {**dict.fromkeys(names, 3), **dict.fromkeys(warm, 1)}


def test_a_session_header_given_by_header_is_sent_as_given_and_warned_of(tmp_path, fake):
    """--header x-session-id=X stands in for every pass's (and point's) own ids, so a gateway keyed
    by it merges them: sent as the user gave it, with a warning that says so; none where nothing merges."""
    src = session_capture(tmp_path / "src")
    _, upstream = fake

    def replay(out: str, *extra: str) -> Any:
        args = ["replay", str(src), "--target", upstream, "--out", str(tmp_path / out), "--no-probe", "--no-telemetry"]
        result = CliRunner().invoke(cli, [*args, "--json", *extra])
        assert result.exit_code == 0, result.output
        return result

    warned = replay("a", "--header", "X-Session-Id=fixed", "--repeat", "2")
    assert "warning: --header X-Session-Id is sent as given in each of the 2 passes" in " ".join(warned.stderr.split())
    sent = {
        dict((n.lower(), v) for n, v in x["request_headers"])["x-session-id"] for x in CaptureReader(tmp_path / "a").exchanges()
    }
    assert sent == {"fixed"}
    assert "warning" not in replay("b", "--header", "x-session-id=fixed").stderr  # one pass: nothing of its own to merge
    assert "warning" not in replay("c", "--header", "x-tenant=t1", "--repeat", "2").stderr  # no session header
    args = ["sweep", str(src), "--target", upstream, "--out", str(tmp_path / "s"), "--no-probe", "--no-telemetry", "--json"]
    swept = CliRunner().invoke(cli, [*args, "--speeds", "4,8", "--slo", "error_rate<=100%", "--header", "x-session-id=fixed"])
    assert swept.exit_code == 0, swept.output
    assert "sent as given in every point and pass of the sweep" in " ".join(swept.stderr.split())
