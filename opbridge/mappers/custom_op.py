"""The CANN-style builder for one-to-one mappings: ``register_custom_op(IR_OP)...``.

::

    def parse_upsample(src: OriginNode, dst) -> None:
        dst.set_attr("scale", int(src.get_attr("scale")))

    (register_custom_op("Upsample").framework_type(Framework.CAFFE).origin_op_type("Upsample")
        .parse_params_by_operator_fn(parse_upsample).imply_type(ImplyType.TPU))

The mapping is registered as soon as both the framework and the origin op type are known
(a duplicate raises there, naming both places); later calls refine it. Without a parse
function, the origin attributes are copied by name. The emitted node takes the origin node's
inputs, then its framework weights, and has one output per origin output; ``.num_inputs(n)``
makes it check that the origin node has exactly ``n`` inputs, all present (``-1``: one or
more), with an error naming the node. ``.since_opset(v)`` registers from version ``v`` (ONNX),
so one origin op can map differently per opset range, as a ``@mapping`` can. The built-in
one-to-one mappings are registered this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.opdef import check_placement
from ..parsers.origin import Framework, OriginNode
from .context import MapContext
from .registry import (
    DEFAULT_MAPPINGS,
    ImplyType,
    MappingEntry,
    MappingRegistry,
    _caller_site,
)

ParseFn = Callable[[OriginNode, "DstOp"], None]


class DstOp:
    """The IR node being filled by a parse function: ``dst.set_attr(name, value)``."""

    def __init__(self, op_type: str, opset: int | None = None) -> None:
        self.op_type = op_type
        #: The version the model declares for the origin node's domain (None: none declared).
        self.opset = opset
        self.attrs: dict[str, Any] = {}

    def set_attr(self, name: str, value: Any) -> DstOp:
        self.attrs[name] = value
        return self

    def get_attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)


class CustomOpBuilder:
    """Chained registration of a one-to-one mapping onto IR op ``ir_op``."""

    def __init__(self, ir_op: str, registry: MappingRegistry, site: str, override: bool) -> None:
        self.ir_op = ir_op
        self._registry = registry
        self._site = site
        self._override = override
        self._framework: Framework | None = None
        self._origin_types: tuple[str, ...] = ()
        self._since = 1
        self._parse_fn: ParseFn | None = None
        self._num_inputs: int | None = None
        self._entries: list[MappingEntry] = []
        self._placement: str | None = None

    def framework_type(self, framework: Framework | str) -> CustomOpBuilder:
        self._framework = Framework(framework)
        return self._sync()

    def origin_op_type(self, *op_types: str) -> CustomOpBuilder:
        """The origin op type(s) this IR op maps from (``"dom::Op"`` pins an ONNX domain)."""
        self._origin_types = tuple(op_types)
        return self._sync()

    def since_opset(self, version: int) -> CustomOpBuilder:
        self._since = version
        return self._sync()

    def num_inputs(self, n: int) -> CustomOpBuilder:
        """Require exactly ``n`` origin inputs, all present (``-1``: one or more, all present);
        without it the origin inputs pass as they are, absent ones as None."""
        self._num_inputs = n
        return self

    def parse_params_by_operator_fn(self, fn: ParseFn) -> CustomOpBuilder:
        """``fn(src: OriginNode, dst: DstOp)`` sets the IR attributes with ``dst.set_attr``."""
        self._parse_fn = fn
        return self

    def imply_type(self, imply: ImplyType | str) -> CustomOpBuilder:
        """Where the nodes this mapping emits run: ImplyType.TPU or ImplyType.CPU (the host).

        Without it they take the op definition's placement. The placement is written on each
        emitted node (and so into ``.obir``), not on the op definition: an op definition is
        shared by every mapping, registry and hand-built graph that uses the op, so a mapping
        registered in a private registry (a test's, one conversion's) must not move every
        other node of that op. An op that always runs on the host says so where it is
        defined: ``define_op(...).placement("cpu")``."""
        self._placement = check_placement(imply, f"register_custom_op({self.ir_op!r})")
        return self

    def _sync(self) -> CustomOpBuilder:
        if self._framework is None or not self._origin_types:
            return self
        for e in self._entries:
            self._registry.unregister(e)
        self._entries = [
            self._registry.register(self._framework, t, self._map, since_opset=self._since,
                                    override=self._override, defined_at=self._site, ir_op=self.ir_op)
            for t in self._origin_types
        ]
        return self

    def _map(self, node: OriginNode, g: MapContext) -> Any:
        dst = DstOp(self.ir_op, g.opset)
        if self._parse_fn is not None:
            self._parse_fn(node, dst)
        else:
            dst.attrs.update(node.attrs)
        inputs = self._checked_inputs(g) + [g.weight(i) for i in range(g.num_weights)]
        return g.op(self.ir_op, inputs, num_outputs=len(node.outputs), placement=self._placement,
                    **dst.attrs)

    def _checked_inputs(self, g: MapContext) -> list[Any]:
        n = self._num_inputs
        if n is None:
            return g.inputs()
        count = g.num_inputs if n < 0 else n
        if count == 0 or g.num_inputs > count:
            want = "at least one input" if n < 0 else f"{n} input(s)"
            raise g.error(f"takes {want}, the node has {g.num_inputs}",
                          hint="check the node's inputs in the source model")
        missing = [i for i in range(count) if not g.has_input(i)]
        if missing:
            raise g.error(f"input {missing[0]} is required but absent",
                          hint="connect the input in the source model")
        return g.inputs()


def register_custom_op(ir_op: str, *, override: bool = False,
                       registry: MappingRegistry | None = None,
                       defined_at: str | None = None) -> CustomOpBuilder:
    """Start a one-to-one mapping onto IR op ``ir_op``; chain ``.framework_type(...)`` etc.

    ``defined_at`` (``file:line``) is the site listings and duplicate errors name; by default
    the caller's line (a helper that registers for its caller passes the caller's)."""
    reg = registry if registry is not None else DEFAULT_MAPPINGS
    return CustomOpBuilder(ir_op, reg, defined_at or _caller_site(), override)
