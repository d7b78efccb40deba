"""What a replay says of its own fidelity and sends on the target: a schedule a concurrency cap bent,
redacted credentials, sampling settings in the request's own API, replays of replays, closed-loop
slots, failures counted as such, and secrets kept out of the replay's capture."""

from __future__ import annotations

import json
import re
import threading

import pytest
from click.testing import CliRunner

from infertap.capture.identity import describe, workload_identity, workload_summary
from infertap.capture.reader import CaptureReader
from infertap.capture.redact import REDACTED, Redactor
from infertap.capture.scrubbing import OFFLOAD_BYTES
from infertap.cli import cli
from infertap.replay import ReplayConfig, ReplayError, Schedule, Transforms, run_replay
from infertap.replay.workload import load
from tests import sdk_shapes
from tests.helpers import decompressed_bytes, write_capture


def _chat(tag: str, **extra) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False, "tag": tag, **extra}


def _sent(app) -> list[dict]:
    """The requests the fake target got from the replay (not from its telemetry)."""
    return [r for r in app.requests if r["path"].startswith(("/v1/", "/api/"))]


def _recorder(path) -> dict:
    return next(r for r in CaptureReader(path).records() if r["type"] == "header")["recorder"]


def test_a_replay_whose_requests_waited_for_the_cap_did_not_keep_its_schedule(fake, tmp_path):
    """Due 20 ms apart, each 150 ms on the target, one at a time: each left behind its schedule by its
    wait for the cap, which the dispatcher's lag leaves out; the summary and the identity say so."""
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": i * 0.02, "body": _chat(f"q{i}", pace_ms=150)} for i in range(4)])
    capped = run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "capped", probe=False, schedule=Schedule("original", max_concurrency=1))
    )
    assert capped["schedule_kept"] is False and capped["capped"] == 3 and capped["capped_at"] == 1
    assert capped["behind_ms"]["max"] >= capped["queue_wait_ms"]["max"] > 0  # the cap's wait is behind the schedule
    identity = workload_identity(tmp_path / "capped")
    assert identity.workload == workload_identity(tmp_path / "src").workload  # the same requests, in the same order
    assert not identity.schedule_kept and identity.capped == 3
    summary = workload_summary(identity, [_recorder(tmp_path / "capped")])
    assert summary["same_as_source"] and summary["same_schedule_as_source"] is False
    assert "schedule not kept: 3 requests waited for --max-concurrency 1" in describe(summary)

    free = run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "free", probe=False))
    assert free["schedule_kept"] is True and free["capped"] == 0
    assert workload_summary(workload_identity(tmp_path / "free"), [_recorder(tmp_path / "free")])["same_schedule_as_source"]
    # A cap the run never reached (four in flight at most under eight) bent nothing: the same schedule.
    roomy = ReplayConfig(tmp_path / "src", url, tmp_path / "roomy", probe=False, schedule=Schedule("original", max_concurrency=8))
    assert run_replay(roomy)["schedule_kept"] is True
    summary = workload_summary(workload_identity(tmp_path / "roomy"), [_recorder(tmp_path / "roomy")])
    assert summary["same_schedule_as_source"] and "schedule not kept" not in describe(summary)


