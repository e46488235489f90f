"""``ob.validate(..., per_layer=True)`` / ``validate --per-layer``: a plugin op whose tile kernel
is wrong only when the op is tiled, inside a layer group (Conv -> MyOp -> Relu).

MyOp divides its input by the largest magnitude of the whole tensor. Its kernel wrongly says it
may be split along H, so on tiles the compute normalises each tile by that tile's own maximum:
the answer is right on one tile and wrong on several. In the compiled program the group keeps
the Conv and MyOp outputs in local memory, so the default mode sees the error first at the
group's stored output (the Relu) with no compared input; the per-layer mode stores every layer's
output and names MyOp, whose input agreed.

The reference numbers come from the interpreter running MyOp's whole-tensor definition, checked
here against numpy written from the op's definition (not from the kernel).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator import DEFAULT_KERNELS
from tests.conftest import requires_ort

OP = "PerLayerTestNormMax"
#: small local memory, so the group must be cut into several row tiles
TARGET = ob.Target.preset("bm1684", lmem_bytes_per_lane=8192)
SHAPE = (1, 8, 48, 48)


def _norm_max(x: np.ndarray, **_: Any) -> np.ndarray:
    return x / np.max(np.abs(x))


@pytest.fixture
def norm_op() -> Iterator[None]:
    """MyOp defined as a plugin would, with the faulty tile kernel; removed afterwards."""
    (ob.define_op(OP).input("x", "T").output("y", "T").type_param("T", ("f32",))
     .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(_norm_max))
    ob.register_kernel(OP).split("N", "H")  # wrong: the op reads the whole tensor
    try:
        yield
    finally:
        DEFAULT_KERNELS.remove(OP)
        ob.DEFAULT_OPS.remove(OP)


def _graph() -> ob.Graph:
    rng = np.random.default_rng(1)
    b = ob.GraphBuilder("conv_myop_relu")
    x = b.input("x", "f32", SHAPE)
    w = b.constant("w", rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2)
    c = b.op("Conv", [x, w], pads=(1, 1, 1, 1), name="conv")
    m = b.op(OP, [c], name="myop")
    b.output(b.op("Relu", [m], name="relu"))
    return b.build()


def _inputs() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)}


def _myop_tiles(report: Any) -> int:
    unit = next(u for u in report.program.units if "myop" in u.nodes)
    return unit.tiles


def test_default_mode_sees_it_only_at_the_group_output(norm_op: None) -> None:
    r = ob.validate(_graph(), inputs=_inputs(), target=TARGET)
    assert not r.passed and r.mode == "layer-groups"
    assert _myop_tiles(r) > 1  # the group is tiled: that is when the kernel goes wrong
    fd = r.first_divergence
    assert fd is not None and (fd.node, fd.candidate) == ("relu", "simulator")
    assert fd.inputs_matched == ()  # MyOp's output never left local memory


def test_per_layer_names_myop_and_says_its_input_agreed(norm_op: None) -> None:
    g = _graph()
    r = ob.validate(g, inputs=_inputs(), target=TARGET, per_layer=True)
    assert not r.passed and r.mode == "per-layer"
    assert _myop_tiles(r) > 1
    fd = r.first_divergence
    assert fd is not None
    assert (fd.node, fd.op_type, fd.candidate, fd.reference) == ("myop", OP, "simulator", "interpreter")
    assert fd.inputs_matched == ("conv",)
    assert "its input(s) 'conv' agree" in str(fd)
    sim = {row.tensor: row.passed for row in r.rows if row.candidate == "simulator"}
    assert sim == {"conv": True, "myop": False, "relu": False}
    # the reference itself is MyOp's definition, checked against numpy from that definition
    ref = ob.interpret(g, _inputs(), keep_intermediates=True)
    np.testing.assert_allclose(ref["myop"], ref["conv"] / np.abs(ref["conv"]).max(), rtol=1e-6)


def test_per_layer_passes_with_a_whole_tensor_kernel(norm_op: None) -> None:
    """The control: with the kernel fixed (global only) the same compile passes, so the
    failure above is the tiled kernel's."""
    DEFAULT_KERNELS.remove(OP)
    ob.register_kernel(OP).global_only()
    r = ob.validate(_graph(), inputs=_inputs(), target=TARGET, per_layer=True)
    assert r.passed, r.summary()
    assert {row.tensor for row in r.rows if row.candidate == "simulator"} == {"conv", "myop", "relu"}


