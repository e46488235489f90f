"""Inputs for validation: arrays from .npy/.npz files, an image with preprocessing, or random.

Every way ends in the same place: a dict of graph-input name -> array with the graph's dtype and
shape, plus a line per input saying where it came from (for the report).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..arrayfile import ArrayFileError, read_array_file
from ..errors import OpbridgeError, ShapeError
from ..ir.graph import Graph, Value
from ..ir.types import format_shape, to_numpy_dtype


class InputError(OpbridgeError, ValueError):
    """An input file, image or name given for validation is wrong."""


PIXEL_FORMATS = ("bgr", "rgb", "gray")


@dataclass(frozen=True)
class ImageSpec:
    """An image for one 3- (or 1-) channel NCHW input: ``(pixel[c] - mean[c]) * scale[c]``."""

    path: str
    input: str | None = None
    mean: tuple[float, ...] = (0.0,)
    scale: tuple[float, ...] = (1.0,)
    #: channel order the model wants; ``bgr`` is Caffe's (and TPU-MLIR's) default
    pixel_format: str = "bgr"


#: How a random input is described in ``where`` (and the report's inputs), read by the CLI.
RANDOM_INPUT = "random"


def _describe(v: Value) -> str:
    return f"{v.dtype}{format_shape(v.shape)}"


def _find(graph: Graph, name: str) -> Value:
    for v in graph.inputs:
        if v.name == name:
            return v
    raise InputError(
        f"model '{graph.name}' has no input named '{name}'",
        hint="its inputs are: " + ", ".join(f"{v.name} ({_describe(v)})" for v in graph.inputs),
    )


def _fit(v: Value, arr: np.ndarray, source: str, *, shape: bool = True) -> np.ndarray:
    want = to_numpy_dtype(v.dtype)
    if shape and tuple(arr.shape) != tuple(v.shape):
        if arr.size == int(np.prod(v.shape)) and arr.ndim < len(v.shape):
            arr = arr.reshape(v.shape)  # e.g. a CHW array for a 1xCxHxW input
        else:
            raise InputError(
                f"input '{v.name}' wants {_describe(v)}, {source} holds shape {format_shape(arr.shape)}",
                hint="save the array with the input's shape, or convert (a program: compile) with --input-shape",
            )
    if arr.dtype != want:
        if arr.dtype.kind != want.kind and not (arr.dtype.kind in "iu" and want.kind in "iuf"):
            raise InputError(
                f"input '{v.name}' wants {v.dtype}, {source} holds {arr.dtype}",
                hint=f"save it as {want.name}",
            )
        arr = arr.astype(want)
    return arr


def _read_array_file(path: str, key: str | None) -> dict[str, np.ndarray]:
    if not Path(path).exists():
        raise InputError(f"input file '{path}' does not exist",
                         hint="check the path; --input NAME=FILE takes a .npy, or an .npz holding the "
                              "inputs by name")
    try:
        data = read_array_file(path)
    except ArrayFileError as err:
        raise InputError(f"input file '{path}' is not a readable .npy/.npz: {err.reason}",
                         hint=err.hint) from None
    if isinstance(data, dict) and path.lower().endswith(".npy"):
        # told apart by content: an archive named .npy is no one array, whatever it holds
        raise InputError(f"input file '{path}' is an .npz archive "
                         f"({len(data)} array{'' if len(data) == 1 else 's'}), not one .npy array",
                         hint="name it .npz (--input NAME=FILE.npz picks its array NAME), or save "
                              "the array with numpy.save")
    return data if isinstance(data, dict) else {key or "": data}


def load_input_specs(graph: Graph, specs: Sequence[str], *,
                     shapes: bool = True) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Parse ``NAME=FILE.npy``, ``NAME=FILE.npz``, ``FILE.npz`` or (one-input models) ``FILE.npy``.
    ``shapes=False`` takes an array of any shape (for a program that runs several; it checks
    them itself), still cast to the input's dtype."""
    feeds: dict[str, np.ndarray] = {}
    where: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            name, path = "", spec
        if (sep and not name) or (not sep and any(v.name == spec for v in graph.inputs)):
            example = spec if not sep else graph.inputs[0].name if graph.inputs else "x"
            raise InputError(f"--input '{spec}': write NAME=FILE.npy",
                             hint=f"one --input per graph input, e.g. --input {example}=x.npy")
        if name:
            _find(graph, name)  # a wrong name is named before its file is read
        if path.endswith(".npz"):
            arrays = _read_array_file(path, None)
            if name:
                if name in arrays:
                    picked = {name: arrays[name]}
                elif len(arrays) == 1:
                    picked = {name: next(iter(arrays.values()))}
                else:
                    raise InputError(
                        f"'{path}' has no array named '{name}' and holds {len(arrays)} arrays",
                        hint="its arrays are: " + ", ".join(arrays),
                    )
            else:
                picked = arrays
        else:
            arr = next(iter(_read_array_file(path, name or None).values()))
            if not name:
                if len(graph.inputs) != 1:
                    raise InputError(
                        f"--input '{spec}': the model has {len(graph.inputs)} inputs, say which",
                        hint="write NAME=FILE.npy; inputs: " + ", ".join(v.name for v in graph.inputs),
                    )
                name = graph.inputs[0].name
            picked = {name: arr}
        for k, arr in picked.items():
            v = _find(graph, k)
            feeds[k] = _fit(v, np.asarray(arr), f"'{path}'", shape=shapes)
            where[k] = f"{_describe(v)} from {os.path.basename(path)}"
    return feeds, where


