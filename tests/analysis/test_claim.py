"""Workload identity (capture package and analysis agree), the claim card and compare's traffic verdict,
against a fake upstream; the real engines are in test_claim_engines.py."""

from __future__ import annotations

import dataclasses
import html
import json
import time

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis import Analysis
from infertap.analysis.claim import FIELDS, claim, field_text, unknown_fields
from infertap.analysis.compare import compare
from infertap.analysis.workload_identity import capture_identity
from infertap.capture.identity import request_digest, workload_identity
from infertap.capture.info import summarize
from infertap.cli import cli
from infertap.replay import ReplayConfig, Schedule, Transforms, run_replay
from tests.helpers import REFUSED_OVER_LIMIT, write_capture


def _chat(tag: str) -> dict:
    return {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False}


@pytest.fixture
def source(tmp_path):
    """Four chat requests and a GET /v1/models (not a generation request: not in the identity)."""
    exchanges = [{"offset_s": t, "body": _chat(f"t{i}")} for i, t in enumerate([0, 0.2, 0.25, 0.6])]
    write_capture(tmp_path / "src", [*exchanges, {"offset_s": 0.7, "method": "GET", "path": "/v1/models", "body": {}}])
    return tmp_path / "src"


def _identity_in_analysis(path) -> dict:
    with Analysis([path]) as a:
        return capture_identity(a, a.query("SELECT capture FROM captures").rows[0][0]).as_dict()


def test_an_unchanged_replay_keeps_the_identity_and_set_changes_it(fake, source, tmp_path):
    app, url = fake
    run_replay(ReplayConfig(source, url, tmp_path / "same", probe=False))
    run_replay(ReplayConfig(source, url, tmp_path / "set", probe=False, transforms=Transforms(set_values=[("temperature", 0)])))
    src, same, changed = (summarize(tmp_path / n)["workload"] for n in ("src", "same", "set"))
    assert src["requests"] == 4 and src["exchanges"] == 5  # the GET is counted, not hashed
    assert same["workload"] == src["workload"] and same["schedule"] == src["schedule"]
    assert same["same_as_source"] is True and same["derived_by"] == [] and same["source"]["workload"] == src["workload"]
    assert changed["workload"] != src["workload"] and changed["schedule"] == src["schedule"]
    assert changed["same_as_source"] is False and changed["derived_by"] == ["--set temperature"]
    # The capture package alone and the analysis tables agree, for recordings and replays.
    for name in ("src", "same", "set"):
        for key in ("workload", "schedule", "request_set"):
            assert _identity_in_analysis(tmp_path / name)[key] == getattr(workload_identity(tmp_path / name), key)
    assert workload_identity(tmp_path / "same").request_set == workload_identity(source).request_set
    assert workload_identity(tmp_path / "set").request_set != workload_identity(source).request_set


def test_a_replay_that_sent_the_same_requests_in_another_order_says_so(fake, tmp_path):
    """Two requests the clients sent in the same millisecond are in the identity in digest order; a
    closed-loop replay sends them one after the other in the capture's order: a new workload
    identity, the same requests. The card said "derived from source by no transform recorded"
    (info: "the target's answers changed a request"); the request set shows they are the same."""
    from infertap.capture.identity import describe

    app, url = fake
    bodies = sorted(
        (_chat(f"tie{i}") for i in range(2)),
        key=lambda b: request_digest("POST", "/v1/chat/completions", None, json.dumps(b).encode()),
    )
    # Written in the reverse of digest order, at one time: the source's identity hashes them the other way round.
    write_capture(
        tmp_path / "src",
        [{"offset_s": 0.1, "body": bodies[1]}, {"offset_s": 0.1, "body": bodies[0]}, {"offset_s": 0.3, "body": _chat("after")}],
    )
    short = workload_identity(tmp_path / "src").short
    run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "closed", probe=False, schedule=Schedule("concurrency", concurrency=1))
    )
    changed = Transforms(set_values=[("temperature", 0)])
    run_replay(
        ReplayConfig(
            tmp_path / "src",
            url,
            tmp_path / "set",
            probe=False,
            schedule=Schedule("concurrency", concurrency=1),
            transforms=changed,
        )
    )
    closed = workload_identity(tmp_path / "closed")
    assert closed.workload != workload_identity(tmp_path / "src").workload  # the order changed...
    assert closed.request_set == workload_identity(tmp_path / "src").request_set  # ...the requests did not
    said = describe(summarize(tmp_path / "closed")["workload"])
    card = field_text("workload", claim(tmp_path / "closed", cache_dir=tmp_path / "c")["workload"])
    assert said.endswith(
        f"; the same requests as its source {short}, sent in another order on another schedule (--concurrency 1)"
    )
    assert f"; the same requests as source {short}, sent in another order on another schedule (--concurrency 1)" in card
    # Requests that did change are still derived, however they were ordered.
    assert "derived from" in describe(summarize(tmp_path / "set")["workload"])
    assert "derived from" in field_text("workload", claim(tmp_path / "set", cache_dir=tmp_path / "c")["workload"])


def test_speed_changes_the_schedule_identity_only(fake, source, tmp_path):
    app, url = fake
    run_replay(ReplayConfig(source, url, tmp_path / "fast", probe=False, schedule=Schedule("original", speed=2)))
    src, fast = workload_identity(source), workload_identity(tmp_path / "fast")
    assert fast.workload == src.workload and fast.schedule != src.schedule


def test_a_replay_on_another_schedule_or_query_says_how_it_differs(fake, source, tmp_path):
    """A replay at --speed, --concurrency or --rate has its source's requests, not its schedule: it
    was called "identical to its source"; a target URL's query sent with every request was blamed on
    "the target's answers"."""
    from infertap.capture.identity import describe

    app, url = fake
    short = workload_identity(source).short
    runs = {
        "same": ReplayConfig(source, url, tmp_path / "same", probe=False),
        "fast": ReplayConfig(source, url, tmp_path / "fast", probe=False, schedule=Schedule("original", speed=2)),
        "closed": ReplayConfig(source, url, tmp_path / "closed", probe=False, schedule=Schedule("concurrency", concurrency=2)),
        "rate": ReplayConfig(
            source,
            url,
            tmp_path / "rate",
            probe=False,
            schedule=Schedule("rate", rate=5.0),
            transforms=Transforms(set_values=[("temperature", 0)]),
        ),
        "query": ReplayConfig(source, url + "/?api-version=2", tmp_path / "query", probe=False),
        "key": ReplayConfig(source, url + "/?key=secret", tmp_path / "key", probe=False),  # a credential: redacted
    }
    for config in runs.values():
        run_replay(config)
    said = {name: describe(summarize(tmp_path / name)["workload"]) for name in runs}
    card = {name: field_text("workload", claim(tmp_path / name, cache_dir=tmp_path / "c")["workload"]) for name in runs}
    assert said["same"].endswith(f"; identical to its source {short}") and said["key"].endswith(
        f"identical to its source {short}"
    )
    assert f"identical to source {short}" in card["same"]
    for name, how in (("fast", "original timing --speed 2"), ("closed", "--concurrency 2")):
        assert said[name].endswith(f"; the same requests as its source {short} on another schedule ({how})"), said[name]
        assert f"the same requests as source {short} on another schedule ({how})" in card[name] and "identical" not in card[name]
    assert said["rate"].endswith(f"; derived from {short} by --set temperature on another schedule (--rate 5)")
    assert said["query"].endswith(f"; derived from {short} by the target URL's query (api-version) sent with every request")
    assert summarize(tmp_path / "key")["workload"]["derived_by"] == []


def test_identity_hashes_method_path_and_exact_bytes(tmp_path):
    write_capture(tmp_path / "a", [{"body": b'{"model":"m","prompt":"x"}'}])
    write_capture(tmp_path / "b", [{"body": b'{"model": "m", "prompt": "x"}'}])  # the same JSON, other bytes
    write_capture(tmp_path / "c", [{"body": b'{"model":"m","prompt":"x"}', "offset_s": 5}])  # one request: no schedule
    a, b, c = (workload_identity(tmp_path / n) for n in "abc")
    assert a.workload != b.workload and a.workload == c.workload and a.schedule == c.schedule
    assert request_digest("POST", "/v1/completions", "", b"x") != request_digest("POST", "/v1/completions", "v=1", b"x")


