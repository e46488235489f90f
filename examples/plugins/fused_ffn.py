"""A fusion pass as an opbridge plugin: a transformer feed-forward block becomes one op.

MagicMind fuses several network layers into one plugin "big op", CANN maps several origin
layers onto one operator with a fusion parse function. In opbridge a many-to-one rewrite is
an IR pass, and a plugin registers one from the same file as its op:

1. ``define_op("FusedFFN")``: ``y = Gelu(x @ w1 + b1) @ w2 + b2`` with its schema, shape
   function (it checks the weights' shapes) and numpy reference compute;
2. a :class:`~opbridge.ir.passes.Pattern` for ``MatMul -> Add -> Gelu -> MatMul -> Add`` with
   constant weights and vector biases, and the function that replaces each match by a FusedFFN;
3. ``ob.register_pass("fuse_ffn")``: the pass, by name;
4. (optional) the simulator kernel: token rows are independent, so the op may be tiled along
   N and H like MatMul (rank-4 activations); rank-3 ones run it as one global layer;
5. ``fuse_gelu_erf``: exporters older than ONNX's Gelu (opset 20) write GELU as
   ``x * 0.5 * (1 + erf(x / sqrt(2)))``; this pass (a small DAG: ``x`` feeds two branches,
   constants checked by value) turns both orders of it back into one Gelu, so that
   ``--pass fuse_gelu_erf --pass fuse_ffn`` fuses those blocks too.

Use it::

    opbridge convert model.onnx --plugin examples/plugins/fused_ffn.py --pass fuse_ffn \\
        --check-passes -o model.obir
    opbridge validate model.onnx --plugin examples/plugins/fused_ffn.py --pass fuse_ffn

or ``ob.convert("model.onnx", plugins=[...], passes=with_passes(["fuse_ffn"]), check_passes=True)``.
``--check-passes`` compares the fused graph with the unfused one on the same inputs;
``validate`` compares it with onnxruntime running the unfused model.
"""

from __future__ import annotations

import math

import numpy as np

import opbridge as ob
from opbridge.ir.passes import Match, PassResult, Pattern, Rewriter
from opbridge.simulator.kernels import register_kernel

OP = "FusedFFN"
FLOATS = ("f32", "f16")


# 1. The op definition ---------------------------------------------------------------------------
def ffn_shape(ctx: ob.ShapeContext):
    """x [..., d] with w1 [d, h], b1 [h], w2 [h, e], b2 [e] gives [..., e]."""
    x, w1, b1, w2, b2 = (ctx.input_shape(i) for i in range(5))
    d, h = w1
    if x[-1] != d or tuple(b1) != (h,) or w2[0] != h or tuple(b2) != (w2[1],):
        raise ctx.error(f"weights do not chain: x {list(x)}, w1 {list(w1)}, b1 {list(b1)}, "
                        f"w2 {list(w2)}, b2 {list(b2)}")
    return (*x[:-1], w2[1]), ctx.input_dtype(0)


def _erf(x: np.ndarray) -> np.ndarray:
    flat = x.astype(np.float64).ravel().tolist()  # numpy has no erf; math.erf is exact to 1 ulp
    return np.fromiter(map(math.erf, flat), np.float64, len(flat)).reshape(x.shape)


def gelu(x: np.ndarray, approximate: str) -> np.ndarray:
    """ONNX Gelu (opset 20): x * Phi(x), or its tanh approximation."""
    x64 = x.astype(np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64**3)))
    else:
        y = 0.5 * x64 * (1.0 + _erf(x64 / math.sqrt(2.0)))
    return y.astype(x.dtype)


def ffn_compute(x, w1, b1, w2, b2, *, approximate: str) -> np.ndarray:
    """The reference: the five ops it replaces, in x's dtype."""
    h = gelu((x @ w1 + b1).astype(x.dtype), approximate)
    return (h @ w2 + b2).astype(x.dtype)


(
    ob.define_op(OP)
    .doc("Gelu(x @ w1 + b1) @ w2 + b2: a transformer feed-forward block, fused")
    .input("x", "T").input("w1", "T").input("b1", "T").input("w2", "T").input("b2", "T")
    .output("y", "T")
    .param("approximate", "str", default="none", allowed=("none", "tanh"))
    .type_param("T", FLOATS)
    .shape_fn(ffn_shape)
    .compute(ffn_compute)
)


