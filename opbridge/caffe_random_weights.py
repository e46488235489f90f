"""Random weights for a Caffe deploy prototxt: ``opbridge random-weights``.

Any prototxt can then be converted and tested without its real caffemodel. Blob shapes follow
from the layers' parameters and their input shapes, which are propagated through the net with
Caffe's shape rules (layers without a rule give an unknown shape; only a weighted layer that
needs it fails, naming both layers). Values keep activations finite through deep nets:
He-style scaling of convolution and inner-product weights (std sqrt(1/fan_in), so each layer
keeps the scale of its input), BatchNorm with positive variance and a realistic scale factor
(Caffe stores mean*f, var*f and f, usually f = 999.98 from the moving average), Scale near 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ShapeError
from .ir import types as ir_types
from .mappers.caffe.common import (
    Params,
    conv_geometry,
    conv_out,
    deconv_out,
    norm_axis,
    pool_geometry,
    pool_out,
)
from .parsers.caffe import parse_caffe
from .parsers.caffe_weights import write_caffemodel
from .parsers.origin import OriginGraph, OriginNode

Shape = tuple[Any, ...]  # ints, or None where unknown

#: The most weight values ``write_random_weights`` generates for one net (4 GiB of float32;
#: VGG-16 has 138 M), checked before any allocation.
MAX_RANDOM_ELEMENTS = 1 << 30

_SAME = frozenset({
    "ReLU", "ReLU6", "Sigmoid", "TanH", "AbsVal", "BNLL", "ELU", "Exp", "Log", "Power",
    "Threshold", "Dropout", "BatchNorm", "Scale", "Bias", "PReLU", "LRN", "MVN", "Normalize",
    "Softmax", "Clip", "Swish", "ShuffleChannel", "Eltwise", "Mish", "HardSigmoid", "Identity",
    "SoftmaxWithLoss", "LeakyReLU", "Axpy", "TanHShrink", "Sign",
})

_CONVS = ("Convolution", "ConvolutionDepthwise", "DepthwiseConvolution", "Deconvolution")
#: Layers that keep blobs (Scale and Bias only with one bottom).
_WEIGHTED = frozenset({*_CONVS, "InnerProduct", "BatchNorm", "Scale", "Bias", "PReLU", "Embed",
                       "Parameter", "Normalize"})


def _prod(dims: Any) -> int | None:
    out = 1
    for d in dims:
        if d is None:
            return None
        out *= int(d)
    return out


def infer_shapes(graph: OriginGraph) -> dict[str, Shape | None]:
    """Every tensor's shape (dims None where unknown, None for a wholly unknown tensor)."""
    shapes: dict[str, Shape | None] = {t.name: tuple(t.shape or ()) for t in graph.inputs}
    for node in graph.nodes:
        ins = [shapes.get(i) for i in node.inputs]
        fn = _RULES.get(node.op_type)
        outs: list[Shape | None]
        if node.op_type in _SAME and ins and ins[0] is not None:
            outs = [ins[0]] * len(node.outputs)
        elif fn is not None and ins and all(s is not None for s in ins[:1]):
            try:
                res = fn(node, ins)
            except (TypeError, IndexError):
                res = None
            outs = res if isinstance(res, list) else [res] * len(node.outputs)
        else:
            outs = [None] * len(node.outputs)
        for name, s in zip(node.outputs, outs):
            shapes[name] = s
    return shapes


def _conv(node: OriginNode, ins: list[Any]) -> Shape:
    p = Params(node, "convolution_param")
    x = ins[0]
    geo = conv_geometry(p, len(x) - 2)
    n = int(p.get("num_output"))
    fn = deconv_out if node.op_type == "Deconvolution" else conv_out
    sp = [None if d is None else fn(d, geo.kernel[i], geo.stride[i], geo.pad[i], geo.dilation[i])
          for i, d in enumerate(x[2:])]
    return (x[0], n, *sp)


def _pool(node: OriginNode, ins: list[Any]) -> Shape:
    p = Params(node, "pooling_param")
    x = ins[0]
    geo = pool_geometry(p, x[2:4])
    if geo.is_global:
        return (x[0], x[1], 1, 1)
    anyp = any(geo.pad)
    return (x[0], x[1], *[pool_out(x[2 + i], geo.kernel[i], geo.stride[i], geo.pad[i], geo.ceil, anyp)
                          for i in range(2)])