def test_the_identity_of_many_requests_is_its_definition():
    """sha256 of the version, then of each digest in (time, digest) order, and of one line of whole
    milliseconds per request: checked past the batch the schedule is hashed in (65,536 lines)."""
    import hashlib

    from infertap.capture.identity import VERSION, Sent, identity_of

    n = 70_001
    sent = [Sent(hashlib.sha256(b"%d" % (i % 5000)).digest(), 1_000_000_000 + 1_499_999 * i + (i % 3) * 7, 10) for i in range(n)]
    ordered = sorted((s.t_ns, s.digest) for s in sent)
    workload = hashlib.sha256(VERSION.encode() + b"".join(d for _, d in ordered)).hexdigest()
    first = ordered[0][0]
    lines = b"".join(b"%d\n" % ((t - first + 500_000) // 1_000_000) for t, _ in ordered)
    identity = identity_of(reversed(sent))
    assert (identity.workload, identity.schedule) == (workload, hashlib.sha256(VERSION.encode() + lines).hexdigest())
    assert (identity.requests, identity.request_bytes) == (n, 10 * n)
    moved = [*sent[:-1], dataclasses.replace(sent[-1], t_ns=sent[-1].t_ns + 1_000_000)]  # the last one a ms later
    assert identity_of(moved).schedule != identity.schedule and identity_of(moved).workload == identity.workload
    # request_set: the digests sorted, whatever their times; the same requests in another order share it.
    assert (
        identity.request_set == hashlib.sha256(VERSION.encode() + b" set\n" + b"".join(sorted(d for _, d in ordered))).hexdigest()
    )
    swapped = [dataclasses.replace(s, t_ns=sent[-1 - i].t_ns) for i, s in enumerate(sent)]  # sent in reverse order
    assert identity_of(swapped).workload != identity.workload and identity_of(swapped).request_set == identity.request_set
    fewer = identity_of(sent[:-1])
    assert fewer.request_set != identity.request_set and identity_of([*sent, sent[0]]).request_set != identity.request_set


def test_info_and_stats_show_the_identity(fake, source, tmp_path):
    app, url = fake
    run_replay(ReplayConfig(source, url, tmp_path / "set", probe=False, transforms=Transforms(model="other")))
    short = workload_identity(source).short
    info = json.loads(CliRunner().invoke(cli, ["info", str(tmp_path / "set"), "--json"]).output)["workload"]
    assert info["derived_by"] == ["--model other"] and info["source"]["short"] == short
    text = " ".join(CliRunner().invoke(cli, ["info", str(tmp_path / "set")], terminal_width=300).output.split())
    assert f"derived from {short}" in text
    stats = CliRunner().invoke(cli, ["stats", str(source), "--cache-dir", str(tmp_path / "cache")])
    assert stats.exit_code == 0 and f"workload_identity: {short} (4 requests)" in stats.output
    data = json.loads(CliRunner().invoke(cli, ["stats", str(source), "--json", "--cache-dir", str(tmp_path / "cache")]).output)
    assert data["groups"][0]["workload"]["identity"]["workload"] == workload_identity(source).workload


def test_claim_card_fields_and_strict(source, tmp_path):
    card = claim(source, cache_dir=tmp_path / "cache")
    assert set(card) == {"capture", *FIELDS, "figures", "warnings", "left_out"} and card["warnings"] == card["left_out"] == []
    assert all({"value", "source"} <= set(card[name]) for name in FIELDS)
    assert card["workload"]["value"]["identity"] == workload_identity(source).workload
    assert card["figures"]["requests"] == 4 and card["figures"]["ok"] == 4
    # No engine snapshot: what it would have told is unknown, and says why.
    missing = unknown_fields(card)
    assert {"device", "runtime", "quantization"} <= set(missing) and "no engine snapshot" in missing["runtime"]
    assert card["runtime"]["value"] is None
    result = CliRunner().invoke(cli, ["claim", str(source), "--strict", "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code != 0 and "unknown runtime: the capture has no engine snapshot" in result.output
    assert "--strict" in result.output and "device" in result.output.splitlines()[-1]
    ok = CliRunner().invoke(cli, ["claim", str(source), "--markdown", "--cache-dir", str(tmp_path / "cache")])
    assert ok.exit_code == 0 and "| workload | wl1:" in ok.output and "**Figures**" in ok.output
    as_json = json.loads(CliRunner().invoke(cli, ["claim", str(source), "--json", "--cache-dir", str(tmp_path / "cache")]).output)
    assert as_json["measuring_side"]["value"]["recorder"] == "proxy"


def test_claim_says_a_field_wholly_unknown_once_with_its_reason(source, tmp_path):
    # The text and markdown cards printed "unknown (unknown: the capture has no engine snapshot)".
    said = "unknown: the capture has no engine snapshot"
    for form, line in (((), f"  runtime: {said}"), (("--markdown",), f"| runtime | {said}")):
        out = CliRunner().invoke(cli, ["claim", str(source), *form, "--cache-dir", str(tmp_path / "cache")]).output
        assert line in out and "unknown (unknown" not in out
    # A field known in part keeps its value, and a reason naming what it leaves unknown is not prefixed again.
    assert "output_tokens unknown (prompt_tokens and output_tokens unknown: " in out


def test_claim_warns_of_a_capture_still_being_written_as_stats_does(record, fake, tmp_path):
    app, url = fake
    rec = record(url, "--no-probe", "--no-telemetry", name="live")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=10).status_code == 200
    deadline = time.monotonic() + 30  # written within the flush window
    while len(rec.exchanges()) < 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    args = ["claim", str(rec.out), "--cache-dir", str(tmp_path / "cache")]
    text, as_json = CliRunner().invoke(cli, args), CliRunner().invoke(cli, [*args, "--json"])
    said = f"{rec.out} is still being written (its recorder, pid {rec.proc.popen.pid}, runs on this machine)"
    assert text.exit_code == 0 and as_json.exit_code == 0, text.output + as_json.output
    assert "warning: " + said in " ".join(text.stderr.split()) and "warning: " + said in " ".join(as_json.stderr.split())
    card = json.loads(as_json.stdout)
    assert [said in w for w in card["warnings"]] == [True] and card["figures"]["requests"] == 1  # not refused
    stats = json.loads(CliRunner().invoke(cli, ["stats", str(rec.out), "--json", "--cache-dir", str(tmp_path / "cache")]).stdout)
    assert card["warnings"] == stats["warnings"]  # one check, one message
    # Closed: nothing to say.
    assert rec.stop() == 0
    closed = CliRunner().invoke(cli, [*args, "--json"])
    assert closed.exit_code == 0 and closed.stderr == "" and json.loads(closed.stdout)["warnings"] == []


def test_claim_of_a_torn_capture_warns_and_strict_names_its_workload(source, tmp_path):
    # A torn tail lost requests: the card gave an identity of the rest as the workload's, and no warning.
    import shutil

    from infertap.capture.segments import segment_paths

    torn = tmp_path / "torn"
    shutil.copytree(source, torn)
    (segment,) = segment_paths(torn)
    segment.write_bytes(segment.read_bytes()[: segment.stat().st_size * 2 // 3])
    args = ["--cache-dir", str(tmp_path / "cache")]
    result = CliRunner().invoke(cli, ["claim", str(torn), "--json", *args])
    assert result.exit_code == 0 and "torn tail at byte" in result.stderr
    card = json.loads(result.stdout)
    assert [w for w in card["warnings"] if "torn tail at byte" in w] and card["workload"]["value"]["requests"] < 4
    assert "the capture's tail is torn in 1 segment(s)" in card["workload"]["unknown"]
    strict = CliRunner().invoke(cli, ["claim", str(torn), "--strict", *args])
    assert strict.exit_code != 0 and "unknown workload: the capture's tail is torn" in strict.output
    # The intact capture: nothing said of a tear.
    whole = CliRunner().invoke(cli, ["claim", str(source), "--json", *args])
    intact = json.loads(whole.stdout)
    assert (
        whole.exit_code == 0 and whole.stderr == "" and intact["warnings"] == [] and "torn" not in intact["workload"]["unknown"]
    )


def test_claim_refuses_what_is_not_a_capture(tmp_path):
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "missing"):
        result = CliRunner().invoke(cli, ["claim", str(path)])
        assert result.exit_code != 0 and "Traceback" not in result.output
        assert "not a capture" in result.output or "no such capture" in result.output
    assert CliRunner().invoke(cli, ["claim", str(tmp_path / "empty"), "--json", "--markdown"]).exit_code == 2


def test_compare_says_whether_the_traffic_was_identical(fake, source, tmp_path):
    app, url = fake
    run_replay(ReplayConfig(source, url, tmp_path / "same", probe=False))
    run_replay(ReplayConfig(source, url, tmp_path / "set", probe=False, transforms=Transforms(set_values=[("temperature", 0)])))
    same = compare(source, tmp_path / "same")
    assert same["traffic"]["identical"] and same["traffic"]["same_schedule"]
    assert all(row["same_workload"] for row in same["speed"])
    changed = compare(source, tmp_path / "set")
    t = changed["traffic"]
    assert not t["identical"] and t["only_a"] == 4 and t["only_b"] == 4 and "--set temperature" in t["how"]
    assert not any(row["same_workload"] for row in changed["speed"])
    out = CliRunner().invoke(cli, ["compare", str(source), str(tmp_path / "set")]).output
    assert "traffic: NOT identical" in out and "compares different workloads" in out


def test_sampled_sessions_and_rechained_turns_are_named_in_the_derivation(fake, tmp_path):
    from infertap.replay import SessionSample, WorkloadError
    from tests.fake_upstream import ServerThread
    from tests.replay.test_sessions import ResponsesStore, agent_capture, chain_capture

    app, url = fake
    agents = agent_capture(tmp_path / "agents")
    run_replay(ReplayConfig(agents, url, tmp_path / "sampled", probe=False, sample=SessionSample(limit=2)))
    sampled = summarize(tmp_path / "sampled")["workload"]
    assert sampled["workload"] != workload_identity(agents).workload and sampled["same_as_source"] is False
    assert sampled["derived_by"] == ["sessions limited to the first 2"]
    for seed in range(12):  # a seed that keeps some sessions (three, each at even odds)
        try:
            run_replay(ReplayConfig(agents, url, tmp_path / f"half{seed}", probe=False, sample=SessionSample(0.5, seed)))
        except WorkloadError:
            continue
        half = summarize(tmp_path / f"half{seed}")["workload"]
        assert half["derived_by"] == [f"sessions sampled 0.5 seed {seed}"]
        break
    else:
        pytest.fail("no seed kept a session")

    chain = chain_capture(tmp_path / "chain")
    with ServerThread(ResponsesStore()) as server:
        run_replay(ReplayConfig(chain, server.url, tmp_path / "rechained", probe=False, telemetry=False))
    how = ["previous_response_id rewritten to the target's ids on 2 requests"]
    info = summarize(tmp_path / "rechained")["workload"]
    assert info["workload"] != workload_identity(chain).workload and info["derived_by"] == how
    card = claim(tmp_path / "rechained", cache_dir=tmp_path / "cache")  # the analysis tables say the same
    assert card["workload"]["value"]["derived_by"] == how and card["workload"]["value"]["same_as_source"] is False
    text = " ".join(CliRunner().invoke(cli, ["info", str(tmp_path / "rechained")], terminal_width=300).output.split())
    assert "by previous_response_id rewritten to the target's ids on 2 requests" in text


def test_the_device_names_vbios_and_cuda_from_nvidia_smi(source, tmp_path, monkeypatch):
    from tests.fake_engines import llama_server_app
    from tests.fake_upstream import ServerThread
    from tests.telemetry.stand_ins import constant_gpus, gpus_on_path, nvidia_smi

    gpus_on_path(monkeypatch, tmp_path, nvidia_smi(tmp_path / "bin", constant_gpus(150.0)))
    with ServerThread(llama_server_app()) as server:
        run_replay(ReplayConfig(source, server.url, tmp_path / "out", telemetry=False))
    card = claim(tmp_path / "out", cache_dir=tmp_path / "cache")
    device = card["device"]
    gpu = {"name": "NVIDIA H200", "driver": "570.86.15", "memory_mib": 143771, "vbios": "96.00.74.00.0B", "cuda": "12.8"}
    assert device["value"]["gpus"] == [gpu] and device["value"]["gpu_count"] == 1
    assert "unknown" not in device, device["unknown"]
    out = CliRunner().invoke(cli, ["claim", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")], terminal_width=300)
    assert "vbios: 96.00.74.00.0B; cuda: 12.8" in out.output
    # The engine runs in this (Python) process, and infertap knows no library of a llama-server to hash: said so.
    assert "knows no native library of 'llama-server'" in card["runtime"]["unknown"]


def test_gpus_nvidia_smi_did_not_list_are_unknown_on_the_card_and_the_probe_not_absent(source, tmp_path, monkeypatch):
    """The card's device and `infertap probe`'s gpus row said "no nvidia-smi" (no NVIDIA GPU) of a
    machine whose nvidia-smi hung: its GPUs are unknown, said with the reason. Where there is no
    nvidia-smi at all they still say so (must match)."""
    from tests.fake_engines import llama_server_app
    from tests.fake_upstream import ServerThread
    from tests.telemetry.stand_ins import gpus_on_path, hung_listing, no_gpu

    hung, absent = "nvidia-smi did not answer within 2 s", "no nvidia-smi on the engine's machine"
    monkeypatch.setenv("COLUMNS", "400")  # the probe's table (rich) unfolded: a row a line
    said = {}
    for name in ("hung", "none"):
        if name == "hung":
            gpus_on_path(monkeypatch, tmp_path, hung_listing(tmp_path / "bin"))
        else:
            no_gpu(monkeypatch, tmp_path)
        with ServerThread(llama_server_app()) as server:
            run_replay(ReplayConfig(source, server.url, tmp_path / name, telemetry=False))
            table = CliRunner().invoke(cli, ["probe", server.url], terminal_width=300)
        assert table.exit_code == 0, table.output
        [row] = [line for line in table.output.splitlines() if line.split("│")[1:2] and line.split("│")[1].strip() == "gpus"]
        device = claim(tmp_path / name, cache_dir=tmp_path / "cache")["device"]
        assert device["value"]["gpus"] is None and device["value"]["hostname"]  # the engine's machine is still named
        said[name] = (device["unknown"], row)
    assert hung in said["hung"][0] and "unknown, not none" in said["hung"][0] and absent not in said["hung"][0]
    assert f"unknown: {hung}" in said["hung"][1] and "no nvidia-smi" not in said["hung"][1]
    assert absent in said["none"][0] and hung not in said["none"][0]
    assert "none found (no nvidia-smi)" in said["none"][1]


def test_the_report_shows_both_claim_cards_side_by_side(fake, source, tmp_path):
    from infertap.analysis.report import render

    app, url = fake
    run_replay(ReplayConfig(source, url, tmp_path / "same", probe=False))
    page = render(source, tmp_path / "same")
    section = page[page.index("<h2>Claim cards</h2>") :]
    assert "<th>A: src</th><th>B: same</th>" in section
    short = workload_identity(source).short
    rows = {row.split("</td>", 1)[0].split("<td>")[1]: row for row in section.split("<tr")[2:]}
    assert set(rows) - {""} == {*FIELDS, "figures"}  # the nine facts, then the headline figures (a row a line)
    assert rows["workload"].count(short) == 3 and "identical to source" in rows["workload"]  # A, B and B's source
    # Neither run has an engine snapshot: the runtime is unknown on both sides, with the reason, said
    # once as claim says it (it read "unknown — unknown: the capture has ...").
    assert rows["runtime"].count("<td>unknown: the capture has no engine snapshot") == 2
    assert "unknown — unknown" not in section and "unknown (unknown" not in section
    assert "recorder: replay" in rows["measuring_side"] and "recorder: proxy" in rows["measuring_side"]
    assert rows["measuring_side"].startswith(" class=diff")  # what differs is highlighted; the same workload is not
    assert not rows["workload"].startswith(" class=diff") and not rows["runtime"].startswith(" class=diff")


def test_the_report_flags_a_replay_that_did_not_keep_its_schedule(fake, tmp_path):
    """A replay capped by --max-concurrency has its source's two identities: the report compared
    those only and didn't highlight a workload row that says "schedule not kept"."""
    from infertap.analysis.report_claims import claim_cards

    app, url = fake
    source = tmp_path / "slow"  # due 20 ms apart, each 150 ms on the target: one at a time, they wait
    write_capture(source, [{"offset_s": i * 0.02, "body": {**_chat(f"s{i}"), "pace_ms": 150}} for i in range(3)])
    run_replay(ReplayConfig(source, url, tmp_path / "free", probe=False))
    run_replay(ReplayConfig(source, url, tmp_path / "capped", probe=False, schedule=Schedule("original", max_concurrency=1)))

    def workload_row(a, b) -> str:
        section = "".join(claim_cards([("A", a), ("B", b)]))
        return next(row for row in section.split("<tr")[2:] if row.split("</td>", 1)[0].endswith("<td>workload"))

    capped = workload_row(tmp_path / "free", tmp_path / "capped")
    assert "schedule not kept" in capped and capped.startswith(" class=diff")
    assert not workload_row(source, tmp_path / "free").startswith(" class=diff")  # kept: the same workload


def test_a_snapshot_without_a_runtime_digest_has_it_looked_up_now(source, tmp_path, monkeypatch):
    from tests.fake_engines import llama_server_app
    from tests.fake_upstream import ServerThread

    monkeypatch.setattr("infertap.engines.probe.snapshot_facts", lambda digest: {})  # as an older infertap wrote it
    with ServerThread(llama_server_app()) as server:
        run_replay(ReplayConfig(source, server.url, tmp_path / "old", telemetry=False))
        card = claim(tmp_path / "old", cache_dir=tmp_path / "cache")
        assert "not in the snapshot (an older infertap): looked up now" in card["runtime"]["source"]
        assert "knows no native library of 'llama-server'" in card["runtime"]["value"]["digest"]["found"]
    stopped = claim(tmp_path / "old", cache_dir=tmp_path / "cache")  # the engine is gone: unknown, and why
    assert f"no process listens on port {server.url.rsplit(':', 1)[1]} now" in stopped["runtime"]["unknown"]


def _card_of_snapshot(tmp_path, name, snapshot):
    from tests.analysis_builders import event, exchange, sse
    from tests.analysis_builders import write_capture as write_records

    path = write_records(tmp_path / name, [snapshot, exchange("a", chunks=[(5, sse(event("x")))])])
    return claim(path, cache_dir=tmp_path / "cache"), path


def test_the_quantization_carries_the_dtype_with_its_source(tmp_path):
    from infertap.engines.gguf_meta import GGUFFacts, dtype_fact
    from infertap.engines.probe import probe
    from tests.fake_engines import ollama_app, vllm_app
    from tests.fake_upstream import ServerThread

    # A GGUF: the file type and, beside it, the tensor types by share of the weights.
    blank = {f.name: None for f in dataclasses.fields(GGUFFacts)}
    gguf = GGUFFacts(**{**blank, "tensor_types": (("Q4_1", 211, 7900), ("Q8_0", 1, 2090), ("F32", 61, 10))})
    snapshot = {
        "type": "engine",
        "url": "http://127.0.0.1:9",
        "wall": 1.8e9,
        "kind": "llama-server",
        "fingerprint": "f00d",
        "facts": {
            "quantization": {"value": "Q4_1", "source": "/props model_ftype"},
            "dtype": dtype_fact(gguf, "--model-file m.gguf"),
        },
    }
    card, path = _card_of_snapshot(tmp_path, "gguf", snapshot)
    q = card["quantization"]
    assert q["value"] == {"scheme": "Q4_1", "dtype": "Q4_1 79%, Q8_0 21%, F32 <1%", "dtype_of": "tensor types"}
    assert "unknown" not in q and "/props model_ftype" in q["source"] and "GGUF tensor types, from --model-file" in q["source"]
    out = CliRunner().invoke(cli, ["claim", str(path), "--cache-dir", str(tmp_path / "cache")], terminal_width=300).output
    assert "quantization: Q4_1 (tensor types: Q4_1 79%, Q8_0 21%, F32 <1%)\n" in out

    # vLLM: no quantization_config, and the checkpoint's torch_dtype, labelled as the checkpoint's.
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps({"torch_dtype": "float32"}))
    with ServerThread(vllm_app(root=str(tmp_path / "model"))) as server:
        card, _ = _card_of_snapshot(tmp_path, "vllm", probe(server.url))
    q = card["quantization"]
    assert q["value"] == {"scheme": "none", "dtype": "float32", "dtype_of": "checkpoint torch_dtype"} and "unknown" not in q
    assert "doesn't publish the dtype it serves in" in q["source"]
    assert field_text("quantization", q) == "none, float32 (checkpoint torch_dtype)"

    # Ollama names a quantization level but no dtype: known in part, the dtype unknown with the reason.
    with ServerThread(ollama_app()) as server:
        card, _ = _card_of_snapshot(tmp_path, "ollama", probe(server.url))
    q = card["quantization"]
    assert q["value"] == {"scheme": "Q4_K_M", "dtype": None, "dtype_of": None}
    assert q["unknown"].startswith("dtype: not exposed") and "quantization level names the weights' type" in q["unknown"]
    assert field_text("quantization", q).startswith("Q4_K_M (unknown: dtype: not exposed")

    # A snapshot of an older infertap has no dtype fact at all; one that knows neither is unknown.
    older = {**snapshot, "facts": {"quantization": snapshot["facts"]["quantization"]}}
    card, _ = _card_of_snapshot(tmp_path, "older", older)
    assert card["quantization"]["value"]["scheme"] == "Q4_1"
    assert unknown_fields(card)["quantization"] == "dtype: not in the snapshot (an older infertap recorded no dtype)"
    neither = {
        **snapshot,
        "facts": {"quantization": {"value": None, "source": "not exposed"}, "dtype": {"value": None, "source": "not exposed"}},
    }
    card, _ = _card_of_snapshot(tmp_path, "neither", neither)
    assert card["quantization"]["value"] is None
    assert card["quantization"]["unknown"] == "scheme: not exposed; dtype: not exposed"


@pytest.mark.parametrize("wall", [2.5e-9, 3.5e-9, 1_800_000_000.123456789])
def test_analysis_orders_and_times_requests_as_the_capture_package(tmp_path, monkeypatch, wall):
    """DuckDB sorts the requests for the analysis identity: ties in send time go by digest bytes, and
    times count from the run's start as the capture package counts them (a start of 2.5 ns or 3.5 ns,
    which round() takes to the even nanosecond, or today's)."""
    import infertap.capture.writer as writer

    monkeypatch.setattr(writer.time, "time", lambda: wall)
    offsets = [0.0] * 12 + [0.001, 0.001, 0.002]  # twelve sent at once: their order is their digests'
    write_capture(tmp_path / "cap", [{"offset_s": t, "body": _chat(f"tie {i}")} for i, t in enumerate(offsets)], wall0=wall)
    monkeypatch.undo()
    assert _identity_in_analysis(tmp_path / "cap") == workload_identity(tmp_path / "cap").as_dict()


def test_analysis_identities_stream_in_order_in_groups(source):
    """``identities`` over rows given in SQL: several groups, ties, negative times and times beyond a
    BIGINT, past the batch they are read in, equal to the capture package's identity of each group."""
    import hashlib
    import random

    import pyarrow as pa

    from infertap.analysis.workload_identity import identities
    from infertap.capture.identity import Sent, identity_of

    rng = random.Random(7)
    rows = []
    for i in range(70_000):
        t = rng.choice([0, 5, 10**6, -(10**12), 2**63 + 5, rng.randrange(10**9)])
        rows.append((rng.choice(["x", "y", None]), hashlib.sha256(b"%d" % (i % 9000)).digest(), rng.randrange(100), t))
    g, d, s, t = (list(c) for c in zip(*rows, strict=True))
    given = pa.table({"g": g, "digest": pa.array(d, pa.binary()), "size": s, "t": [str(x) for x in t]})
    with Analysis([source]) as a:
        a.con.register("given", given)
        a.con.execute("CREATE TABLE r AS SELECT g, digest, size, t::HUGEINT AS t FROM given")
        # Group x has requests that sent an asked header (size 7 of them, as it happens): tagged wl2.
        asked = "g = 'x' AND size = 7 AS asked, false AS newer"
        found = identities(a, f"SELECT g, digest, size, {asked}, t FROM r", 1)
        moved = identities(a, f"SELECT g, digest, size, {asked}, CASE WHEN size = 0 THEN t + 1000000 ELSE t END AS t FROM r", 1)
    for g in ("x", "y", None):
        mine = [Sent(d, t, s, asked=k == "x" and s == 7) for k, d, s, t in rows if k == g]
        # A group's identity carries no request_set (the claim card's, a capture's, does: capture_identity).
        assert found[(g,)] == dataclasses.replace(identity_of(reversed(mine)), request_set="")
        assert found[(g,)].requests == len(mine) > 20_000
        assert moved[(g,)].schedule != found[(g,)].schedule  # a request sent a ms later: another schedule
        assert found[(g,)].version == ("wl2" if g == "x" else "wl1")


# -- what an audit found: one scope for the facts, several engines, partial enrichment -------------------


def _snapshot(fingerprint: str, url: str = "http://127.0.0.1:8080", kind: str = "llama-server", wall: float = 1.8e9) -> dict:
    facts = {
        "version": {"value": "b1", "source": "/props"},
        "models": {"value": ["m"], "source": "/v1/models"},
        "model_path": {"value": "/m.gguf", "source": "/props"},
        "model_sha256": {"value": "aa" * 32, "source": "sha256 of the file"},
        "quantization": {"value": "Q4_0", "source": "GGUF"},
        "dtype": {"value": "Q4_0 90%", "source": "GGUF tensor types"},
        "parallel_slots": {"value": 4, "source": "/props"},
        "runtime_sha256": {"value": "bb" * 32, "source": "the binary"},
        "runtime_path": {"value": "/bin/ls", "source": "the process"},
    }
    return {"type": "engine", "url": url, "wall": wall, "kind": kind, "facts": facts, "unknown": [], "notes": [], "raw": {},
            "host": {"cpu": "X", "cpu_count": 2, "memory_bytes": 1, "hostname": "h", "gpus": []}, "host_is_engine_host": True,
            "labels": {}, "fingerprint": fingerprint}  # fmt: skip


def _answer(tokens: int, prompt: int) -> bytes:
    usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}], "usage": usage}).encode()


def test_the_facts_of_a_capture_of_several_runs_are_of_all_of_them(tmp_path):
    path = tmp_path / "runs"
    write_capture(path, [{"id": f"r1-{i}", "chunks": [_answer(3, 10)]} for i in range(2)])
    write_capture(path, [{"id": f"r2-{i}", "chunks": [_answer(5, 100)]} for i in range(3)])
    card = claim(path, cache_dir=tmp_path / "cache")
    workload = card["workload"]["value"]
    assert (workload["requests"], workload["prompt_tokens"], workload["output_tokens"]) == (5, 2 * 10 + 3 * 100, 2 * 3 + 3 * 5)
    assert card["aggregation"]["value"]["n"]["e2e"] == 5 and len(card["figures"]["runs"]) == 2


def test_the_figures_of_a_capture_of_several_runs_name_their_run(tmp_path):
    # Two runs' figures were printed as two bare "figures:" lines: which run each was of, unsaid.
    path = tmp_path / "runs"
    write_capture(path, [{"id": f"r1-{i}", "chunks": [_answer(3, 10)]} for i in range(2)])
    write_capture(path, [{"id": f"r2-{i}", "chunks": [_answer(5, 100)]} for i in range(3)])
    write_capture(tmp_path / "one", [{"id": "o", "chunks": [_answer(3, 10)]}])
    args = ["--cache-dir", str(tmp_path / "cache")]
    runs = [
        h["run"] for h in json.loads(CliRunner().invoke(cli, ["claim", str(path), "--json", *args]).stdout)["figures"]["runs"]
    ]
    for form, prefix in (((), "  figures: "), (("--markdown",), "**Figures**: ")):
        out = CliRunner().invoke(cli, ["claim", str(path), *form, *args]).output
        said = [line for line in out.splitlines() if line.startswith(prefix)]
        assert [line.removeprefix(prefix).split(": ", 1)[0] for line in said] == [f"run {r[:12]}" for r in runs]
        assert [line.split(": ", 2)[2].split(" ok")[0] for line in said] == ["2/2", "3/3"]
        # One run: its figures are the card's, no run to name.
        one = CliRunner().invoke(cli, ["claim", str(tmp_path / "one"), *form, *args]).output
        assert [line for line in one.splitlines() if line.startswith(prefix)][0].startswith(f"{prefix}1/1 ok")


def test_unknown_token_counts_read_unknown_as_the_rest_of_the_card_reads(tmp_path):
    """No usage and no enrichment: the totals are unknown, printed as every other unknown is (JSON: null)."""
    bare = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}]}).encode()
    write_capture(tmp_path / "counted", [{"id": "c", "chunks": [_answer(3, 10)]}])
    write_capture(tmp_path / "bare", [{"id": "b", "chunks": [bare]}])

    def card(name: str, *form: str) -> str:
        run = CliRunner().invoke(cli, ["claim", str(tmp_path / name), *form, "--cache-dir", str(tmp_path / "cache")])
        assert run.exit_code == 0, (run.output, run.exception)
        return run.output

    for form in ((), ("--markdown",)):
        assert "prompt_tokens 10, output_tokens 3" in card("counted", *form)
        bare_card = card("bare", *form)
        assert "prompt_tokens unknown, output_tokens unknown" in bare_card and "None" not in bare_card
    counted, unknown = (json.loads(card(name, "--json"))["workload"]["value"] for name in ("counted", "bare"))
    assert (counted["prompt_tokens"], counted["output_tokens"]) == (10, 3)
    assert (unknown["prompt_tokens"], unknown["output_tokens"]) == (None, None)