def test_the_printed_summary_says_how_far_behind_the_schedule_requests_left(fake, tmp_path):
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": 0, "body": _chat(f"q{i}", pace_ms=100)} for i in range(3)])
    args = ["replay", str(tmp_path / "src"), "--target", url, "--out", str(tmp_path / "out"), "--no-probe", "--no-telemetry"]
    result = CliRunner().invoke(cli, [*args, "--max-concurrency", "1"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "sent behind the schedule ms" in result.output
    assert "not kept: capped at 1 (--max-concurrency), 2 requests waited" in result.output


def _rate(path, key: str) -> float:
    """Requests per second from the first to the last of the capture's ``key`` times: (n - 1) over the span."""
    times = [r[key] for r in CaptureReader(path).exchanges()]
    return (len(times) - 1) * 1e9 / (max(times) - min(times))


def test_the_summary_gives_the_request_rate_sent_beside_the_one_scheduled(fake, tmp_path):
    """A load generator's first check: the rate it achieved against the one asked. Due 50 ms apart
    (20/s), each 150 ms on the target: uncapped it sends at 20/s; one at a time, a send every 150 ms
    at most, under the 20/s still scheduled. A closed loop schedules no rate."""
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": i * 0.05, "body": _chat(f"q{i}", pace_ms=150)} for i in range(5)])
    rates = {}
    for name, schedule in [
        ("free", Schedule("rate", rate=20)),
        ("capped", Schedule("rate", rate=20, max_concurrency=1)),
        ("original", Schedule("original")),
        ("closed", Schedule("concurrency", concurrency=2)),
    ]:
        rates[name] = run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / name, probe=False, schedule=schedule))[
            "request_rate"
        ]
        assert rates[name]["sent"] == pytest.approx(_rate(tmp_path / name, "sent_ns"))
    assert rates["free"]["scheduled"] == rates["capped"]["scheduled"] == pytest.approx(20)
    assert rates["capped"]["sent"] < 1e9 / 150e6 < rates["capped"]["scheduled"]  # the cap's waits: not the rate asked
    assert rates["original"]["scheduled"] == pytest.approx(_rate(tmp_path / "src", "start_ns"))  # the recorded pace
    assert rates["closed"]["scheduled"] is None
    args = ["replay", str(tmp_path / "src"), "--target", url, "--out", str(tmp_path / "cli"), "--no-probe", "--no-telemetry"]
    result = CliRunner().invoke(cli, [*args, "--rate", "20", "--max-concurrency", "1"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    sent = _rate(tmp_path / "cli", "sent_ns")
    assert re.search(rf"request rate +{sent:.2f}/s sent, 20\.00/s scheduled", result.output), result.output


def test_redacted_query_credentials_are_dropped_and_the_targets_own_sent(fake, tmp_path):
    """A recorded ``key=[REDACTED]`` never reaches the target; the target URL's key does, on the path as
    recorded (no ``//``); neither the key nor any change shows in the replay's workload identity."""
    app, url = fake
    write_capture(tmp_path / "src", [{"body": _chat("q"), "query": f"key={REDACTED}&alt=sse"}])
    run_replay(ReplayConfig(tmp_path / "src", f"{url}/?key=TARGETKEY1234", tmp_path / "out", probe=False))
    (sent,) = _sent(app)
    assert sent["path"] == "/v1/chat/completions"
    assert sent["query"] == b"alt=sse&key=TARGETKEY1234"
    assert workload_identity(tmp_path / "out").workload == workload_identity(tmp_path / "src").workload
    assert b"TARGETKEY1234" not in decompressed_bytes(tmp_path / "out")
    (x,) = CaptureReader(tmp_path / "out").exchanges()
    assert x["query"] == f"alt=sse&key={REDACTED}"  # as sent, not as recorded: the target's key, redacted

    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "plain", probe=False))
    assert _sent(app)[-1]["query"] == b"alt=sse"


def test_a_body_credential_redacted_when_recorded_is_refused_unless_given(fake, tmp_path):
    app, url = fake
    write_capture(tmp_path / "src", [{"body": _chat("q", api_key=REDACTED)}])
    with pytest.raises(ReplayError, match="'api_key' was redacted when recorded: give the target's value with --set api_key="):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    assert _sent(app) == []
    given = Transforms(set_values=[("api_key", "TARGETKEY1234")])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "given", probe=False, transforms=given))
    assert json.loads(_sent(app)[-1]["body"])["api_key"] == "TARGETKEY1234"
    assert b"TARGETKEY1234" not in decompressed_bytes(tmp_path / "given")


def test_a_large_body_is_redacted_off_the_replays_loop_and_recorded_as_sent(fake, tmp_path, monkeypatch):
    """Each body a replay sends is redacted for its capture (``--set`` gives it a credential here);
    one of OFFLOAD_BYTES or more on a worker thread once its exchange is over, no longer on the
    loop before it was sent (a scan of many MiB held back every request due meanwhile). Still
    redacted, its echo in the response too; each record otherwise as sent, in order of sending."""
    app, url = fake
    key = "sk-replay-LLLL7777llll"
    large = {**_chat("large", api_key=REDACTED), "messages": [{"role": "user", "content": "word " * 200}] * 300}
    write_capture(
        tmp_path / "src",
        [
            {"path": "/echo-body", "body": large},
            {"path": "/echo-body", "offset_s": 0.01, "body": _chat("small", api_key=REDACTED)},
        ],
    )
    threads: dict[str, threading.Thread] = {}  # the tag of each body redacted -> the thread that did it
    body = Redactor.body

    def watched(self, raw, headers=(), found=None):
        threads[json.loads(raw)["tag"]] = threading.current_thread()
        return body(self, raw, headers, found)

    monkeypatch.setattr(Redactor, "body", watched)
    given = Transforms(set_values=[("api_key", key)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=given))
    assert threads["small"] is threading.current_thread()  # the loop's: run_replay runs it here
    assert threads["large"] is not threading.current_thread()
    sent = {json.loads(r["body"])["tag"]: r["body"] for r in app.requests if r["path"] == "/echo-body"}
    assert len(sent["large"]) > OFFLOAD_BYTES and key.encode() in sent["large"]  # the target got the key
    assert key.encode() not in decompressed_bytes(tmp_path / "out")
    xs = sorted(CaptureReader(tmp_path / "out").exchanges(), key=lambda x: x["seq"])
    assert [x["source_id"] for x in xs] == ["src-0", "src-1"]
    for x, tag in zip(xs, ("large", "small"), strict=True):
        assert x["request_body"] == sent[tag].replace(key.encode(), REDACTED.encode())  # every other byte as sent
        assert b"".join(x["chunks"]) == b"bad request: " + x["request_body"]  # its echo redacted too


