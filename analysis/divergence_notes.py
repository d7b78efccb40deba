"""What the divergence table can't show: the pairs a side failed, then per path the pairs not
compared and why, errors with no body an API reads, unreadable bodies. One wording for ``compare``
(printed) and ``report`` (HTML)."""

from __future__ import annotations

from typing import Any


def path_notes(d: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each note of ``d`` (compare's divergence) as (text, whether it is a warning), path by path."""
    notes: list[tuple[str, bool]] = []
    for path, read in d.get("readable", {}).items():
        if read.get("not_compared"):
            notes.append(
                (f"{path}: {read['not_compared']} pairs not compared (no API's answer: a model list, tokens, embeddings)", False)
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
