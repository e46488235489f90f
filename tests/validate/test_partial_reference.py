"""A model with a custom op keeps onnxruntime as the reference for the layers it can run: the ONNX
graph is cut at the custom op, onnxruntime runs the layers before and after it, fed with the
interpreter's value of the custom op's output, and the report names the layers that had no
onnxruntime reference."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opbridge.validate import runners
from opbridge.validate.cut import custom_nodes
from tests.conftest import requires_cv2, requires_ort

SHAPE = (1, 4, 6, 6)

PLUGIN = '''
import opbridge as ob

(ob.define_op("Twice").input("x", "T").output("y", "T").type_param("T", ("f32",))
   .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(lambda x: x + x))
(ob.register_custom_op("Twice").framework_type(ob.Framework.ONNX).origin_op_type("Twice")
   .imply_type(ob.ImplyType.TPU))
'''

#: A wrong built-in mapping after the custom op: only a framework reference can catch it.
BAD_LEAKY = '''
import opbridge as ob

@ob.mapping(ob.Framework.ONNX, "LeakyRelu", since_opset=6, override=True)
def leaky_without_alpha(node, g):
    return g.op("LeakyRelu", [g.input(0)])   # alpha dropped: the IR default (0.01) is used
'''


def _model(path: Path) -> Path:
    """Conv -> Twice (com.example, custom) -> LeakyRelu(0.3) -> Conv."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Twice", ["c1"], ["t"], name="twice", domain="com.example"),
             helper.make_node("LeakyRelu", ["t"], ["l"], name="leaky", alpha=0.3),
             helper.make_node("Conv", ["l", "w2"], ["y"], name="conv2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)],
                              initializer=[w1, w2])
    onnx.save(helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]), str(path))
    return path


@requires_ort
def test_custom_nodes_are_the_ones_onnxruntime_has_no_kernel_for(tmp_path: Path) -> None:
    import onnx

    model = onnx.load(str(_model(tmp_path / "m.onnx")))
    assert [n.name for n in custom_nodes(model)] == ["twice"]


@requires_ort
def test_onnxruntime_runs_the_cut_model_on_the_fed_value(tmp_path: Path) -> None:
    """The layers after the cut compute from the value fed for the custom op's output: checked
    against numpy (LeakyRelu, then a 1x1 convolution as a matrix product over channels)."""
    import onnx

    path = _model(tmp_path / "m.onnx")
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    fed = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    out = runners.run_onnxruntime(path, {"x": x}, custom_values={"t": fed})
    assert sorted(out.tensors) == ["c1", "l", "y"]  # 't' is fed, not computed by onnxruntime
    leaky = np.where(fed > 0, fed, np.float32(0.3) * fed)
    np.testing.assert_allclose(out.tensors["l"], leaky, rtol=1e-6)
    w2 = next(onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer if t.name == "w2")
    np.testing.assert_allclose(out.tensors["y"], np.einsum("oc,nchw->nohw", w2[:, :, 0, 0], leaky),
                               rtol=1e-5, atol=1e-5)
    assert any("custom op(s) 'twice' (com.example::Twice)" in n for n in out.notes)


@requires_ort
def test_a_custom_output_the_interpreter_lacks_drops_what_follows(tmp_path: Path) -> None:
    out = runners.run_onnxruntime(_model(tmp_path / "m.onnx"), {"x": np.ones(SHAPE, np.float32)},
                                  custom_values={})
    assert sorted(out.tensors) == ["c1"]
    assert any("2 node(s) after them had no input value" in n for n in out.notes)


def _validate(tmp_path: Path, *plugins: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    model = _model(tmp_path / "m.onnx")
    args = []
    for i, text in enumerate(plugins):
        (tmp_path / f"p{i}.py").write_text(text)
        args += ["--plugin", str(tmp_path / f"p{i}.py")]
    rep = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "opbridge", "validate", str(model), *args, "--per-layer",
                        "--report", str(rep)], capture_output=True, text=True, timeout=300)
    return r, json.loads(rep.read_text())


