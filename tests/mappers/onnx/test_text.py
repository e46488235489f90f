"""TfIdfVectorizer-9 against onnx.reference and onnxruntime, case by case beyond the official node
tests (1-D input, IDF and TFIDF with and without weights, trigrams, min_gram_length > 1, skips,
outputs shared by several n-grams, int64 ids), the simulator against the interpreter, and the
refusal of pool_strings (a real string-token model included) and of malformed pools (CLI exit 2
with error: and hint:)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import opbridge as ob
from opbridge.cli import main

#: A pool of 1-grams [2, 3, 5, 4], 2-grams [5,6] [7,8] [6,7] and a 3-gram [2,3,5].
POOL = dict(pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5], ngram_counts=[0, 4, 10])
X1 = [1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8, 2, 3, 5, 4]
X2 = [[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8], [2, 3, 5, 5, 6, 7]]


def _model(x: np.ndarray, **attrs: Any) -> onnx.ModelProto:
    code = TensorProto.INT32 if x.dtype == np.int32 else TensorProto.INT64
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="tfidf", **attrs)
    graph = helper.make_graph([node], "tfidf", [helper.make_tensor_value_info("x", code, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


IDENT = list(range(8))
CASES: dict[str, tuple[Any, dict[str, Any]]] = {
    "1d-tf-uni-bi": (X1, dict(mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
                              ngram_indexes=IDENT)),
    "2d-tf-all-skip2": (X2, dict(mode="TF", min_gram_length=1, max_gram_length=3, max_skip_count=2,
                                 ngram_indexes=IDENT)),
    "2d-tf-only-tri": (X2, dict(mode="TF", min_gram_length=3, max_gram_length=3, max_skip_count=1,
                                ngram_indexes=IDENT)),
    "1d-idf-no-weights": (X1, dict(mode="IDF", min_gram_length=1, max_gram_length=2,
                                   max_skip_count=3, ngram_indexes=IDENT)),
    "1d-idf-weights": (X1, dict(mode="IDF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
                                ngram_indexes=IDENT, weights=[.5, 1, 2, 3, 4, 5, 6, 7])),
    "2d-tfidf-weights": (X2, dict(mode="TFIDF", min_gram_length=1, max_gram_length=3,
                                  max_skip_count=5, ngram_indexes=IDENT,
                                  weights=[.5, 1, 2, 3, 4, 5, 6, 7])),
    "2d-tfidf-no-weights": (X2, dict(mode="TFIDF", min_gram_length=2, max_gram_length=2,
                                     max_skip_count=1, ngram_indexes=IDENT)),
    "shared-and-permuted-indexes": (X2, dict(mode="TF", min_gram_length=1, max_gram_length=3,
                                             max_skip_count=1,
                                             ngram_indexes=[3, 3, 0, 5, 1, 1, 2, 4])),
    "skip-longer-than-row": (X2, dict(mode="TF", min_gram_length=2, max_gram_length=3,
                                      max_skip_count=9, ngram_indexes=IDENT)),
}


@pytest.mark.parametrize("dtype", [np.int32, np.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_reference_and_onnxruntime(case: str, dtype: type) -> None:
    data, attrs = CASES[case]
    x = np.asarray(data, dtype)
    model = _model(x, **POOL, **attrs)
    got = np.asarray(ob.interpret(ob.convert(model), {"x": x})["y"])
    assert got.dtype == np.float32
    if "weights" in attrs or attrs["mode"] == "TF":  # onnx.reference fails on IDF/TFIDF without
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]  # weights (len(None))
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the second reference")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(got, sess.run(None, {"x": x})[0])


def test_counts_by_hand() -> None:
    """Independent of both runtimes: in [5, 6, 7, 5, 6] with one skip allowed, the 2-gram [5, 6]
    occurs twice adjacent and [5, 7] ... is not in the pool; [6, 7] once adjacent, and with one
    skip [5, 7] (no), [6, 5] (no), [7, 6] (no): so [5,6] -> 2, [6,7] -> 1."""
    x = np.asarray([5, 6, 7, 5, 6], np.int64)
    model = _model(x, **POOL, mode="TF", min_gram_length=2, max_gram_length=2, max_skip_count=1,
                   ngram_indexes=IDENT)
    got = np.asarray(ob.interpret(ob.convert(model), {"x": x})["y"])
    np.testing.assert_array_equal(got, [0, 0, 0, 0, 2, 0, 1, 0])


def test_simulator_matches_interpreter() -> None:
    x = np.random.default_rng(0).integers(0, 10, (4, 20)).astype(np.int32)
    g = ob.convert(_model(x, **POOL, mode="TFIDF", min_gram_length=1, max_gram_length=3,
                          max_skip_count=2, ngram_indexes=IDENT, weights=[1.0, 2, 3, 4, 5, 6, 7, 8]))
    want = np.asarray(ob.interpret(g, {"x": x})["y"])
    assert want.any()
    np.testing.assert_array_equal(ob.compile(g, target="bm1684").run({"x": x})["y"], want)


BASE = dict(mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0, ngram_indexes=IDENT)
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "pool_strings": (dict(pool_strings=["a", "b"], ngram_counts=[0], mode="TF", min_gram_length=1,
                          max_gram_length=1, max_skip_count=0, ngram_indexes=[0, 1]),
                     "pool_strings", "pool_int64s"),
    "mode": ({**POOL, **BASE, "mode": "BM25"}, "mode", "correct this value"),
    "max<min": ({**POOL, **BASE, "min_gram_length": 3}, "max_gram_length", "min_gram_length"),
    "counts-not-from-0": ({**BASE, "pool_int64s": POOL["pool_int64s"], "ngram_counts": [1, 4]},
                          "ngram_counts", "start of the 1-grams"),
    "ragged-bigrams": ({**BASE, "pool_int64s": [1, 2, 3], "ngram_counts": [0, 0],
                        "ngram_indexes": [0]}, "ngram_counts", "whole n-grams"),
    "indexes-too-few": ({**POOL, **BASE, "ngram_indexes": [0, 1]}, "ngram_indexes", "one output index"),
    "weights-too-few": ({**POOL, **BASE, "weights": [1.0]}, "weights", "one weight"),
    "skip<0": ({**POOL, **BASE, "max_skip_count": -1}, "max_skip_count", ""),
    "max_gram_length-absent": ({k: v for k, v in {**POOL, **BASE}.items() if k != "max_gram_length"},
                               "max_gram_length", "needs"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_attributes_are_refused(case: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    attrs, attr, hint = BAD[case]
    path = tmp_path / "tfidf.onnx"
    onnx.save(_model(np.zeros((6,), np.int64), **attrs), str(path))
    with pytest.raises(ob.OpbridgeError, match=r"'tfidf' \(TfIdfVectorizer\)") as err:
        ob.convert(str(path))
    assert attr in str(err.value) and err.value.hint and hint in err.value.hint
    assert main(["convert", str(path), "-o", str(tmp_path / "t.obir")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert any(line.startswith("error:") and "TfIdfVectorizer" in line for line in lines)
    assert any(line.startswith("hint:") for line in lines)


STRING_POOL = ["the", "cat", "sat", "on", "cat", "sat", "the", "mat"]  # 4 1-grams, 2 2-grams


def _string_model(x_type: int, **pool: Any) -> onnx.ModelProto:
    node = helper.make_node("TfIdfVectorizer", ["tokens"], ["y"], name="tfidf", mode="TF",
                            min_gram_length=1, max_gram_length=2, max_skip_count=1,
                            ngram_counts=[0, 4], ngram_indexes=list(range(6)), **pool)
    graph = helper.make_graph([node], "text", [helper.make_tensor_value_info("tokens", x_type, [2, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=9)


def test_string_token_model_gets_the_pool_strings_refusal(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture) -> None:
    """A real string-token model (string input, pool_strings) is refused by the vectorizer's own
    words, naming the node, not by the general error on its string input; and the way the hint
    gives (ids for the strings, pool_int64s, an int64 input) converts to a model whose output on
    the ids is onnxruntime's on the strings."""
    model = _string_model(TensorProto.STRING, pool_strings=STRING_POOL)
    onnx.checker.check_model(model)
    path = tmp_path / "text.onnx"
    onnx.save(model, str(path))
    with pytest.raises(ob.UnsupportedOpError, match=r"'tfidf' \(TfIdfVectorizer\): a pool of string "
                                                    r"tokens \(pool_strings\) is not supported") as err:
        ob.convert(str(path))
    assert "integer token ids" in str(err.value) and "pool_int64s" in err.value.hint
    assert main(["convert", str(path), "-o", str(tmp_path / "t.obir")]) == 2
    out = capsys.readouterr().err
    assert "error:" in out and "pool_strings" in out and "hint:" in out and "dtype object" not in out

    ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the string model")
    tokens = np.array([["the", "cat", "sat", "on", "the"], ["mat", "dog", "cat", "the", "sat"]], object)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"tokens": tokens})[0]
    ids = {t: i for i, t in enumerate(dict.fromkeys(STRING_POOL))}  # the hint's recipe
    g = ob.convert(_string_model(TensorProto.INT64, pool_int64s=[ids[t] for t in STRING_POOL]))
    x = np.vectorize(lambda t: ids.get(t, -1))(tokens).astype(np.int64)
    assert want.any()
    np.testing.assert_array_equal(np.asarray(ob.interpret(g, {"tokens": x})["y"]), want)


