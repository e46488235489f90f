"""grid_sample (every mode x padding x align_corners, 2-D and 3-D) and fold vs torch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import requires_torch

from .helpers import check

pytestmark = requires_torch

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def _grid(*shape: int, spread: float = 1.25):
    import torch

    g = torch.Generator().manual_seed(18)
    return (torch.rand(*shape, generator=g) * 2 - 1) * spread


@pytest.mark.parametrize("align", [False, True], ids=lambda a: f"align_corners={a}")
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", MODES)
def test_grid_sample_2d(mode, padding, align):
    import torch
    import torch.nn.functional as F  # noqa: N812

    x = torch.randn(2, 3, 5, 6)
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align),
          x, _grid(2, 4, 7, 2))


@pytest.mark.parametrize("align", [False, True], ids=lambda a: f"align_corners={a}")
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d(mode, padding, align):
    import torch
    import torch.nn.functional as F  # noqa: N812

    x = torch.randn(2, 2, 3, 4, 5)
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align),
          x, _grid(2, 2, 3, 4, 3))


def test_grid_sample_defaults_and_affine_grid():
    """The usual spatial-transformer pair; grid_sample's arguments absent (bilinear, zeros,
    align_corners False)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    theta = torch.tensor([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]])
    grid = F.affine_grid(theta, [1, 3, 6, 8], align_corners=False)
    check(lambda x, g: F.grid_sample(x, g), torch.randn(1, 3, 6, 8), grid)


@pytest.mark.parametrize("kwargs, image", [
    ({"kernel_size": 3}, (6, 7)),
    ({"kernel_size": (2, 3), "stride": (2, 1), "padding": 1}, (7, 6)),
    ({"kernel_size": 2, "dilation": (2, 1), "padding": (1, 0), "stride": 2}, (8, 9)),
], ids=["kernel", "stride,padding", "dilation"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_fold(kwargs, image, batched):
    """F.fold (aten::col2im) of the columns F.unfold makes, overlaps summed."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    cols = F.unfold(torch.randn(2, 3, *image), **kwargs)
    if not batched:
        cols = cols[0]
    check(lambda c: F.fold(c, image, **kwargs), cols)


def _aten_cases() -> dict[str, Any]:
    import torch

    A = torch.ops.aten  # noqa: N806
    g2, g3 = _grid(2, 3, 4, 2), _grid(2, 2, 3, 4, 3)
    return {
        "grid_sampler_2d": (lambda x: A.grid_sampler_2d(x, g2, 2, 1, False), (2, 3, 5, 6)),
        "grid_sampler_3d": (lambda x: A.grid_sampler_3d(x, g3, 0, 2, True), (2, 2, 3, 4, 5)),
        "col2im": (lambda c: A.col2im(c, [4, 5], [2, 2], [1, 1], [0, 1], [1, 2]), (2, 12, 9)),
    }


@pytest.mark.parametrize("case", ["grid_sampler_2d", "grid_sampler_3d", "col2im"])
def test_aten_direct(case):
    """The kinds themselves (the trace of F.grid_sample records aten::grid_sampler)."""
    import torch

    fn, shape = _aten_cases()[case]
    check(fn, torch.randn(*shape))


_LIBS: list[Any] = []
DEFORM_SCHEMA = ("deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
                 "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
                 "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor")


def _deform_conv2d_op() -> Any:
    """torch.ops.torchvision.deform_conv2d: torchvision's own where its C++ extension loads; else
    the same schema computed by onnx.reference's DeformConv (the ONNX op is torchvision's), so
    that a trace records the node as torchvision writes it."""
    import torch

    if not hasattr(torch.ops.torchvision, "deform_conv2d"):
        lib = torch.library.Library("torchvision", "FRAGMENT")
        lib.define(DEFORM_SCHEMA)
        lib.impl("deform_conv2d", _reference_deform_conv2d, "CPU")
        _LIBS.append(lib)  # the op lives as long as the library object
    return torch.ops.torchvision.deform_conv2d


def _reference_deform_conv2d(x, w, offset, mask, bias, sh, sw, ph, pw, dh, dw, groups, offset_groups,
                             use_mask):
    import numpy as np
    import torch
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    names = ["X", "W", "offset", "B"] + (["mask"] if use_mask else [])
    arrays = [t.detach().numpy() for t in (x, w, offset, bias)] + ([mask.numpy()] if use_mask else [])
    node = helper.make_node("DeformConv", names, ["Y"], strides=[sh, sw], pads=[ph, pw, ph, pw],
                            dilations=[dh, dw], group=groups, offset_group=offset_groups)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, a.shape)
                                            for n, a in zip(names, arrays)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    (y,) = ReferenceEvaluator(model).run(None, dict(zip(names, arrays)))
    return torch.from_numpy(np.ascontiguousarray(y))


@pytest.mark.parametrize("stride, pad, dil, groups, ogroups, use_mask", [
    ((1, 1), (0, 0), (1, 1), 1, 1, False),
    ((2, 1), (1, 2), (1, 2), 2, 2, True),
], ids=["plain", "stride,pad,dilation,groups,offset_groups,mask"])
def test_torchvision_deform_conv2d(stride, pad, dil, groups, ogroups, use_mask):
    import torch

    op = _deform_conv2d_op()
    g = torch.Generator().manual_seed(19)
    x, w, b = torch.randn(2, 4, 6, 5, generator=g), torch.randn(6, 4 // groups, 3, 3, generator=g), \
        torch.randn(6, generator=g)
    oh = (6 + 2 * pad[0] - dil[0] * 2 - 1) // stride[0] + 1
    ow = (5 + 2 * pad[1] - dil[1] * 2 - 1) // stride[1] + 1
    offset = (torch.rand(2, ogroups * 18, oh, ow, generator=g) * 3 - 1.5)
    mask = torch.rand(2, ogroups * 9, oh, ow, generator=g) if use_mask else torch.zeros(0)

    def fn(x):
        return op(x, w, offset, mask, b, *stride, *pad, *dil, groups, ogroups, use_mask)

    graph = check(fn, x)
    assert [n.op for n in graph.nodes] == ["DeformConv"]
