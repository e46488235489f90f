"""Structural equality of IR graphs, and the ``save -> load`` round-trip property built on it.

``assert_graphs_equal(a, b)`` compares everything a ``.obir`` file must keep: the graph's name
and metadata, inputs and outputs, every constant (name, dtype, shape and bytes), and every node
in order (name, op, inputs, outputs with dtypes and shapes, attributes by type and value,
origin, placement). It fails on the first difference, naming where it is.

``assert_roundtrip(g)`` saves ``g``, loads it back, checks the two graphs are equal and that
they compile to the same program (compared through ``Program.to_json``, whatever its schema).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import opbridge as ob


def _same_array(a: np.ndarray, b: np.ndarray) -> str | None:
    if a.dtype != b.dtype or a.shape != b.shape:
        return f"{a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}"
    if np.ascontiguousarray(a).tobytes() != np.ascontiguousarray(b).tobytes():
        return "same dtype and shape, different bytes"
    return None


def _same_value(a: Any, b: Any) -> str | None:
    """None when ``a`` and ``b`` are the same attribute value (bit for bit: -0.0 is not 0.0,
    NaN equals NaN), else what differs."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return f"{type(a).__name__} != {type(b).__name__}"
        return _same_array(a, b)
    if type(a) is not type(b):
        return f"{a!r} ({type(a).__name__}) != {b!r} ({type(b).__name__})"
    if isinstance(a, ob.Graph):  # a control-flow op's branch or body
        try:
            assert_graphs_equal(a, b)
        except AssertionError as err:
            return f"sub-graph '{a.name}': {err}"
        return None
    if isinstance(a, tuple):
        if len(a) != len(b):
            return f"{len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            diff = _same_value(x, y)
            if diff is not None:
                return f"item {i}: {diff}"
        return None
    if isinstance(a, float):
        same = (math.isnan(a) and math.isnan(b)) or repr(a) == repr(b)
        return None if same else f"{a!r} != {b!r}"
    return None if a == b else f"{a!r} != {b!r}"


def _typed(v: ob.Value | None) -> Any:
    return None if v is None else (v.name, v.dtype, tuple(v.shape))


def _check(ok: bool, where: str, a: Any, b: Any) -> None:
    assert ok, f"{where}: {a!r} != {b!r}"


def assert_graphs_equal(a: ob.Graph, b: ob.Graph) -> None:
    """Fail, naming the first difference, unless ``a`` and ``b`` are the same graph."""
    _check(a.name == b.name, "graph name", a.name, b.name)
    _check(a.metadata == b.metadata, "graph metadata", a.metadata, b.metadata)
    _check([_typed(v) for v in a.inputs] == [_typed(v) for v in b.inputs], "inputs",
           [_typed(v) for v in a.inputs], [_typed(v) for v in b.inputs])
    _check([_typed(v) for v in a.outputs] == [_typed(v) for v in b.outputs], "outputs",
           [_typed(v) for v in a.outputs], [_typed(v) for v in b.outputs])
    _check(list(a.constants) == list(b.constants), "constant names", list(a.constants), list(b.constants))
    for name, ca in a.constants.items():
        cb = b.constants[name]
        _check(_typed(ca) == _typed(cb), f"constant '{name}'", _typed(ca), _typed(cb))
        assert ca.data is not None and cb.data is not None, f"constant '{name}' has no data"
        diff = _same_array(ca.data, cb.data)
        assert diff is None, f"constant '{name}' data: {diff}"
    _check(len(a.nodes) == len(b.nodes), "node count", len(a.nodes), len(b.nodes))
    for na, nb in zip(a.nodes, b.nodes):
        where = f"node '{na.name}' ({na.op})"
        for field in ("name", "op", "origin", "placement"):
            _check(getattr(na, field) == getattr(nb, field), f"{where} {field}",
                   getattr(na, field), getattr(nb, field))
        _check([_typed(v) for v in na.inputs] == [_typed(v) for v in nb.inputs], f"{where} inputs",
               [_typed(v) for v in na.inputs], [_typed(v) for v in nb.inputs])
        _check([_typed(v) for v in na.outputs] == [_typed(v) for v in nb.outputs], f"{where} outputs",
               [_typed(v) for v in na.outputs], [_typed(v) for v in nb.outputs])
        _check(list(na.attrs) == list(nb.attrs), f"{where} attribute names", list(na.attrs), list(nb.attrs))
        for k, va in na.attrs.items():
            diff = _same_value(va, nb.attrs[k])
            assert diff is None, f"{where} attribute '{k}': {diff}"


def saved_and_loaded(g: ob.Graph, folder: str | Path | None = None) -> ob.Graph:
    """``g`` written to a ``.obir`` file (in ``folder``, else a temporary one) and read back."""
    if folder is not None:
        path = Path(folder) / f"{g.name or 'graph'}.roundtrip.obir"
        ob.save(g, path)
        return ob.load(path, registry=g.registry)
    with tempfile.TemporaryDirectory(prefix="opbridge-roundtrip-") as d:
        path = Path(d) / "g.obir"
        ob.save(g, path)
        return ob.load(path, registry=g.registry)


def _compiled(g: ob.Graph) -> Any:
    """The program's JSON, or the type and text of the error compiling it raises."""
    try:
        return ob.compile(g, "bm1684").to_json()
    except ob.OpbridgeError as err:
        return (type(err).__name__, str(err))


def assert_roundtrip(g: ob.Graph, folder: str | Path | None = None, *, compile: bool = True) -> ob.Graph:
    """Save ``g``, load it, check the loaded graph equals ``g`` and (with ``compile``) that
    both compile to the same program, or fail to compile the same way. Returns the loaded graph."""
    loaded = saved_and_loaded(g, folder)
    assert_graphs_equal(g, loaded)
    if compile:
        want, got = _compiled(g), _compiled(loaded)
        assert got == want, "the loaded graph compiles to a different program" + (
            f": {got} != {want}" if isinstance(want, tuple) or isinstance(got, tuple) else "")
    return loaded
