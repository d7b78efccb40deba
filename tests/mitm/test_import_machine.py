"""An import's traffic ran on a machine its file does not name: `infertap import` of a HAR and of a
mitmproxy flow file, then `claim`, `stats` and `report`, as a user runs them, beside a recording made
on this machine with a stand-in nvidia-smi listing two GPUs (this machine has none). The import's
header, card and stats say its machine is unknown, never this one's facts; the recording's name
this machine and its GPUs as before."""

from __future__ import annotations

import html
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from click.testing import CliRunner

from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from tests import sdk_shapes
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread
from tests.telemetry.stand_ins import nvidia_smi
from tests.telemetry.test_energy_arithmetic import LOCAL, PACKAGE0, counter, run

HERE = socket.gethostname()
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = sdk_shapes.chat_completion(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    }
)


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def stdout(*args: str) -> str:
    """What a command printed on stdout (its JSON), its warnings on stderr left out."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def har(path: Path, url: str, started: float, n: int = 1) -> Path:
    """A HAR of ``n`` chat requests to ``url``, one a second from ``started`` (wall s)."""
    from datetime import UTC, datetime

    entries = [
        {
            "startedDateTime": datetime.fromtimestamp(started + i, UTC).isoformat().replace("+00:00", "Z"),
            "time": 500,
            "request": {
                "method": "POST",
                "url": f"{url}/v1/chat/completions",
                "httpVersion": "HTTP/1.1",
                "headers": [],
                "postData": {"mimeType": "application/json", "text": json.dumps(CHAT)},
            },
            "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "text": json.dumps(ANSWER)}},
        }
        for i in range(n)
    ]
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))
    return path


def flows(path: Path) -> Path:
    """A mitmproxy flow file of one chat request to an engine on loopback, as mitmproxy saves it."""
    from mitmproxy import io
    from mitmproxy.test import tflow

    flow = tflow.tflow(resp=True)
    flow.request.scheme, flow.request.host, flow.request.port = "http", "127.0.0.1", 8080
    flow.request.method, flow.request.path, flow.request.content = "POST", "/v1/chat/completions", json.dumps(CHAT).encode()
    flow.response.content = json.dumps(ANSWER).encode()
    with open(path, "wb") as fh:
        io.FlowWriter(fh).add(flow)
    return path


def header(capture: Path) -> dict[str, Any]:
    return next(r for r in CaptureReader(capture).records() if r["type"] == "header")


def test_an_imports_machine_is_unknown_and_a_recordings_is_this_one(record, tmp_path, monkeypatch):
    """An import's header held this machine's hostname, CPU and memory as its recording machine's,
    and stats said of its energy "no power telemetry", as if this machine had been looked at. Its
    header now keeps only who imported it, apart; its card's device says the recording machine is
    unknown (HAR and flow file alike), and stats says its energy is not measured for that reason.
    A recording on this machine still names its host and the stand-in's two GPUs (must match)."""
    exe = nvidia_smi(tmp_path / "bin", [], gpus=2)
    monkeypatch.setenv("PATH", f"{exe.parent}{os.pathsep}{os.environ['PATH']}")
    with ServerThread(llama_server_app()) as server:
        rec = record(server.url, "--no-telemetry")
        httpx.post(f"{rec.url}/v1/chat/completions", json=CHAT, timeout=30).raise_for_status()
        assert rec.stop() == 0
    caps = {"record": rec.out}
    for kind, file in (("har", har(tmp_path / "a.har", LOCAL, time.time() - 60)), ("mitmproxy", flows(tmp_path / "a.flows"))):
        caps[kind] = tmp_path / kind
        invoke("import", str(file), "--out", str(caps[kind]))

    cards = {
        name: json.loads(invoke("claim", str(c), "--json", "--cache-dir", str(tmp_path / "cache"))) for name, c in caps.items()
    }
    device = cards["record"]["device"]
    assert device["value"]["hostname"] == HERE and [g["name"] for g in device["value"]["gpus"]] == ["NVIDIA H200"] * 2
    assert header(rec.out)["host"]["hostname"] == HERE
    for kind in ("har", "mitmproxy"):
        facts = header(caps[kind])
        assert not {"hostname", "cpu", "cpu_count", "memory_bytes", "os"} & set(facts["host"]), facts["host"]
        assert facts["host"]["gpus"] is None and facts["recorder"]["importer"]["hostname"] == HERE
        assert cards[kind]["device"] == {
            "value": None,
            "source": "none",
            "unknown": f"the traffic was imported from a {kind} file, which does not say the machine it ran on: "
            "the recording machine is unknown",
        }

    stats = {name: json.loads(invoke("stats", str(c), "--json"))["groups"][0]["telemetry"] for name, c in caps.items()}
    assert stats["har"]["imported"] == [header(caps["har"])["run_id"]] and stats["record"]["imported"] == []
    said = {name: " ".join(invoke("stats", str(c)).split()) for name, c in caps.items()}
    assert "energy: not measured: imported from a file" in said["mitmproxy"] and "no power telemetry" not in said["mitmproxy"]
    assert "energy: not sampled (recorded with --no-telemetry)" in said["record"]

    invoke("report", str(caps["har"]), "-o", str(tmp_path / "r.html"))  # its claim card, as claim words it
    page = html.unescape((tmp_path / "r.html").read_text())
    assert "the traffic was imported from a har file, which does not say the machine it ran on" in page