@requires_ort
def test_layers_around_the_custom_op_are_compared_with_onnxruntime(tmp_path: Path) -> None:
    r, data = _validate(tmp_path, PLUGIN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert data["reference"] == "onnxruntime"
    assert data["layers_without_framework_reference"] == ["twice"]
    refs = {(row["tensor"], row["candidate"]): row["reference"] for row in data["rows"]}
    assert refs == {("c1", "interpreter"): "onnxruntime", ("c1", "simulator"): "onnxruntime",
                    ("t", "simulator"): "interpreter",
                    ("l", "interpreter"): "onnxruntime", ("l", "simulator"): "onnxruntime",
                    ("y", "interpreter"): "onnxruntime", ("y", "simulator"): "onnxruntime"}
    assert "1 layer(s) had no onnxruntime reference and were compared against the interpreter: " \
           "'twice'" in r.stdout


@requires_ort
@pytest.mark.parametrize("order", ["plugin-first", "bad-mapping-first"])
def test_a_wrong_mapping_after_the_custom_op_is_caught(tmp_path: Path, order: str) -> None:
    """Without the cut, the interpreter would be the only reference and agree with itself."""
    plugins = (PLUGIN, BAD_LEAKY) if order == "plugin-first" else (BAD_LEAKY, PLUGIN)
    r, data = _validate(tmp_path, *plugins)
    assert r.returncode == 1, r.stdout + r.stderr
    fd = data["first_divergence"]
    assert (fd["node"], fd["reference"], fd["candidate"]) == ("leaky", "onnxruntime", "interpreter")
    # its input 't' is the interpreter's own value, fed to onnxruntime: nothing to compare there
    assert fd["inputs_matched"] == []
    assert data["layers_without_framework_reference"] == ["twice"]


# -- Caffe through OpenCV: a custom layer runs as a stand-in with the interpreter's values ------

CAFFE_PLUGIN = '''
import opbridge as ob

(ob.define_op("MyScale").input("x", "T").output("y", "T").type_param("T", ("f32",))
   .param("scale", "float", default=1.0)
   .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(lambda x, scale: x * scale))

def parse(src, dst):
    dst.set_attr("scale", float(src.get_attr("my_param", {}).get("scale", 1.0)))

(ob.register_custom_op("MyScale").framework_type(ob.Framework.CAFFE).origin_op_type("MyScale")
   .parse_params_by_operator_fn(parse).imply_type(ob.ImplyType.TPU))
'''

#: Two custom layers of one type with different scales: each stand-in must return its own layer's
#: values, or the layers after them would disagree with OpenCV.
CAFFE_NET = """
name: "custom_caffe"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "mine" type: "MyScale" bottom: "c" top: "m" my_param { scale: 2.0 } }
layer { name: "relu" type: "ReLU" bottom: "m" top: "r" relu_param { negative_slope: 0.2 } }
layer { name: "mine2" type: "MyScale" bottom: "r" top: "m2" my_param { scale: -3.0 } }
layer { name: "conv2" type: "Convolution" bottom: "m2" top: "y" convolution_param { num_output: 2 kernel_size: 1 } }
"""


def _caffe_validate(tmp_path: Path, *plugins: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    (tmp_path / "net.prototxt").write_text(CAFFE_NET)
    args = []
    for i, text in enumerate(plugins):
        (tmp_path / f"p{i}.py").write_text(text)
        args += ["--plugin", str(tmp_path / f"p{i}.py")]
    subprocess.run([sys.executable, "-m", "opbridge", "random-weights", str(tmp_path / "net.prototxt"),
                    "-o", str(tmp_path / "net.caffemodel"), *args[:2]], check=True, capture_output=True,
                   timeout=300)
    rep = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "opbridge", "validate", str(tmp_path / "net.prototxt"),
                        "--weights", str(tmp_path / "net.caffemodel"), *args, "--report", str(rep)],
                       capture_output=True, text=True, timeout=300)
    return r, json.loads(rep.read_text())


@requires_cv2
def test_caffe_layers_around_custom_layers_are_compared_with_opencv(tmp_path: Path) -> None:
    r, data = _caffe_validate(tmp_path, CAFFE_PLUGIN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert data["reference"] == "opencv"
    assert data["layers_without_framework_reference"] == ["mine", "mine2"]
    refs = {(row["tensor"], row["candidate"]): row["reference"] for row in data["rows"]}
    for tensor in ("c", "r", "y"):
        assert refs[(tensor, "interpreter")] == "opencv"
    assert ("m", "interpreter") not in refs and ("m2", "interpreter") not in refs
    assert any("custom layer(s) 'mine' (MyScale), 'mine2' (MyScale)" in n for n in data["notes"])


@requires_cv2
def test_caffe_wrong_mapping_between_custom_layers_is_caught(tmp_path: Path) -> None:
    bad_relu = '''
import opbridge as ob

@ob.mapping(ob.Framework.CAFFE, "ReLU", override=True)
def relu_without_slope(node, g):
    return g.op("Relu", [g.input(0)])   # negative_slope dropped
'''
    r, data = _caffe_validate(tmp_path, CAFFE_PLUGIN, bad_relu)
    assert r.returncode == 1, r.stdout + r.stderr
    fd = data["first_divergence"]
    assert (fd["node"], fd["reference"], fd["candidate"]) == ("relu", "opencv", "interpreter")
