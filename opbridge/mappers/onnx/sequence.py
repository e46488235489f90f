"""ONNX sequence and optional ops onto the IR's (opbridge/ir/ops/sequence.py), one to one.

SequenceMap's body becomes an IR sub-graph (``g.map_to_graph``); values it reads from the
enclosing graph are passed in after the ONNX inputs. Optional's ``type`` attribute (a
TypeProto) gives the dtype, and whether it holds a sequence, of an empty optional.
Spec: https://onnx.ai/onnx/operators/ (SequenceEmpty ... OptionalGetElement).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import OpbridgeError
from ...ir.graph import Value
from ...ir.ops.sequence import UNKNOWN_ELEMENT_HINT
from ...parsers.origin import Framework, OriginGraph, OriginNode
from ..context import MapContext
from ..registry import mapping
from .elementwise import ir_dtype

ONNX = Framework.ONNX


# -- the tensors of a sequence built in the graph, where conversion knows them one by one ----
# An IR sequence value has one element shape for all its tensors: where tensors of different
# shapes go in, the differing dims become symbols. torch.onnx's exporter writes
# ``torch.tensor_split`` / ``torch.split`` with computed sizes as a Loop that inserts each piece
# into a sequence, then reads the pieces back with SequenceAt; once the Loop unrolls (a constant
# trip count), every SequenceInsert is in the graph with its tensor, and a SequenceAt at a
# constant position can take that tensor, its exact shape included, instead of the sequence's
# merged one. known_elements walks the producers of a sequence back to where it started.

#: how far back the walk goes (one step per SequenceInsert / SequenceErase)
MAX_STEPS = 4096


def _position(v: Value | None, n: int, end_ok: bool) -> int | None:
    """A constant position in range, made non-negative; None when absent, or not known, or out
    of range (the run reports that)."""
    if v is None:
        return n if end_ok else n - 1
    if v.data is None or np.asarray(v.data).size != 1:
        return None
    pos = int(np.asarray(v.data).reshape(-1)[0])
    hi = n if end_ok else n - 1
    if not -n <= pos <= hi:
        return None
    return pos + n if pos < 0 else pos


def known_elements(seq: Value) -> list[Value] | None:
    """The tensors of ``seq`` in order, when it is made from SequenceEmpty / SequenceConstruct by
    SequenceInsert and SequenceErase at constant (or absent) positions; else None."""
    chain = []
    v: Value = seq
    while len(chain) < MAX_STEPS:
        node = v.producer
        if node is None:
            return None
        if node.op == "SequenceEmpty":
            elements: list[Value] = []
            break
        if node.op == "SequenceConstruct":
            elements = [x for x in node.inputs if x is not None]
            break
        if node.op not in ("SequenceInsert", "SequenceErase") or node.inputs[0] is None:
            return None
        chain.append(node)
        v = node.inputs[0]
    else:
        return None
    for node in reversed(chain):
        ins = list(node.inputs) + [None] * 3
        if node.op == "SequenceInsert":
            pos = _position(ins[2], len(elements), end_ok=True)
            if pos is None or ins[1] is None:
                return None
            elements.insert(pos, ins[1])
        else:
            pos = _position(ins[1], len(elements), end_ok=False)
            if pos is None or not elements:
                return None
            del elements[pos]
    return elements


def _required(g: MapContext, i: int, what: str) -> Any:
    v = g.input(i)
    if v is None:
        raise g.error(f"input {i} ({what}) is required")
    return v


@mapping(ONNX, "SequenceEmpty", since_opset=11)
def sequence_empty(node: OriginNode, g: MapContext) -> Any:
    code = node.get_attr("dtype", None)  # the spec's default is float, which onnx.defs omits
    return g.op("SequenceEmpty", [], dtype="f32" if code is None else ir_dtype(g, code))


@mapping(ONNX, "SequenceConstruct", since_opset=11)
def sequence_construct(node: OriginNode, g: MapContext) -> Any:
    return g.op("SequenceConstruct", [_required(g, i, "a tensor") for i in range(g.num_inputs)])


@mapping(ONNX, "SequenceInsert", since_opset=11)
def sequence_insert(node: OriginNode, g: MapContext) -> Any:
    return g.op("SequenceInsert", [_required(g, 0, "input_sequence"), _required(g, 1, "tensor"),
                                   g.input(2)])


@mapping(ONNX, "SequenceErase", since_opset=11)
def sequence_erase(node: OriginNode, g: MapContext) -> Any:
    return g.op("SequenceErase", [_required(g, 0, "input_sequence"), g.input(1)])


@mapping(ONNX, "SequenceAt", since_opset=11)
def sequence_at(node: OriginNode, g: MapContext) -> Any:
    seq = _required(g, 0, "input_sequence")
    if _undeclared_input(g, seq):
        raise _element_shape_unknown(g, seq, "the tensor it picks is typed by the sequence's tensors")
    position = _required(g, 1, "position")
    elements = known_elements(seq) if position.data is not None else None
    pos = _position(position, len(elements), end_ok=False) if elements else None
    if elements and pos is not None:  # the tensor itself, with its own shape, not the merged one
        return g.op("Identity", [elements[pos]])
    return g.op("SequenceAt", [seq, position])


@mapping(ONNX, "SequenceLength", since_opset=11)
def sequence_length(node: OriginNode, g: MapContext) -> Any:
    seq = _required(g, 0, "input_sequence")
    elements = known_elements(seq)
    if elements is not None:
        return g.constant(np.array(len(elements), np.int64))
    return g.op("SequenceLength", [seq])


@mapping(ONNX, "SplitToSequence", since_opset=11)
def split_to_sequence(node: OriginNode, g: MapContext) -> Any:
    return g.op("SplitToSequence", [_required(g, 0, "input"), g.input(1)],
                axis=int(node.get_attr("axis")), keepdims=bool(node.get_attr("keepdims")))


def _undeclared_input(g: MapContext, seq: Value) -> bool:
    """Whether ``seq`` is a graph input whose model declares no shape for its tensors (and
    --input-shape gave none): its shape () then says nothing about them."""
    return seq.producer is None and seq.shape == () and any(
        t.name == seq.name and t.kind != "tensor" and t.shape is None for t in g.origin_graph.inputs)


def _declared_input(g: MapContext, seq: Value) -> bool:
    """Whether ``seq`` is a graph input whose tensors' shape the model declares: its shape is
    then theirs, () included."""
    return seq.producer is None and any(t.name == seq.name and t.kind != "tensor" and t.shape is not None
                                        for t in g.origin_graph.inputs)


def _element_shape_unknown(g: MapContext, seq: Value, what: str) -> OpbridgeError:
    """The error for a sequence whose tensors' shape the graph does not know (its shape is ()),
    with what would give it one: the input's shape, or a tensor inserted first."""
    made_by = seq.producer.op if seq.producer is not None else None
    if made_by is None and not any(t.name == seq.name for t in g.origin_graph.inputs):
        made_by = "the enclosing graph"  # a Loop body's or SequenceMap body's input
    if made_by is None:
        hint = (f"give the shape of its tensors: --input-shape {seq.name}=2,3 on the command line "
                f"(input_shapes={{'{seq.name}': (2, 3)}} in Python)")
    elif made_by == "SequenceEmpty":
        hint = "insert a tensor into the sequence (SequenceInsert) before this node reads it"
    else:
        hint = UNKNOWN_ELEMENT_HINT
    source = "a graph input" if made_by is None else f"made by {made_by}"
    return g.error(f"{what}, but the tensors of sequence '{seq.name}' ({source}) have no known "
                   "shape", hint=hint)


