"""Hostile values on the command line: ``--input-shape``, ``--input-value`` (numbers and
.npy files), ``run --input``, ``validate --input``, ``calibrate --data``. Each is a user error
(exit 2, one ``error:`` line naming the value or file, one ``hint:``), never an internal error,
a hang, a big allocation or an unpickling."""

from __future__ import annotations

import os
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.errors import OpbridgeError

from .conftest import assert_one_error_and_hint, cli


def _npy_bytes(header: str, data: bytes) -> bytes:
    """A .npy file (format 1.0) with a hand-written header dict."""
    h = header.encode()
    h += b" " * (64 - (10 + len(h) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + data


# protocol-0 pickle that opens (creates) the file named in it, if anything ever unpickles it
def _trap(path) -> bytes:
    return f"cbuiltins\nopen\n(S'{path}'\nS'w'\ntR.".encode()


FILES = {
    "huge-header": lambda t: _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000,), }", b"\0" * 16),
    "8GiB-header": lambda t: _npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2147483648,), }", b"\0" * 16),
    "empty": lambda t: b"",
    "complex": lambda t: _npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1, 3, 16, 16), }", b"\0" * 6144),
    "object-pickle": lambda t: _npy_bytes("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", _trap(t / "pwned")),
    "raw-pickle": lambda t: _trap(t / "pwned"),
}
# (what the message must say) per file
SAYS = {"huge-header": "declares float32[100000000000]", "8GiB-header": "declares float32[2147483648]",
        "empty": "not a .npy array", "complex": "complex64", "object-pickle": "object",
        "raw-pickle": "not a .npy array"}


def _argv(surface, cnn_path, prog, f, tmp_path):
    return {
        "convert --input-value": ["convert", str(cnn_path), "--input-value", f"image={f}", "-o", str(tmp_path / "o.obir")],
        "run --input": ["run", str(prog), "--input", f"image={f}"],
        "validate --input": ["validate", str(cnn_path), "--input", f"image={f}"],
        "calibrate --data": ["calibrate", str(cnn_path), "--data", str(f), "-o", str(tmp_path / "t.json")],
    }[surface]


SURFACES = ("convert --input-value", "run --input", "validate --input", "calibrate --data")


@pytest.fixture(scope="module")
def prog(cnn, tmp_path_factory):
    path = tmp_path_factory.mktemp("prog") / "cnn.obprog"
    ob.compile(cnn[1]).save(path)
    return path


# before: a header claiming 10^11 elements made numpy allocate 373 GiB (2^31: 8 GiB) before
# finding 16 bytes; an empty file was an EOFError (internal error) for --input-value and run;
# complex values passed with a ComplexWarning; pickles were refused by numpy (kept here as the
# pin that nothing unpickles them)
@pytest.mark.parametrize("kind", list(FILES))
@pytest.mark.parametrize("surface", SURFACES)
def test_bad_npy_is_refused_before_reading_it(tmp_path, cnn, prog, capsys, surface, kind):
    f = tmp_path / "bad.npy"
    f.write_bytes(FILES[kind](tmp_path))
    tracemalloc.start()
    try:
        rc, err = cli(_argv(surface, cnn[0], prog, f, tmp_path), capsys)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert_one_error_and_hint(rc, err, str(f), SAYS[kind])
    assert peak < 64 << 20, f"peak {peak >> 20} MiB"
    assert not (tmp_path / "pwned").exists()


# before: open() on a FIFO blocked for ever (convert --input-value, run --input)
@pytest.mark.parametrize("surface", SURFACES[:3])
def test_a_pipe_is_not_read(tmp_path, cnn, prog, capsys, surface):
    f = tmp_path / "fifo.npy"
    os.mkfifo(f)
    rc, err = cli(_argv(surface, cnn[0], prog, f, tmp_path), capsys)
    assert_one_error_and_hint(rc, err, str(f), "not a regular file")


