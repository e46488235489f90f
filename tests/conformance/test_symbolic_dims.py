"""Every model of the ONNX node suite, with its first input's dim 0 (and, separately, every dim
of it) made symbolic (as ``ob.convert`` keeps a ``dim_param``): it converts, or fails with an OpbridgeError of its own
(an unsupported case, a shape that cannot be proved to broadcast) — never another exception,
and never a mapping's internal error wrapped as "a bug in that mapping function"."""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

import pytest

import opbridge as ob
from opbridge.errors import OpbridgeError

onnx = pytest.importorskip("onnx")


@cache
def _cases() -> dict[str, Any]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        return {c.name: c.model for c in node.collect_testcases(None) if c.model is not None}


def _symbolic(model: Any, every_dim: bool) -> Any | None:
    """A copy of ``model`` with dim 0 of its first graph input named "N" (``every_dim``: each
    dim k named "Dk"); None when it has no dim. Output shapes are cleared, since they would
    pin the dims again."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name for t in m.graph.initializer}
    ins = [i for i in m.graph.input if i.name not in inits]
    if not ins or not ins[0].type.HasField("tensor_type") or not ins[0].type.tensor_type.shape.dim:
        return None
    dims = ins[0].type.tensor_type.shape.dim
    for k, d in enumerate(dims if every_dim else dims[:1]):
        d.dim_param = f"D{k}" if every_dim else "N"
    for o in m.graph.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    return m


@pytest.mark.parametrize("every_dim", [False, True], ids=["dim0", "all-dims"])
@pytest.mark.parametrize("name", sorted(_cases()))
def test_symbolic_first_input_converts_or_fails_cleanly(name: str, every_dim: bool) -> None:
    model = _symbolic(_cases()[name], every_dim)
    if model is None:
        pytest.skip("the first input has no dim 0 to make symbolic (a scalar, sequence or optional)")
    try:
        ob.convert(model)
    except OpbridgeError as err:
        cause = err.__cause__
        assert cause is None or isinstance(cause, OpbridgeError), f"internal error: {err}"
