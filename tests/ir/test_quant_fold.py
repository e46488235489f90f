"""The fold_qdq pass: QDQ chains become integer ops, each rewrite checked against the unfused
graph it came from (every integer tensor the two share within one step, differences counted)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.ir.ops.quant import quantize_multiplier
from opbridge.ir.passes import PASSES, optimize

RNG = np.random.default_rng(3)
F32 = np.float32


def _dq(b: ob.GraphBuilder, v: Any, scale: Any, zp: Any, axis: int = 1) -> Any:
    return b.op("DequantizeLinear", [v, b.constant(f"{v.name}_s", np.asarray(scale, F32)),
                                     b.constant(f"{v.name}_z", np.asarray(zp))], axis=axis)


def _q(b: ob.GraphBuilder, v: Any, scale: float, zp: int, name: str) -> Any:
    return b.op("QuantizeLinear", [v, b.constant(f"{name}_s", np.array(scale, F32)),
                                   b.constant(f"{name}_z", np.array(zp, np.uint8))],
                output_dtype="u8", outputs=[name])


def _conv_graph(bias: str, w_axis: int = 0) -> ob.Graph:
    b = ob.GraphBuilder("qconv")
    x = b.input("x", "f32", (1, 4, 6, 6))
    xq = _q(b, x, 0.05, 120, "xq")
    w = b.constant("w", RNG.integers(-127, 128, (6, 4, 3, 3)).astype(np.int8))
    ws = RNG.uniform(0.002, 0.01, (6,)) if w_axis == 0 else RNG.uniform(0.002, 0.01, (4,))
    wf = _dq(b, w, ws, np.zeros(ws.shape, np.int8), axis=w_axis)
    ins = [_dq(b, xq, 0.05, np.uint8(120)), wf]
    if bias == "i32":
        bq = b.constant("bq", RNG.integers(-2000, 2000, (6,)).astype(np.int32))
        ins.append(_dq(b, bq, 0.05 * ws, np.zeros(6, np.int32), axis=0))
    elif bias == "float":
        ins.append(b.constant("bf", RNG.standard_normal(6).astype(F32) * 0.1))
    y = b.op("Conv", ins, pads=(1, 1, 1, 1))
    yq = _q(b, y, 0.08, 100, "yq")
    b.output(_dq(b, yq, 0.08, np.uint8(100)))
    return b.build()


def _shared_integers(a: ob.Graph, f: ob.Graph, n: int = 4) -> tuple[int, int]:
    """(elements compared, elements differing) over the integer tensors both graphs name."""
    elements = differ = 0
    for _ in range(n):
        x = {v.name: RNG.standard_normal(v.shape).astype(F32) for v in a.inputs}
        ra, rf = ob.interpret(a, x, keep_intermediates=True), ob.interpret(f, x, keep_intermediates=True)
        for name, got in rf.items():
            want = ra.get(name)
            if want is None or got.dtype.kind not in "iu" or want.dtype != got.dtype:
                continue
            d = np.abs(got.astype(np.int64) - want.astype(np.int64))
            assert d.max(initial=0) <= 1, name
            elements, differ = elements + d.size, differ + int((d > 0).sum())
    return elements, differ


@pytest.mark.parametrize("bias", ["absent", "i32", "float"])
def test_conv_chain_becomes_conv_integer_and_requantize(bias: str) -> None:
    g = _conv_graph(bias)
    f = optimize(g, ["fold_qdq"])
    ops = f.op_counts()
    assert "Conv" not in ops and ops["ConvInteger"] == 1 and ops["Requantize"] == 1
    assert ("Add" in ops) == (bias != "absent")
    yq = f.values()["yq"]
    assert yq.producer is not None and yq.producer.op == "Requantize"
    assert yq.quant is not None and float(yq.quant.scale) == pytest.approx(0.08) and int(yq.quant.zero_point) == 100
    mult = yq.producer.inputs[1].data
    scales = np.float64(F32(0.05)) * np.asarray(g.values()["w_s"].data, np.float64) / np.float64(F32(0.08))
    want_m, _ = quantize_multiplier(scales)  # the float32 scales of the graph, combined in float64
    np.testing.assert_array_equal(mult, want_m)
    elements, differ = _shared_integers(g, f)
    assert elements > 0 and differ <= elements // 100


def test_weight_quantized_along_input_channels_is_left_alone() -> None:
    g = _conv_graph("absent", w_axis=1)
    assert not PASSES["fold_qdq"]()(g).modified


@pytest.mark.parametrize("same", [True, False], ids=["same-params", "other-params"])
@pytest.mark.parametrize("op", ["Relu", "MaxPool", "Flatten"])
def test_exact_ops_run_on_integers(op: str, same: bool) -> None:
    b = ob.GraphBuilder("exact")
    x = b.input("x", "f32", (1, 2, 4, 4))
    xq = _q(b, x, 0.1, 128, "xq")
    attrs: dict[str, Any] = {"kernel_shape": (2, 2), "strides": (2, 2)} if op == "MaxPool" else {}
    y = b.op(op, [_dq(b, xq, 0.1, np.uint8(128))], **attrs)
    b.output(_q(b, y, 0.1 if same else 0.2, 128, "yq"))
    g = b.build()
    r = PASSES["fold_qdq"]()(g)
    assert r.modified == same
    if same:
        f = r.graph
        assert {"DequantizeLinear", "QuantizeLinear"} & set(f.op_counts()) == {"QuantizeLinear"}
        assert f.op_counts().get("Max" if op == "Relu" else op) == 1
        elements, differ = _shared_integers(g, f)
        assert elements > 0 and differ == 0  # exact: the ops commute with the affine map


def test_fold_qdq_from_convert_and_the_cli(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime.quantization")
    from tests.mappers.onnx.quant_models import mlp, quantize_with_ort

    path = quantize_with_ort(mlp(), tmp_path, "QDQ")
    from opbridge.cli import main

    out = tmp_path / "m.obir"
    assert main(["convert", str(path), "--pass", "fold_qdq", "-o", str(out)]) == 0
    g = ob.load(out)
    assert g.op_counts().get("MatMulInteger") == 3 and "MatMul" not in g.op_counts()
    text = ob.format_graph(g)
    assert "= Requantize(" in text and "quant(scale=" in text


@pytest.mark.parametrize("dtype", ["u8", "i8"])
@pytest.mark.parametrize("op,attrs", [("Sigmoid", {}), ("LeakyRelu", {"alpha": 0.1}), ("Tanh", {})])
def test_elementwise_chain_becomes_a_table(op: str, attrs: dict[str, Any], dtype: str) -> None:
    npdt = np.uint8 if dtype == "u8" else np.int8
    b = ob.GraphBuilder("table")
    x = b.input("x", dtype, (2, 3, 5))
    y = b.op(op, [_dq(b, x, 0.07, npdt(3))], **attrs)
    yq = b.op("QuantizeLinear", [y, b.constant("ys", np.array(0.01, F32)), b.constant("yz", npdt(-5 if dtype == "i8" else 9))],
              output_dtype=dtype, outputs=["yq"])
    b.output(yq)
    g = b.build()
    f = optimize(g, ["fold_qdq"])
    assert f.op_counts() == {"Lut": 1}
    info = np.iinfo(npdt)
    every = np.arange(int(info.min), int(info.max) + 1).astype(npdt)
    for k in range(0, every.size, 30):  # every 8-bit value passes through the table
        feeds = {"x": np.resize(np.roll(every, -k), (2, 3, 5))}
        np.testing.assert_array_equal(ob.interpret(f, feeds)["yq"], ob.interpret(g, feeds)["yq"])
