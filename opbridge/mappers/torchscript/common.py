"""What every TorchScript mapping shares: registration, the argument view, conversion-time values.

A TorchScript node's arguments are tensors (IR Values) or conversion-time Python values
(ints, floats, bools, lists, strings, None). The parser spreads list arguments into flat inputs
and records the constant ones (see docs/torchscript-json.md, "What the parser adds"); values
that are computed while converting — ``aten::size`` on a static shape, arithmetic on those
ints, ``prim::NumToTensor`` — are constant IR Values (0-d int64/float64/bool), read back here
as Python values. Only tensors that depend on the graph inputs are real IR tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.graph import Value
from ...parsers.origin import Framework, OriginNode
from ...sites import caller_site
from ..context import MapContext
from ..custom_op import DstOp, register_custom_op
from ..registry import mapping

TS = Framework.TORCHSCRIPT

#: torch's ScalarType numbering (c10/core/ScalarType.h) -> IR dtype.
SCALAR_TYPES = {0: "u8", 1: "i8", 2: "i16", 3: "i32", 4: "i64", 5: "f16", 6: "f32", 7: "f64",
                11: "bool", 15: "bf16"}

_SCALAR_KINDS = ("int", "float", "bool", "number", "Scalar", "SymInt", "SymFloat")

MapFn = Callable[[OriginNode, MapContext], Any]

#: numpy dtypes of the lists the list overloads of aten ops (``aten::slice.t``, ``aten::add.t``)
#: compute while converting, by TorchScript type.
LIST_DTYPES = {"List[int]": np.int64, "List[float]": np.float64, "List[bool]": np.bool_}


def ts_mapping(*kinds: str) -> Callable[[MapFn], MapFn]:
    """Register one function for several kinds (``"aten::relu"``; ``"relu"`` means aten::relu)."""

    def deco(fn: MapFn) -> MapFn:
        for kind in kinds:
            mapping(TS, kind if "::" in kind else f"aten::{kind}")(fn)
        return fn

    return deco


def one_to_one(ir_op: str, *kinds: str) -> None:
    """Register ``kinds`` (one tensor argument, nothing else) onto ``ir_op`` with its defaults,
    through the public ``register_custom_op`` builder, as a plugin would."""
    (register_custom_op(ir_op, defined_at=caller_site(helpers=(one_to_one,)))
     .framework_type(TS).num_inputs(1).parse_params_by_operator_fn(_no_params)
     .origin_op_type(*(k if "::" in k else f"aten::{k}" for k in kinds)))


def _no_params(src: OriginNode, dst: DstOp) -> None:
    """The IR op's defaults are the aten op's meaning; the parser's argument records
    (``args``, ``arg_types``, ``consts``) describe inputs, not parameters."""


def with_inplace(*names: str) -> tuple[str, ...]:
    """``("relu",)`` -> ``("relu", "relu_")``: an in-place op computes the same value once frozen."""
    return tuple(k for n in names for k in (n, n + "_"))


def py_of(v: Value, arg_type: str) -> Any:
    """The Python value of a constant Value of TorchScript type ``arg_type``."""
    assert v.data is not None
    arr = np.asarray(v.data)
    if arg_type.startswith("List[") or arg_type.startswith("Tuple["):
        return arr.tolist()
    if arr.ndim == 0 and arg_type in _SCALAR_KINDS:
        return arr.item()
    return arr


#: The default of an argument accessor that has none: the argument must be there.
_REQUIRED: Any = object()


def _short(x: Any) -> str:
    return repr(x.tolist() if isinstance(x, np.ndarray) else x)[:60]


class Args:
    """A node's schema arguments, by position, as Values or conversion-time Python values."""

    def __init__(self, node: OriginNode, g: MapContext) -> None:
        self.node = node
        self.g = g
        self.spec: list[Any] = node.attrs.get("args", list(range(len(node.inputs))))
        self.types: list[str] = node.attrs.get("arg_types", ["Tensor"] * len(node.inputs))
        self.consts: dict[int, Any] = node.attrs.get("consts", {})

    def __len__(self) -> int:
        return len(self.spec)

    # -- one flat input -------------------------------------------------------------------
    def _known(self, k: int) -> tuple[bool, Any]:
        if k in self.consts:
            return True, self.consts[k]
        v = self.g.input(k)
        if v is not None and v.data is not None:
            return True, py_of(v, self.types[k])
        return False, v

    def flat_py(self, k: int, what: str) -> Any:
        """Flat input ``k`` as a Python value; an error naming ``what`` if it is only known at run time."""
        known, val = self._known(k)
        if not known:
            raise self.g.unsupported(
                f"{what} (input '{self.node.inputs[k]}') is computed at run time; opbridge needs "
                "it known while converting (static shapes)",
                hint="export with fixed input shapes, or compute it outside the model; for a "
                     "forward() argument, give its value: input_values= / --input-value",
            )
        return val

    def _flat_value(self, k: int, what: str, like: Value | None = None) -> Value:
        if k in self.consts:
            c = self.consts[k]
            if c is None or isinstance(c, str):
                raise self.g.error(f"{what} is {c!r}, a tensor is needed")
            return self.scalar_value(c, like)
        v = self.g.input(k)
        assert v is not None
        return v

    # -- schema arguments -----------------------------------------------------------------
    def is_none(self, a: int) -> bool:
        """True when argument ``a`` is absent or ``None``."""
        if a >= len(self.spec):
            return True
        k = self.spec[a]
        return isinstance(k, int) and k in self.consts and self.consts[k] is None

    def py(self, a: int, default: Any = None, what: str | None = None) -> Any:
        """Argument ``a`` as a Python value (lists spread back into lists); absent -> default."""
        if a >= len(self.spec):
            return default
        what = what or f"argument {a}"

        def walk(k: Any) -> Any:
            if isinstance(k, list):
                return [walk(x) for x in k]
            return self.flat_py(k, what)

        return walk(self.spec[a])

    def _present(self, a: int, default: Any, what: str | None) -> None:
        """A required argument (no default given) that the node lacks is a damaged file."""
        if a >= len(self.spec) and default is _REQUIRED:
            raise self.g.error(
                f"{what or f'argument {a}'} is missing: the node has {len(self.spec)} argument(s)",
                hint="the JSON was edited or damaged; re-export the model")

    def _as_int(self, x: Any, a: int, what: str | None) -> int:
        arr = np.asarray(x)
        if arr.size != 1 or arr.dtype.kind not in "biu":
            raise self.g.error(f"{what or f'argument {a}'} = {_short(x)}: an integer is needed",
                               hint="the JSON was edited or damaged; re-export the model")
        return int(arr.reshape(()).item())

    def int(self, a: int, default: Any = _REQUIRED, what: str | None = None) -> Any:
        """An int argument; ``None`` stays ``None``; absent -> default (an error if none is given)."""
        self._present(a, default, what)
        v = self.py(a, None if default is _REQUIRED else default, what)
        return self._as_int(v, a, what) if v is not None and not isinstance(v, (list, np.ndarray)) else v

    def ints(self, a: int, default: Any = _REQUIRED, what: str | None = None) -> Any:
        """An int-list argument (a bare int is a one-element list) as a list of ints, or default."""
        self._present(a, default, what)
        v = self.py(a, None if default is _REQUIRED else default, what)
        if v is None:
            return None
        if isinstance(v, np.ndarray):
            v = v.tolist()
        if not isinstance(v, (list, tuple)):
            v = [v]
        return [self._as_int(x, a, what) for x in v]

    def list_type(self, a: int) -> str | None:
        """The TorchScript list type of argument ``a`` (``List[int]``, ...), None if it is not a
        list: aten ops overloaded on lists (``aten::slice.t``, ``aten::add.t``) dispatch on it.
        The parser spreads a list built by prim::ListConstruct into its items (each typed) and
        keeps any other list one input typed ``List[...]``."""
        k = self.spec[a] if a < len(self.spec) else None
        if isinstance(k, list):
            items = {self.types[x] if isinstance(x, int) else "List" for x in k}
            return f"List[{items.pop()}]" if len(items) == 1 else "List[Any]"
        return self.types[k] if isinstance(k, int) and self.types[k].startswith("List[") else None

    def known_list(self, a: int, what: str) -> tuple[list[Any], str]:
        """List argument ``a`` as Python items and its list type, for a list overload that
        computes while converting; a list of tensors (run-time values) is refused."""
        kind = self.list_type(a) or "List[Any]"
        if kind not in LIST_DTYPES:
            raise self.g.unsupported(
                f"{what} is a {kind} (a list of run-time values): opbridge computes lists while "
                "converting only, from known ints, floats and bools",
                hint="work on the tensors before building the list in the model's code, or "
                     "export the model with mode='trace' (torch.jit.trace), which unrolls lists")
        return list(self.py(a, what=what)), kind

    def list_value(self, items: list[Any], kind: str) -> Value:
        """A list computed while converting as the 1-D constant a list is."""
        return self.g.constant(np.asarray(items, dtype=LIST_DTYPES[kind]))

    def is_tensor(self, a: int) -> bool:
        k = self.spec[a] if a < len(self.spec) else None
        return isinstance(k, int) and k not in self.consts and self.types[k] == "Tensor"

    def tensor(self, a: int, what: str | None = None, like: Value | None = None) -> Value:
        """Argument ``a`` as an IR Value (a Python number becomes a 0-d constant like ``like``)."""
        k = self.spec[a]
        if isinstance(k, list):
            raise self.g.error(f"{what or f'argument {a}'} is a list, a tensor is needed")
        return self._flat_value(k, what or f"argument {a}", like)

    def tensor_list(self, a: int, what: str | None = None) -> list[Value]:
        """A ``Tensor[]`` argument (spread by the parser) as Values."""
        k = self.spec[a]
        if not isinstance(k, list):
            raise self.g.unsupported(
                f"{what or f'argument {a}'} is a tensor list not built by prim::ListConstruct",
                hint="build the list in the model's code (torch.cat([a, b]))",
            )
        return [self._flat_value(x, what or f"argument {a}") for x in k]

    def optional_tensor(self, a: int) -> Value | None:
        return None if self.is_none(a) else self.tensor(a)

    def known(self, a: int) -> bool:
        """True when argument ``a`` (not a list) has a value while converting."""
        k = self.spec[a]
        return isinstance(k, int) and self._known(k)[0]

    # -- making values ----------------------------------------------------------------------
    def scalar_value(self, x: Any, like: Value | None = None) -> Value:
        """A Python number as a 0-d constant (dtype of ``like``, else int64/float64/bool)."""
        if like is not None:
            from ...ir.types import to_numpy_dtype

            return self.g.constant(np.asarray(x, dtype=to_numpy_dtype(like.dtype)))
        return self.g.constant(as_array(x))


