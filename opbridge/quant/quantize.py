"""``ob.quantize``: a float graph -> an int8 (QDQ) or half-precision graph.

With ``mixed_precision="auto"`` the int8 graph is scored against the float one (the lowest
output cosine over the evaluation samples); while it is under ``target_cos``, layers are kept
in float one at a time, most sensitive first: a layer's sensitivity is how much the output
cosine rises when it alone stays float, measured layer by layer as TPU-MLIR's sensitive-layer
search does (``run_sensitive_layer``). The layers it kept float, and the
cosine reached, are in ``graph.metadata`` (``quant.auto_float_layers``, ``quant.cosine``;
``quant.float_layers`` lists every int8-capable layer left float, for whatever reason).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.graph import Graph
from ..ir.interpret import interpret
from ..validate.progress import Stages
from .calibrate import prepared
from .data import Preprocess, load_samples
from .int8 import quantizable, to_int8
from .lowp import LOWP, to_half
from .table import CalibrationTable, QuantError, as_table

DTYPES = ("int8", *LOWP)
#: Evaluation samples drawn from the table's input ranges when none are given.
RANDOM_SAMPLES = 4
#: Samples the per-layer sensitivity search runs on (the target is checked on all of them).
SENSITIVITY_SAMPLES = 4


def quantize(
    graph: Graph | str | os.PathLike[str],
    table: CalibrationTable | str | os.PathLike[str] | Mapping[str, Any] | None,
    dtype: str = "int8",
    per_channel: bool = True,
    mixed_precision: str | None = None,
    *,
    target_cos: float = 0.999,
    samples: Any = None,
    preprocess: Preprocess | None = None,
    progress: bool = False,
) -> Graph:
    """``graph`` quantized to ``dtype`` ("int8" with a calibration ``table``; "f16"/"bf16"
    need none). ``mixed_precision="auto"`` keeps layers in float until the int8 outputs reach
    ``target_cos`` against the float ones on ``samples`` (feed dicts or a folder; default:
    random inputs in the table's input ranges); ``progress`` shows the search's progress on a
    terminal."""
    if dtype not in DTYPES:
        raise QuantError(f"quantization type {dtype!r} is not supported",
                         hint=f"use one of {', '.join(DTYPES)}")
    if dtype in LOWP:
        return to_half(graph if isinstance(graph, Graph) else prepared(graph), dtype)
    g = prepared(graph)
    if table is None:
        raise QuantError("int8 quantization needs a calibration table",
                         hint="make one with ob.calibrate(g, samples) / 'opbridge calibrate'")
    tab = as_table(table)
    if mixed_precision is None:
        return to_int8(g, tab, per_channel=per_channel)
    if mixed_precision != "auto":
        raise QuantError(f"mixed_precision {mixed_precision!r}: use None or 'auto'")
    if not 0 < target_cos <= 1:
        raise QuantError(f"target cosine {target_cos}: must be in (0, 1]")
    feeds = (load_samples(g, samples, preprocess=preprocess) if samples is not None
             else random_feeds(g, tab))
    with Stages(progress, 1, title=f"mixed precision {g.name}") as stages:
        return auto_mixed(g, tab, feeds, target_cos, per_channel, stages)


def random_feeds(graph: Graph, table: CalibrationTable, n: int = RANDOM_SAMPLES) -> list[dict[str, np.ndarray]]:
    """``n`` feeds drawn uniformly from each float input's calibrated [min, max] (seed 0)."""
    rng = np.random.default_rng(0)
    feeds = []
    for _ in range(n):
        feed = {}
        for v in graph.inputs:
            r = table.tensors.get(v.name)
            lo, hi = (r.min, r.max) if r is not None else (-1.0, 1.0)
            feed[v.name] = rng.uniform(lo, hi, size=tuple(int(d) for d in v.shape)).astype(np.float32)
        feeds.append(feed)
    return feeds


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two tensors in float64 (1 for two zero tensors)."""
    x = np.asarray(a, np.float64).ravel()
    y = np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(x), np.linalg.norm(y)
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(x, y) / (na * nb))


def output_cosine(graph: Graph, quantized: Graph, feeds: Sequence[Mapping[str, np.ndarray]],
                  reference: Sequence[Mapping[str, np.ndarray]] | None = None) -> float:
    """The lowest cosine of any output of ``quantized`` against ``graph`` over ``feeds``."""
    worst = 1.0
    for i, feed in enumerate(feeds):
        ref = reference[i] if reference is not None else interpret(graph, feed)
        got = interpret(quantized, feed)
        for v in graph.outputs:
            worst = min(worst, cosine(ref[v.name], got[v.name]))
    return worst


def sensitivities(graph: Graph, table: CalibrationTable, feeds: Sequence[Mapping[str, np.ndarray]],
                  reference: Sequence[Mapping[str, np.ndarray]], per_channel: bool,
                  base: float, stages: Stages) -> dict[str, float]:
    """Per int8 layer, how much the output cosine over ``feeds`` rises when that layer alone
    stays float (TPU-MLIR's sensitive-layer search measures layers one by one the same way)."""
    gains: dict[str, float] = {}
    for node in graph.nodes:
        if quantizable(node):
            with stages.stage(f"sensitivity of {node.name}"):
                q = to_int8(graph, table, per_channel=per_channel, keep_float=[node.name])
                gains[node.name] = output_cosine(graph, q, feeds, reference) - base
    return gains


def auto_mixed(graph: Graph, table: CalibrationTable, feeds: Sequence[Mapping[str, np.ndarray]],
               target_cos: float, per_channel: bool, stages: Stages | None = None) -> Graph:
    """The int8 graph with layers kept float, most sensitive first, until its outputs reach
    ``target_cos``; see the module docstring."""
    stages = stages or Stages(False, 0)
    reference = [interpret(graph, f) for f in feeds]
    probe = list(feeds[:SENSITIVITY_SAMPLES])
    keep: list[str] = []
    q = to_int8(graph, table, per_channel=per_channel)
    cos = output_cosine(graph, q, feeds, reference)
    if cos < target_cos:
        base = output_cosine(graph, q, probe, reference)
        stages.add(2 * sum(quantizable(n) for n in graph.nodes))
        gains = sensitivities(graph, table, probe, reference, per_channel, base, stages)
        for name in sorted(gains, key=lambda n: -gains[n]):
            keep.append(name)
            with stages.stage(f"{len(keep)} layer(s) float: cosine {cos:.5f}"):
                q = to_int8(graph, table, per_channel=per_channel, keep_float=keep)
                cos = output_cosine(graph, q, feeds, reference)
            if cos >= target_cos:
                break
    q.metadata["quant.mixed_precision"] = "auto"
    q.metadata["quant.target_cos"] = f"{target_cos}"
    q.metadata["quant.cosine"] = f"{cos:.6f}"
    q.metadata["quant.auto_float_layers"] = ",".join(keep)
    return q
