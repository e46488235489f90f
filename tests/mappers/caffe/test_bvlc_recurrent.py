"""Caffe's LSTM, RNN and LSTMUnit against numpy written from BVLC's sources (OpenCV's LSTM
layer reads other blobs in another order and has no ``cont`` input, so it is no reference),
and, where every ``cont`` is 1, against torch.nn.LSTM / torch.nn.RNN.

Sources followed (github.com/BVLC/caffe, master): src/caffe/layers/recurrent_layer.cpp (bottoms
x, cont[, x_static][, h_0, c_0]; expose_hidden tops), lstm_layer.cpp (blobs W_xc, b_c,
[W_xc_static], W_hc; h_conted = cont_t * h_{t-1}), lstm_unit_layer.cpp (gates i, f, o, g;
f scaled by cont; c = f * c_prev + i * g; h = o * tanh(c)), rnn_layer.cpp (blobs W_xh, b_h,
[W_xh_static], W_hh, W_ho, b_o; o_t = tanh(W_ho h_t + b_o)).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import opbridge as ob
from opbridge.convert import convert
from opbridge.errors import MappingError
from opbridge.parsers.caffe_weights import read_caffemodel
from opbridge.tools.caffe_weights import write_random_weights


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def ref_lstm(x, cont, blobs, hidden, static=None, h0=None, c0=None):  # noqa: ANN001, ANN201
    """Caffe's unrolled LSTM, step by step in float64."""
    t_steps, n = cont.shape
    w_xc, b_c = blobs[0], blobs[1]
    w_hc = blobs[3] if static is not None else blobs[2]
    h = np.zeros((n, hidden)) if h0 is None else h0.reshape(n, hidden).astype(np.float64)
    c = np.zeros((n, hidden)) if c0 is None else c0.reshape(n, hidden).astype(np.float64)
    xs = x.reshape(t_steps, n, -1).astype(np.float64)
    hs = []
    for t in range(t_steps):
        ct = cont[t][:, None].astype(np.float64)
        gate = (ct * h) @ w_hc.T + xs[t] @ w_xc.T + b_c
        if static is not None:
            gate = gate + static.reshape(n, -1) @ blobs[2].T
        i, f, o, g = (gate[:, k * hidden:(k + 1) * hidden] for k in range(4))
        c = ct * _sig(f) * c + _sig(i) * np.tanh(g)
        h = _sig(o) * np.tanh(c)
        hs.append(h)
    return np.stack(hs), h[None], c[None]


def ref_rnn(x, cont, blobs, hidden, static=None, h0=None):  # noqa: ANN001, ANN201
    """Caffe's unrolled RNN, step by step in float64."""
    t_steps, n = cont.shape
    nxt = 3 if static is not None else 2
    w_xh, b_h = blobs[0], blobs[1]
    w_hh, w_ho, b_o = blobs[nxt], blobs[nxt + 1], blobs[nxt + 2]
    h = np.zeros((n, hidden)) if h0 is None else h0.reshape(n, hidden).astype(np.float64)
    xs = x.reshape(t_steps, n, -1).astype(np.float64)
    outs = []
    for t in range(t_steps):
        pre = (cont[t][:, None] * h) @ w_hh.T + xs[t] @ w_xh.T + b_h
        if static is not None:
            pre = pre + static.reshape(n, -1) @ blobs[2].T
        h = np.tanh(pre)
        outs.append(np.tanh(h @ w_ho.T + b_o))
    return np.stack(outs), h[None]


def _net(kind: str, t: int, n: int, k: tuple[int, ...], hidden: int, *, static: int | None = None,
         expose: bool = False) -> str:
    def inp(name: str, dims: tuple[int, ...]) -> str:
        return f'input: "{name}" input_shape {{ {" ".join(f"dim: {d}" for d in dims)} }}\n'

    text = inp("x", (t, n, *k)) + inp("cont", (t, n))
    bottoms = ["x", "cont"]
    if static is not None:
        text += inp("xs", (n, static))
        bottoms.append("xs")
    tops = ["y"]
    states = ("h0", "c0") if kind == "LSTM" else ("h0",)
    if expose:
        for s in states:
            text += inp(s, (1, n, hidden))
        bottoms += list(states)
        tops += ["hT", "cT"] if kind == "LSTM" else ["hT"]
    b = " ".join(f'bottom: "{x}"' for x in bottoms)
    tp = " ".join(f'top: "{x}"' for x in tops)
    ex = " expose_hidden: true" if expose else ""
    return (f'name: "r"\n{text}layer {{ name: "rec" type: "{kind}" {b} {tp} '
            f"recurrent_param {{ num_output: {hidden}{ex} }} }}\n")


