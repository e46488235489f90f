"""A new user's mistakes on the command line: each is one `error:` line naming what is wrong,
one `hint:` line saying what to do, exit 2, no traceback, and no file written."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

import opbridge as ob
from opbridge.cli import COMMANDS, EXAMPLES, build_parser, main
from opbridge.examples import fire_net_prototxt, write_small_cnn_onnx


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bundled ONNX example as .onnx, .obir and .obprog, the Caffe example's prototxt, an
    empty folder and a folder holding a model."""
    d = tmp_path_factory.mktemp("journey")
    onnx_path = Path(write_small_cnn_onnx(d / "model.onnx"))
    g = ob.convert(str(onnx_path))
    ob.save(g, str(d / "model.obir"))
    ob.compile(g, target="bm1684").save(str(d / "model.obprog"))
    (d / "empty").mkdir()
    (d / "zoo").mkdir()
    write_small_cnn_onnx(d / "zoo" / "net.onnx")
    (d / "net.caffemodel").write_bytes(b"")
    return {"dir": d, "onnx": onnx_path, "obir": d / "model.obir", "obprog": d / "model.obprog",
            "prototxt": fire_net_prototxt(), "empty": d / "empty", "zoo": d / "zoo",
            "caffemodel": d / "net.caffemodel"}


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, str]:
    """Run the CLI, check the one-error-one-hint contract, return the error and hint lines."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: "), err
    assert lines[-1].startswith("hint: "), err
    return lines[0], lines[-1]


# -- the model argument -------------------------------------------------------------------
@pytest.mark.parametrize("command", ["convert", "show", "compile", "validate"])
def test_a_folder_as_the_model_names_it_and_a_model_inside(files, capsys, command):
    argv = [command, str(files["zoo"])] + (["-o", str(files["dir"] / "x.obir")] if command == "convert"
                                           else ["-o", str(files["dir"] / "x.obprog")]
                                           if command == "compile" else [])
    error, hint = _fails(capsys, argv)
    assert error == f"error: '{files['zoo']}' is a folder; opbridge {command} reads one model file"
    assert f"give a model file in it, e.g. {files['zoo'] / 'net.onnx'}" in hint


def test_an_empty_folder_as_the_model_lists_the_endings(files, capsys):
    error, hint = _fails(capsys, ["show", str(files["empty"])])
    assert "is a folder" in error and hint.startswith("hint: give a model file (")
    assert all(e in hint for e in (".onnx", ".prototxt", ".ts.json", ".obir"))


def test_a_caffemodel_as_the_model_says_to_give_the_prototxt(files, capsys):
    error, hint = _fails(capsys, ["convert", str(files["caffemodel"]), "-o", str(files["dir"] / "x.obir")])
    assert f"'{files['caffemodel']}' is not a model file" in error
    assert hint == (f"hint: it is Caffe weights: give the net's deploy .prototxt as MODEL, with --weights "
                    f"{files['caffemodel']}")


def test_a_prototxt_without_weights_says_how_to_make_some(files, capsys, tmp_path):
    error, hint = _fails(capsys, ["convert", str(files["prototxt"]), "-o", str(tmp_path / "n.obir")])
    assert error.startswith("error: [caffe] layer 'conv1' (Convolution): the layer needs blob 0")
    assert error.endswith("and no caffemodel was given")
    assert "--weights" in hint and "opbridge random-weights" in hint


def test_a_caffemodel_without_the_layer_says_it_lacks_the_blob(files, capsys, tmp_path):
    """A caffemodel was given but has nothing for this layer (renamed in the prototxt)."""
    weights = tmp_path / "n.caffemodel"
    assert main(["random-weights", str(files["prototxt"]), "-o", str(weights)]) == 0
    renamed = tmp_path / "renamed.prototxt"
    renamed.write_text(files["prototxt"].read_text().replace('"conv1"', '"conv1b"'))
    capsys.readouterr()
    error, _ = _fails(capsys, ["convert", str(renamed), "--weights", str(weights), "-o", str(tmp_path / "n.obir")])
    assert "the caffemodel has no blob 0" in error and "(it has none)" in error


def test_a_typo_in_an_input_shape_name_suggests_the_input(files, capsys, tmp_path):
    error, hint = _fails(capsys, ["convert", str(files["onnx"]), "--input-shape", "imgae=1,3,16,16",
                                  "-o", str(tmp_path / "x.obir")])
    assert "--input-shape" in error and "'imgae'" in error
    assert hint == "hint: did you mean 'image'? the model's inputs are: image"
    assert not (tmp_path / "x.obir").exists()


@pytest.mark.parametrize("command", ["compile", "validate"])
def test_an_unknown_target_lists_the_presets(files, capsys, tmp_path, command):
    argv = [command, str(files["obir"]), "--target", "bm1864"]
    argv += ["-o", str(tmp_path / "x.obprog")] if command == "compile" else []
    error, hint = _fails(capsys, argv)
    assert "'bm1864'" in error and "bm1684" in hint and "bm1684x" in hint


# -- outputs --------------------------------------------------------------------------------
def _output_cases(files: dict[str, Path], out: str) -> dict[str, list[str]]:
    """Each command that writes a file, with ``out`` where it writes."""
    return {
        "convert": ["convert", str(files["onnx"]), "-o", out + ".obir"],
        "compile": ["compile", str(files["obir"]), "-o", out + ".obprog"],
        "run": ["run", str(files["obprog"]), "--random-input", "-o", out + ".npz"],
        "profile": ["profile", str(files["obprog"]), "--trace", out + ".json"],
        "validate --report": ["validate", str(files["onnx"]), "--no-simulator", "--report", out + ".json"],
        "validate --html": ["validate", str(files["onnx"]), "--no-simulator", "--html", out + ".html"],
        "random-weights": ["random-weights", str(files["prototxt"]), "-o", out + ".caffemodel"],
    }


@pytest.mark.parametrize("case", list(_output_cases({k: Path(k) for k in ("onnx", "obir", "obprog",
                                                                         "prototxt")}, "x")))
def test_an_output_in_a_missing_folder_is_refused_before_any_work(files, capsys, tmp_path, case):
    out = str(tmp_path / "no" / "such" / "out")
    argv = _output_cases(files, out)[case]
    error, hint = _fails(capsys, argv)
    assert f"folder '{tmp_path / 'no' / 'such'}' does not exist" in error
    assert hint == f"hint: create it first (mkdir -p {tmp_path / 'no' / 'such'}), or write somewhere else"


@pytest.mark.parametrize("argv,ending,hint", [
    (["convert", "{onnx}", "-o", "{tmp}/x.onnx"], ".obir", "{tmp}/x.obir"),
    (["quantize", "{onnx}", "--table", "t.json", "-o", "{tmp}/x.onnx"], ".obir", "{tmp}/x.obir"),
], ids=["convert-to-.onnx", "quantize-to-.onnx"])
def test_a_graph_named_as_another_kind_is_refused(files, capsys, tmp_path, argv, ending, hint):
    """A .obir named x.onnx would be read back as ONNX: graphs are told apart by their endings."""
    argv = [a.format(tmp=tmp_path, **{k: str(v) for k, v in files.items()}) for a in argv]
    error, hint_line = _fails(capsys, argv)
    assert f"'{argv[-1]}' does not end in {ending}" in error
    assert hint_line == f"hint: name it {hint.format(tmp=tmp_path)}"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["x.obir", "x.onnx", "x.prototxt", "x.ts.json"])
def test_a_program_named_like_a_model_is_refused(files, capsys, tmp_path, name):
    """load_program reads a program of any name; only a model's ending would make it read back
    as a model."""
    out = tmp_path / name
    error, hint = _fails(capsys, ["compile", str(files["obir"]), "-o", str(out)])
    assert error.startswith(f"error: -o '{out}' ends in .{name.split('.', 1)[1]}: opbridge would read it back")
    assert hint == f"hint: name it {tmp_path / 'x.obprog'}"
    assert list(tmp_path.iterdir()) == []


def test_a_program_of_any_other_name_compiles_and_runs(files, tmp_path, capsys):
    """compile -o m.bin, then run m.bin: a program need not end in .obprog."""
    import numpy as np

    prog = tmp_path / "m.bin"
    assert main(["compile", str(files["onnx"]), "-o", str(prog)]) == 0
    assert main(["run", str(prog), "--random-input", "-o", str(tmp_path / "outs")]) == 0
    assert f"wrote {tmp_path / 'outs.npz'}" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "outs.npz"]
    np.testing.assert_allclose(np.load(tmp_path / "outs.npz")["prob"], _onnxruntime(files, _random_image()),
                               rtol=1e-4, atol=1e-6)


def _onnxruntime(files: dict[str, Path], feeds: dict) -> Any:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(files["onnx"]), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def _random_image() -> dict:
    """What run --random-input --seed 0 feeds the example (numpy's generator, written out)."""
    import numpy as np

    return {"image": np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)}


