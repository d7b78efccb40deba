"""What compare says beside its logprob KL: whose probabilities it was taken over.

llama.cpp's post-sampling probabilities are cut and renormalised by top_k/top_p/min_p, so a KL over
them moves with the sampling settings as well as the model, and a KL between them and the model's own
logprobs would compare two different things (``divergence.post_sampling``). One wording, for the
terminal table and the HTML report.
"""

from __future__ import annotations

from typing import Any

POST_SAMPLING = "KL over post-sampling probabilities (after top_k/top_p): moves with sampling settings as well as the model"
NOT_COMPARABLE = {
    "a_post_sampling": "logprob KL not comparable: A's post-sampling, B's the model's",
    "b_post_sampling": "logprob KL not comparable: B's post-sampling, A's the model's",
}


def logprob_notes(logprobs: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows for compare's ``divergence.logprobs``: how many of its KL's pairs were over
    post-sampling probabilities on both sides, and how many pairs got no KL, one side's being so."""
    rows = []
    if n := logprobs.get("post_sampling"):
        rows.append((POST_SAMPLING, f"{n} of {logprobs['pairs']} pairs"))
    for key, label in NOT_COMPARABLE.items():
        if n := (logprobs.get("not_comparable") or {}).get(key):
            rows.append((label, f"{n} pairs"))
    return rows
