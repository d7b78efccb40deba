"""Amazon Bedrock's Converse API (``/model/{modelId}/converse``), shaped as AWS documents it: its
body holds ``messages`` as chat's does, and was read as chat (no sampling settings, no tools, its
answer in no API's shape). It is read as itself now (``/converse-stream``: test_converse_stream.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.analysis.compare import compare
from infertap.apis import read_request, read_response
from tests.helpers import pair_captures

_JSON = "application/json"
_PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
_BODY = {
    "messages": [{"role": "user", "content": [{"text": "What is 17 + 25?"}]}],
    "system": [{"text": "Answer briefly."}],
    "inferenceConfig": {"maxTokens": 64, "temperature": 0, "topP": 0.9, "stopSequences": ["\n\n"]},
    "toolConfig": {"tools": [{"toolSpec": {"name": "calc", "inputSchema": {"json": {"type": "object"}}}}]},
}


def _answer(*blocks: dict[str, Any], stop: str = "end_turn", latency: int = 120) -> list[bytes]:
    """Converse's answer: the message's blocks, why it stopped, its usage and (new on every run) its latency."""
    said = {
        "output": {"message": {"role": "assistant", "content": list(blocks)}},
        "stopReason": stop,
        "usage": {"inputTokens": 21, "outputTokens": 7, "totalTokens": 28},
        "metrics": {"latencyMs": latency},
    }
    return [json.dumps(said).encode()]


def _record(path: str, chunks: list[bytes], ctype: str = _JSON) -> dict[str, Any]:
    return {
        "path": path,
        "request_body": json.dumps(_BODY).encode(),
        "request_headers": [["content-type", _JSON]],
        "response_headers": [["content-type", ctype]],
        "chunks": chunks,
    }


def test_a_converse_request_and_its_answer_are_read_as_converse() -> None:
    call = {"toolUse": {"toolUseId": "tooluse_1", "name": "calc", "input": {"a": 17, "b": 25}}}
    record = _record(_PATH, _answer({"text": "Let me add."}, call, stop="tool_use"))
    asked = read_request(record)
    assert (asked.api, asked.generation, asked.stream) == ("bedrock-converse", True, False)
    assert asked.system == "Answer briefly." and asked.turns[-1].text == "What is 17 + 25?"
    assert asked.tools == ("calc",) and asked.max_tokens == 64 and asked.model == "anthropic.claude-3-haiku-20240307-v1:0"
    assert asked.sampling == {"max_tokens": 64, "temperature": 0, "top_p": 0.9, "stop": ["\n\n"]}
    out = read_response(record)
    assert out.readable and out.error is None and out.text == "Let me add."
    assert [(c["name"], json.loads(c["arguments"])) for c in out.tool_calls] == [("calc", {"a": 17, "b": 25})]
    assert out.finish_reason == "tool_calls" and (out.prompt_tokens, out.output_tokens) == (21, 7)
    assert out.timings == {"latencyMs": 120}  # Bedrock's own time of the request: server_total_ns


_WHOLE = (_PATH, _BODY, _JSON)


def test_converse_answers_that_differ_differ_and_the_same_match(tmp_path: Path) -> None:
    differ = {
        "text": (_WHOLE, _answer({"text": "42"}), _answer({"text": "43"})),
        "stop": (_WHOLE, _answer({"text": "42"}), _answer({"text": "42"}, stop="max_tokens")),
    }
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=2)["divergence"]
    assert d["counts"].get("exact", 0) == 0 and d["counts"]["finish_reason_changed"] == 1, d["counts"]
    assert sum(r["read_both"] for r in d["readable"].values()) == 2
    same = {"text": (_WHOLE, _answer({"text": "42"}), _answer({"text": "42"}, latency=300))}  # its latency new on every run
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=1)["divergence"]
    assert d["exact_match_rate"] == 1 and sum(r["read_both"] for r in d["readable"].values()) == 1


def test_whole_answers_differing_in_a_source_cited_a_block_s_place_or_an_unread_block_differ(tmp_path: Path) -> None:
    """Text citing its sources comes as ``citationsContent`` (its text in ``content``, its sources in
    ``citations``): that text is the answer's, not nothing; two answers differing in a source, in the
    order of their blocks, or in a block of a type not read (an image) are not one answer."""
    source = {"title": "Q3 report", "sourceContent": [{"text": "revenue grew 4%"}], "location": {"documentPage": {"start": 2}}}

    def cites(text: str, *sources: dict[str, Any]) -> dict[str, Any]:
        return {"citationsContent": {"content": [{"text": text}], "citations": list(sources)}}

    call = {"toolUse": {"toolUseId": "tooluse_1", "name": "calc", "input": {"a": 17, "b": 25}}}
    image = {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgoA"}}}
    out = read_response(_record(_PATH, _answer({"text": "Per the report: "}, cites("it grew.", source), call, image)))
    assert out.text == "Per the report: it grew." and len(out.citations) == 1 and "Q3 report" in out.citations[0]
    assert out.layout == ["text:16", "text:8+1", "toolUse", "image"] and len(out.others) == 1
    redacted = {"reasoningContent": {"redactedContent": "c2VjcmV0"}}
    assert read_response(_record(_PATH, _answer(redacted, {"text": "4"}))).encrypted_reasoning == 1
    moved = {**source, "location": {"documentPage": {"start": 7}}}
    differ = {
        "cited": (_WHOLE, _answer(cites("It grew.", source)), _answer(cites("It grew.", moved))),
        "uncited": (_WHOLE, _answer(cites("It grew.", source)), _answer({"text": "It grew."})),
        "order": (_WHOLE, _answer({"text": "Adding."}, call), _answer(call, {"text": "Adding."})),
        "image": (_WHOLE, _answer(image), _answer({"image": {"format": "png", "source": {"bytes": "iVBORw0KGgoB"}}})),
    }
    a, b = pair_captures(tmp_path / "differ", differ)
    d = compare(a, b, top=len(differ))["divergence"]
    assert d["counts"].get("exact", 0) == 0, d["counts"]
    assert sum(r["read_both"] for r in d["readable"].values()) == len(differ)
    same = {
        name: (_WHOLE, sides[0], _answer(*json.loads(sides[0][0])["output"]["message"]["content"], latency=7))
        for name, (_, *sides) in differ.items()
    }
    a, b = pair_captures(tmp_path / "same", same)
    d = compare(a, b, top=len(same))["divergence"]
    assert d["exact_match_rate"] == 1 and sum(r["read_both"] for r in d["readable"].values()) == len(same)


def test_whole_answers_served_otherwise_are_said_to_differ_in_config_and_the_same_match(tmp_path: Path) -> None:
    """A whole answer's ``trace``, ``performanceConfig`` and other ``additionalModelResponseFields``
    are how it was served: another tier differs (in config, not in words); the same, its guardrail's
    processing latency new on every request, matches."""

    def served(tier: str, latency: int = 9) -> list[bytes]:
        said = json.loads(_answer({"text": "42"})[0])
        guard = {"invocationMetrics": {"guardrailProcessingLatency": latency}, "actionReason": "No action."}
        more = {"performanceConfig": {"latency": tier}, "trace": {"guardrail": guard}}
        return [json.dumps({**said, **more, "additionalModelResponseFields": {"stop_sequence": None}}).encode()]

    for name, b_tier, differ in (("differ", "optimized", 1), ("same", "standard", 0)):
        a, b = pair_captures(tmp_path / name, {"x": (_WHOLE, served("standard"), served(b_tier, latency=31))})
        result = compare(a, b, top=1)
        assert result["config"]["served"] == {"a": 1, "b": 1, "pairs_differ": differ}, (name, result["config"]["served"])
        assert result["divergence"]["exact_match_rate"] == 1
