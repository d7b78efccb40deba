"""The recording proxy in front of the real engine, driven by the official openai SDK and raw httpx."""

from __future__ import annotations

import json

import httpx
import pytest
from openai import OpenAI

from infertap.capture.info import summarize
from infertap.launch import SMOLLM2_ALIAS
from tests.helpers import decompressed_bytes

pytestmark = pytest.mark.engine

SECRET = "sk-test-secret-0123456789"


def _sse_data(body: bytes) -> list[str]:
    return [line[6:] for line in body.decode().split("\n") if line.startswith("data: ")]


@pytest.fixture
def session(engine, record):
    rec = record(engine.url, "--label", "gpu=none", "--label", "purpose=test")
    client = OpenAI(base_url=f"{rec.url}/v1", api_key=SECRET, max_retries=0, timeout=120)
    return rec, client


def test_openai_sdk_through_the_proxy_is_recorded_exactly_once_each(session):
    rec, client = session
    chat = client.chat.completions.create(
        model=SMOLLM2_ALIAS,
        messages=[{"role": "user", "content": "What is 2 + 2?"}],
        max_tokens=16,
        temperature=0,
        user="u-chat",
    )
    assert chat.choices[0].message.content
    stream = client.chat.completions.create(
        model=SMOLLM2_ALIAS,
        messages=[{"role": "user", "content": "Count to five."}],
        max_tokens=16,
        temperature=0,
        stream=True,
        user="u-chat-stream",
    )
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert streamed
    comp = client.completions.create(model=SMOLLM2_ALIAS, prompt="One, two,", max_tokens=8, temperature=0, user="u-comp")
    assert comp.choices[0].text
    comp_stream = client.completions.create(
        model=SMOLLM2_ALIAS, prompt="Red, green,", max_tokens=8, temperature=0, stream=True, user="u-comp-stream"
    )
    assert "".join(c.choices[0].text for c in comp_stream)
    assert rec.stop() == 0

    exchanges = rec.exchanges()
    by_user = {json.loads(x["request_body"])["user"]: x for x in exchanges}
    assert sorted(by_user) == ["u-chat", "u-chat-stream", "u-comp", "u-comp-stream"]
    assert len(exchanges) == 4
    for x in exchanges:
        assert x["status"] == 200 and x["end"] == "complete" and x["error"] is None, (
            x["path"],
            x["error"],
            x["response_headers"],
        )
        assert x["chunk_ns"] == sorted(x["chunk_ns"]) and x["headers_ns"] <= x["chunk_ns"][0] <= x["end_ns"]
        assert dict((n.lower(), v) for n, v in x["request_headers"])["authorization"] == "Bearer [REDACTED]"

    # Non-streamed: the recorded body is the JSON the SDK parsed.
    recorded_chat = json.loads(b"".join(by_user["u-chat"]["chunks"]))
    assert recorded_chat["choices"][0]["message"]["content"] == chat.choices[0].message.content
    assert recorded_chat["usage"]["completion_tokens"] == chat.usage.completion_tokens

    # Streamed: the recorded SSE events carry exactly the text the SDK assembled, then [DONE].
    events = _sse_data(b"".join(by_user["u-chat-stream"]["chunks"]))
    assert events[-1] == "[DONE]"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in map(json.loads, events[:-1]) if c["choices"])
    assert text == streamed
    assert len(by_user["u-chat-stream"]["chunks"]) > 1, "a streamed response must be recorded chunk by chunk"

    assert SECRET.encode() not in decompressed_bytes(rec.out)
    info = summarize(rec.out)
    assert info["closed_cleanly"] and info["exchanges"] == 4
    assert info["labels"] == {"gpu": "none", "purpose": "test"}
    assert info["models"] == {SMOLLM2_ALIAS: 4}


def test_bytes_the_client_received_equal_the_bytes_in_the_capture(engine, record):
    rec = record(engine.url)
    body = {
        "model": SMOLLM2_ALIAS,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 12,
        "temperature": 0,
        "stream": True,
    }
    received: list[tuple[int, bytes]] = []
    with httpx.Client(timeout=120) as client:
        with client.stream("POST", f"{rec.url}/v1/chat/completions", json=body) as r:
            for chunk in r.iter_raw():
                received.append((len(received), chunk))
        plain = client.post(f"{rec.url}/v1/chat/completions", json=dict(body, stream=False))
        models = client.get(f"{rec.url}/v1/models")
    rec.stop()
    streamed_x, plain_x, models_x = rec.exchanges()
    assert b"".join(c for _, c in received) == b"".join(streamed_x["chunks"])
    assert plain.content == b"".join(plain_x["chunks"])
    assert models.content == b"".join(models_x["chunks"])
    assert json.loads(streamed_x["request_body"]) == body
    headers = {n.lower(): v for n, v in streamed_x["response_headers"]}
    assert headers["content-type"].startswith("text/event-stream")
    assert r.headers["content-type"] == headers["content-type"]


def test_proxied_answer_equals_the_direct_answer(engine, record):
    """Recording must not change what the engine computes: same request, same greedy answer."""
    rec = record(engine.url)
    body = {
        "model": SMOLLM2_ALIAS,
        "messages": [{"role": "user", "content": "What is 17 + 25?"}],
        "max_tokens": 24,
        "temperature": 0,
    }
    direct = httpx.post(f"{engine.url}/v1/chat/completions", json=body, timeout=120).json()
    proxied = httpx.post(f"{rec.url}/v1/chat/completions", json=body, timeout=120).json()
    assert proxied["choices"][0]["message"]["content"] == direct["choices"][0]["message"]["content"]
    assert proxied["usage"] == direct["usage"]
