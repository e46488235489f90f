"""The opbridge command: exit codes, messages, no tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from opbridge.cli import main


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "opbridge", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_version():
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.startswith("opbridge ")


def test_ops_json_lists_ops():
    r = run_cli("ops", "--format", "json")
    assert r.returncode == 0, r.stderr
    ops = json.loads(r.stdout)
    names = {o["name"] for o in ops}
    assert {"Relu", "Add"} <= names
    relu = next(o for o in ops if o["name"] == "Relu")
    assert relu["inputs"][0]["name"] == "x" and "T" in relu["type_params"]


def test_ops_table(capsys):
    assert main(["ops"]) == 0
    assert "Relu" in capsys.readouterr().out


def test_show_missing_file_is_clean_error():
    r = run_cli("show", "/nonexistent/model.obir")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("error: .obir file '/nonexistent/model.obir' does not exist")


def test_demo_and_show(tmp_path):
    r = run_cli("demo", "--out-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    obir = next(tmp_path.glob("*.obir"))
    r = run_cli("show", str(obir))
    assert r.returncode == 0, r.stderr
    assert "inputs:" in r.stdout and re.search(r"# \S+ +from (caffe|onnx|opbridge) ", r.stdout)


def test_usage_error_exit_2():
    r = run_cli("show")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize("cmd", ["demo", "ops", "show"])
def test_help(cmd):
    r = run_cli(cmd, "--help")
    assert r.returncode == 0 and "usage: opbridge" in r.stdout


def _relu_onnx(path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="the_relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_show_reads_a_model_file_as_compile_does(tmp_path):
    model = _relu_onnx(tmp_path / "m.onnx")
    r = run_cli("show", str(model))
    assert r.returncode == 0, r.stderr
    assert "the_relu" in r.stdout and "Relu" in r.stdout and "%x: f32[N,3]" in r.stdout
    r = run_cli("show", str(model), "--input-shape", "x=2,3")
    assert r.returncode == 0, r.stderr
    assert "%x: f32[2,3]" in r.stdout


@pytest.mark.parametrize("cmd", ["show", "compile"])
def test_a_program_where_a_graph_is_wanted_is_clean_error(tmp_path, cmd):
    prog = tmp_path / "m.obprog"
    prog.write_bytes(b"not read")
    r = run_cli(cmd, str(prog), *(["-o", str(tmp_path / "out.obprog")] if cmd == "compile" else []))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith(f"error: '{prog}' is a compiled program; {cmd} reads a graph (.obir)")
    assert lines[1].startswith("hint: ") and "opbridge profile" in lines[1]


@pytest.mark.parametrize("cmd", ["show", "convert", "compile"])
def test_input_shape_given_twice_is_clean_error(tmp_path, cmd):
    model = _relu_onnx(tmp_path / "m.onnx")
    out = ["-o", str(tmp_path / ("o.obir" if cmd == "convert" else "o.obprog"))] if cmd != "show" else []
    r = run_cli(cmd, str(model), "--input-shape", "x=1,3", "--input-shape", "x=2,3", *out)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[0] == "error: --input-shape gives 'x' twice"


def test_run_random_input_on_a_dynamic_program_uses_its_largest_shapes(tmp_path):
    model = _relu_onnx(tmp_path / "m.onnx")
    prog = tmp_path / "m.obprog"
    r = run_cli("compile", str(model), "--dynamic", "--input-shape", "x=4,3", "-o", str(prog))
    assert r.returncode == 0, r.stderr
    assert "dynamic, any input up to x=4,3" in r.stdout and "DynamicProgram object" not in r.stdout
    r = run_cli("run", str(prog), "--random-input")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("y: float32[4, 3] min 0 ")  # a Relu of standard-normal inputs


def test_profile_of_a_dynamic_program_is_its_largest_shapes(tmp_path):
    model = _relu_onnx(tmp_path / "m.onnx")
    prog = tmp_path / "m.obprog"
    assert run_cli("compile", str(model), "--dynamic", "--input-shape", "x=4,3", "-o", str(prog)).returncode == 0
    r = run_cli("profile", str(prog), "--html", str(tmp_path / "p.html"))
    assert r.returncode == 0, r.stderr
    assert "g (dynamic: its largest shapes) on bm1684" in " ".join(r.stdout.split())
    assert (tmp_path / "p.html").stat().st_size > 0
