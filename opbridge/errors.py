"""The error hierarchy: every error a user can cause is an OpbridgeError.

Subclasses also inherit the matching built-in exception, so callers that catch
``ValueError`` or ``NotImplementedError`` keep working.

An error carries its context as fields (framework, node, op type, attribute, opset, source
file), filled where they are known: the raiser gives what it has, and each layer the error
travels up through adds the rest with :meth:`OpbridgeError.add_context`, which never overwrites
a field. The message is rendered once, from the fields, in the house format
``[caffe] layer 'conv1' (Convolution) param 'group' = 0: must be >= 1``.
"""

from __future__ import annotations

from typing import Any

#: The context fields every OpbridgeError has (None when unknown).
CONTEXT_FIELDS = ("framework", "kind", "node", "op_type", "attribute", "value", "opset", "source",
                  "ir_node", "ir_op")
#: The fields rendered in front of the message (the others are data only: ``opset`` and
#: ``source`` for tools and the CLI; ``ir_node``/``ir_op`` because the IR names its node itself).
_RENDERED = ("framework", "kind", "node", "op_type", "attribute", "value")
#: The frameworks whose tag (``[onnx]``) a raiser may write at the start of its detail: the tag is
#: then read into the ``framework`` field, so that the context added on the way up renders it once.
_FRAMEWORK_TAGS = ("onnx", "caffe", "torchscript")
#: The fields that say which node an error is about (its attribute, its domain's version).
_NODE_FIELDS = ("kind", "node", "op_type", "attribute", "value", "opset")


class OpbridgeError(Exception):
    """Base class of every error a user can cause; ``hint`` says what would fix it.

    ``message`` is the rendered text: the context the error was given or picked up
    (``[onnx] node 'x' (Conv) attribute 'group'``) followed by ``detail``, the text the raiser
    wrote. Pass the context as keywords (``AttrError("must be >= 1", framework="caffe",
    node="conv1", op_type="Convolution", kind="layer", attribute="group", value=0)``) rather than
    writing it into ``detail``. A raiser whose detail already names the location says so with
    ``located=True``: the fields are then kept as data and not rendered again.
    """

    framework: str | None
    kind: str | None
    node: str | None
    op_type: str | None
    attribute: str | None
    value: Any
    opset: int | None
    source: str | None
    ir_node: str | None
    ir_op: str | None

    #: the hint of an error of this class raised without one (every CLI error prints a hint)
    default_hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None, located: bool = False,
                 **context: Any) -> None:
        super().__init__(message)
        tag, sep, rest = message.partition("] ")
        if sep and tag.startswith("[") and tag[1:] in _FRAMEWORK_TAGS and not located:
            # the tag is context written into the text: kept as the field it stands for
            message = rest
            context.setdefault("framework", tag[1:])
        self.detail = message
        self.hint = hint if hint is not None else self.default_hint
        for name in CONTEXT_FIELDS:
            setattr(self, name, None)
        self._shown: set[str] = set()
        self._set_fields(context, rendered=not located)

    def _set_fields(self, context: dict[str, Any], *, rendered: bool) -> None:
        unknown = sorted(set(context) - set(CONTEXT_FIELDS))
        if unknown:
            raise TypeError(f"OpbridgeError: unknown context field(s) {', '.join(unknown)}")
        for name, value in context.items():
            if value is None or (isinstance(value, str) and not value) or getattr(self, name) is not None:
                continue
            if name == "opset":
                value = int(value)
            elif name != "value":
                value = str(value)
            setattr(self, name, value)
            if rendered and name in _RENDERED:
                self._shown.add(name)

    def add_context(self, *, located: bool = False, **context: Any) -> OpbridgeError:
        """Fill the context fields that are still unknown (a known one is never replaced).

        Returns the error itself. Call it in an ``except`` clause and re-raise with a bare
        ``raise``, which keeps the traceback and the ``from`` chain.
        ``located=True`` records fields the detail already names without rendering them.
        """
        self._set_fields(context, rendered=not located)
        return self

    def nest_in(self, where: str, **context: Any) -> OpbridgeError:
        """Re-home an error raised at a node inside another node's body (an ONNX function body,
        an If branch) at that enclosing node, the one the user's model has: ``context`` (the
        enclosing node's fields) replaces the node-level fields, and the message so far follows
        the enclosing node's name and ``where``: ``[onnx] node 'flex' (FlexAttention), in its
        ONNX function body: node 'flex/MatMul_3' (MatMul): inner dimensions differ``. The class,
        the hint and the other fields stay. Returns the error itself (re-raise it with ``raise``).
        """
        inner = self.message
        tag, sep, rest = inner.partition("] ")
        if sep and tag.startswith("[") and tag[1:] in _FRAMEWORK_TAGS:  # a located detail's own tag
            inner = rest
        for name in _NODE_FIELDS:
            setattr(self, name, None)
            self._shown.discard(name)
        self._set_fields(context, rendered=False)  # named in the detail, in front of the inner text
        if self.framework is not None:
            self._shown.add("framework")
        kind = self.kind or "node"
        outer = (node_ctx(self.node, self.op_type, kind=kind) if self.node
                 else f"a {self.op_type + ' ' if self.op_type else ''}{kind}")
        self.detail = f"{outer}, {where}: {inner}"
        return self

    @property
    def context(self) -> dict[str, Any]:
        """The known context fields, by name."""
        return {n: getattr(self, n) for n in CONTEXT_FIELDS if getattr(self, n) is not None}

    def _where(self) -> tuple[str, bool]:
        """The rendered context, and whether it names a node or attribute (not just a framework)."""
        shown = self._shown
        fw = self.framework if "framework" in shown else None
        # an IR node named after the origin node: the detail (written by the IR) names it
        node = self.node if "node" in shown and self.node != self.ir_node else None
        if node is not None:
            op = self.op_type if "op_type" in shown else None
            kind = self.kind or ("layer" if fw == "caffe" else "node")
            where = node_ctx(node, op, framework=fw, kind=kind)
        else:
            where = f"[{fw}]" if fw else ""
        attr = self.attribute if "attribute" in shown else None
        if attr is not None:  # a Caffe layer has params (its proto's word), other nodes attributes
            label = "param" if self.kind == "layer" else "attribute"
            where += f"{' ' if where else ''}{label} '{attr}'"
            if "value" in shown:
                where += f" = {self.value!r}"
        return where, node is not None or attr is not None

    @property
    def location(self) -> str:
        """The rendered context (``[onnx] node 'x' (Conv) attribute 'axis'``), or ''."""
        return self._where()[0]

    @property
    def message(self) -> str:
        """The context, then the detail: what the CLI prints (with the hint)."""
        where, names = self._where()
        if not where:
            return self.detail
        return f"{where}: {self.detail}" if names else f"{where} {self.detail}"

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class ModelFormatError(OpbridgeError, ValueError):
    """A file is malformed, truncated, of an unknown version, or not what it claims to be."""

    default_hint = ("the file is damaged or not of the kind expected here: check the path, or "
                    "write it again (export, convert or compile)")


