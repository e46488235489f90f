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

``--profile`` prints, for the interpreter on the fused graph (one BLAS thread), each op
kind's best CPU time per run (convolutions by kernel size, stride and path), and the GEMM
floor: the CPU time of one float32 matmul of each convolution's im2col shape (M, C*kh*kw) @
(C*kh*kw, N*OH*OW) alone -- what a run would cost if everything but a direct convolution's
GEMM were free.

    .venv/bin/python bench/bench_run.py [--model resnet50 bert] [--threads 1 2] [--repeat 5]
    .venv/bin/python bench/bench_run.py --model resnet50 --profile
    .venv/bin/python bench/bench_run.py --model resnet50 --shapes

``--shapes`` prints, per convolution shape of the fused graph, our whole convolution's CPU
time in the run, OpenBLAS's GEMM of its im2col shape alone, and onnxruntime running a model of
that one Conv (with bias and Relu), each with the GFLOP/s of the direct convolution.
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


def _conv_kind(node, args) -> str:
    """A convolution's kernel, stride and the path conv_nd takes for it."""
    from opbridge.ir.winograd import winograd_tile

    w, y = args[1], node.outputs[0].shape
    k, st = tuple(w.shape[2:]), tuple(node.attrs["strides"])
    r = winograd_tile(w.shape[1], w.shape[0], k, st, node.attrs["dilations"], node.attrs["group"],
                      y[2:], np.float32) if len(y) == 4 else None
    path = f"Winograd F({r}x{r},3x3)" if r else "1x1 GEMM" if k == (1, 1) else "im2col"
    return f"{node.op} {k[0]}x{k[1]}/{st[0]} {path}"


def _node_times(g, feeds, repeat: int) -> dict[str, float]:
    """Best CPU time of each node over ``repeat`` runs of the interpreter's loop (one BLAS
    thread, after a warm-up run), tensors dropped after their last reader as ``interpret``
    drops them, so each node sees the caches and allocator of a real run."""
    from opbridge.ir.interpret import _last_uses, check_feeds, run_node
    from opbridge.threads import blas_threads

    last = _last_uses(g)
    best: dict[str, float] = {}
    with blas_threads(1):
        for rnd in range(repeat + 1):
            env = {id(v): a for v, a in zip(g.inputs, check_feeds(g, feeds).values())}
            env.update({id(c): c.data for c in g.constants.values()})
            for i, node in enumerate(g.nodes):
                ins = [None if v is None else env[id(v)] for v in node.inputs]
                t0 = time.process_time()
                outs = run_node(g, node, ins)
                t = time.process_time() - t0
                env.update((id(v), o) for v, o in zip(node.outputs, outs))
                for v in node.inputs:
                    if v is not None and last.get(id(v)) == i:
                        env.pop(id(v), None)
                if rnd:  # the first round warms up (filter transforms, allocator)
                    best[node.name] = min(best.get(node.name, 1e9), t)
    return best


def profile(name: str, args: argparse.Namespace) -> None:
    """Per-op CPU time of the interpreter on the fused graph, and the convolutions' GEMM floor."""
    import opbridge as ob

    model, feeds = load_model(name, args)
    g = ob.convert(model, passes=("default", "fusions"))
    times = _node_times(g, feeds, args.repeat)
    per: dict[str, float] = {}
    count: dict[str, int] = {}
    gemm: dict[str, float] = {}
    for node in g.nodes:
        ins = [None if v is None else getattr(g.constants.get(v.name), "data", None) for v in node.inputs]
        key = _conv_kind(node, ins) if node.op in ("Conv", "FusedConv") else node.op
        per[key] = per.get(key, 0.0) + times[node.name]
        count[key] = count.get(key, 0) + 1
        if node.op in ("Conv", "FusedConv"):
            gemm[key] = gemm.get(key, 0.0) + _gemm_time(ins[1], node.outputs[0].shape)
    total = sum(per.values())
    print(f"{name}: interpreter (fusions), best CPU ms per op kind over {args.repeat} runs")
    print("| op | nodes | CPU ms | share | GEMM floor ms |\n|---|---|---|---|---|")
    for k, t in sorted(per.items(), key=lambda kv: -kv[1]):
        floor = f"{gemm[k] * 1e3:.1f}" if k in gemm else ""
        print(f"| {k} | {count[k]} | {t * 1e3:.1f} | {t / total:.0%} | {floor} |")
    print(f"| all | {sum(count.values())} | {total * 1e3:.1f} | | {sum(gemm.values()) * 1e3:.1f} |")


