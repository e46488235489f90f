"""Keeping the origin framework as the reference around custom ops it cannot run.

A model with a custom op (a vendor-domain node that a plugin maps) cannot run in onnxruntime as
a whole. Instead of losing the framework reference for every layer, validation removes the
custom nodes and turns their outputs into graph inputs, fed with the values the interpreter
computed for them (the plugin's compute): onnxruntime then runs every layer before and after
the custom ops, and those tensors are compared as usual. A node that reads a tensor nobody can
supply (a custom op's output the interpreter does not name) is dropped with everything after it.

For Caffe, OpenCV runs each layer type it cannot create as a stand-in Python layer that returns
the interpreter's values of the layer's tops (:func:`standin_layer`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

#: ONNX domains that name the same (default) op set.
_DEFAULT_DOMAINS = ("", "ai.onnx")


@dataclass
class Cut:
    """What cutting a model removed and what it feeds in its place."""

    #: the custom nodes removed, as (node name, domain::op type)
    custom: list[tuple[str, str]] = field(default_factory=list)
    #: the custom nodes' outputs, now graph inputs, with the interpreter's values
    fed: dict[str, np.ndarray] = field(default_factory=dict)
    #: the standard nodes dropped because an input of theirs had no value
    dropped: list[str] = field(default_factory=list)
    #: the nodes left for onnxruntime
    kept: int = 0

    def describe(self) -> str:
        """One sentence for the report's notes."""
        names = ", ".join(f"'{n}' ({op})" for n, op in self.custom[:6])
        more = f" and {len(self.custom) - 6} more" if len(self.custom) > 6 else ""
        text = (f"onnxruntime cannot run the custom op(s) {names}{more}: it ran the model cut at "
                f"them ({self.kept} node(s)), fed with the interpreter's values of their outputs")
        if self.dropped:
            shown = ", ".join(f"'{n}'" for n in self.dropped[:6])
            text += (f"; {len(self.dropped)} node(s) after them had no input value and got no "
                     f"onnxruntime reference ({shown}{' …' if len(self.dropped) > 6 else ''})")
        return text


def _domain(d: str) -> str:
    return "" if d in _DEFAULT_DOMAINS else d


@lru_cache(maxsize=1)
def _ort_kernels() -> frozenset[tuple[str, str]]:
    """(domain, op type) of every kernel onnxruntime's CPU provider registers."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

        return frozenset((_domain(k.domain), k.op_name) for k in ort_c.get_all_opkernel_def())
    except (ImportError, AttributeError):  # an onnxruntime without the listing: trust onnx.defs
        return frozenset()


def runnable(op_type: str, domain: str, local_functions: set[tuple[str, str]]) -> bool:
    """Whether onnxruntime can run a node of this op: it has a kernel for it, ONNX defines it
    (function ops are expanded), or the model defines it as a local function."""
    import onnx.defs

    d = _domain(domain)
    if (d, op_type) in local_functions or (d, op_type) in _ort_kernels():
        return True
    try:
        return bool(onnx.defs.has(op_type, d))
    except Exception:  # an unknown domain
        return False


def custom_nodes(model: Any) -> list[Any]:
    """The top-level nodes of ``model`` (an onnx.ModelProto) onnxruntime cannot run."""
    local = {(_domain(f.domain), f.name) for f in model.functions}
    return [n for n in model.graph.node if not runnable(n.op_type, n.domain, local)]


def cut_model(model: Any, values: Mapping[str, np.ndarray]) -> Cut | None:
    """Remove the custom nodes of ``model`` (in place) and make their outputs graph inputs,
    fed from ``values`` (the interpreter's tensors by name); None when there is nothing to cut."""
    from onnx import helper

    custom = custom_nodes(model)
    if not custom:
        return None
    cut = Cut()
    custom_ids = {id(n) for n in custom}
    missing: set[str] = set()  # tensors nobody can supply
    kept = []
    for node in model.graph.node:
        if id(node) in custom_ids:
            cut.custom.append((node.name or node.output[0], f"{node.domain}::{node.op_type}".lstrip(":")))
            for name in node.output:
                if name and name in values:
                    cut.fed[name] = np.asarray(values[name])
                elif name:
                    missing.add(name)
        elif any(name in missing for name in node.input if name):
            cut.dropped.append(node.name or node.output[0])
            missing.update(name for name in node.output if name)
        else:
            kept.append(node)
    del model.graph.node[:]
    model.graph.node.extend(kept)
    cut.kept = len(kept)
    for name, arr in cut.fed.items():
        elem = helper.np_dtype_to_tensor_dtype(arr.dtype)
        model.graph.input.append(helper.make_tensor_value_info(name, elem, list(arr.shape)))
    # a fed tensor is the interpreter's, not onnxruntime's: it is no output of the cut model
    outputs = [o for o in model.graph.output if o.name not in missing and o.name not in cut.fed]
    del model.graph.output[:]
    model.graph.output.extend(outputs)
    return cut


# -- Caffe through OpenCV ---------------------------------------------------------------------
#: OpenCV's message for a layer type it has no implementation of.
_NO_LAYER = re.compile(r"Can't create layer \"([^\"]*)\" of type \"([^\"]*)\"")


def missing_layer_type(message: str) -> str | None:
    """The layer type an OpenCV error says it cannot create, or None."""
    m = _NO_LAYER.search(message)
    return m.group(2) if m else None


def standin_layer(layers: list[Any], values: Mapping[str, np.ndarray]) -> type:
    """A ``cv2.dnn_registerLayer`` class for a Caffe layer type OpenCV cannot run: it returns
    the interpreter's values of the layer's tops (``values``), as the ONNX cut feeds them.

    OpenCV hands a Python layer its parameters but not its name, so each call finds its layer
    among ``layers`` (the origin nodes of that type) by the bottoms it is given: the one whose
    bottoms' interpreter values are closest (the same shapes, the smallest difference).
    """

    def pick(shapes: list[tuple[int, ...]], inputs: Sequence[Any] | None) -> Any:
        """The layer whose bottoms have these shapes and, given ``inputs``, the closest values."""
        best, best_d = None, math.inf
        for node in layers:
            bottoms = [values.get(b) for b in node.inputs]
            if any(b is None for b in bottoms) or [tuple(b.shape) for b in bottoms] != shapes \
                    or any(t not in values for t in node.outputs):
                continue
            if inputs is None:
                return node
            d = sum(float(np.abs(np.asarray(x, np.float64) - b).sum()) for x, b in zip(inputs, bottoms))
            if d < best_d:
                best, best_d = node, d
        if best is None:
            raise ValueError(f"no interpreter values for a layer of type {layers[0].op_type} with "
                             f"input shapes {[list(s) for s in shapes]}")
        return best

    class StandIn:
        def __init__(self, params: Any, blobs: Any) -> None:
            pass

        def getMemoryShapes(self, inputs: Sequence[Any]) -> list[list[int]]:  # noqa: N802 - OpenCV's name
            node = pick([tuple(int(d) for d in s) for s in inputs], None)
            return [list(values[t].shape) for t in node.outputs]

        def forward(self, inputs: Sequence[Any]) -> list[np.ndarray]:
            node = pick([tuple(np.shape(x)) for x in inputs], inputs)
            return [np.ascontiguousarray(values[t]) for t in node.outputs]

    return StandIn
