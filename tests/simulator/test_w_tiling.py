"""Layer groups cut along W: tensors whose single row (or few rows) do not fit the lane, so
that no row tiling fits and the compiler must cut the columns too, with each window op's
column halo and left / right pads, against onnxruntime (and, for a plugin, numpy written
from the op's definition)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.errors import RegistryError
from opbridge.ir.opdef import DEFAULT_OPS
from opbridge.simulator import DEFAULT_KERNELS, window_rows

from ..conftest import requires_ort
from .helpers import assert_close, audit_local_memory

#: one row of 8 channels (one per lane) x 3000 columns: 12 KB a lane, 4 KiB of local memory
ROW = (1, 8, 1, 3000)
#: three rows x 2000 columns, two batch items
FEW_ROWS = (2, 8, 3, 2000)
LMEM = 4096


def _model(nodes: list[onnx.NodeProto], shape: tuple[int, ...],
           inits: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "wide", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits or [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)


def _weights(cout: int, cin: int, kh: int, kw: int) -> onnx.TensorProto:
    w = np.random.default_rng(3).standard_normal((cout, cin, kh, kw)).astype(np.float32) * 0.3
    return helper.make_tensor("w", TensorProto.FLOAT, w.shape, w.ravel().tolist())


def _check(model: onnx.ModelProto, shape: tuple[int, ...], tmp_path, lmem: int = LMEM) -> ob.Program:
    """Compile at ``lmem``, check the groups are cut along W, run against onnxruntime, and
    again after a save / load round trip."""
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    prog = ob.compile(ob.convert(model), ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))
    assert prog.groups and all(u.kw > 1 for u in prog.groups), [u.CATEGORY for u in prog.units]
    assert_close(prog.run({"x": x})["y"], want, "simulator vs onnxruntime")
    audit_local_memory(prog)
    prog.save(tmp_path / "wide.obprog")
    again = ob.load_program(tmp_path / "wide.obprog")
    assert_close(again.run({"x": x})["y"], want, "reloaded program vs onnxruntime")
    return prog


CONV = [
    pytest.param((3, 1, 1, (1, 1, 1, 1)), id="k=3,pads=1"),
    pytest.param((3, 2, 1, (1, 1, 1, 1)), id="k=3,s=2"),
    pytest.param((5, 1, 2, (2, 4, 2, 4)), id="k=5,d=2"),
    pytest.param((3, 3, 1, (1, 2, 1, 0)), id="k=3,s=3,pads=1,2,1,0"),
    pytest.param((1, 1, 1, (0, 0, 0, 0)), id="k=1"),
    pytest.param((3, 1, 1, None), id="pads=absent"),
]


@requires_ort
@pytest.mark.parametrize("shape", [pytest.param(ROW, id="one-row"), pytest.param(FEW_ROWS, id="few-rows")])
@pytest.mark.parametrize("geometry", CONV)
@pytest.mark.parametrize("group", [1, 8])
def test_conv_cut_along_w(geometry, shape, group, tmp_path):
    k, s, d, pads = geometry
    attrs: dict = {"kernel_shape": [1 if shape[2] == 1 else k, k], "strides": [1, s],
                   "dilations": [1, d], "group": group}
    if pads is not None:
        attrs["pads"] = [0 if shape[2] == 1 else pads[0], pads[1], 0 if shape[2] == 1 else pads[2], pads[3]]
    kh = attrs["kernel_shape"][0]
    node = helper.make_node("Conv", ["x", "w"], ["c"], name="conv", **attrs)
    relu = helper.make_node("Relu", ["c"], ["y"], name="relu")
    _check(_model([node, relu], shape, [_weights(8, 8 // group, kh, k)]), shape, tmp_path)


POOLS = [
    pytest.param("MaxPool", {"kernel_shape": [1, 3], "strides": [1, 2], "pads": [0, 1, 0, 1]},
                 id="max,k=3,s=2"),
    pytest.param("MaxPool", {"kernel_shape": [1, 3], "strides": [1, 2], "ceil_mode": 1,
                             "pads": [0, 0, 0, 1]}, id="max,ceil"),
    pytest.param("MaxPool", {"kernel_shape": [1, 3], "strides": [1, 1], "dilations": [1, 2]},
                 id="max,d=2"),
    pytest.param("AveragePool", {"kernel_shape": [1, 5], "strides": [1, 3], "pads": [0, 2, 0, 1]},
                 id="avg,k=5,s=3"),
    pytest.param("AveragePool", {"kernel_shape": [1, 3], "strides": [1, 2], "pads": [0, 1, 0, 1],
                                 "count_include_pad": 1}, id="avg,count_include_pad"),
    pytest.param("AveragePool", {"kernel_shape": [1, 3], "strides": [1, 2], "ceil_mode": 1},
                 id="avg,ceil"),
    pytest.param("LpPool", {"kernel_shape": [1, 3], "strides": [1, 2], "p": 2}, id="lp"),
]


@requires_ort
@pytest.mark.parametrize(("op", "attrs"), POOLS)
def test_pool_cut_along_w(op, attrs, tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node(op, ["r"], ["y"], name="pool", **attrs)]
    _check(_model(nodes, ROW), ROW, tmp_path)


@requires_ort
def test_conv_pool_chain_two_dimensional_tiles(tmp_path):
    """Rows and columns both cut: a 3x3 conv, a ceil-mode max pool and a count-pad average."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], ceil_mode=1),
        helper.make_node("AveragePool", ["p"], ["y"], name="apool", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 0, 1, 1], count_include_pad=1),
    ]
    prog = _check(_model(nodes, FEW_ROWS, [_weights(8, 8, 3, 3)]), FEW_ROWS, tmp_path)
    assert any(u.k > 1 and u.kw > 1 for u in prog.groups)
    assert prog.format_version() == 3