def test_report_says_which_mode_ran(norm_op: None, tmp_path: Path) -> None:
    from rich.console import Console

    for per_layer, mode, words in ((False, "layer-groups", "inside a layer group only"),
                                   (True, "per-layer", "a debugging compile that stores every layer")):
        r = ob.validate(_graph(), inputs=_inputs(), target=TARGET, per_layer=per_layer)
        r.write_json(tmp_path / "r.json")
        assert json.loads((tmp_path / "r.json").read_text())["mode"] == mode
        r.write_html(tmp_path / "r.html")
        assert words in (tmp_path / "r.html").read_text()
        console = Console(record=True, width=200)
        r.print(console)
        assert f"mode: {mode}" in console.export_text()


PLUGIN = '''
import numpy as np
import opbridge as ob

(ob.define_op("MyOp").input("x", "T").output("y", "T").type_param("T", ("f32",))
   .shape_fn(lambda ctx: ctx.same_as_input(0))
   .compute(lambda x: x / np.max(np.abs(x))))
(ob.register_custom_op("MyOp").framework_type(ob.Framework.ONNX).origin_op_type("MyOp")
   .imply_type(ob.ImplyType.TPU))
ob.register_kernel("MyOp").split("N", "H")   # wrong: the op reads the whole tensor
'''


def _onnx_model(path: Path) -> Path:
    """Conv -> MyOp (com.example) -> Relu, the scenario as a user's ONNX file."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(1).standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("MyOp", ["c"], ["m"], name="myop", domain="com.example"),
             helper.make_node("Relu", ["m"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
                              initializer=[numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]), str(path))
    return path


@requires_ort
def test_cli_per_layer_on_an_onnx_model_with_the_plugin(tmp_path: Path) -> None:
    """The user's view: ``opbridge validate model.onnx --plugin my_op.py --per-layer``;
    onnxruntime is the reference around MyOp (the model cut at it)."""
    model = _onnx_model(tmp_path / "m.onnx")
    (tmp_path / "my_op.py").write_text(PLUGIN)
    TARGET.save(tmp_path / "small.json")
    rep = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "opbridge", "validate", str(model), "--plugin",
                        str(tmp_path / "my_op.py"), "--target", str(tmp_path / "small.json"),
                        "--per-layer", "--report", str(rep)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "mode: per-layer" in r.stdout
    # MyOp's row names its own reference: onnxruntime never computed it
    assert any("myop" in line and "sim vs interp" in line for line in r.stdout.splitlines())
    data = json.loads(rep.read_text())
    fd = data["first_divergence"]
    assert (fd["node"], fd["candidate"], fd["inputs_matched"]) == ("myop", "simulator", ["c"])
    assert data["mode"] == "per-layer" and data["layers_without_framework_reference"] == ["myop"]
    refs = {(row["tensor"], row["candidate"]): (row["reference"], row["status"]) for row in data["rows"]}
    assert refs[("c", "simulator")][0] == "onnxruntime"
    assert refs[("c", "simulator")][1] in ("equal", "close", "similar")
    assert refs[("m", "simulator")] == ("interpreter", "different")
    assert refs[("y", "interpreter")][0] == "onnxruntime"  # Relu after MyOp has its reference


def test_a_given_program_is_compiled_again_in_the_per_layer_variant(norm_op: None) -> None:
    """validate_graph with an already compiled program (as ``opbridge demo`` passes one)."""
    from opbridge.validate.api import validate_graph

    g = _graph()
    r = validate_graph(g, _inputs(), program=ob.compile(g, TARGET), per_layer=True)
    assert r.mode == "per-layer" and r.program.target == TARGET
    fd = r.first_divergence
    assert fd is not None and (fd.node, fd.inputs_matched) == ("myop", ("conv",))


def test_per_layer_compile_keeps_the_real_tiling_and_stores_every_layer(norm_op: None) -> None:
    """The debugging variant is the real program's layer groups on the real tiling (batch items
    and row cuts), plus stores: a kernel that goes wrong on tiles goes wrong in both."""
    from opbridge.simulator import GroupUnit

    g = _graph()
    real, debug = ob.compile(g, TARGET), ob.compile(g, TARGET, per_layer=True)
    groups = [(u.nodes, u.n_per, u.k) for u in real.units if isinstance(u, GroupUnit)]
    assert groups and groups == [(u.nodes, u.n_per, u.k) for u in debug.units if isinstance(u, GroupUnit)]
    assert [u.outputs for u in real.units if isinstance(u, GroupUnit)] == [("relu",)]
    assert [u.outputs for u in debug.units if isinstance(u, GroupUnit)] == [("conv", "myop", "relu")]
