"""convert() and `opbridge convert`: plugins, pre-flight reports, input shapes, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import ModelFormatError, PluginError, ShapeError
from tests.conftest import requires_cv2

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "examples" / "plugins" / "onnx_custom_ops.py"


class FooScale(OpRun):
    """Reference semantics of com.example::FooScale, independent of the plugin."""

    op_domain = "com.example"

    def _run(self, x, scale=None, bias=None):
        scale = 1.0 if scale is None else scale
        bias = 0.0 if bias is None else bias
        return ((x * np.float32(scale) + np.float32(bias)).astype(x.dtype),)


class BarShift(OpRun):
    op_domain = "com.example"

    def _run(self, x, shift=None):
        s = 0 if shift is None else shift
        n = x.shape[-1]
        idx = [(i - s) % n for i in range(n)]
        return (x[..., idx],)


def custom_model(path: Path | None = None, **foo_attrs) -> onnx.ModelProto:
    nodes = [
        helper.make_node("FooScale", ["x"], ["scaled"], name="foo_node", domain="com.example", **foo_attrs),
        helper.make_node("BarShift", ["scaled"], ["y"], name="bar_node", domain="com.example", shift=2),
    ]
    g = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    if path is not None:
        onnx.save(m, str(path))
    return m


def run_cli(*args, env=None):
    """The command as a whole process (exit code, stderr, no traceback)."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "opbridge", *map(str, args)], capture_output=True,
                          text=True, timeout=300, env=full_env)


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def cli(capsys, *args) -> Result:
    """The command in this process (faster); main() maps errors to exit codes like the process."""
    rc = main([str(a) for a in args])
    out = capsys.readouterr()
    return Result(rc, out.out, out.err)


def test_cli_two_unknown_custom_ops_one_report_exit_2(tmp_path):
    model = tmp_path / "custom.onnx"
    custom_model(model)
    r = run_cli("convert", model, "-o", tmp_path / "out.obir", env={"OPBRIDGE_PLUGIN_PATH": ""})
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    err = r.stderr
    assert err.count("error:") == 1
    for needle in ("com.example::FooScale", "'foo_node'", "com.example::BarShift", "'bar_node'",
                   "opbridge.mapping(opbridge.Framework.ONNX"):
        assert needle in err
    assert not (tmp_path / "out.obir").exists()


@pytest.mark.parametrize("attrs", [{}, {"scale": 3.0}, {"scale": -0.5, "bias": 1.25}],
                         ids=["attrs=absent", "scale=3", "scale,bias"])
