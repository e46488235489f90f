"""Scripted TorchScript control flow (prim::If / prim::Loop on run-time values) and scalar
forward() arguments: export, convert, run with ob.interpret, compare with torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import OpbridgeError, UnsupportedOpError

torch = pytest.importorskip("torch", reason="torch is the reference (and the exporter) for these tests")

from ..torchscript import _scripted as m  # noqa: E402  (needs torch)


def _export(tmp_path: Path, module: Any, example: tuple[Any, ...]) -> Path:
    from opbridge.export.torchscript import export_torchscript

    return export_torchscript(module, example, tmp_path / "m.ts.json", mode="script")


def _check(graph: Any, module: Any, x: np.ndarray, *args: Any) -> None:
    """ob.interpret on (x, args) against the module itself."""
    feeds = {"x": x}
    names = [v.name for v in graph.inputs][1:]
    feeds.update({k: np.asarray(a) for k, a in zip(names, args)})
    with torch.no_grad():
        want = module(torch.from_numpy(x), *args).numpy()
    got = list(ob.interpret(graph, feeds).values())[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


POS = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
NEG = -POS - 0.5


def test_tensor_condition_takes_both_branches(tmp_path: Path) -> None:
    path = _export(tmp_path, m.Branchy(), (torch.from_numpy(POS),))
    doc = json.loads(path.read_text())
    assert doc["version"] == 2
    assert any(n["kind"] == "prim::If" and len(n["blocks"]) == 2 for n in doc["nodes"])
    g = ob.convert(path)
    assert [n.op for n in g.nodes if n.op == "If"] == ["If"]
    for x in (POS, NEG):
        _check(g, m.Branchy(), x)


def test_int_argument_is_a_graph_input(tmp_path: Path) -> None:
    path = _export(tmp_path, m.IntBranch(), (torch.from_numpy(POS), 3))
    entry = json.loads(path.read_text())["inputs"][1]
    assert entry == {"name": "n", "dtype": "int64", "shape": [], "type": "int"}
    g = ob.convert(path)
    assert (g.inputs[1].dtype, g.inputs[1].shape) == ("i64", ())
    for n in (0, 2, 3, 7):
        _check(g, m.IntBranch(), POS, n)


@pytest.mark.parametrize("cls", [m.ForLoop, m.WhileLoop, m.NestedIfInLoop])
def test_runtime_loops(tmp_path: Path, cls: Any) -> None:
    g = ob.convert(_export(tmp_path, cls(), (torch.from_numpy(POS), 2)))
    assert any(n.op == "Loop" for n in g.nodes)
    for n in (0, 1, 2, 5):
        for x in (POS, NEG, POS * 8):
            _check(g, cls(), x, n)


def test_input_values_bakes_the_argument_in(tmp_path: Path) -> None:
    """A known trip count unrolls and a known condition picks its branch, as before."""
    path = _export(tmp_path, m.NestedIfInLoop(), (torch.from_numpy(POS), 2))
    g = ob.convert(path, input_values={"n": 3})
    assert [v.name for v in g.inputs] == ["x"]
    assert not any(n.op == "Loop" for n in g.nodes)
    assert sum(n.op == "If" for n in g.nodes) == 3
    for x in (POS, NEG, POS * 8):
        _check(g, lambda t: m.NestedIfInLoop()(t, 3), x)
    g = ob.convert(_export(tmp_path, m.IntBranch(), (torch.from_numpy(POS), 3)), input_values={"n": 1})
    assert not any(n.op == "If" for n in g.nodes)
    _check(g, lambda t: m.IntBranch()(t, 1), POS)


def test_float_and_bool_arguments(tmp_path: Path) -> None:
    path = _export(tmp_path, m.ScalarArgs(), (torch.from_numpy(POS), 1.5, True))
    g = ob.convert(path)
    assert [(v.dtype, v.shape) for v in g.inputs[1:]] == [("f64", ()), ("bool", ())]
    for s, flag in ((1.5, True), (-2.0, False), (0.25, True)):
        _check(g, m.ScalarArgs(), POS, s, flag)


def test_list_argument_needs_its_value(tmp_path: Path) -> None:
    x = np.arange(6, dtype=np.float32)
    path = _export(tmp_path, m.ListArg(), (torch.from_numpy(x), [2, 3]))
    assert json.loads(path.read_text())["inputs"][1]["shape"] == [2]
    with pytest.raises(OpbridgeError, match=r"node 'reshape\S*' .*computed at run time"):
        ob.convert(path)
    g = ob.convert(path, input_values={"shape": [3, 2]})
    got = list(ob.interpret(g, {"x": x}).values())[0]
    np.testing.assert_array_equal(got, m.ListArg()(torch.from_numpy(x), [3, 2]).numpy())


def test_inplace_write_in_a_block_is_refused(tmp_path: Path) -> None:
    path = _export(tmp_path, m.InplaceInLoop(), (torch.from_numpy(POS), 2))
    with pytest.raises(UnsupportedOpError, match=r"aten::add_ inside the block of prim::Loop") as info:
        ob.convert(path)
    assert info.value.node is not None and "block0" in info.value.node


# -- the acceptance case: a scripted voice-activity model branching on its int sr argument ------

VOICE_CASES = [(640, 16000), (640, 8000), (1024, 16000), (1024, 8000)]


def _voice(tmp_path: Path, samples: int) -> tuple[Any, Path]:
    """The model (fixed weights) and its export for ``samples`` of audio. TorchScript-json
    fixes the tensor shapes at export, so each length is its own export of the one module."""
    torch.manual_seed(0)
    model = m.Voice().eval()
    example = (torch.zeros(1, samples), 16000)
    return model, _export(tmp_path / str(samples), model, example)


def _audio(samples: int, sr: int) -> np.ndarray:
    return np.random.default_rng(samples + sr).standard_normal((1, samples)).astype(np.float32)


@pytest.mark.parametrize(("samples", "sr"), VOICE_CASES, ids=[f"{n}@{sr}" for n, sr in VOICE_CASES])
def test_voice_model_matches_torch_in_the_interpreter(tmp_path: Path, samples: int, sr: int) -> None:
    model, path = _voice(tmp_path, samples)
    g = ob.convert(path)
    assert g.op_counts().get("If") == 1
    assert [(v.name, v.dtype, v.shape) for v in g.inputs] == [("audio", "f32", (1, samples)), ("sr", "i64", ())]
    audio = _audio(samples, sr)
    got = ob.interpret(g, {"audio": audio, "sr": np.array(sr, np.int64)})
    with torch.no_grad():
        want = model(torch.from_numpy(audio), sr).numpy()
    (out,) = got.values()
    assert out.shape == want.shape == (samples // 64, 1, 1)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("samples", [640, 1024])
def test_voice_model_on_the_simulator_runs_the_branch_as_a_host_layer(tmp_path: Path, samples: int) -> None:
    model, path = _voice(tmp_path, samples)
    prog = ob.compile(ob.convert(path), "bm1684")
    profile = prog.profile()
    assert [u.ops for u in profile.units if u.kind == "host"] == [["If"]] and profile.num_cpu_layers == 1
    assert profile.num_global_layers + profile.num_layer_groups > 1  # the GRU runs on the TPU
    prog.save(tmp_path / "vad.obprog")
    loaded = ob.load_program(tmp_path / "vad.obprog")
    for sr in (16000, 8000):
        audio = _audio(samples, sr)
        with torch.no_grad():
            want = model(torch.from_numpy(audio), sr).numpy()
        feeds = {"audio": audio, "sr": np.array(sr, np.int64)}
        np.testing.assert_allclose(list(prog.run(feeds).values())[0], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(list(loaded.run(feeds).values())[0], want, rtol=1e-5, atol=1e-6)


def test_voice_model_with_sr_bound_folds_the_branch(tmp_path: Path) -> None:
    model, path = _voice(tmp_path, 640)
    for sr in (16000, 8000):
        g = ob.convert(path, input_values={"sr": sr})
        assert [v.name for v in g.inputs] == ["audio"] and "If" not in g.op_counts()
        audio = _audio(640, sr)
        with torch.no_grad():
            want = model(torch.from_numpy(audio), sr).numpy()
        np.testing.assert_allclose(ob.interpret(g, {"audio": audio})[g.outputs[0].name], want,
                                   rtol=1e-5, atol=1e-6)
