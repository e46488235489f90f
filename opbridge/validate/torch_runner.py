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
    ns, _, name = kind.partition("::")
    try:
        packet = getattr(getattr(torch.ops, ns), name)
    except (AttributeError, RuntimeError) as err:
        raise OriginRunError(f"torch has no op {kind}") from err
    try:
        return packet(*args)
    except (RuntimeError, TypeError) as err:
        # a TorchScript graph passes keyword-only arguments (add's alpha) by position
        return _call_by_schema(packet, args, err)


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
    """Run a ``.ts.json`` model node by node with torch; every tensor value is returned by its
    TorchScript debug name."""
    import torch

    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, ValueError) as err:
        raise OriginRunError(f"[torchscript] '{p}': cannot read it: {err}") from err
    weights = p.with_name(doc["weights"]) if doc.get("weights") else None
    cache: dict[str, Any] = {}
    env: dict[str, Any] = {}
    for t in doc.get("inputs", []):
        if t["name"] not in feeds:
            raise OriginRunError(f"[torchscript] input '{t['name']}' was not fed")
        env[t["name"]] = torch.from_numpy(np.ascontiguousarray(feeds[t["name"]]))
    tensors: dict[str, np.ndarray] = {}
    with torch.no_grad():
        for node in doc.get("nodes", []):
            kind, outs = node["kind"], node["outputs"]
            where = f"[torchscript] node '{node.get('name')}' ({kind})"
            if "value" in node:
                result: Any = _decode(node["value"], weights, cache)
            else:
                try:
                    result = _call(kind, [env[i] for i in node["inputs"]])
                except OriginRunError as err:
                    raise OriginRunError(f"{where}: {err.message}") from err
                except Exception as err:
                    raise OriginRunError(f"{where}: torch failed: {type(err).__name__}: "
                                         f"{str(err).splitlines()[0] if str(err) else ''}") from err
            values = [result] if len(outs) == 1 else list(result)
            for name, val in zip(outs, values):
                env[name] = val
                if isinstance(val, torch.Tensor) and kind != "prim::Constant":
                    tensors[name] = _to_numpy(val)
    return RunOutput("torch", tensors)