@pytest.mark.parametrize("upstream", ["https://api.example.com", LOCAL])
def test_an_import_appended_to_a_recording_does_not_move_its_engine(tmp_path, upstream):
    """A HAR of a hosted API's traffic imported into a capture recorded here against a local engine:
    its upstream counted as one of the capture's engines, and the recording's run, measured by this
    machine's RAPL counter, was "sent to engines on several machines", its energy unknown. The
    import's upstreams and header are no machine's here: the recording's run is measured, with the
    import's traffic to a remote API and to loopback alike (must match)."""
    base = time.time() - 60
    rapl = counter("host_rapl_energy_joules", PACKAGE0, (0, 100.0), (2000, 120.0), (4000, 140.0), source="host")
    capture = run(tmp_path / "cap", [(0, 4000)], rapl, base=base)
    invoke("import", str(har(tmp_path / "x.har", upstream, base + 1, 2)), "--out", str(capture))
    groups = json.loads(invoke("stats", str(capture), "--by", "run", "--json"))["groups"]
    recorded = next(g["energy"] for g in groups if not g["telemetry"]["imported"])
    assert recorded["joules"] == pytest.approx(40.0) and recorded["kinds"] == ["RAPL"]


def test_an_import_still_writing_is_told_by_its_importer_not_its_traffics_machine(tmp_path):
    """Whether an import still writes was judged by its header's machine and start: the traffic's
    first request, always before the importer started, so no import ever read as writing. It is
    judged by its importer: this process, imported in it (a recorder's header judged as before)."""
    from infertap.mitm.importer import import_file
    from infertap.recorders import recorder_running, writer_of

    # its traffic before this process started (however long the test session has run), as an import's is
    import_file(har(tmp_path / "a.har", LOCAL, psutil.Process().create_time() - 60), tmp_path / "cap")
    facts = header(tmp_path / "cap")
    assert recorder_running(*writer_of(facts["recorder"], facts["host"], facts["wall"])) == os.getpid()
    recorded = {**facts, "recorder": {k: v for k, v in facts["recorder"].items() if k != "importer"}}
    assert recorder_running(*writer_of(recorded["recorder"], {"hostname": HERE}, time.time())) == os.getpid()
    assert recorder_running(*writer_of(recorded["recorder"], {"hostname": HERE}, facts["wall"])) is None  # started after it


