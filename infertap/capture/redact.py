"""Credential redaction, applied before a record is queued: secrets never reach the writer.

Only values are replaced; names, order, duplicates and every other byte stay as they were, so a
redacted capture still shows *that* a credential was sent and in which form.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote_plus, urlsplit, urlunsplit

REDACTED = "[REDACTED]"

DEFAULT_HEADERS = frozenset(
    {
        "x-infertap-token",
        "authorization",
        "proxy-authorization",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "ocp-apim-subscription-key",
        "cookie",
        "set-cookie",
    }
)
DEFAULT_QUERY_PARAMS = frozenset(
    {"key", "api_key", "apikey", "api-key", "x-api-key", "token", "access_token", "auth", "sig", "signature"}
)


#: JSON body keys whose string values are secrets (some SDKs send the key in the body).
DEFAULT_BODY_KEYS = frozenset(
    {"api_key", "apikey", "api-key", "x-api-key", "access_token", "refresh_token", "client_secret", "password", "secret", "token"}
)
# One scan for a JSON key that may hold a secret, in any casing ("max_tokens" is no such key).
_BODY_HINT = re.compile(
    rb'"(?:x-)?(?:api[-_]?key|access[-_]?token|refresh[-_]?token|client[-_]?secret|password|secret|token)"\s*:', re.IGNORECASE
)


# The same keys with the JSON string after them: for a body that can't be parsed (torn, not JSON
# at all, nested too deeply), whose secrets are then found where they stand.
_BODY_SECRET = re.compile(
    rb'("(?:x-)?(?:api[-_]?key|access[-_]?token|refresh[-_]?token|client[-_]?secret|password|secret|token)"\s*:\s*")'
    rb'(?:[^"\\]|\\.)*"',
    re.IGNORECASE | re.DOTALL,
)


def _secret_strings(node: object, keys: frozenset[str], out: set[str]) -> None:
    """The string values of secret keys anywhere in ``node``: walked with a stack, not recursion, so
    that a body nested as deep as its parser allowed is walked too."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                if (
                    isinstance(key, str)
                    and key.replace("_", "").replace("-", "").lower() in keys
                    and isinstance(value, str)
                    and value
                ):
                    out.add(value)
                else:
                    stack.append(value)
        elif isinstance(item, list):
            stack.extend(item)


class Redactor:
    """Knows which header names and query parameters hold secrets."""

    def __init__(self, extra_headers: Iterable[str] = (), extra_query_params: Iterable[str] = ()) -> None:
        self.header_names = DEFAULT_HEADERS | {h.strip().lower() for h in extra_headers}
        self.query_params = DEFAULT_QUERY_PARAMS | {q.strip().lower() for q in extra_query_params}
        self._header_bytes = frozenset(h.encode("latin-1") for h in self.header_names)
        self._body_keys = frozenset(k.replace("_", "").replace("-", "").lower() for k in DEFAULT_BODY_KEYS)

    def headers_from_asgi(self, raw: Iterable[tuple[bytes, bytes]]) -> list[list[str]]:
        """Bytes header pairs (ASGI scope, httpx raw, mitmproxy fields; any casing) -> redacted [name, value] string pairs."""
        out = []
        for name, value in raw:
            if name.lower() in self._header_bytes:
                out.append([name.decode("latin-1"), self.redact_value(name, value.decode("latin-1"))])
            else:
                out.append([name.decode("latin-1"), value.decode("latin-1")])
        return out

    def header_pairs(self, pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
        """String header pairs in any casing -> redacted [name, value] pairs."""
        return [[n, self.redact_value(n, v) if n.lower() in self.header_names else v] for n, v in pairs]

    @staticmethod
    def redact_value(name: str | bytes, value: str) -> str:
        # Keep an auth scheme ("Bearer", "Basic"): it tells how the client authenticated, not the secret.
        lname = name.lower()
        if lname in ("authorization", b"authorization", "proxy-authorization", b"proxy-authorization"):
            scheme, sep, rest = value.partition(" ")
            if sep and rest and scheme.isalpha():
                return f"{scheme} {REDACTED}"
        return REDACTED

    def query(self, query: str) -> str:
        """Redact secret parameters of a raw query string, leaving its other bytes exactly as they were."""
        if not query:
            return query
        parts = query.split("&")
        changed = False
        for i, part in enumerate(parts):
            name, sep, _ = part.partition("=")
            if sep and unquote_plus(name).strip().lower() in self.query_params:
                parts[i] = f"{name}={REDACTED}"
                changed = True
        return "&".join(parts) if changed else query

    def url(self, url: str) -> str:
        """A URL fit to record or print: the password of its userinfo and secret query values redacted."""
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username}:{REDACTED}@{netloc.rpartition('@')[2]}"
        return urlunsplit(parts._replace(netloc=netloc, query=self.query(parts.query)))

    def body(self, raw: bytes) -> bytes:
        """A JSON body with the values of secret keys (``api_key``, ``password``, ...) replaced where
        they occur, every other byte as it was. Bodies that mention no such key are returned as is
        after a substring check, so the common case costs next to nothing; one that does but does not
        parse has the string after each such key replaced."""
        if not raw or not _BODY_HINT.search(raw):
            return raw
        import json

        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON to a parser: each secret key's string where it stands
            return _BODY_SECRET.sub(rb"\1" + REDACTED.encode() + b'"', raw)
        secrets: set[str] = set()
        _secret_strings(parsed, self._body_keys, secrets)
        for secret in sorted(secrets, key=len, reverse=True):
            for form in {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}:
                raw = raw.replace(form.encode("utf-8"), REDACTED.encode())
        return raw
