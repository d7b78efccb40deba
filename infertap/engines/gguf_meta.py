"""Facts from a GGUF model file: its hash, chat template, special tokens and tensor types.

Used where an engine doesn't publish them (llama-cpp-python's server) but the model file is at
hand: given with ``--model-file``, or named by the engine itself as a local path.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infertap.errors import ConfigError

from .gguf_check import gguf_problem


def _file_type(value: int) -> str:
    """``general.file_type`` by name, as the gguf package (llama.cpp's own) names it: ``Q4_K_M``,
    ``IQ4_XS``, ``BF16``...; a number it doesn't know, as the number."""
    from gguf import LlamaFileType

    try:
        return LlamaFileType(value).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except ValueError:
        return str(value)


@dataclass(frozen=True)
class GGUFFacts:
    path: str
    sha256: str
    size: int
    name: str | None
    chat_template: str | None
    bos_token: str | None
    eos_token: str | None
    bos_token_id: int | None
    add_bos_token: bool | None
    context_length: int | None
    file_type: str | None
    #: (tensor type, tensors, weights) per type, the most weights first: a Q4_1 file keeps its
    #: norms in F32 and may keep its embedding in Q8_0.
    tensor_types: tuple[tuple[str, int, int], ...] = ()
    eos_token_id: int | None = None
    add_eos_token: bool | None = None
    #: ``tokenizer.ggml.seperator_token_id`` (llama.cpp's spelling): llama-cpp-python ends a
    #: completion's prompt with it.
    sep_token_id: int | None = None

    def dtype(self) -> str | None:
        """The tensor types by share of the weights, e.g. ``Q4_1 79%, Q8_0 21%, F32 <1%``."""
        total = sum(n for _, _, n in self.tensor_types)
        if not total:
            return None
        if len(self.tensor_types) == 1:
            return self.tensor_types[0][0]

        def share(n: int) -> str:
            pct = 100 * n / total
            return "<1%" if pct < 1 else f"{pct:.0f}%"

        return ", ".join(f"{name} {share(n)}" for name, _, n in self.tensor_types)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@functools.lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, size: int) -> GGUFFacts:
    import gguf  # numpy-backed; only loaded when a model file is actually read

    try:
        problem = gguf_problem(path)  # what is wrong, in words, before the reader's own (numpy's)
        reader = gguf.GGUFReader(path) if problem is None else None
    except (ValueError, IndexError, KeyError, OSError) as exc:  # not a GGUF, or cut short
        raise ConfigError(f"{path}: not a readable GGUF model file ({exc})") from exc
    if reader is None:
        raise ConfigError(f"{path}: {problem}")

    def value(key: str):
        field = reader.fields.get(key)
        return field.contents() if field is not None else None

    arch = value("general.architecture")
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    bos_id, eos_id = value("tokenizer.ggml.bos_token_id"), value("tokenizer.ggml.eos_token_id")

    def token(i: int | None) -> str | None:
        if tokens is None or i is None:
            return None
        return tokens.contents(i) if hasattr(tokens, "contents") else None

    file_type = value("general.file_type")
    counts: dict[str, list[int]] = {}
    for tensor in reader.tensors:
        seen = counts.setdefault(tensor.tensor_type.name, [0, 0])
        seen[0] += 1
        seen[1] += int(tensor.n_elements)
    return GGUFFacts(
        path=path,
        sha256=_sha256(Path(path)),
        size=size,
        name=value("general.name"),
        chat_template=value("tokenizer.chat_template"),
        bos_token=token(bos_id),
        eos_token=token(eos_id),
        bos_token_id=bos_id,
        add_bos_token=value("tokenizer.ggml.add_bos_token"),
        context_length=value(f"{arch}.context_length") if arch else None,
        file_type=_file_type(file_type) if file_type is not None else None,
        tensor_types=tuple(sorted(((k, n, w) for k, (n, w) in counts.items()), key=lambda t: -t[2])),
        eos_token_id=eos_id,
        add_eos_token=value("tokenizer.ggml.add_eos_token"),
        sep_token_id=value("tokenizer.ggml.seperator_token_id"),
    )


def read_gguf(path: str | os.PathLike[str]) -> GGUFFacts:
    """The facts of the GGUF at ``path``; ConfigError, naming it, where it is no GGUF."""
    p = Path(path).resolve()
    st = p.stat()
    return _read(str(p), st.st_mtime_ns, st.st_size)


def dtype_fact(gguf: GGUFFacts, how: str) -> dict[str, Any]:
    """The ``dtype`` snapshot fact of a GGUF: its tensor types, by share of the weights."""
    detail = "; ".join(f"{name}: {n} tensor{'' if n == 1 else 's'}, {w} weights" for name, n, w in gguf.tensor_types)
    return {"value": gguf.dtype(), "source": f"GGUF tensor types, from {how} ({detail})"}
