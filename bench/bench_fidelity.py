"""Benchmark: the cost model's estimated latency against the chips' published figures.

For every row of ``../shared/targets/chip-latency.md`` that this checkout can build, compile the
network for the row's chip (``bm1684`` / ``bm1684x``) at the row's batch and precision and print
``Program.profile().est_latency_ms`` per image (per clip, per text), the published figure and
their ratio; then the worst ratio per chip and precision. Rows that cannot be built say why.
The networks and where their layer lists come from: ``bench/fidelity_models.py``.

    .venv/bin/python bench/bench_fidelity.py [--model RESNET] [--chip bm1684] [--markdown]
        [--table my-chip.md --target-json my-chip.json]
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fidelity_models import BUILDERS, NotBuildable, cast_f16  # noqa: E402

TABLE = ROOT.parent / "shared" / "targets" / "chip-latency.md"


@dataclass
class Row:
    model: str
    shape: str
    precision: str
    batch: int
    chip: str
    ms: float


def read_rows(path: Path) -> list[Row]:
    """The measured rows of the markdown table (model, input shape, precision, batch, chip, ms)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 7 or not re.fullmatch(r"[0-9.]+", cells[6]):
            continue
        rows.append(Row(cells[0], cells[2], cells[3], int(cells[4]), cells[5], float(cells[6])))
    return rows


def _quantize_f16(graph: Any) -> Any:
    import opbridge as ob

    quantize = getattr(ob, "quantize", None)
    if quantize is None:
        return cast_f16(graph)
    return quantize(graph, None, dtype="f16")


def chip_passes(graph: Any) -> Any:
    """The graph as the chip's compiler takes it: BatchNorm folded into convolutions and the
    built-in fusions (activations into Conv / MatMul, LayerNorm, GELU, attention)."""
    from opbridge.ir.passes import DEFAULT_PASSES, FUSION_PASSES, optimize

    return optimize(graph, [*DEFAULT_PASSES, "fold_batchnorm", *FUSION_PASSES])


#: networks whose rows are held out from every fit but these (see opbridge/simulator/target.py)
HELD_OUT_NETWORKS = ("DeepSORT ReID extractor", "C3D")
#: the issue's bounds on estimate / published: calibration rows within 15%, held-out rows 20%
BOUND = {"calibration": 0.15, "held out": 0.20}


def role(row: Row) -> str:
    """"calibration" for the rows the preset's fitted figures were fitted to (ResNet-50,
    YOLOv3, LPRNet and BERT at batch 1, ResNet-50's and YOLOv3's int8 batch 4, the ReID net's
    BM1684 int8 rows for BM1684's launch / sync split), else "held out"."""
    if row.model.startswith("DeepSORT") and row.chip == "BM1684" and row.precision == "int8":
        return "calibration"
    if row.model in HELD_OUT_NETWORKS:
        return "held out"
    if row.batch == 1 or (row.precision == "int8" and row.model in ("ResNet-50", "YOLOv3")):
        return "calibration"
    return "held out"


def within(row: Row, ratio: float) -> bool:
    """Whether ``ratio`` (estimate / published) is inside the bound of ``row``'s role."""
    return abs(ratio - 1.0) <= BOUND[role(row)] + 5e-4  # the table's three decimals


def why_not(row: Row) -> str | None:
    """Why a row cannot be built in this checkout, or None."""
    if row.model not in BUILDERS:
        return "no builder for this network"
    return None


#: random calibration samples per int8 model: the estimate depends on the graph's shapes and
#: dtypes, never on the values, so one sample (minmax) is enough and quick
CALIBRATION_SAMPLES = 1


