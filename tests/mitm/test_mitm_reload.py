"""mitmproxy reloads an edited ``-s`` script: the addon's flows in flight go on, and are recorded
when they end; a shutdown still records those left as cancelled."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from infertap.capture.reader import CaptureReader
from tests.fake_upstream import ServerThread, sse_upstream
from tests.mitm.conftest import ADDON

CHUNKS = [b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n', b"data: [DONE]\n\n"]


def _runs(out: Path) -> dict[str, list[str]]:
    """Each exchange's tag by the run that recorded it (a run's segments start with its header)."""
    runs: dict[str, list[str]] = {}
    run = ""
    for record in CaptureReader(out).records():
        if record["type"] == "header":
            run = record["run_id"]
            runs.setdefault(run, [])
        elif record["type"] == "exchange":
            runs[run].append(httpx.Request("POST", "/", content=record["request_body"]).read().decode())
    return runs


def test_a_script_reload_lets_flows_in_flight_end_and_a_shutdown_still_cancels_them(start_mitm: Any, tmp_path: Path) -> None:
    """`mitmdump -s addon.py` with the file edited while answers streamed: mitmproxy refused the
    reload (an ``async def done`` can't run where it unloads a script), the edited addon never
    loaded. Now the old instance keeps recording the flows it began into its run, the new one
    records the rest into its own, and both runs are closed; a flow still in flight at shutdown is
    written cancelled, as without a reload."""
    script = tmp_path / "addon.py"
    script.write_bytes(ADDON.read_bytes())
    ends = [threading.Event(), threading.Event(), threading.Event()]  # each answer's end, in order of arrival
    ends[2].set()
    arrived = iter(ends)

    async def held() -> None:
        end = next(arrived)
        while not end.is_set():
            await asyncio.sleep(0.01)

    with ServerThread(sse_upstream(CHUNKS[:1], held)) as upstream:
        mitm = start_mitm("--mode", f"reverse:{upstream.url}", "--set", "infertap_telemetry=false", mitmdump=True, script=script)
        url = f"{mitm.url}/v1/chat/completions"
        with httpx.Client(timeout=30) as client:
            with client.stream("POST", url, json={"tag": "finishes"}) as finishes:
                finished = finishes.iter_raw()
                assert next(finished) == CHUNKS[0]
                with client.stream("POST", url, json={"tag": "stays"}) as stays:
                    staying = stays.iter_raw()  # held: a generator dropped closes the response
                    assert next(staying) == CHUNKS[0]
                    later = time.time() + 10  # past the mtime mitmproxy loaded: it polls once a second
                    os.utime(script, (later, later))
                    deadline = time.monotonic() + 30
                    while mitm.log.read_text().count("Loading script") < 2:
                        assert time.monotonic() < deadline, mitm.log.read_text()
                        time.sleep(0.1)
                    ends[0].set()
                    assert b"".join(finished) == b""  # the body's end, nothing more
                    assert client.post(url, json={"tag": "after"}).status_code == 200
                    mitm.stop()  # "stays" still in flight
    log = mitm.log.read_text()
    assert "Traceback" not in log and "error in script" not in log, log  # the addon neither failed nor refused
    exchanges = {x["request_body"]: x for x in mitm.exchanges()}
    first, second, third = (exchanges[b'{"tag":"%s"}' % t] for t in (b"finishes", b"stays", b"after"))
    assert (first["end"], first["chunks"]) == ("complete", CHUNKS[:1])
    assert (second["end"], second["error"]) == ("cancelled", "infertap mitm shut down while the request was in flight")
    assert third["end"] == "complete"
    # The flows begun before the reload in the old instance's run, the one after in the new one's.
    assert sorted(_runs(mitm.out).values()) == [['{"tag":"after"}'], ['{"tag":"finishes"}', '{"tag":"stays"}']]
    reader = CaptureReader(mitm.out)
    list(reader.records())
    assert reader.closed_cleanly and reader.torn == []


def _by_run(out: Path) -> tuple[list[list[str]], bool]:
    """Each run's exchanges (their ends, by run, in the order the runs began), and whether every run closed."""
    reader = CaptureReader(out)
    runs: dict[str, list[str]] = {}
    run = ""
    for record in reader.records():
        if record["type"] == "header":
            run = record["run_id"]
            runs.setdefault(run, [])
        elif record["type"] == "exchange":
            runs[run].append(record["end"])
    return list(runs.values()), reader.closed_cleanly


async def _loaded_with_a_flow_in_flight(loader: Any, tctx: Any, path: Path, out: Path) -> tuple[Any, Any]:
    """The addon script at ``path`` loaded by mitmproxy's own loader, recording to ``out``, and a chat
    flow whose answer's headers came (its body not yet): the state a reload meets."""
    tctx.configure(loader, scripts=[str(path)])
    (script,) = loader.addons
    while script.ns is None:  # its watcher loads it on the loop
        await asyncio.sleep(0.01)
    tctx.options.update(infertap_out=str(out), infertap_telemetry=False)
    return script, await _in_flight(tctx)


async def _in_flight(tctx: Any) -> Any:
    """A chat flow through the loaded addons whose answer's headers came (its body not yet)."""
    from mitmproxy.proxy.layers import http as layers
    from mitmproxy.test import tflow

    flow = tflow.tflow(resp=True)
    flow.request.path = "/v1/chat/completions"
    for hook in (layers.HttpRequestHeadersHook, layers.HttpRequestHook, layers.HttpResponseHeadersHook):
        await tctx.master.addons.trigger_event(hook(flow))
    return flow


@pytest.mark.filterwarnings(  # taddons imports every addon of mitmproxy's, ldap3's warnings too
    "ignore:tagMap is deprecated:DeprecationWarning", "ignore:typeMap is deprecated:DeprecationWarning"
)
def test_a_run_retired_by_a_reload_closes_after_its_last_flow_or_at_once_with_none(tmp_path: Path) -> None:
    """Through mitmproxy's own script loader (``Script.loadscript``, what its watcher runs on an
    edit): a retired instance's run closes when its last flow ends, before shutdown; one retired
    with no flow in flight closes at once."""
    from mitmproxy import hooks
    from mitmproxy.addons import script as scripts
    from mitmproxy.proxy.layers import http as layers
    from mitmproxy.test import taddons

    path = tmp_path / "addon.py"
    path.write_bytes(ADDON.read_bytes())
    out = tmp_path / "cap"

    async def footers(n: int) -> None:
        for _ in range(500):
            if sum(r["type"] == "footer" for r in CaptureReader(out).records()) == n:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"not {n} runs closed: {_by_run(out)}")

    async def run() -> None:
        loader = scripts.ScriptLoader()
        with taddons.context(loader) as tctx:
            script, flow = await _loaded_with_a_flow_in_flight(loader, tctx, path, out)
            script.loadscript()  # the flow in flight: its run stays open
            assert _by_run(out) == ([[], []], False)
            await tctx.master.addons.trigger_event(layers.HttpResponseHook(flow))
            await footers(1)  # its run closed, by its writer's thread, the new one still open
            assert _by_run(out) == ([["complete"], []], False)
            script.loadscript()  # no flow in flight: closed at once
            await footers(2)
            await tctx.master.addons.trigger_event(hooks.DoneHook())

    asyncio.run(run())
    assert _by_run(out) == ([["complete"], [], []], True)


