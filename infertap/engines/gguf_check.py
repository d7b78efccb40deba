"""Whether a file is a whole GGUF, told from its header, metadata and tensor table alone.

Checked before a capture is opened (``--model-file`` of record and replay) and before the gguf
package reads a file: a file cut short in a copy or a download, or one of a version llama.cpp no
longer reads, is refused at once with what is wrong, not once the capture holds an empty run. The
weights are never read: the metadata is walked in place (a memory map: only its pages are read),
strings and arrays skipped by their lengths, with the gguf package's own value and tensor types;
its reader builds every token of the vocabulary as an array, seconds where this takes milliseconds.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
from typing import Any

from infertap.errors import ConfigError

#: What every GGUF file starts with.
GGUF_MAGIC = b"GGUF"
#: The magic, the version, the tensor count and the metadata key count.
_HEADER = 24
#: The least a metadata entry (a key's length, its value type, a one-byte value) and a tensor's
#: entry (a name's length, its dimensions count, its type, its offset) can take.
_LEAST_KEY, _LEAST_TENSOR = 13, 24
_MAX_DIMS = 4  # llama.cpp's GGML_MAX_DIMS
_HOST = "<" if sys.byteorder == "little" else ">"


class _Cut(Exception):
    """The walk ran past the end of the file."""


class _Walk:
    """Reads values of one byte order from ``buf`` at a moving offset."""

    def __init__(self, buf: Any, order: str, at: int) -> None:
        self.buf, self.order, self.at = buf, order, at

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.at + size > len(self.buf):
            raise _Cut
        (value,) = struct.unpack_from(self.order + fmt, self.buf, self.at)
        self.at += size
        return value

    def skip(self, n: int) -> None:
        if self.at + n > len(self.buf):
            raise _Cut
        self.at += n

    def text(self) -> str:
        n = self.take("Q")
        start = self.at
        self.skip(n)
        return bytes(self.buf[start : self.at]).decode("utf-8", "replace")


def gguf_problem(path: str | os.PathLike[str]) -> str | None:
    """What keeps the file at ``path`` from being a whole GGUF that llama.cpp reads, or None. An
    OSError where it can't be read."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(_HEADER)
        if head[:4] != GGUF_MAGIC:
            return "not a GGUF model file (a GGUF starts with 'GGUF'); give the engine's .gguf"
        if len(head) < _HEADER:
            return f"a GGUF cut short: {size} bytes, fewer than its {_HEADER}-byte header"
        from gguf.gguf_reader import READER_SUPPORTED_VERSIONS

        # A file's byte order is its version's: llama.cpp reads only its machine's.
        order = next((o for o in "<>" if struct.unpack_from(o + "I", head, 4)[0] in READER_SUPPORTED_VERSIONS), None)
        if order is None:
            version = struct.unpack_from("=I", head, 4)[0]
            known = " and ".join(map(str, READER_SUPPORTED_VERSIONS))
            return f"GGUF version {version}, which llama.cpp doesn't read (it reads versions {known})"
        if order != _HOST:
            ends = {"<": "little", ">": "big"}
            return f"a {ends[order]}-endian GGUF, which llama.cpp on this {ends[_HOST]}-endian machine doesn't read"
        tensors, keys = struct.unpack_from(order + "QQ", head, 8)
        if keys * _LEAST_KEY + tensors * _LEAST_TENSOR > size - _HEADER:
            return (
                f"a GGUF cut short or corrupt: its header names {tensors} tensors and {keys} metadata keys, "
                f"more than its {size} bytes hold"
            )
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                return _tables(_Walk(buf, order, _HEADER), tensors, keys, size)
            except _Cut:
                return f"a GGUF cut short or corrupt: its metadata or tensor table runs past its {size} bytes"


def _tables(walk: _Walk, tensors: int, keys: int, size: int) -> str | None:
    """The metadata and tensor table walked: what is wrong, or None."""
    from gguf import GGML_QUANT_SIZES, GGUF_DEFAULT_ALIGNMENT, GGMLQuantizationType

    alignment = GGUF_DEFAULT_ALIGNMENT
    for _ in range(keys):
        key = walk.text()
        kind = walk.take("I")
        if key == "general.alignment" and kind == _UINT32:
            alignment = walk.take("I")
            if alignment == 0 or alignment & (alignment - 1):
                return f"a corrupt GGUF: general.alignment {alignment} is no power of two"
        elif (wrong := _skip_value(walk, kind)) is not None:
            return f"a corrupt GGUF: metadata {key!r} {wrong}"
    end = 0
    for _ in range(tensors):
        name = walk.text()
        dims = walk.take("I")
        if dims > _MAX_DIMS:
            return f"a corrupt GGUF: tensor {name!r} has {dims} dimensions (at most {_MAX_DIMS})"
        elements = 1
        for _ in range(dims):
            elements *= walk.take("Q")
        raw, offset = walk.take("I"), walk.take("Q")
        try:
            block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(raw)]
        except (ValueError, KeyError):
            return f"a corrupt GGUF: tensor {name!r} is of unknown type {raw}"
        if elements % block:
            return f"a corrupt GGUF: tensor {name!r} has {elements} weights, not whole blocks of {block}"
        end = max(end, offset + elements // block * type_size)
    data = -(-walk.at // alignment) * alignment
    if data + end > size:
        return (
            f"a GGUF cut short: {size} bytes where its {tensors} tensors' data ends at byte {data + end} "
            "(a copy or a download that did not finish?)"
        )
    return None


_UINT32, _STRING, _ARRAY = 4, 8, 9
#: The size of each fixed-size metadata value type (GGUFValueType): uint8, int8, uint16, int16,
#: uint32, int32, float32, bool, then uint64, int64, float64.
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _skip_value(walk: _Walk, kind: int) -> str | None:
    """Past one metadata value of type ``kind``: what is wrong with it, or None."""
    if kind in _SIZES:
        walk.skip(_SIZES[kind])
    elif kind == _STRING:
        walk.skip(walk.take("Q"))
    elif kind == _ARRAY:  # of scalars or strings: llama.cpp reads no array of arrays
        item, count = walk.take("I"), walk.take("Q")
        if item in _SIZES:
            walk.skip(count * _SIZES[item])
        elif item == _STRING:
            for _ in range(count):
                walk.skip(walk.take("Q"))
        else:
            return f"is an array of unknown type {item}"
    else:
        return f"is of unknown type {kind}"
    return None


def check_gguf(path: str | os.PathLike[str]) -> None:
    """ConfigError unless ``path`` is a whole GGUF (``gguf_problem``): checked before a capture is
    opened, so that a wrong ``--model-file`` (safetensors, a tokenizer's JSON, a GGUF cut short) is
    refused at once, not once the capture holds an empty run."""
    try:
        problem = gguf_problem(path)
    except (OSError, ValueError) as exc:  # ValueError: mmap of a file that shrank meanwhile
        raise ConfigError(f"--model-file {path}: can't be read ({getattr(exc, 'strerror', None) or exc})") from exc
    if problem is not None:
        raise ConfigError(f"--model-file {path}: {problem}")