def int8_graph(graph: Any, tables: dict[str, Any], model: str) -> Any:
    """The float graph (BatchNorm, and a Caffe Scale after it, folded into the convolutions, as
    TPU-MLIR's MergeScale2Conv does) quantized as the chip's int8 bmodel is: calibrated
    with ``ob.calibrate`` (minmax) on random inputs, ``ob.quantize(g, table, dtype="int8")``
    (ConvInteger / MatMulInteger + Requantize), then the fusions for what stays float. The
    table of a model is made once, on its first batch size, and reused for the others (the
    tensor names do not depend on the batch)."""
    import numpy as np

    import opbridge as ob
    from opbridge.ir.passes import DEFAULT_PASSES, FUSION_PASSES, optimize

    g = optimize(graph, [*DEFAULT_PASSES, "fold_batchnorm", "fold_scale"])
    table = tables.get(model)
    if table is None or any(v.name not in table.tensors for v in g.inputs):
        rng = np.random.default_rng(0)
        feeds = [{v.name: rng.standard_normal(tuple(int(d) for d in v.shape)).astype(np.float32)
                  for v in g.inputs} for _ in range(CALIBRATION_SAMPLES)]
        table = tables[model] = ob.calibrate(g, feeds, method="minmax")
    return optimize(ob.quantize(g, table, dtype="int8"), FUSION_PASSES)


class Graphs:
    """Built graphs, one per (model, batch, precision): building YOLOv3 or BERT takes seconds."""

    def __init__(self) -> None:
        self.cache: dict[tuple[str, int, str], Any] = {}
        self.tables: dict[str, Any] = {}

    def get(self, row: Row) -> Any:
        key = (row.model, row.batch, row.precision)
        if key not in self.cache:
            if row.precision == "int8":
                g = int8_graph(BUILDERS[row.model](row.batch), self.tables, row.model)
            else:
                g = chip_passes(BUILDERS[row.model](row.batch))
            if row.precision == "fp16":
                g = _quantize_f16(g)
            self.cache[key] = g
        return self.cache[key]


@dataclass
class FloatShare:
    """What the ops an int8 graph keeps in float cost in its program (per image)."""

    tpu_ms: float
    f32_gdma_mb: float
    gdma_mb: float
    global_ms: float


def float_share(prog: Any, p: Any, batch: int) -> FloatShare:
    """Lane time of the layer-group computes whose output is f32 (the dequantized residual
    adds, Caffe's Scale, LeakyRelu, the quantize / dequantize pairs around them), the GDMA
    bytes of f32 activations between groups, and the time of global layers, per image."""
    from opbridge.simulator.schema import Load, Store

    vals = prog.graph.values()
    f32_nodes = {n.name for n in prog.graph.nodes if n.outputs and n.outputs[0].dtype == "f32"}
    tpu = sum(e["dur"] for e in p.events if e["tid"] == 2 and e["cat"] == "compute"
              and e["name"].split()[1] in f32_nodes)
    f32 = sum(i.bytes for i in prog.instrs if isinstance(i, (Load, Store)) and not getattr(i, "const", False)
              and vals[i.tensor].dtype == "f32")
    glob = sum(u.est_ms for u in p.units if u.kind == "global")
    return FloatShare(tpu / 1e3 / batch, f32 / 1e6 / batch, p.gdma_bytes / 1e6 / batch, glob / batch)


def estimate(graphs: Graphs, row: Row, targets: dict[str, Any],
             shares: dict[tuple[str, int, str], FloatShare] | None = None,
             work: dict[tuple[str, str, str, int], tuple[float, float]] | None = None,
             ) -> tuple[float | None, str]:
    """(estimated ms per image, note) for one row; None with the reason when not built.
    ``targets``: chip name (lower case) -> a Target used instead of the preset of that name;
    ``shares``: where an int8 row's :class:`FloatShare` is recorded; ``work``: where each row's
    FLOPs per image and the target's peak for its precision are recorded (by model, chip,
    precision, batch)."""
    import opbridge as ob

    reason = why_not(row)
    if reason is not None:
        return None, f"not buildable yet: {reason}"
    try:
        g = graphs.get(row)
    except NotBuildable as err:
        return None, f"skipped: {err}"
    except ob.OpbridgeError as err:
        return None, f"not buildable yet: {err.message.splitlines()[0]}"
    prog = ob.compile(g, target=targets.get(row.chip.lower(), row.chip.lower()))
    p = prog.profile()
    if shares is not None and row.precision == "int8":
        shares[(row.model, row.batch, row.chip)] = float_share(prog, p, row.batch)
    if work is not None:
        dtype = PRECISION_DTYPE.get(row.precision, "f32")
        work[(row.model, row.chip, row.precision, row.batch)] = (p.flops / row.batch,
                                                                 prog.target.peak_flops(dtype))
    return p.est_latency_ms / row.batch, ""


