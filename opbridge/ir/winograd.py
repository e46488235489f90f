"""Winograd minimal filtering for 3x3, stride-1 convolutions (float32).

A 3x3 convolution computed tile by tile as ``Y = A^T [ (G g G^T) * (B^T d B) ] A`` (Lavin &
Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR 2016, eq. 8): each output
tile of ``r x r`` needs ``(r + 2)^2`` multiplies per input/output channel pair instead of
``9 r^2``, and the multiplies of all tiles form ``(r + 2)^2`` independent GEMMs, (M, C) @
(C, tiles). F(2x2, 3x3) does 2.25x fewer multiplies than im2col, F(4x4, 3x3) 4x fewer;
ResNet-style 3x3 convolutions spend most of their time in those GEMMs, so this is what
makes them faster with numpy's BLAS.

Accuracy: the transforms of F(2x2, 3x3) use only 0, +-1 and 1/2, and its error is that of
im2col (max error / max |y| ~ 3e-7 in float32 on random data); F(4x4, 3x3) (interpolation
points 0, +-1, +-2) ~4e-6 of the output's largest magnitude. Both transforms are
applied as small GEMMs over every tile at once (a tile's rows, then its columns); the
filters' transform is computed in
float64 once per weight array and kept (see :func:`transformed_weights`; the simulator keeps
it per constant for the life of a program's executor instead). Whether a convolution takes
this path at all is :func:`winograd_tile`'s decision.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np


class _Transforms(NamedTuple):
    bt: np.ndarray  # (a, a): input tile -> transformed tile
    g: np.ndarray   # (a, 3): filter -> transformed filter
    at: np.ndarray  # (r, a): product -> output tile


# Lavin & Gray 2016, section 4.1 (F(2x2, 3x3)) and 4.2 (F(4x4, 3x3)).
_F = {
    2: _Transforms(
        np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
        np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float64),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)),
    4: _Transforms(
        np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], np.float64),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], np.float64),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                  [0, 1, -1, 8, -8, 1]], np.float64)),
}
#: B^T and A^T in float32, applied to the tiles' rows, then their columns.
_F32 = {r: (f.bt.astype(np.float32), f.at.astype(np.float32)) for r, f in _F.items()}

#: Output sizes (the smaller spatial side) from which each tile size pays for its transforms,
#: measured on ResNet-50's 3x3 convolutions (56, 28: F(4x4); 14: F(2x2); 7: im2col wins).
_MIN_SIDE = ((20, 4), (10, 2))
#: Fewest input and output channels for which the GEMMs dominate the transforms.
_MIN_CHANNELS = 8
#: Bytes of transformed filters kept at most; past it further convolutions use im2col, so the
#: cache never grows with the number of models run.
CACHE_BYTES = 512 << 20


def winograd_tile(c: int, m: int, kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int], group: int, out_hw: Sequence[int],
                  dtype: np.dtype) -> int | None:
    """The one decision of whether a convolution runs by Winograd: the output tile side (2 or
    4) for an ungrouped float32 2-D convolution of ``c`` to ``m`` channels with a 3x3 kernel,
    stride 1 and dilation 1 whose output is ``out_hw``, or None where it does not apply or
    im2col is faster. The interpreter's Conv and the simulator's tile kernel both ask it."""
    if (tuple(kernel) != (3, 3) or tuple(strides) != (1, 1) or tuple(dilations) != (1, 1)
            or group != 1 or np.dtype(dtype) != np.float32 or len(out_hw) != 2):
        return None
    return tile_size(c, m, out_hw[0], out_hw[1])


def tile_size(c: int, m: int, oh: int, ow: int) -> int | None:
    """The output tile side (2 or 4) for a 3x3 stride-1 convolution of ``c`` to ``m`` channels
    with an ``oh x ow`` output, or None where im2col is faster."""
    if c < _MIN_CHANNELS or m < _MIN_CHANNELS:
        return None
    side = min(oh, ow)
    return next((r for least, r in _MIN_SIDE if side >= least), None)


class _Entry(NamedTuple):
    ref: weakref.ref[np.ndarray]
    probe: bytes
    u: np.ndarray


_cache: dict[tuple[int, int], _Entry] = {}
_cached_bytes = [0]
#: Runs in threads (the web server's jobs) share the cache; reentrant, because a weight array
#: freed while the lock is held runs its callback (``_drop``) in the same thread.
_lock = threading.RLock()


def _probe(w: np.ndarray) -> bytes:
    """A few of ``w``'s values, spread over the array: an entry whose array was refilled in
    place (a reused buffer) no longer matches."""
    flat = w.reshape(-1)
    return flat[:: max(1, flat.size // 61)].tobytes()


def _drop(key: tuple[int, int]) -> None:
    with _lock:
        entry = _cache.pop(key, None)
        if entry is not None:
            _cached_bytes[0] -= entry.u.nbytes


def _dropper(key: tuple[int, int]) -> Callable[[weakref.ref[np.ndarray]], None]:
    """The callback that forgets an entry when its weight array is freed."""
    return lambda _ref: _drop(key)


def filter_transform(w: np.ndarray, r: int) -> np.ndarray:
    """``G w G^T`` of the filters ``w`` (M, C, 3, 3), computed in float64, as float32
    (a*a, M, C), a = r + 2; not kept (callers that see one weight many times keep it)."""
    f = _F[r]
    a = f.g.shape[0]
    u = np.einsum("ik,mckl,jl->ijmc", f.g, w.astype(np.float64), f.g, optimize=True)
    return np.ascontiguousarray(u.reshape(a * a, *w.shape[:2]), dtype=np.float32)


def transformed_weights(w: np.ndarray, r: int) -> np.ndarray | None:
    """``G w G^T`` of the filters ``w`` (M, C, 3, 3) as float32 (a*a, M, C), a = r + 2.

    Kept per weight array while it lives (constants are passed as the same array on every
    run), so the transform is paid once; None when the cache is full (the caller then uses
    im2col)."""
    key = (id(w), r)
    entry = _cache.get(key)
    if entry is not None and entry.ref() is w and entry.probe == _probe(w):
        return entry.u
    a = r + 2
    if _cached_bytes[0] + a * a * w.shape[0] * w.shape[1] * 4 > CACHE_BYTES:
        return None  # checked first: a full cache must not cost a transform per call
    u = filter_transform(w, r)
    try:
        ref = weakref.ref(w, _dropper(key))
    except TypeError:  # an array type without weak references: not cacheable
        return None
    with _lock:
        _drop(key)
        if _cached_bytes[0] + u.nbytes > CACHE_BYTES:
            return None
        _cache[key] = _Entry(ref, _probe(w), u)
        _cached_bytes[0] += u.nbytes
    return u


def _transform(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``t @ tile @ t^T`` for every tile at once: ``x`` (a, a, k) holds ``k`` tiles' entries;
    returns (b, b, k) for ``t`` (b, a). Two GEMMs with inner size ``a`` (over the rows, then the
    columns): a third of the multiplies of one GEMM by ``kron(t, t)``, and the transforms are
    memory-bound, so it takes about half the time of the kron form."""
    b, a = t.shape
    rows = np.matmul(t, x.reshape(a, -1)).reshape(b, a, -1)
    return np.matmul(t, rows)  # batched over the first axis: the columns


