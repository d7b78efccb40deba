"""How a flow that mitmproxy reports as failed ended, in the capture's words.

mitmproxy's messages don't always name the side that failed: its HTTP/2 layer words an RST_STREAM
from either peer "stream reset by client (CODE)", and either connection closing "peer closed
connection" (a GOAWAY "HTTP/2 connection closed: ..."). The side is read from what the flow still
shows. The client's connection closed for reading (its state, seen by the live addon only) is the
client gone. A peer that doesn't speak HTTP/2 sent no HTTP/2 frame, so the other one did. With
HTTP/2 on both sides a reset with CANCEL is the client giving up its stream (RFC 9113 8.7: how
clients cancel), any other code the upstream failing; an upstream that cancels a stream itself
while the client stays connected reads as the client gone, and a connection closed by an unknown
side (an imported flow keeps no connection state) as the upstream failing.
"""

from __future__ import annotations

from typing import Any

from infertap.capture.records import End

KILLED = "Connection killed."  # mitmproxy's flow.Error.KILLED_MESSAGE: flow.kill(), by its user or an addon
_H2_EITHER_SIDE = ("stream reset by client", "peer closed connection", "http/2 connection closed", "http/2 protocol error")


def end_of_error(
    message: str,
    *,
    client_gone: bool = False,
    client_h2: bool = True,
    upstream_h2: bool = True,
    handed: bool = True,
) -> End:
    """The ending of a flow whose error is ``message``. ``client_gone``: the client's connection was
    closed when the error came; ``client_h2``, ``upstream_h2``: whether each side spoke HTTP/2
    (unknown: True); ``handed``: whether the request had gone to the upstream.

    mitmproxy's own doing is no upstream error: a request over its body_size_limit is ``refused``,
    as one over the proxy's --max-body-mb; a kill (``flow.kill()``: its user, or an addon such as
    block_list's 444) before the request went upstream is ``refused`` too (no engine saw it, as
    workload identity counts), after it ``cancelled`` (the proxy's side cut it in flight), as is a
    response cut at body_size_limit."""
    lowered = message.lower()
    if message == KILLED:
        return "cancelled" if handed else "refused"
    if "body exceeds mitmproxy's body_size_limit" in lowered:
        return "refused" if lowered.startswith("request") else "cancelled"
    if client_gone or "client disconnected" in lowered or "client closed" in lowered:
        return "client_disconnected"
    if lowered.startswith(_H2_EITHER_SIDE):
        if not upstream_h2:
            return "client_disconnected"
        if not client_h2:
            return "upstream_error"
        return "client_disconnected" if lowered.startswith("stream reset by client (cancel)") else "upstream_error"
    if "timeout" in lowered or "timed out" in lowered:
        return "timeout"
    return "upstream_error"


def end_of_flow(flow: Any, *, live: bool, handed: bool = True) -> End:
    """``end_of_error`` of a failed mitmproxy flow: ``live`` in the addon's error hook, where the
    client connection's state is current (a flow read from a file has none)."""
    from mitmproxy.connection import ConnectionState

    return end_of_error(
        flow.error.msg if flow.error else "unknown error",
        client_gone=live and not flow.client_conn.state & ConnectionState.CAN_READ,
        client_h2=flow.request.http_version == "HTTP/2.0",  # the client's request line, as it sent it
        upstream_h2=flow.server_conn.alpn == b"h2",  # mitmproxy speaks HTTP/2 upstream only over TLS, by ALPN
        handed=handed,
    )
