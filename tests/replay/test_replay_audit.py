"""What an audit of replay found, each checked end to end against the fake engine: Ctrl-C once the
last request is out, and with requests queued behind a slot; body transforms beside a request
without a body, on a body they don't change, on a lone surrogate; ``--set`` values that are no
JSON; ``--api-key`` beside ``--header Authorization``; a Responses turn whose parent isn't replayed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.replay import Filters, ReplayConfig, Transforms, run_replay
from infertap.replay.transforms import Pin, TransformError, parse_value
from tests import sdk_shapes
from tests.fake_upstream import FakeUpstream, ServerThread
from tests.helpers import write_capture


def chat(tag: str, **extra: Any) -> dict[str, Any]:
    return {"model": "small", "messages": [{"role": "user", "content": tag}], "stream": False, "tag": tag, **extra}


def _interrupted(
    app: FakeUpstream, url: str, capture: Path, out: Path, *extra: str, after_s: float = 0.3
) -> tuple[dict[str, Any], float, float]:
    """``infertap replay`` interrupted (SIGINT) once the target has its first request: its summary,
    how long it took to exit, and when the signal was sent."""
    args = [sys.executable, "-m", "infertap", "replay", str(capture), "--target", url, "--out", str(out)]
    proc = subprocess.Popen(
        [*args, "--no-probe", "--no-telemetry", "--json", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not app.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(after_s)
    signalled = time.monotonic()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr  # the summary printed, and the exit code of a command cut short
    return json.loads(stdout), time.monotonic() - signalled, signalled


def test_ctrl_c_ends_the_wait_for_the_last_request_and_sends_nothing_queued(tmp_path: Path) -> None:
    app = FakeUpstream()
    with ServerThread(app) as server:
        write_capture(tmp_path / "hang", [{"path": "/hang-headers", "body": chat("h")}])
        summary, took, _ = _interrupted(
            app, server.url, tmp_path / "hang", tmp_path / "o1", "--grace", "0.5", "--read-timeout", "60"
        )
        assert took < 15 and summary["ends"] == {"cancelled": 1}  # the grace period, not the read timeout
        app.requests.clear()
        # Each answer takes 2 s, in the 3 s grace: a slot freed after Ctrl-C, which must not send the next.
        # At 0.4 s, a replayer slowed over 0.3 s in handling the signal (a loaded machine) sent q1 before it.
        queued = [{"offset_s": 0, "body": chat(f"q{i}", pace_ms=2000)} for i in range(5)] + [
            {"offset_s": 100, "body": chat("late")}
        ]
        write_capture(tmp_path / "queued", queued)
        summary, _, signalled = _interrupted(
            app, server.url, tmp_path / "queued", tmp_path / "o2", "--grace", "3", "--max-concurrency", "1", after_s=0.1
        )
        assert [r for r in app.requests if r["at"] > signalled] == []  # nothing sent after Ctrl-C
        assert summary["sent"] == len(list(CaptureReader(tmp_path / "o2").exchanges())) == sum(summary["ends"].values())


def test_a_second_ctrl_c_ends_the_grace_period_and_keeps_the_capture_whole(tmp_path: Path) -> None:
    """A long --grace (for long answers) left only a kill, which loses the capture's end: a second
    Ctrl-C cancels what is in flight now, the capture closed, as a second Ctrl-C ends record's."""
    app = FakeUpstream()
    with ServerThread(app) as server:
        write_capture(tmp_path / "hang", [{"path": "/hang-headers", "body": chat("h")}])
        args = [sys.executable, "-m", "infertap", "replay", str(tmp_path / "hang"), "--target", server.url]
        proc = subprocess.Popen(
            [*args, "--out", str(tmp_path / "out"), "--no-probe", "--no-telemetry", "--json", "--grace", "3600"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not app.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # handled apart: two signals pending at once are one
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=120)  # well inside the grace period asked for
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    assert proc.returncode == 130, stderr
    summary = json.loads(stdout)
    assert summary["stopped_early"] and summary["ends"] == {"cancelled": 1}
    reader = CaptureReader(tmp_path / "out")
    assert [r["end"] for r in reader.exchanges()] == ["cancelled"]
    assert reader.closed_cleanly


def test_body_transforms_leave_what_they_dont_change_as_recorded(tmp_path: Path) -> None:
    app = FakeUpstream()
    raw = b'{"model": "other", "messages": [{"role": "user", "content": "caf\\u00e9"}], "stream": false, "tag": "o", "seed": 1E3}'
    surrogate = b'{"model": "small", "messages": [{"role": "user", "content": "\\ud83d"}], "stream": false, "tag": "s"}'
    write_capture(
        tmp_path / "src",
        [
            {"method": "GET", "path": "/v1/models", "body": b""},  # nothing to transform: sent, not refused
            {"body": raw},  # its model isn't in the map: its bytes as recorded
            {"body": surrogate},  # a lone surrogate: JSON carries it escaped
            {"body": chat("c")},
        ],
    )
    with ServerThread(app) as server:
        transforms = Transforms(model_map={"small": "big"}, set_values=[("temperature", 0)])
        summary = run_replay(
            ReplayConfig(tmp_path / "src", server.url, tmp_path / "out", probe=False, telemetry=False, transforms=transforms)
        )
    assert summary["sent"] == 4
    bodies = {r["path"]: r["body"] for r in app.requests if r["path"] != "/v1/chat/completions"}
    chats = [r["body"] for r in app.requests if r["path"] == "/v1/chat/completions"]
    assert bodies == {"/v1/models": b""}
    sent = [json.loads(b) for b in chats]
    assert [b["model"] for b in sent] == ["other", "big", "big"] and [b.get("temperature") for b in sent] == [0, 0, 0]
    assert sent[1]["messages"][0]["content"] == "\ud83d"
    assert Transforms(model_map={"small": "big"}).body(raw) is raw  # a map alone, on a body it doesn't touch: as recorded


def test_a_number_beyond_a_double_is_rewritten_as_it_was_sent_not_as_infinity() -> None:
    """``1e400`` is valid JSON that reads as an infinite float: written back, it was ``Infinity``, which no JSON reader takes."""
    raw = b'{"model":"a","logit_bias":{"5":1e400,"6":-1E+400},"messages":[{"role":"user","content":"\\ud83d"}],"x":0.5}'
    sent = Transforms(model="b").body(raw)
    assert sent == b'{"model":"b","logit_bias":{"5":1e400,"6":-1E+400},"messages":[{"role":"user","content":"\\ud83d"}],"x":0.5}'
    assert json.loads(sent, parse_constant=_no_constant)["logit_bias"]["5"] == float("inf")


def test_a_rewritten_body_sends_each_number_as_it_was_sent_but_what_it_was_told_to_change() -> None:
    """``-0`` came back as ``0`` after a ``--set``, ``--model-map`` or ``--pin-defaults`` (and
    ``1E5`` as ``100000.0``): a JavaScript or Go engine reads -0 as another float than 0."""
    numbers = '"a":-0,"b":-0.0,"c":1E5,"d":1e400,"e":0.10000000000000001,"f":1.50,"g":[-0,7,2.5]'
    raw = ('{"model":"small","seed":-0,"temperature":-0,' + numbers + "}").encode()
    rewrites = {
        "--set": Transforms(set_values=[("temperature", parse_value("0.7"))]),
        "--model-map": Transforms(model_map={"small": "big"}),
        "--pin-defaults": Transforms(pin_defaults=True),
    }
    pinned = {"temperature": Pin(0.7, frozenset({"temperature"}))}  # the source ignored the request's
    sent = {name: t.body(raw, pinned=pinned if t.pin_defaults else None) for name, t in rewrites.items()}
    assert sent["--set"] == sent["--pin-defaults"] == ('{"model":"small","seed":-0,"temperature":0.7,' + numbers + "}").encode()
    assert sent["--model-map"] == ('{"model":"big","seed":-0,"temperature":-0,' + numbers + "}").encode()
    # a value given is sent as given: -0 is no 0, nor 1E-1 0.1
    given = Transforms(set_values=[("seed", parse_value("-0")), ("top_p", parse_value("1E-1"))]).body(b'{"seed":5}')
    assert given == b'{"seed":-0,"top_p":1E-1}'


def test_a_value_given_holding_objects_is_sent_alike_in_every_body() -> None:
    """A ``--set`` of an object is placed in each body: marking the numbers sent as written (``0.70``,
    ``-0``) in the one object all bodies shared sent the markers in place of the numbers from the
    second body on; a later ``--set`` inside it reached every body too."""
    given = Transforms(
        set_values=[("options", parse_value('{"temperature":0.70,"seed":-0,"stop":["x"]}')), ("options.top_k", parse_value("4"))],
        pin_defaults=True,
    )
    pinned = {"stop": Pin(["\n", "User:"], frozenset({"stop"}))}
    bodies = [given.body(b'{"model":"m","n":%d}' % i, pinned=pinned) for i in range(3)]
    assert bodies == [
        b'{"model":"m","n":%d,"stop":["\\n","User:"],"options":{"temperature":0.70,"seed":-0,"stop":["x"],"top_k":4}}' % i
        for i in range(3)
    ]
    other = Transforms(set_values=[("options", parse_value('{"seed":-0}'))], unset=["options.seed"])
    assert [other.body(b'{"n":1}'), other.body(b'{"n":2}')] == [b'{"n":1,"options":{}}', b'{"n":2,"options":{}}']


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} is no JSON")


