"""BitCast: ONNX BitCast-26 against onnx.reference (every pair of same-width types) and
onnxruntime, the IR op's width-changing form against torch's ``Tensor.view(dtype)``, the
simulator against the interpreter, and the refusals (ONNX widths that differ, a last axis that
does not fit, the CLI's `error:` / `hint:`)."""

from __future__ import annotations

import itertools
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main
from opbridge.ir.ops.bits import BITS
from opbridge.ir.types import to_numpy_dtype

#: IR dtype -> TensorProto code, for the types both have.
CODES = {"f32": 1, "u8": 2, "i8": 3, "u16": 4, "i16": 5, "i32": 6, "i64": 7, "bool": 9, "f16": 10,
         "f64": 11, "u32": 12, "u64": 13, "bf16": 16, "f8e4m3fn": 17, "f8e4m3fnuz": 18,
         "f8e5m2": 19, "f8e5m2fnuz": 20, "u4": 21, "i4": 22, "f4e2m1": 23, "f8e8m0": 24,
         "u2": 25, "i2": 26}
SAME_WIDTH = [(a, b) for a, b in itertools.product(CODES, CODES) if BITS[a] == BITS[b]]


def _model(src: str, to: int, shape: tuple[int, ...], opset: int = 26) -> onnx.ModelProto:
    node = helper.make_node("BitCast", ["x"], ["y"], name="bc", to=to)
    graph = helper.make_graph([node], "bitcast", [helper.make_tensor_value_info("x", CODES[src], shape)],
                              [helper.make_tensor_value_info("y", to, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _random_bits(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Every bit pattern of ``dtype`` may appear (NaNs included), for a type-agnostic check."""
    rng = np.random.default_rng(seed)
    npt = to_numpy_dtype(dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if BITS[dtype] < 8:  # one element per byte, the value's bits in the low ones
        codes = rng.integers(0, 1 << BITS[dtype], shape).astype(np.uint8)
        return codes.view(npt)
    raw = rng.integers(0, 256, (*shape, npt.itemsize)).astype(np.uint8)
    return raw.view(npt).reshape(shape)


def _bits(a: np.ndarray) -> np.ndarray:
    """The array's bit patterns as unsigned integers (NaN == NaN here)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        return a.astype(np.uint8)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


@pytest.mark.parametrize(("src", "dst"), SAME_WIDTH, ids=[f"{a}->{b}" for a, b in SAME_WIDTH])
def test_every_same_width_pair_matches_onnx_reference(src: str, dst: str) -> None:
    shape = (2, 3, 4)
    x = _random_bits(src, shape, seed=len(src) * 7 + len(dst))
    model = _model(src, CODES[dst], shape)
    g = ob.convert(model)
    got = np.asarray(ob.interpret(g, {"x": x})["y"])
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    if dst == "bool":  # the reference keeps the raw byte; a numpy bool is its truth
        np.testing.assert_array_equal(got, _bits(want) != 0)
    else:
        np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize(("src", "dst"), [("f32", "i32"), ("i64", "f64"), ("u16", "i16"),
                                          ("f16", "u16"), ("i8", "u8")])
@pytest.mark.parametrize("shape", [(), (5,), (2, 7, 3)], ids=["scalar", "rank1", "batch"])
def test_matches_onnxruntime(src: str, dst: str, shape: tuple[int, ...]) -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the second reference")
    x = _random_bits(src, shape, seed=11)
    model = _model(src, CODES[dst], shape)
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as err:  # an onnxruntime build without BitCast-26 for this type pair
        pytest.skip(f"onnxruntime cannot run BitCast {src}->{dst}: {err}")
    want = sess.run(None, {"x": x})[0]
    got = np.asarray(ob.interpret(ob.convert(model), {"x": x})["y"])
    np.testing.assert_array_equal(_bits(got), _bits(want))


# -- the IR op's width change, against torch's view(dtype) -----------------------------------
TORCH_PAIRS = [("f32", "u8"), ("f32", "i16"), ("i64", "i32"), ("f64", "f16"), ("u8", "f32"),
               ("i16", "f64"), ("bf16", "i8"), ("i32", "i64")]


@pytest.mark.parametrize(("src", "dst"), TORCH_PAIRS, ids=[f"{a}->{b}" for a, b in TORCH_PAIRS])
def test_width_change_matches_torch_view_dtype(src: str, dst: str) -> None:
    torch = pytest.importorskip("torch", reason="torch's Tensor.view(dtype) is the reference")
    tt = {"f32": torch.float32, "u8": torch.uint8, "i16": torch.int16, "i64": torch.int64,
          "i32": torch.int32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i8": torch.int8}
    ratio = max(BITS[src], BITS[dst]) // min(BITS[src], BITS[dst])
    shape = (3, 2, 4 * ratio) if BITS[src] < BITS[dst] else (3, 5)  # wider: a multiple of the ratio
    x = _random_bits(src, shape, seed=3)
    b = ob.GraphBuilder("bc")
    b.output(b.op("BitCast", [b.input("x", src, shape)], to=dst))
    g = b.build()
    got = np.asarray(ob.interpret(g, {"x": x})[g.outputs[0].name])
    xt = torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if src == "bf16" else torch.from_numpy(x)
    want = xt.view(tt[dst])
    want_np = want.view(torch.int16).numpy() if dst == "bf16" else want.numpy()
    assert got.shape == tuple(want.shape) == g.outputs[0].shape
    np.testing.assert_array_equal(_bits(got), _bits(want_np))


@pytest.mark.parametrize(("src", "dst", "shape"), [("i4", "u4", (3, 4)), ("f32", "i8", (2, 3)),
                                                   ("u8", "i32", (5, 4)), ("f16", "bf16", ())],
                         ids=["subbyte", "narrower", "wider", "scalar"])
def test_simulator_matches_interpreter(src: str, dst: str, shape: tuple[int, ...]) -> None:
    b = ob.GraphBuilder("bc")
    x = b.input("x", src, shape)
    b.output(b.op("BitCast", [x], to=dst))
    g = b.build()
    feed = {"x": _random_bits(src, shape, seed=5)}
    want = np.asarray(ob.interpret(g, feed)[g.outputs[0].name])
    got = ob.compile(g, target="bm1684").run(feed)[g.outputs[0].name]
    np.testing.assert_array_equal(_bits(got), _bits(want))


def test_subbyte_keeps_the_bits() -> None:
    """int4 -1 is 0b1111: as uint4 it reads 15 (ONNX: the same bits, little endian)."""
    b = ob.GraphBuilder("bc")
    b.output(b.op("BitCast", [b.input("x", "i4", (3,))], to="u4"))
    g = b.build()
    got = ob.interpret(g, {"x": np.array([-1, -8, 7], ml_dtypes.int4)})[g.outputs[0].name]
    np.testing.assert_array_equal(np.asarray(got).astype(np.int64), [15, 8, 7])


# -- refusals ----------------------------------------------------------------------------------
def test_onnx_widths_that_differ_are_refused_naming_the_node() -> None:
    with pytest.raises(ob.AttrError, match=r"node 'bc' \(BitCast\).*'to'") as err:
        ob.convert(_model("f32", TensorProto.INT8, (2, 3)))
    assert "same bit width" in str(err.value) and "Cast" in err.value.hint


def test_ir_last_axis_must_be_the_width_ratio() -> None:
    b = ob.GraphBuilder("bc")
    with pytest.raises(ob.AttrError, match=r"param 'to'.*last dim is a multiple of 4") as err:
        b.op("BitCast", [b.input("x", "u8", (2, 3))], to="f32", name="wide")
    assert "ratio of the widths" in err.value.hint


def test_ir_subbyte_to_another_width_is_refused() -> None:
    b = ob.GraphBuilder("bc")
    with pytest.raises(ob.AttrError, match="narrower than a byte"):
        b.op("BitCast", [b.input("x", "u8", (2,))], to="u4")


def test_cli_refuses_a_width_mismatch_with_error_and_hint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "bc.onnx"
    onnx.save(_model("f64", TensorProto.FLOAT, (4,)), str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "bc.obir")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert any(line.startswith("error:") and "BitCast" in line and "'to'" in line for line in lines)
    assert any(line.startswith("hint:") for line in lines)