def test_sampling_settings_go_in_options_on_ollamas_api(fake, tmp_path):
    """Ollama reads ``options.temperature``, never a top-level one: --set, --unset and pinned defaults go there."""
    app, url = fake
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False, "options": {"top_k": 5}}
    generate = {"model": "m", "prompt": "hi", "stream": False}
    enrichment = {"exchange_id": "src-1", "settings": {"repeat_penalty": {"value": 1.1, "source": "engine_default"}}}
    write_capture(
        tmp_path / "src",
        [{"path": "/api/chat", "body": chat}, {"path": "/api/generate", "body": generate}],
        enrichments=[enrichment],
    )
    transforms = Transforms(set_values=[("temperature", 0)], unset=["top_k"], pin_defaults=True)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    sent = {r["path"]: json.loads(r["body"]) for r in _sent(app)}
    assert sent["/api/chat"]["options"] == {"temperature": 0}
    assert sent["/api/generate"]["options"] == {"temperature": 0, "repeat_penalty": 1.1}
    assert not {"temperature", "top_k", "repeat_penalty"} & (set(sent["/api/chat"]) | set(sent["/api/generate"]))


def test_settings_named_as_other_apis_name_them_go_in_options_under_ollamas_names(fake, tmp_path):
    """Ollama reads ``options.num_predict`` and ``options.repeat_penalty``: a ``--set max_tokens`` or
    ``repetition_penalty`` written at the top level (or under that name in ``options``) is read by
    nothing, and the replay would run with no limit while saying it set one. Set under any name
    infertap knows, the setting lands where Ollama reads it, as its own name does."""
    app, url = fake
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    write_capture(tmp_path / "src", [{"path": "/api/chat", "body": chat}])
    bodies = []
    for n, (limit, penalty) in enumerate([("max_tokens", "repetition_penalty"), ("num_predict", "repeat_penalty")]):
        transforms = Transforms(set_values=[(limit, 8), (penalty, 1.2), ("think", False)])
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / f"out{n}", probe=False, transforms=transforms))
        bodies.append(json.loads(_sent(app)[-1]["body"]))
    assert bodies[0] == bodies[1], bodies  # other APIs' names and Ollama's own: one request
    assert bodies[0]["options"] == {"num_predict": 8, "repeat_penalty": 1.2}
    assert bodies[0]["think"] is False  # not a sampling setting: where it was named
    assert not {"max_tokens", "repetition_penalty", "num_predict"} & set(bodies[0])


def test_pinned_defaults_fill_a_null_options_and_a_non_object_one_is_refused_before_sending(fake, tmp_path):
    """Ollama reads ``"options": null`` as no options: pins go in a new object. An ``options``
    that is no object can take no pin, and the replay says so before it sends anything."""
    app, url = fake
    pinned = {"temperature": {"value": 0.8, "source": "engine_default"}}

    def capture(name: str, options: object) -> None:
        bodies = [{"model": "m", "messages": [{"role": "user", "content": f"q{i}"}], "stream": False} for i in range(3)]
        bodies[1]["options"] = options
        write_capture(
            tmp_path / name,
            [{"path": "/api/chat", "body": b} for b in bodies],
            enrichments=[{"exchange_id": f"src-{i}", "settings": pinned} for i in range(3)],
        )

    capture("null", None)
    transforms = Transforms(pin_defaults=True)
    run_replay(ReplayConfig(tmp_path / "null", url, tmp_path / "out", probe=False, transforms=transforms))
    assert [json.loads(r["body"])["options"] for r in _sent(app)] == [{"temperature": 0.8}] * 3
    app.requests.clear()
    capture("list", [])
    with pytest.raises(ReplayError, match="exchange src-1 .*'options' is a list"):
        run_replay(ReplayConfig(tmp_path / "list", url, tmp_path / "out2", probe=False, transforms=transforms))
    assert not app.requests


def test_a_replay_of_a_replay_keeps_the_originals_offsets(fake, tmp_path):
    """Each generation is due when the original was sent, whatever the dispatcher's jitter in the one before."""
    app, url = fake
    write_capture(tmp_path / "gen0", [{"offset_s": i * 0.013, "body": _chat(f"q{i}")} for i in range(12)])
    original = [item.offset_ns for item in load(tmp_path / "gen0")[0]]
    for g in (1, 2):
        run_replay(ReplayConfig(tmp_path / f"gen{g - 1}", url, tmp_path / f"gen{g}", probe=False))
        assert [item.offset_ns for item in load(tmp_path / f"gen{g}")[0]] == original
    assert workload_identity(tmp_path / "gen2").schedule == workload_identity(tmp_path / "gen0").schedule


