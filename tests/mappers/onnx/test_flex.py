"""ONNX FlexAttention-1 (ai.onnx.preview) vs onnx.reference.ReferenceEvaluator, beyond the node tests.

FlexAttention has no mapping of its own: the ONNX function fallback (mappers/onnx/functions.py)
hands the node, its score_mod/prob_mod GraphProtos included, to onnx.defs, which builds the
body with the modifiers inlined; the op's own type and shape inference refuses what the body
alone would not (K and V head counts that differ).

The reference is onnx's own evaluator (onnx/reference/ops/aionnx_preview/op_flex_attention.py),
which runs the modifier graphs with its own evaluator; onnxruntime has no FlexAttention kernel.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import OpbridgeError

F, D, H, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT64
PREVIEW = "ai.onnx.preview"
NODE = r"node 'flex' \(FlexAttention\)"


def _init(name: str, value, dtype=None) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def _bias_graph(value: float, t: int = F) -> onnx.GraphProto:
    """scores -> scores + value"""
    return helper.make_graph(
        [helper.make_node("Add", ["s", "c"], ["y"])], "bias",
        [helper.make_tensor_value_info("s", t, None)], [helper.make_tensor_value_info("y", t, None)],
        [_init("c", value, helper.tensor_dtype_to_np_dtype(t))])


def _index_graph(t: int = F) -> onnx.GraphProto:
    """scores -> scores * (1 + 0.5*b + 0.25*h + 0.125*q) - 0.125*kv, the b/h/q/kv indices made
    from the scores' own shape (FlexAttention-1 calls a modifier with the scores only). The
    b/h/q terms scale the scores: added, they would cancel in the softmax."""
    nodes = [helper.make_node("Shape", ["s"], ["shp"])]
    for axis in range(4):
        nodes += [
            helper.make_node("Gather", ["shp", f"ax{axis}"], [f"n{axis}"], axis=0),
            helper.make_node("Range", ["zero", f"n{axis}", "one"], [f"r{axis}"]),
            helper.make_node("Reshape", [f"r{axis}", f"shape{axis}"], [f"i{axis}"]),
            helper.make_node("Cast", [f"i{axis}"], [f"f{axis}"], to=t),
            helper.make_node("Mul", [f"f{axis}", f"w{axis}"], [f"t{axis}"]),
        ]
    nodes += [helper.make_node("Add", ["t0", "t1"], ["a0"]),
              helper.make_node("Add", ["a0", "t2"], ["a1"]),
              helper.make_node("Add", ["a1", "one_f"], ["factor"]),
              helper.make_node("Mul", ["s", "factor"], ["scaled"]),
              helper.make_node("Add", ["scaled", "t3"], ["y"])]
    np_t = helper.tensor_dtype_to_np_dtype(t)
    inits = [_init("zero", 0, np.int64), _init("one", 1, np.int64), _init("one_f", 1, np_t)]
    for axis, weight in enumerate((0.5, 0.25, 0.125, -0.125)):
        shape = [1, 1, 1, 1]
        shape[axis] = -1
        inits += [_init(f"ax{axis}", axis, np.int64), _init(f"shape{axis}", shape, np.int64),
                  _init(f"w{axis}", weight, np_t)]
    return helper.make_graph(nodes, "indices", [helper.make_tensor_value_info("s", t, ["B", "H", "L", "S"])],
                             [helper.make_tensor_value_info("y", t, ["B", "H", "L", "S"])], inits)


def _causal_graph() -> onnx.GraphProto:
    """scores -> where(q >= kv, scores, -inf)"""
    nodes = [helper.make_node("Shape", ["s"], ["shp"]),
             helper.make_node("Gather", ["shp", "two"], ["L"], axis=0),
             helper.make_node("Gather", ["shp", "three"], ["S"], axis=0),
             helper.make_node("Range", ["zero", "L", "one"], ["ql"]),
             helper.make_node("Range", ["zero", "S", "one"], ["kl"]),
             helper.make_node("Unsqueeze", ["ql", "one1"], ["q"]),
             helper.make_node("GreaterOrEqual", ["q", "kl"], ["m"]),
             helper.make_node("Where", ["m", "s", "ninf"], ["y"])]
    inits = [_init("zero", 0, np.int64), _init("one", 1, np.int64), _init("two", 2, np.int64),
             _init("three", 3, np.int64), _init("one1", [1], np.int64), _init("ninf", -np.inf, np.float32)]
    return helper.make_graph(nodes, "causal", [helper.make_tensor_value_info("s", F, None)],
                             [helper.make_tensor_value_info("y", F, None)], inits)


def _model(q, k, v, t: int = F, dims=None, **attrs) -> onnx.ModelProto:
    """A one-node model; ``dims`` replaces the declared input shapes (symbolic dims)."""
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], name="flex", domain=PREVIEW)
    for name, value in attrs.items():
        node.attribute.append(value if isinstance(value, onnx.AttributeProto)
                              else helper.make_attribute(name, value))
    shapes = dims or [list(q), list(k), list(v)]
    graph = helper.make_graph(
        [node], "flex",
        [helper.make_tensor_value_info(n, t, s) for n, s in zip("QKV", shapes)],
        [helper.make_tensor_value_info("Y", t, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid(PREVIEW, 1)])


def _feeds(q, k, v, dtype=np.float32, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(s).astype(dtype) for n, s in zip("QKV", (q, k, v))}


CASES = {
    "plain": ((2, 4, 5, 8), (2, 4, 6, 8), (2, 4, 6, 3), {}),
    "scale=absent,gqa=4/2": ((1, 4, 3, 8), (1, 2, 5, 8), (1, 2, 5, 8), {}),
    "gqa=6/1": ((2, 6, 3, 4), (2, 1, 4, 4), (2, 1, 4, 7), {}),
    "scale=0.3": ((1, 2, 3, 8), (1, 2, 4, 8), (1, 2, 4, 8), {"scale": 0.3}),
    "scale=2.5,gqa=4/2": ((1, 4, 3, 8), (1, 2, 4, 8), (1, 2, 4, 8), {"scale": 2.5}),
    "score_mod=indices": ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 4), {"score_mod": _index_graph()}),
    "score_mod=indices,gqa=4/2,scale=0.5": ((2, 4, 3, 8), (2, 2, 3, 8), (2, 2, 3, 8),
                                            {"score_mod": _index_graph(), "scale": 0.5}),
    "score_mod=causal,prob_mod=bias": ((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8),
                                       {"score_mod": _causal_graph(), "prob_mod": _bias_graph(0.25)}),
    "prob_mod=indices": ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), {"prob_mod": _index_graph()}),
    "softmax_precision=f32 (explicit)": ((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), {"softmax_precision": F}),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_flexattention_matches_the_reference(case: str) -> None:
    q, k, v, attrs = CASES[case]
    model = _model(q, k, v, **attrs)
    feeds = _feeds(q, k, v)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = ob.interpret(ob.convert(model), feeds)["Y"]
    assert got.shape == want.shape == (q[0], q[1], q[2], v[3])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("t,dtype,precision", [(D, np.float64, None), (D, np.float64, D),
                                               (H, np.float16, None), (H, np.float16, H)],
                         ids=["f64", "f64,softmax_precision=f64", "f16", "f16,softmax_precision=f16"])
def test_flexattention_types_and_softmax_precision(t, dtype, precision) -> None:
    q, k, v = (1, 2, 3, 8), (1, 2, 4, 8), (1, 2, 4, 8)
    attrs = {"score_mod": _index_graph(precision or (D if t == D else F))}
    if precision is not None:
        attrs["softmax_precision"] = precision
    model = _model(q, k, v, t=t, **attrs)
    feeds = _feeds(q, k, v, dtype)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = ob.interpret(ob.convert(model), feeds)["Y"]
    assert got.dtype == want.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_flexattention_with_symbolic_dims_runs_the_modifier_at_run_time() -> None:
    dims = [["B", 2, "L", 8], ["B", 2, "S", 8], ["B", 2, "S", 4]]
    model = _model((), (), (), dims=dims, score_mod=_index_graph())
    g = ob.convert(model)
    for seed, (b, lq, s) in enumerate(((1, 3, 5), (2, 4, 2))):
        feeds = _feeds((b, 2, lq, 8), (b, 2, s, 8), (b, 2, s, 4), seed=seed)
        np.testing.assert_allclose(ob.interpret(g, feeds)["Y"], ReferenceEvaluator(model).run(None, feeds)[0],
                                   rtol=1e-5, atol=1e-6)


def test_flexattention_causal_mask_folds_to_a_constant() -> None:
    q = (1, 2, 4, 8)
    g = ob.convert(_model(q, q, q, score_mod=_causal_graph()))
    ops = [n.op for n in g.nodes]
    assert "Range" not in ops and "Shape" not in ops, ops
    assert {n.origin.name for n in g.nodes} == {"flex"}


@pytest.mark.parametrize("lmem", [None, 1024], ids=["lmem=default", "lmem=1KiB"])
def test_flexattention_on_the_simulator_matches_the_interpreter(lmem) -> None:
    q, k, v = (2, 4, 6, 16), (2, 2, 6, 16), (2, 2, 6, 8)
    model = _model(q, k, v, score_mod=_causal_graph(), prob_mod=_bias_graph(0.125), scale=0.2)
    g = ob.convert(model)
    feeds = _feeds(q, k, v)
    interp = ob.interpret(g, feeds)["Y"]
    target = "bm1684" if lmem is None else ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem)
    prog = ob.compile(g, target=target)
    if lmem is not None:  # a small lane cuts the attention's layer groups into tiles
        assert any(group.tiles > 1 for group in prog.groups), [group.tiles for group in prog.groups]
    sim = prog.run(feeds)["Y"]
    np.testing.assert_allclose(sim, interp, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sim, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-5, atol=1e-6)


def _two_inputs() -> onnx.GraphProto:
    vi = [helper.make_tensor_value_info(n, F, None) for n in ("s", "b", "y")]
    return helper.make_graph([helper.make_node("Add", ["s", "b"], ["y"])], "two_in", vi[:2], vi[2:])


def _two_outputs() -> onnx.GraphProto:
    vi = [helper.make_tensor_value_info(n, F, None) for n in ("s", "y", "z")]
    return helper.make_graph([helper.make_node("Neg", ["s"], ["y"]), helper.make_node("Abs", ["s"], ["z"])],
                             "two_out", vi[:1], vi[1:])


def _reduces() -> onnx.GraphProto:
    vi = [helper.make_tensor_value_info(n, F, None) for n in ("s", "y")]
    return helper.make_graph([helper.make_node("ReduceSum", ["s", "ax"], ["y"], keepdims=1)], "reduces",
                             vi[:1], vi[1:], [_init("ax", [3], np.int64)])


def _rank2() -> onnx.GraphProto:
    vi = [helper.make_tensor_value_info(n, F, ["L", "S"]) for n in ("s", "y")]
    return helper.make_graph([helper.make_node("Neg", ["s"], ["y"])], "rank2", vi[:1], vi[1:])


SPEC = "the ONNX spec of FlexAttention refuses it: "
BAD = {
    "scale=int": ({"scale": 2}, r"attribute 'scale'.*expects FLOAT", "FLOAT"),
    "score_mod=int": ({"score_mod": 3}, r"attribute 'score_mod'.*expects GRAPH", "GRAPH"),
    "prob_mod=tensor": ({"prob_mod": _init("t", [1.0], np.float32)}, r"attribute 'prob_mod'.*expects GRAPH",
                        "GRAPH"),
    "score_mod=2 inputs": ({"score_mod": _two_inputs()}, SPEC + "Attribute score_mod expected 1 input",
                           "ONNX spec of FlexAttention"),
    "prob_mod=2 outputs": ({"prob_mod": _two_outputs()}, SPEC + "Attribute prob_mod must have exactly one output",
                           "ONNX spec of FlexAttention"),
    "score_mod=f16 input": ({"score_mod": _bias_graph(1.0, H)}, SPEC + r"Attribute score_mod input\(0\) type",
                            "ONNX spec of FlexAttention"),
    "prob_mod=rank-2 input": ({"prob_mod": _rank2()}, SPEC + "Attribute prob_mod input must be rank-4",
                              "ONNX spec of FlexAttention"),
    "softmax_precision=int64": ({"softmax_precision": I64}, SPEC + "softmax_precision", "ONNX spec of FlexAttention"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_flexattention_bad_attributes_are_refused(case: str) -> None:
    attrs, message, hint = BAD[case]
    q = (1, 2, 3, 4)
    with pytest.raises(OpbridgeError, match=NODE + ".*" + message) as err:
        ob.convert(_model(q, q, q, **attrs))
    assert hint in (err.value.hint or ""), err.value.hint


def test_flexattention_modifier_that_changes_the_shape_is_refused_in_the_body() -> None:
    """The spec's inference does not look at what a modifier returns; the body's MatMul with V
    refuses it, naming the body node under the user's node, as onnx.reference's matmul does."""
    q = (1, 2, 3, 4)
    model = _model(q, q, q, score_mod=_reduces())
    with pytest.raises(ValueError, match="matmul"):
        ReferenceEvaluator(model).run(None, _feeds(q, q, q))
    with pytest.raises(OpbridgeError, match=r"node 'flex/MatMul_\d+' \(MatMul\): inner dimensions differ") as err:
        ob.convert(model)
    assert err.value.hint, err.value


#: Q, K, V shapes the spec's inference refuses, and the words of its refusal.
BAD_SHAPES = {
    "heads: K 2, V 1": ((1, 4, 3, 8), (1, 2, 4, 8), (1, 1, 4, 8), "Key and value must share the same head dimension"),
    "heads: K 1, V 2": ((1, 4, 3, 8), (1, 1, 4, 8), (1, 2, 4, 8), "Key and value must share the same head dimension"),
    "heads: Q 3, KV 2": ((1, 3, 2, 4), (1, 2, 2, 4), (1, 2, 2, 4), "q_num_heads must be a multiple of kv_num_heads"),
    "seq: K 4, V 5": ((1, 2, 3, 8), (1, 2, 4, 8), (1, 2, 5, 8), "Key and value must share the same sequence length"),
    "E: Q 8, K 7": ((1, 2, 3, 8), (1, 2, 4, 7), (1, 2, 4, 8), "Query and key must share the same embedding dimension"),
}


@pytest.mark.parametrize("case", BAD_SHAPES, ids=list(BAD_SHAPES))
def test_flexattention_inconsistent_qkv_shapes_are_refused(case: str) -> None:
    q, k, v, words = BAD_SHAPES[case]
    model = _model(q, k, v)
    with pytest.raises((RuntimeError, ValueError)):  # onnx.reference's own check, or numpy's matmul
        ReferenceEvaluator(model).run(None, _feeds(q, k, v))
    with pytest.raises(OpbridgeError, match=NODE + ": " + SPEC + words) as err:
        ob.convert(model)
    assert "ONNX spec of FlexAttention" in (err.value.hint or ""), err.value.hint


def test_flexattention_symbolic_head_size_scale_at_run_time() -> None:
    """No scale attribute and a symbolic head size: 1/sqrt(E) is computed from Q's shape when
    the graph runs."""
    dims = [["B", 2, "L", "E"], ["B", 2, "S", "E"], ["B", 2, "S", 4]]
    for attrs in ({}, {"score_mod": _causal_graph()}):
        model = _model((), (), (), dims=dims, **attrs)
        g = ob.convert(model)
        for seed, (b, lq, s, e) in enumerate(((1, 3, 5, 8), (2, 4, 4, 5))):
            feeds = _feeds((b, 2, lq, e), (b, 2, s, e), (b, 2, s, 4), seed=seed)
            np.testing.assert_allclose(ob.interpret(g, feeds)["Y"], ReferenceEvaluator(model).run(None, feeds)[0],
                                       rtol=1e-5, atol=1e-6)


def test_flexattention_bad_attribute_on_the_cli(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    q = (1, 2, 3, 4)
    path = tmp_path / "flex.onnx"
    onnx.save(_model(q, q, q, score_mod=_two_inputs()), path)
    assert main(["convert", str(path), "-o", str(tmp_path / "o.obir")]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error:") and "'flex'" in lines[0] and "score_mod" in lines[0], lines
    assert [ln for ln in lines if ln.startswith("error:")] == lines[:1], lines
    assert lines[-1].startswith("hint:") and "Traceback" not in err, lines
