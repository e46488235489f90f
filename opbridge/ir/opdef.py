"""Op definitions: schema (inputs, outputs, typed parameters), shape function, numpy compute.

Built-in ops and plugin ops are defined the same way, with :func:`define_op`::

    (define_op("ScaleShift")
        .input("x", "T").output("y", "T")
        .param("alpha", "float").param("beta", "float", default=0.0)
        .type_param("T", allowed=("f32", "f16"))
        .shape_fn(lambda ctx: ctx.same_as_input(0))
        .compute(lambda x, alpha, beta: x * alpha + beta))

``.placement("cpu")`` declares an op whose nodes run on the host CPU unless a node is placed
otherwise; every node records its own placement when it is created.

The compute takes the node's inputs positionally (``None`` for an absent optional input,
the members of a variadic input spread out) and its parameters as keywords, and returns
an array or a tuple of arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import AttrError, OpbridgeError, RegistryError, ShapeError, UnsupportedOpError, node_ctx
from ..families import DEFAULT_LOADER, FamilyLoader
from ..sites import caller_site
from . import dims as _dims
from .types import DTYPES, Dim, Shape, check_shape, is_dtype

PARAM_TYPES = ("int", "float", "bool", "str", "ints", "floats", "strs", "dtype", "tensor", "graph")

#: Where a node runs: on the TPU, or on the host CPU between TPU segments.
PLACEMENTS = ("tpu", "cpu")


def check_placement(where: Any, what: str, error: type[OpbridgeError] = RegistryError,
                    hint: str = 'use "tpu" (the default) or "cpu" (runs on the host)') -> str:
    """``where`` ("tpu"/"cpu", or an enum whose value is one) as a plain string; anything else
    is an ``error`` naming ``what``."""
    value = getattr(where, "value", where)
    if not isinstance(value, str) or value.lower() not in PLACEMENTS:
        raise error(f"{what}: placement {where!r} is not one of {', '.join(PLACEMENTS)}", hint=hint)
    return value.lower()


TypeAndShape = tuple[Shape, str]
#: Computes an absent parameter from the node's input (shape, dtype)s and its other (normalised)
#: parameters; None when it cannot (an absent input, a symbolic dim), which the shape function
#: then reports.
FillFn = Callable[[Sequence["TypeAndShape | None"], dict[str, Any]], Any]


def per_spatial_axis(value: int, *, entries: int = 1, input: int = 0) -> FillFn:
    """A fill for a parameter with ``entries`` values per spatial axis of input ``input``
    (its rank minus N and C), all ``value``: strides ``per_spatial_axis(1)``, pads
    ``per_spatial_axis(0, entries=2)``."""

    def fill(inputs: Sequence[TypeAndShape | None], attrs: dict[str, Any]) -> tuple[int, ...] | None:
        t = inputs[input] if input < len(inputs) else None
        if t is None or len(t[0]) < 3:
            return None
        return (value,) * (entries * (len(t[0]) - 2))

    return fill


def every_axis(input: int = 0) -> FillFn:
    """A fill listing every axis of input ``input``, 0 .. rank-1 (Pad's or Resize's axes)."""

    def fill(inputs: Sequence[TypeAndShape | None], attrs: dict[str, Any]) -> tuple[int, ...] | None:
        t = inputs[input] if input < len(inputs) else None
        return None if t is None else tuple(range(len(t[0])))

    return fill


def spatial_shape_of(input: int) -> FillFn:
    """A fill taking input ``input``'s spatial shape (a Conv's kernel from its weights)."""

    def fill(inputs: Sequence[TypeAndShape | None], attrs: dict[str, Any]) -> tuple[int, ...] | None:
        t = inputs[input] if input < len(inputs) else None
        if t is None or len(t[0]) < 3 or not all(isinstance(d, int) for d in t[0][2:]):
            return None
        return tuple(int(d) for d in t[0][2:])

    return fill


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: Default of a parameter that must be given.
REQUIRED: Any = _Required()


@dataclass
class ParamSpec:
    """One typed parameter of an op, with its default and range."""

    name: str
    type: str
    default: Any = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    allowed: tuple[Any, ...] | None = None
    length: int | None = None
    doc: str = ""
    #: For a parameter with one entry per axis (strides, pads, a Slice's axes), whose default
    #: depends on the inputs: computes it when absent, at node creation, so every node holds it.
    fill: FillFn | None = None

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def convert(self, value: Any, where: str) -> Any:
        """Check ``value`` against this spec and return it normalised (tuples for lists)."""
        what = f"{where} param '{self.name}'"
        t = self.type
        try:
            if t == "int":
                out: Any = _as_int(value)
            elif t == "float":
                out = _as_float(value)
            elif t == "bool":
                if isinstance(value, (bool, np.bool_)):
                    out = bool(value)
                elif isinstance(value, (int, np.integer)) and int(value) in (0, 1):
                    out = bool(value)
                else:
                    raise TypeError
            elif t == "str":
                if isinstance(value, bytes):
                    value = value.decode("utf-8")
                if not isinstance(value, str):
                    raise TypeError
                out = value
            elif t in ("ints", "floats", "strs"):
                if isinstance(value, (str, bytes)) or not isinstance(
                    value, (list, tuple, np.ndarray)
                ):
                    raise TypeError
                seq = list(np.asarray(value).ravel()) if isinstance(value, np.ndarray) else list(value)
                if t == "ints":
                    out = tuple(_as_int(v) for v in seq)
                elif t == "floats":
                    out = tuple(_as_float(v) for v in seq)
                else:
                    conv = [v.decode("utf-8") if isinstance(v, bytes) else v for v in seq]
                    if not all(isinstance(v, str) for v in conv):
                        raise TypeError
                    out = tuple(conv)
            elif t == "dtype":
                if not is_dtype(value):
                    raise AttrError(
                        f"{what} = {value!r}: not a dtype", hint=f"use one of {', '.join(DTYPES)}"
                    )
                out = value
            elif t == "tensor":
                if not isinstance(value, np.ndarray):
                    raise TypeError
                out = value
            elif t == "graph":  # a sub-graph (an If branch, a Loop body): an ir Graph
                if not all(hasattr(value, a) for a in ("nodes", "inputs", "outputs", "constants")):
                    raise TypeError
                out = value
            else:  # pragma: no cover - guarded in OpDef.param
                raise AssertionError(t)
        except (TypeError, ValueError, OverflowError):
            raise AttrError(
                f"{what} = {_short(value)}: expected {self.type}",
                hint=f"give '{self.name}' a value of type {self.type}",
            ) from None
        items = out if isinstance(out, tuple) else (out,)
        if self.type in ("tensor", "str", "strs", "dtype", "bool", "graph"):
            numeric: tuple[Any, ...] = ()
        else:
            numeric = items
        for v in numeric:
            if self.minimum is not None and v < self.minimum:
                raise AttrError(f"{what} = {_short(out)}: must be >= {self.minimum}")
            if self.maximum is not None and v > self.maximum:
                raise AttrError(f"{what} = {_short(out)}: must be <= {self.maximum}")
        if self.allowed is not None:
            for v in items:
                if v not in self.allowed:
                    raise AttrError(
                        f"{what} = {_short(out)}: must be one of {', '.join(map(repr, self.allowed))}"
                    )
        if self.length is not None and isinstance(out, tuple) and len(out) != self.length:
            raise AttrError(f"{what} = {_short(out)}: must have {self.length} entries")
        return out

    def describe_range(self) -> str:
        parts = []
        if self.minimum is not None:
            parts.append(f">= {self.minimum}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum}")
        if self.allowed is not None:
            parts.append("one of " + "|".join(map(str, self.allowed)))
        if self.length is not None:
            parts.append(f"length {self.length}")
        return ", ".join(parts)


def _as_int(v: Any) -> int:
    if isinstance(v, (bool, np.bool_)):
        raise TypeError
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return int(v)
    raise TypeError


def _as_float(v: Any) -> float:
    if isinstance(v, (bool, np.bool_)):
        raise TypeError
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    raise TypeError


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"<tensor {v.dtype} {v.shape}>"
    s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


@dataclass
class PortSpec:
    """An input or output of an op: its name and type (a type variable or a dtype)."""

    name: str
    type: str
    optional: bool = False
    variadic: bool = False
    count: str | None = None  # variadic outputs: the parameter that gives their number
    doc: str = ""
    #: The value kind it takes or gives (see ``ir.graph.KINDS``); "any" for any kind (an
    #: If's captures, an Identity of a sequence), the op's kind function then decides outputs.
    kind: str = "tensor"


class ShapeContext:
    """What a shape function sees: the node's input shapes/dtypes, constant inputs, attributes."""

    def __init__(
        self,
        opdef: OpDef,
        node_name: str,
        inputs: Sequence[TypeAndShape | None],
        attrs: dict[str, Any],
        consts: Sequence[np.ndarray | None] | None = None,
        num_outputs: int | None = None,
    ) -> None:
        self.opdef = opdef
        self.node_name = node_name
        self._inputs = list(inputs)
        self._attrs = attrs
        self._consts = list(consts) if consts is not None else [None] * len(self._inputs)
        self.num_outputs = num_outputs

    @property
    def where(self) -> str:
        return node_ctx(self.node_name, self.opdef.name)

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    def has_input(self, i: int) -> bool:
        return i < len(self._inputs) and self._inputs[i] is not None

    def _get(self, i: int) -> TypeAndShape:
        if not self.has_input(i):
            raise ShapeError(f"{self.where}: input {i} is required here but absent")
        t = self._inputs[i]
        assert t is not None
        return t

    def input_shape(self, i: int) -> Shape:
        return self._get(i)[0]

    def input_dtype(self, i: int) -> str:
        return self._get(i)[1]

    def input_rank(self, i: int) -> int:
        return len(self._get(i)[0])

    def input_const(self, i: int) -> np.ndarray | None:
        """The input's data where it is a constant, else None."""
        return self._consts[i] if i < len(self._consts) else None

    def attr(self, name: str) -> Any:
        if name not in self._attrs:
            raise AttrError(f"{self.where}: the shape function asked for undeclared param '{name}'")
        return self._attrs[name]

    def same_as_input(self, i: int = 0) -> TypeAndShape:
        return self._get(i)

    # -- symbolic dims (see opbridge.ir.dims): ints stay ints, names propagate -----------------
    @staticmethod
    def dim_add(*dims: Dim) -> Dim:
        """The sum of dims (``"seq" + 1`` is ``"seq+1"``)."""
        return _dims.add(*dims)

    @staticmethod
    def dim_sub(a: Dim, b: Dim) -> Dim:
        return _dims.sub(a, b)

    @staticmethod
    def dim_mul(*dims: Dim) -> Dim:
        """The product of dims (``"N" * 3`` is ``"3*N"``); ``dim_mul(*shape)`` is the element count."""
        return _dims.mul(*dims)

    @staticmethod
    def dim_floordiv(a: Dim, c: int) -> Dim:
        """``a // c`` for a positive constant ``c`` (exact when every term divides)."""
        return _dims.floordiv(a, c)

    @staticmethod
    def dims_equal(a: Dim, b: Dim) -> bool:
        """Whether two dims are certainly equal (the same int, or the same expression)."""
        return _dims.equal(a, b)

    def runtime_dim(self, tag: str = "n") -> Dim:
        """A dim only the run knows (a data-dependent count), named after this node."""
        return _dims.runtime_dim(self.node_name, tag)

    def normalize_axis(self, axis: int, rank: int, attr: str = "axis") -> int:
        """``axis`` in [-rank, rank) made non-negative, or an AttrError naming the attribute."""
        if not -rank <= axis < max(rank, 1):
            raise AttrError(f"{self.where} param '{attr}' = {axis}: out of range for rank {rank}")
        return axis % rank if rank else 0

    def error(
        self, message: str, *, attr: str | None = None, hint: str | None = None
    ) -> AttrError | ShapeError:
        """An error naming this node (and the attribute); ``raise ctx.error(...)``. With ``attr``
        it is an AttrError, without a ShapeError."""
        where = self.where + (f" param '{attr}'" if attr else "")
        cls = AttrError if attr else ShapeError
        return cls(f"{where}: {message}", hint=hint)


