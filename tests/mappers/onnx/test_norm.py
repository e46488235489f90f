"""ONNX normalisation mappings: converted one-node models against onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from opbridge.errors import OpbridgeError, UnsupportedOpError
from tests.conftest import requires_ort

from .test_conv import check, convert_node, randn

pytestmark = requires_ort


def _bn_inputs(shape: tuple[int, ...]) -> list[np.ndarray]:
    c = shape[1]
    return [randn(*shape), randn(c, seed=1), randn(c, seed=2), randn(c, seed=3),
            np.abs(randn(c, seed=4)) + 0.5]


@pytest.mark.parametrize("eps", [None, 1e-3], ids=["epsilon=absent", "epsilon=1e-3"])
@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 3, 4, 5)], ids=["rank2", "rank3", "rank4"])
def test_batchnorm(shape: tuple[int, ...], opset: int, eps: float | None) -> None:
    attrs = {} if eps is None else {"epsilon": eps}
    check("BatchNormalization", _bn_inputs(shape), opset=opset,
          initializers=[False, True, True, True, True], **attrs)


@pytest.mark.parametrize("momentum", [None, 0.7], ids=["momentum=absent", "momentum=0.7"])
@pytest.mark.parametrize("outputs", [1, 3], ids=["Y", "Y+running_mean+running_var"])
def test_batchnorm_training_mode(outputs: int, momentum: float | None) -> None:
    # onnxruntime's CPU kernel has no training mode; onnx.reference does
    from onnx.reference import ReferenceEvaluator

    import opbridge as ob

    attrs = {} if momentum is None else {"momentum": momentum}
    g, model, feeds = convert_node("BatchNormalization", _bn_inputs((2, 3, 4, 5)), outputs,
                                   opset=15, training_mode=1, **attrs)
    got = ob.interpret(g, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)
    for i, w in enumerate(want):
        np.testing.assert_allclose(got[f"out{i}"], w, rtol=1e-4, atol=1e-5)


def test_batchnorm_statistics_outputs_before_opset14_are_unsupported() -> None:
    with pytest.raises(UnsupportedOpError, match=r"BatchNormalization.*training outputs"):
        convert_node("BatchNormalization", _bn_inputs((2, 3, 4)), 3, opset=9,
                     initializers=[False, True, True, True, True])


@pytest.mark.parametrize("outputs", [1, 3], ids=["Y", "Y+Mean+InvStdDev"])
@pytest.mark.parametrize("bias", [True, False], ids=["B", "B=absent"])
@pytest.mark.parametrize("axis", [None, 1, -2], ids=["axis=absent", "axis=1", "axis=-2"])
def test_layernorm(axis: int | None, bias: bool, outputs: int) -> None:
    x = randn(2, 3, 4)
    tail = x.shape[(-1 if axis is None else axis) % 3:]
    attrs = {} if axis is None else {"axis": axis}
    ins = [x, randn(*tail, seed=1)] + ([randn(*tail, seed=2)] if bias else [])
    check("LayerNormalization", ins, outputs, opset=17, initializers=[False] + [True] * (len(ins) - 1),
          rtol=1e-4, **attrs)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 3, 4, 5)], ids=["1d", "2d"])
def test_instancenorm(shape: tuple[int, ...]) -> None:
    c = shape[1]
    check("InstanceNormalization", [randn(*shape), randn(c, seed=1), randn(c, seed=2)], opset=6,
          initializers=[False, True, True], rtol=1e-4, epsilon=1e-3)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_groupnorm_v21(groups: int) -> None:
    check("GroupNormalization", [randn(2, 4, 3, 3), randn(4, seed=1), randn(4, seed=2)], opset=21,
          initializers=[False, True, True], rtol=1e-4, num_groups=groups)


@pytest.mark.parametrize("const", [True, False], ids=["scale-constant", "scale-fed"])
def test_groupnorm_v18_per_group_scale(const: bool) -> None:
    # opset 18: one scale and bias per group; written here from the spec (y = norm * s[g] + b[g])
    x, s, b = randn(2, 6, 3), randn(3, seed=1), randn(3, seed=2)
    g, _, feeds = convert_node("GroupNormalization", [x, s, b], opset=18, num_groups=3,
                               initializers=[False, const, const])
    import opbridge as ob

    xg = x.astype(np.float64).reshape(2, 3, -1)
    norm = (xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)
    want = (norm * s[None, :, None] + b[None, :, None]).reshape(x.shape)
    np.testing.assert_allclose(ob.interpret(g, feeds)["out0"], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attrs", [{"size": 3}, {"size": 5, "alpha": 1e-2, "beta": 0.5, "bias": 2.0}],
                         ids=["size-only", "all-given"])
def test_lrn(attrs: dict[str, Any]) -> None:
    check("LRN", [randn(2, 6, 3, 4)], opset=13, **attrs)


@pytest.mark.parametrize("attrs", [{}, {"axis": 0, "p": 1}, {"axis": 1}], ids=["absent", "axis=0-p=1", "axis=1"])
def test_lpnormalization(attrs: dict[str, Any]) -> None:
    check("LpNormalization", [randn(3, 4, 5)], opset=1, **attrs)


@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("attrs", [{}, {"axes": [1, 2]}], ids=["axes=absent", "axes=1,2"])
def test_mvn(attrs: dict[str, Any], opset: int) -> None:
    check("MeanVarianceNormalization", [randn(2, 3, 4, 5)], opset=opset, rtol=1e-4, **attrs)


def test_groupnorm_stash_type_other_than_f32_is_unsupported() -> None:
    with pytest.raises(OpbridgeError, match=r"stash_type"):
        convert_node("GroupNormalization", [randn(1, 4, 3), randn(4), randn(4)], opset=21,
                     num_groups=2, stash_type=0, initializers=[False, True, True])
