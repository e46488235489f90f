"""Caffe fork layers that move or rescale data: SegNet/PSPNet ``BN``, ``Upsample`` (YOLOv3's
nearest upsampling, SegNet's max-unpooling with a pooling mask), ``MaxUnpool``, YOLOv2's
``Reorg``, ``HardSwish``/``HardSigmoid``, CTPN's ``Reverse``, ``Transpose`` and ``Im2col``,
and caffe-windows' bilinear ``Resize``. The fork each follows is cited on each mapping;
docs/caffe-forks.md lists the choices where forks disagree."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...ir.ops.conv import out_size
from ...parsers.origin import Framework, OriginNode
from ..im2col import im2col_taps
from ..registry import mapping
from .common import Params, conv_geometry, norm_axis

CAFFE = Framework.CAFFE

#: bn_param fields only the 4-blob BN of PSPNet / DeepLab forks (hszhao/PSPNet bn_layer.cpp:
#: scale, shift, running mean, running variance) has; SegNet's BN (alexgkendall/caffe-segnet
#: bn_layer.cpp) has 2 blobs (scale, shift) and a bn_mode.
_PSP_BN_FIELDS = ("moving_average", "decay", "var_eps", "frozen", "momentum", "slope_filler", "bias_filler")


def _channel_shape(rank: int, c: int) -> tuple[int, ...]:
    return (1, c) + (1,) * (rank - 2)


def _f32(v: float) -> np.ndarray:
    return np.array(v, np.float32)


@mapping(CAFFE, "BN")
def bn(node: OriginNode, g: Any) -> Value:
    """The ``BN`` layer of two forks, told apart by the blobs the caffemodel has (or, for
    random weights, by the bn_param fields):

    - PSPNet / DeepLab (hszhao/PSPNet src/caffe/layers/bn_layer.cpp, TEST phase): 4 blobs
      (1, C, 1, 1) scale, shift, mean, variance; y = scale (x - mean) / sqrt(var + var_eps) +
      shift (var_eps 1e-9 unless set; with moving_average false the batch's own statistics);
    - SegNet (alexgkendall/caffe-segnet bn_layer.cpp): 2 blobs scale, shift; bn_mode INFERENCE
      is y = scale x + shift, LEARN (the proto default) normalises by the batch's own mean and
      variance over N, H, W with eps 1e-9 first."""
    p = Params(node, "bn_param")
    x = g.input(0)
    rank = len(x.shape)
    if rank < 2:
        raise g.unsupported(f"input of rank {rank}: BN normalises the channel axis 1")
    c = int(x.shape[1])
    shape = _channel_shape(rank, c)
    four = g.num_weights >= 4 or (g.num_weights == 0 and any(p.has(f) for f in _PSP_BN_FIELDS))
    scale = g.constant(g.weight_array(0, shape, kind="scale"))
    shift = g.constant(g.weight_array(1, shape, kind="bias"))
    eps = float(p.get("var_eps", 1e-9))
    if four:
        mean = g.weight_array(2, shape, kind="bias")
        var = g.weight_array(3, shape, kind="positive")
        if p.get("moving_average", True) is False:
            return _batch_norm(g, x, scale, shift, eps)
        inv = (1.0 / np.sqrt(var.astype(np.float64) + eps)).astype(np.float32)
        y = g.op("Sub", [x, g.constant(mean)])
        y = g.op("Mul", [y, g.op("Mul", [scale, g.constant(inv)])])
        return g.op("Add", [y, shift])
    if p.get("bn_mode", "LEARN") == "INFERENCE":
        return g.op("Add", [g.op("Mul", [x, scale]), shift])
    return _batch_norm(g, x, scale, shift, eps)


def _batch_norm(g: Any, x: Value, scale: Value, shift: Value, eps: float) -> Value:
    """Normalise by the input's own mean and (biased) variance over every axis but 1."""
    axes = tuple(i for i in range(len(x.shape)) if i != 1)
    mean = g.op("ReduceMean", [x], axes=axes, keepdims=1)
    d = g.op("Sub", [x, mean])
    var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=axes, keepdims=1)
    std = g.op("Sqrt", [g.op("Add", [var, g.constant(_f32(eps))])])
    return g.op("Add", [g.op("Mul", [g.op("Div", [d, std]), scale]), shift])


def _nearest(g: Any, x: Value, sh: int, sw: int) -> Value:
    n, c, h, w = (int(d) for d in x.shape)
    y = g.op("Reshape", [x], shape=(n, c, h, 1, w, 1))
    y = g.op("Expand", [y], shape=(n, c, h, sh, w, sw))
    return g.op("Reshape", [y], shape=(n, c, h * sh, w * sw))


