"""Validation with the other origin frameworks: OpenCV's cv2.dnn for Caffe, torch for
TorchScript-json; a wrong mapping is named as the first divergence in each."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import opbridge as ob
from tests.conftest import requires_cv2, requires_torch

RELU_PROTOTXT = """
name: "leaky_caffe"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" relu_param { negative_slope: 0.2 } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
        pooling_param { pool: AVE kernel_size: 2 stride: 2 } }
"""

BAD_CAFFE_RELU = '''
import opbridge as ob

@ob.mapping(ob.Framework.CAFFE, "ReLU", override=True)
def relu_without_slope(node, g):
    return g.op("Relu", [g.input(0)])   # negative_slope dropped
'''

BAD_TS_LEAKY = '''
import opbridge as ob

@ob.mapping(ob.Framework.TORCHSCRIPT, "aten::leaky_relu", override=True)
def leaky_without_slope(node, g):
    return g.op("LeakyRelu", [g.input(0)])   # negative_slope dropped: the IR default (0.01)
'''


def cli(*args):
    return subprocess.run([sys.executable, "-m", "opbridge", *args], capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def caffe_model(tmp_path_factory):
    from opbridge.tools.caffe_weights import write_random_weights

    d = tmp_path_factory.mktemp("caffe")
    (d / "net.prototxt").write_text(RELU_PROTOTXT)
    write_random_weights(d / "net.prototxt", d / "net.caffemodel", seed=0)
    return d / "net.prototxt", d / "net.caffemodel"


@requires_cv2
def test_caffe_passes_against_opencv(caffe_model):
    proto, weights = caffe_model
    r = ob.validate(str(proto), weights=str(weights))
    assert r.passed, r.summary()
    assert r.reference == "opencv"
    interp = [(row.tensor, row.node) for row in r.rows if row.candidate == "interpreter"]
    # the in-place ReLU's top keeps the blob name; the convolution's output got an SSA name
    assert ("conv1", "relu1") in interp and ("pool1", "pool1") in interp and len(interp) == 3


@requires_cv2
def test_bundled_fire_net_passes_against_opencv(tmp_path):
    from opbridge.examples import fire_net_prototxt
    from opbridge.tools.caffe_weights import write_random_weights

    write_random_weights(fire_net_prototxt(), tmp_path / "w.caffemodel", seed=3)
    r = ob.validate(str(fire_net_prototxt()), weights=str(tmp_path / "w.caffemodel"), target=None)
    assert r.passed and r.reference == "opencv"
    assert {"fire2/concat", "fire3/concat", "prob"} <= {row.tensor for row in r.rows}


@requires_cv2
def test_caffe_wrong_mapping_names_layer(caffe_model, tmp_path):
    proto, weights = caffe_model
    (tmp_path / "bad.py").write_text(BAD_CAFFE_RELU)
    rep = tmp_path / "r.json"
    r = cli("validate", str(proto), "--weights", str(weights), "--plugin", str(tmp_path / "bad.py"),
            "--report", str(rep))
    assert r.returncode == 1, r.stdout + r.stderr
    fd = json.loads(rep.read_text())["first_divergence"]
    assert (fd["node"], fd["op_type"], fd["tensor"], fd["reference"]) == ("relu1", "ReLU", "conv1", "opencv")


@pytest.fixture(scope="module")
def ts_model(tmp_path_factory):
    import torch

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.act = torch.nn.LeakyReLU(0.2)
            self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn = torch.nn.BatchNorm2d(4)
            self.fc = torch.nn.Linear(8 * 8 * 8, 5)

        def forward(self, x):
            y = self.act(self.conv(x))
            y = torch.cat([y + self.bn(self.conv2(y)), y * 0.5], 1)  # add.Tensor: alpha is keyword-only
            return torch.softmax(self.fc(torch.flatten(y + 1.0, 1)), -1)

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("ts") / "net.ts.json"
    net = Net().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-1, 1)
        net.bn.running_var.uniform_(0.5, 2.0)
    ob.export_torchscript(net, (torch.randn(1, 3, 8, 8),), str(path))
    return path, net


@requires_torch
def test_torchscript_passes_against_torch(ts_model):
    r = ob.validate(str(ts_model[0]), target=None)
    assert r.passed, r.summary()
    assert r.reference == "torch"
    nodes = [row.node for row in r.rows]
    assert "act" in nodes and "fc" in nodes


@requires_torch
def test_torchscript_reference_agrees_with_torch_itself(ts_model):
    # the node-by-node torch run reproduces the module's own output
    import torch

    from opbridge.validate.torch_runner import run_torch_json

    path, net = ts_model
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    doc = json.loads(path.read_text())
    out = run_torch_json(path, {"x": x}).tensors[doc["outputs"][0]["name"]]
    with torch.no_grad():
        want = net(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-7)


@requires_torch
def test_torchscript_wrong_mapping_names_node(ts_model, tmp_path):
    (tmp_path / "bad.py").write_text(BAD_TS_LEAKY)
    rep = tmp_path / "r.json"
    r = cli("validate", str(ts_model[0]), "--plugin", str(tmp_path / "bad.py"), "--no-simulator",
            "--report", str(rep))
    assert r.returncode == 1, r.stdout + r.stderr
    fd = json.loads(rep.read_text())["first_divergence"]
    assert (fd["node"], fd["reference"]) == ("act", "torch")
