"""Test bodies checked against the SDKs' own models (openai's, anthropic's): a body no real API would send can
hide a misreading, so every builder of an answer passes what it builds through one of these.

Each check returns what it was given, so a builder can ``return sdk_shapes.response({...})``. It refuses what the
SDK refuses (a required field missing, a value out of its ``Literal``) and, beyond the SDK, any field the model
doesn't know at any depth (the models accept extras silently, so a misspelt or invented field would pass).
Bodies that are malformed on purpose are built apart, by builders named for it, and never pass through here."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, Literal

from anthropic.types import ErrorResponse as AnthropicErrorResponse
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.beta import BetaMessage, BetaRawMessageStreamEvent
from openai.types import Completion
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseOutputItem, ResponseStreamEvent
from openai.types.shared import ErrorObject as OpenAIErrorObject
from pydantic import BaseModel, ConfigDict

from tests.sdk_unions import members, type_of


def _by_type(union: Any) -> dict[str, type[BaseModel]]:
    """A stream event union's members by their ``type`` tag: an event is read by its own model, so an error names
    what that event lacks rather than every member's."""
    return {type_of(model): model for model in members(union)}


_RESPONSE_EVENT = _by_type(ResponseStreamEvent)
_OUTPUT_ITEM = _by_type(ResponseOutputItem)
_MESSAGE_EVENT = _by_type(RawMessageStreamEvent)
_BETA_MESSAGE_EVENT = _by_type(BetaRawMessageStreamEvent)


def _event_model(models: dict[str, type[BaseModel]], event: dict[str, Any]) -> type[BaseModel]:
    if (model := models.get(event.get("type", ""))) is None:
        raise AssertionError(f"no SDK model has the type {event.get('type')!r}: {json.dumps(event)[:400]}")
    return model


# Fields real engines add to OpenAI's shapes (the SDK has no place for them), allowed wherever they appear.
ENGINE_FIELDS = {
    "reasoning_content": "vLLM, llama.cpp, SGLang: a chat delta's or message's reasoning text",
    "reasoning": "Ollama's and newer vLLM's OpenAI routes: the same, under another name",
    "timings": "llama.cpp: server-side prompt and decode times on the last chunk",
}


