"""Read a TorchScript-json file (docs/torchscript-json.md) into an OriginGraph, without torch.

The JSON holds the frozen, inlined graph; its tensors are in a safetensors file beside it.
This module knows the file format only, nothing of the IR.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from .origin import Framework, OriginGraph, OriginNode, TensorInfo
from .torchscript_functionalize import check_block_writes, functionalize

FORMAT = "opbridge.torchscript-json"
#: Format versions this reader understands (2 adds node blocks and non-tensor graph inputs).
VERSIONS = (1, 2)
#: what fixes a file whose structure is wrong: it was not written (whole) by the exporter
_REEXPORT = ("the JSON was edited, truncated or written by another tool: export the model again "
             "(opbridge export-torchscript, or opbridge.export_torchscript); docs/torchscript-json.md "
             "describes the format")


class _DamagedJsonError(ModelFormatError):
    """A file whose structure is wrong: it was not written (whole) by the exporter."""

    default_hint = _REEXPORT

_DTYPES: dict[str, Any] = {
    "float32": np.float32, "float16": np.float16, "float64": np.float64, "int8": np.int8,
    "uint8": np.uint8, "int16": np.int16, "int32": np.int32, "int64": np.int64, "bool": np.bool_,
}

#: Every dtype name the format knows (bfloat16 is stored as 16-bit words, see _Weights).
DTYPE_NAMES = (*_DTYPES, "bfloat16")


def _np_dtype(name: Any, what: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if not isinstance(name, str) or name not in _DTYPES:
        raise ModelFormatError(
            f"{what}: dtype {name!r} is not a TorchScript-json dtype",
            hint=f"use one of {', '.join(DTYPE_NAMES)}",
        )
    return np.dtype(_DTYPES[name])


class _Weights:
    """The safetensors file beside the JSON, opened lazily; bf16 words viewed as bfloat16."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._file: Any = None
        self._keys: set[str] = set()
        self._meta: dict[str, str] = {}

    def open(self, where: str = "[torchscript]") -> None:
        """Open the file (once); ``where`` names the node that first needs a tensor."""
        if self.path is None or self._file is not None:
            return
        from safetensors import safe_open

        if not self.path.is_file():
            raise ModelFormatError(
                f"{where}: the weights file '{self.path}' does not exist",
                hint=f"the .ts.json names its tensors' file '{self.path.name}': keep the .safetensors "
                     "file export-torchscript wrote beside it under that name (a renamed pair: rename "
                     "the .safetensors back)",
            )
        try:
            self._file = safe_open(str(self.path), framework="numpy")
            self._keys = set(self._file.keys())
            self._meta = self._file.metadata() or {}
        except Exception as err:  # safetensors raises its own types for bad headers
            raise ModelFormatError(
                f"{where}: '{self.path}' is not a valid safetensors file (truncated?): {err}",
                hint="re-export the model with opbridge export-torchscript",
            ) from None

    def get(self, key: str, where: str) -> np.ndarray:
        self.open(where)
        if key not in self._keys:
            src = f"'{self.path}'" if self.path is not None else "no weights file (the JSON names none)"
            raise ModelFormatError(
                f"{where}: tensor key '{key}' is missing from {src}",
                hint="re-export the model so that the JSON and the safetensors file match",
            )
        try:
            arr = self._file.get_tensor(key)
        except Exception as err:
            raise _DamagedJsonError(f"{where}: tensor '{key}' cannot be read: {err}") from None
        if self._meta.get(f"{key}.dtype") == "bfloat16":
            arr = arr.view(_np_dtype("bfloat16", where))
        return arr


