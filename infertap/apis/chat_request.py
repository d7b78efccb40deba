"""``ChatRequests``: the usual chat request read as ``read_request`` reads it, each message once per capture.

An agent's every request restates its conversation so far, so a capture of sessions of n turns
holds each message about n/2 times, and ``read_request`` builds every one of them into Python
objects again each time (the most of a decode's time on agent traffic, after the streamed answers).
Here msgspec splits the body's top level into its fields as JSON text, without building them; the
small fields are read, the tools' names are remembered by their JSON, and each message is read the
first time its bytes follow the same conversation (``ChatPrefixes``, which gives linking its
digests as well). Anything else (another API, a body that isn't a JSON object in UTF-8 that msgspec
reads, messages that aren't a list, a value that isn't JSON) returns None, and the caller reads the
exchange with ``read_request``: this path answers only where it answers exactly as that one does
(tests/apis/test_chat_request.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from .conversation import ChatPrefixes, Prefixes
from .fastjson import NOT_JSON, loads, utf8
from .openai import chat_system
from .read import _INPUTS, CHAT, _by_path, request_of
from .shapes import Request, Turn

_fields = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_items = msgspec.json.Decoder(list[msgspec.Raw]).decode
_TOOL_SETS = 1024  # distinct tool lists remembered; an agent offers the same few in every request


class ChatRequests:
    """Chat requests read over one capture, remembering its messages and tool lists."""

    def __init__(self) -> None:
        self.prefixes = ChatPrefixes()
        self._tools: dict[bytes, tuple[str, ...]] = {}

    def read(self, record: Mapping[str, Any]) -> tuple[Request, Prefixes] | None:
        """``read_request(record)`` and its conversation's ``Prefixes``, or None (see above).
        ``Request.body`` holds the body's fields but ``messages`` and ``tools`` (read into
        ``turns`` and ``tools``): only whether there is a body is asked of it here."""
        raw = record.get("request_body")
        if not raw or _by_path(record.get("path")) is not CHAT or raw.lstrip()[:1] != b"{":
            return None
        if not utf8(raw):
            return None
        try:
            fields = _fields(raw)
            values = {k: loads(bytes(v)) for k, v in fields.items() if k != "messages" and k != "tools"}
            messages = fields.get("messages")
            prefixes, items = Prefixes([], []), None
            turns: tuple[Turn, ...] = ()
            if messages is not None:
                listed = bytes(messages)
                if listed[:1] != b"[":
                    return None  # not a list: read_request knows what that means
                parts = _items(listed)
                prefixes, turns = self.prefixes.read(parts)
                items = len(parts)
            tools = self._tool_names(bytes(fields["tools"])) if "tools" in fields else ()
        except NOT_JSON:
            return None
        generation = any(key in fields for key in _INPUTS)
        request = request_of(CHAT, values, generation, turns, items, chat_system(turns), tools)
        return request, prefixes

    def _tool_names(self, listed: bytes) -> tuple[str, ...]:
        names = self._tools.get(listed)
        if names is None:
            names = CHAT.tools({"tools": loads(listed)})
            if len(self._tools) >= _TOOL_SETS:
                self._tools.clear()
            self._tools[listed] = names
        return names


__all__ = ["ChatRequests"]
