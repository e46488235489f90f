"""Write a torch module as TorchScript-json (docs/torchscript-json.md): trace or script, freeze,
inline, then walk the graph.

Needs torch, imported lazily so that ``import opbridge`` works without it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ModelFormatError, OpbridgeError, first_line
from ..parsers.torchscript_json import DTYPE_NAMES, FORMAT, INPUT_TYPES
from .torchscript_graph import TorchExportError, bind_absent_optionals, buffers_kept, frozen_graph, type_str

#: The version written when the file needs none of version 2's additions (so older readers
#: still read it); version 2 adds node ``blocks`` (prim::If / prim::Loop) and non-tensor graph
#: inputs (int, float, bool and lists of them).
FORMAT_VERSION = 1
FORMAT_VERSION_BLOCKS = 2

def import_torch() -> Any:
    """The torch module, or an OpbridgeError saying how to install it."""
    try:
        import torch
    except ImportError:
        raise OpbridgeError(
            "exporting TorchScript-json needs torch, which is not installed",
            hint="pip install 'opbridge[torch]' (torch==2.13.0); converting a .ts.json needs no torch",
        ) from None
    return torch


def weights_path_for(json_path: str | os.PathLike[str]) -> Path:
    """``model.ts.json`` -> ``model.ts.safetensors`` (any other name: ``NAME.safetensors``)."""
    p = Path(json_path)
    stem = p.name[: -len(".json")] if p.name.endswith(".json") else p.name
    return p.with_name(stem + ".safetensors")


def _dtype_name(dtype: Any) -> str:
    name = str(dtype).replace("torch.", "")
    if name not in DTYPE_NAMES:
        raise TorchExportError(
            f"tensor dtype {name} is not supported by TorchScript-json",
            hint=f"use one of {', '.join(DTYPE_NAMES)}",
        )
    return name


def _scope(node: Any) -> str:
    """``layer1(Sequential).0(Blk).conv2(Conv2d).SELF(Conv2d)`` -> ``layer1.0.conv2``."""
    try:
        hier = node.getModuleHierarchy()
    except RuntimeError:
        hier = ""
    parts = []
    for part in hier.split("."):
        name = part.split("(", 1)[0]
        if name and name not in ("SELF", "UNKNOWN_INSTANCE"):
            parts.append(name)
    return ".".join(parts)


#: Frames of opbridge itself (the exporter's own trace call) are not the node's source.
_SKIP_DIRS = (str(Path(__file__).resolve().parents[1]),)
_FRAME = re.compile(r'(?:File "([^"]+)", line (\d+))|(?:^(\S[^\n(]*)\((\d+)\): )', re.M)


def _source(node: Any) -> str:
    """``file.py:line`` of the innermost frame outside torch itself, or ``""``."""
    try:
        text = node.sourceRange()
    except RuntimeError:
        return ""
    for m in _FRAME.finditer(text):
        fname, line = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        fname = fname.strip()
        if fname.startswith(_SKIP_DIRS) or f"{os.sep}torch{os.sep}" in fname or fname.startswith("<"):
            continue
        return f"{os.path.basename(fname)}:{line}"
    return ""


class _Writer:
    """Encodes one graph's nodes and collects the tensors that go into safetensors."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.tensors: dict[str, Any] = {}
        self.metadata: dict[str, str] = {}
        #: whether the file needs version 2 (blocks or non-tensor graph inputs)
        self.uses_blocks = False

    def tensor_ref(self, key: str, t: Any) -> dict[str, str]:
        torch = self.torch
        t = t.detach().to("cpu").contiguous()
        _dtype_name(t.dtype)
        if t.dtype == torch.bfloat16:
            self.metadata[f"{key}.dtype"] = "bfloat16"
            arr = t.view(torch.int16).numpy().view("uint16").copy()
        else:
            arr = t.numpy().copy()
        self.tensors[key] = arr
        return {"tensor": key}

    def encode(self, v: Any, key: str, where: str) -> Any:
        """A constant as JSON (see the 'Constants' table of the format doc)."""
        torch = self.torch
        if v is None or isinstance(v, (bool, int, str)):
            return v
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            return {"float": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
        if isinstance(v, torch.Tensor):
            return self.tensor_ref(key, v)
        if isinstance(v, torch.device):
            return {"device": str(v)}
        if isinstance(v, torch.dtype):  # ScalarType as torch numbers it
            return _SCALAR_TYPES.get(str(v).replace("torch.", ""), str(v))
        if isinstance(v, tuple):
            return {"tuple": [self.encode(x, f"{key}.{i}", where) for i, x in enumerate(v)]}
        if isinstance(v, list):
            return [self.encode(x, f"{key}.{i}", where) for i, x in enumerate(v)]
        raise TorchExportError(
            f"{where}: constant of type {type(v).__name__} cannot be written to TorchScript-json",
            hint="make the module hold tensors, numbers, lists or strings only",
        )


_SCALAR_TYPES = {"uint8": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "float16": 5,
                 "float32": 6, "float64": 7, "bool": 11, "bfloat16": 15}


def _node_names(nodes: Sequence[Any], scopes: list[str]) -> list[str]:
    """Unique, readable node names from module paths (see the format doc, node 'name')."""
    per_scope: dict[str, int] = {}
    for n, s in zip(nodes, scopes):
        if s and n.kind() != "prim::Constant":
            per_scope[s] = per_scope.get(s, 0) + 1
    used: set[str] = set()
    names = []
    for n, s in zip(nodes, scopes):
        short = n.kind().split("::", 1)[-1]
        if n.kind() == "prim::Constant":
            base = f"const_{n.output().debugName()}" if n.outputsSize() == 1 else "const"
        elif s and per_scope.get(s) == 1:
            base = s
        elif s:
            base = f"{s}/{short}"
        else:
            first = n.outputsAt(0).debugName() if n.outputsSize() else "out"
            base = f"{short}_{first}"
        name, i = base, 1
        while name in used:
            name = f"{base}_{i}"
            i += 1
        used.add(name)
        names.append(name)
    return names


def _flatten(obj: Any, torch: Any) -> list[Any]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _flatten(o, torch)]
    raise TorchExportError(
        f"the module returned a {type(obj).__name__}; TorchScript-json graph outputs are tensors "
        "(or tuples/lists of them)",
        hint="return the tensors themselves (a tuple or list of them, not a dict or an object); wrap the "
             "module in one whose forward() does")


