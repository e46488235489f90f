"""Per-op views of a tensor for comparison, where frameworks agree on the result but not the layout.

A detection output is a variable number of rows padded to a fixed size, and frameworks pad
differently (Caffe-SSD and opbridge: rows of -1; OpenCV: rows of 0) and may order equal-score
rows differently. Comparing the valid rows, in a canonical order, compares what they mean.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Normalizer = Callable[[np.ndarray], np.ndarray]


def valid_detections(arr: np.ndarray) -> np.ndarray:
    """Rows ``[image_id, label, confidence, xmin, ymin, xmax, ymax]`` with ``image_id >= 0`` and
    ``confidence > 0``, sorted by image, label, then decreasing confidence; shape (K, 7)."""
    rows = np.asarray(arr).reshape(-1, 7)
    keep = rows[(rows[:, 0] >= 0) & (rows[:, 2] > 0)]
    order = np.lexsort((-keep[:, 2], keep[:, 1], keep[:, 0]))
    return keep[order]


#: IR op -> (normalizer applied to the reference and each candidate, a note for the report)
NORMALIZERS: dict[str, tuple[Normalizer, str]] = {
    "DetectionOutput": (valid_detections, "compared as its valid detections (image_id >= 0, "
                        "confidence > 0) in a canonical order: frameworks pad and order them "
                        "differently"),
}


def normalizer_for(op: str, shape: tuple[int, ...]) -> tuple[Normalizer, str] | None:
    """The normalizer of ``op``'s output of ``shape``, if one applies."""
    entry = NORMALIZERS.get(op)
    if entry is None or not shape or shape[-1] != 7:
        return None
    return entry
