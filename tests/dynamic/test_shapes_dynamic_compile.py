"""Dynamic compile: one program for the largest shapes runs smaller inputs along the symbolic
dims, with the bytes of a program compiled for that exact shape; a larger input is an error."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import opbridge as ob
from tests.conftest import requires_ort
from tests.dynamic.test_shapes_symbolic import _ort, cnn_model, seq_model

pytestmark = requires_ort


@pytest.fixture(scope="module")
def cnn_program():
    return ob.compile(ob.convert(cnn_model()), "bm1684", dynamic=True, max_shapes={"x": (4, 3, 8, 8)})


@pytest.mark.parametrize("batch", [1, 3, 4])
def test_smaller_batch_matches_exact_compile(cnn_program, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    exact = ob.compile(ob.convert(cnn_model(), input_shapes={"x": x.shape}), "bm1684")
    got = cnn_program.run({"x": x})["y"]
    np.testing.assert_array_equal(got, exact.run({"x": x})["y"])
    np.testing.assert_allclose(got, _ort(cnn_model(), {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_larger_input_names_input_dim_and_maximum(cnn_program):
    with pytest.raises(ob.SimulatorError, match=r"input 'x' dim 0 \(batch\) is 5, above the compiled maximum 4"):
        cnn_program.run({"x": np.zeros((5, 3, 8, 8), np.float32)})


def test_static_dim_must_match(cnn_program):
    with pytest.raises(ob.SimulatorError, match=r"input 'x' has shape \[2, 3, 9, 8\]"):
        cnn_program.run({"x": np.zeros((2, 3, 9, 8), np.float32)})


@pytest.mark.parametrize("batch,seq", [(1, 3), (2, 8)])
def test_two_symbolic_dims(batch, seq):
    prog = ob.compile(ob.convert(seq_model()), "bm1684", dynamic=True, max_shapes={"x": (2, 8, 8)})
    x = np.random.default_rng(seq).standard_normal((batch, seq, 8)).astype(np.float32)
    exact = ob.compile(ob.convert(seq_model(), input_shapes={"x": x.shape}), "bm1684")
    np.testing.assert_array_equal(prog.run({"x": x})["y"], exact.run({"x": x})["y"])


def test_needs_a_maximum_for_each_symbolic_dim():
    with pytest.raises(ob.SimulatorError, match=r"input 'x' \[batch,3,8,8\] has symbolic dim batch with no maximum"):
        ob.compile(ob.convert(cnn_model()), "bm1684", dynamic=True)


def test_static_graph_is_refused():
    g = ob.convert(cnn_model(), input_shapes={"x": (2, 3, 8, 8)})
    with pytest.raises(ob.SimulatorError, match="no symbolic input dims"):
        ob.compile(g, "bm1684", dynamic=True)


def test_save_load_and_cli(tmp_path, cnn_program):
    cnn_program.save(tmp_path / "d.obprog")
    loaded = ob.load_program(tmp_path / "d.obprog")
    x = np.ones((2, 3, 8, 8), np.float32)
    np.testing.assert_array_equal(loaded.run({"x": x})["y"], cnn_program.run({"x": x})["y"])
    import onnx

    onnx.save(cnn_model(), str(tmp_path / "cnn.onnx"))
    r = subprocess.run([sys.executable, "-m", "opbridge", "compile", str(tmp_path / "cnn.onnx"), "--dynamic",
                        "--input-shape", "x=4,3,8,8", "-o", str(tmp_path / "c.obprog")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    np.save(tmp_path / "x.npy", np.ones((3, 3, 8, 8), np.float32))
    r = subprocess.run([sys.executable, "-m", "opbridge", "run", str(tmp_path / "c.obprog"), "--input",
                        f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "out.npz")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["y"], cnn_program.run({"x": np.ones((3, 3, 8, 8),
                                                                                        np.float32)})["y"])


def test_an_input_not_fed_is_named():
    from opbridge.ir.graph import GraphBuilder

    b = GraphBuilder("two")
    x, y = b.input("x", "f32", ("N", 3)), b.input("y", "f32", ("M", 3))
    b.output(b.op("Relu", [x], name="r1"), b.op("Relu", [y], name="r2"))
    prog = ob.compile(b.build(require_static=False), "bm1684", dynamic=True,
                      max_shapes={"x": (4, 3), "y": (4, 3)})
    assert repr(prog).startswith("DynamicProgram('two'")
    with pytest.raises(ob.SimulatorError, match=r"graph input 'y' \[M,3\] was not fed"):
        prog.run({"x": np.ones((2, 3), np.float32)})


def test_specialize_keeps_an_input_sequence():
    from opbridge.ir.graph import GraphBuilder
    from opbridge.ir.specialize import specialize

    b = GraphBuilder("g")
    s, x = b.input("s", "f32", ("N", 3), kind="sequence"), b.input("x", "f32", ("N", 3))
    b.output(b.op("SequenceLength", [s], name="len"), b.op("Relu", [x], name="r"))
    g = specialize(b.build(require_static=False), {"x": (2, 3)})
    assert [v.kind for v in g.inputs] == ["sequence", "tensor"]


def _profile_figures(p) -> tuple:
    return (p.est_latency_ms, p.gdma_bytes, p.lmem_peak_bytes, p.num_layer_groups, p.num_tiles,
            p.num_global_layers, p.num_cpu_layers)


def test_saved_program_compiles_later_shapes_with_its_placement_and_per_layer(tmp_path):
    """A dynamic program compiled with a placement (Relu on the host) and per_layer (every
    layer's output stored) and saved compiles a new shape exactly as the original does: the
    same placement, the same profile, every layer's output, the same bytes (onnxruntime's
    numbers)."""
    relu_on_host = lambda n: "cpu" if n.op == "Relu" else None  # noqa: E731
    prog = ob.compile(ob.convert(cnn_model()), "bm1684", dynamic=True, max_shapes={"x": (4, 3, 8, 8)},
                      placement=relu_on_host, per_layer=True)
    prog.save(tmp_path / "d.obprog")
    loaded = ob.load_program(tmp_path / "d.obprog")
    x = np.random.default_rng(9).standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = prog.run({"x": x}, keep_intermediates=True)
    got = loaded.run({"x": x}, keep_intermediates=True)
    assert sorted(got) == sorted(want) and len(want) > 2  # every layer's output, as per_layer keeps
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    p_want, p_got = prog.program_for({"x": x}).profile(), loaded.program_for({"x": x}).profile()
    assert p_want.num_cpu_layers == 1
    assert _profile_figures(p_got) == _profile_figures(p_want)
    assert list(loaded.placement.values()) == ["cpu"] and loaded.placement == prog.placement
    np.testing.assert_allclose(got["y"], _ort(cnn_model(), {"x": x})[0], rtol=1e-4, atol=1e-4)
