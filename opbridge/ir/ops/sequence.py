"""Sequence and optional values (ONNX semantics): lists of tensors, and values that may be empty.

A sequence value's dtype is its tensors'; its shape is theirs as far as the graph knows it
(symbolic where they differ, or until something is inserted). At run time a sequence is a
Python list of arrays and an empty optional is None (see ``ir.graph.KINDS``). A position out
of range is an InterpretError naming the node, the position and the sequence's length.
Spec: https://onnx.ai/onnx/operators/ (SequenceAt, SequenceInsert, ..., Optional).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InterpretError
from ..interpret import run_subgraph
from ..opdef import ShapeContext, define_op
from ..types import Shape
from .control import merge_shapes

SEQ, ANY = "sequence", "any"
INDEX = ("i32", "i64")


def _join(a: Shape, b: Shape, name: str) -> Shape:
    """The tensors' shape once a tensor of shape ``b`` joins a sequence whose is ``a`` (an
    empty sequence's () gives way to the first tensor's)."""
    return b if len(a) != len(b) else merge_shapes(a, b, name)


def _same_dtype(ctx: ShapeContext, i: int, j: int) -> str:
    if ctx.input_dtype(i) != ctx.input_dtype(j):
        raise ctx.error(f"input {j} is {ctx.input_dtype(j)}; the sequence holds {ctx.input_dtype(i)}",
                        hint="a sequence holds tensors of one dtype: Cast the tensor to the sequence's dtype first")
    return ctx.input_dtype(i)


def _position(seq: list[np.ndarray], position: np.ndarray | None, *, end_ok: bool) -> int | None:
    """The position as a non-negative index (None when absent); out of range is an error."""
    if position is None:
        return None
    pos, n = int(np.asarray(position).reshape(-1)[0]), len(seq)
    hi = n if end_ok else n - 1
    if not -n <= pos <= hi:
        raise InterpretError(f"position {pos} is out of range for a sequence of {n} tensors "
                             f"(valid: {-n} to {hi})",
                             hint="check the value that computes the position", value=pos)
    return pos + n if pos < 0 else pos


# -- making sequences ---------------------------------------------------------------------
(
    define_op("SequenceEmpty")
    .doc("An empty sequence of `dtype` tensors.")
    .output("output", "T", kind=SEQ)
    .param("dtype", "dtype", default="f32")
    .shape_fn(lambda ctx: ((), ctx.attr("dtype")))
    .compute(lambda dtype: [])
)


def _construct_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    for i in range(1, ctx.num_inputs):
        _same_dtype(ctx, 0, i)
        shape = _join(shape, ctx.input_shape(i), ctx.node_name)
    return shape, ctx.input_dtype(0)


(
    define_op("SequenceConstruct")
    .doc("A sequence of the inputs, in order.")
    .input("inputs", "T", variadic=True).output("output_sequence", "T", kind=SEQ)
    .shape_fn(_construct_shape)
    .compute(lambda *xs: list(xs))
)


def _split_shape(ctx: ShapeContext) -> Any:
    shape = list(ctx.input_shape(0))
    axis = ctx.normalize_axis(ctx.attr("axis"), len(shape))
    if ctx.has_input(1):
        shape[axis] = f"{ctx.node_name}.d{axis}"
    elif ctx.attr("keepdims"):
        shape[axis] = 1
    else:
        del shape[axis]
    return tuple(shape), ctx.input_dtype(0)


def _split_to_sequence(x: np.ndarray, split: np.ndarray | None = None, *, axis: int,
                       keepdims: bool) -> list[np.ndarray]:
    n = x.shape[axis]
    if split is None:
        parts = np.split(x, n, axis=axis)
        return [p if keepdims else np.squeeze(p, axis=axis) for p in parts]
    sizes = np.asarray(split).reshape(-1)
    if np.ndim(split) == 0:
        step = int(sizes[0])
        if step <= 0:
            raise InterpretError(f"split {step} must be positive", value=step,
                                 hint="split is a positive piece size (a scalar) or the sizes of the "
                                      "pieces (1-D): check the value that computes it")
        bounds = list(range(step, n, step))
    else:
        if sizes.sum() != n or (sizes < 0).any():
            raise InterpretError(f"split {sizes.tolist()} does not add up to the axis size {n}",
                                 value=sizes.tolist(),
                                 hint="the pieces' sizes must add up to the size of the split axis: check "
                                      "the value that computes them")
        bounds = np.cumsum(sizes)[:-1].tolist()
    return [np.ascontiguousarray(p) for p in np.split(x, bounds, axis=axis)]


(
    define_op("SplitToSequence")
    .doc("Split `input` along `axis` into a sequence: pieces of the sizes in `split` (1-D), "
         "of `split` each (a scalar; the last may be smaller), or of 1 without `split` "
         "(the axis dropped unless `keepdims`).")
    .input("input", "T").input("split", "I", optional=True)
    .output("output_sequence", "T", kind=SEQ)
    .param("axis", "int", default=0).param("keepdims", "bool", default=True)
    .type_param("I", INDEX)
    .shape_fn(_split_shape)
    .compute(_split_to_sequence)
)


# -- changing and reading sequences -------------------------------------------------------
def _insert(seq: list[np.ndarray], tensor: np.ndarray, position: np.ndarray | None = None) -> list[np.ndarray]:
    pos = _position(seq, position, end_ok=True)
    out = list(seq)
    out.insert(len(out) if pos is None else pos, tensor)
    return out


(
    define_op("SequenceInsert")
    .doc("The sequence with `tensor` inserted at `position` (default: at the end; negative "
         "counts from the end).")
    .input("input_sequence", "T", kind=SEQ).input("tensor", "T")
    .input("position", "I", optional=True)
    .output("output_sequence", "T", kind=SEQ)
    .type_param("I", INDEX)
    .shape_fn(lambda ctx: (_join(ctx.input_shape(0), ctx.input_shape(1), ctx.node_name),
                           _same_dtype(ctx, 0, 1)))
    .compute(_insert)
)


def _erase(seq: list[np.ndarray], position: np.ndarray | None = None) -> list[np.ndarray]:
    if not seq:
        raise InterpretError("the sequence is empty: there is nothing to erase",
                             hint="erase only from a sequence that holds a tensor: check what fills it "
                                  "before this node (SequenceLength tells)")
    pos = _position(seq, position, end_ok=False)
    out = list(seq)
    del out[-1 if pos is None else pos]
    return out


(
    define_op("SequenceErase")
    .doc("The sequence without its tensor at `position` (default: the last).")
    .input("input_sequence", "T", kind=SEQ).input("position", "I", optional=True)
    .output("output_sequence", "T", kind=SEQ)
    .type_param("I", INDEX)
    .shape_fn(lambda ctx: ctx.same_as_input(0))
    .compute(_erase)
)


def _at(seq: list[np.ndarray], position: np.ndarray) -> np.ndarray:
    pos = _position(seq, position, end_ok=False)
    assert pos is not None
    return seq[pos]


(
    define_op("SequenceAt")
    .doc("The tensor at `position` of the sequence (negative counts from the end).")
    .input("input_sequence", "T", kind=SEQ).input("position", "I")
    .output("tensor", "T")
    .type_param("I", INDEX)
    .shape_fn(lambda ctx: ctx.same_as_input(0))
    .compute(_at)
)

(
    define_op("SequenceLength")
    .doc("The number of tensors in the sequence (an i64 scalar).")
    .input("input_sequence", "T", kind=SEQ).output("length", "i64")
    .shape_fn(lambda ctx: ((), "i64"))
    .compute(lambda seq: np.array(len(seq), np.int64))
)


#: what gives a sequence's tensors a shape the graph knows
UNKNOWN_ELEMENT_HINT = ("give the shape of a sequence input's tensors (--input-shape SEQ=2,3 on the "
                        "command line, input_shapes={'SEQ': (2, 3)} in Python), or insert a tensor "
                        "into a SequenceEmpty before reading it")


def _concat_shape(ctx: ShapeContext) -> Any:
    shape = list(ctx.input_shape(0))
    new_axis = ctx.attr("new_axis")
    if not shape and not new_axis:
        # () is the shape of 0-d tensors, and also all the graph knows of an empty sequence's or
        # of an input's that declares none: both cases are named, the graph cannot tell them apart
        raise ctx.error(f"axis {ctx.attr('axis')} joins the tensors along one of their dims, but the "
                        "sequence's tensors are 0-d as far as the graph knows (scalars, or of no "
                        "known shape: an empty sequence, or an input that declares none)",
                        hint="0-d tensors have no dim to join along: new_axis=1 stacks them into a "
                             "1-d tensor; if they are not 0-d, " + UNKNOWN_ELEMENT_HINT)
    axis = ctx.normalize_axis(ctx.attr("axis"), len(shape) + (1 if new_axis else 0))
    if new_axis:
        shape.insert(axis, f"{ctx.node_name}.d{axis}")
    else:
        shape[axis] = f"{ctx.node_name}.d{axis}"
    return tuple(shape), ctx.input_dtype(0)


def _concat(seq: list[np.ndarray], *, axis: int, new_axis: bool) -> np.ndarray:
    if not seq:
        raise InterpretError("the sequence is empty: there is nothing to concatenate",
                             hint="concatenate only a sequence that holds a tensor: check what fills it "
                                  "before this node (SequenceLength tells)")
    return np.stack(seq, axis=axis) if new_axis else np.concatenate(seq, axis=axis)


(
    define_op("ConcatFromSequence")
    .doc("The sequence's tensors joined along `axis` (stacked on a new axis with `new_axis`).")
    .input("input_sequence", "T", kind=SEQ).output("concat_result", "T")
    .param("axis", "int").param("new_axis", "bool", default=False)
    .shape_fn(_concat_shape)
    .compute(_concat)
)


# -- SequenceMap --------------------------------------------------------------------------
def _map_shape(ctx: ShapeContext) -> Any:
    body = ctx.attr("body")
    if len(body.inputs) != ctx.num_inputs:
        raise ctx.error(f"body takes {len(body.inputs)} inputs, the node passes {ctx.num_inputs}",
                        attr="body",
                        hint="the body takes one input per sequence or tensor given to the node: correct "
                             "the model")
    return [(v.shape, v.dtype) for v in body.outputs]


def _sequence_map(seq: list[np.ndarray], *others: Any, body: Any,
                  num_captures: int) -> tuple[list[np.ndarray], ...]:
    n_more = len(others) - num_captures
    more, caps = others[:n_more], list(others[n_more:])
    for x in more:
        if isinstance(x, list) and len(x) != len(seq):
            raise InterpretError(f"the input sequences have {len(seq)} and {len(x)} tensors; "
                                 "SequenceMap needs them of one length",
                                 hint="give SequenceMap sequences of one length (a tensor input is passed "
                                      "whole to every step)")
    outs: list[list[np.ndarray]] = [[] for _ in body.outputs]
    for i, item in enumerate(seq):
        args = [item, *(x[i] if isinstance(x, list) else x for x in more), *caps]
        for k, y in enumerate(run_subgraph(body, args)):
            outs[k].append(y)
    return tuple(outs)


(
    define_op("SequenceMap")
    .doc("Run `body` on each tensor of `input_sequence` (and the same position of the other "
         "sequences; a tensor input is passed whole each time), then `num_captures` values "
         "the body reads from the enclosing graph; each output is the sequence of the body's.")
    .input("input_sequence", "T", kind=SEQ).input("additional_inputs", "V", variadic=True, kind=ANY)
    .output("out_sequence", "V", variadic=True, kind=SEQ)
    .param("body", "graph").param("num_captures", "int", default=0, minimum=0)
    .placement("cpu")
    .shape_fn(_map_shape)
    .compute(_sequence_map)
)


# -- optionals ----------------------------------------------------------------------------
def _optional_kinds(kinds: Any, attrs: dict[str, Any], n: int) -> list[str]:
    given = kinds[0] if kinds else None
    seq = given == "sequence" if given is not None else attrs["sequence"]
    return ["optional_sequence" if seq else "optional"]


def _optional_shape(ctx: ShapeContext) -> Any:
    if ctx.has_input(0):
        return ctx.same_as_input(0)
    return (), ctx.attr("dtype")


(
    define_op("Optional")
    .doc("An optional holding the input, or an empty one (of a `dtype` tensor, or of a "
         "sequence with `sequence`) without it.")
    .input("input", "T", optional=True, kind=ANY).output("output", "T", kind=ANY)
    .param("dtype", "dtype", default="f32").param("sequence", "bool", default=False)
    .kinds(_optional_kinds)
    .shape_fn(_optional_shape)
    .compute(lambda x=None, *, dtype, sequence: x)
)

(
    define_op("OptionalHasElement")
    .doc("Whether the optional holds a value (true for a tensor or a sequence; false when the "
         "input is absent).")
    .input("input", "T", optional=True, kind=ANY).output("output", "bool")
    .shape_fn(lambda ctx: ((), "bool"))
    .compute(lambda x=None: np.array(x is not None))
)


def _get_kinds(kinds: Any, attrs: dict[str, Any], n: int) -> list[str]:
    return [{"optional": "tensor", "optional_sequence": SEQ}.get(kinds[0], kinds[0])]


def _get(x: Any) -> Any:
    if x is None:
        raise InterpretError("the optional is empty", hint="test it with OptionalHasElement first")
    return x


(
    define_op("OptionalGetElement")
    .doc("The value an optional holds (a tensor or a sequence passes through); an empty one is "
         "an error.")
    .input("input", "T", kind=ANY).output("output", "T", kind=ANY)
    .kinds(_get_kinds)
    .shape_fn(lambda ctx: ctx.same_as_input(0))
    .compute(_get)
)
