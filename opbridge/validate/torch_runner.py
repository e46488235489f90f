"""The origin run of a TorchScript-json model: its nodes executed one by one with torch's kernels.

The JSON (docs/torchscript-json.md) is a frozen, inlined TorchScript graph, so every node is an
``aten::``/``prim::`` op with its arguments in schema order; calling ``torch.ops.aten.<op>`` on
them runs exactly the kernels TorchScript would. This is independent of opbridge's TorchScript
mappings, which is what makes it a reference. Needs torch (an optional extra).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import first_line
from .runners import OriginRunError, RunOutput


def _tensor(weights: Path | None, key: str, cache: dict[str, Any]) -> Any:
    import torch
    from safetensors import safe_open

    if weights is None or not weights.is_file():
        raise OriginRunError(f"[torchscript] tensor '{key}': the weights file '{weights}' is missing")
    if "file" not in cache:
        cache["file"] = safe_open(str(weights), framework="numpy")
        cache["meta"] = cache["file"].metadata() or {}
    arr = cache["file"].get_tensor(key)
    if cache["meta"].get(f"{key}.dtype") == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.array(arr))


def _decode(v: Any, weights: Path | None, cache: dict[str, Any]) -> Any:
    """A JSON-encoded constant as the Python/torch value TorchScript would pass."""
    import torch

    if isinstance(v, list):
        return [_decode(x, weights, cache) for x in v]
    if isinstance(v, dict):
        if "tensor" in v:
            return _tensor(weights, v["tensor"], cache)
        if "float" in v:
            return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}[v["float"]]
        if "tuple" in v:
            return tuple(_decode(x, weights, cache) for x in v["tuple"])
        if "device" in v:
            return torch.device(v["device"])
        raise OriginRunError(f"[torchscript] constant {v!r}: unknown encoding")
    return v


def _call(kind: str, args: list[Any]) -> Any:
    import torch

    if kind in ("prim::ListConstruct",):
        return list(args)
    if kind == "prim::TupleConstruct":
        return tuple(args)
    if kind in ("prim::ListUnpack", "prim::TupleUnpack"):
        return tuple(args[0])
    if kind == "prim::TupleIndex" or kind == "aten::__getitem__":
        return args[0][args[1]]
    if kind == "prim::NumToTensor":
        return torch.scalar_tensor(args[0])
    if kind == "prim::Uninitialized":  # what a raising branch gives: never read
        return None
    if kind == "prim::RaiseException":
        raise OriginRunError(f"the model raises {str(args[1]).rpartition('.')[2]}: {args[0]}")
    ns, _, name = kind.partition("::")
    try:
        packet = getattr(getattr(torch.ops, ns), name)
    except (AttributeError, RuntimeError) as err:
        raise OriginRunError(f"torch has no op {kind}") from err
    number_overload = _number_overload(packet, args)
    if number_overload is not None:
        return number_overload(*args)
    try:
        return packet(*args)
    except (RuntimeError, TypeError) as err:
        # a TorchScript graph passes keyword-only arguments (add's alpha) by position
        return _call_by_schema(packet, args, err)


#: Python number type -> the name TorchScript's number overloads use for it.
_NUMBER_NAMES = {bool: "bool", int: "int", float: "float"}


def _number_overload(packet: Any, args: list[Any]) -> Any:
    """The overload TorchScript picks for an op on Python numbers (``aten::eq.int`` for two
    ints), or None. Called on the packet, torch tries overloads in its own order and may take
    ``eq.bool`` for two ints, which compares them as bools (8000 == 16000 is True)."""
    if not args or not all(type(a) in _NUMBER_NAMES for a in args):
        return None
    names = [_NUMBER_NAMES[type(a)] for a in args]
    wanted = names[0] if len(set(names)) == 1 else "_".join(names)
    return getattr(packet, wanted) if wanted in packet.overloads() else None


def _call_by_schema(packet: Any, args: list[Any], first: BaseException) -> Any:
    """Call the first overload of ``packet`` whose schema binds ``args`` (in schema order, the
    keyword-only ones by name); ``out=`` overloads are skipped."""
    for overload in packet.overloads():
        op = getattr(packet, overload)
        params = op._schema.arguments
        if len(args) > len(params) or any(getattr(p, "is_out", False) for p in params):
            continue
        pos = [v for p, v in zip(params, args) if not p.kwarg_only]
        kw = {p.name: v for p, v in zip(params, args) if p.kwarg_only}
        try:
            return op(*pos, **kw)
        except (RuntimeError, TypeError):
            continue
    raise first


def _to_numpy(t: Any) -> np.ndarray:
    import torch

    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return t.numpy().copy()


def run_torch_json(path: str | Path, feeds: Mapping[str, np.ndarray]) -> RunOutput:
    """Run a ``.ts.json`` model node by node with torch; every tensor value of the top-level
    graph is returned by its TorchScript debug name (block values are not: a loop's change
    every iteration)."""
    import torch

    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as err:
        raise OriginRunError(f"[torchscript] '{p}': cannot read it: {err}") from err
    run = _Run(p.with_name(doc["weights"]) if doc.get("weights") else None)
    for t in doc.get("inputs", []):
        if t["name"] not in feeds:
            raise OriginRunError(f"[torchscript] input '{t['name']}' was not fed")
        if "type" in t:  # an int / float / bool (list) argument is a Python value to TorchScript
            run.env[t["name"]] = np.asarray(feeds[t["name"]]).tolist()
        else:
            run.env[t["name"]] = torch.from_numpy(np.ascontiguousarray(feeds[t["name"]]))
    with torch.no_grad():
        run.nodes(doc.get("nodes", []), record=True)
    return RunOutput("torch", run.tensors)


class _Run:
    """The values of one run, by name; blocks (prim::If, prim::Loop) run as TorchScript runs
    them, reading the values around them."""

    def __init__(self, weights: Path | None) -> None:
        self.weights = weights
        self.cache: dict[str, Any] = {}
        self.env: dict[str, Any] = {}
        self.tensors: dict[str, np.ndarray] = {}

    def nodes(self, nodes: list[dict[str, Any]], record: bool) -> None:
        import torch

        for node in nodes:
            kind, outs = node["kind"], node["outputs"]
            where = f"[torchscript] node '{node.get('name')}' ({kind})"
            if "value" in node:
                result: Any = _decode(node["value"], self.weights, self.cache)
            elif "blocks" in node:
                result = self.control(node)
            else:
                try:
                    result = _call(kind, [self.env[i] for i in node["inputs"]])
                except OriginRunError as err:
                    raise OriginRunError(f"{where}: {err.message}") from err
                except Exception as err:
                    raise OriginRunError(f"{where}: torch failed: {first_line(err, named=True)}") from err
            values = [result] if len(outs) == 1 else list(result)
            for name, val in zip(outs, values):
                self.env[name] = val
                if record and isinstance(val, torch.Tensor) and kind != "prim::Constant":
                    self.tensors[name] = _to_numpy(val)

    def block(self, block: dict[str, Any], args: list[Any]) -> list[Any]:
        for name, val in zip(block["inputs"], args):
            self.env[name] = val
        self.nodes(block["nodes"], record=False)
        return [self.env[o] for o in block["outputs"]]

    def control(self, node: dict[str, Any]) -> Any:
        """prim::If(cond) -> the outputs of the block it takes; prim::Loop(trip, cond,
        carried...) -> the carried values after the last iteration."""
        args = [self.env[i] for i in node["inputs"]]
        blocks = node["blocks"]
        if node["kind"] == "prim::If":
            outs = self.block(blocks[0 if bool(args[0]) else 1], [])
        elif node["kind"] == "prim::Loop":
            trip, go, outs = int(args[0]), bool(args[1]), list(args[2:])
            i = 0
            while go and i < trip:
                go_next, *outs = self.block(blocks[0], [i, *outs])
                go, i = bool(go_next), i + 1
        else:
            raise OriginRunError(f"[torchscript] node '{node.get('name')}' ({node['kind']}): "
                                 "has blocks, which only prim::If and prim::Loop have")
        return outs[0] if len(outs) == 1 else outs
