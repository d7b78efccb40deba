"""Run-level statistics and the workload profile, on captures built so each expected value is known."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests import sdk_shapes
from tests.extras import needs

needs("hypothesis", "dev")
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from infertap.analysis import Analysis, AnalysisError, speed_stats
from infertap.analysis.prefix import PrefixIndex, common_prefix, longest_earlier_prefixes
from infertap.cli import cli
from tests.analysis_builders import JSON_HEADERS, body, enrichment, event, exchange, sse, write_capture


def stats_of(tmp_path: Path, records: list[dict[str, Any]], by: tuple[str, ...] = ("run",)) -> dict[str, Any]:
    path = write_capture(tmp_path / "cap", records)
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        return speed_stats(a, by)


def quantile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics, by hand."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo)


def usage_chunks(t_first: float, t_last: float, completion: int, prompt: int = 10, **usage: Any) -> list[tuple[float, bytes]]:
    u = {"prompt_tokens": prompt, "completion_tokens": completion, **usage}
    # A whole answer, as every engine ends one: its finish reason, then the usage chunk.
    return [(t_first, sse(event("a"))), (t_last, sse(event("b", finish="stop"), event(choices=False, usage=u)))]


def test_throughput_and_achieved_concurrency(tmp_path: Path) -> None:
    # A [0, 100] ms, B [50, 150] ms, C [150, 250] ms: C is sent the instant B ends (no overlap).
    [g] = stats_of(
        tmp_path,
        [
            exchange("A", sent_ms=0, end_ms=100, chunks=usage_chunks(10, 90, 5)),
            exchange("B", sent_ms=50, end_ms=100, chunks=usage_chunks(10, 90, 7)),
            exchange("C", sent_ms=150, end_ms=100, chunks=usage_chunks(10, 90, 9)),
            exchange(
                "models",
                sent_ms=200,
                end_ms=1,
                request=b"",
                headers=JSON_HEADERS,
                chunks=[(1, b'{"data": []}')],
                method="GET",
                path="/v1/models",
            ),  # not a generation request
        ],
    )["groups"]
    assert (g["requests"], g["ok"], g["errors"], g["error_rate"]) == (3, 3, 0, 0.0)
    assert g["span_s"] == pytest.approx(0.250)
    assert g["throughput"]["requests_per_s"] == pytest.approx(3 / 0.250)
    assert g["throughput"]["output_tokens_per_s"] == pytest.approx((5 + 7 + 9) / 0.250)
    assert g["concurrency"]["mean"] == pytest.approx((0.1 + 0.1 + 0.1) / 0.250)
    assert g["concurrency"]["max"] == 2
    assert g["output_tokens_source"] == {"usage": 3}
    assert g["key"]["recorder"] == "proxy" and g["key"]["capture"] == str((tmp_path / "cap").resolve())


def test_percentiles_error_rate_and_pooled_itl(tmp_path: Path) -> None:
    ttfts = [10, 20, 30, 40, 50]
    records = [
        exchange(
            f"x{i}",
            sent_ms=1000 * i,
            end_ms=t + 40,
            chunks=[(5, sse(event(role="assistant"))), (t, sse(event("a"))), (t + 10 * (i + 1), sse(event("b", finish="stop")))],
        )
        for i, t in enumerate(ttfts)
    ]
    records += [
        exchange("refused", sent_ms=6000, end="upstream_error", status=None, end_ms=2, chunks=[]),
        exchange("http500", sent_ms=7000, status=500, headers=JSON_HEADERS, chunks=[(3, b'{"error": "overloaded"}')]),
    ]
    [g] = stats_of(tmp_path, records)["groups"]
    ttft = g["metrics"]["ttft"]
    assert ttft["n"] == 5
    for p in (50, 90, 99):
        assert ttft[f"p{p}"] == pytest.approx(quantile(ttfts, p / 100))
    assert ttft["mean"] == pytest.approx(30.0)
    assert g["metrics"]["t_first_byte"]["p50"] == pytest.approx(5.0)
    assert g["metrics"]["e2e"]["p50"] == pytest.approx(quantile([t + 40 for t in ttfts], 0.5))
    gaps = [10.0 * (i + 1) for i in range(5)]  # one gap per exchange, pooled
    assert g["metrics"]["itl"]["n"] == 5 and g["metrics"]["itl"]["p90"] == pytest.approx(quantile(gaps, 0.9))
    assert g["metrics"]["tpot"]["mean"] == pytest.approx(sum(gaps) / 5)  # 2 tokens each: tpot = the one gap
    assert (g["requests"], g["ok"], g["errors"]) == (7, 5, 2)
    assert g["error_rate"] == pytest.approx(2 / 7)
    assert g["tokens_per_chunk"] == pytest.approx(1.0)


def test_grouping_by_model_path_and_both(tmp_path: Path) -> None:
    records = [
        exchange("a1", sent_ms=0, request=body(model="alpha"), chunks=usage_chunks(10, 20, 2)),
        exchange("a2", sent_ms=100, request=body(model="alpha"), chunks=usage_chunks(10, 20, 2), path="/v1/completions"),
        exchange("b1", sent_ms=200, request=body(model="beta"), chunks=usage_chunks(30, 40, 2)),
    ]
    path = write_capture(tmp_path / "cap", records)
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        by_model = {g["key"]["model"]: g for g in speed_stats(a, ["model"])["groups"]}
        by_path = {g["key"]["path"]: g["requests"] for g in speed_stats(a, ["path"])["groups"]}
        both = [
            (g["key"]["run"] is not None, g["key"]["model"], g["requests"]) for g in speed_stats(a, ["run", "model"])["groups"]
        ]
        with pytest.raises(AnalysisError, match="choose from"):
            speed_stats(a, ["colour"])
    assert {m: g["requests"] for m, g in by_model.items()} == {"alpha": 2, "beta": 1}
    assert by_model["beta"]["metrics"]["ttft"]["p50"] == pytest.approx(30.0)
    assert by_path == {"POST /v1/chat/completions": 2, "POST /v1/completions": 1}
    assert both == [(True, "alpha", 2), (True, "beta", 1)]


def test_workload_volumes_and_cached_share(tmp_path: Path) -> None:
    [g] = stats_of(
        tmp_path,
        [
            exchange("a", sent_ms=0, chunks=usage_chunks(1, 2, 10, prompt=100, prompt_tokens_details={"cached_tokens": 0})),
            exchange("b", sent_ms=10, chunks=usage_chunks(1, 2, 20, prompt=100, prompt_tokens_details={"cached_tokens": 80})),
            exchange("c", sent_ms=20, chunks=usage_chunks(1, 2, 30, prompt=50)),  # no cache information
        ],
    )["groups"]
    w = g["workload"]
    assert w["prompt_tokens"] == {"total": 250, "known": 3, "known_ok": 3, "source": {"usage": 3}}
    assert w["output_tokens"] == {"total": 60, "known": 3, "by_source": {"usage": 60}}
    assert w["output_per_prompt"] == pytest.approx(60 / 250)
    assert w["cached_tokens"]["share"] == pytest.approx(80 / 200)  # over the requests that reported it
    assert (w["cached_tokens"]["total"], w["cached_tokens"]["known"], w["cached_tokens"]["source"]) == (80, 2, {"usage": 2})


PREFIX = b'{"model": "m", "messages": [{"role": "user", "content": "'


def _raw(text: str) -> bytes:
    return PREFIX + text.encode() + b'"}]}'


def test_prefix_reuse_in_bytes_against_any_earlier_request(tmp_path: Path) -> None:
    # Written in this order, sent in another: "earlier" is by send time.
    texts = {"p2": ("abcxyz", 20), "p0": ("abcdef", 0), "p3": ("zzz", 30), "p1": ("abcdefgh", 10)}
    records = [exchange(x, sent_ms=t, request=_raw(text), chunks=usage_chunks(1, 2, 2)) for x, (text, t) in texts.items()]
    path = write_capture(tmp_path / "cap", records)
    n = len(PREFIX)
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        rows = dict(a.query("SELECT exchange_id, prefix_shared FROM metrics WHERE prefix_unit = 'bytes'").rows)
        [g] = speed_stats(a)["groups"]
    # p0 is first; p1 extends p0 ('abcdef' + '"}]}' is not a prefix of 'abcdefgh"}]}'); p2 shares 'abc'; p3 only PREFIX.
    assert rows == {"p0": 0, "p1": n + 6, "p2": n + 3, "p3": n}
    [reuse] = g["workload"]["prefix_reuse"]
    total = sum(len(_raw(t)) for t, _ in texts.values())
    assert (reuse["unit"], reuse["shared"], reuse["length"]) == ("bytes", 3 * n + 9, total)
    assert reuse["share"] == pytest.approx((3 * n + 9) / total)


def test_prefix_reuse_of_interleaved_agents_is_the_bodies_own(tmp_path: Path) -> None:
    """Agents sharing a long system prompt, their turns interleaved (the prefix index's blocks are
    512 bytes: each conversation goes on from where its own last request went, another's went last
    from the shared part): each request's reuse is what its body shares with any earlier body."""
    rng = random.Random(5)
    system = "".join(rng.choices("abcdefgh ", k=1500))
    conversations = [[{"role": "system", "content": system}] for _ in range(3)]
    bodies: list[bytes] = []
    for turn in range(5):
        for c in conversations:
            c.append({"role": "user" if turn % 2 == 0 else "assistant", "content": "".join(rng.choices("xyz ", k=700))})
            bodies.append(json.dumps({"model": "m", "messages": c}).encode())
    records = [exchange(f"a{i}", sent_ms=10 * i, request=body, chunks=usage_chunks(1, 2, 2)) for i, body in enumerate(bodies)]
    path = write_capture(tmp_path / "cap", records)
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        rows = dict(a.query("SELECT exchange_id, prefix_shared FROM metrics WHERE prefix_unit = 'bytes'").rows)
    expected = longest_earlier_prefixes(bodies)
    assert rows == {f"a{i}": shared for i, shared in enumerate(expected)}
    assert len(set(expected)) > 5 and expected[1] > 1500  # shared in many lengths, the system prompt's at least


