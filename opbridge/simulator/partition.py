"""Partition the lowered node sequence into the program's units, in order.

A contiguous run of local layers becomes a layer group while a tiling of it fits local memory
(``layergroup``); a local layer that fits no tile on its own streams in chunks of output
channels where its kernel allows (``stream``), else it runs as a global layer on whole tensors,
as do layers that cannot be tiled; host-CPU layers stay single. This step sits above both
planners, which know nothing of each other.

A layer that would make a group of its own, of any rank, runs as a global layer instead, as
TPU-MLIR runs every one-op group (``GroupMethod::group_one_layer_proc`` in
``lib/Dialect/Tpu/Transforms/LayerGroup/GroupMethod.cpp``: a group of one op is valid and
costed as a global layer, ``getGlobalLayerCycle``): a group of one layer loads its weights
before its first tile computes, where a global layer streams them alongside.

A group is kept only when the cost model estimates it faster than its layers run another
way: all of them as global layers, or its first layer global and the rest a group (TPU-MLIR's
group search compares the cycles of candidate groups, a layer alone costed as a global layer:
``GroupMethod::dynamic_programming_kernel`` and ``get_group_clusters``). A one-tile group
whose first layer carries large weights loses so: nothing in it computes while they load,
where a global layer streams them under its compute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .cost import fused_epilogues
from .layergroup import MAX_GROUP_NODES, MAX_REDUNDANCY, GroupCandidate, GroupPlan
from .lower import Lowered
from .rows import gshape
from .stream import StreamPlan, plan_stream
from .target import Target

#: A layer that would make a group of its own runs as a global layer (TPU-MLIR's one-op groups).
#: Tests that check the tile kernels on one-op graphs turn it off, as they shrink local memory.
LONE_LAYERS_RUN_GLOBAL = True

#: One unit of the compiled program, before instructions are emitted.
PlannedUnit = GroupPlan | StreamPlan | Lowered
#: the estimated time (ms) of a run of planned units, launch and syncs included
Estimate = Callable[[list[PlannedUnit]], float]


def partition(lowered: list[Lowered], target: Target, graph_outputs: set[str],
              estimate: Estimate | None = None) -> list[PlannedUnit]:
    """Split the node sequence into layer groups, streamed layers and single (global or host)
    nodes, in order. A group is a contiguous run of the topological order, so it is convex:
    no path leaves it and comes back. With ``estimate``, each group is checked against its
    layers run global (:func:`cheapest`)."""
    units: list[PlannedUnit] = []
    cur: list[Lowered] = []
    cur_plan: GroupPlan | None = None
    fused = fused_epilogues([ln.node for ln in lowered], graph_outputs) if estimate else {}

    def close() -> None:
        nonlocal cur, cur_plan
        if cur and cur_plan is not None and len(cur) == 1 and LONE_LAYERS_RUN_GLOBAL:
            units.append(dataclasses.replace(cur[0], local=False))  # it fits, but runs global
        elif cur and cur_plan is not None:
            final = GroupCandidate(cur, graph_outputs).best(target, double=True)
            units.extend(cheapest(final if final is not None else cur_plan, target, graph_outputs,
                                  estimate, fused))
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


def cheapest(plan: GroupPlan, target: Target, graph_outputs: set[str],
             estimate: Estimate | None, fused: dict[str, str] | None = None) -> list[PlannedUnit]:
    """The fastest of: the group, its layers as global layers, and its first layer global with
    the rest a group (of more than one layer: one alone runs global), by ``estimate``; the
    group on a tie, and without an estimate.

    Only a group of several layers in one tile, with no streamed weights, is weighed: its
    layers' whole tensors fit local memory together, so each runs global in one pass, as the
    cost model times a global layer (one transfer set-up, traffic under compute). A group cut
    into tiles or chunks is kept: a global layer too big for local memory would be cut as
    well, which that model does not count. A group of one layer never reaches here: it runs
    as a global layer (:func:`partition`).

    An integer convolution or matrix product and the epilogue the chip runs inside its
    instruction (``fused``: :func:`cost.fused_epilogues`) stay in one unit: an option that
    would part them is not weighed (the chip has no such split, and the cost model would time
    an i32 accumulator it never stores)."""
    if estimate is None or len(plan.nodes) < 2 or len(plan.tiles) > 1 or plan.streams:
        return [plan]
    fused = fused or {}
    alone = [dataclasses.replace(ln, local=False) for ln in plan.nodes]
    options: list[list[PlannedUnit]] = [[plan]]
    if not any(ln.node.name in fused for ln in plan.nodes):
        options.append(list(alone))
    rest = plan.nodes[1:]
    head = plan.nodes[0].node.name
    if len(rest) > 1 and not any(fused.get(ln.node.name) == head for ln in rest):
        tail = GroupCandidate(rest, graph_outputs).best(target, double=True)
        if tail is not None:
            options.append([alone[0], tail])
    if len(options) == 1:
        return [plan]
    costs = [estimate(o) for o in options]
    return options[costs.index(min(costs))]
