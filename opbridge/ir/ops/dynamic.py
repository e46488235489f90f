"""Data-dependent ops: outputs whose size only the run knows.

``NonZero``, ``NonMaxSuppression``, ``Unique`` and ``Compress`` (ONNX semantics) give a count
that depends on the values; their output dims are run-time dims (``?node.n``, see
:mod:`opbridge.ir.dims`). The ``Dynamic*`` ops are the static shape ops whose shape-like
operand (Reshape's shape, Slice's starts, TopK's k ...) is computed at run time: the operand is
an input here, and each run converts it to the static op's parameter, checks it with the static
op's shape function and runs the static op's compute, so both mean exactly the same. All run on
the host CPU (placement "cpu"), as vendor toolchains place such ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import OpbridgeError
from .. import dims as _dims
from ..dims import canonical
from ..opdef import DEFAULT_OPS, OpDef, ShapeContext, define_op
from ..types import Dim, from_numpy_dtype

# the families of the static ops wrapped below, defined first
from . import generate as _generate  # noqa: F401
from . import reduce as _reduce  # noqa: F401
from . import resize as _resize  # noqa: F401
from . import shape as _shape  # noqa: F401
from . import tensor as _tensor  # noqa: F401
from .common import ALL, FLOATS, NUMERIC

INDEX = ("i32", "i64")


# -- NonZero -------------------------------------------------------------------------------
def _nonzero(x: np.ndarray) -> np.ndarray:
    if x.ndim == 0:
        return np.zeros((0, int(bool(x))), np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


(
    define_op("NonZero")
    .doc("The indices of the non-zero elements, one column per element, in row-major order.")
    .input("x", "T").output("y", "i64")
    .type_param("T", ALL)
    .placement("cpu")
    .shape_fn(lambda ctx: ((ctx.input_rank(0), ctx.runtime_dim()), "i64"))
    .compute(_nonzero)
)


# -- NonMaxSuppression ---------------------------------------------------------------------
def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """[y1, x1, y2, x2] with y1 <= y2, x1 <= x2 (ONNX allows flipped corners)."""
    if center_point_box:
        xc, yc, w, h = (boxes[..., i] for i in range(4))
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = (boxes[..., i] for i in range(4))
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    if area_a <= 0 or area_b <= 0:
        return 0.0
    ih = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    iw = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = ih * iw
    return float(inter / (area_a + area_b - inter))


def _scalar(v: np.ndarray | None, default: float) -> float:
    return default if v is None or v.size == 0 else float(np.asarray(v).reshape(-1)[0])


def _nms(boxes: np.ndarray, scores: np.ndarray, max_out: np.ndarray | None = None,
         iou_threshold: np.ndarray | None = None, score_threshold: np.ndarray | None = None,
         *, center_point_box: int) -> np.ndarray:
    limit = int(_scalar(max_out, 0))
    iou_t = _scalar(iou_threshold, 0.0)
    score_t = None if score_threshold is None or score_threshold.size == 0 else _scalar(score_threshold, 0)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise ValueError(f"boxes {list(boxes.shape)} and scores {list(scores.shape)} must be "
                         "[batch, boxes, 4] and [batch, classes, boxes]")
    if not 0.0 <= iou_t <= 1.0:
        raise ValueError(f"iou_threshold = {iou_t} is outside [0, 1]")
    corners = _corners(boxes.astype(np.float64), center_point_box)
    selected: list[tuple[int, int, int]] = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            s = scores[b, c].astype(np.float64)
            # highest score first; among equal scores the lower box index first
            order = [int(i) for i in np.argsort(-s, kind="stable")
                     if score_t is None or s[i] > score_t]
            kept: list[int] = []
            for i in order:
                if len(kept) >= limit:
                    break
                if all(_iou(corners[b, i], corners[b, k]) <= iou_t for k in kept):
                    kept.append(i)
            selected += [(b, c, i) for i in kept]
    return np.array(selected, dtype=np.int64).reshape(-1, 3)


(
    define_op("NonMaxSuppression")
    .doc("Greedy per-class NMS (ONNX): [batch, class, box] of the kept boxes, by class, then score.")
    .input("boxes", "F").input("scores", "F")
    .input("max_output_boxes_per_class", "i64", optional=True)
    .input("iou_threshold", "F", optional=True).input("score_threshold", "F", optional=True)
    .output("selected_indices", "i64")
    .param("center_point_box", "int", 0, allowed=(0, 1),
           doc="0: [y1, x1, y2, x2] corners; 1: [x_center, y_center, width, height]")
    .type_param("F", ("f32",))
    .placement("cpu")
    .shape_fn(lambda ctx: ((ctx.runtime_dim(), 3), "i64"))
    .compute(_nms)
)


# -- Unique --------------------------------------------------------------------------------
def _unique_shape(ctx: ShapeContext) -> Any:
    shape, axis = ctx.input_shape(0), ctx.attr("axis")
    u = ctx.runtime_dim()
    if axis is None:
        y: tuple[Dim, ...] = (u,)
        n: Dim = ctx.dim_mul(*shape)
    else:
        a = ctx.normalize_axis(axis, len(shape))
        y, n = shape[:a] + (u,) + shape[a + 1:], shape[a]
    return [(y, ctx.input_dtype(0)), ((u,), "i64"), ((n,), "i64"), ((u,), "i64")]


def _unique(x: np.ndarray, *, axis: int | None, sorted: int) -> tuple[np.ndarray, ...]:
    data = x.reshape(-1) if axis is None else x
    ax = None if axis is None else axis % x.ndim
    y, index, inverse, counts = np.unique(data, return_index=True, return_inverse=True,
                                          return_counts=True, axis=ax)
    inverse = inverse.reshape(-1)
    if not sorted:  # the order of first occurrence
        order = np.argsort(index, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y = np.take(y, order, axis=0 if ax is None else ax)
        index, counts, inverse = index[order], counts[order], rank[inverse]
    return (y.astype(x.dtype), index.astype(np.int64), inverse.astype(np.int64),
            counts.astype(np.int64))


(
    define_op("Unique")
    .doc("The unique values (or slices along `axis`), their first indices, the inverse "
         "indices and the counts (ONNX Unique); always all four outputs.")
    .input("x", "T")
    .output("y", "T").output("indices", "i64").output("inverse_indices", "i64").output("counts", "i64")
    .param("axis", "int", None, doc="absent: the flattened input")
    .param("sorted", "int", 1, allowed=(0, 1), doc="0: in order of first occurrence")
    .type_param("T", ALL)
    .placement("cpu")
    .shape_fn(_unique_shape)
    .compute(_unique)
)


# -- Compress ------------------------------------------------------------------------------
def _compress_shape(ctx: ShapeContext) -> Any:
    shape, axis = ctx.input_shape(0), ctx.attr("axis")
    if axis is None:
        return (ctx.runtime_dim(),), ctx.input_dtype(0)
    a = ctx.normalize_axis(axis, len(shape))
    return shape[:a] + (ctx.runtime_dim(),) + shape[a + 1:], ctx.input_dtype(0)


def _compress(x: np.ndarray, condition: np.ndarray, *, axis: int | None) -> np.ndarray:
    cond = np.asarray(condition).reshape(-1).astype(bool)
    size = x.size if axis is None else x.shape[axis]
    if cond.size > size:
        raise ValueError(f"condition has {cond.size} entries; the selected axis has {size}")
    return np.compress(cond, x, axis=axis)


(
    define_op("Compress")
    .doc("The slices of x along `axis` (flattened x when absent) where condition is true; "
         "condition may be shorter than the axis.")
    .input("x", "T").input("condition", "bool").output("y", "T")
    .param("axis", "int", None, doc="absent: the flattened input")
    .type_param("T", ALL)
    .placement("cpu")
    .shape_fn(_compress_shape)
    .compute(_compress)
)


# -- the static shape ops with a run-time operand ------------------------------------------------
#: The name of the node a run-time check reports as (the interpreter names the real node).
_AT_RUN = "<run>"


def param_value(spec_type: str, arr: np.ndarray) -> Any:
    flat = np.asarray(arr).reshape(-1)
    if spec_type == "ints":
        return tuple(int(v) for v in flat)
    if spec_type == "floats":
        return tuple(float(v) for v in flat)
    if flat.size != 1:
        raise ValueError(f"a run-time {spec_type} operand must hold one value, got {list(flat)}")
    return int(flat[0]) if spec_type == "int" else float(flat[0])


def _runner(static: str, n_data: int, operands: Sequence[str]) -> Callable[..., Any]:
    """The compute of ``Dynamic<static>``: the operand tensors become the static op's params,
    checked by its shape function, then its compute runs."""

    def run(*args: np.ndarray | None, **attrs: Any) -> Any:
        base = DEFAULT_OPS.get(static)
        data = list(args[:n_data])
        params = {k: v for k, v in attrs.items() if k != "hint"}
        for name, arr in zip(operands, args[n_data:]):
            if arr is not None:
                params[name] = param_value(base.params[name].type, arr)
        try:
            norm = base.normalize_attrs(params, _AT_RUN)
            base.infer(_AT_RUN, [(a.shape, from_numpy_dtype(a.dtype)) if a is not None else None
                                 for a in data], norm, data)
        except OpbridgeError as err:  # the interpreter says which node; this says which values
            given = ", ".join(f"{n}={np.asarray(a).reshape(-1).tolist()}" for n, a in
                              zip(operands, args[n_data:]) if a is not None)
            detail = err.message.replace(f"node '{_AT_RUN}' ({static}) ", "").replace(
                f"node '{_AT_RUN}' ({static}): ", "")
            raise ValueError(f"run-time {given} is invalid for {static}: {detail}") from None
        return base.compute_function(*data, **norm)  # type: ignore[misc]

    return run


#: ``Dynamic<X>`` op name -> ``X``, for the ops :func:`_dynamic_op` defines.
STATIC_FORMS: dict[str, str] = {}


def _dynamic_op(static: str, operands: Sequence[tuple[str, str, bool]],
                shape_fn: Callable[[ShapeContext], Any], doc: str, hinted: bool = False) -> OpDef:
    """Define ``Dynamic<static>``: the static op's inputs, then one input per run-time operand
    (param name, type, optional), and the static op's other params. ``hinted``: a ``hint``
    param holds the operand's value as symbolic dims where the graph says it."""
    base = DEFAULT_OPS.get(static)
    names = [n for n, _, _ in operands]
    STATIC_FORMS[f"Dynamic{static}"] = static
    op = define_op(f"Dynamic{static}").doc(doc).placement("cpu")
    for p in base.inputs:
        op.input(p.name, p.type, optional=p.optional, doc=p.doc)
    for name, typ, optional in operands:
        op.input(name, typ, optional=optional, doc=f"{static}'s '{name}', computed at run time")
    for p in base.outputs:
        op.output(p.name, p.type, doc=p.doc)
    for name, spec in base.params.items():
        if name not in names:
            op.params[name] = spec
    if hinted:
        op.param("hint", "strs", (), doc="the run-time operand's values as dims (symbolic where the "
                 "graph says them, see opbridge.ir.shape_values); empty: unknown until run time")
    op.type_params.update(base.type_params)
    op.type_param("I", INDEX).type_param("F", FLOATS)
    return op.shape_fn(shape_fn).compute(_runner(static, len(base.inputs), names))


