"""Calibration samples: feed dicts, a folder of ``.npy``/``.npz`` files, or images with a
preprocessing spec, each checked against the graph's inputs (names, shapes, dtypes).

An image becomes ``(pixel - mean) / std`` per channel, pixels in 0..255, after resizing to the
input's spatial size (bilinear) and putting the channels in ``pixel_format`` order, laid out
NCHW or NHWC as the input wants. Pillow reads the images when installed, else OpenCV.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..ir.graph import Graph, Value
from ..ir.types import format_shape, is_static, to_numpy_dtype
from .table import QuantError

ARRAY_SUFFIXES = (".npy", ".npz")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


@dataclass(frozen=True)
class Preprocess:
    """How an image becomes an input tensor: ``(pixel - mean) / std`` with pixels in 0..255.

    ``layout`` "nchw" or "nhwc"; ``pixel_format`` "rgb", "bgr" or "gray"; ``size`` (H, W) to
    resize to (None: the input's own spatial size). ``crops`` N > 0 makes each image N + 1
    samples: the whole image, and N windows of two thirds of its width and its full height at
    offsets spread evenly from its left edge to its right, each resized like the image (more
    calibration samples from the same images)."""

    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    layout: str = "nchw"
    pixel_format: str = "rgb"
    size: tuple[int, int] | None = None
    crops: int = 0

    def __post_init__(self) -> None:
        if self.crops < 0:
            raise QuantError(f"preprocess crops {self.crops}: must be >= 0")
        if self.layout not in ("nchw", "nhwc"):
            raise QuantError(f"preprocess layout {self.layout!r}: use 'nchw' or 'nhwc'")
        if self.pixel_format not in ("rgb", "bgr", "gray"):
            raise QuantError(f"preprocess pixel_format {self.pixel_format!r}: use 'rgb', 'bgr' or 'gray'")
        if any(s == 0 for s in self.std):
            raise QuantError("preprocess std has a 0", hint="std divides the pixels; give non-zero values")


#: torchvision's ImageNet normalisation in 0..255 pixel units (mean 0.485/0.456/0.406, std
#: 0.229/0.224/0.225 of 0..1 pixels), RGB, NCHW.
IMAGENET = Preprocess((123.675, 116.28, 103.53), (58.395, 57.12, 57.375))


def check_sample_limit(limit: Any) -> None:
    """A sample count (``num_samples=``) is a whole number >= 1, or None for all."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise QuantError(f"number of samples {limit!r}: must be a whole number >= 1",
                         hint="give how many samples to use, e.g. num_samples=64 (None: all)")


def load_samples(graph: Graph, samples: Any, *, limit: int | None = None,
                 preprocess: Preprocess | None = None) -> list[dict[str, np.ndarray]]:
    """The calibration feeds for ``graph``: ``samples`` is a list of feed dicts, or a folder (or
    one file) of ``.npy``/``.npz`` arrays or images; at most ``limit`` are taken, in file-name
    order. Every feed is checked against the graph's inputs."""
    check_sample_limit(limit)
    if isinstance(samples, (str, os.PathLike)):
        feeds = list(_from_path(graph, Path(samples), limit, preprocess))
        where = f"'{os.fspath(samples)}'"
    elif isinstance(samples, Mapping):
        feeds, where = [_check_feed(graph, samples, "the feed dict")], "the feed dict"
    elif isinstance(samples, Sequence) and not isinstance(samples, (bytes, str)):
        feeds = [_check_feed(graph, s, f"sample {i}") for i, s in enumerate(samples[:limit])]
        where = "the sample list"
    else:
        raise QuantError(f"calibration samples: a list of feed dicts or a folder, not {type(samples).__name__}")
    if not feeds:
        raise QuantError(f"no calibration samples in {where}",
                         hint="give at least one sample: .npy/.npz files or images "
                         f"({', '.join(IMAGE_SUFFIXES)})")
    return feeds


