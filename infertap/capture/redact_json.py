"""Credentials in JSON: found in a body's bytes where they stand, or in a parsed value (see ``redact``).

Both read a string by the key that holds it and the key of the object around it
(``redact_names.secret_field``), and take a string that is a whole URL for one whose query or
userinfo may hold a credential (an MCP ``server_url`` with ``?api_key=``).
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from .redact_names import BODY_NAMES, HOLDERS, KEY_ENDINGS, default_secret_header, secret_field

REDACTED = "[REDACTED]"
_TOKEN = REDACTED.encode()

#: A URL rewritten without its credentials, those taken out added to the set given.
UrlRule = Callable[[str, "set[str] | None"], str]


def _reversed_keys(endings: set[str], whole: set[str]) -> bytes:
    """A regex for a key read backwards from its closing quote, as ``plain`` reads it (any casing
    given the flag, any ``-`` or ``_`` between its letters): one that ends in one of ``endings``, or
    is one of ``whole`` to its opening quote. The names share their endings (``token``, ``key``):
    written as a tree of their reversed letters, a key is read once, not once per name."""
    tree: dict[str, Any] = {}
    for name, kind in [*((e, "ending") for e in endings), *((n, "whole") for n in whole)]:
        node = tree
        for letter in reversed(name):
            node = node.setdefault(letter, {})
        node[kind] = True  # "ending"/"whole" are no letters: no clash with a child

    def after(node: dict[str, Any]) -> bytes:  # what may follow a key's letters read so far
        if node.get("ending"):
            return b""
        options = [b'"'] if node.get("whole") else []
        options += [re.escape(c.encode()) + after(child) for c, child in sorted(node.items()) if len(c) == 1]
        return b"[-_]*(?:" + b"|".join(options) + b")"

    return after(tree)


# One scan for a JSON key that may hold a secret (or an object of them), in any casing
# ("max_tokens" is no such key), or for a key written with an escape (``"api\u005fkey"``), which
# only a parser reads by its name. It runs over the body reversed, from each key's ``":``: a
# pattern that begins with a literal is searched at C speed, one that begins with the endings'
# letters tries every letter of the body. A key ending as a credential's (``KEY_ENDINGS``) or a
# holder's does is found whatever precedes it; one of ``BODY_NAMES`` only whole, to its opening
# quote (``"token"``, ``"_Token"``; not ``"page_token"``, ``"next_secret"``, which ``secret_key``
# refuses): a body of thousands of such keys and no credential was walked whole (0.4 s per 2 MiB
# on this 2-core machine, the GIL held all along), to change nothing. ``secret_field`` decides.
_BODY_HINT = re.compile(
    rb':\s*"(?:' + _reversed_keys({*KEY_ENDINGS, *HOLDERS}, set(BODY_NAMES)) + rb'|[^"\\]{5,69}+(?<=[0-9a-fA-F]{4}u)\\)',
    re.IGNORECASE,
)
# A URL with a query, a fragment or a userinfo (``/`` may be written ``\/``, ``?`` ``\u003f``):
# what a redactor given parameter names beyond the defaults (``--redact-query``) looks into.
_URL_HINT = re.compile(rb':(?:\\?/){2}[^"\s]*?(?:[?#@]|\\u00(?:3[fF]|23|40))')
# A URL with a userinfo, or a query or fragment parameter whose name has a credential's word in it
# (``redact_names.secret_query_param``'s names and endings: key, token, auth, sig, secret,
# password, credential, connection string): an agent's conversation quotes search and page URLs
# (``?q=...``) that hold none, and the body's walk costs a hundred times its scan.
_URL_CREDENTIAL_HINT = re.compile(
    rb':(?:\\?/){2}(?:[^/\\"\s?#@]*(?:@|\\u0040)|[^"\s]*?(?:[?&#;]|\\u00(?:3[fF]|23|26))[^"\s=&#]*?'
    rb'(?:key|token|auth|sig|secret|passw|credential|connectionstring)[^"\s=&#]*?(?:=|\\u003[dD]))',
    re.IGNORECASE,
)
# A string that is one URL, nothing around it: a prompt that quotes a URL is no URL.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+\Z")
# Every JSON string of a body in order (never out of step: outside its strings JSON has no quotes),
# with the string after it when it is a key (group 2: where a secret key's value stands, to the
# body's end in a torn one) or the ``[`` or ``{`` it opens (group 3). Each string is consumed whole
# (possessive), to the body's end when it never closes, so no byte is scanned twice: linear in the
# body. A recorder scans a small body on its event loop and a large or compressed one on a worker
# thread (``scrubbing.Scrubbed``), where a scan holds the GIL as long: linear matters on both.
_JSON_STRING = re.compile(rb'"((?:[^"\\]++|\\.)*+)(?:"(?:\s*:\s*(?:"((?:[^"\\]++|\\.)*+)(?:"|\\?\Z)|([\[{])))?|\\?\Z)', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


_NAME_LETTERS = max(len(n) for n in {*BODY_NAMES, *KEY_ENDINGS, *HOLDERS})
# What a match of each hint begins as when it runs on to the end of the text searched: the
# window scan below grows a window that ends in one (see ``_found``). Looser than the hints
# (any letters for a name), never tighter.
_BODY_OPEN = re.compile(
    rb':\s*+(?:"[^"\\]{0,69}+|"(?:[-_]*+[a-z]){0,%d}+[-_]*+)?\Z' % _NAME_LETTERS,
    re.IGNORECASE,
)
_URL_OPEN = re.compile(rb':(?:(?:\\?/){0,2}\\?|(?:\\?/){2}[^"\s]*)\Z')
#: How much of a body one ``search`` reads, and how far past that a match found from it may run.
WINDOW = 256 * 1024
_OVERLAP = 4096


def hinted(raw: bytes, window: int = WINDOW, any_url: bool = False) -> bool:
    """Whether a body may hold a credential ``sub_secrets`` takes out: a scan each, no parse,
    ``window`` bytes at a time (``_found``); ``any_url``: every URL with a query, fragment or
    userinfo may (parameter names beyond the defaults are redacted)."""
    n = len(raw)
    url = _URL_HINT if any_url else _URL_CREDENTIAL_HINT
    return _found(_BODY_HINT, _BODY_OPEN, n, lambda a, b: raw[n - b : n - a][::-1], window) or _found(
        url, _URL_OPEN, n, lambda a, b: raw[a:b], window
    )


def _found(
    pattern: re.Pattern[bytes], opening: re.Pattern[bytes], n: int, piece: Callable[[int, int], bytes], window: int
) -> bool:
    """Whether ``pattern`` matches in a text of ``n`` bytes, whose bytes ``a`` to ``b`` are
    ``piece(a, b)``, searched a window at a time. CPython's ``re`` holds the GIL for a whole
    ``search``: a body of many MiB searched at once would stall an event loop for as long from a
    worker thread as on the loop itself; between windows other threads run. A match that starts
    in a window and runs past its end is one that ``opening`` finds starting in the window and
    reaching the end: the window then grows until none does (or it reaches the text's end). An
    opening holds one quote at most, the text's last, after the colon it starts at: it is looked
    for from the last colon before that quote, not tried at every colon of the window (a body of
    thousands of keys spent more on that than on the hint)."""
    start = 0
    while start < n:
        end = min(n, start + window + min(window, _OVERLAP))
        while True:
            text = piece(start, end)
            if pattern.search(text):
                return True
            quote = text.rfind(b'"')
            cut = opening.search(text, max(0, text.rfind(b":", 0, quote)) if quote >= 0 else 0) if end < n else None
            if cut is None or cut.start() >= window:
                break
            end = min(n, end + (end - start))
        start += window
    return False


def is_url(text: str) -> bool:
    return "://" in text and _URL.match(text) is not None


def _text(string: bytes) -> str:
    """A JSON string's bytes (between its quotes) as it reads; an escape JSON doesn't know leaves
    the bytes as they stand."""
    if b"\\" in string:
        with contextlib.suppress(ValueError):
            return str(json.loads(b'"' + string + b'"'))
    return string.decode("utf-8", "replace")


class _Open:
    """A container open around the scan: a list (``secret`` when its strings are credentials) or an
    object (``holder``: the key it is the value of)."""

    __slots__ = ("holder", "is_list", "secret")

    def __init__(self, is_list: bool, secret: bool = False, holder: str | None = None) -> None:
        self.is_list, self.secret, self.holder = is_list, secret, holder


#: How many strings a walk off an event loop reads between its pauses (~0.5 ms of reading), and the
#: pause. A walk holds the GIL in Python bytecode, which CPython takes from it only once another
#: thread has waited 5 ms for it: a replay's or recorder's loop beside a walk of many MiB (a
#: credential among thousands of strings: 0.4 s per 2 MiB) woke up to 5 ms late all along, and the
#: small requests due meanwhile lagged as long. A real sleep, not ``sleep(0)``, lets the waiting
#: thread in first. On a loop's own thread (a small body) a pause would only delay the loop.
PAUSE_EVERY = 300
PAUSE_S = 50e-6


def _pause() -> None:
    time.sleep(PAUSE_S)


def _on_loop() -> bool:
    # No loop runs in a process that never imported asyncio; importing it here would cost every
    # command that reads a capture (``stats`` on a cached one among them) 30-50 ms for nothing.
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def sub_secrets(raw: bytes, found: set[str] | None, secret_header: Callable[[str], bool], url: UrlRule) -> bytes:
    """``raw`` with the string value of each secret field replaced where it stands (each string of
    it when it is a list: ``"api_keys": ["sk-1", "sk-2"]``), however deep and however written
    (escapes in the key or the value), and each URL's credentials taken out by ``url``; every other
    byte as it was. ``found`` collects the values as they read. A body that does not parse is read
    the same way."""
    edits: list[tuple[int, int, bytes | None]] = []  # (start, end, the new bytes; None: the placeholder)
    opened: list[_Open] = []  # innermost last
    last = 0
    every = 0 if _on_loop() else PAUSE_EVERY
    for i, m in enumerate(_JSON_STRING.finditer(raw), 1):
        if every and not i % every:
            _pause()
        _nest(opened, raw, last, m.start())
        last = m.end()
        top = opened[-1] if opened else None
        if top is not None and top.is_list:  # a value in a list
            if top.secret:
                edits.append((*m.span(1), None))
            else:
                _url_edit(edits, m, 1, url, found)
            continue
        if m.group(2) is None and m.group(3) is None:
            continue  # a key whose value is no string nor container, or a lone string
        key = _text(m.group(1))
        holder = top.holder if top is not None else None
        if m.group(2) is not None:
            if secret_field(key, holder, secret_header):
                edits.append((*m.span(2), None))
            else:
                _url_edit(edits, m, 2, url, found)
        elif m.group(3) == b"[":
            opened.append(_Open(True, secret_field(key, holder, secret_header)))
        else:
            opened.append(_Open(False, holder=key))
    return _edited(raw, edits, found)


def _nest(opened: list[_Open], raw: bytes, start: int, end: int) -> None:
    """``opened`` after the brackets between two strings (``raw[start:end]``, where JSON has no
    quotes, so every bracket there is the body's own): a list in a list is as its holder is; an
    object in a list is held by no key."""
    if start == end:
        return
    for m in _BRACKETS.finditer(raw, start, end):
        bracket = m.group()
        if bracket in b"]}":
            if opened:
                opened.pop()
        elif bracket == b"[":
            opened.append(_Open(True, bool(opened) and opened[-1].is_list and opened[-1].secret))
        else:
            opened.append(_Open(False))


def _url_edit(
    edits: list[tuple[int, int, bytes | None]], m: re.Match[bytes], group: int, url: UrlRule, found: set[str] | None
) -> None:
    """An edit of the string in ``group`` when it is a URL that holds a credential."""
    value = m.group(group)
    if b"//" not in value:
        return
    text = _text(value)
    if not is_url(text):
        return
    clean = url(text, found)
    if clean != text:
        new = clean.encode() if b"\\" not in value else json.dumps(clean, ensure_ascii=False)[1:-1].encode()
        edits.append((*m.span(group), new))


def _edited(raw: bytes, edits: list[tuple[int, int, bytes | None]], found: set[str] | None) -> bytes:
    """``raw`` with each edit made (a placeholder for a value that already reads so is no edit), the
    values replaced by the placeholder added to ``found``."""
    made: list[tuple[int, int, bytes]] = []
    for start, end, new in edits:
        if new is None:
            value = raw[start:end]
            if value == _TOKEN:
                continue
            if found is not None:
                found.add(_text(value))
        made.append((start, end, _TOKEN if new is None else new))
    return spliced(raw, made) if made else raw


#: The most of a body that ``spliced`` copies in one slice. CPython holds the GIL while it copies
#: a slice, and lets it go while it joins bytes of 1 MiB or more: a body of many MiB is cut in runs
#: this long (other threads, an event loop streaming other exchanges, run between them) and joined
#: whole without the GIL, rather than held for one copy of nearly all of it (37-118 ms at 52 MiB
#: on this 2-core machine: python -m bench.redaction).
_RUN = 256 * 1024


def spliced(raw: bytes, edits: list[tuple[int, int, bytes]], run: int = _RUN) -> bytes:
    """``raw`` with each span ``(start, end)`` of ``edits`` (in order, apart) replaced by its bytes,
    the rest copied ``run`` bytes at most at a time."""
    pieces: list[bytes] = []
    pos = 0
    for start, end, new in [*edits, (len(raw), len(raw), b"")]:
        pieces.extend(raw[a : min(start, a + run)] for a in range(pos, start, run))
        pieces.append(new)
        pos = end
    return b"".join(pieces)


def secret_strings(
    node: Any, secret_header: Callable[[str], bool] = default_secret_header
) -> Iterator[tuple[tuple[str | int, ...], str, bool]]:
    """The strings of a parsed JSON value that redaction reads, as ``sub_secrets`` reads them in its
    bytes: each one's path, its value, and whether it is a credential (else it is a URL, whose
    credentials are taken out). Walked with a stack, not recursion, so that a body nested as deep
    as its parser allowed is walked too."""
    stack: list[tuple[tuple[str | int, ...], Any, str | None, bool]] = [((), node, None, False)]
    while stack:
        path, item, holder, secret = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                where = (*path, key)
                is_secret = isinstance(key, str) and secret_field(key, holder, secret_header)
                if isinstance(value, str):
                    if is_secret or is_url(value):
                        yield where, value, is_secret
                elif isinstance(value, list):
                    stack.append((where, value, None, is_secret))
                elif isinstance(value, dict):
                    stack.append((where, value, key if isinstance(key, str) else None, False))
        elif isinstance(item, list):
            for i, value in enumerate(item):
                if isinstance(value, str):
                    if secret or is_url(value):
                        yield (*path, i), value, secret
                elif isinstance(value, list):
                    stack.append(((*path, i), value, None, secret))
                elif isinstance(value, dict):
                    stack.append(((*path, i), value, None, False))
