"""ob.validate / opbridge validate end to end: onnxruntime is the reference, the interpreter and
the simulator are compared with it tensor by tensor, and a wrong mapping is found by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.cli import main
from opbridge.validate import ValidateError
from tests.conftest import requires_ort

pytestmark = requires_ort

BAD_LEAKY_PLUGIN = '''
import opbridge as ob

@ob.mapping(ob.Framework.ONNX, "LeakyRelu", since_opset=6, override=True)
def leaky_without_alpha(node, g):
    return g.op("LeakyRelu", [g.input(0)])   # alpha dropped: the IR default (0.01) is used
'''


def leaky_onnx(path: Path) -> Path:
    """Conv -> LeakyRelu(alpha=0.3) -> Add -> Relu, with node names unlike tensor names."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((1, 4, 1, 1)).astype(np.float32), "bias")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["conv_out"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["conv_out"], ["leaky_out"], name="leaky", alpha=0.3),
             helper.make_node("Add", ["leaky_out", "bias"], ["add_out"], name="add"),
             helper.make_node("Relu", ["add_out"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "leaky_net",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                              initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8),
              str(path))
    return path


@pytest.fixture(scope="module")
def leaky_model(tmp_path_factory):
    return leaky_onnx(tmp_path_factory.mktemp("leaky") / "leaky_net.onnx")


def cli(*args):
    """The CLI in a fresh interpreter (for plugins, whose registrations are process-global)."""
    return subprocess.run([sys.executable, "-m", "opbridge", *args], capture_output=True, text=True,
                          timeout=300)


