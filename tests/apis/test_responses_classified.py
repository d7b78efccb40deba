"""Every output item of the installed openai SDK's Responses API is one the Responses adapter
classified: read apart (a message, reasoning, a call of a function, custom or MCP tool), a built-in
tool's call read whole, or kept whole; and each field of an item read apart (and of a message's
parts) compared or left out on purpose. An item added to the API since is compared whole, never
read as nothing; a field added to a call (a function's ``namespace`` and ``caller`` were dropped
so) must be classified before it can be missed. When the SDK grows, these fail until the adapter
says what it makes of the addition. So does every stream event: read, or left out with the reason
(an audio answer's transcript was read as nothing so)."""

from __future__ import annotations

import typing

from openai.types.responses import ResponseOutputItem, ResponseOutputMessage, ResponseStreamEvent

from infertap.apis import responses
from tests.sdk_unions import members, type_of, unclassified_fields

_ITEMS = members(ResponseOutputItem)
(_CONTENT,) = typing.get_args(ResponseOutputMessage.model_fields["content"].annotation)  # List[Content]
_PARTS = members(_CONTENT)
_EVENTS = {type_of(m) for m in members(ResponseStreamEvent)}


def test_every_output_item_type_is_read_or_kept_whole() -> None:
    classified = {*responses.FIELDS, *responses.BUILT_IN_CALLS, *responses.KEPT_WHOLE}
    assert {type_of(m) for m in _ITEMS} - classified == set()


def test_every_field_of_an_item_read_apart_is_compared_or_left_out_on_purpose() -> None:
    assert unclassified_fields((*_ITEMS, *_PARTS), responses.FIELDS) == {}


def test_the_adapter_reads_each_item_as_classified() -> None:
    """A built-in call is read as a call, an item kept whole is not; an item read apart is one the
    adapter reads. A type listed twice, or one the SDK does not send (a typo classifies nothing), fails."""
    sent = {type_of(m) for m in (*_ITEMS, *_PARTS)}
    listed = [*responses.FIELDS, *responses.BUILT_IN_CALLS, *responses.KEPT_WHOLE]
    assert len(listed) == len(set(listed)) and set(listed) - sent == set()
    assert all(responses.is_call(kind) for kind in responses.BUILT_IN_CALLS)
    assert not any(responses.is_call(kind) for kind in responses.KEPT_WHOLE)


def test_every_stream_event_type_is_read_or_left_out_on_purpose() -> None:
    """An event type added to the API fails here until the adapter says whether it holds something of
    the answer; one listed twice, or one the SDK does not send, fails too."""
    listed = [*responses.STREAM_EVENTS_READ, *responses.STREAM_EVENTS_LEFT_OUT]
    assert len(listed) == len(set(listed))
    assert _EVENTS - set(listed) == set()
    assert set(listed) - _EVENTS == set()
    assert all(responses.STREAM_EVENTS_LEFT_OUT.values())
