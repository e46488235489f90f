"""The worked example examples/plugins/fused_ffn.py, end to end against onnxruntime.

An ONNX feed-forward block (MatMul -> Add -> Gelu -> MatMul -> Add, opset 20 Gelu) is converted
with the plugin's ``fuse_ffn`` pass into one FusedFFN op; the interpreter and the simulator
(whole-tensor global layer for rank-3 activations, a tiled layer group for rank-4 ones) must
agree with onnxruntime running the unfused model.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob
from opbridge.cli import main
from opbridge.ir.passes import PASSES, with_passes
from opbridge.plugins_loader import load_plugins
from tests.conftest import ROOT, requires_ort, requires_torch

PLUGIN = ROOT / "examples" / "plugins" / "fused_ffn.py"


@pytest.fixture(scope="module", autouse=True)
def plugin():
    load_plugins([PLUGIN], env=False)


def gelu_nodes(x: str, y: str, k: int, form: str) -> tuple[list, list]:
    """GELU as one Gelu node, or written out with Erf as exporters before opset 20 do:
    ``torch`` (x * (1 + erf(x / sqrt2))) * 0.5, ``hf`` (x * 0.5) * (1 + erf(x / sqrt2))."""
    if form == "gelu":
        return [helper.make_node("Gelu", [x], [y], name=f"gelu_{k}")], []
    c = {f"sqrt2_{k}": np.float32(np.sqrt(2.0)), f"one_{k}": np.float32(1.0), f"half_{k}": np.float32(0.5)}
    inits = [numpy_helper.from_array(np.array(v), n) for n, v in c.items()]
    nodes = [helper.make_node("Div", [x, f"sqrt2_{k}"], [f"d_{k}"]),
             helper.make_node("Erf", [f"d_{k}"], [f"e_{k}"]),
             helper.make_node("Add", [f"e_{k}", f"one_{k}"], [f"p_{k}"])]
    if form == "torch":
        nodes += [helper.make_node("Mul", [x, f"p_{k}"], [f"m_{k}"]),
                  helper.make_node("Mul", [f"m_{k}", f"half_{k}"], [y])]
    else:
        nodes += [helper.make_node("Mul", [x, f"half_{k}"], [f"m_{k}"]),
                  helper.make_node("Mul", [f"m_{k}", f"p_{k}"], [y])]
    return nodes, inits


def ffn_model(shape=(1, 8, 16), hidden=32, approximate="none", swap=False, blocks=1,
              gelu="gelu") -> onnx.ModelProto:
    """``blocks`` feed-forward blocks in a row; ``swap`` writes each bias Add as Add(b, h);
    ``gelu``: how GELU is written (see :func:`gelu_nodes`)."""
    rng = np.random.default_rng(0)
    d = shape[-1]
    nodes, inits, x = [], [], "x"
    for k in range(blocks):
        w = {f"w1_{k}": rng.standard_normal((d, hidden)) * 0.3, f"b1_{k}": rng.standard_normal(hidden),
             f"w2_{k}": rng.standard_normal((hidden, d)) * 0.3, f"b2_{k}": rng.standard_normal(d)}
        inits += [numpy_helper.from_array(a.astype(np.float32), n) for n, a in w.items()]
        y = "y" if k == blocks - 1 else f"y{k}"
        nodes += [
            helper.make_node("MatMul", [x, f"w1_{k}"], [f"h1_{k}"], name=f"mm1_{k}"),
            helper.make_node("Add", [f"b1_{k}", f"h1_{k}"] if swap else [f"h1_{k}", f"b1_{k}"],
                             [f"h2_{k}"], name=f"add1_{k}"),
            *(gelu_nodes(f"h2_{k}", f"h3_{k}", k, gelu)[0] if gelu != "gelu" else
              [helper.make_node("Gelu", [f"h2_{k}"], [f"h3_{k}"], name=f"gelu_{k}", approximate=approximate)]),
            helper.make_node("MatMul", [f"h3_{k}", f"w2_{k}"], [f"h4_{k}"], name=f"mm2_{k}"),
            helper.make_node("Add", [f"h4_{k}", f"b2_{k}"], [y], name=f"add2_{k}"),
        ]
        inits += gelu_nodes(f"h2_{k}", f"h3_{k}", k, gelu)[1]
        x = y
    g = helper.make_graph(nodes, "ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20 if gelu == "gelu" else 17)])
    m.ir_version = 9
    onnx.checker.check_model(m)
    return m


def ort_run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


CASES = {
    "rank3": dict(shape=(1, 8, 16)),
    "rank3,tanh": dict(shape=(2, 8, 16), approximate="tanh"),
    "rank3,add(b,h)": dict(shape=(1, 8, 16), swap=True),
    "rank3,two-blocks": dict(shape=(1, 4, 16), blocks=2),
    "rank4": dict(shape=(2, 1, 8, 16)),
}


@requires_ort
@pytest.mark.parametrize("case", list(CASES))
def test_fused_graph_matches_onnxruntime(case):
    kw = CASES[case]
    model = ffn_model(**kw)
    g = ob.convert(model, passes=with_passes(["fuse_ffn"]))
    assert [n.op for n in g.nodes] == ["FusedFFN"] * kw.get("blocks", 1)
    assert g.nodes[-1].attrs["approximate"] == kw.get("approximate", "none")
    assert g.nodes[-1].origin.name == f"add2_{kw.get('blocks', 1) - 1}"
    x = np.random.default_rng(1).standard_normal(kw["shape"]).astype(np.float32)
    want = ort_run(model, x)
    np.testing.assert_allclose(ob.interpret(g, {"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    prog = ob.compile(g, target="bm1684")
    np.testing.assert_allclose(prog.run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)


@requires_ort
def test_rank4_is_tiled_in_a_layer_group():
    # 64 token rows and a small local memory: the kernel's split("N", "H") + input_slice are
    # used; two blocks, as one alone would be a one-op group, which runs as a global layer
    model = ffn_model(shape=(2, 1, 64, 16), hidden=64, blocks=2)
    g = ob.convert(model, passes=with_passes(["fuse_ffn"]))
    prog = ob.compile(g, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=8192))
    groups = [u for u in prog.groups if "add2_0" in u.nodes]
    assert groups and groups[0].tiles > 1
    x = np.random.default_rng(2).standard_normal((2, 1, 64, 16)).astype(np.float32)
    np.testing.assert_allclose(prog.run({"x": x})["y"], ort_run(model, x), rtol=1e-5, atol=1e-5)


@requires_ort
@pytest.mark.parametrize("form", ["torch", "hf"])
def test_written_out_gelu_is_fused_first(form):
    model = ffn_model(gelu=form, blocks=2, shape=(1, 4, 16))
    assert "FusedFFN" not in ob.convert(model, passes=with_passes(["fuse_ffn"])).op_counts()
    g = ob.convert(model, passes=with_passes(["fuse_gelu_erf", "fuse_ffn"]), check_passes=True)
    assert [n.op for n in g.nodes] == ["FusedFFN", "FusedFFN"]
    x = np.random.default_rng(4).standard_normal((1, 4, 16)).astype(np.float32)
    np.testing.assert_allclose(ob.interpret(g, {"x": x})["y"], ort_run(model, x), rtol=1e-5, atol=1e-5)


@requires_ort
@requires_torch
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torch_exported_ffn_is_fused(tmp_path):
    # a real exporter's output: torch.onnx (TorchScript-based, opset 17) writes Linear as
    # MatMul + Add and GELU with Erf
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 16)).eval()
    x = torch.randn(1, 8, 16)
    path = tmp_path / "ffn.onnx"
    torch.onnx.export(net, (x,), str(path), opset_version=17, dynamo=False, input_names=["x"],
                      output_names=["y"])
    g = ob.convert(str(path), passes=with_passes(["fuse_gelu_erf", "fuse_ffn"]), check_passes=True)
    assert [n.op for n in g.nodes] == ["FusedFFN"]
    with torch.no_grad():
        want = net(x).numpy()
    np.testing.assert_allclose(ob.interpret(g, {"x": x.numpy()})["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ob.interpret(g, {"x": x.numpy()})["y"], ort_run(onnx.load(path), x.numpy()),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", [0.25, 2.0], ids=["half=0.25", "sqrt2=2"])
def test_gelu_constants_are_checked_by_value(value):
    model = ffn_model(gelu="torch")
    name = "half_0" if value == 0.25 else "sqrt2_0"
    t = next(t for t in model.graph.initializer if t.name == name)
    t.CopyFrom(numpy_helper.from_array(np.array(np.float32(value)), name))
    g = ob.convert(model, passes=with_passes(["fuse_gelu_erf"]))
    assert "Gelu" not in g.op_counts() and "Erf" in g.op_counts()


def test_bias_of_another_shape_is_not_fused():
    # a [hidden]-vector bias is what FusedFFN adds; a per-token bias matrix must stay unfused
    model = ffn_model()
    b1 = next(t for t in model.graph.initializer if t.name == "b1_0")
    b1.CopyFrom(numpy_helper.from_array(np.ones((8, 32), np.float32), "b1_0"))
    g = ob.convert(model, passes=with_passes(["fuse_ffn"]))
    assert "FusedFFN" not in g.op_counts()


@requires_ort
def test_cli_convert_check_and_validate(tmp_path, capsys):
    path = tmp_path / "ffn.onnx"
    onnx.save(ffn_model(), path)
    out = tmp_path / "ffn.obir"
    assert main(["convert", str(path), "--plugin", str(PLUGIN), "--pass", "fuse_ffn", "--check-passes",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "check: pass fuse_ffn: 1 match of MatMul -> Add -> Gelu -> MatMul -> Add replaced by FusedFFN" in text
    assert ": ok" in text
    assert [n.op for n in ob.load(out).nodes] == ["FusedFFN"]
    assert main(["validate", str(path), "--plugin", str(PLUGIN), "--pass", "fuse_ffn"]) == 0
    text = capsys.readouterr().out
    assert "onnxruntime" in text and "pass fuse_ffn: 1 match" in text and "PASS" in text


def _example():
    """The loaded example module (its pattern is reused with a wrong replacement)."""
    return next(m for m in list(sys.modules.values())
                if getattr(m, "__file__", None) and Path(m.__file__) == PLUGIN)


def test_python_validate_reports_a_wrong_fusion(tmp_path):
    def wrong(m, r):  # the first bias with its sign flipped
        return r.op("FusedFFN", [m["x"], m["w1"], r.constant("b1_neg", -m.const("b1")), m["w2"], m["b2"]])

    ob.register_pass("test_wrong_ffn")(_example().ffn_pattern().rewrite(wrong))
    try:
        path = tmp_path / "ffn.onnx"
        onnx.save(ffn_model(shape=(1, 8, 16)), path)
        # no origin framework: the interpreter and the simulator agree on the wrong graph, and
        # only the check against the unfused graph can tell
        report = ob.validate(str(path), passes=with_passes(["test_wrong_ffn"]), origin=False)
        assert not report.passed
        assert any("pass 'test_wrong_ffn' changed what the graph computes: tensor 'y'" in e
                   for e in report.errors)
    finally:
        PASSES.pop("test_wrong_ffn", None)


@requires_ort
def test_cli_compile_runs_the_pass_on_a_saved_graph(tmp_path, capsys):
    # a graph saved unfused: compile --pass fuses it, checked; the program matches onnxruntime
    model = ffn_model(shape=(2, 1, 8, 16))
    path = tmp_path / "ffn.onnx"
    onnx.save(model, path)
    assert main(["convert", str(path), "-o", str(tmp_path / "ffn.obir")]) == 0
    prog_path = tmp_path / "ffn.obprog"
    assert main(["compile", str(tmp_path / "ffn.obir"), "--plugin", str(PLUGIN), "--pass", "fuse_ffn",
                 "--check-passes", "-o", str(prog_path)]) == 0
    assert "check: pass fuse_ffn: 1 match" in capsys.readouterr().out
    prog = ob.load_program(prog_path)
    # the fused block alone is a one-op group: a global layer
    assert [(u.CATEGORY, u.nodes) for u in prog.units] == [("global", ("add2_0",))]
    x = np.random.default_rng(3).standard_normal((2, 1, 8, 16)).astype(np.float32)
    np.testing.assert_allclose(prog.run({"x": x})["y"], ort_run(model, x), rtol=1e-5, atol=1e-5)


@requires_ort
def test_cli_demo_takes_pass(tmp_path, capsys):
    path = tmp_path / "ffn.onnx"
    onnx.save(ffn_model(), path)
    assert main(["demo", str(path), "--plugin", str(PLUGIN), "--pass", "fuse_ffn",
                 "--out-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "converted: 1 IR nodes" in out and "FusedFFN" in out


@requires_ort
def test_cli_batch_takes_pass(tmp_path):
    path = tmp_path / "ffn.onnx"
    onnx.save(ffn_model(), path)
    out = tmp_path / "out"
    assert main(["batch", "validate", str(path), "--plugin", str(PLUGIN), "--pass", "fuse_ffn",
                 "--jobs", "1", "-o", str(out)]) == 0
    report = next(out.rglob("report.json")).read_text()
    assert "pass fuse_ffn: 1 match" in report
    assert main(["batch", "convert", str(path), "--plugin", str(PLUGIN), "--pass", "fuse_ffn",
                 "--jobs", "1", "-o", str(out)]) == 0
    obir = next(out.rglob("model.obir"))
    assert [n.op for n in ob.load(obir).nodes] == ["FusedFFN"]
