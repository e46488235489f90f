"""The Caffe parser: a deploy prototxt (text) and a caffemodel (binary) -> OriginGraph.

* Layers (``layer {}``, and the legacy V1 ``layers {}`` with enum types such as CONVOLUTION)
  become :class:`OriginNode` s with Caffe's own type names. Their attributes are the fields set
  in their parameter blocks (``convolution_param { kernel_size: 3 }`` -> ``{"kernel_size": [3]}``),
  flattened; repeated fields are lists, enums their names, nested blocks dicts. Blocks and fields
  the lite schema does not know are read generically (see :mod:`.caffe_text`), so custom layers
  need no schema change. Unset fields are absent; :func:`layer_defaults` gives the schema's
  defaults of a parameter block.
* Graph inputs come from net-level ``input`` + ``input_shape``/``input_dim``, ``Input`` layers,
  and data layers: ``DummyData`` and ``MemoryData`` declare their shapes, ``ImageData`` and
  ``WindowData`` when their parameters fix the image size; the caller gives the others
  (``Data``, ``HDF5Data``) in ``input_shapes``.
* In-place layers (``top == bottom``) are put in SSA form: every write of a blob gets its own
  tensor, and the final writer's tensor keeps the blob's name, so ``conv1`` is still found as
  ``conv1``; earlier versions are named ``BLOB/LAYER`` (the blob as written by that layer).
  A graph input keeps its name for feeding: a layer writing it in place gets ``BLOB/LAYER``.
* ``Split`` tops become aliases of their bottom. Layers that only train or write files
  (``Accuracy``, every ``*Loss``, ``Silence``, ``HDF5Output``) are dropped with a warning, and a
  data layer's top that only they read (its label) is no input; layers excluded from the
  TEST phase by include/exclude rules are dropped.
* Repeated layer names (Caffe accepts them) are renamed as OpenCV does: the k-th repeat of
  ``crop`` becomes ``crop_k``, with a warning.
* A ``Python`` layer's node has the domain ``module.layer`` of its python_param, so the
  unsupported-op report names the class a plugin must provide (``"module.layer::Python"``).
* Weights (caffemodel blobs) are matched to layers by name and listed in ``node.weights``; the
  mapping checks their shapes, since those depend on the input shapes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from .caffe_inputs import apply_input_shapes, data_layer_inputs, given_shapes, net_inputs
from .caffe_text import TextBlock, TextScalar, field_defaults, parse_text, typed_block
from .caffe_weights import read_caffemodel
from .origin import Framework, OriginGraph, OriginNode, TensorInfo

#: V1 enum layer types -> layer type names (as Caffe's upgrade_proto does).
V1_TYPES = {
    "ABSVAL": "AbsVal", "ACCURACY": "Accuracy", "ARGMAX": "ArgMax", "BNLL": "BNLL",
    "CONCAT": "Concat", "CONTRASTIVE_LOSS": "ContrastiveLoss", "CONVOLUTION": "Convolution",
    "DATA": "Data", "DECONVOLUTION": "Deconvolution", "DROPOUT": "Dropout",
    "DUMMY_DATA": "DummyData", "EUCLIDEAN_LOSS": "EuclideanLoss", "ELTWISE": "Eltwise",
    "EXP": "Exp", "FLATTEN": "Flatten", "HDF5_DATA": "HDF5Data", "HDF5_OUTPUT": "HDF5Output",
    "HINGE_LOSS": "HingeLoss", "IM2COL": "Im2col", "IMAGE_DATA": "ImageData",
    "INFOGAIN_LOSS": "InfogainLoss", "INNER_PRODUCT": "InnerProduct", "LRN": "LRN",
    "MEMORY_DATA": "MemoryData", "MULTINOMIAL_LOGISTIC_LOSS": "MultinomialLogisticLoss",
    "MVN": "MVN", "POOLING": "Pooling", "POWER": "Power", "RELU": "ReLU", "SIGMOID": "Sigmoid",
    "SIGMOID_CROSS_ENTROPY_LOSS": "SigmoidCrossEntropyLoss", "SILENCE": "Silence",
    "SOFTMAX": "Softmax", "SOFTMAX_LOSS": "SoftmaxWithLoss", "SPLIT": "Split", "SLICE": "Slice",
    "TANH": "TanH", "WINDOW_DATA": "WindowData", "THRESHOLD": "Threshold",
}

#: Layers that produce the network's data: their tops are graph inputs.
DATA_LAYERS = frozenset({
    "Data", "ImageData", "MemoryData", "DummyData", "HDF5Data", "WindowData",
    "AnnotatedData", "VideoData",
})

#: Layers that only train or only write files: dropped from the deploy graph with a note
#: (besides these, every type whose name ends in "Loss", forks' losses included).
TRAINING_ONLY_LAYERS = frozenset({"Accuracy", "Silence", "HDF5Output"})


def is_training_only(op_type: str) -> bool:
    """Is ``op_type`` a layer the deploy graph drops (accuracy, losses, Silence, HDF5Output)?"""
    return op_type in TRAINING_ONLY_LAYERS or op_type.endswith("Loss")


#: Loss layers of BVLC master and of the widely used forks (SSD's MultiBoxLoss,
#: py-faster-rcnn's SmoothL1Loss), listed by ``opbridge ops``; any other ``*Loss`` is dropped too.
KNOWN_LOSS_LAYERS = (
    "ContrastiveLoss", "EuclideanLoss", "HingeLoss", "InfogainLoss", "MultinomialLogisticLoss",
    "SigmoidCrossEntropyLoss", "SoftmaxWithLoss", "MultiBoxLoss", "SmoothL1Loss",
)


def parser_handled_layers() -> dict[str, str]:
    """Layer type -> what the parser does with it, for the layer types it resolves itself
    (no mapping is involved): data layers become graph inputs, training-only layers are
    dropped. ``opbridge ops --framework caffe`` lists them beside the mapped types."""
    out = {t: "a graph input (its shape from the layer, or from input_shapes)"
           for t in ("Input", *sorted(DATA_LAYERS))}
    out.update((t, "dropped from the deploy graph, with a warning")
               for t in (*sorted(TRAINING_ONLY_LAYERS), *KNOWN_LOSS_LAYERS))
    out["Split"] = "its tops alias its bottom"
    return out


#: LayerParameter fields that are not parameter blocks (structure, training settings).
_STRUCTURAL = frozenset({
    "name", "type", "bottom", "top", "phase", "loss_weight", "param", "blobs",
    "propagate_down", "include", "exclude", "blobs_lr", "weight_decay", "blob_share_mode",
})


def _pb2() -> Any:
    from ..proto import caffe_pb2

    return caffe_pb2


def layer_defaults(block: str) -> dict[str, Any]:
    """Schema defaults of a LayerParameter parameter block (``"convolution_param"``), or {}."""
    fd = _pb2().LayerParameter.DESCRIPTOR.fields_by_name.get(block)
    if fd is None or fd.message_type is None:
        return {}
    return field_defaults(fd.message_type)


#: The largest prototxt read (real deploy files are under 100 KB); checked before reading,
#: so a wrong path to a huge file fails at once instead of filling memory with its tokens.
MAX_PROTOTXT_BYTES = 64 << 20


def _read_text(path: Path, what: str) -> str:
    if not path.is_file():
        raise ModelFormatError(f"[caffe] {what} '{path}' does not exist or is not a file",
                               hint="check the path")
    size = path.stat().st_size
    if size > MAX_PROTOTXT_BYTES:
        raise ModelFormatError(
            f"[caffe] {what} '{path}' is {size} bytes, above the limit of {MAX_PROTOTXT_BYTES} "
            "for a text prototxt",
            hint="is this the caffemodel (weights=) rather than the prototxt? raise "
            "opbridge.parsers.caffe.MAX_PROTOTXT_BYTES if it is really this large",
        )
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ModelFormatError(
            f"[caffe] {what} '{path}' is not UTF-8 text (byte {err.start})",
            hint="a prototxt is protobuf text format; a binary .caffemodel goes to weights=",
        ) from None


def _rule_matches(rule: dict[str, Any]) -> bool:
    """Does a NetStateRule match the deploy state (phase TEST, level 0, no stages)?"""
    if "phase" in rule and rule["phase"] != "TEST":
        return False
    if "min_level" in rule and 0 < rule["min_level"]:
        return False
    if "max_level" in rule and 0 > rule["max_level"]:
        return False
    return not rule.get("stage")


def _included(layer: dict[str, Any]) -> bool:
    if "phase" in layer and layer["phase"] != "TEST":
        return False
    inc, exc = layer.get("include", []), layer.get("exclude", [])
    if inc:
        return any(_rule_matches(r) for r in inc)
    return not any(_rule_matches(r) for r in exc)


@dataclass
class _Layer:
    """A layer as read from the prototxt, before SSA renaming."""

    name: str
    op_type: str
    bottoms: list[str]
    tops: list[str]
    attrs: dict[str, Any]
    line: int


#: Fork fields inside BVLC parameter blocks that the built-in mappings read.
HANDLED_FORK_FIELDS = frozenset({"PoolingParameter.ceil_mode", "CropParameter.mode"})


def _read_layer(block: TextBlock, v1: bool, source: str, index: int,
                unknown: dict[str, list[str]]) -> tuple[_Layer, dict[str, Any]]:
    pb = _pb2()
    desc = (pb.V1LayerParameter if v1 else pb.LayerParameter).DESCRIPTOR
    names = block.get_all("name")
    label = (
        f"'{names[0].text}'" if names and isinstance(names[0], TextScalar) else f"#{index}"
    )
    where = f"[caffe] {source}:{block.line}: layer {label}"
    found: list[str] = []
    fields = typed_block(block, desc, where, found)
    if "layer" in fields and v1:
        raise ModelFormatError(
            f"{where}: a V0 layer definition (layers {{ layer {{ ... }} }})",
            hint="upgrade it with Caffe's upgrade_net_proto_text tool",
        )
    name = fields.get("name") or f"layer{index}"
    for f in found:
        if f not in HANDLED_FORK_FIELDS:
            unknown.setdefault(f, []).append(name)
    op_type = fields.get("type")
    if not op_type:
        raise ModelFormatError(f"{where}: no 'type'", hint="give the layer a type: \"Convolution\" ...")
    if v1:
        op_type = V1_TYPES.get(op_type, op_type)
    attrs: dict[str, Any] = {}
    for key, val in fields.items():
        if key in _STRUCTURAL:
            continue
        if isinstance(val, dict) and (key.endswith("_param") or key not in desc.fields_by_name):
            for k, v in val.items():
                attrs[f"{key}.{k}" if k in attrs else k] = v
        else:
            attrs[key] = val
    return _Layer(name, op_type, list(fields.get("bottom", [])), list(fields.get("top", [])),
                  attrs, block.line), fields


def parse_caffe(
    prototxt: str | Path,
    weights: str | Path | None = None,
    input_shapes: dict[str, Any] | None = None,
) -> OriginGraph:
    """Read a deploy prototxt (and optionally its caffemodel) into an OriginGraph.

    ``input_shapes`` (name -> shape) overrides declared input shapes (a deploy batch of 10
    can become 1) and gives the shapes of data layers' tops, which a prototxt cannot declare;
    inputs left without a shape have ``shape=None`` (the converter asks for them by name).
    """
    path = Path(prototxt)
    source = path.name
    text = _read_text(path, "prototxt")
    tree = parse_text(text, source)
    pb = _pb2()
    net = typed_block(
        TextBlock(tree.line, [e for e in tree.entries if e[0] not in ("layer", "layers")]),
        pb.NetParameter.DESCRIPTOR, f"[caffe] {source}: net",
    )
    shapes_given = given_shapes(input_shapes, f"[caffe] {source}")

    graph = OriginGraph(name=str(net.get("name") or path.stem), framework=Framework.CAFFE,
                        source=str(path))
    graph.opsets[""] = 1
    inputs: dict[str, tuple[int, ...] | None] = {}
    net_inputs(net, inputs, f"[caffe] {source}")

    layers: list[_Layer] = []
    unknown: dict[str, list[str]] = {}
    index = 0
    for key, value, line in tree.entries:
        if key not in ("layer", "layers"):
            continue
        if not isinstance(value, TextBlock):
            raise ModelFormatError(f"[caffe] {source}:{line}: '{key}' must be a block {{ ... }}",
                                   hint=f"write it as '{key} {{ name: ... type: ... }}' (the BVLC "
                                        "caffe.proto text format)")
        layer, fields = _read_layer(value, key == "layers", source, index, unknown)
        index += 1
        if _included(fields):
            layers.append(layer)
    if unknown:
        listed = "; ".join(f"{f} (layer {', '.join(repr(n) for n in names[:3])}"
                           f"{' ...' if len(names) > 3 else ''})" for f, names in unknown.items())
        warnings.warn(
            f"[caffe] {source}: fields the lite caffe.proto does not know, kept as generic "
            f"attributes that the built-in mappings do not read: {listed}",
            stacklevel=2,
        )
    if not layers:
        raise ModelFormatError(f"[caffe] {source}: the prototxt has no layers",
                               hint="is this a solver file or an empty net?")

    declared = set(inputs)
    renamed = rename_duplicates(layers, source)
    dropped: list[_Layer] = []
    nodes = _to_ssa(layers, inputs, source, dropped)
    if dropped:
        shown = ", ".join(f"'{d.name}' ({d.op_type})" for d in dropped[:8])
        warnings.warn(
            f"[caffe] {source}: dropped {len(dropped)} training-only layer(s) from the deploy "
            f"graph: {shown}{' ...' if len(dropped) > 8 else ''}",
            stacklevel=2,
        )
    if not nodes:
        raise ModelFormatError(f"[caffe] {source}: the prototxt has no layers the deploy graph "
                               "keeps", hint="is this a training net without a model?")
    used = {i for n in nodes for i in n.inputs}
    for name in [n for n in inputs if n not in declared and n not in used]:
        del inputs[name]  # a data layer's top nothing reads (its label, in a deploy net)
    for n in nodes:
        n.location = f"{source}:{n.location}"
    apply_input_shapes(inputs, shapes_given, f"[caffe] {source}")
    graph.inputs = [TensorInfo(n, np.dtype(np.float32), s) for n, s in inputs.items()]
    graph.nodes = nodes
    graph.outputs = [TensorInfo(n) for n in _outputs(nodes, inputs)]
    if weights is not None:
        _attach_weights(graph, Path(weights), renamed)
    return graph


def rename_duplicates(layers: list[_Layer], source: str) -> dict[str, str]:
    """Give repeated layer names OpenCV's spelling (the k-th repeat of ``crop`` is ``crop_k``;
    Caffe accepts repeats, HED's deploy has five ``crop`` layers). Returns new name -> old."""
    taken = {layer.name for layer in layers}
    seen: dict[str, int] = {}
    renamed: dict[str, str] = {}
    for layer in layers:
        k = seen.get(layer.name, 0)
        seen[layer.name] = k + 1
        if not k:
            continue
        new = f"{layer.name}_{k}"
        while new in taken:  # a layer already has that name: one more suffix
            new += "_1"
        taken.add(new)
        renamed[new] = layer.name
        layer.name = new
    if renamed:
        shown = ", ".join(f"'{old}' -> '{new}'" for new, old in list(renamed.items())[:6])
        warnings.warn(
            f"[caffe] {source}: {len(renamed)} layer(s) repeat an earlier layer's name; renamed "
            f"as OpenCV does: {shown}{' ...' if len(renamed) > 6 else ''} (their caffemodel "
            "blobs are looked up by the new name, else by the old one)",
            stacklevel=3,
        )
    return renamed


