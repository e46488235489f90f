"""``opbridge plugin new``: the skeleton and its test are written, load, and pass."""

from __future__ import annotations

import subprocess
import sys

import pytest

from opbridge.cli import main
from opbridge.cli.plugin import snake_case

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
    assert (tmp_path / "test_my_scale.py").is_file()
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
@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_generated_tests_pass(tmp_path, fw):
    out = tmp_path / "my_scale.py"
    assert main(["plugin", "new", "MyScale", "--framework", fw, "-o", str(out)]) == 0
    r = run("-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_my_scale.py"),
            cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:]


def test_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "x.py"
    out.write_text("keep me")
    assert main(["plugin", "new", "X", "--framework", "onnx", "-o", str(out)]) == 2
    assert out.read_text() == "keep me"
    assert "exists" in capsys.readouterr().err
    assert main(["plugin", "new", "X", "--framework", "onnx", "-o", str(out), "--force"]) == 0


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