def test_unknown_token_totals_say_why_and_strict_names_them(tmp_path):
    """Unknown totals are an unknown of the card like any other: the workload says why, and
    --strict names it; totals counted from usage are no unknown. Two runs of no count are not 0."""
    bare = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}]}).encode()
    write_capture(tmp_path / "counted", [{"id": "c", "chunks": [_answer(3, 10)]}])
    write_capture(tmp_path / "bare", [{"id": "b", "chunks": [bare]}])
    write_capture(tmp_path / "bare", [{"id": "b2", "chunks": [bare]}])  # a second run: the sum of no counts
    cache = ("--cache-dir", str(tmp_path / "cache"))
    counted = claim(tmp_path / "counted", cache_dir=tmp_path / "cache")
    assert "unknown" not in counted["workload"] and "workload" not in unknown_fields(counted)
    strict = CliRunner().invoke(cli, ["claim", str(tmp_path / "counted"), "--strict", *cache])
    assert "unknown runtime:" in strict.output and "unknown workload" not in strict.output, strict.output
    bare_card = claim(tmp_path / "bare", cache_dir=tmp_path / "cache")
    assert (bare_card["workload"]["value"]["prompt_tokens"], bare_card["workload"]["value"]["output_tokens"]) == (None, None)
    why = unknown_fields(bare_card)["workload"]
    assert why.startswith("prompt_tokens and output_tokens unknown: ") and "infertap enrich" in why, why
    strict = CliRunner().invoke(cli, ["claim", str(tmp_path / "bare"), "--strict", *cache])
    assert strict.exit_code != 0 and f"unknown workload: {why}" in strict.output
    assert "workload" in strict.output.splitlines()[-1]
    text = CliRunner().invoke(cli, ["claim", str(tmp_path / "bare"), *cache]).output
    assert "prompt_tokens unknown, output_tokens unknown" in text and f"output_tokens unknown ({why})" in text


