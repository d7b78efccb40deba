"""The capture addons a script reload retired while flows they record were still in flight.

mitmproxy reloads an edited ``-s`` script by removing its addons (their ``done`` runs) and running
the file anew: a new instance, recording a run of its own. A flow in flight goes on, and its later
hooks reach the new instance, which hands them to the one that began it (that run holds the flow's
start); that one closes its run after its last flow. Kept in this module, which a reload does not
run again. Where the edited script fails to load, or is dropped from ``scripts``, no instance is
left to hand those hooks on: ``_Relay``, registered on the master at the first retirement, hands
them on itself while no instance of the retired one's name is loaded, so each such flow is written
when it ends, with its real end (a crash later loses none of them), and at shutdown it writes those
still in flight as cancelled and closes the runs, as a plain shutdown does, since no capture addon's
``done`` is left to.
"""

from __future__ import annotations

from typing import Any, Protocol
from weakref import WeakKeyDictionary


class Retired(Protocol):
    async def stop_recording(self) -> None:
        """Write its flows in flight as cancelled and close its run, as at shutdown."""

    def request(self, flow: Any) -> None: ...
    def responseheaders(self, flow: Any) -> None: ...
    def response(self, flow: Any) -> None: ...
    def error(self, flow: Any) -> None: ...


_retired: WeakKeyDictionary[Any, list[Retired]] = WeakKeyDictionary()  # by mitmproxy master


class _Relay:
    """Hands a retired instance the hooks of the flows it began where no instance of its name is
    loaded to hand them on; stops the retired instances left at shutdown (mitmproxy's ``done``
    reaches registered addons only)."""

    name = "infertap_retired"

    def __init__(self, master: Any) -> None:
        self.master = master

    def _owner(self, flow: Any) -> Retired | None:
        """The retired instance that began ``flow``, where no loaded one hands it its hooks (None:
        not one of a retired instance's flows, ended, or a loaded instance hands them on)."""
        state = flow.metadata.get("infertap")
        owner = state.get("addon") if isinstance(state, dict) else None
        if owner is None or owner not in retired(self.master):
            return None
        loaded = self.master.addons.get(getattr(owner, "name", type(owner).__name__.lower()))
        return owner if loaded is None else None

    def request(self, flow: Any) -> None:
        if (owner := self._owner(flow)) is not None:
            owner.request(flow)

    def responseheaders(self, flow: Any) -> None:
        if (owner := self._owner(flow)) is not None:
            owner.responseheaders(flow)

    def response(self, flow: Any) -> None:
        if (owner := self._owner(flow)) is not None:
            owner.response(flow)

    def error(self, flow: Any) -> None:
        if (owner := self._owner(flow)) is not None:
            owner.error(flow)

    async def done(self) -> None:
        for addon in retired(self.master):
            await addon.stop_recording()


def retire(master: Any, addon: Retired) -> None:
    _retired.setdefault(master, []).append(addon)
    if master.addons.get(_Relay.name) is None:
        master.addons.add(_Relay(master))


def retired(master: Any) -> list[Retired]:
    return list(_retired.get(master, ()))


def forget(master: Any, addon: Retired) -> None:
    addons = _retired.get(master, [])
    if addon in addons:
        addons.remove(addon)
