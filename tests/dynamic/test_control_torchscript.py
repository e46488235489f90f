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


@pytest.mark.parametrize("cls", [m.ForLoop, m.WhileLoop, m.NestedIfInLoop, m.BreakLoop, m.IntCarry])
def test_runtime_loops(tmp_path: Path, cls: Any) -> None:
    g = ob.convert(_export(tmp_path, cls(), (torch.from_numpy(POS), 2)))
    assert any(n.op == "Loop" for n in g.nodes)
    for n in (0, 1, 2, 5):
        for x in (POS, NEG, POS * 8):
            _check(g, cls(), x, n)


def test_runtime_loop_on_the_simulator(tmp_path: Path) -> None:
    """The Loop (with its If inside) is one host layer; the ops around it compile for the TPU."""
    model = m.LoopBetweenLayers().eval()
    g = ob.convert(_export(tmp_path, model, (torch.from_numpy(POS), 2)))
    prog = ob.compile(g, "bm1684")
    profile = prog.profile()
    assert [u.ops for u in profile.units if u.kind == "host"] == [["Loop"]]
    for n in (0, 1, 4):
        for x in (POS, NEG):
            with torch.no_grad():
                want = model(torch.from_numpy(x), n).numpy()
            got = list(prog.run({"x": x, "n": np.array(n, np.int64)}).values())[0]
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


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



def test_loop_carried_tensor_that_grows(tmp_path: Path) -> None:
    g = ob.convert(_export(tmp_path, m.Grow(), (torch.from_numpy(POS), 2)))
    assert g.op_counts() == {"Loop": 1}
    assert isinstance(g.outputs[0].shape[0], str) and g.outputs[0].shape[1] == 3  # run-time rows
    for n in (0, 1, 4):
        _check(g, m.Grow(), POS, n)


def test_branches_of_different_shapes(tmp_path: Path) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = ob.convert(_export(tmp_path, m.ShapeBranch(), (torch.from_numpy(x), 3)))
    assert isinstance(g.outputs[0].shape[0], str) and g.outputs[1].shape == (3,)
    for n in (1, 3):
        got = list(ob.interpret(g, {"x": x, "n": np.array(n, np.int64)}).values())
        with torch.no_grad():
            want = [t.numpy() for t in m.ShapeBranch()(torch.from_numpy(x), n)]
        assert [a.shape for a in got] == [b.shape for b in want]
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-6)


def test_loop_body_indexes_with_its_iteration(tmp_path: Path) -> None:
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    g = ob.convert(_export(tmp_path, m.IndexInLoop(), (torch.from_numpy(x), 2)))
    assert "Loop" in g.op_counts()
    for n in (0, 1, 4):
        _check(g, m.IndexInLoop(), x, n)
    # torch raises IndexError for x[4]; the interpreter names the loop, the node and the index
    with pytest.raises(OpbridgeError, match=r"node 'Loop\S*' \(Loop\): node '\S*select\S*' \(Gather\).*index 4"):
        ob.interpret(g, {"x": x, "n": np.array(5, np.int64)})


def test_constant_range_left_by_break_runs_at_run_time(tmp_path: Path) -> None:
    g = ob.convert(_export(tmp_path, m.FixedRangeBreak(), (torch.from_numpy(POS),)))
    assert g.op_counts().get("Loop") == 1 and len(g.nodes) < 8  # the unrolled start is dead code
    for x in (POS, NEG, POS * 100, np.full((2, 3), 0.01, np.float32)):
        _check(g, m.FixedRangeBreak(), x)


def test_constant_trip_count_above_the_unroll_limit_runs_at_run_time(tmp_path: Path, monkeypatch: Any) -> None:
    from opbridge.mappers.torchscript import control

    monkeypatch.setattr(control, "MAX_UNROLL", 3)
    g = ob.convert(_export(tmp_path, m.LongFixedLoop(), (torch.from_numpy(POS),)))
    assert set(g.op_counts()) == {"Loop"}
    with torch.no_grad():
        want = m.LongFixedLoop()(torch.from_numpy(NEG)).numpy()
    np.testing.assert_allclose(list(ob.interpret(g, {"x": NEG}).values())[0], want, rtol=1e-5)


def test_while_loop_on_a_tensor_condition(tmp_path: Path) -> None:
    g = ob.convert(_export(tmp_path, m.WhileOnTensor(), (torch.from_numpy(POS),)))
    assert "Loop" in g.op_counts()
    for x in (POS, NEG, POS * 50, np.full((2, 3), 0.01, np.float32)):
        _check(g, m.WhileOnTensor(), x)