class OpDef:
    """The definition of one IR op; built with chained calls from :func:`define_op`."""

    def __init__(self, name: str, defined_at: str = "<unknown>") -> None:
        self.name = name
        self.defined_at = defined_at
        self.inputs: list[PortSpec] = []
        self.outputs: list[PortSpec] = []
        self.params: dict[str, ParamSpec] = {}
        self.type_params: dict[str, tuple[str, ...]] = {}
        self.shape_function: Callable[[ShapeContext], Any] | None = None
        self.compute_function: Callable[..., Any] | None = None
        self.description = ""
        self.domain = "opbridge"
        #: Where a node of this op runs unless it says otherwise (see :meth:`placement`).
        self.default_placement = "tpu"
        self.kind_function: Callable[[Sequence[str | None], dict[str, Any], int], Sequence[str]] | None = None

    # -- building ---------------------------------------------------------------------
    def input(
        self, name: str, type: str, *, optional: bool = False, variadic: bool = False, doc: str = "",
        kind: str = "tensor",
    ) -> OpDef:
        if self.inputs and self.inputs[-1].variadic:
            raise RegistryError(f"op {self.name}: no input may follow the variadic input")
        self.inputs.append(PortSpec(name, type, optional=optional, variadic=variadic, doc=doc,
                                    kind=kind))
        return self

    def output(
        self,
        name: str,
        type: str,
        *,
        variadic: bool = False,
        count: str | None = None,
        optional: bool = False,
        doc: str = "",
        kind: str = "tensor",
    ) -> OpDef:
        self.outputs.append(
            PortSpec(name, type, variadic=variadic, count=count, optional=optional, doc=doc,
                     kind=kind)
        )
        return self

    def kinds(self, fn: Callable[[Sequence[str | None], dict[str, Any], int], Sequence[str]]) -> OpDef:
        """The kinds of a node's outputs from its inputs' kinds (None: absent), its attributes
        and its output count, for ops whose outputs are of the kind they are given (Identity,
        OptionalGetElement, If); without it each output has its port's kind."""
        self.kind_function = fn
        return self

    def output_kinds(self, node_name: str, in_kinds: Sequence[str | None], attrs: dict[str, Any],
                     n_out: int) -> list[str]:
        """The kind of each of a node's ``n_out`` outputs (see :meth:`kinds`)."""
        if self.kind_function is not None:
            return list(self.kind_function(in_kinds, attrs, n_out))
        ports = [self.outputs[min(i, len(self.outputs) - 1)] for i in range(n_out)] if self.outputs else []
        return [p.kind if p.kind != "any" else "tensor" for p in ports]

    def check_input_kinds(self, in_kinds: Sequence[str | None], where: str) -> None:
        """Refuse a sequence or optional where the op takes a tensor (and the converse)."""
        for i, k in enumerate(in_kinds):
            spec = self.input_spec(i) if self.inputs else None
            if k is None or spec is None or spec.kind in ("any", k):
                continue
            raise ShapeError(f"{where}: input {i} ('{spec.name}') is a {k}; {self.name} takes a "
                             f"{spec.kind} there")

    def param(
        self,
        name: str,
        type: str,
        default: Any = REQUIRED,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        allowed: Sequence[Any] | None = None,
        length: int | None = None,
        doc: str = "",
        fill: FillFn | None = None,
    ) -> OpDef:
        """Declare a parameter. With ``fill`` (e.g. ``per_spatial_axis(1)``) it is computed
        from the inputs when absent, so it needs no default."""
        if fill is not None:
            if default is not REQUIRED:
                raise RegistryError(f"op {self.name} param '{name}': give a default or a fill, not both")
            default = None
        if type not in PARAM_TYPES:
            raise RegistryError(
                f"op {self.name} param '{name}': unknown type {type!r}; use one of {', '.join(PARAM_TYPES)}"
            )
        if name in self.params:
            raise RegistryError(f"op {self.name}: param '{name}' declared twice")
        spec = ParamSpec(
            name, type, default, minimum, maximum, tuple(allowed) if allowed is not None else None,
            length, doc, fill,
        )
        if default is not REQUIRED and default is not None:
            spec.default = spec.convert(default, f"op {self.name} default")
        self.params[name] = spec
        return self

    def type_param(self, name: str, allowed: Sequence[str]) -> OpDef:
        bad = [d for d in allowed if not is_dtype(d)]
        if bad:
            raise RegistryError(f"op {self.name} type param {name}: unknown dtypes {bad}")
        self.type_params[name] = tuple(allowed)
        return self

    def shape_fn(self, fn: Callable[[ShapeContext], Any]) -> OpDef:
        self.shape_function = fn
        return self

    def compute(self, fn: Callable[..., Any]) -> OpDef:
        self.compute_function = fn
        return self

    def doc(self, text: str) -> OpDef:
        self.description = text
        return self

    def placement(self, where: str) -> OpDef:
        """Where the op's nodes run by default: ``"tpu"`` (the default) or ``"cpu"``, the host,
        between TPU segments (post-processing such as NMS, as vendor toolchains do). Each node
        records its own placement when it is created, so a node can still be placed otherwise
        (``GraphBuilder.op(..., placement=...)``, a mapping's ``imply_type``)."""
        self.default_placement = check_placement(where, f"op {self.name}")
        return self

    # -- using ------------------------------------------------------------------------
    def allowed_dtypes(self, type_name: str) -> tuple[str, ...]:
        if type_name in self.type_params:
            return self.type_params[type_name]
        if is_dtype(type_name):
            return (type_name,)
        return DTYPES

    def normalize_attrs(self, attrs: dict[str, Any], where: str) -> dict[str, Any]:
        """Check every attribute and fill the defaults; the result has every param explicit."""
        unknown = sorted(set(attrs) - set(self.params))
        if unknown:
            known = ", ".join(self.params) or "none"
            raise AttrError(
                f"{where} param '{unknown[0]}': not a parameter of {self.name}",
                hint=f"{self.name} takes: {known}",
            )
        out: dict[str, Any] = {}
        for name, spec in self.params.items():
            if name in attrs and attrs[name] is not None:
                out[name] = spec.convert(attrs[name], where)
            elif spec.required:
                raise AttrError(
                    f"{where} param '{name}': required but absent",
                    hint=f"give '{name}' ({spec.type})",
                )
            else:
                out[name] = spec.default
        return out

    def fill_params(self, attrs: dict[str, Any], inputs: Sequence[TypeAndShape | None]) -> None:
        """Complete, in place, the normalised ``attrs`` with the parameters declared with a
        ``fill`` that are absent (None; or empty, which is how older files and mappers wrote
        "the default" for the ones that were declared with an empty default)."""
        for name, spec in self.params.items():
            if spec.fill is not None and attrs.get(name) in (None, ()):
                attrs[name] = spec.fill(inputs, attrs)

    def unfilled_params(self, attrs: dict[str, Any]) -> list[str]:
        """The parameters declared with a ``fill`` that ``attrs`` leaves absent."""
        return [n for n, s in self.params.items() if s.fill is not None and attrs.get(n) is None]

    def check_input_count(self, n: int, where: str) -> None:
        fixed = [p for p in self.inputs if not p.variadic]
        required = sum(1 for p in fixed if not p.optional)
        variadic = any(p.variadic for p in self.inputs)
        if n < required or (not variadic and n > len(fixed)):
            expect = f"{required}" if required == len(fixed) else f"{required} to {len(fixed)}"
            if variadic:
                expect = f"at least {required}"
            raise ShapeError(f"{where}: takes {expect} inputs, got {n}")

    def input_spec(self, i: int) -> PortSpec:
        if i < len(self.inputs):
            return self.inputs[i]
        return self.inputs[-1]

    def infer(
        self,
        node_name: str,
        inputs: Sequence[TypeAndShape | None],
        attrs: dict[str, Any],
        consts: Sequence[np.ndarray | None] | None = None,
        num_outputs: int | None = None,
    ) -> list[TypeAndShape]:
        """Run the shape function; returns one (shape, dtype) per output.

        ``attrs`` (normalised) is first completed in place with :meth:`fill_params`: every
        node is created through here, so it holds its per-axis parameters explicitly."""
        where = node_ctx(node_name, self.name)
        if self.shape_function is None:
            raise RegistryError(f"op {self.name} has no shape function (defined at {self.defined_at})")
        self.fill_params(attrs, inputs)
        ctx = ShapeContext(self, node_name, inputs, attrs, consts, num_outputs)
        try:
            result = self.shape_function(ctx)
        except (AttrError, ShapeError):
            raise
        except Exception as err:  # a shape function bug or unexpected input: say where
            raise ShapeError(
                f"{where}: shape inference failed: {type(err).__name__}: {err}",
                hint="check the node's input shapes and attributes",
            ) from err
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], str):
            result = [result]
        outs: list[TypeAndShape] = []
        for shape, dtype in result:
            outs.append((check_shape(shape, where), dtype))
        return outs

    def num_outputs_for(self, attrs: dict[str, Any]) -> int | None:
        """Number of outputs when the schema alone fixes it; None when the shape function decides
        (optional outputs switched on by a parameter, variadic outputs without a count)."""
        fixed = [p for p in self.outputs if not p.variadic]
        var = [p for p in self.outputs if p.variadic]
        if any(p.optional for p in fixed):
            return None
        if not var:
            return len(fixed)
        if var[0].count and var[0].count in attrs:
            c = attrs[var[0].count]
            n = len(c) if isinstance(c, tuple) else int(c)
            return len(fixed) + n
        return None


