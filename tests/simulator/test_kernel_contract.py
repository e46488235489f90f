"""The rest of the kernel contract: scratch buffers handed to the kernel (local memory for a
tile, DDR for a global layer, bmcompiler's ``get_local_buffer_size`` /
``get_global_buffer_size``) and kernel variants picked by dtype (TIM-VX, MagicMind)."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import RegistryError, SimulatorError
from opbridge.ir.opdef import DEFAULT_OPS
from opbridge.simulator import DEFAULT_KERNELS, Compute, GlobalOp

from .helpers import assert_close, audit_local_memory

SHAPE = (1, 8, 16, 16)


@pytest.fixture
def double_op():
    """A plugin op ``2 * x`` over f32, f16 and i32; the kernel is registered by each test."""
    if "TestDouble" not in DEFAULT_OPS:
        (ob.define_op("TestDouble").input("x", "T").output("y", "T")
         .type_param("T", allowed=("f32", "f16", "i32"))
         .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(lambda x: x * x.dtype.type(2)))
    yield
    DEFAULT_KERNELS.remove("TestDouble")


def _graph(dtype: str = "f32") -> ob.Graph:
    b = ob.GraphBuilder("contract")
    x = b.input("x", dtype, SHAPE)
    b.output(b.op("TestDouble", [b.op("Relu", [x])]))
    return b.build()


def _feeds(dtype: str = "f32") -> dict[str, np.ndarray]:
    x = np.random.default_rng(0).standard_normal(SHAPE) * 4
    return {"x": x.astype({"f32": np.float32, "f16": np.float16, "i32": np.int32}[dtype])}


def _scratch_compute(seen: list[np.ndarray]):
    """A kernel that computes 2 * x through its scratch buffer (as float32)."""
    def compute(x: np.ndarray, *, scratch: np.ndarray) -> np.ndarray:
        seen.append(scratch)
        tmp = scratch[: x.size * 4].view(np.float32).reshape(x.shape)
        np.multiply(x, 2, out=tmp)
        return tmp.copy()

    return compute


PER_LANE = 4 * 16 * 16  # a float32 plane of one channel (one channel per lane)


def test_scratch_of_a_tile_is_local_memory(double_op, tmp_path):
    seen: list[np.ndarray] = []
    (ob.register_kernel("TestDouble").split("N", "H", "W")
     .scratch(lambda node, shape: shape[0] * shape[2] * shape[3] * 4).compute(_scratch_compute(seen)))
    g = _graph()
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=2048))
    (group,) = prog.groups
    assert group.k > 1
    node = next(n for n in g.nodes if n.op == "TestDouble").name
    alloc = group.alloc[f"scratch/{node}"]
    computes = [i for i in prog.instrs if isinstance(i, Compute) and i.node == node]
    assert computes and all(i.scratch == (alloc.addr, alloc.addr + alloc.size) for i in computes)
    want = ob.interpret(g, _feeds())
    assert_close(prog.run(_feeds())[g.outputs[0].name], want[g.outputs[0].name])
    audit_local_memory(prog)
    assert seen and all(s.dtype == np.uint8 and s.size == alloc.size * prog.target.lanes for s in seen)
    # the buffer is a view of the simulator's local memory, not a fresh array
    assert all(s.base is not None for s in seen)
    prog.save(tmp_path / "s.obprog")
    assert_close(ob.load_program(tmp_path / "s.obprog").run(_feeds())[g.outputs[0].name],
                 want[g.outputs[0].name])


def test_scratch_of_a_global_layer_is_ddr(double_op, tmp_path):
    seen: list[np.ndarray] = []
    ob.register_kernel("TestDouble").scratch(lambda node, shape: PER_LANE).compute(_scratch_compute(seen))
    g = _graph()
    prog = ob.compile(g)
    node = next(n for n in g.nodes if n.op == "TestDouble").name
    (op,) = [i for i in prog.instrs if isinstance(i, GlobalOp) and i.node == node]
    assert op.scratch == f"scratch/{node}"
    t = prog.ddr.tensors[op.scratch]
    assert t.region == "scratch" and t.nbytes == PER_LANE * prog.target.lanes
    want = ob.interpret(g, _feeds())[g.outputs[0].name]
    assert_close(prog.run(_feeds())[g.outputs[0].name], want)
    assert seen and seen[0].size == t.nbytes and seen[0].dtype == np.uint8
    assert prog.format_version() == 3
    prog.save(tmp_path / "g.obprog")
    assert_close(ob.load_program(tmp_path / "g.obprog").run(_feeds())[g.outputs[0].name], want)


def _variants(calls: list[str]):
    def f32(x):
        calls.append("f32")
        return x * np.float32(2)

    def f16_into(out, x):
        calls.append("f16")
        np.multiply(x, np.float16(2), out=out)

    return f32, f16_into


@pytest.mark.parametrize("local", [True, False], ids=["tile", "global"])
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_variant_picked_by_dtype(double_op, dtype, local):
    calls: list[str] = []
    f32, f16_into = _variants(calls)
    k = ob.register_kernel("TestDouble").compute(f32, dtype="f32").compute_into(f16_into, dtype=["f16"])
    if local:
        k.split("N", "H", "W")
    g = _graph(dtype)
    prog = ob.compile(g, "bm1684x")  # a target with f16 arithmetic
    node = next(n for n in g.nodes if n.op == "TestDouble").name
    assert any(node in u.nodes for u in prog.groups) == local
    want = ob.interpret(g, _feeds(dtype))[g.outputs[0].name]
    got = prog.run(_feeds(dtype))[g.outputs[0].name]
    assert got.dtype == want.dtype
    assert_close(got.astype(np.float32), want.astype(np.float32))
    assert calls and set(calls) == {dtype}


def test_missing_variant_is_a_compile_error(double_op):
    f32, f16_into = _variants([])
    ob.register_kernel("TestDouble").split("N", "H", "W").compute(f32, dtype="f32").compute_into(
        f16_into, dtype="f16")
    with pytest.raises(SimulatorError, match=r"\(TestDouble\).*no variant for dtype i32; it has f16, f32"):
        ob.compile(_graph("i32"))


def test_dtype_less_kernel_covers_the_other_dtypes(double_op):
    calls: list[str] = []
    f32, _ = _variants(calls)
    ob.register_kernel("TestDouble").compute(f32, dtype="f32").compute(
        lambda x: (calls.append("any"), x * x.dtype.type(2))[1])
    g = _graph("i32")
    got = ob.compile(g).run(_feeds("i32"))[g.outputs[0].name]
    np.testing.assert_array_equal(got, ob.interpret(g, _feeds("i32"))[g.outputs[0].name])
    assert calls == ["any"]


def test_unknown_variant_dtype_is_a_registry_error():
    with pytest.raises(RegistryError, match="dtype 'float99'"):
        ob.register_kernel("TestBadDtype").compute(lambda x: x, dtype="float99")
    DEFAULT_KERNELS.remove("TestBadDtype")


def test_scratch_on_the_host(double_op):
    """A host-placed op's kernel gets its scratch buffer in host memory."""
    seen: list[np.ndarray] = []
    ob.register_kernel("TestDouble").scratch(lambda node, shape: PER_LANE).compute(_scratch_compute(seen))
    g = _graph()
    prog = ob.compile(g, placement=lambda n: "cpu" if n.op == "TestDouble" else None)
    assert prog.profile().num_cpu_layers == 1
    assert_close(prog.run(_feeds())[g.outputs[0].name], ob.interpret(g, _feeds())[g.outputs[0].name])
    assert seen and seen[0].size == PER_LANE * prog.target.lanes


