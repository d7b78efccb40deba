"""A Responses answer that said ``completed`` with as many output tokens as its request's
``max_output_tokens``: llama-server's Responses API says ``status: "completed"`` (no
``incomplete_details``) for an answer it cut at the limit, where OpenAI and vLLM say
``"incomplete"`` (``max_output_tokens``), read as finish ``length``.

infertap keeps the server's word (finish ``stop``): an answer that ended by itself on its last
allowed token says the same, so no reason is invented. But a comparison with an engine that says
``length`` would list a finish difference that may be only the server's wording; ``compare``
counts those pairs apart and says so (``finish_completed_at_limit``, ``divergence_notes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infertap.apis import Output
from infertap.apis.body import unencoded
from infertap.apis.read import json_body
from infertap.apis.shapes import as_int

_LIMIT = b'"max_output_tokens"'


def completed_at_limit(record: Mapping[str, Any], out: Output) -> int | None:
    """The request's ``max_output_tokens`` where ``out``, a Responses answer, said ``completed`` with
    exactly that many output tokens (its usage's); else None. The request is read only for such an
    answer, and parsed only where its body names the limit."""
    if out.api != "responses" or out.finish_reason_raw != "completed" or not out.output_tokens:
        return None
    plain = unencoded(record.get("request_body") or b"", record.get("request_headers"))
    if _LIMIT not in plain:
        return None
    limit = as_int((json_body(plain) or {}).get("max_output_tokens"))
    return limit if limit is not None and limit == out.output_tokens else None