def test_a_capture_without_generation_requests_has_a_card_without_figures(tmp_path):
    path = tmp_path / "models-only"
    write_capture(path, [{"method": "GET", "path": "/v1/models", "body": b""}])
    for args in (["claim", str(path)], ["claim", str(path), "--markdown"]):
        run = CliRunner().invoke(cli, args)
        assert run.exit_code == 0, (run.output, run.exception)
        assert "no generation requests in this capture" in run.output


def test_a_card_of_refused_requests_alone_says_what_stats_says_of_them(tmp_path):
    # Every generation request refused by infertap (a body over --max-body-mb): the card said "no
    # generation requests in this capture", stats that 2 were refused. The card, its markdown and the
    # report's cards now say what stats says, of this capture.
    refused = REFUSED_OVER_LIMIT
    capture = tmp_path / "refused" / "out"
    write_capture(capture, [refused, refused])
    said = "no counted generation requests in this capture: 2 refused by infertap, never sent (counted in no figure)"
    stats = CliRunner().invoke(cli, ["stats", str(capture)]).output
    assert said.replace("this capture", "these captures") in stats, stats
    assert claim(capture)["figures"]["note"] == f"{said} (no figures)"
    for args in (["claim", str(capture)], ["claim", str(capture), "--markdown"]):
        run = CliRunner().invoke(cli, args)
        assert run.exit_code == 0 and said in run.output, (run.output, run.exception)
    report = tmp_path / "refused.html"
    run = CliRunner().invoke(cli, ["report", str(capture), "-o", str(report)])
    assert run.exit_code == 0, (run.output, run.exception)
    assert html.escape(f"{said} (no figures)") in report.read_text().split("<h2>Claim cards</h2>")[1]
    # Must stay: a capture that only listed the models has no refusal to speak of.
    models = tmp_path / "models" / "out"
    write_capture(models, [{"method": "GET", "path": "/v1/models", "body": b""}])
    assert claim(models)["figures"]["note"] == "no generation requests in this capture: no figures"