class _Result:
    def __init__(self, returncode: int, out: str, err: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, out, err


@pytest.fixture
def cli_inproc(capsys):
    """The CLI in this interpreter: faster, for runs that load no plugin."""

    def run(*args):
        rc = main(list(args))
        cap = capsys.readouterr()
        return _Result(rc, cap.out, cap.err)

    return run


def test_api_passes_on_correct_model(leaky_model):
    r = ob.validate(str(leaky_model))
    assert r.passed, r.summary()
    assert r.first_divergence is None
    assert r.reference == "onnxruntime" and "interpreter" in r.runners
    interp = [row.tensor for row in r.rows if row.candidate == "interpreter"]
    assert interp == ["conv_out", "leaky_out", "add_out", "y"]
    leaky = next(row for row in r.rows if row.tensor == "leaky_out")
    assert (leaky.node, leaky.op_type) == ("leaky", "LeakyRelu")


def test_api_given_inputs_are_used(leaky_model):
    x = np.full((1, 3, 8, 8), 0.5, np.float32)
    r = ob.validate(str(leaky_model), inputs={"x": x}, target=None)
    assert r.passed and r.inputs["x"] == "f32[1,3,8,8] given"


def test_cli_passes_and_writes_report(cli_inproc, leaky_model, tmp_path):
    rep = tmp_path / "report.json"
    r = cli_inproc("validate", str(leaky_model), "--report", str(rep))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout
    data = json.loads(rep.read_text())
    assert data["passed"] is True and data["first_divergence"] is None
    assert {row["tensor"] for row in data["rows"]} == {"conv_out", "leaky_out", "add_out", "y"}


def test_cli_wrong_mapping_names_first_divergence(leaky_model, tmp_path):
    plugin = tmp_path / "bad_leaky.py"
    plugin.write_text(BAD_LEAKY_PLUGIN)
    rep = tmp_path / "report.json"
    r = cli("validate", str(leaky_model), "--plugin", str(plugin), "--report", str(rep))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first divergence: node 'leaky' (LeakyRelu), tensor 'leaky_out'" in " ".join(r.stdout.split())
    fd = json.loads(rep.read_text())["first_divergence"]
    assert (fd["node"], fd["op_type"], fd["tensor"]) == ("leaky", "LeakyRelu", "leaky_out")
    assert fd["candidate"] == "interpreter" and fd["reference"] == "onnxruntime"
    assert fd["status"] == "different" and "euclid" in fd["reason"]
    assert fd["inputs_matched"] == ["conv_out"]  # so the LeakyRelu itself is where it goes wrong


def test_cli_stop_after(cli_inproc, leaky_model, tmp_path):
    rep = tmp_path / "report.json"
    r = cli_inproc("validate", str(leaky_model), "--stop-after", "leaky", "--report", str(rep))
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(rep.read_text())
    assert [row["tensor"] for row in data["rows"]] == ["conv_out", "leaky_out"]
    assert any("--stop-after" in n for n in data["notes"])


def test_cli_debug_dump(cli_inproc, leaky_model, tmp_path):
    dump = tmp_path / "dump.npz"
    r = cli_inproc("validate", str(leaky_model), "--debug", str(dump), "--no-simulator")
    assert r.returncode == 0, r.stdout + r.stderr
    with np.load(dump) as d:
        assert "leaky/out:leaky_out" in d.files and "leaky/in0" in d.files


def test_cli_input_file(cli_inproc, leaky_model, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((1, 3, 8, 8), np.float32))
    r = cli_inproc("validate", str(leaky_model), "--input", f"x={tmp_path / 'x.npy'}", "--no-simulator")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "input x: f32[1,3,8,8] from x.npy" in r.stdout


@pytest.mark.parametrize(
    "args,needle",
    [(["/nonexistent.onnx"], "error:"),
     (["{model}", "--tolerance", "0.9"], "tolerance '0.9'"),
     (["{model}", "--input", "nope={tmp}/x.npy"], "no input named 'nope'"),
     (["{model}", "--stop-after", "nonode"], "no node named 'nonode'")],
    ids=["missing-model", "bad-tolerance", "unknown-input", "unknown-stop-node"],
)
def test_cli_user_errors_exit_2(cli_inproc, leaky_model, tmp_path, args, needle):
    np.save(tmp_path / "x.npy", np.ones((1, 3, 8, 8), np.float32))
    args = [a.format(model=leaky_model, tmp=tmp_path) for a in args]
    r = cli_inproc("validate", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_graph_alone_without_simulator_has_nothing_to_compare():
    b = ob.GraphBuilder("g")
    b.output(b.op("Relu", [b.input("x", "f32", (2,))], name="r"))
    with pytest.raises(ValidateError, match="nothing to compare"):
        ob.validate(b.build(), target=None)


def test_cli_image_input(cli_inproc, leaky_model, tmp_path):
    rgb = np.arange(8 * 8 * 3, dtype=np.uint8).reshape(8, 8, 3)
    (tmp_path / "im.ppm").write_bytes(b"P6\n8 8\n255\n" + rgb.tobytes())
    r = cli_inproc("validate", str(leaky_model), "--image", str(tmp_path / "im.ppm"), "--mean", "1,2,3",
                   "--scale", "0.5", "--pixel-format", "rgb", "--no-simulator")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "input x: f32[1,3,8,8] from image im.ppm (rgb)" in r.stdout


def test_cli_unknown_target_is_user_error(cli_inproc, leaky_model):
    r = cli_inproc("validate", str(leaky_model), "--target", "bm9999")
    assert r.returncode == 2 and "unknown target preset 'bm9999'" in r.stderr


def test_custom_op_last_keeps_onnxruntime_for_the_layers_before(tmp_path):
    """A model ending in a plugin op: onnxruntime runs the layers before it (the cut model), the
    custom op's output is compared against the interpreter, and the report names it."""
    import onnx
    from onnx import TensorProto, helper

    assert main(["plugin", "new", "ScaleShift", "--framework", "onnx", "-o", str(tmp_path / "ss.py")]) == 0
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("ScaleShift", ["r"], ["y"], name="ss", domain="com.example", alpha=2.0)]
    graph = helper.make_graph(nodes, "custom",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])])
    model = helper.make_model(graph, ir_version=8, opset_imports=[helper.make_opsetid("", 13),
                                                                  helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(tmp_path / "custom.onnx"))
    rep = tmp_path / "r.json"
    r = cli("validate", str(tmp_path / "custom.onnx"), "--plugin", str(tmp_path / "ss.py"),
            "--report", str(rep))
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(rep.read_text())
    assert data["reference"] == "onnxruntime"
    assert data["runners"] == ["onnxruntime", "interpreter", "simulator"]
    assert data["layers_without_framework_reference"] == ["ss"]
    refs = {(row["tensor"], row["candidate"]): row["reference"] for row in data["rows"]}
    # 'r' stays in local memory (one layer group with 'ss'), so the simulator is compared on 'y'
    assert refs == {("r", "interpreter"): "onnxruntime", ("y", "simulator"): "interpreter"}
    assert any("custom op(s) 'ss' (com.example::ScaleShift)" in n for n in data["notes"])


def test_cli_no_origin_and_tolerance(cli_inproc, leaky_model, tmp_path):
    rep = tmp_path / "r.json"
    r = cli_inproc("validate", str(leaky_model), "--no-origin", "--tolerance", "0.999,0.995",
                   "--report", str(rep))
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads(rep.read_text())
    assert data["reference"] == "interpreter" and data["tolerance"] == [0.999, 0.995]



@pytest.fixture(scope="module")
def dynamic_model(tmp_path_factory):
    """Relu on an input of shape [N, 4] (symbolic batch)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "dyn",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    path = tmp_path_factory.mktemp("dyn") / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), str(path))
    return path


@pytest.mark.parametrize("form", ["name=npy", "bare npy", "npz", "dict"])
def test_symbolic_dims_taken_from_given_arrays(dynamic_model, tmp_path, form):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 6
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", x=x)
    kwargs = {"name=npy": {"input_files": [f"x={tmp_path / 'x.npy'}"]},
              "bare npy": {"input_files": [str(tmp_path / "x.npy")]},
              "npz": {"input_files": [str(tmp_path / "x.npz")]},
              "dict": {"inputs": {"x": x}}}[form]
    r = ob.validate(str(dynamic_model), target=None, **kwargs)
    assert r.passed and [row.result.ref_shape for row in r.rows] == [(3, 4)]


def test_symbolic_dims_without_arrays_is_user_error(dynamic_model):
    with pytest.raises(ob.ShapeError, match="symbolic dim"):
        ob.validate(str(dynamic_model), target=None)


def test_onnxruntime_copy_over_protobuf_limit_goes_through_external_data(leaky_model, monkeypatch):
    from opbridge.validate import runners

    monkeypatch.setattr(runners, "PROTOBUF_LIMIT", 10)  # as if the model were over 2 GiB
    out = runners.run_onnxruntime(leaky_model, {"x": np.ones((1, 3, 8, 8), np.float32)})
    assert sorted(out.tensors) == ["add_out", "conv_out", "leaky_out", "y"] and not out.notes
