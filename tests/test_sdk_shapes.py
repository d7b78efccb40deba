"""The SDK check the test builders rely on: it must refuse what a real API would never send."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from tests import sdk_shapes


def _chunk(**more: Any) -> dict[str, Any]:
    delta = {"content": "hi", **more}
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [{"index": 0, "delta": delta}]}


def test_a_body_the_sdk_reads_whole_is_returned_as_given() -> None:
    chunk = _chunk(reasoning_content="because")  # an engine's own field, named in ENGINE_FIELDS
    assert sdk_shapes.chat_chunk(chunk) is chunk


def test_a_required_field_left_out_is_refused() -> None:
    chunk = _chunk()
    del chunk["created"]
    with pytest.raises(pydantic.ValidationError, match="created"):
        sdk_shapes.chat_chunk(chunk)


def test_a_field_the_sdk_does_not_know_is_refused_at_any_depth() -> None:
    with pytest.raises(AssertionError, match=r"choices\[0\]\.delta\.contents"):
        sdk_shapes.chat_chunk(_chunk(contents="typo"))


def test_a_stream_event_is_read_by_its_type() -> None:
    delta = {"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "x",
             "logprobs": [], "sequence_number": 1}  # fmt: skip
    assert sdk_shapes.response_event(delta) is delta
    with pytest.raises(pydantic.ValidationError, match="sequence_number"):
        sdk_shapes.response_event({k: v for k, v in delta.items() if k != "sequence_number"})


def test_an_event_of_no_type_the_sdk_knows_is_refused() -> None:
    with pytest.raises(AssertionError, match="no SDK model has the type .response.output_text.deltas"):
        sdk_shapes.response_event({"type": "response.output_text.deltas", "sequence_number": 1})


def test_a_text_completion_is_read_by_the_sdks_completion() -> None:
    body = {"id": "c", "object": "text_completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "text": "hi", "finish_reason": "stop", "logprobs": None}]}  # fmt: skip
    assert sdk_shapes.completion(body) is body
    with pytest.raises(pydantic.ValidationError, match="created"):
        sdk_shapes.completion({k: v for k, v in body.items() if k != "created"})
    with pytest.raises(pydantic.ValidationError, match="object"):
        sdk_shapes.completion({**body, "object": "chat.completion"})


def test_a_streamed_text_completion_may_leave_its_finish_null_until_the_last() -> None:
    chunk = {"id": "c", "object": "text_completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "text": "hi", "finish_reason": None, "logprobs": None}]}  # fmt: skip
    assert sdk_shapes.completion_chunk(chunk) is chunk
    with pytest.raises(pydantic.ValidationError, match="finish_reason"):
        sdk_shapes.completion(chunk)  # a whole answer ends with its reason
    with pytest.raises(pydantic.ValidationError, match="finish_reason"):
        sdk_shapes.completion_chunk({**chunk, "choices": [{**chunk["choices"][0], "finish_reason": "eos"}]})
