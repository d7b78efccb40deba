"""An error status whose body no adapter reads (llama-cpp-python's FastAPI 404 ``{"detail": "Not
Found"}`` for a path it doesn't serve) is an error, counted as such by ``stats`` and ``compare``
(``error_body_unread``), not an answer infertap failed to read; a 2xx body no adapter reads still is."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from infertap.analysis.compare import compare
from infertap.cli import cli
from tests.analysis.test_compare_apis import _capture

NOT_FOUND = b'{"detail":"Not Found"}'
ODD = b'{"answer": "something no API sends"}'


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _sides(tmp_path: Path) -> tuple[Path, Path]:
    # Pairs: the same 404 on both sides; a 404 against an answer; a 2xx body no adapter reads on
    # both; two 404s with other bodies.
    a = _capture(tmp_path / "a", "messages", [NOT_FOUND, NOT_FOUND, ODD, NOT_FOUND], statuses=[404, 404, 200, 404])
    b = _capture(tmp_path / "b", "messages", [NOT_FOUND, "fine", ODD, b'{"detail":"Gone"}'], statuses=[404, 200, 200, 404])
    return a, b


def test_compare_counts_an_unread_error_body_as_an_error_and_matches_only_the_same_error(tmp_path: Path) -> None:
    a, b = _sides(tmp_path)
    d = compare(a, b)["divergence"]
    assert d["counts"]["unreadable"] == 1  # the 2xx body alone
    assert d["counts"]["error_body_unread"] == 3
    assert d["counts"]["exact"] == 1 and d["exact_match_rate"] == 0.25  # the same 404, status and body
    # A 404 against an answer, and two 404s with other bodies: failures, counted apart from the outputs.
    assert d["failed"] == {"pairs": 3, "a_only": 1, "b_only": 0, "both": 2, "both_same": 1, "both_differ": 1, "not_generation": 0}
    assert d["readable"]["POST /v1/messages"] == {
        "pairs": 4,
        "read_both": 0,
        "unreadable_a": 1,
        "unreadable_b": 1,
        "error_body_unread_a": 3,
        "error_body_unread_b": 2,
        "not_compared": 0,
        "not_in_file": 0,
        "too_large": 0,
        "response_not_kept": 0,
        "partly_unreadable": 0,
    }
    (unread,) = d["most_divergent"]  # the 2xx ones, unreadable: the only pair whose outputs were compared
    assert unread["a_id"] == "src-2" and unread["unreadable"][0] is not None and d["outputs_compared"] == 1
    out = _run("compare", str(a), str(b))
    assert "1 unreadable in A, 1 in B" in " ".join(out.split())
    assert "errors with no body an API reads (3 in A, 2 in B" in " ".join(out.split())


def test_stats_counts_an_unread_error_body_with_the_errors_and_a_2xx_one_as_unreadable(tmp_path: Path) -> None:
    a, _ = _sides(tmp_path)
    cache = str(tmp_path / "cache")
    [group] = json.loads(_run("stats", str(a), "--cache-dir", cache, "--json"))["groups"]
    assert (group["unreadable"], group["error_body_unread"], group["errors"]) == (1, 3, 4)
    text = " ".join(_run("stats", str(a), "--cache-dir", cache).split())
    assert "unreadable 1 (" in text and "error body unread 3 (" in text


def test_a_2xx_body_no_adapter_reads_is_unreadable_only(tmp_path: Path) -> None:
    a = _capture(tmp_path / "a", "messages", [ODD, ODD], statuses=[200, 200])
    [group] = json.loads(_run("stats", str(a), "--cache-dir", str(tmp_path / "cache"), "--json"))["groups"]
    assert (group["unreadable"], group["error_body_unread"]) == (2, 0)
    d = compare(a, a)["divergence"]
    assert d["counts"]["unreadable"] == 2 and "error_body_unread" not in d["counts"] and d["exact_match_rate"] == 0.0


def test_an_exchange_the_upstream_never_answered_is_a_failure_not_an_unreadable_body(tmp_path: Path) -> None:
    """No status and no byte (a refused connection, a timeout before the headers): there was no body
    to read. stats said "unreadable 1 (no API adapter understood the body)", compare the same of
    a run against itself; it is a failure by its ending, two alike the same outcome, unlike ones not."""
    from tests.analysis_builders import body, event, exchange, sse
    from tests.analysis_builders import write_capture as write

    recorder = {"kind": "proxy", "upstream": "http://engine.test", "id": "r"}
    answered = exchange("ok", sent_ms=9, request=body("q"), chunks=[(5, sse(event("x"), event(finish="stop")))], end_ms=9)

    def run(path: Path, end: str) -> Path:
        write(path, [exchange("gone", sent_ms=0, request=body("q"), end=end, status=None), answered], recorder)
        return path

    a, b, other = run(tmp_path / "a", "upstream_error"), run(tmp_path / "b", "upstream_error"), run(tmp_path / "c", "timeout")
    (group,) = json.loads(_run("stats", str(a), "--json", "--cache-dir", str(tmp_path / "cache")))["groups"]
    assert (group["requests"], group["ok"], group["errors"], group["unreadable"]) == (2, 1, 1, 0)
    assert "unreadable" not in _run("stats", str(a), "--cache-dir", str(tmp_path / "cache"))
    same = compare(a, b)["divergence"]
    assert same["counts"].get("unreadable", 0) == 0 and same["exact_match_rate"] == 1.0  # the same failure, and the answer
    unlike = compare(a, other)["divergence"]
    assert unlike["counts"].get("unreadable", 0) == 0 and unlike["exact_match_rate"] == 0.5  # a failure and a timeout differ
    assert unlike["failed"]["both_differ"] == 1 and same["failed"]["both_same"] == 1


def test_report_names_the_errors_with_no_body_an_api_reads_and_a_clean_pair_none(tmp_path: Path) -> None:
    from infertap.analysis.report import render

    a, b = _sides(tmp_path)
    page = render(a, b)
    assert "errors with no body an API reads" in page and "3 pairs (3 in A, 2 in B)" in page
    clean_a = _capture(tmp_path / "ca", "messages", ["fine", "well"], statuses=[200, 200])
    clean_b = _capture(tmp_path / "cb", "messages", ["fine", "good"], statuses=[200, 200])
    assert "errors with no body an API reads" not in render(clean_a, clean_b)


def test_bytes_with_no_response_head_are_an_error_body_unread_not_an_unreadable_answer(tmp_path: Path) -> None:
    """No status but some bytes (a HAR's failed request, status 0, holding what came before the
    failure; bytes from an upstream that never sent a valid head): stats called them 'unreadable (no
    API adapter understood the body)', compare the same. They are a failure by its ending whose bytes
    are no API's answer: error_body_unread, two alike the same outcome, other bytes not."""
    from tests.analysis_builders import body, event, exchange, sse
    from tests.analysis_builders import write_capture as write

    recorder = {"kind": "proxy", "upstream": "http://engine.test", "id": "r"}
    answered = exchange("ok", sent_ms=9, request=body("q"), chunks=[(5, sse(event("x"), event(finish="stop")))], end_ms=9)

    def run(path: Path, sent: bytes) -> Path:
        headless = exchange("cut", sent_ms=0, request=body("q"), chunks=[(3, sent)], end="upstream_error", status=None)
        write(path, [headless, answered], recorder)
        return path

    a, b, other = run(tmp_path / "a", b"\x00garbled"), run(tmp_path / "b", b"\x00garbled"), run(tmp_path / "c", b"other")
    (group,) = json.loads(_run("stats", str(a), "--json", "--cache-dir", str(tmp_path / "cache")))["groups"]
    assert (group["requests"], group["ok"], group["errors"]) == (2, 1, 1)
    assert (group["unreadable"], group["error_body_unread"]) == (0, 1)
    text = " ".join(_run("stats", str(a), "--cache-dir", str(tmp_path / "cache")).split())
    assert "unreadable" not in text and "error body unread 1 (" in text
    same = compare(a, b)["divergence"]
    assert same["counts"].get("unreadable", 0) == 0 and same["counts"]["error_body_unread"] == 1
    assert same["exact_match_rate"] == 1.0  # the same ending and bytes, and the answer
    unlike = compare(a, other)["divergence"]
    assert unlike["counts"].get("unreadable", 0) == 0 and unlike["exact_match_rate"] == 0.5  # other bytes differ


