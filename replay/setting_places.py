"""Where a replay's sampling settings go in a request of an API that says where it reads them
(``apis.SettingsPlace``): SGLang's ``/generate`` in ``sampling_params``, TGI's in ``parameters``,
Bedrock's Converse in ``inferenceConfig``, OpenAI's Responses and Anthropic's Messages at the top
level under their own names (``max_output_tokens``, ``stop_sequences``). A ``--set max_tokens=8``
written where the server reads nothing replays without the limit while saying it set one; so each
setting goes where the API reads it under the API's own name (``max_tokens`` as
``max_new_tokens``, ``maxTokens``), and one the API has no place for is refused, set or unset,
never written (or removed) where nothing reads it. A pinned default (``--pin-defaults``) is no
setting the user named: one the API has no place for, or whose value it refuses, is left out of
that request and said (``pin_gap``), so the pins that have a place still go in. (Ollama's
``options``, which take any name, get Ollama's names for the settings it knows:
``transforms._in_options``.)
"""

from __future__ import annotations

from typing import Any

from infertap.apis import SAMPLING, Api, SettingsPlace, canonical
from infertap.errors import InfertapError


class NoPlace(InfertapError):
    """A sampling setting the request's API has no place for."""


def own_name(place: SettingsPlace, name: str) -> str | None:
    """The API's name for the setting ``name`` (any spelling infertap knows, or the API's own:
    Converse's ``maxTokens``), else None: no setting of it."""
    own = place.names.get(canonical(name))
    if own is not None:
        return own
    return name if name in place.others or name in place.names.values() else None


def has_place(place: SettingsPlace, name: str) -> bool:
    """Whether ``name`` can go in ``place``: a name of its own there, no sampling setting at all
    (``stream``), or a place that takes any (``open``)."""
    return own_name(place, name) is not None or not is_setting(name) or place.open


def is_setting(name: str) -> bool:
    """Whether ``name`` is a sampling setting under some API's spelling (``max_new_tokens``, ``seed``)."""
    return canonical(name) in SAMPLING


def setting_paths(api: Api, body: dict[str, Any], dotted: str, *, refuse: bool) -> list[str]:
    """The dotted paths in ``body`` where ``dotted`` (a setting, or a path through one, as the user
    named it) is read by ``api``: in its settings object (at the top level where it has none),
    one path per object of a batch's list; ``dotted`` itself where its first key is no sampling
    setting (``stream``, ``sampling_params.x``), or one an open place has no name of its own for.
    A sampling setting the API has no place for is refused (``NoPlace``), to set or to remove: the
    server reads it nowhere. ``refuse``: a value to write, which needs an object to go in."""
    place = api.settings_place
    assert place is not None
    first, _, rest = dotted.partition(".")
    own = own_name(place, first)
    if own is None:
        if not has_place(place, first):
            raise NoPlace(no_place(api, first))
        return [dotted]
    tail = f"{own}.{rest}" if rest else own
    if place.key is None:
        return [tail]
    held = body.get(place.key)
    if place.lists and isinstance(held, list):
        if not held and refuse:
            raise NoPlace(f"{place.key!r} is an empty list: no object of a prompt's settings to put {first!r} in")
        return [f"{place.key}.{i}.{tail}" for i in range(len(held))]
    return [f"{place.key}.{tail}"]


def check_value(api: Api, name: str, value: Any, *, pinned: bool = False) -> None:
    """Refuse a value the API refuses for the setting ``name`` before anything is sent, saying how
    it asks for what the value means (TGI's ``temperature`` of 0: greedy is ``do_sample`` false);
    ``pinned``: said of a pin left out, whose request goes with the server's default, not to a ``--set``."""
    place = api.settings_place
    assert place is not None
    how = place.positive.get(canonical(name))
    if pinned and how is not None:
        how = place.positive_pinned.get(canonical(name), how)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if how is not None and number and value <= 0:
        raise NoPlace(f"{api.name} refuses a {name} of {value} (it must be above 0): {how}")


def pin_gap(api: Api, name: str, value: Any) -> str | None:
    """Why a pinned ``name`` of ``value`` goes in no request of ``api`` (None: it goes in): the API
    reads it nowhere (said of no one setting, so that the settings left out for it are said once),
    or refuses the value (TGI's temperature of 0), by the rules ``--set`` is refused by."""
    place = api.settings_place
    assert place is not None
    if not has_place(place, name):
        return f"{api.name} reads no such setting ({_known(api)})"
    try:
        check_value(api, name, value, pinned=True)
    except NoPlace as exc:
        return str(exc)
    return None


def no_place(api: Api, name: str) -> str:
    return f"{api.name} reads no setting {name!r} ({_known(api)}); the server reads it nowhere"


def _known(api: Api) -> str:
    """Where ``api`` reads its sampling settings, and which."""
    place = api.settings_place
    assert place is not None
    known = ", ".join(sorted(set(place.names.values())))
    where = f"go in {place.key!r}" if place.key is not None else "are read at the top level"
    return f"its sampling settings {where}: {known}"


def open_place(api: Api, body: dict[str, Any]) -> None:
    """A ``null`` settings object made an empty one before a setting goes in it (the server reads
    null as no settings, and a setting can go in no null); one that is neither an object nor (for
    a batch) a list is refused: no setting can go in it. Nothing to open at the top level."""
    place = api.settings_place
    assert place is not None
    if place.key is None:
        return
    if place.key in body and body[place.key] is None:
        body[place.key] = {}
    held = body.get(place.key)
    if held is not None and not isinstance(held, dict) and not (place.lists and isinstance(held, list)):
        raise NoPlace(f"{place.key!r} is a {type(held).__name__}, not an object: no setting can go in it")
