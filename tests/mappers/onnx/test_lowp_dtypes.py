"""float8 / float4 / int4 / int2 element types through Cast, CastLike, QuantizeLinear and
DequantizeLinear, bit for bit against ``onnx.reference.ReferenceEvaluator`` (onnxruntime has no
kernels for most of these casts); the edge cases: NaN, inf, saturate on and off, rounding ties,
e8m0's round modes. Also: lowp constants survive ``.obir``, and a lowp graph compiles and runs
on the simulator as the interpreter does."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T

import opbridge as ob
from opbridge.errors import ShapeError, UnsupportedOpError
from tests.graph_equality import assert_roundtrip
from tests.ir.ops.onnx_ref import onnx_node_model

from .test_activation import convert_node

F32 = np.float32
FLOAT8 = {T.FLOAT8E4M3FN: "f8e4m3fn", T.FLOAT8E4M3FNUZ: "f8e4m3fnuz", T.FLOAT8E5M2: "f8e5m2",
          T.FLOAT8E5M2FNUZ: "f8e5m2fnuz"}
SMALL = {T.FLOAT4E2M1: "f4e2m1", T.INT4: "i4", T.UINT4: "u4", T.INT2: "i2", T.UINT2: "u2"}
# NaN, infinities, out of range for every float8 (1e6), the e4m3fn max (448) and just past it,
# ties between neighbours (1.0625: 1.0 | 1.125 in e4m3, 1.125: 1.0 | 1.25 in e5m2), signed zero,
# a subnormal of e4m3 (2**-9) and a value below every subnormal (1e-9)
EDGE = np.array([np.nan, np.inf, -np.inf, 1e6, -1e6, 448, 449, 464, 1.0625, 1.125, 1.1875, 0.0,
                 -0.0, 2.0**-9, 1e-9, -3.3, 57344, 61440], F32)


def _ref(model, feeds) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    return np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape
    assert got.tobytes() == want.tobytes(), f"{got.astype(F32)} != {want.astype(F32)}"


def check_ref(op: str, inputs: list, *, opset: int, initializers=None, **attrs) -> ob.Graph:
    """Convert the one-node model, interpret it, compare its bits with onnx.reference."""
    g, model, feeds = convert_node(op, inputs, opset=opset, initializers=initializers, **attrs)
    full, full_feeds = onnx_node_model(op, inputs, opset=opset, **attrs)
    _same_bits(ob.interpret(g, feeds)["out0"], _ref(full, full_feeds))
    return g


@pytest.mark.parametrize("saturate", [None, 0, 1], ids=["saturate=absent", "saturate=0", "saturate=1"])
@pytest.mark.parametrize("to", list(FLOAT8), ids=list(FLOAT8.values()))
@pytest.mark.parametrize("src", [F32, np.float16], ids=["f32", "f16"])
def test_cast_to_float8_edges(src, to, saturate):
    attrs = {} if saturate is None else {"saturate": saturate}
    x = EDGE.astype(src) if src == F32 else EDGE[~(np.abs(EDGE) > 60000)].astype(src)
    g = check_ref("Cast", [x], opset=21, to=to, **attrs)
    assert g.outputs[0].dtype == FLOAT8[to]


@pytest.mark.parametrize("to", list(SMALL), ids=list(SMALL.values()))
def test_cast_to_float4_int4_int2(to):
    x = np.array([-9.5, -8, -2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 3, 5.5, 6, 7, 15, 16, 100, np.inf, np.nan],
                 F32)
    check_ref("Cast", [x if to == T.FLOAT4E2M1 else x[np.isfinite(x)]], opset=25, to=to)


@pytest.mark.parametrize("npd", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2fnuz, ml_dtypes.float4_e2m1fn,
                                 ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2],
                         ids=["f8e4m3fn", "f8e5m2fnuz", "f4e2m1", "i4", "u4", "i2", "u2"])
@pytest.mark.parametrize("to", [T.FLOAT, T.FLOAT16, T.INT8, T.BOOL, T.FLOAT8E5M2])
def test_cast_from_lowp(npd, to):
    x = np.array([-2, -1, 0, 1, 1.5, 3], F32).astype(npd)
    check_ref("Cast", [x], opset=25, to=to)


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("round_mode", [None, "up", "down", "nearest"])
def test_cast_to_e8m0_round_modes(round_mode, saturate):
    x = np.array([0.0, 1.0, 1.5, 1.75, 3.0, 0.75, -2.0, 2.0**127 * 1.5, 3e38, np.nan, np.inf,
                  1e-40, 2.0**-127, 2.0**-127 * 1.5], F32)
    attrs = {} if round_mode is None else {"round_mode": round_mode}
    check_ref("Cast", [x], opset=25, to=T.FLOAT8E8M0, saturate=saturate, **attrs)


@pytest.mark.parametrize("to", [*FLOAT8, T.INT4], ids=[*FLOAT8.values(), "i4"])
def test_castlike_takes_saturate(to):
    like = np.zeros(1, F32).astype(ob.ir.types.to_numpy_dtype({**FLOAT8, **SMALL}[to]))
    check_ref("CastLike", [EDGE[np.isfinite(EDGE)] if to == T.INT4 else EDGE, like], opset=21, saturate=0)


def test_cast_to_float6_is_unsupported():
    with pytest.raises(UnsupportedOpError, match=r"\(Cast\): casting to TensorProto type 27"):
        convert_node("Cast", [EDGE], opset=25, to=27)


# -- QuantizeLinear / DequantizeLinear --------------------------------------------------------
QTYPES = {**FLOAT8, **SMALL}


def _zero(to: int, shape) -> np.ndarray:
    from opbridge.ir.types import to_numpy_dtype

    return np.zeros(shape, F32).astype(to_numpy_dtype(QTYPES[to]))


# (id, x shape, scale shape, attrs)
LAYOUTS = [("per-tensor", (2, 3, 4), (), {}), ("per-axis", (2, 3, 4), (3,), {"axis": 1}),
           ("blocked", (2, 4, 6), (2, 4, 3), {"axis": 2, "block_size": 2})]


@pytest.mark.parametrize("zp", [False, True], ids=["zero_point=absent", "zero_point"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=[lay[0] for lay in LAYOUTS])
@pytest.mark.parametrize("to", list(QTYPES), ids=list(QTYPES.values()))
def test_quantize_linear(to, layout, zp):
    _, xs, ss, attrs = layout
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(xs) * 40).astype(F32)
    x.reshape(-1)[:4] = [np.nan, np.inf, 1e9, 2.5]
    scale = rng.uniform(0.5, 2, ss).astype(F32)
    inputs = [x, scale] + ([_zero(to, ss)] if zp else [])
    if not zp:
        attrs = {**attrs, "output_dtype": to}
    if to in SMALL and to != T.FLOAT4E2M1:
        x.reshape(-1)[:2] = [7.5, -9]  # integer targets cannot take NaN (undefined in rint)
    check_ref("QuantizeLinear", inputs, opset=21, initializers=[False, True, True][: len(inputs)], **attrs)


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("to", list(FLOAT8), ids=list(FLOAT8.values()))
def test_quantize_linear_float8_saturate(to, saturate):
    check_ref("QuantizeLinear", [EDGE, np.array(0.5, F32)], opset=21, output_dtype=to, saturate=saturate)


@pytest.mark.parametrize("precision", [T.FLOAT16, T.FLOAT], ids=["f16", "f32"])
def test_quantize_linear_precision(precision):
    x = np.array([1.0001, 3.3333, -100.7, 0.5], F32)
    check_ref("QuantizeLinear", [x, np.array(1.0 / 3.0, F32)], opset=25, output_dtype=T.INT4,
              precision=precision)


@pytest.mark.parametrize("layout", LAYOUTS, ids=[lay[0] for lay in LAYOUTS])
@pytest.mark.parametrize("src", list(QTYPES), ids=list(QTYPES.values()))
def test_dequantize_linear(src, layout):
    _, xs, ss, attrs = layout
    rng = np.random.default_rng(1)
    x = _zero(src, xs) + (rng.integers(-3, 4, xs).astype(F32) / 2).astype(_zero(src, ()).dtype)
    scale = rng.uniform(0.5, 2, ss).astype(F32)
    zp = _zero(src, ss)
    if src in (T.INT4, T.UINT4, T.INT2, T.UINT2):
        zp = (zp.astype(F32) + 1).astype(zp.dtype)
    check_ref("DequantizeLinear", [x, scale, zp], opset=21, initializers=[False, True, True], **attrs)


def test_dequantize_float8_nonzero_zero_point_is_an_error():
    zp = np.array(1, F32).astype(ml_dtypes.float8_e4m3fn)
    x = np.ones(3, F32).astype(ml_dtypes.float8_e4m3fn)
    with pytest.raises(ob.OpbridgeError, match=r"\(DequantizeLinear\).*must be all zeros"):
        convert_node("DequantizeLinear", [x, np.array(2, F32), zp], opset=21, initializers=[False, True, True])


# -- storage and the simulator ---------------------------------------------------------------
LOWP_CONSTS = [(c, name) for c, name in {**FLOAT8, **SMALL, T.FLOAT8E8M0: "f8e8m0"}.items()]


@pytest.mark.parametrize("code, name", LOWP_CONSTS, ids=[n for _, n in LOWP_CONSTS])
def test_lowp_constants_roundtrip_obir_and_compile(code, name, tmp_path):
    """A lowp initializer and graph input: kept bit for bit by .obir; the compiled program
    runs the dequantizing graph as the interpreter and onnx.reference do."""
    from opbridge.ir.types import to_numpy_dtype

    npd = to_numpy_dtype(name)
    x = np.array([[1, 2, 0.5], [1.5, 0.25, 1]], F32).astype(npd)
    zp = [] if name == "f8e8m0" else [np.zeros(3, F32).astype(npd)]
    g, model, feeds = convert_node("DequantizeLinear", [x, np.full(3, 0.5, F32), *zp], opset=23,
                                   initializers=[False, True, True], axis=1)
    assert g.inputs[0].dtype == name
    assert all(c.dtype in (name, "f32") for c in g.constants.values())
    loaded = assert_roundtrip(g, tmp_path, compile=True)
    assert loaded.inputs[0].dtype == name
    want = _ref(model, feeds)
    _same_bits(ob.interpret(loaded, feeds)["out0"], want)
    _same_bits(ob.compile(loaded, "bm1684").run(feeds)["out0"], want)


@pytest.mark.parametrize("name", [n for _, n in LOWP_CONSTS])
def test_lowp_constant_kept_bit_for_bit(name, tmp_path):
    """An IR constant of each lowp type (the converter folds an ONNX one into its consumer)
    comes back from .obir with the same bytes, and the compiled program casts it as the
    interpreter does."""
    from opbridge.ir.types import to_numpy_dtype

    data = np.array([[0.5, 1, 2], [4, 0.25, 1.5]], F32).astype(to_numpy_dtype(name))
    b = ob.GraphBuilder("lowp_const")
    x = b.input("x", "f32", (2, 3))
    w = b.constant("w", data)
    b.output(b.op("Add", [x, b.op("Cast", [w], to="f32")]))
    g = b.build()
    loaded = assert_roundtrip(g, tmp_path, compile=True)
    assert loaded.constants["w"].dtype == name
    assert loaded.constants["w"].data.tobytes() == data.tobytes()
    feeds = {"x": np.ones((2, 3), F32)}
    want = ob.interpret(g, feeds)
    np.testing.assert_array_equal(list(want.values())[0], data.astype(F32) + 1)  # ml_dtypes' own values
    got = ob.compile(loaded, "bm1684").run(feeds)
    np.testing.assert_array_equal(list(got.values())[0], list(want.values())[0])


def test_arithmetic_on_lowp_names_the_op_and_dtype():
    with pytest.raises(ShapeError, match=r"\(Relu\): input 0 .* has dtype f8e5m2; Relu allows f32"):
        convert_node("Relu", [np.zeros(3, F32).astype(ml_dtypes.float8_e5m2)], opset=21)


EXTERNAL = [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.float4_e2m1fn, ml_dtypes.int2, ml_dtypes.uint2,
            ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu]


@pytest.mark.parametrize("npd", EXTERNAL, ids=[np.dtype(d).name for d in EXTERNAL])
def test_external_data_initializer(npd, tmp_path):
    """A lowp initializer in an external data file (packed 2 or 4 to a byte for the 4- and
    2-bit types, an odd count leaving a partial byte) reads as onnx.reference reads it."""
    import onnx
    from onnx import helper, numpy_helper

    vals = np.array([-2, -1, 0, 1, 1.5, 0.5, 1, 0, -1], F32)
    w = (np.abs(vals) + 0.5 if npd == ml_dtypes.float8_e8m0fnu else vals).astype(npd).reshape(3, 3)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["w"], ["wf"], to=T.FLOAT), helper.make_node("Add", ["wf", "x"], ["y"])],
        "ext", [helper.make_tensor_value_info("x", T.FLOAT, [3, 3])],
        [helper.make_tensor_value_info("y", T.FLOAT, [3, 3])], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, size_threshold=0, location="ext.bin")
    feeds = {"x": np.zeros((3, 3), F32)}
    want = _ref(onnx.load(path), feeds)
    np.testing.assert_array_equal(ob.interpret(ob.convert(path), feeds)["y"], want)


# (op, extra inputs as initializers, attrs): data movement takes every lowp type unchanged
MOVES = [
    ("Reshape", [np.array([3, 2])], {}), ("Flatten", [], {"axis": 1}),
    ("Squeeze", [np.array([0])], {}), ("Unsqueeze", [np.array([1])], {}),
    ("Transpose", [], {"perm": [0, 2, 1]}), ("Expand", [np.array([2, 2, 3])], {}),
    ("Slice", [np.array([1]), np.array([3]), np.array([2])], {}),
    ("Gather", [np.array([2, 0])], {"axis": 2}), ("Concat", [], {"axis": 1}), ("Identity", [], {}),
]


@pytest.mark.parametrize("npd", [ml_dtypes.int4, ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn],
                         ids=["i4", "f8e4m3fn", "f4e2m1"])
@pytest.mark.parametrize("op, extra, attrs", MOVES, ids=[m[0] for m in MOVES])
def test_data_movement_takes_lowp(op, extra, attrs, npd):
    """Shape ops move lowp elements unchanged, in the interpreter and the compiled program."""
    x = (np.arange(6, dtype=F32).reshape(1, 2, 3) - 3).astype(npd)
    if op == "Reshape":
        x = x.reshape(2, 3)
    inputs = [x, x] if op == "Concat" else [x, *extra]
    inits = [False, False] if op == "Concat" else [False] + [True] * len(extra)
    g = check_ref(op, inputs, opset=21, initializers=inits, **attrs)
    feeds = {"in0": x, "in1": x} if op == "Concat" else {"in0": x}
    want = ob.interpret(g, feeds)["out0"]
    _same_bits(ob.compile(g, "bm1684").run(feeds)["out0"], want)


def test_show_names_lowp_dtypes(tmp_path, capsys):
    """``opbridge convert`` then ``opbridge show``: the i4 input, the f8 output and the Cast's
    saturate attribute are shown."""
    import onnx

    from opbridge.cli import main

    _, model, _ = convert_node("Cast", [np.zeros((2, 3), F32).astype(ml_dtypes.int4)], opset=21,
                               to=T.FLOAT8E4M3FN, saturate=0)
    onnx.save(model, tmp_path / "m.onnx")
    assert main(["convert", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.obir")]) == 0
    capsys.readouterr()
    assert main(["show", str(tmp_path / "m.obir")]) == 0
    out = capsys.readouterr().out
    assert "%in0: i4[2,3]" in out
    assert re.search(r"f8e4m3fn\[2,3\] = Cast\(%in0\) \{to='f8e4m3fn', saturate=0", out), out
