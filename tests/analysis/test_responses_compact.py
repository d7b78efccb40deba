"""OpenAI's ``POST /v1/responses/compact`` (the Codex CLI compacts a long conversation with it): the
model reads the conversation and writes its summary (an encrypted ``compaction`` item after the
user's messages, ``usage`` counting the tokens it wrote), so it is a generation request. Its path
named no API: in no figure and no workload identity, and compare found no generation request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.apis import read_request, read_response
from infertap.capture.identity import workload_identity
from tests.helpers import pair_captures, write_capture

_PATH = "/v1/responses/compact"
_USER = {"role": "user", "content": "Create a landing page for a dog cafe."}
_REPLY = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Here it is."}]}
_ASK = {"model": "gpt-5.1-codex-max", "input": [_USER, _REPLY], "instructions": "You are Codex."}


def _compacted(*users: str, summary: str = "gAAAA-one", output_tokens: int = 40) -> list[bytes]:
    """The compacted response object, as the openai SDK's ``CompactedResponse`` types it: every user
    message, then one compaction item (its summary encrypted), and the pass's usage."""
    output: list[dict[str, Any]] = [
        {"id": f"msg_{i}", "type": "message", "role": "user", "content": [{"type": "input_text", "text": u}]}
        for i, u in enumerate(users)
    ]
    output.append({"id": "cmp_1", "type": "compaction", "encrypted_content": summary})
    usage = {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": output_tokens}
    usage |= {"output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 120 + output_tokens}
    body = {"id": "resp_001", "object": "response.compaction", "created_at": 1764967971, "output": output, "usage": usage}
    return [json.dumps(body).encode()]


def test_a_compaction_is_a_generation_request_and_its_answer_is_read() -> None:
    record = {
        "path": _PATH,
        "request_body": json.dumps(_ASK).encode(),
        "response_headers": [["content-type", "application/json"]],
        "chunks": _compacted(_USER["content"]),
    }
    asked = read_request(record)
    assert asked.api == "responses" and asked.generation and asked.model == "gpt-5.1-codex-max"
    out = read_response(record)
    assert out.readable and out.error is None and out.error_message is None
    assert (out.prompt_tokens, out.output_tokens) == (120, 40)
    assert out.text == ""  # the user's messages it restates are not the model's words
    assert [json.loads(o)["type"] for o in out.others] == ["message", "compaction"]


def test_compactions_are_compared(tmp_path: Path) -> None:
    """A compaction that kept another user message differs; the same one (its summary encrypted
    anew, its ids new) matches."""
    ask = (_PATH, _ASK, "application/json")
    pairs = {
        "kept users": (ask, _compacted(_USER["content"]), _compacted("something else")),
        "same": (ask, _compacted(_USER["content"]), _compacted(_USER["content"], summary="gAAAA-two")),
    }
    a, b = pair_captures(tmp_path, pairs)
    d = compare(a, b, top=2)["divergence"]
    assert d["pairs"] == 2 and sum(r["read_both"] for r in d["readable"].values()) == 2, d
    assert [p["path"] for p in d["most_divergent"]] == [_PATH] and d["exact_match_rate"] == 0.5, d


def test_compactions_are_in_the_workload_identity(tmp_path: Path) -> None:
    def run(name: str, text: str) -> str:
        cap = tmp_path / name
        write_capture(
            cap, [{"path": _PATH, "body": {**_ASK, "input": [{"role": "user", "content": text}]}, "chunks": _compacted(text)}]
        )
        identity = workload_identity(cap)
        assert identity.requests == 1
        return identity.workload

    assert run("a", "one") == run("b", "one")
    assert run("c", "one") != run("d", "two")
