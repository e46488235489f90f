"""Benchmark: run speed of the interpreter and the simulator against onnxruntime.

Models: ResNet-50 (tests/simulator/models.py) and a BERT-base-like encoder (12 layers, hidden
768, 12 heads, sequence 128, built op by op with onnx.helper as torch.onnx exports it:
tests/ir/transformer_models.py), random weights. Each is converted twice: with the default
passes, and with the fusions (``passes=("default", "fusions")``: BatchNorm folded into Conv,
Conv+activation, MatMul+bias+activation, LayerNorm, GELU, attention) -- onnxruntime fuses
the same patterns inside its session, so the fused graph is the like-for-like comparison.

For 1 and 2 threads (onnxruntime's intra-op threads; ``threads=`` of ``ob.interpret`` and
``Program.run``, which limit BLAS through threadpoolctl), the runners take turns round by
round, so a machine shared with other work slows them alike; each runner's best and median
round (wall) and best CPU time are printed with their ratios to onnxruntime's. Compile times
are printed too.

    .venv/bin/python bench/bench_run.py [--model resnet50 bert] [--threads 1 2] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def interleaved(fns: dict[str, Callable[[], object]], repeat: int
                ) -> dict[str, list[tuple[float, float]]]:
    """Each function's (wall, CPU) times over ``repeat`` rounds (one call each per round,
    after a warm-up call), in seconds. CPU time (the process's, all threads) is the steadier
    figure on a machine other work keeps busy; with several threads, wall time is the one
    that says what the threads bought."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0, time.process_time() - c0))
    return times


def load_model(name: str, args: argparse.Namespace):
    """(onnx model, feeds) of a benchmark model."""
    if name == "resnet50":
        from tests.simulator.models import resnet_onnx

        x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
        return resnet_onnx(), {"data": x}
    from tests.ir.transformer_models import bert_feeds, bert_onnx

    model = bert_onnx(layers=args.bert_layers, hidden=768, heads=12, seq=128)
    return model, bert_feeds(model)


def bench_model(name: str, args: argparse.Namespace) -> list[str]:
    import onnxruntime as ort

    import opbridge as ob

    model, feeds = load_model(name, args)
    graphs = {"default passes": ob.convert(model),
              "fusions": ob.convert(model, passes=("default", "fusions"))}
    progs = {}
    for label, g in graphs.items():
        t0 = time.perf_counter()
        progs[label] = ob.compile(g, target="bm1684")
        print(f"{name}: compile ({label}, {len(g.nodes)} IR nodes) {time.perf_counter() - t0:.3f} s")
    want = None
    lines = []
    for threads in args.threads:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)[0]
        fns: dict[str, Callable[[], object]] = {"onnxruntime": lambda s=sess: s.run(None, feeds)}
        for label, g in graphs.items():
            fns[f"interpreter ({label})"] = lambda g=g, t=threads: ob.interpret(g, feeds, threads=t)
            fns[f"simulator ({label})"] = lambda p=progs[label], t=threads: p.run(feeds, threads=t)
        times = interleaved(fns, args.repeat)
        ref_wall = min(w for w, _ in times["onnxruntime"])
        ref_cpu = min(c for _, c in times["onnxruntime"])
        for runner, ts in times.items():
            best = min(w for w, _ in ts)
            med = statistics.median(w for w, _ in ts)
            cpu = min(c for _, c in ts)
            lines.append(f"| {name} | {threads} | {runner} | {best * 1e3:.1f} | {med * 1e3:.1f} | "
                         f"{best / ref_wall:.2f}x | {cpu * 1e3:.1f} | {cpu / ref_cpu:.2f}x |")
            print(lines[-1], flush=True)
    got = next(iter(progs["fusions"].run(feeds).values()))
    cos = float(np.dot(got.ravel(), want.ravel()) / np.linalg.norm(got) / np.linalg.norm(want))
    print(f"{name}: simulator (fusions) vs onnxruntime cosine {cos:.8f}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=["resnet50", "bert"], choices=["resnet50", "bert"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bert-layers", type=int, default=12)
    args = ap.parse_args()
    lines = ["| model | threads | runner | best ms | median ms | best / onnxruntime | CPU ms | "
             "CPU / onnxruntime |", "|---|---|---|---|---|---|---|---|"]
    for name in args.model:
        lines += bench_model(name, args)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
