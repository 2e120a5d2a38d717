"""LegalizeOps for shape manipulation (reshape, concat, split, strided_slice, take, ...) and
the nn operators with windows (conv2d, pooling).

Each legalization builds the TE computation of the topi function TVM 0.27 calls for the operator
(``topi.reshape``, ``topi.split``, ``topi.nn.conv``, ``topi.nn.pool2d``, ...): the same names
for PrimFuncs, blocks and axes, and the indices in TVM's simplified form (``ir.arith.canonical``).
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ...ir import arith
from ...ir import relax as rx
from ...ir.expr import EQ, LE, Add, Cast, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul, PrimExpr, Sub
from ...ir.dtype import DataType
from ...ir.relax_infer import int_of, product, prove_equal
from ...ir.relax_ops_nn import layout_tokens
from .. import te
from ...ir.arith import CANONICAL, Analyzer, canonical, canonical_ge_zero, divisible
from .legalize import _NotLegalized, _broadcast_index, _compute, _tensor_sinfo, call_te, register_legalize

_INT64 = "int64"


def _i64(value: int) -> IntImm:
    return IntImm(DataType(_INT64), value)


def _out_dims(call: rx.Call) -> tuple:
    sinfo = _tensor_sinfo(call)
    if sinfo is None:
        raise _NotLegalized
    return tuple(sinfo.dims)


def _static(dims: Any) -> list | None:
    values = [int_of(d) for d in dims]
    return None if None in values else values


# ---------------------------------------------------------------- reshape family
def _reshape_compute(x: te.Tensor, shape: tuple) -> te.Tensor:
    """topi's reshape: the output index is flattened over ``shape`` and unflattened over the
    input's shape."""
    def body(idx: tuple) -> Any:
        flat = idx[0] if idx else IntImm(DataType("int64"), 0)  # (a scalar: element 0)
        for i in range(1, len(idx)):
            flat = flat * shape[i] + idx[i]
        src = []
        for d in reversed(tuple(x.shape)):
            src.append(canonical(arith.binary(FloorMod, flat, d)))
            flat = arith.binary(FloorDiv, flat, d)
        return x[tuple(reversed(src))]

    return _compute(shape, body, "T_reshape", "injective", "ax")


def _target_shape(call: rx.Call) -> tuple:
    arg = call.args[1]
    if isinstance(arg, rx.ShapeExpr):
        return tuple(arg.values)
    return _out_dims(call)


@register_legalize("relax.reshape")
def _reshape(bb: Any, call: rx.Call) -> Any:
    shape = _target_shape(call)
    source = tuple(_out_dims(call.args[0]))
    if any(int_of(d) == 0 for d in shape + source):
        raise _NotLegalized  # TVM fills an empty tensor with zeros; not covered
    if not prove_equal(product(shape), product(source)):
        raise _NotLegalized  # (left to the run-time reshape, which checks the element counts: the
        # kernel would wrap its indices around a smaller input, or leave a larger output unwritten)

    def reshape(x: te.Tensor) -> te.Tensor:
        return _reshape_compute(x, shape)

    return call_te(bb, reshape, call.args[0], primfunc_name_hint="reshape")


@register_legalize("relax.broadcast_to")
def _broadcast_to(bb: Any, call: rx.Call) -> Any:
    shape = _target_shape(call)

    def broadcast_to(x: te.Tensor) -> te.Tensor:
        return _compute(shape, lambda idx: x[tuple(_broadcast_index(x, shape, idx))],
                        "T_broadcast_to", "broadcast", "ax")

    return call_te(bb, broadcast_to, call.args[0], primfunc_name_hint="broadcast_to")


@register_legalize("relax.expand_dims")
def _expand_dims(bb: Any, call: rx.Call) -> Any:
    out = _out_dims(call)
    ndim = len(out)
    new = {a % ndim for a in call.attrs["axis"]}
    kept = [i for i in range(ndim) if i not in new]

    def expand_dims(x: te.Tensor) -> te.Tensor:
        return _compute(out, lambda idx: x[tuple(idx[i] for i in kept)], "expand_dims", "", "i")

    return call_te(bb, expand_dims, call.args[0], primfunc_name_hint="expand_dims")