def _two_agents(path) -> None:
    """Session A's four turns recorded, then session B's: each turn continues the one before."""
    exchanges = []
    for session in "AB":
        messages: list[dict] = []
        for t in range(4):
            messages = [*messages, {"role": "user", "content": f"{session}{t}"}]
            choice = {"index": 0, "message": {"role": "assistant", "content": f"r{session}{t}"}, "finish_reason": "stop"}
            reply = sdk_shapes.chat_completion(
                {"id": "c1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]}
            )
            body = {"model": "m", "messages": messages, "stream": False, "tag": f"{session}{t}", "pace_ms": 100}
            exchanges.append({"offset_s": len(exchanges) * 0.5, "body": body, "chunks": [json.dumps(reply).encode()]})
            messages = [*messages, {"role": "assistant", "content": f"r{session}{t}"}]
    write_capture(path, exchanges)


def test_closed_loop_slots_go_to_requests_that_can_be_sent(fake, tmp_path):
    """At --concurrency 2, A's second turn waits for its first without holding a slot: B starts beside A."""
    app, url = fake
    _two_agents(tmp_path / "src")
    run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, schedule=Schedule("concurrency", concurrency=2))
    )
    sent = {json.loads(x["request_body"])["tag"]: x for x in CaptureReader(tmp_path / "out").exchanges()}
    assert sent["B0"]["sent_ns"] < sent["A1"]["sent_ns"]  # B's first turn took the slot A's second would have held
    assert all(x["dep_wait_ns"] == 0 for x in sent.values())  # each took its slot once its parent was done
    assert app.max_in_flight == 2


def test_http_errors_are_failures_not_completions(fake, tmp_path):
    app, url = fake
    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0, "path": "/status/500", "body": _chat("e1")},
            {"offset_s": 0.01, "path": "/status/500", "body": _chat("e2")},
            {"offset_s": 0.02, "path": "/reset", "body": _chat("r")},
            {"offset_s": 0.03, "body": _chat("ok1")},
            {"offset_s": 0.04, "body": _chat("ok2")},
        ],
    )
    summary = run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    assert (summary["ok"], summary["failed"]) == (2, 3)
    assert summary["failures"] == {"500": 2, "upstream_error": 1}
    args = ["replay", str(tmp_path / "src"), "--target", url, "--out", str(tmp_path / "out2"), "--no-probe", "--no-telemetry"]
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "250"})
    said = " ".join(result.output.split())
    assert "sent 5 (2 ok, 3 failed: 500 ×2 on /status/500; upstream_error ×1 on /reset; 0 not sent)" in said
    assert "may not serve" not in said  # failures, but none a path's 404 for every request


def test_the_summary_says_which_failures_the_workload_had_when_recorded(fake, tmp_path):
    """A prompt past the context fails on any target: "2 failed: 400" alone blamed the target for
    the workload's own failures (a sweep said so since 6a7199d, a replay didn't). Counted per pass."""
    app, url = fake
    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0, "status": 400, "body": _chat("too long")},
            {"offset_s": 0.01, "status": 503, "body": _chat("busy")},
            {"offset_s": 0.02, "body": _chat("ok")},
        ],
    )
    write_capture(tmp_path / "clean", [{"offset_s": 0, "body": _chat("ok")}])
    summary = run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, repeat=2))
    assert summary["source_failed"] == {"400": 1, "503": 1} and summary["sent"] == 6
    clean = run_replay(ReplayConfig(tmp_path / "clean", url, tmp_path / "out-clean", probe=False))
    assert clean["source_failed"] == {}
    args = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry", "--repeat", "2"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "cli")], env={"COLUMNS": "250"})
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "failed when recorded 2 of these requests (400 ×1, 503 ×1): replayed as recorded" in said
    assert "(in each of the 2 passes)" in said
    args = ["replay", str(tmp_path / "clean"), "--target", url, "--no-probe", "--no-telemetry"]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "cli-clean")], env={"COLUMNS": "250"})
    assert result.exit_code == 0 and "failed when recorded" not in result.output


