"""The built-in op vocabulary, one module per family, each defined with ``define_op``.

Every module is listed here by name (no scanning) and imported on first use of one of its
ops (opbridge.families); a test checks that each module of this package is listed.
"""

from __future__ import annotations

#: The family modules, by name; each registers its op definitions when imported.
#: They load on first use (opbridge.families); the index is opbridge/registry_index.py.
FAMILIES = (
    "activation",
    "bits",
    "control",
    "conv",
    "detection",
    "elementwise",
    "fused",
    "generate",
    "image",
    "linalg",
    "logical",
    "matmul",
    "norm",
    "pool",
    "pose",
    "quant",
    "rcnn",
    "reduce",
    "resize",
    "sample",
    "scatter_ext",
    "sequence",
    "shape",
    "signal",
    "softmax",
    "tensor",
    "text",
    "yolo",
    # after the static ops it wraps, so that the index attributes each op to its own family
    "dynamic",
)
