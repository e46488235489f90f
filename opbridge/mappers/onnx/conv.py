"""ONNX mappings: Conv, ConvInteger, ConvTranspose.

Semantics: https://onnx.ai/onnx/operators/onnx__Conv.html and onnx__ConvTranspose.html. The
IR has no auto_pad: SAME_UPPER / SAME_LOWER / VALID become explicit pads from the static
input shape here; ConvTranspose's output_shape becomes pads (and output_padding where the
requested output is larger than the transposed conv's natural size). kernel_shape absent is
taken from the weights. The op's meaning did not change across versions (1, 11, 22: types
only), so one mapping serves every opset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import checked_attrs, required_input

ONNX = Framework.ONNX
AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def auto_pad_of(node: OriginNode, g: MapContext) -> str:
    """The node's auto_pad, checked (bytes or str in the model)."""
    ap = node.get_attr("auto_pad")
    ap = ap.decode() if isinstance(ap, bytes) else str(ap)
    if ap not in AUTO_PADS:
        raise g.error(f"= {ap!r}: must be one of {', '.join(AUTO_PADS)}", attr="auto_pad")
    return ap


def static_spatial(g: MapContext, x: Value, what: str = "X") -> list[int]:
    """X's spatial dims, which must be known (auto_pad needs them)."""
    dims = list(x.shape[2:])
    if not all(isinstance(d, int) for d in dims):
        raise g.unsupported(
            f"auto_pad needs the static spatial shape of {what}, which is {list(x.shape)}",
            hint="fix the input shapes with --input-shape NAME=1,3,224,224")
    return dims


def ints_attr(node: OriginNode, g: MapContext, name: str, n: int) -> tuple[int, ...] | None:
    """An ints attribute that, if present, has ``n`` entries."""
    v = node.get_attr(name, None)
    if v is None:
        return None
    out = tuple(int(a) for a in v)
    if len(out) != n:
        raise g.error(f"= {list(out)} has {len(out)} entries; the input has "
                      f"{n if name != 'pads' else n // 2} spatial axes", attr=name)
    return out


