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
