"""The example plugin ``examples/plugins/row_box_filter.py`` end to end: an ONNX model with its
custom op converted with the plugin, compiled for a small local memory (its rows do not fit,
so the group is cut along W and the kernel gets a scratch buffer), run, and validated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.simulator import Compute
from opbridge.validate.api import validate_graph

from .helpers import assert_close, audit_local_memory

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "row_box_filter.py"
SHAPE = (1, 8, 2, 3000)


def _model(width: int | None) -> onnx.ModelProto:
    """Sigmoid -> com.example::RowBoxFilter -> Relu, on rows 3000 columns wide."""
    attrs = {} if width is None else {"width": width}
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
        helper.make_node("RowBoxFilter", ["s"], ["f"], name="blur", domain="com.example", **attrs),
        helper.make_node("Relu", ["f"], ["y"], name="relu"),
    ]
    g = helper.make_graph(nodes, "rows", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(SHAPE))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


def _reference(x: np.ndarray, width: int) -> np.ndarray:
    """A centred moving average with zero padding, row by row (numpy's convolve, 'same')."""
    s = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    kernel = np.ones(width) / width
    out = np.apply_along_axis(lambda row: np.convolve(row, kernel, mode="same"), -1, s)
    return np.maximum(out, 0).astype(np.float32)


@pytest.mark.parametrize("width", [None, 1, 7, 31], ids=["width=absent", "width=1", "width=7", "width=31"])
def test_row_box_filter_plugin_end_to_end(width, tmp_path):
    path = tmp_path / "rows.onnx"
    onnx.save(_model(width), path)
    g = ob.convert(str(path), plugins=[str(PLUGIN)])
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))
    blur = next(n for n in g.nodes if n.op == "RowBoxFilter")
    (group,) = [u for u in prog.groups if blur.name in u.nodes]
    assert group.kw > 1, "a row does not fit the lane: the group must be cut along W"
    assert f"scratch/{blur.name}" in group.alloc
    assert all(i.scratch is not None for i in prog.instrs if isinstance(i, Compute) and i.node == blur.name)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    out = prog.run({"x": x})[g.outputs[0].name]
    assert_close(out, _reference(x, 3 if width is None else width), "simulator vs numpy")
    audit_local_memory(prog)
    prog.save(tmp_path / "rows.obprog")
    again = ob.load_program(tmp_path / "rows.obprog")
    assert_close(again.run({"x": x})[g.outputs[0].name], out, "reloaded program")
    report = validate_graph(g, {"x": x}, framework="onnx", source=str(path), program=prog)
    assert report.passed, report.first_divergence


def test_row_box_filter_as_a_global_layer_gets_ddr_scratch():
    """With room for whole tensors it is still a local layer; placed as a global layer (no
    tiling: a kernel registry without its split) it gets its scratch buffer in DDR."""
    g = ob.convert(_model(5), plugins=[str(PLUGIN)])
    reg = ob.simulator.KernelRegistry()
    for k in ob.simulator.DEFAULT_KERNELS:
        reg._kernels[k.op] = k
    k = ob.simulator.DEFAULT_KERNELS.get("RowBoxFilter")
    assert k is not None
    glob = reg.register("RowBoxFilter", override=True).scratch(k.scratch_fn, per="tile").compute(k.compute_fn)
    assert not glob.local
    prog = ob.compile(g, kernels=reg)
    blur = next(n for n in g.nodes if n.op == "RowBoxFilter").name
    t = prog.ddr.tensors[f"scratch/{blur}"]
    assert t.region == "scratch" and t.nbytes >= SHAPE[0] * SHAPE[1] * SHAPE[2] * (SHAPE[3] + 5) * 8
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    assert_close(prog.run({"x": x})[g.outputs[0].name], _reference(x, 5))
