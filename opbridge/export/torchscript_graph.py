"""The graph TorchScript-json describes: trace or script, freeze, inline, and specialise a
scripted graph to the example inputs (docs/torchscript-json.md, "How a file is made").

Needs torch; callers pass the imported module in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..errors import OpbridgeError, first_line


class TorchExportError(OpbridgeError, ValueError):
    """The module cannot be exported as TorchScript-json (unsupported blocks, constants or
    argument types)."""


def type_str(value: Any) -> str:
    t = value.type()
    kind = t.kind()
    if kind == "TensorType":
        return "Tensor"
    try:
        return str(t.annotation_str)
    except (AttributeError, RuntimeError):
        return str(t)


@contextlib.contextmanager
def _no_mha_fastpath(torch: Any) -> Iterator[None]:
    """Trace attention as its ops, not as the fused fast-path kernel."""
    mha = getattr(torch.backends, "mha", None)
    if mha is None:
        yield
        return
    before = mha.get_fastpath_enabled()
    mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        mha.set_fastpath_enabled(before)


@contextlib.contextmanager
def buffers_kept(torch: Any, module: Any) -> Iterator[None]:
    """Undo the writes a run of forward() makes into the module's buffers (tracing runs it
    once, the exporter once more): the traced and frozen modules share them, and both the
    file and the user's module must hold them as they were before export."""
    buffers = list(module.buffers()) if isinstance(module, torch.nn.Module) else []
    before = [b.detach().clone() for b in buffers]
    try:
        yield
    finally:
        with torch.no_grad():
            for b, saved in zip(buffers, before):
                b.copy_(saved)


def frozen_graph(torch: Any, module: Any, example: tuple[Any, ...], mode: str,
                  optimize: bool) -> tuple[Any, Any, str]:
    """(callable, inlined graph, mode actually used) for a module, ScriptModule or function."""
    script_types = (torch.jit.ScriptModule, torch.jit.ScriptFunction)
    if isinstance(module, script_types):
        used = "scripted"
        scripted = module
    elif mode in ("script", "trace"):
        used = mode
        scripted = _compiled(torch, module, example, mode)
    else:
        raise TorchExportError(f"export mode {mode!r}: use 'trace' or 'script'",
                               hint="mode='trace' records the ops run on the example inputs; mode='script' "
                                    "compiles the code, if/loops included")
    if isinstance(scripted, torch.jit.ScriptModule):
        scripted = torch.jit.freeze(scripted.eval(), optimize_numerics=optimize)
        graph = scripted.graph
    else:
        graph = scripted.graph.copy()
    torch._C._jit_pass_inline(graph)
    if used != "trace":
        _specialize(torch, graph, example)
    torch._C._jit_pass_dce(graph)
    return scripted, graph, used


def _compiled(torch: Any, module: Any, example: tuple[Any, ...], mode: str) -> Any:
    """``torch.jit.script`` or ``torch.jit.trace`` of ``module``; what the module or torch's
    compiler raises (the module's own error, code TorchScript cannot compile) is an error saying
    which step failed, with torch's first line."""
    if hasattr(module, "eval"):
        module = module.eval()
    try:
        if mode == "script":
            return torch.jit.script(module)
        with _no_mha_fastpath(torch), torch.no_grad(), buffers_kept(torch, module):
            return torch.jit.trace(module, example, check_trace=False)
    except Exception as err:  # torch raises RuntimeError, its frontend errors, and the module's own
        other = "trace" if mode == "script" else "script"
        raise TorchExportError(
            f"{'scripting' if mode == 'script' else 'tracing'} the module failed: "
            f"{first_line(err, named=True)}",
            hint=f"check that the module runs on the example inputs in eval() mode, or export with "
                 f"mode='{other}'; --debug shows torch's traceback") from err


