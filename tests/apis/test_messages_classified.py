"""Every content block, delta and stream event of the installed anthropic SDK's (beta) Messages is one
the Messages adapter classified: read (words, a call, a server tool's result) or kept whole, and
each field of a block it reads apart compared or left out on purpose. A block added to the API
since is compared whole, never read as nothing; a field added to a call (``toolset_name`` was
dropped so: the browser's ``left_click`` compared equal to the computer's) must be classified
before it can be missed. When the SDK grows, these fail until the adapter says what it makes of
the addition."""

from __future__ import annotations

from typing import Any

from anthropic.types import ContentBlock, RawContentBlockDelta, RawMessageStreamEvent
from anthropic.types.beta import (
    BetaContentBlock,
    BetaMessage,
    BetaRawContentBlockDelta,
    BetaRawMessageDeltaEvent,
    BetaRawMessageStreamEvent,
)
from anthropic.types.beta.beta_raw_message_delta_event import Delta as MessageDelta

from infertap.apis import messages
from tests.sdk_unions import fields, members, type_of, unclassified_fields

_BLOCKS = [*members(BetaContentBlock), *members(ContentBlock)]
_DELTAS = [*members(BetaRawContentBlockDelta), *members(RawContentBlockDelta)]


def test_every_block_type_is_read_or_kept_whole() -> None:
    classified = {*messages.FIELDS, *messages.RESULTS, *messages.KEPT_WHOLE}
    assert {type_of(m) for m in _BLOCKS} - classified == set()


def test_every_delta_type_is_read_or_merged_into_its_block() -> None:
    assert {type_of(m) for m in _DELTAS} - {*messages.FIELDS, *messages.KEPT_DELTAS} == set()


def test_every_stream_event_type_is_read() -> None:
    events = [*members(BetaRawMessageStreamEvent), *members(RawMessageStreamEvent)]
    assert {type_of(m) for m in events} - set(messages.EVENTS) == set()


def test_every_field_of_a_block_read_apart_is_compared_or_left_out_on_purpose() -> None:
    assert unclassified_fields((*_BLOCKS, *_DELTAS), messages.FIELDS) == {}


def test_every_field_of_a_message_is_classified() -> None:
    compared, left_out = messages.MESSAGE_FIELDS
    known = {"type", *compared, *left_out}
    assert fields(BetaMessage) - known == set()
    assert fields(MessageDelta) - known == set()  # message_delta's delta
    assert fields(BetaRawMessageDeltaEvent) - {"delta", *known} == set()


def test_the_classification_holds_no_type_the_sdk_does_not_know() -> None:
    """Must differ from nothing made up: each classified type is one the SDK sends (else a typo there
    would classify nothing and the checks above would pass on a name no block has)."""
    sent: set[Any] = {type_of(m) for m in (*_BLOCKS, *_DELTAS)}
    assert {*messages.FIELDS, *messages.RESULTS, *messages.KEPT_WHOLE, *messages.KEPT_DELTAS} - sent == set()
