"""The voice-activity model of test_control_voice.py with its audio length left symbolic: it
converts once (the If on the sample rate stays, the GRU becomes a Scan over a symbolic number of
frames) and runs at several lengths and both rates, matching onnxruntime, in the interpreter,
on the simulator compiled once with ``dynamic=True`` for a maximum length, and through the CLI."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import opbridge as ob
from tests.dynamic.test_control_voice import voice_model

ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the reference for these tests")

MAX = 1024
LENGTHS = (320, 640, 1024)  # 5, 10 and 16 frames of 32 samples at 8 kHz
RATES = (16000, 8000)


def _feeds(samples: int, sr: int) -> dict[str, np.ndarray]:
    audio = np.random.default_rng(samples + sr).standard_normal((1, samples)).astype(np.float32)
    return {"audio": audio, "sr": np.array(sr, np.int64)}


@pytest.fixture(scope="module")
def model():
    return voice_model()


@pytest.fixture(scope="module")
def session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def graph(model):
    return ob.convert(model)


@pytest.fixture(scope="module")
def program(graph):
    return ob.compile(graph, "bm1684", dynamic=True, max_shapes={"audio": (1, MAX)})


def test_converts_once_with_the_length_symbolic(graph):
    assert [tuple(v.shape) for v in graph.inputs] == [(1, "samples"), ()]
    ops = graph.op_counts()
    assert ops["If"] == 1 and ops["Scan"] == 1  # the branch and the GRU's steps run at run time
    decimate = next(n for n in graph.nodes if n.op == "If").attrs["then_branch"]
    # every 2nd sample to the end, then frames of 32: the dims say so, checked by every run
    assert [tuple(v.shape) for n in decimate.nodes for v in n.outputs][:2] == [
        (1, "(samples+1)//2"), ("((samples+1)//2)//32", 1, 32)]


@pytest.mark.parametrize("sr", RATES)
@pytest.mark.parametrize("samples", LENGTHS)
def test_interpreter_matches_onnxruntime(graph, session, samples, sr):
    feeds = _feeds(samples, sr)
    want = session.run(None, feeds)[0]
    got = ob.interpret(graph, feeds)["speech"]
    assert got.shape == want.shape == (samples // 64, 1, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_rates_take_different_branches(graph):
    """Same audio, two rates: the 16 kHz branch decimates, the 8 kHz one keeps the first half,
    so the scores differ (the test above would pass for a model that ignored ``sr`` otherwise)."""
    audio = _feeds(640, 0)["audio"]
    a = ob.interpret(graph, {"audio": audio, "sr": np.array(16000, np.int64)})["speech"]
    b = ob.interpret(graph, {"audio": audio, "sr": np.array(8000, np.int64)})["speech"]
    assert a.shape == b.shape and not np.allclose(a, b)


def test_a_length_that_does_not_frame_is_an_error_naming_the_node(graph):
    # 100 samples at 16 kHz keep 50, not a whole number of 32-sample frames (onnxruntime fails too)
    with pytest.raises(ob.OpbridgeError, match=r"Reshape.*50"):
        ob.interpret(graph, _feeds(100, 16000))


@pytest.mark.parametrize("sr", RATES)
@pytest.mark.parametrize("samples", LENGTHS)
def test_simulator_compiled_once_matches_onnxruntime(program, session, model, samples, sr):
    feeds = _feeds(samples, sr)
    got = program.run(feeds)["speech"]
    np.testing.assert_allclose(got, session.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
    # the bytes of a program compiled for this exact length from a static conversion
    exact = ob.compile(ob.convert(model, input_shapes={"audio": (1, samples)}), "bm1684")
    np.testing.assert_array_equal(got, exact.run(feeds)["speech"])


def test_simulator_compiles_each_length_once(graph):
    prog = ob.compile(graph, "bm1684", dynamic=True, max_shapes={"audio": (1, MAX)})
    assert prog.shapes_compiled == 1
    for sr in RATES:  # the rate is data, not a shape: one program per length serves both
        prog.run(_feeds(640, sr))
    assert prog.shapes_compiled == 2


def test_specialising_a_length_makes_the_branches_static(graph):
    """For one length, the 8 kHz branch's Shape -> Gather -> Div chain folds, its run-time
    Slice becomes a static one, the If's frame count is a number and the Scan unrolls."""
    from opbridge.ir.specialize import specialize

    g = specialize(graph, {"audio": (1, 640)})
    node = next(n for n in g.nodes if n.op == "If")
    assert tuple(node.outputs[0].shape) == (10, 1, 32)
    assert [n.op for n in node.attrs["else_branch"].nodes] == ["Slice", "Reshape", "Mul"]
    assert all(isinstance(d, int) for v in g.values().values() for d in v.shape)
    assert "Scan" not in g.op_counts() and g.op_counts()["Tanh"] == 10  # one GRU step a frame


