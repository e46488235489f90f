"""Every IR op that exists in ONNX declares the same attribute defaults as onnx.defs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import defs, helper

from opbridge.ir.opdef import DEFAULT_OPS

# IR params whose default deliberately differs from ONNX, with the reason.
DELIBERATE = {
    # ("Op", "param"): "reason",
}


def _onnx_default(schema, attr_name):
    attr = schema.attributes.get(attr_name)
    if attr is None or not attr.default_value.name:
        return None
    return helper.get_attribute_value(attr.default_value)


def _cases():
    for opdef in DEFAULT_OPS:
        if not defs.has(opdef.name):
            continue
        schema = defs.get_schema(opdef.name)
        for p in opdef.params.values():
            if p.required or p.default is None:
                continue
            if p.name not in schema.attributes:
                continue
            yield pytest.param(opdef.name, p.name, id=f"{opdef.name}.{p.name}")


def test_ir_ops_share_attributes_with_onnx():
    # an empty case list would skip the comparison below instead of failing (109 when written)
    assert len(list(_cases())) >= 100


@pytest.mark.parametrize("op, param", list(_cases()))
def test_default_matches_onnx(op, param):
    if (op, param) in DELIBERATE:
        pytest.skip(DELIBERATE[(op, param)])
    schema = defs.get_schema(op)
    expected = _onnx_default(schema, param)
    if expected is None:
        pytest.skip(f"ONNX declares no default for {op}.{param} (it is required or computed)")
    ours = DEFAULT_OPS.get(op).params[param].default
    if isinstance(expected, bytes):
        expected = expected.decode()
    if isinstance(expected, onnx.TensorProto):
        expected = onnx.numpy_helper.to_array(expected)
        np.testing.assert_array_equal(np.asarray(ours), expected)
        return
    if isinstance(expected, list):
        expected = tuple(expected)
    if isinstance(expected, float) or isinstance(ours, float):
        assert ours == pytest.approx(expected, rel=1e-6), f"{op}.{param}: ours {ours!r}, onnx {expected!r}"
    else:
        assert ours == expected, f"{op}.{param}: ours {ours!r}, onnx {expected!r}"
