"""Errors carry their context as fields, filled on the way up and rendered once."""

from __future__ import annotations

import pickle

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import opbridge as ob
from opbridge.cli import main
from opbridge.errors import AttrError, MappingError, ModelFormatError, OpbridgeError, ShapeError
from opbridge.mappers import DEFAULT_MAPPINGS, MappingRegistry

F = TensorProto.FLOAT


def test_fields_render_in_the_house_format():
    err = AttrError("must be >= 1", framework="caffe", node="conv1", op_type="Convolution",
                    kind="layer", attribute="group", value=0)
    assert err.message == "[caffe] layer 'conv1' (Convolution) param 'group' = 0: must be >= 1"
    assert err.detail == "must be >= 1" and err.attribute == "group" and err.value == 0
    onnx_err = AttrError("out of range", framework="onnx", node="x", op_type="Conv", attribute="axis")
    assert onnx_err.message == "[onnx] node 'x' (Conv) attribute 'axis': out of range"


def test_add_context_fills_only_unknown_fields_and_renders_them_once():
    err = AttrError("bad", attribute="alpha")
    err.add_context(framework="onnx", node="n", op_type="Elu", opset=17, source="m.onnx")
    err.add_context(framework="caffe", node="other", op_type="X", opset=3)  # a second layer up
    assert str(err) == "[onnx] node 'n' (Elu) attribute 'alpha': bad"
    assert (err.framework, err.node, err.op_type, err.opset, err.source) == ("onnx", "n", "Elu", 17, "m.onnx")


def test_a_located_detail_is_not_given_its_location_again():
    err = ShapeError("[onnx] node 'n' (Relu): already says where", located=True, framework="onnx",
                     node="n", op_type="Relu")
    err.add_context(framework="onnx", node="n", op_type="Relu")
    assert err.message == "[onnx] node 'n' (Relu): already says where" and err.node == "n"


def test_only_the_framework_known():
    assert ShapeError("x", framework="onnx").message == "[onnx] x"
    assert ShapeError("x").message == "x"
    with pytest.raises(TypeError, match="unknown context field"):
        ShapeError("x", nod="typo")


def test_fields_survive_pickling():  # batch jobs send errors between processes
    err = AttrError("bad", hint="fix it", framework="onnx", node="n", op_type="Elu", attribute="alpha")
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.context == err.context


def test_a_file_error_raised_without_a_hint_gets_the_class_default():
    assert ModelFormatError("truncated").hint == ModelFormatError.default_hint
    assert ModelFormatError("truncated", hint="re-export it").hint == "re-export it"
    assert ShapeError("x").hint is None  # no default: the raiser must say what to do


def test_mapping_error_lives_with_the_others():
    from opbridge.mappers.registry import MappingError as OldPath

    assert OldPath is MappingError is ob.MappingError and issubclass(MappingError, (OpbridgeError, ValueError))


