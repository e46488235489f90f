"""The TPU simulator: compile an IR graph for a target, run it with numpy, profile it.

``compile(graph, target)`` lowers every node (placement, kernel), forms layer groups tiled
to fit local memory, plans DDR, and emits the instruction list of a :class:`Program`;
``Program.run`` executes it, ``Program.profile`` estimates its timeline. The program's
instructions (``Load``, ``Store``, ``Compute``, ``GlobalOp``, ``HostOp``) and units
(``GroupUnit``, ``StreamUnit``, ``GlobalUnit``, ``HostUnit``) are frozen dataclasses.
"""

from __future__ import annotations

from .compiler import compile  # noqa: A004 - the public name DESIGN.md gives it
from .cost import Profile, UnitProfile
from .kernels import (
    DEFAULT_KERNELS,
    Kernel,
    KernelRegistry,
    register_kernel,
    tile_pads,
    tile_pads_axis,
    tile_pads_w,
    window_rows,
)
from .program import Program, load_program
from .schema import (
    Alloc,
    Compute,
    DdrPlan,
    DdrTensor,
    GlobalOp,
    GlobalUnit,
    GroupUnit,
    HostOp,
    HostUnit,
    Load,
    Operand,
    Store,
    StreamUnit,
)
from .target import PRESETS, Target

__all__ = [
    "DEFAULT_KERNELS", "PRESETS", "Alloc", "Compute", "DdrPlan", "DdrTensor", "GlobalOp",
    "GlobalUnit", "GroupUnit", "HostOp", "HostUnit", "Kernel", "KernelRegistry", "Load", "Operand",
    "Profile", "Program", "Store", "StreamUnit", "Target", "UnitProfile", "compile",
    "load_program", "register_kernel", "tile_pads", "tile_pads_axis", "tile_pads_w", "window_rows",
]
