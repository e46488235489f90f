"""Hostile ``opbridge batch ... -o DIR`` runs: odd models mixed with good ones, names that
collide with the batch's own files, outputs that cannot be folders, repeated or bad options.
A model that cannot be read fails alone; what every model shares fails once, before any runs."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ..fuzz.mutate import judge
from .conftest import assert_one_error_and_hint, cli


@pytest.fixture
def good(cnn, tmp_path):
    return shutil.copy(cnn[0], tmp_path / "good.onnx")


def _summary(out):
    return {m["name"]: m for m in json.loads((out / "summary.json").read_text())["models"]}


# a model's folder took the name of summary.json / summary.html: the batch ran every model,
# then failed writing its summary with "error: Is a directory" (no hint)
def test_models_named_like_the_summary_files(cnn, tmp_path, capsys):
    models = [shutil.copy(cnn[0], tmp_path / n) for n in ("summary.json.onnx", "summary.html.onnx")]
    out = tmp_path / "out"
    rc, err = cli(["batch", "convert", *map(str, models), "-o", str(out), "--jobs", "1"], capsys)
    assert rc == 0, err
    rows = _summary(out)
    assert len(rows) == 2 and all(m["status"] == "passed" for m in rows.values())
    assert (out / "summary.html").is_file() and not set(rows) & {"summary.json", "summary.html"}


# an -o that cannot be a folder failed with a bare OSError line (no hint) after every model ran
@pytest.mark.parametrize("where", ["a-file", "under-a-file"])
def test_output_that_cannot_be_a_folder(good, tmp_path, capsys, where):
    f = tmp_path / "afile"
    f.write_text("x")
    out = f if where == "a-file" else f / "sub"
    rc, err = cli(["batch", "convert", str(good), "-o", str(out)], capsys)
    assert_one_error_and_hint(rc, err, str(out))


# --input-shape twice for one input was taken silently (the last won); other commands refuse it
def test_input_shape_given_twice(good, tmp_path, capsys):
    rc, err = cli(["batch", "convert", str(good), "-o", str(tmp_path / "o"), "--input-shape", "image=1,3,16,16",
                   "--input-shape", "image=2,3,16,16"], capsys)
    assert_one_error_and_hint(rc, err, "'image' twice")


# a bad --target or --tolerance failed once per model, after starting the pool
@pytest.mark.parametrize("mode, option, named", [("compile", ["--target", "nochip"], "'nochip'"),
                                                 ("validate", ["--tolerance", "a,b"], "'a,b'")])
def test_shared_option_fails_once_before_any_model(good, tmp_path, capsys, mode, option, named):
    out = tmp_path / "o"
    rc, err = cli(["batch", mode, str(good), "-o", str(out), *option], capsys)
    assert_one_error_and_hint(rc, err, named)
    assert not (out / "summary.json").exists()


# a FIFO among the models blocked the batch for ever (read_bytes on a pipe)
def test_odd_models_mixed_with_good_ones(good, tmp_path, capsys):
    """A pipe, a missing file, an empty file and the good model twice: each odd one fails on its
    own naming itself, the good ones pass, the batch ends with exit 2 (a user error)."""
    os.mkfifo(tmp_path / "pipe.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    models = [str(good), str(tmp_path / "pipe.onnx"), str(tmp_path / "missing.onnx"), str(tmp_path / "empty.onnx"),
              str(good)]
    out = tmp_path / "out"
    got: list = []
    outcome = judge("batch", lambda: got.append(cli(["batch", "convert", *models, "-o", str(out), "--jobs", "1"],
                                                    capsys)), seconds=120)
    assert outcome.ok and got and got[0][0] == 2, (outcome.detail, got)
    rows = list(json.loads((out / "summary.json").read_text())["models"])
    assert [m["status"] for m in rows] == ["passed", "error", "error", "error", "passed"]
    assert "not a regular file" in rows[1]["error"] and "pipe.onnx" in rows[1]["error"]
    assert "missing.onnx" in rows[2]["error"] and "empty.onnx" in rows[3]["error"]
    assert len({m["dir"] for m in rows}) == 5
