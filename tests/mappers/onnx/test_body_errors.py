"""Errors at a node of a body the converter maps for a node of the user's model (an ONNX
function body, an If branch, a Loop body) name that user's node and what it is, then the body
node with the inner detail, keeping the error's class and hint; their structured fields
node/op_type are the user's node's.

Each model here is refused by onnx.reference (or onnxruntime) too, so the refusal is the
model's fault and not a gap of ours.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import AttrError, ShapeError

F = TensorProto.FLOAT


def _init(name: str, value, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _flex_shrinking_score_mod() -> onnx.ModelProto:
    """FlexAttention whose score_mod sums the scores over the key axis (keepdims): the scores
    [B, H, L, S] become [B, H, L, 1], which the body's MatMul with V [B, H, S, E] refuses."""
    mod = helper.make_graph([helper.make_node("ReduceSum", ["s", "ax"], ["y"], keepdims=1)], "shrink",
                            [helper.make_tensor_value_info("s", F, None)],
                            [helper.make_tensor_value_info("y", F, None)], [_init("ax", [3], np.int64)])
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], name="flex", domain="ai.onnx.preview",
                            score_mod=mod)
    shape = [1, 2, 3, 4]
    graph = helper.make_graph([node], "flex", [helper.make_tensor_value_info(n, F, shape) for n in "QKV"],
                              [helper.make_tensor_value_info("Y", F, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26),
                                                   helper.make_opsetid("ai.onnx.preview", 1)])


