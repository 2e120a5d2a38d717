"""``tvms.relax.op``: one Python function per registered Relax operator, made on demand from the
operator registry (``ir/relax_op.py``), so registering an operator adds its function.

``relax.op.add(x, y)``, ``relax.op.nn.relu(x)``, ``relax.op.permute_dims(w, axes=[1, 0])``:
positional arguments fill the operator's Relax arguments, then its attributes in their declared
order; keyword arguments name either. The result is a Call with its struct info inferred (not yet
bound to a variable: ``BlockBuilder.emit`` does that).
"""
from __future__ import annotations

from typing import Any, Callable

from ..ir import relax as rx
from ..ir import relax_op
from ..ir.errors import TVMSError
from ..ir.relax_ops_misc import py_func_result
from ..ir.struct_info import StructInfo
from .diagnostics import did_you_mean


def _relax_value(value: Any) -> Any:
    """Python lists of Relax values are tuples; anything else goes to the operator as it is
    (its ``prepare`` step turns shapes such as ``[1, -1]`` into ShapeExprs)."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, rx.RelaxExpr) for v in value):
        return rx.Tuple(tuple(value))
    return value


def op_function(spec: relax_op.OpSpec) -> Callable[..., rx.Call]:
    """The Python function of one operator."""
    arg_names = spec.args
    attr_names = [a.name for a in spec.attrs]
    positional = list(spec.positional or attr_names)  # (TVM's order, where it is not the printing order)

    def call(*args: Any, **kwargs: Any) -> rx.Call:
        n_args = len(args) if spec.variadic else min(len(args), len(arg_names))
        relax_args = [_relax_value(a) for a in args[:n_args]]
        extra = args[n_args:]
        if len(extra) > len(positional):
            raise TVMSError(f"relax.op.{spec.script_name} takes at most {len(arg_names) + len(attr_names)} "
                            f"arguments ({', '.join(list(arg_names) + attr_names)}), got {len(args)}")
        attrs = dict(zip(positional, extra))
        for key, value in kwargs.items():
            if key in arg_names and not spec.variadic:
                i = arg_names.index(key)
                if i < len(relax_args):
                    raise TVMSError(f"relax.op.{spec.script_name}: {key!r} is given twice")
                if len(relax_args) < i:
                    if spec.min_args is None or len(relax_args) < spec.min_args:
                        raise TVMSError(f"relax.op.{spec.script_name}: {key!r} is given but "
                                        f"{arg_names[len(relax_args)]!r} is not")
                    relax_args += [None] * (i - len(relax_args))  # (optional: the op fills them in)
                relax_args.append(_relax_value(value))
            elif key in attrs:
                raise TVMSError(f"relax.op.{spec.script_name}: {key!r} is given twice")
            elif key in attr_names:
                attrs[key] = value
            else:
                known = list(arg_names) + attr_names
                raise TVMSError(f"relax.op.{spec.script_name} has no argument {key!r}"
                                f"{did_you_mean(key, known)}; it takes {', '.join(known)}")
        return relax_op.make_call(spec, relax_args, attrs)

    call.__name__ = spec.script_name.rsplit(".", 1)[-1]
    call.__qualname__ = f"relax.op.{spec.script_name}"
    call.__doc__ = (f"R.{spec.script_name}({', '.join(arg_names)}"
                    + "".join(f", {a.name}={a.default!r}" for a in spec.attrs) + ")")
    return call


# ---------------------------------------------------------------- calls into functions
def _sinfo_args(out: Any) -> tuple:
    out = tuple(out) if isinstance(out, (list, tuple)) else (out,)
    for s in out:
        if not isinstance(s, StructInfo):
            raise TVMSError(f"out_sinfo must be struct info such as relax.TensorStructInfo((4,), "
                            f"\"float32\"), got {type(s).__name__}")
    return out


def call_tir(gvar: Any, args: Any, out_sinfo: Any, tir_vars: Any = None) -> rx.Call:
    """``R.call_tir(cls.f, (x, y), out_sinfo=...)``: call a TensorIR function of the module."""
    call_args = [gvar, _as_tuple(args)]
    if tir_vars is not None:
        call_args.append(tir_vars if isinstance(tir_vars, rx.ShapeExpr) else rx.ShapeExpr(tuple(tir_vars)))
    return relax_op.make_call("call_tir", call_args, {}, _sinfo_args(out_sinfo))


def call_dps_packed(func: Any, args: Any, out_sinfo: Any) -> rx.Call:
    """``R.call_dps_packed("name", (x,), out_sinfo=...)``: call a packed function in DPS style."""
    if isinstance(func, str):
        func = rx.ExternFunc(func)
    return relax_op.make_call("call_dps_packed", [func, _as_tuple(args)], {}, _sinfo_args(out_sinfo))


def call_packed(func: Any, *args: Any, sinfo_args: Any = ()) -> rx.Call:
    """``R.call_packed("name", x, sinfo_args=...)``."""
    if isinstance(func, str):
        func = rx.ExternFunc(func)
    sinfo = _sinfo_args(sinfo_args) if sinfo_args not in ((), None) else ()
    return relax_op.make_call("call_packed", [func, *args], {}, sinfo)


def call_py_func(func_name: Any, args: Any, out_ty: Any) -> rx.Call:
    """``relax.op.call_py_func("name", (x,), out_ty=...)`` (TVM 0.27's names): call a Python
    function registered by name (several results are one tuple, as TVM states them)."""
    if isinstance(func_name, str):
        func_name = rx.StringImm(func_name)
    return relax_op.make_call("call_py_func", [func_name, _as_tuple(args)], {}, py_func_result(_sinfo_args(out_ty)))


def _as_tuple(args: Any) -> Any:
    if isinstance(args, (list, tuple)):
        return rx.Tuple(tuple(args))
    return args


def relu6(data: Any) -> rx.Call:
    """``relax.op.nn.relu6(x)``: TVM's, a ``clip(x, 0, 6)`` (no operator of its own)."""
    return relax_op.make_call("clip", [data, 0, 6])


_SPECIAL: dict[str, Callable] = {"call_tir": call_tir, "call_dps_packed": call_dps_packed,
                                 "call_packed": call_packed, "call_py_func": call_py_func,
                                 "nn.relu6": relu6}


class OpNamespace:
    """``relax.op`` and its sub-namespaces (``relax.op.nn``), read from the registry."""

    def __init__(self, prefix: str = ""):
        self._prefix = prefix  # "" or "nn."
        self._cache: dict[str, Callable] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        full = self._prefix + name
        if full in _SPECIAL:
            return _SPECIAL[full]
        spec = relax_op.lookup(full)
        if spec is not None:
            fn = self._cache.get(spec.name)
            if fn is None or getattr(fn, "_spec", None) is not spec:
                fn = self._cache[spec.name] = op_function(spec)
                fn._spec = spec  # type: ignore[attr-defined]
            return fn
        if any(n.startswith(full + ".") for n in relax_op.script_names()):
            return OpNamespace(full + ".")
        where = "relax.op" + ("." + self._prefix[:-1] if self._prefix else "")
        raise AttributeError(f"{where} has no operator {name!r}{did_you_mean(name, self.__dir__())}")

    def __dir__(self) -> list[str]:
        names = set()
        for n in list(relax_op.script_names()) + list(_SPECIAL):
            if n.startswith(self._prefix):
                names.add(n[len(self._prefix):].split(".", 1)[0])
        return sorted(names)

    def __repr__(self) -> str:
        return f"<relax.op{'.' + self._prefix[:-1] if self._prefix else ''} namespace>"


op = OpNamespace()

__all__ = ["op", "OpNamespace", "op_function", "call_tir", "call_dps_packed", "call_packed"]