class UnsupportedOpError(OpbridgeError, NotImplementedError):
    """An op (or several) has no definition or no mapping."""


class AttrError(OpbridgeError, ValueError):
    """An attribute is unknown, missing, of the wrong type or out of range."""


class ShapeError(OpbridgeError, ValueError):
    """Shapes or dtypes disagree, are symbolic where concrete ones are needed, or are absurd."""


class GraphError(OpbridgeError, ValueError):
    """The graph's structure is wrong: undefined inputs, cycles, duplicate names."""


class RegistryError(OpbridgeError, ValueError):
    """A registration conflicts with an existing one or is incomplete."""


class MappingError(OpbridgeError, ValueError):
    """A mapping could not turn an origin node into IR (a problem it reports, or a bug in it)."""


class PluginError(OpbridgeError, ImportError):
    """A plugin failed to load."""


class InterpretError(OpbridgeError, RuntimeError):
    """The reference interpreter could not run a node, or was fed wrong inputs."""


class SimulatorError(OpbridgeError, RuntimeError):
    """Compiling or running a program for the simulated target failed."""


def first_line(err: BaseException, *, named: bool = False, limit: int | None = None) -> str:
    """The first line of ``err``'s message, for an error that wraps it: torch's messages run on
    with the TorchScript source and a C++ trace. ``named`` puts the exception's class in front
    (``RuntimeError: ...``); an empty message gives the class name alone. ``limit`` cuts the line
    to that many characters (a runtime's one line may list a whole graph)."""
    text = str(err).strip()
    lines = text.splitlines()
    if len(lines) > 1 and lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        lines = lines[-1:]  # a scripted module's error: the reason is the last line, after the trace
    line = lines[0][:limit] if lines else ""
    if not line:
        return type(err).__name__
    return f"{type(err).__name__}: {line}" if named else line


def node_ctx(
    name: str | None,
    op: str | None,
    *,
    framework: str | None = None,
    kind: str = "node",
) -> str:
    """The prefix every node-level message starts with: ``[onnx] node 'conv1' (Conv)``."""
    prefix = f"[{framework}] " if framework else ""
    op_part = f" ({op})" if op else ""
    return f"{prefix}{kind} '{name}'{op_part}"
