"""Turn a TorchScript graph's in-place writes into value semantics (docs/torchscript-json.md,
"In-place writes and views").

In TorchScript, ``y = x[0:2]; y.fill_(1.0)`` changes ``x``: a view shares its base's memory, and
an in-place op (``aten::fill_``, ``copy_``, ``index_put_``, ``add_`` …) writes through it. The
mappings compute every node as a function of its inputs, so this pass rewrites the node list
(after the argument view) until every read sees every earlier write:

- the in-place node itself keeps its kind; its mapping computes the new value of the tensor it
  writes (``fill_`` -> a filled tensor of the same shape);
- when that tensor is a view of a base tensor (a chain of view kinds: slice, select, view,
  permute …), two nodes write the new value back into the base: ``opbridge::positions`` gives
  each element of the base its flat position, the same view chain applied to those positions
  says which elements the view covers, and ``opbridge::update_view`` scatters the view's new
  values there. Any view chain is handled the same way, with no inverse per view kind;
- every later read of the base, of the written view or of any other view of the same base
  reads the newest value: views made before the write are made again from the new base.

Which kinds are views follows their TorchScript schemas (``Tensor(a) self -> Tensor(a)``);
``reshape``, ``flatten`` and ``contiguous`` are taken as views, as they are on a contiguous
tensor. This module knows the node list only, nothing of the IR.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from ..errors import UnsupportedOpError
from .origin import OriginNode

#: aten kinds whose output aliases their first argument.
VIEW_KINDS = frozenset({
    "slice", "select", "narrow", "view", "reshape", "_reshape_alias", "_unsafe_view", "view_as",
    "reshape_as", "flatten", "unflatten", "permute", "transpose", "swapaxes", "swapdims", "t",
    "numpy_T", "squeeze", "unsqueeze", "expand", "expand_as", "broadcast_to", "detach", "alias",
    "contiguous", "diagonal", "movedim", "moveaxis", "unfold", "as_strided", "lift_fresh",
})

#: aten kinds whose several outputs are views of pieces of their first argument. A write into a
#: piece is not carried back to the base (the pieces' extents need shapes); reading the base
#: after such a write is refused rather than computed wrong.
_PIECE_KINDS = frozenset({"chunk", "split", "split_with_sizes", "unbind", "tensor_split"})

#: In-place kinds that do not follow the ``name_`` spelling (``x |= m``).
_DUNDER_INPLACE = frozenset({"__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"})

#: The kinds this pass adds (mapped in opbridge/mappers/torchscript/inplace.py).
POSITIONS = "positions"
UPDATE_VIEW = "update_view"
DOMAIN = "opbridge"


def is_inplace(node: OriginNode) -> bool:
    """True for an aten node that writes into its first argument."""
    op = node.op_type
    if node.domain != "aten" or not node.inputs:
        return False
    return op in _DUNDER_INPLACE or (op.endswith("_") and not op.endswith("__"))


def _is_view(node: OriginNode) -> bool:
    return node.domain == "aten" and node.op_type in VIEW_KINDS and bool(node.inputs)


@dataclass(frozen=True)
class _Alias:
    """A value is ``chain`` (view nodes, outermost last) applied to ``root`` as it was at
    ``version`` (the number of writes into ``root`` before the value was made)."""

    root: str
    chain: tuple[OriginNode, ...]
    version: int


@dataclass
class _Functionalizer:
    taken: set[str]
    out: list[OriginNode] = field(default_factory=list)
    alias: dict[str, _Alias] = field(default_factory=dict)
    #: root -> the name of its newest value, and how many writes it has had.
    current: dict[str, str] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)
    remade: dict[tuple[str, int], str] = field(default_factory=dict)
    #: piece (an output of a _PIECE_KINDS node) -> the root it was cut from; and the roots a
    #: write into one of their pieces made unreadable -> that write's node name
    pieces: dict[str, str] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)

    def fresh(self, base: str) -> str:
        while True:
            name = f"{base}.w{next(self.counter)}"
            if name not in self.taken:
                self.taken.add(name)
                return name

    def info(self, name: str) -> _Alias:
        # a name no alias records is a root as it was made: before any write into it
        return self.alias.get(name) or _Alias(name, (), 0)

    def apply_chain(self, start: str, chain: tuple[OriginNode, ...], tag: str) -> str:
        """Emit ``chain``'s view nodes again on ``start``; the last one's output name."""
        name = start
        for link in chain:
            new_out = self.fresh(link.outputs[0])
            self.out.append(replace(link, name=self.fresh(f"{link.name}/{tag}"),
                                    inputs=[name, *link.inputs[1:]], outputs=[new_out],
                                    attrs=dict(link.attrs)))
            name = new_out
        return name

    def resolve(self, name: str) -> str:
        """The name that holds ``name``'s value as it is now (after every earlier write)."""
        a = self.info(name)
        if a.root in self.unreadable:
            raise UnsupportedOpError(
                f"'{name}' is read after node '{self.unreadable[a.root]}' wrote into a piece of it "
                "(from chunk/split/unbind); opbridge does not carry such writes back",
                hint="write through slices (x[:, :k]) instead of chunk/split pieces",
                framework="torchscript", node=self.unreadable[a.root])
        now = self.writes.get(a.root, 0)
        if a.version == now:
            return name
        key = (name, now)
        if key not in self.remade:
            base = self.current.get(a.root, a.root)
            remade = self.apply_chain(base, a.chain, "reread") if a.chain else base
            self.alias[remade] = _Alias(a.root, a.chain, now)
            self.remade[key] = remade
        return self.remade[key]

    def visit(self, node: OriginNode) -> None:
        # a name that is no tensor (a constant, a list) has no alias and resolves to itself
        node.inputs = [self.resolve(x) for x in node.inputs]
        self.out.append(node)
        if not node.outputs:
            return
        if _is_view(node):
            src = self.info(node.inputs[0])
            self.alias[node.outputs[0]] = _Alias(src.root, (*src.chain, node), src.version)
        elif is_inplace(node):
            self.write(node)
        elif node.domain == "aten" and node.op_type in _PIECE_KINDS:
            root = self.info(node.inputs[0]).root
            self.pieces.update((out, root) for out in node.outputs)
        elif node.op_type in ("__getitem__", "ListUnpack") and node.inputs[0] in self.pieces:
            # a piece taken out of the Tensor[] a split returned
            self.pieces.update((out, self.pieces[node.inputs[0]]) for out in node.outputs)

    def write(self, node: OriginNode) -> None:
        """``node`` computed the new value of its first argument: make it the root's newest."""
        target = self.info(node.inputs[0])
        root, new_value = target.root, node.outputs[0]
        if root in self.pieces:
            self.unreadable[self.pieces[root]] = node.name
        if target.chain:
            base = self.current.get(root, root)
            where = f"{node.name}/write_back"
            positions = self.fresh(f"{base}.positions")
            self.out.append(_new_node(f"{where}/positions", POSITIONS, [base], positions, node))
            covered = self.apply_chain(positions, target.chain, "positions")
            new_value = self.fresh(base)
            self.out.append(_new_node(where, UPDATE_VIEW, [base, covered, node.outputs[0]],
                                      new_value, node))
        self.writes[root] = self.writes.get(root, 0) + 1
        self.current[root] = new_value
        now = self.writes[root]
        self.alias[new_value] = _Alias(root, (), now)
        self.alias[node.outputs[0]] = _Alias(root, target.chain, now)


