"""Whether runs A and B saw identical traffic (their workload identities, analysis/workload_identity.py),
in bounded memory, for compare on runs of any size.

Each side's requests stream from DuckDB in send order into the capture package's ``OrderedHashes``
a batch at a time (nothing is kept per request), and the requests one side has and the other lacks
are counted in SQL over each side's digest counts, in compare's workspace. The image, video, speech
and embeddings requests beside them (no text tokens to time, in no speed figure) are compared too, by
their own identities (``media``, ``embeddings``: ``identity.APART``) and digest counts by kind: traffic
is identical only where all are.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from infertap.capture.identity import (
    APART,
    APART_WORDS,
    IdentityTally,
    WorkloadIdentity,
    rechained_requests,
    schedule_change,
    schedule_not_kept,
    workload_summary,
)
from infertap.capture.reader import CaptureReader
from infertap.replay.transforms import rechained

from .in_no_group import not_text_words
from .media import not_text
from .store import Analysis
from .workload_identity import (
    asked_header_sets,
    asked_words,
    capture_identity,
    continues_responses,
    media_sql,
    quoted,
    recorders,
    sent_sql,
)

#: What the traffic says where neither side sent a text generation request (embeddings alone: compare pairs them).
NO_TEXT = "no text generation request on either side"


def _identity(analysis: Analysis, capture: str, digests: Path) -> WorkloadIdentity:
    """``capture_identity``; each request digest's count is written to ``digests`` (Parquet), and
    each media and embeddings request digest's, by kind, beside it (``_media_file``).

    The requests are kept in a table first: the join and the count as one query hold both hash
    tables at once (a million requests then failed in 64 MB; one step each, they spill)."""
    analysis.con.execute(f"CREATE OR REPLACE TEMP TABLE _sent AS {sent_sql(capture)}")
    analysis.con.execute(
        f"COPY (SELECT digest, count(*) AS n FROM _sent GROUP BY digest) TO {quoted(str(digests))} (FORMAT parquet)"
    )
    analysis.con.execute(
        f"COPY (SELECT kind, digest, count(*) AS n FROM ({' UNION ALL '.join(media_sql(capture, n) for n in APART)}) q "
        "GROUP BY kind, digest) "
        f"TO {quoted(str(_media_file(digests)))} (FORMAT parquet)"
    )
    identity = capture_identity(analysis, capture, "SELECT * FROM _sent")
    analysis.con.execute("DROP TABLE _sent")
    return identity


def _media_file(digests: Path) -> Path:
    """Where a side's media and embeddings request digest counts are kept, beside its text requests' ``digests``."""
    return digests.with_name(digests.stem + "_media.parquet")


def _side(path: str | os.PathLike[str], digests: Path, memory_limit: str) -> dict[str, Any]:
    """``workload_identity.workload`` of the capture at ``path``."""
    with Analysis([path]) as analysis:
        analysis.con.execute(f"SET memory_limit = {quoted(memory_limit)}")
        capture = analysis.query("SELECT capture FROM captures LIMIT 1").rows[0][0]
        identity, runs = _identity(analysis, capture, digests), recorders(capture)
        if any(r.get("kind") == "replay" for r in runs) and continues_responses(analysis, capture):
            identity = replace(identity, rechained=rechained_requests(capture))
        summary = workload_summary(identity, runs)
        return {
            **summary,
            "asked_headers": asked_header_sets(analysis, capture),
            # Those of its media and embeddings requests, by identity: what kept two of them apart, said too.
            "apart_asked_headers": {name: asked_header_sets(analysis, capture, name) for name in APART},
            "not_text": not_text(analysis, capture),
        }


def traffic(
    con: Any, folder: Path, a_path: str | os.PathLike[str], b_path: str | os.PathLike[str], *, memory_limit: str = "256MB"
) -> dict[str, Any]:
    """Whether runs A and B saw identical traffic: their workload and schedule identities, and when
    they differ, how many of their generation requests differ and how (``con``, ``folder``: compare's
    workspace, where each side's digest counts are kept; ``memory_limit``: DuckDB's buffer per side)."""
    wa = _side(a_path, folder / "digests_a.parquet", memory_limit)
    wb = _side(b_path, folder / "digests_b.parquet", memory_limit)
    # Requests sent with a body not kept are in neither identity: equal hashes then prove nothing of them.
    unknown = {name: w.get("bodies_unknown") or 0 for name, w in (("A", wa), ("B", wb))}
    text_identical = wa["workload"] == wb["workload"] and not any(unknown.values())
    # The image, video, speech and embeddings requests are in no speed figure but are traffic all the same.
    apart_same = {name: wa[name] == wb[name] for name in APART}
    differences = _media_differences(con, folder, [n for n, same in apart_same.items() if not same])
    media = {kind: d for kind, d in differences.items() if kind != "embeddings"}
    embeddings = differences.get("embeddings") or {}
    identical = text_identical and all(apart_same.values())
    files = [quoted(str(folder / f"digests_{s}.parquet")) for s in "ab"]
    only_a, only_b, na, nb = con.execute(
        "SELECT coalesce(sum(greatest(coalesce(a.n, 0) - coalesce(b.n, 0), 0)), 0), "
        "coalesce(sum(greatest(coalesce(b.n, 0) - coalesce(a.n, 0), 0)), 0), coalesce(sum(a.n), 0), coalesce(sum(b.n), 0) "
        f"FROM read_parquet({files[0]}, hive_partitioning = false) a FULL JOIN read_parquet({files[1]}, hive_partitioning = false) b USING (digest)"
    ).fetchall()[0]
    only_a, only_b, na, nb = int(only_a), int(only_b), int(na), int(nb)
    # Embeddings requests alone on both sides (compare pairs them): equal text identities then hash no
    # request, and "the text generation requests are identical" would be true of none.
    no_text = text_identical and not wa["requests"] and not wb["requests"]
    if no_text:
        how = NO_TEXT
    elif identical:
        how = "identical requests in the same order"
    elif text_identical:
        how = "the text generation requests are identical in the same order"
    elif any(unknown.values()):
        known = "identical in the same order" if wa["workload"] == wb["workload"] else "not the same"
        sent = " and ".join(f"{name}'s {n}" for name, n in unknown.items() if n)
        how = (
            f"unknown: {sent} request{'s' if sum(unknown.values()) != 1 else ''} sent with a body not kept "
            f"(in no identity); the others are {known}"
        )
        if wa["workload"] != wb["workload"]:
            how += f": {only_a} of A's {na} generation requests are not in B, {only_b} of B's {nb} are not in A"
    elif not only_a and not only_b:  # the text requests: their media or embeddings requests, where they differ, are said after
        how = f"the same {'text generation ' if differences else ''}requests in a different order"
    elif not na or not nb:  # "0 of A's 0" would count requests that one side never sent
        how = f"{'A' if not na else 'B'} sent no text generation request, {'B' if not na else 'A'} {na or nb}"
    else:
        how = f"{only_a} of A's {na} generation requests are not in B, {only_b} of B's {nb} are not in A"
    for x, y, name in ((wa, wb, "B"), (wb, wa, "A")):
        # Where the text requests are the same, a replay's relation to its source is news only if it changed something.
        if (not text_identical or y.get("derived_by")) and (source := y.get("source") or {}).get("workload") == x["workload"]:
            if y.get("same_text_requests_as_source") and not y.get("derived_by"):
                # Its schedule moved them (--sessions closed, a closed loop): no transform did. Its media
                # requests are the other's where both captures' media identities are (whatever its header knew).
                moved = schedule_change(source, y["schedule"], y.get("schedule_by"), True)
                what = "workload" if all(apart_same.values()) else "text requests"
                how += f"; {name} replays the other's {what} unchanged{moved}"
            else:
                how += f"; {name} replays the other's workload with {', '.join(y.get('derived_by') or ['no transform recorded'])}"
    # What their identities can't name; a side with no text request sent no header (its counts say so).
    if not identical and wa["asked_headers"] and wb["asked_headers"] and wa["asked_headers"] != wb["asked_headers"]:
        how += (
            f"; the headers that change what a request asks differ: A's requests sent {asked_words(wa['asked_headers'])}, "
            f"B's {asked_words(wb['asked_headers'])}"
        )
    if differences:  # in no speed figure: image, video or speech generation, embeddings
        how += f"; {media_words(differences)}"
    for name in APART:  # what their identities can't name either, as of the text requests above
        xa, xb = (w.get("apart_asked_headers", {}).get(name) for w in (wa, wb))
        if not apart_same[name] and xa and xb and xa != xb:
            how += (
                f"; the headers that change what a request asks differ: A's {APART_WORDS[name]} sent {asked_words(xa)}, "
                f"B's {asked_words(xb)}"
            )
    rechained = (
        0
        if text_identical or not all(apart_same.values()) or any(unknown.values())
        else _rechained_siblings(wa, wb, a_path, b_path)
    )
    if rechained:
        how = (
            f"the same requests but for the previous_response_id of {rechained}, each naming the response its own "
            f"target gave (both replay {wa['source'].get('short', '?')} with {', '.join(wa.get('derived_by') or [])})"
        )
    return {
        "identical": identical,  # the text workload, the media and the embeddings requests all
        "text_identical": text_identical,  # the text generation requests, those the speed figures are over
        "no_text": no_text,  # neither side sent a text generation request: no speed figure is over any
        "media": media,  # by kind, where the sides' media requests differ: each side's count, and those the other lacks
        "embeddings": embeddings,  # where the sides' embeddings requests differ: as one kind of ``media``
        "rechained_only": rechained,  # identical but for the ids each target gave the responses continued
        # The media and embeddings requests' send times too; a schedule a replay didn't keep (its requests
        # waited for a cap) is not the one it hashes.
        "same_schedule": wa["schedule"] == wb["schedule"]
        and all(wa[f"{n}_schedule"] == wb[f"{n}_schedule"] for n in APART)
        and wa["schedule_kept"]
        and wb["schedule_kept"],
        "same_media_requests": wa["media_set"] == wb["media_set"],  # the media requests, whatever their order
        "same_embeddings_requests": wa["embeddings_set"] == wb["embeddings_set"],  # the embeddings requests, as media
        "how": how,
        "bodies_unknown": unknown["A"] + unknown["B"],  # the sides' requests sent with a body not kept
        "only_a": only_a,
        "only_b": only_b,
        "a": wa,
        "b": wb,
    }


def _media_differences(con: Any, folder: Path, names: list[str]) -> dict[str, dict[str, int]]:
    """How the sides' requests of the identities ``names`` (of ``APART``, those whose hashes differ) differ,
    by kind (``image``, ..., ``embeddings``): each side's count (``a``, ``b``) and how many of each side's
    the other lacks (``only_a``, ``only_b``; both 0: the same requests in another order), from their
    digest counts in compare's workspace. Where none of an identity's kinds differs, their order does
    (all its kinds are given)."""
    if not names:
        return {}
    files = [quoted(str(_media_file(folder / f"digests_{s}.parquet"))) for s in "ab"]
    rows = con.execute(
        "SELECT kind, coalesce(sum(a.n), 0), coalesce(sum(b.n), 0), "
        "sum(greatest(coalesce(a.n, 0) - coalesce(b.n, 0), 0)), sum(greatest(coalesce(b.n, 0) - coalesce(a.n, 0), 0)) "
        f"FROM read_parquet({files[0]}, hive_partitioning = false) a "
        f"FULL JOIN read_parquet({files[1]}, hive_partitioning = false) b USING (kind, digest) GROUP BY kind ORDER BY kind"
    ).fetchall()
    out = {str(kind): {"a": int(na), "b": int(nb), "only_a": int(oa), "only_b": int(ob)} for kind, na, nb, oa, ob in rows}
    found: dict[str, dict[str, int]] = {}
    for name in names:
        kinds = {k: d for k, d in out.items() if (k == "embeddings") == (name == "embeddings")}
        # A kind whose requests are alike on both sides is the same; where none differs, their order does.
        found |= {kind: d for kind, d in kinds.items() if d["only_a"] or d["only_b"]} or kinds
    return found


def media_words(media: dict[str, dict[str, int]]) -> str:
    """``_media_differences`` in words: ``the image generation requests differ: A's 2, B's 2, 1 of A's
    not in B, 1 of B's not in A``; ``the embeddings requests differ: ...``."""
    said = []
    for name in APART:
        kinds = {k: d for k, d in media.items() if (k == "embeddings") == (name == "embeddings")}
        if kinds and not any(d["only_a"] or d["only_b"] for d in kinds.values()):
            counted = " and ".join(f"{d['a']} {kind}" for kind, d in kinds.items())
            what = "image, video and speech generation requests" if name == "media" else APART_WORDS[name]
            said.append(f"the {what} are the same ({counted}) sent in another order")
        else:
            said += [
                f"the {kind}{' generation' if kind != 'embeddings' else ''} requests differ: A's {d['a'] or 'none'}, "
                f"B's {d['b'] or 'none'}, {d['only_a']} of A's not in B, {d['only_b']} of B's not in A"
                for kind, d in kinds.items()
            ]
    return "; ".join(said)


