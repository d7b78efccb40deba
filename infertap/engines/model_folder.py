"""The model folder an engine serves from, read where this host can read it.

vLLM and SGLang apply files of the model's folder (generation_config.json above all) that their
APIs don't show; where the engine runs on this host and names a folder here, those files are read.
An engine that serves a hub id (``Qwen/Qwen2.5-0.5B-Instruct``) reads them from the Hugging Face
cache, as huggingface_hub lays it out (docs: "Hub Local Cache"): the snapshot of the revision that
``refs/<revision>`` names, in ``models--<org>--<name>`` under the cache folder.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from infertap.capture.hostfacts import engine_is_local

#: A revision that is a commit already: its snapshot folder is named by it, no ref to read.
_COMMIT = re.compile(r"[0-9a-f]{40}")


def local_folder(base: str, path: Any, where: str, revision: str | None = None) -> tuple[Path | None, str]:
    """The model folder ``path`` (as ``where`` names it) of the engine at ``base`` when this host
    can read it, else None and why not: the folder itself, or for a hub id the Hugging Face
    cache's snapshot of ``revision`` (main where None)."""
    if not path or not isinstance(path, str):
        return None, f"{where} names no model folder"
    if not engine_is_local(base):
        return None, f"the model folder {path} is on the engine's host"
    if Path(path).is_dir():
        return Path(path), ""
    return hub_snapshot(path, revision, where)


def hub_cache() -> Path:
    """The Hugging Face cache folder, as huggingface_hub finds it: HF_HUB_CACHE, else the older
    HUGGINGFACE_HUB_CACHE, else HF_HOME/hub, else XDG_CACHE_HOME (~/.cache)/huggingface/hub."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return Path(os.environ[name]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface")
    return Path(home).expanduser() / "hub"


def hub_snapshot(repo: str, revision: str | None, where: str) -> tuple[Path | None, str]:
    """The snapshot folder of model ``repo`` at ``revision`` in this host's Hugging Face cache,
    else None and why: the engine reads the same files there where it shares this cache."""
    revision = revision or "main"
    parts = repo.split("/")
    if len(parts) > 2 or not all(parts) or repo.startswith((".", "~")):
        return None, f"{where} {repo} is no folder here and no hub id"
    cache = hub_cache()
    folder = cache / ("models--" + repo.replace("/", "--"))
    ref = folder / "refs" / revision
    try:
        commit = ref.read_text().strip() if ref.is_file() else revision
    except OSError:
        return None, f"{ref} is unreadable"
    if not ref.is_file() and not _COMMIT.fullmatch(commit):
        return None, f"{where} {repo} is no folder here, and {cache} holds no {revision} of that hub id (refs/{revision})"
    snapshot = folder / "snapshots" / commit
    if not snapshot.is_dir():
        return None, f"{where} {repo} is no folder here, and {cache} holds no snapshot {commit} of that hub id"
    return snapshot, ""


def hub_lacks(folder: Path, name: str) -> bool:
    """Whether the Hugging Face cache recorded that the hub has no file ``name`` at the snapshot
    ``folder`` (huggingface_hub's ``.no_exist/<commit>/<name>``): a file missing from a snapshot
    is otherwise only not downloaded yet."""
    return (folder.parent.parent / ".no_exist" / folder.name / name).exists()


def is_hub_snapshot(folder: Path) -> bool:
    """Whether ``folder`` is a snapshot of the Hugging Face cache, which holds only the files
    someone downloaded."""
    return folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--")


def folder_json(folder: Path, name: str) -> dict[str, Any] | None:
    """The JSON object in ``folder/name``, or None: no such file, unreadable, or no object."""
    try:
        value = json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