def _from_path(graph: Graph, path: Path, limit: int | None,
               preprocess: Preprocess | None) -> Iterator[dict[str, np.ndarray]]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir()
                       if p.is_file() and p.suffix.lower() in ARRAY_SUFFIXES + IMAGE_SUFFIXES)
        if not files:
            raise QuantError(f"calibration folder '{path}' has no readable samples",
                             hint="put .npy/.npz arrays or images "
                             f"({', '.join(IMAGE_SUFFIXES)}) in it")
    elif path.is_file():
        files = [path]
    else:
        raise QuantError(f"calibration data '{path}' does not exist",
                         hint="give a folder of .npy/.npz files or images")
    for p in files[:limit]:
        if p.suffix.lower() in ARRAY_SUFFIXES:
            yield _check_feed(graph, _read_arrays(graph, p), f"'{p}'")
        elif p.suffix.lower() in IMAGE_SUFFIXES:
            crops = preprocess.crops if preprocess is not None else 0
            for window in [None, *((j, crops) for j in range(crops))]:
                yield _image_feed(graph, p, preprocess, window)
        else:
            raise QuantError(f"'{p}' is not a calibration sample",
                             hint=f"use .npy/.npz or an image ({', '.join(IMAGE_SUFFIXES)})")


def _read_arrays(graph: Graph, p: Path) -> dict[str, Any]:
    from ..arrayfile import ArrayFileError, read_array_file

    try:
        got = read_array_file(p)
    except ArrayFileError as err:
        raise QuantError(f"calibration sample '{p}' is not a readable numpy file: {err.reason}",
                         hint=err.hint) from None
    if not isinstance(got, dict):
        return {_only_input(graph, p).name: got}
    arrays = got
    if len(arrays) == 1 and len(graph.inputs) == 1 and graph.inputs[0].name not in arrays:
        return {graph.inputs[0].name: next(iter(arrays.values()))}
    return arrays


def _only_input(graph: Graph, p: Path) -> Value:
    if len(graph.inputs) != 1:
        raise QuantError(f"'{p}' holds one array but graph '{graph.name}' has {len(graph.inputs)} "
                         "inputs", hint="use .npz files with one array per input name: "
                         + ", ".join(v.name for v in graph.inputs))
    return graph.inputs[0]


def _check_feed(graph: Graph, feed: Any, where: str) -> dict[str, np.ndarray]:
    """``feed`` checked against the graph inputs: every input given, right shape and dtype."""
    if not isinstance(feed, Mapping):
        raise QuantError(f"{where} is a {type(feed).__name__}, not a dict of input name -> array")
    names = [v.name for v in graph.inputs]
    unknown = sorted(set(feed) - set(names))
    if unknown:
        raise QuantError(f"{where} names '{unknown[0]}', which graph '{graph.name}' has no input of",
                         hint=f"its inputs are: {', '.join(names)}")
    return {v.name: _fit(v, feed, where) for v in graph.inputs}


def _fit(v: Value, feed: Mapping[str, Any], where: str) -> np.ndarray:
    if v.name not in feed:
        raise QuantError(f"{where} has no array for input '{v.name}' ({v.dtype}{format_shape(v.shape)})",
                         hint="give every input an array, named after it (numpy.savez(f, **{name: array}))")
    arr = np.asarray(feed[v.name])
    want = to_numpy_dtype(v.dtype)
    if not is_static(v.shape):
        raise QuantError(f"input '{v.name}' has symbolic dims {format_shape(v.shape)}",
                         hint="fix them with --input-shape NAME=DIMS (input_shapes= in Python)")
    if tuple(arr.shape) != tuple(v.shape):
        if arr.ndim < len(v.shape) and arr.size == math.prod(int(d) for d in v.shape):
            arr = arr.reshape(v.shape)  # a CHW array for a 1xCxHxW input
        else:
            raise QuantError(f"{where}: input '{v.name}' wants shape {format_shape(v.shape)}, got "
                             f"{format_shape(arr.shape)}",
                             hint="save samples with the input's shape, or convert with --input-shape")
    if arr.dtype != want:
        same_kind = arr.dtype.kind == want.kind or (arr.dtype.kind in "iu" and want.kind in "iuf")
        if not same_kind:
            raise QuantError(f"{where}: input '{v.name}' wants {v.dtype}, got {arr.dtype}",
                             hint=f"save the samples as {want.name}")
        arr = arr.astype(want)
    return arr


