"""``convert()``: a model file (or an in-memory model) -> a verified IR graph.

The parser is chosen by the file's name ending in :data:`PARSERS`; each frontend adds one
line there. A parser is ``fn(path, weights=None) -> OriginGraph``, named "module:function"
so that a frontend is imported only when a file of its kind is converted. A parser that also
takes ``input_shapes`` gets them (Caffe uses them to replace a declared deploy batch and to
shape data layers); the converter applies them to every parser's result as well.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ModelFormatError, ShapeError
from .ir.graph import Graph
from .ir.passes import DEFAULT_PASSES, GraphPass, optimize
from .ir.types import format_shape, numel
from .mappers import DEFAULT_MAPPINGS, MappingRegistry, convert_origin_graph
from .parsers.origin import OriginGraph
from .plugins_loader import load_plugins

#: File-name ending -> "module:function" of the parser for it. Longest ending wins.
PARSERS: dict[str, str] = {
    ".onnx": "opbridge.parsers.onnx:parse_file",
    ".ts.json": "opbridge.parsers.torchscript_json:parse_file",
    ".prototxt": "opbridge.parsers.caffe:parse_file",
}


def model_endings() -> tuple[str, ...]:
    """The endings of the files read as a model: every ending with a parser, and .obir."""
    return (*PARSERS, ".obir")


def parser_for(path: str | os.PathLike[str]) -> Callable[..., OriginGraph]:
    """The parser function for a model file, by its name ending."""
    name = Path(path).name.lower()
    for ending in sorted(PARSERS, key=len, reverse=True):
        if name.endswith(ending):
            module, _, func = PARSERS[ending].partition(":")
            return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]
    raise ModelFormatError(
        f"'{path}': unknown model kind",
        hint=f"opbridge reads files ending in {', '.join(sorted(PARSERS))}",
    )


def _takes_input_shapes(fn: Callable[..., OriginGraph]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False
    return "input_shapes" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def parse(model: Any, *, weights: str | os.PathLike[str] | None = None,
          input_shapes: Mapping[str, Sequence[int]] | None = None) -> OriginGraph:
    """Parse a model file, an ``onnx.ModelProto`` or pass an OriginGraph through.

    ``input_shapes`` go to the file's parser when it takes them (see :data:`PARSERS`).
    """
    if isinstance(model, OriginGraph):
        return model
    if isinstance(model, (str, os.PathLike)):
        fn = parser_for(model)
        if input_shapes and _takes_input_shapes(fn):
            return fn(model, weights=weights, input_shapes=dict(input_shapes))
        return fn(model, weights=weights)
    try:
        import onnx
    except ImportError:  # pragma: no cover - onnx is a dependency
        pass
    else:
        if isinstance(model, onnx.ModelProto):
            from .parsers.onnx import parse_model

            return parse_model(model)
    raise ModelFormatError(
        f"cannot convert a {type(model).__name__}",
        hint="pass a model file path, an onnx.ModelProto or an OriginGraph",
    )


def bind_input_values(origin: OriginGraph, values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``values`` (input name -> number, list or array) as arrays of the inputs' declared dtype
    and shape; a name that is not an input, or a value that does not fit, is an error naming it."""
    declared = {t.name: t for t in origin.inputs}
    out: dict[str, np.ndarray] = {}
    for name, value in values.items():
        t = declared.get(name)
        if t is None:
            close = difflib.get_close_matches(name, list(declared), n=1)
            raise ShapeError(f"input_values (--input-value) names '{name}', which is not an input of the "
                             "model", hint=(f"did you mean '{close[0]}'? " if close else "")
                             + f"the model's inputs are: {', '.join(declared) or 'none'}")
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            raise ShapeError(f"input_values['{name}']: not a number or a rectangular array",
                             hint="give a number, or nested lists of equal lengths") from None
        if t.dtype is not None:
            want = np.dtype(t.dtype)
            try:  # OverflowError: a Python int past the dtype's range (numpy holds it as object)
                cast = arr.astype(want)
            except (TypeError, ValueError, OverflowError):
                raise ShapeError(f"input_values['{name}'] = {value!r}: input '{name}' is {want}, and "
                                 f"the value is not a number or does not fit {want}", hint=f"give a number or an array of {want}"
                                 ) from None
            if arr.dtype.kind in "fc" and want.kind in "iub" and not np.array_equal(cast, arr):
                raise ShapeError(f"input_values['{name}'] = {value!r}: input '{name}' is {want}, "
                                 "and the value is not a whole number", hint="give an integer")
            arr = cast
        shape = t.shape
        if shape is not None and all(isinstance(d, int) for d in shape):
            if arr.size != numel(shape):
                raise ShapeError(f"input_values['{name}'] has {arr.size} element(s); input '{name}' "
                                 f"is declared {format_shape(shape)}",
                                 hint=f"give {numel(shape)} value(s)")
            arr = arr.reshape(tuple(int(d) for d in shape))
        elif shape is not None and arr.ndim != len(shape):
            if arr.size == 1 and all(d == 1 or isinstance(d, str) for d in shape):
                arr = arr.reshape((1,) * len(shape))
            else:
                raise ShapeError(f"input_values['{name}'] has shape {list(arr.shape)}; input '{name}' "
                                 f"is declared {format_shape(shape)} (rank {len(shape)})",
                                 hint=f"give an array of rank {len(shape)} ({name}=FILE.npy on the "
                                 "command line), or fix its symbolic dims with --input-shape / "
                                 "input_shapes")
        out[name] = arr
    return out


def convert(
    model: Any,
    *,
    weights: str | os.PathLike[str] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    plugins: Iterable[str | os.PathLike[str]] = (),
    passes: Iterable[str | GraphPass] = DEFAULT_PASSES,
    registry: MappingRegistry | None = None,
    check_passes: bool = False,
    input_values: Mapping[str, Any] | None = None,
) -> Graph:
    """Convert ``model`` to a verified IR graph.

    ``input_shapes`` fixes symbolic input dims by input name; ``plugins`` are Python files
    loaded first (with those of ``OPBRIDGE_PLUGIN_PATH`` and the ``opbridge.plugins`` entry
    points); ``passes`` are the IR passes to run after mapping, exactly those, in order: names
    from :data:`opbridge.ir.passes.PASSES` (built-ins, and those plugins register with
    ``opbridge.register_pass``), or pass objects; ``()`` for none. To add a pass to the defaults
    as ``opbridge convert --pass NAME`` does, give ``opbridge.ir.passes.with_passes(["NAME"])``.
    ``check_passes`` interprets the graph before the passes and after each one on the same
    random inputs and raises :class:`opbridge.passcheck.PassCheckError` naming the first pass
    that changed a result (see :mod:`opbridge.passcheck`).
    ``input_values`` binds inputs to constants (``{"sr": 16000}``; OpenVINO's frozen inputs): they
    stop being graph inputs, and what they alone decide folds (a branch on them, the shapes they
    give), for a static graph.
    """
    load_plugins(plugins)
    origin = parse(model, weights=weights, input_shapes=input_shapes)
    bound = bind_input_values(origin, input_values) if input_values else None
    graph = convert_origin_graph(origin, registry=registry if registry is not None else DEFAULT_MAPPINGS,
                                 input_shapes=input_shapes, constant_inputs=bound)
    if check_passes:
        from .passcheck import check_passes as check
        from .passcheck import require_passed

        graph, report = check(graph, passes)
        require_passed(report)
        return graph
    return optimize(graph, passes)
