"""The ``.obir`` file: the graph as JSON in the metadata of a safetensors file of its constants.

Layout: safetensors metadata ``{"format": "opbridge.obir", "format_version": "2",
"graph": <JSON>}``; one tensor per constant (keyed by value name) and per tensor-typed
attribute (keyed ``attr/<node>/<param>``). bf16 tensors are stored as their u16 bit patterns,
the low-precision types (float8, float4, int4, int2: one element a byte in memory) as their
u8 bytes; the IR dtype in the JSON says how to read them back, bit for bit.
No pickle anywhere. The JSON is read with the op definitions, so attribute types come
from one schema only.

A value with ``quant`` (QuantParams: scale, zero point, axis) has a ``"quant"`` entry beside
its dtype; readers that predate it ignore it, losing only that annotation, so the version
stays 2.

Each node records its placement (``"tpu"`` or ``"cpu"``), so a saved graph compiles the same
way in a process that never loaded the mapping that placed it. Version 2 added that field
(a version-1 reader would ignore it and run host nodes on the TPU); a version-1 file's nodes
take their op definition's placement.
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GraphError, ModelFormatError, OpbridgeError, UnsupportedOpError
from . import tensorfile
from .graph import Graph, Node, Origin, Value
from .opdef import DEFAULT_OPS, OpRegistry, check_placement
from .quantparams import QuantParams
from .types import LOWP_DTYPES, check_shape, is_dtype, to_numpy_dtype

FORMAT = "opbridge.obir"
FORMAT_VERSION = 2
_LOWP_NUMPY = frozenset(to_numpy_dtype(d) for d in LOWP_DTYPES)


def _to_storable(arr: np.ndarray) -> np.ndarray:
    # np.ascontiguousarray returns at least one dimension: reshape keeps a 0-d array 0-d.
    out = np.ascontiguousarray(arr).reshape(np.shape(arr))
    if out.dtype.name == "bfloat16":
        return out.view(np.uint16)
    if out.dtype in _LOWP_NUMPY:
        return out.view(np.uint8)
    return out


def _stored_as(data: np.ndarray, shape: tuple[Any, ...], what: str) -> np.ndarray:
    """``data`` read for a tensor declared ``shape``. Files written before the reshape in
    :func:`_to_storable` hold 0-d tensors as one-element vectors: the same single value, so
    they are read back as declared."""
    if tuple(data.shape) == shape:
        return data
    if shape == () and tuple(data.shape) == (1,):
        return data.reshape(())
    raise ModelFormatError(f"{what}: stored shape {data.shape} != {shape}",
                           hint="the file is corrupt; re-create it")


def _from_stored(arr: np.ndarray, dtype: str) -> np.ndarray:
    want = to_numpy_dtype(dtype)
    if arr.dtype != want:
        if arr.dtype.itemsize == want.itemsize:
            return arr.view(want)
        raise ModelFormatError(f"stored tensor of dtype {arr.dtype} does not match {dtype}")
    return arr


def _encode_float(x: Any) -> Any:
    """Strict JSON has no inf/nan: write them as {"float": "inf"} and friends."""
    if isinstance(x, float) and not math.isfinite(x):
        return {"float": repr(x)}
    return x


def _decode_float(x: Any) -> Any:
    if isinstance(x, dict) and set(x) == {"float"} and x["float"] in ("inf", "-inf", "nan"):
        return float(x["float"])
    return x


def _encode_attr(value: Any, key: str, tensors: dict[str, np.ndarray]) -> Any:
    if isinstance(value, Graph):  # a control-flow op's branch or body; its names are unique
        return {"graph": graph_to_json(value, tensors)}
    if isinstance(value, float):
        return _encode_float(value)
    if isinstance(value, np.ndarray):
        tensors[key] = _to_storable(value)
        from .types import from_numpy_dtype

        return {"tensor": key, "dtype": from_numpy_dtype(value.dtype), "shape": list(value.shape)}
    if isinstance(value, tuple):
        return [_encode_float(v) for v in value]
    return value


def _typed_json(v: Value) -> dict[str, Any]:
    """A graph input's or node output's entry; ``quant`` only for a quantized value, ``kind``
    only for a sequence or an optional."""
    d: dict[str, Any] = {"name": v.name, "dtype": v.dtype, "shape": list(v.shape)}
    if v.quant is not None:
        d["quant"] = v.quant.to_json()
    if v.kind != "tensor":
        d["kind"] = v.kind
    return d


def _quant_from_json(d: dict[str, Any]) -> QuantParams | None:
    return QuantParams.from_json(d["quant"]) if d.get("quant") is not None else None


def graph_to_json(graph: Graph, tensors: dict[str, np.ndarray]) -> dict[str, Any]:
    """The JSON document of a graph; fills ``tensors`` with what goes beside it."""
    consts = []
    for c in graph.constants.values():
        assert c.data is not None
        stored = _to_storable(c.data)
        if c.name in tensors and not np.array_equal(tensors[c.name], stored):
            # a sub-graph's constants are stored beside the enclosing graph's, by name
            raise GraphError(f"constant '{c.name}' of graph '{graph.name}' has the name of another "
                             f"graph's constant with other data",
                             hint="give the constants of a branch or loop body names of their own")
        tensors[c.name] = stored
        consts.append(_typed_json(c))
    nodes = []
    for n in graph.nodes:
        nodes.append(
            {
                "name": n.name,
                "op": n.op,
                "inputs": [v.name if v is not None else None for v in n.inputs],
                "outputs": [_typed_json(v) for v in n.outputs],
                "attrs": {
                    k: _encode_attr(v, f"attr/{n.name}/{k}", tensors) for k, v in n.attrs.items()
                },
                "origin": {
                    "framework": n.origin.framework,
                    "op_type": n.origin.op_type,
                    "name": n.origin.name,
                },
                "placement": n.placement,
            }
        )
    return {
        "name": graph.name,
        "metadata": graph.metadata,
        "inputs": [_typed_json(v) for v in graph.inputs],
        "outputs": [v.name for v in graph.outputs],
        "constants": consts,
        "nodes": nodes,
    }


def atomic_write(path: str | os.PathLike[str], write: Any) -> None:
    """Call ``write(tmp_path)`` and rename the result onto ``path``, so an interrupted run
    never leaves a half-written file where a good one was."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise OpbridgeError(f"cannot write '{path}': folder '{parent}' does not exist",
                            hint="create the folder first, or write somewhere else")
    # the mode open() gives a new file (0o666 less the umask), kept whatever ``write`` does
    # (mkstemp and safetensors make files 0o600): the result is readable by whoever may read
    # the folder's other files
    while True:
        tmp = str(parent / f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            break
        except FileExistsError:
            continue
    mode = os.stat(tmp).st_mode & 0o777
    try:
        write(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(graph: Graph, path: str | os.PathLike[str]) -> None:
    """Write ``graph`` as a ``.obir`` file, streaming each weight to it (see :mod:`.tensorfile`)."""
    tensors: dict[str, np.ndarray] = {}
    doc = graph_to_json(graph, tensors)
    meta = {
        "format": FORMAT,
        "format_version": str(FORMAT_VERSION),
        "graph": json.dumps(doc, separators=(",", ":"), allow_nan=False),
    }
    atomic_write(path, lambda tmp: tensorfile.write(tmp, tensors, meta))


def read_safetensors(path: str | os.PathLike[str], kind: str) -> tuple[dict[str, str], Any]:
    """Open a safetensors file, mapping every failure to a ModelFormatError naming it."""
    from safetensors import safe_open

    p = Path(path)
    if not p.is_file():
        raise ModelFormatError(f"{kind} file '{path}' does not exist or is not a file",
                               hint="check the path")
    try:
        f = safe_open(str(p), framework="numpy")
        meta = f.metadata() or {}
    except Exception as err:  # safetensors raises its own error types for bad headers
        raise ModelFormatError(
            f"'{path}' is not a valid {kind} file (truncated or not safetensors): {err}",
            hint=f"re-create the {kind} file",
        ) from None
    return meta, f


def read_json(text: str | bytes, what: str, error: Callable[..., OpbridgeError] = ModelFormatError,
              hint: str | None = None) -> dict[str, Any]:
    """Parse a JSON object (a file's text, or a file's metadata); malformed or absurdly nested
    JSON, bytes that are not UTF-8, an integer past Python's digit limit or a document that is
    not an object are an ``error`` (with ``hint``) naming ``what``."""
    try:
        doc = json.loads(text)
    # ValueError: a JSONDecodeError, bytes that are not UTF-8, or an integer past Python's digit limit
    except ValueError as err:
        raise error(f"{what} is not valid JSON (malformed): {str(err)[:200]}", hint=hint) from None
    except RecursionError:
        raise error(f"{what} is not valid JSON: nested too deeply to be a valid document", hint=hint) from None
    if not isinstance(doc, dict):
        raise error(f"{what} is a {type(doc).__name__}, not an object", hint=hint)
    return doc


def open_stored(path: str | os.PathLike[str], kind: str, fmt: str, max_version: int,
                make_hint: str) -> tuple[dict[str, str], Callable[[str, str], np.ndarray]]:
    """Open an opbridge safetensors file (``.obir``, ``.obprog``): check its format marker and
    version; returns its metadata and a reader ``tensor(key, dtype)`` whose failures are
    ModelFormatErrors naming the file."""
    p = Path(path)
    if not p.is_file():
        raise ModelFormatError(f"{kind} file '{path}' does not exist or is not a file",
                               hint=f"check the path ({make_hint})")
    try:
        meta, get = tensorfile.read(p)
    except (tensorfile.TensorFileError, OSError) as err:
        raise ModelFormatError(
            f"'{path}' is not a valid {kind} file (truncated or not safetensors): {err}",
            hint=f"re-create the {kind} file",
        ) from None
    if meta.get("format") != fmt:
        raise ModelFormatError(
            f"'{path}' is a safetensors file but not an opbridge {kind} (no '{fmt}' marker)",
            hint=make_hint,
        )
    try:
        version = int(meta.get("format_version", ""))
    except ValueError:
        raise ModelFormatError(
            f"'{path}': format_version {meta.get('format_version')!r} is not a number") from None
    if version > max_version:
        raise ModelFormatError(
            f"'{path}' has {kind} format version {version}; this opbridge reads up to {max_version}",
            hint="upgrade opbridge",
        )

    def tensor(key: str, dtype: str) -> np.ndarray:
        try:
            return _from_stored(get(key), dtype)
        except OpbridgeError:
            raise
        except Exception as err:
            why = str(err).removeprefix(f"tensor '{key}': ")  # the reader may name it too
            raise ModelFormatError(f"'{path}': tensor '{key}' cannot be read: {why}") from None

    return meta, tensor


#: what fixes a .obir whose graph is broken
_REWRITE = "the .obir was edited or damaged: convert the model again (opbridge convert MODEL -o OUT.obir)"


def load(path: str | os.PathLike[str], *, registry: OpRegistry | None = None) -> Graph:
    """Read a ``.obir`` file; the graph is verified before it is returned."""
    meta, tensor = open_stored(path, ".obir", FORMAT, FORMAT_VERSION,
                               "convert the model first: opbridge convert MODEL -o OUT.obir")
    doc = read_json(meta.get("graph", ""), f"'{path}': the graph JSON")

    try:
        return graph_from_json(doc, tensor, registry or DEFAULT_OPS)
    except OpbridgeError as err:
        if isinstance(err, (UnsupportedOpError,)):
            raise UnsupportedOpError(
                f"'{path}': {err.message}",
                hint="load the plugin that defines it (--plugin FILE)",
            ) from None
        # a graph opbridge wrote is whole: a broken one was edited or damaged since
        message = err.message if err.message.startswith(f"'{path}'") else f"'{path}': {err.message}"
        raise type(err)(message, hint=err.hint or _REWRITE) from None
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ModelFormatError(f"'{path}': the graph JSON is not a valid .obir graph: {err!r}",
                               hint=_REWRITE) from None


def _typed_value(typed: Any, d: dict[str, Any], what: str) -> Value:
    """A graph input or node output from its JSON entry (``kind`` absent: a tensor)."""
    name, dtype, shape = typed(d, what)
    return Value(name, dtype, shape, quant=_quant_from_json(d), kind=str(d.get("kind", "tensor")))


def graph_from_json(doc: dict[str, Any], tensor: Any, registry: OpRegistry) -> Graph:
    if not isinstance(doc, dict):
        raise ModelFormatError("graph JSON is not an object")
    values: dict[str, Value] = {}

    def typed(d: dict[str, Any], what: str) -> tuple[str, str, tuple[Any, ...]]:
        name, dtype = d["name"], d["dtype"]
        if not isinstance(name, str) or not is_dtype(dtype):
            raise ModelFormatError(f"{what} {name!r}: bad name or dtype {dtype!r}")
        return name, dtype, check_shape(d["shape"], f"{what} '{name}'")

    def add(v: Value) -> Value:
        if v.name in values:
            raise GraphError(f"value name '{v.name}' is used twice")
        values[v.name] = v
        return v

    inputs = [add(_typed_value(typed, d, "input")) for d in doc["inputs"]]
    consts = []
    for d in doc["constants"]:
        name, dtype, shape = typed(d, "constant")
        data = _stored_as(tensor(name, dtype), shape, f"constant '{name}'")
        consts.append(add(Value(name, dtype, shape, data=data, quant=_quant_from_json(d))))
    nodes = []
    for i, nd in enumerate(doc["nodes"]):
        try:
            nodes.append(_node_from_json(nd, values, add, typed, tensor, registry))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            bad = nd.get("name") if isinstance(nd, dict) else None
            raise ModelFormatError(f"node #{i} {bad!r} of the graph JSON is malformed: {err!r}",
                                   hint="the file is corrupt; re-create it") from None
    outputs = []
    for ref in doc["outputs"]:
        if not isinstance(ref, str) or ref not in values:
            raise GraphError(f"graph output {ref!r} is not defined")
        outputs.append(values[ref])
    g = Graph(str(doc["name"]), inputs, outputs, nodes, consts, registry,
              {str(k): str(v) for k, v in dict(doc.get("metadata", {})).items()})
    g.rebuild_uses()
    g.verify(require_static=False)
    return g


def _node_from_json(nd: dict[str, Any], values: dict[str, Value], add: Any, typed: Any, tensor: Any,
                    registry: OpRegistry) -> Node:
    """One node of the graph JSON, its inputs looked up in ``values`` and its outputs added."""
    op = nd["op"]
    opdef = registry.get(op)
    ins: list[Value | None] = []
    for ref in nd["inputs"]:
        if ref is None:
            ins.append(None)
        elif ref in values:
            ins.append(values[ref])
        else:
            raise GraphError(f"node '{nd['name']}' ({op}): input '{ref}' is not defined before it")
    attrs: dict[str, Any] = {}
    for k, a in dict(nd["attrs"]).items():
        if isinstance(a, dict) and "graph" in a:
            attrs[k] = graph_from_json(a["graph"], tensor, registry)
        elif isinstance(a, dict) and "tensor" in a:
            data = tensor(a["tensor"], a["dtype"])
            if "shape" in a:
                shape = check_shape(a["shape"], f"node '{nd['name']}' ({op}) attribute '{k}'")
                data = _stored_as(data, shape, f"node '{nd['name']}' ({op}) attribute '{k}'")
            attrs[k] = data
        elif isinstance(a, list):
            attrs[k] = [_decode_float(x) for x in a]
        else:
            attrs[k] = _decode_float(a)
    attrs = opdef.normalize_attrs(attrs, f"node '{nd['name']}' ({op})")
    # files written before per-axis parameters were always explicit hold None for them
    opdef.fill_params(attrs, [(v.shape, v.dtype) if v is not None else None for v in ins])
    o = nd["origin"]
    origin = Origin(str(o["framework"]), str(o["op_type"]), str(o["name"]))
    where = check_placement(nd.get("placement", opdef.default_placement),
                            f"node '{nd['name']}' ({op})", ModelFormatError)
    outs = [add(_typed_value(typed, d, "output")) for d in nd["outputs"]]
    return Node(op, str(nd["name"]), ins, outs, attrs, origin, where)