def _flatten_outputs(graph: Any) -> list[Any]:
    """Graph return values with TupleConstruct/ListConstruct expanded into their elements."""
    out: list[Any] = []

    def walk(v: Any) -> None:
        node = v.node()
        if node.kind() in ("prim::TupleConstruct", "prim::ListConstruct") and type_str(v) != "Tensor":
            for i in node.inputs():
                walk(i)
        else:
            out.append(v)

    for v in graph.outputs():
        walk(v)
    return out


def _dumps(doc: dict[str, Any]) -> str:
    """The document with one line per top-level entry and per node: readable and diffable."""
    lines = []
    for key, value in doc.items():
        if isinstance(value, list) and value:
            items = ",\n".join(f"  {json.dumps(v, allow_nan=False)}" for v in value)
            lines.append(f' "{key}": [\n{items}\n ]')
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


@dataclass
class _GraphIO:
    """What the node walk needs to know about the graph's boundary: its tensor inputs (one per
    example input), the objects ``prim::GetAttr`` nodes read from (by value name; the walk adds
    each submodule it resolves), and the names graph inputs get in the file."""

    inputs: list[Any]
    attr_objects: dict[str, Any] = field(default_factory=dict)
    rename: dict[str, str] = field(default_factory=dict)
    #: module value name -> its attribute path from the root module (".layer1.0")
    attr_paths: dict[str, str] = field(default_factory=dict)
    #: attribute path -> debug name of the first GetAttr that read it
    attr_values: dict[str, str] = field(default_factory=dict)

    def name_of(self, value: Any) -> str:
        return self.name_of_debug(value.debugName())

    def name_of_debug(self, debug_name: str) -> str:
        return self.rename.get(debug_name, debug_name)


def _is_scalar_arg(v: Any) -> bool:
    """An int, float or bool, or a flat list of them (a forward() argument that is no tensor)."""
    if isinstance(v, list):
        return len(v) > 0 and all(isinstance(x, (bool, int, float)) for x in v)
    return isinstance(v, (bool, int, float))


