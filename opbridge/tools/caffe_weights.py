"""Random weights for a Caffe deploy prototxt: ``opbridge random-weights``.

Any prototxt can then be converted and tested without its real caffemodel. The net is
converted once without weights, under a seeded :class:`RandomBlobs` provider: each mapping
declares the blobs it reads with the shapes it expects (``g.weight(i, shape, kind=...)``), so
the blob shapes come from the same code that later reads them, and a plugin's layers (and
their op shape functions) take part like built-in ones. The blobs given out are then written
into a caffemodel that Caffe and OpenCV read.

Values keep activations finite through deep nets, chosen by what each blob holds (its kind,
see :data:`opbridge.mappers.weights.WEIGHT_KINDS`): std sqrt(1/fan_in) for weights that sum
over fan_in inputs (each layer keeps the scale of its input), BatchNorm statistics with a
positive variance and Caffe's realistic moving-average count (mean * f, var * f and f, with
f = 999.982), scales near 1, small PReLU slopes, SSD's L2-normalisation scale near 20.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from ..errors import AttrError, ShapeError
from ..ir import types as ir_types
from ..mappers import MappingError, MappingRegistry
from ..mappers.context import error_context
from ..mappers.converter import convert_origin_graph
from ..mappers.weights import WeightRequest, provide_weights
from ..parsers.caffe import parse_caffe
from ..parsers.caffe_weights import write_caffemodel
from ..plugins_loader import load_plugins

#: The most weight values ``write_random_weights`` generates for one net (4 GiB of float32;
#: VGG-16 has 138 M), checked before each blob is allocated.
MAX_RANDOM_ELEMENTS = 1 << 30

#: The moving-average count Caffe's BatchNorm stores its statistics multiplied by (the value a
#: trained net's third blob has, 1 / (1 - 0.999) after enough iterations).
BATCHNORM_COUNT = 999.982

Sampler = Callable[[np.random.Generator, WeightRequest], np.ndarray]


def _linear(rng: np.random.Generator, r: WeightRequest) -> np.ndarray:
    return rng.standard_normal(r.shape, dtype=np.float32) * np.float32(math.sqrt(1.0 / r.fan_in))


#: Weight kind -> its values; every kind of WEIGHT_KINDS has one (a test checks).
SAMPLERS: dict[str, Sampler] = {
    "linear": _linear,
    "bias": lambda rng, r: rng.normal(0.0, 0.1, r.shape),
    "value": lambda rng, r: rng.normal(0.0, 0.1, r.shape),
    "scale": lambda rng, r: rng.uniform(0.5, 1.5, r.shape),
    "slope": lambda rng, r: rng.uniform(0.05, 0.3, r.shape),
    "l2_scale": lambda rng, r: rng.uniform(5.0, 20.0, r.shape),
    "positive": lambda rng, r: rng.uniform(0.5, 2.0, r.shape),
    "mean": lambda rng, r: rng.normal(0.0, 0.2, r.shape) * BATCHNORM_COUNT,
    "variance": lambda rng, r: rng.uniform(0.5, 2.0, r.shape) * BATCHNORM_COUNT,
    "count": lambda rng, r: np.full(r.shape, BATCHNORM_COUNT),
}


class RandomBlobs:
    """A seeded weight provider that keeps every blob it gives, by layer.

    Each blob's values depend only on the seed, the layer's name and the blob's index, so the
    same seed gives the same bytes whatever order the mappings ask in.
    """

    def __init__(self, seed: int = 0, max_elements: int | None = None) -> None:
        if seed < 0:
            raise AttrError(f"random-weights seed = {seed}: must be >= 0",
                            hint="give a seed >= 0, e.g. --seed 0")
        self.seed = seed
        self.limit = MAX_RANDOM_ELEMENTS if max_elements is None else max_elements
        self.total = 0
        #: layer name -> blob index -> array
        self.blobs: dict[str, dict[int, np.ndarray]] = {}

    def __call__(self, r: WeightRequest) -> np.ndarray:
        # inside a mapping: the converter adds the layer to an error that does not name it
        ir_types.check_shape(r.shape, f"blob {r.index}")
        self.total += math.prod(r.shape)
        if self.total > self.limit:
            raise ShapeError(
                f"blob {r.index}: shape {r.shape} brings the net's random weights to {self.total} "
                f"values, above the limit of {self.limit}",
                hint="check num_output / kernel sizes / input dims; pass max_elements= if the "
                "net is really this large", **error_context(r.node),
            )
        rng = np.random.default_rng([self.seed, zlib.crc32(r.node.name.encode()), r.index])
        arr = np.asarray(SAMPLERS[r.kind](rng, r), dtype=np.float32).reshape(r.shape)
        self.blobs.setdefault(r.node.name, {})[r.index] = arr
        return arr


def random_weights(
    prototxt: str | os.PathLike[str],
    *,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    plugins: Iterable[str | os.PathLike[str]] = (),
    registry: MappingRegistry | None = None,
    max_elements: int | None = None,
) -> tuple[str, list[tuple[str, str, list[np.ndarray]]]]:
    """The net's name and (layer name, layer type, blobs) for every layer of ``prototxt``, in
    file order, with random blobs of the shapes its mappings read (none for layers without)."""
    load_plugins(plugins)
    shapes = dict(input_shapes) if input_shapes else None
    origin = parse_caffe(Path(prototxt), input_shapes=shapes)
    provider = RandomBlobs(seed, max_elements)
    with provide_weights(provider):
        convert_origin_graph(origin, registry=registry, input_shapes=shapes)
    layers = []
    for node in origin.nodes:
        given = provider.blobs.get(node.name, {})
        gaps = sorted(set(range(len(given))) - set(given))
        if gaps:
            raise MappingError(
                f"its mapping read blob(s) {sorted(given)} but not blob {gaps[0]}, whose shape "
                "random-weights therefore cannot know",
                hint="read every blob of the layer with g.weight(i, shape=...) in its mapping",
                **error_context(node),
            )
        layers.append((node.name, node.op_type, [given[i] for i in range(len(given))]))
    return origin.name, layers


def write_random_weights(
    prototxt: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    plugins: Iterable[str | os.PathLike[str]] = (),
    registry: MappingRegistry | None = None,
    max_elements: int | None = None,
) -> dict[str, list[tuple[int, ...]]]:
    """Write a caffemodel with random blobs for every weighted layer of ``prototxt``.

    Every blob's shape is checked (dims >= 0; the net's total below ``max_elements``, by
    default :data:`MAX_RANDOM_ELEMENTS`) before it is allocated. Every layer goes into the
    file, as Caffe writes it. Returns layer name -> blob shapes written, for weighted layers.
    """
    name, layers = random_weights(prototxt, seed=seed, input_shapes=input_shapes, plugins=plugins,
                            registry=registry, max_elements=max_elements)
    write_caffemodel(Path(out), name, layers)
    return {name: [a.shape for a in blobs] for name, _, blobs in layers if blobs}
