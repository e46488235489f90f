"""``opbridge plugin new``: the skeleton and its test are written, load, and pass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from opbridge.cli import main
from opbridge.cli.plugin import snake_case
from opbridge.plugins_loader import is_plugin_file

FRAMEWORKS = ["caffe", "onnx", "torchscript"]


def run(*args, cwd=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_writes_plugin_and_test(tmp_path, fw, capsys):
    out = tmp_path / "my_scale.py"
    assert main(["plugin", "new", "MyScale", "--framework", fw, "-o", str(out)]) == 0
    text = out.read_text()
    assert "define_op(OP)" in text and 'OP = "MyScale"' in text
    assert {"caffe": "register_custom_op(OP)", "onnx": "@mapping(Framework.ONNX",
            "torchscript": "@mapping(Framework.TORCHSCRIPT"}[fw] in text
    assert "register_kernel(OP).split(" in text
    assert (tmp_path / "tests" / "test_my_scale.py").is_file()
    assert not (tmp_path / "test_my_scale.py").exists()
    compile(text, str(out), "exec")
    assert "wrote" in capsys.readouterr().out


def test_plugins_load(tmp_path):
    # one interpreter for the three (a plugin's registrations are global to the process)
    files = []
    for fw in FRAMEWORKS:
        out = tmp_path / f"{fw}_scale.py"
        assert main(["plugin", "new", f"{fw.capitalize()}Scale", "--framework", fw, "-o", str(out)]) == 0
        files.append(str(out))
    code = ("import opbridge as ob; from opbridge.plugins_loader import load_plugins; "
            f"load_plugins({files!r}, env=False); "
            "print(sorted(o.name for o in ob.DEFAULT_OPS if o.name.endswith('Scale')))")
    r = run("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['CaffeScale', 'OnnxScale', 'TorchscriptScale']"


@pytest.mark.slow
@pytest.mark.parametrize("fw,kind", [(fw, "") for fw in FRAMEWORKS] + [
    ("caffe", "--global-only"), ("onnx", "--cpu"), ("torchscript", "--global-only"), ("caffe", "--cpu")])
def test_generated_tests_pass(tmp_path, fw, kind):
    out = tmp_path / "my_scale.py"
    assert main(["plugin", "new", "MyScale", "--framework", fw, "-o", str(out), *([kind] if kind else [])]) == 0
    r = run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "tests" / "test_my_scale.py"),
            cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:]


@pytest.mark.parametrize("which", ["plugin", "test"])
def test_refuses_to_overwrite(tmp_path, capsys, which):
    out = tmp_path / "x.py"
    kept = out if which == "plugin" else tmp_path / "tests" / "test_x.py"
    kept.parent.mkdir(exist_ok=True)
    kept.write_text("keep me")
    assert main(["plugin", "new", "X", "--framework", "onnx", "-o", str(out)]) == 2
    assert kept.read_text() == "keep me"
    assert "exists" in capsys.readouterr().err
    assert main(["plugin", "new", "X", "--framework", "onnx", "-o", str(out), "--force"]) == 0
    assert kept.read_text() != "keep me"


# -- names that collide with built-ins --------------------------------------------------------
@pytest.mark.parametrize("name,fw,says", [
    ("Relu", "onnx", r"the built-in IR op Relu \(defined at .*activation.py:\d+\)"),
    ("Upsample", "caffe", r"the built-in caffe mapping of Upsample \(registered at .*caffe.*\.py:\d+\)"),
    ("Gemm", "torchscript", r"the built-in IR op Gemm"),
], ids=["onnx-op", "caffe-mapping", "torchscript-op"])
def test_builtin_name_stops_without_override(tmp_path, capsys, name, fw, says):
    out = tmp_path / "p.py"
    assert main(["plugin", "new", name, "--framework", fw, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(rf"error: plugin name '{name}' collides with .*{says}", err), err
    assert f"hint: choose another NAME (e.g. My{name}), or pass --override" in err
    assert not out.exists() and not (tmp_path / "tests").exists()


def test_override_replaces_the_builtin_caffe_mapping(tmp_path, capsys):
    out = tmp_path / "upsample.py"
    assert main(["plugin", "new", "Upsample", "--framework", "caffe", "-o", str(out), "--override"]) == 0
    assert "warning: " in capsys.readouterr().out
    text = out.read_text()
    assert "register_custom_op(OP, override=True)" in text and "This plugin REPLACES" in text
    assert "define_op(OP)" in text  # no built-in IR op of that name: nothing else overridden
    proto = tmp_path / "net.prototxt"
    proto.write_text('name: "t" layer { name: "data" type: "Input" top: "data" input_param { shape { '
                     'dim: 1 dim: 3 dim: 4 dim: 4 } } } layer { name: "up" type: "Upsample" '
                     'bottom: "data" top: "out" upsample_param { alpha: 2 } }')
    code = ("import opbridge as ob; "
            f"g = ob.convert({str(proto)!r}, plugins=[{str(out)!r}]); print([n.op for n in g.nodes])")
    r = run("-c", code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['Upsample']"


def test_override_of_an_ir_op_overrides_its_definition_and_kernel(tmp_path):
    out = tmp_path / "relu.py"
    assert main(["plugin", "new", "Relu", "--framework", "onnx", "-o", str(out), "--override"]) == 0
    text = out.read_text()
    assert "define_op(OP, override=True)" in text and "register_kernel(OP, override=True)" in text
    r = run("-c", f"from opbridge.plugins_loader import load_plugins; load_plugins([{str(out)!r}], env=False)")
    assert r.returncode == 0, r.stderr


# -- where the op runs --------------------------------------------------------------------------
def test_global_only_has_no_tiling_hints(tmp_path):
    out = tmp_path / "g.py"
    assert main(["plugin", "new", "MyG", "--framework", "caffe", "-o", str(out), "--global-only"]) == 0
    text = out.read_text()
    assert "register_kernel(OP).cost(" in text and ".split(" not in text.split("# 3.")[1].split("# No tiling")[0]
    assert "p.num_global_layers == 1" in (tmp_path / "tests" / "test_g.py").read_text()


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_cpu_places_the_op_on_the_host(tmp_path, fw):
    out = tmp_path / "c.py"
    assert main(["plugin", "new", "MyC", "--framework", fw, "-o", str(out), "--cpu"]) == 0
    text = out.read_text()
    assert '.placement("cpu")' in text and "register_kernel" not in text
    assert ("ImplyType.CPU" in text) is (fw == "caffe")
    assert "p.num_cpu_layers == 1" in (tmp_path / "tests" / "test_c.py").read_text()


def test_cpu_and_global_only_exclude_each_other(tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["plugin", "new", "X", "--framework", "onnx", "--cpu", "--global-only", "-o", str(tmp_path / "x.py")])
    assert e.value.code == 2


def test_plugin_file_named_like_a_test_is_refused(tmp_path, capsys):
    assert main(["plugin", "new", "X", "--framework", "onnx", "-o", str(tmp_path / "test_x.py")]) == 2
    assert "starting with test_ is not loaded as a plugin" in capsys.readouterr().err


# -- a plugin folder on OPBRIDGE_PLUGIN_PATH ------------------------------------------------------
def test_plugin_folder_skips_tests(tmp_path):
    # the generated layout on the path: the plugin loads, its test (and stray test files) do not
    out = tmp_path / "my_scale.py"
    assert main(["plugin", "new", "FolderScale", "--framework", "onnx", "-o", str(out)]) == 0
    boom = "raise SystemExit('a test file was imported as a plugin')\n"
    (tmp_path / "test_stray.py").write_text(boom)
    (tmp_path / "conftest.py").write_text(boom)
    (tmp_path / "_private.py").write_text(boom)
    code = ("import opbridge as ob; from opbridge.plugins_loader import load_plugins; load_plugins(); "
            "print('FolderScale' in ob.DEFAULT_OPS)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OPBRIDGE_PLUGIN_PATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


@pytest.mark.parametrize("name,want", [("p.py", True), ("test_p.py", False), ("conftest.py", False),
                                       ("_p.py", False), ("p_test.py", True)])
def test_is_plugin_file(name, want):
    assert is_plugin_file(Path(name)) is want


@pytest.mark.parametrize("name", ["1Bad", "has-dash", "class"], ids=["digit", "dash", "keyword"])
def test_bad_name_is_user_error(tmp_path, name, capsys):
    assert main(["plugin", "new", name, "--framework", "onnx", "-o", str(tmp_path / "p.py")]) == 2
    assert "must be a Python identifier" in capsys.readouterr().err


def test_output_must_be_py(tmp_path, capsys):
    assert main(["plugin", "new", "X", "--framework", "onnx", "-o", str(tmp_path / "p.txt")]) == 2
    assert "must end in .py" in capsys.readouterr().err


def test_unknown_framework_is_usage_error():
    with pytest.raises(SystemExit) as e:
        main(["plugin", "new", "X", "--framework", "tflite"])
    assert e.value.code == 2


@pytest.mark.parametrize("name,want", [("ScaleShift", "scale_shift"), ("Upsample", "upsample"),
                                       ("MyOp2D", "my_op2_d")])
def test_snake_case(name, want):
    assert snake_case(name) == want
