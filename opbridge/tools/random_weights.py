"""``ob.random_weights``: the Python face of ``opbridge random-weights``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence


def random_weights(
    prototxt: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    seed: int = 0,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    plugins: Iterable[str | os.PathLike[str]] = (),
) -> dict[str, list[tuple[int, ...]]]:
    """Write ``output``, a caffemodel with random blobs for every weighted layer of the deploy
    ``prototxt`` (He-style scales that keep activations finite; the same ``seed`` gives the same
    bytes), as ``opbridge random-weights PROTOTXT -o OUTPUT`` does. ``input_shapes`` fix input
    dims (``--input-shape``); ``plugins`` are loaded first (``--plugin``). Returns layer name ->
    the shapes of the blobs written, for the weighted layers."""
    from .caffe_weights import write_random_weights

    return write_random_weights(prototxt, output, seed=seed, input_shapes=input_shapes, plugins=plugins)