def print_float_shares(shares: dict[tuple[str, int, str], FloatShare], estimates: dict[Any, float]) -> None:
    """The table of what the float ops of the int8 graphs cost (see :func:`float_share`)."""
    if not shares:
        return
    print()
    print("int8 rows: what the ops left in float and the global layers cost (per image):")
    print()
    print("| model | batch | chip | estimate ms | float ops on the lanes ms | f32 activation GDMA MB "
          "(of all) | global layers ms |")
    print("|---|---|---|---|---|---|---|")
    for (model, batch, chip), s in shares.items():
        print(f"| {model} | {batch} | {chip} | {estimates[(model, batch, chip)]:.3f} | {s.tpu_ms:.3f} | "
              f"{s.f32_gdma_mb:.1f} ({s.gdma_mb:.1f}) | {s.global_ms:.3f} |")


@dataclass
class FixedPerImage:
    """A straight line through two batch sizes' times a batch: t(b) = fixed + b * per_image."""

    fixed: float
    per_image: float


def fixed_and_per_image(b1: int, ms1: float, b2: int, ms2: float) -> FixedPerImage:
    """The line t(b) = F + b * P through two rows, each given as its batch and its time per
    image (as chip-latency.md states it): a batch takes b * ms, so P = (b2 * ms2 - b1 * ms1) /
    (b2 - b1) and F = b1 * ms1 - b1 * P. F is what a batch pays whatever its size (launch,
    syncs, weights loaded once a batch and not hidden), P what each image adds."""
    if b1 == b2:
        raise ValueError(f"two different batch sizes are needed, got {b1} twice")
    per_image = (b2 * ms2 - b1 * ms1) / (b2 - b1)
    return FixedPerImage(b1 * ms1 - b1 * per_image, per_image)


#: the dtype whose peak a precision of chip-latency.md runs at
PRECISION_DTYPE = {"fp32": "f32", "fp16": "f16", "bf16": "bf16", "int8": "i8"}


def print_fixed_per_image(results: list[tuple[Row, float]],
                          work: dict[tuple[str, str, str, int], tuple[float, float]] | None = None) -> None:
    """For each model, chip and precision with rows at two batch sizes (the two smallest), the
    fixed and per-image parts of a batch's time, the chip's (from the published figures) and
    ours (from the estimates), and ours / the chip's; with ``work`` (FLOPs per image and the
    peak, see :func:`estimate`), the fraction of the peak the chip's P implies for our FLOPs
    (above 100%: no efficiency of the direct computation reaches the chip's extra image)."""
    by: dict[tuple[str, str, str], dict[int, tuple[float, float]]] = {}
    for r, est in results:
        by.setdefault((r.model, r.chip, r.precision), {})[r.batch] = (r.ms, est)
    lines = []
    for (model, chip, prec), rows in by.items():
        if len(rows) < 2:
            continue
        b1, b2 = sorted(rows)[:2]
        chip_fp = fixed_and_per_image(b1, rows[b1][0], b2, rows[b2][0])
        ours = fixed_and_per_image(b1, rows[b1][1], b2, rows[b2][1])
        lines.append(f"  {model:<24} {prec:<5} {chip:<8} b{b1}/b{b2}  chip F {chip_fp.fixed:8.3f} "
                     f"P {chip_fp.per_image:8.3f} | ours F {ours.fixed:8.3f} P {ours.per_image:8.3f} | "
                     f"ours/chip F {_ratio(ours.fixed, chip_fp.fixed)} P "
                     f"{_ratio(ours.per_image, chip_fp.per_image)}"
                     + _peak_share(work, (model, chip, prec, b2), chip_fp.per_image))
    if lines:
        print()
        print("a batch's time as t(b) = F + b * P (ms; F fixed a batch, P per image), "
              "through the two smallest batch sizes:")
        print("\n".join(lines))