def test_report_carries_the_per_path_notes_compare_prints(tmp_path: Path) -> None:
    """compare printed per path what its table can't show (pairs not compared and why, unreadable
    bodies); report's divergence section left them out. Both now say the same lines (divergence_notes)."""
    import html

    from infertap.analysis.divergence_notes import path_notes
    from infertap.analysis.report import render
    from tests.helpers import write_capture

    a, b = _sides(tmp_path)
    listed = [{"method": "GET", "path": "/v1/models", "body": b"", "chunks": [b'{"object": "list", "data": []}']}]
    write_capture(tmp_path / "la", listed)
    write_capture(tmp_path / "lb", listed)
    for x, y in ((a, b), (tmp_path / "la", tmp_path / "lb")):
        notes = [text for text, _ in path_notes(compare(x, y)["divergence"])]
        assert notes  # an unreadable pair, errors with no body an API reads; a model list not compared
        page, printed = render(x, y), " ".join(_run("compare", str(x), str(y)).split())
        for text in notes:
            assert html.escape(text) in page and text in printed
    assert html.escape("GET /v1/models: 1 pairs not compared (no API's answer") in render(tmp_path / "la", tmp_path / "lb")
    clean_a = _capture(tmp_path / "ca", "messages", ["fine", "well"], statuses=[200, 200])
    clean_b = _capture(tmp_path / "cb", "messages", ["fine", "good"], statuses=[200, 200])
    assert path_notes(compare(clean_a, clean_b)["divergence"]) == [] and "pairs not compared" not in render(clean_a, clean_b)
