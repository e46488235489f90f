"""The interpreter drops a tensor after its last reader (unless intermediates are asked for),
so a deep network needs the memory of what is live at once, not of every tensor it made."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import opbridge as ob
from opbridge.ir.opdef import OpRegistry


def _chain(refs: list, alive_at_end: list) -> ob.Graph:
    reg = OpRegistry()

    def track(x: np.ndarray) -> np.ndarray:
        y = x + 1
        refs.append(weakref.ref(y))
        return y

    def probe(x: np.ndarray) -> np.ndarray:
        gc.collect()
        alive_at_end.extend(r() is not None for r in refs[:-1])
        return x.copy()

    for name, fn in (("Track", track), ("Probe", probe)):
        (reg.define(name).input("x", "T").output("y", "T").type_param("T", ("f32",))
            .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(fn))
    b = ob.GraphBuilder("chain", registry=reg)
    v = b.input("x", "f32", (4, 4))
    for _ in range(5):
        v = b.op("Track", [v])
    b.output(b.op("Probe", [v]))
    return b.build()


@pytest.mark.parametrize("keep", [False, True], ids=["intermediates=absent", "keep_intermediates"])
def test_tensors_dropped_after_last_reader(keep):
    refs: list = []
    alive: list[bool] = []
    g = _chain(refs, alive)
    out = ob.interpret(g, {"x": np.zeros((4, 4), np.float32)}, keep_intermediates=keep)
    assert len(alive) == 4
    assert all(alive) if keep else not any(alive)
    np.testing.assert_array_equal(out[g.outputs[0].name], np.full((4, 4), 5.0, np.float32))


def test_graph_output_read_by_a_later_node_is_kept():
    b = ob.GraphBuilder("g")
    x = b.input("x", "f32", (2,))
    y = b.op("Relu", [x])
    z = b.op("Neg", [y])
    b.output(y)
    b.output(z)
    out = ob.interpret(b.build(), {"x": np.array([1.0, -2.0], np.float32)})
    np.testing.assert_array_equal(out[y.name], [1.0, 0.0])
    np.testing.assert_array_equal(out[z.name], [-1.0, -0.0])