def bind_absent_optionals(torch: Any, graph: Any, inputs: list[Any], given: int) -> None:
    """forward() arguments after the example inputs that are Optional get their default None."""
    for v in inputs[given:]:
        if not type_str(v).startswith("Optional["):
            raise TorchExportError(
                f"forward() argument '{v.debugName()}' ({type_str(v)}) has no example input",
                hint="pass one example tensor per forward() argument",
            )
        none = graph.insertConstant(None)
        none.node().moveBefore(next(iter(graph.nodes())))
        v.replaceAllUsesWith(none)
    for v in reversed(inputs[given:]):
        graph.eraseInput(v.offset())
    if len(inputs) > given:
        torch._C._jit_pass_constant_propagation(graph)
        torch._C._jit_pass_dce(graph)


#: Node kinds an input check's branch may hold (building the message, then raising).
_CHECK_KINDS = {"prim::RaiseException", "prim::Constant", "aten::format", "aten::str",
                "prim::Uninitialized", "aten::__interpolate"}


#: Optional[int | float | bool] arguments given a value become that type (their None checks fold).
_OPTIONAL_SCALARS = {"Optional[int]": lambda torch: torch._C.IntType.get(),
                     "Optional[float]": lambda torch: torch._C.FloatType.get(),
                     "Optional[bool]": lambda torch: torch._C.BoolType.get()}


def _specialize(torch: Any, graph: Any, example: tuple[Any, ...]) -> None:
    """Fix a scripted graph to the example inputs' shapes so shape checks fold away.

    Shapes are propagated from the example inputs, then peephole and constant propagation
    fold ``dim()``/``size()`` comparisons. An ``if`` with no outputs whose branches only raise
    (an input check such as BatchNorm's ``_check_input_dim``) held on the example inputs, and
    the graph is for those shapes only, so it is dropped.
    """
    args = [v for v in graph.inputs()]
    if args and type_str(args[0]) != "Tensor" and not type_str(args[0]).startswith(("int", "float", "bool", "List[")):
        args = args[1:]  # the module itself ('self')
    for v, t in zip(args, example):
        # an Optional[Tensor] argument given a tensor is that tensor: its None checks fold
        if type_str(v) in ("Tensor", "Optional[Tensor]") and isinstance(t, torch.Tensor):
            v.setType(torch._C.TensorType.create_from_tensor(t))
        elif type_str(v) in _OPTIONAL_SCALARS and isinstance(t, (bool, int, float)):
            v.setType(_OPTIONAL_SCALARS[type_str(v)](torch))
    try:
        torch._C._jit_pass_propagate_shapes_on_graph(graph)
    except RuntimeError:
        pass  # shapes stay unknown; conversion reports what it cannot fold
    torch._C._jit_pass_peephole(graph, False)  # False: shape peepholes on
    torch._C._jit_pass_constant_propagation(graph)
    for node in list(graph.nodes()):
        if node.kind() == "prim::If" and node.outputsSize() == 0 and all(
            inner.kind() in _CHECK_KINDS for block in node.blocks() for inner in block.nodes()
        ):
            node.destroy()
    torch._C._jit_pass_dce(graph)
    # loops and ifs that only computed what those checks used (TorchScript's DCE keeps them)
    for node in reversed(list(graph.nodes())):
        if node.kind() in ("prim::Loop", "prim::If") and not any(o.uses() for o in node.outputs()) \
                and not any(_mutates(inner) for inner in _inner_nodes(node)):
            node.destroy()
    torch._C._jit_pass_dce(graph)


_MUTATING = {"aten::append", "aten::insert", "aten::extend", "aten::_set_item", "aten::pop",
             "aten::clear", "prim::SetAttr", "aten::copy_"}


def _inner_nodes(node: Any) -> Iterator[Any]:
    for block in node.blocks():
        for inner in block.nodes():
            yield inner
            yield from _inner_nodes(inner)


def _mutates(node: Any) -> bool:
    kind = node.kind()
    return kind in _MUTATING or (kind.startswith("aten::") and kind.endswith("_") and not kind.endswith("__"))
