"""The value of a shape-computing tensor as symbolic dims, where the graph says it.

Exporters compute shapes from data: ``Shape(x) -> Gather -> Unsqueeze -> Concat -> Reshape``,
with ``Mul``/``Div`` for head splits. When ``x`` has symbolic dims these chains do not fold to
constants, but their value is still known as dims (``[batch, seq, 2, 8]``): :func:`shape_value`
follows the producers back and gives it, so a ``DynamicReshape`` can declare ``[batch, seq, 2,
8]`` instead of dims only the run knows. The run checks every declared dim all the same.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import dims as _dims
from .graph import Value
from .types import Dim

#: How many producers :func:`shape_value` follows back at most.
MAX_DEPTH = 64

_ARITH: dict[str, Callable[[Dim, Dim], Dim | None]] = {
    "Add": lambda a, b: _dims.add(a, b),
    "Sub": lambda a, b: _dims.sub(a, b),
    "Mul": lambda a, b: _dims.mul(a, b),
    "Div": lambda a, b: _dims.floordiv(a, b) if isinstance(b, int) and b > 0 else None,
}


def shape_value(v: Value | None, depth: int = 0) -> list[Dim] | None:
    """The elements of the integer tensor ``v`` (flattened) as dims, or None when the graph
    does not say them."""
    if v is None or depth > MAX_DEPTH or not v.dtype.startswith(("i", "u")):
        return None
    if v.data is not None:
        return [int(x) for x in np.asarray(v.data).reshape(-1)] if v.data.size <= 64 else None
    node = v.producer
    if node is None:
        return None
    ins = node.inputs
    op, a = node.op, node.attrs
    if op == "Shape":
        shape = ins[0].shape if ins and ins[0] is not None else None
        if shape is None:
            return None
        rank = len(shape)
        start, end = a.get("start", 0), a.get("end")
        s = slice(start, rank if end is None else end)
        return list(shape[s])
    if op in ("Cast", "Identity", "Unsqueeze", "Squeeze", "Reshape", "Flatten"):
        return shape_value(ins[0], depth + 1)
    if op == "Concat" and a.get("axis") in (0, -1):
        parts = [shape_value(x, depth + 1) for x in ins]
        return None if any(p is None for p in parts) else [d for p in parts if p for d in p]
    if op == "Gather" and a.get("axis", 0) in (0, -1) and len(ins) == 2 and ins[1] is not None \
            and ins[1].data is not None:
        data = shape_value(ins[0], depth + 1)
        if data is None:
            return None
        idx = [int(i) for i in np.asarray(ins[1].data).reshape(-1)]
        if not all(-len(data) <= i < len(data) for i in idx):
            return None
        return [data[i] for i in idx]
    if op == "Slice" and len(a.get("starts", ())) == 1 and a.get("axes", (0,))[0] in (0, -1):
        data = shape_value(ins[0], depth + 1)
        # Python's slice clamps out-of-range bounds as ONNX Slice does
        return None if data is None else data[slice(a["starts"][0], a["ends"][0], a["steps"][0])]
    if op in _ARITH and len(ins) == 2:
        x, y = shape_value(ins[0], depth + 1), shape_value(ins[1], depth + 1)
        if x is None or y is None or not (len(x) == len(y) or 1 in (len(x), len(y))):
            return None
        n = max(len(x), len(y))
        out: list[Dim] = []
        for i in range(n):
            d = _ARITH[op](x[i if len(x) > 1 else 0], y[i if len(y) > 1 else 0])
            if d is None:
                return None
            out.append(d)
        return out
    return None
