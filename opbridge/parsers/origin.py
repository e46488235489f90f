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
    #: "tensor", or "sequence" / "optional" / "optional_sequence" (ONNX sequence and optional
    #: types; ``dtype`` and ``shape`` are then their tensors').
    kind: str = "tensor"


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

    def get_list(self, name: str, default: Any = (), *, repeated: Any = ()) -> list[Any]:
        """A repeated field's values as a list, even when it holds one value; ``default`` (as a
        list) when absent. ``repeated`` names fields of nested messages that are repeated too
        (``"width"``, or ``"inner.width"`` deeper): they become lists in every item.

        A Caffe parameter block the lite caffe.proto does not know is read without a schema, so
        a field written once (``mask: 6``) arrives as a bare value unless it is written as a list
        (``mask: [6]``); read repeated fields with this::

            src.get_list("bias_struct", repeated=["width"])
            # bias_struct { offset: 1 width: 20 } -> [{"offset": 1, "width": [20]}]
        """
        if name not in self.attrs:
            return list(default)
        paths = [p.split(".") for p in ([repeated] if isinstance(repeated, str) else repeated)]
        return [_listify(item, paths) for item in _as_list(self.attrs[name])]


def _as_list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def _listify(item: Any, paths: list[list[str]]) -> Any:
    """``item`` (a nested message, a dict) with the fields at ``paths`` made lists."""
    if not paths or not isinstance(item, dict):
        return item
    out = dict(item)
    for key in {p[0] for p in paths}:
        if key not in out:
            continue
        deeper = [p[1:] for p in paths if p[0] == key and len(p) > 1]
        if any(p[0] == key and len(p) == 1 for p in paths):
            out[key] = [_listify(v, deeper) for v in _as_list(out[key])]
        elif isinstance(out[key], list):
            out[key] = [_listify(v, deeper) for v in out[key]]
        else:
            out[key] = _listify(out[key], deeper)
    return out


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
    #: The framework's own message the graph was read from, when a mapper may need to hand it
    #: back to the framework's library (an ONNX subgraph attribute passed to onnx.defs to build
    #: a function body); None otherwise. Parsers set it; the IR never sees it.
    proto: Any = field(default=None, repr=False, compare=False)
