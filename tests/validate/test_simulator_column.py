"""ob.validate's simulator column catches a wrong simulator: a plugin op whose definition
computes correctly but whose simulator kernel returns its input must fail validation, with the
first divergence on that node, in the simulator column.

The reference here is the interpreter (the model is a Graph), so only the simulator can differ.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.simulator import DEFAULT_KERNELS

OP = "ValidateTestAffine"


def _affine(x: np.ndarray, **_: Any) -> np.ndarray:
    return x * 2.0 + 1.0


def _echo(x: np.ndarray, **_: Any) -> np.ndarray:
    """The faulty kernel: returns its input unchanged."""
    return x


@pytest.fixture
def affine_op() -> Iterator[None]:
    """The op, defined like a plugin would; removed afterwards (registrations are global)."""
    (ob.define_op(OP).input("x", "T").output("y", "T").type_param("T", ("f32",))
     .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(_affine))
    try:
        yield
    finally:
        if OP in DEFAULT_KERNELS:
            DEFAULT_KERNELS.remove(OP)
        ob.DEFAULT_OPS.remove(OP)


def _graph() -> ob.Graph:
    """x -> Relu 'first' -> affine 'suspect' -> Relu 'last'; the suspect's output is a graph
    output too, so every runner exposes it."""
    b = ob.GraphBuilder("faulty_kernel")
    x = b.input("x", "f32", (1, 4, 8, 8))
    a = b.op(OP, [b.op("Relu", [x], name="first")], name="suspect")
    b.output(a)
    b.output(b.op("Relu", [a], name="last"))
    return b.build()


KERNELS = {
    "tile-kernel": lambda k: k.split("N", "H", "W").compute(_echo),
    "global-kernel": lambda k: k.global_only().compute(_echo),
}


@pytest.mark.parametrize("kind", list(KERNELS))
def test_faulty_simulator_kernel_fails_validation_at_its_node(affine_op: None, kind: str) -> None:
    KERNELS[kind](ob.register_kernel(OP))
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    r = ob.validate(_graph(), inputs={"x": x}, target="bm1684")
    assert not r.passed, r.summary()
    fd = r.first_divergence
    assert fd is not None
    assert (fd.node, fd.op_type, fd.candidate, fd.reference) == ("suspect", OP, "simulator", "interpreter")
    if kind == "global-kernel":  # its input passes through DDR, so it is compared and agrees
        assert fd.inputs_matched == ("first",)
    assert "node 'suspect'" in r.summary() and "simulator" in r.summary()


def test_correct_kernel_passes(affine_op: None) -> None:
    """The control: the same graph with a kernel that computes the op passes, so the failure
    above is the kernel's."""
    ob.register_kernel(OP).split("N", "H", "W")
    x = np.random.default_rng(0).standard_normal((1, 4, 8, 8)).astype(np.float32)
    r = ob.validate(_graph(), inputs={"x": x}, target="bm1684")
    assert r.passed, r.summary()
    assert "simulator" in r.runners
