"""Headers that change what a request asks (`anthropic-beta` turns on features, `anthropic-version`
picks the API version that reads the body, `OpenAI-Beta` likewise) were no part of the workload
identity: two runs differing only in them were declared identical workloads. They are now part of a
request's digest where sent; a capture without them keeps the identity it had."""

from __future__ import annotations

import hashlib
import json

from click.testing import CliRunner

from infertap.analysis.claim import claim, field_text
from infertap.analysis.compare import compare
from infertap.capture.identity import asked_headers, replay_derivation, workload_identity
from infertap.cli import cli
from tests.helpers import write_capture

BODY = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
ANSWER = json.dumps(
    {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hello"}], "stop_reason": "end_turn",
     "usage": {"input_tokens": 3, "output_tokens": 2}}
).encode()  # fmt: skip
BASE = [["content-type", "application/json"], ["x-api-key", "[REDACTED]"], ["anthropic-version", "2023-06-01"]]


def _capture(path, headers, shared=False):
    """``shared``: a request of the same headers on every side first, so that compare pairs something
    (a request of other asked headers is no identical request: tests/analysis/test_pairing_asked_headers.py)."""
    first = [{"path": "/v1/messages", "body": {**BODY, "system": "s"}, "headers": BASE, "chunks": [ANSWER]}] if shared else []
    write_capture(path, [*first, {"path": "/v1/messages", "body": BODY, "headers": headers, "chunks": [ANSWER]}], run_wall=1.8e9)


def test_headers_that_change_what_a_request_asks_are_in_its_identity(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    beta = ["anthropic-beta", "context-management-2025-06-27,output-128k-2025-02-19"]
    _capture(tmp_path / "beta", [*BASE, beta])
    _capture(tmp_path / "plain", BASE)
    # Must match: the same features over two lines in another order, another key, another user agent.
    again = [["anthropic-beta", "output-128k-2025-02-19"], ["Anthropic-Beta", " context-management-2025-06-27"]]
    _capture(tmp_path / "again", [["x-api-key", "[REDACTED]"], ["user-agent", "other/2"], *BASE[2:], *again])
    ids = {name: workload_identity(tmp_path / name).workload for name in ("beta", "plain", "again")}
    assert ids["beta"] != ids["plain"] and ids["beta"] == ids["again"]
    # The tables' identity (stats, compare, the card) is the capture package's.
    assert claim(tmp_path / "beta", cache_dir=tmp_path / "cache")["workload"]["value"]["identity"] == ids["beta"]
    _capture(tmp_path / "beta+", [*BASE, beta], shared=True)
    _capture(tmp_path / "plain+", BASE, shared=True)
    t = compare(tmp_path / "beta+", tmp_path / "plain+")["traffic"]
    assert not t["identical"] and "1 of A's 2 generation requests are not in B" in t["how"]
    assert compare(tmp_path / "beta", tmp_path / "again")["traffic"]["identical"]
    said = (
        "the headers that change what a request asks differ: A's requests sent anthropic-beta: "
        "context-management-2025-06-27,output-128k-2025-02-19; anthropic-version: 2023-06-01 or anthropic-version: 2023-06-01, "
        "B's anthropic-version: 2023-06-01"
    )
    assert said in t["how"]
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "beta+"), str(tmp_path / "plain+")]).output
    assert "traffic: identical" not in out and said in " ".join(out.split())
    # The card names them, as its identity can't.
    text = field_text("workload", claim(tmp_path / "beta", cache_dir=tmp_path / "cache")["workload"])
    assert "; headers asked: anthropic-beta: context-management-2025-06-27,output-128k-2025-02-19; anthropic-version" in text
    no_beta = field_text("workload", claim(tmp_path / "plain", cache_dir=tmp_path / "cache")["workload"])
    assert "headers asked: anthropic-version: 2023-06-01" in no_beta and "anthropic-beta" not in no_beta
    # anthropic-version too: another API version is another request.
    _capture(tmp_path / "v2", [*BASE[:2], ["anthropic-version", "2099-01-01"]])
    assert workload_identity(tmp_path / "v2").workload != ids["plain"]


def test_only_the_asked_headers_are_read_and_a_redacted_one_is_not_known():
    assert asked_headers([["x-api-key", "[REDACTED]"], ["user-agent", "u"]]) == []
    assert asked_headers([["OpenAI-Beta", "assistants=v2"]]) == [("openai-beta", "assistants=v2")]
    assert asked_headers([["anthropic-beta", "[REDACTED]"]]) == []  # redacted by the user: not known


def test_the_unchanged_identity_of_a_capture_without_them(tmp_path):
    """The digest of old: sha256 of the request line and the body, whatever other headers were sent."""
    write_capture(tmp_path / "c", [{"path": "/v1/messages", "body": BODY, "headers": [["x-api-key", "[REDACTED]"]]}])
    body = json.dumps(BODY).encode()
    old = hashlib.sha256(b"wl1" + hashlib.sha256(b"POST /v1/messages\n" + body).digest()).hexdigest()
    assert workload_identity(tmp_path / "c").workload == old


