"""``ob.quantize(g, None, dtype="f16"|"bf16")``: weights and activations in half precision.

Every node whose op accepts the dtype for all its float inputs and outputs (its definition's
type parameters say so) runs in it, with its float weights stored in it; the others stay f32,
with a Cast at each boundary. Graph inputs and outputs keep f32, so the half graph is a
drop-in replacement; every tensor keeps its name, so validation compares it layer by layer.
"""

from __future__ import annotations

from typing import Any

from ..ir.graph import Graph, GraphBuilder, Node, Value
from ..ir.types import to_numpy_dtype

LOWP = ("f16", "bf16")


def runs_in(node: Node, graph: Graph, dtype: str) -> bool:
    """Whether ``node``'s op takes ``dtype`` for every f32 input and output it has."""
    opdef = graph.registry.get(node.op)
    floats = False
    for i, v in enumerate(node.inputs):
        if v is not None and v.dtype == "f32":
            floats = True
            if dtype not in opdef.allowed_dtypes(opdef.input_spec(i).type):
                return False
    for i, v in enumerate(node.outputs):
        if v.dtype == "f32":
            floats = True
            spec = opdef.outputs[min(i, len(opdef.outputs) - 1)] if opdef.outputs else None
            if spec is None or dtype not in opdef.allowed_dtypes(spec.type):
                return False
    return floats


def to_half(graph: Graph, dtype: str) -> Graph:
    """``graph`` with its nodes in ``dtype`` where their ops allow it (see the module)."""
    b = GraphBuilder(graph.name, registry=graph.registry)
    b.metadata.update(graph.metadata)
    b.metadata["quant.dtype"] = dtype
    env: dict[tuple[str, str], Value] = {}  # (name, dtype) -> the value of that tensor in dtype
    for v in graph.inputs:
        env[(v.name, v.dtype)] = b.input(v.name, v.dtype, v.shape)
    kept: list[str] = []
    graph_outputs = {v.name for v in graph.outputs}

    def get(v: Value, want: str) -> Value:
        if (v.name, want) in env:
            return env[(v.name, want)]
        if v.is_constant and (v.dtype != want):
            assert v.data is not None
            made = b.constant(f"{v.name}/{want}", v.data.astype(to_numpy_dtype(want)))
        elif v.is_constant:
            made = b.constant(v.name, v.data)
        else:
            have = next(x for (n, d), x in env.items() if n == v.name)
            made = b.op("Cast", [have], name=b.unique_name(f"{v.name}/to_{want}"),
                        outputs=[b.unique_name(f"{v.name}/{want}")], to=want)
        env[(v.name, want)] = made
        return made

    for node in graph.nodes:
        half = runs_in(node, graph, dtype)
        if not half and any(v.dtype == "f32" for v in node.outputs):
            kept.append(node.name)
        ins = [None if v is None else get(v, dtype if half and v.dtype == "f32" else v.dtype)
               for v in node.inputs]
        names = [f"{v.name}/{dtype}" if half and v.name in graph_outputs else v.name
                 for v in node.outputs]
        outs = b.op(node.op, ins, name=node.name, outputs=names,
                    origin=node.origin, placement=node.placement, **_attrs(node))
        for old, new in zip(node.outputs, outs if isinstance(outs, tuple) else (outs,)):
            env[(old.name, new.dtype)] = new
    for v in graph.outputs:
        b.output(_as_output(b, env, v))
    if kept:
        b.metadata["quant.float_layers"] = ",".join(kept)
    return b.build()


def _attrs(node: Node) -> dict[str, Any]:
    return {k: v for k, v in node.attrs.items() if v is not None}


def _as_output(b: GraphBuilder, env: dict[tuple[str, str], Value], v: Value) -> Value:
    """The graph output ``v`` in its original dtype; a half one (named ``NAME/dtype``) is cast
    back under the output's own name."""
    if (v.name, v.dtype) in env:
        return env[(v.name, v.dtype)]
    have = next(x for (n, _), x in env.items() if n == v.name)
    return b.op("Cast", [have], name=b.unique_name(f"{v.name}/to_{v.dtype}"), outputs=[v.name], to=v.dtype)