def as_array(x: Any) -> np.ndarray:
    """A conversion-time value as an array the way torch types it (int64, float64, bool)."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, np.bool_)):
        return np.asarray(x, dtype=np.bool_)
    if isinstance(x, (int, np.integer)):
        return np.asarray(x, dtype=np.int64)
    if isinstance(x, (float, np.floating)):
        return np.asarray(x, dtype=np.float64)
    arr = np.asarray(x)
    if arr.dtype.kind == "i":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        return arr.astype(np.float64)
    return arr


def norm_axis(g: MapContext, axis: int, rank: int, what: str = "dim") -> int:
    """``axis`` in [-rank, rank) made non-negative, or an error naming the argument."""
    if not -max(rank, 1) <= axis < max(rank, 1):
        raise g.error(f"{what} = {axis} is out of range for a tensor of rank {rank}")
    return axis % rank if rank else 0


def norm_index(g: MapContext, index: int, size: int, axis: int) -> int:
    """``index`` into a dim of ``size`` (negative counts from the end) made non-negative, or an
    error naming the dim."""
    if not -size <= index < size:
        raise g.error(f"index {index} is out of range for dim {axis} of size {size}")
    return index % size


def static_shape(g: MapContext, v: Value) -> tuple[int, ...]:
    shape = v.shape
    if not all(isinstance(d, int) for d in shape):
        raise g.unsupported(f"input '{v.name}' has a symbolic shape {shape}",
                            hint="fix the input shapes (--input-shape), or bind the argument "
                                 "that decides the shape (input_values= / --input-value)")
    return tuple(int(d) for d in shape)


def ir_dtype(g: MapContext, code: Any, what: str = "dtype") -> str:
    """An IR dtype for a torch ScalarType number."""
    if code not in SCALAR_TYPES:
        raise g.unsupported(f"{what} = {code!r}: this torch dtype has no IR dtype",
                            hint="use float32/float16/bfloat16/float64/int*/uint8/bool")
    return SCALAR_TYPES[code]


def as_0d(g: MapContext, v: Value, what: str = "the value") -> Value:
    """A one-element tensor as the 0-d tensor torch reads a number from (a condition, an index,
    ``int(t)``), or an error naming ``what`` when it holds more than one element."""
    if v.shape == ():
        return v
    if any(d != 1 for d in v.shape):
        raise g.error(f"{what} has shape {v.shape}; one element is needed",
                      hint="reduce it to one element in the model (t.sum(), t[0], t.any())")
    return g.op("Reshape", [v, g.constant(np.zeros(0, np.int64))])


def cast(g: MapContext, v: Value, dtype: str) -> Value:
    return v if v.dtype == dtype else g.op("Cast", [v], to=dtype)
