"""What a capture holds, at a glance (``infertap info``): counts, span, engines, paths, endings."""

from __future__ import annotations

import json
import os
from collections import Counter
from typing import Any

from infertap.apis import header

from .reader import CaptureReader


def _model_of(body: bytes) -> str | None:
    if not body or body[:1] != b"{":
        return None
    try:
        model = json.loads(body).get("model")
    except (ValueError, AttributeError):
        return None
    return model if isinstance(model, str) else None


def summarize(path: str | os.PathLike[str]) -> dict[str, Any]:
    reader = CaptureReader(path)
    types: Counter[str] = Counter()
    paths: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    models: Counter[str] = Counter()
    servers: Counter[str] = Counter()
    engines: Counter[str] = Counter()
    upstreams: Counter[str] = Counter()
    runs: dict[str, dict[str, Any]] = {}
    labels: dict[str, str] = {}
    first = last = None
    raw_bytes = 0
    current = ""
    for record in reader.records():
        rtype = record.get("type", "?")
        types[rtype] += 1
        if rtype == "header":
            current = record["run_id"]
            run = runs.setdefault(current, {"recorder": record.get("recorder", {}), "segments": 0})
            run["segments"] += 1
            labels.update(record.get("labels") or {})
            upstream = (record.get("recorder") or {}).get("upstream")
            if upstream and run["segments"] == 1:
                upstreams[upstream] += 1
        elif rtype == "exchange":
            paths[f"{record['method']} {record['path']}"] += 1
            statuses[str(record.get("status"))] += 1
            ends[record.get("end", "?")] += 1
            model = _model_of(record.get("request_body", b""))
            if model:
                models[model] += 1
            server = header(record.get("response_headers"), "server")
            if server:
                servers[server] += 1
            start = record["wall"]
            stop = start + (record["sent_ns"] - record["start_ns"] + record.get("end_ns", 0)) / 1e9
            first = start if first is None else min(first, start)
            last = stop if last is None else max(last, stop)
            raw_bytes += len(record.get("request_body", b"")) + sum(len(c) for c in record.get("chunks", ()))
        elif rtype == "footer" and record.get("loop_lag"):
            runs[current]["loop_lag"] = record["loop_lag"]  # the run's latest (footers are cumulative)
        elif rtype == "engine":
            version = ((record.get("facts") or {}).get("version") or {}).get("value")
            engines[f"{record.get('kind') or 'unknown'} {version or '(version unknown)'} at {record.get('url')}"] += 1
    on_disk = sum(p.stat().st_size for p in reader.segments)
    return {
        "path": str(reader.path),
        "segments": len(reader.segments),
        "bytes_on_disk": on_disk,
        "body_bytes": raw_bytes,
        "records": dict(types),
        "exchanges": types.get("exchange", 0),
        "runs": len(runs),
        "recorders": sorted({r["recorder"].get("kind", "?") for r in runs.values()}),
        "upstreams": dict(upstreams),
        "labels": labels,
        "first_wall": first,
        "last_wall": last,
        "span_s": (last - first) if first is not None and last is not None else 0.0,
        "engines": dict(engines),
        "server_headers": dict(servers),
        "models": dict(models),
        "paths": dict(paths.most_common()),
        "statuses": dict(statuses.most_common()),
        "ends": dict(ends.most_common()),
        "loop_lag": {rid: r["loop_lag"] for rid, r in runs.items() if "loop_lag" in r},  # per recording run
        "closed_cleanly": reader.closed_cleanly,
        "torn": [str(t) for t in reader.torn],
    }
