"""The kernel registry: what the layer-group compiler needs to run an op on tiles.

An op's ``compute`` (its definition) is the whole-tensor reference; a kernel adds, in the
spirit of bmcompiler's ``LayerDescriptor`` (``can_split_local_h_w``, ``backward_hslice``,
``get_local_buffer_size``) and MagicMind's ``IPluginKernel``:

- ``split("N", "H", "W")``: the axes along which the op may be cut into tiles; calling it
  (even with no axes) makes the op a *local layer* that may join a layer group; ``"C"``
  says its output channels may be computed in chunks (with ``channel_slice``);
- ``channel_slice(fn)``: ``fn(node, i, c0, c1) -> (axis, lo, hi) | None``: output channels
  ``[c0, c1)`` need that slice of input ``i`` (None: all of it). With it, an op too big for
  local memory even as one tile (a convolution whose weights do not fit) runs as a global
  layer that *streams*: chunks of output channels, each with its slice of the weights;
- ``input_slice(fn)``: ``fn(node, i, lo, hi) -> (lo, hi) | None``: the rows (axis H) of input
  ``i`` that output rows ``[lo, hi)`` need; rows outside ``[0, H)`` are padding; ``None``
  means the whole input. An answer ``(axis, lo, hi)`` says the rows lie along another axis of
  the input's rank-4 view (1 or 3: a Transpose that moves them): a layer group then loads just
  that slice of an input it reads from DDR, so each tile reads its own bytes once, and holds
  the whole input otherwise. Without it, an input with the output's H maps row to row and an
  input with H = 1 (broadcast) is taken whole. ``input_slice(fn, axis="W")`` says the same
  of columns (bmcompiler's ``backward_wslice`` / ``backward_widx``);
- ``tile_attrs(fn)``: ``fn(node, lo, hi, needed, clipped) -> attrs``: the attributes that
  run the compute on a tile (a convolution's pads change at the tile edges);
  ``tile_attrs(fn, axis="W")`` likewise for a column tile: its ``node.attrs`` are then those
  the H hint gave, so it changes only what the columns decide (left / right pads);
- ``scratch(fn)``: ``fn(node, out_shape) -> bytes per lane`` of scratch buffer (``per="tile"``:
  bytes in all, spread over the lanes by the compiler), reserved in local memory for each
  tile of a layer group (``out_shape`` the largest output tile; bmcompiler's
  ``get_local_buffer_size``) and in DDR for a global layer (``out_shape`` the whole output;
  bmcompiler's ``get_global_buffer_size``); the kernel's own ``compute`` / ``compute_into``
  gets it as the keyword argument ``scratch``, a ``uint8`` array of at least that many bytes
  (``lanes`` times the per-lane bytes);
- ``weight_memo()``: the kernel's own ``compute`` / ``compute_into`` gets the keyword
  argument ``memo``, a :class:`WeightMemo`: what it derives from a constant input (a
  filter transform) is derived once per constant for the program, not once per tile;
- ``volumes()``: the kernel also runs on rank-5 tensors (N, C, D, H, W), the volumes of 3-D
  convolutions and pools: a layer group tiles them through the rank-4 view (N, C, D, H*W), so
  ``split``'s ``"H"``, ``input_slice`` and ``tile_attrs`` speak of the depth D and their
  ``"W"`` forms of the rows H (a column of the view's tile is a whole row of W), while the
  kernel's compute gets rank-5 tiles; such a node is never computed in chunks of channels;
- ``inplace()``: the output may take the input's memory (bmcompiler's ``can_inplace``): in
  DDR when the op runs as a global layer, in local memory inside a layer group, whenever
  input 0 has the output's shape and dtype and nothing reads it afterwards;
- ``just_reshape()``: the output is input 0's bytes under another shape (Reshape, Flatten,
  Squeeze, Unsqueeze): it shares them in DDR and nothing runs (bmcompiler's ``just_reshape``
  / ``is_share_mem_layer``);
- ``cost(fn)``: ``fn(node, out_shape) -> FLOPs`` for one output tile of that shape;
- ``compute(fn)``: a tile kernel used instead of the op's own compute (same signature);
- ``compute_into(fn)``: ``fn(out, *inputs, **attrs)`` writes the (single) output tile into
  ``out``, a view of local memory, instead of returning a new array. Both take ``dtype=``
  (one dtype name or several) to register a variant for that dtype of input 0 (TIM-VX
  picks a kernel by dtype); once a kernel has variants, a node whose dtype has none (and no
  variant registered without ``dtype``) is a compile error;
- ``cpu()``: deprecated; where an op runs is its definition's ``placement("cpu")`` (or a
  node's own ``placement``), which this now writes;
- ``global_only()``: the op never joins a layer group.

Built-in kernels are registered with exactly this API (see ``kernels/<family>.py``)::

    register_kernel("Conv").split("N", "H").input_slice(conv_rows).tile_attrs(conv_pads)
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, TypeVar

from ...errors import OpbridgeError, RegistryError, SimulatorError
from ...ir.graph import Node, Value
from ...ir.opdef import DEFAULT_OPS
from ...ir.types import DTYPES
from ...sites import caller_site

Rows = tuple[int, int]
InputSliceFn = Callable[[Node, int, int, int], "Rows | None"]
TileAttrsFn = Callable[[Node, int, int, Sequence["Rows | None"], Sequence["Rows | None"]], dict]
ScratchFn = Callable[[Node, tuple[int, ...]], int]
CostFn = Callable[[Node, tuple[int, ...]], float]

AXES = ("N", "C", "H", "W")
T = TypeVar("T")


#: At most this many bytes of derived weights a program's executor keeps (as the
#: interpreter's Winograd cache, ``opbridge.ir.winograd.CACHE_BYTES``).
MEMO_BYTES = 512 << 20
_MEMO_BYTES = ("memo", "bytes")  # the store's running total of what it holds


class WeightMemo:
    """What a kernel derives from its constant inputs, kept for the life of a program's
    executor: the weights in its DDR are written once, so every tile and every run sees the
    same values. A constant is known by its DDR tensor and slice (``keys[i]``, None for an
    input that is not a constant), never by the local-memory view a tile reads: views are
    per instruction, and the same address holds other data in other layer groups."""

    def __init__(self, store: dict[Hashable, Any], keys: Sequence[Hashable | None]) -> None:
        self._store = store
        self.keys = tuple(keys)

    def get(self, i: int, what: Hashable, make: Callable[[], T]) -> T:
        """``make()`` for input ``i``, computed once per constant and ``what`` (recomputed on
        every call when input ``i`` is not a known constant)."""
        key = self.keys[i] if i < len(self.keys) else None
        if key is None:
            return make()
        full = (key, what)
        if full in self._store:
            return self._store[full]  # type: ignore[no-any-return]
        made = make()
        size = int(getattr(made, "nbytes", 0))
        held = self._store.get(_MEMO_BYTES, 0)
        if held + size <= MEMO_BYTES:  # past the cap, derived again on every call
            self._store[full] = made
            self._store[_MEMO_BYTES] = held + size
        return made


def _axis(op: str, hint: str, axis: str) -> str:
    if axis not in ("H", "W"):
        raise RegistryError(f"kernel {op}: {hint} axis {axis!r} is not H or W")
    return axis


def _dtypes(op: str, dtype: str | Sequence[str] | None) -> tuple[str, ...]:
    names = () if dtype is None else (dtype,) if isinstance(dtype, str) else tuple(dtype)
    bad = [d for d in names if d not in DTYPES]
    if bad:
        raise RegistryError(f"kernel {op}: dtype {bad[0]!r} is not one of {', '.join(DTYPES)}")
    return names


def kernel_dtype(node: Node) -> str:
    """The dtype that picks a kernel variant: input 0's (the output's if it has no input)."""
    v = node.inputs[0] if node.inputs and node.inputs[0] is not None else node.outputs[0]
    return str(v.dtype)


def _site() -> str:
    return caller_site(__file__)


def elementwise_cost(node: Node, out_shape: tuple[int, ...]) -> float:
    """One operation per output element: the default cost."""
    return float(math.prod(out_shape))


class Kernel:
    """The simulator's view of one op: tiling hints and cost. Built by chaining."""

    def __init__(self, op: str, registered_at: str) -> None:
        self.op = op
        self.registered_at = registered_at
        self.local = False
        self.axes: frozenset[str] = frozenset()
        self.split_fn: Callable[[Node], Sequence[str] | None] | None = None
        self.input_slice_fn: InputSliceFn | None = None
        self.channel_slice_fn: Callable[[Node, int, int, int], tuple[int, int, int] | None] | None = None
        self.feature_slice_fn: Callable[[Node, int, int, int], tuple[int, int, int] | None] | None = None
        self.tile_attrs_fn: TileAttrsFn | None = None
        self.scratch_fn: ScratchFn | None = None
        self.scratch_per_tile = False
        self.cost_fn: CostFn = elementwise_cost
        self.compute_fn: Callable[..., Any] | None = None
        self.compute_into_fn: Callable[..., None] | None = None
        #: the W-axis counterparts of ``input_slice_fn`` and ``tile_attrs_fn``
        self.input_slice_w_fn: InputSliceFn | None = None
        self.tile_attrs_w_fn: TileAttrsFn | None = None
        self.in_place = False
        self.reshape_only = False
        self.wants_memo = False
        #: the kernel also runs on tensors of rank 2 and 3 (``row_layout``)
        self.rows_ok = False
        #: the kernel also runs on rank-5 tensors, cut along their depth and rows (``volumes``)
        self.volumes_ok = False
        #: dtype -> (fn, writes into its output): the per-dtype variants of the tile kernel
        self.variants: dict[str, tuple[Callable[..., Any], bool]] = {}

    # -- building ---------------------------------------------------------------------
    def split(self, *axes: str) -> Kernel:
        """Axes the op may be tiled on (any of N, C, H, W); the op becomes a local layer."""
        bad = [a for a in axes if a not in AXES]
        if bad:
            raise RegistryError(f"kernel {self.op}: split axis {bad[0]!r} is not one of N, C, H, W")
        self.axes = frozenset(axes)
        self.local = True
        return self

    def split_when(self, fn: Callable[[Node], Sequence[str] | None]) -> Kernel:
        """Like :meth:`split`, but the axes depend on the node (e.g. a softmax's axis); ``fn``
        returns None for a node that cannot run on tiles at all (a global layer)."""
        self.split_fn = fn
        self.local = True
        return self

    def input_slice(self, fn: InputSliceFn, axis: str = "H") -> Kernel:
        """The rows (``axis="H"``) or columns (``axis="W"``) of an input a tile needs."""
        if _axis(self.op, "input_slice", axis) == "W":
            self.input_slice_w_fn = fn
        else:
            self.input_slice_fn = fn
        return self

    def channel_slice(self, fn: Callable[[Node, int, int, int], tuple[int, int, int] | None]
                      ) -> Kernel:
        self.channel_slice_fn = fn
        return self

    def feature_slice(self, fn: Callable[[Node, int, int, int], tuple[int, int, int] | None]
                      ) -> Kernel:
        """``fn(node, i, f0, f1) -> (axis, lo, hi) | None``: the slice of constant input ``i``
        that output features ``[f0, f1)`` (the last axis) need, for a weight that may stream
        through local memory chunk by chunk (None: the input is needed whole)."""
        self.feature_slice_fn = fn
        return self

    def tile_attrs(self, fn: TileAttrsFn, axis: str = "H") -> Kernel:
        """The attributes of a row tile (``axis="H"``) or of a column tile (``axis="W"``)."""
        if _axis(self.op, "tile_attrs", axis) == "W":
            self.tile_attrs_w_fn = fn
        else:
            self.tile_attrs_fn = fn
        return self

    def scratch(self, fn: ScratchFn, per: str = "lane") -> Kernel:
        """A scratch buffer: ``fn(node, out_shape)`` bytes per lane (``per="lane"``), or in
        all (``per="tile"``: the compiler spreads them over the lanes)."""
        if per not in ("lane", "tile"):
            raise RegistryError(f"kernel {self.op}: scratch per={per!r} is not 'lane' or 'tile'")
        self.scratch_fn = fn
        self.scratch_per_tile = per == "tile"
        return self

    def scratch_lane_bytes(self, node: Node, shape: tuple[int, ...], lanes: int) -> int:
        """The per-lane bytes of ``node``'s scratch buffer for an output tile of ``shape``."""
        size = int(self.hint("scratch", node, shape))
        return -(-size // lanes) if self.scratch_per_tile else size

    def row_layout(self, on: bool = True) -> Kernel:
        """The kernel also takes tensors of rank 2 and 3 (a transformer's [batch, tokens,
        features]), which a layer group holds in the row layout and hands to the kernel as
        the rank-4 view (batch, 1, tokens, features); ``split``, ``input_slice`` and
        ``tile_attrs`` then speak of that view (H: tokens, W: features)."""
        self.rows_ok = on
        return self

    def weight_memo(self, on: bool = True) -> Kernel:
        """The kernel's own function takes ``memo`` (a :class:`WeightMemo`)."""
        self.wants_memo = on
        return self

    def volumes(self, on: bool = True) -> Kernel:
        """The kernel also takes rank-5 tensors (N, C, D, H, W): a layer group cuts them along
        N, D and H (the rows and whole-row columns of their view (N, C, D, H*W),
        ``memory.view4``) and hands the kernel rank-5 tiles; ``split``, ``input_slice`` and
        ``tile_attrs`` then speak of D as H, and of H as W."""
        self.volumes_ok = on
        return self

    def inplace(self, on: bool = True) -> Kernel:
        """The output may overwrite input 0 (same shape and dtype) when nothing reads it later."""
        self.in_place = on
        return self

    def just_reshape(self, on: bool = True) -> Kernel:
        """The output is input 0's bytes under another shape: a global layer of the op then
        shares its input's DDR bytes and runs nothing (bmcompiler's ``just_reshape``)."""
        self.reshape_only = on
        return self

    def cost(self, fn: CostFn) -> Kernel:
        self.cost_fn = fn
        return self

    def compute(self, fn: Callable[..., Any], *, dtype: str | Sequence[str] | None = None) -> Kernel:
        """The tile kernel (returns its output); ``dtype``: only for inputs of that dtype."""
        if dtype is None:
            self.compute_fn = fn
        for d in _dtypes(self.op, dtype):
            self.variants[d] = (fn, False)
        return self

    def compute_into(self, fn: Callable[..., None], *,
                     dtype: str | Sequence[str] | None = None) -> Kernel:
        """The tile kernel that writes into its output tile; ``dtype`` as for :meth:`compute`."""
        if dtype is None:
            self.compute_into_fn = fn
        for d in _dtypes(self.op, dtype):
            self.variants[d] = (fn, True)
        return self

    def kernel_for(self, node: Node, into: bool = True) -> tuple[Callable[..., Any], bool] | None:
        """The kernel's own function for ``node`` and whether it writes into its output: the
        variant for the dtype of input 0, else the one registered without a dtype (None: the
        op's compute). ``into``: a writing kernel may be used (the node has one output)."""
        if self.variants:
            v = self.variants.get(kernel_dtype(node))
            if v is not None and (into or not v[1]):
                return v
        if into and self.compute_into_fn is not None:
            return self.compute_into_fn, True
        if self.compute_fn is not None:
            return self.compute_fn, False
        return None

    def check_dtype(self, node: Node) -> None:
        """A kernel with per-dtype variants must have one for ``node`` (or a dtype-less one)."""
        if not self.variants or self.compute_fn is not None or self.compute_into_fn is not None:
            return
        dt = kernel_dtype(node)
        if dt not in self.variants:
            raise SimulatorError(
                f"{node.where}: kernel {self.op!r} (registered at {self.registered_at}) has no "
                f"variant for dtype {dt}; it has {', '.join(sorted(self.variants))}",
                hint=f'register one: register_kernel({self.op!r}).compute(fn, dtype="{dt}")')

    def cpu(self) -> Kernel:
        """Deprecated: declares the op's default placement "cpu" on its definition in the
        default op registry (the one home of placement), for nodes created after this call."""
        warnings.warn(
            f'register_kernel({self.op!r}).cpu() is deprecated: declare where the op runs on its '
            f'definition, define_op({self.op!r})...placement("cpu") (or opbridge.ir.get_op({self.op!r})'
            '.placement("cpu")); a node can also be placed on its own: b.op(..., placement="cpu")',
            DeprecationWarning, stacklevel=2)
        if self.op not in DEFAULT_OPS:
            raise RegistryError(f"kernel {self.op}: op {self.op!r} is not defined, so it cannot be "
                                "placed on the cpu", hint="define the op before its kernel")
        DEFAULT_OPS.get(self.op).placement("cpu")
        self.local = False
        return self

    @property
    def on_cpu(self) -> bool:
        """Whether the op's definition places its nodes on the host by default."""
        return self.op in DEFAULT_OPS and DEFAULT_OPS.get(self.op).default_placement == "cpu"

    def global_only(self) -> Kernel:
        self.local = False
        return self

    # -- using ------------------------------------------------------------------------
    def split_axes(self, node: Node) -> frozenset[str] | None:
        """The axes ``node`` may be cut along (None: it runs as a global layer)."""
        if self.split_fn is not None:
            axes = self.hint("split", node)
            return None if axes is None else frozenset(axes)
        return self.axes

    def hint(self, name: str, node: Node, *args: Any) -> Any:
        """Call the ``name`` hint (``split``, ``input_slice``, ``channel_slice``,
        ``tile_attrs``, ``scratch``, ``cost``) on ``node``; a failing hint is a SimulatorError
        that names the node and where the kernel was registered."""
        fn = getattr(self, f"{name}_fn")
        try:
            return fn(node, *args)
        except OpbridgeError:
            raise
        except Exception as err:
            raise SimulatorError(
                f"{node.where}: the '{name}' hint of kernel {self.op!r} (registered at "
                f"{self.registered_at}) failed: {type(err).__name__}: {err}",
                hint="fix the kernel registration (a plugin's register_kernel call)",
            ) from err

    def __repr__(self) -> str:
        kind = "cpu" if self.on_cpu else ("local" if self.local else "global")
        return f"Kernel({self.op!r}, {kind}, split={sorted(self.axes)})"


class KernelRegistry:
    """Kernels by op name; :data:`DEFAULT_KERNELS` is the one ``compile`` uses by default."""

    def __init__(self) -> None:
        self._kernels: dict[str, Kernel] = {}

    def register(self, op: str, *, override: bool = False) -> Kernel:
        site = _site()
        if op in self._kernels and not override:
            raise RegistryError(
                f"a kernel for op {op!r} is already registered at "
                f"{self._kernels[op].registered_at}; registered again at {site}",
                hint="pass override=True to register_kernel to replace it",
            )
        k = Kernel(op, site)
        self._kernels[op] = k
        return k

    def get(self, op: str) -> Kernel | None:
        return self._kernels.get(op)

    def remove(self, op: str) -> None:
        self._kernels.pop(op, None)

    def __contains__(self, op: object) -> bool:
        return op in self._kernels

    def __iter__(self) -> Iterator[Kernel]:
        return iter(sorted(self._kernels.values(), key=lambda k: k.op))


DEFAULT_KERNELS = KernelRegistry()


def register_kernel(op: str, *, override: bool = False) -> Kernel:
    """Register the simulator kernel of ``op``; chain ``.split(...).input_slice(...)...``."""
    return DEFAULT_KERNELS.register(op, override=override)


def static_shape(v: Value | None) -> tuple[int, ...]:
    """The shape of a node's input or output as ints (``compile`` has rejected symbolic
    shapes before any kernel hint runs)."""
    if v is None:
        raise SimulatorError("a kernel hint asked for the shape of an absent optional input")
    return tuple(int(d) for d in v.shape)


# -- helpers for window ops (convolution, pooling), usable by plugins -----------------------
def window_rows(lo: int, hi: int, kernel: int, stride: int, dilation: int, pad_begin: int) -> Rows:
    """Input rows that output rows ``[lo, hi)`` of a sliding window read (may leave [0, H))."""
    if hi <= lo:
        return (lo * stride - pad_begin, lo * stride - pad_begin)
    return (lo * stride - pad_begin, (hi - 1) * stride - pad_begin + (kernel - 1) * dilation + 1)


def tile_pads(pads: Sequence[int], needed: Rows, clipped: Rows) -> tuple[int, ...]:
    """2-D pads (top, left, bottom, right) for a tile whose input rows were clipped (a tile
    may need only padding rows: its clipped range is then empty, at the top or the bottom)."""
    return tile_pads_axis(pads, 0, needed, clipped)


def tile_pads_w(pads: Sequence[int], needed: Rows, clipped: Rows) -> tuple[int, ...]:
    """2-D pads (top, left, bottom, right) for a tile whose input columns were clipped: the
    column counterpart of :func:`tile_pads` (top and bottom are kept as given)."""
    return tile_pads_axis(pads, 1, needed, clipped)


def tile_pads_axis(pads: Sequence[int], axis: int, needed: Rows, clipped: Rows) -> tuple[int, ...]:
    """N-D pads (all begins, then all ends) with the begin and end of spatial axis ``axis``
    (0: the first spatial axis) set for a tile whose input range along it was clipped: the
    rank-free form of :func:`tile_pads` (a 3-D window's depth pads, for a tile of depth slices)."""
    k = len(pads) // 2
    out = list(pads)
    out[axis] = max(0, min(clipped[0], needed[1]) - needed[0])
    out[axis + k] = max(0, needed[1] - max(clipped[1], needed[0]))
    return tuple(out)