def test_a_replay_that_sets_or_drops_one_names_it():
    recorder = {"kind": "replay", "transforms": {"headers": ["anthropic-beta", "x-trace"], "drop_headers": ["OpenAI-Beta"]}}
    assert replay_derivation(recorder) == ["--header anthropic-beta", "--drop-header OpenAI-Beta"]
    assert replay_derivation({"kind": "replay", "transforms": {"headers": ["x-trace"]}}) == []  # must match: no change


def test_a_replay_sends_them_as_recorded_and_keeps_its_sources_identity(tmp_path):
    """An unchanged replay sends the recorded anthropic-beta (identical to its source); one that drops
    it asks something else, and says why."""
    from infertap.capture.info import summarize
    from infertap.replay import ReplayConfig, run_replay
    from infertap.replay.transforms import Transforms
    from tests.fake_upstream import FakeUpstream, ServerThread

    _capture(tmp_path / "src", [*BASE, ["anthropic-beta", "context-management-2025-06-27"]])
    with ServerThread(FakeUpstream()) as server:
        run_replay(ReplayConfig(tmp_path / "src", server.url, tmp_path / "same", probe=False))
        dropped = Transforms(drop_headers={"anthropic-beta"})
        run_replay(ReplayConfig(tmp_path / "src", server.url, tmp_path / "dropped", probe=False, transforms=dropped))
    same, other = summarize(tmp_path / "same")["workload"], summarize(tmp_path / "dropped")["workload"]
    assert same["same_as_source"] and same["workload"] == workload_identity(tmp_path / "src").workload
    assert other["same_as_source"] is False and other["derived_by"] == ["--drop-header anthropic-beta"]


def test_a_dropped_header_no_request_sent_changes_nothing(fake, tmp_path):
    """``--drop-header OpenAI-Beta`` of a workload that never sent it (or sent it only redacted,
    which no replay sends) was named as the replay's change: compare said "B replays the other's
    workload with --drop-header OpenAI-Beta" of the same requests. Where one request sent it, it is."""
    from infertap.capture.identity import request_digest
    from infertap.capture.info import summarize
    from infertap.replay import ReplayConfig, Schedule, run_replay
    from infertap.replay.transforms import Transforms

    _app, url = fake

    def chat(tag):
        return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False}

    bodies = sorted(
        (chat(f"tie{i}") for i in range(2)),
        key=lambda b: request_digest("POST", "/v1/chat/completions", None, json.dumps(b).encode()),
    )
    plain = [["content-type", "application/json"]]
    redacted = [*plain, ["OpenAI-Beta", "[REDACTED]"]]
    # Written at one time in the reverse of digest order: a closed loop sends them the other way round.
    write_capture(
        tmp_path / "src",
        [
            {"offset_s": 0.1, "body": bodies[1], "headers": plain},
            {"offset_s": 0.1, "body": bodies[0], "headers": redacted},
            {"offset_s": 0.3, "body": chat("after"), "headers": plain},
        ],
    )
    write_capture(
        tmp_path / "beta",
        [{"body": chat("q"), "headers": plain}, {"offset_s": 0.1, "body": chat("r"), "headers": [*plain, ["openai-beta", "v2"]]}],
    )
    drop = Transforms(drop_headers={"OpenAI-Beta"})
    loop = Schedule("concurrency", concurrency=1)
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "closed", probe=False, schedule=loop, transforms=drop))
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "timed", probe=False, transforms=drop))
    run_replay(ReplayConfig(tmp_path / "beta", url, tmp_path / "dropped", probe=False, transforms=drop))
    # Must match: nothing was dropped, so nothing derives the replays' workload from the source's.
    timed = summarize(tmp_path / "timed")["workload"]
    assert timed["derived_by"] == [] and timed["same_as_source"], timed
    assert summarize(tmp_path / "closed")["workload"]["derived_by"] == []
    env = {"COLUMNS": "400"}
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "src"), str(tmp_path / "closed")], env=env).output
    line = next(line for line in out.splitlines() if line.startswith("traffic:"))
    assert "B replays the other's workload unchanged on another schedule" in line and "drop-header" not in line, line
    # Must differ: a request sent it, so dropping it changed what that request asks.
    dropped = summarize(tmp_path / "dropped")["workload"]
    assert dropped["derived_by"] == ["--drop-header OpenAI-Beta"] and dropped["same_as_source"] is False, dropped
    out = CliRunner().invoke(cli, ["compare", str(tmp_path / "beta"), str(tmp_path / "dropped")], env=env).output
    line = next(line for line in out.splitlines() if line.startswith("traffic:"))
    assert "B replays the other's workload with --drop-header OpenAI-Beta" in line, line


