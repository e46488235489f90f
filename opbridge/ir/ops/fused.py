"""Fused ops: what the fusion passes (``opbridge/ir/passes/fuse_*.py``) rewrite chains into.

- ``FusedConv``: Conv, plus an optional tensor ``Z`` of the output's shape (a residual
  connection's Add), then an activation (onnxruntime's ``com.microsoft::FusedConv`` has the
  same inputs and attributes: ``activation``, ``activation_params``);
- ``FusedMatMul``: MatMul with a 2-D weight, plus an optional bias over the last axis, then
  an optional activation (the dense layer of a transformer);
- ``ScaledDotProductAttention``: ``softmax(Q @ K_T * scale + mask) @ V`` over the last two
  axes, K given already transposed (as exported models compute it).

Each means exactly its unfused chain: the activation is the built-in activation op's own
compute (:data:`ACTIVATIONS` names which op with which attributes), so a fused graph and the
graph it came from agree up to float rounding. They exist for speed: one output buffer, the
activation applied in place, no intermediate tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import DEFAULT_OPS, ShapeContext, define_op, per_spatial_axis, spatial_shape_of
from ..vecops import relu
from .common import FLOATS
from .conv import _SPATIAL_DOC, _conv_shape, conv_nd
from .matmul import _matmul_shape

#: ``activation`` name -> (the IR op it stands for, its float params in the order of
#: ``activation_params``, fixed attributes of that op).
ACTIVATIONS: dict[str, tuple[str, tuple[str, ...], dict[str, Any]]] = {
    "none": ("Identity", (), {}),
    "Relu": ("Relu", (), {}),
    "LeakyRelu": ("LeakyRelu", ("alpha",), {}),
    "Clip": ("Clip", ("min", "max"), {}),
    "HardSigmoid": ("HardSigmoid", ("alpha", "beta"), {}),
    "HardSwish": ("HardSwish", (), {}),
    "Sigmoid": ("Sigmoid", (), {}),
    "Tanh": ("Tanh", (), {}),
    "Gelu": ("Gelu", (), {"approximate": "none"}),
    "GeluTanh": ("Gelu", (), {"approximate": "tanh"}),
}


def activation_of(op: str, attrs: dict[str, Any]) -> tuple[str, tuple[float, ...]] | None:
    """The (``activation``, ``activation_params``) a node ``op(attrs)`` fuses as, or None."""
    for name, (act_op, params, fixed) in ACTIVATIONS.items():
        if act_op == op and name != "none" and all(attrs.get(k) == v for k, v in fixed.items()):
            return name, tuple(float(attrs[p]) for p in params)
    return None


def apply_activation(y: np.ndarray, activation: str, params: tuple[float, ...]) -> np.ndarray:
    """``y`` (a fresh buffer, overwritten where that saves a pass) through the activation."""
    if activation == "none":
        return y
    if activation == "Relu":
        return relu(y, out=y)
    if activation == "Clip":
        return np.clip(y, y.dtype.type(params[0]), y.dtype.type(params[1]), out=y)
    op, names, fixed = ACTIVATIONS[activation]
    fn = DEFAULT_OPS.get(op).compute_function
    assert fn is not None  # every built-in activation has a compute
    return np.asarray(fn(y, **dict(zip(names, params)), **fixed))


def _check_activation(ctx: ShapeContext) -> None:
    act, params = ctx.attr("activation"), ctx.attr("activation_params")
    want = len(ACTIVATIONS[act][1])
    if len(params) != want:
        raise ctx.error(f"has {len(params)} entries; activation '{act}' takes {want} "
                        f"({', '.join(ACTIVATIONS[act][1]) or 'none'})", attr="activation_params")


_ACT_DOC = ("the activation applied to the result: " + ", ".join(ACTIVATIONS)
            + " (GeluTanh: Gelu with approximate='tanh')")
_PARAMS_DOC = "the activation's float attributes: LeakyRelu alpha; Clip min, max; HardSigmoid alpha, beta"


# -- FusedConv -------------------------------------------------------------------------------
def _fused_conv_shape(ctx: ShapeContext) -> Any:
    _check_activation(ctx)
    shape, dt = _conv_shape(ctx)
    if ctx.has_input(3) and tuple(ctx.input_shape(3)) != tuple(shape):
        raise ctx.error(f"Z has shape {list(ctx.input_shape(3))}; it must be the output's "
                        f"{list(shape)}", hint="Z is added to the convolution, unbroadcast")
    return shape, dt


def _fused_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
                z: np.ndarray | None = None, *, group: int, kernel_shape: tuple[int, ...],
                strides: tuple[int, ...], dilations: tuple[int, ...], pads: tuple[int, ...],
                activation: str, activation_params: tuple[float, ...]) -> np.ndarray:
    y = conv_nd(x, w, b, group=group, k=kernel_shape, s=strides, d=dilations, p=pads)
    if z is not None:
        y += z  # y is a fresh buffer of the output's dtype: the unfused Add, in place
    return apply_activation(y, activation, activation_params)


(
    define_op("FusedConv")
    .doc("Conv, plus an optional Z of the output's shape (a residual Add), then an activation, "
         "in one op (attributes as Conv, plus activation and activation_params, as "
         "onnxruntime's com.microsoft FusedConv)")
    .input("X", "T").input("W", "T").input("B", "T", optional=True)
    .input("Z", "T", optional=True)
    .output("Y", "T")
    .param("group", "int", default=1, minimum=1, doc="number of channel groups")
    .param("kernel_shape", "ints", fill=spatial_shape_of(1), doc=_SPATIAL_DOC["kernel_shape"])
    .param("strides", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["strides"])
    .param("dilations", "ints", fill=per_spatial_axis(1), doc=_SPATIAL_DOC["dilations"])
    .param("pads", "ints", fill=per_spatial_axis(0, entries=2), doc=_SPATIAL_DOC["pads"])
    .param("activation", "str", allowed=tuple(ACTIVATIONS), doc=_ACT_DOC)
    .param("activation_params", "floats", default=(), doc=_PARAMS_DOC)
    .type_param("T", FLOATS)
    .shape_fn(_fused_conv_shape)
    .compute(_fused_conv)
)


# -- FusedMatMul ------------------------------------------------------------------------------
def _fused_matmul_shape(ctx: ShapeContext) -> Any:
    _check_activation(ctx)
    if len(ctx.input_shape(1)) != 2:
        raise ctx.error(f"weight B has shape {list(ctx.input_shape(1))}; it must be 2-D [K, N]")
    shape, dt = _matmul_shape(ctx)
    n = ctx.input_shape(1)[1]
    if ctx.has_input(2) and tuple(ctx.input_shape(2)) != (n,):
        raise ctx.error(f"bias has shape {list(ctx.input_shape(2))}; it must be [{n}]")
    return shape, dt


def _fused_matmul(a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None, *,
                  activation: str, activation_params: tuple[float, ...]) -> np.ndarray:
    dt = a.dtype
    wdt = np.float32 if dt == np.float16 or dt.name == "bfloat16" else dt
    a = a.astype(wdt, copy=False)
    # one GEMM over every row: a batched matmul of [..., M, K] @ [K, N] would loop per batch
    y = np.matmul(a.reshape(-1, a.shape[-1]), b.astype(wdt, copy=False))
    if bias is not None:
        y += bias.astype(wdt, copy=False)
    y = apply_activation(y, activation, activation_params)
    return y.reshape(*a.shape[:-1], y.shape[-1]).astype(dt, copy=False)


(
    define_op("FusedMatMul")
    .doc("A [..., M, K] @ B [K, N] (2-D), plus an optional bias [N], then an activation")
    .input("A", "T").input("B", "T").input("bias", "T", optional=True).output("Y", "T")
    .param("activation", "str", default="none", allowed=tuple(ACTIVATIONS), doc=_ACT_DOC)
    .param("activation_params", "floats", default=(), doc=_PARAMS_DOC)
    .type_param("T", FLOATS)
    .shape_fn(_fused_matmul_shape)
    .compute(_fused_matmul)
)


# -- ScaledDotProductAttention -----------------------------------------------------------------
def _sdpa_shape(ctx: ShapeContext) -> Any:
    q, kt, v = (list(ctx.input_shape(i)) for i in range(3))
    if min(len(q), len(kt), len(v)) < 2:
        raise ctx.error(f"Q {q}, K_T {kt} and V {v} must have rank >= 2")
    scores, dt = _matmul_shape(ctx)  # Q @ K_T: checks the inner dims and the batch broadcast
    if len(scores) != len(v) or scores[-1] != v[-2]:
        raise ctx.error(f"the scores {list(scores)} (Q @ K_T) do not fit V {v}",
                        hint="V is [..., keys, features]")
    if ctx.has_input(3):
        m = tuple(ctx.input_shape(3))
        sc = tuple(scores)
        if len(m) > len(sc) or any(a not in (1, b) for a, b in zip(m[::-1], sc[::-1])):
            raise ctx.error(f"mask {list(m)} does not broadcast to the scores {list(sc)}")
    return (*scores[:-1], v[-1]), dt


def _sdpa(q: np.ndarray, kt: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None, *,
          scale: float) -> np.ndarray:
    dt = q.dtype
    wdt = np.dtype(np.float32) if dt != np.float64 else dt
    s = np.matmul(q.astype(wdt, copy=False), kt.astype(wdt, copy=False))
    s *= wdt.type(scale)
    if mask is not None:
        s += mask.astype(wdt, copy=False)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s, v.astype(wdt, copy=False)).astype(dt, copy=False)


(
    define_op("ScaledDotProductAttention")
    .doc("softmax(Q @ K_T * scale + mask, last axis) @ V; K_T is K already transposed "
         "[..., features, keys]; mask (optional, additive) broadcasts to the scores")
    .input("Q", "T").input("K_T", "T").input("V", "T").input("mask", "T", optional=True)
    .output("Y", "T")
    .param("scale", "float", doc="multiplies the scores (1/sqrt(features) in BERT)")
    .type_param("T", FLOATS)
    .shape_fn(_sdpa_shape)
    .compute(_sdpa)
)
