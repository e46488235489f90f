"""``ob.quantize``: a float graph -> an int8 (QDQ) or half-precision graph.

With ``mixed_precision="auto"`` the int8 graph is scored against the float one: per sample,
the lowest score of the outputs (cosine) and of the logits before a final Softmax / Sigmoid
(:func:`scaled_cosine`, see :func:`scored_tensors`), and over the samples the lowest, never a
mean. While it is under ``target_cos``, layers are kept in float, most sensitive first. A
layer's sensitivity is the score's drop when it alone runs in int8 (TPU-MLIR's
sensitive-layer search ranks layers by the same kind of single-layer score,
``run_sensitive_layer``), computed on the float activations of the samples int8 everywhere
does worst on, by running that layer in int8 and only the nodes downstream of it again
(:func:`layer_errors`). Then 1, 2, 4, ... of the most sensitive layers are kept float until
the target is met, and a bisection finds the fewest that meet it, each candidate scored on
those worst samples and stopped at the first one under the target (:class:`_WorstFirst`);
the answer is checked on every sample, and a sample it misses joins the scored ones
(:class:`_Search`). A result under int8 everywhere is never returned. The layers it kept
float, and the score reached, are in ``graph.metadata`` (``quant.auto_float_layers``,
``quant.cosine``; ``quant.float_layers`` lists every int8-capable layer left float, for
whatever reason).
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.graph import Graph, Node
from ..ir.interpret import interpret, run_node
from ..threads import check_threads, threads_env
from ..validate.progress import Stages
from .calibrate import prepared
from .correct import bias_corrections, fake_quant
from .data import Preprocess, check_sample_limit, load_samples
from .int8 import ActParams, point_params, quant_points, quantizable, quantized_weight, to_int8, weight_axis
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
    bias_correction: bool = False,
    equalize: bool | None = None,
    progress: bool = False,
    num_samples: int | None = None,
    threads: int | None = None,
) -> Graph:
    """``graph`` quantized to ``dtype`` ("int8" with a calibration ``table``; "f16"/"bf16"
    need none). ``per_channel``: int8 weights per output channel, and, when the table has
    channel ranges (``calibrate(..., channel_activations=True)``), the activations the chip
    takes per channel for free (:func:`opbridge.quant.int8.channel_points`) per channel;
    False: one scale per tensor for both. ``mixed_precision="auto"`` keeps layers in float until the int8 outputs reach
    ``target_cos`` against the float ones on ``samples`` (feed dicts or a folder; default:
    random inputs in the table's input ranges); ``bias_correction`` removes each int8 layer's
    mean output error per channel, measured on ``samples`` (calibration data, needed then),
    through its bias (:mod:`opbridge.quant.correct`); ``equalize`` quantizes the graph after
    cross-layer equalisation (:mod:`opbridge.quant.equalize`; default: as the table was
    calibrated, ``calibrate(..., equalize=True)``); ``progress`` shows the search's progress
    on a terminal. ``num_samples`` caps how many of ``samples`` are used; ``threads``: the BLAS threads of the
    interpreter runs (None: ``OPBRIDGE_NUM_THREADS``, else 1; 0: BLAS's own setting)."""
    if dtype not in DTYPES:
        raise QuantError(f"quantization type {dtype!r} is not supported",
                         hint=f"use one of {', '.join(DTYPES)}")
    if threads is not None:  # a bad value is refused whichever path runs
        check_threads(threads, "threads")
    check_sample_limit(num_samples)
    if dtype in LOWP:
        int8_only = [f"{name}= ({flag})" for name, flag, given in (
            ("table", "--table", table is not None), ("mixed_precision", "--mixed-precision", mixed_precision),
            ("bias_correction", "--bias-correction", bias_correction)) if given]
        if int8_only:  # ignored, they would let a user believe the f16 graph used them
            raise QuantError(f"dtype {dtype!r} takes no {', '.join(int8_only)} (int8 only: f16 and "
                             "bf16 need no calibration)",
                             hint=f"leave them out for {dtype}, or quantize to int8 (dtype='int8', --dtype int8)")
        if equalize:
            return to_half(prepared(graph, True), dtype)
        return to_half(graph if isinstance(graph, Graph) else prepared(graph), dtype)
    if table is None:
        raise QuantError("int8 quantization needs a calibration table",
                         hint="make one with ob.calibrate(g, samples) / 'opbridge calibrate'")
    tab = as_table(table)
    if equalize is not None and bool(equalize) != tab.equalized:
        made = "with" if tab.equalized else "without"
        raise QuantError(f"equalize={bool(equalize)}, but the calibration table was made {made} "
                         "cross-layer equalisation (its ranges are of that graph)",
                         hint="calibrate with the same equalize setting (opbridge calibrate --equalize), "
                         "or leave equalize unset to follow the table")
    g = prepared(graph, tab.equalized)
    if mixed_precision not in (None, "auto"):
        raise QuantError(f"mixed_precision {mixed_precision!r}: use None or 'auto'")
    if not 0 < target_cos <= 1:
        raise QuantError(f"target cosine {target_cos}: must be in (0, 1]",
                         hint="give the output cosine to keep, e.g. 0.999 (--target-cos 0.999)")
    if bias_correction and samples is None:
        raise QuantError("bias correction needs calibration samples",
                         hint="pass samples= (Python) / --data (CLI): the calibration data")
    if mixed_precision is None and not bias_correction:
        return to_int8(g, tab, per_channel=per_channel)
    feeds = (load_samples(g, samples, limit=num_samples, preprocess=preprocess) if samples is not None
             else random_feeds(g, tab))
    with threads_env(threads, "threads"):
        build = Int8Builder(g, tab, per_channel, feeds if bias_correction else None)
        if mixed_precision is None:
            return build(())
        with Stages(progress, 1, title=f"mixed precision {g.name}") as stages:
            return auto_mixed(g, tab, feeds, target_cos, per_channel, stages, build)


class Int8Builder:
    """``to_int8`` of one graph and table with given layers kept float, and, when it has
    ``correct_on`` samples, every int8 layer's bias corrected on them for that choice of
    float layers (a layer kept float changes the error the layers after it see)."""

    def __init__(self, graph: Graph, table: CalibrationTable, per_channel: bool,
                 correct_on: Sequence[Mapping[str, np.ndarray]] | None) -> None:
        self.graph, self.table, self.per_channel, self.correct_on = graph, table, per_channel, correct_on

    def __call__(self, keep_float: Sequence[str]) -> Graph:
        biases = (bias_corrections(self.graph, self.table, self.correct_on, self.per_channel, keep_float)
                  if self.correct_on is not None else None)
        q = to_int8(self.graph, self.table, per_channel=self.per_channel, keep_float=keep_float, biases=biases)
        if biases is not None:
            q.metadata["quant.bias_correction"] = f"{len(biases)} layers"
        return q


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
                  reference: Sequence[Mapping[str, np.ndarray]] | None = None,
                  names: Mapping[str, bool] | None = None) -> float:
    """The lowest cosine of any output of ``quantized`` against ``graph`` over ``feeds``; with
    ``names`` (see :func:`scored_tensors`), the lowest :func:`agreement` of those tensors."""
    names = {v.name: False for v in graph.outputs} if names is None else names
    float_view, int8_view = scoring_view(graph, names), scoring_view(quantized, names)
    worst = 1.0
    for i, feed in enumerate(feeds):
        ref = reference[i] if reference is not None else interpret(float_view, feed)
        worst = min(worst, agreement(ref, interpret(int8_view, feed), names))
    return worst


def scoring_view(graph: Graph, names: Collection[str]) -> Graph:
    """``graph`` with the tensors ``names`` it has among its outputs (the same nodes and
    values): a run returns them without keeping every intermediate tensor, which on a large
    model costs more time than the run (and a gigabyte a sample)."""
    outs = {v.name for v in graph.outputs}
    values = graph.values()
    extra = [values[n] for n in names if n not in outs and n in values]
    if not extra:
        return graph
    return Graph(graph.name, graph.inputs, [*graph.outputs, *extra], graph.nodes, graph.constants.values(),
                 graph.registry, graph.metadata)


def scaled_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """``1 - |a - b|**2 / (2 |a|**2)`` (float64): the cosine of ``a`` and ``b`` when they are
    as long as each other, and lower when ``b`` is shorter or longer: logits that int8 shrinks
    by a third keep a cosine of 1 and score 0.94 here."""
    x = np.asarray(a, np.float64).ravel()
    y = np.asarray(b, np.float64).ravel()
    na = float(np.dot(x, x))
    if na == 0:
        return 0.0 if np.any(y) else 1.0
    return 1.0 - float(np.dot(x - y, x - y)) / (2.0 * na)


def agreement(ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], names: Mapping[str, bool]) -> float:
    """The lowest score of the tensors ``names`` of ``got`` against ``ref``: :func:`cosine`, or
    :func:`scaled_cosine` for a name mapped to True (logits, see :func:`scored_tensors`). An
    inner tensor the int8 graph does not have (an integer op swallowed it) is not scored."""
    scores = [scaled_cosine(ref[n], got[n]) if scaled else cosine(ref[n], got[n])
              for n, scaled in names.items() if n in got]
    return min([1.0, *scores])