def _spp(node: OriginNode, ins: list[Any]) -> Shape | None:
    from .mappers.caffe.pool import spp_levels

    x = ins[0]
    if len(x) != 4 or x[2] is None or x[3] is None:
        return None
    levels = len(spp_levels(Params(node, "spp_param"), int(x[2]), int(x[3])))
    if levels == 1:
        return (x[0], x[1], 1, 1)
    return (x[0], None if x[1] is None else x[1] * sum(4 ** level for level in range(levels)))


def _ip(node: OriginNode, ins: list[Any]) -> Shape:
    p = Params(node, "inner_product_param")
    x = ins[0]
    axis = norm_axis(p, "axis", int(p.get("axis")), len(x))
    return (*x[:axis], int(p.get("num_output")))


def _concat(node: OriginNode, ins: list[Any]) -> Shape | None:
    if any(s is None for s in ins):
        return None
    p = Params(node, "concat_param")
    axis = int(p.get("axis")) if p.has("axis") or not p.has("concat_dim") else int(p.get("concat_dim"))
    axis %= len(ins[0])
    total = _prod(s[axis] for s in ins)
    total = None if total is None else sum(int(s[axis]) for s in ins)
    return (*ins[0][:axis], total, *ins[0][axis + 1:])


def _slice(node: OriginNode, ins: list[Any]) -> list[Shape | None]:
    p = Params(node, "slice_param")
    x = ins[0]
    axis = (int(p.get("axis")) if p.has("axis") or not p.has("slice_dim") else int(p.get("slice_dim")))
    axis %= len(x)
    pts = p.ints("slice_point")
    n = len(node.outputs)
    if pts:
        bounds = [0, *pts, x[axis]]
        sizes = [bounds[i + 1] - bounds[i] for i in range(n)]
    else:
        sizes = [x[axis] // n] * n
    return [(*x[:axis], s, *x[axis + 1:]) for s in sizes]


def _flatten(node: OriginNode, ins: list[Any]) -> Shape:
    p = Params(node, "flatten_param")
    x = ins[0]
    a = norm_axis(p, "axis", int(p.get("axis")), len(x))
    e = norm_axis(p, "end_axis", int(p.get("end_axis")), len(x))
    return (*x[:a], _prod(x[a:e + 1]), *x[e + 1:])


def _reshape(node: OriginNode, ins: list[Any]) -> Shape | None:
    p = Params(node, "reshape_param")
    x = ins[0]
    dims = [int(d) for d in p.get("shape", {}).get("dim", [])]
    axis = int(p.get("axis"))
    axis = axis + len(x) + 1 if axis < 0 else axis
    num_axes = int(p.get("num_axes"))
    end = len(x) if num_axes == -1 else axis + num_axes
    mid = [x[axis + i] if d == 0 else d for i, d in enumerate(dims)]
    out = [*x[:axis], *mid, *x[end:]]
    if -1 in out:
        total = _prod(x)
        rest = _prod(d for d in out if d != -1)
        out[out.index(-1)] = None if total is None or rest is None else total // rest
    return tuple(out)


def _permute(node: OriginNode, ins: list[Any]) -> Shape:
    x = ins[0]
    order = Params(node, "permute_param").ints("order")
    order = order + [i for i in range(len(x)) if i not in order]
    return tuple(x[i] for i in order)


def _priorbox(node: OriginNode, ins: list[Any]) -> Shape:
    from .mappers.caffe.detection import num_priors

    x = ins[0]
    return (1, 2, x[2] * x[3] * num_priors(node) * 4)


def _upsample(node: OriginNode, ins: list[Any]) -> Shape:
    s = int(Params(node, "upsample_param").get("scale"))
    x = ins[0]
    return (*x[:2], x[2] * s, x[3] * s)


def _interp(node: OriginNode, ins: list[Any]) -> Shape:
    from .mappers.caffe.shape import interp_size

    p = Params(node, "interp_param")
    x = ins[0]
    crop = int(p.get("pad_beg")) + int(p.get("pad_end"))
    return (*x[:2], *interp_size(p, x[2] + crop, x[3] + crop))


def _roipool(node: OriginNode, ins: list[Any]) -> Shape:
    p = Params(node, "roi_pooling_param")
    rois = ins[1] if len(ins) > 1 and ins[1] is not None else (None,)
    return (rois[0], ins[0][1], int(p.get("pooled_h")), int(p.get("pooled_w")))


def _crop(node: OriginNode, ins: list[Any]) -> Shape | None:
    if len(ins) < 2 or ins[1] is None:
        return None
    p = Params(node, "crop_param")
    axis = norm_axis(p, "axis", int(p.get("axis")), len(ins[0]))
    return (*ins[0][:axis], *ins[1][axis:])


_RULES: dict[str, Callable[[OriginNode, list[Any]], Any]] = {
    **{t: _conv for t in _CONVS},
    "Pooling": _pool, "SPP": _spp, "InnerProduct": _ip, "Concat": _concat, "Slice": _slice,
    "Flatten": _flatten, "Reshape": _reshape, "Permute": _permute, "PriorBox": _priorbox,
    "Upsample": _upsample, "ROIPooling": _roipool, "Crop": _crop, "Interp": _interp,
}


def blob_shapes(node: OriginNode, ins: list[Shape | None]) -> list[tuple[int, ...]]:
    """The shapes of the blobs Caffe keeps for ``node`` (empty for unweighted layers)."""
    t = node.op_type

    def need(i: int, dims: Any, what: str) -> list[int]:
        vals = list(dims)
        if any(d is None for d in vals):
            raise ShapeError(
                f"{node.where}: cannot size its {what}: the shape of input '{node.inputs[i]}' is "
                "unknown (it comes from a layer without a shape rule in random-weights)",
                hint="write the blobs with your own tool, or give the layer a mapping and real weights",
            )
        return [int(d) for d in vals]

    if t not in _WEIGHTED or (t in ("Scale", "Bias") and len(node.inputs) != 1):
        return []
    if t == "Embed":
        p = Params(node, "embed_param")
        n = int(p.get("num_output"))
        table = (int(p.get("input_dim")), n)
        return [table, (n,)] if p.get("bias_term") else [table]
    if t == "Parameter":
        return [tuple(int(d) for d in Params(node, "parameter_param").get("shape", {}).get("dim", []))]
    x0 = ins[0] if ins else None
    if x0 is None:
        need(0, (None,), "blobs")
    x: Shape = x0 if x0 is not None else ()
    if t in _CONVS:
        p = Params(node, "convolution_param")
        (c,) = need(0, (x[1],), "weights")
        geo = conv_geometry(p, len(x) - 2)
        n = int(p.get("num_output"))
        group = c if t in ("ConvolutionDepthwise", "DepthwiseConvolution") else int(p.get("group"))
        if group < 1 or c % group or n % group:
            raise p.error("group", group, f"must divide the input channels ({c}) and num_output ({n})")
        w = (c, n // group, *geo.kernel) if t == "Deconvolution" else (n, c // group, *geo.kernel)
        return [w, (n,)] if p.get("bias_term") else [w]
    if t == "InnerProduct":
        p = Params(node, "inner_product_param")
        axis = norm_axis(p, "axis", int(p.get("axis")), len(x))
        k = math.prod(need(0, x[axis:], "weights"))
        n = int(p.get("num_output"))
        w = (k, n) if p.get("transpose") else (n, k)
        return [w, (n,)] if p.get("bias_term") else [w]
    if t == "BatchNorm":
        (c,) = need(0, (x[1],), "mean/variance")
        return [(c,), (c,), (1,)]
    if t in ("Scale", "Bias") and len(node.inputs) == 1:
        p = Params(node, "scale_param" if t == "Scale" else "bias_param")
        axis = norm_axis(p, "axis", int(p.get("axis")), len(x))
        num_axes = int(p.get("num_axes"))
        dims = need(0, x[axis:] if num_axes == -1 else x[axis:axis + num_axes], "parameters")
        shape = tuple(dims)
        if t == "Scale" and p.get("bias_term"):
            return [shape, shape]
        return [shape]
    if t == "PReLU":
        if Params(node, "prelu_param").get("channel_shared"):
            return [(1,)]
        return [tuple(need(0, (x[1],), "slopes"))]
    if t == "Normalize":
        if Params(node, "norm_param").get("channel_shared"):
            return [(1,)]
        return [tuple(need(0, (x[1],), "scale"))]
    return []


def random_blobs(node: OriginNode, shapes: list[tuple[int, ...]], rng: np.random.Generator) -> list[np.ndarray]:
    """Random values for the blobs of ``node`` that keep activations finite and O(1)."""
    t = node.op_type
    out: list[np.ndarray] = []
    for i, shape in enumerate(shapes):
        if t == "BatchNorm":
            factor = np.float32(999.982)
            c = shape[0] if i < 2 else 1
            if i == 0:
                arr = rng.normal(0.0, 0.2, c) * factor
            elif i == 1:
                arr = rng.uniform(0.5, 2.0, c) * factor
            else:
                arr = np.array([factor])
        elif t in ("Scale",) and i == 0:
            arr = rng.uniform(0.5, 1.5, shape)
        elif t == "PReLU":
            arr = rng.uniform(0.05, 0.3, shape)
        elif t == "Normalize":
            arr = rng.uniform(5.0, 20.0, shape)
        elif i == 0 and t in (*_CONVS, "InnerProduct"):
            if t == "InnerProduct":
                fan_in = shape[0] if Params(node, "inner_product_param").get("transpose") else shape[1]
            elif t == "Deconvolution":  # (C_in, N/group, k...): each output sums over C_in taps
                fan_in = shape[0] * int(np.prod(shape[2:]))
            else:
                fan_in = int(np.prod(shape[1:]))
            arr = rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(1.0 / max(fan_in, 1)))
        else:  # biases and the like
            arr = rng.normal(0.0, 0.1, shape)
        out.append(np.asarray(arr, dtype=np.float32).reshape(shape))
    return out


def write_random_weights(
    prototxt: str | Path,
    out: str | Path,
    *,
    seed: int = 0,
    input_shapes: dict[str, Any] | None = None,
    max_elements: int | None = None,
) -> dict[str, list[tuple[int, ...]]]:
    """Write a caffemodel with random blobs for every weighted layer of ``prototxt``.

    Every blob shape is checked (dims >= 0; the net's total below ``max_elements``, by
    default :data:`MAX_RANDOM_ELEMENTS`) before anything is allocated. Returns layer name ->
    blob shapes written.
    """
    graph = parse_caffe(prototxt, input_shapes=input_shapes)
    missing = [t.name for t in graph.inputs if t.shape is None]
    if missing:
        raise ShapeError(
            f"[caffe] {Path(prototxt).name}: no shape for input(s) {', '.join(missing)} (data "
            "layers cannot declare one)",
            hint=f"give it with --input-shape {missing[0]}=1,3,224,224",
        )
    shapes = infer_shapes(graph)
    rng = np.random.default_rng(seed)
    limit = MAX_RANDOM_ELEMENTS if max_elements is None else max_elements
    written: dict[str, list[tuple[int, ...]]] = {}
    total = 0
    for node in graph.nodes:
        bshapes = blob_shapes(node, [shapes.get(i) for i in node.inputs])
        for i, shape in enumerate(bshapes):
            ir_types.check_shape(shape, f"{node.where} blob {i}")
            total += math.prod(shape)
            if total > limit:
                raise ShapeError(
                    f"{node.where} blob {i}: shape {shape} brings the net's random weights to "
                    f"{total} values, above the limit of {limit}",
                    hint="check num_output / kernel sizes / input dims; pass max_elements= "
                    "if the net is really this large",
                )
        if bshapes:
            written[node.name] = bshapes
    # every layer goes into the file, as Caffe writes it (those without blobs with none)
    layers = [(node.name, node.op_type, random_blobs(node, written.get(node.name, []), rng))
              for node in graph.nodes]
    write_caffemodel(Path(out), graph.name, layers)
    return written
