"""The response id in the kept head of a Responses API answer the recorder cut (``response_not_kept``).

Past ``--max-response-mb`` only the head of a response is kept, and its answer is unknown. The
Responses API sends the answer's id first (the ``response.created`` event, or the JSON body's
leading ``"id"``), so the head still names it: a later turn that continues it by
``previous_response_id`` is linked to it (analysis) and sent with the target's id (replay). Only
the id is read from the head: the answer itself stays unknown.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .body import decoding, ended_payloads, framing, head_of
from .read import _NOTHING, RESPONSES, _by_path, _loads, api_for, fold, json_body, response_not_kept
from .shapes import Event

_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


def kept_response_id(record: Mapping[str, Any]) -> str | None:
    """The id a cut (``response_not_kept``) 2xx Responses API answer names in its kept head; None
    where the head holds none (cut before the id arrived), the answer is whole (``read_response``
    reads its id) or is another API's."""
    if not response_not_kept(record) or not 200 <= (record.get("status") or 0) < 300:
        return None
    api = _by_path(record.get("path")) or api_for(record.get("path"), json_body(record.get("request_body")))
    if api is not RESPONSES:
        return None
    pieces, _ = decoding(record)  # a cut gzip or deflate stream decodes as far as it goes
    if not pieces:
        return None
    how = framing(record, head_of(pieces))
    if how == "json":
        return leading_id(b"".join(pieces))
    payloads, _ = ended_payloads(record, pieces, how)  # a last event cut mid-way is no JSON: skipped
    events = [Event(p.chunk, p.data, _NOTHING, _loads(p.data)) for p in payloads]
    return fold(api, events, how).response_id


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
