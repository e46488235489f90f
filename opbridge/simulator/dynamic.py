"""Dynamic compile: one program for the largest input shapes, run on any smaller ones.

``compile(graph, target, dynamic=True, max_shapes={"x": (8, 3, 224, 224)})`` takes a graph
whose inputs keep their symbolic dims (``ob.convert`` without ``input_shapes``) and the largest
size of each. It compiles the program for those sizes at once: its memory plan is the one the
device reserves, and its profile the worst case. A run on smaller inputs binds the symbolic
dims to the fed sizes, specialises the graph to them and runs the program compiled for exactly
those sizes (compiled on first use, then kept), as bmcompiler's dynamic mode re-plans its layers
for the shapes of each run: the results are the bytes a program compiled for that shape gives.
An input larger than the compiled maximum is an error naming the input, the dim and the maximum.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import SimulatorError
from ..ir import dims as _dims
from ..ir.graph import Graph
from ..ir.io import graph_to_json
from ..ir.opdef import check_placement
from ..ir.specialize import input_dims, specialize
from ..ir.types import format_shape
from .program import Program

if TYPE_CHECKING:
    from .kernels import KernelRegistry
    from .lower import Placement
    from .target import Target


class DynamicProgram:
    """A program compiled for the largest input shapes that runs smaller ones (see the module).

    Every shape compiles with the settings the largest did: ``kernels``, ``per_layer`` and the
    placement. A ``placement`` callable is asked once, about the nodes of the graph at the
    largest shapes, and its answers are kept by node name (:attr:`placement`): the nodes of a
    smaller shape have those names, and a saved program keeps the answers, so it compiles
    later shapes as this one does (a custom ``kernels`` registry is code, and is not saved)."""

    def __init__(self, graph: Graph, max_shapes: Mapping[str, Sequence[int]], target: Target, *,
                 kernels: KernelRegistry | None = None,
                 placement: Placement | Mapping[str, str] | None = None, per_layer: bool = False,
                 program: Program | None = None) -> None:
        self.graph = graph
        self.max_dims = input_dims(graph, max_shapes, "max_shapes")
        missing = sorted(n for v in graph.inputs for d in v.shape if isinstance(d, str)
                         for n in _dims.names(d) if n not in self.max_dims)
        if missing:
            v = next(v for v in graph.inputs if any(isinstance(d, str) and missing[0] in _dims.names(d)
                                                     for d in v.shape))
            raise SimulatorError(f"dynamic compile: input '{v.name}' {format_shape(v.shape)} has "
                                 f"symbolic dim {missing[0]} with no maximum",
                                 hint=f"give its largest shape: --input-shape {v.name}=... "
                                 f"(max_shapes={{'{v.name}': (...)}} in Python)")
        self.target = target
        self.kernels = kernels
        self.per_layer = per_layer
        self.max_shapes = {v.name: self._shape_for(v.shape, self.max_dims) for v in graph.inputs}
        largest = None
        if callable(placement):
            largest = specialize(graph, self.max_shapes)
            ask = placement
            placement = {n.name: check_placement(where, f"{n.where}: the placement callable",
                                                 SimulatorError)
                         for n in largest.nodes if (where := ask(n)) is not None}
        #: node name -> "tpu" / "cpu": where the placement given to compile puts each node
        self.placement: dict[str, str] = dict(placement or {})
        #: the program for the largest shapes: its plan and profile are the device's budget
        self.program = program if program is not None else self._build(
            largest if largest is not None else specialize(graph, self.max_shapes))
        self._programs: dict[tuple[tuple[str, int], ...], Program] = {
            tuple(sorted(self.max_dims.items())): self.program}

    def _build(self, graph: Graph) -> Program:
        """The program for one specialisation of the graph, with this program's settings."""
        from .compiler import compile as compile_graph

        table = self.placement
        return compile_graph(graph, self.target, kernels=self.kernels, per_layer=self.per_layer,
                             placement=(lambda n: table.get(n.name)) if table else None)

    @staticmethod
    def _shape_for(shape: Sequence[Any], values: Mapping[str, int]) -> tuple[int, ...]:
        out = [_dims.evaluate(d, values) for d in shape]
        return tuple(int(d) for d in out if d is not None)

    def _bind(self, feeds: Mapping[str, Any]) -> dict[str, int]:
        values: dict[str, int] = {}
        for v in self.graph.inputs:
            if v.name not in feeds:
                raise SimulatorError(f"graph input '{v.name}' {format_shape(v.shape)} was not fed",
                                     hint=f"pass {{'{v.name}': array}} with the other inputs")
            shape = np.shape(feeds[v.name])
            if len(shape) != len(v.shape) or _dims.bind_shape(v.shape, shape, values) is not None:
                raise SimulatorError(f"input '{v.name}' has shape {list(shape)}; the program takes "
                                     f"{format_shape(v.shape)} up to {list(self.max_shapes[v.name])}",
                                     hint="feed an array of that rank whose fixed dims match and "
                                     "whose symbolic ones are within the maxima")
            for i, (d, n) in enumerate(zip(v.shape, shape)):
                top = self.max_shapes[v.name][i]
                if n > top:
                    label = f"dim {i} ({d})" if isinstance(d, str) else f"dim {i}"
                    raise SimulatorError(
                        f"input '{v.name}' {label} is {n}, above the compiled maximum {top}",
                        hint="compile with --dynamic and a larger --input-shape, or feed a smaller input")
        return values

    def program_for(self, feeds: Mapping[str, Any]) -> Program:
        """The program for the sizes ``feeds`` give (compiled on first use)."""
        values = self._bind(feeds)
        key = tuple(sorted(values.items()))
        if key not in self._programs:
            shapes = {v.name: self._shape_for(v.shape, values) for v in self.graph.inputs}
            self._programs[key] = self._build(specialize(self.graph, shapes))
        return self._programs[key]

    def run(self, feeds: Mapping[str, Any], *, keep_intermediates: bool = False,
            threads: int | None = None) -> dict[str, np.ndarray]:
        return self.program_for(feeds).run(feeds, keep_intermediates=keep_intermediates, threads=threads)

    def profile(self) -> Any:
        """The profile of the program for the largest shapes (the worst case)."""
        return self.program.profile()

    @property
    def shapes_compiled(self) -> int:
        """How many input sizes have a program so far (the largest included)."""
        return len(self._programs)

    def __repr__(self) -> str:
        return f"DynamicProgram({self.graph.name!r}, max {self.max_shapes})"

    def save(self, path: Any) -> None:
        """Write the program for the largest shapes as a ``.obprog``, with the symbolic graph
        and the maxima beside it, so :func:`opbridge.simulator.load_program` gives this back."""
        tensors: dict[str, np.ndarray] = {}
        doc = {"graph": graph_to_json(self.graph, tensors),
               "max_shapes": {k: list(v) for k, v in self.max_shapes.items()},
               "per_layer": self.per_layer, "placement": self.placement}
        # the symbolic graph's constants are the max program's, by name, but for those that
        # specialising folded or unrolled away (a Scan body's weights): those are stored too
        self.program.save(path, extra={"dynamic": json.dumps(doc, separators=(",", ":"))},
                          extra_tensors=tensors)


