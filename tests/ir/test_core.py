"""GraphBuilder, verifier, define_op and registry behaviour."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.ir.graph import Graph, Node, Origin, Value
from opbridge.ir.opdef import OpRegistry


def _registry_with_scaleshift() -> OpRegistry:
    reg = OpRegistry()
    (reg.define("ScaleShift")
        .input("x", "T").output("y", "T")
        .param("alpha", "float").param("beta", "float", default=0.0)
        .param("mode", "str", default="a", allowed=("a", "b"))
        .param("k", "int", default=1, minimum=1)
        .type_param("T", allowed=("f32", "f16"))
        .shape_fn(lambda ctx: ctx.same_as_input(0))
        .compute(lambda x, alpha, beta, mode, k: x * alpha + beta))
    return reg


def test_builder_fills_defaults_and_origin():
    reg = _registry_with_scaleshift()
    b = ob.GraphBuilder("g", registry=reg)
    x = b.input("x", "f32", (2, 3))
    y = b.op("ScaleShift", [x], alpha=2)
    b.output(y)
    g = b.build()
    node = g.nodes[0]
    assert node.attrs == {"alpha": 2.0, "beta": 0.0, "mode": "a", "k": 1}
    assert node.origin == Origin("opbridge", "ScaleShift", node.name)
    out = ob.interpret(g, {"x": np.ones((2, 3), np.float32)})
    np.testing.assert_array_equal(out[y.name], np.full((2, 3), 2.0, np.float32))


@pytest.mark.parametrize(
    "attrs, match",
    [
        ({}, r"param 'alpha': required but absent"),
        ({"alpha": "x"}, r"param 'alpha' = 'x': expected float"),
        ({"alpha": 1.0, "k": 0}, r"param 'k' = 0: must be >= 1"),
        ({"alpha": 1.0, "mode": "c"}, r"param 'mode' = 'c': must be one of"),
        ({"alpha": 1.0, "gamma": 3}, r"param 'gamma': not a parameter of ScaleShift"),
        ({"alpha": True}, r"param .alpha. = True: expected float"),
    ],
    ids=["alpha=absent", "alpha=str", "k=0", "mode=bad", "unknown", "alpha=bool"],
)
def test_bad_attributes_name_node_and_attr(attrs, match):
    reg = _registry_with_scaleshift()
    b = ob.GraphBuilder("g", registry=reg)
    x = b.input("x", "f32", (2,))
    with pytest.raises(ob.AttrError, match=r"node 'ss' \(ScaleShift\) " + match):
        b.op("ScaleShift", [x], name="ss", **attrs)


def test_dtype_not_allowed():
    reg = _registry_with_scaleshift()
    b = ob.GraphBuilder("g", registry=reg)
    x = b.input("x", "i32", (2,))
    b.output(b.op("ScaleShift", [x], name="ss", alpha=1.0))
    with pytest.raises(ob.ShapeError, match=r"node 'ss' \(ScaleShift\): input 0 \('x'\) 'x' has dtype i32"):
        b.build()


def test_duplicate_definition_names_both_places():
    reg = _registry_with_scaleshift()
    with pytest.raises(ob.RegistryError, match=r"already defined at .*test_core.py:\d+; defined again at .*test_core.py:\d+"):
        reg.define("ScaleShift")
    reg.define("ScaleShift", override=True)


def test_unknown_op():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2,))
    with pytest.raises(ob.UnsupportedOpError, match="'NoSuchOp' is not defined"):
        b.op("NoSuchOp", [x])


def test_duplicate_value_name():
    b = ob.GraphBuilder("g")
    b.input("x", "f32", (2,))
    with pytest.raises(ob.GraphError, match="'x' is used twice"):
        b.input("x", "f32", (2,))


def _chain(nodes_order):
    x = Value("x", "f32", (2,))
    a = Value("a", "f32", (2,))
    c = Value("c", "f32", (2,))
    n1 = Node("Relu", "n1", [x], [a], {}, Origin("opbridge", "Relu", "n1"))
    n2 = Node("Relu", "n2", [a], [c], {}, Origin("opbridge", "Relu", "n2"))
    nodes = {"n1": n1, "n2": n2}
    return x, c, [nodes[k] for k in nodes_order]


def test_out_of_order_nodes_rejected():
    x, c, nodes = _chain(["n2", "n1"])
    g = Graph("g", [x], [c], nodes)
    with pytest.raises(ob.GraphError, match=r"node 'n2' \(Relu\): input 0 'a' is used before"):
        g.verify()


def test_cycle_detected():
    x = Value("x", "f32", (2,))
    a = Value("a", "f32", (2,))
    b = Value("b", "f32", (2,))
    n1 = Node("Add", "n1", [x, b], [a], {}, Origin("opbridge", "Add", "n1"))
    n2 = Node("Relu", "n2", [a], [b], {}, Origin("opbridge", "Relu", "n2"))
    g = Graph("g", [x], [b], [n1, n2])
    with pytest.raises(ob.GraphError, match="cycle through nodes"):
        g.verify()


def test_undefined_input():
    x = Value("x", "f32", (2,))
    ghost = Value("ghost", "f32", (2,))
    a = Value("a", "f32", (2,))
    n1 = Node("Add", "n1", [x, ghost], [a], {}, Origin("opbridge", "Add", "n1"))
    with pytest.raises(ob.GraphError, match=r"input 1 'ghost' is not defined"):
        Graph("g", [x], [a], [n1]).verify()


def test_wrong_declared_output_shape():
    x = Value("x", "f32", (2,))
    a = Value("a", "f32", (3,))
    n1 = Node("Relu", "n1", [x], [a], {}, Origin("opbridge", "Relu", "n1"))
    with pytest.raises(ob.ShapeError, match=r"output 'a' is declared f32\[3\] but the op gives f32\[2\]"):
        Graph("g", [x], [a], [n1]).verify()


def test_symbolic_input_needs_input_shape():
    b = ob.GraphBuilder("g")
    x = b.input("data", "f32", ("N", 3))
    b.output(b.op("Relu", [x]))
    with pytest.raises(ob.ShapeError, match=r"(?s)graph input .data. has symbolic shape.*--input-shape data="):
        b.build()
    assert b.build(require_static=False).inputs[0].shape == ("N", 3)


def test_absurd_shape_rejected_before_allocation():
    b = ob.GraphBuilder("g")
    with pytest.raises(ob.ShapeError, match="above the limit"):
        b.input("x", "f32", (1 << 20, 1 << 20, 1 << 20))


def test_broadcast_mismatch():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2, 3))
    y = b.input("y", "f32", (4,))
    with pytest.raises(ob.ShapeError, match=r"node 'add' \(Add\): shapes .* do not broadcast"):
        b.op("Add", [x, y], name="add")


def test_mixed_dtypes_rejected():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2,))
    y = b.input("y", "f16", (2,))
    b.output(b.op("Add", [x, y], name="add"))
    with pytest.raises(ob.ShapeError, match=r"input 1 \('b'\) is f16 but 'x' is f32"):
        b.build()


def test_interpret_feed_errors():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2, 3))
    b.output(b.op("Relu", [x]))
    g = b.build()
    with pytest.raises(ob.InterpretError, match="graph input 'x' .* was not fed"):
        ob.interpret(g, {})
    with pytest.raises(ob.InterpretError, match=r"wants shape \[2,3\], got \[3,2\]"):
        ob.interpret(g, {"x": np.zeros((3, 2), np.float32)})
    with pytest.raises(ob.InterpretError, match="no input named 'y'"):
        ob.interpret(g, {"x": np.zeros((2, 3), np.float32), "y": 1})


def test_keep_intermediates_and_stop_after():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2,))
    a = b.op("Relu", [x], name="r1", outputs=["mid"])
    b.output(b.op("Add", [a, a], name="add", outputs=["out"]))
    g = b.build()
    feed = {"x": np.array([-1.0, 2.0], np.float32)}
    full = ob.interpret(g, feed, keep_intermediates=True)
    assert list(full)[:1] == ["out"]
    np.testing.assert_array_equal(full["mid"], [0.0, 2.0])
    np.testing.assert_array_equal(full["out"], [0.0, 4.0])
    part = ob.interpret(g, feed, stop_after="r1")
    assert "mid" in part and "out" not in part


def test_optional_outputs_follow_the_shape_function():
    # MaxPool's Indices output exists only when output_indices is set; no count needs passing
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (1, 1, 4, 4))
    y = b.op("MaxPool", [x], kernel_shape=(2, 2), strides=(2, 2))
    assert isinstance(y, Value) and y.shape == (1, 1, 2, 2)
    y2, idx = b.op("MaxPool", [x], kernel_shape=(2, 2), strides=(2, 2), output_indices=True)
    assert idx.dtype == "i64"
