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


class PartialRound(SourceError):
    """Some readings of a round failed for a reason that may pass (a GPU's NVML_ERROR_TIMEOUT, a
    driver busy for a moment): the round keeps its other ``samples``, the sampler records the reason
    as it records a source's, and the failed readings are asked again next round. Only a reading
    the device refuses outright (not supported) is never asked again."""

    def __init__(self, reason: str, samples: list[Sample]) -> None:
        super().__init__(reason)
        self.samples = samples
