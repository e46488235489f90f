"""Simulator kernels: the registry and the built-in kernels, one module per op family.

Every family module is imported here by name; each registers its kernels with the same
public :func:`register_kernel` a plugin uses.
"""

from __future__ import annotations

from . import (  # noqa: F401
    activation,
    conv,
    elementwise,
    fused,
    matmul,
    norm,
    pool,
    quant,
    sample,
    softmax,
    tensor,
)
from .registry import (
    DEFAULT_KERNELS,
    Kernel,
    KernelRegistry,
    WeightMemo,
    register_kernel,
    tile_pads,
    tile_pads_axis,
    tile_pads_w,
    window_rows,
)

FAMILIES = ("activation", "conv", "elementwise", "fused", "matmul", "norm", "pool", "quant",
            "sample", "softmax", "tensor")

__all__ = [
    "DEFAULT_KERNELS", "FAMILIES", "Kernel", "KernelRegistry", "register_kernel", "WeightMemo",
    "tile_pads", "tile_pads_axis", "tile_pads_w", "window_rows",
]
