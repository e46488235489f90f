"""The built-in Caffe mappings, one module per layer family (imported by name)."""

from __future__ import annotations

from . import (  # noqa: F401
    activation,
    conv,
    detection,
    elementwise,
    forks,
    forks_detection,
    forks_recurrent,
    norm,
    pool,
    recurrent,
    shape,
)
