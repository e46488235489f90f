"""ONNX FlexAttention (domain ``ai.onnx.preview``, version 1), lowered to IR ops.

Semantics (onnx/defs/preview/defs.cc, FlexAttention-1, and its function body)::

    K, V   = each K/V head repeated for its group of q_num_heads / kv_num_heads query heads
    s      = sqrt(scale) in float32, cast to Q's type   (scale defaults to 1/sqrt(head_size))
    Scores = Cast((Q * s) @ (K * s)^T, softmax_precision)
    Scores = score_mod(Scores)          # a graph: one rank-4 tensor in, one of that shape out
    Probs  = Softmax(Scores, axis=-1)
    Probs  = prob_mod(Probs)            # likewise
    Y      = Cast(Probs @ Cast(V, softmax_precision), Q's type)

softmax_precision defaults to float32, or double for double inputs.

Why a lowering and not an IR op of its own: the modifiers of this spec are graphs of one input,
the whole score (or probability) tensor, applied once; unlike PyTorch's per-element
``score_mod(score, b, h, q_idx, kv_idx)``, a body that needs the indices computes them itself
(Shape, Range). So the spec's own function body is the meaning, and the modifiers are inlined
with ``g.map_subgraph`` (the mechanism If/Loop/Scan bodies use, ``control.inline_graph``): the
converter folds what they compute from static shapes (a causal mask becomes a constant), and the
interpreter and the simulator run MatMul, Softmax and the bodies' ops with the kernels they
already have; an IR op holding a graph would need the interpreter and the simulator to run
nested graphs for what is a straight line of ops.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.graph import Value
from ...ir.types import to_numpy_dtype
from ...parsers.origin import Framework, OriginGraph, OriginNode
from ..context import MapContext
from ..registry import mapping
from .control import inline_graph
from .elementwise import required_input

ONNX = Framework.ONNX
PREVIEW = "ai.onnx.preview"

#: softmax_precision: the TensorProto types the spec allows (float, float16, bfloat16, double).
SOFTMAX_PRECISIONS = {1: "f32", 10: "f16", 16: "bf16", 11: "f64"}


def _scale(node: OriginNode, g: MapContext, q: Value) -> float:
    """The scale attribute, else 1/sqrt(head_size) (attribute types are checked against the
    schema before a mapping runs: schema_defaults.py)."""
    scale = node.get_attr("scale", None)
    if scale is None:
        return float(1.0 / np.sqrt(g.static_dim(q, 3, "FlexAttention's default scale 1/sqrt(head_size)")))
    return float(scale)


def _softmax_dtype(node: OriginNode, g: MapContext, dtype: str) -> str:
    """The IR dtype scores and probabilities are computed in."""
    code = node.get_attr("softmax_precision", None)
    if code is None:
        return "f64" if dtype == "f64" else "f32"
    if code not in SOFTMAX_PRECISIONS:
        names = ", ".join(f"{k} ({v})" for k, v in SOFTMAX_PRECISIONS.items())
        raise g.error(f"{code!r} is not a floating-point TensorProto type the spec allows",
                      attr="softmax_precision", hint=f"use one of {names}, or leave it absent")
    return SOFTMAX_PRECISIONS[code]


def _modifier(node: OriginNode, g: MapContext, name: str, dtype: str) -> OriginGraph | None:
    """The graph-valued attribute ``name``, checked: one input and one output, declared (when
    declared) as tensors of the softmax precision."""
    body = node.get_attr(name, None)
    if body is None:
        return None
    if len(body.inputs) != 1 or len(body.outputs) != 1:
        raise g.error(f"its graph '{body.name}' has {len(body.inputs)} inputs and "
                      f"{len(body.outputs)} outputs; FlexAttention-1 calls it with one tensor "
                      "and takes one back", attr=name,
                      hint=f"make {name} a graph of one rank-4 input (the scores/probabilities, "
                           "computing any indices it needs with Shape and Range) and one output")
    want = np.dtype(to_numpy_dtype(dtype))
    for role, t in (("input", body.inputs[0]), ("output", body.outputs[0])):
        if (t.dtype is not None and np.dtype(t.dtype) != want) or (t.shape is not None and len(t.shape) != 4):
            raise g.error(f"its graph's {role} '{t.name}' is declared {t.dtype} of shape "
                          f"{list(t.shape) if t.shape is not None else '?'}; it must be a rank-4 "
                          f"{want} tensor (the softmax precision)", attr=name,
                          hint=f"declare the {role} as a rank-4 tensor of the softmax_precision type")
    return body


def _apply(node: OriginNode, g: MapContext, name: str, body: OriginGraph | None, x: Value) -> Value:
    """``body`` inlined on ``x``; its result must keep x's shape and dtype."""
    if body is None:
        return x
    (y,) = inline_graph(g, body, [x], name)
    if y.dtype != x.dtype or len(y.shape) != len(x.shape) or any(
            isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(y.shape, x.shape)):
        raise g.error(f"its graph returns a {y.dtype} tensor of shape {list(y.shape)} for a "
                      f"{x.dtype} input of shape {list(x.shape)}; the output must keep both",
                      attr=name, hint=f"make {name}'s output the shape and type of its input")
    return y


