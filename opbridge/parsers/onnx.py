"""The ONNX parser: a ModelProto (or an .onnx file) -> OriginGraph.

- Initializers become arrays lazily, on first use, without copying their bytes again
  (``numpy_helper.to_array`` views ``raw_data``; external data is memory-mapped).
- External data is read by our own loader: a location that escapes the model's folder,
  is absolute, or is not a regular file (a device, a FIFO) is refused. Models above 2 GB
  always keep their weights outside the protobuf, so they load this way, memory-mapped.
- ``Constant`` nodes stay nodes (their ``value`` attribute is an array); model-local
  functions are inlined; opset imports are kept per domain ("ai.onnx" is "").
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.inliner
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from ..errors import AttrError, ModelFormatError, UnsupportedOpError, node_ctx
from ..ir import types as ir_types
from .onnx_weights import load_mapped
from .origin import Framework, OriginGraph, OriginNode, TensorInfo

#: A protobuf message cannot exceed this; larger models must use external data.
PROTOBUF_LIMIT = 2**31 - 1

#: Densifying a sparse initializer allocates memory that the file does not hold, so its
#: dense size is bounded (in bytes) before the allocation; raise it for a real model.
MAX_SPARSE_DENSE_BYTES = 1 << 30


#: What to do about a tensor of an element type opbridge has no dtype for (strings, complex).
_DTYPE_HINT = ("opbridge reads bool, integer and floating-point tensors: give the tensor one of "
               "those types in the model (a Cast at export, or a numeric input)")
#: what fixes a model whose protobuf holds something no valid ONNX model holds
_CHECK_HINT = ("the file is damaged or was written by a broken exporter: run "
               "onnx.checker.check_model(PATH, full_check=True) to see what, or export the model again")
#: what fixes an external-data file that cannot be used
_EXTERNAL_HINT = ("keep the external data files the exporter wrote beside the .onnx, under the names "
                  "it gave them (onnx.load_model(PATH, load_external_data=True) shows whether they load)")


def _type_name(elem_type: int) -> str:
    """``8 (STRING)``: the number the file holds, with its TensorProto name where it has one."""
    try:
        return f"{elem_type} ({TensorProto.DataType.Name(elem_type)})"
    except ValueError:
        return str(elem_type)


def _np_dtype(elem_type: int, what: str) -> np.dtype | None:
    if elem_type == TensorProto.UNDEFINED:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        raise UnsupportedOpError(f"[onnx] {what}: element type {_type_name(elem_type)} is not supported",
                                 hint=_DTYPE_HINT) from None


def _dims(dims: Any) -> list[int]:
    out = [int(d) for d in dims]
    if any(d < 0 for d in out):
        raise ModelFormatError(f"[onnx] tensor dims {out} contain a negative dim", hint=_CHECK_HINT)
    return out


def _checked_count(dims: list[int], what: str) -> int:
    """The element count of ``dims``, refused above ``opbridge.ir.types.MAX_ELEMENTS`` (so are
    its non-zero dims' product: numpy cannot even describe an empty [0, 2^62] array)."""
    count, nonzero = 1, 1
    for d in dims:
        count *= d
        nonzero *= d or 1
    if nonzero > ir_types.MAX_ELEMENTS:
        raise ModelFormatError(f"{what}: dims {dims} are too large (the limit is {ir_types.MAX_ELEMENTS} "
                               "elements)",
                               hint="the model is corrupt; raise opbridge.ir.types.MAX_ELEMENTS if it is real")
    return count


class ExternalDataLoader:
    """Reads tensors stored outside the .onnx file, safely, as read-only memory maps."""

    def __init__(self, base_dir: str | os.PathLike[str] | None, source: str = "") -> None:
        self.base_dir = Path(base_dir).resolve() if base_dir is not None else None
        self.source = source

    def resolve(self, tensor_name: str, location: str) -> Path:
        """The file ``location`` names, checked to be a regular file inside the model's folder."""
        what = f"[onnx] initializer '{tensor_name}' external data location '{location}'"
        if self.base_dir is None:
            raise ModelFormatError(f"{what}: the model was not loaded from a file, so external data "
                                   "cannot be found", hint="load the model from its .onnx path")
        if not location or "\x00" in location:
            raise ModelFormatError(f"{what}: empty or invalid path", hint=_EXTERNAL_HINT)
        if os.path.isabs(location) or location.startswith(("/", "\\")) or (len(location) > 1 and location[1] == ":"):
            raise ModelFormatError(f"{what}: absolute paths are refused",
                                   hint="external data must be a relative path inside the model's folder")
        path = (self.base_dir / location).resolve()
        try:
            path.relative_to(self.base_dir)
        except ValueError:
            raise ModelFormatError(f"{what}: escapes the model's folder {self.base_dir}",
                                   hint="external data must be a relative path inside the model's folder") from None
        try:
            st = path.stat()
        except OSError as err:
            raise ModelFormatError(f"{what}: cannot be read: {err.strerror}", hint=_EXTERNAL_HINT) from None
        if not stat.S_ISREG(st.st_mode):
            raise ModelFormatError(f"{what}: is not a regular file (a device, FIFO or folder)",
                                   hint=_EXTERNAL_HINT)
        return path

    def load(self, tensor: TensorProto) -> np.ndarray:
        info = {e.key: e.value for e in tensor.external_data}
        name = tensor.name
        dtype = _np_dtype(tensor.data_type, f"initializer '{name}'")
        # ml_dtypes' types (float8, int4, ...) are numpy kind "V"; float6 has no IR dtype
        if (dtype is None or dtype.kind in "OUS" or dtype.itemsize == 0
                or tensor.data_type in (TensorProto.FLOAT6E2M3, TensorProto.FLOAT6E3M2)):
            raise UnsupportedOpError(f"[onnx] initializer '{name}': external data of element type "
                                     f"{_type_name(tensor.data_type)} is not supported", hint=_DTYPE_HINT)
        bits = _PACKED_BITS.get(tensor.data_type)
        path = self.resolve(name, info.get("location", ""))
        try:
            offset = int(info.get("offset", "0"))
            length = int(info["length"]) if "length" in info else None
        except ValueError:
            raise ModelFormatError(f"[onnx] initializer '{name}': external data offset/length are not integers",
                                   hint=_EXTERNAL_HINT) from None
        dims = _dims(tensor.dims)
        count = _checked_count(dims, f"[onnx] initializer '{name}'")
        nbytes = -(-count * bits // 8) if bits else count * dtype.itemsize
        size = path.stat().st_size
        if offset < 0 or (length is not None and length < 0):
            raise ModelFormatError(f"[onnx] initializer '{name}': negative external data offset/length",
                                   hint=_EXTERNAL_HINT)
        if length is not None and length != nbytes:
            raise ModelFormatError(f"[onnx] initializer '{name}': external data length {length} does not "
                                   f"match its dims {dims} ({nbytes} bytes of {dtype})", hint=_EXTERNAL_HINT)
        if offset + nbytes > size:
            raise ModelFormatError(f"[onnx] initializer '{name}': external data needs bytes "
                                   f"{offset}..{offset + nbytes} of '{path.name}', which has {size}",
                                   hint="the external data file is truncated or does not belong to this model")
        if count == 0:
            return np.empty(dims, dtype)
        if bits:
            packed = np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=(nbytes,))
            return unpack_bits(packed, bits, count).reshape(dims).view(dtype)
        arr = np.memmap(path, dtype=dtype.newbyteorder("<"), mode="r", offset=offset, shape=tuple(dims))
        return arr if dtype.byteorder in ("<", "=", "|") else arr.astype(dtype)


class LazyTensors(Mapping[str, np.ndarray]):
    """Initializers by name, turned into arrays on first access (and then cached)."""

    def __init__(self, protos: dict[str, TensorProto], loader: ExternalDataLoader) -> None:
        self._protos = protos
        self._loader = loader
        self._arrays: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        arr = self._arrays.get(name)
        if arr is None:
            arr = tensor_to_array(self._protos[name], self._loader)
            self._arrays[name] = arr
        return arr

    def __contains__(self, name: object) -> bool:
        return name in self._protos

    def __iter__(self) -> Iterator[str]:
        return iter(self._protos)

    def __len__(self) -> int:
        return len(self._protos)


#: Element types stored several to a byte (TensorProto's doc: the first element in the low bits).
_PACKED_BITS = {TensorProto.INT4: 4, TensorProto.UINT4: 4, TensorProto.FLOAT4E2M1: 4,
                TensorProto.INT2: 2, TensorProto.UINT2: 2}


def unpack_bits(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """``count`` elements of ``bits`` bits each, one a byte (u8), from bytes that hold
    8 / bits of them starting at the low bits."""
    shifts = np.arange(8 // bits, dtype=np.uint8) * np.uint8(bits)
    elems = (np.asarray(packed, dtype=np.uint8)[:, None] >> shifts) & np.uint8((1 << bits) - 1)
    return elems.reshape(-1)[:count]


def tensor_to_array(t: TensorProto, loader: ExternalDataLoader | None = None) -> np.ndarray:
    """A TensorProto as a numpy array (a view of its raw bytes, or a memory map of external data)."""
    if t.data_location == TensorProto.EXTERNAL:
        return (loader or ExternalDataLoader(None)).load(t)
    if t.data_type == TensorProto.UNDEFINED:
        raise ModelFormatError(f"[onnx] tensor '{t.name}' has an undefined element type", hint=_CHECK_HINT)
    _checked_count(_dims(t.dims), f"[onnx] tensor '{t.name}'")
    try:
        return numpy_helper.to_array(t)
    except (ValueError, TypeError, KeyError) as err:
        raise ModelFormatError(f"[onnx] tensor '{t.name}' cannot be read: {err}", hint=_CHECK_HINT) from None


def _sparse_to_dense(sp: onnx.SparseTensorProto, loader: ExternalDataLoader | None) -> np.ndarray:
    """A SparseTensorProto as a dense array; dims, sizes and indices are checked first."""
    name = sp.values.name or "<sparse>"
    what = f"[onnx] sparse tensor '{name}'"
    dims = _dims(sp.dims)
    count = _checked_count(dims, what)
    values = tensor_to_array(sp.values, loader)
    indices = tensor_to_array(sp.indices, loader)
    if values.ndim != 1 or indices.dtype.kind not in "iu":
        raise ModelFormatError(f"{what}: values must be 1-D and indices integers "
                               f"(got values {list(values.shape)}, indices {indices.dtype})",
                               hint=_CHECK_HINT)
    nnz = values.shape[0]
    if indices.shape == (nnz, len(dims)) and len(dims) > 1:
        if np.any(indices < 0) or np.any(indices >= np.array(dims, np.int64)):
            raise ModelFormatError(f"{what}: an index lies outside dims {dims}", hint=_CHECK_HINT)
        flat = np.ravel_multi_index(tuple(indices.astype(np.int64).T), dims)
    elif indices.shape == (nnz,):
        flat = indices.astype(np.int64)
        if np.any(flat < 0) or np.any(flat >= count):
            raise ModelFormatError(f"{what}: an index lies outside its {count} elements", hint=_CHECK_HINT)
    else:
        raise ModelFormatError(f"{what}: indices of shape {list(indices.shape)} do not fit "
                               f"{nnz} values of a rank-{len(dims)} tensor", hint=_CHECK_HINT)
    if count * values.dtype.itemsize > MAX_SPARSE_DENSE_BYTES:
        raise ModelFormatError(f"{what}: dense dims {dims} need {count * values.dtype.itemsize} bytes, "
                               f"above the limit of {MAX_SPARSE_DENSE_BYTES}",
                               hint="raise opbridge.parsers.onnx.MAX_SPARSE_DENSE_BYTES if the model is real")
    dense = np.zeros(count, dtype=values.dtype)
    dense[flat] = values
    return dense.reshape(dims)


def attribute_value(a: AttributeProto, loader: ExternalDataLoader | None = None,
                    opsets: dict[str, int] | None = None) -> Any:
    """An attribute as a plain Python value: int, float, str, list, ndarray or OriginGraph
    (subgraphs are parsed with ``opsets``, the enclosing model's opset imports)."""
    T = AttributeProto
    if a.type == T.FLOAT:
        return float(a.f)
    if a.type == T.INT:
        return int(a.i)
    if a.type == T.STRING:
        return a.s.decode("utf-8", errors="replace")
    if a.type == T.TENSOR:
        return tensor_to_array(a.t, loader)
    if a.type == T.SPARSE_TENSOR:
        return _sparse_to_dense(a.sparse_tensor, loader)
    if a.type == T.GRAPH:
        return parse_graph(a.g, opsets or {}, loader or ExternalDataLoader(None), subgraph=True)
    if a.type == T.FLOATS:
        return [float(x) for x in a.floats]
    if a.type == T.INTS:
        return [int(x) for x in a.ints]
    if a.type == T.STRINGS:
        return [s.decode("utf-8", errors="replace") for s in a.strings]
    if a.type == T.TENSORS:
        return [tensor_to_array(t, loader) for t in a.tensors]
    if a.type == T.GRAPHS:
        return [parse_graph(g, opsets or {}, loader or ExternalDataLoader(None), subgraph=True)
                for g in a.graphs]
    if a.type == T.TYPE_PROTO:
        return a.tp
    if a.type == T.TYPE_PROTOS:
        return list(a.type_protos)
    raise ModelFormatError(f"[onnx] attribute '{a.name}' has unknown type {a.type}", hint=_CHECK_HINT)


_ATTR_TYPE_NAMES = {v: k for k, v in AttributeProto.AttributeType.items()}


def _require_text(value: Any, what: str) -> None:
    """ONNX is proto2: a string field holding invalid UTF-8 comes back as bytes."""
    if not isinstance(value, str):
        raise ModelFormatError(f"{what} {value!r} is not valid UTF-8 text",
                               hint="the file is corrupt; re-export the model")


def check_node_schema(n: onnx.NodeProto, where: str, opsets: Mapping[str, int]) -> None:
    """Check a node against its ONNX schema, as onnx's checker does: input and output counts,
    attribute types, required and duplicated attributes. Nodes without a known schema (custom
    domains, unknown versions) are left to their mappings."""
    seen: set[str] = set()
    for a in n.attribute:
        if a.name in seen:
            raise AttrError(f"{where} attribute '{a.name}': given twice", hint="keep one of them")
        seen.add(a.name)
        if a.type not in _ATTR_TYPE_NAMES or a.type == AttributeProto.UNDEFINED:
            raise AttrError(f"{where} attribute '{a.name}': unknown attribute type {a.type}",
                            hint="the file is damaged or from an unknown ONNX version: check it with "
                            "onnx.checker.check_model, or export it again")
    domain = "" if n.domain in ("", "ai.onnx") else n.domain
    version = opsets.get(domain)
    if version is None or version < 1 or not n.op_type:
        return
    try:
        schema = onnx.defs.get_schema(n.op_type, version, domain)
    except (onnx.defs.SchemaError, TypeError):  # TypeError: a version past the C int range
        return
    for what, count, lo, hi in (("inputs", len(n.input), schema.min_input, schema.max_input),
                                ("outputs", len(n.output), schema.min_output, schema.max_output)):
        if not lo <= count <= hi:
            takes = f"{lo}" if lo == hi else (f"at least {lo}" if hi >= 2**31 - 1 else f"{lo} to {hi}")
            raise ModelFormatError(f"{where}: takes {takes} {what[:-1]}(s), the node has {count}",
                                   hint=f"{n.op_type} (opset {version}): check the node's {what} in the model")
    for a in n.attribute:
        spec = schema.attributes.get(a.name)
        if spec is not None and int(spec.type) != a.type:
            raise AttrError(f"{where} attribute '{a.name}': is {_ATTR_TYPE_NAMES[a.type]}; {n.op_type} "
                            f"(opset {version}) expects {_ATTR_TYPE_NAMES.get(int(spec.type), spec.type)}",
                            hint=f"give '{a.name}' a value of type {_ATTR_TYPE_NAMES.get(int(spec.type))}")
    for name, spec in schema.attributes.items():
        if spec.required and name not in seen:
            raise AttrError(f"{where} attribute '{name}': required but absent",
                            hint=f"{n.op_type} (opset {version}) needs '{name}'")
    if domain == "":
        _check_body_arity(n, where)


def _check_body_arity(n: onnx.NodeProto, where: str) -> None:
    """If's branches and Loop's body must have the outputs (and Loop's body the inputs) that
    the node's own inputs and outputs imply."""
    graphs = {a.name: a.g for a in n.attribute if a.type == AttributeProto.GRAPH}
    if n.op_type == "If":
        for key in ("then_branch", "else_branch"):
            if key in graphs and len(graphs[key].output) != len(n.output):
                raise ModelFormatError(f"{where} attribute '{key}': the branch has {len(graphs[key].output)} "
                                       f"outputs, the node has {len(n.output)}",
                                       hint="If's outputs are its branches' outputs, one for one")
    elif n.op_type == "Loop" and "body" in graphs:
        carried = len(n.input) - 2
        body = graphs["body"]
        if len(body.input) != carried + 2 or len(body.output) < carried + 1 \
                or len(n.output) != len(body.output) - 1:
            raise ModelFormatError(f"{where} attribute 'body': the body has {len(body.input)} inputs and "
                                   f"{len(body.output)} outputs; with {carried} loop-carried value(s) and "
                                   f"{len(n.output)} node outputs it needs {carried + 2} inputs and "
                                   f"{len(n.output) + 1} outputs",
                                   hint="body inputs: iteration, condition, carried values; body outputs: "
                                   "condition, carried values, scan outputs")


def _value_info(vi: onnx.ValueInfoProto, what: str) -> TensorInfo:
    tt = vi.type
    if tt.WhichOneof("value") is None:
        return TensorInfo(vi.name)
    # sequences and optionals of tensors (an optional of a sequence too): their tensors' type
    kinds = []
    while tt.WhichOneof("value") in ("sequence_type", "optional_type"):
        kinds.append(tt.WhichOneof("value")[:-len("_type")])
        tt = tt.sequence_type.elem_type if kinds[-1] == "sequence" else tt.optional_type.elem_type
    kind = "_".join(kinds) or "tensor"
    if tt.WhichOneof("value") != "tensor_type" or kind not in KINDS:
        inner = (tt.WhichOneof("value") or "unknown").replace("_type", "")
        raise UnsupportedOpError(f"[onnx] {what} '{vi.name}' is a {' of '.join([*kinds, inner])}; "
                                 "opbridge supports tensors, sequences and optionals of them",
                                 hint=f"export the model with '{vi.name}' as a tensor")
    dtype = _np_dtype(tt.tensor_type.elem_type, f"{what} '{vi.name}'")
    if not tt.tensor_type.HasField("shape"):
        return TensorInfo(vi.name, dtype, None, kind)
    shape: list[Any] = []
    for i, d in enumerate(tt.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value >= 0:
            shape.append(int(d.dim_value))
        else:
            shape.append(d.dim_param or f"{vi.name}_dim{i}")
    return TensorInfo(vi.name, dtype, tuple(shape), kind)


#: The value kinds the IR has (ir.graph.KINDS; the parser knows nothing of the IR).
KINDS = ("tensor", "sequence", "optional", "optional_sequence")


def parse_graph(g: onnx.GraphProto, opsets: dict[str, int], loader: ExternalDataLoader, *,
                subgraph: bool = False, source: str = "",
                mapped: Mapping[str, np.ndarray] | None = None) -> OriginGraph:
    """One GraphProto as an OriginGraph (subgraphs of If/Loop included, as attribute values)."""
    protos: dict[str, TensorProto] = {t.name: t for t in g.initializer}
    tensors = LazyTensors(protos, loader)
    for name, arr in (mapped or {}).items():
        _checked_count(list(arr.shape), f"[onnx] tensor '{name}'")
        tensors._arrays[name] = arr
    dense_sparse = {sp.values.name: sp for sp in g.sparse_initializer}
    if dense_sparse:
        merged = {name: _sparse_to_dense(sp, loader) for name, sp in dense_sparse.items()}
        tensors._arrays.update(merged)
        protos.update({name: sp.values for name, sp in dense_sparse.items()})
    inputs = [_value_info(vi, "graph input") for vi in g.input if vi.name not in protos]
    outputs = [_value_info(vi, "graph output") for vi in g.output]
    value_info = {vi.name: _value_info(vi, "value_info") for vi in g.value_info
                  if vi.type.WhichOneof("value") in (None, "tensor_type")}
    for what, names in (("initializer", protos), ("graph input", [vi.name for vi in g.input]),
                        ("graph output", [vi.name for vi in g.output])):
        for x in names:
            _require_text(x, f"[onnx] a {what} name")
    nodes = []
    for i, n in enumerate(g.node):
        for field, values in (("op_type", [n.op_type]), ("domain", [n.domain]), ("name", [n.name]),
                              ("inputs", n.input), ("outputs", n.output),
                              ("attribute names", [a.name for a in n.attribute])):
            for x in values:
                _require_text(x, f"[onnx] node #{i}'s {field}")
        name = n.name or f"{n.op_type}_{i}"
        check_node_schema(n, node_ctx(name, n.op_type, framework=str(Framework.ONNX)), opsets)
        nodes.append(OriginNode(
            name=name,
            op_type=n.op_type,
            inputs=list(n.input),
            outputs=list(n.output),
            attrs={a.name: attribute_value(a, loader, opsets) for a in n.attribute},
            framework=Framework.ONNX,
            domain="" if n.domain in ("", "ai.onnx") else n.domain,
            location=f"node #{i}",
        ))
    return OriginGraph(name=g.name or "onnx_graph", framework=Framework.ONNX, nodes=nodes,
                       inputs=inputs, outputs=outputs, tensors=tensors, value_info=value_info,
                       opsets=dict(opsets), source=source, proto=g if subgraph else None)


def _check_opset_known(version: int | None, source: str | None) -> None:
    """Refuse an ai.onnx opset newer than the installed onnx package knows: its schemas (and
    so the attribute checks and defaults) would silently be those of an older opset."""
    newest = onnx.defs.onnx_opset_version()
    if version is not None and version > newest:
        raise ModelFormatError(
            f"[onnx] {source or 'model'} imports opset {version} of the default domain (ai.onnx); "
            f"the installed onnx package ({onnx.__version__}) knows opsets up to {newest}",
            hint=f"convert the model to opset {newest} or older (onnx.version_converter), or "
                 "upgrade the onnx package")


def parse_model(model: onnx.ModelProto, *, base_dir: str | os.PathLike[str] | None = None,
                source: str = "", mapped: Mapping[str, np.ndarray] | None = None) -> OriginGraph:
    """Parse an in-memory ModelProto; ``base_dir`` is where its external data lives, ``mapped``
    the top-level initializers read already (whose TensorProtos hold no data)."""
    if not isinstance(model, onnx.ModelProto):
        raise ModelFormatError(f"[onnx] expected an onnx.ModelProto, got {type(model).__name__}",
                               hint="pass a loaded model (onnx.load(PATH)) or the path of the .onnx file")
    if len(model.functions):
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as err:  # the inliner reports malformed functions with its own types
            raise ModelFormatError(f"[onnx] model-local functions cannot be inlined: {err}",
                                   hint=_CHECK_HINT) from None
    opsets: dict[str, int] = {}
    for imp in model.opset_import:
        domain = "" if imp.domain in ("", "ai.onnx") else imp.domain
        if not 0 <= imp.version < 2**31:
            raise ModelFormatError(f"[onnx] opset_import of domain '{imp.domain or 'ai.onnx'}' has version "
                                   f"{imp.version}, which no opset has",
                                   hint="opset versions are small positive numbers (e.g. 17)")
        if domain in opsets and opsets[domain] != imp.version:
            raise ModelFormatError(f"[onnx] opset_import names domain '{imp.domain or 'ai.onnx'}' twice "
                                   f"(versions {opsets[domain]} and {imp.version})",
                                   hint="import each domain once")
        opsets[domain] = int(imp.version)
    _check_opset_known(opsets.get(""), source)
    if not model.HasField("graph"):
        raise ModelFormatError(f"[onnx] {source or 'model'} has no graph",
                               hint="is this an ONNX model file?")
    loader = ExternalDataLoader(base_dir, source)
    origin = parse_graph(model.graph, opsets, loader, source=source, mapped=mapped)
    origin.metadata.update({"ir_version": str(model.ir_version)})
    if model.producer_name:
        origin.metadata["producer"] = f"{model.producer_name} {model.producer_version}".strip()
    for p in model.metadata_props:
        origin.metadata.setdefault(f"onnx.{p.key}", p.value)
    return origin


def load_model_proto(path: str | os.PathLike[str],
                     mapped: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """Read an .onnx file without its external data (that is loaded lazily and safely).

    With ``mapped`` (a dict to fill), the top-level initializers' bytes are left in the file:
    ``mapped`` receives them as memory-mapped arrays by name (see :mod:`.onnx_weights`)."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as err:
        raise ModelFormatError(f"[onnx] cannot read '{p}': {err.strerror}", hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise ModelFormatError(f"[onnx] '{p}' is not a regular file", hint="give the path of the .onnx file")
    if st.st_size > PROTOBUF_LIMIT:
        raise ModelFormatError(
            f"[onnx] '{p}' is {st.st_size} bytes, above the 2 GB protobuf limit",
            hint="save the model with external data: onnx.save(model, path, save_as_external_data=True)",
        )
    try:
        found = load_mapped(p) if mapped is not None else None
        if found is not None:
            model, arrays = found
            mapped.update(arrays)
        else:
            model = onnx.load(str(p), load_external_data=False)
    except Exception as err:  # protobuf's DecodeError and friends
        raise ModelFormatError(f"[onnx] '{p}' is not a valid ONNX model: {type(err).__name__}: {err}",
                               hint="check the file is a complete .onnx model") from None
    if not model.HasField("graph") or not model.opset_import:
        raise ModelFormatError(f"[onnx] '{p}' is not a valid ONNX model (no graph or no opset import)",
                               hint="check the file is a complete .onnx model")
    return model


def parse_file(path: str | os.PathLike[str], weights: str | os.PathLike[str] | None = None) -> OriginGraph:
    """Parse an .onnx file (its external data, if any, beside it)."""
    if weights is not None:
        raise ModelFormatError(f"[onnx] '{path}': ONNX models carry their own weights; --weights is "
                               "for Caffe", hint="drop --weights")
    model = load_model_proto(path, mapped := {})
    return parse_model(model, base_dir=Path(path).resolve().parent, source=str(path), mapped=mapped)
