"""Sampling settings under one name each, whichever API or engine spelled them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Canonical names of sampling settings, and the names APIs and engines use for them.
ALIASES = {
    "repetition_penalty": "repeat_penalty",
    "n_predict": "max_tokens",
    "num_predict": "max_tokens",
    "max_completion_tokens": "max_tokens",
    "max_new_tokens": "max_tokens",
    "max_output_tokens": "max_tokens",  # OpenAI Responses
    "stop_sequences": "stop",  # Anthropic Messages
    "mirostat_mode": "mirostat",
    "min_new_tokens": "min_tokens",  # SGLang's sampling_params
    "sampling_seed": "seed",  # SGLang's sampling_params
}
SAMPLING = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "max_tokens",
    "min_tokens",
    "stop",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
    "n",
    "logprobs",
    "top_logprobs",
    "dry_multiplier",
    "xtc_probability",
)


#: Which field gives a setting that a body names more than once: the engines' own order where
#: one reads several (``Engine.READS``: vLLM, SGLang and llama-server take ``max_completion_tokens``
#: over ``max_tokens``, llama-server ``n_predict`` over both and, on ``/v1/responses``,
#: ``max_output_tokens`` over ``max_tokens``), else the canonical name (no engine reads both
#: ``repeat_penalty`` and ``repetition_penalty``). Never the order of the body's keys.
PRECEDENCE = {
    "max_tokens": ("n_predict", "max_completion_tokens", "max_output_tokens", "max_tokens", "num_predict", "max_new_tokens"),
    "repeat_penalty": ("repeat_penalty", "repetition_penalty"),
    "stop": ("stop", "stop_sequences"),
    "mirostat": ("mirostat", "mirostat_mode"),
    "seed": ("seed", "sampling_seed"),
}
_RANK = {key: rank for keys in PRECEDENCE.values() for rank, key in enumerate(keys)}


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def sampling_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling settings among ``fields``, under their canonical names (None values left out);
    a setting given under several names by the one that comes first in ``PRECEDENCE``."""
    out: dict[str, Any] = {}
    ranks: dict[str, int] = {}
    for key, value in fields.items():
        name = canonical(key)
        if name in SAMPLING and value is not None:
            rank = _RANK.get(key, 0)
            if rank < ranks.get(name, len(_RANK)):
                out[name], ranks[name] = value, rank
    return out