def _python_domain(layer: _Layer) -> str:
    """A ``Python`` layer's ``module.layer`` (its python_param), which a plugin registers as
    ``"module.layer::Python"``; "" when python_param does not name them."""
    module, cls = layer.attrs.get("module"), layer.attrs.get("layer")
    if layer.op_type != "Python" or not module or not cls:
        return ""
    return f"{module}.{cls}"


def _to_ssa(layers: list[_Layer], inputs: dict[str, tuple[int, ...] | None],
            source: str, dropped: list[_Layer]) -> list[OriginNode]:
    """Layers -> nodes in SSA form; also registers Input/data layers' tops as inputs and
    appends the training-only layers it leaves out to ``dropped``."""
    writers: dict[str, int] = {}
    for layer in layers:
        if layer.op_type in ("Input", "Split") or layer.op_type in DATA_LAYERS \
                or is_training_only(layer.op_type):
            continue
        for t in layer.tops:
            writers[t] = writers.get(t, 0) + 1
    current: dict[str, str] = {n: n for n in inputs}
    taken: set[str] = set(current) | set(writers)
    dropped_tops: dict[str, _Layer] = {}
    nodes: list[OriginNode] = []
    for layer in layers:
        where = f"[caffe] {source}:{layer.line}: layer '{layer.name}' ({layer.op_type})"
        if is_training_only(layer.op_type):  # its bottoms need not exist (a label nothing feeds)
            dropped.append(layer)
            dropped_tops.update((t, layer) for t in layer.tops if t not in current)
            continue
        bottoms = [_bottom(b, current, dropped_tops, where) for b in layer.bottoms]
        if layer.op_type == "Input" or layer.op_type in DATA_LAYERS:
            data_layer_inputs(layer.op_type, layer.tops, layer.attrs, inputs, where)
            for t in layer.tops:
                current[t] = t
            continue
        if layer.op_type == "Split":
            if len(bottoms) != 1:
                raise ModelFormatError(f"{where}: takes 1 bottom, got {len(bottoms)}",
                                       hint="a Split layer copies one bottom to its tops: give it exactly one bottom")
            for t in layer.tops:
                current[t] = bottoms[0]
            continue
        outs = []
        for t in layer.tops:
            writers[t] -= 1
            if writers[t] == 0 and t not in inputs:
                name = t
            else:
                name = f"{t}/{layer.name}"
                k = 1
                while name in taken:
                    k += 1
                    name = f"{t}/{layer.name}_{k}"
            taken.add(name)
            current[t] = name
            outs.append(name)
        nodes.append(OriginNode(
            name=layer.name, op_type=layer.op_type, inputs=bottoms, outputs=outs,
            attrs=layer.attrs, framework=Framework.CAFFE, domain=_python_domain(layer),
            location=str(layer.line),
        ))
    return nodes


