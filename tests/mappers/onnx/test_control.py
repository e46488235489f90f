"""Control flow made static (If, Loop, Scan) and the fallback decompositions, vs onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.errors import UnsupportedOpError

F = TensorProto.FLOAT


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _loop_model(trip_as_input: bool):
    # body: (i, cond, acc) -> (cond, acc + x * i, acc)   [scan output: acc before the update]
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["acc_in"], ["scan_out"])],
        "body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("acc_in", [3])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("acc_out", [3]), _vi("scan_out", [3])])
    inits = [numpy_helper.from_array(np.array(True), "cond"), numpy_helper.from_array(np.zeros(3, np.float32), "acc0")]
    inputs = [_vi("x", [3])]
    if trip_as_input:
        inputs.append(_vi("M", [], TensorProto.INT64))
    else:
        inits.append(numpy_helper.from_array(np.array(4, np.int64), "M"))
    node = helper.make_node("Loop", ["M", "cond", "acc0"], ["acc", "scans"], name="loop", body=body)
    g = helper.make_graph([node], "loop", inputs, [_vi("acc", [3]), _vi("scans", [None, 3])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_loop_with_constant_trip_count_is_unrolled():
    m = _loop_model(trip_as_input=False)
    g = ob.convert(m)
    x = np.array([1.0, -2.0, 0.5], np.float32)
    ref = ReferenceEvaluator(m).run(None, {"x": x})
    out = ob.interpret(g, {"x": x})
    np.testing.assert_allclose(out["acc"], ref[0])
    np.testing.assert_allclose(out["scans"], ref[1])
    assert {n.origin.name for n in g.nodes} == {"loop"}


@pytest.mark.parametrize("trip", [0, 1, 5], ids=lambda t: f"M={t}")
def test_loop_with_runtime_trip_count_runs_its_body_at_run_time(trip):
    m = _loop_model(trip_as_input=True)
    g = ob.convert(m, input_shapes={"M": ()})
    assert [n.op for n in g.nodes] == ["Loop"]
    x = np.array([1.0, -2.0, 0.5], np.float32)
    feeds = {"x": x, "M": np.array(trip, np.int64)}
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")
    ref = ort.InferenceSession(m.SerializeToString()).run(None, feeds)
    out = ob.interpret(g, feeds)
    np.testing.assert_allclose(out["acc"], ref[0])
    np.testing.assert_allclose(out["scans"], ref[1])
    assert out["scans"].shape == (trip, 3)


@pytest.mark.parametrize("cond", [True, False], ids=["cond=true", "cond=false"])
def test_if_with_constant_condition_inlines_the_taken_branch(cond):
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [_vi("t", [2])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", [2])])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g, else_branch=else_g)
    g = helper.make_graph([node], "if", [_vi("x", [2])], [_vi("y", [2])],
                          initializer=[numpy_helper.from_array(np.array(cond), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([-1.5, 2.0], np.float32)
    np.testing.assert_allclose(ob.interpret(ob.convert(m), {"x": x})["y"],
                               ReferenceEvaluator(m).run(None, {"x": x})[0])


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)],
                         ids=["attrs=absent", "exclusive", "reverse", "exclusive,reverse"])
def test_cumprod_decomposition(exclusive, reverse):
    attrs = {}
    if exclusive:
        attrs["exclusive"] = 1
    if reverse:
        attrs["reverse"] = 1
    node = helper.make_node("CumProd", ["x", "axis"], ["y"], **attrs)
    g = helper.make_graph([node], "cp", [_vi("x", [2, 4])], [_vi("y", [2, 4])],
                          initializer=[numpy_helper.from_array(np.array(1, np.int64), "axis")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26)])
    x = np.random.default_rng(3).uniform(0.5, 2, (2, 4)).astype(np.float32)
    np.testing.assert_allclose(ob.interpret(ob.convert(m), {"x": x})["y"],
                               ReferenceEvaluator(m).run(None, {"x": x})[0], rtol=1e-6)


def test_preflight_looks_inside_subgraphs():
    body = helper.make_graph([helper.make_node("FooOp", ["x"], ["t"], name="inner_foo", domain="com.x")],
                             "then", [], [_vi("t", [2])])
    node = helper.make_node("If", ["c"], ["y"], name="if", then_branch=body, else_branch=body)
    outer = helper.make_node("BarOp", ["y"], ["z"], name="outer_bar", domain="com.x")
    g = helper.make_graph([node, outer], "if", [_vi("x", [2])], [_vi("z", [2])],
                          initializer=[numpy_helper.from_array(np.array(True), "c")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.x", 1)])
    with pytest.raises(UnsupportedOpError, match=r"(?s)2 unsupported op types.*'inner_foo' \(in then_branch 'then' of node 'if' \(If\)\)"
                                                 r".*'outer_bar'"):
        ob.convert(m)