def test_prefix_reuse_in_tokens_where_enrichment_has_ids(tmp_path: Path) -> None:
    ids = {"t0": [1, 2, 3, 4], "t1": [1, 2, 3, 9], "t2": [1, 2, 3, 4, 5], "t3": [7]}
    records = [exchange(x, sent_ms=10 * i, chunks=usage_chunks(1, 2, 2)) for i, x in enumerate(ids)]
    records += [enrichment(x, prompt_ids=v) for x, v in ids.items()]
    [g] = stats_of(tmp_path, records)["groups"]
    [reuse] = g["workload"]["prefix_reuse"]
    assert (reuse["unit"], reuse["shared"], reuse["length"]) == ("tokens", 0 + 3 + 4 + 0, 4 + 4 + 5 + 1)
    assert reuse["mean"] == pytest.approx(7 / 4)


def test_prefix_reuse_falls_back_to_bytes_when_a_request_lacks_ids(tmp_path: Path) -> None:
    records = [exchange(x, sent_ms=10 * i, request=_raw(x), chunks=usage_chunks(1, 2, 2)) for i, x in enumerate(["u0", "u1"])]
    records.append(enrichment("u0", prompt_ids=[1, 2]))
    [g] = stats_of(tmp_path, records)["groups"]
    assert [r["unit"] for r in g["workload"]["prefix_reuse"]] == ["bytes"]
    assert g["workload"]["prefix_reuse"][0]["shared"] == len(PREFIX) + 1  # "u0" / "u1"


