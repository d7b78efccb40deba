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


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def sampling_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The sampling settings among ``fields``, under their canonical names (None values left out)."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        name = canonical(key)
        if name in SAMPLING and value is not None:
            out.setdefault(name, value)
    return out
