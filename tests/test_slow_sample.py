"""The slow-test sample rotates with the commit, so every slow test runs regularly in CI."""

from __future__ import annotations

from tests.conftest import in_slow_sample

IDS = [f"tests/models/test_caffe_models.py::test_net[net{i}-case{j}]" for i in range(40) for j in range(5)]
#: Stand-ins for successive commit hashes.
SEEDS = [f"{i * 7919:012x}" for i in range(1, 31)]


def test_sample_is_deterministic_for_a_seed():
    assert [in_slow_sample(t, "0123456789ab", 3) for t in IDS] == [
        in_slow_sample(t, "0123456789ab", 3) for t in IDS]


def test_sample_is_about_one_in_n_and_changes_with_the_seed():
    samples = [{t for t in IDS if in_slow_sample(t, s, 3)} for s in SEEDS]
    for s in samples:
        assert len(IDS) / 5 < len(s) < len(IDS) / 2
    assert len({frozenset(s) for s in samples}) == len(SEEDS)


def test_every_slow_test_runs_within_a_few_commits():
    never = [t for t in IDS if not any(in_slow_sample(t, s, 3) for s in SEEDS)]
    assert not never, f"{len(never)} slow tests never sampled over {len(SEEDS)} commits: {never[:3]}"
