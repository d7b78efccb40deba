"""How a flow that mitmproxy reports as failed ended, in the capture's words.

mitmproxy's messages don't always name the side that failed: its HTTP/2 layer words an RST_STREAM
from either peer "stream reset by client (CODE)", and either connection closing "peer closed
connection" (a GOAWAY "HTTP/2 connection closed: ..."). The side is read from what the flow still
shows. The client's connection closed for reading (its state, seen by the live addon only) is the
client gone. A peer that doesn't speak HTTP/2 sent no HTTP/2 frame, so the other one did. With
HTTP/2 on both sides a reset with any code but CANCEL is the upstream failing. A CANCEL is how
clients give a stream up (RFC 9113 8.7), but an upstream may cancel one too, its client still
connected: live, the side is read from mitmproxy's own stream (``reset_side``: its client side
already ended when the client's reset came first); where that can't be read (an imported flow
keeps no stream state) the ending is ``unknown``, never taken for the client's. A connection
closed by an unknown side reads as the upstream failing.
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
    cancelled_by: str | None = None,
) -> End:
    """The ending of a flow whose error is ``message``. ``client_gone``: the client's connection was
    closed when the error came; ``client_h2``, ``upstream_h2``: whether each side spoke HTTP/2
    (unknown: True); ``handed``: whether the request had gone to the upstream; ``cancelled_by``:
    the side that reset the stream with CANCEL (``client``, ``upstream``; None: unknown).

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
        if not lowered.startswith("stream reset by client (cancel)"):
            return "upstream_error"
        sides: dict[str | None, End] = {"client": "client_disconnected", "upstream": "upstream_error"}
        return sides.get(cancelled_by, "unknown")
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
        cancelled_by=reset_side(flow) if live else None,
    )


def reset_side(flow: Any) -> str | None:
    """Which side reset a live flow's HTTP/2 stream: ``client``, ``upstream`` or None (unknown).

    mitmproxy's error message names neither; its stream (``HttpStream``, found from the client's
    connection handler down its layers) does in the error hook: a client's reset marks the
    client side errored before the hook, an upstream's only after. A mitmproxy whose layers
    can't be read so says nothing."""
    stream = stream_of(flow)
    state = getattr(getattr(stream, "client_state", None), "__name__", None)
    if state == "state_errored":
        return "client"
    if state in ("state_done", "state_stream_request_body"):  # the request went, or was going, upstream
        return "upstream"
    return None


def stream_of(flow: Any) -> Any:
    """mitmproxy's ``HttpStream`` of a live ``flow``, or None."""
    try:
        from mitmproxy import ctx
        from mitmproxy.proxy.layers.http import HttpStream

        server = ctx.master.addons.get("proxyserver")
        todo = [getattr(server.connections.get(flow.client_conn.id), "layer", None)]
    except Exception:  # no proxyserver, other internals: unknown
        return None
    seen: set[int] = set()
    while todo:
        layer = todo.pop()
        if layer is None or id(layer) in seen:
            continue
        seen.add(id(layer))
        if isinstance(layer, HttpStream) and layer.flow is flow:
            return layer
        # Layers hold their child as .layer (NextLayer), .child_layer, or only its bound handler;
        # an HttpLayer its streams, whose CONNECT tunnels hold layers of their own.
        handler = getattr(layer, "_handle_event", None)
        todo += [getattr(layer, "layer", None), getattr(layer, "child_layer", None), getattr(handler, "__self__", None)]
        streams = getattr(layer, "streams", None)
        if isinstance(streams, dict):
            todo += [s for s in streams.values() if isinstance(s, HttpStream)]
    return None