# -- errors raised while converting --------------------------------------------------------------
def _model(path, op="Foo", name="n1", opset=17):
    x = helper.make_tensor_value_info("x", F, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", F, None)
    node = helper.make_node(op, ["x"], ["y"], name=name)
    m = helper.make_model(helper.make_graph([node], "m", [x], [y]),
                          opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, path)
    return path


def _w(g):
    return g.constant(np.ones((2, 3, 1, 1), np.float32))


def _raise_g_error(node, g):
    raise g.error("must be >= 1", attr="alpha")


def _raise_bare(node, g):
    raise AttrError("something about alpha is wrong")


def _missing_attr(node, g):
    return g.op("Elu", [g.input(0)], alpha=node.get_attr("alpha"))


def _ir_error_first_op(node, g):  # the IR node is named after the origin node
    return g.op("Conv", [g.input(0), _w(g)], group=0)


def _ir_error_second_op(node, g):  # the IR node is 'n1/Conv'
    return g.op("Conv", [g.op("Relu", [g.input(0)]), _w(g)], group=0)


def _bug(node, g):
    return {}["nope"]


CASES = {
    "g.error": (_raise_g_error, AttrError, "[onnx] node 'n1' (Foo) attribute 'alpha': must be >= 1"),
    "bare": (_raise_bare, AttrError, "[onnx] node 'n1' (Foo): something about alpha is wrong"),
    "get_attr": (_missing_attr, AttrError, "[onnx] node 'n1' (Foo) attribute 'alpha': required but absent"),
    "ir-first-op": (_ir_error_first_op, AttrError, "[onnx] node 'n1' (Conv) param 'group'"),
    "ir-second-op": (_ir_error_second_op, AttrError, "[onnx] node 'n1' (Foo): node 'n1/Conv' (Conv) param 'group'"),
    "bug": (_bug, MappingError, "[onnx] node 'n1' (Foo): the mapping at "),
}


@pytest.mark.parametrize("case", list(CASES))
def test_conversion_errors_name_the_node_once_and_carry_fields(tmp_path, case):
    fn, cls, start = CASES[case]
    reg = MappingRegistry()
    reg.register("onnx", "Foo", fn)
    path = _model(tmp_path / "m.onnx")
    with pytest.raises(cls) as info:
        ob.convert(path, registry=reg)
    err = info.value
    assert err.message.startswith(start), err.message
    assert err.message.count("[onnx]") == 1 and err.message.count("'n1'") == 1, err.message
    assert (err.framework, err.node, err.op_type, err.opset) == ("onnx", "n1", "Foo", 17)
    assert err.source == str(tmp_path / "m.onnx")


def test_caffe_param_error_in_house_format(tmp_path):
    proto = tmp_path / "n.prototxt"
    proto.write_text('name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                     'layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"\n'
                     '  convolution_param { num_output: 4 kernel_size: 3 stride: 0 } }\n')
    with pytest.raises(AttrError) as info:
        ob.convert(proto)
    assert info.value.message == ("[caffe] layer 'conv1' (Convolution) param 'convolution_param.stride' "
                                  "= [0, 0]: must be >= 1")
    assert (info.value.node, info.value.op_type, info.value.framework) == ("conv1", "Convolution", "caffe")


def _if_model(cond_is_input: bool, then_op: str = "Relu") -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    then_g = helper.make_graph([helper.make_node(then_op, ["x"], ["t"], name="inner")], "then", [],
                               [vi("t", F, [1, 3, 4, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", F, [1, 3, 4, 4])])
    node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)
    inputs = [vi("x", F, [1, 3, 4, 4])] + ([vi("c", TensorProto.BOOL, [])] if cond_is_input else [])
    inits = [] if cond_is_input else [helper.make_tensor("c", TensorProto.BOOL, [], [True])]
    graph = helper.make_graph([node], "m", inputs, [vi("y", F, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_error_inside_a_subgraph_names_the_inner_node_once():
    reg = MappingRegistry()
    for e in DEFAULT_MAPPINGS.entries("onnx"):
        reg.register(e.framework, e.key_text, e.fn, since_opset=e.since, defined_at=e.defined_at)
    reg.register("onnx", "Foo", _raise_g_error)
    with pytest.raises(AttrError) as info:
        ob.convert(_if_model(False, then_op="Foo"), registry=reg)
    # the If (the node the model has at top level) first, then the branch's node, once
    assert info.value.message == ("[onnx] node 'branch' (If), in its subgraph 'then': "
                                  "node 'branch/then_branch/inner' (Foo) attribute 'alpha': must be >= 1")


def test_cli_prints_the_message_once_with_its_hint(tmp_path, capsys):
    # a run-time If whose branches give different dtypes
    model = _if_model(True)
    else_g = next(a.g for a in model.graph.node[0].attribute if a.name == "else_branch")
    else_g.node[0].CopyFrom(helper.make_node("Cast", ["x"], ["e"], to=TensorProto.INT32))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main(["convert", str(path), "-o", str(tmp_path / "o.obir")]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0] == ("error: [onnx] node 'branch' (If) param 'else_branch': output 0 is tensor f32 in "
                        "then_branch but tensor i32 in else_branch"), err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("hint: ")), err


# -- the CLI on malformed input of every kind: exit 2, one `error:` line, one `hint:` line ------
@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory):
    """A small model in each form, the same files truncated, and the odd ones out."""
    d = tmp_path_factory.mktemp("bad")
    w = onnx.numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    conv = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                              helper.make_node("Relu", ["c"], ["y"], name="relu")], "m",
                             [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])],
                             [helper.make_tensor_value_info("y", F, None)], [w])
    onnx.save(helper.make_model(conv, opset_imports=[helper.make_opsetid("", 13)]), d / "m.onnx")
    sym = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "s",
                            [helper.make_tensor_value_info("x", F, ["N", 3, "H", "W"])],
                            [helper.make_tensor_value_info("y", F, None)])
    onnx.save(helper.make_model(sym, opset_imports=[helper.make_opsetid("", 13)]), d / "sym.onnx")
    cycle = helper.make_graph([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                               helper.make_node("Relu", ["a"], ["b"], name="n2")], "cyc",
                              [helper.make_tensor_value_info("x", F, [1, 3])],
                              [helper.make_tensor_value_info("b", F, None)])
    (d / "cycle.onnx").write_bytes(helper.make_model(cycle, opset_imports=[helper.make_opsetid("", 13)])
                                   .SerializeToString())
    unsorted = helper.make_graph([helper.make_node("Relu", ["a"], ["y"], name="n2"),
                                  helper.make_node("Neg", ["x"], ["a"], name="n1")], "uns",
                                 [helper.make_tensor_value_info("x", F, [1, 3])],
                                 [helper.make_tensor_value_info("y", F, None)])
    (d / "unsorted.onnx").write_bytes(helper.make_model(unsorted, opset_imports=[helper.make_opsetid("", 13)])
                                      .SerializeToString())
    (d / "net.prototxt").write_text('name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                                    'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" '
                                    'convolution_param { num_output: 4 kernel_size: 3 } }\n')
    assert main(["random-weights", str(d / "net.prototxt"), "-o", str(d / "net.caffemodel")]) == 0
    assert main(["convert", str(d / "m.onnx"), "-o", str(d / "m.obir")]) == 0
    assert main(["compile", str(d / "m.obir"), "-o", str(d / "m.obprog")]) == 0
    for name in ("m.onnx", "m.obir", "m.obprog", "net.caffemodel"):
        data = (d / name).read_bytes()
        (d / f"trunc_{name}").write_bytes(data[: len(data) // 2])
    other = helper.make_graph([helper.make_node("Sigmoid", ["a"], ["b"], name="sig")], "other",
                              [helper.make_tensor_value_info("a", F, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("b", F, None)])
    onnx.save(helper.make_model(other, opset_imports=[helper.make_opsetid("", 13)]), d / "other.onnx")
    (d / "samples").mkdir()
    np.save(d / "samples" / "s0.npy", np.ones((1, 3, 8, 8), np.float32))
    assert main(["calibrate", str(d / "other.onnx"), "--data", str(d / "samples"),
                 "-o", str(d / "other_table.json")]) == 0
    (d / "empty").mkdir()
    (d / "trunc.ts.json").write_text('{"nodes": [')
    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    with safe_open(str(d / "m.obir"), framework="numpy") as f:
        meta = dict(f.metadata(), format_version="x")
    save_file(load_file(str(d / "m.obir")), str(d / "badversion.obir"), metadata=meta)
    (d / "huge.prototxt").write_text((d / "net.prototxt").read_text().replace("dim: 8 dim: 8", "dim: 100000000 dim: 100000"))
    return d


HUGE = "x=1,3,100000000,100000"
CLI_CASES = {
    "truncated-onnx": (["convert", "trunc_m.onnx", "-o", "o.obir"], "is not a valid ONNX model"),
    "truncated-obir": (["show", "trunc_m.obir"], "is not a valid .obir file"),
    "truncated-obprog": (["run", "trunc_m.obprog", "--random-input"], "is not a valid .obprog file"),
    "truncated-caffemodel": (["convert", "net.prototxt", "--weights", "trunc_net.caffemodel", "-o", "o.obir"],
                             "is malformed or truncated"),
    "truncated-ts-json": (["convert", "trunc.ts.json", "-o", "o.obir"], "not valid JSON"),
    "absurd-caffe-shape": (["convert", "huge.prototxt", "-o", "o.obir"], "above the limit"),
    "obir-version-not-a-number": (["show", "badversion.obir"], "format_version 'x' is not a number"),
    "cycle": (["convert", "cycle.onnx", "-o", "o.obir"], "the nodes form a cycle: 'n1' -> 'n2' -> 'n1'"),
    "unsorted": (["convert", "unsorted.onnx", "-o", "o.obir"], "the model's nodes are not in topological order"),
    "absurd-shape": (["compile", "sym.onnx", "--input-shape", HUGE, "-o", "o.obprog"], "above the limit"),
    "unknown-target": (["compile", "m.obir", "--target", "bm9999", "-o", "o.obprog"],
                       "unknown target preset 'bm9999'"),
    "missing-target-json": (["compile", "m.obir", "--target-json", "none.json", "-o", "o.obprog"],
                            "target file 'none.json' cannot be read"),
    "lmem-kib-0": (["compile", "m.obir", "--lmem-kib", "0", "-o", "o.obprog"],
                   "--lmem-kib: '0': give a whole number >= 1"),
    "input-value-unknown": (["convert", "m.onnx", "--input-value", "nosuch=1", "-o", "o.obir"],
                            "names 'nosuch', which is not an input"),
    "calibrate-empty": (["calibrate", "m.onnx", "--data", "empty", "-o", "t.json"], "has no readable samples"),
    "table-of-another-model": (["quantize", "m.onnx", "--table", "other_table.json", "-o", "q.obir"],
                               "(of graph 'other') has no range"),
    "table-not-json": (["quantize", "m.onnx", "--table", "trunc_m.onnx", "-o", "q.obir"], "is not valid JSON"),
    "run-input-missing": (["run", "m.obprog", "--input", "x=none.npy"], "input file 'none.npy' does not exist"),
    "bad-input-shape": (["convert", "m.onnx", "--input-shape", "x=-1,3", "-o", "o.obir"], "NAME=DIMS"),
    "missing-plugin": (["convert", "m.onnx", "--plugin", "none.py", "-o", "o.obir"], "plugin 'none.py' does not exist"),
    "plugin-new-not-py": (["plugin", "new", "Foo", "--framework", "onnx", "-o", "foo.txt"], "must end in .py"),
    "unknown-command": (["frobnicate"], "invalid choice: 'frobnicate'"),
}


@pytest.mark.parametrize("case", list(CLI_CASES))
def test_cli_on_malformed_input_prints_one_error_and_a_hint(bad_inputs, case, capsys, monkeypatch):
    argv, expect = CLI_CASES[case]
    monkeypatch.chdir(bad_inputs)
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), err
    assert expect in lines[0], err


def test_every_error_the_cli_layer_raises_has_a_hint():
    """The CLI prints `hint:` after every error: its own errors (and the plugin loader's, which
    every command runs first) each give one."""
    import ast
    import pathlib

    import opbridge

    root = pathlib.Path(opbridge.__file__).parent
    errors = {name for name, obj in vars(__import__("opbridge.errors", fromlist=["x"])).items()
              if isinstance(obj, type) and issubclass(obj, OpbridgeError)} | {"PluginTemplateError"}
    missing = []
    for path in [*sorted((root / "cli").glob("*.py")), root / "plugins_loader.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                func = node.exc.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if name in errors and not any(k.arg == "hint" for k in node.exc.keywords):
                    missing.append(f"{path.name}:{node.lineno}")
    assert not missing, missing


@pytest.mark.parametrize("err,named,limit,want", [
    (RuntimeError("\n  Expected a Tensor\n  File <code>, line 3\n  ~~~ <--- HERE\n"), False, None,
     "Expected a Tensor"),
    (RuntimeError("Expected a Tensor\nframe #0"), True, None, "RuntimeError: Expected a Tensor"),
    (ValueError(""), False, None, "ValueError"),
    (ValueError("   "), True, None, "ValueError"),
    (RuntimeError("x" * 500 + "\nmore"), False, 300, "x" * 300),
    (RuntimeError("Expected a Tensor\nframe #0"), True, 8, "RuntimeError: Expected"),
    (RuntimeError("short"), False, 300, "short"),
], ids=["multi-line", "named", "empty", "blank-named", "limit", "limit-named", "limit-not-reached"])
def test_first_line_of_a_wrapped_error(err: BaseException, named: bool, limit: int | None, want: str) -> None:
    from opbridge.errors import first_line

    assert first_line(err, named=named, limit=limit) == want
