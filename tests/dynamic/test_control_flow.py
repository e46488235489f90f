"""Run-time If/Loop/Scan (IR sub-graphs run by the interpreter), against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.errors import InterpretError
from opbridge.mappers.onnx import control as onnx_control

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for these tests")

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _check(model, feeds, graph=None):
    g = graph if graph is not None else ob.convert(model)
    ref = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    out = ob.interpret(g, feeds)
    assert len(out) == len(ref)
    for got, want in zip(out.values(), ref):
        assert got.shape == np.asarray(want).shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    return g


def _if_model():
    """y = x + x when the sum of s is positive, else concat(x * w, x): branches of other shapes."""
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [_vi("t", None)])
    other = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["m"]),
                               helper.make_node("Concat", ["m", "x"], ["e"], axis=0)],
                              "else", [], [_vi("e", None)])
    nodes = [helper.make_node("ReduceSum", ["s"], ["total"], keepdims=0),
             helper.make_node("Greater", ["total", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other)]
    inits = [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w"),
             numpy_helper.from_array(np.array(0, np.float32), "zero")]
    return _model(nodes, [_vi("x", [2, 3]), _vi("s", [4])], [_vi("y", None)], inits)


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["then", "else"])
def test_if_on_a_computed_condition_takes_either_branch(sign):
    m = _if_model()
    g = ob.convert(m)
    assert [n.op for n in g.nodes][-1] == "If"
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _check(m, {"x": x, "s": np.full(4, sign, np.float32)}, g)


def test_if_output_of_branch_dependent_shape_is_symbolic():
    g = ob.convert(_if_model())
    assert g.outputs[0].shape[1] == 3 and isinstance(g.outputs[0].shape[0], str)


def _while_model():
    """A while loop (no trip count): the carried value grows by one element per iteration
    until its sum reaches the limit; the scan output records the sum each time."""
    body = helper.make_graph(
        [helper.make_node("Concat", ["seq_in", "one"], ["seq_out"], axis=0),
         helper.make_node("ReduceSum", ["seq_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"]),
         helper.make_node("Identity", ["total"], ["scan"])],
        "body", [_vi("i", [], I64), _vi("cond_in", [], B), _vi("seq_in", [None])],
        [_vi("cond_out", [], B), _vi("seq_out", [None]), _vi("scan", [])])
    inits = [numpy_helper.from_array(np.array([1.5], np.float32), "one"),
             numpy_helper.from_array(np.array(True), "go")]
    node = helper.make_node("Loop", ["", "go", "start"], ["seq", "sums"], name="grow", body=body)
    return _model([node], [_vi("start", [2]), _vi("limit", [])],
                  [_vi("seq", [None]), _vi("sums", [None])], inits)


@pytest.mark.parametrize("limit", [0.0, 4.0, 20.0], ids=lambda v: f"limit={v}")
def test_while_loop_with_a_growing_carried_value(limit):
    m = _while_model()
    g = ob.convert(m)
    assert [n.op for n in g.nodes] == ["Loop"]
    _check(m, {"start": np.array([0.5, 1.0], np.float32), "limit": np.array(limit, np.float32)}, g)


def test_loop_iteration_limit_is_an_error_naming_the_node(monkeypatch):
    g = ob.convert(_while_model())
    feeds = {"start": np.array([0.5, 1.0], np.float32), "limit": np.array(100.0, np.float32)}
    with pytest.raises(InterpretError, match=r"node 'grow' \(Loop\): the loop has run 5 iterations, "
                                             r"its limit"):
        ob.interpret(g, feeds, max_loop_iterations=5)
    monkeypatch.setenv("OPBRIDGE_MAX_LOOP_ITERATIONS", "7")
    with pytest.raises(InterpretError, match=r"has run 7 iterations"):
        ob.interpret(g, feeds)
    assert ob.interpret(g, feeds, max_loop_iterations=100)["seq"].shape == (68,)


def _nested_model():
    """A Loop over a run-time trip count whose body branches (If) on the iteration number
    against a graph input, both branches reading the graph's x: captures two levels deep."""
    then = helper.make_graph([helper.make_node("Add", ["acc_in", "x"], ["t"])], "then", [], [_vi("t", [3])])
    other = helper.make_graph([helper.make_node("Mul", ["acc_in", "x"], ["e"])], "else", [], [_vi("e", [3])])
    body = helper.make_graph(
        [helper.make_node("Less", ["i", "switch"], ["early"]),
         helper.make_node("If", ["early"], ["acc_out"], then_branch=then, else_branch=other),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", [], I64), _vi("cond_in", [], B), _vi("acc_in", [3])],
        [_vi("cond_out", [], B), _vi("acc_out", [3])])
    node = helper.make_node("Loop", ["M", "", "acc0"], ["acc"], name="outer", body=body)
    return _model([node], [_vi("x", [3]), _vi("acc0", [3]), _vi("M", [], I64), _vi("switch", [], I64)],
                  [_vi("acc", [3])])


@pytest.mark.parametrize(("trip", "switch"), [(0, 0), (3, 1), (4, 2), (5, 9)])
def test_loop_body_with_a_runtime_if_reading_the_outer_graph(trip, switch):
    m = _nested_model()
    feeds = {"x": np.array([1.0, 2.0, -0.5], np.float32), "acc0": np.array([0.5, 1.0, 2.0], np.float32),
             "M": np.array(trip, np.int64), "switch": np.array(switch, np.int64)}
    _check(m, feeds)


def _scan_model(steps):
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "w"], ["y_t"])],
        "body", [_vi("s_in", [2]), _vi("x_t", [2])], [_vi("s_out", [2]), _vi("y_t", [2])])
    node = helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], num_scan_inputs=1, body=body,
                            scan_input_directions=[1], scan_output_axes=[1])
    return _model([node], [_vi("s0", [2]), _vi("xs", [steps, 2])], [_vi("s", [2]), _vi("ys", [2, steps])],
                  [numpy_helper.from_array(np.array([2.0, -1.0], np.float32), "w")])