@pytest.mark.filterwarnings("ignore:tagMap is deprecated:DeprecationWarning", "ignore:typeMap is deprecated:DeprecationWarning")
@pytest.mark.parametrize("unload", ["edited script fails to load", "script dropped from scripts"])
def test_a_flow_in_flight_when_no_instance_is_left_is_written_when_it_ends(tmp_path: Path, unload: str) -> None:
    """The edited script had a syntax error, or was dropped from ``scripts``: no instance was left to
    hand the retired one its flows' hooks, so a flow that ended then was held in memory until
    shutdown and written as cancelled (a crash before lost it), and its run closed only then. Now it
    is written as it ends, with its real end, by the instance that saw its request; one still in
    flight at shutdown is written cancelled and the run closed, as a plain shutdown does."""
    from mitmproxy import hooks
    from mitmproxy.addons import script as scripts
    from mitmproxy.proxy.layers import http as layers
    from mitmproxy.test import taddons

    path = tmp_path / "addon.py"
    path.write_bytes(ADDON.read_bytes())
    out = tmp_path / "cap"
    errors: list[str | None] = []

    async def run() -> None:
        loader = scripts.ScriptLoader()
        with taddons.context(loader) as tctx:
            script, ends = await _loaded_with_a_flow_in_flight(loader, tctx, path, out)
            stays = await _in_flight(tctx)
            if unload == "edited script fails to load":
                path.write_text("def broken(:\n")
                script.loadscript()
                assert script.ns is None  # mitmproxy logged the error; nothing of ours is loaded
            else:
                tctx.configure(loader, scripts=[])
                assert loader.addons == []
            assert tctx.master.addons.get("infertapcapture") is None
            await tctx.master.addons.trigger_event(layers.HttpResponseHook(ends))
            for _ in range(500):  # written as it ended (by the capture's thread), its run open for the other
                if _by_run(out) != ([[]], False):
                    break
                await asyncio.sleep(0.01)
            assert _by_run(out) == ([["complete"]], False)
            await tctx.master.addons.trigger_event(hooks.DoneHook())
            assert stays.metadata.get("infertap") is None
            errors.extend(x["error"] for x in CaptureReader(out).records() if x["type"] == "exchange")

    asyncio.run(run())
    assert _by_run(out) == ([["complete", "cancelled"]], True)
    assert errors == [None, "infertap mitm shut down while the request was in flight"]