def _decode(v: Any, where: str, weights: _Weights, tensors: dict[str, np.ndarray]) -> Any:
    """A JSON-encoded constant as a Python value (see the format doc's 'Constants')."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_decode(x, where, weights, tensors) for x in v]
    if isinstance(v, dict) and len(v) == 1:
        (tag, x), = v.items()
        if tag == "tensor" and isinstance(x, str):
            if x not in tensors:
                tensors[x] = weights.get(x, where)
            return tensors[x]
        if tag == "float" and x in ("inf", "-inf", "nan"):
            return float(x)
        if tag == "tuple" and isinstance(x, list):
            return tuple(_decode(e, where, weights, tensors) for e in x)
        if tag == "device" and isinstance(x, str):
            return x
    raise _DamagedJsonError(f"{where}: constant {json.dumps(v)[:80]} is not a TorchScript-json value")


def _tensor_infos(doc: dict[str, Any], key: str, src: str) -> list[TensorInfo]:
    items = doc.get(key, [])
    if not isinstance(items, list):
        raise _DamagedJsonError(f"{src}: '{key}' must be a list")
    out = []
    for i, it in enumerate(items):
        what = f"{src}: graph {key[:-1]} {i}"
        if not isinstance(it, dict) or not isinstance(it.get("name"), str):
            raise _DamagedJsonError(f"{what}: needs a 'name'")
        shape = it.get("shape")
        if shape is not None and (
            not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape)
        ):
            raise _DamagedJsonError(f"{what} '{it['name']}': shape {shape!r} is not a list of sizes")
        dtype = _np_dtype(it["dtype"], f"{what} '{it['name']}'") if "dtype" in it else None
        out.append(TensorInfo(it["name"], dtype, tuple(shape) if shape is not None else None))
    return out


_LIST_KINDS = ("ListConstruct", "TupleConstruct")


def _argument_view(nodes: list[OriginNode], graph_types: dict[str, str],
                   outer: dict[str, OriginNode] | None = None) -> dict[str, OriginNode]:
    """Give every node the argument view described in the format doc ("What the parser adds").

    Inputs produced by ``prim::ListConstruct``/``TupleConstruct`` are spread into their elements
    (recursively), so a mapping reaches every element as an input of its own; ``args`` says
    which flat inputs make up each schema argument (an int, or a nested list for a list
    argument); ``arg_types`` gives each flat input's TorchScript type; ``consts`` holds the
    value of each flat input that a non-tensor ``prim::Constant`` produces (``None`` included).
    """
    _merge_unpacks(nodes)
    producer: dict[str, OriginNode] = dict(outer or {})
    types: dict[str, str] = dict(graph_types)
    for node in nodes:
        flat: list[str] = []
        arg_types: list[str] = []
        consts: dict[int, Any] = {}

        def spread(name: str, flat: list[str] = flat, arg_types: list[str] = arg_types,
                   consts: dict[int, Any] = consts) -> Any:
            prod = producer.get(name)
            if prod is not None and prod.domain == "prim" and prod.op_type in _LIST_KINDS:
                return [spread(x) for x in prod.inputs]
            k = len(flat)
            flat.append(name)
            arg_types.append(types.get(name, "Tensor"))
            if (prod is not None and prod.domain == "prim" and prod.op_type in ("Constant", "GetAttr")
                    and "value" in prod.attrs):
                value = prod.attrs.get("value")
                if not isinstance(value, np.ndarray):
                    consts[k] = value
            return k

        node.attrs["args"] = [spread(x) for x in node.inputs]
        node.inputs = flat
        node.attrs["arg_types"] = arg_types
        node.attrs["consts"] = consts
        for block, btypes in zip(node.attrs.get("blocks", []), node.attrs.get("block_types", [])):
            inner = _argument_view(block.nodes, {**types, **dict(zip([t.name for t in block.inputs], btypes))},
                                   producer)
            _constant_outputs(block, inner)
        for i, out in enumerate(node.outputs):
            producer[out] = node
            tl = node.attrs.get("types") or []
            types[out] = tl[i] if i < len(tl) else "Tensor"
    return producer


def _constant_outputs(block: OriginGraph, producer: dict[str, OriginNode]) -> None:
    """A block output that a non-tensor ``prim::Constant`` gives (a loop's ``True`` condition,
    an int) becomes the output of a ``prim::NumToTensor`` of it, so that it is a 0-d tensor
    where the block hands it on."""
    for i, t in enumerate(block.outputs):
        prod = producer.get(t.name)
        if prod is None or prod.domain != "prim" or prod.op_type != "Constant":
            continue
        value = prod.attrs.get("value")
        if isinstance(value, np.ndarray) or not isinstance(value, (bool, int, float)):
            continue
        name = f"{block.name}/out{i}"
        block.nodes.append(OriginNode(
            name=name, op_type="NumToTensor", domain="prim", inputs=[t.name], outputs=[name],
            attrs={"args": [0], "arg_types": [prod.attrs["types"][0]], "consts": {0: value},
                   "types": ["Tensor"], "scope": ""},
            framework=Framework.TORCHSCRIPT, location=prod.location))
        block.outputs[i] = TensorInfo(name, None, None)


def _merge_unpacks(nodes: list[OriginNode]) -> None:
    """``y = aten::chunk(x); a, b = prim::ListUnpack(y)`` -> ``a, b = aten::chunk(x)``.

    Only where the ``List[Tensor]`` output has that one ``ListUnpack`` as its only user; the
    merged node's ``unpacked`` attribute is True. Works in place on ``nodes``.
    """
    uses: dict[str, int] = {}
    for node in nodes:
        for x in node.inputs:
            uses[x] = uses.get(x, 0) + 1
    producer = {out: node for node in nodes for out in node.outputs}
    drop = set()
    for i, node in enumerate(nodes):
        if node.domain != "prim" or node.op_type != "ListUnpack" or len(node.inputs) != 1:
            continue
        src = producer.get(node.inputs[0])
        if (src is None or src.domain == "prim" or len(src.outputs) != 1
                or uses.get(node.inputs[0]) != 1 or src.attrs.get("types") != ["List[Tensor]"]):
            continue
        src.outputs = list(node.outputs)
        src.attrs["types"] = list(node.attrs.get("types") or ["Tensor"] * len(node.outputs))
        src.attrs["unpacked"] = True
        drop.add(i)
    nodes[:] = [n for i, n in enumerate(nodes) if i not in drop]


def parse_file(path: str | os.PathLike[str], weights: Any = None) -> OriginGraph:
    """The ``convert()`` entry point: ``weights`` is unused (the JSON names its weights file)."""
    if weights is not None:
        raise ModelFormatError(
            f"[torchscript] '{path}': the weights file is named inside the JSON; do not pass weights",
            hint="keep MODEL.ts.safetensors beside MODEL.ts.json",
        )
    return parse_torchscript_json(path)


def _read_document(p: Path, src: str) -> tuple[dict[str, Any], int]:
    """The file's JSON document and its format version, checked to be TorchScript-json."""
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFormatError(f"{src}: no such file",
                               hint="check the path; export-torchscript writes NAME.ts.json and "
                                    "NAME.ts.safetensors") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ModelFormatError(f"{src}: cannot be read: {err}",
                               hint="check that the file is readable and is the UTF-8 JSON "
                                    "export-torchscript wrote") from None
    try:
        doc = json.loads(text, parse_constant=lambda c: math.nan)
    except ValueError as err:  # a JSONDecodeError, or an integer past Python's digit limit
        raise ModelFormatError(f"{src}: not valid JSON: {str(err)[:200]}", hint="re-export the model") from None
    except RecursionError:
        raise ModelFormatError(f"{src}: the JSON is nested too deeply", hint="re-export the model") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ModelFormatError(
            f"{src}: not a TorchScript-json file (no \"format\": \"{FORMAT}\")",
            hint="write it with opbridge export-torchscript",
        )
    version = doc.get("version")
    if version not in VERSIONS:
        raise ModelFormatError(
            f"{src}: TorchScript-json version {version!r} is unknown; this opbridge reads "
            f"version {', '.join(map(str, VERSIONS))}",
            hint="upgrade opbridge, or re-export the model with this opbridge's export-torchscript",
        )
    return doc, int(version)