#: Ops that only move an output's values (a search looks through them for a squashing op).
_MOVES = ("Identity", "Transpose", "Reshape", "Flatten", "Squeeze", "Unsqueeze")
#: Ops whose outputs saturate: a confident sample's output hides its input's error.
_SQUASH = ("Softmax", "LogSoftmax", "Sigmoid")


def scored_tensors(graph: Graph) -> dict[str, bool]:
    """The tensors the mixed-precision search scores, each mapped to whether it is scored with
    :func:`scaled_cosine`: every output (False), and, for an output made by a Softmax or
    Sigmoid (through reshapes and transposes), that op's input, the logits (True). On a
    confidently classified sample the probabilities stay at 1 / 0 whatever int8 does to the
    logits, and the logits' cosine stays at 1 when int8 only shrinks them (two opposite
    logits of a two-class classifier): neither says what an uncertain image, where the
    logits' size decides the probabilities, will see."""
    producer = {v.name: n for n in graph.nodes for v in n.outputs}
    names = {v.name: False for v in graph.outputs}
    for v in graph.outputs:
        node = producer.get(v.name)
        while node is not None and node.op in _MOVES and node.inputs and node.inputs[0] is not None:
            node = producer.get(node.inputs[0].name)
        if node is not None and node.op in _SQUASH and node.inputs[0] is not None:
            x = node.inputs[0]
            if not x.is_constant and x.name not in names:
                names[x.name] = True
    return names


