"""Credential redaction, applied before a record is queued: secrets never reach the writer.

Only values are replaced; names, order, duplicates and every other byte stay as they were, so a
redacted capture still shows *that* a credential was sent and in which form.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import unquote_plus

REDACTED = "[REDACTED]"

DEFAULT_HEADERS = frozenset(
    {
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


class Redactor:
    """Knows which header names and query parameters hold secrets."""

    def __init__(self, extra_headers: Iterable[str] = (), extra_query_params: Iterable[str] = ()) -> None:
        self.header_names = DEFAULT_HEADERS | {h.strip().lower() for h in extra_headers}
        self.query_params = DEFAULT_QUERY_PARAMS | {q.strip().lower() for q in extra_query_params}
        self._header_bytes = frozenset(h.encode("latin-1") for h in self.header_names)

    def headers_from_asgi(self, raw: Iterable[tuple[bytes, bytes]]) -> list[list[str]]:
        """ASGI header pairs (lower-cased bytes names) -> redacted [name, value] string pairs."""
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
