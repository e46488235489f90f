"""ONNX Concat/Split/Slice/Pad/Gather*/Scatter*/CenterCropPad mappings against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from opbridge.errors import AttrError, OpbridgeError
from tests.conftest import requires_ort

from .test_shape import check, convert, i64, randn, run_converted

pytestmark = requires_ort

I64_MAX = np.iinfo(np.int64).max


@pytest.mark.parametrize("axis", [0, -1])
def test_concat(axis):
    a, b = randn(2, 3), randn(2, 3)
    check("Concat", [a, b], opset=13, axis=axis)


def test_concat_v1_default_axis():
    a, b = randn(2, 3), randn(2, 2)
    (got,) = run_converted("Concat", [a, b], opset=3)
    np.testing.assert_array_equal(got, np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("opset, split, n, attrs", [
    pytest.param(11, None, 3, {}, id="opset11-equal"),
    pytest.param(11, (1, 5), 2, {}, id="opset11-split-attr"),
    pytest.param(13, (2, 4), 2, {"axis": 0}, id="opset13-split-input"),
    pytest.param(13, None, 2, {"axis": -2}, id="opset13-equal-negative-axis"),
    pytest.param(18, None, 3, {"num_outputs": 3, "axis": 1}, id="opset18-num_outputs-uneven"),
    pytest.param(18, (0, 6), 2, {}, id="opset18-zero-piece"),
])
def test_split(opset, split, n, attrs):
    x = randn(6, 7)
    if split is not None and opset == 11:
        check("Split", [x], n, opset=opset, split=list(split), **attrs)
    elif split is not None:
        check("Split", [x, i64(split)], n, opset=opset, consts=(1,), **attrs)
    else:
        check("Split", [x], n, opset=opset, **attrs)


def test_split_uneven_before_18_is_an_error():
    with pytest.raises(OpbridgeError, match=r"does not split evenly into 4 outputs"):
        convert("Split", [randn(6, 2)], 4, opset=13)


def test_split18_needs_one_of_split_and_num_outputs():
    with pytest.raises(OpbridgeError, match=r"exactly one of the 'split' input and"):
        convert("Split", [randn(6, 2)], 2, opset=18)


@pytest.mark.parametrize("starts, ends, axes, steps", [
    pytest.param((1,), (3,), None, None, id="axes=absent"),
    pytest.param((-1, 0), (-5, I64_MAX), (1, 0), (-1, 2), id="negative-steps-sentinel"),
    pytest.param((0,), (100,), (-1,), (3,), id="clamped"),
])
def test_slice_v13(starts, ends, axes, steps):
    ins = [randn(4, 5), i64(starts), i64(ends)]
    if axes is not None:
        ins.append(i64(axes))
    if steps is not None:
        ins.append(i64(steps))
    check("Slice", ins, opset=13, consts=tuple(range(1, len(ins))))


def test_slice_v1_attributes():
    check("Slice", [randn(4, 5)], opset=9, starts=[1, -3], ends=[3, 1000], axes=[0, 1])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_v13(mode):
    check("Pad", [randn(3, 4), i64([1, 2, 2, 1]), np.array(1.5, np.float32)], opset=13,
          consts=(1, 2), mode=mode)


def test_pad_v18_axes_and_v19_wrap():
    check("Pad", [randn(3, 4), i64([1, 2]), None, i64([-1])], opset=18, consts=(1, 3))
    check("Pad", [randn(3, 4), i64([1, 1, 2, 0])], opset=19, consts=(1,), mode="wrap")


def test_pad_v2_attributes():
    check("Pad", [randn(3, 4)], opset=9, pads=[0, 1, 2, 0], value=2.0)


@pytest.mark.parametrize("axis", [None, 1])
def test_gather(axis):
    check("Gather", [randn(3, 4), i64([[0, -1], [2, 1]])], opset=13,
          **({} if axis is None else {"axis": axis}))
    check("GatherElements", [randn(3, 4), i64([[0, 1, 2, 0]])], opset=13)


def test_gather_nd():
    check("GatherND", [randn(2, 3, 4), i64([[1], [0]])], opset=13, batch_dims=1)
    check("GatherND", [randn(2, 3), i64([[0, 1], [1, 2]])], opset=11)


@pytest.mark.parametrize("reduction", [None, "add", "max"])
def test_scatter(reduction):
    attrs = {} if reduction is None else {"reduction": reduction}
    check("ScatterND", [randn(4, 3), i64([[1], [3]]), randn(2, 3)], opset=18, **attrs)
    check("ScatterElements", [randn(3, 3), i64([[1, 0, 2]]), randn(1, 3)], opset=18, **attrs)


def test_scatter_v9_is_scatter_elements():
    g = check("Scatter", [randn(3, 3), i64([[1, 0, 2]]), randn(1, 3)], opset=9, axis=0)
    assert g.op_counts() == {"ScatterElements": 1}


@pytest.mark.parametrize("shape, axes", [((3, 6), None), ((6, 2), (0, 1)), ((5,), (-1,))], ids=str)
def test_center_crop_pad(shape, axes):
    x = randn(4, 4) if axes != (-1,) else randn(2, 4)
    check("CenterCropPad", [x, i64(shape)], opset=18, consts=(1,),
          **({} if axes is None else {"axes": list(axes)}))


def test_dynamic_pads_name_the_input():
    with pytest.raises(OpbridgeError, match=r"input 1 \(pads\) 'in1' is computed at run time"):
        convert("Pad", [randn(3, 4), i64([1, 1, 1, 1])], opset=13)


def test_unknown_attribute():
    with pytest.raises(AttrError, match=r"attribute 'split'.*not an attribute of Split"):
        convert("Split", [randn(4, 2), i64([2, 2])], 2, opset=13, consts=(1,), split=[2, 2])


@pytest.mark.parametrize("axis, cond", [(None, [0, 1, 1, 0, 1]), (0, [1, 0, 1]), (-1, [0, 1]),
                                        (1, [0, 0, 0, 0])], ids=str)
def test_compress_with_constant_condition(axis, cond):
    check("Compress", [randn(3, 4), np.array(cond, bool)], opset=11, consts=(1,),
          **({} if axis is None else {"axis": axis}))


def test_compress_condition_past_the_axis():
    with pytest.raises(OpbridgeError, match=r"condition\) selects position 3, past the axis size 3"):
        convert("Compress", [randn(3, 2), np.array([0, 1, 0, 1], bool)], opset=11, consts=(1,), axis=0)
