"""The tensors of a sequence built in the graph, where conversion knows them one by one.

An IR sequence value has one element shape for all its tensors: where tensors of different
shapes go in, the differing dims become symbols. torch.onnx's exporter writes
``torch.tensor_split`` / ``torch.split`` with computed sizes as a Loop that inserts each piece
into a sequence, then reads the pieces back with SequenceAt; once the Loop unrolls (a constant
trip count), every SequenceInsert is in the graph with its tensor, and a SequenceAt at a
constant position can take that tensor, its exact shape included, instead of the sequence's
merged one. This module walks the producers of a sequence back to where it started.
"""

from __future__ import annotations

import numpy as np

from ...ir.graph import Value

#: how far back the walk goes (one step per SequenceInsert / SequenceErase)
MAX_STEPS = 4096


def _position(v: Value | None, n: int, end_ok: bool) -> int | None:
    """A constant position in range, made non-negative; None when absent, or not known, or out
    of range (the run reports that)."""
    if v is None:
        return n if end_ok else n - 1
    if v.data is None:
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