def _example_tuple(torch: Any, example_inputs: Any) -> tuple[Any, ...]:
    """``example_inputs`` as a tuple (a bare tensor is one input): tensors, or ints, floats,
    bools and lists of them for forward() arguments typed so."""
    example = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    for i, t in enumerate(example):
        if not isinstance(t, torch.Tensor) and not _is_scalar_arg(t):
            raise TorchExportError(
                f"example input {i} is a {type(t).__name__}, not a tensor, int, float, bool or "
                "non-empty list of them",
                hint="make that forward() argument one of those types, or fix its value inside "
                     "the module (a constant or an attribute)")
    return example


def _check_traceable(torch: Any, module: Any, example: tuple[Any, ...], mode: str) -> None:
    """Tracing records tensors only: a number argument would be baked in, so it is refused."""
    scripted = isinstance(module, (torch.jit.ScriptModule, torch.jit.ScriptFunction))
    if mode == "trace" and not scripted:
        for i, t in enumerate(example):
            if not isinstance(t, torch.Tensor):
                raise TorchExportError(
                    f"example input {i} ({type(t).__name__} {t!r}): tracing records tensors only",
                    hint="script the module (mode='script') so that the argument stays an input "
                         "and its if / for keep their blocks")


def _graph_io(torch: Any, graph: Any, scripted: Any, given: int,
              input_names: Sequence[str] | None) -> _GraphIO:
    """The graph's inputs matched to the ``given`` example inputs, and the names they get.

    A leading module input ('self') that only ``prim::GetAttr`` nodes read is dropped (its
    attributes are written as constants); trailing Optional arguments are bound to None.
    """
    g_inputs = [v for v in graph.inputs()]
    attr_objects: dict[str, Any] = {}
    if g_inputs and type_str(g_inputs[0]) != "Tensor" and all(
        u.user.kind() == "prim::GetAttr" for u in g_inputs[0].uses()
    ):
        attr_objects[g_inputs[0].debugName()] = scripted
        g_inputs = g_inputs[1:]  # the module itself ('self'): only attributes are read from it
    bind_absent_optionals(torch, graph, g_inputs, given)
    g_inputs = g_inputs[:given]
    if len(g_inputs) != given:
        raise TorchExportError(
            f"the graph takes {len(g_inputs)} inputs but {given} example inputs were given",
            hint="pass one example tensor per forward() argument",
        )
    return _GraphIO(g_inputs, attr_objects, _input_renames(graph, g_inputs, input_names))


def _input_renames(graph: Any, g_inputs: list[Any], input_names: Sequence[str] | None) -> dict[str, str]:
    """Debug name -> file name for graph inputs: ``input_names`` when given, else the debug name
    without TorchScript's ``.N`` suffix; a name some other value already has is not taken."""
    rename: dict[str, str] = {}
    taken = {v.debugName() for n in graph.nodes() for v in n.outputs()}
    taken |= {v.debugName() for v in g_inputs}  # another input may keep the name unrenamed
    for i, v in enumerate(g_inputs):
        if type_str(v) != "Tensor" and type_str(v) not in INPUT_TYPES:
            raise TorchExportError(
                f"graph input {i} '{v.debugName()}' is a {type_str(v)}, not a Tensor",
                hint=f"forward() arguments may be tensors or {', '.join(INPUT_TYPES)}")
        want = input_names[i] if input_names is not None else re.sub(r"\.\d+$", "", v.debugName())
        if want != v.debugName() and want not in taken and want not in rename.values():
            rename[v.debugName()] = want
    return rename


def _node_records(torch: Any, nodes_in: Any, io: _GraphIO, writer: _Writer,
                  prefix: str = "") -> list[dict[str, Any]]:
    """The ``nodes`` list of the file (or of a block, names under ``prefix``), in graph order
    (module-valued GetAttr nodes are resolved away)."""
    nodes = list(nodes_in)
    scopes = [_scope(n) for n in nodes]
    names = [prefix + n for n in _node_names(nodes, scopes)]
    out_nodes: list[dict[str, Any]] = []
    for n, scope, name in zip(nodes, scopes, names):
        rec = _node_record(torch, n, scope, name, io, writer)
        if rec is not None:
            out_nodes.append(rec)
    return out_nodes


