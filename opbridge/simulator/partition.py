"""Partition the lowered node sequence into the program's units, in order.

A contiguous run of local layers becomes a layer group while a tiling of it fits local memory
(``layergroup``); a local layer that fits no tile on its own streams in chunks of output
channels where its kernel allows (``stream``), else it runs as a global layer on whole tensors,
as do layers that cannot be tiled; host-CPU layers stay single. This step sits above both
planners, which know nothing of each other.

A volume (a rank-5 node: a 3-D convolution or pool) that would make a group of its own runs
as a global layer instead, as TPU-MLIR runs every one-op group (``GroupMethod::
group_one_layer_proc`` in ``lib/Dialect/Tpu/Transforms/LayerGroup/GroupMethod.cpp``: "group
with only one layer is always valid", costed as a global layer): a group of one layer loads
its weights before its first tile computes, where a global layer streams them alongside.
"""

from __future__ import annotations

import dataclasses

from .layergroup import MAX_GROUP_NODES, MAX_REDUNDANCY, GroupCandidate, GroupPlan
from .lower import Lowered
from .rows import gshape
from .stream import StreamPlan, plan_stream
from .target import Target

#: One unit of the compiled program, before instructions are emitted.
PlannedUnit = GroupPlan | StreamPlan | Lowered


def partition(lowered: list[Lowered], target: Target, graph_outputs: set[str]) -> list[PlannedUnit]:
    """Split the node sequence into layer groups, streamed layers and single (global or host)
    nodes, in order. A group is a contiguous run of the topological order, so it is convex:
    no path leaves it and comes back."""
    units: list[PlannedUnit] = []
    cur: list[Lowered] = []
    cur_plan: GroupPlan | None = None

    def close() -> None:
        nonlocal cur, cur_plan
        if cur and cur_plan is not None and _lone_volume(cur):
            units.append(dataclasses.replace(cur[0], local=False))  # it fits, but runs global
        elif cur and cur_plan is not None:
            final = GroupCandidate(cur, graph_outputs).best(target, double=True)
            units.append(final if final is not None else cur_plan)
        cur, cur_plan = [], None

    for ln in lowered:
        if not ln.local:
            close()
            units.append(ln)
            continue
        n = gshape(ln.node.outputs[0])[0]
        if cur and len(cur) < MAX_GROUP_NODES and gshape(cur[0].node.outputs[0])[0] == n:
            assert cur_plan is not None
            p = GroupCandidate(cur + [ln], graph_outputs).best(target, start=(cur_plan.n_per, cur_plan.k,
                                                                               cur_plan.kw))
            if p is not None and p.redundancy <= MAX_REDUNDANCY:
                cur.append(ln)
                cur_plan = p
                continue
        close()
        p = GroupCandidate([ln], graph_outputs).best(target)
        if p is None:
            # fits no tile on its own: a global layer, streamed in chunks where it can be
            units.append(plan_stream(ln, target) or ln)
        else:
            cur, cur_plan = [ln], p
    close()
    return units


def _lone_volume(nodes: list[Lowered]) -> bool:
    """Whether a group would hold one rank-5 node alone (it runs as a global layer)."""
    return len(nodes) == 1 and len(nodes[0].node.outputs[0].shape) == 5
