"""The int8 tile kernels on their own: ConvInteger (i8 x i8 -> i32) against onnx.reference,
Requantize against exact rational arithmetic; then integer CNNs cut into tiles by a small
local memory, batch 1 and 4, whose simulator output equals the interpreter's bit for bit."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.ir.ops.quant import quantize_multiplier
from opbridge.simulator import GlobalOp, GlobalUnit, GroupUnit, Load, StreamUnit
from opbridge.simulator.kernels.quant import conv_integer_into, requantize_into

from .helpers import audit_local_memory

NP = {"i8": np.int8, "u8": np.uint8}


def _rand(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(NP[dtype])
    return rng.integers(info.min, info.max + 1, shape).astype(NP[dtype])


def _onnx_conv_integer(x, w, xzp, wzp, attrs) -> np.ndarray:
    names = ["x", "w", "xzp" if xzp is not None else "", "wzp" if wzp is not None else ""]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("ConvInteger", names, ["y"], pads=list(attrs["pads"]),
                            strides=list(attrs["strides"]), dilations=list(attrs["dilations"]),
                            group=attrs["group"])
    feeds = {"x": x, "w": w}
    if xzp is not None:
        feeds["xzp"] = xzp
    if wzp is not None:
        feeds["wzp"] = wzp
    return ReferenceEvaluator(node).run(None, feeds)[0]


CONV_CASES = {
    "3x3-pad1-i8": dict(x=(1, 5, 9, 11), w=(7, 5, 3, 3), pads=(1, 1, 1, 1), dt="i8"),
    "3x3-stride2-dil2-u8": dict(x=(2, 4, 13, 10), w=(6, 4, 3, 3), strides=(2, 2),
                                dilations=(2, 2), pads=(2, 0, 1, 3), dt="u8"),
    "1x1-batch4": dict(x=(4, 16, 5, 6), w=(8, 16, 1, 1), dt="i8"),
    "5x3-asym-pads": dict(x=(1, 3, 12, 7), w=(4, 3, 5, 3), pads=(0, 2, 3, 1), dt="i8"),
    "zero-points-absent": dict(x=(1, 3, 6, 6), w=(2, 3, 3, 3), pads=(1, 1, 1, 1), dt="i8",
                               no_zp=True),
}


@pytest.mark.parametrize("case", list(CONV_CASES), ids=list(CONV_CASES))
def test_conv_integer_tile_kernel_matches_onnx_reference(case: str) -> None:
    c = CONV_CASES[case]
    rng = np.random.default_rng(len(case))
    dt = c["dt"]
    x, w = _rand(rng, dt, c["x"]), _rand(rng, dt, c["w"])
    xzp = None if c.get("no_zp") else _rand(rng, dt, ())
    wzp = None if c.get("no_zp") else _rand(rng, dt, ())
    attrs = dict(group=1, kernel_shape=c["w"][2:], strides=c.get("strides", (1, 1)),
                 dilations=c.get("dilations", (1, 1)), pads=c.get("pads", (0, 0, 0, 0)))
    want = _onnx_conv_integer(x, w, xzp, wzp, attrs)
    out = np.full(want.shape, 12345, np.int32)
    conv_integer_into(out, x, w, xzp, wzp, **attrs)
    np.testing.assert_array_equal(out, want)


def test_conv_integer_per_channel_weight_zero_point() -> None:
    """A per-output-channel w_zero_point, checked channel by channel against onnx.reference
    with that channel's scalar zero point."""
    rng = np.random.default_rng(3)
    x, w = _rand(rng, "i8", (2, 4, 8, 8)), _rand(rng, "i8", (5, 4, 3, 3))
    xzp, wzp = np.array(-3, np.int8), _rand(rng, "i8", (5,))
    attrs = dict(group=1, kernel_shape=(3, 3), strides=(1, 1), dilations=(1, 1), pads=(1, 1, 1, 1))
    out = np.zeros((2, 5, 8, 8), np.int32)
    conv_integer_into(out, x, w, xzp, wzp, **attrs)
    for m in range(5):
        want = _onnx_conv_integer(x, w[m:m + 1], xzp, wzp[m], attrs)
        np.testing.assert_array_equal(out[:, m:m + 1], want, err_msg=f"channel {m}")


