"""``--pin-defaults`` on an API that says where it reads its settings: a pinned default it reads
nowhere (Messages' ``min_p``), or whose value it refuses (TGI's temperature of 0), is left out of
that request, not a refusal of the whole replay; the pins that have a place still go in, and the
replay says what it left out (a note on stderr, ``transforms.pins_without_place`` in its header,
and the derivation compare and the claim card show). ``--set`` of the same stays refused."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.capture.reader import CaptureReader
from infertap.cli import cli
from infertap.replay import ReplayConfig, ReplayError, Transforms, run_replay
from tests.helpers import write_capture

_MESSAGES = {"model": "m", "messages": [{"role": "user", "content": "Count to ten."}], "max_tokens": 16}
_CHAT = {"model": "m", "messages": [{"role": "user", "content": "Count to ten."}]}
_PINS = {
    "temperature": {"value": 0.8, "source": "engine_default"},
    "top_k": {"value": 40, "source": "engine_default"},
    "min_p": {"value": 0.05, "source": "engine_default"},
    "typical_p": {"value": 1.0, "source": "engine_default"},
}
_PLACED = {name: pin for name, pin in _PINS.items() if name not in ("min_p", "typical_p")}  # each has a place on Messages


def _capture(path, pins: dict) -> None:
    """Two Messages requests and a chat one, each enriched with ``pins`` as the source's defaults."""
    bodies = [("/v1/messages", _MESSAGES), ("/v1/chat/completions", _CHAT), ("/v1/messages", _MESSAGES)]
    write_capture(
        path,
        [{"path": p, "body": b, "chunks": [b"{}"]} for p, b in bodies],
        enrichments=[{"exchange_id": f"src-{i}", "settings": pins} for i in range(len(bodies))],
    )


def _replay(fake, tmp_path, name: str, *extra: str):
    """The CLI's replay with --pin-defaults: its result, the bodies the target got by path, and its header's transforms."""
    app, url = fake
    app.requests.clear()
    args = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry", "--json", "--pin-defaults"]
    done = CliRunner().invoke(cli, [*args, *extra, "--out", str(tmp_path / name)])
    assert done.exit_code == 0, done.output
    sent: dict[str, list[dict]] = {}
    for r in app.requests:
        sent.setdefault(r["path"], []).append(json.loads(r["body"]))
    return done, sent, next(CaptureReader(tmp_path / name).records())["recorder"]


def _values(pins: dict) -> dict:
    return {name: pin["value"] for name, pin in pins.items()}


def test_a_pin_messages_reads_nowhere_is_left_out_of_its_requests_and_said(fake, tmp_path):
    _capture(tmp_path / "src", _PINS)
    done, sent, recorder = _replay(fake, tmp_path, "out")
    # Messages gets the pins it reads, and no min_p or typical_p; chat, which reads any name, gets them all.
    assert sent["/v1/messages"] == [{**_MESSAGES, **_values(_PLACED)}] * 2
    assert sent["/v1/chat/completions"] == [{**_CHAT, **_values(_PINS)}]
    left_out = {"min_p": {"messages": 2}, "typical_p": {"messages": 2}}
    assert recorder["transforms"]["pins_without_place"] == left_out
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: --pin-defaults")]
    assert notes == [
        "note: --pin-defaults left min_p, typical_p out of 2 messages requests, the target's own defaults applying there: "
        "messages reads no such setting (its sampling settings are read at the top level: max_tokens, "
        "stop_sequences, temperature, top_k, top_p)"
    ]
    assert json.loads(done.stdout)["pins_without_place"] == left_out
    # What compare (and the claim card, from the same derivation) says the replay did: not "pinned" alone.
    how = compare(tmp_path / "src", tmp_path / "out")["traffic"]["how"]
    assert how.endswith(
        "B replays the other's workload with --pin-defaults (not pinned where the API reads no such setting or "
        "refuses its value: min_p, typical_p of 2 messages requests (messages reads no such setting (its sampling "
        "settings are read at the top level: max_tokens, stop_sequences, temperature, top_k, top_p)))"
    )
    assert recorder["transforms"]["pins_without_place_why"] == json.loads(done.stdout)["pins_without_place_why"]

    # Counted per pass, as the replay's other counts of the source's exchanges.
    done, sent, recorder = _replay(fake, tmp_path, "twice", "--repeat", "2")
    assert sent["/v1/messages"] == [{**_MESSAGES, **_values(_PLACED)}] * 4
    assert recorder["transforms"]["pins_without_place"] == left_out
    assert "note: --pin-defaults left min_p, typical_p out of 2 messages requests" in done.stderr
    assert "(in each of the 2 passes)" in done.stderr.split("note: --pin-defaults", 1)[1].splitlines()[0]


def test_pins_that_all_have_a_place_say_nothing(fake, tmp_path):
    """The match: the same capture pinning only what Messages reads: every pin in, nothing said."""
    _capture(tmp_path / "src", _PLACED)
    done, sent, recorder = _replay(fake, tmp_path, "out")
    assert sent["/v1/messages"] == [{**_MESSAGES, **_values(_PLACED)}] * 2
    assert sent["/v1/chat/completions"] == [{**_CHAT, **_values(_PLACED)}]
    assert recorder["transforms"]["pins_without_place"] == {}
    assert "left" not in done.stderr and "min_p" not in done.stderr
    assert compare(tmp_path / "src", tmp_path / "out")["traffic"]["how"].endswith(
        "B replays the other's workload with --pin-defaults"
    )


