"""Text features: TfIdfVectorizer (ONNX TfIdfVectorizer-9) over integer token ids.

Semantics: https://onnx.ai/onnx/operators/onnx__TfIdfVectorizer.html. The pool holds the
n-grams to count, grouped by length: ``ngram_counts[k]`` is where the (k+1)-grams start in
``pool_int64s``. An n-gram of length n >= 2 is also matched with ``s`` skipped tokens between
its items, for every ``s`` in 0..max_skip_count (each counted); unigrams are counted once. The
i-th n-gram of the pool is counted at output ``ngram_indexes[i]`` with weight ``weights[i]``
(the spec's reading and onnxruntime's; onnx.reference reads the weights per output coordinate,
which differs when ``ngram_indexes`` is not the identity). In IDF mode an output shared by
several n-grams takes the weight of the last one present, as onnxruntime. The IR has no string dtype:
tokens are integer ids (the ONNX mapping refuses ``pool_strings``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..opdef import ShapeContext, define_op

MODES = ("TF", "IDF", "TFIDF")


def pool_ngrams(pool: tuple[int, ...], counts: tuple[int, ...]) -> list[np.ndarray]:
    """The pool's n-grams by length: item k is a [grams, k+1] array (possibly empty)."""
    out = []
    for k, start in enumerate(counts):
        end = counts[k + 1] if k + 1 < len(counts) else len(pool)
        n = k + 1
        out.append(np.asarray(pool[start:end], np.int64).reshape(-1, n))
    return out


def _check_pool(ctx: ShapeContext) -> int:
    """Checks the pool's layout; the number of n-grams it holds."""
    pool, counts = ctx.attr("pool_int64s"), ctx.attr("ngram_counts")
    if not pool:
        raise ctx.error("is empty; it holds the n-grams to count", attr="pool_int64s",
                        hint="give the pool of n-grams as integer token ids")
    if not counts or counts[0] != 0 or any(b < a for a, b in zip(counts, counts[1:], strict=False)) \
            or counts[-1] > len(pool):
        raise ctx.error(f"{list(counts)} must start at 0 and not decrease, within the pool "
                        f"({len(pool)} items)", attr="ngram_counts",
                        hint="give the start of the 1-grams, 2-grams, ... in pool_int64s")
    total = 0
    for k, start in enumerate(counts):
        end = counts[k + 1] if k + 1 < len(counts) else len(pool)
        if (end - start) % (k + 1):
            raise ctx.error(f"the {k + 1}-grams span {end - start} pool items, not a multiple of "
                            f"{k + 1}", attr="ngram_counts",
                            hint="each group of the pool holds whole n-grams")
        total += (end - start) // (k + 1)
    return total


def _tfidf_shape(ctx: ShapeContext) -> Any:
    shape = ctx.input_shape(0)
    if len(shape) not in (1, 2):
        raise ctx.error(f"X has shape {list(shape)}; it needs [C] or [N, C] token ids",
                        hint="give a 1-D sequence or a 2-D batch of sequences")
    lo, hi = ctx.attr("min_gram_length"), ctx.attr("max_gram_length")
    if hi < lo:
        raise ctx.error(f"{hi} is less than min_gram_length {lo}", attr="max_gram_length",
                        hint="give min_gram_length <= max_gram_length")
    total = _check_pool(ctx)
    indexes, weights = ctx.attr("ngram_indexes"), ctx.attr("weights")
    if len(indexes) != total or min(indexes, default=0) < 0:
        raise ctx.error(f"has {len(indexes)} entries for {total} n-grams in the pool (each >= 0)",
                        attr="ngram_indexes", hint="give one output index per n-gram of the pool")
    size = max(indexes) + 1
    if weights and len(weights) != total:
        raise ctx.error(f"has {len(weights)} entries for {total} n-grams in the pool",
                        attr="weights", hint="give one weight per n-gram of the pool, or none")
    out = (size,) if len(shape) == 1 else (shape[0], size)
    return out, "f32"


def _match(pool: np.ndarray, window: np.ndarray, radix: int) -> np.ndarray:
    """For each n-gram of ``window`` ([..., n] dense ids, 0 for a token not in the pool), the
    1-based rank of the equal n-gram among the distinct rows of ``pool`` ([K, n]), else 0.

    Columns are folded in one at a time and renumbered among the pool's prefixes, so the codes
    stay below K * radix whatever n is."""
    pc = np.zeros(len(pool), np.int64)
    wc = np.zeros(window.shape[:-1], np.int64)
    found = np.ones(window.shape[:-1], bool)
    for j in range(pool.shape[1]):
        folded = pc * radix + pool[:, j]
        prefixes = np.unique(folded)
        pc = np.searchsorted(prefixes, folded)
        wfold = wc * radix + window[..., j]
        wc = np.minimum(np.searchsorted(prefixes, wfold), len(prefixes) - 1)
        found &= prefixes[wc] == wfold
    return np.where(found, wc + 1, 0)