def test_an_imports_card_says_it_probed_no_engine_not_that_it_was_recorded_with_no_probe(record, tmp_path):
    """The card's engine fields of an import said its capture had no snapshot because it was
    "recorded with --no-probe, or the probe failed": an import probes no engine at all, as `info`
    says. Each field of the card that needs the snapshot now says so of an import; a recording made
    with --no-probe still says --no-probe (must differ), in the same words for every field."""
    with ServerThread(llama_server_app()) as server:
        rec = record(server.url, "--no-telemetry", "--no-probe")
        httpx.post(f"{rec.url}/v1/chat/completions", json=CHAT, timeout=30).raise_for_status()
        assert rec.stop() == 0
    imported = tmp_path / "har"
    invoke("import", str(har(tmp_path / "a.har", LOCAL, time.time() - 60)), "--out", str(imported))
    fields = ("runtime", "model", "quantization", "concurrency", "sampling")
    for capture, said, unsaid in (
        (imported, "imported from a file: an import probes no engine", "--no-probe"),
        (rec.out, "recorded with --no-probe, or the probe failed", "import"),
    ):
        card = json.loads(invoke("claim", str(capture), "--json", "--cache-dir", str(tmp_path / "cache")))
        for field in fields:
            unknown = card[field]["unknown"] or ""
            assert said in unknown and unknown.count("no engine snapshot (") == 1, (field, unknown)
            assert unsaid not in unknown, (field, unknown)


def test_an_enrich_snapshot_of_this_machine_is_no_host_fact_of_an_import(record, tmp_path):
    """`enrich` of an import probes the engine from this machine, and its snapshot says the engine
    runs here (host_is_engine_host): compare took this machine's CPU and GPUs as the import's engine
    machine's, the same as a recording's made here, where the traffic ran on a machine the file
    does not name. The import's host rows are unknown, saying why; two recordings made here compare
    their host facts as before (must match)."""
    from infertap.analysis.machines import IMPORTED

    with ServerThread(llama_server_app()) as server:
        recs = []
        for name in ("rec-a", "rec-b"):
            rec = record(server.url, "--no-telemetry", name=name)
            sent = json.dumps(CHAT).encode()  # the bytes the HAR holds: the two pair as one request
            answer = httpx.post(
                f"{rec.url}/v1/chat/completions", content=sent, headers={"content-type": "application/json"}, timeout=30
            )
            answer.raise_for_status()
            assert rec.stop() == 0
            recs.append(rec.out)
        imported = tmp_path / "imported"
        invoke("import", str(har(tmp_path / "a.har", LOCAL, time.time() - 60)), "--out", str(imported))
        invoke("enrich", str(imported), "--engine", server.url)
    [snapshot] = [r for r in CaptureReader(imported).records() if r["type"] == "engine"]
    assert snapshot["host_is_engine_host"] and snapshot["host"]["hostname"] == HERE  # what the snapshot itself says

    def hosts(a: Path, b: Path) -> dict[str, dict[str, Any]]:
        rows = json.loads(invoke("compare", str(a), str(b), "--json"))["config"]["snapshots"]
        return {r["fact"]: r for r in rows if r["fact"].startswith("host ")}

    rows = hosts(imported, recs[0])
    for fact in ("host cpu", "host gpus"):
        assert rows[fact]["a"] is None and rows[fact]["why_unknown"] == {"A": IMPORTED}, rows[fact]
        assert rows[fact]["unknown"] and not rows[fact]["differs"]
    assert rows["host cpu"]["b"] is not None and rows["host cpu"]["one_side"]
    text = " ".join(invoke("compare", str(imported), str(recs[0])).split())
    assert f"host cpu and host gpus of A unknown: {IMPORTED}" in text
    invoke("report", str(imported), str(recs[0]), "-o", str(tmp_path / "r.html"))
    assert f"host cpu and host gpus of A unknown: {IMPORTED}" in html.unescape((tmp_path / "r.html").read_text())
    same = hosts(recs[0], recs[1])
    assert same["host cpu"]["a"] == same["host cpu"]["b"] is not None and not same["host cpu"]["unknown"]
    assert "why_unknown" not in same["host cpu"]
    assert "of A unknown" not in " ".join(invoke("compare", str(recs[0]), str(recs[1])).split())


