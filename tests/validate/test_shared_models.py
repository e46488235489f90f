"""Real Caffe networks (../shared/models, random weights with a fixed seed) validated layer by
layer against OpenCV's cv2.dnn; a mismatch names the first layer that diverges."""

from __future__ import annotations

import pytest

import opbridge as ob
from tests.conftest import SHARED_MODELS, requires_cv2, requires_shared_models

MODELS = ["squeezenet_v1.0", "mobilenet_v1", "bvlc_googlenet", "resnet50"]


@pytest.mark.slow
@requires_shared_models
@requires_cv2
@pytest.mark.parametrize("name", MODELS)
def test_caffe_model_matches_opencv(tmp_path, name):
    from opbridge.tools.caffe_weights import write_random_weights

    proto = SHARED_MODELS / "caffe" / name / "deploy.prototxt"
    weights = tmp_path / "w.caffemodel"
    write_random_weights(proto, weights, seed=0)
    r = ob.validate(str(proto), weights=str(weights), target=None)
    assert r.reference == "opencv", r.notes
    assert r.passed, r.summary()
    # every layer output OpenCV computed was matched to an IR tensor by name
    note = next(n for n in r.notes if n.startswith("matched "))
    matched, _, total = note.split()[1:4]
    assert matched == total, note
