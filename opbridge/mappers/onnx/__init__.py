"""The built-in ONNX mappings, one module per op family, each imported here by name.

A test checks that every module of this package is imported (no scanning of globals).
"""

from __future__ import annotations

from . import (  # noqa: F401
    activation,
    control,
    conv,
    decompose,
    elementwise,
    functions,
    logical,
    matmul,
    misc,
    norm,
    pool,
    reduce,
    resize,
    rnn,
    shape,
    softmax,
    tensor,
)