class OpRegistry:
    """A table of op definitions; :data:`DEFAULT_OPS` is the one the package uses.

    With a ``loader`` (:class:`opbridge.families.FamilyLoader`) the built-in families are
    imported as names are first asked for; every answer is the one a registry holding all of
    them would give (see :mod:`opbridge.families`). Without one (tests' own registries) it
    holds only what is defined on it.
    """

    def __init__(self, loader: FamilyLoader | None = None) -> None:
        self._ops: dict[str, OpDef] = {}
        self._loader = loader

    def _load(self, name: str) -> None:
        if self._loader is not None:
            self._loader.load_op(name)

    def _load_all(self) -> None:
        if self._loader is not None:
            self._loader.load_all_ops()

    def define(self, name: str, *, override: bool = False) -> OpDef:
        site = caller_site(__file__)
        self._load(name)  # a built-in of the same name is defined first, wherever this runs from
        if name in self._ops and not override:
            raise RegistryError(
                f"op {name!r} is already defined at {self._ops[name].defined_at}; "
                f"defined again at {site}",
                hint="pass override=True to define_op to replace it",
            )
        opdef = OpDef(name, site)
        self._ops[name] = opdef
        return opdef

    def _find(self, name: str) -> OpDef | None:
        opdef = self._ops.get(name)
        if opdef is None and self._loader is not None:
            self._loader.load_op(name)
            opdef = self._ops.get(name)
            if opdef is None and self._loader.miss_op():  # a name the index does not know yet
                opdef = self._ops.get(name)
        return opdef

    def get(self, name: str) -> OpDef:
        opdef = self._find(name)
        if opdef is None:
            raise UnsupportedOpError(
                f"op {name!r} is not defined",
                hint="define it with opbridge.define_op (in a plugin: --plugin FILE)",
            )
        return opdef

    def remove(self, name: str) -> None:
        self._load(name)  # so that the built-in does not come back when its family loads later
        self._ops.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not None

    def __iter__(self) -> Iterator[OpDef]:
        self._load_all()
        return iter(sorted(self._ops.values(), key=lambda o: o.name))

    def __len__(self) -> int:
        self._load_all()
        return len(self._ops)

    def names(self) -> list[str]:
        self._load_all()
        return sorted(self._ops)


