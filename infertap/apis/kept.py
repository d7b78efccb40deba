"""The response id in the kept head of an answer the recorder cut (``response_not_kept``).

Past ``--max-response-mb`` only the head of a response is kept, and its answer is unknown. The
answer's id comes first (a chat chunk's ``id``, the Responses API's ``response.created``, the
Messages API's ``message_start``, or a JSON body's leading ``"id"``), so the head still names it:
the analysis's ``exchanges.response_id`` holds it, a later turn that continues it by
``previous_response_id`` is linked to it (analysis) and sent with the target's id (replay). Only
the id is read from the head: the answer itself stays unknown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .body import decoding, ended_payloads, framing, head_of
from .read import CHAT, COMPLETIONS, MESSAGES, RESPONSES, _by_path, _loads, api_for, json_body, response_not_kept

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"
_TOP_LEVEL_ID = (CHAT, COMPLETIONS, MESSAGES, RESPONSES)


def kept_response_id(record: Mapping[str, Any]) -> str | None:
    """The id a cut (``response_not_kept``) 2xx answer names in its kept head; None where the head
    holds none (cut before the id arrived), or the answer is whole (``read_response`` reads its id)."""
    if not response_not_kept(record) or not 200 <= (record.get("status") or 0) < 300:
        return None
    api = _by_path(record.get("path")) or api_for(record.get("path"), json_body(record.get("request_body")))
    pieces, _ = decoding(record)  # a cut gzip or deflate stream decodes as far as it goes
    if not pieces:
        return None
    how = framing(record, head_of(pieces))
    if how == "json":  # the APIs whose whole answer names its id at its top level
        return leading_id(b"".join(pieces)) if api in _TOP_LEVEL_ID else None
    payloads, _ = ended_payloads(record, pieces, how)  # a last event cut mid-way is no JSON: skipped
    for payload in payloads:  # the id comes first: the events after it are not read
        obj = _loads(payload.data)
        if isinstance(obj, dict) and (rid := api.event(obj).response_id):
            return rid
    return None


def leading_id(head: bytes) -> str | None:
    """The string ``"id"`` among the top-level keys of a JSON object cut short after it, read key by
    key up to the cut; None where the cut comes first, or the head is no JSON object."""
    text = head.decode("utf-8", errors="replace")
    i = _skip(text, 0)
    if not text.startswith("{", i):
        return None
    i += 1
    try:
        while True:
            key, i = _DECODER.raw_decode(text, _skip(text, i))
            i = _skip(text, i)
            if not isinstance(key, str) or not text.startswith(":", i):
                return None
            value, i = _DECODER.raw_decode(text, _skip(text, i + 1))
            if key == "id":
                return value if isinstance(value, str) else None
            i = _skip(text, i)
            if not text.startswith(",", i):
                return None  # the object ended, or the head did, before an id
            i += 1
    except ValueError:  # the head ends mid-value: the id, if any, came later
        return None


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i
