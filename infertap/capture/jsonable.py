"""Turning records into JSON for people and pipes (``infertap cat``): bytes become text when they are
valid UTF-8, else ``{"base64": ...}``, so nothing is lost and most of it stays readable. A number
JSON has no form for (NaN, an infinity: a Prometheus gauge, a division by zero) becomes null,
since ``NaN`` would make the line invalid JSON for every strict reader (jq, JavaScript, Go)."""

from __future__ import annotations

import base64
import json
import math
from typing import Any


def jsonable(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def dumps(record: dict[str, Any]) -> str:
    return json.dumps(jsonable(record), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