def _weights_beside(doc: dict[str, Any], p: Path, src: str) -> _Weights:
    """The weights file the document names (a bare file name beside the JSON), not yet opened."""
    wname = doc.get("weights")
    if wname is not None and (not isinstance(wname, str) or os.path.basename(wname) != wname):
        raise _DamagedJsonError(f"{src}: 'weights' must be a file name beside the JSON, got {wname!r}")
    return _Weights(p.with_name(wname) if wname else None)


@dataclass
class _NodeReader:
    """Reads the document's nodes in order, checking that every value is defined once, before use.

    ``defined`` starts with the graph inputs and grows with each node's outputs; constants'
    tensors are loaded from ``weights`` into ``tensors`` as they are met.
    """

    src: str
    weights: _Weights
    defined: set[str]
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)

    def read_all(self, raw_nodes: Any) -> list[OriginNode]:
        if not isinstance(raw_nodes, list):
            raise _DamagedJsonError(f"{self.src}: 'nodes' must be a list")
        return [self.read(i, rn) for i, rn in enumerate(raw_nodes)]

    def read(self, i: int, rn: Any) -> OriginNode:
        """Node ``i`` of the document as an OriginNode (framework torchscript)."""
        if not isinstance(rn, dict) or not isinstance(rn.get("kind"), str):
            raise _DamagedJsonError(f"{self.src}: node {i} needs a 'kind'")
        kind = rn["kind"]
        name = rn.get("name", f"node{i}")
        where = f"[torchscript] node '{name}' ({kind})"
        if not isinstance(name, str) or name in self.names:
            raise _DamagedJsonError(f"{where}: node name is not a unique string (node {i})")
        self.names.add(name)
        blocks = self._blocks(rn, name, where)
        if blocks and kind not in ("prim::If", "prim::Loop"):
            raise ModelFormatError(f"{where}: only prim::If and prim::Loop nodes have blocks",
                                   hint="re-export the model with opbridge export-torchscript")
        ins, outs = self._values(rn, where)
        domain, _, op = kind.rpartition("::")
        attrs = self._attrs(rn, where, len(outs))
        if blocks:
            attrs["blocks"] = [b for b, _ in blocks]
            attrs["block_types"] = [t for _, t in blocks]
        return OriginNode(
            name=name, op_type=op, domain=domain, inputs=list(ins), outputs=list(outs), attrs=attrs,
            framework=Framework.TORCHSCRIPT, location=str(rn.get("source", "")),
        )

    def _blocks(self, rn: dict[str, Any], name: str, where: str) -> list[tuple[OriginGraph, list[str]]]:
        """The node's blocks (version 2) as origin graphs, with their inputs' TorchScript types.
        A block sees the values defined before its node and its own inputs; what it defines is
        its own."""
        raw = rn.get("blocks", [])
        if not isinstance(raw, list):
            raise _DamagedJsonError(f"{where}: 'blocks' must be a list")
        out = []
        for k, rb in enumerate(raw):
            bwhere = f"{where} block {k}"
            if not isinstance(rb, dict):
                raise _DamagedJsonError(f"{bwhere}: must be an object")
            ins, outs = rb.get("inputs", []), rb.get("outputs", [])
            types = rb.get("input_types", ["Tensor"] * len(ins))
            if not (isinstance(ins, list) and isinstance(outs, list) and isinstance(types, list)
                    and len(types) == len(ins) and all(isinstance(x, str) for x in ins + outs + types)):
                raise _DamagedJsonError(f"{bwhere}: 'inputs', 'input_types' and 'outputs' must be "
                                        "lists of names (one type per input)")
            saved = set(self.defined)
            for x in ins:
                if x in self.defined:
                    raise _DamagedJsonError(f"{bwhere}: input '{x}' is already defined")
                self.defined.add(x)
            nodes = self.read_all(rb.get("nodes", []))
            for x in outs:
                if x not in self.defined:
                    raise ModelFormatError(f"{bwhere}: output '{x}' is not defined",
                                           hint="the JSON was edited or truncated; re-export the model")
            self.defined = saved
            graph = OriginGraph(name=f"{name}/block{k}", framework=Framework.TORCHSCRIPT, nodes=nodes,
                                inputs=[TensorInfo(x, None, None) for x in ins],
                                outputs=[TensorInfo(x, None, None) for x in outs])
            out.append((graph, list(types)))
        return out

    def _values(self, rn: dict[str, Any], where: str) -> tuple[list[str], list[str]]:
        """The node's input and output value names; inputs defined earlier, outputs new."""
        ins, outs = rn.get("inputs", []), rn.get("outputs", [])
        if not isinstance(ins, list) or not isinstance(outs, list) or not all(
            isinstance(x, str) for x in ins + outs
        ):
            raise _DamagedJsonError(f"{where}: 'inputs' and 'outputs' must be lists of value names")
        for x in ins:
            if x not in self.defined:
                raise ModelFormatError(
                    f"{where}: input '{x}' is not defined by a graph input or an earlier node "
                    "(dangling value reference)",
                    hint="the JSON was edited or truncated; re-export the model",
                )
        for x in outs:
            if x in self.defined:
                raise _DamagedJsonError(f"{where}: output '{x}' is already defined")
            self.defined.add(x)
        return ins, outs

    def _attrs(self, rn: dict[str, Any], where: str, n_outputs: int) -> dict[str, Any]:
        """The node's ``attrs`` plus ``types``, ``scope`` and its decoded constant ``value``."""
        types = rn.get("types", [])
        if not isinstance(types, list) or (types and len(types) != n_outputs):
            raise _DamagedJsonError(f"{where}: 'types' must give one type per output")
        if not isinstance(rn.get("attrs", {}), dict):
            raise _DamagedJsonError(f"{where}: 'attrs' must be an object")
        attrs: dict[str, Any] = dict(rn.get("attrs") or {})
        attrs["types"] = list(types)
        attrs["scope"] = rn.get("scope", "")
        if "value" in rn:
            try:
                attrs["value"] = _decode(rn["value"], where, self.weights, self.tensors)
            except RecursionError:
                raise _DamagedJsonError(f"{where}: the constant is nested too deeply") from None
            if len(types) == 1 and not _matches(attrs["value"], types[0]):
                raise ModelFormatError(
                    f"{where}: value {json.dumps(rn['value'])[:60]} is not of its declared type "
                    f"{types[0]!r}", hint="the JSON was edited or damaged; re-export the model")
        return attrs


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return _is_int(x) or isinstance(x, float)