def load_dynamic(doc_text: str, program: Program, tensor: Callable[[str], np.ndarray],
                 where: str) -> DynamicProgram:
    """The DynamicProgram of a ``.obprog`` written by :meth:`DynamicProgram.save`."""
    from ..errors import ModelFormatError
    from ..ir.io import graph_from_json
    from ..ir.opdef import DEFAULT_OPS, PLACEMENTS

    try:
        doc = json.loads(doc_text)
        graph = graph_from_json(doc["graph"], tensor, DEFAULT_OPS)
        shapes = {str(k): tuple(int(d) for d in v) for k, v in doc["max_shapes"].items()}
        # files written before these were saved compiled every shape with the defaults
        per_layer = doc.get("per_layer", False)
        placement = doc.get("placement", {})
        if not isinstance(per_layer, bool):
            raise ValueError(f"per_layer is {per_layer!r}, not true or false")
        bad = [(k, v) for k, v in placement.items() if not isinstance(k, str) or v not in PLACEMENTS]
        if bad:
            raise ValueError(f"placement of node {bad[0][0]!r} is {bad[0][1]!r}, not one of "
                             f"{', '.join(PLACEMENTS)}")
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ModelFormatError(f"{where}: its dynamic part is not valid: {err!r}",
                               hint="compile the model again with --dynamic") from None
    return DynamicProgram(graph, shapes, program.target, placement=placement, per_layer=per_layer,
                          program=program)