def unknown_fields(value: Any, path: str = "") -> list[str]:
    """Where a validated model holds fields its class doesn't declare (nor ``ENGINE_FIELDS``), as dotted paths."""
    found: list[str] = []
    if isinstance(value, BaseModel):
        found += [f"{path}.{name}".lstrip(".") for name in value.model_extra or {} if name not in ENGINE_FIELDS]
        for name in type(value).model_fields:
            found += unknown_fields(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found += unknown_fields(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            found += unknown_fields(item, f"{path}.{key}")
    return found


# Keys whose string values the SDKs hold to a ``Literal`` (or a tag that picks a model): a shape is these values and
# the rest's structure and types. Any other string (text, ids, arguments) changes no verdict of the SDK's.
_TAGS = frozenset({"object", "type", "role", "finish_reason", "stop_reason", "status", "service_tier", "tool_choice"})
_PASSED: set[tuple[Any, ...]] = set()


def _shape(value: Any, key: str = "") -> Any:
    """What the SDK's verdict on ``value`` depends on: each tag's value, every other value's type and place."""
    if isinstance(value, dict):
        return tuple((k, _shape(v, k)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_shape(v) for v in value)
    if isinstance(value, str) and key not in _TAGS:
        return str
    return (type(value), value) if value is None or isinstance(value, (str, bool)) else type(value)


def _once_a_shape(check: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``check`` run once per shape that passes: a fake engine streaming hundreds of chunks a second pays a walk
    per chunk, not a pydantic validation (a load test's upstream must keep its pace). What fails is never kept."""

    @functools.wraps(check)
    def checked(body: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        key = (check.__name__, args, tuple(sorted(kwargs.items())), _shape(body))
        if key not in _PASSED:
            check(body, *args, **kwargs)
            _PASSED.add(key)
        return body

    return checked


def _checked(parsed: Any, body: dict[str, Any]) -> dict[str, Any]:
    if unknown := unknown_fields(parsed):
        raise AssertionError(f"fields the SDK doesn't know: {unknown} in {json.dumps(body)[:400]}")
    return body


@_once_a_shape
def response(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI Responses body (``"object": "response"``), as ``openai.types.responses.Response`` reads it."""
    for item in body.get("output", []):  # each item by its own model first: an error that names what it lacks
        _checked(_event_model(_OUTPUT_ITEM, item).model_validate(item), item)
    return _checked(Response.model_validate(body), body)


@_once_a_shape
def response_event(event: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI Responses stream event (the SSE ``data``), as ``ResponseStreamEvent`` reads it."""
    return _checked(_event_model(_RESPONSE_EVENT, event).model_validate(event), event)


@_once_a_shape
def message(body: dict[str, Any], beta: bool = False) -> dict[str, Any]:
    """An Anthropic Messages body, as ``anthropic.types.Message`` reads it (``BetaMessage`` for beta features)."""
    return _checked((BetaMessage if beta else Message).model_validate(body), body)


@_once_a_shape
def message_event(event: dict[str, Any], beta: bool = False) -> dict[str, Any]:
    """One Anthropic Messages stream event, as ``RawMessageStreamEvent`` (or its beta) reads it."""
    return _checked(_event_model(_BETA_MESSAGE_EVENT if beta else _MESSAGE_EVENT, event).model_validate(event), event)


@_once_a_shape
def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion, as ``openai.types.chat.ChatCompletion`` reads it."""
    return _checked(ChatCompletion.model_validate(body), body)


@_once_a_shape
def chat_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """One OpenAI chat completion stream chunk, as ``ChatCompletionChunk`` reads it."""
    return _checked(ChatCompletionChunk.model_validate(chunk), chunk)


@_once_a_shape
def completion(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI text completion (``/v1/completions``), as ``openai.types.Completion`` reads it: a whole answer
    and each streamed chunk alike (the SDK reads both with this one model)."""
    return _checked(Completion.model_validate(body), body)


@_once_a_shape
def completion_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """One streamed text completion chunk: a ``Completion`` whose choices' ``finish_reason`` may be null until the
    last (OpenAI, vLLM and llama.cpp all send null; the SDK's model, written for the whole answer, requires one)."""
    choices = [{**c, "finish_reason": c.get("finish_reason") or "stop"} if isinstance(c, dict) else c for c in chunk.get("choices", [])]  # fmt: skip
    _checked(Completion.model_validate({**chunk, "choices": choices}), chunk)
    return chunk


def engine_shaped(check: Callable[[dict[str, Any]], dict[str, Any]], body: dict[str, Any], *keys: str) -> dict[str, Any]:
    """``body`` with fields an engine adds to its choices (vLLM's ``stop_reason``, SGLang's ``matched_stop`` and
    ``hidden_states``): the SDK has no place for them, so the rest is checked without them and they are kept."""
    bare = json.loads(json.dumps(body))
    for choice in bare["choices"]:
        for key in keys:
            choice.pop(key, None)
            choice.get("delta", {}).pop(key, None)
    check(bare)
    return body


# Error bodies. The SDKs read an error body only as far as they raise on it (openai's ``APIError`` takes
# ``body["error"]`` and reads ``message``, ``type``, ``param``, ``code``; anthropic's is ``ErrorResponse``); the
# engines send their own variants, so each has a checker of its own, written from the engine's source.


@_once_a_shape
def openai_error(body: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's error body ``{"error": {"message", "type", "param", "code"}}``, the inner object as
    ``openai.types.shared.ErrorObject`` reads it (``code`` a string or null: an int is not OpenAI's)."""
    if set(body) != {"error"} or not isinstance(body["error"], dict):
        raise AssertionError(f"an OpenAI error body is one object under 'error': {json.dumps(body)[:400]}")
    _checked(OpenAIErrorObject.model_validate(body["error"]), body)
    return body


@_once_a_shape
def anthropic_error(body: dict[str, Any]) -> dict[str, Any]:
    """Anthropic's error body (an HTTP error's and the stream's ``event: error`` alike):
    ``{"type": "error", "error": {"type", "message"}}``, as ``anthropic.types.ErrorResponse`` reads it."""
    return _checked(AnthropicErrorResponse.model_validate(body), body)


def error_body(message: str, kind: str = "server_error") -> dict[str, Any]:
    """OpenAI's error body saying ``message``, whole as OpenAI sends it (``param`` and ``code`` null), checked."""
    return openai_error({"error": {"message": message, "type": kind, "param": None, "code": None}})


class _Strict(BaseModel):
    """An engine's error model: nothing it doesn't name, and no value coerced (``"500"`` is not ``500``)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class _VllmErrorInfo(_Strict):
    message: str
    type: str
    param: str | None
    code: int


class _VllmError(_Strict):
    """vLLM's error body since 0.10.2 (``vllm/entrypoints/serve/engine/protocol.py``: ``ErrorResponse`` holding
    ``ErrorInfo``, ``code`` the HTTP status as an int), sent whole and, in a stream, as one ``data:`` event
    (``create_streaming_error_response`` dumps the same model)."""

    error: _VllmErrorInfo


class _VllmLegacyError(_Strict):
    """vLLM's error body before 0.10.2 (``vllm/entrypoints/openai/protocol.py``: ``ErrorResponse`` with
    ``object = "error"`` and the fields at the top), which SGLang still sends."""

    object: Literal["error"]
    message: str
    type: str
    param: str | None
    code: int


class _LlamaCppErrorInfo(_Strict):
    code: int
    message: str
    type: str
    n_prompt_tokens: int | None = None  # only on exceed_context_size_error
    n_ctx: int | None = None


class _LlamaCppError(_Strict):
    """llama.cpp server's error body (``tools/server``: ``format_error_response`` builds ``{"code", "message",
    "type"}``, ``code`` the HTTP status as an int, and the reply wraps it in ``{"error": ...}``), whole and as a
    stream's ``data:`` event."""

    error: _LlamaCppErrorInfo


class _StringError(_Strict):
    """An error that is one string: Ollama's own API's (``server/routes.go``: ``gin.H{"error": err.Error()}``),
    whole and as an NDJSON line mid-stream (its OpenAI routes, ``openai/openai.go``'s ``ErrorResponse``, send
    OpenAI's shape), and vLLM's API-key refusal (``serve/middleware/authenticate.py``: ``{"error": "Unauthorized"}``)."""

    error: str


def _engine_error(model: type[BaseModel]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def check(body: dict[str, Any]) -> dict[str, Any]:
        model.model_validate(body)
        return body

    check.__name__ = check.__qualname__ = f"engine_error{model.__name__}"  # each its own key in _PASSED
    check.__doc__ = model.__doc__
    return _once_a_shape(check)


vllm_error = _engine_error(_VllmError)
vllm_legacy_error = _engine_error(_VllmLegacyError)
llamacpp_error = _engine_error(_LlamaCppError)
string_error = _engine_error(_StringError)


# What every real answer carries beside what a test is about: spread these into a body so the SDK reads it.
RESPONSE_REST: dict[str, Any] = {"created_at": 1.0, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}


def response_usage(input_tokens: int, output_tokens: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    """A Responses ``usage`` with the details OpenAI always sends."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def chat_answer(message: dict[str, Any], finish: str = "stop") -> dict[str, Any]:
    """A whole chat answer of one choice saying ``message``, with what every real one carries, checked."""
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return chat_completion({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m", "choices": [choice]})