@pytest.mark.parametrize("samples", [MAX, 320])
def test_simulator_runs_only_the_branch_on_the_host(program, samples):
    """Specialised to a length, the GRU's Scan has a static number of steps and is unrolled as
    a static conversion unrolls it: the If is the only host layer, in the program for the
    maximum and in one for a smaller length, and the GRU's steps run on the TPU."""
    profile = program.program_for(_feeds(samples, 8000)).profile()
    assert [u.ops for u in profile.units if u.kind == "host"] == [["If"]]
    assert profile.num_cpu_layers == 1
    tpu_ops = {op for u in profile.units if u.kind != "host" for op in u.ops}
    assert {"MatMul", "Sigmoid", "Tanh"} <= tpu_ops


def test_simulator_length_only_one_branch_can_frame(program, session):
    """127 samples: the 16 kHz branch keeps 64 (two frames), the 8 kHz one 63 (no whole frame).
    The length's program must still run the 16 kHz branch (the other stays unspecialised and
    what follows it runs on the host); the 8 kHz run fails at the branch's Reshape, as in
    onnxruntime."""
    feeds = _feeds(127, 16000)
    np.testing.assert_allclose(program.run(feeds)["speech"], session.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
    with pytest.raises(ob.OpbridgeError, match=r"else_branch/Reshape.*63"):
        program.run(_feeds(127, 8000))


def test_simulator_longer_than_the_maximum_is_an_error(program):
    with pytest.raises(ob.SimulatorError,
                       match=r"input 'audio' dim 1 \(samples\) is 2048, above the compiled maximum 1024"):
        program.run(_feeds(2048, 16000))


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "opbridge", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_convert_compile_dynamic_and_run_two_lengths(tmp_path, model, session):
    import onnx

    onnx.save(model, str(tmp_path / "voice.onnx"))
    r = _cli("convert", str(tmp_path / "voice.onnx"), "-o", str(tmp_path / "v.obir"))
    assert r.returncode == 0, r.stderr
    assert "samples" in r.stdout  # the length stays symbolic
    r = _cli("compile", str(tmp_path / "v.obir"), "--dynamic", "--input-shape", f"audio=1,{MAX}",
             "-o", str(tmp_path / "v.obprog"))
    assert r.returncode == 0, r.stderr
    for samples, sr in ((640, 8000), (1024, 16000)):
        feeds = _feeds(samples, sr)
        np.save(tmp_path / "audio.npy", feeds["audio"])
        np.save(tmp_path / "sr.npy", feeds["sr"])
        out = tmp_path / f"out{samples}.npz"
        r = _cli("run", str(tmp_path / "v.obprog"), "--input", f"audio={tmp_path / 'audio.npy'}",
                 "--input", f"sr={tmp_path / 'sr.npy'}", "-o", str(out))
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(np.load(out)["speech"], session.run(None, feeds)[0], rtol=1e-5, atol=1e-6)
    np.save(tmp_path / "audio.npy", _feeds(2048, 8000)["audio"])
    r = _cli("run", str(tmp_path / "v.obprog"), "--input", f"audio={tmp_path / 'audio.npy'}",
             "--input", f"sr={tmp_path / 'sr.npy'}")
    assert r.returncode == 2
    assert "error: input 'audio' dim 1 (samples) is 2048, above the compiled maximum 1024" in r.stderr
    assert "Traceback" not in r.stderr


def test_saved_dynamic_program_runs_other_lengths(tmp_path, program):
    """The saved file keeps the symbolic graph with the weights its Scan body reads, which the
    program for the maximum (its Scan unrolled) no longer holds by those names."""
    program.save(tmp_path / "v.obprog")
    loaded = ob.load_program(tmp_path / "v.obprog")
    for samples, sr in ((640, 8000), (320, 16000)):
        feeds = _feeds(samples, sr)
        np.testing.assert_array_equal(loaded.run(feeds)["speech"], program.run(feeds)["speech"])

