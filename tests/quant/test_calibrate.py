"""ob.calibrate against references outside opbridge: every tensor's values from onnxruntime,
the statistics from numpy, and the KL threshold from a loop written after TensorRT's entropy
calibration pseudo-code (Migacz, GTC 2017, slide "Calibration"; MXNet's
``contrib/quantization.py::_get_optimal_threshold`` spells out the same steps)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import opbridge as ob
from opbridge.quant import CalibrationTable, QuantError
from opbridge.quant.calibrate import kl_threshold, percentile_threshold
from tests.conftest import requires_ort
from tests.quant.helpers import cnn_model, feeds, ort_all_tensors


@pytest.fixture(scope="module")
def cnn():
    model = cnn_model()
    return model, ob.convert(model)


@requires_ort
def test_minmax_matches_numpy_over_onnxruntime_tensors(cnn):
    model, g = cnn
    samples = feeds(6)
    table = ob.calibrate(g, samples, method="minmax")
    runs = [ort_all_tensors(model, f) for f in samples]
    assert set(table.tensors) == set(runs[0])
    for name, r in table.tensors.items():
        allv = np.concatenate([run[name].ravel() for run in runs])
        np.testing.assert_allclose(r.min, allv.min(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(r.max, allv.max(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(r.threshold, np.abs(allv).max(), rtol=1e-5, atol=1e-6, err_msg=name)


@requires_ort
@pytest.mark.parametrize("pct", [99.0, 99.9, 100.0])
def test_percentile_within_one_bin_of_numpy(cnn, pct):
    model, g = cnn
    samples = feeds(4)
    table = ob.calibrate(g, samples, method="percentile", percentile=pct)
    runs = [ort_all_tensors(model, f) for f in samples]
    for name, r in table.tensors.items():
        a = np.abs(np.concatenate([run[name].ravel() for run in runs]))
        width = a.max() / 2048
        # the smallest value with at least pct% of the values at or below it; the histogram
        # rounds it up to its bin's upper edge
        want = np.percentile(a, pct, method="inverted_cdf")
        assert want - 1e-6 <= r.threshold <= want + width + 1e-5, (name, r.threshold, want)


def _smooth(h: list[float], eps: float = 1e-4) -> list[float]:
    """MXNet's _smooth_distribution: eps into empty bins, taken evenly from the others."""
    zeros = sum(1 for x in h if x == 0)
    take = eps * zeros / (len(h) - zeros)
    return [eps if x == 0 else x - take for x in h]


def _kl_reference(hist: np.ndarray, top: float, levels: int = 128) -> float:
    """TensorRT's loop as the slides write it, with plain Python loops (written separately
    from opbridge's vectorised version)."""
    best, best_i = None, len(hist)
    for i in range(levels, len(hist) + 1):
        ref = [float(x) for x in hist[:i]]
        ref[i - 1] += float(sum(hist[i:]))
        merged = i // levels
        cand = [0.0] * i
        for j in range(levels):
            lo = j * merged
            hi = i if j == levels - 1 else lo + merged
            total = float(sum(hist[lo:hi]))
            used = [k for k in range(lo, hi) if ref[k] != 0]
            for k in used:
                cand[k] = total / len(used)
        ref, cand = _smooth(ref), _smooth(cand)
        sp, sq = sum(ref), sum(cand)
        kl = 0.0
        for p, q in zip(ref, cand):
            if p > 0:
                kl += (p / sp) * np.log((p / sp) / (q / sq))
        if best is None or kl < best:
            best, best_i = kl, i
    return (best_i + 0.5) * top / len(hist) if best_i < len(hist) else top


@pytest.mark.parametrize("dist", ["gauss+outliers", "laplace", "relu-gauss", "uniform"])
def test_kl_threshold_matches_reference_loop(dist):
    rng = np.random.default_rng(3)
    x = {
        "gauss+outliers": np.concatenate([rng.standard_normal(20000), [40.0, -35.0, 30.0]]),
        "laplace": rng.laplace(size=20000),
        "relu-gauss": np.maximum(rng.standard_normal(20000), 0),
        "uniform": rng.uniform(-1, 1, 20000),
    }[dist]
    top = float(np.abs(x).max())
    hist, _ = np.histogram(np.abs(x), bins=512, range=(0, top))
    exhaustive = kl_threshold(hist, top, stride=1)
    assert exhaustive == pytest.approx(_kl_reference(hist, top), rel=1e-9)
    assert 0 < exhaustive <= top
    # the coarse-then-fine search lands within a few bins of the exhaustive one
    assert kl_threshold(hist, top) == pytest.approx(exhaustive, abs=4 * top / hist.size)


