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
from tests.fake_engines import llama_server_app
from tests.fake_upstream import ServerThread
from tests.telemetry.stand_ins import nvidia_smi
from tests.telemetry.test_energy_arithmetic import LOCAL, PACKAGE0, counter, run

HERE = socket.gethostname()
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
ANSWER = {"id": "c", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


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
    from infertap.capture.info import recorder_running, writer_of
    from infertap.mitm.importer import import_file

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