def test_the_cards_runtime_digest_of_several_files_says_it_is_no_one_files(tmp_path):
    # "sha256 9f47… of .../llama-server": a digest of the binary and its 7 libraries read as the binary's own.
    from infertap.engines.runtime_digest import RuntimeDigest

    libs = ("/lib/libllama.so", "/lib/libggml.so")
    how = RuntimeDigest("bb" * 32, "/bin/ls", "binary", 7, None, 8080, ("/bin/ls", *libs)).how
    cases = (
        (how, " and 2 other engine libraries (of their sorted sha256sum lines), fingerprint"),
        ("the binary", ", fingerprint"),
    )
    for i, (found, after) in enumerate(cases):
        snapshot = _snapshot(f"fp{i}")
        snapshot["facts"]["runtime_sha256"]["source"] = found
        card, path = _card_of_snapshot(tmp_path, f"c{i}", snapshot)
        assert card["runtime"]["value"]["digest"]["files"] == (3 if i == 0 else 1)
        text = CliRunner().invoke(cli, ["claim", str(path), "--cache-dir", str(tmp_path / "cache")]).output
        assert f"sha256 {'bb' * 8}… of /bin/ls{after}" in text


def test_several_engine_configurations_are_said_and_not_one_stated_for_all(tmp_path):
    from infertap.capture.writer import CaptureWriter

    path = tmp_path / "swapped"
    write_capture(path, [{"chunks": [_answer(3, 10)]}])
    with CaptureWriter(path, recorder={"kind": "proxy"}) as w:
        w.write(_snapshot("fp1", wall=1.8e9))
        w.write(_snapshot("fp2", url="http://127.0.0.1:8000", kind="vllm", wall=1.8e9 + 60))
    card = claim(path, cache_dir=tmp_path / "cache")
    for name in ("runtime", "model", "quantization", "device", "concurrency"):  # the slots are one engine's too
        assert "2 engine configurations" in card[name]["unknown"] and "fp1" in card[name]["unknown"], name
    assert {"runtime", "model", "quantization", "device", "concurrency"} <= set(unknown_fields(card))
    one = tmp_path / "one"
    write_capture(one, [{"chunks": [_answer(3, 10)]}])
    with CaptureWriter(one, recorder={"kind": "proxy"}) as w:
        w.write(_snapshot("fp1"))
        w.write(_snapshot("fp1", wall=1.8e9 + 60))  # probed again, the same configuration
    assert "engine configurations" not in json.dumps(claim(one, cache_dir=tmp_path / "cache"))
    assert "fingerprint fp1" in field_text(
        "runtime", claim(one, cache_dir=tmp_path / "cache")["runtime"]
    )  # the report compares it


def test_runs_appended_into_one_capture_are_said_and_not_one_stated_for_all(fake, source, tmp_path):
    """A replay --out into a folder that held a capture appends its run: the card stated the first
    run's recorder and schedule as the whole capture's, and the derivation blamed the target's answers."""
    import shutil

    from infertap.capture.identity import describe

    app, url = fake
    run_replay(ReplayConfig(source, url, tmp_path / "twice", probe=False))
    run_replay(ReplayConfig(source, url, tmp_path / "twice", probe=False, schedule=Schedule("concurrency", concurrency=2)))
    shutil.copytree(source, tmp_path / "mixed")
    run_replay(ReplayConfig(source, url, tmp_path / "mixed", probe=False, transforms=Transforms(set_values=[("temperature", 0)])))
    run_replay(ReplayConfig(source, url, tmp_path / "once", probe=False))
    twice, mixed, once = (claim(tmp_path / n, cache_dir=tmp_path / "cache") for n in ("twice", "mixed", "once"))

    assert "2 runs of different schedules (replay: original timing; replay: --concurrency 2)" in twice["concurrency"]["unknown"]
    assert "different recorders" not in json.dumps(twice["measuring_side"])  # both replayed: one side
    assert "2 runs of different recorders (proxy, replay)" in mixed["measuring_side"]["unknown"]
    assert "2 runs of different schedules (proxy: as recorded; replay: original timing)" in mixed["concurrency"]["unknown"]
    assert {"measuring_side", "concurrency"} <= set(unknown_fields(mixed))
    assert "measuring_side" not in unknown_fields(once) and "runs of" not in json.dumps(once)

    info = summarize(tmp_path / "twice")["workload"]
    assert info["same_as_source"] is False and info["derived_by"] == ["2 runs appended in one capture (replay, replay)"]
    assert "target's answers" not in describe(info) and "by 2 runs appended in one capture" in describe(info)
    assert mixed["workload"]["value"]["derived_by"] == ["2 runs appended in one capture (proxy, replay)", "--set temperature"]
    assert "derived from source" in field_text("workload", mixed["workload"])
    assert once["workload"]["value"]["derived_by"] == [] and once["workload"]["value"]["same_as_source"] is True
    # Two recording runs (a proxy restarted into its capture) took one side on one schedule.
    path = tmp_path / "recorded"
    write_capture(path, [{"id": "r1", "chunks": [_answer(3, 10)]}])
    write_capture(path, [{"id": "r2", "chunks": [_answer(3, 10)]}])
    assert "runs of different" not in json.dumps(claim(path, cache_dir=tmp_path / "cache"))


def test_sampling_known_for_some_requests_only_says_so(tmp_path):
    from tests.analysis_builders import enrichment

    path = tmp_path / "partial"
    bodies = [
        {"model": "m", "temperature": t, "messages": [{"role": "user", "content": f"q{i}"}]} for i, t in enumerate([0, 1.5, 1.5])
    ]
    settings = {"temperature": {"value": 0, "source": "request"}}
    write_capture(
        path, [{"id": f"x{i}", "body": b} for i, b in enumerate(bodies)], enrichments=[enrichment("x0", settings=settings)]
    )
    card = claim(path, cache_dir=tmp_path / "cache")
    assert "known for 1 of 3 generation requests" in card["sampling"]["unknown"]
    assert CliRunner().invoke(cli, ["claim", str(path), "--strict"]).exit_code != 0


