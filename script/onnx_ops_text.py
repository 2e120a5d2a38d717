"""``TfIdfVectorizer`` on integer tokens: the n-gram counts of each row, weighted.

The pool of n-grams is a constant, so each n-gram size n and skip distance d is a static window:
the tokens at s, s + d, ..., s + (n - 1) d for every start s, compared at once with every pooled
n-gram of that size; the matches summed over the starts (and the distances) are the counts,
which a 0/1 matrix moves to their output columns."""
from __future__ import annotations

import numpy as np

from .onnx_convert import OnnxOpConverter, Unsupported, converter, dims_of, dtype_of
from .relax_op_api import op


def _pooled_ngrams(attrs):
    """{n: (the pooled n-grams as a (count, n) array, their output columns)} of the sizes
    between min_gram_length and max_gram_length (a repeated n-gram keeps its last column)."""
    pool = [int(v) for v in attrs.get("pool_int64s") or []]
    starts = list(attrs["ngram_counts"]) + [len(pool)]
    columns = list(attrs["ngram_indexes"])
    low, high = attrs["min_gram_length"], attrs["max_gram_length"]
    found, k = {}, 0
    for n, (begin, end) in enumerate(zip(starts, starts[1:]), start=1):
        grams = {}
        for at in range(begin, end - n + 1, n):
            grams[tuple(pool[at:at + n])] = columns[k]
            k += 1
        if low <= n <= high and grams:
            found[n] = (np.array(list(grams), np.int64).reshape(len(grams), n), list(grams.values()))
    return found


@converter("TfIdfVectorizer")
class TfIdfVectorizer(OnnxOpConverter):
    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        x = inputs[0]
        if attrs.get("pool_strings"):
            raise Unsupported("string tokens (pool_strings)")
        dims = dims_of(x)
        if len(dims) not in (1, 2) or not all(isinstance(d, int) for d in dims):
            raise Unsupported(f"an input of shape {dims} (one row [C] or rows [B, C] of static size)")
        rows = ctx.emit(op.reshape(x, [-1, dims[-1]]) if len(dims) == 1 else x)
        rows = ctx.emit(op.astype(rows, "int64")) if dtype_of(rows) != "int64" else rows
        batch, length = ([1] + dims)[-2:]
        width = max(attrs["ngram_indexes"]) + 1
        skips = attrs["max_skip_count"] + 1
        counts = None
        for n, (grams, columns) in _pooled_ngrams(attrs).items():
            hits = None
            for d in range(1, (skips if n > 1 else 1) + 1):  # (unigrams are counted once)
                starts = length - (n - 1) * d
                if starts <= 0:
                    continue
                window = ctx.emit(op.stack([ctx.emit(op.strided_slice(rows, [1], [j * d], [j * d + starts]))
                                            for j in range(n)], axis=2))  # (batch, starts, n)
                same = ctx.emit(op.equal(ctx.emit(op.expand_dims(window, [2])), ctx.constant(grams)))
                matched = ctx.emit(op.astype(ctx.emit(op.min(ctx.emit(op.astype(same, "int32")), [3])), "float32"))
                found = ctx.emit(op.sum(matched, [1]))  # (batch, pooled n-grams)
                hits = found if hits is None else ctx.emit(op.add(hits, found))
            if hits is None:
                continue
            place = np.zeros((len(columns), width), np.float32)
            place[np.arange(len(columns)), columns] = 1
            moved = ctx.emit(op.matmul(hits, ctx.constant(place)))
            counts = moved if counts is None else ctx.emit(op.add(counts, moved))
        if counts is None:
            counts = ctx.constant(np.zeros((batch, width), np.float32))
        weights = np.asarray(attrs.get("weights") or [], np.float32)
        mode = attrs["mode"]
        if mode == "IDF":
            seen = ctx.emit(op.astype(ctx.emit(op.greater(counts, ctx.constant(0, "float32"))), "float32"))
            counts = ctx.emit(op.multiply(seen, ctx.constant(weights))) if weights.size else seen
        elif mode == "TFIDF" and weights.size:
            counts = ctx.emit(op.multiply(counts, ctx.constant(weights)))
        elif mode not in ("TF", "TFIDF"):
            raise Unsupported(f"the mode {mode!r}")
        return op.reshape(counts, [width]) if len(dims) == 1 else counts
