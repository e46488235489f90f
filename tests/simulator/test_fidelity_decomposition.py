"""bench/bench_fidelity.py's split of a batch's time into a fixed part and a per-image part."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import bench_fidelity
    finally:
        sys.path.remove(str(ROOT / "bench"))
    return bench_fidelity


def test_fixed_and_per_image_through_a_hand_made_pair(bench):
    """3.0 ms an image at batch 1 and 1.5 ms an image at batch 4: the batches take 3.0 and
    6.0 ms, so the 3 extra images cost 3.0 ms, P = 1.0 ms each, and F = 3.0 - 1.0 = 2.0 ms."""
    fp = bench.fixed_and_per_image(1, 3.0, 4, 1.5)
    assert fp.per_image == pytest.approx(1.0)
    assert fp.fixed == pytest.approx(2.0)
    # batch 1 and 8 (BERT's pair): 10 ms, then 8 x 2 = 16 ms a batch: P = 6 / 7, F = 10 - 6 / 7
    fp = bench.fixed_and_per_image(1, 10.0, 8, 2.0)
    assert fp.per_image == pytest.approx(6 / 7)
    assert fp.fixed == pytest.approx(10 - 6 / 7)
    # the order of the two rows does not matter
    fp = bench.fixed_and_per_image(4, 1.5, 1, 3.0)
    assert (fp.fixed, fp.per_image) == (pytest.approx(2.0), pytest.approx(1.0))
    with pytest.raises(ValueError, match="two different batch sizes"):
        bench.fixed_and_per_image(4, 1.5, 4, 1.0)


def test_printed_decomposition_pairs_chip_and_estimate(bench, capsys):
    """The printed line for a model with batch 1 and 4 rows: the chip's F / P from the
    published figures, ours from the estimates, and their ratios; a model with one batch
    size prints nothing."""
    rows = [bench.Row("Net", "", "fp32", 1, "BM1684", 3.0),
            bench.Row("Net", "", "fp32", 4, "BM1684", 1.5),
            bench.Row("Alone", "", "fp32", 1, "BM1684", 9.0)]
    # ours: 2.0 ms at batch 1, 2.0 ms an image at batch 4 -> 2 and 8 ms a batch: P 2, F 0
    bench.print_fixed_per_image(list(zip(rows, [2.0, 2.0, 9.0])))
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.strip().startswith("Net")]
    assert "Alone" not in out
    nums = [float(x) for x in line.split("|")[0].split()[-3::2]]
    assert nums == [2.0, 1.0]  # chip F, P
    ours = [float(x) for x in line.split("|")[1].split()[2::2]]
    assert ours == [0.0, 2.0]
    assert line.split("|")[2].split()[-1] == "2.00"  # ours / chip P


def test_printed_decomposition_says_what_share_of_the_peak_the_chips_extra_image_takes(bench, capsys):
    """With 2 GFLOP an image on a 2.5 TFLOP/s peak, the chip's P of 1.0 ms (the pair of the
    test above) is 2e9 / 1e-3 = 2 TFLOP/s, 80% of the peak; 0.5 ms would be 160%."""
    rows = [bench.Row("Net", "", "fp32", 1, "BM1684", 3.0), bench.Row("Net", "", "fp32", 4, "BM1684", 1.5)]
    work = {("Net", "BM1684", "fp32", 4): (2e9, 2.5e12)}
    bench.print_fixed_per_image(list(zip(rows, [2.0, 2.0])), work)
    assert "chip P at  80% of the peak" in capsys.readouterr().out
    rows[1] = bench.Row("Net", "", "fp32", 4, "BM1684", 1.125)  # 4.5 ms a batch: P = 1.5 / 3, F = 2.5
    bench.print_fixed_per_image(list(zip(rows, [2.0, 2.0])), work)
    assert "chip P at 160% of the peak" in capsys.readouterr().out
