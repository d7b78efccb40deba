"""The capture addons a script reload retired while flows they record were still in flight.

mitmproxy reloads an edited ``-s`` script by removing its addons (their ``done`` runs) and running
the file anew: a new instance, recording a run of its own. A flow in flight goes on, and its later
hooks reach the new instance, which hands them to the one that began it (that run holds the flow's
start); that one closes its run after its last flow. Kept in this module, which a reload does not
run again. Where the edited script fails to load, or is dropped from ``scripts``, no instance is
left to hand those hooks on: the flows wait until shutdown, and ``_AtShutdown``, registered on the
master at the first retirement, then writes them as cancelled and closes the runs, as a plain
shutdown does, since no capture addon's ``done`` is left to.
"""

from __future__ import annotations

from typing import Any, Protocol
from weakref import WeakKeyDictionary


class Retired(Protocol):
    async def stop_recording(self) -> None:
        """Write its flows in flight as cancelled and close its run, as at shutdown."""


_retired: WeakKeyDictionary[Any, list[Retired]] = WeakKeyDictionary()  # by mitmproxy master


class _AtShutdown:
    """Stops the retired instances left at shutdown (mitmproxy's ``done`` reaches registered addons only)."""

    name = "infertap_retired"

    def __init__(self, master: Any) -> None:
        self.master = master

    async def done(self) -> None:
        for addon in retired(self.master):
            await addon.stop_recording()


def retire(master: Any, addon: Retired) -> None:
    _retired.setdefault(master, []).append(addon)
    if master.addons.get(_AtShutdown.name) is None:
        master.addons.add(_AtShutdown(master))


def retired(master: Any) -> list[Retired]:
    return list(_retired.get(master, ()))


def forget(master: Any, addon: Retired) -> None:
    addons = _retired.get(master, [])
    if addon in addons:
        addons.remove(addon)