def layer_errors(graph: Graph, table: CalibrationTable, acts: Sequence[Mapping[str, np.ndarray]],
                 per_channel: bool, names: Mapping[str, bool] | None = None) -> dict[str, float]:
    """Per int8-capable layer, ``1 -`` the lowest output cosine (over the samples whose float
    activations ``acts`` holds, every named tensor) when that layer alone runs in int8: its
    int8 output (int8 input and weights, the op run on the cached float input, the output
    quantized at its point, through a fused Relu/Clip) replaces the float one, and only the
    nodes downstream of it run again. One partial model run per layer and sample, where
    keeping each layer float in the whole int8 model costs a whole model run and a new graph.
    ``names``: the tensors scored (default: the outputs; see :func:`scored_tensors`)."""
    names = {v.name: False for v in graph.outputs} if names is None else names
    chosen = [n for n in graph.nodes if quantizable(n)]
    points = quant_points(graph, {n.name for n in chosen})
    params = point_params(graph, table, points, {n.name for n in chosen}, per_channel=per_channel)
    readers = {v.name: n for n in graph.nodes for v in n.inputs if v is not None}
    index = {n.name: i for i, n in enumerate(graph.nodes)}
    errors: dict[str, float] = {}
    for node in chosen:
        layer = _Int8Layer(graph, params, node, points, readers, per_channel)
        done = {node.name} | ({layer.act.name} if layer.act is not None else set())
        start = min(index[n.name] for n in graph.nodes if any(v is not None and v.name == layer.x for v in n.inputs))
        worst = 1.0
        for a in acts:
            env = dict(a)
            # the quantized input is what every reader of it sees, as in the int8 model
            env[layer.x], y = layer.output(a)
            env[layer.entry] = env[layer.out] = y
            _run_downstream(graph, start, env, {layer.x, layer.entry, layer.out}, done)
            worst = min(worst, agreement(a, env, names))
        errors[node.name] = 1.0 - worst
    return errors


