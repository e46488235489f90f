"""Every fork layer also runs on the simulator (compiled for the default target): its outputs
equal the reference interpreter's, whose own references are tested in test_forks*.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.tools.caffe_weights import write_random_weights

from .caffe_ref import layer, tiny_net

_POOL = layer("Pooling", "pooling_param { pool: MAX kernel_size: 2 stride: 2 }", name="pool", tops=("p", "mask"))
_ROIS = 'input: "rois"\ninput_shape { dim: 3 dim: 5 }\n'
CASES = {
    "BN,4 blobs": (layer("BN", "bn_param { moving_average: true }"), (1, 8, 6, 6)),
    "BN,LEARN": (layer("BN"), (2, 8, 6, 6)),
    "Upsample,mask": (_POOL + layer("Upsample", "upsample_param { scale: 2 }", name="up", bottoms=("p", "mask")),
                      (1, 4, 6, 8)),
    "Reorg": (layer("Reorg", "reorg_param { stride: 2 }"), (1, 8, 6, 6)),
    "Region": (layer("Region", "region_param { classes: 3 num: 2 }"), (1, 16, 4, 4)),
    "Im2col+Transpose+Reverse": (layer("Im2col", "convolution_param { kernel_size: 3 pad: 1 }", name="ic")
                                 + layer("Transpose", "transpose_param { dim: 3 dim: 2 dim: 0 dim: 1 }",
                                         name="tr", bottoms=("ic",))
                                 + layer("Reverse", "reverse_param { axis: 0 }", name="y", bottoms=("tr",)),
                                 (1, 2, 3, 4)),
    "Lstm": (layer("Lstm", "lstm_param { num_output: 4 }"), (5, 2, 3)),
    "PSROIPooling": (_ROIS + layer("PSROIPooling", "psroi_pooling_param { output_dim: 2 group_size: 2 "
                                   "spatial_scale: 0.5 }", bottoms=("data", "rois")), (1, 8, 8, 8)),
    "HardSwish": (layer("HardSwish"), (1, 4, 5, 5)),
    "ImResize": (layer("ImResize", "imresize_param { factor: 2 }"), (1, 2, 4, 5)),
    "Resize": (layer("Resize", "resize_param { height: 7 width: 9 }"), (1, 2, 4, 5)),
    "Nms": (layer("Nms", "nms_param { threshold: 0 }"), (1, 1, 6, 6)),
    "Proposal": ('input: "deltas"\ninput_shape { dim: 1 dim: 36 dim: 4 dim: 5 }\n'
                 'input: "im_info"\ninput_shape { dim: 1 dim: 3 }\n'
                 + layer("Proposal", "proposal_param { post_nms_topn: 10 min_size: 0 }",
                         bottoms=("data", "deltas", "im_info"), tops=("y", "s")), (1, 18, 4, 5)),
    "YoloDetectionOutput": (layer("YoloDetectionOutput", "yolo_detection_output_param { num_classes: 2 num_box: 2 "
                                  "confidence_threshold: 0.1 biases: 1 biases: 2 biases: 3 biases: 4 }"),
                            (1, 14, 3, 3)),
}


@pytest.mark.parametrize(("text", "shape"), list(CASES.values()), ids=list(CASES))
def test_simulator_matches_interpreter(tmp_path: Path, text: str, shape: tuple[int, ...]) -> None:
    proto = tmp_path / "net.prototxt"
    proto.write_text(tiny_net(text, shape))
    weights = tmp_path / "net.caffemodel"
    written = write_random_weights(proto, weights, seed=2)
    g = convert(proto, weights=weights if written else None)
    rng = np.random.default_rng(0)
    feeds = {v.name: rng.standard_normal(v.shape).astype(np.float32) for v in g.inputs}
    if "im_info" in feeds:
        feeds["im_info"] = np.array([[64, 80, 1.0]], np.float32)
    if "rois" in feeds:
        feeds["rois"] = np.array([[0, 0, 0, 9, 9], [0, 2, 3, 12, 14], [0, 5, 5, 6, 6]], np.float32)
    want = ob.interpret(g, feeds)
    got = ob.compile(g).run(feeds)
    for v in g.outputs:
        np.testing.assert_allclose(got[v.name], want[v.name], rtol=1e-5, atol=1e-6, err_msg=v.name)