def test_a_set_of_the_setting_messages_reads_nowhere_is_still_refused(fake, tmp_path):
    """A setting the user named is refused, pinned or not: only a pin goes without its place."""
    app, url = fake
    _capture(tmp_path / "src", _PINS)
    transforms = Transforms(pin_defaults=True, set_values=[("min_p", 0.1)])
    with pytest.raises(
        ReplayError, match=r"exchange src-0 \(POST /v1/messages\): --set min_p: messages reads no setting 'min_p'"
    ):
        run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=transforms))
    assert not app.requests and not (tmp_path / "out").exists()


def test_a_pinned_value_tgi_refuses_is_left_out_and_sglang_takes_it(fake, tmp_path):
    """TGI refuses a temperature of 0 (its router's validation): a source whose default was 0 pins
    none on TGI's ``/generate``, said so, while SGLang's, which takes 0, gets it; the other pin goes in both."""
    app, url = fake
    tgi = {"inputs": "The capital of France is", "parameters": {"max_new_tokens": 8}}
    sglang = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 8}}
    pins = {"temperature": {"value": 0, "source": "engine_default"}, "top_k": {"value": 40, "source": "engine_default"}}
    write_capture(
        tmp_path / "src",
        [{"path": "/generate", "body": b, "chunks": [b"{}"]} for b in (tgi, sglang)],
        enrichments=[{"exchange_id": f"src-{i}", "settings": pins} for i in range(2)],
    )
    summary = run_replay(
        ReplayConfig(tmp_path / "src", url, tmp_path / "out", probe=False, transforms=Transforms(pin_defaults=True))
    )
    got = sorted((json.loads(r["body"]) for r in app.requests), key=lambda b: "text" in b)
    assert got == [
        {**tgi, "parameters": {"max_new_tokens": 8, "top_k": 40}},
        {**sglang, "sampling_params": {"max_new_tokens": 8, "temperature": 0, "top_k": 40}},
    ]
    assert summary["pins_without_place"] == {"temperature": {"tgi-generate": 1}}
    # Said of a pin left out (the request goes with TGI's own default), not --set's advice to set do_sample.
    assert summary["pins_without_place_why"]["temperature"]["tgi-generate"] == (
        "tgi-generate refuses a temperature of 0 (it must be above 0): TGI decodes greedily, as 0 asks, by its own "
        "default (do_sample false) where a request has no top_k, top_p or typical_p, and samples where it has one "
        "(a pinned one among them)"
    )
    header = next(CaptureReader(tmp_path / "out").records())
    assert header["recorder"]["transforms"]["pins_without_place"] == {"temperature": {"tgi-generate": 1}}
    # The reason is in the header too, so the capture alone says why, and the derivation says it from there.
    why = summary["pins_without_place_why"]
    assert header["recorder"]["transforms"]["pins_without_place_why"] == why
    how = compare(tmp_path / "src", tmp_path / "out")["traffic"]["how"]
    assert how.endswith(
        f"--pin-defaults (not pinned where the API reads no such setting or refuses its value: "
        f"temperature of 1 tgi-generate request ({why['temperature']['tgi-generate']}))"
    )


def test_a_set_temperature_of_0_on_tgi_is_refused_with_the_set_advice(fake, tmp_path):
    """The match: a --set of the same 0 is refused, its message the advice for --set (do_sample=false)."""
    app, url = fake
    write_capture(tmp_path / "src", [{"path": "/generate", "body": {"inputs": "Hi", "parameters": {}}, "chunks": [b"{}"]}])
    with pytest.raises(
        ReplayError,
        match=r"refuses a temperature of 0 \(it must be above 0\): greedy decoding there is "
        r"--set do_sample=false --unset temperature",
    ):
        run_replay(
            ReplayConfig(
                tmp_path / "src", url, tmp_path / "out", probe=False, transforms=Transforms(set_values=[("temperature", 0)])
            )
        )
    assert not app.requests


def test_a_header_of_an_older_replay_without_the_reasons_still_reads(fake, tmp_path):
    """A replay's header from before the reasons were kept (counts alone) reads as it did: the pins
    left out, named and counted, with no reason; one with them gives each group its own."""
    from infertap.capture.identity import replay_derivation

    left_out = {"min_p": {"messages": 2}, "temperature": {"tgi-generate": 1}}
    older = {"kind": "replay", "transforms": {"pin_defaults": True, "pins_without_place": left_out}}
    assert replay_derivation(older) == [
        "--pin-defaults (not pinned where the API reads no such setting or refuses its value: "
        "min_p of 2 messages requests; temperature of 1 tgi-generate request)"
    ]
    why = {"min_p": {"messages": "messages reads no such setting"}, "temperature": {"tgi-generate": "it refuses 0"}}
    newer = {"kind": "replay", "transforms": {**older["transforms"], "pins_without_place_why": why}}
    assert replay_derivation(newer) == [
        "--pin-defaults (not pinned where the API reads no such setting or refuses its value: "
        "min_p of 2 messages requests (messages reads no such setting); temperature of 1 tgi-generate request (it refuses 0))"
    ]