def test_an_import_left_unclosed_on_another_machine_is_said_imported_there_not_recorded(tmp_path, monkeypatch):
    """An import killed before its footer, on a laptop: stats and claim warned the capture "was
    recorded on" the laptop, the importer's machine, where its traffic ran on one the file does not
    name. They say it was imported there and that its traffic's machine is unknown; a recording
    left unclosed on another machine is still said recorded there (must differ)."""
    from unittest import mock

    from infertap.capture.hostfacts import host_facts
    from infertap.capture.segments import segment_paths
    from infertap.mitm.importer import import_file
    from tests.helpers import write_capture

    with monkeypatch.context() as m:
        m.setattr(socket, "gethostname", lambda: "laptop-3")  # the importing machine, not this one
        import_file(har(tmp_path / "a.har", LOCAL, time.time() - 60), tmp_path / "imported")
    facts = {**host_facts(), "hostname": "gpu-box-7"}
    with mock.patch("infertap.capture.writer.host_facts", lambda: facts):
        write_capture(tmp_path / "recorded", [{"offset_s": 0, "body": CHAT}])
    for name in ("imported", "recorded"):
        (seg,) = segment_paths(tmp_path / name)
        seg.write_bytes(seg.read_bytes()[:-3])  # no footer: killed

    imported = json.loads(stdout("stats", str(tmp_path / "imported"), "--json"))
    [warning] = imported["warnings"]
    assert warning == (
        f"{tmp_path / 'imported'} is not closed and was imported on laptop-3, not this machine "
        "(the machine its imported traffic ran on is unknown): if a writer of it still runs there, "
        "exchanges not yet written when it was read are in none of these figures"
    )
    assert imported["captures"][0]["imported_elsewhere"] == ["laptop-3"] == imported["captures"][0]["writing_elsewhere"]
    card = json.loads(stdout("claim", str(tmp_path / "imported"), "--json", "--cache-dir", str(tmp_path / "cache")))
    assert warning in card["warnings"]
    recorded = json.loads(stdout("stats", str(tmp_path / "recorded"), "--json"))
    [warning] = recorded["warnings"]
    assert "is not closed and was recorded on gpu-box-7, not this machine" in warning and "imported" not in warning
    assert recorded["captures"][0]["imported_elsewhere"] == []


@pytest.mark.parametrize(
    ("recorded_on", "said"),
    [
        ("laptop-3", "was recorded and imported on laptop-3, not this machine"),
        ("gpu-box-7", "was recorded on gpu-box-7 and imported on laptop-3, not this machine"),  # must match
    ],
)
def test_a_recording_and_an_import_left_unclosed_by_one_machine_are_both_named(tmp_path, monkeypatch, recorded_on, said):
    """A capture recorded on a laptop, a HAR then imported into it there, both killed before their
    footers: stats said only that it "was imported on" the laptop, as if nothing had been recorded
    there. It names the recording too; on two machines, each as before."""
    from unittest import mock

    from infertap.capture.hostfacts import host_facts
    from infertap.capture.segments import segment_paths
    from infertap.mitm.importer import import_file
    from tests.helpers import write_capture

    capture = tmp_path / "cap"
    facts = {**host_facts(), "hostname": recorded_on}
    with mock.patch("infertap.capture.writer.host_facts", lambda: facts):
        write_capture(capture, [{"offset_s": 0, "body": CHAT}])
    with monkeypatch.context() as m:
        m.setattr(socket, "gethostname", lambda: "laptop-3")  # the importing machine, not this one
        import_file(har(tmp_path / "a.har", LOCAL, time.time() - 60), capture)
    segments = segment_paths(capture)
    assert len(segments) == 2
    for seg in segments:
        seg.write_bytes(seg.read_bytes()[:-3])  # no footer: killed

    out = json.loads(stdout("stats", str(capture), "--json"))
    [warning] = out["warnings"]
    assert warning == (
        f"{capture} is not closed and {said} (the machine its imported traffic ran on is unknown): if a writer of it "
        "still runs there, exchanges not yet written when it was read are in none of these figures"
    )
    [info] = out["captures"]
    assert info["recorded_elsewhere"] == [recorded_on] and info["imported_elsewhere"] == ["laptop-3"]
    assert info["writing_elsewhere"] == sorted({recorded_on, "laptop-3"})
    card = json.loads(stdout("claim", str(capture), "--json", "--cache-dir", str(tmp_path / "cache")))
    assert warning in card["warnings"]