def test_a_path_the_target_does_not_serve_is_named(fake, tmp_path):
    """llama-cpp-python has no /v1/messages: the summary said "3 failed: 404 ×3" and not on which API."""
    app, url = fake
    exchanges = [{"offset_s": i * 0.01, "path": "/v1/embeddings?x=1", "body": {"model": "m", "input": "p"}} for i in range(3)]  # fmt: skip
    exchanges += [{"offset_s": 0.05, "body": _chat("ok")}, {"offset_s": 0.06, "path": "/status/500", "body": _chat("e")}]
    write_capture(tmp_path / "src", exchanges)
    args = ["replay", str(tmp_path / "src"), "--target", url, "--out", str(tmp_path / "out"), "--no-probe", "--no-telemetry"]
    result = CliRunner().invoke(cli, [*args, "--json"])
    summary = json.loads(result.output)
    assert summary["failures_by_path"] == {
        "/v1/embeddings": {"sent": 3, "failures": {"404": 3}},
        "/status/500": {"sent": 1, "failures": {"500": 1}},
    }
    said = " ".join(CliRunner().invoke(cli, [*args[:-3], str(tmp_path / "out2"), "--no-probe", "--no-telemetry"], env={"COLUMNS": "250"}).output.split())  # fmt: skip
    assert "5 (1 ok, 4 failed: 404 ×3 on /v1/embeddings: the target may not serve this API; 500 ×1 on /status/500; 0 not sent)" in said  # fmt: skip


def test_a_header_redacted_when_recorded_or_named_secret_is_redacted_in_the_replay(fake, tmp_path):
    """Recorded with ``--redact-header X-Tenant``, replayed with its value given: the replay's capture
    keeps it out as the recording did; ``--redact-header`` and ``--redact-query`` name others."""
    app, url = fake
    headers = [["content-type", "application/json"], ["x-tenant", REDACTED], ["x-org", "public"]]
    write_capture(tmp_path / "src", [{"body": _chat("q"), "headers": headers}])
    args = ["replay", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "--no-probe", "--no-telemetry", "--json"]
    args += ["--target", f"{url}/?org=SECRET-ORG-QUERY-77", "--header", "X-Tenant=SECRET-TENANT-42"]
    args += ["--header", "X-Org=SECRET-ORG-HEADER-77", "--redact-header", "X-Org", "--redact-query", "org"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (sent,) = _sent(app)
    assert (b"x-tenant", b"SECRET-TENANT-42") in sent["headers"] and sent["query"] == b"org=SECRET-ORG-QUERY-77"
    stored = decompressed_bytes(tmp_path / "out")
    for secret in (b"SECRET-TENANT-42", b"SECRET-ORG-HEADER-77", b"SECRET-ORG-QUERY-77"):
        assert secret not in stored
    (x,) = CaptureReader(tmp_path / "out").exchanges()
    assert ["X-Tenant", REDACTED] in x["request_headers"] and ["X-Org", REDACTED] in x["request_headers"]


def test_a_target_with_a_query_is_probed_and_watched_without_it(fake, tmp_path):
    """The target's own query (``?key=...``) goes with the replayed requests; the probe, the
    enrichment and the telemetry went to ``/?key=.../props`` (the query joined to their paths)."""
    app, url = fake
    write_capture(tmp_path / "src", [{"body": _chat("q")}])
    run_replay(ReplayConfig(tmp_path / "src", f"{url}/?key=TARGETKEY1234", tmp_path / "out", telemetry_interval_s=0.05))
    (sent,) = [r for r in app.requests if r["path"] == "/v1/chat/completions"]
    others = [r for r in app.requests if r is not sent]
    assert sent["query"] == b"key=TARGETKEY1234"
    assert others and all(r["path"] != "/" and b"TARGETKEY1234" not in r["query"] for r in others), others


def test_a_turn_refused_before_sending_is_not_a_failure_of_those_sent(fake, tmp_path):
    """A Responses turn continuing a response this replay never gets is refused, never sent: it was
    also counted a failure of the sent ones, so "ok" fell below what the target answered in full."""
    app, url = fake
    orphan = {"model": "m", "input": "and then?", "previous_response_id": "resp_not_in_capture"}
    write_capture(tmp_path / "src", [{}, {}, {"path": "/v1/responses", "body": orphan}])
    summary = run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, schedule=Schedule("concurrency", concurrency=1))
    )
    assert (summary["sent"], summary["ok"], summary["failed"], summary["not_sent"]) == (2, 2, 0, 1)
    assert summary["ends"] == {"complete": 2, "refused": 1}