def _new_node(name: str, op: str, inputs: list[str], output: str, like: OriginNode) -> OriginNode:
    n = len(inputs)
    return OriginNode(
        name=name, op_type=op, domain=DOMAIN, inputs=list(inputs), outputs=[output],
        attrs={"args": list(range(n)), "arg_types": ["Tensor"] * n, "consts": {},
               "types": ["Tensor"], "scope": like.attrs.get("scope", "")},
        framework=like.framework, location=like.location,
    )


def functionalize(nodes: list[OriginNode], outputs: list[str]) -> tuple[list[OriginNode], list[str]]:
    """(nodes with every in-place write made explicit, the graph outputs' new names).

    A graph output that was written after it was made is renamed to its newest value.
    ``nodes`` must already have the argument view (flat inputs, ``consts``, ``arg_types``).
    """
    if not any(is_inplace(n) for n in nodes):
        return nodes, outputs
    taken = {x for n in nodes for x in (*n.inputs, *n.outputs)} | set(outputs)
    taken |= {n.name for n in nodes}
    f = _Functionalizer(taken)
    for node in nodes:
        f.visit(node)
    new_outputs = [f.resolve(o) for o in outputs]
    return f.out, new_outputs


def _block_nodes(node: OriginNode) -> list[OriginNode]:
    """Every node inside ``node``'s blocks (prim::If / prim::Loop), nested blocks included."""
    out = []
    for block in node.attrs.get("blocks", []):
        for inner in block.nodes:
            out.append(inner)
            out.extend(_block_nodes(inner))
    return out


def check_block_writes(nodes: list[OriginNode]) -> None:
    """Refuse in-place writes this pass cannot make explicit: one inside a prim::If / prim::Loop
    block (its new value would have to leave the block), or one outside whose tensor (or a
    view of it) a block reads (the block would read the old value)."""
    blocks = [(n, inner) for n in nodes for inner in _block_nodes(n)]
    if not blocks:
        return
    for owner, inner in blocks:
        if is_inplace(inner):
            raise UnsupportedOpError(
                f"in-place write aten::{inner.op_type} inside the block of {owner.domain}::"
                f"{owner.op_type} '{owner.name}' cannot be converted",
                hint="write it out of place in the model (y = y.add(1) rather than y.add_(1))",
                framework="torchscript", node=inner.name, op_type=f"aten::{inner.op_type}")
    written = {n.inputs[0] for n in nodes if is_inplace(n)}
    changed = bool(written)
    while changed:  # the written tensors' views and bases share their memory
        changed = False
        for n in nodes:
            if n.domain == "aten" and n.op_type in VIEW_KINDS and n.inputs:
                linked = {n.inputs[0], *n.outputs}
                if linked & written and not linked <= written:
                    written |= linked
                    changed = True
    for owner, inner in blocks:
        read = written.intersection(inner.inputs)
        if read:
            raise UnsupportedOpError(
                f"the block of {owner.domain}::{owner.op_type} '{owner.name}' reads "
                f"'{sorted(read)[0]}', which the graph writes in place",
                hint="write that update out of place in the model",
                framework="torchscript", node=inner.name, op_type=f"{inner.domain}::{inner.op_type}")