def _operand_len(ctx: ShapeContext, i: int) -> int:
    s = ctx.input_shape(i)
    if len(s) > 1 or not all(isinstance(d, int) for d in s):
        raise ctx.error(f"input {i} has shape {list(s)}; a run-time shape operand must be a 1-D "
                        "tensor of known length (its length is the output rank)")
    return int(s[0]) if s else 1


def _fresh(ctx: ShapeContext, rank: int, keep: Sequence[Dim | None] = ()) -> tuple[Dim, ...]:
    """``rank`` run-time dims, except where ``keep`` gives a known one."""
    out: list[Dim] = []
    for i in range(rank):
        k = keep[i] if i < len(keep) else None
        out.append(ctx.runtime_dim(f"d{i}") if k is None else k)
    return tuple(out)


def _hint(ctx: ShapeContext) -> list[Dim] | None:
    hint = ctx.attr("hint")
    return [canonical(h) for h in hint] if hint else None


def _dyn_reshape_shape(ctx: ShapeContext) -> Any:
    n, src, target = _operand_len(ctx, 1), ctx.input_shape(0), _hint(ctx)
    if target is None or len(target) != n:
        return _fresh(ctx, n), ctx.input_dtype(0)
    out: list[Dim | None] = []
    for i, d in enumerate(target):
        if d == 0 and not ctx.attr("allowzero") and i < len(src):
            out.append(src[i])
        elif isinstance(d, int) and d < 0:
            out.append(None)  # -1: inferred below, if the dims divide
        else:
            out.append(d)
    if out.count(None) == 1:
        known = ctx.dim_mul(*(d for d in out if d is not None))
        inferred = _dims.divide_exact(ctx.dim_mul(*src), known) if known != 0 else None
        out[out.index(None)] = inferred
    return _fresh(ctx, n, out), ctx.input_dtype(0)


