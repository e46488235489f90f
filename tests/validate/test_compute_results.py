"""A plugin compute that returns the wrong dtype or shape is an error that names the node, the op
and what its definition promised — in the interpreter, in constant folding and in the simulator
(tiles and global layers) — never a silent cast."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import opbridge as ob
from opbridge.errors import InterpretError, SimulatorError
from opbridge.ir.passes.fold import FoldConstants
from opbridge.simulator import DEFAULT_KERNELS

OP = "ComputeResultTestOp"


def _f64(x: np.ndarray, **_: Any) -> np.ndarray:
    return x * np.float64(2.0)  # a float64 scalar promotes the result to float64


def _short(x: np.ndarray, **_: Any) -> np.ndarray:
    return x[:, :1]


def _right(x: np.ndarray, **_: Any) -> np.ndarray:
    return x * np.float32(2.0)


@pytest.fixture
def define() -> Iterator[Any]:
    """Defines the op with a given compute, like a plugin; removed afterwards."""

    def make(compute: Any) -> None:
        (ob.define_op(OP).input("x", "T").output("y", "T").type_param("T", ("f32", "f16"))
         .shape_fn(lambda ctx: ctx.same_as_input(0)).compute(compute))

    try:
        yield make
    finally:
        if OP in DEFAULT_KERNELS:
            DEFAULT_KERNELS.remove(OP)
        if OP in ob.DEFAULT_OPS:
            ob.DEFAULT_OPS.remove(OP)


def _graph(dtype: str = "f32") -> ob.Graph:
    b = ob.GraphBuilder("g")
    x = b.input("x", dtype, (1, 4, 64, 32))
    b.output(b.op("Relu", [b.op(OP, [x], name="mine")], name="after"))
    return b.build()


def _x(dtype: str = "f32") -> dict[str, np.ndarray]:
    return {"x": np.ones((1, 4, 64, 32), dtype=np.float16 if dtype == "f16" else np.float32)}


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_interpreter_refuses_a_wrong_dtype(define: Any, dtype: str) -> None:
    define(_f64)
    with pytest.raises(InterpretError, match=(
            rf"node 'mine' \({OP}\): compute returned f64\[1,4,64,32\] for output 'mine'; the "
            rf"op's definition promises {dtype}\[1,4,64,32\] \(its output 'y': T = {dtype}\)")) as e:
        ob.interpret(_graph(dtype), _x(dtype))
    assert "astype" in (e.value.hint or "")


def test_interpreter_refuses_a_wrong_shape(define: Any) -> None:
    define(_short)
    with pytest.raises(InterpretError, match=r"node 'mine' .*returned f32\[1,1,64,32\].*promises "
                                             r"f32\[1,4,64,32\]"):
        ob.interpret(_graph(), _x())


def test_interpreter_keeps_a_right_compute(define: Any) -> None:
    """The control: the same op returning float32 runs."""
    define(_right)
    out = ob.interpret(_graph(), _x())["after"]
    assert out.dtype == np.float32 and np.array_equal(out, np.full((1, 4, 64, 32), 2.0, np.float32))


def test_constant_folding_refuses_a_wrong_dtype(define: Any) -> None:
    define(_f64)
    b = ob.GraphBuilder("folded")
    x = b.input("x", "f32", (1, 4, 64, 32))
    c = b.op(OP, [b.constant("c", np.ones((1, 4, 64, 32), np.float32))], name="mine")
    b.output(b.op("Add", [x, c], name="add"))
    with pytest.raises(InterpretError, match=r"node 'mine' .*returned f64.*promises f32"):
        FoldConstants()(b.build())


@pytest.mark.parametrize("kernel", ["tile", "global"])
def test_simulator_refuses_a_wrong_dtype(define: Any, kernel: str) -> None:
    """The op's definition is right (the interpreter runs it); the simulator kernel is wrong."""
    define(_right)
    k = ob.register_kernel(OP)
    (k.split("N", "H") if kernel == "tile" else k.global_only()).compute(_f64)
    prog = ob.compile(_graph(), target=ob.Target.preset("bm1684", lmem_bytes_per_lane=4096))
    part = "a tile of " if kernel == "tile" else ""
    with pytest.raises(SimulatorError, match=rf"node 'mine' \({OP}\): compute returned f64\[.*\] for "
                                             rf"{part}output 'mine'; the op's definition promises f32"):
        prog.run(_x())
