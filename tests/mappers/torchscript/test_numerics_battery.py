"""Small torch modules with tricky semantics, exported, converted and run in the IR interpreter,
each compared with torch running the same module (the reference).

The cases aim at the places where torch's meaning is easy to get wrong: integer and negative
division, type promotion, unbiased statistics, reductions returning indices, optional
arguments, uneven splits, resize/pad modes, transposed-convolution output padding and
bidirectional/batch-first recurrent layers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import HAVE_TORCH, requires_torch
from tests.torchscript.helpers import check

pytestmark = requires_torch

#: (module or function, its example inputs[, export mode])
Case = tuple[Any, ...]


def _f(*shape: int, scale: float = 2.0, seed: int = 0) -> Callable[[], tuple[Any, ...]]:
    def make() -> tuple[Any, ...]:
        import torch

        g = torch.Generator().manual_seed(seed)
        return (torch.randn(*shape, generator=g) * scale,)

    return make


def _ints(*shape: int, lo: int = -9, hi: int = 10, seed: int = 0) -> Callable[[], tuple[Any, ...]]:
    def make() -> tuple[Any, ...]:
        import torch

        g = torch.Generator().manual_seed(seed)
        x = torch.randint(lo, hi, shape, generator=g)
        return (x,)

    return make


def _two(a: Callable[[], tuple[Any, ...]], b: Callable[[], tuple[Any, ...]]) -> Callable[[], tuple[Any, ...]]:
    return lambda: a() + b()


def _nonzero_ints(*shape: int, seed: int = 1) -> Callable[[], tuple[Any, ...]]:
    def make() -> tuple[Any, ...]:
        import torch

        g = torch.Generator().manual_seed(seed)
        x = torch.randint(1, 5, shape, generator=g)
        sign = torch.randint(0, 2, shape, generator=g) * 2 - 1
        return (x * sign,)

    return make


#: dividends and divisors where floor division is easy to get wrong: infinities, signed zeros,
#: nan, exact multiples, quotients just below an integer
_EDGES = (float("-inf"), -3.0, -2.1, -0.7, -0.5, -0.0, 0.0, 0.5, 0.7, 2.1, 3.0, float("inf"), float("nan"))


def _edge_grid() -> tuple[Any, ...]:
    """Every pair of ``_EDGES``: x down the rows, y along the columns."""
    import torch

    v = torch.tensor(_EDGES)
    n = len(_EDGES)
    return (v[:, None].expand(n, n).contiguous(), v[None, :].expand(n, n).contiguous())


def _arith() -> dict[str, Case]:
    import torch

    ii = _two(_ints(3, 4), _nonzero_ints(3, 4))
    ff = _two(_f(3, 4), _f(3, 4, seed=5))
    return {
        "floor_divide=int-neg": (lambda x, y: torch.floor_divide(x, y), ii),
        "floor_divide=int-scalar-neg": (lambda x, y: torch.floor_divide(x, -3), ii),
        "floor_divide=float-neg": (lambda x, y: torch.floor_divide(x, -0.7), ff),
        "floordiv-operator=int": (lambda x, y: x // y, ii),
        "div-floor=int-neg": (lambda x, y: torch.div(x, y, rounding_mode="floor"), ii),
        "div-trunc=int-neg": (lambda x, y: torch.div(x, y, rounding_mode="trunc"), ii),
        "div-true=int": (lambda x, y: x / y, ii),
        "div-true=int-scalar": (lambda x, y: x / 4, ii),
        "floor_divide=float-exact-multiples": (lambda x, y: torch.floor_divide(x.round() * 0.1, 0.1 * y.sign()),
                                               _two(_f(6, 7, scale=30), _f(6, 7, seed=2))),
        "remainder=float-exact-multiples": (lambda x, y: torch.remainder(x.round() * 0.1, 0.7),
                                            _two(_f(6, 7, scale=30), _f(6, 7, seed=2))),
        "div-floor=float-by-zero": (lambda x, y: torch.div(x, y * (y > 0), rounding_mode="floor"), ff),
        "floor_divide=float-edges": (lambda x, y: torch.floor_divide(x, y), _edge_grid),
        "floordiv-operator=float-edges": (lambda x, y: x // y, _edge_grid),
        "div-floor=float-edges": (lambda x, y: torch.div(x, y, rounding_mode="floor"), _edge_grid),
        "floor_divide=float-by-inf-scalar": (lambda x, y: torch.floor_divide(x, float("-inf")), ff),
        "floor_divide=f64-edges": (lambda x, y: torch.floor_divide(x.double(), y.double()), _edge_grid),
        "remainder=int-neg": (lambda x, y: torch.remainder(x, y), ii),
        "remainder=int-scalar-neg": (lambda x, y: x % -4, ii),
        "remainder=float-neg": (lambda x, y: torch.remainder(x, -0.7), ff),
        "fmod=int-neg": (lambda x, y: torch.fmod(x, y), ii),
        "fmod=float-neg-divisor": (lambda x, y: torch.fmod(x, -0.7), ff),
        "mul=int-tensor-float-scalar": (lambda x, y: x * 1.5, ii),
        "mul=int-tensor-float-tensor": (lambda x, y: x * y.float(), ii),
        "add=int-tensor-float-tensor": (lambda x, y: x + torch.full((3, 4), 0.25), ii),
        "add=int32-int64": (lambda x, y: x.int() + y, ii),
        "add=f16-f32-0d": (lambda x, y: x.half() + torch.tensor(0.5), ff),
        "add=bool-int": (lambda x, y: (x > 0) + y, ii),
        "mul=int-tensor-float-0d": (lambda x, y: x * torch.tensor(1.5), ii),
        "mul=f16-f64-0d": (lambda x, y: x.half() * torch.tensor(1.5, dtype=torch.float64), ii),
        "add=int32-int64-0d": (lambda x, y: x.int() + torch.tensor(7), ii),
        "add=int32-0d-int64-tensor": (lambda x, y: x.int()[0, 0] + y, ii),
        "div=int-0d-tensors": (lambda x, y: x[0, 0] / y[0, 0], ii),
        "add=uint8-int8": (lambda x, y: x.abs().to(torch.uint8) + y.to(torch.int8), ii),
        "add=f16-bf16": (lambda x, y: x.half() + y.bfloat16(), ff),
        "sub=uint8": (lambda x, y: x.abs().to(torch.uint8) - 1, ii),
        "pow=int-exp3": (lambda x, y: x ** 3, ii),
        "pow=float-int-exp3": (lambda x, y: x ** 3, ff),
        "pow=float-neg-int-exp": (lambda x, y: (x.abs() + 0.5) ** -2, ff),
        "pow=int-float-exp": (lambda x, y: x.abs() ** 0.5, ii),
        "pow=scalar-base": (lambda x, y: 2 ** x, ff),
        "pow=int-scalar-base": (lambda x, y: 2 ** x.abs(), ii),
        "pow=int-tensor-exp": (lambda x, y: x ** y.abs(), ii),
        "pow=exp0": (lambda x, y: x ** 0, ff),
        "rsub=int": (lambda x, y: 1 - x, ii),
        "true_divide=by-zero": (lambda x, y: x / torch.zeros(3, 4), ff),
    }


def _reduce() -> dict[str, Case]:
    import torch

    x345 = _f(3, 4, 5)
    return {
        "std=default": (lambda x: torch.std(x), x345),
        "var=default": (lambda x: torch.var(x), x345),
        "std=unbiased-false": (lambda x: torch.std(x, unbiased=False), x345),
        "var=dim-unbiased": (lambda x: torch.var(x, 1, unbiased=True), x345),
        "var=dims-keepdim": (lambda x: torch.var(x, (0, 2), keepdim=True), x345),
        "std=correction-0": (lambda x: torch.std(x, dim=-1, correction=0), x345),
        "std=correction-2": (lambda x: torch.std(x, dim=-1, correction=2), x345),
        "var=single-element": (lambda x: torch.var(x[:, :1], dim=1), x345),
        "var_mean": (lambda x: torch.var_mean(x, dim=1), x345),
        "std_mean": (lambda x: torch.std_mean(x, dim=(1, 2), keepdim=True), x345),
        "mean=dims-keepdim": (lambda x: x.mean((0, 2), keepdim=True), x345),
        "mean=neg-dim": (lambda x: x.mean(-1), x345),
        "mean=int-dtype-arg": (lambda x: (x * 10).long().mean(1, dtype=torch.float32), x345),
        "sum=bool": (lambda x: (x > 0).sum(1), x345),
        "sum=int32-keepdim": (lambda x: (x * 10).int().sum(-1, keepdim=True), x345),
        "prod=dim": (lambda x: x.prod(1), x345),
        "max=dim-indices": (lambda x: torch.max(x, 1), x345),
        "max=dim-keepdim": (lambda x: torch.max(x, -1, keepdim=True), x345),
        "min=dim-indices-ties": (lambda x: torch.min(x.round(), 0), x345),
        "max=dim-ties-int": (lambda x: torch.max((x > 0).long(), 1), x345),
        "max=all": (lambda x: torch.max(x), x345),
        "argmax=none": (lambda x: torch.argmax(x), x345),
        "argmax=keepdim": (lambda x: torch.argmax(x, 2, keepdim=True), x345),
        "amax=dims": (lambda x: torch.amax(x, (0, 1)), x345),
        "logsumexp": (lambda x: torch.logsumexp(x, 1), x345),
        "cumsum=int": (lambda x: torch.cumsum((x * 3).long(), 1), x345),
        "norm=p2-dim": (lambda x: torch.norm(x, dim=1), x345),
        "aminmax": (lambda x: torch.aminmax(x, dim=1), x345),
    }


def _elementwise() -> dict[str, Case]:
    import torch

    x = _f(2, 3, 4)
    return {
        "clamp=min-none": (lambda x: torch.clamp(x, max=0.5), x),
        "clamp=max-none": (lambda x: torch.clamp(x, min=-0.5), x),
        "clamp=int": (lambda x: torch.clamp((x * 10).long(), -3, 4), x),
        "clamp=tensor-bounds": (lambda x: torch.clamp(x, torch.zeros(4), torch.ones(4)), x),
        "clamp=min-gt-max": (lambda x: torch.clamp(x, 1.0, -1.0), x),
        "round=half-even": (lambda x: torch.round(x.round() + 0.5), x),
        "round=decimals": (lambda x: torch.round(x, decimals=1), x),
        "sign=int": (lambda x: torch.sign((x * 3).long()), x),
        "abs=int": (lambda x: torch.abs((x * 3).long()), x),
        "neg=int": (lambda x: -(x * 3).long(), x),
        "exp=int": (lambda x: torch.exp((x).long()), x),
        "sigmoid=int": (lambda x: torch.sigmoid((x * 3).long()), x),
        "where=int-float": (lambda x: torch.where(x > 0, (x * 3).long(), 0.5), x),
        "where=int-scalars": (lambda x: torch.where(x > 0, 1, 0), x),
        "masked_fill=int": (lambda x: (x * 3).long().masked_fill(x > 0, 7), x),
        "softmax=dtype-arg": (lambda x: torch.softmax(x.half(), -1, dtype=torch.float32), x),
        "log_softmax=dim0": (lambda x: torch.log_softmax(x, 0), x),
        "softmax=int-dtype-arg": (lambda x: torch.softmax((x * 3).long(), 1, dtype=torch.float32), x),
        "hardtanh=bounds": (lambda x: torch.nn.functional.hardtanh(x, -0.3, 0.7), x),
        "leaky_relu=slope": (lambda x: torch.nn.functional.leaky_relu(x, 0.2), x),
        "gelu=tanh": (lambda x: torch.nn.functional.gelu(x, approximate="tanh"), x),
        "lerp=scalar": (lambda x: torch.lerp(x, x.flip(0), 0.3), x),
        "addcdiv": (lambda x: torch.addcdiv(x, x, x.abs() + 1, value=-0.5), x),
    }


def _shape() -> dict[str, Case]:
    import torch

    x = _f(2, 3, 4, 5)
    return {
        "flatten=default": (lambda x: torch.flatten(x), x),
        "flatten=1-2": (lambda x: torch.flatten(x, 1, 2), x),
        "flatten=neg-range": (lambda x: torch.flatten(x, -3, -2), x),
        "flatten=start-only": (lambda x: x.flatten(2), x),
        "flatten=same-dim": (lambda x: x.flatten(1, 1), x),
        "expand=minus-one": (lambda x: x[:, :1].expand(-1, 3, -1, -1), x),
        "expand=new-leading": (lambda x: x[0, 0].expand(2, 3, 4, 5), x),
        "repeat=more-dims": (lambda x: x[0, 0].repeat(2, 1, 3), x),
        "repeat=same-rank": (lambda x: x.repeat(1, 2, 1, 2), x),
        "chunk=uneven": (lambda x: torch.chunk(x, 2, 2), _f(2, 3, 5)),
        "chunk=more-than-size": (lambda x: torch.chunk(x, 4, 1), _f(2, 3, 5)),
        "chunk=fewer-chunks": (lambda x: torch.chunk(x, 4, 2), _f(2, 3, 6)),
        "split=uneven-size": (lambda x: torch.split(x, 2, -1), _f(2, 3, 5)),
        "split=sizes": (lambda x: torch.split(x, [1, 4], -1), _f(2, 3, 5)),
        "tensor_split=sections": (lambda x: torch.tensor_split(x, 3, dim=2), _f(2, 3, 7)),
        "tensor_split=indices": (lambda x: torch.tensor_split(x, [1, 4], dim=2), _f(2, 3, 7)),
        "tensor_split=index-tensor": (lambda x: torch.tensor_split(x, torch.tensor([1, 4]), dim=2), _f(2, 3, 7)),
        "unbind": (lambda x: torch.unbind(x, 1), _f(2, 3, 5)),
        "index=tensor": (lambda x: x[torch.tensor([2, 0, -1])], _f(4, 3)),
        "index=two-tensors": (lambda x: x[torch.tensor([0, 2]), torch.tensor([1, 0])], _f(4, 3)),
        "index=slice-then-tensor": (lambda x: x[:, torch.tensor([2, 0])], _f(4, 3)),
        "index=bool-mask-const": (lambda x: x[:, torch.tensor([True, False, True])], _f(4, 3)),
        "index=two-tensors-broadcast": (
            lambda x: x[:, torch.tensor([[0], [2]]), torch.tensor([1, -1])], _f(2, 4, 3)),
        "index=tensors-then-slice": (lambda x: x[torch.tensor([1, 0]), torch.tensor([3, -2])], _f(2, 4, 3)),
        "index=tensors-apart": (lambda x: x[torch.tensor([[1], [0]]), :, torch.tensor([2, -1, 0])], _f(2, 4, 3)),
        "index=tensors-apart-4d": (lambda x: x[:, torch.tensor([1, 0]), :, torch.tensor([2, 2])], _f(2, 3, 4, 3)),
        "index=bool-mask-2d-const": (lambda x: x[torch.tensor([[True, False, True], [False, True, True]])],
                                     _f(2, 3, 4)),
        "index_put=tensor": (lambda x: x.index_put((torch.tensor([0, 2]),), torch.tensor(9.0)), _f(4, 3)),
        "index_put=accumulate": (
            lambda x: x.index_put((torch.tensor([0, 0, 2]),), torch.ones(3, 3), accumulate=True), _f(4, 3)),
        "index_put=setitem": (lambda x: _setitem(x), _f(4, 3)),
        "index_put=two-tensors": (
            lambda x: x.index_put((torch.tensor([0, 3]), torch.tensor([2, -1])), torch.tensor([5.0, 6.0])),
            _f(4, 3)),
        "index_put=two-tensors-accumulate": (
            lambda x: x.index_put((torch.tensor([1, 1]), torch.tensor([0, 0])), torch.tensor(2.0),
                                  accumulate=True), _f(4, 3)),
        "index_put=run-time-tensors": (
            lambda x, i, j: x.index_put((i, j), torch.tensor([5.0, 6.0, 7.0])), _run_time_indices),
        "index_put=run-time-tensors-accumulate-repeats": (
            lambda x, i, j: x.index_put((i, i.clamp(max=2)), torch.tensor(1.5), accumulate=True),
            _run_time_indices),
        "index_put=run-time-tensors-apart": (lambda x, i, j: _setitem_apart(x, i, j), _run_time_indices),
        "index=run-time-tensors": (lambda x, i, j: x[i, j] + x[:, j][i], _run_time_indices),
        "select=neg": (lambda x: x.select(1, -1), _f(4, 3)),
        "slice=step": (lambda x: x[:, ::2], _f(4, 5)),
        "slice=neg-bounds": (lambda x: x[-3:-1], _f(4, 5)),
        "narrow": (lambda x: x.narrow(1, 1, 3), _f(4, 5)),
        "gather": (lambda x: torch.gather(x, 1, torch.tensor([[0, 2], [1, 1], [4, 0], [3, 3]])), _f(4, 5)),
        "roll=multi": (lambda x: torch.roll(x, (1, -2), (0, 1)), _f(4, 5)),
        "flip=multi": (lambda x: torch.flip(x, (0, 1)), _f(4, 5)),
        "triu=diag": (lambda x: torch.triu(x, 1), _f(4, 5)),
        "tril=neg-diag": (lambda x: torch.tril(x, -1), _f(4, 5)),
        "topk=smallest": (lambda x: torch.topk(x, 2, dim=1, largest=False), _f(4, 5)),
        "sort=desc": (lambda x: torch.sort(x, 1, descending=True), _f(4, 5)),
        "transpose=neg": (lambda x: x.transpose(-1, 0), _f(2, 3, 4)),
        "squeeze=dim-not-one": (lambda x: x.squeeze(1), _f(2, 3, 4)),
        "unflatten": (lambda x: x.unflatten(2, (2, -1)), _f(2, 3, 4)),
        "cat=bool-int32": (lambda x: torch.cat([x > 0, (x * 3).int()], 0), _f(2, 3, 4)),
        "cat=int-float": (lambda x: torch.cat([x, (x * 3).long()], 1), _f(2, 3, 4)),
        "stack=neg-dim": (lambda x: torch.stack([x, x * 2], -1), _f(2, 3, 4)),
    }


def _run_time_indices() -> tuple[Any, ...]:
    """x [4, 3] and two index tensors fed at run time (distinct pairs, a negative index)."""
    import torch

    return (_f(4, 3)()[0], torch.tensor([0, 3, 0]), torch.tensor([2, -1, 1]))


def _setitem_apart(x: Any, i: Any, j: Any) -> Any:
    y = x.reshape(4, 1, 3).clone()
    y[i, :, j] = -1.0  # index tensors at dims 0 and 2
    return y


def _setitem(x: Any) -> Any:
    y = x.clone()
    y[1:3, 0] = -1.0
    return y


def _nn() -> dict[str, Case]:
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own spelling

    img = _f(1, 2, 5, 7, scale=1.0)
    seq = _f(2, 4, 3, scale=1.0)
    return {
        "layer_norm=last2": (torch.nn.LayerNorm([4, 5]), _f(2, 3, 4, 5)),
        "layer_norm=no-affine": (torch.nn.LayerNorm(5, elementwise_affine=False, eps=1e-3), _f(2, 3, 5)),
        "layer_norm=functional-weight": (
            lambda x: F.layer_norm(x, (5,), torch.linspace(0.5, 1.5, 5), None), _f(2, 3, 5)),
        "group_norm=2groups": (_seeded(lambda: torch.nn.GroupNorm(2, 4)), _f(2, 4, 3, 3)),
        "group_norm=no-affine": (torch.nn.GroupNorm(2, 6, affine=False), _f(2, 6, 5)),
        "group_norm=functional": (lambda x: F.group_norm(x, 3, eps=1e-2), _f(2, 6, 3, 3)),
        "instance_norm": (lambda x: F.instance_norm(x), img),
        "batch_norm=eval": (_seeded(lambda: _bn()), _f(2, 3, 4, 4)),
        "interp=nearest": (lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), img),
        "interp=nearest-size": (lambda x: F.interpolate(x, size=(8, 11), mode="nearest"), img),
        "interp=nearest-exact": (lambda x: F.interpolate(x, size=(8, 11), mode="nearest-exact"), img),
        "interp=bilinear": (lambda x: F.interpolate(x, size=(8, 11), mode="bilinear"), img),
        "interp=bilinear-align": (
            lambda x: F.interpolate(x, size=(8, 11), mode="bilinear", align_corners=True), img),
        "interp=bilinear-down": (lambda x: F.interpolate(x, size=(3, 4), mode="bilinear"), img),
        "interp=bilinear-scale": (lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"), img),
        "interp=bicubic": (lambda x: F.interpolate(x, size=(8, 11), mode="bicubic"), img),
        "interp=bicubic-align": (
            lambda x: F.interpolate(x, size=(8, 11), mode="bicubic", align_corners=True), img),
        "interp=linear-1d": (lambda x: F.interpolate(x, size=9, mode="linear"), seq),
        "interp=linear-1d-align": (lambda x: F.interpolate(x, size=9, mode="linear", align_corners=True), seq),
        "interp=nearest-1d": (lambda x: F.interpolate(x, scale_factor=3), seq),
        "interp=area": (lambda x: F.interpolate(x, size=(2, 3), mode="area"), img),
        "interp=trilinear": (lambda x: F.interpolate(x, size=(3, 4, 5), mode="trilinear"), _f(1, 2, 2, 3, 3)),
        "pad=constant": (lambda x: F.pad(x, (1, 2, 0, 1), value=-1.5), img),
        "pad=negative": (lambda x: F.pad(x, (-1, 2, 1, -2)), img),
        "pad=reflect": (lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), img),
        "pad=replicate": (lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"), img),
        "pad=circular": (lambda x: F.pad(x, (2, 1, 1, 2), mode="circular"), img),
        "pad=reflect-1d": (lambda x: F.pad(x, (2, 1), mode="reflect"), seq),
        "conv_transpose=output_padding": (
            _seeded(lambda: torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1)), img),
        "conv_transpose=stride3-outpad2-dil": (
            _seeded(lambda: torch.nn.ConvTranspose2d(2, 4, 3, stride=3, padding=1, output_padding=2,
                                                     dilation=2, groups=2)), img),
        "conv_transpose1d=output_padding": (
            _seeded(lambda: torch.nn.ConvTranspose1d(4, 2, 2, stride=2, output_padding=1)), seq),
        "conv=padding-same": (_seeded(lambda: torch.nn.Conv2d(2, 3, (3, 4), padding="same")), img),
        "conv=dilation-stride": (_seeded(lambda: torch.nn.Conv2d(2, 3, 3, stride=2, dilation=2)), img),
        "max_pool=ceil": (lambda x: F.max_pool2d(x, 2, ceil_mode=True), img),
        "avg_pool=ceil-pad": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), img),
        "avg_pool=no-count-pad": (lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False), img),
        "adaptive_avg_pool=uneven": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), img),
        "adaptive_max_pool=uneven": (lambda x: F.adaptive_max_pool2d(x, (2, 3)), img),
        "lstm=plain": (_seeded(lambda: torch.nn.LSTM(3, 5)), seq),
        "lstm=bidirectional": (_seeded(lambda: torch.nn.LSTM(3, 5, bidirectional=True)), seq),
        "lstm=batch_first": (_seeded(lambda: torch.nn.LSTM(3, 5, batch_first=True)), seq),
        "lstm=bi-batch_first-2layers": (
            _seeded(lambda: torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, batch_first=True)), seq),
        "lstm=no-bias": (_seeded(lambda: torch.nn.LSTM(3, 5, bias=False)), seq),
        "lstm=proj": (_seeded(lambda: torch.nn.LSTM(3, 5, proj_size=2)), seq),
        "gru=bi-batch_first": (_seeded(lambda: torch.nn.GRU(3, 5, bidirectional=True, batch_first=True)), seq),
        "gru=2layers": (_seeded(lambda: torch.nn.GRU(3, 5, num_layers=2)), seq),
        "rnn=tanh-bi": (_seeded(lambda: torch.nn.RNN(3, 5, bidirectional=True)), seq),
        "lstm_cell=zero-state": (_seeded(lambda: torch.nn.LSTMCell(3, 5)), _f(2, 3)),
        "rnn_cell=relu-no-bias": (_seeded(lambda: torch.nn.RNNCell(3, 5, bias=False, nonlinearity="relu")),
                                  _two(_f(2, 3), _f(2, 5, seed=3))),
        "lstm=initial-state": (_seeded(lambda: _LstmState()), lambda: _f(4, 2, 3)() + _f(4, 2, 5, seed=3)()
                               + _f(4, 2, 5, seed=4)()),
        "rnn=relu-batch_first": (_seeded(lambda: torch.nn.RNN(3, 5, nonlinearity="relu", batch_first=True)), seq),
        "embedding=padding": (_seeded(lambda: _Embed()), _ints(2, 4, lo=0, hi=6)),
    }


def _lstm_state_class() -> Any:
    import torch

    class LstmState(torch.nn.Module):
        """A 2-layer bidirectional LSTM fed its initial (h0, c0)."""

        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True)

        def forward(self, x: Any, h0: Any, c0: Any) -> Any:
            return self.lstm(x, (h0, c0))

    return LstmState


def _LstmState() -> Any:  # noqa: N802 - reads as a class at the call site
    return _lstm_state_class()()


def _bn() -> Any:
    import torch

    bn = torch.nn.BatchNorm2d(3)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 2)
    bn.bias.data.uniform_(-1, 1)
    return bn


def _embed_class() -> Any:
    import torch

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e = torch.nn.Embedding(6, 3, padding_idx=0)

        def forward(self, i: Any) -> Any:
            return self.e(i)

    return Embed


def _Embed() -> Any:  # noqa: N802 - reads as a class at the call site
    return _embed_class()()


def _seeded(make: Callable[[], Any]) -> Callable[[], Any]:
    """A module built with a fixed seed (its weights are the same on every run)."""

    def build() -> Any:
        import torch

        torch.manual_seed(0)
        return make()

    build.seeded = True  # type: ignore[attr-defined]
    return build


def _more() -> dict[str, Case]:
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's own spelling

    img = _f(1, 2, 5, 7, scale=1.0)
    ii = _two(_ints(3, 4), _nonzero_ints(3, 4))
    return {
        "interp=nearest-scale-1.7": (lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest"), img),
        "interp=bilinear-recompute": (
            lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), img),
        "interp=bicubic-scale": (lambda x: F.interpolate(x, scale_factor=(1.5, 0.6), mode="bicubic"), img),
        "conv_transpose=functional-outpad": (
            lambda x: F.conv_transpose2d(x, torch.linspace(-1, 1, 2 * 3 * 9).reshape(2, 3, 3, 3), stride=2,
                                         output_padding=1), img),
        "avg_pool=divisor_override": (lambda x: F.avg_pool2d(x, 2, divisor_override=3), img),
        "avg_pool=divisor_override-pad": (lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5), img),
        "cumsum=dtype-arg": (lambda x: torch.cumsum(x, 1, dtype=torch.float64), img),
        "max_pool=dilation": (lambda x: F.max_pool2d(x, 2, dilation=2, padding=1), img),
        "pad=reflect-3d": (lambda x: F.pad(x, (1, 1, 1, 0, 0, 1), mode="reflect"), _f(1, 2, 3, 4, 4)),
        "to=int-trunc-neg": (lambda x, y: (x.float() / 3).to(torch.int32), ii),
        "remainder=int-float-scalar": (lambda x, y: torch.remainder(x, 2.5), ii),
        "floor_divide=int-float-scalar": (lambda x, y: torch.floor_divide(x, -2.5), ii),
        "where=int-float-tensors": (lambda x, y: torch.where(x > 0, x, y.float() * 0.5), ii),
        "prod=int32": (lambda x, y: x.int().prod(1), ii),
        "cumsum=bool": (lambda x, y: torch.cumsum(x > 0, 0), ii),
        "sum=f16": (lambda x, y: x.half().sum(1), ii),
        "mean=f16": (lambda x, y: (x.half() / 3).mean(), ii),
        "full_like=int": (lambda x, y: torch.full_like(x, 7) + x, ii),
        "arange-times-float": (lambda x, y: torch.arange(4) * y.float(), ii),
        "addmm=beta0-ignores-nan": (
            lambda x, y: torch.addmm(torch.full((3, 3), float("nan")), y.float(), y.float().t(), beta=0), ii),
        "baddbmm=alpha-beta": (
            lambda x, y: torch.baddbmm(x.float()[None, :, :3], y.float()[None], y.float().t()[None],
                                       beta=0.5, alpha=-2), ii),
        "linear=no-bias-3d": (lambda x, y: F.linear(x.float()[None], y.float()), ii),
        "einsum=bij,bjk": (lambda x, y: torch.einsum("ij,kj->ik", x.float(), y.float()), ii),
        "norm=inf": (lambda x, y: torch.linalg.vector_norm(x.float(), ord=float("inf"), dim=1), ii),
        "norm=l1-dims": (lambda x, y: torch.linalg.vector_norm(x.float(), ord=1, dim=(0, 1)), ii),
        "norm=l0": (lambda x, y: torch.linalg.vector_norm(x.float(), ord=0, dim=1), ii),
        "normalize": (lambda x, y: F.normalize(x.float(), dim=1), ii),
        "norm=p3-neg-inf": (lambda x, y: torch.linalg.vector_norm(x.float(), ord=3, dim=1)
                            + torch.linalg.vector_norm(x.float(), ord=float("-inf")), ii),
        "cosine_similarity": (lambda x, y: F.cosine_similarity(x.float(), y.float(), dim=1), ii),
        "cosine_similarity=broadcast-zero": (
            lambda x, y: F.cosine_similarity(x.float() * (x > 0), y.float()[:1], dim=-1), ii),
        "sdpa=causal": (lambda x, y: F.scaled_dot_product_attention(
            x.float()[None], y.float()[None], x.float()[None], is_causal=True), ii),
        "scalar-int-arith=scripted": (_Scripted(), _f(2, 3, 5), "script"),
        "loop-if=scripted-then": (_Loop(), lambda: (_f(2, 3)()[0].abs() + 0.3, 5), "script"),
        "loop-if=scripted-else": (_Loop(), lambda: (-_f(2, 3)()[0].abs() - 9, 3), "script"),
    }


def _scripted_class() -> Any:
    import torch

    class Scripted(torch.nn.Module):
        """Integer arithmetic on sizes in TorchScript: Python's floor division and modulo."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = x.size(2)
            a = (n - 9) // 2
            b = (n - 9) % 3
            c = -n // 4
            d = int((n - 9) / 3)  # true division then truncation toward zero
            e = (n * 0.7) // 0.7  # 3.5 // 0.7 is 4.0 in Python, floor(3.5 / 0.7) is 5
            return x * a + b + c * 10 + d * 100 + (n - 9) ** 2 + e * 1000

    return Scripted


