"""The built-in TorchScript mappings, one module per op family (see docs/torchscript-json.md).

Every module is imported here by name; importing registers its mappings.
"""

from __future__ import annotations

from . import (  # noqa: F401
    activation,
    conv,
    elementwise,
    inplace,
    matmul,
    misc,
    norm,
    prim,
    reduce,
    shape,
    tensor,
)
