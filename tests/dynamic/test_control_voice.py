"""A small voice-activity model in the style of the PyPI VAD models: it branches (If) on its
sample-rate input, frames the audio, runs a GRU over the frames and scores each one. Its audio
length is a symbolic dim in the ONNX file; here each test fixes it with input_shapes (the
length left symbolic, compiled once with dynamic=True: test_voice_dynamic.py); the branch is
taken at run time. Checked against onnxruntime in the interpreter and on the simulated TPU (the
If runs as a host layer)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import opbridge as ob

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for these tests")

F, I64 = TensorProto.FLOAT, TensorProto.INT64
FRAME, HIDDEN = 32, 8


def _vi(name, shape, t=F):
    return helper.make_tensor_value_info(name, t, shape)


def _const(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _branch(name, decimate):
    """Frames of FRAME samples at 8 kHz: 16 kHz audio keeps every 2nd sample, 8 kHz audio its
    first half (the model looks at the same duration); the frame count follows the length."""
    if decimate:
        cut = [helper.make_node("Slice", ["audio", "s0", "big", "ax1", "two"], [f"{name}_rs"])]
    else:
        cut = [helper.make_node("Shape", ["audio"], [f"{name}_shape"]),
               helper.make_node("Gather", [f"{name}_shape", "ax1"], [f"{name}_n"]),
               helper.make_node("Div", [f"{name}_n", "two"], [f"{name}_half"]),
               helper.make_node("Slice", ["audio", "s0", f"{name}_half", "ax1"], [f"{name}_rs"])]
    nodes = [*cut,
             helper.make_node("Reshape", [f"{name}_rs", "frame_shape"], [f"{name}_frames"]),
             helper.make_node("Mul", [f"{name}_frames", f"{name}_gain"], [f"{name}_out"])]
    return helper.make_graph(nodes, name, [], [_vi(f"{name}_out", [None, 1, FRAME])],
                             initializer=[_const(f"{name}_gain", np.float32(1.0 if decimate else 0.5))])


def voice_model(seed: int = 0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((1, 3 * HIDDEN, FRAME)).astype(np.float32) * 0.3
    r = rng.standard_normal((1, 3 * HIDDEN, HIDDEN)).astype(np.float32) * 0.3
    b = rng.standard_normal((1, 6 * HIDDEN)).astype(np.float32) * 0.1
    head = rng.standard_normal((HIDDEN, 1)).astype(np.float32)
    inits = [_const("sr16k", np.int64(16000)), _const("s0", np.array([0], np.int64)),
             _const("big", np.array([1 << 40], np.int64)), _const("ax1", np.array([1], np.int64)),
             _const("one", np.array([1], np.int64)), _const("two", np.array([2], np.int64)),
             _const("frame_shape", np.array([-1, 1, FRAME], np.int64)),
             _const("W", w), _const("R", r), _const("B", b), _const("head", head)]
    nodes = [
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["frames"], name="by_rate",
                         then_branch=_branch("rate16k", True), else_branch=_branch("rate8k", False)),
        helper.make_node("GRU", ["frames", "W", "R", "B"], ["states", "last"], name="gru",
                         hidden_size=HIDDEN),
        helper.make_node("Squeeze", ["states", "ax1"], ["per_frame"]),  # [frames, 1, H]
        helper.make_node("MatMul", ["per_frame", "head"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["speech"], name="score"),
    ]
    g = helper.make_graph(nodes, "vad", [_vi("audio", [1, "samples"]), _vi("sr", [], I64)],
                          [_vi("speech", [None, 1, 1])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


CASES = [(640, 16000), (640, 8000), (1024, 16000), (1024, 8000)]


@pytest.mark.parametrize(("samples", "sr"), CASES, ids=[f"{n}@{sr}" for n, sr in CASES])
def test_voice_model_matches_onnxruntime_in_the_interpreter(samples, sr):
    m = voice_model()
    g = ob.convert(m, input_shapes={"audio": (1, samples)})
    assert "If" in g.op_counts()
    feeds = {"audio": np.random.default_rng(samples).standard_normal((1, samples)).astype(np.float32),
             "sr": np.array(sr, np.int64)}
    want = ort.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
    got = ob.interpret(g, feeds)["speech"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_voice_model_on_the_simulator_runs_the_branch_as_a_host_layer(tmp_path):
    m = voice_model()
    g = ob.convert(m, input_shapes={"audio": (1, 640)})
    prog = ob.compile(g)
    profile = prog.profile()
    hosts = [u for u in profile.units if u.kind == "host"]
    assert [u.ops for u in hosts] == [["If"]] and profile.num_cpu_layers == 1
    assert profile.num_global_layers + profile.num_layer_groups > 1  # the GRU runs on the TPU
    prog.save(tmp_path / "vad.obprog")
    loaded = ob.load_program(tmp_path / "vad.obprog")
    session = ort.InferenceSession(m.SerializeToString())
    for sr in (16000, 8000):
        feeds = {"audio": np.random.default_rng(sr).standard_normal((1, 640)).astype(np.float32),
                 "sr": np.array(sr, np.int64)}
        want = session.run(None, feeds)[0]
        np.testing.assert_allclose(prog.run(feeds)["speech"], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(loaded.run(feeds)["speech"], want, rtol=1e-5, atol=1e-6)