#: What a constant of each simple TorchScript type must decode to (other types are not checked).
_TYPE_CHECKS: dict[str, Any] = {
    "int": _is_int, "SymInt": _is_int, "float": _is_number, "number": _is_number,
    "Scalar": lambda x: _is_number(x) or isinstance(x, bool), "bool": lambda x: isinstance(x, bool),
    "str": lambda x: isinstance(x, str), "Device": lambda x: isinstance(x, str),
    "NoneType": lambda x: x is None,
}


def _matches(value: Any, ts_type: str) -> bool:
    """True when a decoded constant fits its declared TorchScript type (``List[T]``: each item)."""
    if ts_type.startswith("List[") and ts_type.endswith("]"):
        inner = _TYPE_CHECKS.get(ts_type[5:-1])
        return inner is None or (isinstance(value, list) and all(inner(x) for x in value))
    check = _TYPE_CHECKS.get(ts_type)
    return check is None or bool(check(value))


def _input_names(inputs: list[TensorInfo], src: str) -> set[str]:
    """The graph inputs' names, each declared once."""
    defined: set[str] = set()
    for t in inputs:
        if t.name in defined:
            raise _DamagedJsonError(f"{src}: graph input '{t.name}' is declared twice")
        defined.add(t.name)
    return defined


#: Non-tensor graph input types (version 2), with the dtype and rank they are given as.
INPUT_TYPES = {"int": ("int64", 0), "float": ("float64", 0), "bool": ("bool", 0),
                "List[int]": ("int64", 1), "List[float]": ("float64", 1), "List[bool]": ("bool", 1)}


