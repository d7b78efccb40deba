"""llama-server's Responses API says ``status: "completed"`` (no ``incomplete_details``) for an
answer it cut at ``max_output_tokens``, with ``usage.output_tokens`` equal to the limit: infertap
keeps its word (finish ``stop``; an answer that ended by itself on its last allowed token says the
same), and compare, against an engine that says ``length`` (``incomplete``, ``max_output_tokens``)
of the same answer, counts that finish difference apart and says it may be only the server's wording.
A difference where the answer stopped short of its limit is a real one: no such note."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.analysis.divergence_notes import limit_note
from infertap.cli import cli
from infertap.launch import SMOLLM2_ALIAS
from tests.helpers import write_capture

pytestmark = pytest.mark.engine

_CUT = {"model": SMOLLM2_ALIAS, "input": "Count from one to fifty.", "max_output_tokens": 5, "temperature": 0}
_SHORT = {"model": SMOLLM2_ALIAS, "input": "Say hi.", "max_output_tokens": 200, "temperature": 0}


def _asked(url: str, body: dict) -> tuple[bytes, dict]:
    answer = httpx.post(f"{url}/v1/responses", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    return answer.content, answer.json()


def _openai(said: dict, status: str) -> bytes:
    """The same answer as OpenAI (and vLLM) word it: ``incomplete`` at the limit, or ``completed``."""
    out = {**said, "status": status, "output": [{**item, "status": status} for item in said["output"]]}
    out["incomplete_details"] = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return json.dumps(out).encode()


def _capture(path, pairs: list[tuple[dict, bytes]]) -> None:
    write_capture(path, [{"path": "/v1/responses", "body": body, "chunks": [answer]} for body, answer in pairs])


def test_completed_at_max_output_tokens_is_kept_and_noted_against_length(llama_server_engine, tmp_path):
    cut_raw, cut = _asked(llama_server_engine.url, _CUT)
    short_raw, short = _asked(llama_server_engine.url, _SHORT)
    # What llama-server sends: completed, no incomplete_details, exactly the limit's tokens of output.
    assert cut["status"] == "completed" and not cut.get("incomplete_details")
    assert cut["usage"]["output_tokens"] == _CUT["max_output_tokens"]
    assert short["status"] == "completed" and short["usage"]["output_tokens"] < _SHORT["max_output_tokens"]

    _capture(tmp_path / "llama", [(_CUT, cut_raw), (_SHORT, short_raw)])
    # A: the same answers, worded incomplete (length) by an engine that says so.
    _capture(tmp_path / "other", [(_CUT, _openai(cut, "incomplete")), (_SHORT, _openai(short, "incomplete"))])
    d = compare(tmp_path / "other", tmp_path / "llama")["divergence"]
    assert d["counts"]["finish_reason_changed"] == 2  # kept as each server said: stop against length
    assert d["counts"]["finish_completed_at_limit"] == 1  # the cut one only: the short one stopped by itself
    [at_limit] = [i for i in d["most_divergent"] if "completed_at_limit" in i]
    assert at_limit["finish_reason"] == ["length", "stop"] and at_limit["completed_at_limit"] == [None, 5]
    note = limit_note(d)
    assert note is not None and note.startswith("finish reason: 1 of the 2 pairs whose finish reason differs")
    shown = CliRunner().invoke(cli, ["compare", str(tmp_path / "other"), str(tmp_path / "llama")])
    assert shown.exit_code == 0, shown.output
    assert " ".join(note.split()) in " ".join(shown.stdout.split())

    # The match: A worded completed too: no finish difference, no note.
    _capture(tmp_path / "same", [(_CUT, _openai(cut, "completed")), (_SHORT, _openai(short, "completed"))])
    d = compare(tmp_path / "same", tmp_path / "llama")["divergence"]
    assert not d["counts"].get("finish_reason_changed") and not d["counts"].get("finish_completed_at_limit")
    assert limit_note(d) is None