@pytest.fixture
def gain_op():
    """``y = x * mean(g, axis=1)`` per channel: ``g`` is (C, K), too big to stay in a lane whole."""
    if "TestGain" not in DEFAULT_OPS:
        (ob.define_op("TestGain").input("x", "T").input("g", "T").output("y", "T")
         .type_param("T", allowed=("f32",)).shape_fn(lambda ctx: ctx.same_as_input(0))
         .compute(lambda x, g: x * g.mean(axis=1, dtype=np.float32)[None, :, None, None]))
    yield
    DEFAULT_KERNELS.remove("TestGain")


def test_scratch_of_a_streamed_layer_is_local_memory(gain_op):
    seen: list[np.ndarray] = []

    def tile(x, g, *, scratch):
        seen.append(scratch)
        m = scratch[: g.shape[0] * 4].view(np.float32)
        np.mean(g, axis=1, dtype=np.float32, out=m)
        return x * m[None, :, None, None]

    (ob.register_kernel("TestGain").split("N", "C", "H")
     .channel_slice(lambda node, i, c0, c1: (1, c0, c1) if i == 0 else (0, c0, c1))
     .scratch(lambda node, shape: shape[1] * 4, per="tile").compute(tile))
    b = ob.GraphBuilder("gain")
    x = b.input("x", "f32", (1, 1024, 8, 8))
    gv = np.random.default_rng(4).standard_normal((1024, 64)).astype(np.float32)
    b.output(b.op("TestGain", [x, b.constant("g", gv)]))
    g = b.build()
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))
    (unit,) = prog.units
    assert isinstance(unit, ob.simulator.StreamUnit) and unit.chunks > 1
    node = g.nodes[0].name
    assert f"scratch/{node}" in unit.alloc
    feeds = {"x": np.random.default_rng(5).standard_normal((1, 1024, 8, 8)).astype(np.float32)}
    assert_close(prog.run(feeds)[g.outputs[0].name], ob.interpret(g, feeds)[g.outputs[0].name])
    assert len(seen) == unit.tiles
    audit_local_memory(prog)
