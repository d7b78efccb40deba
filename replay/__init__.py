"""Replay: re-issue a captured workload against another engine or configuration, faithfully.

Builds on ``proxy``'s capture format; records the replay as a capture of its own.
"""

from .api import ReplayError, run_replay
from .config import ReplayConfig
from .runner import Replay, ReplayStats, no_response
from .schedule import Schedule, ScheduleError
from .transforms import TransformError, Transforms, parse_value
from .workload import Filters, Item, SessionSample, WorkloadError, load

__all__ = [
    "Filters",
    "Item",
    "Replay",
    "ReplayConfig",
    "ReplayError",
    "ReplayStats",
    "Schedule",
    "ScheduleError",
    "SessionSample",
    "TransformError",
    "Transforms",
    "WorkloadError",
    "load",
    "no_response",
    "parse_value",
    "run_replay",
]