def test_an_empty_capture_has_no_groups(tmp_path: Path) -> None:
    result = stats_of(tmp_path, [])
    assert result["groups"] == [] and result["captures"][0]["closed_cleanly"] is True


@given(st.lists(st.lists(st.integers(0, 3), max_size=6), max_size=25))
def test_longest_earlier_prefix_equals_brute_force(items: list[list[int]]) -> None:
    expected = [max((common_prefix(s, t) for t in items[:i]), default=0) for i, s in enumerate(items)]
    assert longest_earlier_prefixes(items) == expected
    as_bytes = [bytes(s) for s in items]
    assert longest_earlier_prefixes(as_bytes) == expected


@given(
    st.lists(st.binary(max_size=12).map(lambda b: bytes(x % 3 for x in b)), max_size=25),
    st.integers(1, 5),
    st.randoms(use_true_random=False),
)
def test_the_prefix_index_gives_what_the_strings_themselves_give(items: list[bytes], block: int, rng: random.Random) -> None:
    """Kept as trie nodes and tails, in any block size, sent in any order (some more than once):
    the same longest earlier prefixes as the strings in memory (small alphabet: long shared prefixes)."""
    index = PrefixIndex(block)
    numbers = [index.add(x) for x in items]
    assert [index.length(n) for n in numbers] == [len(x) for x in items]
    order = numbers + rng.sample(numbers, min(3, len(numbers)))  # a string sent again
    rng.shuffle(order)
    assert index.longest_earlier(order) == longest_earlier_prefixes([items[n] for n in order])


