"""Out-of-band enrichment: what the engine really ran, for each exchange, without delaying any.

The proxy hands each finished exchange to a bounded queue (``submit`` never blocks; when the
queue is full the exchange is skipped and counted). One thread, with its own HTTP client, asks
the engine for the effective prompt tokens, reads the response for usage and server timings,
resolves the effective sampling settings, and writes an ``enrichment`` record. The same thread
keeps the engine snapshot current: at start, every ``probe_interval`` seconds, and whenever a
response names a different model or ``system_fingerprint`` (a model the engine only echoed from
the request is no sign of change).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from infertap.apis import (
    SAMPLING,
    TOKEN_IDS_SOURCE,
    Output,
    Request,
    api_for,
    read_request,
    read_response,
    response_not_kept,
    sampling_fields,
    text_is_output,
    with_tail_usage,
)
from infertap.apis.converse import LATENCY_SOURCE, latency_ns
from infertap.capture.records import EngineSnapshot, Enrichment
from infertap.capture.redact import Redactor

from .base import Engine
from .kinds import ProbeError
from .probe import open_engine, snapshot
from .trafficgate import TrafficGate

log = logging.getLogger("infertap.enrich")
#: Where a cut answer's output count came from (``response_not_kept``: its text unknown, never tokenized).
TAIL_USAGE = "usage (in the response's kept tail: the answer past the response limit)"
NO_TAIL_USAGE = "unknown (the answer was not kept whole, and its kept tail holds no usage)"
#: Why an answer's text was not counted: its tokens are not all its output (``apis.text_is_output``).
NOT_TEXT_ONLY = "not counted (the answer holds more than its text: reasoning, tool calls or other choices)"

_STOP = object()


def effective_settings(
    given: Mapping[str, Any], defaults: Mapping[str, Any] | None, ignored: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Each sampling setting with the value the engine used and where that value came from.

    ``given``: the request's sampling settings (``Request.sampling``; other names are made canonical).
    ``ignored``: fields the request sent that the engine doesn't read (``Engine.ignored``), kept
    beside the setting as ``ignored``, so that a value sent is never taken for one applied."""
    given = sampling_fields(given)
    names = set(SAMPLING) | (set(defaults) & set(SAMPLING) if defaults else set())
    names |= {k for k in given if k in SAMPLING}
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(names):
        if name in given and given[name] is not None:
            out[name] = {"value": given[name], "source": "request"}
        elif defaults is not None and name in defaults:
            out[name] = {"value": defaults[name], "source": "engine_default"}
        else:
            out[name] = {"value": None, "source": "unknown"}
        if ignored and ignored.get(name):
            out[name]["ignored"] = dict(ignored[name])
    return out


def enrichment(
    engine: Engine | None, snapshot_id: str | None, record: Mapping[str, Any], parsed: Output | None = None
) -> Enrichment | None:
    """The enrichment record of one exchange, or None when it is no generation request."""
    request = read_request(record)
    if not request.generation or request.body is None:
        return None
    path = record["path"]
    parsed = parsed or read_response(record)
    cut = response_not_kept(record)
    if cut:  # its answer unknown, but its kept tail may hold the engine's count (apis.tail_usage)
        with_tail_usage(parsed, record)
    prompt_tokens, output_tokens = _tokens(engine, path, request.body, parsed, cut)
    return {
        "type": "enrichment",
        "exchange_id": record["id"],
        "wall": time.time(),
        "engine": snapshot_id,
        "kind": engine.kind if engine else None,
        "response": {
            "api": parsed.api,
            "model": parsed.model,
            "system_fingerprint": parsed.system_fingerprint,
            "finish_reason": parsed.finish_reason,
            "finish_reason_raw": parsed.finish_reason_raw,
            "usage": parsed.usage,
            "parse_error": parsed.error,
        },
        "settings": _settings(engine, path, request, parsed.prompt_tokens),
        "server_timings": _server_timings(parsed),
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
    }


def _settings(engine: Engine | None, path: str, request: Request, prompt_tokens: int | None = None) -> dict[str, dict[str, Any]]:
    """The effective settings of a request: as the engine reads them, and changes them, where it is known."""
    if engine is None:
        return effective_settings(request.sampling, None)
    fields = api_for(path, request.body).sampling(request.body or {})
    settings = effective_settings(
        engine.requested(fields, path), engine.defaults_for(path, request.model), engine.ignored(fields, path)
    )
    return engine.adjusted(path, settings, prompt_tokens)


def _server_timings(parsed: Output) -> dict[str, Any] | None:
    """What the engine measured itself, labelled as such (never mixed with client-side times)."""
    if latency_ns(parsed.timings) is not None:
        return {"source": LATENCY_SOURCE, **(parsed.timings or {})}
    if parsed.timings:
        return {"source": "llama.cpp timings (server-measured)", **parsed.timings}
    if parsed.durations:
        return {"source": "Ollama durations in ns (server-measured)", **parsed.durations}
    return None


