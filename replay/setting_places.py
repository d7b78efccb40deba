"""Where a replay's sampling settings go in a request of an API that reads them in an object of
their own (``apis.SettingsPlace``): SGLang's ``/generate`` in ``sampling_params``, TGI's in
``parameters``, Bedrock's Converse in ``inferenceConfig``. A ``--set temperature=0`` written at the
top level there is read by nothing (or refused), and the replay would run with other settings than
it says; so each setting goes in that object under the API's own name (``max_tokens`` as
``max_new_tokens``, ``maxTokens``), and one the API has no name for is refused, never written where
it is ignored. (Ollama's ``options``, which take any name, get Ollama's names for the settings it
knows: ``transforms._in_options``.)
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


def is_setting(name: str) -> bool:
    """Whether ``name`` is a sampling setting under some API's spelling (``max_new_tokens``, ``seed``)."""
    return canonical(name) in SAMPLING


def setting_paths(api: Api, body: dict[str, Any], dotted: str, *, refuse: bool) -> list[str]:
    """The dotted paths in ``body`` where ``dotted`` (a setting, or a path through one, as the user
    named it) is read by ``api``: in its settings object, one path per object of a batch's list;
    ``dotted`` itself where its first key is no sampling setting (``stream``, ``sampling_params.x``).
    A sampling setting the API has no name for is refused where ``refuse`` (a value to write),
    else left as given (a removal: nothing the API reads can be there)."""
    place = api.settings_place
    assert place is not None
    first, _, rest = dotted.partition(".")
    own = own_name(place, first)
    if own is None:
        if refuse and is_setting(first):
            raise NoPlace(no_place(api, first))
        return [dotted]
    tail = f"{own}.{rest}" if rest else own
    held = body.get(place.key)
    if place.lists and isinstance(held, list):
        if not held and refuse:
            raise NoPlace(f"{place.key!r} is an empty list: no object of a prompt's settings to put {first!r} in")
        return [f"{place.key}.{i}.{tail}" for i in range(len(held))]
    return [f"{place.key}.{tail}"]


def no_place(api: Api, name: str) -> str:
    place = api.settings_place
    assert place is not None
    known = ", ".join(sorted(set(place.names.values())))
    return f"{api.name} reads no setting {name!r} (its sampling settings go in {place.key!r}: {known}); written elsewhere, the server would not apply it"


def open_place(api: Api, body: dict[str, Any]) -> None:
    """A ``null`` settings object made an empty one before a setting goes in it (the server reads
    null as no settings, and a setting can go in no null); one that is neither an object nor (for
    a batch) a list is refused: no setting can go in it."""
    place = api.settings_place
    assert place is not None
    if place.key in body and body[place.key] is None:
        body[place.key] = {}
    held = body.get(place.key)
    if held is not None and not isinstance(held, dict) and not (place.lists and isinstance(held, list)):
        raise NoPlace(f"{place.key!r} is a {type(held).__name__}, not an object: no setting can go in it")