class _Int8Layer:
    """One int8-capable node run alone in int8 on cached float activations."""

    def __init__(self, graph: Graph, params: Mapping[str, ActParams], node: Node, points: Mapping[str, str],
                 readers: Mapping[str, Node], per_channel: bool) -> None:
        x, w = node.inputs[0], node.inputs[1]
        assert x is not None and w is not None and w.data is not None
        axis = weight_axis(node)
        wq, ws = quantized_weight(node, per_channel)
        shaped = ws if ws.ndim == 0 else ws.reshape([-1 if i == axis else 1 for i in range(w.rank)])
        self.w = (wq * shaped).astype(np.float32)
        self.graph, self.node, self.x = graph, node, x.name
        self.x_params = params[x.name]
        self.out = node.outputs[0].name
        self.entry = points[self.out]
        self.y_params = params[self.entry]
        self.act = readers.get(self.out) if self.entry != self.out else None

    def output(self, a: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The quantized input and the node's (and its fused activation's) quantized output, on
        the activations ``a``."""
        rest = [None if v is None else (v.data if v.is_constant else a[v.name]) for v in self.node.inputs[2:]]
        x = fake_quant(a[self.x], self.x_params)
        y = run_node(self.graph, self.node, [x, self.w, *rest])[0]
        if self.act is not None:
            y = run_node(self.graph, self.act, [y, *[None if v is None else v.data for v in self.act.inputs[1:]]])[0]
        return x, fake_quant(y, self.y_params)


def _run_downstream(graph: Graph, start: int, env: dict[str, np.ndarray], dirty: set[str],
                    done: set[str]) -> None:
    """Run again, from ``graph.nodes[start]`` on, the nodes not ``done`` that read a ``dirty``
    tensor."""
    for node in graph.nodes[start:]:
        if node.name in done or not any(v is not None and v.name in dirty for v in node.inputs):
            continue
        args = [None if v is None else (v.data if v.is_constant else env[v.name]) for v in node.inputs]
        for v, r in zip(node.outputs, run_node(graph, node, args)):
            env[v.name] = r
            dirty.add(v.name)


class _WorstFirst:
    """The lowest output cosine of a candidate graph over the feeds, run on the feeds that
    scored worst so far first and stopped at the first one under the target: a candidate that
    misses the target usually misses it on the same feed as the one before, so it costs one
    model run, and only the candidates that meet it run on every feed."""

    def __init__(self, graph: Graph, feeds: Sequence[Mapping[str, np.ndarray]],
                 reference: Sequence[Mapping[str, np.ndarray]], target: float,
                 names: Mapping[str, bool] | None = None) -> None:
        self.graph, self.feeds, self.reference, self.target = graph, feeds, reference, target
        self.names = names
        self.last = [1.0] * len(feeds)
        self.ran: list[int] = []  # the feeds the last call ran, in order

    def __call__(self, quantized: Graph, only: Collection[int] | None = None) -> float:
        """The lowest cosine over every feed (or the feeds numbered ``only``) if it is at least
        the target, else the cosine (under the target) of the first feed found under it."""
        worst = 1.0
        self.ran = []
        for i in sorted(range(len(self.feeds)) if only is None else only, key=lambda i: self.last[i]):
            self.ran.append(i)
            self.last[i] = output_cosine(self.graph, quantized, [self.feeds[i]], [self.reference[i]],
                                         self.names)
            worst = min(worst, self.last[i])
            if worst < self.target:
                break
        return worst


def graph_digest(graph: Graph) -> str:
    """A digest of ``graph``'s nodes (ops, names, inputs, attributes) and constants (bytes)."""
    h = hashlib.sha1()
    for n in graph.nodes:
        h.update(repr((n.op, n.name, [v.name if v is not None else "" for v in n.inputs],
                       sorted(n.attrs.items(), key=lambda kv: kv[0]))).encode())
    for c in graph.constants.values():
        h.update(repr((c.name, c.dtype, c.shape)).encode())
        h.update(np.ascontiguousarray(c.data).tobytes())
    return h.hexdigest()


