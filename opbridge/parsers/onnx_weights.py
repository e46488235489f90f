"""Reading an .onnx file with its initializers' bytes left in place, memory-mapped.

``onnx.load`` copies the whole file into memory, protobuf copies each initializer's
``raw_data`` out of it, and ``numpy_helper.to_array`` copies it once more. Here the file is
memory-mapped instead; a walk over the protobuf wire format (field numbers of onnx.proto:
ModelProto.graph = 7, GraphProto.initializer = 5, TensorProto.raw_data = 9) finds each
top-level initializer's ``raw_data`` bytes, and protobuf parses a copy of the model without
them. Each such initializer is then a view of the map: nothing is copied, and a converter that
streams the weights to its output never reads them into this process.

Anything this walk does not expect (a group field, a repeated graph field, a truncated
message) makes :func:`load_mapped` return None, and the caller reads the file the usual way.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from .protowire import LEN, len_field

#: TensorProto.DataType -> numpy dtype, for the types whose raw_data is their little-endian
#: element bytes (4-bit, string and 8-bit float types are left to onnx.numpy_helper).
_RAW_DTYPES = {1: "<f4", 2: "u1", 3: "i1", 4: "<u2", 5: "<i2", 6: "<i4", 7: "<i8", 9: "?", 10: "<f2",
               11: "<f8", 12: "<u4", 13: "<u8"}


class _Unexpected(Exception):
    pass


def _varint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _Unexpected
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _fields(buf: Any, start: int, end: int) -> Any:
    """(field number, wire type, tag start, value start, value end) of each field."""
    pos = start
    while pos < end:
        tag_at = pos
        key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, vend = _varint(buf, pos, end)
        elif wire == 1:
            vend = pos + 8
        elif wire == 5:
            vend = pos + 4
        elif wire == LEN:
            length, pos = _varint(buf, pos, end)
            vend = pos + length
        else:
            raise _Unexpected  # groups
        if vend > end:
            raise _Unexpected
        yield field, wire, tag_at, pos, vend
        pos = vend


def _strip_tensor(buf: Any, start: int, end: int) -> tuple[bytes, tuple[int, int, int] | None]:
    """The TensorProto without its raw_data, and (data type, offset, length) of that raw_data."""
    kept, raw, data_type = [], None, 1
    for field, wire, tag_at, vstart, vend in _fields(buf, start, end):
        if field == 9 and wire == LEN:
            raw = (vstart, vend - vstart)
            continue
        if field == 2 and wire == 0:
            data_type = _varint(buf, vstart, vend)[0]
        kept.append(bytes(buf[tag_at:vend]))
    if raw is None or data_type not in _RAW_DTYPES:
        return bytes(buf[start:end]), None
    return b"".join(kept), (data_type, raw[0], raw[1])


def _strip_graph(buf: Any, start: int, end: int) -> tuple[bytes, list[tuple[int, int, int] | None]]:
    parts, raws = [], []
    for field, wire, tag_at, vstart, vend in _fields(buf, start, end):
        if field == 5 and wire == LEN:
            body, raw = _strip_tensor(buf, vstart, vend)
            parts.append(len_field(5, body))
            raws.append(raw)
        else:
            parts.append(bytes(buf[tag_at:vend]))
    return b"".join(parts), raws


def load_mapped(path: str | os.PathLike[str]) -> tuple[Any, dict[str, np.ndarray]] | None:
    """(ModelProto without the mapped raw_data, {initializer name: array view of the file}),
    or None when the file is not laid out as this reader expects."""
    import onnx

    if sys.byteorder != "little" or os.path.getsize(path) == 0:
        return None
    root = np.memmap(path, dtype=np.uint8, mode="r")
    buf = memoryview(root)
    try:
        parts, raws, graphs = [], [], 0
        for field, wire, tag_at, vstart, vend in _fields(buf, 0, len(buf)):
            if field == 7 and wire == LEN:
                graphs += 1
                body, raws = _strip_graph(buf, vstart, vend)
                parts.append(len_field(7, body))
            else:
                parts.append(bytes(buf[tag_at:vend]))
    except _Unexpected:
        return None
    if graphs != 1 or not any(raws):
        return None
    model = onnx.ModelProto()
    model.ParseFromString(b"".join(parts))
    arrays: dict[str, np.ndarray] = {}
    for tensor, raw in zip(model.graph.initializer, raws):
        if raw is None:
            continue
        data_type, offset, length = raw
        dtype = np.dtype(_RAW_DTYPES[data_type])
        dims = tuple(int(d) for d in tensor.dims)
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if count * dtype.itemsize != length or tensor.data_type != data_type:
            return None  # the reader proper reports the mismatch
        arrays[tensor.name] = root[offset:offset + length].view(dtype).reshape(dims)
    return model, arrays