@register_legalize("relax.squeeze")
def _squeeze(bb: Any, call: rx.Call) -> Any:
    dims = _out_dims(call.args[0])
    axes = call.attrs["axis"]
    if axes is None:
        removed = {i for i, d in enumerate(dims) if int_of(d) == 1}
    else:
        removed = {a % len(dims) for a in axes if int_of(dims[a % len(dims)]) in (1, None)}
    out = tuple(d for i, d in enumerate(dims) if i not in removed)

    def squeeze(x: te.Tensor) -> te.Tensor:
        def body(idx: tuple) -> Any:
            it = iter(idx)
            return x[tuple(_i64(0) if i in removed else next(it) for i in range(len(dims)))]

        return _compute(out, body, "T_squeeze", "injective", "ax")

    return call_te(bb, squeeze, call.args[0], primfunc_name_hint="squeeze")


# ---------------------------------------------------------------- concat / split
def _tuple_fields(bb: Any, expr: Any) -> tuple:
    """The tensors of a tuple argument: the fields of the tuple it is (or a variable is bound
    to), else each field taken out by a binding of its own, as TVM does."""
    tup = expr
    while isinstance(tup, rx.Var):
        bound = bb.lookup_binding(tup)
        if not isinstance(bound, (rx.Tuple, rx.Var)):
            break
        tup = bound
    if isinstance(tup, rx.Tuple):
        return tuple(tup.fields)
    count = len(expr.struct_info.fields)
    return tuple(bb.emit(rx.TupleGetItem(tup, i)) for i in range(count))


@register_legalize("relax.concat")
def _concat(bb: Any, call: rx.Call) -> Any:
    fields = _tuple_fields(bb, call.args[0])
    axis = call.attrs["axis"]
    if axis is None:
        raise _NotLegalized  # TVM flattens first; not covered
    # a part empty along the axis adds nothing (and reading it, even where never taken, is an
    # access of a buffer without elements)
    dims = [getattr(f.struct_info, "dims", None) for f in fields]
    kept = [f for f, d in zip(fields, dims) if not d or int_of(d[axis % len(d)]) != 0]
    fields = kept or fields[:1]

    def concatenate(*xs: te.Tensor) -> te.Tensor:
        ndim = len(xs[0].shape)
        ax = axis % ndim
        sizes = [x.shape[ax] for x in xs]
        total = sizes[0]
        for s in sizes[1:]:
            total = total + s
        shape = tuple(canonical(total) if i == ax else d for i, d in enumerate(xs[0].shape))

        def body(idx: tuple) -> Any:
            result = xs[0][idx]
            offset = idx[ax]
            for size, x in zip(sizes, xs[1:]):
                offset = offset - size
                at = tuple(canonical(offset) if i == ax else v for i, v in enumerate(idx))
                result = te.if_then_else(canonical_ge_zero(offset), x[at], result)
            return result

        return _compute(shape, body, "T_concat", "injective", "ax")

    return call_te(bb, concatenate, *fields, primfunc_name_hint="concatenate")


@register_legalize("relax.split")
def _split(bb: Any, call: rx.Call) -> Any:
    spec = call.attrs["indices_or_sections"]
    axis = call.attrs["axis"]

    def split(x: te.Tensor) -> list:
        ax = axis % len(x.shape)
        extent = x.shape[ax]
        name, starts = _split_starts(extent, spec)
        outs = []
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else extent
            length = _difference(end, start)
            shape = tuple(length if i == ax else d for i, d in enumerate(x.shape))
            outs.append(_compute(shape, _shifted(x, ax, start), name, "injective", "ax"))
        return outs

    return call_te(bb, split, call.args[0], primfunc_name_hint="split")