def test_a_credential_redacted_inside_a_list_is_refused_with_advice_that_works(fake, tmp_path):
    """A Responses MCP tool's ``authorization`` sits in the ``tools`` list: the advice named
    ``--set tools.0.authorization=...``, which refused to go through a list."""
    app, url = fake
    body = {"model": "m", "input": "hi", "tools": [{"type": "mcp", "server_label": "a", "authorization": REDACTED}]}
    write_capture(tmp_path / "src", [{"path": "/v1/responses", "body": body}])
    with pytest.raises(ReplayError, match="--set tools.0.authorization=VALUE"):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False))
    given = Transforms(set_values=[("tools.0.authorization", "TARGETTOKEN1234")])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "given", probe=False, transforms=given))
    (sent,) = [r for r in app.requests if r["path"] == "/v1/responses"]
    assert json.loads(sent["body"])["tools"] == [{"type": "mcp", "server_label": "a", "authorization": "TARGETTOKEN1234"}]
    assert b"TARGETTOKEN1234" not in decompressed_bytes(tmp_path / "given")
    write_capture(tmp_path / "keys", [{"body": _chat("q", api_keys=[REDACTED, REDACTED])}])  # a list of them, redacted
    with pytest.raises(ReplayError, match="--set api_keys=VALUE"):
        run_replay(ReplayConfig(tmp_path / "keys", url, tmp_path / "out2", probe=False))


def test_a_redacted_query_parameter_is_no_part_of_a_requests_digest():
    """A credential in the query belongs to where the request went: with it redacted, without it, or
    with another key the request is the same; any other parameter makes it another."""
    from infertap.capture.identity import request_digest

    digest = lambda query: request_digest("POST", "/v1/chat/completions", query, b"{}")  # noqa: E731
    assert digest(f"key={REDACTED}&alt=sse") == digest("alt=sse") == digest(f"alt=sse&key={REDACTED}")
    assert digest("alt=sse") != digest("alt=sse&api-version=1") == digest(f"alt=sse&api-version=1&key={REDACTED}")


def test_headers_a_connection_header_names_are_not_replayed(fake, tmp_path):
    """``Connection: keep-alive, X-Hop`` makes X-Hop the old connection's, as the proxy treats it
    (it never forwards it); the replay sent it to the target."""
    app, url = fake
    headers = [
        ["content-type", "application/json"],
        ["Connection", "keep-alive, X-Hop"],
        ["x-hop", "proxy-only"],
        ["x-keep", "1"],
    ]
    write_capture(tmp_path / "src", [{"body": _chat("q"), "headers": headers}])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, telemetry=False))
    (sent,) = _sent(app)
    names = [n for n, _ in sent["headers"]]
    assert b"x-hop" not in names and (b"x-keep", b"1") in sent["headers"]
    assert Transforms().request_headers(headers) == [("content-type", "application/json"), ("x-keep", "1")]


def test_a_warm_up_is_sent_first_and_recorded_apart_from_the_measured_replay(fake, tmp_path):
    """--warmup 2: the workload's first two requests go out before the measured replay, into
    OUT/warmup; the replay's capture holds exactly the workload's five, and stats counts only those."""
    app, url = fake
    write_capture(tmp_path / "src", [{"offset_s": i * 0.01, "body": _chat(f"q{i}")} for i in range(5)])
    out = tmp_path / "out"
    args = ["replay", str(tmp_path / "src"), "--target", url, "--out", str(out), "--no-probe", "--no-telemetry"]
    run = CliRunner().invoke(cli, [*args, "--warmup", "2"], env={"COLUMNS": "250"})
    assert run.exit_code == 0, run.output
    tags = [json.loads(r["body"])["tag"] for r in _sent(app)]
    assert tags == ["q0", "q1", "q0", "q1", "q2", "q3", "q4"]  # the warm-up's two first
    assert sorted(json.loads(e["request_body"])["tag"] for e in CaptureReader(out).exchanges()) == [f"q{i}" for i in range(5)]
    assert len(list(CaptureReader(out / "warmup").exchanges())) == 2
    assert "warm-up" in run.output and "2 sent first (complete ×2)" in " ".join(run.output.split())
    stats = CliRunner().invoke(cli, ["stats", str(out), "--json", "--cache-dir", str(tmp_path / "cache")])
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.output)["groups"][0]["requests"] == 5
    as_json = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "j"), "--warmup", "1", "--json"])
    assert json.loads(as_json.output)["warmup"] == {"sent": 1, "out": str(tmp_path / "j" / "warmup"), "ends": {"complete": 1}}


def test_the_summary_gives_the_ok_requests_per_second_over_the_span_from_the_first_send_to_the_last_end(fake, tmp_path):
    """Completed requests/s, as GuideLLM's and AIPerf's summaries give it: the ok ones over the first
    send to the last end, not request_rate's sends."""
    app, url = fake
    ok = [{"offset_s": i * 0.02, "body": _chat(f"q{i}", pace_ms=100)} for i in range(3)]
    write_capture(tmp_path / "src", [*ok, {"offset_s": 0.06, "path": "/status/500", "body": _chat("bad")}])
    out = tmp_path / "out"
    args = ["replay", str(tmp_path / "src"), "--target", url, "--out", str(out), "--no-probe", "--no-telemetry"]
    as_json = CliRunner().invoke(cli, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    summary = json.loads(as_json.output)
    exchanges = list(CaptureReader(out).exchanges())
    span = (max(e["sent_ns"] + e["end_ns"] for e in exchanges) - min(e["sent_ns"] for e in exchanges)) / 1e9
    assert summary["ok"] == 3 and summary["throughput"]["span_s"] == pytest.approx(span)
    assert summary["throughput"]["ok_per_s"] == pytest.approx(3 / span)
    text = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "text")], env={"COLUMNS": "250"})
    assert re.search(r"throughput +\d+\.\d\d ok requests/s, ", text.output), text.output
    assert "(from the first send to the last end" in text.output


