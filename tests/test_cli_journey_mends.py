"""The command line after a new user's first mistakes were mended: run reads its inputs as
validate does, the hints name only what the command takes, numbers are refused with their
real floor, and the exit status of a run whose output went to /dev/null is its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import OpbridgeError
from opbridge.examples import write_small_cnn_onnx
from tests.ir.ops.onnx_ref import run_ir


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("mends")
    onnx_path = Path(write_small_cnn_onnx(d / "model.onnx"))
    g = ob.convert(str(onnx_path))
    ob.save(g, str(d / "model.obir"))
    ob.compile(g, target="bm1684").save(str(d / "model.obprog"))
    return {"dir": d, "onnx": onnx_path, "obir": d / "model.obir", "obprog": d / "model.obprog"}


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, str]:
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("error: ") and lines[-1].startswith("hint: "), lines
    return lines[0], lines[-1]


def _usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[0]


def _image() -> np.ndarray:
    return np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)


def _onnxruntime(onnx_path: Path, x: np.ndarray) -> Any:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"image": x})[0]


# -- run --input reads what validate --input reads ----------------------------------------------
@pytest.mark.parametrize("form", ["NAME=FILE.npz", "FILE.npz", "NAME=FILE.npz-of-one-other-name"])
def test_run_takes_npz_inputs_as_validate_does(files, tmp_path, form):
    x = _image()
    npz = tmp_path / "x.npz"
    if form == "NAME=FILE.npz-of-one-other-name":
        np.savez(npz, sample=x)  # one array: it is the input's, whatever its name
    else:
        np.savez(npz, image=x)
    spec = str(npz) if form == "FILE.npz" else f"image={npz}"
    assert main(["run", str(files["obprog"]), "--input", spec, "-o", str(tmp_path / "o.npz")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["prob"], _onnxruntime(files["onnx"], x),
                               rtol=1e-4, atol=1e-6)


def test_run_names_a_wrong_input_shape_and_the_input(files, capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    error, _ = _fails(capsys, ["run", str(files["obprog"]), "--input", f"image={tmp_path / 'x.npy'}"])
    assert error.startswith("error: input 'image' wants f32[1,3,16,16]") and "holds shape [1,3,8,8]" in error


def test_run_with_a_bare_input_name_says_to_write_name_equals_file(files, capsys):
    error, hint = _fails(capsys, ["run", str(files["obprog"]), "--input", "image"])
    assert error == "error: --input 'image': write NAME=FILE.npy"
    assert hint == "hint: one --input per graph input, e.g. --input image=x.npy"


# -- arrays given as MODEL -----------------------------------------------------------------------
@pytest.mark.parametrize("argv,hint", [
    (["convert", "{x}.npy", "-o", "{x}.obir"],
     "arrays are inputs: opbridge validate MODEL --input ... or opbridge run PROG --input ..."),
    (["show", "{x}.npz"],
     "arrays are inputs: opbridge validate MODEL --input ... or opbridge run PROG --input ..."),
    (["validate", "{x}.npy"], "give it to --input NAME={x}.npy"),
    (["validate", "{x}.npz"], "give them to --input {x}.npz"),
], ids=["convert-npy", "show-npz", "validate-npy", "validate-npz"])
def test_an_array_as_the_model_points_to_the_commands_with_input(capsys, tmp_path, argv, hint):
    argv = [a.format(x=tmp_path / "x") for a in argv]
    error, hint_line = _fails(capsys, argv)
    assert f"'{argv[1]}' is not a model file" in error
    assert hint_line.startswith("hint: it is ") and hint_line.endswith(hint.format(x=tmp_path / "x"))


# -- numbers: the floor each option has, in every refusal -------------------------------------
@pytest.mark.parametrize("argv,floor", [
    (["batch", "convert", "{onnx}", "--jobs", "abc"], 1),
    (["batch", "convert", "{onnx}", "--jobs", "-1"], 1),
    (["batch", "convert", "{onnx}", "--jobs", "0"], 1),
    (["compile", "{obir}", "--lmem-kib", "0", "-o", "x.obprog"], 1),
    (["compile", "{obir}", "--lmem-kib", "many", "-o", "x.obprog"], 1),
    (["calibrate", "{onnx}", "--data", "d", "--samples", "0", "-o", "t.json"], 1),
    (["calibrate", "{onnx}", "--data", "d", "--crops", "-2", "-o", "t.json"], 0),
    (["run", "{obprog}", "--random-input", "--threads", "-1"], 0),
    (["serve", "--workers", "0"], 1),
], ids=["jobs-abc", "jobs-negative", "jobs-0", "lmem-kib-0", "lmem-kib-word", "samples-0",
        "crops-negative", "threads-negative", "workers-0"])
def test_a_number_below_its_floor_names_that_floor(files, capsys, argv, floor):
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    option = next(a for a in argv if a.startswith("--") and a not in ("--random-input", "--data"))
    value = argv[argv.index(option) + 1]
    line = _usage_error(capsys, argv)
    assert f"argument {option}: '{value}': give a whole number >= {floor}" in line


def test_the_threads_floor_says_what_0_means(capsys, files):
    line = _usage_error(capsys, ["run", str(files["obprog"]), "--random-input", "--threads", "x"])
    assert line.endswith("give a whole number >= 0 (0: BLAS's own setting)")


# -- op hints say what the message says ---------------------------------------------------------
@pytest.mark.parametrize("attrs", [{}, {"scales": (1, 1, 2, 2), "sizes": (1, 1, 8, 8)}], ids=["neither", "both"])
def test_resize_hint_asks_for_exactly_one_of_scales_and_sizes(attrs):
    with pytest.raises(OpbridgeError) as err:
        run_ir("Resize", [np.zeros((1, 1, 4, 4), np.float32)], **attrs)
    assert err.value.hint == "give exactly one of scales and sizes (an empty tensor counts as absent)"


@pytest.mark.parametrize("which", ["x_zero_point", "w_zero_point"])
def test_conv_integer_zero_point_hint_allows_per_channel_only_for_w(which):
    x = np.zeros((1, 2, 4, 4), np.uint8)
    w = np.zeros((3, 2, 1, 1), np.uint8)
    bad = np.zeros((2,), np.uint8)  # neither a scalar nor one per output channel (3)
    ins = [x, w, bad, None] if which == "x_zero_point" else [x, w, None, bad]
    with pytest.raises(OpbridgeError) as err:
        run_ir("ConvInteger", ins, group=1, kernel_shape=[1, 1], strides=[1, 1], dilations=[1, 1],
               pads=[0, 0, 0, 0])
    assert f"'{which}' has shape [2]" in err.value.message
    if which == "x_zero_point":
        assert err.value.hint == "give a scalar zero point (one for the whole input)"
        assert "per output channel" not in err.value.message
    else:
        assert err.value.hint == "give a scalar zero point, or one per output channel"
        assert "or one per output channel (3)" in err.value.message


# -- exit status with stdout at /dev/null ------------------------------------------------------
def _exit_with_stdout_on(path: str, monkeypatch: pytest.MonkeyPatch, argv: list[str], *,
                         becomes_devnull: bool) -> int:
    """main(argv) with sys.stdout writing to ``path`` and a command that fails with exit 1
    (as a validation that did not pass does); with ``becomes_devnull`` it first points stdout
    at /dev/null, as rich does when the reader of a pipe has gone."""
    import opbridge.cli.show as show_cli

    def fail(args: Any) -> int:
        if becomes_devnull:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        raise SystemExit(1)

    with open(path, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(show_cli, "run", fail)
        try:
            return main(argv)
        except SystemExit as exit_:
            return int(exit_.code or 0)
        finally:
            monkeypatch.undo()


def test_a_failure_with_stdout_at_devnull_from_the_start_keeps_exit_1(files, monkeypatch):
    """`opbridge validate M >/dev/null; echo $?`: a run that failed still exits 1."""
    argv = ["show", str(files["obir"])]
    assert _exit_with_stdout_on(os.devnull, monkeypatch, argv, becomes_devnull=False) == 1


def test_stdout_turned_to_devnull_during_the_run_is_a_closed_pipe(files, monkeypatch, tmp_path):
    """rich's broken-pipe handling: stdout pointed at /dev/null, then exit 1 -> exit 0."""
    argv = ["show", str(files["obir"])]
    assert _exit_with_stdout_on(str(tmp_path / "out.txt"), monkeypatch, argv, becomes_devnull=True) == 0
    assert _exit_with_stdout_on(str(tmp_path / "out.txt"), monkeypatch, argv, becomes_devnull=False) == 1