def test_validate_debug_takes_any_name(files, tmp_path, capsys):
    """np.savez adds .npz to a name without it, as it did before."""
    import numpy as np

    assert main(["validate", str(files["onnx"]), "--no-simulator", "--debug", str(tmp_path / "dump")]) == 0
    with np.load(tmp_path / "dump.npz") as dump:
        assert dump.files
    note = capsys.readouterr().out
    assert str(tmp_path / "dump.npz") in note  # the note names the file written


def test_run_into_a_folder_is_refused(files, tmp_path, capsys):
    """-o naming a folder (with or without a trailing slash) is refused as typed, not written
    as a hidden res/.npz or beside it as res.npz."""
    (tmp_path / "res").mkdir()
    for out in (str(tmp_path / "res"), str(tmp_path / "res") + "/"):
        assert main(["run", str(files["obprog"]), "--random-input", "-o", out]) == 2
        assert "is a folder" in capsys.readouterr().err
    assert not (tmp_path / "res" / ".npz").exists() and not (tmp_path / "res.npz").exists()


def test_an_output_that_is_a_folder_is_refused(files, capsys):
    error, hint = _fails(capsys, ["convert", str(files["onnx"]), "-o", str(files["empty"])])
    assert f"-o '{files['empty']}' is a folder" in error
    assert f"-o {files['empty'] / 'out.obir'}" in hint


