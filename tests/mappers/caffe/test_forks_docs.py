"""docs/caffe-forks.md's one-file recipe for a fork layer works as written: its plugin file,
run on the layer of its docstring, against numpy."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import opbridge as ob
from opbridge.convert import convert

from .caffe_ref import layer, tiny_net

DOC = Path(__file__).resolve().parents[3] / "docs" / "caffe-forks.md"


def test_the_recipe_plugin_converts_and_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1
    plugin = tmp_path / "scale_clip.py"
    plugin.write_text(blocks[0])
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(layer("ScaleClip", "scale_clip_param { scale: 0.5 limit: 0.7 }"), (1, 2, 3, 4)))
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32) * 3
    got = ob.interpret(convert(proto, plugins=[plugin]), {"data": x})["y"]
    np.testing.assert_allclose(got, np.minimum(x * 0.5, 0.7), rtol=1e-6)