def _bottom(blob: str, current: dict[str, str], dropped_tops: dict[str, _Layer], where: str) -> str:
    """The SSA name of a bottom; an error when no earlier layer (kept in the deploy graph)
    writes it."""
    if blob in current:
        return current[blob]
    if blob in dropped_tops:
        d = dropped_tops[blob]
        raise ModelFormatError(
            f"{where}: bottom '{blob}' is the output of '{d.name}' ({d.op_type}), a training-only "
            "layer that the deploy graph drops",
            hint="remove the layers that read it from the deploy prototxt",
        )
    raise ModelFormatError(
        f"{where}: bottom '{blob}' is not produced by any earlier layer or input",
        hint="check the blob name; layers must come after the layers they read",
    )


def _outputs(nodes: list[OriginNode], inputs: dict[str, Any]) -> list[str]:
    used = {i for n in nodes for i in n.inputs}
    return [o for n in nodes for o in n.outputs if o not in used]


def _attach_weights(graph: OriginGraph, path: Path, renamed: dict[str, str]) -> None:
    blobs = read_caffemodel(path)
    tensors: dict[str, np.ndarray] = {}
    by_name = {n.name: n for n in graph.nodes}
    for new, old in renamed.items():
        # a renamed layer takes the blobs stored under its old name (as OpenCV does) unless
        # the caffemodel has its own under the new one (as random-weights writes them)
        if new not in blobs and old in blobs and new in by_name:
            blobs[new] = blobs[old]
    extra = []
    for lname, arrays in blobs.items():
        node = by_name.get(lname)
        if node is None:
            if arrays and lname not in renamed.values():
                extra.append(lname)
            continue
        for i, arr in enumerate(arrays):
            key = f"{lname}/blob{i}"
            tensors[key] = arr
            node.weights.append(key)
    if extra:
        shown = ", ".join(extra[:8]) + (" ..." if len(extra) > 8 else "")
        warnings.warn(
            f"[caffe] {path.name}: weights for {len(extra)} layer(s) the prototxt does not have "
            f"were ignored: {shown}",
            stacklevel=3,
        )
    graph.tensors = tensors
    graph.metadata["weights"] = str(path)



def parse_file(path: str | Path, weights: str | Path | None = None,
               input_shapes: dict[str, Any] | None = None) -> OriginGraph:
    """The entry point of ``opbridge.convert`` for ``.prototxt`` files."""
    return parse_caffe(path, weights=weights, input_shapes=input_shapes)