def test_set_values_that_are_no_json_and_an_api_key_beside_an_authorization_header(tmp_path: Path) -> None:
    assert parse_value("NaN") == "NaN" and parse_value("Infinity") == "Infinity"  # text, not a float JSON can't carry
    assert parse_value("[1, 2.5]") == [1, 2.5]
    with pytest.raises(TransformError, match="beyond a double"):
        parse_value("1e400")
    write_capture(tmp_path / "src", [{}])
    run = CliRunner().invoke(
        cli,
        [
            "replay",
            str(tmp_path / "src"),
            "--target",
            "http://127.0.0.1:9",
            "--out",
            str(tmp_path / "o"),
            "--api-key",
            "k",
            "--header",
            "authorization=Bearer h",
        ],
    )
    assert run.exit_code != 0 and "give one of them" in run.output


def test_a_responses_turn_whose_parent_is_not_replayed_is_refused_not_sent_stale(tmp_path: Path) -> None:
    answer = sdk_shapes.response(
        {"id": "resp_src_0", "object": "response", "model": "m", "status": "completed", "output": [], **sdk_shapes.RESPONSE_REST}
    )
    first = {"model": "m", "input": "hi", "tag": "r0"}
    second = {"model": "m", "input": [{"role": "user", "content": "more"}], "previous_response_id": "resp_src_0", "tag": "r1"}
    write_capture(
        tmp_path / "src",
        [
            {"path": "/v1/responses", "body": first, "chunks": [json.dumps(answer).encode()]},
            {
                "offset_s": 1.0,
                "path": "/v1/responses",
                "body": second,
                "chunks": [json.dumps({**answer, "id": "resp_src_1"}).encode()],
            },
        ],
    )
    app = FakeUpstream()
    with ServerThread(app) as server:
        out = tmp_path / "out"  # the first turn left out by a filter
        run_replay(ReplayConfig(tmp_path / "src", server.url, out, probe=False, telemetry=False, filters=Filters(after_s=0.5)))
    assert app.requests == []  # never sent with the recorded engine's id
    (x,) = CaptureReader(tmp_path / "out").exchanges()
    assert x["end"] == "refused" and "resp_src_0" in x["error"]