def _counted_and_not(path, uncounted: int, failed: list[tuple[bytes, int, str]] = ()) -> None:  # type: ignore[assignment]
    """Four answers 0-1000, 1000-2000, ... ms, each of 3 output tokens by usage except the last
    ``uncounted`` (no usage, not streamed: no count), with the GPU at 200 W throughout; then the
    ``failed`` requests (body, status, end), one a second after them."""
    from infertap.capture.records import new_telemetry
    from infertap.capture.writer import CaptureWriter
    from tests.analysis_builders import body, exchange

    bare = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}]}).encode()
    with CaptureWriter(path, recorder={"kind": "proxy", "upstream": "http://127.0.0.1:8080"}) as writer:
        for i in range(4):
            answer = bare if i >= 4 - uncounted else _answer(3, 10)
            writer.write(
                exchange(
                    f"x{i}",
                    sent_ms=i * 1000,
                    chunks=[(900.0, answer)],
                    end_ms=1000,
                    seq=i,
                    request=body(stream=False),
                    headers=[["content-type", "application/json"]],
                    upstream="http://127.0.0.1:8080",
                )
            )
        for i, (answer, status, end) in enumerate(failed, start=4):
            writer.write(
                exchange(f"x{i}", sent_ms=i * 1000, chunks=[(900.0, answer)], end_ms=1000, seq=i, request=body(stream=False),
                         headers=[["content-type", "application/json"]], upstream="http://127.0.0.1:8080", status=status, end=end)
            )  # fmt: skip
        for at in range(0, 4001 + 1000 * len(failed), 250):
            writer.write(new_telemetry("gpu", writer.started_wall + at / 1e3, [["gpu_power_watts", {"gpu": "0"}, 200.0]]))


def test_per_token_figures_over_some_answers_say_so_and_strict_refuses_them(tmp_path):
    """One answer of four with no output token count: output tok/s counts the three others' tokens,
    J per output token is over their mean, and the card says so; --strict names it. Every count
    known: nothing to say."""
    cache = ("--cache-dir", str(tmp_path / "cache"))
    for name, uncounted in (("all", 0), ("part", 1), ("none", 4)):
        _counted_and_not(tmp_path / name, uncounted)
    counted, part, none = (claim(tmp_path / n, cache_dir=tmp_path / "cache") for n in ("all", "part", "none"))
    assert "unknown" not in counted["figures"] and counted["figures"]["output_tokens_unknown"] == 0
    assert "figures" not in unknown_fields(counted) and "unknown" not in counted["workload"]
    fig = part["figures"]
    assert fig["output_tokens_unknown"] == 1 and fig["ok"] == 4 and fig["output_tokens"]["n"] == 3
    assert fig["throughput"]["output_tokens_per_s"] == pytest.approx(9 / 4.0)  # the three counted answers' tokens
    assert counted["figures"]["throughput"]["output_tokens_per_s"] == pytest.approx(12 / 4.0)
    energy = fig["energy"]
    assert energy["joules"] == pytest.approx(800.0) and energy["measured"]["tokens_known_for"] == 3
    assert energy["joules_per_output_token"] == pytest.approx(800.0 / 4 / 3)  # per request, over their mean of 3
    why = unknown_fields(part)["figures"]
    assert why.startswith("output tokens unknown for 1 of 4 ok answers") and "lower bound" in why, why
    assert part["workload"]["value"]["output_tokens"] == 9
    assert "output_tokens counts 3 of 4 ok answers: 1 came with no count" in unknown_fields(part)["workload"]
    assert "output tokens unknown for all 4 ok answers" in unknown_fields(none)["figures"]
    for form in ((), ("--markdown",)):
        said = CliRunner().invoke(cli, ["claim", str(tmp_path / "part"), *form, *cache])
        assert said.exit_code == 0 and "unknown: output tokens unknown for 1 of 4 ok answers" in said.output
        assert "unknown: output tokens" not in CliRunner().invoke(cli, ["claim", str(tmp_path / "all"), *form, *cache]).output
    strict = CliRunner().invoke(cli, ["claim", str(tmp_path / "part"), "--strict", *cache])
    assert strict.exit_code != 0 and f"unknown figures: {why}" in strict.output and "figures" in strict.output.splitlines()[-1]
    strict = CliRunner().invoke(cli, ["claim", str(tmp_path / "all"), "--strict", *cache])
    assert "unknown figures" not in strict.output and "unknown workload" not in strict.output, strict.output


def test_the_reports_claim_cards_give_claims_warning_of_a_capture_not_closed(source, tmp_path):
    """A capture left unclosed by a recorder on another machine: `claim` warns that its figures may
    leave out what was in flight, and the report's claim cards say it too; a closed one: nothing."""
    import html
    from unittest import mock

    from infertap.capture.hostfacts import host_facts
    from infertap.capture.segments import segment_paths

    facts = {**host_facts(), "hostname": "gpu-box-7"}
    with mock.patch("infertap.capture.writer.host_facts", lambda: facts):
        write_capture(tmp_path / "open", [{"offset_s": 0, "body": _chat("t0")}])
    (seg,) = segment_paths(tmp_path / "open")
    seg.write_bytes(seg.read_bytes()[:-3])  # no footer
    warning, torn = claim(tmp_path / "open", cache_dir=tmp_path / "cache")["warnings"]  # the footer cut: a torn tail too
    assert "is not closed and was recorded on gpu-box-7" in warning and "torn tail at byte" in torn
    for a, b, says in ((source, tmp_path / "open", [f"B: warning: {warning}"]), (source, source, [])):
        out = tmp_path / "report.html"
        result = CliRunner().invoke(cli, ["report", str(a), str(b), "-o", str(out)])
        assert result.exit_code == 0, result.output
        page = html.unescape(out.read_text())
        section = page[page.index("<h2>Claim cards</h2>") :]
        assert [line for line in says if line in section] == says and ("warning:" in section) == bool(says)


def test_stats_flags_the_per_token_figures_over_some_answers_as_claim_does(tmp_path):
    """stats' output tok/s, output total and J per output token over three answers of four: each
    flagged beside its figure (text and --json), with the card's own note; every count known: none."""
    from infertap.analysis.partly_counted import FIGURES, LOWER_BOUND, OVER_MEAN, PROMPT_FIGURES, prompt_note

    cache = ("--cache-dir", str(tmp_path / "cache"))
    for name, uncounted in (("all", 0), ("part", 1), ("none", 4)):
        _counted_and_not(tmp_path / name, uncounted)

    def stats(name: str) -> tuple[dict, str]:
        as_json = CliRunner().invoke(cli, ["stats", str(tmp_path / name), "--json", *cache])
        text = CliRunner().invoke(cli, ["stats", str(tmp_path / name), *cache])
        assert as_json.exit_code == 0 and text.exit_code == 0, as_json.output + text.output
        [group] = json.loads(as_json.stdout)["groups"]
        return group, text.output

    group, text = stats("part")
    card = claim(tmp_path / "part", cache_dir=tmp_path / "cache")
    # One rule: the card's figures.unknown, and (that answer had no prompt count either) its workload's.
    prompts = prompt_note(3, 4)
    assert group["partly_counted"] == {"note": f"{card['figures']['unknown']}; {prompts}", "figures": FIGURES | PROMPT_FIGURES}
    assert prompts in card["workload"]["unknown"]
    rate, per_token = group["throughput"]["output_tokens_per_s"], group["energy"]["joules_per_output_token"]
    assert f"output_tokens_per_s {rate:,.1f} ({LOWER_BOUND})" in text
    assert f"joules_per_output_token {per_token:,.4f} ({OVER_MEAN})" in text
    assert f"output_tokens {group['workload']['output_tokens']['total']:,} ({LOWER_BOUND})" in text
    assert f"note: {card['figures']['unknown']}" in " ".join(text.split())
    group, text = stats("all")
    assert group["partly_counted"] is None and LOWER_BOUND not in text and OVER_MEAN not in text
    group, text = stats("none")  # no figure to flag: the note says there is none
    assert group["partly_counted"]["figures"] == {} and "output tokens unknown for all 4 ok answers" in text


def test_the_card_says_a_prompt_token_total_of_some_requests_only(tmp_path):
    """The answer with no usage has no prompt token count either: the card's prompt total is of
    the three others, and says so as its output total does; every count known: nothing said."""
    for name, uncounted in (("all", 0), ("part", 1)):
        _counted_and_not(tmp_path / name, uncounted)
    part, counted = (claim(tmp_path / n, cache_dir=tmp_path / "cache") for n in ("part", "all"))
    assert part["workload"]["value"]["prompt_tokens"] == 3 * 10 and counted["workload"]["value"]["prompt_tokens"] == 4 * 10
    assert "prompt_tokens counts 3 of 4 requests: 1 came with no count" in unknown_fields(part)["workload"]
    assert "workload" not in unknown_fields(counted)
    said = CliRunner().invoke(cli, ["claim", str(tmp_path / "part"), "--cache-dir", str(tmp_path / "cache")])
    assert "prompt_tokens counts 3 of 4 requests" in " ".join(said.output.split())


