from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob


@pytest.fixture(scope="session")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ob.Graph, dict[str, np.ndarray]]:
    """The bundled small CNN: its .onnx path, its graph and one input."""
    from opbridge.examples.onnx_models import write_small_cnn_onnx

    path = Path(write_small_cnn_onnx(tmp_path_factory.mktemp("hostile") / "small_cnn.onnx"))
    g = ob.convert(path)
    x = np.random.default_rng(0).standard_normal(g.inputs[0].shape).astype(np.float32)
    return path, g, {g.inputs[0].name: x}


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Run the CLI in-process; returns the exit code and stderr."""
    from opbridge.cli import main

    try:
        rc = main(argv)
    except SystemExit as stop:  # argparse's usage errors
        rc = stop.code if isinstance(stop.code, int) else 1
    return rc, capsys.readouterr().err


def assert_one_error_and_hint(rc: int, err: str, *names: str) -> None:
    """The CLI's user-error shape: exit 2, one error: line, one hint: line, no traceback, and
    the error names each of ``names``."""
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert [ln for ln in lines if ln.startswith("error:")] == lines[:1], err
    assert sum(ln.startswith("hint:") for ln in lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    for name in names:
        assert name in lines[0], (name, err)
