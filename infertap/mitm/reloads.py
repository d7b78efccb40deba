"""The capture addons a script reload retired while flows they record were still in flight.

mitmproxy reloads an edited ``-s`` script by removing its addons (their ``done`` runs) and running
the file anew: a new instance, recording a run of its own. A flow in flight goes on, and its later
hooks reach the new instance, which hands them to the one that began it (that run holds the flow's
start); that one closes its run after its last flow. Kept in this module, which a reload does not
run again, so that the instance stopped at shutdown also stops those still waiting on flows.
"""

from __future__ import annotations

from typing import Any, Protocol
from weakref import WeakKeyDictionary


class Retired(Protocol):
    async def stop_recording(self) -> None:
        """Write its flows in flight as cancelled and close its run, as at shutdown."""


_retired: WeakKeyDictionary[Any, list[Retired]] = WeakKeyDictionary()  # by mitmproxy master


def retire(master: Any, addon: Retired) -> None:
    _retired.setdefault(master, []).append(addon)


def retired(master: Any) -> list[Retired]:
    return list(_retired.get(master, ()))


def forget(master: Any, addon: Retired) -> None:
    addons = _retired.get(master, [])
    if addon in addons:
        addons.remove(addon)