def _run(tmp_path: Path, text: str, feeds: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], list]:
    proto = tmp_path / "net.prototxt"
    proto.write_text(text)
    model = tmp_path / "net.caffemodel"
    write_random_weights(proto, model, seed=3)
    blobs = [b.astype(np.float64) for b in read_caffemodel(model)["rec"]]
    g = convert(proto, weights=model)
    return ob.interpret(g, feeds), blobs


CONT = {
    "cont=all 1": lambda t, n: np.ones((t, n), np.float32),
    "cont=restarts": lambda t, n: (np.arange(t * n).reshape(t, n) % 3 != 1).astype(np.float32),
    "cont=0 first": lambda t, n: np.concatenate([np.zeros((1, n)), np.ones((t - 1, n))]).astype(np.float32),
}
SETUPS = {
    "plain": {}, "x rank 4": {"k": (2, 3)}, "static input": {"static": 3},
    "expose_hidden": {"expose": True}, "static+expose_hidden": {"static": 3, "expose": True},
    "T=1": {"t": 1},
}


@pytest.mark.parametrize("kind", ["LSTM", "RNN"])
@pytest.mark.parametrize("setup", list(SETUPS.values()), ids=list(SETUPS))
@pytest.mark.parametrize("make_cont", list(CONT.values()), ids=list(CONT))
def test_recurrent_matches_numpy_caffe(tmp_path: Path, kind: str, setup: dict, make_cont) -> None:  # noqa: ANN001
    t, n, hid = setup.get("t", 4), 3, 5
    k = setup.get("k", (6,))
    static, expose = setup.get("static"), setup.get("expose", False)
    rng = np.random.default_rng(7)
    feeds = {"x": rng.standard_normal((t, n, *k)).astype(np.float32), "cont": make_cont(t, n)}
    if static is not None:
        feeds["xs"] = rng.standard_normal((n, static)).astype(np.float32)
    if expose:
        feeds["h0"] = rng.standard_normal((1, n, hid)).astype(np.float32)
        if kind == "LSTM":
            feeds["c0"] = rng.standard_normal((1, n, hid)).astype(np.float32)
    out, blobs = _run(tmp_path, _net(kind, t, n, k, hid, static=static, expose=expose), feeds)
    if kind == "LSTM":
        want = ref_lstm(feeds["x"], feeds["cont"], blobs, hid, feeds.get("xs"), feeds.get("h0"), feeds.get("c0"))
        names = ["y", "hT", "cT"]
    else:
        want = ref_rnn(feeds["x"], feeds["cont"], blobs, hid, feeds.get("xs"), feeds.get("h0"))
        names = ["y", "hT"]
    assert list(out) == (names if expose else ["y"])
    for name, ref in zip(out, want):
        np.testing.assert_allclose(out[name], ref, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("kind", ["LSTM", "RNN"])
def test_recurrent_matches_torch_without_restarts(tmp_path: Path, kind: str) -> None:
    """With every cont = 1 (one sequence) and zero initial state Caffe's layers are torch's
    nn.LSTM (gates reordered: Caffe i, f, o, g; torch i, f, g, o) and nn.RNN + a tanh output
    projection."""
    torch = pytest.importorskip("torch")
    t, n, k, hid = 5, 2, 4, 3
    x = np.random.default_rng(1).standard_normal((t, n, k)).astype(np.float32)
    out, blobs = _run(tmp_path, _net(kind, t, n, (k,), hid), {"x": x, "cont": np.ones((t, n), np.float32)})
    with torch.no_grad():
        if kind == "LSTM":
            m = torch.nn.LSTM(k, hid)
            order = np.r_[0:2 * hid, 3 * hid:4 * hid, 2 * hid:3 * hid]
            m.weight_ih_l0.copy_(torch.tensor(blobs[0][order]))
            m.weight_hh_l0.copy_(torch.tensor(blobs[2][order]))
            m.bias_ih_l0.copy_(torch.tensor(blobs[1][order]))
            m.bias_hh_l0.zero_()
            want = m(torch.tensor(x))[0].numpy()
        else:
            m = torch.nn.RNN(k, hid)
            m.weight_ih_l0.copy_(torch.tensor(blobs[0]))
            m.bias_ih_l0.copy_(torch.tensor(blobs[1]))
            m.weight_hh_l0.copy_(torch.tensor(blobs[2]))
            m.bias_hh_l0.zero_()
            h = m(torch.tensor(x))[0]
            want = torch.tanh(h @ torch.tensor(blobs[3]).T.float() + torch.tensor(blobs[4]).float()).numpy()
    np.testing.assert_allclose(out["y"], want, rtol=1e-4, atol=1e-5)


def test_lstm_unit_matches_numpy(tmp_path: Path) -> None:
    n, d = 3, 4
    text = ('name: "u"\ninput: "c" input_shape { dim: 1 dim: 3 dim: 4 }\n'
            'input: "x" input_shape { dim: 1 dim: 3 dim: 16 }\ninput: "cont" input_shape { dim: 1 dim: 3 }\n'
            'layer { name: "unit" type: "LSTMUnit" bottom: "c" bottom: "x" bottom: "cont" top: "C" top: "H" }\n')
    proto = tmp_path / "u.prototxt"
    proto.write_text(text)
    rng = np.random.default_rng(2)
    feeds = {"c": rng.standard_normal((1, n, d)).astype(np.float32),
             "x": rng.standard_normal((1, n, 4 * d)).astype(np.float32),
             "cont": np.array([[1, 0, 1]], np.float32)}
    out = ob.interpret(convert(proto), feeds)
    xs = feeds["x"][0].astype(np.float64)
    i, f, o, g = (xs[:, j * d:(j + 1) * d] for j in range(4))
    c = feeds["cont"][0][:, None] * _sig(f) * feeds["c"][0] + _sig(i) * np.tanh(g)
    np.testing.assert_allclose(out["C"], c[None], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out["H"], (_sig(o) * np.tanh(c))[None], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("text", "match"), [
    ('input: "x" input_shape { dim: 2 dim: 3 dim: 4 }\ninput: "cont" input_shape { dim: 3 dim: 2 }\n'
     'layer { name: "rec" type: "LSTM" bottom: "x" bottom: "cont" top: "y" recurrent_param { num_output: 2 } }',
     r"bottom 1 \(cont\) has shape \[3, 2\]: needs \(T, N\)"),
    ('input: "x" input_shape { dim: 2 dim: 3 dim: 4 }\ninput: "cont" input_shape { dim: 2 dim: 3 }\n'
     'layer { name: "rec" type: "RNN" bottom: "x" bottom: "cont" top: "y" }',
     r"recurrent_param.num_output.*required"),
    ('input: "x" input_shape { dim: 2 dim: 3 dim: 4 }\ninput: "cont" input_shape { dim: 2 dim: 3 }\n'
     'layer { name: "rec" type: "LSTM" bottom: "x" top: "y" recurrent_param { num_output: 2 } }',
     r"takes 2 or 3 bottoms"),
], ids=["cont shape", "num_output absent", "one bottom"])
def test_recurrent_errors_name_the_layer(tmp_path: Path, text: str, match: str) -> None:
    proto = tmp_path / "bad.prototxt"
    proto.write_text(text)
    with pytest.raises(ob.OpbridgeError, match=match) as info:
        write_random_weights(proto, tmp_path / "bad.caffemodel")
    assert "rec" in str(info.value)
    assert not isinstance(info.value, MappingError) or "failed" not in str(info.value)


def test_lstm_compiles_and_runs_on_the_simulator(tmp_path: Path) -> None:
    t, n, hid = 3, 2, 4
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((t, n, 5)).astype(np.float32), "cont": CONT["cont=restarts"](t, n),
             "h0": rng.standard_normal((1, n, hid)).astype(np.float32),
             "c0": rng.standard_normal((1, n, hid)).astype(np.float32)}
    proto = tmp_path / "net.prototxt"
    proto.write_text(_net("LSTM", t, n, (5,), hid, expose=True))
    model = tmp_path / "net.caffemodel"
    write_random_weights(proto, model, seed=3)
    blobs = [b.astype(np.float64) for b in read_caffemodel(model)["rec"]]
    outs = ob.compile(convert(proto, weights=model), target="bm1684").run(feeds)
    want = ref_lstm(feeds["x"], feeds["cont"], blobs, hid, None, feeds["h0"], feeds["c0"])
    for name, ref in zip(["y", "hT", "cT"], want):
        np.testing.assert_allclose(outs[name], ref, rtol=1e-4, atol=1e-5, err_msg=name)

