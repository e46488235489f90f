"""Real Caffe networks (shared deploy prototxts, random weights) through the simulator.

The reference is the interpreter on the same IR (the Caffe frontend's own tests compare that
with OpenCV's dnn module). The nets keep the input shapes their prototxts declare.
"""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.tools.caffe_weights import write_random_weights

from ..conftest import SHARED_MODELS, requires_shared_models
from .helpers import assert_close, audit_local_memory

pytestmark = requires_shared_models

#: the shared nets; those that take more than a few seconds (up to minutes at 16 KiB: the
#: streamed convolutions of vgg-like nets) are slow. faster_rcnn_vgg16 is not here: its
#: proposal layer is a Caffe ``Python`` layer, which needs a plugin mapping.
FAST_NETS = ("mobilenet_v2", "shufflenet_v2", "mobilenet_ssd")
SLOW_NETS = ("resnet50", "densenet121", "shufflenet_v1_g3", "mobilenet_v1", "squeezenet_v1.0",
             "squeezenet_v1.1", "bvlc_googlenet", "bvlc_googlenet_v1_legacy", "resnet101",
             "bvlc_alexnet", "bvlc_reference_caffenet", "yolov3", "ssd_vgg300", "vgg16")
NETS = FAST_NETS + tuple(pytest.param(n, marks=pytest.mark.slow) for n in SLOW_NETS)


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    """``get(name) -> (graph, feeds, interpreter outputs)``, built once per net. Only the last
    net is kept: a net's tests run one after the other, and keeping every net (yolov3's and
    vgg16's weights and activations among them) held gigabytes until the module ended."""
    cache: dict[str, tuple[ob.Graph, dict, dict]] = {}

    def get(name: str) -> tuple[ob.Graph, dict, dict]:
        if name not in cache:
            cache.clear()
            proto = SHARED_MODELS / "caffe" / name / "deploy.prototxt"
            weights = tmp_path_factory.mktemp(name) / "w.caffemodel"
            write_random_weights(proto, weights, seed=0)
            g = ob.convert(str(proto), weights=str(weights))
            rng = np.random.default_rng(0)
            feeds = {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs}
            cache[name] = (g, feeds, ob.interpret(g, feeds))
        return cache[name]

    return get


@pytest.mark.parametrize("lmem_kib", [512, 64, 16], ids=["lmem=512KiB", "lmem=64KiB", "lmem=16KiB"])
@pytest.mark.parametrize("name", NETS)
def test_caffe_net_matches_interpreter(nets, name, lmem_kib):
    g, feeds, ref = nets(name)
    prog = ob.compile(g, ob.Target.preset("bm1684", lmem_bytes_per_lane=lmem_kib * 1024))
    out = prog.run(feeds)
    for k in ref:
        assert_close(out[k], ref[k], f"{name} @ {lmem_kib} KiB: {k}")
    audit_local_memory(prog)
    if lmem_kib <= 64:
        p = prog.profile()
        assert p.num_tiles > p.num_layer_groups
