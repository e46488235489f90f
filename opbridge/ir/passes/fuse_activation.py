"""Fuse a layer with what follows it: Conv + activation, MatMul (+ bias) (+ activation).

- ``fuse_conv_activation``: ``act(Conv(x, W, B) [+ z])`` -> ``FusedConv`` (activations:
  :data:`opbridge.ir.ops.fused.ACTIVATIONS`); ``z`` a tensor of the Conv's output shape
  and dtype added to it (a residual connection, either operand order), which becomes
  FusedConv's input ``Z``; the Add and the activation are each optional, one must be there;
- ``fuse_matmul_bias_activation``: ``act(MatMul(x, W) + b)`` with a constant 2-D ``W`` and a
  constant ``b`` over the last axis -> ``FusedMatMul``; the bias and the activation are each
  optional, but one of them must be there.

Both keep the chain's final tensor (and its name); the Conv's or MatMul's own output tensor
goes away, which is why neither runs by default (layer-by-layer validation compares it).
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Node, Value
from ..ops.common import FLOATS
from ..ops.fused import activation_of
from .base import PassResult
from .fuse_chain import Match, Uses, apply_matches, fused_node, new_constant, other_input

_CONV_ATTRS = ("group", "kernel_shape", "strides", "dilations", "pads")


def _activation_after(v: Value, uses: Uses) -> tuple[Node, str, tuple[float, ...]] | None:
    """The activation node reading only ``v`` (and nothing else reads ``v``), if fusable."""
    r = uses.only_reader(v)
    if r is None or len(r.outputs) != 1 or not r.inputs or r.inputs[0] is not v:
        return None
    if any(i is not None for i in r.inputs[1:]):
        return None
    act = activation_of(r.op, r.attrs)
    return None if act is None else (r, *act)


def _residual_after(v: Value, uses: Uses) -> tuple[Node, Value] | None:
    """The Add reading only ``v`` with a tensor of ``v``'s shape and dtype (no broadcast)."""
    r = uses.only_reader(v)
    if r is None or r.op != "Add":
        return None
    z = other_input(r, v)
    if z is None or z is v or z.dtype != v.dtype or tuple(z.shape) != tuple(v.shape):
        return None
    return (r, z) if tuple(r.outputs[0].shape) == tuple(v.shape) else None


def _find_conv_act(node: Node, uses: Uses) -> Match | None:
    if node.op != "Conv" or node.outputs[0].dtype not in FLOATS:
        return None
    chain, inputs, last = [node], list(node.inputs) + [None] * (3 - len(node.inputs)), node.outputs[0]
    found_add = _residual_after(last, uses)
    if found_add is not None:
        chain.append(found_add[0])
        inputs.append(found_add[1])
        last = found_add[0].outputs[0]
    attrs = {k: node.attrs[k] for k in _CONV_ATTRS}
    attrs.update(activation="none", activation_params=())
    found = _activation_after(last, uses)
    if found is not None:
        act_node, act, params = found
        chain.append(act_node)
        last = act_node.outputs[0]
        attrs.update(activation=act, activation_params=params)
    if len(chain) == 1:
        return None
    while inputs and inputs[-1] is None:
        inputs.pop()
    return Match(chain, fused_node("FusedConv", node, inputs, last, attrs))


class FuseConvActivation:
    """Conv followed by a residual Add and/or an activation -> one FusedConv."""

    name = "fuse_conv_activation"

    def __call__(self, graph: Graph) -> PassResult:
        return apply_matches(graph, _find_conv_act)


def _bias_after(v: Value, n_out: int, uses: Uses) -> tuple[Node, Value] | None:
    """The Add reading only ``v`` with a constant of ``n_out`` values over the last axis."""
    r = uses.only_reader(v)
    if r is None or r.op != "Add":
        return None
    b = other_input(r, v)
    if b is None or b.data is None or b.data.size != n_out or b.dtype != v.dtype:
        return None
    if any(d != 1 for d in b.shape[:-1]) or (b.shape and b.shape[-1] != n_out):
        return None
    if r.outputs[0].shape != v.shape:  # the bias must not broadcast the product any wider
        return None
    return r, b


def _find_matmul(node: Node, uses: Uses) -> Match | None:
    if node.op != "MatMul":
        return None
    a, w = node.inputs
    out = node.outputs[0]
    if (a is None or w is None or w.data is None or len(w.shape) != 2 or len(a.shape) < 2
            or out.dtype not in FLOATS):
        return None
    n_out = int(w.data.shape[1])
    chain = [node]
    last, bias = out, None
    found_bias = _bias_after(out, n_out, uses)
    if found_bias is not None:
        add, b = found_bias
        chain.append(add)
        last = add.outputs[0]
        bias = b if b.shape == (n_out,) else new_constant(
            uses, f"{b.name}/flat", np.asarray(b.data).reshape(-1), b.dtype)
    attrs: dict = {"activation": "none", "activation_params": ()}
    found_act = _activation_after(last, uses)
    if found_act is not None:
        act_node, act, params = found_act
        chain.append(act_node)
        last = act_node.outputs[0]
        attrs = {"activation": act, "activation_params": params}
    if len(chain) == 1:
        return None
    return Match(chain, fused_node("FusedMatMul", node, [a, w, bias], last, attrs))


class FuseMatMulBiasActivation:
    """MatMul by a constant 2-D weight (+ bias) (+ activation) -> one FusedMatMul."""

    name = "fuse_matmul_bias_activation"

    def __call__(self, graph: Graph) -> PassResult:
        return apply_matches(graph, _find_matmul)
