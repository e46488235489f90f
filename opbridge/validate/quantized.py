"""``validate --quantize TABLE``: the int8 graph against the float one, layer by layer.

Both run in the reference interpreter on the same inputs; every tensor of the float graph is
compared with the dequantized tensor of the same name in the int8 graph (cosine, Euclidean
similarity, SQNR). int8 gets looser floors than f32, as TPU-MLIR's ``model_deploy`` does
(its INT8 examples pass ``--tolerance 0.85,0.45``; F32 ``0.99,0.99``). The report names the
layer where the error grows most: the one whose output's cosine falls furthest below its
inputs'.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.graph import Graph
from .compare import parse_tolerance
from .report import Report, Row
from .runners import RunOutput

#: (cosine, Euclidean) floors of int8 tensors: TPU-MLIR's INT8 tolerance.
INT8_TOLERANCE = (0.85, 0.45)


def validate_quantized(graph: Graph, table: Any, feeds: Mapping[str, np.ndarray], *,
                       framework: str = "opbridge", label: str | None = None,
                       tolerance: Any = None, inputs_desc: Mapping[str, str] | None = None) -> Report:
    """Quantize ``graph`` with ``table`` (int8) and compare it with ``graph`` on ``feeds``;
    ``table`` may also be the quantized graph itself (a Graph, or an ``.obir`` file made by
    ``opbridge quantize`` from ``graph``)."""
    from ..ir.interpret import interpret
    from .api import build_report

    tol = parse_tolerance(tolerance) or INT8_TOLERANCE
    qg = quantized_graph(graph, table)
    runs = [RunOutput("float", dict(interpret(graph, feeds, keep_intermediates=True))),
            RunOutput("int8", dict(interpret(qg, feeds, keep_intermediates=True)))]
    report = build_report(label or graph.name, framework, graph, runs, tol)
    report.mode = "no-simulator"
    report.inputs = dict(inputs_desc or {})
    int8 = [x for x in qg.metadata.get("quant.int8_layers", "").split(",") if x]
    report.notes.insert(0, f"int8: {len(int8)} layers quantized; the float graph in the interpreter "
                        f"is the reference; tolerance {tol[0]},{tol[1]}")
    worst = error_growth(report.rows)
    if worst is not None:
        row, before = worst
        report.notes.insert(1, f"error grows most at layer '{row.node}' ({row.op_type}): cosine "
                            f"{before:.6f} at its inputs -> {row.result.cosine:.6f} at '{row.tensor}' "
                            f"(SQNR {row.result.sqnr_db:.1f} dB)")
    return report


def quantized_graph(graph: Graph, table: Any) -> Graph:
    """The int8 graph to validate: ``table`` itself when it is one (a Graph or an .obir path),
    else ``graph`` quantized with the calibration table ``table``."""
    from ..quant import QuantError, quantize

    what = "the graph"
    if isinstance(table, (str, os.PathLike)) and os.fspath(table).lower().endswith(".obir"):
        from ..ir.io import load

        what, table = f"'{os.fspath(table)}'", load(table)
    if not isinstance(table, Graph):
        return quantize(graph, table, dtype="int8")
    dtype = table.metadata.get("quant.dtype")
    # an f16/bf16 graph's tensors are not dequantized: every one would fail on its dtype. A graph
    # quantized elsewhere (onnxruntime's QDQ, by hand) has no quant.dtype: its Q/DQ nodes tell.
    qdq = any(n.op in ("QuantizeLinear", "DequantizeLinear") for n in table.nodes)
    if dtype in ("f16", "bf16") or (dtype is None and not qdq):
        raise QuantError(f"{what} is {f'a {dtype}' if dtype else 'not a quantized'} graph; "
                         "--quantize (quantize=) compares an int8 graph with the float model",
                         hint="give the calibration table, or the .obir 'opbridge quantize --table' wrote; an "
                              "f16/bf16 graph validates on its own: opbridge validate GRAPH.obir --target bm1684x")
    for kind in ("inputs", "outputs"):
        names, qnames = ({v.name for v in getattr(g, kind)} for g in (graph, table))
        if qnames != names:
            raise QuantError(f"the quantized graph '{table.name}' has {kind} {sorted(qnames)}, the float "
                             f"model {sorted(names)}", hint="give the float model the quantized graph was made from")
    return table


def error_growth(rows: Sequence[Row]) -> tuple[Row, float] | None:
    """The row whose cosine falls furthest below its inputs' lowest cosine, and that cosine."""
    cos = {r.tensor: r.result.cosine for r in rows}
    best: tuple[Row, float] | None = None
    drop = 0.0
    for r in rows:
        before = min((cos[t] for t in r.inputs if t in cos), default=1.0)
        if np.isfinite(r.result.cosine) and before - r.result.cosine > drop:
            best, drop = (r, before), before - r.result.cosine
    return best
