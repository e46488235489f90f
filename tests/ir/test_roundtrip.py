"""``save -> load`` gives back the same graph, and the same program when compiled.

The property is checked here on hand-built graphs with every kind of value a file must keep
(0-d constants and attributes, bf16, -0.0 and non-finite floats, placement), on every shared
Caffe net (random weights), and, through their own harnesses, on every case of the ONNX node
suite and every TorchScript test.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli import main as cli_main
from opbridge.ir.io import graph_to_json
from opbridge.parsers.caffe import parse_caffe
from tests.conftest import SHARED_MODELS, requires_shared_models
from tests.graph_equality import assert_graphs_equal, assert_roundtrip, saved_and_loaded

ROOT = Path(__file__).resolve().parents[2]
CAFFE = SHARED_MODELS / "caffe"
PROPOSAL_PLUGIN = ROOT / "examples" / "plugins" / "frcnn_proposal.py"


def _varied_graph() -> ob.Graph:
    b = ob.GraphBuilder("varied")
    b.metadata["source"] = "hand-built"
    x = b.input("x", "f32", (1, 2, 3, 4))
    scalar = b.constant("scalar", np.array(-0.0, np.float32))
    half = b.constant("half", np.array([1.5, -2.25], dtype=np.float32).astype("bfloat16"))
    y = b.op("Mul", [x, scalar], name="mul")
    y = b.op("Clip", [y], name="clip", min=-0.0)  # max stays +inf
    fill = b.op("ConstantOfShape", [], name="fill", shape=(1, 2, 3, 4), value=np.array(7.0, np.float32))
    y = b.op("Add", [y, fill], name="add", placement="cpu")
    b.output(y, b.op("Cast", [half], name="cast", to="f32"))
    return b.build()


def test_varied_graph_round_trips(tmp_path):
    g = _varied_graph()
    loaded = assert_roundtrip(g, tmp_path)
    assert loaded.constants["scalar"].data.shape == ()
    assert np.signbit(loaded.constants["scalar"].data)
    assert loaded.node("fill").attrs["value"].shape == ()
    assert loaded.node("add").placement == "cpu"


@pytest.mark.parametrize("change", ["name", "placement", "attr", "neg_zero", "float_sign", "const_byte",
                                    "dtype", "origin", "shape"])
def test_assert_graphs_equal_finds_each_difference(change):
    g = _varied_graph()
    other = saved_and_loaded(g)
    if change == "name":
        other.node("mul").name = "mul2"
    elif change == "placement":
        other.node("add").placement = "tpu"
    elif change == "attr":
        other.node("cast").attrs["to"] = "f16"
    elif change == "neg_zero":
        other.node("fill").attrs["value"] = np.array(-0.0, np.float32)
        g.node("fill").attrs["value"] = np.array(0.0, np.float32)
    elif change == "float_sign":
        other.node("clip").attrs["min"] = 0.0
    elif change == "const_byte":
        other.constants["half"].data = other.constants["half"].data.copy()
        other.constants["half"].data.view(np.uint16)[0] ^= 1
    elif change == "dtype":
        other.constants["scalar"].data = other.constants["scalar"].data.astype(np.float64)
    elif change == "origin":
        other.node("mul").origin = ob.ir.graph.Origin("onnx", "Mul", "m")
    elif change == "shape":
        other.constants["scalar"].data = other.constants["scalar"].data.reshape(1)
    with pytest.raises(AssertionError):
        assert_graphs_equal(g, other)


def test_old_file_with_one_element_scalar_reads_back_as_declared(tmp_path):
    """Files written before 0-d tensors were saved 0-d hold them as (1,): same single value."""
    from safetensors.numpy import save_file

    g = _varied_graph()
    tensors: dict[str, np.ndarray] = {}
    doc = graph_to_json(g, tensors)
    tensors["scalar"] = tensors["scalar"].reshape(1)
    path = tmp_path / "old.obir"
    save_file(tensors, str(path), metadata={"format": "opbridge.obir", "format_version": "1",
                                            "graph": json.dumps(doc)})
    assert_graphs_equal(g, ob.load(path))
    tensors["scalar"] = np.zeros(2, np.float32)
    save_file(tensors, str(path), metadata={"format": "opbridge.obir", "format_version": "1",
                                            "graph": json.dumps(doc)})
    with pytest.raises(ob.ModelFormatError, match=r"constant 'scalar': stored shape \(2,\) != \(\)"):
        ob.load(path)


# -- every shared Caffe net -------------------------------------------------------------
def _caffe_nets() -> list:
    if not CAFFE.is_dir():
        return [pytest.param("-", marks=pytest.mark.skip(reason=f"{CAFFE} is absent (a fresh clone "
                                                                 "has no shared/)"))]
    nets = sorted(p.parent.name for p in CAFFE.glob("*/deploy.prototxt"))
    # SSD-VGG300 once could not be read back (a 0-d constant): it always runs
    return [pytest.param(n, marks=() if n == "ssd_vgg300" else (pytest.mark.slow,), id=n) for n in nets]


@requires_shared_models
@pytest.mark.parametrize("net", _caffe_nets())
def test_shared_caffe_net_round_trips(net: str, tmp_path: Path) -> None:
    prototxt = CAFFE / net / "deploy.prototxt"
    shapes = {t.name: (1, *t.shape[1:]) for t in parse_caffe(prototxt).inputs if t.shape}
    plugins = [str(PROPOSAL_PLUGIN)] if net == "faster_rcnn_vgg16" else []
    weights = tmp_path / "w.caffemodel"
    args = ["random-weights", str(prototxt), "-o", str(weights)]
    for name, dims in shapes.items():
        args += ["--input-shape", f"{name}={','.join(map(str, dims))}"]
    for p in plugins:
        args += ["--plugin", p]
    assert cli_main(args) == 0
    g = ob.convert(str(prototxt), weights=str(weights), input_shapes=shapes, plugins=plugins)
    assert_roundtrip(g, tmp_path)


@requires_shared_models
def test_ssd_obir_shows_and_compiles_on_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SSD-VGG300's saved graph (with 0-d constants, and its DetectionOutput on the host) reads
    back in ``opbridge show`` and ``opbridge compile``."""
    prototxt = CAFFE / "ssd_vgg300" / "deploy.prototxt"
    weights, obir, prog = tmp_path / "w.caffemodel", tmp_path / "ssd.obir", tmp_path / "ssd.obprog"
    assert cli_main(["random-weights", str(prototxt), "-o", str(weights)]) == 0
    assert cli_main(["convert", str(prototxt), "--weights", str(weights), "-o", str(obir)]) == 0
    capsys.readouterr()
    assert cli_main(["show", str(obir)]) == 0
    shown = capsys.readouterr().out
    (line,) = [ln for ln in shown.splitlines() if "# detection_out " in ln]
    assert "runs on the host cpu" in line
    assert cli_main(["compile", str(obir), "-o", str(prog)]) == 0
    assert ob.load_program(prog).profile().num_cpu_layers == 1
