"""An interrupted write never leaves a half-written file where a good one was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import opbridge as ob

from . import seeds


def _interrupting_save_file(tensors, path, metadata=None):
    with open(path, "wb") as f:
        f.write(b"half a file")
    raise KeyboardInterrupt


def _interrupting_write(path, tensors, metadata=None):  # opbridge.ir.tensorfile.write (.obir)
    _interrupting_save_file(tensors, path, metadata)


@pytest.mark.parametrize("kind", ["obir", "obprog"])
def test_interrupted_save_keeps_the_old_file(tmp_path, monkeypatch, kind):
    g = ob.convert(seeds.write_onnx(tmp_path))
    path = tmp_path / f"model.{kind}"
    obj = ob.compile(g, target="bm1684") if kind == "obprog" else g
    save = obj.save if kind == "obprog" else (lambda p: ob.save(g, p))
    save(path)
    before = path.read_bytes()
    import safetensors.numpy as stn

    from opbridge.ir import tensorfile

    monkeypatch.setattr(stn, "save_file", _interrupting_save_file)
    monkeypatch.setattr(tensorfile, "write", _interrupting_write)
    with pytest.raises(KeyboardInterrupt):
        save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    load = ob.load_program if kind == "obprog" else ob.load
    load(path)


def test_killed_convert_process_leaves_old_output(tmp_path):
    """SIGKILL mid-write (no cleanup runs at all): the old .obir is still whole and loadable."""
    model = seeds.write_onnx(tmp_path)
    out = tmp_path / "m.obir"
    ob.save(ob.convert(model), out)
    before = out.read_bytes()
    slow_writer = (
        "import sys, time\n"
        "from opbridge.ir import tensorfile\n"
        "def slow(p, t, metadata=None):\n"
        "    open(p, 'wb').write(b'partial'); print('writing', flush=True); time.sleep(60)\n"
        "tensorfile.write = slow\n"
        "from opbridge.cli import main\n"
        "sys.exit(main(['convert', sys.argv[1], '-o', sys.argv[2]]))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", slow_writer, str(model), str(out)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    time.sleep(0.1)
    assert out.read_bytes() == before
    x = np.zeros((1, 3, 8, 8), np.float32)
    assert ob.interpret(ob.load(out), {"x": x})["y"].shape == (1, 64)