def test_a_replay_or_an_import_into_an_existing_capture_says_it_adds_a_run(fake, tmp_path: Path) -> None:
    """It appends silently, and compare then read another workload's run among the replay's."""
    _, url = fake
    write_capture(tmp_path / "src", [{"offset_s": 0.0}, {"offset_s": 0.01}])
    said = []
    for _ in range(2):
        run = CliRunner().invoke(
            cli, ["replay", str(tmp_path / "src"), "--target", url, "--out", str(tmp_path / "B"), "--no-probe", "--no-telemetry"]
        )
        assert run.exit_code == 0, run.output
        said.append("already holds a capture; this replay is added to it as another run" in run.stderr)
    assert said == [False, True]
    har = tmp_path / "t.har"
    har.write_text(json.dumps({"log": {"entries": []}}))
    run = CliRunner().invoke(cli, ["import", str(har), "--out", str(tmp_path / "B")])
    assert "already holds a capture; this import is added to it as another run" in run.stderr, run.output


def test_the_api_key_goes_in_the_header_each_path_s_api_reads_and_never_reaches_the_capture(tmp_path: Path) -> None:
    """Anthropic's /v1/messages reads x-api-key (a bearer token is a 401 there), the OpenAI paths
    Authorization: Bearer; the recorded anthropic-version is sent as recorded, and the key is redacted."""
    key = "sk-ant-TARGETKEY-1234567890"
    messages = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], "stream": True, "tag": "a"}
    anthropic = [["content-type", "application/json"], ["x-api-key", "[REDACTED]"], ["anthropic-version", "2023-06-01"]]
    write_capture(
        tmp_path / "src",
        [{"body": chat("c")}, {"path": "/v1/messages", "body": messages, "headers": anthropic, "offset_s": 0.01}],
    )
    app = FakeUpstream()
    with ServerThread(app) as server:
        run = CliRunner().invoke(
            cli,
            [
                "replay",
                str(tmp_path / "src"),
                "--target",
                server.url,
                "--out",
                str(tmp_path / "o"),
                "--no-probe",
                "--api-key",
                key,
            ],
        )
    assert run.exit_code == 0, run.output
    sent = {r["path"]: {n.decode().lower(): v.decode() for n, v in r["headers"]} for r in app.requests}
    assert sent["/v1/messages"]["x-api-key"] == key and "authorization" not in sent["/v1/messages"]
    assert sent["/v1/messages"]["anthropic-version"] == "2023-06-01"
    assert sent["/v1/chat/completions"]["authorization"] == f"Bearer {key}" and "x-api-key" not in sent["/v1/chat/completions"]
    assert key.encode() not in b"".join(p.read_bytes() for p in (tmp_path / "o").rglob("*") if p.is_file())
    recorded = {r["path"]: dict(r["request_headers"]) for r in CaptureReader(tmp_path / "o") if r.get("type") == "exchange"}
    assert recorded["/v1/messages"]["x-api-key"] == "[REDACTED]"