def _requantize_exact(acc: int, mult: int, shift: int, zp: int, lo: int, hi: int) -> int:
    """The contract's formula on Python integers: round half away from zero of the exact
    rational acc * mult / 2**(31 + shift), plus the zero point, saturated."""
    r = Fraction(acc * mult) / Fraction(2) ** (31 + shift)
    q = int(abs(r) + Fraction(1, 2))  # floor(|r| + 1/2): halves away from zero
    q = q if r >= 0 else -q
    return max(lo, min(hi, q + zp))


REQ_CASES = {
    "per-tensor-i8": dict(scale=[3.1e-3], zp=[5], dt="i8"),
    "per-channel-i8": dict(scale=[1e-4, 2.5e-3, 0.75, 1.0 / 1024], zp=[0, -7, 3, 1], dt="i8"),
    "per-channel-u8": dict(scale=[2e-3, 1e-2, 4e-4, 9e-3], zp=[128, 0, 255, 17], dt="u8"),
    "scale-above-1": dict(scale=[3.0, 1.5, 40.0, 0.5], zp=[0, 0, 0, 0], dt="i8"),
    "zero-point-absent": dict(scale=[7e-3], zp=None, dt="i8"),
}


@pytest.mark.parametrize("case", list(REQ_CASES), ids=list(REQ_CASES))
def test_requantize_kernel_matches_exact_rational(case: str) -> None:
    c = REQ_CASES[case]
    rng = np.random.default_rng(7)
    mult, shift = quantize_multiplier(np.array(c["scale"]))
    ch = mult.size
    acc = rng.integers(-2**20, 2**20, (2, ch, 3, 5)).astype(np.int32)
    acc[0, :, 0, :4] = [1 << 10, -(1 << 10), 0, 2**31 - 1]  # powers of two give exact ties
    acc[1, :, 0, :2] = [-2**31, 1]
    zp = None if c["zp"] is None else np.array(c["zp"], NP[c["dt"]])
    out = np.zeros(acc.shape, NP[c["dt"]])
    requantize_into(out, acc, mult, shift, zp, axis=1, output_dtype=c["dt"])
    lo, hi = np.iinfo(NP[c["dt"]]).min, np.iinfo(NP[c["dt"]]).max
    for idx in np.ndindex(acc.shape):
        k = idx[1] if ch > 1 else 0
        z = 0 if zp is None else int(zp[k if zp.size > 1 else 0])
        want = _requantize_exact(int(acc[idx]), int(mult[k]), int(shift[k]), z, lo, hi)
        assert int(out[idx]) == want, f"{idx}: acc {acc[idx]} -> {out[idx]}, want {want}"


# -- integer CNNs on tiles ----------------------------------------------------------------------
def _requant(b: ob.GraphBuilder, acc: ob.Value, name: str, scales: np.ndarray, zp: int) -> ob.Value:
    m, s = quantize_multiplier(scales)
    return b.op("Requantize", [acc, b.constant(f"{name}_m", m), b.constant(f"{name}_s", s),
                               b.constant(f"{name}_zp", np.array(zp, np.int8))],
                axis=1, output_dtype="i8")