@mapping(ONNX, "ConcatFromSequence", since_opset=11)
def concat_from_sequence(node: OriginNode, g: MapContext) -> Any:
    seq = _required(g, 0, "input_sequence")
    axis, new_axis = int(node.get_attr("axis")), bool(node.get_attr("new_axis"))
    if seq.shape == () and not new_axis:
        # known to be 0-d (a tensor that went in is): no shape given would help
        made_by = seq.producer.op if seq.producer is not None else None
        if _declared_input(g, seq) or made_by in ("SequenceConstruct", "SequenceInsert", "SplitToSequence"):
            source = f"made by {made_by}" if made_by else "a graph input"
            raise g.error(f"axis {axis} joins the tensors along one of their dims, but the tensors of "
                          f"sequence '{seq.name}' ({source}) are {'declared ' if not made_by else ''}0-d",
                          hint="0-d tensors have no dim to join along: only new_axis=1 stacks them "
                               "(into a 1-d tensor)" + ("" if made_by else
                                                        "; or declare the tensors' real shape in the model"))
        raise _element_shape_unknown(g, seq, f"axis {axis} joins the tensors along one of their dims")
    if _undeclared_input(g, seq):
        raise _element_shape_unknown(g, seq, "the result is typed by the sequence's tensors")
    elements = known_elements(seq)
    if elements:  # joined as they are: each keeps its own shape
        parts = [g.op("Unsqueeze", [e], axes=[axis]) for e in elements] if new_axis else elements
        return g.op("Concat", parts, axis=axis)  # one part too: its axis checked, its own name
    return g.op("ConcatFromSequence", [seq], axis=axis, new_axis=new_axis)


@mapping(ONNX, "SequenceMap", since_opset=17)
def sequence_map(node: OriginNode, g: MapContext) -> Any:
    body: OriginGraph = node.get_attr("body")
    ins = [_required(g, i, "a sequence or tensor") for i in range(g.num_inputs)]
    for v in ins:
        if _undeclared_input(g, v):
            raise _element_shape_unknown(g, v, "the body is typed by one tensor of each sequence")
    # the body sees one tensor of each sequence, and each tensor input whole
    types = [(v.dtype, v.shape) for v in ins]
    body_g, caps = g.map_to_graph(body, types, prefix=f"{node.name}/body/")
    outs = g.op("SequenceMap", [*ins, *caps], body=body_g, num_captures=len(caps),
                num_outputs=len(body_g.outputs))
    return list(outs) if isinstance(outs, tuple) else [outs]


@mapping(ONNX, "Optional", since_opset=15)
def optional(node: OriginNode, g: MapContext) -> Any:
    x = g.input(0)
    if x is not None:
        return g.op("Optional", [x])
    tp = node.get_attr("type", None)
    if tp is None:
        raise g.error("an Optional without input needs its 'type' attribute", attr="type")
    sequence = tp.WhichOneof("value") == "sequence_type"
    elem = tp.sequence_type.elem_type if sequence else tp
    if elem.WhichOneof("value") != "tensor_type":
        raise g.unsupported("an Optional of anything but a tensor or a sequence of tensors",
                            hint="opbridge holds tensors and sequences of tensors; an Optional of a map, "
                                 "or of another optional, has no IR form")
    return g.op("Optional", [], dtype=ir_dtype(g, elem.tensor_type.elem_type), sequence=sequence)


@mapping(ONNX, "OptionalHasElement", since_opset=15)
def optional_has_element(node: OriginNode, g: MapContext) -> Any:
    return g.op("OptionalHasElement", [g.input(0)])


@mapping(ONNX, "OptionalGetElement", since_opset=15)
def optional_get_element(node: OriginNode, g: MapContext) -> Any:
    return g.op("OptionalGetElement", [_required(g, 0, "input")])