def test_an_os_error_gets_a_hint_too(files, capsys, tmp_path, monkeypatch):
    """An error the system raises while writing (here the folder removed after the early check
    of -o, as by another process) still ends with a hint."""
    import errno

    import numpy as np

    from opbridge.quant.table import CalibrationTable

    def folder_gone(self, path):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))

    monkeypatch.setattr(CalibrationTable, "save", folder_gone)
    data = tmp_path / "calib"
    data.mkdir()
    np.save(data / "a.npy", np.zeros((1, 3, 16, 16), np.float32))
    error, hint = _fails(capsys, ["calibrate", str(files["onnx"]), "--data", str(data),
                                  "-o", str(tmp_path / "t.json")])
    assert "No such file or directory" in error
    assert hint == "hint: check the path: the file, and every folder it names, must exist"


# -- run ----------------------------------------------------------------------------------------
def test_run_without_inputs_names_the_inputs_and_random_input(files, capsys):
    error, hint = _fails(capsys, ["run", str(files["obprog"])])
    assert "needs its inputs" in error and "image f32[1, 3, 16, 16]" in error
    assert hint == f"hint: opbridge run {files['obprog']} --random-input runs it on random data"


# -- --help ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [*COMMANDS, "plugin new"])
def test_every_help_ends_with_examples_that_parse(command, capsys):
    assert EXAMPLES.get(command), f"'opbridge {command} --help' has no examples"
    for example in EXAMPLES[command]:
        argv = shlex.split(example)
        assert argv[1:1 + len(command.split())] == command.split(), example
        args = build_parser().parse_args(argv[1:])  # exits 2 on an unknown option
        assert args.command == command.split()[0]
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "\nexamples:\n" in out
    for example in EXAMPLES[command]:
        assert f"  {example}\n" in out  # kept on its own line, not wrapped into the text


# -- Ctrl-C -----------------------------------------------------------------------------------------
def _interrupt(*args, **kwargs):
    """A writer that stops half-way, as at Ctrl-C: whatever it was given, half a file is in it."""
    f = args[0]
    if hasattr(f, "write"):
        f.write(b"half a file")
    elif isinstance(f, (str, Path)):
        Path(f).write_bytes(b"half a file")
    raise KeyboardInterrupt


@pytest.mark.parametrize("case", ["run", "random-weights"])
def test_ctrl_c_while_writing_keeps_the_old_output(files, capsys, tmp_path, monkeypatch, case):
    """Interrupted mid-write, the command exits 130 and the file there before is still whole,
    with no temporary file left beside it."""
    import numpy as np

    from opbridge.parsers import caffe_weights

    out = tmp_path / ("out.npz" if case == "run" else "net.caffemodel")
    argv = (["run", str(files["obprog"]), "--random-input", "-o", str(out)] if case == "run" else
            ["random-weights", str(files["prototxt"]), "-o", str(out)])
    assert main(argv) == 0
    before = out.read_bytes()
    if case == "run":
        monkeypatch.setattr(np, "savez", _interrupt)
    else:
        monkeypatch.setattr(caffe_weights, "len_field", _interrupt)
    assert main(argv) == 130
    assert "interrupted" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


