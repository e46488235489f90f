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
    ("QuantizeLinear", "output_dtype"): "ONNX's 0 means y_zero_point's type, else uint8; the IR "
    "holds the resolved type (its default, u8, is that rule without a zero point)",
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



def _mapped_cases():
    """(origin op, since, attribute) for every one-to-one ONNX mapping (register_custom_op) whose
    IR op declares a parameter of the attribute's name: the schema at the mapping's own version."""
    from opbridge.mappers import DEFAULT_MAPPINGS

    for e in DEFAULT_MAPPINGS.entries("onnx"):
        if e.ir_op is None or e.domain not in (None, "") or e.ir_op not in DEFAULT_OPS:
            continue
        schema = defs.get_schema(e.op_type, e.since)
        params = DEFAULT_OPS.get(e.ir_op).params
        for name, attr in schema.attributes.items():
            if attr.default_value.name and name in params:
                yield pytest.param(e, name, id=f"{e.op_type}-{e.since}.{name}")


def test_one_to_one_mappings_share_attributes_with_onnx():
    assert len(list(_mapped_cases())) >= 20  # 38 when written


@pytest.mark.parametrize("entry, name", list(_mapped_cases()))
def test_absent_attribute_reaches_the_ir_as_the_onnx_default_of_its_version(entry, name):
    # the node as the mapping sees it (schema defaults filled), through the mapping's own parse
    # function and the IR param's conversion: e.g. Selu-1's alpha is 1.6732, Selu-6's 1.67326319
    from opbridge.mappers.custom_op import DstOp
    from opbridge.mappers.onnx.schema_defaults import with_schema_defaults
    from opbridge.parsers.origin import OriginNode

    node = with_schema_defaults(OriginNode("n", entry.op_type, ["x"], ["y"]), entry.since)
    dst = DstOp(entry.ir_op, entry.since)
    entry.fn.__self__._parse_fn(node, dst)
    ours = DEFAULT_OPS.get(entry.ir_op).params[name].convert(dst.attrs[name], "test")
    expected = _onnx_default(defs.get_schema(entry.op_type, entry.since), name)
    if isinstance(expected, bytes):
        expected = expected.decode()
    if isinstance(expected, list):
        expected = tuple(expected)
    if isinstance(expected, float):
        assert ours == pytest.approx(expected, rel=1e-7), f"ours {ours!r}, onnx {expected!r}"
    else:
        assert ours == expected, f"ours {ours!r}, onnx {expected!r}"
