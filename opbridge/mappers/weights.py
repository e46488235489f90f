"""Weight providers: where a conversion gets the framework weights (Caffe blobs) a model lacks.

A mapping declares each weight it reads with the shape it expects and what the weight holds
(``g.weight(i, shape=(n, c, 3, 3), kind="linear", fan_in=c * 9)``). With real weights, the
shape is a check. Without them, a conversion run under :func:`provide_weights` asks the
provider for a weight of that shape, so the shapes come from the mappings (and a plugin's op
shape functions) rather than from a second table of layer rules. ``opbridge random-weights``
is such a conversion (:mod:`opbridge.tools.caffe_weights`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import MappingError, OpbridgeError, ShapeError
from ..parsers.origin import Framework, OriginNode

#: What a weight can hold, so that a provider can choose values that keep a net numerically
#: sane (a variance must be positive, a scale non-zero). The default kind is "bias".
WEIGHT_KINDS: dict[str, str] = {
    "linear": "multiplies the input, summed over fan_in values (convolution, inner product)",
    "bias": "added to an output",
    "value": "used as it is (an embedding table, a learned tensor)",
    "scale": "multiplies an output elementwise (of order 1)",
    "slope": "the slope of an activation's negative side (PReLU)",
    "l2_scale": "the learned scale after an L2 normalisation (SSD's Normalize: about 20 when trained)",
    "positive": "any positive value of order 1",
    "mean": "a running mean, stored multiplied by the layer's 'count' weight (Caffe BatchNorm)",
    "variance": "a running variance, stored multiplied by the layer's 'count' weight (positive)",
    "count": "the moving-average count that 'mean' and 'variance' are stored multiplied by",
}


@dataclass(frozen=True)
class WeightRequest:
    """One weight a mapping reads and the model does not have."""

    node: OriginNode
    index: int
    shape: tuple[int, ...]
    kind: str
    #: The number of input values each output sums over ("linear" weights).
    fan_in: int


#: ``provider(request) -> array of request.shape``.
WeightProvider = Callable[[WeightRequest], np.ndarray]

_PROVIDER: ContextVar[WeightProvider | None] = ContextVar("opbridge_weight_provider", default=None)


@contextmanager
def provide_weights(provider: WeightProvider) -> Iterator[WeightProvider]:
    """Conversions in this block get the weights their models lack from ``provider``.

    A context variable rather than a converter argument: the provider belongs to one
    conversion call, and every entry point (``convert``, plugins' own conversions) honours it.
    """
    token = _PROVIDER.set(provider)
    try:
        yield provider
    finally:
        _PROVIDER.reset(token)


def current_provider() -> WeightProvider | None:
    """The provider of the innermost :func:`provide_weights` block (None outside one)."""
    return _PROVIDER.get()


def check_kind(kind: str, context: dict[str, Any]) -> None:
    """A weight kind a mapping names must be one of WEIGHT_KINDS (``context``: the node's
    error context)."""
    if kind not in WEIGHT_KINDS:
        raise MappingError(f"weight kind {kind!r} is not one of {', '.join(WEIGHT_KINDS)}",
                           hint="pass kind= one of opbridge.mappers.weights.WEIGHT_KINDS", **context)


def make_request(node: OriginNode, index: int, shape: tuple[int, ...], kind: str,
                 fan_in: int | None) -> WeightRequest:
    """A request with ``fan_in`` defaulted to the product of dims 1.."""
    fan = fan_in if fan_in is not None else math.prod(shape[1:])
    return WeightRequest(node, index, shape, kind, max(int(fan), 1))


def fit_weight(node: OriginNode, i: int, arr: np.ndarray, shape: tuple[int, ...],
               context: dict[str, Any]) -> np.ndarray:
    """Weight ``i`` of ``node`` as the ``shape`` its mapping expects, else a ShapeError naming
    both. A legacy 4-D Caffe blob (num, channels, height, width with leading ones) is accepted
    when its dims match once the ones are dropped, as Caffe's Blob::ShapeEquals does."""
    if arr.shape == shape:
        return arr

    def strip(s: tuple[int, ...]) -> tuple[int, ...]:
        while len(s) > 1 and s[0] == 1:
            s = s[1:]
        return s

    if arr.ndim == 4 and strip(tuple(arr.shape)) == strip(shape) and arr.size == math.prod(shape):
        return arr.reshape(shape)
    src = "the caffemodel" if node.framework == Framework.CAFFE else "the model's weights file"
    raise ShapeError(
        f"blob {i}: {src} has shape {tuple(arr.shape)}, the layer needs {shape}",
        hint=f"{src} does not belong to this model definition (or the input shape differs)",
        **context,
    )


def missing_weight(node: OriginNode, i: int, shape: tuple[int, ...] | None,
                   context: dict[str, Any], weights_given: bool = True) -> OpbridgeError:
    """The error for weight ``i`` that ``node``'s mapping reads and the model lacks
    (``weights_given``: whether a weights file, a caffemodel, came with the model)."""
    have = f"it has {len(node.weights)}" if node.weights else "it has none"
    of = f" of shape {shape}" if shape is not None else ""
    if node.framework == Framework.CAFFE:
        what = (f"the caffemodel has no blob {i}{of} for this layer ({have})" if weights_given else
                f"the layer needs blob {i}{of} and no caffemodel was given")
        return MappingError(
            what,
            hint="give the net's trained caffemodel (--weights NET.caffemodel; weights= in Python), or "
            "write random ones with 'opbridge random-weights deploy.prototxt -o net.caffemodel'", **context,
        )
    return MappingError(f"the model has no weight {i}{of} for this node ({have})",
                        hint="check the model's weights file matches its definition", **context)