def _split_starts(extent: PrimExpr, spec: Any) -> tuple[str, list]:
    """topi's block name and the first index of each piece (ints where they are constant)."""
    if isinstance(spec, tuple):
        # topi refuses indices that do not increase from 0 and makes negative sizes of those
        # past the end; Relax allows both (empty pieces), so such a split stays a call
        size = int_of(extent)
        if any(i <= prev for prev, i in zip((0,) + spec, spec)) or \
                size is not None and spec and spec[-1] > size:
            raise _NotLegalized
        return "T_split", [0, *spec]
    size = int_of(extent)
    if size is not None:
        return "T_split_sections", [(size + spec - 1) // spec * k for k in range(spec)]
    # a symbolic axis: TVM's operators keep (n + k - 1) // k as written
    piece = FloorDiv(extent + _i64(spec) - _i64(1), _i64(spec))
    return "T_split_sections", [0] + [piece if k == 1 else piece * _i64(k) for k in range(1, spec)]


def _difference(end: Any, start: Any) -> PrimExpr:
    """``end - start`` folded as TVM's operators fold constants."""
    e = end if isinstance(end, int) else int_of(end)
    if not isinstance(start, int):
        return end - start
    if e is not None:
        return _i64(e - start)
    return end if start == 0 else end - _i64(start)


def _shifted(x: te.Tensor, ax: int, start: Any) -> Callable:
    """The element ``start`` further along axis ``ax``."""
    def body(idx: tuple) -> Any:
        if isinstance(start, int) and start == 0:
            return x[idx]
        off = _i64(start) if isinstance(start, int) else start
        return x[tuple(canonical(v + off) if i == ax else v for i, v in enumerate(idx))]
    return body


# ---------------------------------------------------------------- strided_slice
def _prim_values(expr: Any) -> list | None:
    if not isinstance(expr, rx.Tuple):
        return None
    values = []
    for f in expr.fields:
        if not isinstance(f, rx.PrimValue):
            return None
        values.append(f.value)
    return values


def _canonical_index(index: int, extent: int, stride: int) -> int:
    """A slice bound made non-negative and clamped to the extent (topi's CanonicalizeIndex)."""
    lo, hi = (-1, extent - 1) if stride < 0 else (0, extent)
    index = index + extent if index < 0 else index
    return min(max(index, lo), hi)


def _static_length(begin: int, end: int, stride: int, extent: int) -> int:
    """The length of a slice of a static axis: topi clamps both bounds first, even when Relax
    was told to assume them in bounds (so the result can be shorter than Relax inferred)."""
    b, e = _canonical_index(begin, extent, stride), _canonical_index(end, extent, stride)
    return max(0, -(-(e - b) // stride))


@register_legalize("relax.strided_slice")
def _strided_slice(bb: Any, call: rx.Call) -> Any:
    axes, begin, end = (_prim_values(a) for a in call.args[1:4])
    strides = _prim_values(call.args[4]) if len(call.args) > 4 else \
        [_i64(1)] * (len(axes) if axes is not None else 0)
    if None in (axes, begin, end, strides):
        raise _NotLegalized  # tuples of symbolic values given at run time: not covered
    stride_ints = [int_of(s) for s in strides]
    if None in stride_ints or 0 in stride_ints:
        raise _NotLegalized
    data_dims = _out_dims(call.args[0])
    ndim = len(data_dims)
    axis_ints = [int_of(a) % ndim for a in axes]
    inbound = bool(call.attrs["assume_inbound"])
    # topi slices a tensor of static shape with static bounds itself; else it takes the
    # dynamic path (another block name, lengths as Relax inferred them)
    static = None not in (_static(data_dims), _static(begin), _static(end))
    name = "T_strided_slice_with_axes" if static else "T_dynamic_strided_slice_with_axes"
    out = list(_out_dims(call))
    if static:
        for ax, b, e, s in zip(axis_ints, begin, end, stride_ints):
            out[ax] = _i64(_static_length(int_of(b), int_of(e), s, int_of(data_dims[ax])))

    starts = []
    for ax, b, s in zip(axis_ints, begin, stride_ints):
        extent, bi = int_of(data_dims[ax]), int_of(b)
        if bi is not None and extent is not None and (static or not inbound):
            starts.append(_i64(_canonical_index(bi, extent, s)))
        elif inbound:
            starts.append(b)
        elif bi is not None and bi >= 0 and s > 0:
            starts.append(Min(_i64(bi), data_dims[ax]))  # clamped to a symbolic extent
        else:
            raise _NotLegalized

    def strided_slice(x: te.Tensor) -> te.Tensor:
        def body(idx: tuple) -> Any:
            src = list(idx)
            for ax, start, s in zip(axis_ints, starts, stride_ints):
                # (a symbolic start is TVM's first term among those of the same scale)
                src[ax] = canonical(start + idx[ax] * _i64(s))
            return x[tuple(src)]

        return _compute(tuple(out), body, name, "injective", "ax")

    return call_te(bb, strided_slice, call.args[0], primfunc_name_hint="strided_slice")


# ---------------------------------------------------------------- take
@register_legalize("relax.take")
def _take(bb: Any, call: rx.Call) -> Any:
    axis = call.attrs["axis"]
    mode = call.attrs["mode"]
    if _tensor_sinfo(call.args[1]) is None:
        raise _NotLegalized  # a scalar (PrimValue) index: not covered
    if mode not in ("fast", "clip", "wrap"):
        raise _NotLegalized

    def take(x: te.Tensor, indices: te.Tensor) -> te.Tensor:
        # without an axis topi takes from the flattened data (Relax allows only 1-d data then)
        ax = 0 if axis is None else axis % len(x.shape)
        dim = x.shape[ax]
        k = len(indices.shape)
        shape = tuple(x.shape[:ax]) + tuple(indices.shape) + tuple(x.shape[ax + 1:])

        def body(idx: tuple) -> Any:
            i = indices[tuple(idx[ax:ax + k])]
            if mode == "clip":
                i = i if i.dtype == dim.dtype else Cast(dim.dtype, i)
                i = Min(Max(_i64(0), i), canonical(dim - _i64(1)))
            elif mode == "wrap":
                i = i if i.dtype == dim.dtype else Cast(dim.dtype, i)
                i = Mod(Mod(i, dim) + dim, dim)
            if axis is None and not (mode == "clip" and int_of(dim) is not None):
                i = i if i.dtype == dim.dtype else Cast(dim.dtype, i)  # (fast: not cast yet)
                i = FloorMod(i, dim)  # unflattened (TVM proves a clipped static index in range)
            return x[tuple(idx[:ax]) + (i,) + tuple(idx[ax + k:])]

        return _compute(shape, body, "T_take", "injective", "ax")

    return call_te(bb, take, call.args[0], call.args[1], primfunc_name_hint="take")


# ---------------------------------------------------------------- windows: conv and pooling in 1, 2, 3-d
def _pad(data: te.Tensor, before: list, after: list, value: PrimExpr, prefix: str,
         both_bounds: bool, name: str = "pad_temp") -> te.Tensor:
    """topi's ``nn.pad`` (named ``pad_temp`` when conv and pooling call it): padded positions
    read ``value``. The Python pad
    (``both_bounds``, used by conv) tests both ends of a padded axis; the C++ one (pooling)
    tests only the ends that have padding."""
    shape = tuple(canonical(d + _i64(b) + _i64(a)) for d, b, a in zip(data.shape, before, after))

    def body(idx: tuple) -> Any:
        index, inside = [], []
        for v, d, b, a in zip(idx, data.shape, before, after):
            if b == 0 and a == 0:
                index.append(v)
                continue
            index.append(canonical(v - _i64(b)))
            if b != 0 or both_bounds:
                inside.append(v >= _i64(b))
            if a != 0 or both_bounds:
                inside.append(_below(v, canonical(d + _i64(b))))
        if not inside:
            return data[tuple(index)]
        return te.if_then_else(te.all(*inside), data[tuple(index)], value)

    return _compute(shape, body, name, "injective,pad", prefix)


def _below(v: PrimExpr, bound: PrimExpr) -> PrimExpr:
    """``v < bound``, where TVM's simplifier writes ``v < n + 1`` as ``v <= n`` (a symbolic n)."""
    if isinstance(bound, Add) and int_of(bound.b) == 1 and int_of(bound.a) is None:
        return LE(v, bound.a)
    return v < bound


def cast_to(dtype: str) -> Callable[[PrimExpr], PrimExpr]:
    """A value in ``dtype`` (as itself when it is one): a conv's products in its ``out_dtype``."""
    return lambda v: v if str(v.dtype) == dtype else arith.cast(dtype, v)


def _window_index(out: Any, stride: int, r: Any, dilation: int) -> PrimExpr:
    return canonical(out * _i64(stride) + r * _i64(dilation))


def _layout_order(layout: str, first: str, second: str) -> list:
    """Where the canonical axes (``first``, ``second``, then the spatial ones in the order the
    layout names them) sit in ``layout``: topi's ``data_permutation_to``."""
    return [layout.index(first), layout.index(second)] + \
        [i for i, c in enumerate(layout) if c not in (first, second)]


def _inverse(order: list) -> list:
    return sorted(range(len(order)), key=order.__getitem__)


def channel_block(layout: str) -> int | None:
    """The channels per block of an ``NCHW{b}c`` layout (``x[n, c // b, h, w, c % b]``); None
    for any other layout."""
    tokens = layout_tokens(layout)
    return tokens[4][1] if tokens and [a for a, _ in tokens] == list("NCHWc") else None


def _plain_layout(*layouts: str) -> None:
    """Only layouts that permute the axes (NHWC, OHWI, NWC, ...) are covered, not split axes
    (NCHW4c); topi also needs the output in the data's layout."""
    rank = len(layouts[0])
    if any(len(x) != rank or not x.isupper() for x in layouts) or layouts[0] != layouts[-1]:
        raise _NotLegalized


# topi.nn.conv's names of the output's spatial axes and of the reduction axes over the window
_CONV_AXES = ("yy", "xx", "zz")
_CONV_REDUCE = ("ry", "rx", "rz")


def _conv_legalize(n: int) -> Callable:
    """topi.nn.conv with ``n`` spatial axes (conv1d, conv2d, conv3d)."""
    def legalize(bb: Any, call: rx.Call) -> Any:
        a = call.attrs
        data_layout, kernel_layout = a["data_layout"], a["kernel_layout"]
        if n == 2 and channel_block(a["out_layout"]):
            from .legalize_blocked import blocked_conv2d  # (it builds on this module's helpers)
            return blocked_conv2d(bb, call)
        _plain_layout(data_layout, kernel_layout, a["out_layout"])
        data_to, kernel_to = _layout_order(data_layout, "N", "C"), _layout_order(kernel_layout, "O", "I")
        data_from, kernel_from = _inverse(data_to), _inverse(kernel_to)
        # topi keeps the reduction axes (rc, ry, rx, ...) in the data layout's order
        reduce_order = [j - (j > data_from[0]) for j in data_from[1:]]
        out_shape = _out_dims(call)
        out_dtype = str(call.struct_info.dtype)
        strides, dilation, pad = a["strides"], a["dilation"], a["padding"]
        groups = a["groups"]
        name = f"{'group_' if groups > 1 else ''}conv{n}d_{data_layout.lower()}"

        def conv(data: te.Tensor, weight: te.Tensor) -> te.Tensor:
            channels, filters = int_of(data.shape[data_to[1]]), int_of(weight.shape[kernel_to[0]])
            if channels is None or filters is None:
                raise _NotLegalized
            before = [([0, 0] + list(pad[:n]))[j] for j in data_from]
            after = [([0, 0] + list(pad[n:]))[j] for j in data_from]
            padded = _pad(data, before, after, te.const(0, str(data.dtype)), "i", True)
            rc = te.reduce_axis((0, _i64(channels // groups)), name="rc")
            rs = [te.reduce_axis((0, weight.shape[kernel_to[2 + i]]), name=_CONV_REDUCE[i]) for i in range(n)]

            cast = cast_to(out_dtype)
            def body(*args: Any) -> Any:
                nn, ff, *spatial = (args[i] for i in data_to)
                channel = rc.var if groups == 1 else canonical(
                    ff // _i64(filters // groups) * _i64(channels // groups) + rc.var)
                src = [nn, channel] + [_window_index(o, strides[i], rs[i].var, dilation[i])
                                       for i, o in enumerate(spatial)]
                filt = [ff, rc.var] + [r.var for r in rs]
                reduce = [([rc] + rs)[j] for j in reduce_order]
                return te.sum(cast(padded[tuple(src[j] for j in data_from)]) *
                              cast(weight[tuple(filt[j] for j in kernel_from)]), axis=reduce)

            return te.compute(out_shape, body, name=name, tag=name,
                              varargs_names=[(["nn", "ff"] + list(_CONV_AXES[:n]))[j] for j in data_from])

        return call_te(bb, conv, call.args[0], call.args[1], primfunc_name_hint=f"conv{n}d")

    return legalize


for _n in (1, 2, 3):
    register_legalize(f"relax.nn.conv{_n}d")(_conv_legalize(_n))


_POOL_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _pool_legalize(kind: str, n: int) -> Callable:
    """topi's pool1d / pool2d / pool3d (``kind`` max or avg) over the ``n`` spatial axes."""
    def legalize(bb: Any, call: rx.Call) -> Any:
        a = call.attrs
        layout = a["layout"]
        if not channel_block(layout) or a["out_layout"] != layout:  # (NCHW16c: another channel axis)
            _plain_layout(layout, a["out_layout"])
        axes = [layout.index(c) for c in _POOL_SPATIAL[n]]
        out_shape = _out_dims(call)
        size, strides, dilation, pad = a["pool_size"], a["strides"], a["dilation"], a["padding"]
        ceil = bool(a["ceil_mode"])
        head = pad[:n]
        # in ceil mode TVM pads the tail by stride - 1 more, so that the last window fits
        tail = [pad[n + i] + (strides[i] - 1 if ceil else 0) for i in range(n)]
        names = [f"ax{i}" for i in range(len(out_shape))]

        def at_spatial(values: Any, spatial: list) -> list:
            values = list(values)
            for axis, v in zip(axes, spatial):
                values[axis] = v
            return values

        def pool(data: te.Tensor) -> te.Tensor:
            pad_value = te.min_value(data.dtype) if kind == "max" else te.const(0, str(data.dtype))
            src = data
            if any(head) or any(tail):
                zeros = [0] * len(data.shape)
                src = _pad(data, at_spatial(zeros, head), at_spatial(zeros, tail), pad_value, "ax", False)
            rv = [te.reduce_axis((0, _i64(size[i])), name=f"rv{i}") for i in range(n)]

            def window(idx: tuple) -> PrimExpr:
                return src[tuple(at_spatial(idx, [_window_index(idx[axis], strides[i], rv[i].var, dilation[i])
                                                  for i, axis in enumerate(axes)]))]

            if kind == "max":
                return te.compute(out_shape, lambda *idx: te.max(window(idx), axis=rv),
                                  name="pool_max", tag="pool_max", varargs_names=names,
                                  attrs={"schedule_rule": "meta_schedule.pool_max"})
            pool_sum = te.compute(out_shape, lambda *idx: te.sum(window(idx), axis=rv),
                                  name="pool_sum", tag="pool_sum", varargs_names=names)

            def average(*idx: Any) -> Any:
                count = None
                for i, axis in enumerate(axes):
                    c = _window_count(idx[axis], data.shape[axis], size[i], strides[i], dilation[i], head[i],
                                      tail[i], ceil, bool(a["count_include_pad"]))
                    count = c if count is None else count * c
                if not a["count_include_pad"] and all(size[i] == 1 and _one_element(strides[i], dilation[i], head[i])
                                                      for i in range(n)):
                    return pool_sum[idx]  # (TVM's simplifier proves each window holds one element)
                if not a["count_include_pad"]:
                    count = Max(count, _i64(1))
                return pool_sum[idx] / Cast(data.dtype, count)

            return te.compute(out_shape, average, name="pool_avg", tag="elemwise", varargs_names=names,
                              attrs={"schedule_rule": "meta_schedule.pool_avg"})

        return call_te(bb, pool, call.args[0], primfunc_name_hint=f"{kind}_pool{n}d")

    return legalize


def _one_element(s: int, d: int, head: int) -> bool:
    """Whether TVM's simplifier proves that a window of one element (pool_size 1) counts one
    (it does for these strides, dilations and paddings, not for the others)."""
    return s == 1 and head == 0 if d == 1 else s == 1 or s % d == 0


def _window_count(o: Any, extent: PrimExpr, k: int, s: int, d: int, head: int, tail: int,
                  ceil: bool, include_pad: bool) -> PrimExpr:
    """How many elements the window of output position ``o`` averages (topi's pool_avg), in
    the forms TVM's simplifier gives (``x`` is the window's start ``o * s`` before padding)."""
    x = canonical(o * _i64(s))
    if include_pad:
        # (min(x + a, L) - (x - head)) / d + 1 becomes (min(a, L - x) + head) / d + 1
        limit = canonical(extent + _i64(tail - 1 - (s - 1 if ceil else 0)))
        a, rest = (k - 1) * d - head, canonical(limit - x)
        if d == 1:
            return canonical(_factored(Min, _i64(a), rest) + _i64(head + 1))
        if a < 0 or head == 0:  # the head joins a negative side of the min: min(a + head, rest + head)
            low, high = a + head, canonical(rest + _i64(head))
            if low % d == 0 and divisible(high, d):
                return canonical(Min(_i64(low // d), canonical(FloorDiv(high, _i64(d)))) + _i64(1))
            return Div(Min(_i64(low), high), _i64(d)) + _i64(1)
        return Div(canonical(_factored(Min, _i64(a), rest) + _i64(head)), _i64(d)) + _i64(1)
    last = canonical(extent - _i64(1))
    if d == 1:
        # min(x + k - 1 - head, last) - (x - head) - max(head - x, 0) + 1: with a unit stride
        # the min absorbs x; without padding the max becomes min(o, 0) * s
        before = _factored(Max, canonical(_i64(head) - x), _i64(0))
        if s == 1:
            return canonical(Min(_i64(k - 1 - head), canonical(last - x)) + _i64(head + 1) - before)
        window = _factored(Min, canonical(x + _i64(k - 1 - head)), last)
        if head == 0:
            return canonical(Min(o, _i64(0)) * _i64(s) + window + _i64(1) - x)
        return canonical(window + _i64(head + 1) - before - x)
    # dilated: (min(a, last - x) + head - skip * d) / d + 1, skip the padded positions jumped
    # over; divided term by term where every term divides
    skip = Max(_exact_div(canonical(_i64(d - 1 + head) - x), d), _i64(0))
    a, rest = (k - 1) * d - head, canonical(last - x)
    if s > 1 and s % d:  # (a stride the dilation does not divide keeps the window's start outside)
        shift = head if a < 0 else 0  # (the head joins a negative offset inside the min)
        window = Min(canonical(x + _i64(a + shift)), canonical(last + _i64(shift)))
        return Div(canonical(window + _i64(head - shift) - skip * _i64(d) - x), _i64(d)) + _i64(1)
    if a % d == 0 and head % d == 0 and divisible(rest, d):
        span = Min(_i64(a // d), canonical(FloorDiv(rest, _i64(d))))
        return canonical(span + _i64(head // d + 1) - skip)
    if a < 0:  # (the head joins a negative side of the min)
        return Div(canonical(Min(_i64(a + head), canonical(rest + _i64(head))) - skip * _i64(d)),
                   _i64(d)) + _i64(1)
    return Div(canonical(Min(_i64(a), rest) + _i64(head) - skip * _i64(d)), _i64(d)) + _i64(1)


def _factored(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    """``min(a, b)`` / ``max(a, b)`` with a constant factor common to both taken out, as TVM's
    simplifier does: ``min(o * 2 + 2, 4)`` is ``min(o + 1, 2) * 2``."""
    sums = [Analyzer(CANONICAL).canonical(e) for e in (a, b)]
    g = 0
    for s in sums:
        for value in [s.base] + [t.scale for t in s.terms]:
            g = math.gcd(g, value)
    if g <= 1:
        return cls(a, b)
    return cls(canonical(FloorDiv(a, _i64(g))), canonical(FloorDiv(b, _i64(g)))) * _i64(g)


def _exact_div(e: PrimExpr, d: int) -> PrimExpr:
    """``e / d`` truncating, divided term by term where every term divides."""
    return canonical(FloorDiv(e, _i64(d))) if divisible(e, d) else Div(e, _i64(d))


for _n in _POOL_SPATIAL:
    register_legalize(f"relax.nn.max_pool{_n}d")(_pool_legalize("max", _n))
    register_legalize(f"relax.nn.avg_pool{_n}d")(_pool_legalize("avg", _n))


# ---------------------------------------------------------------- flatten, flip, tile, repeat
@register_legalize("relax.flatten")
def _flatten(bb: Any, call: rx.Call) -> Any:
    """A reshape to one dimension (TVM legalizes it so: its kernel is ``reshape``)."""
    shape = _out_dims(call)
    return call_te(bb, lambda x: _reshape_compute(x, shape), call.args[0], primfunc_name_hint="reshape")


@register_legalize("relax.flip")
def _flip(bb: Any, call: rx.Call) -> Any:
    def flip(x: te.Tensor) -> te.Tensor:
        axis = call.attrs["axis"] % len(x.shape)
        last = arith.binary(Sub, x.shape[axis], _i64(1))

        def body(idx: tuple) -> Any:
            return x[idx[:axis] + (arith.binary(Sub, last, idx[axis]),) + idx[axis + 1:]]

        return _compute(tuple(x.shape), body, "T_reverse_sequence", "injective", "ax")

    return call_te(bb, flip, call.args[0], primfunc_name_hint="flip")


@register_legalize("relax.tile")
def _tile(bb: Any, call: rx.Call) -> Any:
    shape = _out_dims(call)

    def tile(x: te.Tensor) -> te.Tensor:
        offset = len(shape) - len(x.shape)
        return _compute(shape, lambda idx: x[tuple(arith.binary(FloorMod, idx[offset + k], d)
                                                    for k, d in enumerate(x.shape))],
                        "T_tile", "injective", "ax")

    return call_te(bb, tile, call.args[0], primfunc_name_hint="tile")


@register_legalize("relax.repeat")
def _repeat(bb: Any, call: rx.Call) -> Any:
    shape, repeats, axis = _out_dims(call), call.attrs["repeats"], call.attrs["axis"]

    def repeat(x: te.Tensor) -> te.Tensor:
        if axis is None:  # (over the flattened input, as topi does it)
            flat = 1
            for d in x.shape:
                flat = d if isinstance(flat, int) and flat == 1 else arith.binary(Mul, flat, d)
            x, at = _reshape_compute(x, (flat,)), 0
        else:
            at = axis % len(x.shape)
        step = _i64(repeats)
        return _compute(shape, lambda idx: x[idx[:at] + (arith.binary(FloorDiv, idx[at], step),) + idx[at + 1:]],
                        "T_repeat", "injective", "ax")

    return call_te(bb, repeat, call.args[0], primfunc_name_hint="repeat")


@register_legalize("relax.stack")
def _stack(bb: Any, call: rx.Call) -> Any:
    fields = _tuple_fields(bb, call.args[0])
    shape = _out_dims(call)
    ax = call.attrs["axis"] % len(shape)

    def stack(*xs: te.Tensor) -> te.Tensor:
        def body(idx: tuple) -> Any:
            rest = idx[:ax] + idx[ax + 1:]
            result = xs[0][rest]
            for k, x in enumerate(xs[1:], start=1):  # (the last tensor's test outermost, as topi nests them)
                result = te.if_then_else(EQ(idx[ax], _i64(k)), x[rest], result)
            return result

        return _compute(shape, body, "T_stack", "injective", "ax")

    return call_te(bb, stack, *fields, primfunc_name_hint="stack")
