"""Normalisation ops against the onnx reference (onnxruntime where noted)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import AttrError, ShapeError

from .onnx_ref import assert_close, run_ir, run_onnx_reference
from .test_conv import run_ort

RNG = np.random.default_rng(11)


def _x(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("eps", [None, 1e-3], ids=["epsilon=absent", "epsilon=1e-3"])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5), (1, 3, 2, 3, 4)],
                         ids=["rank2", "rank3", "rank4", "rank5"])
def test_batchnorm(shape: tuple[int, ...], eps: float | None) -> None:
    c = shape[1]
    args = [_x(*shape), _x(c), _x(c), _x(c), np.abs(_x(c)) + 0.1]
    attrs = {} if eps is None else {"epsilon": eps}
    assert_close(run_ir("BatchNormalization", args, **attrs)[0],
                 run_onnx_reference("BatchNormalization", args, **attrs)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stats", [False, True], ids=["Y", "Y+Mean+InvStdDev"])
@pytest.mark.parametrize("bias", [True, False], ids=["B", "B=absent"])
@pytest.mark.parametrize("axis", [None, 1, -2, 0], ids=["axis=absent", "axis=1", "axis=-2", "axis=0"])
def test_layernorm(axis: int | None, bias: bool, stats: bool) -> None:
    x = _x(2, 3, 4)
    ax = -1 if axis is None else axis
    tail = x.shape[ax % 3:]
    args = [x, _x(*tail), _x(*tail) if bias else None]
    attrs = {} if axis is None else {"axis": axis}
    n_out = 3 if stats else 1
    expected = run_onnx_reference("LayerNormalization", args, n_out, **attrs)
    got = run_ir("LayerNormalization", args, output_stats=stats, **attrs)
    assert len(got) == n_out
    for g, e in zip(got, expected):
        assert_close(g, e, rtol=1e-4, atol=1e-5)


def test_layernorm_broadcast_scale() -> None:
    x = _x(2, 3, 4)
    args = [x, _x(1, 4), _x(4)]
    assert_close(run_ir("LayerNormalization", args, axis=1)[0],
                 run_onnx_reference("LayerNormalization", args, axis=1)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("eps", [None, 1e-2], ids=["epsilon=absent", "epsilon=1e-2"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5), (1, 2, 3, 4, 2)], ids=["1d", "2d", "3d"])
def test_instancenorm(shape: tuple[int, ...], eps: float | None) -> None:
    c = shape[1]
    args = [_x(*shape), _x(c), _x(c)]
    attrs = {} if eps is None else {"epsilon": eps}
    assert_close(run_ir("InstanceNormalization", args, **attrs)[0],
                 run_onnx_reference("InstanceNormalization", args, **attrs)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("eps", [None, 1e-2], ids=["epsilon=absent", "epsilon=1e-2"])
@pytest.mark.parametrize("groups, shape", [(1, (2, 4, 3, 3)), (2, (2, 4, 3, 3)), (4, (2, 4, 3, 3)),
                                           (3, (1, 6, 5))], ids=["g1", "g2", "g4=C", "g3-1d"])
def test_groupnorm_opset21(groups: int, shape: tuple[int, ...], eps: float | None) -> None:
    c = shape[1]
    args = [_x(*shape), _x(c), _x(c)]
    attrs: dict[str, Any] = {"num_groups": groups}
    if eps is not None:
        attrs["epsilon"] = eps
    assert_close(run_ir("GroupNormalization", args, **attrs)[0],
                 run_onnx_reference("GroupNormalization", args, opset=21, **attrs)[0],
                 rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [
    {"size": 3}, {"size": 5, "alpha": 1e-2, "beta": 0.5, "bias": 2.0}, {"size": 1},
], ids=["size=3-rest-absent", "size=5-all-given", "size=1"])
def test_lrn(attrs: dict[str, Any]) -> None:
    # onnx.reference's LRN loops over the batch axis where it means channels; onnxruntime
    x = _x(2, 6, 3, 4)
    assert_close(run_ir("LRN", [x], **attrs)[0], run_ort("LRN", [x], **attrs)[0],
                 rtol=1e-5, atol=1e-6)


def test_lrn_even_size_against_the_spec_formula() -> None:
    # onnxruntime only takes odd sizes; the spec's formula written as a plain loop
    x = _x(1, 5, 2, 3).astype(np.float64)
    size, alpha, beta, bias = 4, 1e-1, 0.75, 1.0
    expected = np.empty_like(x)
    for c in range(5):
        lo, hi = max(0, c - (size - 1) // 2), min(4, c + -(-(size - 1) // 2))
        sq = sum(x[:, j] ** 2 for j in range(lo, hi + 1))
        expected[:, c] = x[:, c] / (bias + alpha / size * sq) ** beta
    assert_close(run_ir("LRN", [x], size=size, alpha=alpha)[0], expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attrs", [{}, {"axis": 0}, {"axis": 1, "p": 1}, {"p": 2, "axis": -2}],
                         ids=["absent", "axis=0", "axis=1-p=1", "axis=-2-p=2"])
def test_lpnormalization(attrs: dict[str, Any]) -> None:
    # onnx.reference computes the "L1" norm as sum(x), not sum(|x|); onnxruntime follows the spec
    x = _x(3, 4, 5)
    assert_close(run_ir("LpNormalization", [x], **attrs)[0],
                 run_ort("LpNormalization", [x], **attrs)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs", [{}, {"axes": [1]}, {"axes": [0, 1, 2, 3]}, {"axes": [-1, -2]}],
                         ids=["axes=absent", "axes=1", "axes=all", "axes=negative"])
def test_mvn(attrs: dict[str, Any]) -> None:
    x = _x(2, 3, 4, 5)
    # onnxruntime: the reference evaluator expands the function body and agrees; ORT is the
    # independent implementation
    assert_close(run_ir("MeanVarianceNormalization", [x], **attrs)[0],
                 run_ort("MeanVarianceNormalization", [x], opset=13, **attrs)[0], rtol=1e-4, atol=1e-5)


# -- errors --------------------------------------------------------------------------------
def _build(op: str, shapes: list[tuple[int, ...]], **attrs: Any) -> None:
    b = ob.GraphBuilder("bad")
    vals = [b.input(f"i{i}", "f32", s) for i, s in enumerate(shapes)]
    b.output(b.op(op, vals, name="n1", **attrs))
    b.build()


def test_batchnorm_channel_mismatch() -> None:
    with pytest.raises(ShapeError, match=r"node 'n1' \(BatchNormalization\).*'input_var'.*\[3\]"):
        _build("BatchNormalization", [(1, 3, 4, 4), (3,), (3,), (3,), (4,)])


def test_groupnorm_groups_must_divide_channels() -> None:
    with pytest.raises(AttrError, match=r"param 'num_groups'.*does not divide the 6 channels"):
        _build("GroupNormalization", [(1, 6, 4), (6,), (6,)], num_groups=4)


def test_groupnorm_num_groups_required() -> None:
    with pytest.raises(AttrError, match=r"param 'num_groups': required"):
        _build("GroupNormalization", [(1, 6, 4), (6,), (6,)])


def test_layernorm_axis_out_of_range() -> None:
    with pytest.raises(AttrError, match=r"param 'axis' = 3"):
        _build("LayerNormalization", [(2, 3, 4), (4,)], axis=3)


def test_lrn_size_required() -> None:
    with pytest.raises(AttrError, match=r"\(LRN\) param 'size': required"):
        _build("LRN", [(1, 3, 4, 4)])
