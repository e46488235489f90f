"""The built-in ONNX mappings, one module per op family, each listed here by name.

A test checks that every module of this package is listed (no scanning of globals).
"""

from __future__ import annotations

#: The family modules, by name; each registers its mappings when imported.
#: They load on first use (opbridge.families); the index is opbridge/registry_index.py.
FAMILIES = (
    "activation",
    "bits",
    "control",
    "conv",
    "decompose",
    "dynamic",
    "elementwise",
    "functions",
    "image",
    "linalg",
    "logical",
    "matmul",
    "misc",
    "norm",
    "pool",
    "quant",
    "quant_contrib",
    "reduce",
    "resize",
    "rnn",
    "sample",
    "scatter_ext",
    "sequence",
    "shape",
    "signal",
    "softmax",
    "tensor",
    "text",
)
