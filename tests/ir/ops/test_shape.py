"""Shape ops (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Shape, Size, DepthToSpace,
SpaceToDepth, Tile, ReverseSequence) against onnx.reference."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import AttrError, ShapeError

from .onnx_ref import assert_close, run_ir, run_onnx_reference

RNG = np.random.default_rng(0)


def _x(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _i64(v) -> np.ndarray:
    return np.array(v, dtype=np.int64)


def _same(op: str, x: np.ndarray, ir_attrs: dict, onnx_inputs: list, **onnx_attrs) -> None:
    got = run_ir(op, [x], **ir_attrs)[0]
    want = run_onnx_reference(op, [x, *onnx_inputs], **onnx_attrs)[0]
    assert_close(got, want)


@pytest.mark.parametrize("src, shape, allowzero", [
    pytest.param((2, 3, 4), (6, 4), None, id="plain-allowzero=absent"),
    pytest.param((2, 3, 4), (-1, 4), None, id="minus1-first"),
    pytest.param((2, 3, 4), (2, -1), None, id="minus1-last"),
    pytest.param((2, 3, 4), (0, -1), None, id="copy0-and-minus1"),
    pytest.param((2, 3, 4), (0, 0, 2, 2), 0, id="copy0-twice-allowzero=0"),
    pytest.param((0, 3), (3, 0), 1, id="allowzero=1-real-zero"),
    pytest.param((2, 3, 4), (24,), None, id="rank1"),
    pytest.param((1,), (), None, id="to-scalar"),
])
def test_reshape(src, shape, allowzero):
    x = _x(*src)
    attrs = {} if allowzero is None else {"allowzero": allowzero}
    _same("Reshape", x, {"shape": shape, **attrs}, [_i64(shape)], **attrs)


@pytest.mark.parametrize("shape, match", [
    pytest.param((5, 5), r"cannot reshape \[2, 3, 4\] \(24 elements\)", id="size-mismatch"),
    pytest.param((-1, 5), r"cannot reshape", id="minus1-indivisible"),
    pytest.param((-1, -1), r"more than one -1", id="two-minus1"),
    pytest.param((-2, 12), r"below -1", id="below-minus1"),
    pytest.param((0, 0, 0, 0), r"copies a dim", id="copy0-past-rank"),
])
def test_reshape_errors(shape, match):
    with pytest.raises(AttrError, match=rf"node 'node' \(Reshape\) param 'shape': .*{match}"):
        run_ir("Reshape", [_x(2, 3, 4)], shape=shape)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    attrs = {} if axis is None else {"axis": axis}
    _same("Flatten", _x(2, 3, 4), attrs, [], **attrs)


def test_flatten_axis_out_of_range():
    with pytest.raises(AttrError, match=r"\(Flatten\) param 'axis'"):
        run_ir("Flatten", [_x(2, 3)], axis=3)


@pytest.mark.parametrize("axes", [None, (0,), (-1,), (0, 3), (3, -4)],
                         ids=lambda a: f"axes={a}")
def test_squeeze(axes):
    x = _x(1, 3, 4, 1)
    want = run_onnx_reference("Squeeze", [x] + ([] if axes is None else [_i64(axes)]))[0]
    got = run_ir("Squeeze", [x], **({} if axes is None else {"axes": axes}))[0]
    assert_close(got, want)


@pytest.mark.parametrize("axes, match", [
    pytest.param((1,), r"size 3, not 1", id="not-size-1"),
    pytest.param((4,), r"out of range for rank 4", id="out-of-range"),
    pytest.param((0, -4), r"names an axis twice", id="repeated"),
])
def test_squeeze_errors(axes, match):
    with pytest.raises(AttrError, match=rf"\(Squeeze\) param 'axes': .*{match}"):
        run_ir("Squeeze", [_x(1, 3, 4, 1)], axes=axes)


@pytest.mark.parametrize("axes", [(0,), (-1,), (1, 3), (4, 0), (-1, -2)],
                         ids=lambda a: f"axes={a}")
def test_unsqueeze(axes):
    x = _x(2, 3, 4)
    _same("Unsqueeze", x, {"axes": axes}, [_i64(axes)])


def test_unsqueeze_errors():
    with pytest.raises(AttrError, match=r"\(Unsqueeze\) param 'axes': axis 5"):
        run_ir("Unsqueeze", [_x(2, 3)], axes=(5,))
    with pytest.raises(AttrError, match=r"\(Unsqueeze\) param 'axes': required"):
        run_ir("Unsqueeze", [_x(2, 3)])


@pytest.mark.parametrize("perm", [None, (0, 2, 1, 3), (3, 2, 1, 0), (1, 0, 3, 2)],
                         ids=lambda p: f"perm={p}")
def test_transpose(perm):
    attrs = {} if perm is None else {"perm": perm}
    _same("Transpose", _x(2, 3, 4, 5), attrs, [], **attrs)


@pytest.mark.parametrize("perm", [(0, 1, 1), (0, 1), (0, 1, 3)], ids=str)
def test_transpose_not_a_permutation(perm):
    with pytest.raises(AttrError, match=r"node 'node' \(Transpose\) param 'perm': .* not a permutation"):
        run_ir("Transpose", [_x(2, 3, 4)], perm=perm)


@pytest.mark.parametrize("src, shape", [
    ((3, 1), (2, 3, 4)), ((3, 1), (3, 1)), ((1, 4), (1,)), ((2, 1, 4), (1, 3, 1)), ((), (2, 2)),
], ids=str)
def test_expand(src, shape):
    _same("Expand", _x(*src), {"shape": shape}, [_i64(shape)])


def test_expand_incompatible():
    with pytest.raises(AttrError, match=r"\(Expand\) param 'shape': .*does not broadcast"):
        run_ir("Expand", [_x(3, 2)], shape=(3, 4))


@pytest.mark.parametrize("start, end", [
    (None, None), (1, None), (-1, None), (None, -1), (1, 3), (-10, 10), (3, 1),
], ids=lambda v: str(v))
def test_shape(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    _same("Shape", _x(2, 3, 4, 5), attrs, [], **attrs)


def test_shape_and_size_dtype():
    assert run_ir("Shape", [_x(2, 3)])[0].dtype == np.int64
    _same("Size", _x(2, 3, 4), {}, [])


@pytest.mark.parametrize("op", ["DepthToSpace", "SpaceToDepth"])
@pytest.mark.parametrize("mode", [None, "DCR", "CRD"], ids=lambda m: f"mode={m}")
@pytest.mark.parametrize("b", [2, 3])
def test_depth_space(op, mode, b):
    x = _x(2, 2 * b * b, 3, 3) if op == "DepthToSpace" else _x(2, 3, 2 * b, 3 * b)
    attrs = {"blocksize": b} | ({} if mode is None else {"mode": mode})
    # onnx's reference implements SpaceToDepth's mode from opset 28 on (the first to have it)
    opset = 28 if op == "SpaceToDepth" and mode else 21
    got = run_ir(op, [x], **attrs)[0]
    assert_close(got, run_onnx_reference(op, [x], opset=opset, **attrs)[0])


def test_depth_space_roundtrip_crd():
    x = _x(1, 8, 3, 3)
    y = run_ir("DepthToSpace", [x], blocksize=2, mode="CRD")[0]
    assert_close(run_ir("SpaceToDepth", [y], blocksize=2, mode="CRD")[0], x)


def test_depth_to_space_indivisible():
    with pytest.raises(AttrError, match=r"\(DepthToSpace\) param 'blocksize': channels 6"):
        run_ir("DepthToSpace", [_x(1, 6, 2, 2)], blocksize=2)


@pytest.mark.parametrize("src, reps", [((2, 3), (1, 1)), ((2, 3), (2, 3)), ((2, 1, 3), (1, 0, 2)),
                                       ((4,), (3,))], ids=str)
def test_tile(src, reps):
    _same("Tile", _x(*src), {"repeats": reps}, [_i64(reps)])


def test_tile_wrong_length():
    with pytest.raises(AttrError, match=r"\(Tile\) param 'repeats': has 1 entries"):
        run_ir("Tile", [_x(2, 3)], repeats=(2,))


@pytest.mark.parametrize("batch_axis, time_axis", [(None, None), (1, 0), (0, 1)], ids=str)
def test_reverse_sequence(batch_axis, time_axis):
    attrs = {k: v for k, v in (("batch_axis", batch_axis), ("time_axis", time_axis)) if v is not None}
    x = _x(4, 4, 3)
    lens = _i64([4, 3, 1, 0])
    got = run_ir("ReverseSequence", [x, lens], **attrs)[0]
    assert_close(got, run_onnx_reference("ReverseSequence", [x, lens], **attrs)[0])


def test_reverse_sequence_same_axes():
    with pytest.raises(AttrError, match=r"\(ReverseSequence\) param 'time_axis'"):
        run_ir("ReverseSequence", [_x(3, 3), _i64([1, 2, 3])], batch_axis=0, time_axis=0)


def test_symbolic_input_reshape_copies():
    b = ob.GraphBuilder("sym")
    x = b.input("x", "f32", ("N", 3, 4))
    y = b.op("Reshape", [x], shape=(0, 12))
    assert y.shape == ("N", 12)
    assert b.op("Reshape", [x], shape=(-1, 4)).shape == ("3*N", 4)  # 12*N elements / 4
    # 12*N / 5 is whole for some N only: the dim floors, and a run whose N does not divide fails
    assert b.op("Reshape", [x], shape=(-1, 5)).shape == ("(12*N)//5", 5)
    z = b.input("z", "f32", ("N", "M"))
    with pytest.raises(AttrError, match=r"symbolic input"):
        b.op("Reshape", [z], shape=(0, -1, 5))  # N*M / (5*N): no constant to floor-divide by


def test_shape_ops_keep_integer_and_bool_dtypes():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4) % 2 == 0
    assert_close(run_ir("Transpose", [x])[0], run_onnx_reference("Transpose", [x])[0])
    xi = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert_close(run_ir("Reshape", [xi], shape=(3, 2))[0], xi.reshape(3, 2))


def test_error_types():
    with pytest.raises(ShapeError, match=r"\(DepthToSpace\): input has rank 3"):
        run_ir("DepthToSpace", [_x(1, 4, 2)], blocksize=2)
