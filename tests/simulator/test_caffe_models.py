"""Real Caffe networks (shared deploy prototxts, random weights) through the simulator.

The reference is the interpreter on the same IR (the Caffe frontend's own tests compare that
with OpenCV's dnn module). The nets keep the input shapes their prototxts declare.
"""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.caffe_random_weights import write_random_weights

from ..conftest import SHARED_MODELS, requires_shared_models
from .helpers import assert_close, audit_local_memory

pytestmark = requires_shared_models

#: resnet50 and densenet121 take about 10 s each at 16 KiB: slow
NETS = ("mobilenet_v2", "shufflenet_v2", pytest.param("resnet50", marks=pytest.mark.slow),
        pytest.param("densenet121", marks=pytest.mark.slow))


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    cache: dict[str, ob.Graph] = {}

    def get(name: str) -> ob.Graph:
        if name not in cache:
            proto = SHARED_MODELS / "caffe" / name / "deploy.prototxt"
            weights = tmp_path_factory.mktemp(name) / "w.caffemodel"
            write_random_weights(proto, weights, seed=0)
            cache[name] = ob.convert(str(proto), weights=str(weights))
        return cache[name]

    return get


@pytest.mark.parametrize("lmem_kib", [512, 16], ids=["lmem=512KiB", "lmem=16KiB"])
@pytest.mark.parametrize("name", NETS)
def test_caffe_net_matches_interpreter(graphs, name, lmem_kib):
    g = graphs(name)
    rng = np.random.default_rng(0)
    feeds = {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs}
    ref = ob.interpret(g, feeds)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem_kib * 1024))
    out = prog.run(feeds)
    for k in ref:
        assert_close(out[k], ref[k], f"{name} @ {lmem_kib} KiB: {k}")
    audit_local_memory(prog)
    if lmem_kib == 16:
        p = prog.profile()
        assert p.num_tiles > p.num_layer_groups
