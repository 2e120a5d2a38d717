"""The Relax VM's fast path: a Relax function lowered once into a flat list of prepared steps.

A call checks the arguments against the signature once (dtype, rank, extents, binding the
symbolic sizes such as a batch ``n``), then runs one closure per binding. The common lowered
forms have their own steps: ``R.call_tir`` and direct PrimFunc calls (kernels called without
re-checking what the VM has proven about their arguments, see ``_proven``), ``R.builtin.alloc_tensor``,
aliases, tuples, tuple items, shapes and constants; outputs come from the VM's pool as
``vm_memory.plan_seq`` plans. Any other binding (if/else, closures, Relax operators, match_cast,
packed calls) runs through the interpreter on the same environment (Relax and size variables to
values), so what the fast path does not cover it leaves to the interpreter, never computing
anything else.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from tvms.ir import expr as tir
from tvms.ir import relax as rx
from tvms.ir.analysis import written_params
from tvms.ir.errors import TVMSError
from tvms.ir.expr import Op
from tvms.ir.function import PrimFunc
from tvms.ir.module import GlobalVar
from tvms.ir.structural import structural_equal
from tvms.ir.struct_info import TensorStructInfo

from .numpy_ops import Shape
from .reference import compile_expr
from .tir_values import numpy_dtype
from .vm_memory import ALLOC_TENSOR, aligned_empty

if TYPE_CHECKING:
    from .vm import _VMInterpreter

Step = Callable[[dict], None]
# what the VM knows of a tensor value for certain: numpy dtype and dims (ints or size expressions)
Known = tuple


class FastFunction:
    """One Relax function of an executable, prepared for a VM: ``fast(args)`` is
    ``interp.call_function(func, args)`` with the per-call walking done once."""

    def __init__(self, interp: "_VMInterpreter", func: rx.Function) -> None:
        self.interp, self.func = interp, func
        self.known: dict = {}  # Relax Var -> Known (or a list of them, for tuple values)
        # Relax Var -> the tensor the VM allocated here that it holds (a key naming it, or a list
        # of keys for the outputs of a call_tir): it shares memory with no parameter and no other
        # allocation, so a kernel writing it needs no overlap check
        self.fresh: dict = {}
        # what the preparation made of the bindings (the tests look at these)
        self.interpreted = self.checked_kernels = self.unchecked_kernels = 0
        # constants that kernels read, prepared once (C-contiguous; call_tir inputs are only read)
        self.constants: dict = {}
        self.entry = _EntryCheck(func.params)
        for p in func.params:
            fact = _known_of_sinfo(p.struct_info)
            if fact is not None:
                self.known[p] = fact
        body = func.body
        plan = interp.plan(body)
        self.steps: list = []
        for i, b in enumerate(plan.bindings):
            step = self.step(b)
            released = tuple(plan.release_after.get(i, ()))
            self.steps.append(_releasing(step, released, interp.pool.release) if released else step)
        if isinstance(body.body, rx.Var):
            self.result: Callable[[dict], Any] = _lookup(body.body)
        else:
            result_expr = body.body
            self.result = lambda env: interp.eval(result_expr, env)
        self.result_proven = _same_known(self.known.get(body.body), _known_of_sinfo(func.ret_struct_info))

    def __call__(self, args: list) -> Any:
        env = self.entry(self.interp, args)
        if env is None:  # an argument the steps cannot take as it is: the interpreter runs it
            return self.interp.call_function_slow(self.func, args)
        if self.constants:
            env.update(self.constants)
        try:
            for step in self.steps:
                step(env)
            result = self.result(env)
        except KeyError as err:  # (a malformed module: a variable used before it is bound)
            if not err.args or not isinstance(err.args[0], (rx.Var, tir.Var)):
                raise
            raise TVMSError(f"the variable {err.args[0].name!r} is used before it is bound") from None
        if not self.result_proven:
            self.interp.match(self.func.ret_struct_info, result, dict(env), "the result")
        return result

    # ---- one step per binding
    def step(self, b: Any) -> Step:
        value, var = b.value, b.var
        made = None
        if isinstance(b, rx.VarBinding):
            made = self.fast_step(value, var)
        if made is not None:
            return made
        self.interpreted += 1
        bind = self.interp.bind  # (values it binds are not known: a numpy op may give a view)

        def interpret(env: dict) -> None:
            with np.errstate(all="ignore"):  # (numpy operators: inf and nan as Relax computes them)
                bind(b, env)
        return interpret

    def fast_step(self, value: Any, var: rx.Var) -> Step | None:
        if isinstance(value, rx.Var):
            if value in self.known:
                self.known[var] = self.known[value]
            if value in self.fresh:
                self.fresh[var] = self.fresh[value]
            source = value
            return lambda env: env.__setitem__(var, env[source])
        if isinstance(value, rx.TupleGetItem) and isinstance(value.tuple_value, rx.Var):
            fact = self.known.get(value.tuple_value)
            if isinstance(fact, list) and value.index < len(fact):
                self.known[var] = fact[value.index]
            fresh = self.fresh.get(value.tuple_value)
            if isinstance(fresh, list) and value.index < len(fresh):
                self.fresh[var] = fresh[value.index]
            source, index = value.tuple_value, value.index
            return lambda env: env.__setitem__(var, env[source][index])
        if isinstance(value, rx.Tuple) and all(isinstance(f, rx.Var) for f in value.fields):
            fields = value.fields
            return lambda env: env.__setitem__(var, tuple([env[f] for f in fields]))
        if isinstance(value, rx.ShapeExpr):
            dims = _dims_getter(value.values)
            if isinstance(dims, tuple):
                shape = Shape(dims)
                return lambda env: env.__setitem__(var, shape)
            return lambda env: env.__setitem__(var, Shape(dims(env)))
        if isinstance(value, rx.Call):
            return self.call_step(value, var)
        return None

    def call_step(self, call: rx.Call, var: rx.Var) -> Step | None:
        op, interp = call.op, self.interp
        if isinstance(op, Op) and op.name == "relax.call_tir" and _prim_func(interp.mod, call.args[0]) \
                and isinstance(call.args[1], rx.Tuple):
            return self.call_tir_step(call, var)
        if isinstance(op, Op) and op.name == ALLOC_TENSOR and isinstance(call.args[0], rx.ShapeExpr) \
                and isinstance(call.args[1], rx.DataTypeImm):
            dims, dtype = call.args[0].values, numpy_dtype(call.args[1].value)
            self.known[var] = (dtype, _plain_dims(dims))
            self.fresh[var] = var
            allocate = self.allocator(call, dims, dtype)
            return lambda env: env.__setitem__(var, allocate(env))
        if _prim_func(interp.mod, op) and all(isinstance(a, rx.Var) for a in call.args):
            func, args = _prim_func(interp.mod, op), call.args
            run = self.kernel_runner(op, func, [self.known.get(a) for a in args], self.disjoint(func, args))
            return lambda env: (run([env[a] for a in args]), env.__setitem__(var, ()))
        return None

    def call_tir_step(self, call: rx.Call, var: rx.Var) -> Step | None:
        gv, inputs = call.args[0], call.args[1].fields
        extra = call.args[2] if len(call.args) > 2 else None
        outs = call.sinfo_args
        if not all(isinstance(x, (rx.Var, rx.Constant)) for x in inputs) \
                or not all(isinstance(s, TensorStructInfo) and s.dims is not None and not s.dtype.is_void
                           for s in outs) \
                or (extra is not None and not isinstance(extra, rx.ShapeExpr)) \
                or any(isinstance(x, rx.Constant) and x.data is None for x in inputs):
            return None  # (the interpreter gives the error, or handles the rarer forms)
        for x in inputs:  # (a constant is looked up as a variable: it is in every environment;
            # a writable copy, as kernels take, made once)
            if isinstance(x, rx.Constant):
                self.constants[x] = np.require(np.asarray(x.data), requirements=("C", "W"))
        facts = [_known_of_array(x.data) if isinstance(x, rx.Constant) else self.known.get(x) for x in inputs]
        allocators = []
        for s in outs:
            dtype = numpy_dtype(s.dtype)
            facts.append((dtype, _plain_dims(s.dims)))
            allocators.append(self.allocator(call, s.dims, dtype))
        extra_dims = _dims_getter(extra.values) if extra is not None else None
        if isinstance(extra_dims, tuple):
            extra_dims = (lambda env, values=extra_dims: values)
        if extra is not None:
            facts.extend(_SIZE for _ in extra.values)
        run = self.kernel_runner(gv, self.interp.mod[gv], facts)
        outputs = facts[len(inputs):len(inputs) + len(outs)]
        single = len(outs) == 1
        self.known[var] = outputs[0] if single else outputs
        self.fresh[var] = var if single else [(var, k) for k in range(len(outs))]

        def call_tir(env: dict) -> None:
            results = [allocate(env) for allocate in allocators]
            args = [env[x] for x in inputs]
            args.extend(results)
            if extra_dims is not None:
                args.extend(extra_dims(env))
            run(args)
            env[var] = results[0] if single else tuple(results)
        return call_tir

    def allocator(self, call: rx.Call, dims: tuple, dtype: np.dtype) -> Callable[[dict], np.ndarray]:
        """The output buffer of ``call``: from the pool when planned so, else fresh and aligned
        (it may become a result Tensor)."""
        shape = _dims_getter(dims)
        interp = self.interp
        if id(call) in interp.pooled_calls:
            take = interp.pool.take
            if isinstance(shape, tuple):
                return lambda env: take(shape, dtype)
            return lambda env: take(shape(env), dtype)

        def fresh(env: dict) -> np.ndarray:
            interp.unpooled += 1
            return aligned_empty(shape if isinstance(shape, tuple) else shape(env), dtype)
        return fresh

    def disjoint(self, func: PrimFunc, args: tuple) -> bool:
        """Whether the buffers of a direct call of ``func`` cannot overlap: each one it writes is
        a tensor allocated here and passed once, and every other argument is a parameter or such
        a tensor (else the kernel's own checks look at the arrays)."""
        held = [self.fresh.get(a) for a in args]
        if any(h is None and a not in self.func.params for a, h in zip(args, held)):
            return False
        written = [held[k] for k in written_params(func)]
        return all(h is not None and not isinstance(h, list) and held.count(h) == 1 for h in written)

    def kernel_runner(self, gv: GlobalVar, func: PrimFunc, facts: list,
                      disjoint: bool = True) -> Callable[[list], None]:
        """The compiled kernel of ``gv`` as a function of its argument list: without checks when
        the VM has proven every argument fits (and that the buffers do not overlap), else
        through the kernel's own checks."""
        kernel = self.interp.kernels.get_function(gv.name_hint)
        if disjoint and _proven(func, facts):
            self.unchecked_kernels += 1
            return kernel.run
        self.checked_kernels += 1
        # as the interpreter path passes them: a numpy operator's result may be a strided view
        # or a 0-d scalar, a constant read-only
        return lambda args: kernel(*[np.require(a, requirements=("C", "W"))
                                     if isinstance(a, (np.ndarray, np.generic)) else a for a in args])


class _EntryCheck:
    """The signature check: the environment of a call (parameters and sizes bound), or None
    when a tensor argument does not fit its parameter as the steps take it for granted (declared
    dtype and dims, C-contiguous, writable); the interpreter then runs the call and says what
    is wrong, if anything. When every parameter is a tensor this is a few comparisons; other
    parameters (shapes, tuples, numbers) go through the interpreter's check first."""

    def __init__(self, params: tuple) -> None:
        self.params = params
        self.tensors: list | None = []
        for k, p in enumerate(params):
            fact = _known_of_sinfo(p.struct_info)
            if fact is not None:
                dtype, dims = fact
                self.tensors.append((k, dtype, len(dims), tuple(enumerate(dims))))
        self.all_tensors = len(self.tensors) == len(params)

    def __call__(self, interp: "_VMInterpreter", args: list) -> dict | None:
        if len(args) != len(self.params):
            return None
        env: dict = {} if self.all_tensors else self.generic(interp, args)
        deferred = []
        for k, dtype, ndim, axes in self.tensors:
            a = args[k]
            if type(a) is not np.ndarray or a.dtype != dtype:
                return None
            flags = a.flags
            if not (flags.c_contiguous and flags.writeable):
                return None
            shape = a.shape
            if len(shape) != ndim:
                return None
            for axis, d in axes:
                actual = shape[axis]
                if type(d) is int:
                    if d != actual:
                        return None
                elif isinstance(d, tir.Var):
                    if env.setdefault(d, actual) != actual:
                        return None
                else:
                    deferred.append((d, actual))
        for d, actual in deferred:
            if compile_expr(d)(env) != actual:
                return None
        for p, a in zip(self.params, args):
            env[p] = a
        return env

    def generic(self, interp: "_VMInterpreter", args: list) -> dict:
        """The interpreter's own signature check (it raises with the parameter's name)."""
        sizes: dict = {}
        for p, a in zip(self.params, args):
            interp.bind_plain_sizes(p.struct_info, a, sizes)
        env: dict = {}
        for p, a in zip(self.params, args):
            interp.match(p.struct_info, a, sizes, f"argument {p.name!r}")
            env[p] = a
        env.update(sizes)
        return env


# ---- what the VM knows of values, and proving kernel calls safe without checks
_SIZE = "size"  # an integer from a shape expression (a kernel's scalar size parameter)


def _plain_dims(dims: tuple) -> tuple:
    return tuple(d.value if isinstance(d, tir.IntImm) else d for d in dims)


def _known_of_sinfo(sinfo: Any) -> Known | None:
    if isinstance(sinfo, TensorStructInfo) and sinfo.dims is not None and not sinfo.dtype.is_void:
        return numpy_dtype(sinfo.dtype), _plain_dims(sinfo.dims)
    return None


def _known_of_array(data: Any) -> Known:
    arr = np.asarray(data)
    return arr.dtype, tuple(int(d) for d in arr.shape)


def _same_dim(a: Any, b: Any) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is b or structural_equal(a, b)


def _same_known(a: Any, b: Any) -> bool:
    return (isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] and len(a[1]) == len(b[1])
            and all(_same_dim(x, y) for x, y in zip(a[1], b[1])))


