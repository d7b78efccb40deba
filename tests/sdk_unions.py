"""The members of an SDK's annotated unions (anthropic's, openai's), their ``type`` tags and fields:
what the adapters' classification tests enumerate."""

from __future__ import annotations

import typing
from types import UnionType
from typing import Any

from pydantic import BaseModel


def members(union: Any) -> list[type[BaseModel]]:
    """The models of a union, however deep its ``Annotated`` and ``Union`` nesting."""
    origin = typing.get_origin(union)
    if origin is typing.Annotated:
        return members(typing.get_args(union)[0])
    if origin is typing.Union or origin is UnionType:
        return [m for arg in typing.get_args(union) for m in members(arg)]
    if isinstance(union, type) and issubclass(union, BaseModel):
        return [union]
    return []  # None of an Optional


def type_of(model: type[BaseModel]) -> str:
    """A model's ``type`` tag (its one ``Literal``)."""
    (tag,) = typing.get_args(model.model_fields["type"].annotation)
    return str(tag)


def fields(model: type[BaseModel]) -> set[str]:
    """A model's fields as sent (by alias: ``from``, ``async``)."""
    return {info.alias or name for name, info in model.model_fields.items()}


def unclassified_fields(models: Any, classified: dict[str, tuple[Any, Any]]) -> dict[str, set[str]]:
    """The fields of ``models`` whose type an adapter reads apart (``classified``: type -> its fields
    compared, its fields left out) that it neither compares nor leaves out on purpose."""
    found: dict[str, set[str]] = {}
    for model in models:
        kind = type_of(model)
        if kind in classified:
            compared, left_out = classified[kind]
            if extra := fields(model) - {"type", *compared, *left_out}:
                found.setdefault(kind, set()).update(extra)
    return found
