"""docs/custom-ops.md: every ```python snippet runs as it is, in order, each with only its own
imports (a fresh namespace per snippet, one process for all, as a reader pasting them would);
and the page's table of how Caffe parameter blocks arrive in ``src.get_attr`` holds."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest

from opbridge.parsers.caffe import parse_caffe
from tests.conftest import ROOT

DOC = ROOT / "docs" / "custom-ops.md"

RUNNER = textwrap.dedent('''
    import re, sys, traceback
    text = open(sys.argv[1], encoding="utf-8").read()
    for m in re.finditer(r"^```python\\n(.*?)^```", text, re.S | re.M):
        line = text.count("\\n", 0, m.start()) + 2
        try:
            exec(compile(m.group(1), f"custom-ops.md:{line}", "exec"), {"__name__": "__doc__"})
        except BaseException:
            traceback.print_exc()
            sys.exit(f"snippet at custom-ops.md:{line} failed")
    print("ran", len(re.findall(r"^```python$", text, re.M)), "snippets")
''')


def test_snippets_run(tmp_path):
    n = len(re.findall(r"^```python$", DOC.read_text(encoding="utf-8"), re.M))
    assert n >= 6
    r = subprocess.run([sys.executable, "-c", RUNNER, str(DOC)], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == f"ran {n} snippets"


def test_snippets_have_their_imports():
    # a name used as `ob.`/`np.` needs its import in the same snippet
    text = DOC.read_text(encoding="utf-8")
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        code = m.group(1)
        for alias, imp in (("ob.", "import opbridge as ob"), ("np.", "import numpy as np")):
            if alias in code:
                assert imp in code, f"snippet at line {text.count(chr(10), 0, m.start()) + 2} uses {alias}"


LAYER = """
layer {{ name: "data" type: "Input" top: "data" input_param {{ shape {{ dim: 1 dim: 3 }} }} }}
layer {{ name: "l" type: "VendorOp" bottom: "data" top: "out" vendor_param {{ {} }} }}
"""


@pytest.mark.parametrize("text,name,want", [
    ("alpha: 2", "alpha", 2),
    ("alpha: 2.5", "alpha", 2.5),
    ("flag: true", "flag", True),
    ('name: "x"', "name", "x"),
    ("mode: FAST", "mode", "FAST"),
    ("anchor { w: 1 h: 2 }", "anchor", {"w": 1, "h": 2}),
    ("mask: 6 mask: 7", "mask", [6, 7]),
    ("anchor { w: 1 } anchor { w: 2 }", "anchor", [{"w": 1}, {"w": 2}]),
    ("mask: [6]", "mask", [6]),
    ("mask: [6, 7]", "mask", [6, 7]),
    ("mask: []", "mask", []),
    ("mask: 6", "mask", 6),
], ids=["int", "float", "bool", "string", "enum", "message", "repeated", "repeated-message",
        "list-of-one", "list", "empty-list", "repeated-written-once"])
def test_generic_block_values(tmp_path, text, name, want):
    path = tmp_path / "net.prototxt"
    path.write_text(LAYER.format(text))
    got = parse_caffe(path).nodes[0].get_attr(name)
    assert got == want and type(got) is type(want)


@pytest.mark.parametrize("text,want", [
    ("mask: 6", [6]), ("mask: 6 mask: 7", [6, 7]), ("mask: [6]", [6]), ("", ["absent"]),
], ids=["once", "twice", "list-syntax", "absent"])
def test_get_list(tmp_path, text, want):
    path = tmp_path / "net.prototxt"
    path.write_text(LAYER.format(text or "other: 1"))
    assert parse_caffe(path).nodes[0].get_list("mask", ["absent"]) == want


def test_get_list_nested_repeated_fields(tmp_path):
    # CANN's example (seed 003): a repeated message whose own repeated field is written once
    path = tmp_path / "net.prototxt"
    path.write_text(LAYER.format("bias_struct { offset: 1 width: 20 }"))
    node = parse_caffe(path).nodes[0]
    assert node.get_attr("bias_struct") == {"offset": 1, "width": 20}
    assert node.get_list("bias_struct", repeated=["width"]) == [{"offset": 1, "width": [20]}]
    path.write_text(LAYER.format("outer { inner { v: 1 } }"))
    assert parse_caffe(path).nodes[0].get_list("outer", repeated=["inner.v"]) == [{"inner": {"v": [1]}}]