def _block_records(torch: Any, n: Any, name: str, io: _GraphIO, writer: _Writer) -> list[dict[str, Any]]:
    """A prim::If's two branches or a prim::Loop's body: block inputs (a loop body's iteration
    number and loop-carried values), their types, the block's nodes and its outputs."""
    kind = n.kind()
    if kind not in ("prim::If", "prim::Loop"):
        raise TorchExportError(
            f"[torchscript] node '{name}' ({kind}): only prim::If and prim::Loop blocks can be "
            "written to TorchScript-json",
            hint="trace the module (mode='trace') or rewrite that part without it")
    blocks = []
    for k, b in enumerate(n.blocks()):
        blocks.append({
            "inputs": [io.name_of(v) for v in b.inputs()],
            "input_types": [type_str(v) for v in b.inputs()],
            "nodes": _node_records(torch, b.nodes(), io, writer, prefix=f"{name}/block{k}/"),
            "outputs": [io.name_of(v) for v in b.outputs()],
        })
    writer.uses_blocks = True
    return blocks


def _node_record(torch: Any, n: Any, scope: str, name: str, io: _GraphIO,
                 writer: _Writer) -> dict[str, Any] | None:
    """One node as written to the file, or None for a GetAttr that yields a submodule."""
    kind = n.kind()
    where = f"[torchscript] node '{name}' ({kind})"
    rec: dict[str, Any] = {
        "name": name, "kind": kind,
        "inputs": [io.name_of(v) for v in n.inputs()],
        "outputs": [io.name_of(v) for v in n.outputs()],
        "types": [type_str(v) for v in n.outputs()],
    }
    if scope:
        rec["scope"] = scope
    src = _source(n)
    if src:
        rec["source"] = src
    if list(n.blocks()):
        rec["blocks"] = _block_records(torch, n, name, io, writer)
    if kind == "prim::Constant":
        out = n.output()
        rec["value"] = writer.encode(out.toIValue(), out.debugName(), where)
    elif kind == "prim::GetAttr":
        return _attribute_record(torch, n, rec, io, writer, where)
    return rec


def _attribute_record(torch: Any, n: Any, rec: dict[str, Any], io: _GraphIO, writer: _Writer,
                      where: str) -> dict[str, Any] | None:
    """A ``prim::GetAttr`` of a buffer freezing kept as an attribute (a mutated one), with its
    value; None for a submodule (later GetAttr nodes are written resolved) or a repeated read."""
    obj = io.attr_objects.get(n.input().debugName())
    if obj is None:
        raise TorchExportError(f"{where}: attribute '{n.s('name')}' of an unknown object",
                               hint="the module reads an attribute of an object TorchScript cannot follow: "
                                    "store it as a buffer or parameter of a submodule, or export with "
                                    "mode='script'")
    value = getattr(obj, n.s("name"))
    out = n.output().debugName()
    path = f"{io.attr_paths.get(n.input().debugName(), '')}.{n.s('name')}"
    # a frozen module's submodules come back as torch._C.ScriptModule, no nn.Module
    if isinstance(value, (torch.nn.Module, torch._C.ScriptModule)):
        io.attr_objects[out] = value
        io.attr_paths[out] = path
        return None
    first = io.attr_values.setdefault(path, out)
    if first != out:
        # the same attribute read again is the same tensor: a write through one read
        # (self.buf.mul_(2)) must reach the others, so they all take the first read's name
        io.rename[out] = io.name_of_debug(first)
        return None
    rec["inputs"] = []
    rec["attrs"] = {"name": n.s("name")}
    rec["value"] = writer.encode(value, out, where)
    return rec