def _proven(func: PrimFunc, facts: list) -> bool:
    """Whether arguments with these known dtypes and dims fit ``func``'s parameters for every
    value of the sizes: each buffer's dtype and rank match, a constant extent meets the same
    constant, and each symbolic extent of the kernel stands for one and the same Relax
    dimension wherever it occurs. Then the kernel may run without its per-call checks."""
    if len(facts) != len(func.params):
        return False
    scalars = {p for p in func.params if p not in func.buffer_map}
    extents = {d for b in func.buffer_map.values() for d in b.shape if isinstance(d, tir.Var)}
    meaning: dict = {}  # kernel size Var -> the Relax dimension it takes
    for param, fact in zip(func.params, facts):  # (facts: Known, _SIZE, or None: unknown)
        buf = func.buffer_map.get(param)
        if buf is None:
            if fact != _SIZE or not param.dtype.is_integer:
                return False
            continue
        if not isinstance(fact, tuple) or fact[0] != numpy_dtype(buf.dtype) or len(fact[1]) != len(buf.shape):
            return False
        # (a contiguous layout: no strides stated, an offset of 0 or of its own variable)
        offset = buf.elem_offset
        if buf.strides or not (_is_zero(offset) or (isinstance(offset, tir.Var) and offset not in extents)):
            return False
        for declared, dim in zip(buf.shape, fact[1]):
            if isinstance(declared, tir.IntImm):
                if dim != declared.value:
                    return False
            elif isinstance(declared, tir.Var) and declared not in scalars:  # (a scalar's value
                # comes from the call, not from the array: the kernel's check compares them)
                if declared in meaning and not _same_dim(meaning[declared], dim):
                    return False
                meaning.setdefault(declared, dim)
            else:
                return False
    return True


