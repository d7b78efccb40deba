"""A replay's claim to be its source's traffic ("identical to its source" in `info` and on the claim
card, same_as_source) compared its text and media requests alone: one that left out the source's
embeddings requests (``--filter path=...``) was still identical to it. It now needs the embeddings
identity to match too; a replay whose header's source predates that identity and that sent no
embeddings reads as before."""

from __future__ import annotations

import infertap.capture.identity as identity_module
from infertap.analysis.claim import claim, field_text
from infertap.analysis.compare import compare
from infertap.capture.identity import describe, workload_identity
from infertap.capture.info import summarize
from infertap.replay import ReplayConfig, run_replay
from infertap.replay.workload import Filters
from tests.helpers import embeddings_request as embed
from tests.helpers import write_capture


def _chat(tag: str, at: float) -> dict:
    return {"body": {"model": "m", "messages": [{"role": "user", "content": tag}], "stream": False}, "offset_s": at}


def test_a_replay_without_its_sources_embeddings_is_not_identical_to_it(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    _app, url = fake
    write_capture(tmp_path / "src", [_chat("q0", 0), embed("a fox", 0.1), embed("a cat", 0.2), _chat("q1", 0.3)])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "same", probe=False))
    text_only = Filters(paths=["/v1/chat/completions"])
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "filtered", probe=False, filters=text_only))
    source = workload_identity(tmp_path / "src")

    # Must differ: the same text requests, the source's two embeddings requests left out.
    filtered = summarize(tmp_path / "filtered")["workload"]
    assert filtered["workload"] == source.workload and filtered["embeddings"] == "" and source.embeddings_requests == 2
    assert filtered["same_text_as_source"] is True and filtered["same_embeddings_as_source"] is False
    assert filtered["same_as_source"] is False and filtered["same_requests_as_source"] is False
    said = (
        f"the same text requests as its source {source.short}, but other embeddings requests "
        f"(0 against the source's 2; embeddings none, the source's {source.embeddings_short}) "
        "(by --filter path=/v1/chat/completions)"
    )
    assert describe(filtered).endswith(f"; {said}") and "identical" not in describe(filtered)
    card = field_text("workload", claim(tmp_path / "filtered", cache_dir=tmp_path / "c")["workload"])
    assert said.replace("its source", "source") in card and "identical" not in card
    assert not compare(tmp_path / "src", tmp_path / "filtered")["traffic"]["identical"]

    # Must match: replayed unchanged, embeddings and all.
    same = summarize(tmp_path / "same")["workload"]
    assert same["embeddings"] == source.embeddings and same["same_embeddings_as_source"] is True
    assert same["same_as_source"] is True and same["embeddings_change"] is None and same["same_schedule_as_source"]
    assert describe(same).endswith(f"; identical to its source {source.short}")
    assert compare(tmp_path / "src", tmp_path / "same")["traffic"]["identical"]


def test_a_source_identity_from_before_embeddings_reads_as_before(fake, tmp_path, monkeypatch):
    """A replay recorded by an infertap older than the embeddings identity: its header's source has no
    ``embeddings``. Where it sent none it reads as it did; where it sent some, their being the source's
    is not known."""
    _app, url = fake
    write_capture(tmp_path / "plain", [_chat("q0", 0), _chat("q1", 0.2)])
    write_capture(tmp_path / "src", [_chat("q0", 0), embed("a fox", 0.1), _chat("q1", 0.2)])
    older = identity_module.WorkloadIdentity.as_dict

    def without_embeddings(self):
        return {k: v for k, v in older(self).items() if not k.startswith("embeddings")}

    monkeypatch.setattr(identity_module.WorkloadIdentity, "as_dict", without_embeddings)
    run_replay(ReplayConfig(tmp_path / "plain", url, tmp_path / "old_plain", probe=False))
    run_replay(ReplayConfig(tmp_path / "src", url, tmp_path / "old", probe=False))
    monkeypatch.undo()
    monkeypatch.setenv("INFERTAP_CACHE", str(tmp_path / "cache"))
    plain = summarize(tmp_path / "old_plain")["workload"]  # must match: as before
    assert "embeddings" not in plain["source"] and plain["same_as_source"] is True
    assert describe(plain).endswith(f"; identical to its source {plain['source']['short']}")
    old = summarize(tmp_path / "old")["workload"]  # not known: never "identical"
    assert old["same_embeddings_as_source"] is None and not old["same_as_source"]
    assert describe(old).endswith(
        "but its embeddings requests not known to be the source's (an older infertap recorded its identity without them)"
    )
