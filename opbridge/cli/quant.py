"""``opbridge calibrate`` and ``opbridge quantize``: post-training quantization from the shell."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from .common import (
    add_model_options,
    add_threads_option,
    check_output,
    load_model,
    non_negative_int,
    positive_int,
    with_threads,
)


def _floats(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': give numbers separated by commas, e.g. 0,0,0") from None


def _model_options(p: Any) -> None:
    p.add_argument("model", help="a model file: .onnx, Caffe .prototxt, TorchScript .ts.json, or .obir")
    add_model_options(p)
    add_threads_option(p)


def _data_options(p: Any, *, required: bool) -> None:
    p.add_argument("--data", required=required, metavar="PATH",
                   help="samples: a folder (or file) of .npy/.npz arrays (one array per input name "
                   "in .npz) or of images (.jpg, .png, .bmp, .ppm, ...)")
    p.add_argument("--samples", type=positive_int, default=None, metavar="N",
                   help="use at most N samples, in file-name order (default: all)")
    p.add_argument("--mean", type=_floats, default=(0.0,), metavar="M[,M,M]",
                   help="images: subtracted per channel, pixels in 0..255 (default 0)")
    p.add_argument("--std", type=_floats, default=(1.0,), metavar="S[,S,S]",
                   help="images: divides per channel after the mean (default 1); ImageNet models "
                   "trained with torchvision: --mean 123.675,116.28,103.53 --std 58.395,57.12,57.375")
    p.add_argument("--layout", choices=("nchw", "nhwc"), default="nchw", help="images: input layout")
    p.add_argument("--pixel-format", choices=("rgb", "bgr", "gray"), default="rgb",
                   help="images: channel order the model wants (default rgb)")
    p.add_argument("--crops", type=non_negative_int, default=0, metavar="N",
                   help="images: N more samples from each image, windows of two thirds of its "
                   "width spread from left to right (default 0); more calibration samples from "
                   "the same images make the mixed-precision search generalise better")


def _preprocess(args: argparse.Namespace) -> Any:
    from ..quant.data import Preprocess

    return Preprocess(args.mean, args.std, args.layout, args.pixel_format, crops=args.crops)


def _graph(args: argparse.Namespace) -> Any:
    """The float graph of ``args.model``, converted with ``--input-shape``/``--input-value``
    as ``convert`` does (an .obir is read as it is)."""
    return load_model(args)


def add_calibrate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help="run calibration samples through a model and write its int8 calibration table",
        description="Run MODEL in the reference interpreter over the samples of --data and "
        "write, for every float tensor, the range seen and the threshold symmetric int8 maps to "
        "127 (JSON, the input of 'opbridge quantize'). Methods: minmax (largest |x|), percentile "
        "(--percentile of |x|), kl (TensorRT's entropy calibration: clips outliers), mse (the "
        "threshold of least squared quantization error).",
    )
    _model_options(p)
    _data_options(p, required=True)
    p.add_argument("--method", choices=("minmax", "percentile", "kl", "mse"), default="minmax",
                   help="how the threshold is chosen (default minmax)")
    p.add_argument("--percentile", type=float, default=99.99, metavar="P",
                   help="the percentile of --method percentile (default 99.99)")
    p.add_argument("--equalize", action="store_true",
                   help="calibrate the model after cross-layer equalisation (Conv -> ReLU/identity -> "
                   "Conv pairs rescaled so their per-channel weight ranges match; the function is "
                   "unchanged); the table records it and 'quantize' equalises too")
    p.add_argument("--channel-activations", action="store_true",
                   help="also record each channel's largest |x|, so that 'quantize' scales per channel the "
                   "activations the chip takes per channel for free (a Conv's output read by float ops, a "
                   "depthwise Conv's input); it needs calibration data like the deployment data: a channel "
                   "quiet on the samples clips on inputs that excite it")
    p.add_argument("-o", "--output", required=True, metavar="TABLE.json", help="where to write the table")
    p.set_defaults(func=with_threads(run_calibrate))


def run_calibrate(args: argparse.Namespace) -> int:
    from ..quant import calibrate

    check_output(args.output, "-o", "a JSON calibration table", not_a_model=".json", example="table.json")
    t0 = time.perf_counter()
    graph = _graph(args)
    table = calibrate(graph, args.data, args.method, num_samples=args.samples,
                      preprocess=_preprocess(args), percentile=args.percentile, equalize=args.equalize,
                      channel_activations=args.channel_activations, progress=True)
    table.save(args.output)
    eq = ", equalized" if table.equalized else ""
    sys.stdout.write(f"wrote {args.output}: {len(table.tensors)} tensors, {table.samples} samples, "
                     f"method {table.method}{eq}; {time.perf_counter() - t0:.2f} s\n")
    stem = Path(args.model).name.split(".")[0] or "model"
    sys.stdout.write(f"next: opbridge quantize {_model_words(args)} --table {args.output} "
                     f"-o {stem}.int8.obir\n")
    return 0


def _model_words(args: argparse.Namespace) -> str:
    """MODEL and the options that made its graph, quoted for a shell, to repeat in the next
    command on the same model."""
    from shlex import quote

    def shown(value: object) -> str:  # --input-value as it was written: a path, numbers, true/false
        items = value if isinstance(value, list) else [value]
        return value if isinstance(value, str) else ",".join(str(v).lower() if isinstance(v, bool) else str(v)
                                                              for v in items)

    words = [quote(str(args.model))]
    words += ["--weights", quote(args.weights)] if getattr(args, "weights", None) else []
    for name, dims in args.input_shape or []:
        words += ["--input-shape", quote(f"{name}={','.join(map(str, dims))}")]
    for name, value in getattr(args, "input_value", None) or []:
        words += ["--input-value", quote(f"{name}={shown(value)}")]
    for plugin in args.plugin or []:
        words += ["--plugin", quote(plugin)]
    return " ".join(words)


def add_quantize_parser(sub: Any) -> None:
    p = sub.add_parser(
        "quantize",
        help="quantize a float model to int8 (with a calibration table), f16 or bf16",
        description="Write MODEL quantized as an .obir graph. int8: symmetric per-channel int8 "
        "weights, per-tensor activations from the --table thresholds (int8, or uint8 for tensors "
        "never negative; per channel where the chip takes that for free, a Conv's output read by "
        "float ops or a depthwise Conv's input, when the table has channel ranges: 'calibrate "
        "--channel-activations') and int32 biases for "
        "Conv/MatMul/Gemm, as QuantizeLinear/DequantizeLinear pairs (other ops stay float "
        "between them). f16/bf16: every op that has such a kernel runs in it, the others in f32 "
        "with Casts at the boundary. --mixed-precision auto keeps the int8 layers that hurt the "
        "output most in float until the outputs reach --target-cos against the float model "
        "(on --data, else random inputs in the calibrated input ranges), and names them.",
    )
    _model_options(p)
    p.add_argument("--table", metavar="TABLE.json", help="calibration table (needed for int8)")
    p.add_argument("--dtype", choices=("int8", "f16", "bf16"), default="int8", help="default int8")
    p.add_argument("--per-tensor", action="store_true", help="int8 weights and activations per tensor, never per channel")
    p.add_argument("--mixed-precision", choices=("auto",), default=None,
                   help="keep the layers that lose most in float until --target-cos is reached")
    p.add_argument("--target-cos", type=float, default=0.999, metavar="C",
                   help="the output cosine --mixed-precision auto aims for (default 0.999)")
    p.add_argument("--bias-correction", action="store_true",
                   help="add each int8 layer's mean output error per channel, measured on the "
                   "calibration samples (--data, needed), to its bias")
    p.add_argument("--equalize", action="store_true", default=None,
                   help="quantize after cross-layer equalisation; the default follows the table "
                   "('calibrate --equalize'), and a table made otherwise is refused")
    _data_options(p, required=False)
    p.add_argument("-o", "--output", required=True, metavar="OUT.obir", help="where to write the graph")
    p.set_defaults(func=with_threads(run_quantize))


def run_quantize(args: argparse.Namespace) -> int:
    from ..ir.io import save
    from ..quant import quantize

    check_output(args.output, "-o", "a .obir graph", ".obir")
    t0 = time.perf_counter()
    graph = _graph(args)
    q = quantize(graph, args.table, dtype=args.dtype, per_channel=not args.per_tensor,
                 mixed_precision=args.mixed_precision, target_cos=args.target_cos,
                 samples=args.data, num_samples=args.samples, preprocess=_preprocess(args),
                 bias_correction=args.bias_correction,
                 equalize=args.equalize, progress=True)
    save(q, args.output)
    meta = q.metadata
    int8 = [x for x in meta.get("quant.int8_layers", "").split(",") if x]
    kept = [x for x in meta.get("quant.float_layers", "").split(",") if x]
    what = f"{len(int8)} int8 layers, " if args.dtype == "int8" else ""
    if "quant.equalized" in meta:
        what += f"equalized ({meta['quant.equalized']}), "
    sys.stdout.write(f"wrote {args.output}: {args.dtype}, {what}{len(q.nodes)} nodes; "
                     f"{time.perf_counter() - t0:.2f} s\n")
    if "quant.cosine" in meta:
        auto = [x for x in meta.get("quant.auto_float_layers", "").split(",") if x]
        sys.stdout.write(f"mixed precision: output cosine {meta['quant.cosine']} (target "
                         f"{args.target_cos}); kept in float: {', '.join(auto) or 'none'}\n")
    elif kept:
        sys.stdout.write(f"kept in float ({len(kept)}): {', '.join(kept[:20])}"
                         f"{' ...' if len(kept) > 20 else ''}\n")
    prog = Path(args.output).with_name(Path(args.output).name[: -len(".obir")] + ".obprog")
    if args.dtype == "int8":
        feeds = "".join(f" --input {v.name}=SAMPLE.npy" for v in graph.inputs)
        sys.stdout.write(f"next: opbridge validate {_model_words(args)} --quantize {args.output}"
                         f"{feeds} (int8 against float, on a sample); opbridge compile {args.output} -o {prog}\n")
    else:  # bm1684 computes in f32 and 8-bit integers only
        sys.stdout.write(f"next: opbridge compile {args.output} --target bm1684x -o {prog}\n")
    return 0