def test_stats_flags_a_prompt_token_total_of_some_requests_only_as_claim_does(tmp_path):
    """Every ok answer counted, one failed request with no prompt count: stats' prompt total is
    flagged (text and --json) with the card's words, output per prompt (of the ok answers) is not;
    an ok answer of output tokens but no prompt count: both are; every count known: none."""
    from infertap.analysis.partly_counted import OF_COUNTED, OK_PROMPT_FIGURES, PROMPT_FIGURES, PROMPT_LOWER_BOUND

    error = json.dumps({"error": {"message": "overloaded", "type": "server_error"}}).encode()
    unprompted = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}], "usage": {"completion_tokens": 3}}).encode()  # fmt: skip
    cache = ("--cache-dir", str(tmp_path / "cache"))
    cases = (("failed", [(error, 500, "complete")]), ("ok", [(unprompted, 200, "complete")]), ("all", []))
    for name, more in cases:
        _counted_and_not(tmp_path / name, 0, more)
        as_json = CliRunner().invoke(cli, ["stats", str(tmp_path / name), "--json", *cache])
        out = CliRunner().invoke(cli, ["stats", str(tmp_path / name), *cache])
        assert as_json.exit_code == 0 and out.exit_code == 0, as_json.output + out.output
        [group] = json.loads(as_json.stdout)["groups"]
        text, w = " ".join(out.output.split()), group["workload"]
        card = claim(tmp_path / name, cache_dir=tmp_path / "cache")
        if not more:  # must match: every count known, nothing flagged
            assert group["partly_counted"] is None and PROMPT_LOWER_BOUND not in text and "workload" not in unknown_fields(card)
            continue
        known, requests = w["prompt_tokens"]["known"], w["requests"]
        assert (known, requests) == (4, 5)  # must differ: one request came with no count
        said = group["partly_counted"]["note"]
        assert said in unknown_fields(card)["workload"] and f"prompt_tokens counts {known} of {requests} requests" in said
        assert f"prompt_tokens {w['prompt_tokens']['total']:,} ({PROMPT_LOWER_BOUND})" in text
        assert f"note: {said}" in text
        flagged = f"output_per_prompt {w['output_per_prompt']:,.3f} ({OF_COUNTED})" in text
        if name == "failed":  # the failed request's prompt is in no figure over the ok answers
            assert group["partly_counted"]["figures"] == PROMPT_FIGURES and not flagged
            assert f"output_per_prompt {w['output_per_prompt']:,.3f}" in text
        else:  # an ok answer's prompt is uncounted: output per prompt rests on a partial prompt total
            assert w["prompt_tokens"]["known_ok"] == 4 < group["ok"] == 5
            assert group["partly_counted"]["figures"] == PROMPT_FIGURES | OK_PROMPT_FIGURES and flagged


def test_the_output_token_total_is_of_ok_answers_only_as_its_count_of_answers_without_one(tmp_path):
    """A failed request whose answer came with usage adds nothing to the output total (vLLM's
    benchmark_serving and GuideLLM count successful requests only), as one with none raises no
    partial flag: the total, its known count and output tok/s are all of the ok answers."""
    error = json.dumps({"error": {"message": "overloaded", "type": "server_error"}}).encode()
    path = tmp_path / "failed"
    _counted_and_not(path, 0, [(_answer(3, 10), 200, "upstream_disconnected"), (error, 500, "complete")])
    cache = ("--cache-dir", str(tmp_path / "cache"))
    as_json = CliRunner().invoke(cli, ["stats", str(path), "--json", *cache])
    assert as_json.exit_code == 0, as_json.output
    [group] = json.loads(as_json.stdout)["groups"]
    with Analysis([str(path)], cache_dir=tmp_path / "cache") as a:
        ok_tokens, all_tokens, ok = a.sql(
            "SELECT sum(output_tokens) FILTER (WHERE ok), sum(output_tokens), count(*) FILTER (WHERE ok) FROM metrics"
        ).fetchall()[0]
    assert all_tokens != ok_tokens  # must differ: the failed answer's tokens were counted
    w = group["workload"]
    assert (w["output_tokens"]["total"], w["output_tokens"]["known"]) == (ok_tokens, ok)  # must match: the ok answers'
    assert (
        group["errors"] == 2
        and group["throughput"]["output_tokens_unknown"] == 0
        and group["partly_counted"]["figures"].keys()
        <= {
            "workload.prompt_tokens.total",
            "workload.output_per_prompt",
        }
    )
    assert group["throughput"]["output_tokens_per_s"] == pytest.approx(ok_tokens / group["active_s"])
    assert claim(path, cache_dir=tmp_path / "cache")["workload"]["value"]["output_tokens"] == ok_tokens
    text = " ".join(CliRunner().invoke(cli, ["stats", str(path), *cache]).output.split())
    assert f"output_tokens {ok_tokens:,}," in text


def test_the_reports_claim_cards_show_each_runs_headline_figures_and_what_they_are_over(tmp_path):
    """The report's cards give the figures `claim` prints (latencies, throughput, energy) and the note
    that the per-token ones are over some answers only, for that run alone; every count known: no note."""
    import html

    for name, uncounted in (("all", 0), ("part", 1)):
        _counted_and_not(tmp_path / name, uncounted)
    out = tmp_path / "report.html"
    result = CliRunner().invoke(cli, ["report", str(tmp_path / "all"), str(tmp_path / "part"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    section = html.unescape(out.read_text())
    section = section[section.index("<h2>Claim cards</h2>") :].split("</table>")[0]
    for name in ("all", "part"):
        said = CliRunner().invoke(cli, ["claim", str(tmp_path / name)]).output
        figures = [line.removeprefix("  figures: ") for line in said.splitlines() if line.startswith("  figures: ")]
        assert figures and all(f"<td>{line}</td>" in section for line in figures)  # claim's own lines
    card = claim(tmp_path / "part")
    assert f"<td>unknown: {card['figures']['unknown']}</td>" in section  # must differ: B's answers partly counted
    assert section.count("unknown: output tokens unknown for") == 1  # must match: A's all counted, no note
    assert "output tok/s" in section and "energy" in section and "ttft p50" in section


def test_the_cards_energy_is_one_short_clause_of_its_figures_and_source(tmp_path):
    """The card's text gives a run's energy as its total, per request, per output token and mean
    power with what measured it, each as --json has it: not the whole energy object's every key
    (measured, idle_watts, kinds...), which made the line unreadable. No telemetry: said so."""
    from infertap.analysis.svg import number

    _counted_and_not(tmp_path / "a", 0)
    cache = ("--cache-dir", str(tmp_path / "cache"))
    energy = claim(tmp_path / "a", cache_dir=tmp_path / "cache")["figures"]["energy"]
    said = CliRunner().invoke(cli, ["claim", str(tmp_path / "a"), *cache], env={"COLUMNS": "400"})
    assert said.exit_code == 0, said.output
    line = next(line for line in said.output.splitlines() if "energy" in line and " J" in line)
    clause = line[line.index("energy ") :]
    assert clause.startswith(f"energy {number(energy['joules'])} J, {number(energy['joules_per_request'])} J/request, ")
    assert f"{number(energy['joules_per_output_token'])} J/output token" in clause
    assert f"({energy['source']})" in clause and "idle_watts" not in clause and "measured:" not in clause
    write_capture(tmp_path / "b", [{}])  # no telemetry at all
    bare = CliRunner().invoke(cli, ["claim", str(tmp_path / "b"), *cache], env={"COLUMNS": "400"})
    assert bare.exit_code == 0 and "energy: no telemetry" in bare.output, bare.output


def test_the_cards_ttft_says_where_it_is_the_time_to_a_whole_body(tmp_path):
    """An answer not streamed has its ttft at its whole body (docs/metrics.md): the card's ttft p50
    over streamed and not streamed answers says it mixes them, as stats does, and one over answers
    none of which streamed says it is the time to the whole body; all streamed: nothing to say."""
    from tests.analysis_builders import body, event, exchange, sse
    from tests.analysis_builders import write_capture as write_records

    whole = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}]}).encode()

    def streamed(xid: str, at: int) -> dict:
        return exchange(xid, sent_ms=at, chunks=[(10, sse(event("x"))), (20, sse(event("y", finish="stop")))], end_ms=30)

    def not_streamed(xid: str, at: int) -> dict:
        return exchange(xid, sent_ms=at, chunks=[(900, whole)], end_ms=900, request=body(stream=False),
                        headers=[["content-type", "application/json"]])  # fmt: skip

    runs = {
        "mixed": [streamed("s0", 0), streamed("s1", 100), not_streamed("w0", 200)],
        "whole": [not_streamed("w0", 0), not_streamed("w1", 1000)],
        "streamed": [streamed("s0", 0), streamed("s1", 100)],
    }
    said = {}
    for name, records in runs.items():
        write_records(tmp_path / name, records)
        result = CliRunner().invoke(cli, ["claim", str(tmp_path / name), "--cache-dir", str(tmp_path / "cache")])
        assert result.exit_code == 0, result.output
        said[name] = " ".join(result.output.split())
    mixed = claim(tmp_path / "mixed", cache_dir=tmp_path / "cache")["figures"]
    assert mixed["ttft_kinds"] == {"streamed": 2, "whole_body": 1}
    assert "ttft mixes 2 streamed answers (time to the first token) with 1 not streamed (time to the whole body)" in said["mixed"]
    assert "ttft: no answer streamed, so it is the time to the whole body" in said["whole"]
    assert "time to the whole body" not in said["streamed"]  # must match: every answer streamed, ttft as named


