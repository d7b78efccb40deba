"""The unit every source produces, and how a source says it can't."""

from __future__ import annotations

from typing import NamedTuple


class Sample(NamedTuple):
    name: str
    labels: dict[str, str]
    value: float


class SourceError(Exception):
    """A source that can't be read (no driver, an endpoint that isn't there): recorded once, with
    this message, as the source's reason for being unknown."""