def _rechained_siblings(wa: dict[str, Any], wb: dict[str, Any], a_path: Any, b_path: Any) -> int:
    """For two replays of one workload with the same transforms whose identities differ: the number
    of requests each sent with ``previous_response_id`` rewritten to its target's ids, when those ids
    are all that differs (each capture's identity again, every rewritten id put back as recorded);
    else 0. No two replays of a Responses conversation were otherwise ever the same traffic."""
    sa, sb = wa.get("source") or {}, wb.get("source") or {}
    n = wa.get("rechained") or 0
    if not n or n != wb.get("rechained") or not sa or sa.get("workload") != sb.get("workload"):
        return 0
    if wa.get("derived_by") != wb.get("derived_by"):
        return 0
    return n if _unchained(a_path) == _unchained(b_path) else 0


def _unchained(path: Any) -> str:
    """A replay's workload identity with each ``previous_response_id`` it rewrote named as recorded."""
    tally = IdentityTally()
    for record in CaptureReader(path).records():
        if record.get("type") == "exchange" and "rechained_from" in record:
            record = {**record, "request_body": rechained(record["request_body"], record["rechained_from"])}
        tally.add(record)
    return tally.identity().workload


def traffic_line(t: dict[str, Any]) -> str:
    """Whether A and B saw identical traffic, as one line: the CLI and the report say it up front,
    since every B/A below depends on it."""
    ids = f"A {t['a']['short']}, B {t['b']['short']}"
    if t["identical"] or t.get("rechained_only"):
        not_kept = [f"{name.upper()}'s {why}" for name in "ab" if (why := schedule_not_kept(t[name])) is not None]
        schedule = "same schedule" if t["same_schedule"] else "a different schedule (send times)"
        if t["identical"]:
            # The media and embeddings requests are in no speed figure: named, so "identical" is seen to cover them.
            # Beside no text request ("no_text"), they are all the traffic.
            them = "" if t.get("no_text") else " beside them"
            beside = [f"the same {not_text_words(t['a']['not_text'])}{them}"] if t["a"].get("media_requests") else []
            if n := t["a"].get("embeddings_requests"):
                beside.append(f"the same {n} embeddings request{'s' if n != 1 else ''}{them}")
            if t.get("no_text"):
                beside.insert(0, NO_TEXT)
            return f"traffic: identical ({ids}; {'; '.join([schedule, *not_kept, *beside])})"
        return f"traffic: the same workload ({ids}): {t['how']}; {'; '.join([schedule, *not_kept])}"
    if t.get("bodies_unknown"):
        return f"traffic: NOT known to be identical ({ids}): {t['how']}; speed ratios below may compare different workloads"
    if t.get("text_identical"):  # the speed figures are over the text requests alone
        differ = [w for n, w in APART_WORDS.items() if t["a"][n] != t["b"][n]]
        reordered = all(t.get(f"same_{n}_requests", True) for n in APART)
        words = f"the same {' and '.join(differ)} sent in another order" if reordered else f"different {' or '.join(differ)}"
        if t.get("no_text"):
            return f"traffic: NOT identical ({ids}): {t['how']}; no speed table below (it is over text generation alone; their answers and e2e are said under Speed)"
        return f"traffic: NOT identical ({ids}): {t['how']}; speed ratios below compare the same text workload, beside {words}"
    if not t["only_a"] and not t["only_b"]:  # one multiset of requests, sent in another order
        return f"traffic: NOT identical ({ids}): {t['how']}; speed ratios below compare the same requests sent in another order"
    return f"traffic: NOT identical ({ids}): {t['how']}; speed ratios below compare different workloads"
