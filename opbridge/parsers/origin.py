"""The parsers' output: a model as its framework sees it, before any mapping to the IR.

Op types, attribute names and values are the framework's own (plain Python values and numpy
arrays). Weights are numpy arrays (or memory maps) keyed by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from ..errors import AttrError, node_ctx


class Framework(str, Enum):
    """The origin frameworks opbridge reads."""

    ONNX = "onnx"
    CAFFE = "caffe"
    TORCHSCRIPT = "torchscript"

    def __str__(self) -> str:
        return self.value


_MISSING: Any = object()


@dataclass
class TensorInfo:
    """A named tensor's declared type: numpy dtype (or None if unknown) and shape (ints or names)."""

    name: str
    dtype: np.dtype | None = None
    shape: tuple[Any, ...] | None = None


@dataclass
class OriginNode:
    """One node/layer of the origin model.

    ``inputs``/``outputs`` are tensor names ("" for an absent optional input). ``weights`` are
    the names (keys of ``OriginGraph.tensors``) of parameters the framework keeps beside the
    node rather than as inputs (Caffe blobs); ONNX initializers are ordinary inputs.
    """

    name: str
    op_type: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    framework: Framework = Framework.ONNX
    domain: str = ""
    weights: list[str] = field(default_factory=list)
    #: Where the node is in the source file (line number, source range), when known.
    location: str = ""

    @property
    def where(self) -> str:
        kind = "layer" if self.framework == Framework.CAFFE else "node"
        return node_ctx(self.name, self.op_type, framework=str(self.framework), kind=kind)

    def has_attr(self, name: str) -> bool:
        return name in self.attrs

    def get_attr(self, name: str, default: Any = _MISSING) -> Any:
        """The attribute's value; without a default, a missing attribute is an AttrError."""
        if name in self.attrs:
            return self.attrs[name]
        if default is _MISSING:
            kind = "layer" if self.framework == Framework.CAFFE else "node"
            raise AttrError(
                "required but absent", hint=f"set '{name}' on the node in the source model",
                framework=str(self.framework), node=self.name, op_type=self.op_type, kind=kind,
                attribute=name,
            )
        return default


@dataclass
class OriginGraph:
    """A parsed model: nodes in file order, graph inputs/outputs, weights, versions."""

    name: str
    framework: Framework
    nodes: list[OriginNode] = field(default_factory=list)
    inputs: list[TensorInfo] = field(default_factory=list)
    outputs: list[TensorInfo] = field(default_factory=list)
    tensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: Known types of intermediate tensors (ONNX value_info), by name.
    value_info: dict[str, TensorInfo] = field(default_factory=dict)
    #: Version per domain ("" is the framework's default domain; ONNX opset imports).
    opsets: dict[str, int] = field(default_factory=dict)
    source: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
