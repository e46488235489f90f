"""What ``opbridge validate`` (and every model-reading command) says when ops are unsupported:
one op a line under one ``error:`` line, and a hint that names the real problem when a plugin
was passed (a mapping whose IR op has no ``define_op``, a mapping for another framework or
spelling) instead of asking for the plugin that was just given."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _model(path: Path) -> Path:
    """x -> FooA (com.example) -> FooB (com.example) -> Relu."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("FooA", ["x"], ["a"], name="fa", domain="com.example"),
             helper.make_node("FooB", ["a"], ["b"], name="fb", domain="com.example"),
             helper.make_node("Relu", ["b"], ["y"], name="r")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])])
    onnx.save(helper.make_model(graph, ir_version=8, opset_imports=[
        helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)]), str(path))
    return path


def _validate(tmp_path: Path, plugin: str | None) -> list[str]:
    args = [sys.executable, "-m", "opbridge", "validate", str(_model(tmp_path / "m.onnx"))]
    if plugin is not None:
        (tmp_path / "p.py").write_text(plugin)
        args += ["--plugin", str(tmp_path / "p.py")]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "OPBRIDGE_PLUGIN_PATH": ""})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    return r.stderr.splitlines()


def test_unsupported_ops_one_a_line(tmp_path: Path) -> None:
    lines = _validate(tmp_path, None)
    assert lines[0] == f"error: [onnx] 2 unsupported op types in '{tmp_path / 'm.onnx'}':"
    assert lines[1].startswith("  - com.example::FooA (opset 1): node(s) 'fa'; no mapping registered")
    assert lines[2].startswith("  - com.example::FooB (opset 1): node(s) 'fb'; no mapping registered")
    assert lines[-1].startswith("hint: register mappings in a plugin file")
    assert all(line.startswith("  ") for line in lines[1:-1])  # the list, indented under error:
    assert sum(line.startswith("error:") for line in lines) == 1


NO_DEFINE_OP = '''
import opbridge as ob
for name in ("FooA", "FooB"):
    ob.register_custom_op(name).framework_type(ob.Framework.ONNX).origin_op_type(name)
'''

WRONG_FRAMEWORK = '''
import opbridge as ob
ob.register_custom_op("Relu").framework_type(ob.Framework.CAFFE).origin_op_type("FooA")
ob.register_custom_op("Relu").framework_type(ob.Framework.ONNX).origin_op_type("Foob")
'''


def test_missing_define_op_is_named_not_the_plugin(tmp_path: Path) -> None:
    lines = _validate(tmp_path, NO_DEFINE_OP)
    assert "IR op 'FooA' (target of a register_custom_op mapping) is not defined" in lines[1]
    hint = lines[-1]
    assert hint.startswith("hint: the mapping is there but the IR op it emits is not defined: add "
                           'opbridge.define_op("FooA")')
    assert "(and FooB)" in hint and "--plugin" not in hint


@pytest.mark.parametrize("op, near", [("FooA", "one for caffe 'FooA'"), ("FooB", "one spelled 'Foob'")])
def test_mapping_for_another_framework_or_spelling_is_named(tmp_path: Path, op: str, near: str) -> None:
    lines = _validate(tmp_path, WRONG_FRAMEWORK)
    line = next(x for x in lines if x.startswith(f"  - com.example::{op} "))
    assert f"a mapping exists, but not for this node: {near} ({tmp_path / 'p.py'}:" in line
    assert "if you passed one, it registers none of these" in lines[-1]


@pytest.mark.parametrize("intermediates", [False, True], ids=["outputs", "intermediates"])
def test_onnxruntime_refusing_a_model_is_quoted_by_its_first_line_cut_short(tmp_path: Path,
                                                                             intermediates: bool) -> None:
    """onnxruntime's error (here: a feed of the wrong shape, naming a 400-character input) is
    quoted by its first line, cut to 300 characters, after the model's path."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from opbridge.validate.runners import OriginRunError, run_onnxruntime

    name = "x" * 400
    graph = helper.make_graph([helper.make_node("Relu", [name], ["y"])], "g",
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    feeds = {name: np.zeros(3, np.float32)}
    with pytest.raises(Exception) as ref:  # noqa: B017 - onnxruntime's own type; its text is the reference
        ort.InferenceSession(str(path)).run(None, feeds)
    want = str(ref.value).strip().splitlines()[0]
    assert "invalid dimensions" in want and len(want) > 300
    with pytest.raises(OriginRunError) as err:
        run_onnxruntime(path, feeds, intermediates=intermediates)
    assert err.value.message == f"[onnx] '{path}': onnxruntime cannot run it: {want[:300]}"
