"""The agent APIs through the recorder in front of the real llama-server, driven by their own SDKs
(anthropic's Messages, openai's Responses, beside chat and completions): every answer read as the
client read it, every ok exchange with ttft and usage, compare seeing a changed replay and matching
an unchanged one, and conversations replayed in order at concurrency 4."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic
from openai import OpenAI

from infertap.analysis import Analysis
from infertap.analysis.compare import compare
from infertap.apis import read_response
from infertap.capture.reader import CaptureReader
from infertap.launch import SMOLLM2_ALIAS, Process, llama_server, recorder
from infertap.replay import ReplayConfig, Schedule, Transforms, run_replay
from infertap.replay.workload import load

pytestmark = pytest.mark.engine

M = SMOLLM2_ALIAS
FOLLOW_UP = "And what is that times two?"


def _clients(url: str) -> tuple[OpenAI, Anthropic]:
    return (
        OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0, timeout=120),
        Anthropic(base_url=url, api_key="sk-ant-test", max_retries=0, timeout=120),
    )


def _chat(client: OpenAI, question: str, stream: bool) -> list[tuple[str, str]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    seen = []
    for _ in range(2):
        if stream:
            text = "".join(
                c.choices[0].delta.content or ""
                for c in client.chat.completions.create(
                    model=M, messages=messages, max_tokens=24, temperature=0, stream=True, stream_options={"include_usage": True}
                )
                if c.choices
            )
        else:
            text = (
                client.chat.completions.create(model=M, messages=messages, max_tokens=24, temperature=0)
                .choices[0]
                .message.content
                or ""
            )
        seen.append(("chat", text))
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": FOLLOW_UP}]
    return seen


def _responses(client: OpenAI, question: str, stream: bool) -> list[tuple[str, str]]:
    history: list[Any] = [{"role": "user", "content": question}]
    seen = []
    for _ in range(2):
        if stream:
            # Raw events: the SDK's stream accumulator needs output_index, which llama-server's events lack.
            events = list(client.responses.create(model=M, input=history, max_output_tokens=24, temperature=0, stream=True))
            text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
            final = next(e.response for e in events if e.type == "response.completed")
        else:
            final = client.responses.create(model=M, input=history, max_output_tokens=24, temperature=0)
            text = final.output_text
        assert text == final.output_text
        seen.append(("responses", text))
        history += [item.model_dump(exclude_none=True) for item in final.output] + [{"role": "user", "content": FOLLOW_UP}]
    return seen


def _messages(client: Anthropic, question: str, stream: bool) -> list[tuple[str, str]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    seen = []
    for _ in range(2):
        # The SDK no longer takes temperature as an argument; the body still carries it.
        kwargs: dict[str, Any] = {
            "model": M,
            "max_tokens": 24,
            "system": "Answer briefly.",
            "messages": messages,
            "extra_body": {"temperature": 0},
        }
        if stream:
            with client.messages.stream(**kwargs) as events:
                text = "".join(events.text_stream)
                final = events.get_final_message()
        else:
            final = client.messages.create(**kwargs)
            text = "".join(b.text for b in final.content if b.type == "text")
        seen.append(("messages", text))
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in final.content]},
            {"role": "user", "content": FOLLOW_UP},
        ]
    return seen


def _completions(client: OpenAI, prompt: str, stream: bool) -> list[tuple[str, str]]:
    if stream:
        text = "".join(
            c.choices[0].text
            for c in client.completions.create(model=M, prompt=prompt, max_tokens=16, temperature=0, stream=True)
        )
    else:
        text = client.completions.create(model=M, prompt=prompt, max_tokens=16, temperature=0).choices[0].text
    return [("completions", text)]


@pytest.fixture(scope="module")
def steady_engine(tmp_path_factory) -> Iterator[Process]:
    """llama-server that computes every request from scratch in one slot. With its defaults (prompt
    cache, 4 slots) a greedy answer can change between two runs of the same request, as the cached
    prefix and the batch change the arithmetic: seen here on 2 of 14 requests. Not what this tests."""
    with llama_server(extra_args=["--no-cache-prompt", "--parallel", "1"], log_dir=tmp_path_factory.mktemp("steady")) as proc:
        yield proc


@pytest.fixture(scope="module")
def agent_capture(steady_engine, tmp_path_factory) -> tuple[Path, list[tuple[str, str]]]:
    """Two-turn conversations over chat, Responses and Messages, streamed and not, plus completions,
    one request at a time, with what each SDK delivered, in order."""
    out = tmp_path_factory.mktemp("agents") / "cap"
    with recorder(steady_engine.url, out) as rec:
        openai_client, anthropic_client = _clients(rec.url)
        seen: list[tuple[str, str]] = []
        for stream in (False, True):
            seen += _chat(openai_client, "What is 2 + 3?", stream)
            seen += _responses(openai_client, "What is 4 + 4?", stream)
            seen += _messages(anthropic_client, "What is 5 + 1?", stream)
            seen += _completions(openai_client, "One, two, three,", stream)
        assert rec.stop() == 0
    return out, seen


def test_every_api_is_read_as_its_client_read_it(agent_capture, tmp_path):
    out, seen = agent_capture
    exchanges = sorted((x for x in CaptureReader(out).exchanges() if x["method"] == "POST"), key=lambda x: x["seq"])
    assert len(exchanges) == len(seen) == 14
    for x, (api, text) in zip(exchanges, seen, strict=True):
        read = read_response(x)
        assert (x["status"], read.api, read.readable, read.error) == (200, api, True, None), x["path"]
        assert read.text == text and text, (api, read.text, text)
        assert read.finish_reason in ("stop", "length") and read.output_tokens and read.prompt_tokens, (api, read.usage)
    with Analysis([out], cache_dir=tmp_path / "cache") as a:
        rows = a.query(
            "SELECT api, streamed, ok, ttft_ns, output_tokens_source, prompt_tokens, finish_reason, readable "
            "FROM metrics WHERE generation ORDER BY seq"
        ).records()
        per_api = dict(a.query("SELECT api, count(*) FROM requests WHERE generation GROUP BY api").rows)
    assert per_api == {"chat": 4, "responses": 4, "messages": 4, "completions": 2}
    for row in rows:  # ttft and the engine's own usage on every ok exchange, streamed or not
        assert row["ok"] and row["readable"] and row["ttft_ns"] is not None, row
        assert row["output_tokens_source"] == "usage" and row["prompt_tokens"] and row["finish_reason"] in ("stop", "length"), row
    assert sum(r["streamed"] for r in rows) == 7


def test_second_turns_continue_their_first_turn_in_every_api(agent_capture):
    out, _ = agent_capture
    items, _ = load(out)
    paths = [item.path for item in items]
    for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages"):
        turns = [i for i, p in enumerate(paths) if p == path]
        assert [items[i].parent for i in turns] == [None, turns[0], None, turns[2]], path


@pytest.mark.timeout(600)  # two replays of the 14 requests, one at a time
def test_a_replay_that_changes_the_answers_is_seen_and_one_that_does_not_matches(agent_capture, steady_engine, tmp_path):
    out, _ = agent_capture
    run_replay(
        ReplayConfig(
            out, steady_engine.url, tmp_path / "same", schedule=Schedule("concurrency", concurrency=1), probe=False, enrich=False
        )
    )
    same = compare(out, tmp_path / "same")["divergence"]
    assert same["exact_match_rate"] == 1.0 and same["similarity_mean"] == 1.0, same["most_divergent"]
    assert all(r["read_both"] == r["pairs"] for r in same["readable"].values())

    # No seed: Anthropic's Messages reads none (nor llama-server's), and a --set of it is refused there.
    hot = Transforms(set_values=[("temperature", 1.8)])
    run_replay(
        ReplayConfig(
            out,
            steady_engine.url,
            tmp_path / "hot",
            schedule=Schedule("concurrency", concurrency=1),
            transforms=hot,
            probe=False,
            enrich=False,
        )
    )
    changed = compare(out, tmp_path / "hot", top=100)["divergence"]
    assert changed["exact_match_rate"] < 0.5 and changed["similarity_mean"] < 0.9
    assert changed["counts"].get("unreadable", 0) == 0
    different = changed["most_divergent"]  # every pair that is not an exact match
    assert {item["api"][0] for item in different} >= {"messages", "responses", "chat"}
    assert all(item["text"][0] != item["text"][1] for item in different)


def test_conversations_keep_their_order_at_concurrency_4(agent_capture, llama_server_engine, tmp_path):
    out, _ = agent_capture
    run_replay(
        ReplayConfig(
            out,
            llama_server_engine.url,
            tmp_path / "c4",
            schedule=Schedule("concurrency", concurrency=4),
            probe=False,
            enrich=False,
        )
    )
    source = {x["id"]: x for x in CaptureReader(out).exchanges()}
    items = {item.source_id: item for item in load(out)[0]}
    replayed = {x["source_id"]: x for x in CaptureReader(tmp_path / "c4").exchanges()}
    by_index = {item.index: item.source_id for item in items.values()}
    checked = 0
    for sid, item in items.items():
        if item.parent is None:
            continue
        turn, parent = replayed[sid], replayed[by_index[item.parent]]
        assert turn["sent_ns"] >= parent["sent_ns"] + parent["end_ns"], source[sid]["path"]
        checked += 1
    assert checked == 6
    # a turn takes a slot only once its parent has ended: none held one waiting (the sessions beside it went on)
    assert all(x["dep_wait_ns"] == 0 for x in replayed.values())
