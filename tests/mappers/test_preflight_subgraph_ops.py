"""An op with no mapping inside a subgraph (an If branch, a Loop or Scan body, nested ones) is
reported once, by the pre-flight check, as an unsupported op type naming the node that holds
it and its branch; the enclosing node is not reported again as a refused case of its own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob

UNKNOWN = "FrobnicateX"  # no mapping in any registry


def _vi(name: str, shape: list[int] | None = None, dtype: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape if shape is not None else [2])


def _branch(name: str, op: str, out: str, node: str) -> onnx.GraphProto:
    return helper.make_graph([helper.make_node(op, ["x"], [out], name=node)], name, [], [_vi(out)])


def _if(name: str, then_op: str, else_op: str, out: str = "y") -> onnx.NodeProto:
    return helper.make_node("If", ["c"], [out], name=name,
                            then_branch=_branch(f"{name}_then", then_op, f"{name}_t", f"{name}_then_node"),
                            else_branch=_branch(f"{name}_else", else_op, f"{name}_e", f"{name}_else_node"))


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], path: Path) -> Path:
    g = helper.make_graph(nodes, "m", inputs, [_vi("y")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _if_model(tmp_path: Path, then_op: str = UNKNOWN) -> Path:
    return _model([_if("if1", then_op, "Neg")], [_vi("c", [], TensorProto.BOOL), _vi("x")], tmp_path / "if.onnx")


def _report(path: Path) -> ob.UnsupportedOpError:
    with pytest.raises(ob.UnsupportedOpError) as err:
        ob.convert(str(path))
    return err.value


def _entries(err: ob.OpbridgeError) -> list[str]:
    return [line for line in err.message.splitlines() if line.startswith("  - ")]


def test_an_unmapped_op_in_a_then_branch_is_one_entry(tmp_path: Path) -> None:
    err = _report(_if_model(tmp_path))
    (entry,) = _entries(err)
    assert entry.startswith(f"  - {UNKNOWN} (opset 17): node(s) 'if1_then_node' (in then_branch 'if1_then' "
                            "of node 'if1' (If))")
    assert "unsupported case" not in err.message
    assert err.message.startswith("[onnx] 1 unsupported op type in ")
    assert "If" not in (err.hint or "")  # the hint is the pre-flight's, not a refused If's


def test_the_branches_without_it_still_convert(tmp_path: Path) -> None:
    """The check is of the op, not of If: the same model with a mapped op converts, and runs
    as onnx.reference does."""
    from onnx.reference import ReferenceEvaluator

    path = _if_model(tmp_path, then_op="Abs")
    g = ob.convert(str(path))
    x = np.array([-1.5, 2.0], np.float32)
    for c in (True, False):
        feeds = {"c": np.array(c), "x": x}
        want = ReferenceEvaluator(str(path)).run(None, feeds)[0]
        np.testing.assert_array_equal(ob.interpret(g, feeds)["y"], want)


def test_nested_if_names_both_enclosing_nodes(tmp_path: Path) -> None:
    inner = _if("inner", UNKNOWN, "Neg", out="inner_y")
    outer_then = helper.make_graph([inner], "outer_then", [], [_vi("inner_y")])
    outer = helper.make_node("If", ["c"], ["y"], name="outer", then_branch=outer_then,
                             else_branch=_branch("outer_else", "Abs", "oe", "outer_else_node"))
    err = _report(_model([outer], [_vi("c", [], TensorProto.BOOL), _vi("x")], tmp_path / "nested.onnx"))
    (entry,) = _entries(err)
    assert ("node(s) 'inner_then_node' (in then_branch 'inner_then' of node 'inner' (If), in then_branch "
            "'outer_then' of node 'outer' (If))") in entry


def _loop_model(tmp_path: Path) -> Path:
    # y = loop body applied trip-count times to x; the body uses the unknown op
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond"),
         helper.make_node(UNKNOWN, ["v_in"], ["v_out"], name="frob_in_body")],
        "loop_body", [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("v_in")],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("v_out")])
    loop = helper.make_node("Loop", ["n", "c", "x"], ["y"], name="loop1", body=body)
    return _model([loop], [_vi("n", [], TensorProto.INT64), _vi("c", [], TensorProto.BOOL), _vi("x")],
                  tmp_path / "loop.onnx")


def _scan_model(tmp_path: Path) -> Path:
    body = helper.make_graph([helper.make_node(UNKNOWN, ["s_in"], ["s_out"], name="frob_in_scan")],
                             "scan_body", [_vi("s_in")], [_vi("s_out")])
    scan = helper.make_node("Scan", ["x"], ["y"], name="scan1", body=body, num_scan_inputs=1)
    return _model([scan], [_vi("x", [3, 2])], tmp_path / "scan.onnx")


@pytest.mark.parametrize("make,where", [
    (_loop_model, "'frob_in_body' (in body 'loop_body' of node 'loop1' (Loop))"),
    (_scan_model, "'frob_in_scan' (in body 'scan_body' of node 'scan1' (Scan))"),
], ids=["Loop", "Scan"])
def test_loop_and_scan_bodies_are_reported_once(make, where: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    err = _report(make(tmp_path))
    (entry,) = _entries(err)
    assert f"  - {UNKNOWN} (opset 17): node(s) {where}" in entry
    assert "unsupported case" not in err.message


def test_cli_prints_one_error_and_one_hint_and_exits_2(tmp_path: Path) -> None:
    path = _if_model(tmp_path)
    done = subprocess.run([sys.executable, "-m", "opbridge", "convert", str(path), "-o", str(tmp_path / "o.obir")],
                          capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith(("error:", "hint:"))] == ["error", "hint"]
    assert sum(UNKNOWN in line for line in lines) == 1  # one entry names the op
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "o.obir").exists()


NO_DEFINE_OP = '''
import opbridge as ob
ob.register_custom_op("FooA").framework_type(ob.Framework.ONNX).origin_op_type("FooA")
'''


def test_a_mapping_whose_ir_op_is_undefined_in_a_branch_is_one_entry(tmp_path: Path) -> None:
    """The other thing the pre-flight collects, a mapping (a plugin's) whose IR op has no
    define_op, is reported once too when it is inside a branch."""
    then_g = helper.make_graph([helper.make_node("FooA", ["x"], ["t"], name="fa", domain="com.example")],
                               "then_g", [], [_vi("t")])
    node = helper.make_node("If", ["c"], ["y"], name="if1", then_branch=then_g,
                            else_branch=_branch("else_g", "Neg", "e", "neg"))
    g = helper.make_graph([node], "m", [_vi("c", [], TensorProto.BOOL), _vi("x")], [_vi("y")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]),
              path)
    (tmp_path / "p.py").write_text(NO_DEFINE_OP)
    # a subprocess: the plugin registers into the process's default registry
    done = subprocess.run([sys.executable, "-m", "opbridge", "convert", str(path), "--plugin", str(tmp_path / "p.py"),
                           "-o", str(tmp_path / "o.obir")], capture_output=True, text=True,
                          env={**os.environ, "OPBRIDGE_PLUGIN_PATH": ""})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: [onnx] 1 unsupported op type in ")
    entries = [line for line in lines if line.startswith("  - ")]
    assert len(entries) == 1, done.stderr
    assert entries[0].startswith("  - IR op 'FooA' (target of a register_custom_op mapping) is not defined; "
                                 "node(s) 'fa' (in then_branch 'then_g' of node 'if1' (If));")
    assert not any("unsupported case" in line for line in lines)
    assert lines[-1].startswith('hint: the mapping is there but the IR op it emits is not defined: add '
                                'opbridge.define_op("FooA")')