def test_float_list_argument(tmp_path: Path) -> None:
    path = _export(tmp_path, m.FloatListArg(), (torch.from_numpy(POS), [1.0, 2.0, 3.0]))
    assert json.loads(path.read_text())["inputs"][1] == {
        "name": "w", "dtype": "float64", "shape": [3], "type": "List[float]"}
    g = ob.convert(path)
    for w in ([0.5, -1.0, 2.0], [0.0, 0.0, 1e3]):
        _check(g, m.FloatListArg(), POS, w)


def test_optional_int_argument_given_a_value(tmp_path: Path) -> None:
    g = ob.convert(_export(tmp_path, m.OptionalIntArg(), (torch.from_numpy(POS), 3)))
    assert (g.inputs[1].dtype, g.inputs[1].shape) == ("i64", ())
    for k in (0, 3, -7):
        _check(g, m.OptionalIntArg(), POS, k)


def test_branch_that_raises_is_an_input_check(tmp_path: Path) -> None:
    """A run-time check (sr neither 16000 nor 8000 raises) leaves the accepted branches; bound to
    a value the model refuses, conversion fails with the model's own message."""
    x = np.arange(8, dtype=np.float32)
    path = _export(tmp_path, m.RateCheck(), (torch.from_numpy(x), 16000))
    g = ob.convert(path)
    assert g.op_counts().get("If") == 1
    for sr in (16000, 8000):
        _check(g, m.RateCheck(), x, sr)
        folded = ob.convert(path, input_values={"sr": sr})
        assert "If" not in folded.op_counts()
        _check(folded, lambda t, sr=sr: m.RateCheck()(t, sr), x)
    with pytest.raises(UnsupportedOpError, match=r"node '\S*If\S*' \(If\): the model raises ValueError: "
                       r"unsupported sampling rate for this input.*\n  hint: give an input value"):
        ob.convert(path, input_values={"sr": 44100})


# -- bad input ----------------------------------------------------------------------------------


def test_branches_of_different_dtypes_are_refused_unless_bound(tmp_path: Path) -> None:
    path = _export(tmp_path, m.DtypeBranch(), (torch.from_numpy(POS), 3))
    with pytest.raises(UnsupportedOpError, match=r"node 'If_y' \(If\): output 0 is i64 in one branch "
                       r"and f32 in the other.*\n.*input_values"):
        ob.convert(path)
    for n in (1, 3):
        _check(ob.convert(path, input_values={"n": n}), lambda t, n=n: m.DtypeBranch()(t, n), POS)


def test_list_changed_in_a_loop_is_refused(tmp_path: Path) -> None:
    path = _export(tmp_path, m.ListAppendInLoop(), (torch.from_numpy(POS), 2))
    with pytest.raises(UnsupportedOpError, match=r"node '\S*append\S*' \(append\): changes a list in "
                       r"place \(aten::append\).*\n  hint: collect the results in a tensor"):
        ob.convert(path)


def test_argument_of_an_unsupported_type_is_refused(tmp_path: Path) -> None:
    from opbridge.export.torchscript import TorchExportError

    with pytest.raises(TorchExportError, match=r"example input 1 is a str, not a tensor, int, "
                       r"float, bool.*\n  hint: make that forward\(\) argument"):
        _export(tmp_path, m.StrArg(), (torch.from_numpy(POS), "double"))


@pytest.mark.parametrize("example", [3.5, [1, 2]], ids=["float-for-int", "list-for-int"])
def test_example_of_the_wrong_type_is_refused_naming_the_argument(tmp_path: Path, example: Any) -> None:
    from opbridge.export.torchscript import TorchExportError

    with pytest.raises(TorchExportError, match=r"Expected a value of type 'int' for argument 'n'"):
        _export(tmp_path, m.IntBranch(), (torch.from_numpy(POS), example))


def test_number_argument_needs_scripting(tmp_path: Path) -> None:
    from opbridge.export.torchscript import TorchExportError, export_torchscript

    with pytest.raises(TorchExportError, match=r"example input 1 \(int 3\): tracing records tensors "
                       r"only\n  hint: script the module \(mode='script'\)"):
        export_torchscript(m.IntBranch(), (torch.from_numpy(POS), 3), tmp_path / "m.ts.json")


def test_blocks_on_another_node_kind_are_refused(tmp_path: Path) -> None:
    from opbridge.errors import ModelFormatError

    path = _export(tmp_path, m.IntBranch(), (torch.from_numpy(POS), 3))
    doc = json.loads(path.read_text())
    node = next(n for n in doc["nodes"] if n["kind"] == "prim::If")
    node["kind"] = "aten::relu"
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFormatError, match=r"node 'If_y' \(aten::relu\): only prim::If and "
                       r"prim::Loop nodes have blocks"):
        ob.convert(path)