def winograd_conv2d(x: np.ndarray, u: np.ndarray, r: int, pads: tuple[int, ...],
                    out: np.ndarray | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """3x3 stride-1 convolution of float32 ``x`` (N, C, H, W) with transformed filters ``u``
    (from :func:`transformed_weights`), zero ``pads`` (top, left, bottom, right), plus
    ``bias`` (M) if given; written into ``out`` (N, M, OH, OW, any strides) when given, else
    into a new array."""
    n, c, h, wd = x.shape
    a = r + 2
    m = u.shape[1]
    pt, pl, pb, pr = pads
    oh, ow = h + pt + pb - 2, wd + pl + pr - 2
    th, tw = -(-oh // r), -(-ow // r)
    # padded input, grown to whole tiles (the extra rows/columns only feed cropped outputs)
    xp = np.zeros((c, n, r * th + 2, r * tw + 2), np.float32)
    xp[:, :, pt:pt + h, pl:pl + wd] = x.transpose(1, 0, 2, 3)
    d = np.empty((a, a, c, n, th, tw), np.float32)
    for i in range(a):
        for j in range(a):
            d[i, j] = xp[:, :, i:i + r * th:r, j:j + r * tw:r]
    bt, at = _F32[r]
    v = _transform(bt, d.reshape(a, a, -1)).reshape(a * a, c, -1)
    prod = np.matmul(u, v)  # (a*a, M, N*tiles): the multiplies, as a*a GEMMs
    yt = _transform(at, prod.reshape(a, a, -1)).reshape(r, r, m, n, th, tw)
    dst = np.empty((n, m, oh, ow), np.float32) if out is None else out
    # one copy per position (p, q) in the tile, into every r-th row and column: contiguous
    # reads, and ~2x faster than one copy through the (N, M, th, r, tw, r) view of all tiles;
    # the last tiles' rows and columns past the output are left out, and the bias goes in
    b4 = None if bias is None else bias.reshape(1, m, 1, 1)
    for p in range(r):
        for q in range(r):
            place = dst[:, :, p::r, q::r]
            src = yt[p, q, :, :, :place.shape[2], :place.shape[3]].transpose(1, 0, 2, 3)
            if b4 is None:
                place[...] = src
            else:
                np.add(src, b4, out=place)
    return dst