def int8_cnn(n: int, c: int, h: int, w: int, seed: int = 0) -> ob.Graph:
    """f32 -> QuantizeLinear -> ConvInteger + i32 bias -> Requantize (per channel) -> Relu ->
    MaxPool -> ConvInteger (stride 2) + bias -> Requantize -> Concat with a pooled branch ->
    DequantizeLinear: every integer op of the contract in one chain."""
    rng = np.random.default_rng(seed)
    b = ob.GraphBuilder("int8_cnn")
    x = b.input("x", "f32", (n, c, h, w))
    q = b.op("QuantizeLinear", [x, b.constant("sx", np.array(0.05, np.float32)),
                                b.constant("zx", np.array(-3, np.int8))], output_dtype="i8")
    w1 = b.constant("w1", _rand(rng, "i8", (16, c, 3, 3)))
    a1 = b.op("ConvInteger", [q, w1, b.constant("zx1", np.array(-3, np.int8))], pads=(1, 1, 1, 1))
    a1 = b.op("Add", [a1, b.constant("b1", rng.integers(-4000, 4000, (1, 16, 1, 1)).astype(np.int32))])
    y1 = b.op("Relu", [_requant(b, a1, "r1", rng.uniform(2e-4, 8e-4, 16), 0)])
    p1 = b.op("MaxPool", [y1], kernel_shape=(2, 2), strides=(2, 2))
    w2 = b.constant("w2", _rand(rng, "i8", (8, 16, 3, 3)))
    a2 = b.op("ConvInteger", [p1, w2], pads=(1, 1, 1, 1))
    a2 = b.op("Add", [a2, b.constant("b2", rng.integers(-4000, 4000, (1, 8, 1, 1)).astype(np.int32))])
    y2 = _requant(b, a2, "r2", rng.uniform(1e-4, 4e-4, 8), 2)
    cat = b.op("Concat", [y2, b.op("MaxPool", [p1], kernel_shape=(3, 3), strides=(1, 1),
                                   pads=(1, 1, 1, 1))], axis=1)
    b.output(b.op("DequantizeLinear", [cat, b.constant("sy", np.array(0.1, np.float32)),
                                       b.constant("zy", np.array(2, np.int8))]))
    return b.build()


SHAPES = {"c3-32x32": (3, 32, 32), "c8-27x19": (8, 27, 19), "c70-24x22": (70, 24, 22)}


@pytest.mark.parametrize("batch", [1, 4], ids=["n=1", "n=4"])
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_int8_cnn_on_tiles_equals_interpreter(shape: str, batch: int) -> None:
    c, h, w = SHAPES[shape]
    g = int8_cnn(batch, c, h, w, seed=batch)
    feeds = {"x": np.random.default_rng(1).normal(0, 2.0, (batch, c, h, w)).astype(np.float32)}
    want = ob.interpret(g, feeds, keep_intermediates=True)
    prog = ob.compile(g, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=4096), per_layer=True)
    got = prog.run(feeds, keep_intermediates=True)
    # at 70 channels the QuantizeLinear fits no tiling with the layers after it: a group of
    # its own, which runs as a global layer (a one-op group, as TPU-MLIR runs it)
    assert {u.op for u in prog.units if isinstance(u, GlobalUnit)} <= {"QuantizeLinear"}, prog.units
    assert any(isinstance(u, GroupUnit) and "quantizelinear_1" in u.nodes for u in prog.units) == (c < 70)
    groups = [u for u in prog.units if isinstance(u, GroupUnit)]
    assert sum(u.tiles for u in groups) > len(groups), "the small local memory should force tiling"
    assert audit_local_memory(prog) > 0
    for name, v in want.items():
        if name in g.constants or name == "x":
            continue
        assert name in got, name
        np.testing.assert_array_equal(got[name], v, err_msg=name)
        assert got[name].dtype == v.dtype, name


def _run_both(g: ob.Graph, feeds: dict[str, np.ndarray], lmem: int) -> ob.Program:
    want = ob.interpret(g, feeds)
    prog = ob.compile(g, target=ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem))
    got = prog.run(feeds)
    for name, v in want.items():
        np.testing.assert_array_equal(got[name], v, err_msg=name)
    return prog


