"""Reading a binary caffemodel: layer name -> its blobs as float32 arrays."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from ..errors import ModelFormatError
from ..ir import types as ir_types
from .protowire import encode_varint, len_field

#: Protobuf's (and Caffe's own reader's) limit on a serialized message.
MAX_CAFFEMODEL_BYTES = (1 << 31) - 1


def blob_to_array(blob: Any, where: str) -> np.ndarray:
    """A BlobProto as a float32 array, with its ``shape`` or legacy num/channels/height/width."""
    if blob.HasField("shape"):
        shape = tuple(int(d) for d in blob.shape.dim)
    else:
        shape = (int(blob.num), int(blob.channels), int(blob.height), int(blob.width))
    if any(d < 0 for d in shape):
        raise ModelFormatError(f"{where}: negative dimension in blob shape {shape}",
                               hint="the caffemodel is corrupt or was written by a broken tool")
    count = math.prod(shape)  # Python ints: no int64 wrap-around for hostile dims
    if count > ir_types.MAX_ELEMENTS:
        raise ModelFormatError(
            f"{where}: blob shape {shape} declares {count} values, above the limit of {ir_types.MAX_ELEMENTS}",
            hint="the caffemodel is corrupt; raise opbridge.ir.types.MAX_ELEMENTS if it is real",
        )
    doubles = bool(len(blob.double_data)) and not len(blob.data)
    values = blob.double_data if doubles else blob.data
    if len(values) != count:
        raise ModelFormatError(
            f"{where}: blob shape {shape} holds {count} values but the file has {len(values)}",
            hint="the caffemodel is corrupt or was written by a broken tool",
        )
    dtype = np.float64 if doubles else np.float32
    return np.asarray(values, dtype=dtype).astype(np.float32, copy=False).reshape(shape)


def _name(value: str | bytes, where: str) -> str:
    """A string field as text: protobuf hands proto2 strings that are not UTF-8 over as bytes."""
    if isinstance(value, bytes):
        raise ModelFormatError(
            f"{where}: name {value[:40]!r} is not valid UTF-8 text",
            hint="the caffemodel is corrupt (layer names are UTF-8 strings); is the file fully copied?",
        )
    return value


def read_caffemodel(path: Path) -> dict[str, list[np.ndarray]]:
    """Parse ``path`` (a binary NetParameter); V2 ``layer`` and V1 ``layers`` both read."""
    from ..proto import caffe_pb2

    if not path.is_file():
        raise ModelFormatError(f"[caffe] caffemodel '{path}' does not exist or is not a file",
                               hint="check the path given to --weights (weights=)")
    size = path.stat().st_size
    if size > MAX_CAFFEMODEL_BYTES:
        raise ModelFormatError(
            f"[caffe] caffemodel '{path.name}' is {size} bytes, above protobuf's 2 GB message "
            "limit (Caffe cannot read it either)",
            hint="is this the right file?",
        )
    net = caffe_pb2.NetParameter()  # type: ignore[attr-defined]  # generated, no stubs
    try:
        net.ParseFromString(path.read_bytes())
    except (DecodeError, RuntimeError, ValueError) as err:
        raise ModelFormatError(
            f"[caffe] caffemodel '{path.name}' is malformed or truncated: {err}",
            hint="a caffemodel is a binary NetParameter; is this the right file, fully copied?",
        ) from None
    out: dict[str, list[np.ndarray]] = {}
    for i, layer in enumerate(list(net.layer) + list(net.layers)):
        name = _name(layer.name, f"[caffe] caffemodel '{path.name}' layer #{i}") or f"#{i}"
        where = f"[caffe] caffemodel '{path.name}' layer '{name}'"
        out[name] = [blob_to_array(b, f"{where} blob {j}") for j, b in enumerate(layer.blobs)]
    if not out:
        raise ModelFormatError(
            f"[caffe] caffemodel '{path.name}' has no layers",
            hint="is it a caffemodel (binary NetParameter) and not a prototxt or mean file?",
        )
    return out





def _blob_bytes(arr: np.ndarray) -> bytes:
    dims = b"".join(encode_varint(int(d)) for d in arr.shape)
    data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
    # BlobProto: shape = 7 (BlobShape: packed dim = 1), packed data = 5.
    return len_field(7, len_field(1, dims) if dims else b"") + len_field(5, data)


def write_caffemodel(path: Path, net_name: str,
                     layers: list[tuple[str, str, list[np.ndarray]]]) -> None:
    """Write a binary caffemodel: a NetParameter with one V2 layer (name, type, blobs) per entry.

    The wire format is written directly (field numbers of caffe.proto: NetParameter.name = 1,
    layer = 100; LayerParameter.name = 1, type = 2, blobs = 7) so that multi-hundred-megabyte
    blobs do not go through Python float lists; tests read the file back with caffe_pb2 and
    OpenCV.
    """
    from ..ir.io import atomic_write  # the one temp-file-and-rename (it touches no IR)

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            f.write(len_field(1, net_name.encode()))
            for name, op_type, arrays in layers:
                body = len_field(1, name.encode()) + len_field(2, op_type.encode())
                body += b"".join(len_field(7, _blob_bytes(a)) for a in arrays)
                f.write(len_field(100, body))

    # an interrupted run leaves no half-written caffemodel
    atomic_write(path, write)
