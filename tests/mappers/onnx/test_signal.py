"""STFT-17 and MelWeightMatrix-17 against onnxruntime and onnx.reference (STFT: onesided or
not, window given / absent / fed at run time, frame_length given / absent, real and complex
signals, batches; MelWeightMatrix: ranges, sizes, output types), the simulator against the
interpreter, and the refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main
from tests.graph_equality import assert_roundtrip


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is a reference")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


# -- STFT ----------------------------------------------------------------------------------------
def _stft_model(signal: tuple[int, ...], step: int, window: np.ndarray | str | None,
                length: int | None, dtype: int = TensorProto.FLOAT, **attrs: int) -> onnx.ModelProto:
    """``window``: an array (an initializer), "input" (fed at run time, of length ``length``) or None."""
    inits = [numpy_helper.from_array(np.array(step, np.int64), "step")]
    ins, vis = ["x", "step", "", ""], [helper.make_tensor_value_info("x", dtype, signal)]
    if isinstance(window, np.ndarray):
        inits.append(numpy_helper.from_array(window, "w"))
        ins[2] = "w"
    elif window == "input":
        vis.append(helper.make_tensor_value_info("w", dtype, [length]))
        ins[2] = "w"
    if length is not None:
        inits.append(numpy_helper.from_array(np.array(length, np.int64), "len"))
        ins[3] = "len"
    while ins[-1] == "":
        ins.pop()
    node = helper.make_node("STFT", ins, ["y"], name="stft", **attrs)
    graph = helper.make_graph([node], "stft", vis, [helper.make_tensor_value_info("y", dtype, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


STFT_CASES = {
    # id: (signal shape, frame_step, window ("hann" | "input" | None), frame_length, onesided)
    "window,onesided=absent": ((2, 64, 1), 8, "hann", None, None),
    "window,onesided=0": ((1, 40, 1), 5, "hann", None, 0),
    "window,frame_length,onesided=1": ((3, 50, 1), 4, "hann", 16, 1),
    "window=absent,frame_length": ((2, 33, 1), 3, None, 10, 1),
    "window=absent,frame_length=absent": ((2, 24, 1), 4, None, None, 0),
    "window=input,odd_length": ((2, 45, 1), 6, "input", 9, 1),
    "complex,onesided=0": ((2, 32, 2), 4, "hann", None, 0),
}


def _stft_case(case: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    shape, step, window, length, onesided = STFT_CASES[case]
    n = length or 12
    w = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)).astype(np.float32) if window else None
    attrs = {} if onesided is None else {"onesided": onesided}
    model = _stft_model(shape, step, w if window == "hann" else window, length, **attrs)
    feeds = {"x": np.random.default_rng(len(case)).standard_normal(shape).astype(np.float32)}
    if window == "input":
        feeds["w"] = w
    return model, feeds


@pytest.mark.parametrize("case", list(STFT_CASES), ids=list(STFT_CASES))
def test_stft_matches_reference(case: str) -> None:
    model, feeds = _stft_case(case)
    got = np.asarray(ob.interpret(ob.convert(model), feeds)["y"])
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


#: onnxruntime 1.32 fails on a signal-long frame (window and frame_length absent: "shape.Size()
#: must be >= 0") and takes real signals only; onnx.reference covers those cases above.
ORT_STFT = [c for c in STFT_CASES if not c.startswith("complex") and c != "window=absent,frame_length=absent"]


@pytest.mark.parametrize("case", ORT_STFT)
def test_stft_matches_onnxruntime(case: str) -> None:
    model, feeds = _stft_case(case)
    got = np.asarray(ob.interpret(ob.convert(model), feeds)["y"])
    np.testing.assert_allclose(got, _ort(model, feeds), rtol=1e-4, atol=1e-4)


def test_stft_float64_matches_reference() -> None:
    model = _stft_model((2, 30, 1), 5, np.hanning(8), None, TensorProto.DOUBLE, onesided=0)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 30, 1))}
    got = np.asarray(ob.interpret(ob.convert(model), feeds)["y"])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", ["window,onesided=absent", "window=input,odd_length", "complex,onesided=0"])
def test_stft_simulator_matches_interpreter(case: str) -> None:
    model, feeds = _stft_case(case)
    g = ob.convert(model)
    want = np.asarray(ob.interpret(g, feeds)["y"])
    np.testing.assert_array_equal(ob.compile(g, target="bm1684").run(feeds)["y"], want)


@pytest.mark.parametrize(("signal", "window", "length", "attrs", "match"), [
    ((2, 16, 1), np.ones(8, np.float32), 6, {}, r"window has shape \[8\]; it needs \[6\]"),
    ((2, 16, 1), None, 20, {}, r"param 'frame_length'.*longer than the signal \(16\)"),
    ((2, 16, 3), None, 4, {}, r"signal has shape \[2, 16, 3\]"),
    ((2, 16, 1), None, 4, {"onesided": 2}, r"param 'onesided'.*must be one of"),
], ids=["window!=frame_length", "frame_length>signal", "signal=rank3x3", "onesided=2"])
def test_stft_bad_operands_are_refused(signal: tuple, window: np.ndarray | None, length: int,
                                       attrs: dict, match: str) -> None:
    with pytest.raises(ob.OpbridgeError, match=r"node 'stft' \(STFT\)") as err:
        ob.convert(_stft_model(signal, 2, window, length, **attrs))
    assert err.match(match)


def test_stft_frame_step_zero_is_refused_by_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "stft.onnx"
    onnx.save(_stft_model((1, 16, 1), 0, None, 4), str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "stft.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("error:") and "'frame_step'" in line and ">= 1" in line for line in lines)
    assert any(line.startswith("hint:") for line in lines)


# -- MelWeightMatrix ----------------------------------------------------------------------------
def _mel_model(bins: int, dft: int, rate: int, lo: float, hi: float, as_inputs: bool = False,
               **attrs: int) -> onnx.ModelProto:
    values = [np.array(bins, np.int64), np.array(dft, np.int64), np.array(rate, np.int64),
              np.array(lo, np.float32), np.array(hi, np.float32)]
    names = ["bins", "dft", "rate", "lo", "hi"]
    node = helper.make_node("MelWeightMatrix", names, ["y"], name="mel", **attrs)
    if as_inputs:
        vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), [])
               for n, v in zip(names, values)]
        graph = helper.make_graph([node], "mel", vis, [helper.make_tensor_value_info("y", 1, None)])
    else:
        inits = [numpy_helper.from_array(v, n) for n, v in zip(names, values)]
        graph = helper.make_graph([node], "mel", [], [helper.make_tensor_value_info("y", 1, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


MEL_CASES = {
    "speech": (8, 16, 8192, 0.0, 4000.0),
    "whisper-like": (80, 400, 16000, 0.0, 8000.0),
    "narrow-band": (10, 64, 16000, 300.0, 3400.0),
    "odd-dft": (13, 255, 22050, 20.0, 11000.0),
    "empty-rises": (40, 32, 16000, 100.0, 7900.0),
}


@pytest.mark.parametrize("case", list(MEL_CASES), ids=list(MEL_CASES))
def test_mel_weight_matrix_matches_references(case: str) -> None:
    model = _mel_model(*MEL_CASES[case])
    got = np.asarray(ob.interpret(ob.convert(model), {})["y"])
    want = ReferenceEvaluator(model).run(None, {})[0]
    assert got.shape == want.shape == (MEL_CASES[case][1] // 2 + 1, MEL_CASES[case][0])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, _ort(model, {}), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("code", "dtype"), [(None, np.float32), (TensorProto.DOUBLE, np.float64),
                                             (TensorProto.FLOAT16, np.float16), (TensorProto.INT32, np.int32)],
                         ids=["output_datatype=absent", "f64", "f16", "i32"])
def test_mel_weight_matrix_output_datatype(code: int | None, dtype: type) -> None:
    attrs = {} if code is None else {"output_datatype": code}
    model = _mel_model(8, 32, 16000, 0.0, 7000.0, **attrs)
    got = np.asarray(ob.interpret(ob.convert(model), {})["y"])
    want = ReferenceEvaluator(model).run(None, {})[0]
    assert got.dtype == want.dtype == dtype
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3)


def test_mel_weight_matrix_simulator_matches_interpreter(tmp_path: Path) -> None:
    """A node without inputs, in the program and in a .obir file."""
    b = ob.GraphBuilder("mel")
    x = b.input("spec", "f32", (5, 17))
    mel = b.op("MelWeightMatrix", [], num_mel_bins=6, dft_length=32, sample_rate=16000,
               lower_edge_hertz=0.0, upper_edge_hertz=8000.0 - 1)
    b.output(b.op("MatMul", [x, mel]))
    g = b.build()
    feeds = {"spec": np.random.default_rng(0).random((5, 17)).astype(np.float32)}
    want = np.asarray(ob.interpret(g, feeds)[g.outputs[0].name])
    np.testing.assert_allclose(ob.compile(g, target="bm1684").run(feeds)[g.outputs[0].name], want,
                               rtol=1e-6, atol=1e-6)
    assert_roundtrip(g, tmp_path)


@pytest.mark.parametrize(("args", "match"), [
    ((8, 16, 8000, 0.0, 7000.0), r"param 'upper_edge_hertz': 7000.0 Hz falls in DFT bin 11"),
    ((8, 16, 8000, 500.0, 400.0), r"param 'upper_edge_hertz'.*0 <= lower < upper"),
    ((0, 16, 8000, 0.0, 3000.0), r"param 'num_mel_bins' = 0: must be >= 1"),
], ids=["upper>nyquist", "lower>=upper", "num_mel_bins=0"])
def test_mel_weight_matrix_bad_operands_are_refused(args: tuple, match: str) -> None:
    with pytest.raises(ob.AttrError, match=r"node 'mel' \(MelWeightMatrix\)") as err:
        ob.convert(_mel_model(*args))
    assert err.match(match)


def test_mel_weight_matrix_operands_fed_at_run_time_are_refused(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "mel.onnx"
    onnx.save(_mel_model(8, 16, 8000, 0.0, 3000.0, as_inputs=True), str(path))
    assert main(["convert", str(path), "-o", str(tmp_path / "mel.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("error:") and "MelWeightMatrix" in line and "run time" in line
               for line in lines)
    assert any(line.startswith("hint:") for line in lines)


def test_stft_review_cases_symbolic_length_and_short_signal():
    """A symbolic signal length gives a frame count that is an expression of it, a symbolic
    window length is taken, and a run-time signal shorter than frame_length is an error naming
    the node (onnxruntime refuses it too), not an empty result."""
    node = helper.make_node("STFT", ["x", "step", "w"], ["y"])
    g = helper.make_graph(
        [node], "stft_sym",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "L", 1]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, ["W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "F", 5, 2])],
        [helper.make_tensor("step", TensorProto.INT64, [], [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ob.OpbridgeError):
        ob.convert(m)  # frame_length unknown: neither the window nor the signal is static
    node = helper.make_node("STFT", ["x", "step", "w", "n"], ["y"])
    g = helper.make_graph(
        [node], "stft_sym",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, "L", 1]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, ["W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, "F", 5, 2])],
        [helper.make_tensor("step", TensorProto.INT64, [], [4]),
         helper.make_tensor("n", TensorProto.INT64, [], [8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    gr = ob.convert(m)
    frames = gr.outputs[0].shape[1]
    assert not isinstance(frames, int) and "L" in str(frames)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 20, 1)).astype(np.float32)
    w = np.hanning(8).astype(np.float32)
    ref = ReferenceEvaluator(m).run(None, {"x": x, "w": w})[0]
    got = ob.interpret(gr, {"x": x, "w": w})
    np.testing.assert_allclose(list(got.values())[0], ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ob.OpbridgeError, match="frame_length"):
        ob.interpret(gr, {"x": x[:, :5], "w": w})
    with pytest.raises(ob.OpbridgeError, match="window"):
        ob.interpret(gr, {"x": x, "w": w[:6]})