def resolve_pads(node: OriginNode, g: MapContext, x: Value, kernel: Sequence[int],
                 strides: Sequence[int], dilations: Sequence[int]) -> tuple[int, ...]:
    """Explicit pads (begins, then ends) from ``pads`` or ``auto_pad`` (sliding-window ops)."""
    nsp = len(kernel)
    ap = auto_pad_of(node, g)
    pads = ints_attr(node, g, "pads", 2 * nsp)
    if ap == "NOTSET":
        return pads if pads is not None else (0,) * (2 * nsp)
    if ap == "VALID":
        return (0,) * (2 * nsp)
    begins, ends = [], []
    for i, size in enumerate(static_spatial(g, x)):
        eff = (kernel[i] - 1) * dilations[i] + 1
        out = -(-size // strides[i])
        total = max(0, (out - 1) * strides[i] + eff - size)
        small, big = total // 2, total - total // 2
        begins.append(small if ap == "SAME_UPPER" else big)
        ends.append(big if ap == "SAME_UPPER" else small)
    return tuple(begins + ends)


def _kernel(node: OriginNode, g: MapContext, w: Value) -> tuple[int, ...]:
    nsp = len(w.shape) - 2
    ks = ints_attr(node, g, "kernel_shape", nsp)
    wk = tuple(w.shape[2:])
    if ks is not None and ks != wk:
        raise g.error(f"= {list(ks)} but the weights' spatial shape is {list(wk)}",
                      attr="kernel_shape", hint="drop kernel_shape or make it match W")
    if not all(isinstance(d, int) for d in wk):
        raise g.unsupported(f"the weights' spatial shape {list(wk)} is not static")
    return tuple(int(d) for d in wk)


def _common(node: OriginNode, g: MapContext) -> tuple[Value, Value, Value | None, dict[str, Any]]:
    x, w = required_input(g, 0, "X"), required_input(g, 1, "W")
    return x, w, g.input(2), conv_attrs(node, g, x, w)


def conv_attrs(node: OriginNode, g: MapContext, x: Value, w: Value) -> dict[str, Any]:
    """The IR attributes of a convolution of ``x`` by ``w`` but its pads (which Conv and
    ConvTranspose resolve differently); QLinearConv shares them with Conv and ConvInteger."""
    if len(x.shape) < 3 or len(w.shape) != len(x.shape):
        raise g.error(f"X {list(x.shape)} and W {list(w.shape)} must have the same rank >= 3",
                      hint="the layout is N, C, D1, ...")
    nsp = len(x.shape) - 2
    k = _kernel(node, g, w)
    s = ints_attr(node, g, "strides", nsp) or (1,) * nsp
    d = ints_attr(node, g, "dilations", nsp) or (1,) * nsp
    attrs: dict[str, Any] = {"group": int(node.get_attr("group")), "kernel_shape": k,
                             "strides": s, "dilations": d}
    return attrs


@mapping(ONNX, "Conv", since_opset=1)
def conv(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    x, w, b, attrs = _common(node, g)
    attrs["pads"] = resolve_pads(node, g, x, attrs["kernel_shape"], attrs["strides"],
                                 attrs["dilations"])
    return g.op("Conv", [x, w, b], **attrs)


@mapping(ONNX, "ConvInteger", since_opset=10)
def conv_integer(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    x, w, _, attrs = _common(node, g)
    attrs["pads"] = resolve_pads(node, g, x, attrs["kernel_shape"], attrs["strides"],
                                 attrs["dilations"])
    return g.op("ConvInteger", [x, w, g.input(2), g.input(3)], **attrs)


@mapping(ONNX, "ConvTranspose", since_opset=1)
def conv_transpose(node: OriginNode, g: MapContext) -> Any:
    checked_attrs(node, g, ("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                            "output_shape", "pads", "strides"))
    x, w, b, attrs = _common(node, g)
    nsp = len(x.shape) - 2
    k, s, d = attrs["kernel_shape"], attrs["strides"], attrs["dilations"]
    out_pad = list(ints_attr(node, g, "output_padding", nsp) or (0,) * nsp)
    ap = auto_pad_of(node, g)
    out_shape = node.get_attr("output_shape", None)
    if out_shape is not None:
        out_shape = [int(v) for v in out_shape]
        if len(out_shape) == nsp + 2:  # some exporters give N and C too
            out_shape = out_shape[2:]
        if len(out_shape) != nsp:
            raise g.error(f"= {out_shape} has {len(out_shape)} entries; the input has {nsp} "
                          "spatial axes", attr="output_shape")
    elif ap in ("SAME_UPPER", "SAME_LOWER"):
        out_shape = [size * s[i] for i, size in enumerate(static_spatial(g, x))]
    if out_shape is None:
        pads = (0,) * (2 * nsp) if ap == "VALID" else \
            (ints_attr(node, g, "pads", 2 * nsp) or (0,) * (2 * nsp))
    else:
        # the spec: total padding = natural size - requested size, split by auto_pad
        begins, ends = [], []
        for i, size in enumerate(static_spatial(g, x)):
            natural = s[i] * (size - 1) + out_pad[i] + (k[i] - 1) * d[i] + 1
            total = natural - out_shape[i]
            if total < 0:
                # a larger output than the natural one: extra output at the end, as
                # output_padding (PyTorch's output_size rule: less than one stride more)
                if -total >= s[i]:
                    raise g.error(
                        f"= {out_shape}: axis {i} asks for {out_shape[i]}, more than a stride "
                        f"beyond the natural size {natural}", attr="output_shape",
                        hint="check output_shape against the input size and strides")
                out_pad[i] -= total
                total = 0
            small, big = total // 2, total - total // 2
            begins.append(small if ap == "SAME_UPPER" else big)
            ends.append(big if ap == "SAME_UPPER" else small)
        pads = tuple(begins + ends)
    return g.op("ConvTranspose", [x, w, b], pads=pads, output_padding=tuple(out_pad), **attrs)