def sample_key(digest: str, feed: Mapping[str, np.ndarray]) -> str:
    """The key of one sample of the graph of ``digest``: that digest and the feed's bytes."""
    h = hashlib.sha1(digest.encode())
    for name in sorted(feed):
        a = np.ascontiguousarray(feed[name])
        h.update(repr((name, a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.hexdigest()


class _Baseline:
    """The float reference of every feed (the scored tensors) and the int8 graph's score on
    each, one float and one int8 run per feed; then the float activations (every named
    tensor) of the ``keep`` feeds where int8 does worst, for :func:`layer_errors`, so the
    layers are ranked by the damage they do where the target is missed. A float reference
    calibration kept (``cached``, :attr:`CalibrationTable.reference`) is not run again."""

    def __init__(self, graph: Graph, quantized: Graph, feeds: Sequence[Mapping[str, np.ndarray]],
                 keep: int, names: Mapping[str, bool],
                 cached: Mapping[str, Mapping[str, np.ndarray]] | None = None) -> None:
        float_view, int8_view = scoring_view(graph, names), scoring_view(quantized, names)
        digest = graph_digest(graph) if cached else ""

        def reference(f: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
            hit = cached.get(sample_key(digest, f)) if cached else None
            return dict(hit) if hit is not None and all(n in hit for n in names) else interpret(float_view, f)

        self.reference = [reference(f) for f in feeds]
        self.cosines = [agreement(ref, interpret(int8_view, f), names) for ref, f in zip(self.reference, feeds)]
        self.worst_feeds = sorted(range(len(feeds)), key=lambda i: (self.cosines[i], i))[:keep]
        self.worst = min(self.cosines)
        self._graph, self._feeds = graph, feeds

    @functools.cached_property
    def acts(self) -> list[dict[str, np.ndarray]]:
        """Every float tensor of the worst feeds (a large model's are gigabytes a sample): run
        only when a sensitivity ranking needs them."""
        return [interpret(self._graph, self._feeds[i], keep_intermediates=True) for i in self.worst_feeds]


class _Search:
    """The fewest of the layers ``order`` (most damaging first) to keep float for the target
    on every feed. The doubling and the bisection score each candidate on the *active* feeds
    only: at first the ones int8 everywhere does worst on. The answer is then scored on every
    feed; a feed it misses the target on joins the active ones and the search goes on (a
    candidate under the target on some feeds is under it on all, so only the ones that met
    it are scored again). A candidate that meets the target costs a model run per active
    feed, not per feed: most of the search's time on a large model."""

    def __init__(self, build: Int8Builder, order: Sequence[str], score: _WorstFirst,
                 active: Collection[int], stages: Stages) -> None:
        self.build, self.order, self.score, self.stages = build, order, score, stages
        self.active = set(active)
        self.graphs: dict[int, Graph] = {}
        self.cos: dict[int, float] = {}  # per candidate, its score on the active feeds

    def ok(self, k: int) -> bool:
        if k not in self.cos:
            if k not in self.graphs:
                self.stages.add()
                with self.stages.stage(f"{k} layer(s) float"):
                    self.graphs[k] = self.build(self.order[:k])
            self.cos[k] = self.score(self.graphs[k], self.active)
        return self.cos[k] >= self.score.target

    def fewest(self) -> tuple[int, Graph, float]:
        """The number of layers kept float, the graph, its lowest score over every feed."""
        while True:
            lo, hi = 0, 1
            while hi < len(self.order) and not self.ok(hi):
                lo, hi = hi, min(2 * hi, len(self.order))
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if self.ok(mid) else (mid, hi)
            self.ok(hi)  # scored on the active feeds; the others now
            rest = [i for i in range(len(self.score.feeds)) if i not in self.active]
            full = min(self.cos[hi], self.score(self.graphs[hi], rest))
            missed = {i for i in self.score.ran if self.score.last[i] < self.score.target} - self.active
            if full >= self.score.target or hi == len(self.order) or not missed:
                return hi, self.graphs[hi], full
            self.active |= missed
            self.cos = {k: c for k, c in self.cos.items() if c < self.score.target}


def auto_mixed(graph: Graph, table: CalibrationTable, feeds: Sequence[Mapping[str, np.ndarray]],
               target_cos: float, per_channel: bool, stages: Stages | None = None,
               build: Int8Builder | None = None) -> Graph:
    """The int8 graph with the fewest layers kept float, most damaging first (by
    :func:`layer_errors` on the SENSITIVITY_SAMPLES feeds where int8 everywhere does worst),
    for its outputs (and logits, see :func:`scored_tensors`) to reach ``target_cos`` on every
    feed: 1, 2, 4, ... layers float until the target is met, then a bisection between the
    last two counts (:class:`_Search`); see the module docstring. It never returns a graph
    whose lowest score over ``feeds`` is under int8 everywhere's."""
    stages = stages or Stages(False, 0)
    build = build or Int8Builder(graph, table, per_channel, None)
    q = build(())
    names = scored_tensors(graph)
    base = _Baseline(graph, q, feeds, SENSITIVITY_SAMPLES, names, table.reference)
    cos = base.worst
    keep: list[str] = []
    if cos < target_cos:
        stages.add(2)
        with stages.stage("sensitivity of every layer"):
            errors = layer_errors(graph, table, base.acts, per_channel, names)
        order = sorted(errors, key=lambda n: -errors[n])
        score = _WorstFirst(graph, feeds, base.reference, target_cos, names)
        score.last = list(base.cosines)
        k, found, found_cos = _Search(build, order, score, base.worst_feeds, stages).fewest()
        if found_cos < target_cos:  # even every layer float misses it: say by how much
            found_cos = output_cosine(graph, found, feeds, base.reference, names)
        if found_cos >= base.worst:
            keep, q, cos = list(order[:k]), found, found_cos
    q.metadata["quant.mixed_precision"] = "auto"
    q.metadata["quant.target_cos"] = f"{target_cos}"
    q.metadata["quant.cosine"] = f"{cos:.6f}"
    q.metadata["quant.auto_float_layers"] = ",".join(keep)
    return q
