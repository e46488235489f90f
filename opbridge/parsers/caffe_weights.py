"""Reading a binary caffemodel: layer name -> its blobs as float32 arrays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from ..errors import ModelFormatError


def blob_to_array(blob: Any, where: str) -> np.ndarray:
    """A BlobProto as a float32 array, with its ``shape`` or legacy num/channels/height/width."""
    if blob.HasField("shape"):
        shape = tuple(int(d) for d in blob.shape.dim)
    else:
        shape = (int(blob.num), int(blob.channels), int(blob.height), int(blob.width))
    if any(d < 0 for d in shape):
        raise ModelFormatError(f"{where}: negative dimension in blob shape {shape}")
    if len(blob.double_data) and not len(blob.data):
        data = np.asarray(blob.double_data, dtype=np.float64).astype(np.float32)
    else:
        data = np.asarray(blob.data, dtype=np.float32)
    count = int(np.prod(shape, dtype=np.int64))
    if data.size != count:
        raise ModelFormatError(
            f"{where}: blob shape {shape} holds {count} values but the file has {data.size}",
            hint="the caffemodel is corrupt or was written by a broken tool",
        )
    return data.reshape(shape)


def read_caffemodel(path: Path) -> dict[str, list[np.ndarray]]:
    """Parse ``path`` (a binary NetParameter); V2 ``layer`` and V1 ``layers`` both read."""
    from ..proto import caffe_pb2

    if not path.is_file():
        raise ModelFormatError(f"[caffe] caffemodel '{path}' does not exist or is not a file")
    net = caffe_pb2.NetParameter()
    try:
        net.ParseFromString(path.read_bytes())
    except (DecodeError, RuntimeError, ValueError) as err:
        raise ModelFormatError(
            f"[caffe] caffemodel '{path.name}' is malformed or truncated: {err}",
            hint="a caffemodel is a binary NetParameter; is this the right file, fully copied?",
        ) from None
    out: dict[str, list[np.ndarray]] = {}
    for i, layer in enumerate(list(net.layer) + list(net.layers)):
        name = layer.name or f"#{i}"
        where = f"[caffe] caffemodel '{path.name}' layer '{name}'"
        out[name] = [blob_to_array(b, f"{where} blob {j}") for j, b in enumerate(layer.blobs)]
    if not out:
        raise ModelFormatError(
            f"[caffe] caffemodel '{path.name}' has no layers",
            hint="is it a caffemodel (binary NetParameter) and not a prototxt or mean file?",
        )
    return out
