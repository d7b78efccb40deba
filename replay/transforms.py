"""Request transforms for a replay: model maps, body overrides, headers, pinned defaults.

Transforms run before anything is sent, so a transform that can't apply to a request (a body
override on a body that isn't a JSON object, a path through a non-object) is an error up front.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from infertap.apis import Api, api_for, body_apis, canonical
from infertap.apis.body import Decoded, body_encoding, decoded_request
from infertap.apis.converse import with_model
from infertap.apis.fastjson import loads
from infertap.capture.records import SESSION_HEADERS
from infertap.capture.redact import REDACTED, redacted_url, without_redacted
from infertap.capture.redact_json import secret_strings
from infertap.errors import InfertapError
from infertap.proxy.hops import HOP_REQUEST, connection_named

from .encoded_body import encode
from .setting_places import NoPlace, check_value, is_setting, open_place, pin_gap, setting_paths


class TransformError(InfertapError):
    pass


def parse_value(text: str) -> Any:
    """A ``--set`` value: JSON when it parses as JSON (0, true, "x", [1]), else the text itself; its
    numbers sent as given (``-0``, ``1E-1``). ``NaN`` and ``Infinity`` are no JSON (``json.loads``
    reads them): text; a number beyond a double (``1e400``) is refused, as no JSON a target reads
    could carry it."""
    try:
        value, _ = _as_sent(text.encode(), constants=False)
    except ValueError:
        return text
    if any(isinstance(v, float) and math.isinf(v) for v in _leaves(value)):
        raise TransformError(f"--set value {text!r}: a number beyond a double")
    return value


def _leaves(value: Any) -> Iterator[Any]:
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        else:
            yield v


def _index(node: list[Any], key: str) -> int | None:
    """``key`` as a place in the list ``node`` (``messages.0.content``), or None where it is none."""
    return int(key) if key.isascii() and key.isdigit() and int(key) < len(node) else None


def set_path(body: dict[str, Any], dotted: str, value: Any) -> None:
    """Set the value at ``dotted``: keys of objects (made where missing) and places in lists that are there."""
    keys = dotted.split(".")
    node: Any = body
    for key in keys[:-1]:
        if isinstance(node, list) and (i := _index(node, key)) is not None:
            node = node[i]
        elif isinstance(node, dict):
            node = node.setdefault(key, {})
        else:
            raise TransformError(f"cannot set {dotted!r}: {_no_place(node, key)}")
    if isinstance(node, list) and (i := _index(node, keys[-1])) is not None:
        node[i] = value
    elif isinstance(node, dict):
        node[keys[-1]] = value
    else:
        raise TransformError(f"cannot set {dotted!r}: {_no_place(node, keys[-1])}")


def _no_place(node: Any, key: str) -> str:
    if isinstance(node, list):
        return f"{key!r} is no place in a list of {len(node)}"
    return f"{key!r} is inside a {type(node).__name__}, not an object or a list"


def unset_path(body: dict[str, Any], dotted: str) -> bool:
    """Remove the key at ``dotted`` (through objects and places in lists); whether there was one."""
    keys = dotted.split(".")
    node: Any = body
    for key in keys[:-1]:
        if isinstance(node, list):
            i = _index(node, key)
            node = node[i] if i is not None else None
        else:
            node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and keys[-1] in node:
        del node[keys[-1]]
        return True
    return False


_REDACTED_MARK = b"REDACTED"  # in every redacted value of a body (a URL's userinfo has no brackets)

# How each engine spells the canonical settings of proxy.engines.base (the rest pass as they are).
_TARGET_NAMES = {
    "vllm": {"repeat_penalty": "repetition_penalty"},
    "sglang": {"repeat_penalty": "repetition_penalty"},
}
#: Pinned settings left out of one request, as (setting, API) -> why (``setting_places.pin_gap``).
PinGaps = dict[tuple[str, str], str]
#: Settings worth pinning: the ones that change what a sampler picks.
PINNABLE = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "repeat_penalty",
    "repeat_last_n",
    "presence_penalty",
    "frequency_penalty",
    "mirostat",
    "mirostat_tau",
    "mirostat_eta",
)


@dataclass
class Transforms:
    model_map: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    set_values: list[tuple[str, Any]] = field(default_factory=list)
    unset: list[str] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    drop_headers: set[str] = field(default_factory=set)
    pin_defaults: bool = False
    api_key: str | None = None  # the target's key, in the header each request's API reads (``key_header``)

    def __post_init__(self) -> None:
        for option, dotted in [*(("--set", k) for k, _ in self.set_values), *(("--unset", k) for k in self.unset)]:
            if "" in dotted.split("."):
                raise TransformError(f"{option} {dotted!r}: a dotted path of keys, none of them empty")

    @property
    def session_header(self) -> str | None:
        """A session header (``x-session-id``) that ``--header`` sets: sent as given to every request,
        it stands in for the per-pass and per-point ids (``<id>#k``, ``<id>@<point>``)."""
        return next((n for n in self.headers if n.lower().encode("latin-1") in SESSION_HEADERS), None)

    @property
    def touches_body(self) -> bool:
        return bool(self.model_map or self.model or self.set_values or self.unset or self.pin_defaults)

    @property
    def edits_every_body(self) -> bool:
        """Whether a body that is no JSON object (a multipart upload) is refused: every transform but
        ``--model-map`` must edit each body, while a map can't apply to one that names no model."""
        return bool(self.model or self.set_values or self.unset or self.pin_defaults)

    def body(
        self,
        raw: bytes,
        *,
        pinned: Mapping[str, Pin] | None = None,
        target_kind: str | None = None,
        path: str | None = None,
        headers: Iterable[Iterable[str]] | None = None,
        left_out: PinGaps | None = None,
        decoded: Decoded | ValueError | None = None,
    ) -> bytes:
        """The request body after the transforms; untouched bytes when no transform applies (a
        request without a body, a ``GET /v1/models``, carries nothing to transform). ``path``: the
        request's, which says its API (where its sampling settings go); ``headers``: its recorded
        headers, whose ``Content-Encoding`` (gzip, zstd, ...) is undone before the transforms and
        done again after them (``encoded_body``): the body goes out encoded as it came. One whose
        bytes stop inside its stream (recorded cut short) is refused by every transform but a
        ``--model-map`` that names none of its models (checked as the workload loads, before a
        request's pins are known): what it holds, edited and encoded whole, is a body the client
        never sent. ``left_out``: filled with the pins this body goes without (``apply``). ``decoded``:
        ``read_encoded`` of it, where the caller undid its encoding already (the workload, as it loads):
        a zstd body is not decompressed twice."""
        if not self.touches_body or not raw:
            return raw
        encoding = body_encoding(headers)
        if encoding is None:
            return self._json(raw, pinned, target_kind, path, left_out)
        if decoded is None:
            decoded = read_encoded(raw, encoding)
        if isinstance(decoded, ValueError):
            if not self.edits_every_body:
                return raw  # only a --model-map: nothing read in it to map
            raise TransformError(
                f"body transforms can't read the JSON this body's Content-Encoding should hold: {decoded}; "
                "replay it without them (sent as recorded) or leave it out (--filter)"
            ) from decoded
        if not decoded.whole and self.edits_every_body:
            raise _cut(encoding, raw)
        text = decoded.data
        out = self._json(text, pinned, target_kind, path, left_out)  # a --model-map alone: a cut body's JSON unread is raw
        if out is text:
            return raw  # nothing applied: as recorded, cut short or not
        if not decoded.whole:
            raise _cut(encoding, raw)
        return encode(out, encoding, raw_deflate=decoded.raw_deflate)

    def _json(
        self, raw: bytes, pinned: Mapping[str, Pin] | None, target_kind: str | None, path: str | None, left_out: PinGaps | None
    ) -> bytes:
        """``body`` of a body with no content-encoding: ``raw`` itself where nothing applies."""
        try:
            body, sent = _as_sent(raw)
        except ValueError as exc:
            if not self.edits_every_body:
                return raw  # only a --model-map: nothing in it to map
            raise TransformError(f"body transforms need a JSON body, and this one isn't: {exc}") from exc
        if not isinstance(body, dict):
            if not self.edits_every_body:
                return raw
            raise TransformError("body transforms need a JSON object body")
        if not self.apply(body, pinned=pinned, target_kind=target_kind, path=path, left_out=left_out):
            return raw  # nothing applied to this one (its model not in --model-map...): as recorded
        return _written(body, sent or any(map(_is_sent, _leaves([v for _, v in self.set_values]))))

    def apply(
        self,
        body: dict[str, Any],
        *,
        pinned: Mapping[str, Pin] | None = None,
        target_kind: str | None = None,
        path: str | None = None,
        left_out: PinGaps | None = None,
    ) -> bool:
        """The body transforms, in place, on a request body read as a JSON object: what ``body``
        does before writing it out; whether any applied. A workload runs it on each request as it
        loads, so that a transform that can't apply is an error before anything is sent. On
        Ollama's native API (``path``) a sampling setting, set, unset or pinned, goes in ``options``:
        Ollama ignores a top-level ``temperature``; on SGLang's and TGI's ``/generate`` in
        ``sampling_params`` and ``parameters``, on Responses and Messages at the top level, under
        their names (``_apply_placed``: ``max_output_tokens``, ``stop_sequences``). A pinned
        setting replaces one the body has only
        where the source ignored that field (its value never applied there, so the target must not
        apply it either); one the API has no place for, or whose value it refuses, is left out, and
        said in ``left_out``."""
        changed = False
        api = api_for(path, body) if path is not None else None
        if api is not None and api.settings_place is not None:
            return self._apply_placed(api, body, pinned, target_kind, left_out)
        if api is not None and api.name == "generate-ambiguous" and (pinned or self.set_values or self.unset):
            raise TransformError(
                "this /generate body holds both SGLang's text/input_ids and TGI's inputs: which server reads it, and "
                "so where its settings go (sampling_params or parameters), is unknown; replay it without --set, "
                "--unset or --pin-defaults, or leave it out (--filter)"
            )
        ollama = api is not None and api.name in _OPTIONS_APIS
        where = _in_options if ollama else _as_given
        if ollama and "options" in body and body["options"] is None and self._fills_options(pinned):
            body["options"] = {}  # Ollama reads a null options as none (Go's nil map): settings go in a new one
        if ollama and self.pin_defaults and body.get("options") is not None and not isinstance(body["options"], dict):
            # Checked whatever this request's pins: the scan that refuses before sending has none.
            raise TransformError(f"--pin-defaults: 'options' is a {type(body['options']).__name__}, not an object")
        if pinned:
            names = _TARGET_NAMES.get(target_kind or "", {})
            for name, pin in pinned.items():
                field_name = names.get(name, name)
                dotted = where(field_name)
                if field_name in pin.ignored or not _has_path(body, dotted):
                    set_path(body, dotted, _own(pin.value))
                    changed = True
        changed = self._model(body) or changed
        for dotted, value in self.set_values:
            set_path(body, where(dotted), _own(value))
            changed = True
        for dotted in self.unset:
            changed = unset_path(body, where(dotted)) or changed
        return changed

    def sent_path(self, path: str) -> str:
        """The path a request goes to: Bedrock's Converse reads its model in the path's
        ``{modelId}``, so ``--model`` and ``--model-map`` rename it there (a ``model`` written in
        its body would be ignored, the recorded model run)."""
        if not (self.model or self.model_map) or not api_for(path).model_in_path:
            return path
        return with_model(path, lambda model: self.model or self.model_map.get(model))

    def _model(self, body: dict[str, Any]) -> bool:
        """``--model`` or ``--model-map`` applied to ``body``; whether either did."""
        model = body.get("model")
        if self.model:
            body["model"] = self.model
            return True
        if isinstance(model, str) and model in self.model_map:
            body["model"] = self.model_map[model]
            return True
        return False

    def _apply_placed(
        self,
        api: Api,
        body: dict[str, Any],
        pinned: Mapping[str, Pin] | None,
        target_kind: str | None,
        left_out: PinGaps | None,
    ) -> bool:
        """``apply`` on a request whose API says where it reads its settings (``setting_places``:
        SGLang's and TGI's ``/generate``, Converse, Responses, Messages), each under the API's own
        name there; one it has no place for refused, set or unset, as is a value it refuses (TGI's
        temperature of 0). A pin of either is left out of the body and said in ``left_out``: the
        user named no such setting, and the pins that have a place still go in."""
        changed = False
        settings = [d for d, _ in self.set_values if is_setting(d.split(".", 1)[0])]
        option = "--pin-defaults" if self.pin_defaults else f"--set {settings[0]}" if settings else ""
        renames = _TARGET_NAMES.get(target_kind or "", {})
        try:
            if option:
                open_place(api, body)  # checked whatever this request's pins, as Ollama's options
            for name, pin in (pinned or {}).items():
                if (why := pin_gap(api, renames.get(name, name), pin.value)) is not None:
                    if left_out is not None:
                        left_out[name, api.name] = why
                    continue
                for dotted in setting_paths(api, body, renames.get(name, name), refuse=True):
                    field_name = dotted.rsplit(".", 1)[-1]
                    if field_name in pin.ignored or not _has_path(body, dotted):
                        set_path(body, dotted, _own(pin.value))
                        changed = True
            for given, value in self.set_values:
                option = f"--set {given}"
                check_value(api, given, value)
                for dotted in setting_paths(api, body, given, refuse=True):
                    set_path(body, dotted, _own(value))
                    changed = True
            if not api.model_in_path:  # Bedrock's is renamed in the path (``sent_path``); its body has none
                changed = self._model(body) or changed
            for given in self.unset:
                option = f"--unset {given}"
                for dotted in setting_paths(api, body, given, refuse=False):
                    changed = unset_path(body, dotted) or changed
        except NoPlace as exc:
            raise TransformError(f"{option}: {exc}") from exc
        return changed

    def _fills_options(self, pinned: Mapping[str, Pin] | None) -> bool:
        """Whether a setting goes in an Ollama request's ``options``: a pin or a ``--set`` of one."""
        return bool(pinned) or any(_in_options(dotted) != dotted for dotted, _ in self.set_values)

    def unfilled_credential(self, raw: Any, body: dict[str, Any] | None = None) -> str | None:
        """Why a body can't be replayed as recorded: a value the capture redacted (``"api_key":
        "[REDACTED]"``) would reach the target as the placeholder. None when there is none, or each is
        given a value by ``--set`` or removed by ``--unset``."""
        if not isinstance(raw, bytes) or _REDACTED_MARK not in raw:
            return None
        if body is None:
            try:
                body = loads(raw)
            except ValueError:
                return None
        given = [dotted for dotted, _ in self.set_values] + self.unset
        for field_path in redacted_fields(body):
            if not any(field_path == g or field_path.startswith(g + ".") for g in given):
                return (
                    f"its body's {field_path!r} was redacted when recorded: give the target's value with "
                    f"--set {field_path}=VALUE, or remove it with --unset {field_path}"
                )
        return None

    def can_refuse(self, path: str | None) -> bool:
        """Whether ``apply`` can fail on some JSON object sent to ``path``: only a ``--set`` of a
        dotted path can (a key on the way holds something other than an object), and on Ollama's
        API one of a sampling setting or ``--pin-defaults`` (they go in ``options``), and on an API
        that says where it reads settings (``places_settings``) any ``--set`` or ``--unset``, and a
        pin where its settings object can hold none (a pin the API has no place for is left out)."""
        ollama = path is not None and api_for(path).name in _OPTIONS_APIS
        if ollama and self.pin_defaults:
            return True
        if self.places_settings(path):  # a setting it has no place for, or an object that can't hold one
            return bool(self.set_values or self.unset) or self.pin_defaults
        return any("." in (_in_options(dotted) if ollama else dotted) for dotted, _ in self.set_values)

    def placed(self, apis: Iterable[Api]) -> dict[str, dict[str, str]]:
        """Where each setting given to ``--set`` or ``--unset`` goes in a request of each of ``apis``
        that writes it under another name than given (``max_tokens`` as ``max_output_tokens`` on
        Responses, ``options.num_predict`` on Ollama's): what the replay's header and notes say it
        set. A batch's list of settings objects is named by its key (``sampling_params``)."""
        out: dict[str, dict[str, str]] = {}
        for given in dict.fromkeys([*(d for d, _ in self.set_values), *self.unset]):
            for api in apis:
                if api.settings_place is not None:
                    try:
                        where = setting_paths(api, {}, given, refuse=False)[0]
                    except NoPlace:
                        continue  # refused before anything is sent: never in a replay's header
                else:
                    where = _in_options(given) if api.name in _OPTIONS_APIS else given
                if where != given:
                    out.setdefault(given, {})[api.name] = where
        return out

    @staticmethod
    def places_settings(path: str | None) -> bool:
        """Whether a request to ``path`` may speak an API that says where it reads its settings
        (``setting_places``): its path names one, or its body chooses one (``/generate``)."""
        if path is None:
            return False
        return api_for(path).settings_place is not None or any(a.settings_place is not None for a in body_apis(path))

    @property
    def pinning_matters(self) -> bool:
        """Whether a pinned setting can change whether the transforms apply: a ``--set`` path that
        goes through a name pinning may add (as a number, where the path needs an object)."""
        names = set(PINNABLE) | {n for renames in _TARGET_NAMES.values() for n in renames.values()}
        return self.pin_defaults and any("." in dotted and dotted.split(".", 1)[0] in names for dotted, _ in self.set_values)

    def key_header(self, path: str) -> tuple[str, str] | None:
        """``api_key`` as the API at ``path`` reads it: Anthropic's Messages (``/v1/messages``) take
        ``x-api-key`` and answer a bearer token 401, every other API ``Authorization: Bearer``."""
        if not self.api_key:
            return None
        if api_for(path).name == "messages":
            return "x-api-key", self.api_key
        return "Authorization", f"Bearer {self.api_key}"

    def request_headers(self, captured: Sequence[Sequence[str]], path: str = "") -> list[tuple[str, str]]:
        """Captured headers minus what belongs to the old connection (the proxy's rule: hop-by-hop
        headers and those a ``Connection`` header names), redacted values and drops; ``api_key`` in
        the header of ``path``'s API (``key_header``)."""
        key = self.key_header(path)
        drop = {h.lower() for h in self.drop_headers} | {h.lower() for h in self.headers} | _HOP_REQUEST
        if key is not None:
            drop.add(key[0].lower())
        named = connection_named(
            (b"connection", v.encode("latin-1", "replace")) for n, v in captured if n.lower() == "connection"
        )
        drop |= {n.decode("latin-1") for n in named}
        out = [(n, v) for n, v in captured if n.lower() not in drop and REDACTED not in v]
        out.extend(self.headers.items())
        if key is not None:
            out.append(key)
        return out

    def dropped(self, captured: Iterable[Sequence[Sequence[str]]]) -> list[str]:
        """The ``drop_headers`` that a request of ``captured`` (each its captured headers) would have
        sent: a name no request carried (or carried only redacted, never sent) dropped nothing."""
        if not self.drop_headers:
            return []
        lists = {id(headers): headers for headers in captured}  # items of one header set share its list
        carried = {n.lower() for headers in lists.values() for n, v in headers if REDACTED not in v}
        return sorted(name for name in self.drop_headers if name.lower() in carried)


_HOP_REQUEST = frozenset(n.decode("latin-1") for n in HOP_REQUEST)

#: The APIs that read sampling settings from ``options`` (infertap/apis/ollama.py), and those settings.
_OPTIONS_APIS = frozenset({"ollama-chat", "ollama-generate"})
_OPTIONS = frozenset({*PINNABLE, "seed", "num_predict", "num_ctx", "stop"})
#: A sampling setting's canonical name (``apis.canonical``) -> Ollama's name for it in ``options``.
_OPTIONS_NAMES = {canonical(name): name for name in _OPTIONS}


class _SentFloat(float):
    """A number whose JSON text ``json.dumps`` would not write back (``1E5`` as ``100000.0``, ``1e400``
    as ``Infinity``, ``0.10000000000000001`` as ``0.1``), with that text: a float to the transforms."""

    text: str


class _SentInt(int):
    """``-0``, with its text: an int reads it as 0, which ``json.dumps`` writes ``0``."""

    text: str


def read_encoded(raw: bytes, encoding: str) -> Decoded | ValueError:
    """``raw`` with its content-encoding undone (``decoded_request``), or why it can't be: read once
    by the workload as it loads, for what the request asks and for the transforms' check alike."""
    try:
        return decoded_request(raw, encoding)
    except ValueError as exc:
        return exc


def _cut(encoding: str, raw: bytes) -> TransformError:
    """Why a transform can't apply to a body recorded cut short inside its content-encoding."""
    return TransformError(
        f"its request body was recorded cut short: its {len(raw)} bytes stop inside the {encoding} stream its "
        "Content-Encoding names, so an edited body would be a whole one the client never sent; replay it without "
        "body transforms (sent as recorded) or leave it out (--filter)"
    )


def _as_sent(raw: bytes, *, constants: bool = True) -> tuple[Any, bool]:
    """The JSON value of ``raw`` (as ``json.loads`` reads it, ``1e400`` included, ``NaN`` where
    ``constants``), each
    number that would not be written back as sent holding its text (a replay sends the recorded
    body but what it was told to change); whether there was such a number. Slower than ``loads``,
    by less than writing the body takes."""
    kept: list[float | int] = []

    def number(text: str) -> float:
        value = float(text)
        if math.isfinite(value) and repr(value) == text:
            return value
        sent = _SentFloat(value)
        sent.text = text
        kept.append(sent)
        return sent

    def integer(text: str) -> int:
        if text != "-0":
            return int(text)
        sent = _SentInt(0)
        sent.text = text
        kept.append(sent)
        return sent

    def constant(name: str) -> float:
        if not constants:
            raise ValueError(f"{name} is not JSON")
        return number(name)

    try:
        return json.loads(raw, parse_float=number, parse_int=integer, parse_constant=constant), bool(kept)
    except RecursionError:
        raise ValueError("JSON nested too deeply to be read") from None


def _written(body: dict[str, Any], sent: bool) -> bytes:
    """``body`` as compact JSON in UTF-8; where ``sent``, each number read with its text
    (``_as_sent``) written as that text: ``json.dumps`` would write ``-0`` as ``0``, ``1E5`` as
    ``100000.0``, and ``1e400`` as ``Infinity``, which no JSON reader takes."""
    mark = f"sent-{uuid.uuid4().hex}-"
    texts: list[str] = []
    if sent:
        _mark_sent(body, mark, texts)
    try:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # a float that isn't finite, and was never sent
        raise TransformError(f"a body transform made a number that is no JSON: {exc}") from exc
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate ("\ud83d"): JSON can carry it only escaped, as it was sent
        data = json.dumps(body, separators=(",", ":")).encode()
    if not texts:
        return data
    return re.sub(rb'"' + mark.encode() + rb'(\d+)"', lambda m: texts[int(m[1])].encode(), data)


def _own(value: Any) -> Any:
    """A value to place in one body: its objects and lists its own, so that what is done to that body
    (a later ``--set`` or ``--unset`` inside it, the numbers marked as they were sent) reaches no other."""
    if isinstance(value, dict):
        return {k: _own(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_own(v) for v in value]
    return value  # numbers, strings, true/false/null: never changed in place


def _is_sent(value: Any) -> bool:
    return isinstance(value, (_SentFloat, _SentInt))


def _mark_sent(body: dict[str, Any], mark: str, texts: list[str]) -> None:
    """Replace, in place, each number read with its text by ``mark`` and its place in ``texts``,
    where its text goes."""
    stack: list[Any] = [body]
    while stack:
        node = stack.pop()
        for key, value in list(node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(value, (dict, list)):
                stack.append(value)
            elif _is_sent(value):
                node[key] = f"{mark}{len(texts)}"
                texts.append(value.text)


def _in_options(dotted: str) -> str:
    """Where a setting goes in an Ollama request: a sampling setting under ``options``, by Ollama's
    name for it (``max_tokens``, ``max_completion_tokens`` -> ``num_predict``; ``repetition_penalty``
    -> ``repeat_penalty``): Ollama reads neither at the top level, nor those names in ``options``,
    so a ``--set max_tokens=64`` written as given would replay with no limit while saying one."""
    first, dot, rest = dotted.partition(".")
    name = canonical(first)
    if name not in _OPTIONS_NAMES:
        return dotted
    return f"options.{_OPTIONS_NAMES[name]}{dot}{rest}"


def _as_given(dotted: str) -> str:
    return dotted


def _has_path(body: dict[str, Any], dotted: str) -> bool:
    node: Any = body
    for key in dotted.split("."):
        if isinstance(node, list) and (i := _index(node, key)) is not None:
            node = node[i]
        elif isinstance(node, dict) and key in node:
            node = node[key]
        else:
            return False
    return True


def sent_query(recorded: str, target_query: str) -> str:
    """The query a replayed request is sent with: the recorded one less the parameters the capture
    redacted (their placeholder is no credential: the target's goes in the target URL), then the
    target URL's own parameters, which replace recorded ones of the same name."""
    own = [p for p in target_query.split("&") if p]
    names = {unquote_plus(p.partition("=")[0]) for p in own}
    kept = [p for p in without_redacted(recorded).split("&") if p and unquote_plus(p.partition("=")[0]) not in names]
    return "&".join(kept + own)


def redacted_fields(body: Any) -> Iterator[str]:
    """The dotted paths of a JSON body's credentials the capture redacted, as its redaction reads
    them (``secret_strings``): a secret field that reads ``"[REDACTED]"`` (a list of them named by
    its key: ``"api_keys": ["[REDACTED]"]``), any such value in an object of headers (whatever
    names the recorder was given), and a URL whose credential was taken out
    (``"server_url": "https://h/?api_key=[REDACTED]"``)."""
    seen = set()
    for path, value, secret in secret_strings(body, _any_header):
        if not (value == REDACTED if secret else redacted_url(value)):
            continue
        while secret and len(path) > 1 and isinstance(path[-1], int):
            path = path[:-1]
        dotted = ".".join(map(str, path))
        if dotted not in seen:
            seen.add(dotted)
            yield dotted


def _any_header(name: str) -> bool:
    return True


@dataclass(frozen=True)
class Pin:
    """A source engine's default to pin: ``value``, and ``ignored``, the fields the request sent
    for the setting that the source didn't read (a ``repeat_penalty`` sent to vLLM): a target that
    reads one of them would apply a value the source never did, so the pin replaces it."""

    value: Any
    ignored: frozenset[str] = frozenset()


def pinned_settings(settings: Mapping[str, Mapping[str, Any]]) -> dict[str, Pin]:
    """From an enrichment's effective settings, the engine defaults a target must not replace."""
    return {
        name: Pin(s["value"], frozenset(s.get("ignored") or ()))
        for name, s in settings.items()
        if name in PINNABLE and s.get("source") == "engine_default" and s.get("value") is not None
    }


# A JSON text's strings whole (their escapes inside) and its punctuation: all a scan for a
# top-level key needs to see; numbers, literals and whitespace between them are skipped over.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}\[\],:]', re.S)


def rechained(body: bytes, response_id: str) -> bytes:
    """``body`` with its ``previous_response_id`` naming ``response_id``: the id the target gave the
    response this turn continues, not the recorded engine's. Only that value's bytes change: the
    top-level key's, not one of the same name deeper in (a ``metadata`` entry)."""
    start, end = _top_level_string(body, "previous_response_id")
    return body[:start] + json.dumps(response_id).encode() + body[end:]


def _top_level_string(body: bytes, key: str) -> tuple[int, int]:
    """Where the string value of the top-level object's ``key`` lies in ``body`` (its quotes
    included); refused where it is missing, no string, or given twice (which one a reader takes
    is its own choice)."""
    spans: list[tuple[int, int] | None] = []
    depth, expect_key, pending = 0, False, b""  # pending: the token a matching key waits for next
    for m in _TOKENS.finditer(body):
        token = m.group()
        if pending == b":":
            pending = b"value" if token == b":" else b""
            continue
        if pending:  # the matching key's value: rewritable if it is a string
            spans.append(m.span() if token[:1] == b'"' else None)
            pending = b""
        if token[:1] == b'"':
            if expect_key and _key_is(token, key):
                pending = b":"
            expect_key = False
        elif token in (b"{", b"["):
            depth += 1
            expect_key = token == b"{" and depth == 1
        elif token in (b"}", b"]"):
            depth -= 1
        elif token == b",":
            expect_key = depth == 1
    if len(spans) == 1 and spans[0] is not None:
        return spans[0]
    why = "twice" if len(spans) > 1 else "in a form this replay can't rewrite"
    raise TransformError(f"the body names a previous_response_id {why}")


def _key_is(token: bytes, key: str) -> bool:
    """Whether a JSON string token reads ``key`` (escapes and all: ``"previous\\u005fresponse_id"``)."""
    if b"\\" not in token:
        return token[1:-1] == key.encode()
    try:
        return bool(json.loads(token) == key)
    except ValueError:
        return False
