"""Converters of ONNX's ``ai.onnx.ml`` domain on numeric tensors: ``Binarizer``,
``ArrayFeatureExtractor`` and ``TreeEnsemble``; LabelEncoder's string forms are a run-time lookup
(``onnx_ops_string.string_lookup``)."""
from __future__ import annotations

import numpy as np

from .onnx_convert import OnnxOpConverter, Unsupported, as_dtype, converter, dtype_of, rank_of, scalar_like
from .onnx_ops_string import string_lookup
from .relax_op_api import op

_DOMAIN = "ai.onnx.ml."


@converter(_DOMAIN + "Binarizer")
class Binarizer(OnnxOpConverter):
    """1 where the input exceeds the threshold, 0 elsewhere, in the input's dtype."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x = inputs[0]
        above = ctx.emit(op.greater(x, scalar_like(attrs.get("threshold", 0.0), x)))
        return op.astype(above, dtype_of(x))


@converter(_DOMAIN + "ArrayFeatureExtractor")
class ArrayFeatureExtractor(OnnxOpConverter):
    """The elements of the last axis at the (flattened) indices; a 1-d input gives one row."""

    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        x, indices = inputs
        if rank_of(x) == 1:
            x = ctx.emit(op.expand_dims(x, [0]))
        flat = ctx.emit(op.reshape(as_dtype(indices, "int64"), [-1]))
        return op.take(x, flat, axis=rank_of(x) - 1)


@converter(_DOMAIN + "LabelEncoder")
class LabelEncoder(OnnxOpConverter):
    """Each element replaced by the value of its key (the default when no key equals it; a
    repeated key keeps its last value, as a dict does): Relax operators for numeric keys and
    values, a run-time lookup where either is strings."""

    takes_strings = True

    @classmethod
    def _impl_v2(cls, ctx, inputs, attrs):
        x = inputs[0]
        keys, values = (cls._given(attrs, side) for side in ("keys", "values"))
        if len(keys) != len(values) or not len(keys):
            raise Unsupported(f"{len(keys)} keys for {len(values)} values")
        table = dict(zip(keys.tolist(), values.tolist()))
        keys = np.array(list(table), keys.dtype)
        values = np.array(list(table.values()), values.dtype)
        if "default_tensor" in attrs:
            default = np.asarray(attrs["default_tensor"]).reshape(-1)[0]
        else:
            kind = "string" if values.dtype == object else "float" if values.dtype.kind == "f" else "int64"
            default = attrs.get(f"default_{kind}", {"string": "_Unused", "float": -0.0, "int64": -1}[kind])
        attrs.ignore("default_string", "default_int64", "default_float")
        if keys.dtype == object or values.dtype == object or dtype_of(x) == "string":
            return string_lookup(x, keys, values, default)
        equal = ctx.emit(op.equal(ctx.emit(op.expand_dims(as_dtype(x, str(keys.dtype)), [-1])), ctx.constant(keys)))
        hits = ctx.emit(op.astype(equal, "int8"))
        found = ctx.emit(op.take(ctx.constant(values), ctx.emit(op.argmax(hits, -1)), axis=0))
        known = ctx.emit(op.astype(ctx.emit(op.max(hits, [-1])), "bool"))
        return op.where(known, found, ctx.constant(default, str(values.dtype)))

    @staticmethod
    def _given(attrs, side):
        """The keys (or values) as a numpy array, from whichever attribute gives them."""
        for suffix, dtype in (("int64s", "int64"), ("floats", "float32"), ("strings", object), ("tensor", None)):
            if attrs.get(f"{side}_{suffix}") is not None:
                return np.asarray(attrs[f"{side}_{suffix}"], dtype).reshape(-1)
        raise Unsupported(f"no {side}")


# TreeEnsemble's node modes, as comparisons of the feature with the split
_COMPARE = {0: op.less_equal, 1: op.less, 2: op.greater_equal, 3: op.greater, 4: op.equal, 5: op.not_equal}
_MEMBER = 6


@converter(_DOMAIN + "TreeEnsemble")
class TreeEnsemble(OnnxOpConverter):
    """The trees are constants, so each root-to-leaf path is known at import: every node's
    condition is evaluated for every row (in float64, as the reference compares), a row takes a
    path when the conditions along it all have the path's outcomes (counted by two matmuls of
    0/1 matrices), and the weights of the paths taken are summed per target (one matmul), or
    their minimum or maximum taken."""

    @classmethod
    def _impl_v5(cls, ctx, inputs, attrs):
        x = inputs[0]
        if rank_of(x) != 2:
            raise Unsupported(f"a {rank_of(x)}-d input (the rows must be a 2-d tensor)")
        post, aggregate = attrs.get("post_transform", 0), attrs.get("aggregate_function", 1)
        if post != 0 or aggregate not in (0, 1, 2, 3):
            raise Unsupported(f"post_transform {post} with aggregate_function {aggregate} (only no post "
                              f"transform is supported)")
        attrs.ignore("nodes_hitrates")  # (a hint for runtimes, no effect on the result)
        modes = np.asarray(attrs["nodes_modes"]).reshape(-1).astype(int)
        features = np.asarray(attrs["nodes_featureids"], np.int64)
        splits = np.asarray(attrs["nodes_splits"], np.float64).reshape(-1)
        tracks = np.asarray(attrs.get("nodes_missing_value_tracks_true") or [0] * len(modes), bool)
        members = _member_sets(modes, attrs.get("membership_values"))
        paths = _paths(attrs)
        weights = np.asarray(attrs["leaf_weights"], np.float64).reshape(-1)
        targets = attrs["leaf_targetids"]
        n_targets = attrs["n_targets"]

        rows = ctx.emit(as_dtype(x, "float64"))
        value = ctx.emit(op.take(rows, ctx.constant(features), axis=1))  # (rows, nodes)
        split = ctx.constant(splits)
        holds = ctx.constant(np.zeros((1, len(modes)), bool))
        for mode, compare in _COMPARE.items():
            if (modes == mode).any():
                hit = ctx.emit(op.logical_and(ctx.emit(compare(value, split)), ctx.constant(modes == mode)))
                holds = ctx.emit(op.logical_or(holds, hit))
        if members is not None:
            inside = ctx.emit(op.equal(ctx.emit(op.expand_dims(value, [2])), ctx.constant(members)))
            holds = ctx.emit(op.logical_or(holds, ctx.emit(op.max(inside, axis=[2]))))
        if tracks.any():
            missing = ctx.emit(op.logical_and(ctx.emit(op.isnan(value)), ctx.constant(tracks)))
            holds = ctx.emit(op.logical_or(holds, missing))
        true = ctx.emit(op.astype(holds, "float64"))
        false = ctx.emit(op.subtract(ctx.constant(1.0), true))
        on_true = np.zeros((len(modes), len(paths)))
        on_false = np.zeros((len(modes), len(paths)))
        per_path = np.zeros((len(paths), n_targets))
        for p, (steps, leaf) in enumerate(paths):
            for node, outcome in steps:
                (on_true if outcome else on_false)[node, p] += 1
            per_path[p, targets[leaf]] = weights[leaf]
        agree = ctx.emit(op.add(ctx.emit(op.matmul(true, ctx.constant(on_true))),
                                ctx.emit(op.matmul(false, ctx.constant(on_false)))))
        taken = ctx.emit(op.equal(agree, ctx.constant([float(len(steps)) for steps, _ in paths])))
        if aggregate in (2, 3):  # (min / max over the leaves reached of each target, from the dtype's extreme)
            extreme = np.finfo(dtype_of(x)).max * (1 if aggregate == 2 else -1)
            owns = np.zeros((len(paths), n_targets), bool)
            owns[np.arange(len(paths)), [targets[leaf] for _, leaf in paths]] = True
            reached = ctx.emit(op.logical_and(ctx.emit(op.expand_dims(taken, [2])), ctx.constant(owns)))
            candidates = ctx.emit(op.where(reached, ctx.constant(per_path), ctx.constant(extreme, "float64")))
            reduce = op.min if aggregate == 2 else op.max
            return as_dtype(ctx.emit(reduce(candidates, [1])), dtype_of(x))
        if aggregate == 0:
            per_path /= len(attrs["tree_roots"])
        total = ctx.emit(op.matmul(ctx.emit(op.astype(taken, "float64")), ctx.constant(per_path)))
        return as_dtype(total, dtype_of(x))


def _member_sets(modes, values):
    """The set of each node (NaN for the nodes that are not set-membership ones), padded with
    NaN (which equals nothing) to a (nodes, largest set) array; None without set nodes."""
    if not (modes == _MEMBER).any():
        return None
    if values is None:
        raise Unsupported("set-membership nodes without membership_values")
    groups, current = [], []
    for v in np.asarray(values, np.float64).reshape(-1):
        if np.isnan(v):
            groups.append(current)
            current = []
        else:
            current.append(v)
    if len(groups) != (modes == _MEMBER).sum():
        raise Unsupported(f"{len(groups)} sets in membership_values for {(modes == _MEMBER).sum()} set nodes")
    table = np.full((len(modes), max(map(len, groups), default=0) or 1), np.nan)
    for node, group in zip(np.flatnonzero(modes == _MEMBER), groups):
        table[node, :len(group)] = group
    return table


def _paths(attrs):
    """Every root-to-leaf path: ([(node, outcome), ...], leaf index)."""
    true_ids, false_ids = attrs["nodes_truenodeids"], attrs["nodes_falsenodeids"]
    true_leaf, false_leaf = attrs["nodes_trueleafs"], attrs["nodes_falseleafs"]
    found = []

    def walk(node, steps):
        if len(steps) > len(true_ids):
            raise Unsupported("the nodes make a cycle")
        branches = ((True, true_ids[node], true_leaf[node]), (False, false_ids[node], false_leaf[node]))
        for outcome, child, is_leaf in branches:
            if is_leaf:
                found.append((steps + [(node, outcome)], child))
            else:
                walk(child, steps + [(node, outcome)])

    for root in attrs["tree_roots"]:
        if true_leaf[root] and false_leaf[root] and true_ids[root] == false_ids[root]:  # (a tree that is one leaf)
            found.append(([], true_ids[root]))
        else:
            walk(root, [])
    return found