def _peak_share(work: dict[tuple[str, str, str, int], tuple[float, float]] | None,
                key: tuple[str, str, str, int], per_image_ms: float) -> str:
    if not work or key not in work or per_image_ms <= 0:
        return ""
    flops, peak = work[key]
    return f" | chip P at {flops / (per_image_ms * 1e-3) / peak:4.0%} of the peak"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}" if b > 0 else "     -"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default=str(TABLE), help="the published figures (chip-latency.md)")
    ap.add_argument("--model", action="append", default=[],
                    help="only rows whose model contains this text (repeatable)")
    ap.add_argument("--chip", action="append", default=[], help="only this chip (repeatable)")
    ap.add_argument("--precision", action="append", default=[], help="only this precision")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table for the docs")
    ap.add_argument("--target-json", action="append", default=[], metavar="FILE",
                    help="a target JSON file (ob.Target fields) used for the rows whose chip is "
                    "its name, instead of the preset of that name (repeatable)")
    args = ap.parse_args()
    import opbridge as ob

    targets = {t.name.lower(): t for t in map(ob.Target.load, args.target_json)}
    rows = [r for r in read_rows(Path(args.table))
            if (not args.model or any(m.lower() in r.model.lower() for m in args.model))
            and (not args.chip or r.chip.lower() in [c.lower() for c in args.chip])
            and (not args.precision or r.precision in args.precision)]
    graphs = Graphs()
    worst: dict[tuple[str, str], tuple[float, str]] = {}
    shares: dict[tuple[str, int, str], FloatShare] = {}
    estimates: dict[Any, float] = {}
    out: list[tuple[Row, float]] = []
    results: list[tuple[Row, float]] = []
    work: dict[tuple[str, str, str, int], tuple[float, float]] = {}
    ratios: list[float] = []
    if args.markdown:
        print("| model | precision | batch | chip | estimate ms | published ms | ratio | role |")
        print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        t0 = time.perf_counter()
        est, note = estimate(graphs, r, targets, shares, work)
        ratio = None if est is None else est / r.ms
        if est is not None and r.precision == "int8":
            estimates[(r.model, r.batch, r.chip)] = est
        if est is not None and ratio is not None:
            results.append((r, est))
            ratios.append(ratio)
            if not within(r, ratio):
                out.append((r, ratio))
            k = (r.chip, r.precision)
            if k not in worst or abs(math.log(ratio)) > abs(math.log(worst[k][0])):
                worst[k] = (ratio, f"{r.model} b{r.batch}")
        cells = [r.model, r.precision, str(r.batch), r.chip,
                 "-" if est is None else f"{est:.3f}", f"{r.ms:g}",
                 note if ratio is None else f"{ratio:.3f}",
                 role(r) + ("" if ratio is None or within(r, ratio) else ", OUT of bound")]
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(f"{cells[0]:<24} {cells[1]:<5} b{cells[2]:<2} {cells[3]:<8} est {cells[4]:>9} "
                  f"published {cells[5]:>8}  {cells[6]}  {cells[7]}  ({time.perf_counter() - t0:.1f} s)",
                  flush=True)
    print()
    print("worst ratio per chip and precision:")
    for (chip, prec), (ratio, where) in sorted(worst.items()):
        print(f"  {chip:<8} {prec:<5} {ratio:.3f} ({where})")
    print_bounds(ratios, out)
    print_fixed_per_image(results, work)
    print_float_shares(shares, estimates)


def print_bounds(ratios: list[float], out: list[tuple[Row, float]]) -> None:
    """The mean |log(estimate / published)| and the rows out of their bound (:data:`BOUND`)."""
    if not ratios:
        return
    mean = sum(abs(math.log(x)) for x in ratios) / len(ratios)
    print()
    print(f"mean |log(estimate / published)| over {len(ratios)} rows: {mean:.4f}; "
          f"out of their bound (calibration +-{BOUND['calibration']:.0%}, held out "
          f"+-{BOUND['held out']:.0%}): {len(out)}")
    for r, ratio in out:
        print(f"  {r.model} {r.precision} b{r.batch} {r.chip}: {ratio:.3f} ({role(r)})")


if __name__ == "__main__":
    main()