def _rms_norm(scale_len: int, opset: int = 23) -> onnx.ModelProto:
    """RMSNormalization-23 (no mapping of its own: it expands into its function body) over the
    last axis of X [2, 3, 8] with a scale of ``scale_len`` elements."""
    node = helper.make_node("RMSNormalization", ["X", "S"], ["Y"], name="norm", axis=-1)
    graph = helper.make_graph([node], "rms", [helper.make_tensor_value_info("X", F, [2, 3, 8])],
                              [helper.make_tensor_value_info("Y", F, None)],
                              [_init("S", np.ones(scale_len))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _if(then_nodes: list[onnx.NodeProto], then_inits: list[onnx.TensorProto], runtime: bool,
        x_shape: tuple[int, ...] = (2, 3)) -> onnx.ModelProto:
    """If 'branch' over X (``x_shape``): its then_branch 'then_g' computes z from X with
    ``then_nodes``; the condition is a constant true, or a graph input (a run-time If)."""
    then_g = helper.make_graph(then_nodes, "then_g", [], [helper.make_tensor_value_info("z", F, None)],
                               then_inits)
    else_g = helper.make_graph([helper.make_node("Identity", ["X"], ["z2"], name="id")], "else_g", [],
                               [helper.make_tensor_value_info("z2", F, None)])
    inputs = [helper.make_tensor_value_info("X", F, list(x_shape))]
    inits = []
    if runtime:
        inputs.append(helper.make_tensor_value_info("C", TensorProto.BOOL, []))
    else:
        inits.append(_init("C", True, np.bool_))
    node = helper.make_node("If", ["C"], ["Y"], name="branch", then_branch=then_g, else_branch=else_g)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", F, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _bad_matmul() -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    return [helper.make_node("MatMul", ["X", "W"], ["z"], name="mm")], [_init("W", np.ones((5, 4)))]


def _loop(runtime: bool) -> onnx.ModelProto:
    """Loop 'lp' over X [2, 3] whose body 'loop_body' multiplies the carried value by W [5, 4];
    its trip count is a constant 3 (unrolled) or a graph input (a run-time Loop)."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["v", "W"], ["v2"], name="mm"),
         helper.make_node("Identity", ["c"], ["c2"], name="keep")], "loop_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_tensor_value_info("v", F, None)],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), helper.make_tensor_value_info("v2", F, None)],
        [_init("W", np.ones((5, 4)))])
    inputs = [helper.make_tensor_value_info("X", F, [2, 3])]
    inits = []
    if runtime:
        inputs.append(helper.make_tensor_value_info("N", TensorProto.INT64, []))
    else:
        inits.append(_init("N", 3, np.int64))
    node = helper.make_node("Loop", ["N", "", "X"], ["Y"], name="lp", body=body)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("Y", F, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _scan() -> onnx.ModelProto:
    """Scan 'sc' (state S0 [2, 3], 4 steps over X) whose body 'scan_body' multiplies the state by
    W [5, 4]."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["s", "W"], ["s2"], name="mm"),
         helper.make_node("Identity", ["s2"], ["o"], name="out")], "scan_body",
        [helper.make_tensor_value_info("s", F, None), helper.make_tensor_value_info("x", F, None)],
        [helper.make_tensor_value_info("s2", F, None), helper.make_tensor_value_info("o", F, None)],
        [_init("W", np.ones((5, 4)))])
    node = helper.make_node("Scan", ["S0", "X"], ["S", "O"], name="sc", body=body, num_scan_inputs=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("S0", F, [2, 3]),
                                            helper.make_tensor_value_info("X", F, [4, 2])],
                              [helper.make_tensor_value_info(n, F, None) for n in "SO"])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _refused(model: onnx.ModelProto, by: str) -> None:
    """The reference ``by`` ("onnx.reference" or "onnxruntime") refuses the model too, at the
    same op. onnxruntime has no FlexAttention; onnx.reference's Loop with no condition input
    runs no iteration."""
    feeds = _feeds(model)
    if by == "onnx.reference":
        with pytest.raises(ValueError, match="matmul"):
            ReferenceEvaluator(model).run(None, feeds)
        return
    # onnxruntime's errors are its own classes, not Python built-ins
    with pytest.raises(Exception, match=r"MatMul|Scale and \(optional\) bias must match"):
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    out = {}
    for t in model.graph.input:
        shape = [d.dim_value for d in t.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(t.type.tensor_type.elem_type)
        out[t.name] = np.ones(shape, dtype)
    return out


FLEX = (r"^\[onnx\] node 'flex' \(FlexAttention\), in its ONNX function body: "
        r"node 'flex/MatMul_\d+' \(MatMul\): inner dimensions differ")
RMS = (r"^\[onnx\] node 'norm' \(RMSNormalization\), in its ONNX function body: "
       r"node 'norm/Mul_\d+' \(Mul\): shapes \[2, 3, 8\] and \[5\] do not broadcast")
THEN = (r"^\[onnx\] node 'branch' \(If\), in its subgraph 'then_g': "
        r"node 'branch/then_branch/mm' \(MatMul\): inner dimensions differ")

LOOP = (r"^\[onnx\] node 'lp' \(Loop\), in its subgraph 'loop_body': "
        r"node 'lp/{}/mm' \(MatMul\): inner dimensions differ")
SCAN = (r"^\[onnx\] node 'sc' \(Scan\), in its subgraph 'scan_body': "
        r"node 'sc/step0/mm' \(MatMul\): inner dimensions differ")

#: model, the error's class, its message, the user's node and op type, the outside reference
CASES = {
    "function body: FlexAttention score_mod changes the scores' shape":
        (_flex_shrinking_score_mod, ShapeError, FLEX, "flex", "FlexAttention", "onnx.reference"),
    "function body: RMSNormalization-23 scale of 5 for 8": (lambda: _rms_norm(5), ShapeError, RMS, "norm",
                                                            "RMSNormalization", "onnxruntime"),
    "If branch, constant condition (inlined)": (lambda: _if(*_bad_matmul(), runtime=False), ShapeError, THEN,
                                                "branch", "If", "onnxruntime"),
    "If branch, run-time condition (a sub-graph)": (lambda: _if(*_bad_matmul(), runtime=True), ShapeError,
                                                    THEN, "branch", "If", "onnxruntime"),
    "Loop body, constant trip count (unrolled)": (lambda: _loop(False), ShapeError, LOOP.format("iter0"), "lp",
                                                  "Loop", "onnxruntime"),
    "Loop body, run-time trip count (a sub-graph)": (lambda: _loop(True), ShapeError, LOOP.format("body"), "lp",
                                                     "Loop", "onnxruntime"),
    "Scan body (unrolled)": (_scan, ShapeError, SCAN, "sc", "Scan", "onnxruntime"),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_a_body_error_names_the_users_node(case: str) -> None:
    make, cls, message, node, op_type, reference = CASES[case]
    model = make()
    _refused(model, reference)
    with pytest.raises(cls, match=message) as err:
        ob.convert(model)
    assert (err.value.node, err.value.op_type) == (node, op_type), err.value.context
    assert err.value.hint, err.value


def test_the_body_nodes_hint_is_kept() -> None:
    """The hint the body op's check gave (numpy's matmul rule) survives the re-homing."""
    with pytest.raises(ShapeError) as err:
        ob.convert(_flex_shrinking_score_mod())
    assert "matmul" in (err.value.hint or ""), err.value.hint


def test_rms_norm_that_fits_still_converts() -> None:
    """The same model with a scale that fits: converted and right (onnxruntime's result)."""
    model = _rms_norm(8)
    feeds = {"X": np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(ob.interpret(ob.convert(model), feeds)["Y"], want, rtol=1e-5, atol=1e-6)


def test_a_function_body_inside_an_if_branch_names_both_levels() -> None:
    """Nested bodies re-home once per level: the If, then the RMSNormalization in its branch."""
    nodes = [helper.make_node("RMSNormalization", ["X", "S"], ["z"], name="norm", axis=-1)]
    model = _if(nodes, [_init("S", np.ones(5))], runtime=False)
    _refused(model, "onnxruntime")
    with pytest.raises(ShapeError, match=r"^\[onnx\] node 'branch' \(If\), in its subgraph 'then_g': "
                       r"node 'branch/then_branch/norm' \(RMSNormalization\), in its ONNX function body: "
                       r"node 'branch/then_branch/norm/Mul_\d+' \(Mul\): shapes \[2, 3\] and \[5\]") as err:
        ob.convert(model)
    assert (err.value.node, err.value.op_type) == ("branch", "If"), err.value.context


def test_an_attribute_error_in_a_branch_is_the_if_nodes() -> None:
    """A branch node's bad attribute: named in the text with the branch node; the structured
    attribute fields are cleared (the If has no attribute 'auto_pad'), the class stays AttrError,
    and the hint speaks of the branch's node, which is the model's own."""
    nodes = [helper.make_node("Conv", ["X", "W"], ["z"], name="conv", auto_pad="BAD")]
    model = _if(nodes, [_init("W", np.ones((1, 1, 3, 3)))], runtime=False, x_shape=(1, 1, 4, 4))
    with pytest.raises(Exception, match="Unknown AutoPadType"):  # onnxruntime's refusal of it
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(AttrError, match=r"^\[onnx\] node 'branch' \(If\), in its subgraph 'then_g': "
                       r"node 'branch/then_branch/conv' \(Conv\) attribute 'auto_pad'.*'BAD'") as err:
        ob.convert(model)
    context = err.value.context
    assert (context["node"], context["op_type"]) == ("branch", "If"), context
    assert "attribute" not in context and "value" not in context, context
    assert "correct this value" in (err.value.hint or ""), err.value.hint


@pytest.mark.parametrize("make,words", [(_flex_shrinking_score_mod, "node 'flex' (FlexAttention), in its ONNX"),
                                        (lambda: _rms_norm(5), "node 'norm' (RMSNormalization), in its ONNX")],
                         ids=["FlexAttention", "RMSNormalization"])
def test_the_cli_prints_one_error_and_one_hint(make, words, tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(make(), path)
    assert main(["convert", str(path), "-o", str(tmp_path / "m.obir")]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert [ln for ln in lines if ln.startswith("error:")] == lines[:1], lines
    assert words in lines[0], lines
    assert [ln for ln in lines if ln.startswith("hint:")] == lines[-1:], lines
    assert len(lines) == 2 and "Traceback" not in err, lines


def test_nest_in_renders_the_framework_once_and_keeps_the_rest() -> None:
    """The re-homing itself (OpbridgeError.nest_in), on a hand-made error: the inner location
    moves into the text, the enclosing node's fields replace it, class and hint stay."""
    err = AttrError("must be >= 1", framework="onnx", node="n/Foo_1", op_type="Foo", kind="node",
                    attribute="alpha", value=0, opset=18, hint="set alpha")
    assert err.nest_in("in its ONNX function body", framework="onnx", node="n", op_type="Bar",
                       kind="node", opset=23) is err
    assert err.message == ("[onnx] node 'n' (Bar), in its ONNX function body: "
                           "node 'n/Foo_1' (Foo) attribute 'alpha' = 0: must be >= 1")
    assert err.context == {"framework": "onnx", "kind": "node", "node": "n", "op_type": "Bar", "opset": 23}
    assert isinstance(err, AttrError) and err.hint == "set alpha"
    err.add_context(node="other", source="m.onnx")  # a known field is never replaced
    assert (err.node, err.source) == ("n", "m.onnx") and err.message.count("[onnx]") == 1