# -- demo -----------------------------------------------------------------------------------------
def test_demo_leaves_every_file_its_next_commands_take(tmp_path, capsys):
    """After the demo a user can go on with its files: the bundled prototxt is copied beside its
    weights, and each command the demo suggests parses and names files that exist."""
    out = tmp_path / "demo"
    assert main(["demo", "--out-dir", str(out)]) == 0
    assert (out / "fire_net.prototxt").read_bytes() == fire_net_prototxt().read_bytes()
    text = capsys.readouterr().out
    nxt = text[text.index("next, on these files:"):].splitlines()[1:4]
    assert len(nxt) == 3 and all(line.startswith("  opbridge ") for line in nxt)
    for line in nxt:
        argv = shlex.split(line)[1:]
        args = build_parser().parse_args(argv)
        named = [a for a in argv if a.startswith(str(out))]
        assert named and all(Path(a).is_file() for a in named), line
        assert args.command in ("show", "profile", "validate")


def test_run_takes_a_lone_npy_for_a_one_input_program(files, tmp_path):
    """As validate does: FILE.npy without NAME= feeds the only input; the result is onnxruntime's."""
    import numpy as np
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(files["obprog"]), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "o.npz")]) == 0
    want = ort.InferenceSession(str(files["onnx"]), providers=["CPUExecutionProvider"]).run(None, {"image": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")["prob"], want, rtol=1e-4, atol=1e-6)


def test_run_names_the_input_in_the_hint_of_a_bad_input_spec(files, capsys):
    error, hint = _fails(capsys, ["run", str(files["obprog"]), "--input", "=x.npy"])
    assert "--input '=x.npy'" in error and hint == "hint: one --input per graph input, e.g. --input image=x.npy"


# -- typos ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv,error,hint", [
    (["conver", "m.onnx"], "invalid choice: 'conver'", "did you mean 'convert'? 'opbridge --help'"),
    (["run", "{obprog}", "--random-inputs"], "error: opbridge run: unrecognized arguments: --random-inputs",
     "did you mean '--random-input'? 'opbridge run --help'"),
    (["compile", "{obir}", "-o", "x.obprog", "--taget", "bm1684"], "unrecognized arguments: --taget bm1684",
     "did you mean '--target'? 'opbridge compile --help'"),
    (["plugin", "neww", "Foo"], "invalid choice: 'neww'", "did you mean 'new'? 'opbridge plugin --help'"),
    (["validate", "{onnx}", "extra.onnx"], "error: opbridge validate: unrecognized arguments: extra.onnx",
     "'opbridge validate --help' lists the arguments and options"),
], ids=["command", "run-option", "compile-option", "plugin-subcommand", "extra-argument"])
def test_a_typo_names_the_command_whose_help_to_read_and_the_closest_word(files, capsys, argv, error, hint):
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and error in lines[0]
    assert lines[1] == f"hint: {hint}" or lines[1].startswith(f"hint: {hint}")


