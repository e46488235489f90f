"""Detection outputs are compared as their valid rows, whatever the padding and order."""

from __future__ import annotations

import numpy as np
import pytest

from opbridge.validate.compare import compare
from opbridge.validate.normalize import normalizer_for, valid_detections

DETS = np.array([[0, 3, 0.9, 0.1, 0.1, 0.5, 0.5],
                 [0, 1, 0.8, 0.2, 0.2, 0.6, 0.6],
                 [0, 3, 0.7, 0.3, 0.3, 0.4, 0.4]], np.float32)


def _padded(rows, n, fill):
    out = np.full((1, 1, n, 7), fill, np.float32)
    out[0, 0, :len(rows)] = rows
    return out


def test_padding_and_order_do_not_matter():
    ours = _padded(DETS, 100, -1.0)             # Caffe-SSD style: rows of -1
    opencv = _padded(DETS[[2, 0, 1]], 100, 0.0)   # OpenCV style: rows of 0, another order
    r = compare(valid_detections(opencv), valid_detections(ours))
    assert r.status == "equal" and valid_detections(ours).shape == (3, 7)


def test_canonical_order():
    got = valid_detections(_padded(DETS[[2, 1, 0]], 5, -1.0))
    # by label, then decreasing confidence
    assert got[:, 1].tolist() == [1, 3, 3] and got[:, 2].tolist() == pytest.approx([0.8, 0.9, 0.7])


def test_no_detections_either_way():
    assert compare(valid_detections(_padded(DETS[:0], 100, 0.0)),
                   valid_detections(_padded(DETS[:0], 100, -1.0))).passed


def test_missing_detection_is_a_shape_difference():
    r = compare(valid_detections(_padded(DETS, 10, 0.0)), valid_detections(_padded(DETS[:2], 10, -1.0)))
    assert r.status == "shape" and "[2, 7]" in r.reason


@pytest.mark.parametrize("op,shape,applies", [("DetectionOutput", (1, 1, 100, 7), True),
                                              ("DetectionOutput", (1, 100, 6), False),
                                              ("Conv", (1, 1, 100, 7), False)],
                         ids=["ssd", "other-layout", "other-op"])
def test_normalizer_for(op, shape, applies):
    assert (normalizer_for(op, shape) is not None) == applies