# before: np.load returned an NpzFile: run said "wants f32, got <U1", convert printed its repr
@pytest.mark.parametrize("surface", SURFACES[:2])
def test_an_npz_named_npy_is_named_as_such(tmp_path, cnn, prog, capsys, surface):
    f = tmp_path / "z.npy"
    with open(f, "wb") as fh:
        np.savez(fh, image=np.zeros((1, 3, 16, 16), np.float32))
    rc, err = cli(_argv(surface, cnn[0], prog, f, tmp_path), capsys)
    assert_one_error_and_hint(rc, err, str(f), "is an .npz archive")
    if surface == "convert --input-value":  # it takes one .npy only: the hint says so
        assert err.strip().splitlines()[-1] == "hint: give a .npy file written by numpy.save"


def test_npz_member_with_a_lying_header(tmp_path, cnn, capsys):
    """An .npz whose member claims 2^31 elements in 16 bytes: refused before numpy allocates."""
    import zipfile

    f = tmp_path / "s.npz"
    with zipfile.ZipFile(f, "w") as z:
        z.writestr("image.npy", FILES["8GiB-header"](tmp_path))
    rc, err = cli(_argv("validate --input", cnn[0], None, f, tmp_path), capsys)
    assert_one_error_and_hint(rc, err, str(f), "declares float32[2147483648]")


@pytest.fixture(scope="module")
def scalar_model(tmp_path_factory):
    """sr (int64 scalar) and v (f32[n]) -> y = v * sr."""
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Cast", ["sr"], ["srf"], to=TensorProto.FLOAT), helper.make_node("Mul", ["v", "srf"], ["y"])],
        "g", [helper.make_tensor_value_info("sr", TensorProto.INT64, []),
              helper.make_tensor_value_info("v", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("scalar") / "s.onnx"
    onnx.save(m, path)
    return path


# before: an integer past int64 for an int64 input was an OverflowError (internal error, exit 3)
def test_integer_past_the_inputs_dtype(tmp_path, scalar_model, capsys):
    rc, err = cli(["convert", str(scalar_model), "--input-value", "sr=" + "9" * 30, "-o", str(tmp_path / "o.obir")], capsys)
    assert_one_error_and_hint(rc, err, "input_values['sr']", "int64")
    with pytest.raises(OpbridgeError, match="does not fit int64"):
        ob.convert(scalar_model, input_values={"sr": 10**30})


# before: nan/inf/1e999 were bound (a float input got inf) or printed a RuntimeWarning
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", "1,nan"])
@pytest.mark.parametrize("name", ["sr", "v"])
def test_non_finite_value(tmp_path, scalar_model, capsys, name, value):
    rc, err = cli(["convert", str(scalar_model), "--input-value", f"{name}={value}", "-o", str(tmp_path / "o.obir")], capsys)
    assert_one_error_and_hint(rc, err, "--input-value", "not a finite number")


# before: 100000 dims were parsed and echoed back in one 300 KB error line
@pytest.mark.parametrize("option", ["--input-shape", "--input-value"])
def test_megabyte_argument_is_cut_short(tmp_path, cnn, capsys, option):
    text = "image=" + ",".join(["1"] * 100000) + ("" if option == "--input-shape" else ",x")
    rc, err = cli(["convert", str(cnn[0]), option, text, "-o", str(tmp_path / "o.obir")], capsys)
    assert_one_error_and_hint(rc, err, option)
    assert len(err) < 1000


# --example-value: a name given twice (also to --input-shape) became two graph inputs of one
# name; non-finite numbers were refused only by the generic message; a 5000-digit value was
# echoed whole
@pytest.mark.parametrize("extra, named", [
    (["--example-value", "x=1"], "'x' is given twice"),
    (["--example-value", "n=2", "--example-value", "n=3"], "'n' is given twice"),
    (["--example-value", "n=nan"], "--example-value 'n=nan'"),
    (["--example-value", "n=" + "9" * 5000], "--example-value"),
], ids=["x-shape-and-value", "n-twice", "nan", "5000-digits"])
def test_example_value(tmp_path, capsys, extra, named):
    torch = pytest.importorskip("torch", reason="export-torchscript needs torch")
    from ..torchscript import _scripted as m

    pt = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(m.IntBranch()), str(pt))
    rc, err = cli(["export-torchscript", str(pt), "--input-shape", "x=2,3", *extra, "-o", str(tmp_path / "o.ts.json")],
                  capsys)
    assert_one_error_and_hint(rc, err, named)
    assert len(err) < 1000
