"""A readable text listing of a Graph (``opbridge show``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .graph import Graph, Value
from .types import format_shape


def _fmt_attr(v: Any) -> str:
    if isinstance(v, Graph):
        return f"<graph {v.name!r}: {len(v.inputs)} inputs, {len(v.nodes)} nodes, {len(v.outputs)} outputs>"
    if isinstance(v, np.ndarray):
        return f"<tensor {v.dtype}{format_shape(v.shape)}>"
    if isinstance(v, tuple):
        return "[" + ",".join(_fmt_attr(x) for x in v) + "]"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return repr(v)
    return str(v)


def _fmt_value(v: Value | None) -> str:
    if v is None:
        return "-"
    if v.kind != "tensor":  # seq<f32[2,3]>: the type of its tensors
        what = {"sequence": "seq", "optional": "opt", "optional_sequence": "opt<seq"}[v.kind]
        return f"%{v.name}: {what}<{v.dtype}{format_shape(v.shape)}>" + (">" if "<" in what else "")
    quant = f" quant({v.quant.describe()})" if v.quant is not None else ""
    return f"%{v.name}: {v.dtype}{format_shape(v.shape)}{quant}"


def format_graph(graph: Graph, *, max_nodes: int | None = None) -> str:
    """The graph as text: inputs, constants, nodes (op, attributes, inputs, outputs, origin)."""
    lines = [f"graph {graph.name!r}: {len(graph.nodes)} nodes, {len(graph.constants)} constants"]
    for key, note in graph.metadata.items():
        lines.append(f"  # {key}: {note}")
    lines.append("inputs:")
    for v in graph.inputs:
        lines.append(f"  {_fmt_value(v)}")
    if graph.constants:
        total = sum(int(c.data.nbytes) for c in graph.constants.values() if c.data is not None)
        lines.append(f"constants: {len(graph.constants)} ({total} bytes)")
    lines.append("nodes:")
    for i, n in enumerate(graph.nodes):
        if max_nodes is not None and i >= max_nodes:
            lines.append(f"  ... {len(graph.nodes) - max_nodes} more nodes")
            break
        attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in n.attrs.items())
        outs = ", ".join(_fmt_value(v) for v in n.outputs)
        ins = ", ".join(
            ("%" + v.name + ("(const)" if v.is_constant else "")) if v is not None else "-"
            for v in n.inputs
        )
        lines.append(f"  {outs} = {n.op}({ins})" + (f" {{{attrs}}}" if attrs else ""))
        o = n.origin
        host = "  [runs on the host cpu]" if n.placement == "cpu" else ""
        lines.append(f"      # {n.name}  from {o.framework} {o.op_type} '{o.name}'{host}")
        for key, value in n.attrs.items():
            if isinstance(value, Graph):  # a branch or body, listed under its node
                lines.append(f"      {key}:")
                lines.extend("        " + line for line in format_graph(value).splitlines())
    lines.append("outputs:")
    for v in graph.outputs:
        lines.append(f"  {_fmt_value(v)}")
    return "\n".join(lines)