@pytest.mark.parametrize("batch", [1, 4], ids=["n=1", "n=4"])
def test_matmul_integer_rows_tiled_then_reshaped(batch: int) -> None:
    """MatMulInteger (rank 4, constant B with per-column zero points) tiles along A's rows,
    Requantize per tensor after it, and an int8 Reshape shares the bytes."""
    rng = np.random.default_rng(5)
    b = ob.GraphBuilder("mmi")
    a = b.input("a", "u8", (batch, 1, 96, 40))
    acc = b.op("MatMulInteger", [a, b.constant("b", _rand(rng, "i8", (40, 24))),
                                 b.constant("za", np.array(128, np.uint8)),
                                 b.constant("zb", _rand(rng, "i8", (24,)))])
    m, s = quantize_multiplier(np.array([2e-3]))
    y = b.op("Requantize", [acc, b.constant("m", m), b.constant("s", s)], output_dtype="i8")
    b.output(b.op("Reshape", [y], shape=(batch, 96 * 24)))
    g = b.build()
    prog = _run_both(g, {"a": _rand(rng, "u8", (batch, 1, 96, 40))}, 2048)
    (group,) = [u for u in prog.units if isinstance(u, GroupUnit)]
    assert [g.node(n).op for n in group.nodes] == ["MatMulInteger", "Requantize"] and group.tiles > 1
    (reshape,) = [i for i in prog.instrs if isinstance(i, GlobalOp)]
    assert reshape.alias and reshape.bytes == 0


@pytest.mark.parametrize("batch", [1, 8], ids=["n=1", "n=8"])
def test_conv_integer_too_big_for_a_tile_streams_channel_chunks(batch: int) -> None:
    """A ConvInteger whose weights fit no tile streams in chunks of output channels, each with
    its rows of the weights and of the per-channel weight zero point; batch items go in whole
    groups of four (the 4N layout)."""
    rng = np.random.default_rng(9)
    b = ob.GraphBuilder("stream")
    x = b.input("x", "i8", (batch, 64, 12, 12))
    b.output(b.op("ConvInteger", [x, b.constant("w", _rand(rng, "i8", (256, 64, 3, 3))),
                                  b.constant("zx", np.array(7, np.int8)),
                                  b.constant("zw", _rand(rng, "i8", (256,)))], pads=(1, 1, 1, 1)))
    prog = _run_both(b.build(), {"x": _rand(rng, "i8", (batch, 64, 12, 12))}, 2048)
    (stream,) = [u for u in prog.units if isinstance(u, StreamUnit)]
    assert stream.chunks > 1
    assert all(i.n[0] % 4 == 0 for i in prog.instrs if isinstance(i, Load) and i.tensor == "x")


def test_depthwise_conv_integer_on_tiles() -> None:
    """A grouped (depthwise) ConvInteger runs the op's own compute on each tile, with the
    tile's edge pads; its output equals the interpreter's."""
    rng = np.random.default_rng(2)
    b = ob.GraphBuilder("dw")
    x = b.input("x", "u8", (4, 32, 30, 18))
    y = b.op("ConvInteger", [x, b.constant("w", _rand(rng, "u8", (32, 1, 3, 3))),
                             b.constant("zx", np.array(100, np.uint8)),
                             b.constant("zw", np.array(120, np.uint8))],
             group=32, pads=(1, 1, 1, 1), strides=(2, 1))
    b.output(b.op("Identity", [y]))  # alone, a one-op group, it would run as a global layer
    prog = _run_both(b.build(), {"x": _rand(rng, "u8", (4, 32, 30, 18))}, 2048)
    assert prog.profile().num_tiles > 1 and prog.profile().num_global_layers == 0


def test_matmul_integer_with_a_zero_point_per_row_keeps_rows_whole() -> None:
    """A per-row a_zero_point is held whole, so a tile takes every row of A (batch items may
    still be split) and the result equals the interpreter's. An i32 bias Add follows it (alone
    it would be a one-op group, run as a global layer); at 96 KiB a lane the two split the batch."""
    rng = np.random.default_rng(6)
    b = ob.GraphBuilder("mmi_rows")
    a = b.input("a", "u8", (8, 1, 96, 40))
    y = b.op("MatMulInteger", [a, b.constant("b", _rand(rng, "i8", (40, 24))),
                               b.constant("za", _rand(rng, "u8", (96,)))])
    b.output(b.op("Add", [y, b.constant("bias", np.arange(24, dtype=np.int32))]))
    prog = _run_both(b.build(), {"a": _rand(rng, "u8", (8, 1, 96, 40))}, 96 * 1024)
    loads = [i for i in prog.instrs if isinstance(i, Load) and i.tensor == "a"]
    assert len(loads) > 1 and all(i.h == (0, 96) for i in loads)
    assert prog.profile().num_global_layers == 0


