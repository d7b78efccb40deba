"""`infertap stats` of a replay says what the replay changed of its source's workload (its
derivation), in the words `infertap info` says it: speeds compare only beside what was asked. A
recording, which derives from nothing, says none."""

from __future__ import annotations

import json

from click.testing import CliRunner

from infertap.capture.identity import describe
from infertap.capture.info import summarize
from infertap.cli import cli
from tests.helpers import write_capture

_CHAT = {"model": "m", "messages": [{"role": "user", "content": "Count to ten."}]}
_PINS = {"temperature": {"value": 0.8, "source": "engine_default"}, "min_p": {"value": 0.05, "source": "engine_default"}}


def _stats(*args: str) -> tuple[str, dict]:
    human = CliRunner().invoke(cli, ["stats", *args])
    assert human.exit_code == 0, human.output
    as_json = CliRunner().invoke(cli, ["stats", *args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    return human.stdout, json.loads(as_json.stdout)


def test_stats_of_a_replay_says_its_derivation_as_info_does(fake, tmp_path):
    _, url = fake
    write_capture(
        tmp_path / "src",
        [{"path": p, "body": b, "chunks": [b"{}"]} for p, b in (("/v1/messages", {**_CHAT, "max_tokens": 8}),) * 2],
        enrichments=[{"exchange_id": f"src-{i}", "settings": _PINS} for i in range(2)],
    )
    args = ["replay", str(tmp_path / "src"), "--target", url, "--no-probe", "--no-telemetry", "--out", str(tmp_path / "out")]
    done = CliRunner().invoke(cli, [*args, "--set", "top_k=5", "--pin-defaults"])
    assert done.exit_code == 0, done.output

    info = summarize(tmp_path / "out")["workload"]
    said_by_info = describe(info).rsplit("; derived from ", 1)[1]  # the line `infertap info` prints, its end
    said_by_info = "derived from " + said_by_info
    assert said_by_info.startswith(f"derived from {info['source']['short']} by --set top_k, --pin-defaults")
    assert "min_p of 2 messages requests" in said_by_info  # the pin left out, said beside --pin-defaults

    human, result = _stats(str(tmp_path / "out"))
    [capture] = result["captures"]
    assert capture["derivation"] == {
        "source": info["source"]["short"],
        "derived_by": info["derived_by"],
        "words": said_by_info,
    }
    assert f"replay {capture['capture']}: {said_by_info}" in human.splitlines()


def test_stats_of_a_recording_says_no_derivation(tmp_path):
    """The match: the source itself, a recording, has none to say."""
    write_capture(tmp_path / "src", [{"path": "/v1/chat/completions", "body": _CHAT, "chunks": [b"{}"]}])
    human, result = _stats(str(tmp_path / "src"))
    assert [c["derivation"] for c in result["captures"]] == [None]
    assert "derived from" not in human and "replay " not in human
