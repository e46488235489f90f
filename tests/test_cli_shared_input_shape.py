"""``export-torchscript --input-shape`` uses the shared parser of the other commands
(``cli/common.input_shape_arg``): the same syntax is accepted, and a bad value is refused with
the same message as ``convert --input-shape``, one ``error:`` and one ``hint:`` line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from opbridge.cli import main
from opbridge.parsers.torchscript_json import parse_torchscript_json
from tests.hostile.conftest import cli as _cli


@pytest.fixture(scope="module")
def pt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch", reason="export-torchscript needs torch")
    path = tmp_path_factory.mktemp("shape") / "relu.pt"
    torch.jit.save(torch.jit.trace(torch.nn.ReLU().eval(), (torch.zeros(2, 3),)), str(path))
    return path


@pytest.mark.parametrize("arg, shape", [
    ("x=1,3,6,6", (1, 3, 6, 6)), ("x=6", (6,)), ("x=2,3", (2, 3)), ("x=02,3", (2, 3)), ("x=", ()),
], ids=["rank=4", "rank=1", "rank=2", "leading-zero", "rank=0"])
def test_accepted_forms(pt, tmp_path, arg, shape):
    out = tmp_path / "m.ts.json"
    assert main(["export-torchscript", str(pt), "--input-shape", arg, "-o", str(out)]) == 0
    g = parse_torchscript_json(out)
    assert [(i.name, tuple(i.shape)) for i in g.inputs] == [("x", shape)]


@pytest.mark.parametrize("arg", [
    "x=1,a", "x", "=1,2", "x=-1,2", "x=1.5", "x=" + ",".join(["1"] * 65),
], ids=["dim=not-int", "no-dims", "no-name", "dim=negative", "dim=float", "rank=65"])
def test_bad_value_gets_the_message_convert_gives(tmp_path, capsys, arg):
    rc, err = _cli(["export-torchscript", str(tmp_path / "m.pt"), "--input-shape", arg,
                    "-o", str(tmp_path / "o.ts.json")], capsys)
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 2 and lines[1].startswith("hint:"), err
    rc2, err2 = _cli(["convert", str(tmp_path / "m.onnx"), "--input-shape", arg, "-o", str(tmp_path / "o.obir")],
                     capsys)
    assert rc2 == 2
    prefix = "error: opbridge export-torchscript: argument --input-shape: "
    assert lines[0].startswith(prefix), err
    assert err2.splitlines()[0] == "error: opbridge convert: argument --input-shape: " + lines[0][len(prefix):]


def test_same_name_twice_is_refused_as_convert_refuses_it(pt, tmp_path, capsys):
    rc, err = _cli(["export-torchscript", str(pt), "--input-shape", "x=2,3", "--input-shape", "x=2,3",
                    "-o", str(tmp_path / "o.ts.json")], capsys)
    assert rc == 2 and "--input-shape gives 'x' twice" in err and "hint:" in err


def test_a_model_input_without_dims_is_refused_where_an_export_takes_a_0d_tensor(tmp_path, capsys):
    """``x=`` is a 0-d tensor argument for an export (a timestep, a scale); a model's input
    fixed to no dims is a mistake, refused by convert."""
    rc, err = _cli(["convert", str(tmp_path / "m.onnx"), "--input-shape", "x=", "-o", str(tmp_path / "o.obir")],
                   capsys)
    assert rc == 2 and "write NAME=DIMS" in err
