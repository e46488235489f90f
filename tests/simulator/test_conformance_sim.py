"""A fixed sample of the official ONNX backend suite, run on the simulator at a tiny local memory.

The cases run through the conformance harness (``tests/conformance/harness.py``) with the
backend's simulator executor, and every program is compiled for a BM1684 whose lanes hold
only :data:`LMEM_BYTES` bytes, so that many of the node tests' small tensors are cut into
tiles (with halos, edge pads, batch splits) instead of fitting in one: the simulator must then
reproduce the ONNX test data like the reference interpreter does.

The sample: every node test of the window, normalization, resize, matmul and elementwise
families, plus every 10th test of the suite; and two light real models at 16 KiB (the
others take 1-17 s each: ``slow``). ``test_sim_floor`` checks that at least
:data:`SIM_FLOOR` of the sampled node tests pass and that :data:`TILED_FLOOR` of those ran
as layer groups of several tiles (the others fit one tile, or no tile: global layers).

The full suite runs the same way with
``OPBRIDGE_BACKEND_EXECUTOR=simulator pytest tests/conformance`` (at the default 512 KiB).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

import opbridge as ob
import opbridge.simulator as sim
import opbridge.simulator.partition as partition

from ..conformance.harness import NODE, REAL, Outcome, case_names, run_case

#: Bytes of local memory per lane for the node tests: the node tests' tensors are tiny, and
#: 512 B cuts the most of them into tiles (less and more of them fit no tile at all).
LMEM_BYTES = 512
#: Bytes per lane for the real models (16 KiB: the smallest lane the Caffe nets are tested at).
REAL_LMEM_BYTES = 16 * 1024
#: Sampled node tests that must pass on the simulator (raise it when more pass).
SIM_FLOOR = 460
#: Sampled node tests whose program must hold a layer group of more than one tile (a one-op
#: test keeps its group here, though a layer alone runs global in a real program: see
#: ``on_simulator``).
TILED_FLOOR = 60

#: The families sampled whole: the ops the layer-group compiler tiles, and their neighbours.
FAMILIES = re.compile(
    r"^test_(conv|maxpool|averagepool|lppool|global(average|max|lp)pool|batchnorm|"
    r"instancenorm|layer_normalization|group_normalization|lrn|resize|add|sub|mul|div|relu|"
    r"leakyrelu|prelu|sigmoid|tanh|clip|elu|selu|hardsigmoid|hardswish|softmax|gemm|matmul)")
EVERY = 10

_ALL = case_names(NODE)
SAMPLE = [n for i, n in enumerate(_ALL) if FAMILIES.match(n) or i % EVERY == 0]
FAST_REAL = ("test_shufflenet", "test_squeezenet")

_RESULTS: dict[str, tuple[Outcome, bool]] = {}


class _SmallTarget:
    """``ob.compile`` for a lane of ``lmem`` bytes, recording whether any group was tiled.

    The backend compiles through ``opbridge.compile`` for the default target; this stands
    in for it while a case runs (the harness itself is shared and left as it is).
    """

    def __init__(self, lmem: int) -> None:
        self.lmem = lmem
        self.tiled = False

    def __call__(self, graph: ob.Graph, target: Any = "bm1684", **kw: Any) -> ob.Program:
        # BM1684 has no f16/bf16 arithmetic; the node tests in those dtypes check the kernels,
        # so they run on a BM1684 given it (the layout and tiling stay BM1684's)
        half = {"dtypes": ["f16", "bf16", "i8", "u8"], "peak_tflops_f16": 4.4}
        prog = sim.compile(graph, ob.Target.preset("bm1684", lmem_bytes_per_lane=self.lmem, **half), **kw)
        self.tiled = self.tiled or any(g.tiles > 1 for g in prog.groups)
        return prog


@pytest.fixture
def on_simulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Run backend cases on the simulator; ``on_simulator(lmem)`` sets the lane size."""
    monkeypatch.setenv("OPBRIDGE_BACKEND_EXECUTOR", "simulator")

    def use(lmem: int) -> _SmallTarget:
        small = _SmallTarget(lmem)
        monkeypatch.setattr(ob, "compile", small)
        # a node test is mostly one op, which would run global: keep it a group, so that its
        # tile kernel is checked against the test data
        monkeypatch.setattr(partition, "LONE_LAYERS_RUN_GLOBAL", False)
        return small

    yield use


def _node_outcome(name: str, on_simulator: Any) -> tuple[Outcome, bool]:
    if name not in _RESULTS:
        small = on_simulator(LMEM_BYTES)
        _RESULTS[name] = (run_case(NODE, name), small.tiled)
    return _RESULTS[name]


def _check(out: Outcome) -> None:
    if out.status == "skipped":
        pytest.skip(out.detail)
    if out.status == "failed":
        pytest.fail(out.detail, pytrace=False)


#: Sampled cases the simulator refuses by design, with the reason (the interpreter runs them:
#: tests/conformance).
SIM_SKIPS = {
    r"^test_(sequence_|optional_get_element_(optional_)?sequence)": (
        "sequences run in the interpreter only; the simulator compiles tensors"),
    r"^test_range_.*_expanded$": (
        "the Loop's trip count comes from the graph inputs, so its output's size is known at run "
        "time only; the simulator compiles static shapes"),
}


@pytest.mark.parametrize("name", SAMPLE, ids=[n[len("test_"):] for n in SAMPLE])
def test_node_on_simulator(name: str, on_simulator: Any) -> None:
    for pattern, reason in SIM_SKIPS.items():
        if re.search(pattern, name):
            pytest.skip(reason)
    _check(_node_outcome(name, on_simulator)[0])


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if n in FAST_REAL else pytest.mark.slow) for n in case_names(REAL)
], ids=lambda n: n[len("test_"):])
def test_real_model_on_simulator(name: str, on_simulator: Any) -> None:
    small = on_simulator(REAL_LMEM_BYTES)
    _check(run_case(REAL, name))
    assert small.tiled, f"{name} at {REAL_LMEM_BYTES} B a lane should be cut into tiles"


def test_sim_floor(on_simulator: Any) -> None:
    """At least SIM_FLOOR sampled node tests pass on the simulator, TILED_FLOOR of them tiled
    (cases not yet run in this process run now)."""
    results = [_node_outcome(n, on_simulator) for n in SAMPLE]
    passed = sum(o.status == "passed" for o, _ in results)
    tiled = sum(o.status == "passed" and t for o, t in results)
    assert passed >= SIM_FLOOR, f"{passed} of {len(SAMPLE)} sampled node tests pass, floor {SIM_FLOOR}"
    assert tiled >= TILED_FLOOR, f"only {tiled} passing cases were tiled, floor {TILED_FLOOR}"