def test_an_imports_engine_facts_are_said_to_be_enrichs_probed_after_it(record, tmp_path):
    """`enrich` of an import probes the engine as it is then: compare's configuration rows and the
    claim card showed its version, models, slots and defaults as those of the engine that served
    the imported traffic, which the file does not name. They are kept, each said to be probed by
    enrich at its time, after the import; a recording's own probe is not (must differ), and the
    facts themselves compare as before (must match)."""
    from datetime import UTC, datetime

    with ServerThread(llama_server_app()) as server:
        rec = record(server.url, "--no-telemetry")
        sent = json.dumps(CHAT).encode()  # the bytes the HAR holds: the two pair as one request
        httpx.post(
            f"{rec.url}/v1/chat/completions", content=sent, headers={"content-type": "application/json"}, timeout=30
        ).raise_for_status()
        assert rec.stop() == 0
        imported = tmp_path / "imported"
        invoke("import", str(har(tmp_path / "a.har", LOCAL, time.time() - 60)), "--out", str(imported))
        invoke("enrich", str(imported), "--engine", server.url)
    [snapshot] = [r for r in CaptureReader(imported).records() if r["type"] == "engine"]
    when = datetime.fromtimestamp(snapshot["wall"], UTC).isoformat(timespec="seconds")
    probed = (
        f"probed by `infertap enrich` at {when}, after the traffic was imported: "
        "the engine then, which the imported file does not say served that traffic"
    )

    cards = {
        name: json.loads(invoke("claim", str(c), "--json", "--cache-dir", str(tmp_path / "cache")))
        for name, c in (("import", imported), ("record", rec.out))
    }
    card = cards["import"]
    assert card["runtime"]["value"]["version"] == cards["record"]["runtime"]["value"]["version"] is not None, "kept"
    assert card["concurrency"]["value"]["engine_slots"] == 4
    for field, what in (
        ("runtime", "the engine's kind, version and digest"),
        ("model", "the engine's models and file"),
        ("concurrency", "the engine slots"),
        ("sampling", "the engine defaults"),
    ):
        assert f"{what} {probed}" in card[field]["unknown"], (field, card[field])
        assert "infertap enrich" not in (cards["record"][field].get("unknown") or ""), (field, cards["record"][field])
    assert {"value": 0.8, "source": "engine_default", "requests": 1} in card["sampling"]["value"]["temperature"]
    assert card["quantization"]["value"] is None and "infertap enrich" not in card["quantization"]["unknown"], "nothing shown"

    def config(a: Path, b: Path) -> dict[str, dict[str, Any]]:
        rows = json.loads(stdout("compare", str(a), str(b), "--json"))["config"]["snapshots"]
        return {r["fact"]: r for r in rows}

    rows = config(imported, rec.out)
    for fact in ("kind", "version", "models", "parallel_slots", "default temperature"):
        assert rows[fact]["probed"] == {"A": probed}, rows[fact]
        assert rows[fact]["a"] == rows[fact]["b"] is not None and not rows[fact]["differs"], rows[fact]
    assert not any("probed" in r for r in rows.values() if r["a"] is None), "a fact A does not know is not said probed"
    assert all("probed" not in r for r in config(rec.out, rec.out).values())
    line = (
        "kind, version, models, context_size, parallel_slots, chat_template_sha256, bos_token, eos_token, model_path, "
        f"default repeat_penalty and default temperature of A {probed}"
    )
    text = " ".join(invoke("compare", str(imported), str(rec.out)).split())
    assert " ".join(line.split()) in text, text
    assert "infertap enrich" not in " ".join(invoke("compare", str(rec.out), str(rec.out)).split())
    invoke("report", str(imported), str(rec.out), "-o", str(tmp_path / "r.html"))
    assert line in html.unescape((tmp_path / "r.html").read_text())