def _image_feed(graph: Graph, p: Path, preprocess: Preprocess | None,
                window: tuple[int, int] | None = None) -> dict[str, np.ndarray]:
    v = _only_input(graph, p)
    spec = preprocess or Preprocess()
    if len(v.shape) != 4 or not is_static(v.shape):
        raise QuantError(f"'{p}' is an image but input '{v.name}' is {v.dtype}{format_shape(v.shape)}",
                         hint="images feed a 4-d input (NCHW or NHWC); give .npy/.npz samples otherwise")
    n, a, b, c = (int(d) for d in v.shape)
    h, w, ch = (b, c, a) if spec.layout == "nchw" else (a, b, c)
    if ch not in (1, 3):
        raise QuantError(f"input '{v.name}' {format_shape(v.shape)} has {ch} channels in layout "
                         f"{spec.layout}; images give 1 or 3", hint="set the layout (--layout nhwc)")
    img = read_image(p, spec.size or (h, w), "gray" if ch == 1 else spec.pixel_format, window)
    x = (img - np.asarray(spec.mean, np.float32)) / np.asarray(spec.std, np.float32)
    x = x.transpose(2, 0, 1) if spec.layout == "nchw" else x
    x = np.broadcast_to(x[None], (n, *x.shape))
    return {v.name: _fit(v, {v.name: x.astype(np.float32)}, f"'{p}'")}


def crop_columns(width: int, window: tuple[int, int]) -> tuple[int, int]:
    """The columns ``[x0, x1)`` of window ``j`` of ``n`` (``window``) across an image
    ``width`` wide: two thirds of the width, offsets spread evenly from left to right."""
    j, n = window
    part = max(1, 2 * width // 3)
    x0 = (width - part) * j // max(n - 1, 1)
    return x0, x0 + part


def read_image(path: Path, size: tuple[int, int], pixel_format: str,
               window: tuple[int, int] | None = None) -> np.ndarray:
    """An HxWxC float32 image (0..255) resized to ``size`` (H, W), channels in ``pixel_format``;
    with ``window`` (j, n) its j-th crop of n (:func:`crop_columns`) resized instead."""
    try:
        from PIL import Image
    except ImportError:
        return _read_cv2(path, size, pixel_format, window)
    try:
        with Image.open(path) as im:
            im = im.convert("L" if pixel_format == "gray" else "RGB")
            if window is not None:
                x0, x1 = crop_columns(im.size[0], window)
                im = im.crop((x0, 0, x1, im.size[1]))
            im = im.resize((size[1], size[0]), Image.Resampling.BILINEAR)
            arr = np.asarray(im, dtype=np.float32)
    except OSError as err:
        raise QuantError(f"calibration image '{path}' cannot be read: {err}",
                         hint="check that it is a complete image file, or remove it from the folder") from None
    arr = arr[..., None] if arr.ndim == 2 else arr
    return arr[..., ::-1].copy() if pixel_format == "bgr" else arr


def _read_cv2(path: Path, size: tuple[int, int], pixel_format: str,
              window: tuple[int, int] | None = None) -> np.ndarray:
    try:
        import cv2
    except ImportError:
        raise QuantError(f"'{path}': reading images needs Pillow or OpenCV",
                         hint="pip install pillow") from None
    flag = cv2.IMREAD_GRAYSCALE if pixel_format == "gray" else cv2.IMREAD_COLOR
    img = cv2.imdecode(np.fromfile(str(path), np.uint8), flag)
    if img is None:
        raise QuantError(f"calibration image '{path}' cannot be read",
                         hint="check that it is a complete image file, or remove it from the folder")
    if window is not None:
        x0, x1 = crop_columns(img.shape[1], window)
        img = img[:, x0:x1]
    img = cv2.resize(img, (size[1], size[0]), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    img = img[..., None] if img.ndim == 2 else img
    return img[..., ::-1].copy() if pixel_format == "rgb" else img