def _tokens(
    engine: Engine | None, path: str, body: dict[str, Any], parsed: Output, cut: bool = False
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Prompt and output tokens, each with its source: the engine's own tokenizer where it has one;
    of an answer not kept whole (``cut``), whose text is unknown, the usage its kept tail holds."""
    # A cut answer's text is unknown, never tokenized: the engine's own count, where its tail holds it.
    output = _tail_count(parsed.output_tokens) if cut else None
    if engine is None:
        reason = "engine unknown (probe failed)"
        return {"ids": None, "count": None, "source": reason}, output or {"ids": None, "count": None, "source": reason}
    usage_prompt = parsed.prompt_tokens
    prompt = engine.prompt_tokens(path, body, usage_prompt).as_dict()
    count = prompt["count"]
    prompt["agrees_with_usage"] = (count == usage_prompt) if count is not None and usage_prompt is not None else None
    if output is None:
        if parsed.token_ids:
            output = {"ids": parsed.token_ids, "count": len(parsed.token_ids), "source": TOKEN_IDS_SOURCE}
        elif parsed.text and not text_is_output(parsed):
            # The tokenizer on its text would leave its reasoning's or calls' tokens out: no count, so
            # that stats and replay's summary count its token events instead.
            output = {"ids": None, "count": None, "source": NOT_TEXT_ONLY}
        elif parsed.text:
            output = engine.output_tokens(parsed.text).as_dict()
        else:
            output = {"ids": None, "count": None, "source": "no output text"}
    return prompt, output


def _tail_count(count: int | None) -> dict[str, Any]:
    return {"ids": None, "count": count, "source": TAIL_USAGE if count is not None else NO_TAIL_USAGE}


class Enricher:
    """Owns the engine adapter, the snapshot and the enrichment queue for one recording."""

    def __init__(
        self,
        upstream: str,
        write: Callable[[Mapping[str, Any]], None],
        *,
        labels: Mapping[str, str] | None = None,
        model_file: str | None = None,
        busy: Callable[[], int] = lambda: 0,
        gate: TrafficGate | None = None,
        enrich: bool = True,
        probe_interval: float = 60.0,
        maxsize: int = 1024,
        timeout: float = 10.0,
        idle_wait: float = 30.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.upstream = upstream
        self._write = write
        self._labels = dict(labels or {})
        self._model_file = model_file
        self._busy = busy  # without a gate: wait for a lull in the traffic (replay)
        self._gate = gate  # a proxy's: hold its traffic while a call runs
        self._enrich = enrich
        self._probe_interval = probe_interval
        self._timeout = timeout
        self._idle_wait = idle_wait
        self._headers = dict(headers or {})
        self._queue: queue.Queue[Any] = queue.Queue(maxsize)
        self._thread: threading.Thread | None = None
        self.engine: Engine | None = None
        self.snapshot: EngineSnapshot | None = None
        self.enriched = 0
        self.dropped = 0
        self.failed = 0
        self.snapshots = 0
        # exchange id -> output tokens by the engine's tokenizer, of the answers without usage: the
        # count stats takes for them (before a stream's token events), which replay's summary takes too
        self.output_counts: dict[str, int] = {}
        self._last_seen: tuple[str | None, str | None] | None = None
        self._probe_error_logged = False

    def start(self) -> Enricher:
        """Probe and warm up here, before the caller takes traffic, then go on in a thread.

        The first probe imports modules, reads the model file and loads a tokenizer: work that
        holds the GIL in long stretches, which a stream in flight would feel as event-loop lag.
        Done now, it costs the start a moment (bounded by the probe's timeout) instead.
        """
        self._probe()
        if self.engine is not None and self._enrich:
            try:
                self.engine.warm()
            except Exception as exc:  # enrichment will say what it can't do, exchange by exchange
                log.warning("warming up enrichment for %s failed: %r", Redactor().url(self.upstream), exc)
        self._thread = threading.Thread(target=self._run, name="infertap-enricher", daemon=True)
        self._thread.start()
        return self

    def submit(self, record: Mapping[str, Any]) -> None:
        """Called by the proxy once per finished exchange; never blocks."""
        if not self._enrich or record.get("end") != "complete" or record.get("method") != "POST":
            return
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("enrichment queue full: %d exchanges left unenriched so far", self.dropped)

    def close(self, timeout: float = 30.0) -> None:
        """Finish what is queued (within ``timeout``), then stop."""
        if self._thread is None:
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._queue.put(_STOP, timeout=0.1)
                break
            except queue.Full:
                if time.monotonic() > deadline or not self._thread.is_alive():
                    break
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self.engine is not None:
            self.engine.http.close()

    # -- the enricher thread --------------------------------------------------------------------

    def _run(self) -> None:
        next_probe = time.monotonic() + self._probe_interval
        while True:
            try:
                item = self._queue.get(timeout=max(0.01, next_probe - time.monotonic()))
            except queue.Empty:
                self._probe()
                next_probe = time.monotonic() + self._probe_interval
                continue
            if item is _STOP:
                return
            try:
                self._enrich_one(item)
            except Exception:  # one bad exchange must not stop the enrichment of the rest
                self.failed += 1
                log.exception("enriching exchange %s failed", item.get("id"))

    def _exclusive(self) -> AbstractContextManager[bool]:
        """Around a call that would end the streams in flight (see Engine.interrupts_streams)."""
        if self._gate is not None:
            return self._gate.exclusive(self._idle_wait)
        return contextlib.nullcontext(self._idle())

    def _idle(self) -> bool:
        """Whether no exchange is in flight, waiting up to ``idle_wait`` for one."""
        deadline = time.monotonic() + self._idle_wait
        while self._busy() > 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def _probe(self) -> None:
        try:
            if self.engine is None:
                self.engine = open_engine(
                    self.upstream, model_file=self._model_file, timeout=self._timeout, headers=self._headers
                )
            else:  # ask afresh: a new adapter over a new set of answers
                fresh = open_engine(self.upstream, model_file=self._model_file, timeout=self._timeout, headers=self._headers)
                self.engine.http.close()
                self.engine = fresh
        except ProbeError as exc:
            if not self._probe_error_logged:
                log.warning("cannot probe the upstream (will retry): %s", exc)
                self._probe_error_logged = True
            return
        self.engine.gate = self._exclusive
        snap = snapshot(self.engine, self._labels)
        if self.engine.interrupts_streams and snap["facts"]["models"]["value"] is None and self.snapshot is not None:
            return  # its lock-taking endpoints were skipped (traffic in flight): ask again later
        if self.snapshot is None or snap["fingerprint"] != self.snapshot["fingerprint"]:
            self.snapshot = snap
            self.snapshots += 1
            self._write(snap)

    def _enrich_one(self, record: dict[str, Any]) -> None:
        if self.engine is None:
            self._probe()
        # A response from a different model or build means the engine changed under us: take a
        # new snapshot first, so this exchange's enrichment points at the right one.
        parsed = read_response(record)
        model = parsed.model
        if self.engine is not None and self.engine.echoes_model and model == read_request(record).model:
            model = None  # the client's own name, echoed back: two clients naming two models are one engine
        seen = (model, parsed.system_fingerprint)
        # Compared where both responses say: vLLM sends system_fingerprint in a stream only with
        # its usage chunk, and a stream without one is no sign of a different engine.
        last = self._last_seen
        if last is not None and any(a is not None and b is not None and a != b for a, b in zip(seen, last, strict=True)):
            log.info("the upstream now reports %s; probing it again", seen)
            self._probe()
        if any(seen):
            before = last or (None, None)
            self._last_seen = (seen[0] or before[0], seen[1] or before[1])
        out = enrichment(self.engine, self.snapshot["fingerprint"] if self.snapshot else None, record, parsed)
        if out is not None:
            self._write(out)
            self.enriched += 1
            count = out["output_tokens"].get("count")
            if parsed.output_tokens is None and isinstance(count, int):
                self.output_counts[record["id"]] = count


def enrich_capture(
    path: Any,
    engine_url: str,
    *,
    model_file: str | None = None,
    labels: Mapping[str, str] | None = None,
    progress: Callable[[int], None] | None = None,
    headers: Mapping[str, str] | None = None,
    enrich: bool = True,
    output_counts: dict[str, int] | None = None,
) -> dict[str, int]:
    """Enrich a capture after the fact: a new run appended to it, exchanges left as they are.

    ``output_counts``, where given, receives the output tokens the engine's tokenizer counted of each
    answer without usage (by exchange id), as ``Enricher.output_counts``: the count stats takes for
    it, which a sharded replay's summary, enriched after it, takes too.

    The engine should serve the same model and configuration as when the capture was made; its
    snapshot is stored alongside, so a later reader can check that it does.
    """
    from infertap.capture.reader import CaptureReader
    from infertap.capture.writer import CaptureWriter

    reader = CaptureReader(path)  # lists the segments now: the ones appended below aren't read
    engine = open_engine(engine_url, model_file=model_file, headers=headers)
    counts = {"exchanges": 0, "enriched": 0, "skipped": 0}
    try:
        snap = snapshot(engine, labels)
        recorder = {"kind": "enrich", "engine": Redactor().url(engine.base), "pid": os.getpid()}  # info: still writing
        with CaptureWriter(reader.path, recorder=recorder, labels=labels) as writer:
            writer.write(snap)
            seen: dict[str, int] = {}  # each id's exchanges so far: which of them an enrichment is of
            for record in reader.exchanges() if enrich else ():  # without: the engine's snapshot alone
                counts["exchanges"] += 1
                occurrence = seen[record["id"]] = seen.get(record["id"], 0) + 1
                parsed = read_response(record)
                out = enrichment(engine, snap["fingerprint"], record, parsed) if record.get("end") == "complete" else None
                if out is None:
                    counts["skipped"] += 1
                else:
                    out["occurrence"] = occurrence  # an id a copied segment repeats names one exchange
                    writer.write(out)
                    counts["enriched"] += 1
                    count = out["output_tokens"].get("count")
                    if output_counts is not None and parsed.output_tokens is None and isinstance(count, int):
                        output_counts[record["id"]] = count
                if progress:
                    progress(counts["exchanges"])
        if writer.error:
            raise writer.error
    finally:
        engine.http.close()
    return counts
