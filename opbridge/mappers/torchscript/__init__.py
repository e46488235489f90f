"""The built-in TorchScript mappings, one module per op family (see docs/torchscript-json.md).

Every module is listed here by name; importing one (on first use) registers its mappings.
"""

from __future__ import annotations

#: The family modules, by name; each registers its mappings when imported.
#: They load on first use (opbridge.families); the index is opbridge/registry_index.py.
FAMILIES = (
    "activation",
    "control",
    "conv",
    "elementwise",
    "inplace",
    "linalg",
    "matmul",
    "misc",
    "norm",
    "prim",
    "reduce",
    "repeat",
    "rnn",
    "sample",
    "shape",
    "signal",
    "tensor",
)