def _upsample_scales(p: Params) -> tuple[int, int]:
    if p.has("scale_h") or p.has("scale_w"):
        sh, sw = int(p.get("scale_h", 0)), int(p.get("scale_w", 0))
    else:
        sh = sw = int(p.get("scale"))
    if sh < 1 or sw < 1:
        raise p.error("scale", (sh, sw), "must be >= 1")
    return sh, sw


def unpool_size(p: Params, h: int, w: int) -> tuple[int, int]:
    """SegNet's UpsampleLayer::Reshape: upsample_h/upsample_w, else H * scale_h - pad_out_h."""
    if p.has("upsample_h") or p.has("upsample_w"):
        if not (p.has("upsample_h") and p.has("upsample_w")):
            raise p.error("upsample_h", p.get("upsample_h", None), "upsample_h and upsample_w go together")
        oh, ow = int(p.get("upsample_h")), int(p.get("upsample_w"))
    else:
        sh, sw = _upsample_scales(p)
        oh, ow = h * sh - int(bool(p.get("pad_out_h", False))), w * sw - int(bool(p.get("pad_out_w", False)))
    if oh < h or ow < w:
        raise p.error("upsample_h", (oh, ow), f"the output must be at least the input size {h}x{w}")
    return oh, ow


def max_unpool(g: Any, p: Params, x: Value, mask: Value) -> Value:
    """Scatter each value of x to its plane's position given by the mask (Caffe's pooling
    mask: the index h * W + w of the maximum in the unpooled plane) of a zero output."""
    n, c, h, w = (int(d) for d in x.shape)
    if tuple(int(d) for d in mask.shape) != (n, c, h, w):
        raise g.error(f"the mask (bottom 1) has shape {tuple(mask.shape)}, not the data's {(n, c, h, w)}")
    oh, ow = unpool_size(p, h, w)
    # ONNX-style flat indices over the whole output: the plane offset (n * C + c) * OH * OW
    base = (np.arange(n * c, dtype=np.int64) * oh * ow).reshape(n, c, 1, 1)
    idx = g.op("Add", [g.op("Cast", [mask], to="i64"), g.constant(base)])
    # a stride-1 window of (OH - H + 1, OW - W + 1) makes MaxUnpool's default size (OH, OW)
    return g.op("MaxUnpool", [x, idx], kernel_shape=(oh - h + 1, ow - w + 1), strides=(1, 1))


@mapping(CAFFE, "Upsample")
def upsample(node: OriginNode, g: Any) -> Value:
    """1 bottom: nearest upsampling by ``scale`` (or scale_h/scale_w), the YOLOv3 fork layer
    (eric612/MobileNet-YOLO upsample_layer.cpp). 2 bottoms (data, pooling mask): SegNet's
    max-unpooling (alexgkendall/caffe-segnet upsample_layer.cpp), sized by upsample_h/
    upsample_w or by scale minus pad_out_h/pad_out_w."""
    p = Params(node, "upsample_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: Upsample is 2-D (N, C, H, W)")
    if g.num_inputs == 2:
        return max_unpool(g, p, x, g.input(1))
    if g.num_inputs != 1:
        raise g.error(f"takes 1 bottom (nearest) or 2 (data, pooling mask), got {g.num_inputs}")
    sh, sw = _upsample_scales(p)
    return _nearest(g, x, sh, sw)


@mapping(CAFFE, "MaxUnpool")
def max_unpool_layer(node: OriginNode, g: Any) -> Value:
    """A fork name for SegNet's 2-bottom Upsample (data, pooling mask), sized by its
    upsample_param as Upsample is."""
    if g.num_inputs != 2:
        raise g.error(f"takes 2 bottoms (data, pooling mask), got {g.num_inputs}")
    return max_unpool(g, Params(node, "upsample_param"), g.input(0), g.input(1))


def pooling_mask(g: Any, x: Value, y_idx: Value) -> Value:
    """Caffe's MAX-pooling mask top from ONNX-style flat indices: the index within the input
    plane (h * W + w), as float (BVLC pooling_layer.cpp writes ``mask[pool_index] = index``)."""
    h, w = int(x.shape[2]), int(x.shape[3])
    plane = g.op("Mod", [y_idx, g.constant(np.array(h * w, np.int64))])
    return g.op("Cast", [plane], to="f32")