def _input_types(doc: dict[str, Any], inputs: list[TensorInfo], src: str) -> dict[str, str]:
    """Each graph input's TorchScript type: ``Tensor`` unless its entry gives a ``type``."""
    out = {}
    for t, raw in zip(inputs, doc.get("inputs") or []):
        ts_type = raw.get("type", "Tensor")
        if ts_type != "Tensor":
            want = INPUT_TYPES.get(ts_type)
            shape_ok = want is not None and t.shape is not None and len(t.shape) == want[1]
            if want is None or not shape_ok or t.dtype != _np_dtype(want[0], src):
                raise _DamagedJsonError(
                    f"{src}: graph input '{t.name}' of type {ts_type!r} must be one of "
                    f"{', '.join(INPUT_TYPES)}, given as a 0-d or 1-d tensor of its dtype")
        out[t.name] = ts_type
    return out


def _producer(doc: dict[str, Any], src: str) -> dict[str, str]:
    """The document's ``producer`` object (torch and opbridge versions, export mode) as metadata."""
    producer = doc.get("producer") or {}
    if not isinstance(producer, dict):
        raise ModelFormatError(f"{src}: 'producer' must be an object, got {json.dumps(producer)[:60]}",
                               hint="the JSON was edited or damaged; re-export the model")
    return {str(k): str(v) for k, v in producer.items()}


def parse_torchscript_json(path: str | os.PathLike[str]) -> OriginGraph:
    """Read ``path`` (``*.ts.json``) and its weights into an OriginGraph (framework torchscript)."""
    p = Path(path)
    src = f"[torchscript] '{p}'"
    doc, version = _read_document(p, src)
    weights = _weights_beside(doc, p, src)
    inputs = _tensor_infos(doc, "inputs", src)
    outputs = _tensor_infos(doc, "outputs", src)
    reader = _NodeReader(src, weights, _input_names(inputs, src))
    nodes = reader.read_all(doc.get("nodes"))
    _argument_view(nodes, _input_types(doc, inputs, src))
    for t in outputs:
        if t.name not in reader.defined:
            raise ModelFormatError(
                f"{src}: graph output '{t.name}' is not defined by any node",
                hint="the JSON was edited or truncated; re-export the model",
            )
    check_block_writes(nodes)
    nodes, out_names = functionalize(nodes, [t.name for t in outputs])
    outputs = [replace(t, name=n) for t, n in zip(outputs, out_names)]
    return OriginGraph(
        name=str(doc.get("name", p.name)),
        framework=Framework.TORCHSCRIPT,
        nodes=nodes, inputs=inputs, outputs=outputs, tensors=reader.tensors,
        opsets={"": version, "aten": version, "prim": version, "opbridge": version}, source=str(p),
        metadata=_producer(doc, src),
    )
