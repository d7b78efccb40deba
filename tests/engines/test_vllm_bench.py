"""A client that isn't ours: vLLM's own ``vllm bench serve`` drives the real vLLM through
``infertap record``, and its per-request TTFT, TPOT, ITLs and latency agree with infertap's metrics
on the same requests, within the proxy's measured send offset and the definitional differences
(bench/vllm_bench.py; docs/metrics.md, "Against vLLM's bench serve").

No expected figure is written here: on a shared 2-core machine the times vary run to run. What is
asserted holds on any machine: one-to-one matching, the same answers, causality (the bench can't
see a message before the proxy received it) and differences within a bound made of the measured
send offset, the measured definitional part and a relative delivery tolerance.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.vllm_bench import compare_vllm, problems, record, unavailable

pytestmark = pytest.mark.engine

REQUESTS = 8


@pytest.fixture(scope="module")
def bench(vllm_engine, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reason = unavailable()  # the bench runs in vLLM's venv, even against a server named by INFERTAP_VLLM_URL
    if reason:
        pytest.skip(reason)
    return record(vllm_engine.url, tmp_path_factory.mktemp("vllm-bench"), requests=REQUESTS, concurrency=2, max_tokens=24)


@pytest.mark.timeout(600)  # vLLM's start (when not reused) and the bench's import of vLLM on a shared CPU
def test_every_bench_request_is_captured_and_matched_one_to_one(bench):
    c = compare_vllm(bench["peer"], bench["ours"], bench["view"])
    assert c["bench_records"] == REQUESTS and c["exchanges"] == REQUESTS
    assert c["matched_by"] == "X-Request-ID header" and c["pairs"] == REQUESTS
    assert c["unpaired_bench_records"] == [] and c["unpaired_exchanges"] == []
    assert all(r["ok"] for r in c["requests"])
    # The same answer on both sides of the proxy, counted the same (both read usage.completion_tokens).
    assert c["texts_equal"] == REQUESTS
    assert c["output_tokens_equal"] == REQUESTS and c["input_tokens_equal"] == REQUESTS
    # The bench times one gap per message with choices after the first: exactly the proxy's messages.
    assert all(r["bench_itls"] == r["proxy_choice_gaps"] for r in c["requests"])


def test_bench_times_agree_within_the_send_offset_and_the_definitions(bench):
    c = compare_vllm(bench["peer"], bench["ours"], bench["view"])
    assert problems(c) == []
    clock_ms = 1.0  # two processes reading the monotonic and wall clocks
    for r in c["requests"]:
        # The bench starts its clock before infertap sends the request upstream.
        assert r["send_offset_ms"] >= -clock_ms
        # Definitions: vLLM's TTFT fires on the first message with choices (its role-only one) and
        # its latency ends at the last (the finish message), both no later than infertap's events.
        assert r["ttft_definition_ms"] <= 0 and r["latency_definition_ms"] <= 0
        # The bench's TTFT is infertap's ttft minus the role chunk's lead, plus the send offset,
        # plus a delivery that can't be negative.
        assert r["bench_ttft_ms"] >= r["infertap_ttft_ms"] + r["ttft_definition_ms"] + r["send_offset_ms"] - clock_ms
        assert r["latency_delivery_ms"] >= -clock_ms
    d = c["diff_ms"]
    # Typically the proxy → client delivery is a fraction of the TTFT; a stall on a shared CPU may
    # make single requests slow, not the median.
    assert d["ttft_delivery"]["median"] <= max(50.0, 0.5 * c["median_ms"]["infertap_ttft"])
    # vLLM's ITL list holds more values than infertap's itl: the role → first text gap and, on a
    # stream that stops on EOS, the text-less finish message; never fewer.
    assert all(r["bench_itls"] >= r["infertap_itls"] for r in c["requests"])


def test_a_missing_exchange_a_missing_record_and_a_wrong_pairing_are_reported(bench):
    peer, ours, view = bench["peer"], bench["ours"], bench["view"]

    def new_problems(peer_records: list[dict[str, Any]], exchanges: list[dict[str, Any]]) -> list[str]:
        """Problems beyond those of the run as recorded (none, unless the run itself disagreed)."""
        return [p for p in problems(compare_vllm(peer_records, exchanges, view)) if p not in baseline]

    baseline = set(problems(compare_vllm(peer, ours, view)))
    # A request the bench made that infertap didn't record: unpaired, never paired by order instead.
    c = compare_vllm(peer, ours[1:], view)
    assert c["pairs"] == REQUESTS - 1 and c["unpaired_bench_records"] == [ours[0]["key"]]
    assert new_problems(peer, ours[1:]) == [f"bench record {ours[0]['key']} is not in the capture"]
    # An exchange with the bench's id that the bench didn't report.
    c = compare_vllm(peer[1:], ours, view)
    assert [x["key"] for x in c["unpaired_exchanges"]] == [peer[0]["key"]]
    assert any("is not in the bench's results" in p for p in new_problems(peer[1:], ours))
    # Each bench record paired with the next request: other answers, found.
    shifted = [dict(p, key=peer[(i + 1) % len(peer)]["key"]) for i, p in enumerate(peer)]
    assert sum("text differs" in p for p in new_problems(shifted, ours)) == REQUESTS
    # A bench TTFT far beyond what the send offset, the definitions, the stalls and the tolerance explain.
    late = [dict(p, ttft_ms=p["ttft_ms"] * 10 + 1000) if i == 0 else p for i, p in enumerate(peer)]
    (found,) = new_problems(late, ours)
    assert found.startswith(f"request {peer[0]['key']}: TTFT differs")
    # A bench clock shifted a second late: infertap would have sent before the bench started.
    shifted_clock = [dict(p, start_wall_ns=p["start_wall_ns"] + 1_000_000_000) for p in peer]
    assert sum("before the bench started" in p for p in new_problems(shifted_clock, ours)) == REQUESTS
