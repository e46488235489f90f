"""``ob.calibrate``: run the interpreter over calibration samples and choose, for every float
tensor, the threshold that symmetric int8 maps to 127.

Methods:

- ``minmax``: the largest absolute value seen.
- ``percentile``: the ``percentile``-th percentile of the absolute values, read off a
  histogram of them (as onnxruntime's ``PercentileCalibrater`` does with its symmetric
  histogram, ``onnxruntime/python/tools/quantization/calibrate.py``).
- ``kl``: the threshold whose 128-level quantization of the absolute-value histogram is closest
  (Kullback-Leibler) to the histogram clipped there, as TensorRT's entropy calibration does
  (Migacz, "8-bit Inference with TensorRT", GTC 2017) and TPU-MLIR's ``kld`` calibrator after
  it: 2048 bins over ``[0, max |x|]``, candidate thresholds from bin 128 up, outliers folded
  into the last kept bin (candidates every 16 bins, then every bin round the best, where
  TensorRT tries every one), empty bins left empty when expanding the candidate back, both
  distributions smoothed (MXNet's ``_smooth_distribution``) before comparing.

- ``mse``: the threshold that minimises the expected squared error of quantizing the tensor:
  clipping error of the values above it plus the uniform rounding noise ``step**2 / 12`` of
  those below (``step = threshold / 255`` for a never-negative tensor, which is quantized
  unsigned, else ``threshold / 127``), over the same 2048-bin histogram of |x|. It is the
  per-tensor search TPU-MLIR's and PPQ's calibrators run (there by trying thresholds and
  measuring the error; here in closed form per candidate, every bin edge).

Histogram methods run the samples twice: first for each tensor's range, then to fill
histograms over that fixed range (the range of a tensor is known only after every sample).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..ir.graph import Graph
from ..ir.interpret import interpret
from ..threads import threads_env
from .data import Preprocess, load_samples
from .table import METHODS, CalibrationTable, QuantError, TensorRange

#: Histogram bins and quantized levels of the KL method (TensorRT's and TPU-MLIR's values).
KL_BINS = 2048
KL_LEVELS = 128
#: The KL search tries every 16th candidate, then every one next to the best: 12x fewer
#: divergences than TensorRT's exhaustive loop, for thresholds within a bin or two of it.
KL_STRIDE = 16


def calibrate(
    graph: Graph | str | os.PathLike[str],
    samples: Any,
    method: str = "minmax",
    *,
    num_samples: int | None = None,
    preprocess: Preprocess | None = None,
    percentile: float = 99.99,
    bins: int = KL_BINS,
    equalize: bool = False,
    channel_activations: bool = False,
    progress: bool = False,
    threads: int | None = None,
) -> CalibrationTable:
    """The calibration table of ``graph`` over ``samples`` (a list of feed dicts, or a folder
    of ``.npy``/``.npz`` files or images, see :func:`opbridge.quant.data.load_samples`).

    ``method`` is "minmax", "percentile" or "kl"; ``num_samples`` caps how many are used;
    ``preprocess`` turns images into inputs; ``equalize`` calibrates the graph after
    cross-layer equalisation (:mod:`opbridge.quant.equalize`; the table says so, and
    quantizing with it equalises too); ``channel_activations`` records each channel's largest
    |x| too, which makes :func:`opbridge.quant.quantize` scale per channel the activations the
    chip takes per channel for free (:func:`opbridge.quant.int8.channel_points`): they fit the
    samples channel by channel, so the samples must be like the deployment data (a channel
    quiet on them clips where it fires); ``progress`` shows a bar on a terminal; ``threads``:
    the BLAS threads of the interpreter runs (None: ``OPBRIDGE_NUM_THREADS``, else 1; 0: BLAS's
    own setting).
    """
    if method not in METHODS:
        raise QuantError(f"calibration method {method!r} is not one of {', '.join(METHODS)}",
                         hint="use minmax (fast), percentile or kl (clips outliers)")
    if not 0 < percentile <= 100:
        raise QuantError(f"percentile {percentile}: must be in (0, 100]",
                         hint="give the share of values kept, e.g. 99.99 (--percentile 99.99)")
    if bins < KL_LEVELS:
        raise QuantError(f"bins {bins}: must be >= {KL_LEVELS}", hint=f"give {KL_LEVELS} bins or more")
    g = prepared(graph, equalize)
    feeds = load_samples(g, samples, limit=num_samples, preprocess=preprocess)
    passes = 1 if method == "minmax" else 2
    with _progress(progress, passes * len(feeds), g.name) as step, threads_env(threads, "threads"):
        keep, reference = _reference_keeper(g, feeds)
        lo, hi, channels = _ranges(g, feeds, step, keep, channels=channel_activations)
        if method == "minmax":
            thresholds = {k: max(abs(lo[k]), abs(hi[k])) for k in lo}
        else:
            hists = _histograms(g, feeds, {k: max(abs(lo[k]), abs(hi[k])) for k in lo}, bins, step)
            thresholds = {k: _choose(method, h, max(abs(lo[k]), abs(hi[k])), lo[k] >= 0, percentile)
                          for k, h in hists.items()}
    tensors = {k: TensorRange(lo[k], hi[k], float(thresholds[k]), channels.get(k)) for k in lo}
    table = CalibrationTable(g.name, method, len(feeds), tensors, equalize)
    table.reference = reference
    return table


#: At most this many bytes of float outputs a table keeps for a mixed-precision search.
KEEP_REFERENCE_BYTES = 256 << 20


def _reference_keeper(graph: Graph, feeds: Sequence[dict[str, np.ndarray]]
                      ) -> tuple[Callable[[int, dict[str, np.ndarray]], None], dict[str, dict[str, np.ndarray]]]:
    """A callback that keeps, of the tensors of sample ``i``'s run, the ones the mixed search
    scores, and the dict it keeps them in (by :func:`opbridge.quant.quantize.sample_key`)."""
    from .quantize import graph_digest, sample_key, scored_tensors

    names, digest = scored_tensors(graph), graph_digest(graph)
    kept: dict[str, dict[str, np.ndarray]] = {}
    room = [KEEP_REFERENCE_BYTES]

    def keep(i: int, tensors: dict[str, np.ndarray]) -> None:
        outs = {n: tensors[n] for n in names if n in tensors}
        room[0] -= sum(np.asarray(t).nbytes for t in outs.values())
        if room[0] >= 0:  # past the cap the search runs the float model again, as without it
            kept[sample_key(digest, feeds[i])] = outs

    return keep, kept


def prepared(graph: Graph | str | os.PathLike[str], equalize: bool = False) -> Graph:
    """The graph calibration and quantization work on: ``graph`` (or the model file converted)
    with every BatchNormalization after a Conv folded into it (on a copy), so that the tensor
    quantized is the normalised one, whose channels share a range, and not the Conv's raw
    output, whose channels do not (TPU-MLIR and onnxruntime fold before quantizing too); a
    per-channel Mul / Add right after such a BatchNormalization (Caffe's Scale) is folded too
    (``fold_scale``, TPU-MLIR's MergeScale2Conv), so the int8 Conv's output is the scaled
    tensor. With ``equalize``, then cross-layer equalisation (:func:`opbridge.quant.equalize.equalize`)."""
    if equalize:
        from .equalize import equalize as equalized

        return equalized(prepared(graph))
    if not isinstance(graph, Graph):
        from ..validate.api import load_graph

        graph = load_graph(graph)[0]
    if not any(n.op == "BatchNormalization" for n in graph.nodes):
        return graph
    from ..ir.passes import optimize
    from ..ir.passes.fold_scale import FoldScaleIntoConv
    from ..passcheck import clone_graph

    g = clone_graph(graph)
    normalised = [n.outputs[0].name for n in g.nodes if n.op == "BatchNormalization"]
    return optimize(g, ("fold_batchnorm", FoldScaleIntoConv(after=normalised)))


def float_tensors(graph: Graph) -> list[str]:
    """The names of the tensors calibration records: float graph inputs and node outputs."""
    names = [v.name for v in graph.inputs if v.dtype in ("f32", "f16", "bf16", "f64")]
    for n in graph.nodes:
        names += [v.name for v in n.outputs if v.dtype in ("f32", "f16", "bf16", "f64")]
    return names


def _runs(graph: Graph, feeds: Sequence[dict[str, np.ndarray]],
          step: Callable[[], None]) -> Iterator[dict[str, np.ndarray]]:
    names = float_tensors(graph)
    for feed in feeds:
        out = interpret(graph, feed, keep_intermediates=True)
        yield {k: np.asarray(out[k], np.float32) for k in names if k in out}
        step()


def _ranges(graph: Graph, feeds: Sequence[dict[str, np.ndarray]], step: Callable[[], None],
            keep: Callable[[int, dict[str, np.ndarray]], None] | None = None, channels: bool = False,
            ) -> tuple[dict[str, float], dict[str, float], dict[str, tuple[float, ...]]]:
    """Per tensor the smallest and largest finite value over the samples, and, with
    ``channels``, for a tensor of rank 3 or more the largest finite |x| of each channel (axis 1)."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    per: dict[str, np.ndarray] = {}
    for i, tensors in enumerate(_runs(graph, feeds, step)):
        if keep is not None:
            keep(i, tensors)
        for k, a in tensors.items():
            mask = np.isfinite(a)
            finite = a[mask]
            if finite.size == 0:
                continue
            lo[k] = min(lo.get(k, np.inf), float(finite.min()))
            hi[k] = max(hi.get(k, -np.inf), float(finite.max()))
            if channels and a.ndim >= 3:
                m = np.abs(np.where(mask, a, 0)).max(axis=(0, *range(2, a.ndim)))
                per[k] = m if k not in per or per[k].shape != m.shape else np.maximum(per[k], m)
    return lo, hi, {k: tuple(float(c) for c in m) for k, m in per.items()}


def _histograms(graph: Graph, feeds: Sequence[dict[str, np.ndarray]], top: dict[str, float],
                bins: int, step: Callable[[], None]) -> dict[str, np.ndarray]:
    """Per tensor, the histogram of |x| over ``[0, top]`` in ``bins`` bins, over every sample."""
    hists: dict[str, np.ndarray] = {}
    for tensors in _runs(graph, feeds, step):
        for k, a in tensors.items():
            if k not in top:
                continue
            h, _ = np.histogram(np.abs(a[np.isfinite(a)]), bins=bins, range=(0.0, top[k] or 1.0))
            hists[k] = hists.get(k, 0) + h
    return hists


def _choose(method: str, hist: np.ndarray, top: float, unsigned: bool, percentile: float) -> float:
    if method == "kl":
        return kl_threshold(hist, top)
    if method == "mse":
        return mse_threshold(hist, top, 255 if unsigned else 127)
    return percentile_threshold(hist, top, percentile)


def mse_threshold(hist: np.ndarray, top: float, levels: int = 127) -> float:
    """The bin edge ``t`` of a histogram of |x| (``hist.size`` bins over ``[0, top]``) that
    minimises ``sum_{c > t} n_c (c - t)**2 + sum_{c <= t} n_c (t / levels)**2 / 12`` over the
    bin centres ``c`` with counts ``n_c``: clipping plus rounding error of ``levels`` steps."""
    if top == 0 or hist.sum() == 0:
        return 0.0
    h = hist.astype(np.float64)
    width = top / h.size
    c = (np.arange(h.size) + 0.5) * width
    # suffix sums over the bins above edge k (k = 1..size): sum n, sum n c, sum n c^2
    s0, s1, s2 = (np.concatenate([np.cumsum(a[::-1])[::-1][1:], [0.0]]) for a in (h, h * c, h * c * c))
    t = np.arange(1, h.size + 1) * width
    below = np.cumsum(h)
    err = s2 - 2 * t * s1 + t * t * s0 + below * (t / levels) ** 2 / 12.0
    return float(t[int(np.argmin(err))])


def percentile_threshold(hist: np.ndarray, top: float, percentile: float) -> float:
    """The upper edge of the first bin where the cumulative share of |x| reaches ``percentile``."""
    total = hist.sum()
    if total == 0 or top == 0:
        return 0.0
    cdf = np.cumsum(hist) / total
    i = int(np.searchsorted(cdf, percentile / 100.0))
    return float(min(top, (i + 1) * top / hist.size))


def kl_threshold(hist: np.ndarray, top: float, levels: int = KL_LEVELS, stride: int = KL_STRIDE) -> float:
    """TensorRT's entropy threshold of a histogram of |x| with ``hist.size`` bins over
    ``[0, top]`` (see the module docstring). Candidates are tried every ``stride`` bins, then
    every bin within ``stride`` of the best (``stride=1``: every bin, as TensorRT does)."""
    if top == 0 or hist.sum() == 0:
        return 0.0
    hist = hist.astype(np.float64)
    tail = np.concatenate([np.cumsum(hist[::-1])[::-1], [0.0]])  # tail[i] = hist[i:].sum()

    def divergence(i: int) -> float:
        p = hist[:i].copy()
        p[-1] += tail[i]  # outliers clip to the threshold
        return _kl(p, quantized(hist[:i], p != 0, levels))

    coarse = list(range(levels, hist.size + 1, stride))
    if coarse[-1] != hist.size:
        coarse.append(hist.size)
    best_i = min(coarse, key=divergence)
    if stride > 1:
        fine = range(max(levels, best_i - stride + 1), min(hist.size, best_i + stride - 1) + 1)
        best_i = min([best_i, *fine], key=divergence)
    return float((best_i + 0.5) * top / hist.size) if best_i < hist.size else float(top)


def quantized(h: np.ndarray, nonzero: np.ndarray, levels: int) -> np.ndarray:
    """``h`` merged into ``levels`` groups of ``h.size // levels`` consecutive bins (the last
    group takes the remainder, as TensorRT's reference code splits them), then each group's
    sum spread evenly back over its bins that ``nonzero`` marks (the others stay 0)."""
    step = h.size // levels
    cut = step * levels
    sums = h[:cut].reshape(levels, step).sum(axis=1)
    counts = nonzero[:cut].reshape(levels, step).sum(axis=1).astype(np.float64)
    sums[-1] += h[cut:].sum()
    counts[-1] += nonzero[cut:].sum()
    per_bin = np.divide(sums, counts, out=np.zeros(levels), where=counts > 0)
    spread = np.concatenate([np.repeat(per_bin, step), np.full(h.size - cut, per_bin[-1])])
    return np.where(nonzero, spread, 0.0)


def smooth(h: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """``h`` with ``eps`` put in every empty bin and taken evenly from the others, so KL stays
    finite (MXNet's ``_smooth_distribution``, which onnxruntime's entropy calibrator copies)."""
    zeros = h == 0
    n_nonzero = h.size - int(zeros.sum())
    if n_nonzero == 0:
        return h
    return h + np.where(zeros, eps, -eps * int(zeros.sum()) / n_nonzero)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of two unnormalised histograms, both smoothed first (see :func:`smooth`)."""
    if q.sum() == 0:
        return float("inf")
    p, q = smooth(p), smooth(q)
    if np.any(q <= 0) or np.any(p < 0):  # eps outweighed a small count: no smoothing possible
        return float("inf")
    p = p / p.sum()
    q = q / q.sum()
    m = p > 0
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


@contextmanager
def _progress(enabled: bool, total: int, title: str) -> Iterator[Callable[[], None]]:
    """A rich progress bar over the interpreter runs (only on a terminal); yields ``step()``."""
    from ..validate.progress import Stages

    with Stages(enabled, total, title=f"calibrating {title}") as stages:
        if stages.progress is None:
            yield lambda: None
            return
        stages.progress.update(stages.task, description=f"calibrating {title}")
        yield lambda: stages.progress.advance(stages.task)
