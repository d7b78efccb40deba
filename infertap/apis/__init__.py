"""The API families infertap reads, each through one adapter, into the same shapes.

``read_request(record)`` says what a request asks for (API, model, conversation turns, tools,
sampling settings); ``read_response(record)`` what its response said (text, reasoning, tool calls,
finish reason in a common vocabulary with the API's own word kept, token counts, each event with
the chunk that completed it). A body no adapter understands is ``readable=False``, never an empty
answer. Imports nothing of the rest of infertap: the capture's bytes are all it needs.

Names are loaded on first use (PEP 562), as ``infertap.analysis``'s are: importing one module of
this package (``infertap.capture`` reads ``body``'s marks) doesn't load every API's reader, which
a warm ``infertap stats`` never runs.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from ..lazy_names import lazy_attribute

if TYPE_CHECKING:  # what the type checker sees; at run time each name is imported when first asked for
    from .body import NOT_IN_FILE, NOT_KEPT, TOO_LARGE, decoded_chunks, ended_by_marker, header
    from .conversation import Link, Links, links_of
    from .count_sources import TOKEN_IDS_SOURCE
    from .finishing import FINISHING_APIS, MARKER_APIS
    from .kept import TailUsage, kept_response_id, tail_usage, with_tail_usage
    from .linking import link, sessions_of, think_times, think_times_from, turns_of
    from .output_count import answer_tokens, carries_token, event_text, read_counted, text_is_output, tool_deltas
    from .read import (
        APIS,
        api_for,
        body_apis,
        is_generation,
        json_body,
        not_in_file,
        read_request,
        read_response,
        response_not_kept,
        stream_done,
    )
    from .sampling import ALIASES, SAMPLING, canonical, sampling_fields
    from .shapes import (
        FINISH_REASONS,
        Api,
        Delta,
        Event,
        Output,
        Request,
        SettingsPlace,
        ToolCallPart,
        Turn,
        canonical_arguments,
        one_prompt,
    )
    from .unfinished import ErrorMarkScan, cut_short, ended_answer, ended_unfinished, unfinished

#: Where each public name lives.
_HOME = {
    "ALIASES": ".sampling",
    "Link": ".conversation",
    "Links": ".conversation",
    "link": ".linking",
    "links_of": ".conversation",
    "sessions_of": ".linking",
    "think_times": ".linking",
    "think_times_from": ".linking",
    "turns_of": ".linking",
    "APIS": ".read",
    "FINISH_REASONS": ".shapes",
    "NOT_IN_FILE": ".body",
    "NOT_KEPT": ".body",
    "TOO_LARGE": ".body",
    "SAMPLING": ".sampling",
    "Api": ".shapes",
    "Delta": ".shapes",
    "Event": ".shapes",
    "Output": ".shapes",
    "Request": ".shapes",
    "SettingsPlace": ".shapes",
    "ToolCallPart": ".shapes",
    "Turn": ".shapes",
    "api_for": ".read",
    "body_apis": ".read",
    "canonical": ".sampling",
    "canonical_arguments": ".shapes",
    "decoded_chunks": ".body",
    "ended_by_marker": ".body",
    "header": ".body",
    "is_generation": ".read",
    "media_kind": ".media",
    "json_body": ".read",
    "not_in_file": ".read",
    "response_not_kept": ".read",
    "one_prompt": ".shapes",
    "read_request": ".read",
    "kept_response_id": ".kept",
    "tail_usage": ".kept",
    "TailUsage": ".kept",
    "with_tail_usage": ".kept",
    "read_response": ".read",
    "sampling_fields": ".sampling",
    "stream_done": ".read",
    "FINISHING_APIS": ".finishing",
    "MARKER_APIS": ".finishing",
    "ErrorMarkScan": ".unfinished",
    "cut_short": ".unfinished",
    "ended_answer": ".unfinished",
    "ended_unfinished": ".unfinished",
    "unfinished": ".unfinished",
    "answer_tokens": ".output_count",
    "carries_token": ".output_count",
    "event_text": ".output_count",
    "read_counted": ".output_count",
    "text_is_output": ".output_count",
    "TOKEN_IDS_SOURCE": ".count_sources",
    "tool_deltas": ".output_count",
}

__all__ = [
    "ALIASES",
    "Link",
    "Links",
    "link",
    "links_of",
    "sessions_of",
    "think_times",
    "think_times_from",
    "turns_of",
    "APIS",
    "FINISH_REASONS",
    "NOT_IN_FILE",
    "NOT_KEPT",
    "TOO_LARGE",
    "SAMPLING",
    "Api",
    "Delta",
    "Event",
    "Output",
    "Request",
    "SettingsPlace",
    "ToolCallPart",
    "Turn",
    "api_for",
    "body_apis",
    "canonical",
    "canonical_arguments",
    "decoded_chunks",
    "ended_by_marker",
    "header",
    "is_generation",
    "media_kind",
    "json_body",
    "not_in_file",
    "response_not_kept",
    "one_prompt",
    "read_request",
    "kept_response_id",
    "tail_usage",
    "TailUsage",
    "with_tail_usage",
    "read_response",
    "sampling_fields",
    "stream_done",
    "FINISHING_APIS",
    "MARKER_APIS",
    "cut_short",
    "ErrorMarkScan",
    "answer_tokens",
    "carries_token",
    "event_text",
    "read_counted",
    "text_is_output",
    "TOKEN_IDS_SOURCE",
    "tool_deltas",
    "ended_answer",
    "ended_unfinished",
    "unfinished",
]


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _HOME, globals(), name)


class _Package(types.ModuleType):
    """The package, whose function ``unfinished`` shares its module's name: importing that module
    sets the package's attribute to it (the import system does), which would hide the function from
    ``from infertap.apis import unfinished``. The function is bound instead, as the package bound it
    when it imported every module at once."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _HOME.get(name) == f".{name}":
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
