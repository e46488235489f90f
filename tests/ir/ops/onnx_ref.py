"""Test helpers: run one IR op, and the equivalent one-node ONNX model in an outside reference."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.ir.types import from_numpy_dtype

DEFAULT_OPSET = 21


def run_ir(op: str, inputs: Sequence[np.ndarray | None], *, const: Sequence[bool] | None = None,
           **attrs: Any) -> list[np.ndarray]:
    """Build a one-node IR graph (inputs fed, or constants where ``const[i]``) and interpret it."""
    b = ob.GraphBuilder(f"one_{op}")
    vals: list[Any] = []
    feeds = {}
    for i, arr in enumerate(inputs):
        if arr is None:
            vals.append(None)
        elif const is not None and const[i]:
            vals.append(b.constant(f"c{i}", arr))
        else:
            vals.append(b.input(f"in{i}", from_numpy_dtype(arr.dtype), arr.shape))
            feeds[f"in{i}"] = arr
    out = b.op(op, vals, name="node", **attrs)
    outs = list(out) if isinstance(out, tuple) else [out]
    b.output(*outs)
    g = b.build()
    res = ob.interpret(g, feeds)
    return [res[v.name] for v in outs]


def onnx_node_model(op: str, inputs: Sequence[np.ndarray | None], num_outputs: int = 1, *,
                    opset: int = DEFAULT_OPSET, domain: str = "", initializers: Sequence[bool] | None = None,
                    **attrs: Any) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node ONNX model; inputs where ``initializers[i]`` become initializers."""
    names, graph_inputs, inits, feeds = [], [], [], {}
    for i, arr in enumerate(inputs):
        if arr is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        if initializers is not None and initializers[i]:
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape))
            feeds[name] = arr
    outs = [f"out{i}" for i in range(num_outputs)]
    node = helper.make_node(op, names, outs, domain=domain, **attrs)
    graph = helper.make_graph([node], f"one_{op}", graph_inputs,
                              [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                               for o in outs], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])
    return model, feeds


def run_onnx_reference(op: str, inputs: Sequence[np.ndarray | None], num_outputs: int = 1, *,
                       opset: int = DEFAULT_OPSET, **attrs: Any) -> list[np.ndarray]:
    """The one-node ONNX model run in ``onnx.reference.ReferenceEvaluator`` (all inputs fed)."""
    model, feeds = onnx_node_model(op, inputs, num_outputs, opset=opset, **attrs)
    return [np.asarray(x) for x in ReferenceEvaluator(model).run(None, feeds)]


def assert_close(actual: np.ndarray, expected: np.ndarray, *, rtol: float = 1e-5,
                 atol: float = 1e-6) -> None:
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)
