"""Custom ops: with tiling hints they join layer groups, without them they run as global
layers, and an op placed on the CPU runs on the host; shown with the example plugin."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.simulator import DEFAULT_KERNELS, GroupUnit

from .helpers import assert_close, audit_local_memory

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "examples" / "plugins" / "onnx_custom_ops.py"
KIB = 1024


def _model() -> onnx.ModelProto:
    """Conv -> com.example::FooScale -> Relu -> com.example::BarShift -> Relu."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (8, 3, 3, 3),
                           (rng.standard_normal(8 * 27) * 0.3).astype(np.float32).tolist())
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("FooScale", ["c"], ["f"], name="foo", domain="com.example", scale=2.0, bias=0.5),
        helper.make_node("Relu", ["f"], ["r"], name="relu"),
        helper.make_node("BarShift", ["r"], ["s"], name="bar", domain="com.example", shift=3),
        helper.make_node("Relu", ["s"], ["y"], name="relu2"),
    ]
    g = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])


@pytest.fixture(scope="module")
def graph() -> ob.Graph:
    return ob.convert(_model(), plugins=[str(PLUGIN)])


@pytest.fixture
def foo_kernel():
    """FooScale with tiling hints, registered like a plugin would, removed afterwards."""
    k = ob.register_kernel("FooScale").split("N", "H", "W").cost(lambda node, shape: 2.0 * np.prod(shape))
    yield k
    DEFAULT_KERNELS.remove("FooScale")


def _kind_of(prog: ob.Program, op: str) -> str:
    name = next(n.name for n in prog.graph.nodes if n.op == op)
    return next(u.CATEGORY for u in prog.units if name in u.nodes)


def _check(prog: ob.Program, g: ob.Graph) -> None:
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    ref = ob.interpret(g, {"x": x})
    out = prog.run({"x": x})
    for k in ref:
        assert_close(out[k], ref[k], k)
    audit_local_memory(prog)


def test_without_hints_runs_as_global_layer(graph):
    prog = ob.compile(graph, "bm1684")
    assert _kind_of(prog, "FooScale") == "global"
    _check(prog, graph)


def test_imply_type_cpu_runs_on_host(graph):
    prog = ob.compile(graph, "bm1684")
    assert _kind_of(prog, "BarShift") == "host"
    assert prog.profile().num_cpu_layers == 1
    _check(prog, graph)


@pytest.mark.parametrize("lmem_kib", [512, 2], ids=["lmem=512KiB", "lmem=2KiB"])
def test_with_hints_joins_a_layer_group(graph, foo_kernel, lmem_kib):
    prog = ob.compile(graph, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem_kib * KIB))
    assert _kind_of(prog, "FooScale") == "group"
    group = next(u for u in prog.groups if any(prog.graph.node(n).op == "FooScale" for n in u.nodes))
    assert "Conv" in [prog.graph.node(n).op for n in group.nodes]
    if lmem_kib == 2:
        assert group.tiles > 1
    _check(prog, graph)


def test_kernel_cpu_mark_and_placement_callable(graph):
    """``.cpu()`` on a kernel is a deprecated way to declare the op's placement on its
    definition: nodes created after it without a placement of their own run on the host."""
    reg = ob.simulator.KernelRegistry()
    for k in DEFAULT_KERNELS:
        reg._kernels[k.op] = k
    opdef = ob.ir.get_op("FooScale")
    try:
        with pytest.warns(DeprecationWarning, match=r'placement\("cpu"\)'):
            reg.register("FooScale").cpu()
        b = ob.GraphBuilder("foo")
        b.output(b.op("Relu", [b.op("FooScale", [b.input("x", "f32", (1, 3, 16, 16))], scale=2.0)]))
        foo = b.build()
    finally:
        opdef.placement("tpu")
    prog = ob.compile(foo, "bm1684", kernels=reg)
    assert _kind_of(prog, "FooScale") == "host"
    _check(prog, foo)
    prog2 = ob.compile(graph, "bm1684", placement=lambda node: "cpu" if node.op == "Relu" else None)
    assert _kind_of(prog2, "Relu") == "host"
    _check(prog2, graph)


def test_duplicate_kernel_registration_names_both_places(foo_kernel):
    with pytest.raises(ob.RegistryError, match="already registered at .*test_custom_ops.py"):
        ob.register_kernel("FooScale")


def test_bad_split_axis():
    with pytest.raises(ob.RegistryError, match="'D'"):
        ob.simulator.KernelRegistry().register("X").split("D")


def test_input_slice_halo_hint():
    """A plugin op with a 3-row window: its input_slice asks for one halo row on each side,
    its tile_attrs turn the rows that fall outside the tensor back into zero padding."""
    name = "SimTestBox3"
    (ob.define_op(name).input("x", "T").output("y", "T").type_param("T", ("f32",))
     .param("pad_top", "int", default=1, minimum=0).param("pad_bottom", "int", default=1, minimum=0)
     .shape_fn(lambda ctx: ctx.same_as_input(0))
     .compute(_box3))
    try:
        (ob.register_kernel(name).split("N", "H")
         .input_slice(lambda node, i, lo, hi: (lo - 1, hi + 1))
         .tile_attrs(lambda node, lo, hi, needed, clipped: {
             "pad_top": clipped[0][0] - needed[0][0], "pad_bottom": needed[0][1] - clipped[0][1]}))
        b = ob.GraphBuilder("box")
        x = b.input("x", "f32", (2, 4, 20, 5))
        b.output(b.op("Relu", [b.op(name, [b.op(name, [x])])]))
        g = b.build()
        # at 512 bytes a lane the three layers share one group of several tiles (at 256 the
        # first box fits with neither neighbour: alone, it would run as a global layer)
        prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=512))
        assert prog.num_tiles > len(prog.groups)
        assert all(isinstance(u, GroupUnit) for u in prog.units)
        feeds = {"x": np.random.default_rng(2).standard_normal((2, 4, 20, 5)).astype(np.float32)}
        want = _box3(_box3(feeds["x"], pad_top=1, pad_bottom=1), pad_top=1, pad_bottom=1)
        assert_close(next(iter(prog.run(feeds).values())), np.maximum(want, 0))
        audit_local_memory(prog)
    finally:
        DEFAULT_KERNELS.remove(name)
        ob.DEFAULT_OPS.remove(name)


def _box3(x: np.ndarray, *, pad_top: int, pad_bottom: int) -> np.ndarray:
    """Sum of each row with its two neighbours (zero padding given per side)."""
    p = np.pad(x, ((0, 0), (0, 0), (pad_top, pad_bottom), (0, 0)))
    return (p[:, :, :-2] + p[:, :, 1:-1] + p[:, :, 2:]).astype(x.dtype)


@pytest.mark.parametrize("hint", ["input_slice", "cost", "split_when"], ids=lambda h: f"hint={h}")
def test_failing_hint_names_node_and_registration(hint):
    def broken(*args):
        raise KeyError("oops")

    reg = ob.simulator.KernelRegistry()
    k = reg.register("Relu")
    if hint == "split_when":
        k.split_when(broken)
    else:
        k.split("N", "H", "W")
        getattr(k, hint)(broken)
    b = ob.GraphBuilder("broken")
    x = b.input("x", "f32", (1, 4, 8, 8))
    b.output(b.op("Relu", [x], name="act"))
    with pytest.raises(ob.SimulatorError, match=r"node 'act' \(Relu\).*registered at .*test_custom_ops.py"):
        ob.compile(b.build(), "bm1684", kernels=reg)