@pytest.mark.parametrize("command", ["run", "validate"])
def test_an_archive_named_npy_is_refused_by_run_and_validate_alike(files, capsys, tmp_path, command):
    f = tmp_path / "z.npy"
    with open(f, "wb") as fh:  # a file object: numpy keeps the name as given
        np.savez(fh, image=_image())
    model = files["obprog"] if command == "run" else files["onnx"]
    error, hint = _fails(capsys, [command, str(model), "--input", f"image={f}"])
    assert error == f"error: input file '{f}' is an .npz archive (1 array), not one .npy array"
    assert hint.startswith("hint: name it .npz")


def test_a_new_parser_ending_is_a_model_ending_everywhere(files, capsys, tmp_path, monkeypatch):
    """The endings come from convert.PARSERS: a frontend added there is refused as a program's
    name and listed for a folder given as MODEL, with no second list to update."""
    import importlib

    convert = importlib.import_module("opbridge.convert")  # the module, not the function
    monkeypatch.setitem(convert.PARSERS, ".tflite", "opbridge.parsers.none:parse_file")
    error, hint = _fails(capsys, ["compile", str(files["obir"]), "-o", str(tmp_path / "m.tflite")])
    assert "ends in .tflite: opbridge would read it back as a model file" in error
    assert hint == f"hint: name it {tmp_path / 'm.obprog'}"
    (tmp_path / "empty").mkdir()
    _, hint = _fails(capsys, ["show", str(tmp_path / "empty")])
    assert ".tflite" in hint