@pytest.mark.parametrize("axis", [1, 2, 3], ids=["axis=C", "axis=H", "axis=W"])
def test_per_axis_quantize_dequantize_on_tiles(axis: int) -> None:
    """QuantizeLinear / DequantizeLinear with per-axis scales and zero points: a tile never
    cuts the axis they run along (they are held whole), and the result is the interpreter's."""
    rng = np.random.default_rng(axis)
    shape = (4, 8, 24, 20)
    b = ob.GraphBuilder("qdq_axis")
    x = b.input("x", "f32", shape)
    d = shape[axis]
    q = b.op("QuantizeLinear", [x, b.constant("s", rng.uniform(0.01, 0.1, d).astype(np.float32)),
                                b.constant("z", _rand(rng, "i8", (d,)))], axis=axis, output_dtype="i8")
    b.output(b.op("DequantizeLinear", [q, b.constant("s2", rng.uniform(0.01, 0.1, d).astype(np.float32)),
                                       b.constant("z2", _rand(rng, "i8", (d,)))], axis=axis))
    prog = _run_both(b.build(), {"x": rng.normal(0, 2, shape).astype(np.float32)}, 2048)
    loads = [i for i in prog.instrs if isinstance(i, Load) and i.tensor == "x"]
    assert len(loads) > 1 and prog.profile().num_global_layers == 0
    if axis == 2:
        assert all(i.h == (0, 24) for i in loads)


def test_int8_chain_cut_along_columns() -> None:
    """Rows too long for a tile: the int8 chain is cut along W too (ConvInteger's column halo
    and left / right pads at the tile edges) and still equals the interpreter."""
    rng = np.random.default_rng(4)
    b = ob.GraphBuilder("wide")
    x = b.input("x", "i8", (1, 8, 3, 3000))
    a = b.op("ConvInteger", [x, b.constant("w", _rand(rng, "i8", (8, 8, 3, 3))),
                             b.constant("zx", np.array(-9, np.int8))], pads=(1, 1, 1, 1))
    y = _requant(b, a, "r", rng.uniform(1e-3, 4e-3, 8), 1)
    b.output(b.op("MaxPool", [y], kernel_shape=(1, 3), strides=(1, 2), pads=(0, 1, 0, 1)))
    prog = _run_both(b.build(), {"x": _rand(rng, "i8", (1, 8, 3, 3000))}, 4096)
    (group,) = [u for u in prog.units if isinstance(u, GroupUnit)]
    assert group.kw > 1


@pytest.mark.parametrize("lmem", [None, 1024], ids=["whole", "tiled"])
@pytest.mark.parametrize("n", [1, 4], ids=["n=1", "n=4"])
@pytest.mark.parametrize("dtype", ["i8", "u8"])
def test_lut_in_a_layer_group(dtype: str, n: int, lmem: int | None) -> None:
    """Lut reads entry i for the value whose byte is i (numpy's view of the bytes as uint8
    here), in tiles of an int8 layer group, the table whole in each."""
    rng = np.random.default_rng(n)
    table = _rand(rng, "i8", (256,))
    b = ob.GraphBuilder("lut")
    x = b.input("x", dtype, (n, 70, 16, 16))
    # Lut then Identity: alone, a one-op group, the Lut would run as a global layer
    b.output(b.op("Identity", [b.op("Lut", [x, b.constant("table", table)])]))
    g = b.build()
    feeds = {"x": _rand(rng, dtype, (n, 70, 16, 16))}
    want = table[feeds["x"].view(np.uint8)]
    name = g.outputs[0].name
    np.testing.assert_array_equal(ob.interpret(g, feeds)[name], want)
    prog = ob.compile(g, target=ob.Target.preset("bm1684", **({"lmem_bytes_per_lane": lmem} if lmem else {})))
    np.testing.assert_array_equal(prog.run(feeds)[name], want)
    p = prog.profile()
    assert p.num_global_layers == 0 and p.num_layer_groups == 1 and (p.num_tiles > 1) == bool(lmem)