def test_scan_longer_than_the_unroll_limit_runs_at_run_time(monkeypatch):
    monkeypatch.setattr(onnx_control, "MAX_UNROLL", 3)
    m = _scan_model(5)
    g = ob.convert(m)
    assert [n.op for n in g.nodes] == ["Scan"]
    rng = np.random.default_rng(0)
    _check(m, {"s0": rng.standard_normal(2).astype(np.float32),
               "xs": rng.standard_normal((5, 2)).astype(np.float32)}, g)


def test_subgraphs_save_load_and_show(tmp_path):
    g = ob.convert(_nested_model())
    path = tmp_path / "nested.obir"
    ob.save(g, path)
    again = ob.load(path)
    feeds = {"x": np.array([1.0, 2.0, -0.5], np.float32), "acc0": np.ones(3, np.float32),
             "M": np.array(4, np.int64), "switch": np.array(2, np.int64)}
    np.testing.assert_array_equal(ob.interpret(again, feeds)["acc"], ob.interpret(g, feeds)["acc"])
    text = ob.format_graph(again)
    assert "body:" in text and "then_branch:" in text and "= If(" in text


@pytest.mark.parametrize("limit", [0.0, 4.0, 20.0], ids=lambda v: f"limit={v}")
def test_growing_loop_value_read_by_shape_runs_per_iteration(limit):
    """A body that reads the shape of a value that grows cannot keep the first iteration's
    shapes (Size would fold to 2): the carried value's dim is symbolic, so Size runs at each
    iteration and the loop matches onnxruntime."""
    m = _while_model()
    body = m.graph.node[0].attribute[0].g
    body.node[1].CopyFrom(helper.make_node("Size", ["seq_out"], ["count"]))
    body.node.insert(2, helper.make_node("Cast", ["count"], ["total"], to=F))
    g = ob.convert(m)
    assert [n.op for n in g.nodes] == ["Loop"]
    _check(m, {"start": np.array([0.5, 1.0], np.float32), "limit": np.array(limit, np.float32)}, g)


def test_opbridge_show_lists_the_branches(tmp_path, capsys):
    from opbridge.cli import main

    path = tmp_path / "if.obir"
    ob.save(ob.convert(_if_model()), path)
    assert main(["show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "then_branch:" in out and "else_branch:" in out
    assert "= Concat(" in out  # a node of the else branch, listed under the If


@pytest.mark.parametrize("attrs,want", [
    ({"scan_input_axes": [], "scan_input_directions": [], "scan_output_axes": [],
      "scan_output_directions": []}, ([0, 0], [0, 0], [0, 0, 0], [0, 0, 0])),
    ({"scan_input_axes": [1, -1], "scan_input_directions": [0, 1], "scan_output_axes": [2, 0, 1],
      "scan_output_directions": [1, 0, 0]}, ([1, -1], [0, 1], [2, 0, 1], [1, 0, 0])),
], ids=["attributes-absent", "attributes-given"])
def test_scan_layout_takes_the_scan_inputs_and_outputs_only(attrs, want):
    """One axis and direction per scan input and per scan output (ONNX Scan-16: absent lists
    mean axis 0, forward); the state values have none, so the layout does not ask for them."""
    from opbridge.ir.ops.control import scan_layout

    assert scan_layout(2, 3, attrs) == want