def _dyn_expand_shape(ctx: ShapeContext) -> Any:
    x, target = ctx.input_shape(0), _hint(ctx)
    n = _operand_len(ctx, 1)
    if target is None or len(target) != n:
        return _fresh(ctx, max(len(x), n)), ctx.input_dtype(0)
    rank = max(len(x), n)
    xs = (1,) * (rank - len(x)) + tuple(x)
    ts = (1,) * (rank - n) + tuple(target)
    # broadcasting: a 1 takes the other side's dim; two symbols that differ are for the run
    out = [b if a == 1 else a if b == 1 or ctx.dims_equal(a, b) else None for a, b in zip(xs, ts)]
    return _fresh(ctx, rank, out), ctx.input_dtype(0)


def _dyn_cos_shape(ctx: ShapeContext) -> Any:
    n, target = _operand_len(ctx, 0), _hint(ctx)
    dtype = from_numpy_dtype(ctx.attr("value").dtype)
    if target is None or len(target) != n or any(isinstance(d, int) and d < 0 for d in target):
        return _fresh(ctx, n), dtype
    return tuple(target), dtype


_dynamic_op("Reshape", [("shape", "I", False)], _dyn_reshape_shape,
            "Reshape whose target shape is computed at run time.", hinted=True)
_dynamic_op("Expand", [("shape", "I", False)], _dyn_expand_shape,
            "Expand whose target shape is computed at run time.", hinted=True)