def _Scripted() -> Any:  # noqa: N802 - reads as a class at the call site
    return _scripted_class()()


def _loop_class() -> Any:
    import torch

    class Loop(torch.nn.Module):
        """A run-time loop whose iteration number takes part in int and float arithmetic."""

        def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
            acc = torch.zeros_like(x)
            for i in range(n):
                acc = acc + x * i + (i - 3) // 2 + (i - 3) % 2 + i / 4
            if acc.sum() > 0:
                acc = torch.remainder(acc, -1.5)
            else:
                acc = torch.floor_divide(acc, -2)
            return acc

    return Loop


def _Loop() -> Any:  # noqa: N802 - reads as a class at the call site
    return _loop_class()()


def _cases() -> dict[str, Case]:
    if not HAVE_TORCH:
        return {}
    return {**_arith(), **_reduce(), **_elementwise(), **_shape(), **_nn(), **_more()}


@pytest.mark.parametrize("case", list(_cases()))
def test_matches_torch(case: str) -> None:
    fn, make_inputs, *mode = _cases()[case]
    if getattr(fn, "seeded", False):
        fn = fn()
    check(fn, *make_inputs(), mode=mode[0] if mode else "trace")


@pytest.mark.parametrize("mode", ["trace", "script"])
def test_floor_divide_zeros_carry_torchs_sign(mode: str) -> None:
    """A zero quotient is copysign(0, x / y) in torch (-0.5 // 2 is -0.0): the sign bits agree,
    which the value comparison of the battery cannot see, in the interpreter and the simulator."""
    import numpy as np
    import torch

    import opbridge as ob
    from tests.torchscript.helpers import export_and_convert

    class FloorDiv(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a // b

    x, y = _edge_grid()
    graph, (ref,) = export_and_convert(FloorDiv(), (x, y), mode)
    got = next(iter(ob.interpret(graph, {graph.inputs[0].name: x.numpy(),
                                         graph.inputs[1].name: y.numpy()}).values()))
    assert np.isnan(got).tolist() == np.isnan(ref).tolist()
    signed = ~np.isnan(ref)  # a nan's sign bit means nothing
    assert np.signbit(got[signed]).tolist() == np.signbit(ref[signed]).tolist()
    assert (ref[signed] == 0).any() and np.signbit(ref[ref == 0]).any()  # the grid has both zeros
    sim = next(iter(ob.compile(graph, "bm1684").run({graph.inputs[0].name: x.numpy(),
                                                     graph.inputs[1].name: y.numpy()}).values()))
    assert np.array_equal(sim, ref, equal_nan=True)
    assert np.signbit(sim[signed]).tolist() == np.signbit(ref[signed]).tolist()