def test_the_summary_output_tokens_per_second_is_stats_of_the_replayed_capture(fake, tmp_path):
    """The summary's output tokens/s counts as ``infertap stats`` does (``apis.answer_tokens``): the
    engine's count of each ok answer (a chat stream's usage, a whole body's, a Messages stream's,
    Ollama's ``eval_count``, llama.cpp's ``tokens_predicted``), none of a failed one, over the run's
    span. A stream that reported no count (a chat stream without ``include_usage``, a Responses
    stream) was counted apart as unknown by the summary while stats counted its token-bearing
    events (``chunks``): the summary now counts them too, and the two match. A whole body with no
    usage (a Responses JSON answer) has no count in either."""
    _, url = fake
    usage = {"stream": True, "stream_options": {"include_usage": True}, "n_chunks": 7}
    messages = {"model": "m", "max_tokens": 9, "n_chunks": 4, "messages": [{"role": "user", "content": "m"}], "stream": True}
    ollama = {"model": "m", "messages": [{"role": "user", "content": "o"}], "tag": "o", "n_chunks": 5}
    counted = [
        {"body": _chat("whole")},
        {"body": _chat("s1", **usage)},
        {"body": _chat("failed", **usage, error_at=2)},  # an error said mid-stream, then its usage: its tokens in neither
        {"path": "/v1/messages", "body": messages},
        {"path": "/api/chat", "body": ollama},
        {"path": "/completion", "body": {"prompt": "h", "stream": True, "tag": "h", "n_chunks": 6}},
    ]
    bare = [
        {"body": _chat("bare", stream=True, n_chunks=9)},
        {"path": "/v1/responses", "body": {"model": "m", "input": "r", "tag": "r", "stream": True, "n_chunks": 4}},
        {"path": "/v1/responses", "body": {"model": "m", "input": "w", "tag": "w", "stream": False}},  # no count
    ]
    rates = {}
    for name, exchanges in (("counted", counted), ("bare", [*counted, *bare])):
        write_capture(tmp_path / f"src-{name}", [{"offset_s": i * 0.01, **x} for i, x in enumerate(exchanges)])
        args = ["replay", str(tmp_path / f"src-{name}"), "--target", url, "--no-probe", "--no-telemetry", "--json"]
        done = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / name)])
        assert done.exit_code == 0, done.output
        summary = json.loads(done.stdout)
        stats = CliRunner().invoke(cli, ["stats", str(tmp_path / name), "--json", "--cache-dir", str(tmp_path / "cache")])
        assert stats.exit_code == 0, stats.output
        [group] = json.loads(stats.stdout)["groups"]
        assert summary["failed"] == 1 and summary["ok"] == group["ok"] == len(exchanges) - 1, summary
        assert summary["throughput"]["span_s"] == pytest.approx(group["active_s"], rel=1e-6)
        assert summary["output_tokens"]["total"] == group["workload"]["output_tokens"]["total"], (summary, group)
        assert summary["throughput"]["output_tokens_per_s"] == pytest.approx(group["throughput"]["output_tokens_per_s"], rel=1e-6)
        # each source as stats names it, by answers and by tokens
        assert summary["output_tokens"]["source"] == group["output_tokens_source"], (summary, group)
        assert summary["output_tokens"]["by_source"] == group["workload"]["output_tokens"]["by_source"], (summary, group)
        rates[name] = summary, group
    summary, group = rates["counted"]
    total = group["workload"]["output_tokens"]["total"]
    assert summary["output_tokens"] == {
        "total": total,
        "counted": 5,
        "unknown": 0,
        "source": {"usage": 5},
        "by_source": {"usage": total},
    }
    more, group = rates["bare"]
    assert more["output_tokens"]["counted"] == 7 and more["output_tokens"]["unknown"] == 1, more
    assert group["output_tokens_source"] == {"usage": 5, "chunks": 2}, group
    assert more["output_tokens"]["by_source"] == {"usage": total, "chunks": 9 + 4}, more
    # must differ: the two streams' token events (9 and 4) are in the second run's count
    assert more["output_tokens"]["total"] - summary["output_tokens"]["total"] == 9 + 4


