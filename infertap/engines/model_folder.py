"""The model folder an engine serves from, read where this host can read it.

vLLM and SGLang apply files of the model's folder (generation_config.json above all) that their
APIs don't show; where the engine runs on this host and names a folder here, those files are read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infertap.capture.hostfacts import engine_is_local


def local_folder(base: str, path: Any, where: str) -> tuple[Path | None, str]:
    """The model folder ``path`` (as ``where`` names it) of the engine at ``base`` when this host
    can read it, else None and why not."""
    if not path or not isinstance(path, str):
        return None, f"{where} names no model folder"
    if not engine_is_local(base):
        return None, f"the model folder {path} is on the engine's host"
    if not Path(path).is_dir():
        return None, f"{where} {path} is no folder here (a hub id?)"
    return Path(path), ""


def folder_json(folder: Path, name: str) -> dict[str, Any] | None:
    """The JSON object in ``folder/name``, or None: no such file, unreadable, or no object."""
    try:
        value = json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
