"""The Relax reference executor: evaluates a Relax function of a module with numpy.

``run_relax(mod, "main", x, w)`` returns numpy arrays (tuples for tuples). Operators run their
numpy reference (``numpy_ops.NUMPY_OPS``); ``R.call_tir`` runs the PrimFunc with the TensorIR
reference executor, so a module before and after legalization computes the same numbers by
two independent routes. ``R.call_dps_packed`` / ``R.call_packed`` call functions registered
with ``register_func`` (``registry.py``).

Values: tensors are numpy arrays, ``R.prim_value`` / ``R.Prim`` are Python numbers, shapes are
``Shape`` (a tuple of ints), tuples are tuples, functions (closures) are ``Closure`` objects.
Symbolic sizes (``n``) are bound from the arguments' shapes and from ``R.match_cast``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tvms.ir import expr as tir
from tvms.ir import relax as rx
from tvms.ir.deep import deep_recursion
from tvms.ir.errors import TVMSError
from tvms.ir.function import PrimFunc
from tvms.ir.module import GlobalVar, IRModule, offloaded_functions
from tvms.ir.relax_infer import fmt_dim
from tvms.ir.visitor import collect
from tvms.ir.struct_info import (ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                 TensorStructInfo, TupleStructInfo)

from .numpy_ops import NUMPY_OPS, Shape
from .reference import compile_expr, run_prim_func
from ..ir import registry
from ..ir.registry import get_global_func, get_script_func
from . import py_funcs
from .packed import register_func
from ..ir.relax_op import SPECIAL_OPS
from .tir_values import cast_value, numpy_dtype

# the registry is ir/registry.py's; these old names stay importable from here
get_func = get_global_func


@dataclass
class Closure:
    """A Relax function value: the function and the variables it captured."""

    func: rx.Function
    env: dict


class _Interpreter:
    def __init__(self, mod: IRModule):
        self.mod = mod
        # (the functions RunCodegen offloaded from this module: its calls find them first)
        self.external = offloaded_functions(mod)

    # ---- symbolic sizes and struct info
    def prim(self, e: Any, sizes: dict) -> Any:
        if isinstance(e, int):
            return e
        try:
            return compile_expr(e)(sizes)  # (cached per expression)
        except KeyError as err:
            raise TVMSError(f"the symbolic size {err.args[0].name!r} is not bound") from None
        except ZeroDivisionError:
            used = {id(v) for v in collect(e, tir.Var)}
            bound = ", ".join(f"{v.name} = {sizes[v]}" for v in sizes if id(v) in used)
            raise TVMSError(f"the size {fmt_dim(e)} divides by zero" + (f" ({bound})" if bound else "")) from None

    def match(self, sinfo: Any, value: Any, sizes: dict, what: str) -> None:
        """Check ``value`` against ``sinfo`` and bind the symbolic sizes it defines."""
        if sinfo is None or isinstance(sinfo, ObjectStructInfo):
            return
        if isinstance(sinfo, TensorStructInfo):
            if not isinstance(value, np.ndarray):
                raise TVMSError(f"{what}: expected a tensor, got {type(value).__name__}")
            if not sinfo.dtype.is_void and value.dtype != numpy_dtype(sinfo.dtype):
                raise TVMSError(f"{what}: expected dtype {sinfo.dtype}, got {value.dtype}")
            if sinfo.ndim >= 0 and value.ndim != sinfo.ndim:
                raise TVMSError(f"{what}: expected {sinfo.ndim} dimensions, got shape {value.shape}")
            if sinfo.dims is not None:
                self.match_dims(sinfo.dims, value.shape, sizes, what)  # plain variables bind first
            elif isinstance(sinfo.shape, rx.Var):
                sizes.setdefault(("shape", sinfo.shape), Shape(value.shape))
        elif isinstance(sinfo, ShapeStructInfo):
            if not isinstance(value, tuple):
                raise TVMSError(f"{what}: expected a shape, got {type(value).__name__}")
            if sinfo.values is not None:
                self.match_dims(sinfo.values, value, sizes, what)
        elif isinstance(sinfo, PrimStructInfo):
            if sinfo.value is not None:
                self.match_dims((sinfo.value,), (value,), sizes, what)
        elif isinstance(sinfo, TupleStructInfo):
            if not isinstance(value, tuple) or len(value) != len(sinfo.fields):
                raise TVMSError(f"{what}: expected a tuple of {len(sinfo.fields)}")
            for i, (s, v) in enumerate(zip(sinfo.fields, value)):
                self.match(s, v, sizes, f"{what}[{i}]")

    def bind_plain_sizes(self, sinfo: Any, value: Any, sizes: dict) -> None:
        """Bind the sizes that ``sinfo`` states as plain dimensions (``n``, not ``n + 1``)."""
        dims = sinfo.dims if isinstance(sinfo, TensorStructInfo) else \
            sinfo.values if isinstance(sinfo, ShapeStructInfo) else None
        actual = getattr(value, "shape", None) if isinstance(sinfo, TensorStructInfo) else value
        if dims is not None and isinstance(actual, tuple) and len(actual) == len(dims):
            for d, a in zip(dims, actual):
                if isinstance(d, tir.Var) and d not in sizes:
                    sizes[d] = int(a)

    def match_dims(self, declared: tuple, actual: tuple, sizes: dict, what: str) -> None:
        if len(declared) != len(actual):
            raise TVMSError(f"{what}: expected {len(declared)} dimensions, got {tuple(actual)}")
        for d, a in zip(declared, actual):
            if isinstance(d, tir.Var) and d not in sizes:
                sizes[d] = int(a)
        for i, (d, a) in enumerate(zip(declared, actual)):
            expected = self.prim(d, sizes)
            if expected != a:
                named = f"{d.name} = " if isinstance(d, tir.Var) else \
                    "" if isinstance(d, (int, tir.IntImm)) else f"{d} = "
                raise TVMSError(f"{what}: dimension {i} should be {named}{expected}, got {a}")

    # ---- functions
    def call_function(self, func: rx.Function, args: list, captured: dict | None = None) -> Any:
        if len(args) != len(func.params):
            raise TVMSError(f"the function takes {len(func.params)} arguments, got {len(args)}")
        env: dict = dict(captured or {})
        sizes: dict = {k: v for k, v in env.items() if isinstance(k, tir.Var)}
        for p, a in zip(func.params, args):  # plain sizes first: a parameter of shape
            self.bind_plain_sizes(p.struct_info, a, sizes)  # ((n + 1) // 2,) needs a later n
        for p, a in zip(func.params, args):
            self.match(p.struct_info, a, sizes, f"argument {p.name!r}")
            env[p] = a
        env.update(sizes)
        result = self.eval(func.body, env)
        self.match(func.ret_struct_info, result, dict(sizes), "the result")
        return result

    def eval(self, e: Any, env: dict) -> Any:
        method = getattr(self, "x_" + type(e).__name__, None)
        if method is None:
            raise TVMSError(f"the Relax reference executor cannot evaluate {type(e).__name__}")
        return method(e, env)

    def x_SeqExpr(self, e: rx.SeqExpr, env: dict) -> Any:
        for block in e.blocks:
            for b in block.bindings:
                self.bind(b, env)
        return self.eval(e.body, env)

    def bind(self, b: Any, env: dict) -> None:
        value = self.eval(b.value, env)
        if isinstance(b, rx.MatchCast):
            sizes = {k: v for k, v in env.items() if isinstance(k, tir.Var)}
            self.match(b.struct_info, value, sizes, f"R.match_cast of {b.var.name!r}")
            env.update(sizes)
        env[b.var] = value
        if isinstance(value, Closure):
            value.env[b.var] = value  # (a local function may call itself)

    def x_Var(self, e: rx.Var, env: dict) -> Any:
        try:
            return env[e]
        except KeyError:
            raise TVMSError(f"the Relax variable {e.name!r} is used before it is bound") from None

    x_DataflowVar = x_Var

    def x_Constant(self, e: rx.Constant, env: dict) -> Any:
        if e.data is None:
            raise TVMSError("a constant without data (a metadata placeholder) cannot be evaluated")
        return np.asarray(e.data)

    def x_Tuple(self, e: rx.Tuple, env: dict) -> tuple:
        return tuple(self.eval(f, env) for f in e.fields)

    def x_TupleGetItem(self, e: rx.TupleGetItem, env: dict) -> Any:
        return self.eval(e.tuple_value, env)[e.index]

    def x_ShapeExpr(self, e: rx.ShapeExpr, env: dict) -> Shape:
        return Shape(int(self.prim(v, env)) for v in e.values)

    def x_PrimValue(self, e: rx.PrimValue, env: dict) -> Any:
        return cast_value(self.prim(e.value, env), e.value.dtype)

    def x_StringImm(self, e: rx.StringImm, env: dict) -> str:
        return e.value

    def x_DataTypeImm(self, e: rx.DataTypeImm, env: dict) -> Any:
        return e.value

    def x_GlobalVar(self, e: GlobalVar, env: dict) -> Any:
        return self.mod[e]

    def packed(self, name: str) -> Callable:
        """The packed function a call names: the module's own offloaded one, else the registry's."""
        return self.external.get(name) or get_script_func(name)

    def x_ExternFunc(self, e: rx.ExternFunc, env: dict) -> Callable:
        return self.packed(e.global_symbol)

    def x_Function(self, e: rx.Function, env: dict) -> Closure:
        return Closure(e, dict(env))

    def x_If(self, e: rx.If, env: dict) -> Any:
        cond = self.eval(e.cond, env)
        branch = e.true_branch if bool(np.asarray(cond)) else e.false_branch
        return self.eval(branch, env)

    def x_Call(self, e: rx.Call, env: dict) -> Any:
        op = e.op
        if isinstance(op, tir.Op):
            if op.name in _CALLS:
                return getattr(self, _CALLS[op.name])(e, env)
            ref = NUMPY_OPS.get(op.name)
            if ref is None:
                raise TVMSError(f"the Relax operator {op.name!r} has no numpy reference")
            args = tuple(self.eval(a, env) for a in e.args)
            try:
                result = ref(args, e.attrs)
            except IndexError as err:  # (R.take of an index out of range)
                raise TVMSError(f"{op.name}: out-of-bounds access: {err}") from None
            self.check_shapes(e.struct_info, result, env, op.name)
            return result
        target = self.eval(op, env) if not isinstance(op, GlobalVar) else self.mod[op]
        args = [self.eval(a, env) for a in e.args]
        if isinstance(target, rx.Function):
            return self.call_function(target, args)
        if isinstance(target, Closure):
            return self.call_function(target.func, args, target.env)
        if isinstance(target, PrimFunc):  # after CallTIRRewrite: it writes its outputs in place
            self.run_prim(op, target, args)
            return ()
        if callable(target):
            return target(*args)
        raise TVMSError(f"cannot call a value of type {type(target).__name__}")

    def callee(self, e: Any, env: dict) -> Callable:
        if isinstance(e, rx.StringImm):
            return self.packed(e.value)
        fn = self.eval(e, env)
        if not callable(fn):
            raise TVMSError(f"R.call_packed: {fn!r} is not a packed function")
        return fn

    def check_shapes(self, sinfo: Any, value: Any, env: dict, what: str) -> None:
        """The shapes an operator's inferred struct info states (with the sizes bound now) are
        the shapes its numpy reference computed: a size the arguments make negative (R.split
        of n = 1 into 3) is an error here, not a silently different result."""
        if isinstance(sinfo, TupleStructInfo) and isinstance(value, tuple):
            for s, v in zip(sinfo.fields, value):
                self.check_shapes(s, v, env, what)
        elif isinstance(sinfo, TensorStructInfo) and sinfo.dims is not None:
            expected = tuple(self.prim(d, env) for d in sinfo.dims)
            if expected != np.shape(value):
                raise TVMSError(f"{what}: the arguments give the result shape {np.shape(value)}, "
                                f"where its struct info says {expected}")

    def outputs(self, e: rx.Call, env: dict, sinfos: tuple | None = None) -> list:
        """Fresh tensors for the call's outputs (``sinfos``: only these of them)."""
        outs = []
        for s in e.sinfo_args if sinfos is None else sinfos:
            if not isinstance(s, TensorStructInfo) or s.dims is None:
                raise TVMSError("the outputs of a destination-passing call need known shapes")
            shape = tuple(int(self.prim(d, env)) for d in s.dims)
            if any(d < 0 for d in shape):
                raise TVMSError(f"an output of shape {shape}: the arguments make a size negative")
            outs.append(self.allocate(e, shape, numpy_dtype(s.dtype)))
        return outs

    def allocate(self, e: rx.Call, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A fresh output of the destination-passing call ``e`` (the VM plans reuse here)."""
        return np.zeros(shape, dtype=dtype)

    def run_prim(self, gv: Any, func: PrimFunc, args: list) -> None:
        """Run the PrimFunc bound to ``gv`` on ``args`` (the VM runs its compiled kernel)."""
        run_prim_func(func, *args)

    def call_tir(self, e: rx.Call, env: dict) -> Any:
        gv = e.args[0]
        func = self.mod[gv]
        if not isinstance(func, PrimFunc):
            raise TVMSError(f"R.call_tir: {gv.name_hint!r} is not a PrimFunc")
        # (a 0-d result of a numpy reference may be a numpy scalar: buffers need arrays)
        inputs = [np.asarray(v) if isinstance(v, np.generic) else v for v in self.eval(e.args[1], env)]
        outs = self.outputs(e, env)
        extra = list(self.eval(e.args[2], env)) if len(e.args) > 2 else []
        self.run_prim(gv, func, [*inputs, *outs, *extra])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def call_packed(self, e: rx.Call, env: dict) -> Any:
        """R.call_packed, R.call_pure_packed, R.call_inplace_packed: the packed function on the
        arguments (an in-place one writes into those its indices name and returns them)."""
        fn = self.callee(e.args[0], env)
        return fn(*(self.eval(a, env) for a in e.args[1:]))

    def call_builtin(self, e: rx.Call, env: dict) -> Any:
        """R.call_builtin_with_ctx: the packed function on the tuple's fields (tvms' runtime
        functions take no VM context)."""
        return self.callee(e.args[0], env)(*self.eval(e.args[1], env))

    def call_py_func(self, e: rx.Call, env: dict) -> Any:
        """R.call_py_func: the Python function the user registered under the name (never code
        from the module's text), its result checked against the stated struct info."""
        out = py_funcs.call_py_func(e.args[0].value, tuple(self.eval(e.args[1], env)))
        self.check_shapes(e.struct_info, out, env, f"R.call_py_func({e.args[0].value!r})")
        return out

    def call_tir_inplace(self, e: rx.Call, env: dict) -> Any:
        """The PrimFunc writes into the inputs the in-place indices name and into fresh tensors
        for the outputs marked -1, which it takes after the inputs."""
        gv, indices = e.args[0], e.attrs["inplace_indices"]
        func = self.mod[gv]
        if not isinstance(func, PrimFunc):
            raise TVMSError(f"R.call_tir_inplace: {gv.name_hint!r} is not a PrimFunc")
        inputs = [np.asarray(v) if isinstance(v, np.generic) else v for v in self.eval(e.args[1], env)]
        fresh = self.outputs(e, env, tuple(s for s, k in zip(e.sinfo_args, indices) if k == -1))
        taken = iter(fresh)
        outs = [inputs[k] if k != -1 else next(taken) for k in indices]
        extra = list(self.eval(e.args[2], env)) if len(e.args) > 2 else []
        self.run_prim(gv, func, [*inputs, *fresh, *extra])
        return outs[0] if len(outs) == 1 else tuple(outs)

    def call_tir_dyn(self, e: rx.Call, env: dict) -> tuple:
        """R.vm.call_tir_dyn(f, (tensors..., R.shape([sizes]))): the PrimFunc on the tensors and
        the sizes; it writes its outputs among the tensors. A string names a registered packed
        function, which the call runs as the VM does."""
        *tensors, sizes = self.eval(e.args[1], env)
        if isinstance(e.args[0], GlobalVar):
            self.run_prim(e.args[0], self.mod[e.args[0]], [*tensors, *sizes])
        else:
            self.callee(e.args[0], env)(*tensors, *sizes)
        return ()

    def make_closure(self, e: rx.Call, env: dict) -> Callable:
        func, captured = self.eval(e.args[0], env), list(self.eval(e.args[1], env))
        if not isinstance(func, rx.Function):
            raise TVMSError("R.make_closure takes a Relax function of the module")
        return lambda *args: self.call_function(func, [*captured, *args])

    def invoke_closure(self, e: rx.Call, env: dict) -> Any:
        closure, args = self.eval(e.args[0], env), list(self.eval(e.args[1], env))
        if isinstance(closure, Closure):
            return self.call_function(closure.func, args, closure.env)
        if not callable(closure):
            raise TVMSError(f"R.invoke_closure: cannot call a value of type {type(closure).__name__}")
        return closure(*args)

    def call_dps(self, e: rx.Call, env: dict) -> Any:
        fn = self.callee(e.args[0], env)
        inputs = list(self.eval(e.args[1], env))
        outs = self.outputs(e, env)
        fn(*inputs, *outs)
        return outs[0] if len(outs) == 1 else tuple(outs)


# the operators that call functions, and the method of _Interpreter that runs each
_CALLS = {"relax.call_tir": "call_tir", "relax.call_tir_with_grad": "call_tir",
          "relax.call_tir_inplace": "call_tir_inplace", "relax.vm.call_tir_dyn": "call_tir_dyn",
          "relax.call_dps_packed": "call_dps", "relax.call_packed": "call_packed",
          "relax.call_pure_packed": "call_packed", "relax.call_inplace_packed": "call_packed",
          "relax.call_builtin_with_ctx": "call_builtin", "relax.make_closure": "make_closure",
          "relax.call_py_func": "call_py_func",
          "relax.invoke_closure": "invoke_closure", "relax.invoke_pure_closure": "invoke_closure"}


@deep_recursion
def run_relax(mod: IRModule, func_name: str, *args: Any) -> Any:
    """Evaluate the Relax function ``func_name`` of ``mod`` on numpy arrays (and numbers, shapes,
    tuples); returns the result as numpy arrays.

    >>> run_relax(mod, "main", np.ones((2, 3), "float32"))
    """
    func = mod[func_name]
    if not isinstance(func, rx.Function):
        raise TVMSError(f"{func_name!r} is not a Relax function")
    args = [Shape(a) if isinstance(a, tuple) and _is_shape_param(p) else a
            for a, p in zip(args, func.params)]
    with np.errstate(all="ignore"):
        return _Interpreter(mod).call_function(func, list(args))


@deep_recursion
def eval_expr(expr: Any, mod: IRModule | None = None, env: dict | None = None) -> Any:
    """Evaluate one Relax expression (its free variables looked up in ``env``)."""
    with np.errstate(all="ignore"):
        return _Interpreter(mod if mod is not None else IRModule()).eval(expr, dict(env or {}))


# (FoldConstant evaluates with it)
registry.register_func("runtime.reference_relax.eval_expr", eval_expr, internal=True)


def _is_shape_param(p: rx.Var) -> bool:
    return isinstance(p.struct_info, ShapeStructInfo)


__all__ = ["run_relax", "eval_expr", "register_func", "get_func", "Closure", "Shape", "SPECIAL_OPS"]
