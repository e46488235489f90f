"""The networks of ``chip-latency.md`` for ``bench_fidelity.py``, built with random weights.

Written here from the public layer lists (the modules are our own code; the layer lists, channel
counts and input shapes follow the cited files):

- LPRNet: as the published bmodels were compiled, sophgo/sophon-demo
  ``sample/LPRNet/tools/LPRNet.py`` (commit efa23c19): sirius-ai/LPRNet_Pytorch
  ``model/LPRNet.py`` with its three MaxPool3d spelt as MaxPool2d (the sample's
  ``docs/LPRNet_Export_Guide.md``, commit 4770f8ef: the toolchain has no 3-D max pooling),
  ``build_lprnet(class_num=68)`` as its ``tools/export_onnx.py``, input 3x24x94.
- DeepSORT ReID extractor: ZQPei/deep_sort_pytorch ``deep_sort/deep/model.py`` (commit
  b6747869) ``Net(reid=True)``, input 3x128x64.
- C3D: open-mmlab/mmaction2 ``mmaction/models/backbones/c3d.py`` (commit 34be42e8), conv1a to
  fc7 (the UCF101 head, a 4096 -> 101 Linear, added), input 3x16x112x112.
- ResNet-50: ``tests/simulator/models.resnet_onnx`` (onnx.helper; torchvision's layer list).
- YOLOv3: the shared Caffe prototxt (ChenYingpeng/caffe-yolov3, Darknet's layer list) at
  608x608, random weights from ``opbridge.tools.caffe_weights``.
- BERT: ``tests/ir/transformer_models.bert_onnx``, BERT-base (12 layers, hidden 768, 12 heads)
  at sequence 256 with a token-classification Linear head, as bert4torch's NER sample.

The torch models go through ``ob.export_torchscript`` and ``ob.convert``; without torch their
rows are skipped with that reason.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

YOLO_PROTOTXT = ROOT.parent / "shared" / "models" / "caffe" / "yolov3" / "deploy.prototxt"


class NotBuildable(Exception):
    """A row this checkout cannot build; the message says why."""


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise NotBuildable("torch is not installed (the model is written with torch.nn)") from None
    return torch


def _lprnet(torch: Any) -> Any:
    nn = torch.nn

    class ChannelPool(nn.Module):
        """The sophon-demo spelling of LPRNet's MaxPool3d((1, 3, 3), (s, 1, 2)) (its export
        guide: the toolchain has no 3-D max pooling): a 3x3 MaxPool2d of stride (1, 2), then a
        1x1 MaxPool2d of stride (1, s) between two transposes (1, 3), which keeps every s-th
        channel."""

        def __init__(self, s: int) -> None:
            super().__init__()
            self.spatial = nn.MaxPool2d((3, 3), (1, 2))
            self.channels = nn.MaxPool2d((1, 1), (1, s))

        def forward(self, x: Any) -> Any:
            return self.channels(self.spatial(x).transpose(1, 3)).transpose(1, 3)

    def block(cin: int, cout: int) -> Any:
        q = cout // 4
        return nn.Sequential(nn.Conv2d(cin, q, 1), nn.ReLU(), nn.Conv2d(q, q, (3, 1), padding=(1, 0)),
                             nn.ReLU(), nn.Conv2d(q, q, (1, 3), padding=(0, 1)), nn.ReLU(),
                             nn.Conv2d(q, cout, 1))

    class LPRNet(nn.Module):
        def __init__(self, classes: int = 68) -> None:
            super().__init__()
            self.backbone = nn.Sequential(
                nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU(),
                nn.MaxPool2d((3, 3), (1, 1)),
                block(64, 128), nn.BatchNorm2d(128), nn.ReLU(),
                ChannelPool(2),
                block(64, 256), nn.BatchNorm2d(256), nn.ReLU(),
                block(256, 256), nn.BatchNorm2d(256), nn.ReLU(),
                ChannelPool(4), nn.Dropout(0.5),
                nn.Conv2d(64, 256, (1, 4)), nn.BatchNorm2d(256), nn.ReLU(), nn.Dropout(0.5),
                nn.Conv2d(256, classes, (13, 1)), nn.BatchNorm2d(classes), nn.ReLU())
            self.container = nn.Conv2d(448 + classes, classes, 1)
            self.pool5 = nn.AvgPool2d(5, 5)
            self.pool410 = nn.AvgPool2d((4, 10), (4, 2))

        def forward(self, x: Any) -> Any:
            keep = []
            for i, layer in enumerate(self.backbone):
                x = layer(x)
                if i in (2, 6, 13, 22):
                    keep.append(x)
            ctx = []
            for i, f in enumerate(keep):
                if i < 2:
                    f = self.pool5(f)
                elif i == 2:
                    f = self.pool410(f)
                ctx.append(f / torch.mean(f * f))
            return torch.mean(self.container(torch.cat(ctx, 1)), dim=2)

    return LPRNet()


def _reid(torch: Any) -> Any:
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, down: bool) -> None:
            super().__init__()
            s = 2 if down else 1
            self.c1 = nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1, bias=False), nn.BatchNorm2d(cout),
                                    nn.ReLU())
            self.c2 = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, s, bias=False), nn.BatchNorm2d(cout))
                         if down or cin != cout else None)

        def forward(self, x: Any) -> Any:
            y = self.c2(self.c1(x))
            return torch.relu((self.down(x) if self.down is not None else x) + y)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(3, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                Block(64, 64, False), Block(64, 64, False), Block(64, 128, True), Block(128, 128, False),
                Block(128, 256, True), Block(256, 256, False), Block(256, 512, True),
                Block(512, 512, False), nn.AdaptiveAvgPool2d(1))

        def forward(self, x: Any) -> Any:
            x = self.body(x).flatten(1)
            return x / x.norm(p=2, dim=1, keepdim=True)

    return Net()


def _c3d(torch: Any) -> Any:
    nn = torch.nn

    def conv(cin: int, cout: int) -> Any:
        return nn.Sequential(nn.Conv3d(cin, cout, 3, padding=1), nn.ReLU())

    class C3D(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                conv(3, 64), nn.MaxPool3d((1, 2, 2), (1, 2, 2)),
                conv(64, 128), nn.MaxPool3d(2, 2),
                conv(128, 256), conv(256, 256), nn.MaxPool3d(2, 2),
                conv(256, 512), conv(512, 512), nn.MaxPool3d(2, 2),
                conv(512, 512), conv(512, 512), nn.MaxPool3d(2, 2, padding=(0, 1, 1)))
            self.head = nn.Sequential(nn.Linear(8192, 4096), nn.ReLU(), nn.Linear(4096, 4096),
                                      nn.ReLU(), nn.Linear(4096, 101))

        def forward(self, x: Any) -> Any:
            return self.head(self.features(x).flatten(1))

    return C3D()


TORCH_MODELS = {"LPRNet": (_lprnet, (3, 24, 94)), "ReID": (_reid, (3, 128, 64)),
                "C3D": (_c3d, (3, 16, 112, 112))}


def torch_graph(key: str, batch: int) -> Any:
    """A torch.nn model of :data:`TORCH_MODELS` (random weights, eval mode) as an IR graph."""
    import opbridge as ob

    torch = _torch()
    make, shape = TORCH_MODELS[key]
    torch.manual_seed(0)
    module = make(torch).eval()
    x = torch.randn(batch, *shape)
    with tempfile.TemporaryDirectory() as tmp:
        path = ob.export_torchscript(module, x, Path(tmp) / f"{key}.ts.json")
        return ob.convert(str(path))


def resnet50_graph(batch: int) -> Any:
    from tests.simulator.models import resnet_onnx, to_ir

    return to_ir(resnet_onnx(batch=batch))


def yolov3_graph(batch: int) -> Any:
    import opbridge as ob
    from opbridge.tools.caffe_weights import write_random_weights

    if not YOLO_PROTOTXT.is_file():
        raise NotBuildable(f"the shared YOLOv3 prototxt is not at {YOLO_PROTOTXT}")
    shapes = {"data": [batch, 3, 608, 608]}
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "yolov3.caffemodel"
        write_random_weights(YOLO_PROTOTXT, weights, input_shapes=shapes)
        return ob.convert(str(YOLO_PROTOTXT), weights=str(weights), input_shapes=shapes)


def bert_graph(batch: int) -> Any:
    """BERT-base encoder at sequence 256 with a token-classification head (bert4torch's NER
    sample classifies each token; the embedding lookup, a gather, is left out)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import opbridge as ob
    from tests.ir.transformer_models import bert_onnx

    m = bert_onnx(layers=12, hidden=768, heads=12, seq=256, batch=batch)
    g = m.graph
    rng = np.random.default_rng(3)
    g.initializer.append(numpy_helper.from_array(
        (rng.standard_normal((768, 9)) * 0.02).astype(np.float32), "ner.weight"))
    g.node.append(helper.make_node("MatMul", ["last_hidden_state", "ner.weight"], ["logits"], name="/ner"))
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 256, 9]))
    onnx.checker.check_model(m)
    return ob.convert(m)


BUILDERS = {"ResNet-50": resnet50_graph, "YOLOv3": yolov3_graph,
            "LPRNet": lambda b: torch_graph("LPRNet", b),
            "DeepSORT ReID extractor": lambda b: torch_graph("ReID", b),
            "C3D": lambda b: torch_graph("C3D", b), "BERT (bert4torch NER)": bert_graph}


def cast_f16(graph: Any) -> Any:
    """The graph with every f32 value and constant in f16 (what an fp16 bmodel computes in),
    for when ``ob.quantize(g, None, dtype="f16")`` is not available."""
    for v in graph.values().values():
        if v.dtype == "f32":
            v.dtype = "f16"
            if v.data is not None:
                v.data = np.asarray(v.data).astype(np.float16)
    return graph