# -- the command line ---------------------------------------------------------------------------


def _main(argv: list[str]) -> int:
    from opbridge.cli import main

    return main(argv)


def _cli_export(tmp_path: Path, module: torch.nn.Module, *options: str) -> Path:
    """``module`` scripted and saved, then ``opbridge export-torchscript`` with ``options``."""
    pt, out = tmp_path / "m.pt", tmp_path / "m.ts.json"
    torch.jit.save(torch.jit.script(module), str(pt))
    assert _main(["export-torchscript", str(pt), *options, "-o", str(out)]) == 0
    return out


def test_cli_exports_converts_and_binds_an_int_argument(tmp_path: Path) -> None:
    out = _cli_export(tmp_path, m.NestedIfInLoop(), "--input-shape", "x=2,3", "--example-value", "n=2")
    assert [e["name"] for e in json.loads(out.read_text())["inputs"]] == ["x", "n"]
    assert _main(["convert", str(out), "-o", str(tmp_path / "run.obir")]) == 0
    g = ob.load(str(tmp_path / "run.obir"))
    assert "Loop" in g.op_counts()
    for n in (0, 3):
        _check(g, m.NestedIfInLoop(), POS * 8, n)
    assert _main(["convert", str(out), "--input-value", "n=3", "-o", str(tmp_path / "n3.obir")]) == 0
    g = ob.load(str(tmp_path / "n3.obir"))
    assert [v.name for v in g.inputs] == ["x"] and "Loop" not in g.op_counts()
    _check(g, lambda t: m.NestedIfInLoop()(t, 3), POS * 8)


def test_cli_list_argument_example_value(tmp_path: Path) -> None:
    # a single number for a List[int] argument is a one-element list
    out = _cli_export(tmp_path, m.ListArg(), "--input-shape", "x=6", "--example-value", "shape=6")
    assert json.loads(out.read_text())["inputs"][1]["shape"] == [1]


@pytest.mark.parametrize(("argv", "message"), [
    (["--input-shape", "x=2,3", "--example-value", "n=a.npy"], "give the value itself"),
    (["--input-shape", "x=2,3", "--example-value", "n"], "--example-value 'n': write NAME=VALUE"),
    ([], "no forward() arguments given"),
], ids=["file", "no-value", "no-arguments"])
def test_cli_export_rejects_bad_example_values(tmp_path: Path, capsys: Any, argv: list[str],
                                               message: str) -> None:
    pt = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(m.IntBranch()), str(pt))
    assert _main(["export-torchscript", str(pt), *argv, "-o", str(tmp_path / "o.ts.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error:") and message in err[0] and err[1].startswith("hint:")
    assert len(err) == 2


def test_cli_convert_refuses_an_inplace_write_in_a_block(tmp_path: Path, capsys: Any) -> None:
    path = _export(tmp_path, m.InplaceInLoop(), (torch.from_numpy(POS), 2))
    assert _main(["convert", str(path), "-o", str(tmp_path / "o.obir")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "aten::add_ inside the block of prim::Loop" in err[0]
    assert err[1].startswith("hint:") and "out of place" in err[1]


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


@pytest.mark.parametrize("sr", [16000, 8000])
def test_voice_model_validates_against_torch_running_the_blocks(tmp_path: Path, sr: int) -> None:
    """opbridge validate's node-by-node torch run takes the branch the fed sr picks."""
    from opbridge.validate.torch_runner import run_torch_json

    model, path = _voice(tmp_path, 640)
    audio = _audio(640, sr)
    out = run_torch_json(path, {"audio": audio, "sr": np.array(sr, np.int64)}).tensors
    with torch.no_grad():
        want = model(torch.from_numpy(audio), sr).numpy()
    np.testing.assert_allclose(out[json.loads(path.read_text())["outputs"][0]["name"]], want, rtol=1e-6)
    r = ob.validate(str(path), inputs={"audio": audio, "sr": np.array(sr, np.int64)})
    assert r.passed and r.reference == "torch", r.summary()
    assert not any("has no op prim::If" in n for n in r.notes)


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
    with pytest.raises(UnsupportedOpError, match=r"the model raises ValueError: Supported sampling "
                       r"rates: 8000, 16000 for this input"):
        ob.convert(path, input_values={"sr": 22050})
    assert _main(["convert", str(path), "--input-value", "sr=22050", "-o", str(tmp_path / "x.obir")]) == 2