DEFAULT_OPS = OpRegistry(DEFAULT_LOADER)


def define_op(name: str, *, override: bool = False) -> OpDef:
    """Define an IR op in the default registry; chain ``.input/.output/.param/...`` on the result."""
    return DEFAULT_OPS.define(name, override=override)


def get_op(name: str) -> OpDef:
    return DEFAULT_OPS.get(name)


@dataclass
class OpInfo:
    """A plain summary of an op definition (for `opbridge ops`)."""

    name: str
    inputs: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[dict[str, Any]] = field(default_factory=list)
    params: list[dict[str, Any]] = field(default_factory=list)
    type_params: dict[str, list[str]] = field(default_factory=dict)
    doc: str = ""
    defined_at: str = ""


def op_info(opdef: OpDef) -> OpInfo:
    def port(p: PortSpec) -> dict[str, Any]:
        d: dict[str, Any] = {"name": p.name, "type": p.type}
        if p.optional:
            d["optional"] = True
        if p.variadic:
            d["variadic"] = True
        return d

    params = []
    for s in opdef.params.values():
        d: dict[str, Any] = {"name": s.name, "type": s.type, "required": s.required}
        if not s.required:
            dv = s.default
            d["default"] = dv.tolist() if isinstance(dv, np.ndarray) else (
                list(dv) if isinstance(dv, tuple) else dv
            )
        if s.minimum is not None:
            d["minimum"] = s.minimum
        if s.maximum is not None:
            d["maximum"] = s.maximum
        if s.allowed is not None:
            d["allowed"] = list(s.allowed)
        if s.length is not None:
            d["length"] = s.length
        if s.fill is not None:
            d["filled"] = "filled at node creation when absent"
        params.append(d)
    return OpInfo(
        name=opdef.name,
        inputs=[port(p) for p in opdef.inputs],
        outputs=[port(p) for p in opdef.outputs],
        params=params,
        type_params={k: list(v) for k, v in opdef.type_params.items()},
        doc=opdef.description,
        defined_at=opdef.defined_at,
    )