def shapes(name: str, args: argparse.Namespace) -> None:
    """Per convolution shape: our whole convolution in the run (``_node_times``), OpenBLAS's
    GEMM of its im2col shape alone, and onnxruntime running a model of that one Conv (+ Relu,
    which it fuses) -- ms per node and GFLOP/s of the direct convolution's multiply-adds."""
    import opbridge as ob

    model, feeds = load_model(name, args)
    g = ob.convert(model, passes=("default", "fusions"))
    times = _node_times(g, feeds, args.repeat)
    groups: dict[tuple, list] = {}
    for node in g.nodes:
        if node.op in ("Conv", "FusedConv"):
            w = g.constants[node.inputs[1].name].data
            key = (_conv_kind(node, [None, w]), node.inputs[0].shape, tuple(w.shape),
                   tuple(node.attrs["pads"]))
            groups.setdefault(key, []).append(node)
    print(f"{name}: per convolution shape, best CPU ms per node (one thread), GFLOP/s in brackets")
    print("| conv | C->M | in->out | nodes | GFLOP | ours, in the run | OpenBLAS GEMM (im2col shape) "
          "| onnxruntime Conv |\n|---|---|---|---|---|---|---|---|")
    tot = [0.0, 0.0, 0.0]
    for (kind, xs, ws, pads), nodes in sorted(groups.items(), key=lambda kv: -kv[0][1][2]):
        ys = nodes[0].outputs[0].shape
        flop = 2.0 * ws[0] * int(np.prod(ws[1:])) * int(np.prod(ys[2:])) * ys[0]
        ours = min(times[n.name] for n in nodes)
        gemm = _gemm_time(g.constants[nodes[0].inputs[1].name].data, ys)
        ort_t = _ort_conv_time(xs, ws, nodes[0].attrs, pads)
        for i, t in enumerate((ours, gemm, ort_t)):
            tot[i] += t * len(nodes)
        cells = " | ".join(f"{t * 1e3:.2f} ({flop / t / 1e9:.0f})" for t in (ours, gemm, ort_t))
        print(f"| {kind} | {ws[1]}->{ws[0]} | {xs[2]}->{ys[2]} | {len(nodes)} | {flop / 1e9:.3f} | {cells} |")
    print(f"| all | | | {sum(len(n) for n in groups.values())} | | "
          + " | ".join(f"{t * 1e3:.1f} ms" for t in tot) + " |")


def _ort_conv_time(xs, ws, attrs, pads) -> float:
    """Best CPU time of onnxruntime (one thread) running one Conv with bias, then Relu."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(np.float32)
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=list(ws[2:]), pads=list(pads),
                            strides=list(attrs["strides"]), group=attrs["group"])
    graph = helper.make_graph(
        [conv, helper.make_node("Relu", ["y"], ["r"])], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(xs))],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {"x": rng.standard_normal(xs).astype(np.float32)}
    sess.run(None, feed)
    best = 1e9
    for _ in range(7):
        t0 = time.process_time()
        sess.run(None, feed)
        best = min(best, time.process_time() - t0)
    return best


def _gemm_time(w: np.ndarray, out_shape) -> float:
    """Best CPU time of the direct convolution's GEMM alone (im2col shape, float32)."""
    rng = np.random.default_rng(0)
    m, kk = w.shape[0], int(np.prod(w.shape[1:]))
    n = int(np.prod(out_shape)) // m
    a = rng.standard_normal((m, kk), dtype=np.float32)
    b = rng.standard_normal((kk, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    best = 1e9
    for _ in range(5):
        t0 = time.process_time()
        np.matmul(a, b, out=c)
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=["resnet50", "bert"], choices=["resnet50", "bert"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--bert-layers", type=int, default=12)
    ap.add_argument("--profile", action="store_true",
                    help="per-op CPU time of the interpreter (fused graph) and the GEMM floor")
    ap.add_argument("--shapes", action="store_true",
                    help="per convolution shape: ours in the run, OpenBLAS's GEMM, onnxruntime's Conv")
    args = ap.parse_args()
    if args.profile or args.shapes:
        for name in args.model:
            (shapes if args.shapes else profile)(name, args)
        return
    lines = ["| model | threads | runner | best ms | median ms | best / onnxruntime | CPU ms | "
             "CPU / onnxruntime |", "|---|---|---|---|---|---|---|---|"]
    for name in args.model:
        lines += bench_model(name, args)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
