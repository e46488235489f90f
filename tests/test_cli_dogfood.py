"""What a new user met walking through the README and the guides: Ctrl-C before a command
starts, a typo in a required option, Python's two-line warnings, a server that said nothing
(and a traceback for a busy port), and errors whose reason hid behind torch's trace."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge import cli
from opbridge.cli import main
from opbridge.examples import write_small_cnn_onnx


def _one_error(err: str) -> tuple[str, str]:
    """The ``error:`` and ``hint:`` lines of a refusal, checked to be the only two lines."""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
    assert "Traceback" not in err
    return lines[0], lines[1]


@pytest.fixture(scope="module")
def onnx_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(write_small_cnn_onnx(tmp_path_factory.mktemp("dogfood") / "model.onnx"))


# -- Ctrl-C --------------------------------------------------------------------------------------
def test_ctrl_c_while_the_parser_is_built_exits_130_without_traceback(monkeypatch, capsys):
    """The command modules take a moment to import: an interrupt then is as clean as later."""

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["ops"]) == 130
    assert capsys.readouterr().err == "interrupted\n"


# -- a typo'd required option ----------------------------------------------------------------------
@pytest.mark.parametrize("typo", ["--outptu", "--ouput=x.obir"])
def test_typo_of_a_required_option_gets_did_you_mean(onnx_model, capsys, typo):
    """argparse reports the required -o missing before it looks at the unknown word: the hint
    names the option the typo meant."""
    argv = ["convert", str(onnx_model), typo] + ([] if "=" in typo else ["x.obir"])
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert "required: -o/--output" in error
    assert f"'{typo.partition('=')[0]}' is not an option: did you mean '--output'?" in hint


def test_an_abbreviated_option_is_not_called_a_typo(onnx_model, tmp_path, capsys):
    """argparse takes '--out' for '--output': when another error (the model missing) is
    reported, its hint must not call '--out' 'not an option'."""
    with pytest.raises(SystemExit) as exit_:
        main(["convert", "--out", str(tmp_path / "x.obir")])
    assert exit_.value.code == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert "model" in error and "not an option" not in hint


def test_missing_required_option_without_typo_has_no_guess(onnx_model, capsys):
    with pytest.raises(SystemExit):
        main(["convert", str(onnx_model)])
    _, hint = _one_error(capsys.readouterr().err)
    assert "did you mean" not in hint


# -- warnings --------------------------------------------------------------------------------------
def test_a_warning_is_one_warning_line(tmp_path):
    """A typo'd field of a Caffe layer warns: one ``warning:`` line, not Python's file:line:
    UserWarning line followed by a line of opbridge's source."""
    proto = tmp_path / "net.prototxt"
    proto.write_text('name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n'
                     'layer { name: "r" type: "ReLU" bottom: "data" top: "y" relu_param { negative_slop: 0.1 } }\n')
    r = subprocess.run([sys.executable, "-m", "opbridge", "convert", str(proto), "-o", str(tmp_path / "n.obir")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: [caffe]") and "negative_slop" in lines[0], lines


# -- serve -----------------------------------------------------------------------------------------
def test_serve_says_where_it_listens_and_that_it_stopped(tmp_path, monkeypatch, capsys):
    uvicorn = pytest.importorskip("uvicorn", reason="the 'serve' extra (uvicorn) is not installed")
    pytest.importorskip("starlette", reason="the 'serve' extra (starlette) is not installed")
    seen: list[int] = []

    def run_then_ctrl_c(self, sockets=None):
        seen.append(sockets[0].getsockname()[1])
        raise KeyboardInterrupt

    monkeypatch.setattr(uvicorn.Server, "run", run_then_ctrl_c)
    assert main(["serve", "--data", str(tmp_path / "jobs"), "--port", "0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"serving http://127.0.0.1:{seen[0]}/ ") and "Ctrl-C" in out[0]
    assert out[-1] == "stopped"


def test_serve_on_a_busy_port_is_a_user_error(tmp_path, capsys):
    pytest.importorskip("uvicorn", reason="the 'serve' extra (uvicorn) is not installed")
    pytest.importorskip("starlette", reason="the 'serve' extra (starlette) is not installed")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--data", str(tmp_path / "jobs"), "--port", str(port)]) == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert f"cannot listen on 127.0.0.1:{port}" in error and "--port" in hint


def test_serve_port_out_of_range_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--data", str(tmp_path / "jobs"), "--port", "99999"])
    assert exit_.value.code == 2
    error, _ = _one_error(capsys.readouterr().err)
    assert "0 to 65535" in error


# -- export-torchscript ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def traced_conv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch = pytest.importorskip("torch", reason="torch (the 'torch' extra) is not installed")
    path = tmp_path_factory.mktemp("ts") / "conv.pt"
    module = torch.nn.Conv2d(3, 4, 3).eval()
    torch.jit.save(torch.jit.trace(module, torch.zeros(1, 3, 8, 8)), str(path))
    return path


def test_export_torchscript_error_gives_torchs_reason(traced_conv, tmp_path, capsys):
    """A traced module run on a wrong-rank example fails inside the TorchScript interpreter,
    whose message starts with a generic line and ends with the reason."""
    argv = ["export-torchscript", str(traced_conv), "--input-shape", "x=1,3,8", "-o", str(tmp_path / "c.ts.json")]
    assert main(argv) == 2
    error, _ = _one_error(capsys.readouterr().err)
    assert "The following operation failed" not in error
    assert "[1, 3, 8]" in error  # torch names the shape it got


def test_export_torchscript_names_both_files_and_the_next_step(traced_conv, tmp_path, capsys):
    out = tmp_path / "conv.ts.json"
    assert main(["export-torchscript", str(traced_conv), "--input-shape", "x=1,3,8,8", "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert str(out.with_name("conv.ts.safetensors")) in lines[0]
    assert lines[1].startswith(f"next: opbridge convert {out} -o conv.obir")


# -- validate --quantize on random inputs ------------------------------------------------------------
def test_quantized_validation_failing_on_random_inputs_says_so(onnx_model, tmp_path, capsys):
    """Random N(0, 1) inputs against a table calibrated on [0, 1) data: the verdict comes with
    the reason to suspect the inputs, and what to give instead."""
    rng = np.random.default_rng(0)
    g = ob.convert(str(onnx_model))
    (name,) = [v.name for v in g.inputs]
    shape = tuple(int(d) for d in g.inputs[0].shape)
    table = ob.calibrate(g, [{name: rng.random(shape, dtype=np.float32)} for _ in range(2)])
    table.save(str(tmp_path / "t.json"))
    argv = ["validate", str(onnx_model), "--quantize", str(tmp_path / "t.json"), "--tolerance", "0.999999,0.999999"]
    assert main(argv) == 1
    notes = [ln for ln in capsys.readouterr().out.splitlines() if "were random values" in ln]
    assert len(notes) == 1 and f"input(s) {name} " in notes[0] and "--input NAME=FILE.npy" in notes[0]


@pytest.fixture(scope="module")
def calibrated(onnx_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    g = ob.convert(str(onnx_model))
    rng = np.random.default_rng(1)
    feeds = [{v.name: rng.random(tuple(int(d) for d in v.shape), dtype=np.float32) for v in g.inputs}]
    path = tmp_path_factory.mktemp("table") / "t.json"
    ob.calibrate(g, feeds).save(str(path))
    return path


@pytest.mark.parametrize("dtype", ["f16", "bf16", None])
def test_validate_quantize_refuses_a_graph_that_is_not_int8(onnx_model, tmp_path, capsys, dtype):
    """An f16/bf16 .obir (or the float one) given to --quantize failed every row on its dtype
    (or passed as "0 int8 layers"): it is refused, naming the file and what to give."""
    g = ob.convert(str(onnx_model))
    path = tmp_path / "g.obir"
    ob.save(ob.quantize(g, None, dtype=dtype) if dtype else g, str(path))
    assert main(["validate", str(onnx_model), "--quantize", str(path)]) == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert f"'{path}' is {f'a {dtype}' if dtype else 'not a quantized'} graph" in error
    assert "opbridge quantize --table" in hint


@pytest.mark.parametrize("extra", [["--table", "T"], ["--mixed-precision", "auto"], ["--bias-correction"]])
def test_quantize_f16_refuses_int8_options(onnx_model, calibrated, tmp_path, capsys, extra):
    """--dtype f16 with a table (or another int8 option) ignored it without a word."""
    extra = [str(calibrated) if a == "T" else a for a in extra]
    argv = ["quantize", str(onnx_model), "--dtype", "f16", *extra, "-o", str(tmp_path / "h.obir")]
    assert main(argv) == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert f"({extra[0]})" in error and "int8 only" in error and "--dtype int8" in hint
    assert not (tmp_path / "h.obir").exists()


# -- OPBRIDGE_PLUGIN_PATH --------------------------------------------------------------------------
def test_a_missing_plugin_from_the_environment_says_so(onnx_model, tmp_path, monkeypatch, capsys):
    """No --plugin given: an error about a plugin must say it came from OPBRIDGE_PLUGIN_PATH."""
    monkeypatch.setenv("OPBRIDGE_PLUGIN_PATH", str(tmp_path / "gone"))
    assert main(["convert", str(onnx_model), "-o", str(tmp_path / "m.obir")]) == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert "(from OPBRIDGE_PLUGIN_PATH)" in error and "OPBRIDGE_PLUGIN_PATH" in hint


# -- bf16 tensors are compared as floats ---------------------------------------------------------
def test_bf16_tensors_are_compared_by_value_not_bit_for_bit():
    """bf16 (ml_dtypes', numpy kind 'V') fell to "must be equal": a bf16 graph on bm1684x failed
    validation on differences of one rounding, against its documented 0.99, 0.90 floors."""
    from opbridge.ir.types import to_numpy_dtype
    from opbridge.validate.compare import compare

    bf16 = to_numpy_dtype("bf16")
    x = np.random.default_rng(0).standard_normal(1000).astype(np.float32)
    ref = x.astype(bf16)
    one_rounding = (x * np.float32(1 + 2**-8)).astype(bf16)  # bf16 keeps 8 significant bits
    assert (ref != one_rounding).any()
    near = compare(ref, one_rounding)
    assert near.passed and near.status in ("close", "similar") and near.ref_dtype == "bf16"
    far = compare(ref, (-x).astype(bf16))
    assert not far.passed and far.reason.startswith("values: cosine -1.0")


# -- outputs checked before the work --------------------------------------------------------------
@pytest.mark.parametrize("out, words", [
    ("FOLDER", ("is a folder", "table.json")),
    ("missing/t.json", ("folder", "does not exist")),
    ("t.obir", ("ends in .obir", "t.json")),
])
def test_calibrate_checks_its_output_before_calibrating(onnx_model, tmp_path, capsys, monkeypatch, out, words):
    """calibrate ran first and then failed on 'Is a directory: OUT.tmp' (or wrote a JSON table
    into t.obir, which every later command reads as a graph)."""
    from opbridge import quant

    def not_reached(*args, **kwargs):
        raise AssertionError("calibrated before checking -o")

    monkeypatch.setattr(quant, "calibrate", not_reached)
    target = tmp_path if out == "FOLDER" else tmp_path / out
    assert main(["calibrate", str(onnx_model), "--data", str(tmp_path), "-o", str(target)]) == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert words[0] in error and words[1] in error + hint


@pytest.mark.parametrize("argv, example", [
    (["run", "PROG", "--random-input", "-o", "DIR"], "out.npz"),
    (["profile", "PROG", "--trace", "DIR"], "trace.json"),
    (["validate", "ONNX", "--report", "DIR"], "report.json"),
])
def test_a_folder_given_for_a_file_gets_a_file_name_with_its_ending(onnx_model, tmp_path, capsys, argv, example):
    prog = tmp_path / "m.obprog"
    ob.compile(ob.convert(str(onnx_model)), target="bm1684").save(str(prog))
    subst = {"PROG": str(prog), "ONNX": str(onnx_model), "DIR": str(tmp_path)}
    assert main([subst.get(a, a) for a in argv]) == 2
    _, hint = _one_error(capsys.readouterr().err)
    assert hint.startswith(f"hint: give a file name, e.g. {argv[-2]} {tmp_path / example}")


@pytest.mark.parametrize("argv, usage", [(["help", "convert"], "usage: opbridge convert "),
                                         (["help", "plugin", "new"], "usage: opbridge plugin new "),
                                         (["help"], "usage: opbridge ")])
def test_help_command_shows_the_commands_help(capsys, argv, usage):
    """'opbridge help convert' (git's and pip's form) was an invalid choice 'help'."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(usage)


# -- show a deploy prototxt alone ------------------------------------------------------------------
def test_show_lists_a_prototxt_without_weights(tmp_path, capsys):
    """'opbridge show deploy.prototxt' failed on the first conv's missing blob: a listing of the
    structure now uses random blobs and says so."""
    proto = tmp_path / "deploy.prototxt"
    proto.write_text('name: "n"\ninput: "data"\ninput_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
                     'layer { name: "conv" type: "Convolution" bottom: "data" top: "c" '
                     'convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 } }\n')
    assert main(["show", str(proto)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# no --weights: the blobs are random")
    # (8 + 2*1 - 3) // 2 + 1 = 4: Caffe's convolution output size
    assert "%c: f32[1,4,4,4] = Conv(%data" in out


# -- run / profile given a graph or a model --------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "profile"])
@pytest.mark.parametrize("given", ["model.onnx", "model.obir", "deploy.prototxt"])
def test_run_and_profile_refuse_a_graph_or_model_with_the_compile_line(onnx_model, tmp_path, capsys, command, given):
    """Read as a program, a model's bytes gave 'not a valid .obprog file (truncated or not
    safetensors): header length 8031177557570357512 ...'."""
    path = tmp_path / given
    if given == "model.onnx":
        path = onnx_model
    elif given == "model.obir":
        ob.save(ob.convert(str(onnx_model)), str(path))
    else:
        path.write_text('name: "n"\n')
    argv = [command, str(path)] + (["--random-input"] if command == "run" else [])
    assert main(argv) == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert f"opbridge {command} reads a compiled program (.obprog)" in error
    weights = " --weights NET.caffemodel" if given.endswith(".prototxt") else ""
    assert hint == f"hint: compile it first: opbridge compile {path}{weights} -o {given.split('.')[0]}.obprog"


def test_compile_target_takes_a_json_file_as_validate_does(onnx_model, tmp_path, capsys):
    """'compile --target chip.json' was 'unknown target preset' while 'validate --target
    chip.json' read the file."""
    chip = tmp_path / "chip.json"
    ob.Target.preset("bm1684x", lanes=32).save(str(chip))
    out = tmp_path / "m.obprog"
    assert main(["compile", str(onnx_model), "--target", str(chip), "-o", str(out)]) == 0
    assert ob.load_program(str(out)).target.lanes == 32


# -- quantization refusals carry a hint ------------------------------------------------------------
@pytest.mark.parametrize("case", ["percentile", "target-cos", "bad-image", "npz-without-the-input"])
def test_quantization_refusals_have_a_hint(onnx_model, calibrated, tmp_path, capsys, case):
    """These were an error: line alone, with no hint: line."""
    g = ob.convert(str(onnx_model))
    (name,) = [v.name for v in g.inputs]
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "a.npy", np.zeros(tuple(int(d) for d in g.inputs[0].shape), np.float32))
    if case == "bad-image":
        (data / "a.npy").unlink()
        (data / "b.jpg").write_bytes(b"not an image")
    if case == "npz-without-the-input":
        (data / "a.npy").unlink()
        np.savez(data / "b.npz")  # no array at all (an unknown name has its own error)
    argv = {"percentile": ["calibrate", str(onnx_model), "--data", str(data), "--method", "percentile",
                           "--percentile", "150", "-o", str(tmp_path / "t.json")],
            "target-cos": ["quantize", str(onnx_model), "--table", str(calibrated), "--mixed-precision",
                           "auto", "--target-cos", "5", "-o", str(tmp_path / "q.obir")],
            }.get(case, ["calibrate", str(onnx_model), "--data", str(data), "-o", str(tmp_path / "t.json")])
    assert main(argv) == 2
    error, _ = _one_error(capsys.readouterr().err)
    words = {"percentile": "150", "target-cos": "5", "bad-image": "b.jpg", "npz-without-the-input": "b.npz"}
    assert words[case] in error, error


@pytest.mark.parametrize("argv, words", [
    (["--data", "FILE"], "is a file; it takes the folder"),
    (["--job-timeout", "-5"], "give a number above 0"),
    (["--max-upload-mb", "nan"], "give a number above 0"),
    (["--job-memory-mb", "-1"], "give a whole number >= 0"),
])
def test_serve_refuses_bad_settings_before_starting(tmp_path, capsys, argv, words):
    """A file as --data failed with 'File exists' and a generic hint; a negative timeout or
    size was taken as given."""
    pytest.importorskip("uvicorn", reason="the 'serve' extra (uvicorn) is not installed")
    pytest.importorskip("starlette", reason="the 'serve' extra (starlette) is not installed")
    (tmp_path / "f.txt").write_text("x")
    argv = [str(tmp_path / "f.txt") if a == "FILE" else a for a in argv]
    if "--data" not in argv:
        argv += ["--data", str(tmp_path / "jobs")]
    try:
        code = main(["serve", "--port", "0", *argv])
    except SystemExit as exit_:  # argparse's refusals
        code = exit_.code
    assert code == 2
    error, _ = _one_error(capsys.readouterr().err)
    assert words in error


def test_serve_drops_the_traceback_of_a_second_ctrl_c():
    """A second Ctrl-C cancels the app's shutdown; starlette reports it to uvicorn as a
    formatted traceback, which the server printed as an ERROR."""
    import logging

    from opbridge.cli.serve import _not_an_interrupt

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 1, msg, None, None)

    cancelled = ("Traceback (most recent call last):\n  File \"x\", line 1\nKeyboardInterrupt\n\nDuring "
                 "handling of the above exception, another exception occurred:\n\nTraceback (most recent "
                 "call last):\n  File \"y\", line 2\nasyncio.exceptions.CancelledError\n")
    assert not _not_an_interrupt(record(cancelled))
    assert _not_an_interrupt(record("Traceback (most recent call last):\n  File \"z\"\nValueError: real\n"))
    assert _not_an_interrupt(record("[Errno 98] error while attempting to bind on address"))


def test_a_renamed_ts_json_pair_says_which_weights_name_it_wants(traced_conv, tmp_path, capsys):
    """The .ts.json names its .safetensors: a user who renamed both was told to keep the file
    'beside the .ts.json', where it was."""
    out = tmp_path / "conv.ts.json"
    assert main(["export-torchscript", str(traced_conv), "--input-shape", "x=1,3,8,8", "-o", str(out)]) == 0
    out.rename(tmp_path / "mine.ts.json")
    (tmp_path / "conv.ts.safetensors").rename(tmp_path / "mine.ts.safetensors")
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "mine.ts.json"), "-o", str(tmp_path / "m.obir")]) == 2
    _, hint = _one_error(capsys.readouterr().err)
    assert "'conv.ts.safetensors'" in hint and "rename" in hint


def test_validate_quantize_refuses_the_int8_graph_of_another_model(onnx_model, calibrated, tmp_path, capsys):
    """Two models with the same input name: the other one's int8 graph was compared and failed
    on shapes, with a note blaming the random inputs."""
    other = ob.GraphBuilder("other")
    x = other.input(ob.convert(str(onnx_model)).inputs[0].name, "f32", (1, 3, 16, 16))
    other.output(other.op("Relu", [x], name="other_out"))
    g = other.build()
    table = ob.calibrate(g, [{g.inputs[0].name: np.ones((1, 3, 16, 16), np.float32)}])
    q = tmp_path / "other.int8.obir"
    ob.save(ob.quantize(g, table, dtype="int8"), str(q))
    assert main(["validate", str(onnx_model), "--quantize", str(q)]) == 2
    error, _ = _one_error(capsys.readouterr().err)
    assert "has outputs ['other_out'], the float model" in error


def test_weights_given_without_weights_option_get_the_corrected_command(capsys):
    """'opbridge validate deploy.prototxt net.caffemodel' (no --weights) was 'unrecognized
    arguments' with only the --help pointer."""
    with pytest.raises(SystemExit) as exit_:
        main(["convert", "deploy.prototxt", "net.caffemodel", "-o", "x.obir"])
    assert exit_.value.code == 2
    _, hint = _one_error(capsys.readouterr().err)
    assert hint == "hint: give the weights with --weights: opbridge convert deploy.prototxt -o x.obir --weights net.caffemodel"


def test_serve_whose_app_fails_at_startup_is_an_internal_error(tmp_path, monkeypatch, capsys):
    """uvicorn.run exits 3 when the app's startup fails; serving on our own socket keeps that
    (not 'stopped' and exit 0)."""
    uvicorn = pytest.importorskip("uvicorn", reason="the 'serve' extra (uvicorn) is not installed")
    pytest.importorskip("starlette", reason="the 'serve' extra (starlette) is not installed")
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # never started
    assert main(["serve", "--data", str(tmp_path / "jobs"), "--port", "0"]) == 3
    captured = capsys.readouterr()
    assert "stopped" not in captured.out
    assert captured.err.startswith("internal error: the service did not start")


# -- demo on a given model --------------------------------------------------------------------------
def test_demo_of_a_given_model_ends_with_what_to_run_next(onnx_model, tmp_path, capsys):
    """The bundled demo ends with commands to try on its files; a given model's run ended with
    the folder name alone."""
    out = tmp_path / "demo"
    assert main(["demo", str(onnx_model), "--out-dir", str(out)]) == 0
    text = capsys.readouterr().out
    tail = text[text.index("next, on these files:"):].splitlines()
    assert tail[1:4] == [f"  opbridge show {out / 'model.obir'}",
                         f"  opbridge profile {out / 'model.obprog'} --trace trace.json",
                         f"  opbridge validate {onnx_model} --html report.html"]
    assert (out / "model.obir").is_file() and (out / "model.obprog").is_file()


# -- the post-training quantization chain says what comes next ------------------------------------
def test_calibrate_and_quantize_name_the_next_command(onnx_model, tmp_path, capsys):
    g = ob.convert(str(onnx_model))
    (inp,) = g.inputs
    np.save(tmp_path / "s.npy", np.random.default_rng(0).random(tuple(int(d) for d in inp.shape), dtype=np.float32))
    table, q = tmp_path / "t.json", tmp_path / "q.obir"
    assert main(["calibrate", str(onnx_model), "--data", str(tmp_path / "s.npy"), "-o", str(table)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"next: opbridge quantize {onnx_model} --table {table} -o model.int8.obir")
    assert main(["quantize", str(onnx_model), "--table", str(table), "-o", str(q)]) == 0
    nxt = capsys.readouterr().out.splitlines()[-1]
    assert nxt.startswith(f"next: opbridge validate {onnx_model} --quantize {q} --input {inp.name}=SAMPLE.npy ")
    assert nxt.endswith(f"opbridge compile {q} -o {tmp_path / 'q.obprog'}")
    assert main(["quantize", str(onnx_model), "--dtype", "f16", "-o", str(tmp_path / "h.obir")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"next: opbridge compile {tmp_path / 'h.obir'} --target bm1684x -o {tmp_path / 'h.obprog'}")


def test_validate_quantize_takes_a_qdq_graph_quantized_by_onnxruntime(onnx_model, tmp_path, capsys):
    """A graph quantized elsewhere carries no quant.dtype: its QuantizeLinear/DequantizeLinear
    nodes make it an int8 graph, which --quantize compares with the float model."""
    quantization = pytest.importorskip("onnxruntime.quantization", reason="onnxruntime quantizes the model")
    import onnx

    name = onnx.load(str(onnx_model)).graph.input[0]
    dims = [d.dim_value or 1 for d in name.type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter([{name.name: rng.standard_normal(dims).astype(np.float32)} for _ in range(2)])

        def get_next(self):  # noqa: ANN201 - onnxruntime's interface
            return next(self.feeds, None)

    qdq = tmp_path / "qdq.onnx"
    quantization.quantize_static(str(onnx_model), str(qdq), Reader(), quant_format=quantization.QuantFormat.QDQ)
    ob.save(ob.convert(str(qdq)), str(tmp_path / "qdq.obir"))
    code = main(["validate", str(onnx_model), "--quantize", str(tmp_path / "qdq.obir"), "--no-simulator"])
    err = capsys.readouterr().err
    assert "not a quantized" not in err and code in (0, 1), err


def test_next_command_repeats_input_values_and_quotes_paths():
    """The next command of calibrate/quantize rebuilds the same graph: --input-value bindings
    repeated as written, paths with spaces quoted for the shell."""
    import argparse
    import shlex

    from opbridge.cli.quant import _model_words

    args = argparse.Namespace(model="my models/m.onnx", weights=None, input_shape=[("x", (1, 3, 8, 8))],
                              input_value=[("sr", 16000), ("flag", True), ("v", [1, 2.5]), ("t", "a b.npy")],
                              plugin=[])
    assert shlex.split(_model_words(args)) == [
        "my models/m.onnx", "--input-shape", "x=1,3,8,8", "--input-value", "sr=16000",
        "--input-value", "flag=true", "--input-value", "v=1,2.5", "--input-value", "t=a b.npy"]


def test_validate_an_obir_the_target_cannot_compile_is_a_user_error(onnx_model, tmp_path, capsys):
    """A bf16 .obir validated on bm1684 (no bf16) printed an empty table and FAIL: with no
    origin model the simulator is the only comparison, so its refusal is the error, with its hint."""
    path = tmp_path / "b.obir"
    ob.save(ob.quantize(ob.convert(str(onnx_model)), None, dtype="bf16"), str(path))
    assert main(["validate", str(path)]) == 2
    error, hint = _one_error(capsys.readouterr().err)
    assert "computes in bf16" in error and "bm1684x" in hint
    assert main(["validate", str(path), "--target", "bm1684x"]) in (0, 1)