def test_the_identity_says_which_rule_hashed_it(tmp_path, monkeypatch):
    """An identity of requests that sent an asked header was tagged ``wl1`` like the older rule's hash
    of the same capture, which left the header out: two cards of the same traffic showed two ``wl1:``
    workloads. Now it is ``wl2``; one of requests that sent none stays ``wl1``, the hash both rules give."""
    from infertap.analysis.stats import speed_stats
    from infertap.analysis.store import Analysis
    from infertap.analysis.workload_identity import capture_identity

    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    no_asked = [["content-type", "application/json"], ["x-api-key", "[REDACTED]"]]
    _capture(tmp_path / "beta", [*no_asked, ["anthropic-beta", "context-management-2025-06-27"]])
    _capture(tmp_path / "none", no_asked)
    _capture(tmp_path / "redacted", [*no_asked, ["anthropic-beta", "[REDACTED]"]])  # its value not known: not hashed
    write_capture(  # one request of two sent one
        tmp_path / "mixed",
        [
            {"path": "/v1/messages", "body": BODY, "headers": no_asked, "chunks": [ANSWER]},
            {"path": "/v1/messages", "body": BODY, "headers": [*no_asked, ["OpenAI-Beta", "v2"]], "chunks": [ANSWER]},
        ],
        run_wall=1.8e9,
    )
    ids = {name: workload_identity(tmp_path / name) for name in ("beta", "none", "redacted", "mixed")}
    plain_rule = hashlib.sha256(b"wl1" + hashlib.sha256(b"POST /v1/messages\n" + json.dumps(BODY).encode()).digest())
    # Must differ: an asked header sent, hashed by the new rule, tagged so.
    assert ids["beta"].version == "wl2" and ids["beta"].short == f"wl2:{ids['beta'].workload[:16]}"
    assert ids["beta"].workload != plain_rule.hexdigest() and ids["mixed"].version == "wl2"
    # Must match: none sent, the hash of old under its tag of old.
    assert ids["none"].short == f"wl1:{plain_rule.hexdigest()[:16]}" and ids["none"].workload == plain_rule.hexdigest()
    assert ids["redacted"].version == "wl1" and ids["redacted"].workload == plain_rule.hexdigest()
    for name, expected in ids.items():
        # The tables' identity (stats, compare, the card) is tagged as the capture package's.
        with Analysis([tmp_path / name]) as a:
            assert capture_identity(a, a.query("SELECT capture FROM captures").rows[0][0]).as_dict() == expected.as_dict()
            [group] = speed_stats(a)["groups"]
            assert group["workload"]["identity"]["short"] == expected.short
        card = claim(tmp_path / name, cache_dir=tmp_path / "cache")["workload"]
        assert card["value"]["short"] == expected.short and field_text("workload", card).startswith(expected.short)
    # compare says each side's under its own tag (a request both sent first, so that something pairs).
    _capture(tmp_path / "beta2", [*no_asked, ["anthropic-beta", "context-management-2025-06-27"]], shared=True)
    _capture(tmp_path / "none2", no_asked, shared=True)
    t = compare(tmp_path / "beta2", tmp_path / "none2")["traffic"]
    assert t["a"]["short"] == workload_identity(tmp_path / "beta2").short and t["a"]["short"].startswith("wl2:")


def test_bedrocks_guardrail_and_trace_headers_are_in_its_identity(tmp_path, monkeypatch):
    """Bedrock's ``X-Amzn-Bedrock-GuardrailIdentifier`` and ``-GuardrailVersion`` screen the input and
    the answer with a guardrail (a blocked answer is the guardrail's message), ``X-Amzn-Bedrock-Trace``
    adds its trace to the answer: two runs differing only in them were one workload."""
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    path = "/model/anthropic.claude-3-5-sonnet-20241022-v2:0/invoke"
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 64, "messages": BODY["messages"]}
    plain = [["content-type", "application/json"], ["authorization", "[REDACTED]"]]
    guard = [["X-Amzn-Bedrock-GuardrailIdentifier", "gr-abc123"], ["X-Amzn-Bedrock-GuardrailVersion", "1"]]

    def run(name, headers):
        write_capture(tmp_path / name, [{"path": path, "body": body, "headers": headers, "chunks": [ANSWER]}], run_wall=1.8e9)
        return workload_identity(tmp_path / name)

    ids = {
        "plain": run("plain", plain),
        "guard": run("guard", [*plain, *guard]),
        "guard again": run("guard again", [*plain, *[[n.lower(), v] for n, v in guard]]),  # another client's spelling
        "version 2": run("version 2", [*plain, guard[0], ["X-Amzn-Bedrock-GuardrailVersion", "2"]]),
        "traced": run("traced", [*plain, *guard, ["X-Amzn-Bedrock-Trace", "ENABLED"]]),
    }
    assert ids["plain"].requests == 1 and ids["plain"].version == "wl1"
    # Must differ: a guardrail asked, another version of it, its trace asked.
    workloads = {ids[k].workload for k in ("plain", "guard", "version 2", "traced")}
    assert len(workloads) == 4 and ids["guard"].version == "wl2"
    # Must match: the same guardrail however its headers were spelled.
    assert ids["guard"].workload == ids["guard again"].workload
    assert asked_headers(guard) == [("x-amzn-bedrock-guardrailidentifier", "gr-abc123"), ("x-amzn-bedrock-guardrailversion", "1")]
