"""An ``onnx.backend.base.Backend`` over opbridge: prepare = convert + verify, run = interpret.

This is how the official ONNX conformance suite (``onnx.backend.test.BackendTest``) runs
through opbridge. The IR is static: shapes and shape-like operands (Reshape's shape, Slice's
starts ...) must be known when converting. The suite feeds such operands as graph inputs, so
``prepare`` converts at once only when it can; otherwise conversion waits for ``run``, where
the fed shapes fix the inputs and the inputs a mapping needs as constants are bound to their
fed values. One graph is kept per distinct set of shapes and bound values.

``executor="simulator"`` (or the environment variable ``OPBRIDGE_BACKEND_EXECUTOR=simulator``)
runs the program compiled for the simulator instead of the reference interpreter.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from .errors import InterpretError, OpbridgeError
from .ir.graph import Graph
from .ir.interpret import interpret
from .ir.opdef import DEFAULT_OPS
from .ir.passes import DEFAULT_PASSES, optimize
from .ir.types import is_static
from .mappers import DEFAULT_MAPPINGS, MappingRegistry, convert_origin_graph, preflight
from .parsers.onnx import parse_model
from .parsers.origin import OriginGraph

#: How many times ``run`` re-converts, binding more inputs as constants, before giving up.
MAX_BIND_ROUNDS = 4

EXECUTORS = ("interpret", "simulator")


def _digest(arr: np.ndarray) -> str:
    a = np.ascontiguousarray(arr)
    return f"{a.dtype}{a.shape}" + hashlib.sha1(a.view(np.uint8).reshape(-1)).hexdigest()


class OpbridgeRep(BackendRep):
    """A prepared model: the parsed origin graph, and the IR graphs converted from it."""

    def __init__(self, origin: OriginGraph, registry: MappingRegistry, executor: str) -> None:
        self.origin = origin
        self.registry = registry
        self.executor = executor
        self._graphs: dict[tuple[Any, ...], tuple[Graph, frozenset[str]]] = {}
        self._bind: frozenset[str] = frozenset()
        self.graph: Graph | None = None
        declared = {t.name: t.shape for t in origin.inputs}
        if all(s is not None and is_static(s) for s in declared.values()):
            try:
                requests: set[str] = set()
                self.graph = self._convert({}, {}, requests)
            except OpbridgeError:
                if not requests:
                    raise
                self._bind = frozenset(requests)  # converted again in run(), with those bound

    @property
    def graphs(self) -> list[Graph]:
        """Every IR graph converted so far (one per distinct set of fed shapes and bound values)."""
        out = [self.graph] if self.graph is not None else []
        return out + [g for g, _ in self._graphs.values() if g is not self.graph]

    def _convert(self, shapes: Mapping[str, Sequence[int]], bound: Mapping[str, np.ndarray],
                 requests: set[str]) -> Graph:
        g = convert_origin_graph(self.origin, registry=self.registry, input_shapes=shapes,
                                 constant_inputs=bound, const_requests=requests)
        return optimize(g, DEFAULT_PASSES)

    def _feeds(self, inputs: Any) -> dict[str, Any]:
        names = [t.name for t in self.origin.inputs]
        # a sequence input is fed as a list of arrays, an empty optional as None
        containers = {t.name for t in self.origin.inputs if t.kind != "tensor"}

        def feed(name: str, a: Any) -> Any:
            if name in containers:
                return [np.asarray(x) for x in a] if isinstance(a, (list, tuple)) else (
                    None if a is None else np.asarray(a))
            return np.asarray(a)

        if isinstance(inputs, Mapping):
            return {k: feed(k, v) for k, v in inputs.items()}
        seq = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if len(seq) > len(names):
            raise InterpretError(f"{len(seq)} inputs given; the model has {len(names)}: {', '.join(names)}",
                                 hint="give one array per graph input, in the order of the model's inputs")
        return {n: feed(n, a) for n, a in zip(names, seq)}

    def _graph_for(self, feeds: dict[str, Any]) -> Graph:
        if self.graph is not None and all(
            tuple(v.shape) == feeds[v.name].shape for v in self.graph.inputs
            if v.name in feeds and v.kind == "tensor"
        ):
            return self.graph
        bind = set(self._bind)
        last_err: OpbridgeError | None = None
        for _ in range(MAX_BIND_ROUNDS):
            bound = {n: feeds[n] for n in sorted(bind) if n in feeds}
            shapes = {n: a.shape for n, a in feeds.items()
                      if n not in bound and isinstance(a, np.ndarray)}
            key = (tuple(sorted(shapes.items())),
                   tuple((n, _digest(a)) for n, a in bound.items()))
            if key in self._graphs:
                return self._graphs[key][0]
            requests: set[str] = set()
            try:
                g = self._convert(shapes, bound, requests)
            except OpbridgeError as err:
                new = requests - bind
                if not new:
                    raise
                last_err = err
                bind |= new
                continue
            self._graphs[key] = (g, frozenset(bind))
            self._bind = frozenset(bind)
            return g
        assert last_err is not None
        raise last_err

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        feeds = self._feeds(inputs)
        graph = self._graph_for(feeds)
        own = {v.name: feeds[v.name] for v in graph.inputs if v.name in feeds}
        if self.executor == "simulator":
            from . import compile as compile_graph  # type: ignore[attr-defined]

            outs = compile_graph(graph).run(own)
        else:
            outs = interpret(graph, own)
        # a sequence output stays a list of arrays, an empty optional None (as the runner expects)
        return tuple(np.asarray(outs[v.name]) if v.kind == "tensor" else outs[v.name]
                     for v in graph.outputs)


class OpbridgeBackend(Backend):
    """The ONNX backend API over opbridge (CPU only: the IR runs on the host or the simulator)."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> OpbridgeRep:
        executor = kwargs.pop("executor", os.environ.get("OPBRIDGE_BACKEND_EXECUTOR") or "interpret")
        if executor not in EXECUTORS:
            raise ValueError(f"executor {executor!r}: use one of {', '.join(EXECUTORS)}")
        registry = kwargs.pop("registry", DEFAULT_MAPPINGS)
        origin = parse_model(model, base_dir=kwargs.pop("base_dir", None))
        preflight(origin, registry, DEFAULT_OPS)
        return OpbridgeRep(origin, registry, executor)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"


prepare = OpbridgeBackend.prepare
run_model = OpbridgeBackend.run_model
supports_device = OpbridgeBackend.supports_device
