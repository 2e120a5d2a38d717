"""ONNX control flow: If, Loop and Scan, whose bodies are subgraphs that read the enclosing
graph's values.

A body becomes a private Relax function of its own; the enclosing values it reads become
parameters of that function (``Captures``), so the caller stays one dataflow block (where Relax
allows no ``if``) that calls it. ``If`` on a condition known only at run time is a function
holding a Relax ``if``; on a constant one, the branch taken is converted in place. ``Loop`` and
``Scan`` are a recursive function: ``if i < n ...: body, then a call of itself with the next
values; else: the values`` (the VM runs it). A scan output is a buffer each iteration writes its
slice into, in place, and that doubles when full, so n iterations cost time linear in n.
A Loop that carries a sequence is unrolled at import time when its trip count is a constant (the
sequence stays a tuple); otherwise the sequence's length is a run-time value
(``runtime/sequence.py``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir import relax as rx
from ..ir import relax_op
from ..ir.dtype import DataType
from ..ir.expr import SizeVar
from ..ir.module import GlobalVar
from ..ir.struct_info import ObjectStructInfo, TensorStructInfo, TupleStructInfo
from ..ir.structural import structural_equal
from ..ir.visitor import Mutator
from .onnx_convert import OnnxOpConverter, Unsupported, as_dtype, converter, dims_of, normalize_axis, rank_of, value_of
from .relax_op_api import op

_UNROLL_LIMIT = 1024  # (iterations of a loop converted one by one at import time)
_SCALAR_I64 = TensorStructInfo([], "int64")
_SCALAR_BOOL = TensorStructInfo([], "bool")


class Captures:
    """The enclosing graph's values that a function built for a subgraph reads: each becomes a
    parameter of the function (``params``), and the caller passes the value (``outer``)."""

    def __init__(self, bb: Any):
        self.bb = bb
        self.outer: list = []
        self.params: list = []
        self._by_value: dict[int, rx.Var] = {}

    def param(self, name: str, value: Any) -> rx.Var:
        if id(value) not in self._by_value:
            var = rx.Var(self.bb.get_unique_name(_identifier(name)), value.struct_info)
            self._by_value[id(value)] = var
            self.outer.append(value)
            self.params.append(var)
        return self._by_value[id(value)]


class Scope(dict):
    """The values a subgraph sees: its own, then the enclosing graph's (``outer``); with
    ``captures``, an enclosing value computed at run time is read through a parameter."""

    def __init__(self, outer: dict, captures: Captures | None = None):
        super().__init__()
        self.outer, self.captures = outer, captures

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self.outer

    def __missing__(self, name: str) -> Any:
        value = self.outer[name]
        if self.captures is not None and value is not None and not isinstance(value, rx.Constant):
            value = self.captures.param(name, value)
        self[name] = value
        return value


def same_struct_info(a: Any, b: Any) -> bool:
    return structural_equal(a, b, map_free_vars=False)


def _identifier(name: str) -> str:
    base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
    return base if base[0].isalpha() or base[0] == "_" else "v_" + base


def scalar(x: Any, dtype: str) -> Any:
    """A one-element tensor (an ONNX condition or count) as a scalar of ``dtype``."""
    sinfo = x.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        raise Unsupported(f"expected a tensor of one element, got {sinfo}")
    if sinfo.ndim != 0:
        if sinfo.dims is not None and any(not _static(d) or d.value != 1 for d in sinfo.dims):
            raise Unsupported(f"expected a tensor of one element, got one of shape {list(sinfo.dims)}")
        x = op.reshape(x, [])
    return as_dtype(x, dtype)


def _size(bb: Any) -> SizeVar:
    return SizeVar(bb.get_unique_name("n"), DataType("int64"))


def _fresh(bb: Any, sinfo: TensorStructInfo) -> TensorStructInfo:
    """``sinfo`` with a new symbolic size for every dimension."""
    if sinfo.ndim < 0:
        raise Unsupported("a loop-carried tensor of unknown rank")
    return TensorStructInfo([_size(bb) for _ in range(sinfo.ndim)], sinfo.dtype)


def _erased(sinfo: Any) -> Any:
    """``sinfo`` without its shape (its rank and dtype kept) unless the shape is static."""
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo(tuple(_erased(f) for f in sinfo.fields))
    if isinstance(sinfo, TensorStructInfo) and (sinfo.dims is None or not all(
            isinstance(getattr(d, "value", None), int) for d in sinfo.dims)):
        return TensorStructInfo(None, sinfo.dtype, sinfo.ndim)
    return sinfo


def refine(ctx: Any, x: Any, known: list | None = None) -> Any:
    """A result whose shape the callee could not state, cast to new symbolic sizes (what the
    operators after it need to be legalized); ``known``: the dimensions known (None: not)."""
    sinfo = x.struct_info
    if isinstance(sinfo, TensorStructInfo) and sinfo.dims is None and sinfo.ndim >= 0:
        known = known or [None] * sinfo.ndim
        dims = [_size(ctx.bb) if d is None else d for d in known]
        return ctx.bb.match_cast(x, TensorStructInfo(dims, sinfo.dtype))
    return x


def _results(ctx: Any, call: Any, count: int, known: list | None = None, tupled: bool = False) -> list:
    """The ``count`` results of a call of a function built here (a tuple of them unless there is
    one, or always when ``tupled``), each refined."""
    result = ctx.emit(call)
    items = [result] if count == 1 and not tupled else [ctx.emit(rx.TupleGetItem(result, k)) for k in range(count)]
    return [refine(ctx, x, k) for x, k in zip(items, known or [None] * count)]


class _Rename(Mutator):
    """Replaces one GlobalVar by another (a recursive function's call of itself)."""

    def __init__(self, old: GlobalVar, new: GlobalVar):
        self.old, self.new = old, new

    def visit_GlobalVar(self, gv: GlobalVar) -> GlobalVar:
        return self.new if gv is self.old else gv


def _function(ctx: Any, name: str, body: Callable[[], tuple], captures: Captures,
              self_gv: GlobalVar | None = None) -> GlobalVar:
    """A private function whose body ``body()`` emits, returning its result and parameters (the
    captured values are parameters after those); ``self_gv`` stands for the function itself in
    its body (a recursive call)."""
    bb = ctx.bb
    with bb.function(name, private=True):
        output, params = body()
        gv = bb.emit_func_output(output, params=params + captures.params)
    if self_gv is not None:
        mod = bb.get()
        bb.update_func(gv, _Rename(self_gv, gv).visit(mod[gv]))
    return gv


def _branch(ctx: Any, emit: Callable[[], Any]) -> rx.SeqExpr:
    """A branch of a Relax ``if``: what ``emit()`` emits, in a block of its own, and its result."""
    ctx.bb.begin_block(False)
    try:
        result = emit()
    finally:
        block = ctx.bb.end_block()
    return rx.SeqExpr((block,) if block.bindings else (), result)


def _tuple(values: list) -> Any:
    if any(v is None for v in values):
        raise Unsupported("an optional that is empty in a branch (whether it holds a value must be "
                          "known at import time)")
    return values[0] if len(values) == 1 else rx.Tuple(tuple(values))


# ---------------------------------------------------------------------------- If
@converter("If")
class If(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        then_graph, else_graph = attrs["then_branch"], attrs["else_branch"]
        known = value_of(inputs[0])
        if known is not None:  # (only the branch taken is converted)
            if known.size != 1:
                raise Unsupported(f"a condition of {known.size} elements")
            return ctx.subgraph(ctx, then_graph if known.reshape(-1)[0] else else_graph, {})
        cond = rx.Var("cond", _SCALAR_BOOL)
        captures = Captures(ctx.bb)

        def branch(graph):
            def outputs():  # (an empty optional: R.null_value(), the If's output then an R.Object)
                values = ctx.subgraph(ctx, graph, {}, captures)
                return _tuple([ctx.emit(op.null_value()) if v is None else v for v in values])
            return _branch(ctx, outputs)

        gv = _function(ctx, "if_then_else",
                       lambda: (rx.If(cond, branch(then_graph), branch(else_graph)), [cond]), captures)
        call = rx.Call(gv, (ctx.emit(scalar(inputs[0], "bool")), *captures.outer))
        return _results(ctx, call, len(then_graph.output))


# ---------------------------------------------------------------------------- Loop and Scan
class _ShapeChanges(Exception):
    """Loop-carried values whose shape the body changes (their parameters get symbolic sizes)."""

    def __init__(self, indices: set[int]):
        super().__init__()
        self.indices = indices


def _check_carried(params: list, outputs: list, loose: set[int]) -> None:
    changed = set()
    for k, (p, out) in enumerate(zip(params, outputs)):
        if out is None:
            raise Unsupported("an empty optional carried by a loop")
        want, got = p.struct_info, out.struct_info
        if isinstance(want, TensorStructInfo) and isinstance(got, TensorStructInfo):
            if want.dtype != got.dtype or (want.ndim != got.ndim and got.ndim >= 0):
                raise Unsupported(f"the body turns a loop-carried {want.dtype} tensor of rank "
                                  f"{want.ndim} into a {got.dtype} tensor of rank {got.ndim}")
            if k not in loose and not same_struct_info(want, got):
                changed.add(k)
        elif not same_struct_info(want, got):
            raise Unsupported(f"the body turns a loop-carried value of {want} into one of {got}")
    if changed:
        raise _ShapeChanges(changed)


def recursive_loop(ctx: Any, name: str, fixed: list, carried: list, go: Callable, step: Callable) -> tuple[list, list]:
    """A loop run as a recursive function: ``go(i, fixed, carried)`` says whether iteration
    ``i`` runs, ``step(i, fixed, carried, captures)`` converts its body and returns the next
    carried values and the iteration's scan outputs. ``fixed`` values pass through unchanged.
    Returns the final carried values and the scan outputs (iterations along axis 0)."""
    # (carried values whose shape changes, or is not known: parameters of symbolic sizes)
    loose = {k for k, x in enumerate(carried) if isinstance(x.struct_info, TensorStructInfo)
             and x.struct_info.dims is None}
    while True:
        try:
            return _recursive_loop(ctx, name, fixed, carried, go, step, loose)
        except _ShapeChanges as err:
            loose |= err.indices


def _static(d: Any) -> bool:
    return isinstance(getattr(d, "value", None), int)


def _dims(x: Any) -> list:
    """The dimensions of a tensor whose shape is known (a PrimExpr each)."""
    sinfo = x.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.dims is None:
        raise Unsupported(f"expected a tensor of known rank, got {sinfo}")
    return list(sinfo.dims)


def _write_slice(ctx: Any, rank: int, dtype: str) -> GlobalVar:
    """The PrimFunc ``A[at[()], ...] = S[...]``: a slice of ``rank`` dimensions written into a row
    of the scan output, in place."""
    from .module_parser import from_source

    dims, loops, axes = ([f"{c}{k}" for k in range(rank)] for c in "djv")
    pad = "    " * (2 if rank else 1)
    lines = ["# from tvm.script import tir as T", "@T.prim_func(private=True)",
             'def write_slice(a: T.handle, s: T.handle, at: T.Buffer((), "int64")):',
             *(f"    {d} = T.int64()" for d in ["n", *dims]),
             f'    A = T.match_buffer(a, ({", ".join(["n", *dims])}), "{dtype}")',
             f'    S = T.match_buffer(s, ({"".join(d + ", " for d in dims)}), "{dtype}")',
             *([f"    for {', '.join(loops)} in T.grid({', '.join(dims)}):"] if rank else []),
             f'{pad}with T.block("write"):',
             *(f"{pad}    {v} = T.axis.spatial({d}, {j})" for v, d, j in zip(axes, dims, loops)),
             f"{pad}    A[{', '.join(['at[()]', *axes])}] = S[{', '.join(axes) or '()'}]"]
    return ctx.bb.add_func(from_source("\n".join(lines) + "\n"), "write_slice")


def _grow(ctx: Any, i: Any, acc: Any, s: Any) -> Any:
    """The scan output so far, ``acc`` (at least ``i`` rows, the first ``i`` of them written), with
    this iteration's ``s`` written into row ``i``: in place, after doubling ``acc`` when it is
    full. The first iteration starts a buffer of one row (the start value may have 0 for the
    dimensions of ``s`` that only the body decides)."""
    first = ctx.bb.emit(op.equal(i, ctx.constant(0, "int64")))
    rows = ctx.bb.emit(op.take(op.shape_to_tensor(op.shape_of(acc)), ctx.constant(0, "int64")))
    sinfo = s.struct_info

    def write(room: Any) -> Any:
        writer = _write_slice(ctx, sinfo.ndim, str(sinfo.dtype))
        out = room.struct_info
        return ctx.emit(relax_op.make_call("call_tir_inplace", [writer, rx.Tuple((room, s, i))],
                                           {"inplace_indices": (0,)}, (out,)))

    def later() -> Any:
        full = ctx.bb.emit(op.equal(i, rows))
        doubled = _branch(ctx, lambda: write(refine(ctx, ctx.bb.emit(op.concat([acc, acc], axis=0)),
                                                    [None, *sinfo.dims])))
        return refine(ctx, ctx.bb.emit(rx.If(full, doubled, _branch(ctx, lambda: write(acc)))))

    alone = _branch(ctx, lambda: ctx.emit(op.expand_dims(s, 0)))
    return refine(ctx, ctx.bb.emit(rx.If(first, alone, _branch(ctx, later))))


def _written_rows(ctx: Any, acc: Any, i: Any) -> Any:
    """The first ``i`` rows of the scan output ``acc``: what the iterations wrote."""
    shape = op.shape_to_tensor(op.shape_of(acc))
    rank = acc.struct_info.ndim
    end = ctx.bb.emit(op.concat([op.reshape(i, [1]), op.strided_slice(shape, axes=[0], begin=[1], end=[rank])], axis=0))
    return ctx.bb.emit(op.dynamic_strided_slice(acc, ctx.constant([0] * rank, "int64"), end,
                                                ctx.constant([1] * rank, "int64")))


def _recursive_loop(ctx, name, fixed, carried, go, step, loose):
    bb = ctx.bb
    captures = Captures(bb)
    i = rx.Var("i", _SCALAR_I64)
    fixed_p = [rx.Var(f"f{k}", x.struct_info) for k, x in enumerate(fixed)]
    carried_p = [rx.Var(f"v{k}", _fresh(bb, x.struct_info) if k in loose else x.struct_info)
                 for k, x in enumerate(carried)]
    self_gv = GlobalVar(name)
    accs_p: list = []
    known: list = []  # (per scan output, its dimensions the caller knows, None for the others)

    def iteration():
        nonlocal accs_p
        outs, scans = step(i, fixed_p, carried_p, captures)
        _check_carried(carried_p, outs, loose)
        scans = [refine(ctx, s) for s in scans]
        # (a scan output's dimension the caller knows too: static, or a size of the arguments)
        given = {id(d) for k, x in enumerate([*fixed, *carried, *captures.outer]) if k - len(fixed) not in loose
                 and isinstance(x.struct_info, TensorStructInfo) for d in x.struct_info.dims or ()}
        known[:] = [[d if _static(d) or id(d) in given else None for d in _dims(s)] for s in scans]
        accs_p = [rx.Var(f"scan{k}", TensorStructInfo([_size(bb)] + [_size(bb) if d is None else d for d in dims],
                                                      s.struct_info.dtype))
                  for k, (s, dims) in enumerate(zip(scans, known))]
        grown = [_grow(ctx, i, a, s) for a, s in zip(accs_p, scans)]
        ret = TupleStructInfo(tuple(_erased(p.struct_info) if k in loose else p.struct_info
                                    for k, p in enumerate(carried_p)) +
                              tuple(_erased(a.struct_info) for a in accs_p))
        args = (op.add(i, ctx.constant(1, "int64")), *fixed_p, *outs, *grown, *captures.params)
        return rx.Call(self_gv, args, struct_info=ret)

    def body():
        running = bb.emit(go(i, fixed_p, carried_p))
        then = _branch(ctx, iteration)  # (the scan outputs' parameters exist after it)
        done = _branch(ctx, lambda: rx.Tuple(tuple(carried_p + [_written_rows(ctx, a, i) for a in accs_p])))
        return rx.If(running, then, done), [i, *fixed_p, *carried_p, *accs_p]

    gv = _function(ctx, name, body, captures, self_gv)
    # (a dimension of a scan output known only in the body is 0 in the start value: the first
    # iteration replaces it, see _grow; after no iteration at all it stays 0)
    empty = [ctx.emit(op.zeros([0] + [0 if d is None else d for d in dims], str(a.struct_info.dtype)))
             for a, dims in zip(accs_p, known)]
    call = rx.Call(gv, (ctx.constant(0, "int64"), *fixed, *carried, *empty, *captures.outer))
    results = _results(ctx, call, len(carried) + len(accs_p), [None] * len(carried) + [[None, *dims] for dims in known],
                       tupled=True)
    return results[:len(carried)], results[len(carried):]


@converter("Loop")
class Loop(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, ctx, inputs, attrs):
        body = attrs["body"]
        trips, cond, initial = inputs[0], inputs[1] if len(inputs) > 1 else None, list(inputs[2:])
        n_scans = len(body.output) - 1 - len(initial)
        if any(x is None for x in initial):
            raise Unsupported("an empty optional carried by a loop")
        if any(isinstance(x.struct_info, TupleStructInfo) for x in initial):
            if value_of(trips) is not None and (cond is None or value_of(cond) is not None):
                return cls._unrolled(ctx, body, trips, cond, initial, n_scans)
            # (a run-time trip count: the sequence's length is a run-time value, see runtime/sequence.py)
            initial = [ctx.bb.match_cast(x, ObjectStructInfo()) if isinstance(x.struct_info, TupleStructInfo)
                       else x for x in initial]
        trips = ctx.constant(np.iinfo("int64").max, "int64") if trips is None else scalar(trips, "int64")
        cond = ctx.constant(True, "bool") if cond is None else scalar(cond, "bool")
        names = [info.name for info in body.input]

        def go(i, fixed, carried):
            return op.logical_and(carried[0], op.less(i, fixed[0]))

        def step(i, fixed, carried, captures):
            outs = ctx.subgraph(ctx, body, dict(zip(names, [i, *carried])), captures)
            return [ctx.emit(scalar(outs[0], "bool")), *outs[1:len(carried)]], outs[len(carried):]

        finals, scans = recursive_loop(ctx, "loop", [ctx.emit(trips)], [ctx.emit(cond), *initial], go, step)
        return finals[1:] + scans

    @classmethod
    def _unrolled(cls, ctx, body, trips, cond, values, n_scans):
        """A loop carrying a sequence, unrolled: each iteration's body converted in place."""
        trips = value_of(trips) if trips is not None else None
        cond = ctx.constant(True, "bool") if cond is None else cond
        going = value_of(cond)
        if trips is None or going is None:
            raise Unsupported("a loop that carries a sequence needs a constant trip count and condition "
                              "(the sequence's length must be known at import time)")
        if int(trips.reshape(-1)[0]) > _UNROLL_LIMIT:
            raise Unsupported(f"a loop that carries a sequence is unrolled, up to {_UNROLL_LIMIT} iterations, "
                              f"not {int(trips.reshape(-1)[0])}")
        scans: list = [[] for _ in range(n_scans)]
        names = [info.name for info in body.input]
        for i in range(int(trips.reshape(-1)[0])):
            if not going.reshape(-1)[0]:
                break
            outs = ctx.subgraph(ctx, body, dict(zip(names, [ctx.constant(i, "int64"), cond, *values])))
            cond, values = outs[0], outs[1:1 + len(values)]
            for acc, s in zip(scans, outs[1 + len(values):]):
                acc.append(op.expand_dims(s, 0))
            going = value_of(cond)
            if going is None:
                raise Unsupported("a loop that carries a sequence needs a condition known at import time")
        if any(not acc for acc in scans):
            raise Unsupported("a scan output of a loop that ran no iteration")
        return values + [op.concat(acc, axis=0) for acc in scans]


@converter("Scan")
class Scan(OnnxOpConverter):
    @classmethod
    def _impl_v8(cls, ctx, inputs, attrs):
        """Opset 8: a batch axis first (each batch element scanned on its own), then the
        sequence axis; ``sequence_lens`` must be the full length."""
        n_scan = attrs["num_scan_inputs"]
        lens, states, xs = inputs[0], list(inputs[1:len(inputs) - n_scan]), list(inputs[len(inputs) - n_scan:])
        batch, length = dims_of(xs[0])[:2]
        if not isinstance(batch, int):
            raise Unsupported("a batch of a size known only at run time")
        if batch > _UNROLL_LIMIT:  # (each batch element is a copy of the body)
            raise Unsupported(f"a batch of {batch}: opset 8's Scan converts each batch element on its own, "
                              f"up to {_UNROLL_LIMIT}")
        if lens is not None:
            given = value_of(lens)
            if given is None or (given != length).any():
                raise Unsupported("sequence_lens other than the full length")
        directions = attrs.get("directions", [0] * n_scan)
        per_batch = []
        for b in range(batch):
            pick = [ctx.emit(op.take(x, ctx.constant(b, "int64"), axis=0)) for x in states + xs]
            per_batch.append(cls._scan(ctx, attrs["body"], pick[:len(states)], pick[len(states):],
                                       [0] * n_scan, directions, None, None))
        return [op.concat([op.expand_dims(r[k], 0) for r in per_batch], axis=0)
                for k in range(len(per_batch[0]))]

    @classmethod
    def _impl_v9(cls, ctx, inputs, attrs):
        n_scan = attrs["num_scan_inputs"]
        states, xs = list(inputs[:len(inputs) - n_scan]), list(inputs[len(inputs) - n_scan:])
        axes = [normalize_axis(a, rank_of(x)) for a, x in zip(attrs.get("scan_input_axes", [0] * n_scan), xs)]
        return cls._scan(ctx, attrs["body"], states, xs, axes, attrs.get("scan_input_directions", [0] * n_scan),
                         attrs.get("scan_output_axes"), attrs.get("scan_output_directions"))

    @classmethod
    def _scan(cls, ctx, body, states, xs, axes, directions, out_axes, out_directions):
        length = dims_of(xs[0])[axes[0]]
        if isinstance(length, int):
            count = ctx.constant(length, "int64")
        else:
            count = ctx.emit(op.take(op.shape_to_tensor(op.shape_of(xs[0])), ctx.constant(axes[0], "int64")))
        names = [info.name for info in body.input]

        def go(i, fixed, carried):
            return op.less(i, fixed[0])

        def step(i, fixed, carried, captures):
            last = op.subtract(fixed[0], ctx.constant(1, "int64"))
            slices = [ctx.emit(op.take(x, op.subtract(last, i) if rev else i, axis=axis))
                      for x, axis, rev in zip(fixed[1:], axes, directions)]
            outs = ctx.subgraph(ctx, body, dict(zip(names, [*carried, *slices])), captures)
            return outs[:len(carried)], outs[len(carried):]

        finals, scans = recursive_loop(ctx, "scan", [count, *xs], states, go, step)
        out_axes = out_axes or [0] * len(scans)
        out_directions = out_directions or [0] * len(scans)
        for k, (acc, axis, rev) in enumerate(zip(scans, out_axes, out_directions)):
            if rev:
                acc = ctx.emit(op.flip(acc, 0))
            rank = len(_dims(acc))
            axis = normalize_axis(axis, rank)
            if axis:
                acc = op.permute_dims(acc, list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank)))
            scans[k] = acc
        return finals + scans
