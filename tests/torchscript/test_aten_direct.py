"""Kinds that torch's Python API seldom records (aliases, internal forms): called through
``torch.ops.aten`` so the trace holds exactly that kind, then compared with torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch

from .helpers import check

pytestmark = requires_torch


def _cases() -> dict[str, Any]:
    import torch

    A = torch.ops.aten  # noqa: N806
    w4 = torch.randn(4, 4, 3, 3)
    bn = (torch.rand(4) + 0.5, torch.randn(4), torch.randn(4), torch.rand(4) + 0.5)
    return {
        "relu6": lambda x: A.relu6(x),
        "gelu_": lambda x: A.gelu_(x.clone()),
        "tile": lambda x: A.tile(x, [2, 1]),
        "broadcast_to": lambda x: A.broadcast_to(x[:, :1], [2, 4, 5, 6]),
        "swapaxes": lambda x: A.swapaxes(x, 1, 3),
        "numpy_T": lambda x: A.numpy_T(x),
        "reshape_as": lambda x: A.reshape_as(x, x.new_zeros(8, 30)),
        "_unsafe_view": lambda x: A._unsafe_view(x.clone(), [8, 30]),
        "alias": lambda x: A.alias(x) + 1,
        "detach": lambda x: A.detach(x) * 2,
        "nansum": lambda x: A.nansum(x, [1]),
        "fmax": lambda x: A.fmax(x, x.flip(0)),
        "fmin": lambda x: A.fmin(x, x.flip(0)),
        "true_divide": lambda x: A.true_divide(x, 3.0),
        "divide": lambda x: A.divide(x, x.abs() + 1),
        "multiply": lambda x: A.multiply(x, x),
        "negative": lambda x: A.negative(x),
        "greater": lambda x: A.greater(x, 0.0),
        "less": lambda x: A.less(x, 0.0),
        "bitwise_not": lambda x: A.bitwise_not(x > 0),
        "concat": lambda x: A.concat([x, x], 1),
        "new_ones": lambda x: A.new_ones(x, [2, 3]),
        "ones": lambda x: A.ones([2, 3]) + x[0, 0, :2, :3],
        "full": lambda x: A.full([2, 3], 1.5) + x[0, 0, :2, :3],
        "frobenius_norm": lambda x: A.frobenius_norm(x, [2, 3]),
        "norm": lambda x: A.norm(x, 2, [1]),
        "_softmax": lambda x: A._softmax(x, 1, False),
        "_log_softmax": lambda x: A._log_softmax(x, -1, False),
        "native_layer_norm": lambda x: A.native_layer_norm(x, [6], None, None, 1e-5)[0],
        "_native_batch_norm_legit_no_training": lambda x: A._native_batch_norm_legit_no_training(
            x, bn[0], bn[1], bn[2], bn[3], 0.1, 1e-5)[0],
        "convolution": lambda x: A.convolution(x, w4, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        "max_pool2d_with_indices": lambda x: A.max_pool2d_with_indices(x, [2, 2], [2, 2])[0],
        "adaptive_max_pool3d": lambda x: A.adaptive_max_pool3d(x.unsqueeze(0), [1, 1, 1])[0],
        "addbmm": lambda x: A.addbmm(x[0, 0, :, :5], x[0], x[1].transpose(1, 2)[:, :6, :5]),
        "tensor_split": lambda x: (lambda a, b, c: a.sum() + b.sum() + c.sum())(*A.tensor_split(x, 3, 3)),
        "unsafe_split": lambda x: (lambda a, b: a - b)(*A.unsafe_split(x, 3, 3)),
        "native_channel_shuffle": lambda x: A.native_channel_shuffle(x, 2),
        "_to_copy": lambda x: A._to_copy(x, dtype=torch.float64),
        "reflection_pad3d": lambda x: A.reflection_pad3d(x.unsqueeze(0), [1, 1, 1, 0, 0, 1]),
        "replication_pad3d": lambda x: A.replication_pad3d(x.unsqueeze(0), [1, 1, 1, 0, 0, 1]),
        "_upsample_nearest_exact3d": lambda x: A._upsample_nearest_exact3d(x.unsqueeze(0), [3, 6, 9], None),
        "masked_fill_": lambda x: x.clone().masked_fill_(x > 0, 0.5),
        "dropout=eval": lambda x: A.dropout(x, 0.5, False),
        "feature_dropout=eval": lambda x: A.feature_dropout(x, 0.5, False),
        "alpha_dropout=eval": lambda x: A.alpha_dropout(x, 0.5, False),
    }


@pytest.mark.parametrize("case", list(_cases()) if HAVE_TORCH else [])
def test_aten_direct(case: str) -> None:
    import torch

    torch.manual_seed(13)
    check(_cases()[case], torch.randn(2, 4, 5, 6))