def test_the_prefix_index_keeps_a_shared_conversation_once() -> None:
    # 200 turns of one conversation, each request the whole of it so far: ~2 MB as strings.
    turns = [random.Random(t).randbytes(100) for t in range(200)]
    requests = [b"".join(turns[: t + 1]) for t in range(200)]
    index = PrefixIndex(64)
    order = [index.add(r) for r in requests]
    assert index.longest_earlier(order) == [0] + [100 * t for t in range(1, 200)]
    kept = sum(map(len, index._blocks)) + sum(map(len, index._tails))
    assert sum(map(len, requests)) > 50 * kept and kept < 2 * len(requests[-1])  # ~77x less here
    with pytest.raises(ValueError, match="at least 1"):
        PrefixIndex(0)


class _CountedGets(dict[Any, Any]):
    """A trie's dict that counts its lookups."""

    gets = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.gets += 1
        return super().get(key, default)


def test_the_prefix_index_hashes_a_block_only_where_a_request_leaves_its_last_path() -> None:
    """Agents interleaved, each request its conversation so far: a block that continues the path the
    last request through its node took is compared, not looked up in the trie (a hash of the block),
    and the answers are the strings' own."""
    rng = random.Random(3)
    system = rng.randbytes(256)  # shared by every session: four blocks
    sessions = [[system + rng.randbytes(64)] for _ in range(3)]
    requests = []
    for _ in range(6):
        for s in sessions:
            s.append(s[-1] + rng.randbytes(64))
            requests.append(s[-1])
    index = PrefixIndex(64)
    index._nodes = nodes = _CountedGets()
    order = [index.add(r) for r in requests]
    assert index.longest_earlier(order) == longest_earlier_prefixes(requests)
    assert sum(len(r) // 64 for r in requests) == 153  # a lookup each before
    # Looked up: the first request's six blocks; then, of each request, its session's first block
    # of its own (another session went last from the system prompt) and the block it adds.
    assert nodes.gets == 6 + 2 * (len(requests) - 1)


def test_common_prefix_of_long_sequences() -> None:
    rng = random.Random(7)
    a = bytes(rng.randrange(256) for _ in range(10_000))
    for cut in (0, 1, 4095, 9999):
        b = a[:cut] + bytes([a[cut] ^ 1]) + a[cut + 1 :]
        assert common_prefix(a, b) == cut
    assert common_prefix(a, a[:500]) == 500
    assert json.loads(json.dumps(longest_earlier_prefixes([a, a, a[:10]]))) == [0, 10_000, 10]


def test_copies_of_a_capture_are_separate_runs(tmp_path: Path) -> None:
    original = write_capture(tmp_path / "a", [exchange("x", chunks=usage_chunks(1, 2, 2))])
    shutil.copytree(original, tmp_path / "b")  # same capture_id, run_id and exchange ids
    with Analysis([tmp_path / "a", tmp_path / "b"], cache_dir=tmp_path / "cache") as a:
        groups = speed_stats(a, ["run", "run"])["groups"]  # a repeated --by is harmless
    assert [(g["key"]["capture"], g["requests"]) for g in groups] == [(str(tmp_path / "a"), 1), (str(tmp_path / "b"), 1)]
    assert groups[0]["key"]["run"] == groups[1]["key"]["run"] and groups[0]["key"]["recorder"] == "proxy"


def test_a_200_that_reports_an_error_or_no_answer_is_no_answer(tmp_path: Path) -> None:
    """An overloaded server may answer 200 with an error in its body; a stream may hold nothing an
    adapter reads. Each counted as ok: the error rate was 0 and the fast failures sped up e2e and
    throughput. A GET that no adapter reads is no request for tokens and stays ok."""
    answers = [exchange(f"a{i}", sent_ms=100 * i, end_ms=100, chunks=usage_chunks(10, 90, 5)) for i in range(2)]
    failures = [
        exchange("sse error", sent_ms=200, end_ms=3, chunks=[(2, sse(sdk_shapes.error_body("overloaded")))]),
        exchange("vllm error", sent_ms=210, end_ms=3, chunks=[(2, sse({"object": "error", "message": "engine dead"}))]),
        exchange("nothing", sent_ms=220, end_ms=3, chunks=[(2, b"data: [DONE]\n\n")]),
        exchange(
            "whole error",
            sent_ms=230,
            end_ms=3,
            headers=JSON_HEADERS,
            chunks=[(2, json.dumps(sdk_shapes.error_body("overloaded")).encode())],
        ),  # fmt: skip
        exchange(
            "cut by an error", sent_ms=240, end_ms=3, chunks=[(1, sse(event("a"))), (2, sse(sdk_shapes.error_body("oom")))]
        ),  # fmt: skip
    ]
    models = exchange("models", sent_ms=250, end_ms=1, request=b"", headers=JSON_HEADERS, chunks=[(1, b"not json")], method="GET", path="/v1/models")  # fmt: skip
    [g] = stats_of(tmp_path, [*answers, *failures, models])["groups"]
    assert (g["requests"], g["ok"], g["errors"]) == (7, 2, 5)
    assert g["metrics"]["e2e"]["n"] == 2 and g["metrics"]["e2e"]["p50"] == pytest.approx(100)
    assert g["throughput"]["output_tokens_per_s"] == pytest.approx(10 / g["span_s"])
    with Analysis([tmp_path / "cap"], cache_dir=tmp_path / "cache") as a:
        assert a.query("SELECT ok FROM metrics WHERE exchange_id = 'models'").rows == [(True,)]


def test_tpot_is_the_spacing_of_the_tokens_seen(tmp_path: Path) -> None:
    """Reasoning tokens an engine counts but sends no text of (OpenAI's reasoning models) came before
    the first token seen: counted in the spacing, they made tpot 0.04 ms for tokens 10 ms apart. The
    tokens of several choices (n > 1) are counted together while the times are choice 0's."""
    hidden = {"prompt_tokens": 5, "completion_tokens": 503, "completion_tokens_details": {"reasoning_tokens": 500}}
    shown = {"prompt_tokens": 5, "completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": 500}}
    three = [(10, sse(event("a"))), (20, sse(event("b"))), (30, sse(event("c", finish="stop")))]
    streamed_reasoning = [(10, sse(event(reasoning="r"))), (20, sse(event("b"))), (30, sse(event("c", finish="stop")))]
    two = {"object": "chat.completion.chunk", "choices": [{"index": 1, "delta": {"content": "x"}, "finish_reason": None}]}
    records = [
        exchange("hidden", chunks=[*three, (30, sse(event(choices=False, usage=hidden)))], end_ms=31),
        exchange("shown", sent_ms=100, chunks=[*streamed_reasoning, (30, sse(event(choices=False, usage=shown)))], end_ms=31),
        exchange(
            "n2",
            sent_ms=200,
            chunks=[*three, (30, sse(two, event(choices=False, usage={"prompt_tokens": 5, "completion_tokens": 6})))],
            end_ms=31,
        ),  # fmt: skip
    ]
    path = write_capture(tmp_path / "cap", records)
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        rows = {
            r["exchange_id"]: r for r in a.query("SELECT exchange_id, tpot_ns, output_tokens, choices FROM metrics").records()
        }
        [g] = speed_stats(a, ("run",))["groups"]
    assert rows["hidden"]["tpot_ns"] == pytest.approx(10e6) and rows["hidden"]["output_tokens"] == 503
    assert rows["shown"]["tpot_ns"] == pytest.approx(10e6)  # reasoning streamed: its tokens are the ones seen
    assert rows["n2"]["tpot_ns"] is None and rows["n2"]["choices"] == 2
    assert g["tokens_per_chunk"] == pytest.approx((3 + 3) / (3 + 3))  # n2 left out; hidden reasoning not in a chunk