def test_batch_with_a_model_that_fails_ends_with_an_error_and_a_hint(files, capsys, tmp_path):
    missing = str(tmp_path / "nothere.onnx")
    out = str(tmp_path / "out")
    assert main(["batch", "convert", missing, str(files["onnx"]), "-o", out, "--jobs", "1"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-2].startswith(f"error: 1 of 2 models could not be converted (first: '{missing}': ")
    assert lines[-1] == (f"hint: each model's error is in the table and in {out}/summary.json; run one "
                         "alone ('opbridge convert MODEL') for its hint")


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600)])
def test_written_files_get_the_mode_of_the_users_umask(files, tmp_path, umask, mode):
    """As any file a user writes: a .obir and a .obprog are not private unless the umask says so."""
    import os
    import stat

    old = os.umask(umask)
    try:
        assert main(["convert", str(files["onnx"]), "-o", str(tmp_path / "m.obir")]) == 0
        assert main(["compile", str(tmp_path / "m.obir"), "-o", str(tmp_path / "m.obprog")]) == 0
    finally:
        os.umask(old)
    for name in ("m.obir", "m.obprog"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name


def test_a_pt_file_as_the_model_says_how_to_export_it(files, capsys, tmp_path):
    pt = tmp_path / "m.pt"
    pt.write_bytes(b"")
    error, hint = _fails(capsys, ["show", str(pt)])
    assert f"'{pt}' is not a model file" in error
    assert f"opbridge export-torchscript {pt} --input-shape x=1,3,224,224 -o model.ts.json" in hint


def test_export_torchscript_of_an_onnx_model_says_to_convert_it(files, capsys, tmp_path):
    error, hint = _fails(capsys, ["export-torchscript", str(files["onnx"]), "--input-shape", "x=1,3,8,8",
                                  "-o", str(tmp_path / "m.ts.json")])
    assert f"'{files['onnx']}' is already a model file opbridge reads" in error
    assert hint == f"hint: convert it directly: opbridge convert {files['onnx']} -o OUT.obir"


@pytest.mark.parametrize("argv,option,floor", [
    (["validate", "{onnx}", "--seed", "-1"], "--seed", 0),
    (["run", "{obprog}", "--random-input", "--seed", "-3"], "--seed", 0),
    (["demo", "--seed", "-1"], "--seed", 0),
    (["show", "{obir}", "--max-nodes", "-1"], "--max-nodes", 0),
    (["validate", "{onnx}", "--max-rows", "x"], "--max-rows", 0),
    (["batch", "convert", "{onnx}", "--jobs", "0"], "--jobs", 1),
], ids=["validate-seed", "run-seed", "demo-seed", "show-max-nodes", "validate-max-rows", "batch-jobs"])
def test_a_number_out_of_range_is_a_usage_error_not_an_internal_one(files, capsys, argv, option, floor):
    """A negative seed reached numpy, which refused it as an internal error (exit 3)."""
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2
    assert f"argument {option}: '{argv[argv.index(option) + 1]}': give a whole number >= {floor}" in lines[0]
    assert lines[1].startswith("hint: ") and f"'opbridge {argv[0]} --help'" in lines[1]


def test_output_cut_short_by_a_closed_pipe_is_no_failure(files, monkeypatch):
    """`opbridge profile P | head -1`: rich meets the closed pipe by exiting 1, which reads as "a
    validation did not pass"; the CLI exits 0 as for any output its reader stopped reading."""
    import io
    import os
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has gone: every write now fails with EPIPE
    out = io.TextIOWrapper(os.fdopen(write_end, "wb"), write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    try:
        assert main(["profile", str(files["obprog"])]) == 0
    finally:
        monkeypatch.undo()
        try:
            out.close()
        except OSError:
            pass


def test_every_option_of_every_command_has_help():
    import argparse

    missing = []

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, sub_parser in action.choices.items():
                    walk(sub_parser, f"{name} {sub}")
            elif not action.help and action.dest != "help":
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "opbridge")
    assert missing == []


def test_a_truncated_obir_names_the_file_and_the_tensor_once(files, capsys, tmp_path):
    """As a copy cut short leaves it: the error says which tensor no longer fits."""
    data = files["obir"].read_bytes()
    cut = tmp_path / "cut.obir"
    cut.write_bytes(data[: len(data) - 300])
    error, hint = _fails(capsys, ["show", str(cut)])
    assert error.count(f"'{cut}'") == 1 and "cannot be read" in error
    tensor = error.split("tensor '")[1].split("'")[0]
    assert error.count(f"tensor '{tensor}'") == 1
    assert "write it again" in hint


def test_a_typo_in_an_input_value_name_suggests_the_input(files, capsys, tmp_path):
    error, hint = _fails(capsys, ["convert", str(files["onnx"]), "--input-value", "imge=3",
                                  "-o", str(tmp_path / "x.obir")])
    assert "--input-value" in error and "'imge'" in error
    assert hint == "hint: did you mean 'image'? the model's inputs are: image"


@pytest.mark.parametrize("command", ["validate", "convert", "show"])
def test_a_program_where_a_model_is_wanted_says_which_commands_read_it(files, capsys, tmp_path, command):
    argv = [command, str(files["obprog"])] + (["-o", str(tmp_path / "x.obir")] if command == "convert" else [])
    error, hint = _fails(capsys, argv)
    assert error == (f"error: '{files['obprog']}' is a compiled program; {command} reads a graph (.obir) or "
                     "a model file (.onnx, .prototxt, .ts.json)")
    assert "'opbridge profile' and 'opbridge run' read programs" in hint


@pytest.mark.parametrize("argv,error", [([], "error: opbridge: no COMMAND given"),
                                        (["plugin"], "error: opbridge plugin: no SUBCOMMAND given")],
                         ids=["opbridge", "opbridge-plugin"])
def test_no_command_shows_the_help_then_an_error_and_a_hint(capsys, argv, error):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: opbridge")
    lines = captured.err.strip().splitlines()
    assert lines[0] == error and lines[1].startswith("hint: 'opbridge ") and len(lines) == 2
