"""``validate --dump-layers [FILE.npz]`` dumps every node's arrays; ``--debug`` after the
command, its former name, still does, with one warning line (the global ``opbridge --debug``
shows tracebacks and dumps nothing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from opbridge.cli import build_parser, main


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from opbridge.examples.onnx_models import write_small_cnn_onnx

    return Path(write_small_cnn_onnx(tmp_path_factory.mktemp("dump") / "small_cnn.onnx"))


def _node_arrays(path: Path) -> list[str]:
    with np.load(path) as d:
        return sorted(d.files)


def test_dump_layers_writes_every_node_without_a_warning(model, tmp_path, capsys):
    out = tmp_path / "layers.npz"
    assert main(["validate", str(model), "--no-simulator", "--dump-layers", str(out)]) == 0
    assert "warning" not in capsys.readouterr().err
    files = _node_arrays(out)
    assert any(f.endswith("/in0") for f in files) and any("/out:" in f for f in files)


def test_dump_layers_without_a_file_names_it_after_the_model(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["validate", str(model), "--no-simulator", "--dump-layers"]) == 0
    assert _node_arrays(tmp_path / "small_cnn_debug.npz")


def test_debug_after_the_command_is_a_deprecated_alias(model, tmp_path, capsys):
    new, old = tmp_path / "new.npz", tmp_path / "old.npz"
    assert main(["validate", str(model), "--no-simulator", "--dump-layers", str(new)]) == 0
    capsys.readouterr()
    assert main(["validate", str(model), "--no-simulator", "--debug", str(old)]) == 0
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and "--dump-layers" in warnings[0] and "deprecated" in warnings[0]
    assert _node_arrays(old) == _node_arrays(new)


def test_global_debug_dumps_nothing(model, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--debug", "validate", str(model), "--no-simulator"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert not list(tmp_path.glob("*.npz"))


def test_help_names_dump_layers_and_not_a_second_debug():
    sub = next(a for a in build_parser()._actions if a.dest == "command" or hasattr(a, "choices") and
               isinstance(a.choices, dict) and "validate" in a.choices)
    text = sub.choices["validate"].format_help()
    assert "--dump-layers [FILE.npz]" in text and "--debug" not in text