def test_a_flow_that_ends_after_a_failed_reload_survives_a_crash(start_mitm: Any, tmp_path: Path) -> None:
    """`mitmdump -s addon.py`, the script edited into a syntax error while an answer streamed: the
    answer, ended, was kept in memory until shutdown, so a kill before it lost it. Now it is in the
    capture once it ended, complete with its chunks, whatever happens to the process after."""
    script = tmp_path / "addon.py"
    script.write_bytes(ADDON.read_bytes())
    end = threading.Event()

    async def held() -> None:
        while not end.is_set():
            await asyncio.sleep(0.01)

    with ServerThread(sse_upstream(CHUNKS[:1], held)) as upstream:
        mitm = start_mitm("--mode", f"reverse:{upstream.url}", "--set", "infertap_telemetry=false", mitmdump=True, script=script)
        with httpx.Client(timeout=30) as client:
            with client.stream("POST", f"{mitm.url}/v1/chat/completions", json={"tag": "ends"}) as answer:
                chunks = answer.iter_raw()
                assert next(chunks) == CHUNKS[0]
                script.write_text("def broken(:\n")
                later = time.time() + 10  # past the mtime mitmproxy loaded: it polls once a second
                os.utime(script, (later, later))
                deadline = time.monotonic() + 30
                while "error in script" not in mitm.log.read_text():
                    assert time.monotonic() < deadline, mitm.log.read_text()
                    time.sleep(0.1)
                end.set()
                assert b"".join(chunks) == b""  # the body's end, nothing more
        deadline = time.monotonic() + 30
        while not mitm.exchanges():  # written by the capture's thread once mitmproxy ended the flow
            assert time.monotonic() < deadline, ("never written", mitm.log.read_text())
            time.sleep(0.1)
        mitm.proc.kill()  # a crash: no shutdown writes anything
        mitm.proc.wait(30)
    (exchange,) = mitm.exchanges()
    assert (exchange["request_body"], exchange["end"], exchange["chunks"]) == (b'{"tag":"ends"}', "complete", CHUNKS[:1])
