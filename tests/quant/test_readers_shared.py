"""Who reads each value: the int8 quantizer and cross-layer equalisation ask the IR's one
map (``ir/passes/fuse_chain.Uses``, which the fusion passes use) instead of each building its
own copy; what they decide from it (an activation's threshold shared with its only reader, a
weight read by one Conv only, a tensor that is also a graph output) is unchanged."""

from __future__ import annotations

import ast
import inspect

import numpy as np
import pytest

import opbridge as ob
from opbridge.quant import equalize as equalize_mod
from opbridge.quant import int8 as int8_mod
from opbridge.quant.equalize import equalizable_pairs
from opbridge.quant.int8 import quant_points


def _builds_a_readers_map(tree: ast.AST) -> list[int]:
    """Lines of ``for v in NODE.inputs`` loops that append each node to a dict of lists."""
    lines = []
    for loop in ast.walk(tree):
        if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Attribute) and loop.iter.attr == "inputs"):
            continue
        for call in ast.walk(loop):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "append"
                    and isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Attribute)
                    and call.func.value.func.attr == "setdefault"):
                lines.append(loop.lineno)
    return lines


@pytest.mark.parametrize("module", [int8_mod, equalize_mod], ids=["int8", "equalize"])
def test_no_own_copy_of_the_readers_loop(module):
    tree = ast.parse(inspect.getsource(module))
    assert _builds_a_readers_map(tree) == [], f"{module.__name__} builds its own map of readers"


def _conv(b, x, cin, cout, name, w=None):
    rng = np.random.default_rng(len(name))
    w = w if w is not None else b.constant(f"{name}_w", rng.standard_normal((cout, cin, 1, 1)).astype(np.float32))
    bias = b.constant(f"{name}_b", rng.standard_normal(cout).astype(np.float32))
    return b.op("Conv", [x, w, bias], name=name, outputs=[f"{name}_out"]), w


def _chain(relu_is_output: bool = False, shared_weight: bool = False) -> ob.Graph:
    """conv1 -> relu -> conv2 (and conv3 on x with conv1's weight when ``shared_weight``)."""
    b = ob.GraphBuilder("chain")
    x = b.input("x", "f32", [1, 4, 5, 5])
    c1, w1 = _conv(b, x, 4, 4, "conv1")
    r = b.op("Relu", [c1], name="relu", outputs=["relu_out"])
    c2, _ = _conv(b, r, 4, 4, "conv2")
    outs = [c2, c1] if relu_is_output else [c2]
    if shared_weight:
        c3, _ = _conv(b, x, 4, 4, "conv3", w=w1)
        outs.append(c3)
    b.output(*outs)
    return b.build()


def test_only_reader_activation_shares_the_threshold():
    points = quant_points(_chain(), {"conv1", "conv2"})
    assert points["conv1_out"] == "relu_out" and points["relu_out"] == "relu_out"


def test_a_graph_output_keeps_its_own_threshold():
    points = quant_points(_chain(relu_is_output=True), {"conv1", "conv2"})
    assert points["conv1_out"] == "conv1_out"


def test_equalisation_pairs_need_weights_read_by_one_conv():
    assert [(p.first.name, p.second.name) for p in equalizable_pairs(_chain())] == [("conv1", "conv2")]
    assert equalizable_pairs(_chain(shared_weight=True)) == []
