"""The built-in op vocabulary, one module per family, each defined with ``define_op``.

Every module is imported here by name (no scanning); a test checks that each module of
this package is imported.
"""

from __future__ import annotations

from . import (  # noqa: F401
    activation,
    conv,
    detection,
    elementwise,
    fused,
    generate,
    logical,
    matmul,
    norm,
    pool,
    pose,
    rcnn,
    reduce,
    resize,
    shape,
    softmax,
    tensor,
    yolo,
)