# 2. The pattern and its replacement -------------------------------------------------------------
def ffn_pattern() -> Pattern:
    """MatMul -> Add -> Gelu -> MatMul -> Add, with constant 2-D weights and 1-D biases (a bias
    of another shape would broadcast differently from FusedFFN's). Add matches either operand
    order (exporters write both)."""
    p = Pattern("ffn")
    x = p.any("x", dtype=FLOATS, where=lambda v: len(v.shape) >= 2)
    h = p.op("MatMul", x, p.constant("w1", rank=2), name="mm1")
    h = p.op("Add", h, p.constant("b1", rank=1), name="add1")
    h = p.op("Gelu", h, name="gelu")
    h = p.op("MatMul", h, p.constant("w2", rank=2), name="mm2")
    p.op("Add", h, p.constant("b2", rank=1), name="add2")
    return p


def fuse_ffn(m: Match, r: Rewriter):
    """One FusedFFN for the match; None leaves a match whose weights do not chain alone."""
    w1, b1, w2, b2 = (m.const(k) for k in ("w1", "b1", "w2", "b2"))
    if b1.shape != (w1.shape[1],) or b2.shape != (w2.shape[1],):
        return None
    return r.op(OP, [m["x"], m["w1"], m["b1"], m["w2"], m["b2"]],
                approximate=m.node("gelu").attrs["approximate"])


# 3. The named pass ------------------------------------------------------------------------------
ob.register_pass("fuse_ffn")(ffn_pattern().rewrite(fuse_ffn))


# 4. The simulator kernel (optional) -------------------------------------------------------------
def ffn_rows(node, i: int, lo: int, hi: int):
    """Output rows [lo, hi) need the same rows of x; the weights are taken whole (None)."""
    return (lo, hi) if i == 0 else None


def ffn_cost(node, out_shape) -> float:
    """FLOPs of one output tile: two matrix products (and the Gelu, counted as 8 per element)."""
    d, h = (int(s) for s in node.inputs[1].shape)
    rows = math.prod(out_shape[:-1])
    return 2.0 * rows * d * h + 2.0 * rows * h * out_shape[-1] + 8.0 * rows * h


register_kernel(OP).split("N", "H").input_slice(ffn_rows).cost(ffn_cost)


# 5. Gelu written out with Erf (opset < 20 exporters) -------------------------------------------
def _near(value: float):
    """A constant placeholder's condition: a single value close to ``value``."""
    return lambda v: v.data is not None and v.data.size == 1 and abs(float(v.data.ravel()[0]) - value) < 1e-4


def _erf_half(p: Pattern, x):
    """0.5 * (1 + erf(x / sqrt(2))) is built from x the same way in both orders."""
    e = p.op("Erf", p.op("Div", x, p.constant("sqrt2", where=_near(math.sqrt(2.0)))))
    return p.op("Add", e, p.constant("one", where=_near(1.0)))


def gelu_erf_patterns() -> list[Pattern]:
    """``(x * (1 + erf(x / sqrt2))) * 0.5`` (torch.onnx) and ``(x * 0.5) * (1 + erf(x / sqrt2))``
    (Hugging Face's written-out GELU)."""
    a = Pattern("gelu_erf")
    x = a.any("x", dtype=FLOATS)
    a.op("Mul", a.op("Mul", x, _erf_half(a, x)), a.constant("half", where=_near(0.5)))
    b = Pattern("gelu_erf_half_first")
    x = b.any("x", dtype=FLOATS)
    b.op("Mul", b.op("Mul", x, b.constant("half", where=_near(0.5))), _erf_half(b, x))
    return [a, b]


_GELU_ERF = [p.rewrite(lambda m, r: r.op("Gelu", [m["x"]], approximate="none"))
             for p in gelu_erf_patterns()]


@ob.register_pass("fuse_gelu_erf")
def fuse_gelu_erf(graph) -> PassResult:
    """Both written-out forms of GELU into one Gelu: a pass may be any function of the graph
    (returning the new graph, or a PassResult that says whether and what it changed)."""
    done = []
    for rewrite in _GELU_ERF:
        result = rewrite(graph)
        graph = result.graph
        if result.modified:
            done.append(result.detail)
    return PassResult(graph, bool(done), "; ".join(done) or "no match")
