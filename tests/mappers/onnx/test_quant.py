"""Quantized ONNX ops (QDQ, the integer ops, onnxruntime's com.microsoft QOperator ops) converted
and interpreted, against onnxruntime running the same one-node model: integer outputs equal
(or, where onnxruntime's float kernels round differently, within one step, counted)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import opbridge as ob
from opbridge.errors import AttrError, OpbridgeError
from tests.conftest import requires_ort

pytestmark = requires_ort

RNG = np.random.default_rng(7)
F32 = np.float32
MS = "com.microsoft"


def model_of(op: str, inputs: list[Any], *, opset: int = 21, domain: str = "", n_out: int = 1,
             consts: tuple[int, ...] = (), **attrs: Any) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model; inputs whose index is in ``consts`` are initializers, None is absent."""
    names, vis, inits, feeds = [], [], [], {}
    for i, arr in enumerate(inputs):
        if arr is None:
            names.append("")
            continue
        names.append(f"in{i}")
        if i in consts:
            inits.append(numpy_helper.from_array(np.asarray(arr), f"in{i}"))
        else:
            vis.append(helper.make_tensor_value_info(f"in{i}", helper.np_dtype_to_tensor_dtype(arr.dtype),
                                                     arr.shape))
            feeds[f"in{i}"] = arr
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    graph = helper.make_graph([node], op, vis, [helper.make_empty_tensor_value_info(o)
                                                for o in outs], initializer=inits)
    imports = [helper.make_opsetid("", opset if not domain else 17)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 9
    return model, feeds


def run_both(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    want = sess.run(None, feeds)
    g = ob.convert(model)
    res = ob.interpret(g, feeds)
    return [res[v.name] for v in g.outputs], want


def assert_same(got: np.ndarray, want: np.ndarray, *, lsb: int = 0) -> None:
    """Equal dtype and shape; integers equal, or within ``lsb`` steps where allowed."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        return
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max(initial=0) <= lsb, f"{int((diff > 0).sum())} of {diff.size} differ, by up to {diff.max()}"


def q8(shape: tuple[int, ...], dtype: Any = np.uint8) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dtype)


# -- QuantizeLinear / DequantizeLinear through every opset ------------------------------------------
@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("mode", ["tensor", "axis", "zp=absent"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16], ids=["u8", "i8", "i16"])
def test_quantize_dequantize(opset: int, mode: str, dtype: Any) -> None:
    if dtype == np.int16 and opset < 21:
        pytest.skip("int16 quantization exists from opset 21")
    if mode == "axis" and opset < 13:
        pytest.skip("per-axis quantization exists from opset 13")
    x = (RNG.standard_normal((2, 3, 4)) * 5).astype(F32)
    scale = RNG.uniform(0.02, 0.1, (3,)).astype(F32) if mode == "axis" else np.array(0.05, F32)
    zp = None if mode == "zp=absent" else q8(scale.shape, dtype)
    if zp is None and dtype != np.uint8:
        pytest.skip("without a zero point the type is uint8")
    got, want = run_both(*model_of("QuantizeLinear", [x, scale, zp], opset=opset, consts=(1, 2)))
    assert_same(got[0], want[0])
    got, want = run_both(*model_of("DequantizeLinear", [want[0], scale, zp], opset=opset, consts=(1, 2)))
    assert_same(got[0], want[0])


def test_quantize_blocked_int4() -> None:
    x = (RNG.standard_normal((4, 6)) * 3).astype(F32)
    scale = RNG.uniform(0.2, 0.5, (4, 2)).astype(F32)
    zp = RNG.integers(-3, 3, (4, 2)).astype(np.int8)
    model, feeds = model_of("QuantizeLinear", [x, scale, None], opset=21, consts=(1,), axis=1,
                            block_size=3, output_dtype=T.INT8)
    got, want = run_both(model, feeds)
    assert_same(got[0], want[0])
    got, want = run_both(*model_of("DequantizeLinear", [want[0], scale, zp], opset=21, consts=(1, 2),
                                   axis=1, block_size=3))
    assert_same(got[0], want[0])


def test_quantize_maps_onto_the_ir_op() -> None:
    g = ob.convert(model_of("QuantizeLinear", [np.ones((2, 3), F32), np.array(0.5, F32),
                                               np.array(3, np.int8)], opset=13, consts=(1, 2))[0])
    assert g.op_counts() == {"QuantizeLinear": 1}
    assert g.nodes[0].attrs["output_dtype"] == "i8" and g.nodes[0].attrs["axis"] == 1


# -- the integer ops ---------------------------------------------------------------------------------
@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
@pytest.mark.parametrize("case", ["plain", "bias+pads+stride", "group", "i8-activations"])
def test_qlinear_conv(per_channel: bool, case: str) -> None:
    xdt = np.int8 if case == "i8-activations" else np.uint8
    group = 2 if case == "group" else 1
    x, w = q8((1, 4, 7, 6), xdt), q8((6, 4 // group, 3, 3), np.int8)
    m = 6
    ws = RNG.uniform(0.002, 0.01, (m,)).astype(F32) if per_channel else np.array(0.004, F32)
    wz = np.zeros(ws.shape, np.int8)
    bias = RNG.integers(-3000, 3000, (m,)).astype(np.int32) if case == "bias+pads+stride" else None
    attrs: dict[str, Any] = {"group": group}
    if case == "bias+pads+stride":
        attrs.update(pads=[1, 1, 1, 0], strides=[2, 1])
    ins = [x, np.array(0.02, F32), q8((), xdt), w, ws, wz, np.array(0.15, F32), q8((), xdt), bias]
    got, want = run_both(*model_of("QLinearConv", ins, opset=10, consts=(1, 2, 3, 4, 5, 6, 7, 8), **attrs))
    assert_same(got[0], want[0])


@pytest.mark.parametrize("opset,per_column", [(10, False), (21, True)])
@pytest.mark.parametrize("shapes", [((5, 8), (8, 3)), ((2, 5, 8), (8, 3))], ids=["2d", "3d"])
def test_qlinear_matmul(opset: int, per_column: bool, shapes: Any) -> None:
    a, b = q8(shapes[0]), q8(shapes[1], np.int8)
    bs = RNG.uniform(0.01, 0.03, (3,)).astype(F32) if per_column else np.array(0.02, F32)
    ins = [a, np.array(0.05, F32), q8(()), b, bs, np.zeros(bs.shape, np.int8), np.array(0.3, F32), q8(())]
    got, want = run_both(*model_of("QLinearMatMul", ins, opset=opset, consts=(1, 2, 3, 4, 5, 6, 7)))
    assert_same(got[0], want[0])


@pytest.mark.parametrize("data", ["mixed", "positive", "negative"])
def test_dynamic_quantize_linear(data: str) -> None:
    x = (RNG.standard_normal((3, 5)) * 4).astype(F32)
    if data == "positive":
        x = np.abs(x) + 0.5
    elif data == "negative":
        x = -np.abs(x) - 0.5
    got, want = run_both(*model_of("DynamicQuantizeLinear", [x], opset=11, n_out=3))
    for a, b in zip(got, want):
        assert_same(np.asarray(a).reshape(np.shape(b)), b)


# -- com.microsoft QOperator ops ---------------------------------------------------------------------
def _ms(op: str, ins: list[Any], consts: tuple[int, ...], **attrs: Any) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return run_both(*model_of(op, ins, domain=MS, consts=consts, **attrs))


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "i8"])
@pytest.mark.parametrize("b_shape", [(2, 3, 4, 5), (1, 3, 1, 1)], ids=["same", "broadcast"])
def test_qlinear_binary(op: str, dtype: Any, b_shape: tuple[int, ...]) -> None:
    ins = [q8((2, 3, 4, 5), dtype), np.array(0.04, F32), q8((), dtype), q8(b_shape, dtype),
           np.array(0.07, F32), q8((), dtype), np.array(0.09 if op == "QLinearAdd" else 0.6, F32),
           q8((), dtype)]
    got, want = _ms(op, ins, (1, 2, 4, 5, 6, 7))
    assert_same(got[0], want[0])


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {}),
                                      ("QLinearLeakyRelu", {"alpha": 0.2})],
                         ids=["sigmoid", "leakyrelu-alpha=absent", "leakyrelu-alpha=0.2"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "i8"])
def test_qlinear_lookup_ops(op: str, attrs: dict[str, Any], dtype: Any) -> None:
    x = np.arange(np.iinfo(dtype).min, int(np.iinfo(dtype).max) + 1).astype(dtype).reshape(1, 16, 16)
    ys = 1.0 / 255 if op == "QLinearSigmoid" else 0.05
    yz = np.array(np.iinfo(dtype).min if op == "QLinearSigmoid" else 20, dtype)
    got, want = _ms(op, [x, np.array(0.06, F32), np.array(10, dtype), np.array(ys, F32), yz], (1, 2, 3, 4),
                    **attrs)
    assert_same(got[0], want[0])


def test_qlinear_concat() -> None:
    a, b = q8((1, 2, 3, 3)), q8((1, 4, 3, 3))
    ins = [np.array(0.1, F32), np.array(128, np.uint8), a, np.array(0.05, F32), np.array(100, np.uint8),
           b, np.array(0.1, F32), np.array(128, np.uint8)]
    got, want = _ms("QLinearConcat", ins, (0, 1, 3, 4, 6, 7), axis=1)
    assert_same(got[0], want[0])


@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2], "strides": [2, 2]},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}],
                         ids=["k2s2", "pads", "pads+count_include_pad"])
def test_qlinear_average_pool(attrs: dict[str, Any]) -> None:
    ins = [q8((1, 3, 6, 6)), np.array(0.05, F32), np.array(120, np.uint8), np.array(0.04, F32),
           np.array(110, np.uint8)]
    got, want = _ms("QLinearAveragePool", ins, (1, 2, 3, 4), **attrs)
    assert_same(got[0], want[0])


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "i8"])
def test_qlinear_global_average_pool(channels_last: int, dtype: Any) -> None:
    ins = [q8((2, 5, 7, 4), dtype), np.array(0.05, F32), np.array(3, dtype), np.array(0.02, F32),
           np.array(-5 if dtype == np.int8 else 100, dtype)]
    got, want = _ms("QLinearGlobalAveragePool", ins, (1, 2, 3, 4), channels_last=channels_last)
    assert_same(got[0], want[0])


@pytest.mark.parametrize("case", ["requant", "float-out", "transB+per-column", "i8xi8+bias"])
def test_qgemm(case: str) -> None:
    adt = np.int8 if case == "i8xi8+bias" else np.uint8
    a = q8((4, 6), adt)
    n = 5
    trans_b = case == "transB+per-column"
    b = q8((n, 6) if trans_b else (6, n), np.int8)
    bs = RNG.uniform(0.01, 0.02, (n,)).astype(F32) if trans_b else np.array(0.015, F32)
    c = RNG.integers(-500, 500, (n,)).astype(np.int32) if case != "float-out" else None
    ins: list[Any] = [a, np.array(0.03, F32), q8((), adt), b, bs, np.zeros(bs.shape, np.int8), c]
    if case != "float-out":
        ins += [np.array(0.2, F32), q8((), adt)]
    got, want = _ms("QGemm", ins, tuple(range(1, len(ins))), transB=int(trans_b), alpha=0.9)
    assert_same(got[0], want[0])


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_com_microsoft_quantize_dequantize(op: str) -> None:
    scale = RNG.uniform(0.02, 0.05, (3,)).astype(F32)
    zp = q8((3,))
    x = (RNG.standard_normal((2, 3, 4)) * 3).astype(F32) if op == "QuantizeLinear" else q8((2, 3, 4))
    got, want = _ms(op, [x, scale, zp], (1, 2), axis=1)
    assert_same(got[0], want[0])


def test_dynamic_quantize_lstm_close_to_onnxruntime() -> None:
    seq, batch, inp, hid = 4, 2, 5, 3
    w = q8((1, inp, 4 * hid), np.int8)
    r = q8((1, hid, 4 * hid), np.int8)
    ins = [(RNG.standard_normal((seq, batch, inp))).astype(F32), w, r,
           (RNG.standard_normal((1, 8 * hid)) * 0.1).astype(F32), None, None, None, None,
           np.array([0.004], F32), np.zeros(1, np.int8), RNG.uniform(0.003, 0.006, (1, 4 * hid)).astype(F32),
           np.zeros((1, 4 * hid), np.int8)]
    got, want = _ms("DynamicQuantizeLSTM", ins, (1, 2, 3, 8, 9, 10, 11), hidden_size=hid)
    # onnxruntime also quantizes X and h to uint8 at run time (its "dynamic" part), the
    # converted LSTM keeps them float: close, not equal
    a, b = got[0].ravel().astype(np.float64), want[0].ravel().astype(np.float64)
    assert a.shape == b.shape and float(a @ b / np.linalg.norm(a) / np.linalg.norm(b)) >= 0.9999


# -- the com.microsoft schemas: defaults filled, unknown attributes refused --------------------------
def test_com_microsoft_unknown_attribute_is_refused() -> None:
    model, _ = model_of("QLinearSigmoid", [q8((2, 2)), np.array(0.1, F32), q8(()), np.array(0.1, F32),
                                           q8(())], domain=MS, consts=(1, 2, 3, 4), alpah=0.3)
    with pytest.raises(AttrError, match=r"'alpah'.*QLinearSigmoid"):
        ob.convert(model)


def test_qlinear_concat_needs_triples() -> None:
    model, _ = model_of("QLinearConcat", [np.array(0.1, F32), np.array(1, np.uint8), q8((1, 2))],
                        domain=MS, consts=(0, 1), axis=0)
    with pytest.raises(OpbridgeError, match="triples"):
        ob.convert(model)


def test_com_microsoft_op_without_domain_import_still_maps() -> None:
    """A model that forgets to import com.microsoft: the newest mapping version is used."""
    model, feeds = model_of("QLinearAdd", [q8((3,)), np.array(0.1, F32), q8(()), q8((3,)),
                                           np.array(0.1, F32), q8(()), np.array(0.2, F32), q8(())],
                            domain=MS, consts=(1, 2, 4, 5, 6, 7))
    del model.opset_import[1]
    g = ob.convert(model)
    assert "Add" in g.op_counts()


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_average_pool_channels_last(channels_last: int) -> None:
    shape = (1, 5, 5, 3) if channels_last else (1, 3, 5, 5)
    ins = [q8(shape), np.array(0.05, F32), np.array(120, np.uint8), np.array(0.04, F32),
           np.array(110, np.uint8)]
    got, want = _ms("QLinearAveragePool", ins, (1, 2, 3, 4), kernel_shape=[2, 2],
                    channels_last=channels_last)
    assert_same(got[0], want[0])


def test_bad_per_axis_scale_names_the_node() -> None:
    model, _ = model_of("QuantizeLinear", [np.ones((2, 3), F32), np.ones(4, F32), q8((4,))],
                        opset=13, consts=(1, 2), axis=1)
    with pytest.raises(OpbridgeError, match=r"QuantizeLinear.*y_scale.*per axis 1 it must be \[3\]"):
        ob.convert(model)


def test_quantized_weights_stay_integer_with_their_params() -> None:
    w = q8((4, 3), np.int8)
    scale = np.array([0.1, 0.2, 0.3, 0.4], F32)
    model, _ = model_of("DequantizeLinear", [w, scale, np.zeros(4, np.int8)], opset=13, consts=(0, 1, 2),
                        axis=0)
    g = ob.convert(model)
    assert g.op_counts() == {"DequantizeLinear": 1}
    wq = g.nodes[0].inputs[0]
    assert wq.dtype == "i8" and wq.quant is not None and wq.quant.axis == 0
    np.testing.assert_array_equal(wq.quant.scale, scale)


def test_a_dequantized_scalar_still_folds_for_mappings_that_need_a_constant() -> None:
    """Pad's constant_value must be a constant: a DequantizeLinear of a scalar is folded for it
    (tensors, the weights, stay integer)."""
    inits = [numpy_helper.from_array(np.array(10, np.uint8), "lo_q"),
             numpy_helper.from_array(np.array(0.05, F32), "s"), numpy_helper.from_array(np.array(0, np.uint8), "z"),
             numpy_helper.from_array(np.array([1, 2], np.int64), "pads")]
    nodes = [helper.make_node("DequantizeLinear", ["lo_q", "s", "z"], ["lo"]),
             helper.make_node("Pad", ["x", "pads", "lo"], ["y"])]
    graph = helper.make_graph(nodes, "pad", [helper.make_tensor_value_info("x", T.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [7])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 9
    x = np.array([-1.0, 0.2, 0.7, 3.0], F32)
    got, want = run_both(model, {"x": x})
    assert_same(got[0], want[0])
