"""How two runs' image, video and speech answers differ: byte-identical or not (media_output.py's digests).

No text divergence applies to them (no text, no tokens, no similarity): a pair of media answers is
identical where each thing made (each image, the audio) has the same bytes on both sides, and differs
otherwise (another image, more images, other audio). A pair a side failed is counted apart, as one
whose output could not be read (a video job, an image not base64), never as agreement. Pairs stream
through ``add`` one at a time: only counts and the first few pairs that differ are kept.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from .summaries import Summary

#: What ``result`` counts, in its order (each a number of pairs).
KEYS = ("pairs", "compared", "identical", "differ", "count_differs", "failed", "not_read_a", "not_read_b")


def _failed(s: Summary) -> bool:
    """No answer on the side: an error status, no response, or one cut short (embeddings' rule)."""
    return not (isinstance(s.status, int) and 200 <= s.status < 300) or s.end not in (None, "complete")


class MediaPairs:
    """The media pairs of a comparison, added one at a time; ``result`` is compare's ``media``."""

    def __init__(self, top: int) -> None:
        self.counts: Counter[str] = Counter()
        self.kinds: dict[str, Counter[str]] = {}  # the same counts by kind (image, video, speech)
        self.why_not_read: dict[str, str] = {}  # the first reason seen, per side
        self.top = top
        self.differing: list[dict[str, Any]] = []  # the first ``top`` pairs that differ, in A's order

    def add(self, sa: Summary, sb: Summary) -> bool | None:
        """Counts the pair of ``sa``, ``sb`` (both media answers); whether what they made is byte-identical,
        None where a side failed or its output was not read (nothing compared)."""
        assert sa.media is not None and sb.media is not None
        (kind, why_a, made_a), (_, why_b, made_b) = sa.media, sb.media
        by_kind = self.kinds.setdefault(kind, Counter())
        for counts in (self.counts, by_kind):
            counts["pairs"] += 1
        if _failed(sa) or _failed(sb):
            for counts in (self.counts, by_kind):
                counts["failed"] += 1
            return None
        for side, why in (("a", why_a), ("b", why_b)):
            if why is not None:
                for counts in (self.counts, by_kind):
                    counts[f"not_read_{side}"] += 1
                self.why_not_read.setdefault(side, f"{why} ({kind})")
        if made_a is None or made_b is None:
            return None
        identical = made_a == made_b
        for counts in (self.counts, by_kind):
            counts["compared"] += 1
            counts["identical" if identical else "differ"] += 1
            counts["count_differs"] += len(made_a) != len(made_b)
        if not identical and len(self.differing) < self.top:
            self.differing.append(
                {
                    "a_id": sa.id,
                    "b_id": sb.id,
                    "path": sa.path,
                    "kind": kind,
                    "made": [len(made_a), len(made_b)],  # how many things each side made (images)
                    "bytes": [sum(n for _, n in made_a), sum(n for _, n in made_b)],
                }
            )
        return identical

    def result(self) -> dict[str, Any] | None:
        """The counts (``KEYS``), by kind too, each side's first reason an output was not read, and the
        first pairs that differ; None where no pair was of media answers."""
        if not self.counts["pairs"]:
            return None
        return {
            **{k: self.counts[k] for k in KEYS},
            "kinds": {kind: {k: c[k] for k in KEYS} for kind, c in sorted(self.kinds.items())},
            "why_not_read": dict(self.why_not_read),
            "differing": self.differing,
        }


__all__ = ["KEYS", "MediaPairs"]
