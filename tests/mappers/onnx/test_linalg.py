"""Det-11/22 against onnxruntime (f32) and onnx.reference (f64), batches and 2-D to a scalar,
the simulator against the interpreter, and the refusal of matrices that are not square
(torch.linalg.det through TorchScript: tests/torchscript/test_linalg.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main

CODES = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16}


def _model(shape: tuple[int, ...], dtype: type, opset: int = 22) -> onnx.ModelProto:
    node = helper.make_node("Det", ["x"], ["y"], name="det")
    graph = helper.make_graph([node], "det", [helper.make_tensor_value_info("x", CODES[dtype], shape)],
                              [helper.make_tensor_value_info("y", CODES[dtype], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


SHAPES = {"2d": (3, 3), "batch": (4, 5, 5), "batch2": (2, 3, 4, 4), "1x1": (2, 1, 1)}


def _reference(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """onnxruntime for f32 (its CPU Det has no f64 kernel), onnx.reference for f64."""
    if x.dtype == np.float64:
        return ReferenceEvaluator(model).run(None, {"x": x})[0]
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the f32 reference")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", list(SHAPES.values()), ids=list(SHAPES))
@pytest.mark.parametrize("opset", [11, 22])
def test_matches_onnxruntime_and_reference(shape: tuple[int, ...], dtype: type, opset: int) -> None:
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(dtype)
    model = _model(shape, dtype, opset)
    got = np.asarray(ob.interpret(ob.convert(model), {"x": x})["y"])
    want = _reference(model, x)
    assert got.shape == want.shape == shape[:-2] and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_float16_matches_numpy_in_float64() -> None:
    """Neither reference runs f16 (numpy's linalg lacks it): numpy's det of the same values in
    float64, rounded to f16."""
    x = np.random.default_rng(1).standard_normal((3, 4, 4)).astype(np.float16)
    got = np.asarray(ob.interpret(ob.convert(_model(x.shape, np.float16)), {"x": x})["y"])
    assert got.dtype == np.float16
    want = np.linalg.det(x.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_simulator_matches_interpreter() -> None:
    g = ob.convert(_model((6, 4, 4), np.float32))
    feeds = {"x": np.random.default_rng(2).standard_normal((6, 4, 4)).astype(np.float32)}
    want = np.asarray(ob.interpret(g, feeds)["y"])
    np.testing.assert_array_equal(ob.compile(g, target="bm1684").run(feeds)["y"], want)


def test_matrices_that_are_not_square_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ob.ShapeError, match=r"node 'det' \(Det\).*\[2, 3, 4\].*square") as err:
        ob.convert(_model((2, 3, 4), np.float32))
    assert "last two dims are equal" in err.value.hint
    path = tmp_path / "det.onnx"
    onnx.save(_model((5,), np.float32), str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "det.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("error:") and "Det" in line for line in lines)
    assert any(line.startswith("hint:") for line in lines)
