"""The safetensors format, written by streaming and read by memory-mapping.

Layout (https://github.com/huggingface/safetensors, "Format"): an 8-byte little-endian header
length N, N bytes of JSON (``{"__metadata__": {str: str}, name: {"dtype", "shape",
"data_offsets": [begin, end]}}``, padded with spaces to a multiple of 8), then the tensors'
bytes, back to back. Any safetensors reader reads what :func:`write` writes.

- :func:`write` never builds the file in memory: each tensor goes to the file on its own,
  and a tensor that is itself a memory map of another file (an ONNX model's weights, its
  external data) is copied file to file by the kernel (``os.copy_file_range``), so its pages
  never enter this process. Tensors are ordered by decreasing item size, so each one starts
  aligned for its dtype.
- :func:`read` maps the file once and returns each tensor as a view of that map: nothing is
  copied, and only the pages a computation touches are read from disk.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

import numpy as np

#: safetensors dtype names <-> numpy dtypes (bf16 is stored by the callers as its u16 bits).
_DTYPES: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "I16": np.dtype("<i2"), "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"), "U32": np.dtype("<u4"), "U16": np.dtype("<u2"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAMES = {v: k for k, v in _DTYPES.items()}

#: Bytes copied per write when a tensor is written from memory.
_CHUNK = 64 << 20


class TensorFileError(ValueError):
    """The file is not a valid safetensors file (the caller says which file, and what to do)."""


def dtype_name(dtype: np.dtype) -> str:
    try:
        return _NAMES[np.dtype(dtype).newbyteorder("<") if np.dtype(dtype).itemsize > 1 else np.dtype(dtype)]
    except KeyError:
        raise TensorFileError(f"numpy dtype {dtype} cannot be stored in safetensors") from None


def file_region(arr: np.ndarray) -> tuple[str, int] | None:
    """(file name, byte offset) when ``arr`` is a C-contiguous view of a ``np.memmap`` of a file,
    else None: its bytes can then be copied straight from that file."""
    if not arr.flags.c_contiguous or arr.nbytes == 0:
        return None
    root: Any = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    name = getattr(root, "filename", None)
    if not isinstance(root, np.memmap) or not name:
        return None
    start = int(arr.__array_interface__["data"][0]) - int(root.__array_interface__["data"][0])
    if start < 0 or start + arr.nbytes > root.nbytes:
        return None
    return str(name), int(root.offset) + start


def _copy_from_file(dst: BinaryIO, src_name: str, offset: int, count: int) -> None:
    dst.flush()
    with open(src_name, "rb") as src:
        done = 0
        try:
            while done < count:
                n = os.copy_file_range(src.fileno(), dst.fileno(), count - done, offset + done)
                if n == 0:
                    raise OSError("source file ended early")
                done += n
        except (AttributeError, OSError):  # no copy_file_range here (or across these filesystems)
            src.seek(offset + done)
            dst.seek(0, os.SEEK_END)
            while done < count:
                chunk = src.read(min(_CHUNK, count - done))
                if not chunk:
                    raise OSError(f"'{src_name}' ended early") from None
                dst.write(chunk)
                done += len(chunk)
    dst.seek(0, os.SEEK_END)


def write(path: str | os.PathLike[str], tensors: Mapping[str, np.ndarray],
          metadata: Mapping[str, str] | None = None) -> None:
    """Write ``tensors`` (little-endian, C order) and ``metadata`` as a safetensors file."""
    order = sorted(tensors, key=lambda k: (-np.dtype(tensors[k].dtype).itemsize, k))
    header: dict[str, Any] = {"__metadata__": dict(metadata)} if metadata else {}
    pos = 0
    for key in order:
        arr = tensors[key]
        header[key] = {"dtype": dtype_name(arr.dtype), "shape": list(arr.shape),
                       "data_offsets": [pos, pos + arr.nbytes]}
        pos += arr.nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for key in order:
            arr = tensors[key]
            region = file_region(arr)
            if region is not None:
                _copy_from_file(f, region[0], region[1], arr.nbytes)
                continue
            flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            for i in range(0, flat.size, _CHUNK):
                f.write(flat[i:i + _CHUNK].data)


def read(path: str | os.PathLike[str]) -> tuple[dict[str, str], Callable[[str], np.ndarray]]:
    """The metadata of a safetensors file and ``tensor(key)``: an array mapping the file's
    bytes (no copy; copy-on-write). Raises TensorFileError for a malformed file, KeyError for an
    unknown key."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise TensorFileError("shorter than a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, 100 << 20):
            raise TensorFileError(f"header length {n} does not fit the file's {size} bytes")
        try:
            header = json.loads(f.read(n))
        # ValueError: a JSONDecodeError, bytes that are not UTF-8, or an integer past Python's digit limit
        except (ValueError, RecursionError) as err:
            raise TensorFileError(f"the header is not JSON: {str(err)[:200] or 'nested too deeply'}") from None
        if not isinstance(header, dict):
            raise TensorFileError("the header is not a JSON object")
    # One copy-on-write map of the whole file: views are writable like any array, and a write
    # stays private to this process (the file is never changed).
    root = np.memmap(path, dtype=np.uint8, mode="c") if size > 8 + n else None
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise TensorFileError("__metadata__ is not a map of strings")
    data_len = size - 8 - n

    def tensor(key: str) -> np.ndarray:
        info = header[key]
        try:
            dtype = _DTYPES[info["dtype"]]
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise TensorFileError(f"tensor '{key}': malformed entry {info!r}") from None
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if any(d < 0 for d in shape) or not 0 <= begin <= end <= data_len \
                or end - begin != count * dtype.itemsize:
            raise TensorFileError(f"tensor '{key}': offsets {begin}..{end} do not fit {shape} of "
                                  f"{info['dtype']} in {data_len} bytes of data")
        if count == 0 or root is None:
            return np.zeros(shape, dtype)
        return root[8 + n + begin:8 + n + end].view(dtype).reshape(shape)

    return meta, tensor
