"""Symbolic dims: the arithmetic shape functions use, and their propagation through ops.

The expected dims are written from the op definitions (ONNX operator docs), not from our
output; run-time checks compare concrete results against onnxruntime in tests/dynamic.
"""

from __future__ import annotations

import pytest

import opbridge as ob
from opbridge.ir import dims


@pytest.mark.parametrize("got,want", [
    (dims.mul("N", 3), "3*N"),
    (dims.mul(3, "N"), "3*N"),
    (dims.add("seq", 1), "seq+1"),
    (dims.add("N", "N"), "2*N"),
    (dims.sub("N", "N"), 0),
    (dims.mul("N", "seq", 2), "2*N*seq"),
    (dims.floordiv(dims.mul("N", 4), 2), "2*N"),
    (dims.floordiv(dims.sub("seq", 1), 2), "(seq-1)//2"),
    (dims.floordiv(7, 2), 3),
    (dims.canonical("seq*batch"), "batch*seq"),
    (dims.canonical("12"), 12),
    (dims.canonical("batch size"), "{batch size}"),
], ids=["mul", "mul-commutes", "add", "add-same", "sub-to-zero", "product", "floordiv-exact",
        "floordiv-opaque", "floordiv-ints", "canonical-order", "canonical-int", "odd-name"])
def test_dim_arithmetic(got, want):
    assert got == want


def test_divide_exact_and_equal():
    assert dims.divide_exact(dims.mul("N", 12), 4) == "3*N"
    assert dims.divide_exact(dims.mul("N", 12), "N") == 12
    assert dims.divide_exact("N", 5) is None
    assert dims.equal("3*N", "N*3") and not dims.equal("N", "M")


def test_evaluate_and_bind():
    assert dims.evaluate("(seq-1)//2+1", {"seq": 9}) == 5
    assert dims.evaluate("N*seq", {"N": 2}) is None
    values: dict[str, int] = {}
    assert dims.bind("N", 4, values) and values == {"N": 4}
    assert dims.bind("2*M+1", 7, values) and values["M"] == 3
    assert not dims.bind("3*N", 13, values)  # N is 4: 12, not 13
    assert dims.bind_shape(("N", 5), (4, 6), values) == 1


def test_floordiv_by_non_constant_is_an_error():
    with pytest.raises(ob.ShapeError, match="positive constants"):
        dims.floordiv("N", 0)


def _build(shape):
    b = ob.GraphBuilder("sym")
    return b, b.input("x", "f32", shape)


@pytest.mark.parametrize("op,attrs,want", [
    ("Flatten", {"axis": 1}, ("N", "12*seq")),
    ("Flatten", {"axis": 2}, ("3*N", "4*seq")),
    ("Reshape", {"shape": (0, -1)}, ("N", "12*seq")),
    ("Reshape", {"shape": (-1, 4)}, ("3*N*seq", 4)),
    ("Tile", {"repeats": (2, 1, 1, 3)}, ("2*N", 3, "seq", 12)),
    ("Pad", {"pads": (0, 0, 1, 0, 0, 0, 1, 0)}, ("N", 3, "seq+2", 4)),
    ("Slice", {"starts": (0,), "ends": (1 << 62,), "axes": (2,)}, ("N", 3, "seq", 4)),
    ("Transpose", {"perm": (2, 0, 1, 3)}, ("seq", "N", 3, 4)),
    ("ReduceMean", {"axes": (2,), "keepdims": 1}, ("N", 3, 1, 4)),
    ("Softmax", {"axis": -1}, ("N", 3, "seq", 4)),
], ids=["flatten-1", "flatten-2", "reshape-0-1", "reshape-infer", "tile", "pad", "slice-all",
        "transpose", "reduce", "softmax"])
def test_shape_functions_propagate_symbols(op, attrs, want):
    b, x = _build(("N", 3, "seq", 4))
    assert b.op(op, [x], **attrs).shape == want


def test_concat_sums_symbolic_axis():
    b, x = _build(("N", "seq", 4))
    assert b.op("Concat", [x, x], axis=1).shape == ("N", "2*seq", 4)
    assert b.op("Concat", [x, x], axis=2).shape == ("N", "seq", 8)


def test_slice_of_part_of_a_symbolic_dim_is_a_runtime_dim():
    b, x = _build(("N", 8))
    y = b.op("Slice", [x], starts=(1,), ends=(3,), axes=(0,))
    assert y.shape[1] == 8 and dims.is_runtime(y.shape[0])


def test_conv_pool_keep_batch_symbolic():
    import numpy as np

    b, x = _build(("N", 3, 8, 8))
    w = b.constant("w", np.ones((4, 3, 3, 3), np.float32))
    y = b.op("Conv", [x, w], pads=(1, 1, 1, 1))
    assert y.shape == ("N", 4, 8, 8)
    assert b.op("MaxPool", [y], kernel_shape=(2, 2), strides=(2, 2)).shape == ("N", 4, 4, 4)


def test_ctx_arithmetic_available_to_plugins():
    from opbridge.ir.opdef import OpRegistry

    reg = OpRegistry()  # a private registry: the default one stays as it was
    (reg.define("SymDouble")
     .input("x", "T").output("y", "T").type_param("T", ("f32",))
     .shape_fn(lambda ctx: ((ctx.dim_mul(ctx.input_shape(0)[0], 2),
                             ctx.dim_floordiv(ctx.input_shape(0)[1], 2)), ctx.input_dtype(0)))
     .compute(lambda x: x))
    b = ob.GraphBuilder("sym", registry=reg)
    x = b.input("x", "f32", ("N", "2*L"))
    assert b.op("SymDouble", [x]).shape == ("2*N", "L")


@pytest.mark.parametrize("kernel,stride,pads,want", [
    (3, 1, (1, 1), "L"), (3, 2, (1, 1), "(L-1)//2+1"), (4, 4, (0, 0), "(L-4)//4+1"),
], ids=["same", "stride2", "patchify"])
def test_conv_spatial_dims_are_expressions(kernel, stride, pads, want):
    import numpy as np

    b, x = _build(("N", 2, "L"))
    w = b.constant("w", np.ones((3, 2, kernel), np.float32))
    y = b.op("Conv", [x, w], strides=(stride,), pads=pads)
    assert y.shape == ("N", 3, dims.canonical(want))
    # the expression's value is the size ONNX's formula gives: floor((L + pads - k) / s) + 1
    for length in (9, 16):
        assert dims.evaluate(y.shape[2], {"L": length}) == (length + sum(pads) - kernel) // stride + 1
