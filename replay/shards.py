"""Splitting a workload into shards for distributed replay, each conversation whole on one shard.

A turn waits for the turn it continues, and that wait can only be seen by the process that sent
both; so conversations are the unit of sharding. They are dealt, in order of their first
request, to the shard with the fewest requests so far: every shard then carries a similar load
spread over the whole run, not one shard the start and another the end.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .schedule import Schedule, ScheduleError
from .workload import Item


@dataclass
class Shard:
    """One worker's part: its items re-indexed from 0 (parents and ``think_from`` too), and their global indexes."""

    index: int
    items: list[Item]
    origin: list[int]  # origin[i] = the index of items[i] in the whole workload


def conversations(items: list[Item]) -> list[list[int]]:
    """Indexes of the items of each conversation, conversations in order of their first item. A
    turn's conversation holds its parent and the turn its think time is measured from (with
    ``--sessions closed`` it waits for both), which may lie in another tree of its session."""
    root = list(range(len(items)))  # union-find: each group's root is its first item

    def find(i: int) -> int:
        while root[i] != i:
            root[i] = root[root[i]]  # halve the path
            i = root[i]
        return i

    for item in items:
        for other in (item.parent, item.think_from):
            if other is not None:
                a, b = find(other), find(item.index)
                root[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for item in items:
        groups.setdefault(find(item.index), []).append(item.index)
    return list(groups.values())


def split(items: list[Item], n: int) -> list[Shard]:
    """At most ``n`` non-empty shards (fewer when there are fewer conversations)."""
    if n < 1:
        raise ScheduleError("--shards must be at least 1")
    groups = conversations(items)
    n = min(n, len(groups))
    members: list[list[int]] = [[] for _ in range(n)]
    for group in groups:
        min(members, key=len).extend(group)
    shards = []
    for k, indexes in enumerate(members):
        indexes.sort()
        local = {g: i for i, g in enumerate(indexes)}
        shard_items = [
            replace(
                items[g],
                index=i,
                parent=None if (parent := items[g].parent) is None else local[parent],
                think_from=None if (since := items[g].think_from) is None else local[since],
            )
            for i, g in enumerate(indexes)
        ]
        shards.append(Shard(k, shard_items, indexes))
    return shards


def shard_schedules(schedule: Schedule, n: int) -> list[Schedule]:
    """Each shard's schedule: open-loop ones as they are (the offsets are computed over the whole
    workload), fixed concurrency and the cap divided between the shards."""
    if schedule.kind == "concurrency-original":
        raise ScheduleError(
            "--concurrency original follows one in-flight count over the whole workload, which can't be split "
            "between Ray workers: use the original timing (the default), --rate, or --concurrency N"
        )
    if schedule.concurrency is not None and schedule.concurrency < n:
        raise ScheduleError(
            f"--concurrency {schedule.concurrency} can't be split between {n} shards: use --shards {schedule.concurrency} or fewer"
        )
    if schedule.max_concurrency is not None and schedule.max_concurrency < n:
        raise ScheduleError(
            f"--max-concurrency {schedule.max_concurrency} can't be split between {n} shards: use --shards {schedule.max_concurrency} or fewer"
        )
    return [
        replace(schedule, concurrency=_part(schedule.concurrency, n, k), max_concurrency=_part(schedule.max_concurrency, n, k))
        for k in range(n)
    ]


def _part(total: int | None, n: int, k: int) -> int | None:
    return None if total is None else total // n + (k < total % n)
