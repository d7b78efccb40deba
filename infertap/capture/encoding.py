"""A request body's content-encoding undone, within a bound, so that redaction can search it.

A client may compress what it sends (``Content-Encoding: gzip``); a credential in such a body is
invisible to a scan of its bytes. The bound keeps a small body that inflates without end (a
"zip bomb") from taking the recorder's memory: past it the body is said to be unsearched. The
decoding is a reader's of a response (``apis.body.undone``): one way to read a body, one bound.
"""

from __future__ import annotations

from infertap.apis import body as _body


def decoded(raw: bytes, encoding: str, limit: int | None = None) -> tuple[bytes | None, str]:
    """``raw`` with its content-encoding (gzip, deflate, zstd, br) undone, and "" ; or None and why
    it could not be (an encoding infertap doesn't decode, bytes that don't decode, more than
    ``limit``, by default ``apis.body.DECODED_LIMIT``). A stream cut short gives what it holds, as
    a reader would read it."""
    limit = _body.DECODED_LIMIT if limit is None else limit
    name = encoding.strip().lower()
    if name not in _body.UNDONE:
        return None, f"{name or 'an empty content-encoding'} is no encoding infertap decodes"
    try:
        (whole,) = _body.undone([raw], name, limit)
    except _body.TooLarge:
        return None, f"{name} decodes to more than {limit} bytes"
    except Exception as exc:  # each library's own error for bytes that aren't its format
        return None, f"{name} does not decode ({type(exc).__name__}: {exc})"
    return whole, ""