def test_percentile_threshold_edges():
    hist = np.zeros(10, np.int64)
    hist[[0, 9]] = [99, 1]
    assert percentile_threshold(hist, 10.0, 99.0) == pytest.approx(1.0)
    assert percentile_threshold(hist, 10.0, 100.0) == pytest.approx(10.0)
    assert percentile_threshold(np.zeros(10), 0.0, 99.0) == 0.0


def test_kl_calibration_clips_an_outlier_minmax_keeps(cnn):
    _, g = cnn
    samples = feeds(3)
    samples[0]["image"][0, 0, 0, 0] = 60.0  # one outlier pixel
    mm = ob.calibrate(g, samples, method="minmax")
    kl = ob.calibrate(g, samples, method="kl")
    assert mm["image"].threshold == pytest.approx(60.0)
    assert kl["image"].threshold < 10.0
    assert kl["image"].max == pytest.approx(60.0)


def test_table_round_trip(cnn, tmp_path):
    _, g = cnn
    table = ob.calibrate(g, feeds(2), method="percentile")
    path = tmp_path / "t.json"
    table.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == "opbridge-calibration" and data["version"] == 1
    assert data["method"] == "percentile" and data["samples"] == 2
    back = CalibrationTable.load(path)
    assert back.tensors == table.tensors and back.graph == table.graph


@pytest.mark.parametrize("text, match", [
    ("not json", "not valid JSON"),
    ('{"format": "other"}', "not an opbridge calibration table"),
    ('{"format": "opbridge-calibration", "version": 99, "tensors": {}}', "version 99"),
    ('{"format": "opbridge-calibration", "version": 1, "tensors": {"x": {"min": 1}}}',
     "tensor 'x' needs numbers"),
    ('{"format": "opbridge-calibration", "version": 1, "tensors": '
     '{"x": {"min": 1, "max": 0, "threshold": 1}}}', "min <= max"),
])
def test_bad_tables(tmp_path, text, match):
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(QuantError, match=match):
        CalibrationTable.load(path)


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "entropy"}, "method 'entropy' is not one of"),
    ({"percentile": 0}, "percentile 0"),
    ({"num_samples": 0}, "number of samples 0"),
])
def test_bad_arguments(cnn, kwargs, match):
    _, g = cnn
    with pytest.raises(QuantError, match=match):
        ob.calibrate(g, feeds(1), **kwargs)


@pytest.mark.parametrize("unsigned", [False, True])
def test_mse_threshold_minimises_the_measured_quantization_error(unsigned):
    from opbridge.quant.calibrate import mse_threshold

    rng = np.random.default_rng(3)
    x = rng.laplace(0, 1, 200_000)  # heavy tails: the best threshold clips them
    x = np.abs(x) if unsigned else x
    levels = 255 if unsigned else 127
    top = float(np.abs(x).max())
    hist, _ = np.histogram(np.abs(x), bins=2048, range=(0, top))
    chosen = mse_threshold(hist, top, levels)

    def measured(t: float) -> float:  # quantize the samples themselves at threshold t
        step = t / levels
        lo = 0 if unsigned else -levels - 1
        return float(np.mean((np.clip(np.rint(x / step), lo, levels) * step - x) ** 2))

    grid = np.linspace(top / 64, top, 400)
    best = min(measured(t) for t in grid)
    assert chosen < 0.9 * top  # clips the tail, where minmax would keep all of it (Laplace at 8 bits: about 10 b, Banner et al. 2019)
    assert measured(chosen) <= 1.02 * best
    assert mse_threshold(np.zeros(8), 0.0) == 0.0


def test_mse_method_in_a_table(cnn):
    _, g = cnn
    samples = feeds(3)
    mm = ob.calibrate(g, samples, method="minmax")
    mse = ob.calibrate(g, samples, method="mse")
    assert mse.method == "mse"
    assert all(0 < mse[k].threshold <= mm[k].threshold * (1 + 1e-6) for k in mm.tensors if mm[k].threshold > 0)
