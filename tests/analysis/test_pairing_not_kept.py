"""A request whose body was not kept (``request_body_size``, an empty ``request_body``) pairs by no
identical request: its bytes are unknown, neither another unknown body nor a real empty one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis.compare import compare
from analysis.pairing import pair
from tests.helpers import write_capture


def _exchanges(tag: str) -> list[dict[str, Any]]:
    return [
        {"id": f"{tag}-kept", "body": {"model": "m", "messages": [{"role": "user", "content": "same"}]}},
        {"id": f"{tag}-gone", "body": b"", "fields": {"request_body_size": 9000}},
        {"id": f"{tag}-get", "method": "GET", "path": "/v1/models", "body": b""},  # empty, and known to be
    ]


def test_a_body_not_kept_pairs_with_nothing_an_empty_or_kept_one_pairs(tmp_path: Path) -> None:
    a = write_capture(tmp_path / "a", _exchanges("a"))
    b = write_capture(tmp_path / "b", _exchanges("b"))
    lists = pair(a, b)
    assert [(x["id"], y["id"]) for x, y in lists.pairs] == [("a-kept", "b-kept"), ("a-get", "b-get")]
    assert [x["id"] for x in lists.unpaired_a] == ["a-gone"] and [y["id"] for y in lists.unpaired_b] == ["b-gone"]
    # A not-kept body beside a real empty one to the same path: not that request either.
    c = write_capture(tmp_path / "c", [{"id": "c-empty", "body": b""}])
    assert pair(a, c).pairs == [] and pair(c, a).pairs == []
    r = compare(tmp_path / "a", tmp_path / "b")
    assert (r["pairing"]["pairs"], r["pairing"]["by"]["identical request"]) == (2, 2)
    assert "1 exchange of A and 1 of B have no counterpart" in r["pairing"]["explain"]