@mapping(CAFFE, "Reorg")
def reorg(node: OriginNode, g: Any) -> Value:
    """YOLOv2's reorg by ``stride`` s: (N, C, H, W) -> (N, C s^2, H/s, W/s).

    The default follows darknet's reorg_cpu(..., forward=0) as darknet, OpenCV's ReorgLayer
    and the YOLOv2 Caffe forks compute it: the input's memory read as (C/s^2, H s, W s) and
    written back as (C, H, W). ``reorg_param { mode: "space_to_depth" }`` gives the plain
    space-to-depth of some forks (ONNX SpaceToDepth, DCR order) instead."""
    p = Params(node, "reorg_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: Reorg is 2-D (N, C, H, W)")
    s = int(p.get("stride", 2))
    n, c, h, w = (int(d) for d in x.shape)
    if s < 1 or h % s or w % s:
        raise p.error("stride", s, f"must be >= 1 and divide H ({h}) and W ({w})")
    mode = str(p.get("mode", "darknet"))
    if mode == "space_to_depth":
        return g.op("SpaceToDepth", [x], blocksize=s, mode="DCR")
    if mode != "darknet":
        raise p.error("mode", mode, "one of darknet (the default) or space_to_depth")
    if c % (s * s):
        raise p.error("stride", s, f"darknet's reorg needs C ({c}) divisible by stride^2")
    y = g.op("Reshape", [x], shape=(n, c // (s * s), h, s, w, s))
    y = g.op("Transpose", [y], perm=(0, 3, 5, 1, 2, 4))
    return g.op("Reshape", [y], shape=(n, c * s * s, h // s, w // s))


@mapping(CAFFE, "HardSwish")
def hard_swish(node: OriginNode, g: Any) -> Value:
    """x * relu6(x + 3) / 6 (the MobileNetV3 Caffe forks)."""
    return g.op("HardSwish", [g.input(0)])


@mapping(CAFFE, "HardSigmoid")
def hard_sigmoid(node: OriginNode, g: Any) -> Value:
    """max(0, min(1, alpha x + beta)); alpha 0.2, beta 0.5 unless hard_sigmoid_param sets them."""
    p = Params(node, "hard_sigmoid_param")
    return g.op("HardSigmoid", [g.input(0)], alpha=float(p.get("alpha", 0.2)), beta=float(p.get("beta", 0.5)))


@mapping(CAFFE, "Reverse")
def reverse(node: OriginNode, g: Any) -> Value:
    """The input reversed along reverse_param.axis (CTPN: tianzhi0549/CTPN reverse_layer.cpp)."""
    p = Params(node, "reverse_param")
    x = g.input(0)
    axis = norm_axis(p, "axis", int(p.get("axis", 0)), len(x.shape))
    idx = np.arange(int(x.shape[axis]) - 1, -1, -1, dtype=np.int64)
    return g.op("Gather", [x, g.constant(idx)], axis=axis)


@mapping(CAFFE, "Transpose")
def transpose(node: OriginNode, g: Any) -> Value:
    """Axes permuted: output axis i is input axis transpose_param.dim[i] (CTPN transpose_layer.cpp)."""
    p = Params(node, "transpose_param")
    x = g.input(0)
    perm = p.ints("dim")
    if sorted(perm) != list(range(len(x.shape))):
        raise p.error("dim", perm, f"must be a permutation of 0..{len(x.shape) - 1}")
    return g.op("Transpose", [x], perm=tuple(perm))


@mapping(CAFFE, "Im2col")
def im2col(node: OriginNode, g: Any) -> Value:
    """BVLC's Im2colLayer (used by CTPN; src/caffe/layers/im2col_layer.cpp over
    src/caffe/util/im2col.cpp im2col_cpu): each output position's k_h x k_w patch of every
    channel as channels (C k_h k_w, in c, ki, kj order) of an (N, C k_h k_w, OH, OW) output,
    with convolution_param's kernel, pad, stride and dilation, zeros in the padding. Built by
    the shared im2col of ``mappers/im2col.py``: copies only, exact for inf and NaN too."""
    p = Params(node, "convolution_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: only 2-D Im2col is supported")
    if int(p.get("axis", 1)) not in (1, -3):
        raise p.error("axis", int(p.get("axis")), "only the channel axis 1 (N, C, H, W) is supported")
    geo = conv_geometry(p, 2)
    n, c, h, w = (int(d) for d in x.shape)
    out = [out_size(size, geo.kernel[i], geo.stride[i], geo.dilation[i], geo.pad[i], geo.pad[i])
           for i, size in enumerate((h, w))]
    if min(out) < 1:
        raise p.error("kernel_size", geo.kernel, f"larger than the padded input {tuple(x.shape)}")
    cols = im2col_taps(g, x, geo.kernel, geo.dilation, geo.pad, geo.stride)
    return g.op("Reshape", [cols], shape=[n, c * geo.kernel[0] * geo.kernel[1], *out], allowzero=0)


@mapping(CAFFE, "ImResize")
def im_resize(node: OriginNode, g: Any) -> Value:
    """OpenPose's ImResize (CMU-Perceptual-Computing-Lab/caffe_rtpose imresize_layer.cpp):
    every plane through cv::resize(INTER_CUBIC) to target_spatial_height x
    target_spatial_width (368 x 368 unless set, its caffe.proto defaults), or to the input
    size times ``factor`` when set (truncated to int).
    OpenCV's bicubic is ONNX's cubic with a = -0.75 and half-pixel centres."""
    p = Params(node, "imresize_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: ImResize is 2-D (N, C, H, W)")
    n, c, h, w = (int(d) for d in x.shape)
    factor = float(p.get("factor", 0.0))
    if factor:
        oh, ow = int(h * factor), int(w * factor)
    else:
        oh, ow = int(p.get("target_spatial_height", 368)), int(p.get("target_spatial_width", 368))
    if oh < 1 or ow < 1:
        raise p.error("target_spatial_height", (oh, ow),
                      "give target_spatial_height and target_spatial_width (or factor) for an output of at least 1x1")
    return g.op("Resize", [x], mode="cubic", coordinate_transformation_mode="half_pixel",
                cubic_coeff_a=-0.75, sizes=(n, c, oh, ow))


def fork_bilinear_weights(in_size: int, out_size: int) -> np.ndarray:
    """The (out_size, in_size) matrix of happynear/caffe-windows BiLinearResizeMat_cpu
    (src/caffe/util/util_img.cpp) along one axis: output i samples the input at
    i * (in / out), computed in float32 as the fork does; it takes (1 - f) of floor(.) and f
    of the next sample, and drops the second term past the last input (no clamping: the
    last outputs of an upscale fade towards 0, as in the fork)."""
    scale = np.float32(in_size) / np.float32(out_size)
    pos = np.arange(out_size, dtype=np.float32) * scale
    lo = np.floor(pos).astype(np.int64)
    frac = pos - lo.astype(np.float32)
    m = np.zeros((out_size, in_size), np.float32)
    rows = np.arange(out_size)
    m[rows, lo] = np.abs(np.float32(1) - frac)
    nxt = lo + 1 < in_size
    m[rows[nxt], lo[nxt] + 1] = np.abs(frac[nxt])
    return m


def fork_resize_size(p: Params, h: int, w: int) -> tuple[int, int]:
    """ResizeLayer::Reshape: height/width, or with is_pyramid_test the input size times
    out_height_scale/out_width_scale, truncated to int."""
    if bool(p.get("is_pyramid_test", False)):
        if not (p.has("out_height_scale") and p.has("out_width_scale")):
            raise p.error("out_height_scale", p.get("out_height_scale", None),
                          "is_pyramid_test needs both out_height_scale and out_width_scale")
        oh = int(np.float32(p.get("out_height_scale")) * np.float32(h))
        ow = int(np.float32(p.get("out_width_scale")) * np.float32(w))
    else:
        if not (p.has("height") and p.has("width")):
            raise p.error("height", p.get("height", None),
                          "give height and width (or is_pyramid_test with out_height_scale/out_width_scale)")
        oh, ow = int(p.get("height")), int(p.get("width"))
    if oh < 1 or ow < 1:
        raise p.error("height", (oh, ow), "the output must be at least 1x1")
    return oh, ow


@mapping(CAFFE, "Resize")
def fork_resize(node: OriginNode, g: Any) -> Value:
    """happynear/caffe-windows ResizeLayer (resize_layer.cpp, util_img.cpp): bilinear resize
    of every plane on the grid i * in / out (fork_bilinear_weights), written as two
    products with the per-axis weight matrices: rows @ X @ cols^T."""
    p = Params(node, "resize_param")
    x = g.input(0)
    if len(x.shape) != 4:
        raise g.unsupported(f"input of rank {len(x.shape)}: Resize is 2-D (N, C, H, W)")
    h, w = int(x.shape[2]), int(x.shape[3])
    oh, ow = fork_resize_size(p, h, w)
    y = g.op("MatMul", [x, g.constant(np.ascontiguousarray(fork_bilinear_weights(w, ow).T))])
    return g.op("MatMul", [g.constant(fork_bilinear_weights(h, oh)), y])
