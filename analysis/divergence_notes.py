"""What the divergence table can't show: the pairs a side failed, then per path the pairs not
compared and why, errors with no body an API reads, unreadable bodies; the embeddings answers,
compared by their vectors, and the image, video and speech answers, by their bytes. One wording for ``compare`` (printed) and ``report`` (HTML)."""

from __future__ import annotations

from typing import Any


def path_notes(d: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each note of ``d`` (compare's divergence) as (text, whether it is a warning), path by path."""
    notes: list[tuple[str, bool]] = []
    for path, read in d.get("readable", {}).items():
        if read.get("not_compared"):
            notes.append(
                (f"{path}: {read['not_compared']} pairs not compared (no API's answer: a model list, tokens, a rerank)", False)
            )
        if read.get("not_in_file"):
            notes.append(
                (
                    f"{path}: {read['not_in_file']} pairs not compared (an answer not in the file it was imported from: "
                    "a HAR saved without content or with only its head, a body mitmproxy streamed, a WebSocket's messages)",
                    True,
                )
            )
        if read.get("too_large"):
            notes.append(
                (
                    f"{path}: {read['too_large']} pairs not compared (an answer whose body decodes past what analysis reads "
                    "of one: a decompression bomb, or a body over 64 MiB decoded)",
                    True,
                )
            )
        if read.get("response_not_kept"):
            notes.append(
                (
                    f"{path}: {read['response_not_kept']} pairs not compared (an answer the recorder kept only the head of: "
                    "over its response limit, --max-response-mb)",
                    True,
                )
            )
        if read.get("error_body_unread_a") or read.get("error_body_unread_b"):
            notes.append(
                (
                    f"{path}: errors with no body an API reads ({read['error_body_unread_a']} in A, "
                    f"{read['error_body_unread_b']} in B: a 404 for a path the engine doesn't serve, or no answer at all): "
                    "counted as errors, by their status or ending; two match where status, ending and body are the same",
                    True,
                )
            )
        if read["unreadable_a"] or read["unreadable_b"]:
            notes.append(
                (
                    f"{path}: {read['read_both']} of {read['pairs']} pairs readable on both sides ({read['unreadable_a']} "
                    f"unreadable in A, {read['unreadable_b']} in B: no API adapter understood the body; never counted as a match)",
                    True,
                )
            )
        if read.get("partly_unreadable"):
            notes.append(
                (
                    f"{path}: {read['partly_unreadable']} of {read['pairs']} pairs with a payload that is not JSON on a side "
                    "(what it said is unknown: a match only where both sides sent the same bytes)",
                    True,
                )
            )
    return notes


def limit_note(d: dict[str, Any]) -> str | None:
    """The pairs whose finish reason differs where one side said ``completed`` with as many output
    tokens as its request's ``max_output_tokens`` and the other ``length`` (analysis/completed_at_limit.py):
    kept as the server said, and said here, since the difference may be only its wording."""
    n = (d.get("counts") or {}).get("finish_completed_at_limit")
    if not n:
        return None
    return (
        f"finish reason: {n} of the {d['counts']['finish_reason_changed']} pairs whose finish reason differs are a "
        "Responses answer that said completed (stop) with exactly its request's max_output_tokens of output against "
        "one that said length: llama-server's Responses API says completed for an answer it cut at the limit, so "
        "these may differ only in its wording (kept as each server said; an answer that ended by itself on its "
        "last allowed token reads the same)"
    )


def failed_note(d: dict[str, Any]) -> str | None:
    """The pairs left out of every figure of the outputs because a side failed, by side, and what
    those figures are over: a side that fails more often is less reliable, not another answerer.
    None where no side failed."""
    failed = d.get("failed") or {}
    if not failed.get("pairs"):
        return None
    both = f"both {failed['both']}"
    if failed["both"]:
        both += f" ({failed['both_same']} the same failure, an exact match; {failed['both_differ']} different failures)"
    return (
        f"{failed['pairs']} pairs not compared for output, a side failed (an error status or body, no response, "
        f"a stream cut short or unfinished): A only {failed['a_only']}, B only {failed['b_only']}, {both}; "
        f"similarity, first divergence and what changed are over the {d['outputs_compared']} pairs with no side "
        f"failed, exact match over all {d['pairs']}" + _not_generation(failed.get("not_generation"))
    )


def _not_generation(n: int | None) -> str:
    """Where some failed pairs are of no generation request: the answers and speed lines count
    generation requests only, so their failures would not add up to these without it."""
    if not n:
        return ""
    return (
        f"; {n} of the failed pairs {'is' if n == 1 else 'are'} of no generation request (no messages, input or prompt), "
        "in none of the answers and speed lines, which count generation requests only"
    )


#: How many of the pairs a side failed the terminal and the report name; ``--json`` lists ``--top``.
FAILED_NAMED = 3


def failed_ids_note(d: dict[str, Any]) -> str | None:
    """A few of the pairs a side failed, by id as section 4 names pairs, with each failed side's
    failure: ``failed pairs: A 3f2a9b1c / B 9b1c3f2a (B status 500); ...; 4 more (compare --json
    lists them by --top)``. None where no side failed."""
    listed = d.get("failed_pairs") or []
    total = (d.get("failed") or {}).get("pairs") or 0
    if not total:
        return None
    named = [
        f"A {p['a_id'][:8]} / B {p['b_id'][:8]} ("
        + ", ".join(f"{side.upper()} {p[side]}" for side in ("a", "b") if p[side] is not None)
        + ")"
        for p in listed[:FAILED_NAMED]
    ]
    more = total - len(named)
    if not named:
        return f"failed pairs: {total}, none listed (compare --json lists the first --top of them)"
    tail = f"; {more} more (compare --json lists the first --top of them)" if more else ""
    return "failed pairs: " + "; ".join(named) + tail


#: How many of the least similar embeddings pairs the terminal and the report name; ``--json`` lists ``--top``.
EMBEDDINGS_NAMED = 3


def embedding_notes(d: dict[str, Any]) -> list[tuple[str, bool]]:
    """The embeddings pairs (compare's ``embeddings``, embedding_divergence), as (text, whether it
    warns): how many were compared, identical, below the cosine floor, of another dimension; the
    cosine over their vectors; why an answer was not read; the least similar pairs by id."""
    e = d.get("embeddings")
    if not e:
        return []
    left = [f"{e['failed']} a side failed"] if e["failed"] else []
    if e["not_read_a"] or e["not_read_b"]:
        left.append(f"answers not read: A {e['not_read_a']}, B {e['not_read_b']}")
    floor = f"{e['cosine_floor']:g}"
    differ = [f"{e['below_floor']} below cosine {floor}"]
    if e["dimensions_differ"]:
        dims = ", ".join(f"A {a} vs B {b} ×{n}" for a, b, n in e["dimensions"])
        differ.append(f"{e['dimensions_differ']} of another dimension ({dims})")
    if e["count_differs"]:
        differ.append(f"{e['count_differs']} with another number of vectors")
    if e["not_finite"]:
        differ.append(f"{e['not_finite']} with a value not finite (NaN or infinite)")
    if e["length_differs"]:
        differ.append(f"{e['length_differs']} of another length (one side normalized, the other not?)")
    cosine = (
        f"cosine similarity over {e['vectors']} vectors: mean {e['cosine_mean']:.6f}, min {e['cosine_min']:.6f}"
        if e["vectors"]
        else "no vectors compared"
    )
    notes = [
        (
            f"embeddings: {e['pairs']} pairs of embeddings answers, {e['compared']} compared"
            + (f" ({'; '.join(left)})" if left else "")
            + f": {e['identical']} identical, {e['differ']} differ ({', '.join(differ)}); {cosine}",
            bool(e["differ"]),
        )
    ]
    for side in ("a", "b"):
        if why := e["why_not_read"].get(side):
            notes.append((f"embeddings: {side.upper()}'s answers not read: {why} (the first; in no figure above)", True))
    named = [
        f"A {p['a_id'][:8]} / B {p['b_id'][:8]} ("
        + ("cosine -" if p["cosine_min"] is None else f"cosine {p['cosine_min']:.6f}")
        + (f", dimensions {p['dimensions'][0]} vs {p['dimensions'][1]}" if "dimensions" in p else "")
        + (f", vectors {p['vectors'][0]} vs {p['vectors'][1]}" if p["vectors"][0] != p["vectors"][1] else "")
        + ")"
        for p in e["least_similar"][:EMBEDDINGS_NAMED]
    ]
    return notes + _named_pairs("embeddings that differ most", named, e["differ"])


def _named_pairs(label: str, named: list[str], differ: int) -> list[tuple[str, bool]]:
    """The note naming the first pairs that differ, of ``differ`` in all (none where none is named)."""
    if not named:
        return []
    more = differ - len(named)
    tail = f"; {more} more (compare --json lists the first --top of them)" if more > 0 else ""
    return [(f"{label}: " + "; ".join(named) + tail, True)]


#: How many of the media pairs that differ the notes name by id (``--json`` lists ``--top`` of them).
MEDIA_NAMED = 3


def media_notes(d: dict[str, Any]) -> list[tuple[str, bool]]:
    """The image, video and speech pairs (compare's ``media``, media_divergence), as (text, whether it
    warns): by kind, how many were compared and byte-identical or not (no text divergence applies); why
    an answer was not read; the first pairs that differ by id."""
    m = d.get("media")
    if not m:
        return []
    notes = []
    for kind, k in m["kinds"].items():
        left = [f"{k['failed']} a side failed"] if k["failed"] else []
        if k["not_read_a"] or k["not_read_b"]:
            left.append(f"outputs not read: A {k['not_read_a']}, B {k['not_read_b']}")
        more = f", {k['count_differs']} with another number of outputs" if k["count_differs"] else ""
        notes.append(
            (
                f"{kind} outputs: {k['pairs']} pairs of {kind} answers, {k['compared']} compared"
                + (f" ({'; '.join(left)})" if left else "")
                + f": {k['identical']} byte-identical, {k['differ']} differ{more}",
                bool(k["differ"] or k["not_read_a"] or k["not_read_b"]),
            )
        )
    for side in ("a", "b"):
        if why := m["why_not_read"].get(side):
            notes.append((f"media outputs: {side.upper()}'s not read: {why} (the first; in no figure above)", True))
    named = [
        f"A {p['a_id'][:8]} / B {p['b_id'][:8]} ({p['kind']}: {p['made'][0]} vs {p['made'][1]} made, "
        f"{p['bytes'][0]} vs {p['bytes'][1]} bytes)"
        for p in m["differing"][:MEDIA_NAMED]
    ]
    return notes + _named_pairs("media outputs that differ", named, m["differ"])