def test_the_summary_gives_the_output_tokens_per_second_by_the_answers_usage(fake, tmp_path):
    """The summary gave no output tokens/s ("infertap stats OUT" for it), where a sweep's points have
    one. It reads each ok answer's usage: a stream's from its last events, a whole body's, a Messages
    stream's; a stream that reported none (a chat stream without include_usage) by its token events,
    as stats does; an answer of no count (a whole body with no usage) is counted apart, the rate then
    a lower bound, and unknown where no answer had a count."""
    app, url = fake
    usage = {"stream": True, "stream_options": {"include_usage": True}, "n_chunks": 7}
    messages = {"model": "m", "max_tokens": 9, "n_chunks": 4, "messages": [{"role": "user", "content": "m"}], "stream": True}
    whole = {"path": "/v1/responses", "body": {"model": "m", "input": "w", "tag": "w", "stream": False}}
    bodies = [
        _chat("whole-1"),
        _chat("whole-2"),
        _chat("s1", **usage),
        _chat("s2", **usage),
        _chat("bare", stream=True, n_chunks=6),
    ]
    records = [{"offset_s": i * 0.01, "body": b} for i, b in enumerate(bodies)]
    records += [{"offset_s": 0.05, "path": "/v1/messages", "body": messages}, {"offset_s": 0.06, **whole}]
    write_capture(tmp_path / "src", records)
    args = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry"]
    as_json = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "j"), "--json"])
    assert as_json.exit_code == 0, as_json.output
    summary = json.loads(as_json.output)
    total = 3 + 3 + 7 + 7 + 6 + 4  # two whole bodies' usage, two streams', the bare stream's events, the Messages stream's
    assert summary["ok"] == 7 and summary["output_tokens"] == {
        "total": total,
        "counted": 6,
        "unknown": 1,
        "source": {"usage": 5, "chunks": 1},
        "by_source": {"usage": total - 6, "chunks": 6},
    }, summary
    tp = summary["throughput"]
    assert tp["output_tokens_per_s"] == pytest.approx(total / tp["span_s"])
    text = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "t")], env={"COLUMNS": "250"})
    assert text.exit_code == 0, text.output
    said = " ".join(text.output.split())
    lower = r"ok requests/s, \d+\.\d\d output tokens/s \(of 6 answers; 1 not streamed reported no usage: a lower bound\)"
    assert re.search(lower, said), said
    # None had a count: unknown, not 0.
    write_capture(tmp_path / "bare", [{"offset_s": i * 0.01, **whole} for i in range(3)])
    bare = ["replay", str(tmp_path / "bare"), "--target", url, "--no-probe", "--no-telemetry"]
    as_json = CliRunner().invoke(cli, [*bare, "--out", str(tmp_path / "bj"), "--json"])
    summary = json.loads(as_json.output)
    assert summary["throughput"]["output_tokens_per_s"] is None and summary["output_tokens"]["unknown"] == 3, summary
    text = CliRunner().invoke(cli, [*bare, "--out", str(tmp_path / "bt")], env={"COLUMNS": "250"})
    assert "output tokens/s unknown (no answer was streamed or reported its usage)" in " ".join(text.output.split()), text.output


def test_an_enrichment_counts_the_answers_without_usage_as_stats_does() -> None:
    """The metrics view counts an answer without usage by its enrichment's count (``tokenize``),
    before its token events or no count; the summary recounts so once the enrichment ends: a stream's
    events replaced, a whole body of no count counted, an answer with usage left as it was."""
    from collections import Counter

    from infertap.replay.runner import ReplayStats, recount, summarize

    stats = ReplayStats(total=4, sent=4, intervals=[(0, 2_000_000_000)])
    stats.output_tokens, stats.tokens_counted, stats.tokens_unknown = 10 + 6, 2, 1
    stats.tokens_by_source, stats.answers_by_source = Counter(usage=10, chunks=6), Counter(usage=1, chunks=1)
    stats.without_usage = {"stream": 6, "whole": None}
    summary = summarize(stats, 2.0)
    assert summary["output_tokens"]["source"] == {"usage": 1, "chunks": 1}
    recount(summary, stats, {"other": 99})  # no answer of this run: nothing changes
    assert summary["output_tokens"]["total"] == 16 and summary["throughput"]["output_tokens_per_s"] == 8.0
    recount(summary, stats, {"stream": 9, "whole": 5, "usage-one": 99})
    assert summary["output_tokens"] == {
        "total": 10 + 9 + 5,
        "counted": 3,
        "unknown": 0,
        "source": {"tokenize": 2, "usage": 1},
        "by_source": {"tokenize": 14, "usage": 10},
    }
    assert summary["throughput"]["output_tokens_per_s"] == 12.0
