"""The quantization IR ops against outside references: QuantizeLinear, DequantizeLinear,
ConvInteger and MatMulInteger against onnx.reference; Requantize and quantize_multiplier
against exact rational arithmetic (Python's fractions, written from the contract's formula);
Value.quant through the verifier, the printer and the .obir file."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T

import opbridge as ob
from opbridge.errors import AttrError, GraphError, ShapeError
from opbridge.ir.ops.quant import quantize_multiplier
from opbridge.ir.quantparams import QuantParams
from tests.ir.ops.onnx_ref import run_ir, run_onnx_reference

RNG = np.random.default_rng(12)
F32 = np.float32

ONNX_TYPE = {"u8": T.UINT8, "i8": T.INT8, "u16": T.UINT16, "i16": T.INT16, "u4": T.UINT4,
             "i4": T.INT4, "u2": T.UINT2, "i2": T.INT2, "f8e4m3fn": T.FLOAT8E4M3FN,
             "f8e4m3fnuz": T.FLOAT8E4M3FNUZ, "f8e5m2": T.FLOAT8E5M2, "f8e5m2fnuz": T.FLOAT8E5M2FNUZ,
             "f4e2m1": T.FLOAT4E2M1}


def _x(shape: tuple[int, ...] = (2, 4, 3, 5), spread: float = 4.0) -> np.ndarray:
    x = (RNG.standard_normal(shape) * spread).astype(F32)
    x.flat[:4] = [0.5, 1.5, -2.5, 1e6]  # ties round to even; saturation (within int32: the
    # reference casts x / scale to int32 before it clips)
    return x


def _np(dtype: str) -> Any:
    return ob.ir.types.to_numpy_dtype(dtype)


def _zp(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    lo, hi = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535), "i16": (-32768, 32767),
              "u4": (0, 15), "i4": (-8, 7), "u2": (0, 3), "i2": (-2, 1)}[dtype]
    return RNG.integers(lo, hi + 1, shape).astype(_np(dtype))


# -- QuantizeLinear ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["u8", "i8", "u16", "i16", "u4", "i4", "u2", "i2"])
@pytest.mark.parametrize("mode", ["tensor", "axis", "block", "zp=absent"])
def test_quantize_integer(dtype: str, mode: str) -> None:
    x = _x()
    attrs: dict[str, Any] = {}
    if mode in ("tensor", "zp=absent"):
        scale = np.array(0.07, F32)
    elif mode == "axis":
        scale = RNG.uniform(0.01, 0.2, (4,)).astype(F32)
        attrs["axis"] = 1
    else:
        scale = RNG.uniform(0.01, 0.2, (2, 4, 3, 2)).astype(F32)
        attrs.update(axis=-1, block_size=3)
    ins: list[Any] = [x, scale] + ([] if mode == "zp=absent" else [_zp(dtype, scale.shape)])
    ref = run_onnx_reference("QuantizeLinear", ins, opset=21, output_dtype=ONNX_TYPE[dtype], **attrs)[0]
    got = run_ir("QuantizeLinear", ins, output_dtype=dtype, **attrs)[0]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got.astype(np.int32), ref.astype(np.int32))


def test_quantize_default_is_u8_with_half_to_even() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, 300.0, -3.0], F32)
    got = run_ir("QuantizeLinear", [x, np.array(1.0, F32)])[0]
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, run_onnx_reference("QuantizeLinear", [x, np.array(1.0, F32)],
                                                          opset=13)[0])
    np.testing.assert_array_equal(got, [0, 2, 2, 0, 255, 0])


@pytest.mark.parametrize("dtype", ["f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f4e2m1"])
@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_float8(dtype: str, saturate: int) -> None:
    x = _x(spread=200.0)
    x.flat[4:6] = [np.inf, -np.inf]
    ins = [x, np.array(0.5, F32)]
    attrs = {"saturate": saturate} if dtype != "f4e2m1" else {}
    ref = run_onnx_reference("QuantizeLinear", ins, opset=21, output_dtype=ONNX_TYPE[dtype], **attrs)[0]
    got = run_ir("QuantizeLinear", ins, output_dtype=dtype, **attrs)[0]
    np.testing.assert_array_equal(got.view(np.uint8), np.asarray(ref).view(np.uint8))


def test_quantize_precision_f16() -> None:
    x, s = _x(), np.array(0.03, F32)
    x.flat[3] = 100.0  # in f16 1e6 is inf, which the reference casts to int32 before it clips
    ref = run_onnx_reference("QuantizeLinear", [x, s], opset=23, output_dtype=T.INT8,
                             precision=T.FLOAT16)[0]
    got = run_ir("QuantizeLinear", [x, s], output_dtype="i8", precision="f16")[0]
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("bad,match", [
    ("scale-len", "per axis 1 it must be \\[4\\]"),
    ("block-shape", "with block_size 2"),
    ("zp-type", "y_zero_point is u8"),
])
def test_quantize_shape_errors(bad: str, match: str) -> None:
    x = _x()
    if bad == "scale-len":
        ins, attrs = [x, np.ones(3, F32)], {"output_dtype": "i8"}
    elif bad == "block-shape":
        ins, attrs = [x, np.ones((2, 4, 3, 5), F32)], {"block_size": 2, "axis": 3, "output_dtype": "i8"}
    else:
        ins, attrs = [x, np.array(1.0, F32), np.array(0, np.uint8)], {"output_dtype": "i8"}
    with pytest.raises((AttrError, ShapeError), match=match):
        run_ir("QuantizeLinear", ins, **attrs)


# -- DequantizeLinear -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["u8", "i8", "u16", "i16", "u4", "i4", "u2", "i2"])
@pytest.mark.parametrize("mode", ["tensor", "axis", "block", "zp=absent"])
def test_dequantize_integer(dtype: str, mode: str) -> None:
    shape = (2, 4, 3, 5)
    x = _zp(dtype, shape)
    attrs: dict[str, Any] = {}
    if mode in ("tensor", "zp=absent"):
        scale = np.array(0.07, F32)
    elif mode == "axis":
        scale, attrs["axis"] = RNG.uniform(0.01, 0.2, (3,)).astype(F32), 2
    else:
        scale = RNG.uniform(0.01, 0.2, (1, 4, 3, 5)).astype(F32)
        attrs.update(axis=0, block_size=2)
    ins: list[Any] = [x, scale] + ([] if mode == "zp=absent" else [_zp(dtype, scale.shape)])
    ref = run_onnx_reference("DequantizeLinear", ins, opset=21, **attrs)[0]
    got = run_ir("DequantizeLinear", ins, **attrs)[0]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("case", ["i32-bias", "f16-scale", "f8e4m3fn", "f8e5m2", "f4e2m1"])
def test_dequantize_other_types(case: str) -> None:
    if case == "i32-bias":
        ins = [RNG.integers(-(1 << 20), 1 << 20, (8,)).astype(np.int32),
               RNG.uniform(1e-4, 1e-3, (8,)).astype(F32), np.zeros(8, np.int32)]
        attrs = {"axis": 0}
    elif case == "f16-scale":
        ins, attrs = [_zp("i8", (3, 6)), np.array(0.0123, np.float16), np.array(3, np.int8)], {}
    else:
        dt = _np(case)
        ins, attrs = [(RNG.standard_normal((3, 6)) * 3).astype(dt), np.array(0.25, F32)], {}
    ref = run_onnx_reference("DequantizeLinear", ins, opset=21, **attrs)[0]
    got = run_ir("DequantizeLinear", ins, **attrs)[0]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)


# -- ConvInteger / MatMulInteger (the integer products between them) -------------------------------
@pytest.mark.parametrize("zp", ["absent", "scalar", "per-channel-w"])
def test_conv_integer_grouped(zp: str) -> None:
    x = RNG.integers(0, 256, (2, 4, 6, 5)).astype(np.uint8)
    w = RNG.integers(-128, 128, (6, 2, 3, 3)).astype(np.int8)
    ins: list[Any] = [x, w]
    if zp != "absent":
        ins += [np.array(131, np.uint8),
                np.array(-3, np.int8) if zp == "scalar" else RNG.integers(-5, 5, (6,)).astype(np.int8)]
    attrs = {"group": 2, "pads": [1, 1, 1, 1], "strides": [1, 2], "dilations": [1, 1]}
    np.testing.assert_array_equal(run_ir("ConvInteger", ins, **attrs)[0],
                                  run_onnx_reference("ConvInteger", ins, **attrs)[0])


@pytest.mark.parametrize("shapes", [((3, 7), (7, 4)), ((2, 3, 7), (7, 4)), ((2, 1, 3, 7), (5, 7, 4))],
                         ids=["2d", "batched-a", "broadcast"])
def test_matmul_integer_batched(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    a = RNG.integers(0, 256, shapes[0]).astype(np.uint8)
    b = RNG.integers(-128, 128, shapes[1]).astype(np.int8)
    ins = [a, b, np.array(128, np.uint8), np.array(2, np.int8)]
    np.testing.assert_array_equal(run_ir("MatMulInteger", ins)[0],
                                  run_onnx_reference("MatMulInteger", ins)[0])


# -- Requantize and quantize_multiplier: exact rational arithmetic ---------------------------------
def _round_half_away(q: Fraction) -> int:
    n = abs(q)
    r = int(n + Fraction(1, 2))  # floor(|q| + 1/2)
    return r if q >= 0 else -r


def _requantize_exact(acc: int, m: int, shift: int, zp: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, _round_half_away(Fraction(acc * m, 1) / Fraction(2) ** (31 + shift)) + zp))


@pytest.mark.parametrize("out", ["i8", "u8", "i16"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
def test_requantize_exact(out: str, per_channel: bool) -> None:
    lo, hi = {"i8": (-128, 127), "u8": (0, 255), "i16": (-32768, 32767)}[out]
    acc = RNG.integers(-(1 << 31), (1 << 31) - 1, (2, 5, 7), dtype=np.int64)
    acc[0, :, :3] = RNG.integers(-3000, 3000, (5, 3))
    acc[0, 0, :4] = [2, -2, 6, -6]  # exact halves with the multiplier below: rounding direction
    scales = RNG.uniform(1e-9, 4.0, (5,)) if per_channel else np.array(0.25)
    if per_channel:
        scales[:2] = [0.25, 3e-5]
    m, s = quantize_multiplier(scales)
    zp = np.array(3 if out != "u8" else 128, _np(out))
    got = run_ir("Requantize", [acc.astype(np.int32), m, s, zp], axis=1, output_dtype=out)[0]
    mm, ss = np.broadcast_to(m.reshape(-1, 1), (5, 1)), np.broadcast_to(s.reshape(-1, 1), (5, 1))
    for idx in np.ndindex(acc.shape):
        c = idx[1]
        want = _requantize_exact(int(acc[idx]), int(mm[c, 0]), int(ss[c, 0]), int(zp), lo, hi)
        assert int(got[idx]) == want, f"acc={acc[idx]} m={mm[c, 0]} shift={ss[c, 0]}"


def test_requantize_halves_round_away_from_zero() -> None:
    acc = np.array([2, -2, 6, -6, 1, -1, 3, -3], np.int32)
    m, s = np.array(1 << 30, np.int32), np.array(1, np.int32)  # x / 4
    got = run_ir("Requantize", [acc, m, s], output_dtype="i8")[0]
    np.testing.assert_array_equal(got, [1, -1, 2, -2, 0, 0, 1, -1])


@pytest.mark.parametrize("scale", [1e-12, 3.1e-5, 0.0039215, 0.25, 0.5, 0.999999999, 1.0, 7.5, 1000.0])
def test_quantize_multiplier(scale: float) -> None:
    m, s = quantize_multiplier(np.array([scale]))
    assert (1 << 30) <= int(m[0]) < (1 << 31)
    approx = Fraction(int(m[0])) / Fraction(2) ** (31 + int(s[0]))
    assert abs(approx - Fraction(scale)) <= Fraction(scale) * Fraction(1, 1 << 30)


def test_quantize_multiplier_refuses_negative() -> None:
    with pytest.raises(ValueError, match="finite and >= 0"):
        quantize_multiplier([-0.5])


# -- Value.quant: verifier, printer, .obir ----------------------------------------------------------
def _quant_graph(quant_out: QuantParams) -> ob.Graph:
    b = ob.GraphBuilder("q")
    x = b.input("x", "f32", (1, 4, 2, 2))
    y = b.op("QuantizeLinear", [x, b.constant("s", np.array([0.1, 0.2, 0.3, 0.4], F32)),
                                b.constant("z", np.array([1, 2, 3, 4], np.int8))],
             axis=1, output_dtype="i8")
    y.quant = quant_out
    b.output(b.op("DequantizeLinear", [y, b.constant("s2", np.array(0.1, F32)),
                                       b.constant("z2", np.array(0, np.int8))]))
    return b.build()


def test_quant_params_survive_obir_and_show(tmp_path: Any) -> None:
    q = QuantParams(np.array([0.1, 0.2, 0.3, 0.4], F32), np.array([1, 2, 3, 4]), axis=1)
    g = _quant_graph(q)
    ob.save(g, tmp_path / "q.obir")
    g2 = ob.load(tmp_path / "q.obir")
    assert g2.node(g.nodes[0].name).outputs[0].quant == q
    assert g2.nodes[1].outputs[0].quant is None
    text = ob.format_graph(g2)
    assert "quant(axis=1 x4 scale=[0.1..0.4] zp=[1..4])" in text
    x = RNG.standard_normal((1, 4, 2, 2)).astype(F32)
    np.testing.assert_array_equal(ob.interpret(g, {"x": x})[g.outputs[0].name],
                                  ob.interpret(g2, {"x": x})[g2.outputs[0].name])


def test_quant_params_per_tensor_text() -> None:
    q = QuantParams(np.array(0.5, F32), np.array(-3), None)
    assert q.describe() == "scale=0.5 zp=-3"
    assert QuantParams.from_json(q.to_json()) == q


@pytest.mark.parametrize("bad,match", [
    (dict(scale=np.ones(3, F32), zero_point=np.zeros(3), axis=1), "3 scales for 4 entries"),
    (dict(scale=np.ones(4, F32), zero_point=np.zeros(4), axis=6), "axis 6 is out of range"),
    (dict(scale=np.array(1.0, F32), zero_point=np.array(300), axis=None), "zero point outside i8"),
])
def test_verifier_checks_quant_params(bad: dict[str, Any], match: str) -> None:
    with pytest.raises(GraphError, match=match):
        _quant_graph(QuantParams(**bad))


def test_quant_params_refuse_bad_scales() -> None:
    with pytest.raises(GraphError, match="finite and > 0"):
        QuantParams(np.array(0.0, F32), np.array(0))
    with pytest.raises(GraphError, match="needs an axis"):
        QuantParams(np.ones(3, F32), np.zeros(3))


def test_verifier_refuses_quant_on_float_values() -> None:
    b = ob.GraphBuilder("f")
    x = b.input("x", "f32", (2,))
    x.quant = QuantParams(np.array(0.5, F32), np.array(0))
    b.output(b.op("Relu", [x]))
    with pytest.raises(GraphError, match="only integer values"):
        b.build()


def test_int4_zero_point_range_is_checked() -> None:
    b = ob.GraphBuilder("i4")
    x = b.input("x", "f32", (2,))
    y = b.op("QuantizeLinear", [x, b.constant("s", np.array(0.5, F32))], output_dtype="i4")
    y.quant = QuantParams(np.array(0.5, F32), np.array(9))
    b.output(y)
    assert ml_dtypes.iinfo(ml_dtypes.int4).max == 7
    with pytest.raises(GraphError, match="zero point outside i4"):
        b.build()