def test_a_reasoning_summary_is_not_the_reasoning_tokens(tmp_path: Path) -> None:
    """A Responses answer streams a summary of its reasoning (OpenAI's reasoning models): the 500
    reasoning tokens it counted stay unseen, yet the summary made them 'streamed', so tpot divided
    the answer's span by them. Now they are left out and the span starts at the answer's first token;
    raw reasoning text (vLLM's reasoning_text) still counts as seen."""

    def responses(summary_kind: str) -> list[tuple[float, bytes]]:
        usage = {"input_tokens": 5, "output_tokens": 503, "output_tokens_details": {"reasoning_tokens": 500}}
        events = [
            (5, {"type": f"response.{summary_kind}.delta", "item_id": "rs", "output_index": 0, "delta": "thought"}),
            (10, {"type": "response.output_text.delta", "item_id": "m", "output_index": 1, "delta": "a"}),
            (20, {"type": "response.output_text.delta", "item_id": "m", "output_index": 1, "delta": "b"}),
            (30, {"type": "response.output_text.delta", "item_id": "m", "output_index": 1, "delta": "c"}),
            (30, {"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [], "usage": usage}}),
        ]
        return [(t, f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()) for t, e in events]

    body = json.dumps({"model": "m", "input": "q", "stream": True}).encode()
    records = [
        exchange(kind, sent_ms=100 * i, chunks=responses(kind), end_ms=31, request=body, path="/v1/responses")
        for i, kind in enumerate(("reasoning_summary_text", "reasoning_text"))
    ]
    path = write_capture(tmp_path / "cap", records)
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        rows = {
            r["exchange_id"]: r for r in a.query("SELECT exchange_id, tpot_ns, hidden_reasoning_tokens FROM metrics").records()
        }
    assert rows["reasoning_summary_text"]["hidden_reasoning_tokens"] == 500
    assert rows["reasoning_summary_text"]["tpot_ns"] == pytest.approx(10e6)  # a, b, c 10 ms apart (not from the summary)
    assert rows["reasoning_text"]["hidden_reasoning_tokens"] == 0  # its reasoning was streamed: seen
    assert rows["reasoning_text"]["tpot_ns"] == pytest.approx(25e6 / 502)


def test_ttft_of_whole_bodies_is_said_apart_from_streamed_ones(tmp_path: Path) -> None:
    """A body not streamed has no first token apart from its last: its ttft is the time to all of it.
    Mixed with streamed answers, it raised ttft's p99 unsaid; now stats says so, and --by stream splits."""
    streamed = [exchange(f"s{i}", sent_ms=100 * i, end_ms=60, chunks=usage_chunks(50, 55, 2)) for i in range(3)]
    whole = exchange("w", sent_ms=400, end_ms=2000, headers=JSON_HEADERS, chunks=[(2000, b'{"choices": [{"index": 0, "message": {"content": "all"}}]}')])  # fmt: skip
    path = write_capture(tmp_path / "cap", [*streamed, whole])
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        [g] = speed_stats(a, ("run",))["groups"]
        split = {grp["key"]["stream"]: grp for grp in speed_stats(a, ("stream",))["groups"]}
    assert g["ttft_kinds"] == {"streamed": 3, "whole_body": 1}
    assert split["streamed"]["metrics"]["ttft"]["p99"] == pytest.approx(50)
    assert split["whole body"]["metrics"]["ttft"]["p50"] == pytest.approx(2000)
    from click.testing import CliRunner

    from infertap.cli import cli

    out = CliRunner().invoke(cli, ["stats", str(path)], env={"INFERTAP_CACHE": str(tmp_path / "cache")}).output
    assert "ttft mixes 3 streamed answers (time to the first token) with 1 not streamed" in out


def test_a_source_that_counted_no_tokens_does_not_make_the_sources_mixed(tmp_path: Path) -> None:
    empty = exchange("empty", sent_ms=200, end_ms=5, chunks=[(2, sse(event(finish="stop")))])  # an answer of no tokens
    [g] = stats_of(tmp_path, [exchange("a", end_ms=100, chunks=usage_chunks(10, 90, 5)), empty])["groups"]
    assert g["output_tokens_source"] == {"usage": 1, "chunks": 1} and g["throughput"]["output_tokens_source"] == "usage"


def _whole(text: str, usage: dict[str, Any] | None = None) -> bytes:
    answer = {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}  # fmt: skip
    return json.dumps({**answer, **({"usage": usage} if usage else {})}).encode()


def test_a_body_not_streamed_without_usage_has_no_output_token_count(tmp_path: Path) -> None:
    """A body not streamed is one event however many tokens it holds: it was counted as 1 token,
    as if measured. Its count is unknown now, said, and out of the totals; a streamed answer's
    events and a usage count still count."""
    plain = exchange("w", end_ms=300, chunks=[(300, _whole("one two three four five six seven eight"))], headers=JSON_HEADERS, request=body(stream=False))  # fmt: skip
    used = exchange("u", sent_ms=400, end_ms=300, chunks=[(300, _whole("one two", {"prompt_tokens": 3, "completion_tokens": 2}))], headers=JSON_HEADERS, request=body(stream=False))  # fmt: skip
    streamed = exchange("s", sent_ms=800, end_ms=100, chunks=[(50, sse(event("a"))), (100, sse(event("b", finish="stop")))])
    [alone] = stats_of(tmp_path / "alone", [plain])["groups"]
    assert alone["metrics"]["output_tokens"]["n"] == 0 and alone["workload"]["output_tokens"]["known"] == 0
    assert alone["throughput"]["output_tokens_per_s"] is None and alone["throughput"]["output_tokens_unknown"] == 1
    [g] = stats_of(tmp_path / "all", [plain, used, streamed])["groups"]
    assert g["metrics"]["output_tokens"]["n"] == 2 and g["workload"]["output_tokens"]["total"] == 4  # 2 (usage) + 2 events
    assert g["throughput"]["output_tokens_unknown"] == 1
    assert g["throughput"]["output_tokens_per_s"] == pytest.approx(4 / g["span_s"])
    from click.testing import CliRunner

    from infertap.cli import cli

    path = write_capture(tmp_path / "cli", [plain, used, streamed])
    out = CliRunner().invoke(cli, ["stats", str(path)], env={"INFERTAP_CACHE": str(tmp_path / "cache-cli")}).output
    assert "output tokens unknown for 1 of 3 ok answers" in out
    [counted] = stats_of(tmp_path / "counted", [used, streamed])["groups"]
    assert counted["throughput"]["output_tokens_unknown"] == 0


def test_by_stream_puts_a_failed_streamed_request_with_the_streamed_ones(tmp_path: Path) -> None:
    """A streamed request answered with a JSON error (a 503) asked for a stream: it was grouped as a
    whole body, splitting the streamed requests' error rate."""
    ok = [exchange(f"s{i}", sent_ms=100 * i, end_ms=60, chunks=usage_chunks(50, 55, 2)) for i in range(3)]
    busy = b'{"error": {"message": "overloaded", "type": "server_error"}}'
    failed = [exchange(f"f{i}", sent_ms=400 + 100 * i, status=503, end_ms=5, chunks=[(5, busy)], headers=JSON_HEADERS) for i in range(3)]  # fmt: skip
    whole = exchange(
        "w", sent_ms=900, end_ms=200, headers=JSON_HEADERS, request=body(stream=False), chunks=[(200, _whole("all"))]
    )
    whole_failed = exchange("wf", sent_ms=1000, status=503, end_ms=5, chunks=[(5, busy)], headers=JSON_HEADERS, request=body(stream=False))  # fmt: skip
    groups = {g["key"]["stream"]: g for g in stats_of(tmp_path, [*ok, *failed, whole, whole_failed], ("stream",))["groups"]}
    assert (groups["streamed"]["requests"], groups["streamed"]["ok"]) == (6, 3)
    assert (groups["whole body"]["requests"], groups["whole body"]["ok"]) == (2, 1)


def test_tokens_per_chunk_leaves_out_imported_answers(tmp_path: Path) -> None:
    """An imported stream is one coarse chunk holding every event: it made tokens_per_chunk the answer's length."""
    events = sse(event("a"), event("b"), event("c", finish="stop"))
    live = exchange(
        "live", end_ms=100, chunks=[(10, sse(event("a"))), (20, sse(event("b"))), (30, sse(event("c", finish="stop")))]
    )
    imported = exchange("imp", sent_ms=500, end_ms=500, chunks=[(500, events)], imported="har")
    [g] = stats_of(tmp_path / "both", [live, imported])["groups"]
    assert g["tokens_per_chunk"] == pytest.approx(1.0)
    [only] = stats_of(tmp_path / "imported", [imported])["groups"]
    assert only["tokens_per_chunk"] is None


def test_a_request_infertap_refused_is_in_no_figure_and_said(tmp_path: Path) -> None:
    """A turn the replayer never sent (its parent's response not in the replay), or a body over the
    recorder's limit, never reached the engine: it was counted as the engine's error. An upstream
    that failed still is one."""
    sent = [exchange(f"s{i}", sent_ms=100 * i, end_ms=60, chunks=usage_chunks(50, 55, 2)) for i in range(3)]
    failed = exchange("failed", sent_ms=400, end="upstream_error", status=None, end_ms=2, chunks=[])
    refused = exchange("never", sent_ms=500, end="refused", status=None, end_ms=0, chunks=[])
    [g] = stats_of(tmp_path / "with", [*sent, failed, refused])["groups"]
    assert (g["requests"], g["ok"], g["refused"]) == (4, 3, 1) and g["error_rate"] == pytest.approx(0.25)
    [plain] = stats_of(tmp_path / "without", [*sent, failed])["groups"]
    assert plain["refused"] == 0 and plain["error_rate"] == pytest.approx(0.25)
    from click.testing import CliRunner

    from infertap.cli import cli

    path = write_capture(tmp_path / "cli", [*sent, failed, refused])
    out = CliRunner().invoke(cli, ["stats", str(path)], env={"INFERTAP_CACHE": str(tmp_path / "cache-cli")}).output
    assert "1 more refused by infertap, never sent" in out


HOUR_MS = 3_600_000


def test_a_group_of_runs_an_hour_apart_is_timed_over_its_runs_not_the_hour_between(tmp_path: Path) -> None:
    path = write_capture(
        tmp_path / "cap",
        [
            exchange("a1", sent_ms=0, end_ms=1000, chunks=usage_chunks(10, 900, 5)),
            exchange("a2", sent_ms=1000, end_ms=1000, chunks=usage_chunks(10, 900, 7)),
        ],
    )
    # Recorded again into it (a replay appended) an hour later: a second run, [0, 1] s of its own.
    write_capture(path, [exchange("b1", sent_ms=HOUR_MS, end_ms=1000, chunks=usage_chunks(10, 900, 9))])
    with Analysis([path], cache_dir=tmp_path / "cache") as a:
        [g] = speed_stats(a, ["model"])["groups"]
        first, second = speed_stats(a, ["run"])["groups"]
    assert g["runs"] == 2 and g["span_s"] > 3600  # the span runs over the hour...
    assert g["active_s"] == pytest.approx(first["active_s"] + second["active_s"]) == pytest.approx(2.0 + 1.0, abs=0.01)
    assert g["throughput"]["requests_per_s"] == pytest.approx(3 / g["active_s"])  # ...the rates don't
    assert g["throughput"]["output_tokens_per_s"] == pytest.approx((5 + 7 + 9) / g["active_s"])
    assert g["concurrency"]["mean"] == pytest.approx(3.0 / g["active_s"])
    # Each run alone: its own span, whole.
    assert (first["runs"], first["active_s"], second["runs"]) == (1, first["span_s"], 1)
    assert first["throughput"]["requests_per_s"] == pytest.approx(2 / first["span_s"])
    printed = CliRunner().invoke(cli, ["stats", str(path), "--by", "model", "--cache-dir", str(tmp_path / "cache")])
    assert printed.exit_code == 0, printed.output
    assert f"over {g['active_s']:,.2f} s active in 2 runs ({g['span_s']:,.2f} s from the first send" in printed.output


def test_runs_sent_side_by_side_are_timed_over_their_common_span(tmp_path: Path) -> None:
    # Two recorders (shards) in front of one engine at once: their spans overlap, so the group's
    # active time is its span, not the sum of theirs (which would halve its rates).
    a = write_capture(tmp_path / "a", [exchange("a", sent_ms=0, end_ms=2000, chunks=usage_chunks(10, 900, 5))])
    b = write_capture(tmp_path / "b", [exchange("b", sent_ms=0, end_ms=2000, chunks=usage_chunks(10, 900, 5))])
    with Analysis([a, b], cache_dir=tmp_path / "cache") as analysis:
        [g] = speed_stats(analysis, ["model"])["groups"]
    assert g["runs"] == 2 and g["active_s"] == pytest.approx(g["span_s"]) and g["span_s"] < 3.0
    assert g["throughput"]["requests_per_s"] == pytest.approx(2 / g["span_s"])