def _boundary_entries(graph: Any, io: _GraphIO, example: tuple[Any, ...],
                      results: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The file's ``inputs`` and ``outputs``: name, dtype and shape of each graph input and output
    (taken from the example inputs and the tensors the module returned for them)."""
    outputs = []
    for v, t in zip(_flatten_outputs(graph), results):
        outputs.append({"name": io.name_of(v), "dtype": _dtype_name(t.dtype), "shape": list(t.shape)})
    if len(outputs) != len(results):
        raise TorchExportError(
            f"the graph returns {len(outputs)} values but the module returned {len(results)} tensors",
            hint="return tensors only (a tuple or list of them, no None or numbers) from forward(), or "
                 "export with the other mode")
    inputs = [_input_entry(io.name_of(v), type_str(v), t) for v, t in zip(io.inputs, example)]
    return inputs, outputs


def _input_entry(name: str, ts_type: str, example: Any) -> dict[str, Any]:
    """A graph input's entry: a tensor's dtype and shape, or for an int/float/bool (list)
    argument its TorchScript ``type`` and the 0-d or 1-d tensor it is given as."""
    if ts_type == "Tensor":
        return {"name": name, "dtype": _dtype_name(example.dtype), "shape": list(example.shape)}
    dtype, rank = INPUT_TYPES[ts_type]
    shape = [len(example)] if rank == 1 and isinstance(example, list) else []
    return {"name": name, "dtype": dtype, "shape": shape, "type": ts_type}


def _module_name(torch: Any, module: Any) -> str:
    if isinstance(module, torch.jit.ScriptModule):
        return getattr(module, "original_name", None) or "Module"
    return type(module).__name__


def _write_files(json_path: Path, doc: dict[str, Any], writer: _Writer) -> None:
    """Write the JSON document and, when there are tensors, the safetensors file it names."""
    from safetensors.numpy import save_file

    from ..ir.io import atomic_write

    try:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        # each file written beside it and renamed: an interrupted export leaves no half file
        if writer.tensors:
            atomic_write(weights_path_for(json_path),
                         lambda tmp: save_file(writer.tensors, tmp, metadata=writer.metadata or None))
        atomic_write(json_path, lambda tmp: Path(tmp).write_text(_dumps(doc), encoding="utf-8"))
    except OSError as err:
        raise ModelFormatError(f"cannot write '{json_path}': {err.strerror or err}",
                               hint="check that the output folder exists and is writable, and that the "
                                    "disk is not full") from None


def _run_example(scripted: Any, example: tuple[Any, ...]) -> Any:
    """The module's result on the example inputs; a wrong type of example input is an error
    naming the argument (torch says which, on its first line)."""
    try:
        return scripted(*example)
    except RuntimeError as err:
        raise TorchExportError(
            f"running the module on the example inputs failed: {first_line(err)}",
            hint="give one example per forward() argument, in order: a tensor for a Tensor, a "
                 "Python int / float / bool (or a list of them) for those types") from None


def export_torchscript(
    module: Any,
    example_inputs: Any,
    path: str | os.PathLike[str],
    *,
    mode: str = "trace",
    input_names: Sequence[str] | None = None,
    optimize: bool = False,
) -> Path:
    """Write ``module`` as ``path`` (TorchScript-json) and its tensors beside it.

    ``module`` is an ``nn.Module`` (traced on ``example_inputs``, or scripted with
    ``mode="script"``), a ``ScriptModule`` (e.g. from ``torch.jit.load``) or a scripted function.
    ``example_inputs`` is a tensor or a tuple of tensors; their dtypes and shapes become the
    graph inputs'. A scripted ``forward()`` argument typed int, float, bool or a list of them
    takes a Python value in that tuple and becomes a 0-d (1-d for a list) int64/float64/bool
    graph input; ``prim::If`` / ``prim::Loop`` on run-time values are written with their
    blocks. ``optimize=True`` lets ``torch.jit.freeze`` fold BatchNorm into convolutions.
    Returns the path of the JSON file.
    """
    torch = import_torch()
    from .. import __version__

    example = _example_tuple(torch, example_inputs)
    _check_traceable(torch, module, example, mode)
    with buffers_kept(torch, module):
        scripted, graph, used = frozen_graph(torch, module, example, mode, optimize)
        # the buffers forward() writes into are written to the file as they were before this run
        with torch.no_grad(), buffers_kept(torch, scripted):
            result = _run_example(scripted, example)
    results = _flatten(result, torch)
    io = _graph_io(torch, graph, scripted, len(example), input_names)
    writer = _Writer(torch)
    out_nodes = _node_records(torch, graph.nodes(), io, writer)
    inputs, outputs = _boundary_entries(graph, io, example, results)
    json_path = Path(path)
    v2 = writer.uses_blocks or any("type" in e for e in inputs)
    doc = {
        "format": FORMAT, "version": FORMAT_VERSION_BLOCKS if v2 else FORMAT_VERSION, "name": _module_name(torch, module),
        "producer": {"torch": torch.__version__.split("+")[0], "opbridge": __version__, "mode": used},
        "inputs": inputs, "outputs": outputs, "nodes": out_nodes,
    }
    if writer.tensors:
        doc["weights"] = weights_path_for(json_path).name
    _write_files(json_path, doc, writer)
    return json_path
