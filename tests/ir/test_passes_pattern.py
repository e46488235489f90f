"""The pattern-rewrite API and the pass registry: what matches, what is replaced, what is refused.

Rewritten graphs are checked against onnxruntime running the unfused ONNX model, or against the
unfused graph where the replacement is a built-in op whose own tests hold it to onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import RegistryError
from opbridge.ir.passes import (
    DEFAULT_PASSES,
    PASSES,
    PassError,
    Pattern,
    PatternError,
    make_passes,
    optimize,
    with_passes,
)
from opbridge.passcheck import PassCheckError, check_passes
from tests.conftest import requires_ort

RNG = np.random.default_rng(3)


def _mm_add_relu_model(*, swap: bool = False, square: bool = False) -> onnx.ModelProto:
    """x[2,4] @ W + b -> Relu; ``swap`` writes the Add as Add(b, mm)."""
    n = 4 if square else 3
    inits = [numpy_helper.from_array(RNG.standard_normal((4, n)).astype(np.float32), "W"),
             numpy_helper.from_array(RNG.standard_normal(n).astype(np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"),
             helper.make_node("Add", ["b", "mm"] if swap else ["mm", "b"], ["lin"], name="lin"),
             helper.make_node("Relu", ["lin"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "mm_add", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _linear_pattern(**op_kwargs) -> Pattern:
    p = Pattern("linear")
    h = p.op("MatMul", p.any("x", rank=2), p.constant("W", rank=2), name="mm")
    p.op("Add", h, p.constant("b", rank=1), name="add", **op_kwargs)
    return p


def _to_gemm(m, r):
    return r.op("Gemm", [m["x"], m["W"], m["b"]])


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@requires_ort
@pytest.mark.parametrize("swap", [False, True], ids=["add(mm,b)", "add(b,mm)"])
def test_chain_rewritten_matches_onnxruntime(swap):
    model = _mm_add_relu_model(swap=swap)
    g = ob.convert(model)
    r = _linear_pattern().rewrite(_to_gemm)(g)
    assert r.modified and "1 match of MatMul -> Add replaced by Gemm" in r.detail
    g2 = r.graph.verify()
    assert [(n.op, n.name) for n in g2.nodes] == [("Gemm", "lin"), ("Relu", "relu")]
    assert g2.node("lin").origin.name == "lin"  # validation still finds it by its origin name
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(ob.interpret(g2, {"x": x})["y"], _ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_commute_false_keeps_operand_order():
    g = ob.convert(_mm_add_relu_model(swap=True))
    assert not _linear_pattern(commute=False).rewrite(_to_gemm)(g).modified
    assert _linear_pattern(commute=False).rewrite(_to_gemm)(ob.convert(_mm_add_relu_model())).modified


def _gelu_graph(approximate: str, shape=(2, 3)) -> ob.Graph:
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", shape)
    b.output(b.op("Gelu", [x], name="gelu", approximate=approximate))
    return b.build()


@pytest.mark.parametrize("approximate,want", [("none", False), ("tanh", True)])
def test_attribute_predicate(approximate, want):
    p = Pattern("tanh_gelu")
    p.op("Gelu", p.any("x"), approximate="tanh")
    fired = p.rewrite(lambda m, r: r.op("Relu", [m["x"]]))(_gelu_graph(approximate)).modified
    assert fired is want


def test_callable_attribute_and_node_predicates():
    p = Pattern("p")
    p.op("Gelu", p.any("x"), approximate=lambda a: a.startswith("t"), where=lambda n: n.name == "gelu")
    assert p.find(_gelu_graph("tanh")) and not p.find(_gelu_graph("none"))


@pytest.mark.parametrize("constraint,matches", [
    ({"shape": (2, None)}, True), ({"shape": (3, None)}, False), ({"rank": 2}, True),
    ({"rank": 3}, False), ({"dtype": "f32"}, True), ({"dtype": ("f16", "bf16")}, False),
    ({"where": lambda v: v.shape[-1] == 3}, True), ({}, True),
], ids=["shape=(2,*)", "shape=(3,*)", "rank=2", "rank=3", "dtype=f32", "dtype=f16|bf16", "where", "absent"])
def test_value_predicates(constraint, matches):
    p = Pattern("p")
    p.op("Gelu", p.any("x", **constraint))
    assert bool(p.find(_gelu_graph("none"))) is matches


def _silu_graph(same_input: bool) -> ob.Graph:
    b = ob.GraphBuilder("silu")
    x = b.input("x", "f32", (2, 5))
    other = x if same_input else b.op("Neg", [x], name="neg")
    b.output(b.op("Mul", [x, b.op("Sigmoid", [other], name="sig")], name="mul"))
    return b.build()


@pytest.mark.parametrize("same_input", [True, False], ids=["x*sigmoid(x)", "x*sigmoid(-x)"])
def test_dag_pattern_binds_a_name_once(same_input):
    # x feeds both branches: the pattern matches only when both are the same tensor
    p = Pattern("silu")
    x = p.any("x")
    p.op("Mul", x, p.op("Sigmoid", x))
    g = _silu_graph(same_input)
    xv = RNG.standard_normal((2, 5)).astype(np.float32)
    r = p.rewrite(lambda m, rw: rw.op("Swish", [m["x"]], alpha=1.0))(g)
    assert r.modified is same_input
    if same_input:
        assert [n.op for n in r.graph.nodes] == ["Swish"]
        want = xv / (1.0 + np.exp(-xv.astype(np.float64)))  # x * sigmoid(x), written here
        np.testing.assert_allclose(ob.interpret(r.graph.verify(), {"x": xv})["mul"], want, rtol=1e-6)


@pytest.mark.parametrize("where", ["another node", "graph output"])
def test_inner_tensor_read_outside_is_not_fused(where):
    b = ob.GraphBuilder("shared")
    x = b.input("x", "f32", (2, 4))
    mm = b.op("MatMul", [x, b.constant("W", RNG.standard_normal((4, 3)).astype(np.float32))], name="mm")
    lin = b.op("Add", [mm, b.constant("b", np.ones(3, np.float32))], name="lin")
    b.output(lin)
    if where == "another node":
        b.output(b.op("Relu", [mm], name="side"))
    else:
        b.output(mm)
    assert not _linear_pattern().rewrite(_to_gemm)(b.build()).modified


def test_placeholder_bound_inside_the_match_is_not_fused():
    # Add(Relu(x), y) on Add(r, r): y would be bound to r, which the rewrite removes
    b = ob.GraphBuilder("twice")
    x = b.input("x", "f32", (2, 3))
    r = b.op("Relu", [x], name="r")
    b.output(b.op("Add", [r, r], name="add"))
    p = Pattern("p")
    p.op("Add", p.op("Relu", p.any("x")), p.any("y"))
    assert not p.rewrite(lambda m, rw: rw.op("Sub", [m["x"], m["y"]]))(b.build()).modified


def test_every_match_is_rewritten_and_chains():
    b = ob.GraphBuilder("two")
    h = b.input("x", "f32", (2, 4))
    for i in range(2):
        h = b.op("MatMul", [h, b.constant(f"W{i}", RNG.standard_normal((4, 4)).astype(np.float32))])
        h = b.op("Add", [h, b.constant(f"b{i}", RNG.standard_normal(4).astype(np.float32))], name=f"lin{i}")
    b.output(h)
    g = b.build()
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    before = ob.interpret(g, {"x": x})["lin1"]
    r = _linear_pattern().rewrite(_to_gemm)(g)
    assert [n.op for n in r.graph.nodes] == ["Gemm", "Gemm"] and "2 matches" in r.detail
    np.testing.assert_allclose(ob.interpret(r.graph.verify(), {"x": x})["lin1"], before, rtol=1e-5)


def test_declined_match_leaves_graph_alone():
    g = ob.convert(_mm_add_relu_model())
    r = _linear_pattern().rewrite(lambda m, rw: None)(g)
    assert not r.modified and r.graph is g


def test_unknown_attribute_in_pattern_is_an_error():
    p = Pattern("typo")
    p.op("Gelu", p.any("x"), approx="tanh")
    with pytest.raises(PatternError, match=r"pattern 'typo' op 'gelu_0': Gelu has no attribute 'approx'"):
        p.find(_gelu_graph("tanh"))


def test_replacement_of_another_shape_is_an_error():
    p = Pattern("bad")
    p.op("Gelu", p.any("x"))
    rw = p.rewrite(lambda m, r: r.op("ReduceSum", [m["x"]], keepdims=0))
    with pytest.raises(PatternError, match=r"pass 'bad': the replacement of node 'gelu' \(Gelu\).* gives "
                                           r"f32\[\].*is f32\[2,3\]"):
        rw(_gelu_graph("none"))


def test_replacement_that_raises_names_pass_and_node():
    p = Pattern("boom")
    p.op("Gelu", p.any("x"))
    with pytest.raises(PatternError, match=r"pass 'boom' at node 'gelu' \(Gelu\): the replacement "
                                           r"function failed: KeyError"):
        p.rewrite(lambda m, r: m.values["nope"])(_gelu_graph("none"))


def test_only_the_matched_ops_unused_constants_go():
    b = ob.GraphBuilder("consts")
    x = b.input("x", "f32", (2, 4))
    b.constant("unrelated", np.ones(2, np.float32))  # unused before the pass: stays
    mm = b.op("MatMul", [x, b.constant("W", np.ones((4, 3), np.float32))], name="mm")
    b.output(b.op("Add", [mm, b.constant("b", np.ones(3, np.float32))], name="lin"))
    g = b.build()
    r = _linear_pattern().rewrite(lambda m, rw: rw.op("Relu", [rw.op("Gemm", [m["x"], m["W"]])]))(g)
    assert sorted(r.graph.constants) == ["W", "unrelated"]  # b was read only by the matched Add


def test_replacement_must_return_a_new_value():
    p = Pattern("identity")
    p.op("Gelu", p.any("x"))
    with pytest.raises(PatternError, match=r"return the Value of an op made with r.op"):
        p.rewrite(lambda m, r: m["x"])(_gelu_graph("none"))


def test_op_not_leading_to_root_is_an_error():
    p = Pattern("loose")
    x = p.any("x")
    p.op("Relu", x, name="stray")
    p.op("Gelu", x)
    with pytest.raises(PatternError, match=r"op\(s\) stray do not lead to the root"):
        p.rewrite(_to_gemm)


def test_placeholder_name_used_twice_is_an_error():
    p = Pattern("dup")
    p.any("x")
    with pytest.raises(PatternError, match=r"name 'x' is used twice"):
        p.constant("x")


# -- the registry -----------------------------------------------------------------------------
@pytest.fixture
def pass_name(request):
    name = f"test_pass_{request.node.name.split('[')[0]}"
    yield name
    PASSES.pop(name, None)


def test_register_pass_runs_from_convert(pass_name):
    ob.register_pass(pass_name)(_linear_pattern().rewrite(_to_gemm))
    g = ob.convert(_mm_add_relu_model(), passes=with_passes([pass_name]))
    assert [n.op for n in g.nodes] == ["Gemm", "Relu"]
    assert [p.name for p in make_passes([pass_name])] == [pass_name]


def test_register_twice_names_both_sites(pass_name):
    ob.register_pass(pass_name)(lambda g: None)
    with pytest.raises(RegistryError, match=rf"pass '{pass_name}' is already registered at "
                                            r".*test_passes_pattern.py:\d+; registered again at "
                                            r".*test_passes_pattern.py:\d+"):
        ob.register_pass(pass_name)(lambda g: None)
    ob.register_pass(pass_name, override=True)(lambda g: None)


def test_builtin_name_is_protected():
    with pytest.raises(RegistryError, match=r"pass 'dead_code' is already registered at .*dce"):
        ob.register_pass("dead_code")(lambda g: None)


@pytest.mark.parametrize("result", ["graph", "none", "passresult"])
def test_function_pass_results(pass_name, result):
    def fn(g):
        g.nodes[0].name = "renamed"
        if result == "graph":
            return g
        if result == "passresult":
            from opbridge.ir.passes import PassResult

            return PassResult(g, True)
        return None

    ob.register_pass(pass_name)(fn)
    g = optimize(_gelu_graph("none"), [pass_name])
    assert g.nodes[0].name == "renamed"


def test_pass_class_registered_by_decorator_runs_fresh_each_time(pass_name):
    made = []

    @ob.register_pass(pass_name)
    class Count:
        name = "count"  # its own name; messages use the registered one

        def __init__(self):
            made.append(self)

        def __call__(self, g):
            from opbridge.ir.passes import PassResult

            return PassResult(g, False)

    assert isinstance(Count, type)  # the decorator returns the class unchanged
    passes = make_passes([pass_name, pass_name])
    assert [p.name for p in passes] == [pass_name, pass_name] and len(made) == 2
    optimize(_gelu_graph("none"), [pass_name])
    assert len(made) == 3


def test_function_pass_bad_result_and_exception_are_pass_errors(pass_name):
    ob.register_pass(pass_name)(lambda g: 42)
    with pytest.raises(PassError, match=rf"pass '{pass_name}' \(registered at .*\) returned a int"):
        optimize(_gelu_graph("none"), [pass_name])

    def boom(g):
        raise KeyError("x")

    ob.register_pass(pass_name, override=True)(boom)
    with pytest.raises(PassError, match=rf"pass '{pass_name}' failed: KeyError"):
        optimize(_gelu_graph("none"), [pass_name])


@pytest.mark.parametrize("name", ["has space", "", "1x"], ids=["space", "empty", "digit"])
def test_bad_pass_name(name):
    with pytest.raises(RegistryError, match="must be an identifier"):
        ob.register_pass(name)


def test_unknown_pass_hint_says_how_to_register():
    with pytest.raises(ob.OpbridgeError, match="unknown pass 'nope'") as e:
        make_passes(["nope"])
    assert "register_pass" in e.value.hint and "fold_batchnorm" in e.value.hint


@pytest.mark.parametrize("base,want", [
    (DEFAULT_PASSES, ("fold_constants", "a", "b", "dead_code")),
    (("dead_code",), ("a", "b", "dead_code")),
    ((), ("a", "b")),
], ids=["defaults", "no-fold", "none"])
def test_with_passes_runs_user_passes_after_folding(base, want):
    assert with_passes(["a", "b"], base) == want


# -- checking a pass against the unfused graph -------------------------------------------------
def _wrong_linear(m, r):
    """A buggy fusion: the weight transposed (same shape, because W is square)."""
    return r.op("Gemm", [m["x"], m["W"], m["b"]], transB=1)


def test_check_passes_accepts_a_right_fusion(pass_name):
    ob.register_pass(pass_name)(_linear_pattern().rewrite(_to_gemm))
    g, report = check_passes(ob.convert(_mm_add_relu_model(), passes=()), with_passes([pass_name]))
    assert report.passed and [n.op for n in g.nodes] == ["Gemm", "Relu"]
    step = next(s for s in report.steps if s.name == pass_name)
    assert step.compared == 2 and step.worst_cosine > 0.9999 and step.nodes_before == 3


def test_check_passes_names_the_pass_that_broke_the_graph(pass_name):
    ob.register_pass(pass_name)(_linear_pattern().rewrite(_wrong_linear))
    model = _mm_add_relu_model(square=True)
    assert ob.convert(model, passes=[pass_name]).nodes[0].op == "Gemm"  # unchecked: silently wrong
    with pytest.raises(PassCheckError, match=rf"pass '{pass_name}' changed what the graph computes: "
                                             r"tensor 'lin', now made by node 'lin' \(Gemm\)") as e:
        ob.convert(model, passes=with_passes([pass_name]), check_passes=True)
    assert not e.value.check.passed and e.value.check.first_failure.name == pass_name


def test_cli_check_passes_exit_codes(tmp_path, pass_name, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(_mm_add_relu_model(square=True), model)
    out = tmp_path / "m.obir"
    ob.register_pass(pass_name)(_linear_pattern().rewrite(_to_gemm))
    assert main(["convert", str(model), "--pass", pass_name, "--check-passes", "-o", str(out)]) == 0
    assert f"check: pass {pass_name}: 1 match of MatMul -> Add replaced by Gemm" in capsys.readouterr().out
    assert [n.op for n in ob.load(out).nodes] == ["Gemm", "Relu"]
    out.unlink()
    ob.register_pass(pass_name, override=True)(_linear_pattern().rewrite(_wrong_linear))
    assert main(["convert", str(model), "--pass", pass_name, "--check-passes", "-o", str(out)]) == 1
    cap = capsys.readouterr()
    assert "DIFFERS at 'lin'" in cap.out and f"error: pass '{pass_name}' changed" in cap.err
    assert not out.exists()


def test_cli_unknown_pass_is_user_error(tmp_path, capsys):
    model = tmp_path / "m.onnx"
    onnx.save(_mm_add_relu_model(), model)
    assert main(["convert", str(model), "--pass", "nope", "-o", str(tmp_path / "m.obir")]) == 2
    err = capsys.readouterr().err
    assert "error: unknown pass 'nope'" in err and "hint: known passes:" in err
