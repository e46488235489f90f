"""The two pieces of the protobuf wire format that opbridge writes by hand: a varint and a
length-delimited field (https://protobuf.dev/programming-guides/encoding/).

The protobuf runtime cannot write a message around bytes it does not hold (a caffemodel's
blobs streamed to disk) nor say where a field's bytes sit in a file (an .onnx file's
initializers, memory-mapped in place), so these few lines do it.
"""

from __future__ import annotations

LEN = 2  # wire type of length-delimited fields


def encode_varint(value: int) -> bytes:
    """``value`` (≥ 0) as a base-128 varint."""
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def len_field(number: int, payload: bytes) -> bytes:
    """Field ``number`` holding ``payload`` (wire type 2: key, length, bytes)."""
    return encode_varint((number << 3) | LEN) + encode_varint(len(payload)) + payload