def test_sampling_without_enrichment_states_what_the_requests_set(tmp_path):
    """No enrichment and no snapshot: the card called all sampling unknown though every request set
    temperature 0 and its max_tokens. What the requests sent is stated; only the settings they left
    to the engine are unknown, with why. Requests that set nothing: wholly unknown (must differ)."""

    def chat(i: int, **settings) -> dict:
        return {"model": "m", "stream": False, "messages": [{"role": "user", "content": f"q{i}"}], **settings}

    captures = {
        "set": [chat(i, temperature=0, max_tokens=m) for i, m in enumerate([64, 256, 128, 100])],
        "some": [chat(0, temperature=0.7), chat(1, temperature=0.7), chat(2)],
        "unset": [chat(i) for i in range(3)],
    }
    said, cards = {}, {}
    for name, bodies in captures.items():
        write_capture(tmp_path / name, [{"id": f"x{i}", "body": b} for i, b in enumerate(bodies)])
        result = CliRunner().invoke(cli, ["claim", str(tmp_path / name), "--cache-dir", str(tmp_path / "cache")])
        assert result.exit_code == 0, result.output
        said[name] = next(line.strip() for line in result.output.splitlines() if line.strip().startswith("sampling:"))
        cards[name] = claim(tmp_path / name, cache_dir=tmp_path / "cache")["sampling"]
    sent = cards["set"]
    assert sent["value"]["temperature"] == [{"value": 0, "source": "request", "requests": 4}]
    assert [v["value"] for v in sent["value"]["max_tokens"]] == [64, 100, 128, 256]
    assert said["set"].startswith("sampling: max_tokens=64-256 (request, 4); temperature=0 (request, 4) (unknown: ")
    assert "top_p, top_k, min_p, repeat_penalty, presence_penalty, frequency_penalty not set by any request" in sent["unknown"]
    assert "temperature" not in sent["unknown"] and "no engine snapshot" in sent["unknown"]
    assert cards["some"]["value"]["temperature"][-1] == {"value": None, "source": "not sent", "requests": 1}
    assert "temperature not set by 1 of 3 requests" in cards["some"]["unknown"]
    assert "temperature=0.7 (request, 2)/unknown (not sent, 1)" in said["some"]
    assert cards["unset"]["value"] is None and said["unset"].startswith("sampling: unknown: no request set a sampling setting")
    # The defaults the requests left to the engine are still unknown: --strict names them.
    strict = CliRunner().invoke(cli, ["claim", str(tmp_path / "set"), "--strict", "--cache-dir", str(tmp_path / "cache")])
    assert strict.exit_code != 0 and "sampling" in strict.output.splitlines()[-1]


def test_the_cards_figures_say_why_a_latency_or_rate_is_unknown_once(tmp_path):
    """No answer streamed: the figures line read "tpot p50 unknown / p99 unknown ms" (a unit after
    no number, no cause); it says "tpot: no streamed answer", output tok/s with no count the same,
    and a run of no ok answer says so of each latency. Streamed answers with usage: measured (must match)."""
    from infertap.analysis.svg import number
    from tests.analysis_builders import body, event, exchange, sse
    from tests.analysis_builders import write_capture as write_records

    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    whole = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}]}).encode()

    def streamed(xid: str, at: int) -> dict:
        events = [(10, sse(event("x"))), (20, sse(event("y"))), (30, sse(event(finish="stop", usage=usage), "[DONE]"))]
        return exchange(xid, sent_ms=at, chunks=events, end_ms=30)

    def not_streamed(xid: str, at: int, status: int = 200) -> dict:
        return exchange(xid, sent_ms=at, chunks=[(900, whole)], end_ms=900, request=body(stream=False), status=status,
                        headers=[["content-type", "application/json"]])  # fmt: skip

    runs = {
        "streamed": [streamed("s0", 0), streamed("s1", 100)],
        "whole": [not_streamed("w0", 0), not_streamed("w1", 1000)],
        "failed": [not_streamed("f0", 0, 500), not_streamed("f1", 1000, 500)],
    }
    said = {}
    for name, records in runs.items():
        write_records(tmp_path / name, records)
        result = CliRunner().invoke(cli, ["claim", str(tmp_path / name), "--cache-dir", str(tmp_path / "cache")])
        assert result.exit_code == 0, result.output
        said[name] = " ".join(line for line in result.output.splitlines() if line.strip().startswith("figures:"))
    tpot = claim(tmp_path / "streamed", cache_dir=tmp_path / "cache")["figures"]["tpot_ms"]
    assert f"tpot p50 {number(tpot['p50'])} / p99 {number(tpot['p99'])} ms" in said["streamed"]
    assert "output tok/s:" not in said["streamed"] and " output tok/s" in said["streamed"]
    assert ", tpot: no streamed answer, e2e p50 " in said["whole"] and "output tok/s: no output token count" in said["whole"]
    assert "ttft: no ok answer, tpot: no ok answer, e2e: no ok answer" in said["failed"]
    for line in said.values():
        assert "unknown ms" not in line and "unknown output tok/s" not in line and "unknown req/s" not in line


def _report_cards(tmp_path, run) -> dict[str, dict[str, str]]:
    """The report's claim cards of one run, by column heading: each field's and figure line's text."""
    import re

    out = tmp_path / f"{run.name}.html"
    made = CliRunner().invoke(cli, ["report", str(run), "-o", str(out)])
    assert made.exit_code == 0, (made.output, made.exception)
    table = out.read_text().split("<h2>Claim cards</h2>")[1].split("</table>")[0]
    heads = [html.unescape(h) for h in re.findall(r"<th>(.*?)</th>", table)]
    rows = [[html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", r)] for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table)[1:]]
    return {head: {row[0] or f"figures {i}": row[col] for i, row in enumerate(rows)} for col, head in enumerate(heads) if col}


def _claimed(capture) -> dict[str, str]:
    """``infertap claim CAPTURE``'s text, keyed as the report's card of it (``_report_cards``)."""
    said = CliRunner().invoke(cli, ["claim", str(capture)])
    assert said.exit_code == 0, (said.output, said.exception)
    lines = [line[2:].split(": ", 1) for line in said.output.splitlines() if line.startswith("  ") and line[2] != " "]
    fields = {name: value for name, value in lines if name != "figures"}
    figures = [value for name, value in lines if name == "figures"]
    return {**fields, **{"figures" if i == 0 else f"figures {len(FIELDS) + i}": f for i, f in enumerate(figures)}}


def test_the_report_of_a_folder_of_captures_has_each_captures_own_card(tmp_path):
    # A report of a folder holding two captures made one card of the folder's path, which no
    # capture holds: "0 generation requests", runtime unknown, "no generation requests in this
    # capture: no figures", of captures that served 2 and 3. It has a card per capture now, each
    # what `infertap claim CAPTURE` prints (claim takes one capture: a folder of several is refused).
    def folder(name, counts):
        for capture, n in zip("xy", counts, strict=True):
            write_capture(tmp_path / name / capture, [{"body": _chat(f"{name}{capture}{i}")} for i in range(n)])
        return tmp_path / name

    run, other = folder("run", (2, 3)), folder("other", (4, 1))
    cards = _report_cards(tmp_path, run)
    assert list(cards) == ["A: x", "A: y"]
    groups = json.loads(CliRunner().invoke(cli, ["stats", str(run), "--json"]).output)["groups"]
    sql = CliRunner().invoke(cli, ["sql", "SELECT capture, count(*) FROM exchanges GROUP BY capture", str(run), "--csv"])
    counted = dict(line.split(",") for line in sql.output.splitlines()[1:])
    for name, n in (("x", 2), ("y", 3)):
        capture = str((run / name).resolve())
        [group] = [g for g in groups if g["key"]["capture"] == capture]
        assert int(counted[capture]) == group["requests"] == n  # the figures are the capture's own traffic
        assert f"{n} generation requests" in cards[f"A: {name}"]["workload"]
        assert cards[f"A: {name}"]["figures"].startswith(f"{group['ok']}/{group['requests']} ok; ")
        assert cards[f"A: {name}"] == _claimed(run / name)  # as claim prints it, field by field
    # Must differ: another folder, of other captures, has other cards.
    theirs = _report_cards(tmp_path, other)
    assert theirs["A: x"]["workload"] != cards["A: x"]["workload"] and theirs["A: y"]["figures"] != cards["A: y"]["figures"]
    assert theirs["A: x"]["figures"].startswith("4/4 ok; ") and theirs["A: y"]["figures"].startswith("1/1 ok; ")
    # Must stay: a report of one capture has its one card, claim's; claim refuses a folder of several, naming them.
    one = _report_cards(tmp_path, run / "x")
    assert list(one) == ["A: x"] and one["A: x"] == _claimed(run / "x")
    refused = CliRunner().invoke(cli, ["claim", str(run)])
    assert refused.exit_code != 0 and str(run / "x") in refused.output and str(run / "y") in refused.output


def test_claim_of_a_folder_of_captures_is_refused_naming_them(tmp_path):
    # claim() of a folder of two captures returned a card of the folder's path, which no capture
    # holds: "0 generation requests", "no figures". It is refused now, naming the captures.
    from infertap.analysis.errors import AnalysisError

    for name in "xy":
        write_capture(tmp_path / "run" / name, [{"body": _chat(name)}])
    with pytest.raises(AnalysisError, match="holds 2 captures, a claim card is of one") as refused:
        claim(tmp_path / "run")
    assert str((tmp_path / "run" / "x").resolve()) in str(refused.value) and str((tmp_path / "run" / "y").resolve()) in str(
        refused.value
    )
    # Must stay: one capture, by its folder or its segment file, has its card.
    assert claim(tmp_path / "run" / "x")["workload"]["value"]["requests"] == 1
    assert claim(next((tmp_path / "run" / "y").glob("*.itap.zst")))["workload"]["value"]["requests"] == 1