def test_string_input_read_by_a_mapped_op_names_the_node() -> None:
    """A string input read by a node whose mapping has no refusal of its own: the general dtype
    error, now naming that node."""
    node = helper.make_node("Identity", ["s"], ["y"], name="ident")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ob.UnsupportedOpError, match=r"'ident' \(Identity\): input 's' has dtype object"):
        ob.convert(model)


def test_unread_string_input_is_refused() -> None:
    """A string input no node reads is still refused (the IR graph could not declare it)."""
    node = helper.make_node("Relu", ["x"], ["y"], name="relu")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                                            helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ob.UnsupportedOpError, match=r"input 's' has dtype object"):
        ob.convert(model)


def test_large_ids_and_long_ngrams_match_onnxruntime() -> None:
    """Token ids near 2**40 and 4-grams: the n-gram codes must not overflow int64."""
    rng = np.random.default_rng(3)
    vocab = rng.integers(2**39, 2**40, 50)
    x = vocab[rng.integers(0, 50, (3, 40))].astype(np.int64)
    fours = x[0, 5:13].tolist() + x[1, 0:8:2].tolist()  # 2 + 1 four-grams that occur, with skips
    pool = vocab[:6].tolist() + fours
    model = _model(x, pool_int64s=pool, ngram_counts=[0, 6, 6, 6], mode="TF", min_gram_length=1,
                   max_gram_length=4, max_skip_count=1, ngram_indexes=list(range(9)))
    got = np.asarray(ob.interpret(ob.convert(model), {"x": x})["y"])
    assert got[:, 6:].sum() >= 3
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, {"x": x})[0])