def named_array_shapes(given: Mapping[str, Any] | None, specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """The shapes of the arrays given by name (a dict, ``NAME=FILE`` or ``FILE.npz``; a bare
    ``FILE.npy`` under the name ""), read before conversion; unreadable files are skipped here
    and reported when the inputs are made."""
    shapes = {k: tuple(np.shape(v)) for k, v in (given or {}).items()}
    for spec in specs:
        name, sep, path = spec.partition("=")
        try:
            arrays = _read_array_file(path if sep else spec, None)
        except InputError:
            continue
        if not sep and spec.endswith(".npz"):
            shapes.update({k: tuple(a.shape) for k, a in arrays.items()})
        elif not sep:
            shapes[""] = tuple(next(iter(arrays.values())).shape)
        elif name in arrays or len(arrays) == 1:
            shapes[name] = tuple((arrays[name] if name in arrays else next(iter(arrays.values()))).shape)
    return shapes


def random_inputs(graph: Graph, seed: int = 0, skip: Mapping[str, Any] = ()) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Random feeds for the inputs not in ``skip``: N(0, 1) floats, integers in [0, 8), bools."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    where: dict[str, str] = {}
    for v in graph.inputs:
        if v.name in skip:
            continue
        dt = to_numpy_dtype(v.dtype)
        sym = [str(d) for d in v.shape if not isinstance(d, int)]
        if sym:
            example = ",".join(str(d) if isinstance(d, int) else "1" for d in v.shape)
            raise ShapeError(f"input '{v.name}' has symbolic dim(s) {', '.join(sym)} in "
                             f"{format_shape(v.shape)}; random inputs need concrete sizes",
                             hint=f"give its data (--input {v.name}=FILE.npy) or fix its shape with "
                             f"--input-shape {v.name}={example}")
        shape = tuple(int(d) for d in v.shape)
        if dt.kind == "f":
            arr = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "b":
            arr = rng.integers(0, 2, shape).astype(dt)
        else:
            arr = rng.integers(0, 8, shape).astype(dt)
        feeds[v.name] = arr
        where[v.name] = f"{_describe(v)} {RANDOM_INPUT} (seed {seed})"
    return feeds, where


def _floats(text: str | Sequence[float], what: str) -> tuple[float, ...]:
    if isinstance(text, str):
        try:
            return tuple(float(x) for x in text.split(","))
        except ValueError:
            raise InputError(f"--{what} '{text}': not a comma-separated list of numbers",
                             hint=f"give one number, or one per channel: --{what} 104,117,123") from None
    return tuple(float(x) for x in text)


def image_spec(path: str, mean: Any = "0", scale: Any = "1", pixel_format: str = "bgr") -> ImageSpec:
    """Build an ImageSpec from CLI-style text (``NAME=FILE`` picks the input)."""
    name, sep, p = path.partition("=")
    if not sep or os.path.exists(path):
        name, p = "", path
    if pixel_format not in PIXEL_FORMATS:
        raise InputError(f"--pixel-format '{pixel_format}': must be one of {', '.join(PIXEL_FORMATS)}",
                         hint="bgr is Caffe's channel order, rgb torchvision's")
    return ImageSpec(p, name or None, _floats(mean, "mean"), _floats(scale, "scale"), pixel_format)


def _read_pnm(path: Path) -> np.ndarray:
    """A binary PPM (P6) or PGM (P5) with 8-bit samples, as HxWxC uint8 in RGB order."""
    data = path.read_bytes()
    fields: list[bytes] = []
    pos = 0
    while len(fields) < 4:
        while pos < len(data) and data[pos:pos + 1].isspace():
            pos += 1
        if data[pos:pos + 1] == b"#":
            while pos < len(data) and data[pos:pos + 1] not in (b"\n", b"\r"):
                pos += 1
            continue
        start = pos
        while pos < len(data) and not data[pos:pos + 1].isspace():
            pos += 1
        if start == pos:
            raise InputError(f"image '{path}': truncated PPM/PGM header",
                             hint="the file is cut short: write it again, or install "
                                  "opencv-python-headless and give a PNG/JPEG")
        fields.append(data[start:pos])
    pos += 1
    magic = fields[0]
    if magic not in (b"P5", b"P6"):
        raise InputError(f"image '{path}': not a binary PPM/PGM (magic {magic!r})",
                         hint="install opencv-python-headless to read PNG/JPEG")
    try:
        w, h, maxval = (int(x) for x in fields[1:4])
    except ValueError:
        raise InputError(f"image '{path}': malformed PPM/PGM header",
                         hint="a binary PPM/PGM header is 'P6 WIDTH HEIGHT 255' (P5 for gray): write the "
                              "file again, or install opencv-python-headless and give a PNG/JPEG") from None
    c = 3 if magic == b"P6" else 1
    if not (0 < w <= 1 << 15 and 0 < h <= 1 << 15 and 0 < maxval < 256):
        raise InputError(f"image '{path}': unsupported size {w}x{h} or maxval {maxval}",
                         hint="give an 8-bit image (maxval below 256) of at most 32768 pixels a side, or "
                              "install opencv-python-headless and give a PNG/JPEG")
    need = w * h * c
    if len(data) - pos < need:
        raise InputError(f"image '{path}': truncated ({len(data) - pos} of {need} pixel bytes)",
                         hint="the file is cut short: write it again")
    return np.frombuffer(data, np.uint8, need, pos).reshape(h, w, c)


def _read_image(path: str) -> np.ndarray:
    """The image as HxWx3 (RGB) or HxWx1 uint8, through OpenCV when installed."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"image '{path}' does not exist", hint="check the path (--image [NAME=]FILE)")
    try:
        import cv2
    except ImportError:
        return _read_pnm(p)
    img = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise InputError(f"image '{path}': OpenCV cannot read it", hint="use a PNG, JPEG or PPM file")
    if img.dtype != np.uint8:
        img = (img / (np.iinfo(img.dtype).max / 255.0)).astype(np.uint8) if img.dtype.kind == "u" else img
    if img.ndim == 2:
        return img[:, :, None]
    return img[:, :, 2::-1] if img.shape[2] >= 3 else img  # BGR(A) -> RGB


def _resize(img: np.ndarray, h: int, w: int) -> np.ndarray:
    if img.shape[:2] == (h, w):
        return img
    try:
        import cv2

        out = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
        return out if out.ndim == 3 else out[:, :, None]
    except ImportError:
        ys = (np.arange(h) * img.shape[0] // h).clip(0, img.shape[0] - 1)
        xs = (np.arange(w) * img.shape[1] // w).clip(0, img.shape[1] - 1)
        return img[ys][:, xs]


def image_input(graph: Graph, spec: ImageSpec) -> tuple[str, np.ndarray, str]:
    """Read, resize and normalise an image for an NCHW input; returns (name, array, description)."""
    if spec.input:
        v = _find(graph, spec.input)
    else:
        cands = [x for x in graph.inputs if len(x.shape) == 4 and x.shape[1] in (1, 3)]
        if len(cands) != 1:
            raise InputError(
                f"--image: cannot tell which input takes the image ({len(cands)} NCHW inputs with 1 or 3 channels)",
                hint="write --image NAME=FILE",
            )
        v = cands[0]
    if len(v.shape) != 4 or v.shape[1] not in (1, 3):
        raise InputError(f"--image: input '{v.name}' is {_describe(v)}, not N x 1|3 x H x W",
                         hint="--image feeds an NCHW input with 1 or 3 channels; feed this input with "
                              "--input NAME=FILE.npy")
    n, c, h, w = (int(d) for d in v.shape)
    img = _resize(_read_image(spec.path), h, w).astype(np.float32)
    if c == 1 or spec.pixel_format == "gray":
        img = img[:, :, :3].mean(axis=2, keepdims=True) if img.shape[2] >= 3 else img[:, :, :1]
        img = np.repeat(img, c, axis=2)
    else:
        if img.shape[2] == 1:
            img = np.repeat(img, 3, axis=2)
        img = img[:, :, :3]
        if spec.pixel_format == "bgr":
            img = img[:, :, ::-1]
    for what, vals in (("mean", spec.mean), ("scale", spec.scale)):
        if len(vals) not in (1, c):
            raise InputError(f"--{what}: {len(vals)} values for {c} channels", hint=f"give 1 or {c}")
    mean = np.asarray(spec.mean, np.float32).reshape(1, 1, -1)
    scale = np.asarray(spec.scale, np.float32).reshape(1, 1, -1)
    chw = ((img - mean) * scale).transpose(2, 0, 1)
    arr = np.broadcast_to(chw[None], (n, c, h, w)).astype(to_numpy_dtype(v.dtype))
    return v.name, arr, f"{_describe(v)} from image {os.path.basename(spec.path)} ({spec.pixel_format})"


def make_inputs(
    graph: Graph,
    given: Mapping[str, Any] | None = None,
    specs: Sequence[str] = (),
    image: ImageSpec | None = None,
    seed: int = 0,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """All feeds for ``graph``: given arrays, then files, then an image, then random for the rest."""
    feeds: dict[str, np.ndarray] = {}
    where: dict[str, str] = {}
    for k, arr in (given or {}).items():
        v = _find(graph, k)
        feeds[k] = _fit(v, np.asarray(arr), "the array given")
        where[k] = f"{_describe(v)} given"
    f, w = load_input_specs(graph, specs)
    feeds.update(f)
    where.update(w)
    if image is not None:
        name, arr, desc = image_input(graph, image)
        feeds[name], where[name] = arr, desc
    f, w = random_inputs(graph, seed, skip=feeds)
    feeds.update(f)
    where.update(w)
    return feeds, where