def _is_zero(e: Any) -> bool:
    return e is None or (isinstance(e, tir.IntImm) and e.value == 0)


# ---- small closures
def _prim_func(mod: Any, op: Any) -> PrimFunc | None:
    """The PrimFunc ``op`` names in ``mod``, if it names one."""
    if not isinstance(op, GlobalVar):
        return None
    try:
        func = mod[op]
    except (KeyError, TVMSError):
        return None
    return func if isinstance(func, PrimFunc) else None


def _lookup(var: rx.Var) -> Callable[[dict], Any]:
    return lambda env: env[var]


def _dims_getter(dims: tuple) -> "tuple | Callable[[dict], tuple]":
    """The values of ``dims``: a tuple when every dim is a constant, else a function of the
    environment; a negative size is an error, as the interpreter makes it."""
    plain = _plain_dims(dims)
    if all(isinstance(d, int) for d in plain):
        if any(d < 0 for d in plain):
            return lambda env: _negative(plain)
        return plain
    fns = [(lambda env, d=d: d) if isinstance(d, int) else compile_expr(d) for d in plain]

    def values(env: dict) -> tuple:
        shape = tuple([int(f(env)) for f in fns])
        return _negative(shape) if shape and min(shape) < 0 else shape
    return values


def _negative(shape: tuple) -> tuple:
    raise TVMSError(f"an output of shape {shape}: the arguments make a size negative")


def _releasing(step: Step, released: tuple, release: Callable) -> Step:
    """``step``, then the pooled buffers whose last use it was go back to the pool."""
    def run(env: dict) -> None:
        step(env)
        for v in released:
            release(env[v])
    return run


__all__ = ["FastFunction"]
