"""The API families infertap reads, each through one adapter, into the same shapes.

``read_request(record)`` says what a request asks for (API, model, conversation turns, tools,
sampling settings); ``read_response(record)`` what its response said (text, reasoning, tool calls,
finish reason in a common vocabulary with the API's own word kept, token counts, each event with
the chunk that completed it). A body no adapter understands is ``readable=False``, never an empty
answer. Imports nothing of the rest of infertap: the capture's bytes are all it needs.
"""

from .body import TOO_LARGE, decoded_chunks, ended_by_marker, header
from .conversation import Link, Links, links_of
from .kept import TailUsage, kept_response_id, tail_usage, with_tail_usage
from .linking import link, sessions_of, think_times, think_times_from, turns_of
from .read import (
    APIS,
    NOT_IN_FILE,
    NOT_KEPT,
    api_for,
    is_generation,
    json_body,
    not_in_file,
    read_request,
    read_response,
    response_not_kept,
    stream_done,
)
from .sampling import ALIASES, SAMPLING, canonical, sampling_fields
from .shapes import FINISH_REASONS, Api, Delta, Event, Output, Request, ToolCallPart, Turn, canonical_arguments, one_prompt
from .unfinished import FINISHING_APIS, MARKER_APIS, ErrorMarkScan, cut_short, ended_answer, ended_unfinished, unfinished

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
    "ToolCallPart",
    "Turn",
    "api_for",
    "canonical",
    "canonical_arguments",
    "decoded_chunks",
    "ended_by_marker",
    "header",
    "is_generation",
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
    "ended_answer",
    "ended_unfinished",
    "unfinished",
]