def test_obir_round_trip(tmp_path: Path) -> None:
    x = np.asarray(X2, np.int64)
    g = ob.convert(_model(x, **POOL, mode="TFIDF", min_gram_length=1, max_gram_length=3,
                          max_skip_count=1, ngram_indexes=IDENT, weights=[.5, 1, 2, 3, 4, 5, 6, 7]))
    ob.save(g, tmp_path / "t.obir")
    np.testing.assert_array_equal(np.asarray(ob.interpret(ob.load(tmp_path / "t.obir"), {"x": x})["y"]),
                                  np.asarray(ob.interpret(g, {"x": x})["y"]))


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("indexes", [[7, 6, 5, 4, 3, 2, 1, 0], [3, 3, 0, 5, 1, 1, 2, 4]],
                         ids=["shuffled", "shared"])
def test_weights_follow_the_pool_ngram_as_onnxruntime(mode: str, indexes: list[int]) -> None:
    """The i-th weight belongs to the i-th n-gram of the pool (the spec; onnxruntime), so with
    ngram_indexes not the identity the outputs differ from onnx.reference's per-output reading:
    onnxruntime is the reference here (a skl2onnx TF-IDF model shuffles its indexes)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime reads the weights per n-gram; "
                              "onnx.reference does not")
    x = np.asarray(X2, np.int64)
    model = _model(x, **POOL, mode=mode, min_gram_length=1, max_gram_length=3, max_skip_count=1,
                   ngram_indexes=indexes, weights=[.5, 1, 2, 3, 4, 5, 6, 7])
    got = np.asarray(ob.interpret(ob.convert(model), {"x": x})["y"])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, {"x": x})[0], rtol=1e-6)


def test_string_input_a_branch_returns_is_refused_for_its_dtype() -> None:
    """An If branch that returns the outer string input: the dtype refusal, not a claim that
    the branch does not produce its output."""
    def branch(name: str) -> onnx.GraphProto:  # no node: the branch's output is 's' itself
        return helper.make_graph([], name, [], [helper.make_tensor_value_info("s", TensorProto.STRING, [2])])

    node = helper.make_node("If", ["c"], ["y"], name="choose", then_branch=branch("then"),
                            else_branch=branch("else"))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                            helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.STRING, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ob.UnsupportedOpError, match=r"input 's' has dtype object"):
        ob.convert(model)
