"""The built-in Caffe mappings, one module per layer family (listed by name)."""

from __future__ import annotations

#: The family modules, by name; each registers its mappings when imported.
#: They load on first use (opbridge.families); the index is opbridge/registry_index.py.
FAMILIES = (
    "activation",
    "conv",
    "detection",
    "elementwise",
    "forks",
    "forks_coord_map",
    "forks_detection",
    "forks_recurrent",
    "norm",
    "pool",
    "recurrent",
    "shape",
)