def _count(x: np.ndarray, grams: list[np.ndarray], lo: int, hi: int,
           max_skip: int) -> np.ndarray:
    """[rows, n-grams of the pool] counts of the pool's n-grams in each row of x (2-D)."""
    rows, c = x.shape
    freq = np.zeros((rows, sum(len(g) for g in grams)), np.float64)
    vocab = np.unique(np.concatenate([g.ravel() for g in grams]))
    pos = np.minimum(np.searchsorted(vocab, x), len(vocab) - 1)
    ids = np.where(vocab[pos] == x, pos + 1, 0)  # 0: a token not in the pool
    first = 0
    for k, pool in enumerate(grams):
        n, ngram_ids = k + 1, np.arange(first, first + len(pool))
        first += len(pool)
        if not lo <= n <= hi or not len(pool):
            continue
        pool_ids = np.searchsorted(vocab, pool) + 1
        ranks = _match(pool_ids, pool_ids[None], len(vocab) + 1)[0]
        # the pool n-gram of each distinct one; with duplicates the last wins, as in the
        # runtimes' tries
        out_of = np.zeros(int(ranks.max()) + 1, np.int64)
        out_of[ranks] = ngram_ids
        for skip in range(max_skip + 1 if n > 1 else 1):
            step = skip + 1
            starts = c - step * (n - 1)
            if starts <= 0:
                break
            at = np.arange(starts)[:, None] + step * np.arange(n)[None, :]
            rank = _match(pool_ids, ids[:, at], len(vocab) + 1)  # [rows, starts]
            r, s = np.nonzero(rank)
            np.add.at(freq, (r, out_of[rank[r, s]]), 1)
    return freq


def tfidf_vectorizer(x: np.ndarray, *, mode: str, min_gram_length: int, max_gram_length: int,
                     max_skip_count: int, ngram_counts: tuple[int, ...],
                     ngram_indexes: tuple[int, ...], pool_int64s: tuple[int, ...],
                     weights: tuple[float, ...]) -> np.ndarray:
    """The n-gram counts of each row of x, weighted by ``mode``, as float32."""
    indexes = np.asarray(ngram_indexes, np.int64)
    size = int(indexes.max()) + 1
    rows = x.reshape(1, -1) if x.ndim == 1 else x
    grams = pool_ngrams(pool_int64s, ngram_counts)
    freq = _count(rows.astype(np.int64), grams, min_gram_length, max_gram_length, max_skip_count)
    w = np.asarray(weights, np.float64) if weights else np.ones(len(indexes))
    y = np.zeros((len(rows), size), np.float64)
    if mode == "IDF":
        for i, out in enumerate(indexes):  # the last n-gram present sets a shared output
            y[:, out] = np.where(freq[:, i] > 0, w[i], y[:, out])
    else:
        np.add.at(y.T, indexes, (freq * w if mode == "TFIDF" else freq).T)
    y = y.astype(np.float32)
    return y[0] if x.ndim == 1 else y


(
    define_op("TfIdfVectorizer")
    .doc("Counts the pool's n-grams (with skips) in each sequence of integer token ids, "
         "weighted as TF, IDF or TFIDF: [C] -> [size] or [N, C] -> [N, size].")
    .input("x", "T").output("y", "f32")
    .param("mode", "str", allowed=MODES, doc="TF: counts; IDF: weight where present; TFIDF: "
           "weight * count (no weights: weight 1)")
    .param("min_gram_length", "int", minimum=1)
    .param("max_gram_length", "int", minimum=1)
    .param("max_skip_count", "int", minimum=0, doc="most tokens skipped between an n-gram's items")
    .param("ngram_counts", "ints", doc="where the 1-grams, 2-grams, ... start in the pool")
    .param("ngram_indexes", "ints", doc="the output coordinate of each n-gram of the pool")
    .param("pool_int64s", "ints", doc="the n-grams to count, as token ids")
    .param("weights", "floats", default=(), doc="a weight per n-gram of the pool (IDF, TFIDF)")
    .type_param("T", ("i32", "i64"))
    .shape_fn(_tfidf_shape)
    .compute(tfidf_vectorizer)
)