def test_plugin_makes_custom_model_convert_and_run(attrs):
    model = custom_model(**attrs)
    g = ob.convert(model, input_shapes={"x": (3, 5)}, plugins=[PLUGIN])
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    got = ob.interpret(g, {"x": x})["y"]
    ref = ReferenceEvaluator(model, new_ops=[FooScale, BarShift]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    assert [n.origin.name for n in g.nodes] == ["foo_node", "bar_node"]
    assert [n.placement for n in g.nodes] == ["tpu", "cpu"]  # the plugin's imply_type


def test_cli_plugin_converts_and_writes_obir(tmp_path, capsys):
    model = tmp_path / "custom.onnx"
    custom_model(model, scale=2.0)
    out = tmp_path / "m.obir"
    r = cli(capsys, "convert", model, "--plugin", PLUGIN, "--input-shape", "x=2,5", "-o", out)
    assert r.returncode == 0, r.stderr
    ob.load_plugins([PLUGIN])
    g = ob.load(out)
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    ref = ReferenceEvaluator(custom_model(scale=2.0), new_ops=[FooScale, BarShift]).run(None, {"x": x})[0]
    np.testing.assert_allclose(ob.interpret(g, {"x": x})["y"], ref)


def test_plugin_path_env_loads_a_folder(tmp_path):
    model = tmp_path / "custom.onnx"
    custom_model(model)
    r = run_cli("convert", model, "--input-shape", "x=1,5", "-o", tmp_path / "m.obir",
                env={"OPBRIDGE_PLUGIN_PATH": str(PLUGIN.parent)})
    assert r.returncode == 0, r.stderr


def test_broken_plugin_reported_with_path_and_error(tmp_path):
    bad = tmp_path / "bad_plugin.py"
    bad.write_text("import numpy\nraise RuntimeError('boom at import')\n")
    with pytest.raises(PluginError, match=r"bad_plugin\.py.*RuntimeError: boom at import"):
        ob.load_plugins([bad])
    r = run_cli("convert", tmp_path / "x.onnx", "--plugin", bad, "-o", tmp_path / "o.obir")
    assert r.returncode == 2 and "bad_plugin.py" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # one error line and its hint


def test_symbolic_dim_is_kept_and_compile_names_it(tmp_path, capsys):
    model = tmp_path / "custom.onnx"
    custom_model(model)
    r = cli(capsys, "convert", model, "--plugin", PLUGIN, "-o", tmp_path / "o.obir")
    assert r.returncode == 0 and "x:f32[N, 5]" in r.stdout
    r = cli(capsys, "compile", tmp_path / "o.obir", "--plugin", PLUGIN, "-o", tmp_path / "o.obprog")
    assert r.returncode == 2
    assert "input 'x' has symbolic dim(s) N" in r.stderr and "--input-shape x=1,5" in r.stderr


@pytest.mark.parametrize("shapes,match", [
    ({"nope": (1, 5)}, r"(?s)names 'nope', which is not an input.*inputs are: x"),
    ({"x": (1, 5, 1)}, r"input 'x' has rank 2"),
    ({"x": (1, 4)}, r"declares dim 5 where input_shapes gives 4"),
], ids=["unknown-name", "wrong-rank", "fixed-dim-changed"])
def test_bad_input_shapes(shapes, match):
    with pytest.raises(ShapeError, match=match):
        ob.convert(custom_model(), input_shapes=shapes, plugins=[PLUGIN])


@pytest.mark.parametrize("arg", ["x", "x=", "=1,2", "x=1,a", "x=-1,3"],
                         ids=["no-eq", "no-dims", "no-name", "not-int", "negative"])
def test_cli_bad_input_shape_is_usage_error(tmp_path, arg, capsys):
    with pytest.raises(SystemExit) as info:
        cli(capsys, "convert", tmp_path / "m.onnx", "--input-shape", arg, "-o", tmp_path / "o.obir")
    assert info.value.code == 2 and "NAME=DIMS" in capsys.readouterr().err


def test_unknown_model_kind():
    with pytest.raises(ModelFormatError, match=r"unknown model kind"):
        ob.convert("model.xyz")


def test_cli_missing_file_exit_2(tmp_path, capsys):
    r = cli(capsys, "convert", tmp_path / "missing.onnx", "-o", tmp_path / "o.obir")
    assert r.returncode == 2 and "missing.onnx" in r.stderr and "Traceback" not in r.stderr


def test_ops_framework_onnx_lists_versions(capsys):
    r = cli(capsys, "ops", "--framework", "onnx")
    assert r.returncode == 0, r.stderr
    lines = {ln.split()[0]: ln.split(None, 1)[1] for ln in r.stdout.splitlines()[1:]}
    assert "Constant" in lines and "Dropout" in lines
    assert lines["Dropout"].startswith("1, 12")


class _FakeEntryPoint:
    def __init__(self, name, value, fn):
        self.name, self.value, self._fn = name, value, fn

    def load(self):
        return self._fn()


def test_entry_point_plugins_load_and_failures_name_the_entry_point(monkeypatch):
    from opbridge import plugins_loader

    loaded = []
    good = _FakeEntryPoint("good", "good_pkg.plugin", lambda: loaded.append("good"))
    monkeypatch.setattr(plugins_loader.metadata, "entry_points", lambda group: [good] if group == "opbridge.plugins" else [])
    ob.load_plugins([])
    assert loaded == ["good"]

    def boom():
        raise ImportError("no module named vendor_kernels")

    bad = _FakeEntryPoint("vendor", "vendor_pkg.plugin", boom)
    monkeypatch.setattr(plugins_loader.metadata, "entry_points", lambda group: [bad])
    with pytest.raises(PluginError, match=r"installed plugin 'vendor' \(vendor_pkg\.plugin\) failed to import: "
                                          r"ImportError: no module named vendor_kernels"):
        ob.load_plugins([])


# -- input_shapes reach the parsers that take them (Caffe: a deploy batch of 10 becomes 1) -------

BATCH10 = """name: "b10"
input: "data"
input_dim: 10 input_dim: 3 input_dim: 8 input_dim: 8
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool1" top: "fc" inner_product_param { num_output: 5 } }
"""


def _batch10_net(tmp_path: Path) -> tuple[Path, Path]:
    from opbridge.tools.caffe_weights import write_random_weights

    proto, model = tmp_path / "deploy.prototxt", tmp_path / "deploy.caffemodel"
    proto.write_text(BATCH10)
    write_random_weights(proto, model, seed=3)
    return proto, model


@requires_cv2
@pytest.mark.parametrize("batch", [1, 2, 10], ids=["batch=1", "batch=2", "batch=declared"])
def test_caffe_input_shapes_replace_declared_batch(tmp_path, batch):
    """The converted net runs at the requested batch and agrees with OpenCV's Caffe importer."""
    import cv2

    proto, model = _batch10_net(tmp_path)
    g = ob.convert(proto, weights=model, input_shapes={"data": (batch, 3, 8, 8)})
    assert tuple(g.inputs[0].shape) == (batch, 3, 8, 8)
    x = np.random.default_rng(0).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    got = ob.interpret(g, {"data": x})["fc"]
    net = cv2.dnn.readNetFromCaffe(str(proto), str(model))
    net.setInput(x, "data")
    ref = net.forward("fc")
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


def test_caffe_input_shapes_absent_keeps_declared_batch(tmp_path):
    proto, model = _batch10_net(tmp_path)
    assert tuple(ob.convert(proto, weights=model).inputs[0].shape) == (10, 3, 8, 8)


def test_cli_input_shape_replaces_caffe_declared_batch(tmp_path):
    proto, model = _batch10_net(tmp_path)
    out = tmp_path / "net.obir"
    r = run_cli("convert", proto, "--weights", model, "--input-shape", "data=1,3,8,8", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "data:f32[1, 3, 8, 8]" in r.stdout
    assert tuple(ob.load(out).inputs[0].shape) == (1, 3, 8, 8)


def test_cli_input_shape_wrong_rank_for_caffe_is_one_line_error(tmp_path, capsys):
    proto, model = _batch10_net(tmp_path)
    r = cli(capsys, "convert", proto, "--weights", model, "--input-shape", "data=1,3,8", "-o", tmp_path / "o.obir")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "input 'data' is declared with 4 dims" in r.stderr


@pytest.mark.parametrize("takes", ["input_shapes", "kwargs", "no"], ids=["param", "var-keyword", "absent"])
def test_parse_passes_input_shapes_only_to_parsers_that_take_them(tmp_path, monkeypatch, takes):
    """A parser without an ``input_shapes`` parameter (ONNX, TorchScript) is called as before;
    the converter still applies the shapes to its result."""
    import importlib

    from opbridge.parsers.origin import Framework, OriginGraph

    convert_mod = importlib.import_module("opbridge.convert")  # the package exports convert()

    seen = {}

    def with_param(path, weights=None, input_shapes=None):
        seen["input_shapes"] = input_shapes
        return OriginGraph(name="g", framework=Framework.ONNX)

    def with_kwargs(path, weights=None, **kw):
        seen.update(kw)
        return OriginGraph(name="g", framework=Framework.ONNX)

    def without(path, weights=None):
        seen["called"] = True
        return OriginGraph(name="g", framework=Framework.ONNX)

    fn = {"input_shapes": with_param, "kwargs": with_kwargs, "no": without}[takes]
    monkeypatch.setattr(convert_mod, "parser_for", lambda path: fn)
    convert_mod.parse(tmp_path / "m.fake", input_shapes={"x": (1, 2)})
    assert seen == ({"called": True} if takes == "no" else {"input_shapes": {"x": (1, 2)}})