def _kv_aligned(g: MapContext, x: Value, hq: Any, what: str) -> Value:
    """K or V with each of its heads repeated for its group of query heads (GQA)."""
    hkv = x.shape[1]
    if hkv == hq:
        return x
    if not (isinstance(hq, int) and isinstance(hkv, int)):
        raise g.unsupported(f"query heads {hq} and {what} heads {hkv} differ and are not both "
                            "static: the head groups are not known",
                            hint="fix the head dims of the inputs with --input-shape")
    if hkv <= 0 or hq % hkv:
        raise g.error(f"q_num_heads {hq} is not a multiple of kv_num_heads {hkv}",
                      hint="give K and V a number of heads that divides Q's")
    heads = g.constant(np.arange(hq, dtype=np.int64) // (hq // hkv), name=f"{g.node.name}/{what}_heads")
    return g.op("Gather", [x, heads], axis=1)


def _inputs(g: MapContext) -> tuple[Value, Value, Value]:
    q, k, v = (required_input(g, i, n) for i, n in enumerate(("Q", "K", "V")))
    if any(len(t.shape) != 4 for t in (q, k, v)):
        raise g.error(f"needs rank-4 Q, K, V; got shapes {list(q.shape)}, {list(k.shape)}, "
                      f"{list(v.shape)}", hint="give Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev)")
    if not q.dtype == k.dtype == v.dtype or q.dtype not in ("f16", "bf16", "f32", "f64"):
        raise g.error(f"Q, K, V are {q.dtype}, {k.dtype}, {v.dtype}; they must share one float type",
                      hint="cast Q, K and V to one of float16, bfloat16, float, double")
    return q, k, v


@mapping(ONNX, f"{PREVIEW}::FlexAttention", since_opset=1)
def flex_attention(node: OriginNode, g: MapContext) -> Any:
    """FlexAttention-1 as the spec's function body, its modifier graphs inlined."""
    q, k, v = _inputs(g)
    sm = _softmax_dtype(node, g, q.dtype)
    score_mod = _modifier(node, g, "score_mod", sm)
    prob_mod = _modifier(node, g, "prob_mod", sm)
    k, v = _kv_aligned(g, k, q.shape[1], "K"), _kv_aligned(g, v, q.shape[1], "V")
    # the spec scales Q and K by sqrt(scale) each, in Q's type, before the product
    root = np.asarray(np.sqrt(np.float32(_scale(node, g, q))), dtype=to_numpy_dtype(q.dtype))
    s = g.constant(root, name=f"{node.name}/sqrt_scale", dtype=q.dtype)
    kt = g.op("Transpose", [g.op("Mul", [k, s])], perm=[0, 1, 3, 2])
    scores = g.op("MatMul", [g.op("Mul", [q, s]), kt])
    if sm != q.dtype:
        scores = g.op("Cast", [scores], to=sm)
    scores = _apply(node, g, "score_mod", score_mod, scores)
    probs = _apply(node, g, "prob_mod", prob_mod, g.op("Softmax", [scores], axis=3))
    if sm == q.dtype:
        return g.op("MatMul", [probs, v])
    return g.op("Cast", [g.op("MatMul", [probs, g.op("Cast", [v], to=sm)])], to=q.dtype)

