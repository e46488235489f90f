"""Benchmark: ResNet-50 (random weights) through the simulator, the reference interpreter,
onnxruntime with one thread and ``onnx.reference.ReferenceEvaluator``, in one process.

Prints each runner's best time over ``--repeat`` rounds and its ratio to onnxruntime, the
simulator's compile time, and the profile's estimated latency on the target. Targets
(issue 6): simulator <= 3x onnxruntime, compile < 3 s.

Every runner gets one thread (BLAS too: ``OPENBLAS_NUM_THREADS=1`` unless already set), as
onnxruntime does here, and the runners take turns round by round, so that a machine shared
with other work slows them alike; the best round of each is reported.

    .venv/bin/python bench/bench_sim.py [--repeat 5] [--lmem-kib 512] [--no-fold-bn]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  (after the thread settings, which BLAS reads at import)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def best_of(fns: dict, repeat: int) -> dict[str, float]:
    """Best wall time of each function over ``repeat`` rounds (one call each per round, after
    a warm-up call), in seconds."""
    best = {}
    for name, fn in fns.items():
        fn()
        best[name] = float("inf")
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--lmem-kib", type=int, default=512)
    ap.add_argument("--no-fold-bn", action="store_true",
                    help="keep BatchNormalization nodes (default: fold them into Conv, as "
                         "onnxruntime does internally)")
    ap.add_argument("--skip-reference-evaluator", action="store_true")
    args = ap.parse_args()

    import onnxruntime as ort

    import opbridge as ob
    from opbridge.ir.passes import DEFAULT_PASSES
    from tests.simulator.models import resnet_onnx

    model = resnet_onnx()
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    feeds = {"data": x}
    passes = DEFAULT_PASSES if args.no_fold_bn else DEFAULT_PASSES + ("fold_batchnorm",)
    graph = ob.convert(model, passes=passes)
    target = ob.Target.preset("bm1684", lmem_bytes_per_lane=args.lmem_kib * 1024)
    t0 = time.perf_counter()
    prog = ob.compile(graph, target)
    compile_s = time.perf_counter() - t0

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])

    results = best_of({
        "onnxruntime (1 thread)": lambda: sess.run(None, feeds),
        "simulator Program.run": lambda: prog.run(feeds),
        "interpreter": lambda: ob.interpret(graph, feeds),
    }, args.repeat)
    if not args.skip_reference_evaluator:
        from onnx.reference import ReferenceEvaluator

        ref = ReferenceEvaluator(model)
        results.update(best_of({"onnx ReferenceEvaluator": lambda: ref.run(None, feeds)}, 1))
    ort_s = results["onnxruntime (1 thread)"]
    got = prog.run(feeds)["prob"].astype(np.float64).ravel()
    want = sess.run(None, feeds)[0].astype(np.float64).ravel()
    cos = float(got @ want / np.linalg.norm(got) / np.linalg.norm(want))
    p = prog.profile()
    print(f"ResNet-50, {len(graph.nodes)} IR nodes ({'BN folded' if not args.no_fold_bn else 'BN kept'}), "
          f"target bm1684 at {args.lmem_kib} KiB/lane, best of {args.repeat}")
    for name, s in results.items():
        print(f"  {name:28s} {s * 1e3:9.1f} ms   {s / ort_s:6.2f}x onnxruntime")
    print(f"  compile                      {compile_s * 1e3:9.1f} ms")
    print(f"  simulator vs onnxruntime: cosine {cos:.8f}")
    print(f"  profile: est. latency {p.est_latency_ms:.2f} ms on the target, {p.num_layer_groups} layer "
          f"groups, {p.num_tiles} tiles, {p.num_global_layers} global layers, GDMA "
          f"{p.gdma_bytes / 2**20:.1f} MiB, local memory peak {p.lmem_peak_bytes / 1024:.0f} KiB/lane, "
          f"DDR activations {p.ddr_peak_bytes / 2**20:.2f} MiB (no reuse "
          f"{p.ddr_no_reuse_bytes / 2**20:.2f} MiB)")


if __name__ == "__main__":
    main()
