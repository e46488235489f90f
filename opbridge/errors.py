"""The error hierarchy: every error a user can cause is an OpbridgeError.

Subclasses also inherit the matching built-in exception, so callers that catch
``ValueError`` or ``NotImplementedError`` keep working.
"""

from __future__ import annotations


class OpbridgeError(Exception):
    """Base class of every error a user can cause; ``hint`` says what would fix it."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class ModelFormatError(OpbridgeError, ValueError):
    """A file is malformed, truncated, of an unknown version, or not what it claims to be."""


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


class PluginError(OpbridgeError, ImportError):
    """A plugin failed to load."""


class InterpretError(OpbridgeError, RuntimeError):
    """The reference interpreter could not run a node, or was fed wrong inputs."""


class SimulatorError(OpbridgeError, RuntimeError):
    """Compiling or running a program for the simulated target failed."""


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
