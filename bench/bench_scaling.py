"""Benchmark: how convert, compile, interpret and simulate grow with model size and batch.

Models (random weights, built with onnx.helper, written to a temporary .onnx file):
ResNet-style bottleneck networks of ResNet-18/50/101/152 depth (stage depths (2,2,2,2),
(3,4,6,3), (3,4,23,3), (3,8,36,3); the 18-layer one in bottleneck form), BERT-style encoders of
2, 6 and 12 layers (hidden 768, sequence 128), and ResNet-50 and BERT-6 at batch 1, 4 and 16.

For each model and step: the time (one call, after a warm-up for the two runs, one BLAS
thread) and the peak memory the step allocates (tracemalloc on a second call: numpy arrays and
Python objects),
and each figure per unit of size (per weight layer, per encoder layer, per batch item), which
stays flat when a step grows linearly. The graphs are converted with the fusions.

    .venv/bin/python bench/bench_scaling.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESNETS = {"ResNet-18": (2, 2, 2, 2), "ResNet-50": (3, 4, 6, 3), "ResNet-101": (3, 4, 23, 3),
           "ResNet-152": (3, 8, 36, 3)}


def measure(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, seconds, peak MiB allocated during the call): timed on one call, the memory
    traced on a second (tracing slows Python's allocations)."""
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, dt, peak / 2**20


def one_model(label: str, model: onnx.ModelProto, feeds: dict, units: int, tmp: Path) -> list[str]:
    import opbridge as ob

    path = tmp / f"{label}.onnx"
    onnx.save(model, str(path))
    g, t_conv, m_conv = measure(lambda: ob.convert(str(path), passes=("default", "fusions")))
    prog, t_comp, m_comp = measure(lambda: ob.compile(g, target="bm1684"))
    ob.interpret(g, feeds, threads=1)
    _, t_int, m_int = measure(lambda: ob.interpret(g, feeds, threads=1))
    prog.run(feeds, threads=1)
    _, t_sim, m_sim = measure(lambda: prog.run(feeds, threads=1))
    cells = []
    for t, m in ((t_conv, m_conv), (t_comp, m_comp), (t_int, m_int), (t_sim, m_sim)):
        cells.append(f"{t:.3f} s / {m:.0f} MiB ({t / units * 1e3:.1f} ms, {m / units:.1f} MiB)")
    line = f"| {label} | {units} | {len(g.nodes)} | " + " | ".join(cells) + " |"
    print(line, flush=True)
    return [line]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the smaller half of the models only")
    args = ap.parse_args()
    from tests.ir.transformer_models import bert_feeds, bert_onnx
    from tests.simulator.models import resnet_onnx

    rng = np.random.default_rng(0)
    lines = ["| model | units | IR nodes | convert | compile | interpret | simulate |",
             "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="opbridge-scaling-") as d:
        tmp = Path(d)
        resnets = list(RESNETS.items())[:2] if args.quick else list(RESNETS.items())
        for label, depths in resnets:
            layers = 3 * sum(depths) + 2 + len(depths)  # convs (+ shortcuts) and the fc
            x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
            lines += one_model(label, resnet_onnx(depths=depths), {"data": x}, layers, tmp)
        for n in (2, 6) if args.quick else (2, 6, 12):
            model = bert_onnx(layers=n, hidden=768, heads=12, seq=128)
            lines += one_model(f"BERT-{n}", model, bert_feeds(model), n, tmp)
        for batch in (1, 4) if args.quick else (1, 4, 16):
            x = rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)
            lines += one_model(f"ResNet-50 batch {batch}", resnet_onnx(batch=batch), {"data": x},
                               batch, tmp)
            model = bert_onnx(layers=6, hidden=768, heads=12, seq=128, batch=batch)
            lines += one_model(f"BERT-6 batch {batch}", model, bert_feeds(model), batch, tmp)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
