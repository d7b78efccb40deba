"""What compare says of its logprob KL: its figures, and whose probabilities each was taken over.

llama.cpp's post-sampling probabilities are cut and renormalised by top_k/top_p/min_p, so a KL over
them moves with the sampling settings as well as the model, and a KL between them and the model's own
logprobs would compare two different things (``divergence.post_sampling``): the pairs of each kind
have figures of their own, never one mean of both. One wording, for the terminal table and the HTML
report.
"""

from __future__ import annotations

from typing import Any

KL = "logprob KL over the shared prefix (mean)"
TOP1 = "top-1 agreement"
POST_SAMPLING = "KL over post-sampling probabilities (after top_k/top_p): moves with sampling settings as well as the model"
POST_SAMPLING_KL = "logprob KL over the shared prefix, post-sampling probabilities (mean)"
POST_SAMPLING_TOP1 = "top-1 agreement, post-sampling probabilities"
NOT_COMPARABLE = {
    "a_post_sampling": "logprob KL not comparable: A's post-sampling, B's the model's",
    "b_post_sampling": "logprob KL not comparable: B's post-sampling, A's the model's",
}


def logprob_rows(logprobs: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) rows for compare's ``divergence.logprobs``: the KL and top-1 agreement over
    the model's own logprobs; apart, those over post-sampling probabilities on both sides, with
    how many pairs and what they move with; and how many pairs got no KL, one side's being so."""
    rows = []
    if logprobs.get("kl_mean") is not None:
        rows += [(KL, f"{logprobs['kl_mean']:.4f}"), (TOP1, f"{logprobs['top1_agreement']:.1%}")]
    post = logprobs.get("post_sampling")
    if post and post.get("kl_mean") is not None:
        rows += [
            (POST_SAMPLING_KL, f"{post['kl_mean']:.4f}"),
            (POST_SAMPLING_TOP1, f"{post['top1_agreement']:.1%}"),
            (POST_SAMPLING, f"{post['pairs']} pairs, apart from the {logprobs.get('pairs', 0)} over the model's logprobs"),
        ]
    for key, label in NOT_COMPARABLE.items():
        if n := (logprobs.get("not_comparable") or {}).get(key):
            rows.append((label, f"{n} pairs"))
    return rows