_dynamic_op("Tile", [("repeats", "I", False)],
            lambda ctx: (_fresh(ctx, ctx.input_rank(0)), ctx.input_dtype(0)),
            "Tile whose repeats are computed at run time.")
_dynamic_op("Slice", [("starts", "I", False), ("ends", "I", False), ("axes", "I", True),
                      ("steps", "I", True)],
            lambda ctx: (_fresh(ctx, ctx.input_rank(0)), ctx.input_dtype(0)),
            "Slice whose starts/ends/axes/steps are computed at run time.")
def _dyn_range_shape(ctx: ShapeContext) -> Any:
    hint = _hint(ctx)
    if hint is not None and len(hint) == 3:
        start, limit, delta = hint  # ceil((limit - start) / delta) elements, for limit >= start
        if isinstance(delta, int) and delta > 0:
            return (_dims.ceil_div(ctx.dim_sub(limit, start), delta),), ctx.attr("dtype")
    return (ctx.runtime_dim(),), ctx.attr("dtype")


_dynamic_op("Range", [("start", "N", False), ("limit", "N", False), ("delta", "N", False)],
            _dyn_range_shape, "Range whose bounds are computed at run time.",
            hinted=True).type_param("N", NUMERIC)
_dynamic_op("ConstantOfShape", [("shape", "I", False)], _dyn_cos_shape,
            "ConstantOfShape whose shape is computed at run time.", hinted=True)


def _resize_shape(ctx: ShapeContext) -> Any:
    x = ctx.input_shape(0)
    axes = [a % len(x) for a in (ctx.attr("axes") or range(len(x)))]
    return _fresh(ctx, len(x), [None if i in axes else d for i, d in enumerate(x)]), ctx.input_dtype(0)


_dynamic_op("Resize", [("roi", "F", True), ("scales", "F", True), ("sizes", "I", True)],
            _resize_shape, "Resize whose scales or sizes (or roi) are computed at run time.")


def _topk_shape(ctx: ShapeContext) -> Any:
    x = ctx.input_shape(0)
    a = ctx.normalize_axis(ctx.attr("axis"), len(x))
    y = x[:a] + (ctx.runtime_dim("k"),) + x[a + 1:]
    return [(y, ctx.input_dtype(0)), (y, "i64")]


_dynamic_op("TopK", [("k", "I", False)], _topk_shape, "TopK whose k is computed at run time.")

