"""A YOLO-style detector ending in NonMaxSuppression + Gather (built here with onnx.helper):
the number of boxes depends on the image. Interpreter and simulator (the head compiled for the
TPU, NMS and what follows it as host layers) against onnxruntime, for inputs that give
different numbers of boxes."""

from __future__ import annotations

import numpy as np
import pytest

import opbridge as ob
from tests.conftest import requires_ort

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

pytestmark = requires_ort

#: Image scales whose detections differ in number (checked in test_counts_differ).
SCALES = (0.0, 0.3, 0.6, 1.0, 4.0)


def yolo_model():
    rng = np.random.default_rng(7)
    c = numpy_helper.from_array
    inits = [c(rng.standard_normal((6, 3, 4, 4)).astype(np.float32) * 0.5, "w"),
             c(np.zeros(6, np.float32), "b"),
             c(np.array([1, 6, 16], np.int64), "flat"),
             c(np.array([0], np.int64), "c0"), c(np.array([4], np.int64), "c4"),
             c(np.array([6], np.int64), "c6"), c(np.array([2], np.int64), "ax2"),
             c(np.array(16.0, np.float32), "img"),
             c(np.array([8], np.int64), "max_out"), c(np.array([0.45], np.float32), "iou"),
             c(np.array([0.8], np.float32), "thr"), c(np.array(2, np.int64), "col2"),
             c(np.array([0], np.int64), "ax0")]
    nodes = [
        helper.make_node("Conv", ["images", "w", "b"], ["head"], strides=[4, 4]),  # [1,6,4,4]
        helper.make_node("Reshape", ["head", "flat"], ["pred"]),                    # [1,6,16]
        helper.make_node("Transpose", ["pred"], ["pred_t"], perm=[0, 2, 1]),        # [1,16,6]
        helper.make_node("Slice", ["pred_t", "c0", "c4", "ax2"], ["raw_box"]),      # [1,16,4]
        helper.make_node("Sigmoid", ["raw_box"], ["box01"]),
        helper.make_node("Mul", ["box01", "img"], ["boxes"]),                       # cx,cy,w,h
        helper.make_node("Slice", ["pred_t", "c4", "c6", "ax2"], ["raw_cls"]),      # [1,16,2]
        helper.make_node("Sigmoid", ["raw_cls"], ["cls"]),
        helper.make_node("Transpose", ["cls"], ["scores"], perm=[0, 2, 1]),         # [1,2,16]
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "thr"], ["sel"],
                         center_point_box=1),                                       # [n,3]
        helper.make_node("Gather", ["sel", "col2"], ["box_idx"], axis=1),           # [n]
        helper.make_node("Squeeze", ["boxes", "ax0"], ["boxes16"]),                 # [16,4]
        helper.make_node("Gather", ["boxes16", "box_idx"], ["det_boxes"], axis=0),  # [n,4]
        helper.make_node("GatherND", ["scores", "sel"], ["det_scores"]),            # [n]
    ]
    g = helper.make_graph(nodes, "yolo", [helper.make_tensor_value_info("images", TensorProto.FLOAT,
                                                                        [1, 3, 16, 16])],
                          [helper.make_tensor_value_info("sel", TensorProto.INT64, None),
                           helper.make_tensor_value_info("det_boxes", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("det_scores", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def image(scale):
    return (np.random.default_rng(3).standard_normal((1, 3, 16, 16)) * scale).astype(np.float32)


def _ort(model, x):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"images": x})


def _compare(got, want):
    for name, w in zip(("sel", "det_boxes", "det_scores"), want):
        assert got[name].shape == w.shape, (name, got[name].shape, w.shape)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5, err_msg=name)
        else:
            np.testing.assert_array_equal(got[name], w, err_msg=name)


def test_counts_differ():
    m = yolo_model()
    counts = {len(_ort(m, image(s))[0]) for s in SCALES}
    assert len(counts) >= 3, counts


@pytest.mark.parametrize("scale", SCALES)
def test_interpreter_matches_onnxruntime(scale):
    m = yolo_model()
    g = ob.convert(m)
    _compare(ob.interpret(g, {"images": image(scale)}), _ort(m, image(scale)))


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    g = ob.convert(yolo_model())
    prog = ob.compile(g, "bm1684")
    path = tmp_path_factory.mktemp("yolo") / "yolo.obprog"
    prog.save(path)
    return ob.load_program(path)


@pytest.mark.parametrize("scale", SCALES)
def test_simulator_matches_onnxruntime(program, scale):
    _compare(program.run({"images": image(scale)}), _ort(yolo_model(), image(scale)))


def test_nms_and_what_follows_are_host_layers(program):
    p = program.profile()
    host_nodes = {n for u in program.units if type(u).__name__ == "HostUnit" for n in u.nodes}
    assert {"NonMaxSuppression_9", "Gather_12", "GatherND_13"} <= host_nodes
    assert "Conv_0" not in host_nodes
    assert p.num_cpu_layers == len(host_nodes) >= 3
    # NMS and Gather_10 on the host, Squeeze_11 on the TPU, then the last two Gathers: three
    # hand-overs between the TPU and the host
    kinds = ["host" if type(u).__name__ == "HostUnit" else "tpu" for u in program.units]
    assert kinds[-5:] == ["host", "host", "tpu", "host", "host"]
    assert p.num_host_syncs == 3 and p.host_ms > 0