@requires_ort
def test_elementwise_with_constant_cut_along_w(tmp_path):
    """An Add of a (1, C, 1, W) constant reads the constant at the tile's columns. At 16 KiB a
    lane the Add and the Sigmoid share a group cut along W (at 4 KiB each would be a group of
    its own, which runs as a global layer)."""
    b = np.random.default_rng(5).standard_normal((1, 8, 1, ROW[3])).astype(np.float32)
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="add"),
             helper.make_node("Sigmoid", ["a"], ["y"], name="sig")]
    init = helper.make_tensor("b", TensorProto.FLOAT, b.shape, b.ravel().tolist())
    _check(_model(nodes, ROW, [init]), ROW, tmp_path, lmem=16384)


@requires_ort
def test_op_that_cannot_be_cut_along_w_stays_global():
    """Softmax over W cannot be cut along W: too wide for a tile, it runs as a global layer."""
    import onnxruntime as ort

    m = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=3)], ROW)
    x = np.random.default_rng(0).standard_normal(ROW).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    prog = ob.compile(ob.convert(m), ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM))
    assert not prog.groups
    assert_close(prog.run({"x": x})["y"], want)


def test_programs_without_column_cuts_stay_version_2():
    """A program that fits with row cuts only uses no field of version 3."""
    b = ob.GraphBuilder("narrow")
    x = b.input("x", "f32", (1, 8, 64, 16))
    b.output(b.op("Relu", [b.op("Sigmoid", [x])]))
    prog = ob.compile(b.build(), ob.Target.preset("bm1684", lmem_bytes_per_lane=1024))
    assert prog.groups and all(u.kw == 1 for u in prog.groups) and any(u.k > 1 for u in prog.groups)
    assert prog.format_version() == 2
    text = json.dumps(prog.to_json())
    assert '"w":' not in text and '"kw":' not in text


# -- a plugin that declares W tiling ----------------------------------------------------------

def _hsum(x: np.ndarray, *, width: int) -> np.ndarray:
    """Sum of ``width`` neighbouring columns (valid windows only): output column j sums input
    columns [j, j + width)."""
    w = x.shape[3] - width + 1
    return sum(x[..., i:i + w] for i in range(width))


@pytest.fixture
def hsum_op():
    if "TestHSum" not in DEFAULT_OPS:
        (ob.define_op("TestHSum").input("x", "T").output("y", "T").param("width", "int", minimum=1)
         .type_param("T", allowed=("f32",))
         .shape_fn(lambda ctx: ((*ctx.input_shape(0)[:3], ctx.input_shape(0)[3] - ctx.attr("width") + 1),
                                ctx.input_dtype(0)))
         .compute(_hsum))
    k = (ob.register_kernel("TestHSum").split("N", "H", "W")
         .input_slice(lambda node, i, lo, hi: window_rows(lo, hi, node.attrs["width"], 1, 1, 0), axis="W"))
    yield k
    DEFAULT_KERNELS.remove("TestHSum")


def test_plugin_declaring_w_is_cut_along_w(hsum_op):
    b = ob.GraphBuilder("hsum")
    x = b.input("x", "f32", ROW)
    b.output(b.op("Relu", [b.op("TestHSum", [b.op("Relu", [x])], width=7)]))
    g = b.build()
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=LMEM))
    assert len(prog.groups) == 1 and prog.groups[0].kw > 1
    xv = np.random.default_rng(2).standard_normal(ROW).astype(np.float32)
    # numpy of the op's definition, written here: a running window sum along W
    c = np.concatenate([np.zeros(ROW[:3] + (1,), np.float32), np.cumsum(np.maximum(xv, 0), axis=3)], axis=3)
    want = np.maximum(c[..., 7:] - c[..., :-7], 0)
    assert_close(prog.run({"x": xv})[g.outputs[0].name], want)
    audit_local_memory(prog)


def test_bad_slice_axis_is_a_registry_error():
    with pytest.raises(RegistryError, match="not H or W"):
        ob.register_kernel("TestBadAxis").input_slice(lambda *a: None, axis="C")
    DEFAULT_KERNELS.remove("TestBadAxis")


@requires_ort
def test_concat_of_channels_cut_along_w(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Sigmoid", ["x"], ["b"], name="sig"),
             helper.make_node("Concat", ["a", "b"], ["c"], name="cat", axis=1),
             helper.make_node("Tanh", ["c"], ["y"], name="tanh")]
    prog = _check(_model(nodes, ROW), ROW, tmp_path)
    assert any("cat" in u.nodes for u in prog.groups)


@requires_ort
def test_column_tiles_are_double_buffered_when_they_fit(tmp_path):
    """With room for two buffers per loaded and stored tensor, the column tiles pipeline."""
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    prog = _check(_model(nodes, ROW), ROW, tmp_path, lmem=8192)
    assert any(u.double_buffered and u.kw > 1 for u in prog.groups)
