"""Building Relax from syntax: ``@R.function`` bodies, bindings, dataflow blocks, struct info.

TensorIR expressions (symbolic sizes such as ``n`` and ``m * k``, ``T.int64(...)``, the values
of ``R.prim_value``) are read by the TensorIR expression evaluator this class extends
(tensorir/evaluator.py), which knows no TensorIR statement; Relax values and ``R.*`` builtins
are handled here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import arith, relax as rx
from ..ir import relax_op
from ..ir.dtype import DataType, int64, is_dtype_name
from ..ir.errors import ScriptError, Source, TVMSError
from ..ir.expr import IntImm, PrimExpr, Var as TirVar, const
from ..ir.module import GlobalVar, MetadataRef
from .metadata import CONSTANT_KEYS
from ..ir.operators import RELAX_BINARY, RELAX_PREFIX
from ..ir.node import EMPTY, FrozenDict
from ..ir.relax import make_constant
from ..ir.struct_info import (VOID, FuncStructInfo, ObjectStructInfo, PrimStructInfo,
                              ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo,
                              call_result)
from . import syntax as S
from .diagnostics import did_you_mean
from .relax_call_forms import PARSERS as CALL_FORMS
from .dialect import canonical_attr_key
from .tensorir.attrs import freeze_value
from .tensorir.evaluator import Builtin, NewVar, ScopedEvaluator, _describe


@dataclass(frozen=True)
class RBuiltin:
    """A reference to ``R.<path>`` not yet called."""

    path: str


@dataclass(frozen=True)
class ModuleRef:
    """``cls``: the module whose functions ``cls.name`` refers to."""

    names: dict


@dataclass
class Metadata:
    """``metadata["ir.GenericConst"]``: constants printed outside the text (or elided)."""

    table: dict


_STRUCT_INFO_BUILTINS = {"Tensor", "Shape", "Tuple", "Object", "Any", "Prim", "Callable"}
_R_VALUE_BUILTINS = {"const", "shape", "prim_value", "str", "dtype", "tuple", "match_cast",
                     "ExternFunc", "output",
                     "dataflow", "func_attr", "function"}


def _prim_of(value: Any) -> Any:
    """The TensorIR value of a Relax scalar whose value is known (``R.prim_value(n + 1)``, a
    parameter ``n: T.int64`` of TVM 0.27), else ``value`` itself."""
    if isinstance(value, rx.PrimValue):
        return value.value
    if isinstance(value, rx.Var) and isinstance(value.struct_info, PrimStructInfo) \
            and isinstance(value.struct_info.value, PrimExpr):
        return value.struct_info.value
    return value


def _is_prim(value: Any) -> bool:
    return isinstance(_prim_of(value), (PrimExpr, int, float)) and not isinstance(value, bool)


def _scalar(value: bool | int | float | PrimExpr) -> PrimExpr:
    """A scalar Relax value as TVM's ``relax.prim_value`` makes it: a Python int is an int64, a
    float a float64."""
    if isinstance(value, bool) or isinstance(value, PrimExpr):
        return arith.to_expr(value)
    return const(value, "int64" if isinstance(value, int) else "float64")


class RelaxBuilder(ScopedEvaluator):
    """Builds one Relax Function from a ``def`` decorated with ``@R.function``."""

    def __init__(self, source, dialect, module_names: dict, typevars: frozenset, metadata: dict | None):
        super().__init__(source, dialect, typevars=typevars)
        self.module_names = module_names  # name -> GlobalVar
        self.metadata = metadata  # parsed metadata section, or None when elided
        self.outputs: set[str] | None = None  # names a dataflow block exports
        self.prim_funcs: set[str] = set()  # which module functions are TensorIR
        self.signatures: dict = {}  # Relax module functions: name -> FuncStructInfo
        self.in_dataflow = False
        self.vdevices: tuple = ()  # the module's I.module_global_infos({"vdevice": [...]})
        self.meshes: tuple = ()  # ... and its {"mesh": [...]}
        # spellings that only TVM 0.27 prints and the text's header does not reveal (a module
        # parser shares its set with its builders, and reads a classic text again as 0.27's)
        self.tvm027_spellings: set[str] = set()
        self.size_scope = 1  # the scope a new symbolic size goes to: the function's (see symbolic)
        # (while a signature's parameters are read: the sizes a quoted expression named first, with
        # the annotation's syntax, the expression and the name's offset in it)
        self.sizes_declared_in_expressions: list | None = None

    # ---------------------------------------------------------------- names
    def lookup(self, name: str, syn: Any) -> Any:
        if name == "R":
            return RBuiltin("")
        if name == "metadata":
            return Metadata(self.metadata or {})
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        # the older syntax of seed 002: bare Tensor(...) and module functions by bare name
        if name == "Tensor":
            return RBuiltin("Tensor")
        if name in self.module_names:
            return self.module_names[name]
        return super().lookup(name, syn)

    # ---------------------------------------------------------------- expressions
    def ev_Attribute(self, syn: S.Attribute) -> Any:
        base = self.ev(syn.value)
        if isinstance(base, RBuiltin):
            path = f"{base.path}.{syn.attr}" if base.path else syn.attr
            if not is_r_builtin_name(path):
                known = ["R." + n for n in sorted(_STRUCT_INFO_BUILTINS | _R_VALUE_BUILTINS
                                                  | set(relax_op.script_names()))]
                raise self.error(syn, f"unknown builtin 'R.{path}'{did_you_mean('R.' + path, known)}")
            return RBuiltin(path)
        if isinstance(base, ModuleRef):
            gv = base.names.get(syn.attr)
            if gv is None:
                raise self.error(syn, f"the module has no function {syn.attr!r}"
                                 f"{did_you_mean(syn.attr, list(base.names))}")
            return gv
        if isinstance(base, rx.RelaxExpr) and syn.attr in ("ty", "struct_info"):
            return base.struct_info  # (``ty_args=[x.ty]``: TVM 0.27's name, and the older one)
        return super().ev_Attribute(syn)

    def ev_Subscript(self, syn: S.Subscript) -> Any:
        base = self.ev(syn.value)
        if isinstance(base, Metadata):
            return MetadataKind(base, self.ev(syn.indices[0]))
        if isinstance(base, MetadataKind):
            return self.metadata_constant(base, self.ev(syn.indices[0]), syn)
        if isinstance(base, rx.RelaxExpr) and len(syn.indices) == 1:
            return self.index_tuple(base, self.ev(syn.indices[0]), syn)
        return super().ev_Subscript(syn)

    def index_tuple(self, base: Any, index: Any, syn: Any) -> rx.TupleGetItem:
        """``t[1]``: a field of a Relax tuple."""
        if not isinstance(index, int):
            raise self.error(syn, "a tuple is indexed by a constant integer")
        sinfo = base.struct_info
        field_sinfo = ObjectStructInfo()
        if isinstance(sinfo, TupleStructInfo):
            if not 0 <= index < len(sinfo.fields):
                raise self.error(syn, f"index {index} is out of range for a tuple of {len(sinfo.fields)}")
            field_sinfo = sinfo.fields[index]
        return rx.TupleGetItem(base, index, field_sinfo, span=self.span(syn))

    def metadata_constant(self, kind: "MetadataKind", index: Any, syn: Any) -> Any:
        if isinstance(index, IntImm):
            index = index.value
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            # (a float index printed back as itself: `[-inf]` did not parse again)
            raise self.error(syn, f"a metadata index must be a non-negative integer, not {_describe(index)}")
        if kind.key not in CONSTANT_KEYS:  # a runtime module or other object: keep the reference
            return MetadataRef(str(kind.key), int(index))
        entries = kind.meta.table.get(kind.key)
        if self.metadata is None or entries is None:
            # the text was printed without its metadata: keep a placeholder the printer can
            # print again, whose struct info the binding's annotation fills in
            # (the digest names the entry in a dialect-neutral way: both spellings are one table)
            return rx.Constant(None, TensorStructInfo(None, VOID, -1), f"elided:{CONSTANT_KEYS[1]}:{index}",
                               span=self.span(syn))
        if index >= len(entries):
            raise self.error(syn, f"metadata[{kind.key!r}] has no entry {index!r}")
        return entries[index]

    # ---------------------------------------------------------------- Python operators
    # On Relax values, as in TVM's parser: `x * y` is R.multiply(x, y), `-x` R.negative(x).
    def ev_BinOp(self, syn: S.BinOp) -> Any:
        left, right = self.ev(syn.left), self.ev(syn.right)
        if _is_prim(left) and _is_prim(right):  # scalars with known values: TensorIR arithmetic
            return self.binary(syn, _prim_of(left), _prim_of(right))
        if isinstance(left, rx.RelaxExpr) or isinstance(right, rx.RelaxExpr):
            return self.relax_operator(RELAX_BINARY, syn.op, [left, right], syn)
        return self.binary(syn, left, right)

    def ev_UnaryOp(self, syn: S.UnaryOp) -> Any:
        value = self.ev(syn.operand)
        if isinstance(value, rx.RelaxExpr):
            return self.relax_operator(RELAX_PREFIX, syn.op, [value], syn)
        return self.unary(syn, value)

    def ev_Compare(self, syn: S.Compare) -> Any:
        left = self.ev(syn.left)
        if isinstance(left, rx.RelaxExpr) and len(syn.ops) == 1:
            return self.relax_operator(RELAX_BINARY, syn.ops[0], [left, self.ev(syn.comparators[0])], syn)
        return self.compare(syn, left)

    def relax_operator(self, table: dict, op: str, operands: list, syn: Any) -> rx.Call:
        name = table.get(op)
        if name is None:
            raise self.error(syn, f"the operator {op!r} is not defined on Relax values")
        args = [self.to_relax(v, syn) for v in operands]
        return relax_op.make_call(name, args, {}, (), span=self.span(syn))

    def ev_Call(self, syn: S.Call) -> Any:
        func = self.ev(syn.func)
        if isinstance(func, RBuiltin):
            return self.r_call(func.path, syn)
        if isinstance(func, (GlobalVar, rx.Var)):
            args = tuple(self.to_relax(self.ev(a), a) for a in syn.args)
            ret = ObjectStructInfo()
            sinfo = getattr(func, "struct_info", None)
            if isinstance(func, GlobalVar) and func.name_hint in self.signatures:
                sinfo = self.signatures[func.name_hint]
            if isinstance(sinfo, FuncStructInfo):
                ret = call_result(sinfo, tuple(_sinfo(a) for a in args))
            elif isinstance(func, GlobalVar) and func.name_hint in self.prim_funcs:
                ret = TupleStructInfo(())  # a TensorIR function called in lowered form: no value
            return rx.Call(func, args, EMPTY, (), ret, span=self.span(syn))
        return super().ev_Call(syn)

    def to_relax(self, value: Any, syn: Any) -> rx.RelaxExpr:
        """A Relax expression for a value: tuples become Tuples, numbers PrimValues."""
        if isinstance(value, (rx.RelaxExpr, GlobalVar)):
            return value
        if isinstance(value, (tuple, list)):
            fields = tuple(self.to_relax(v, syn) for v in value)
            return rx.Tuple(fields, TupleStructInfo(tuple(_sinfo(f) for f in fields)), span=self.span(syn))
        if isinstance(value, (bool, int, float, PrimExpr)):
            self.tvm027_spellings.add("a scalar written bare as a Relax value")  # (classic: R.prim_value)
            return self.prim_value(value, syn)
        if isinstance(value, str):
            return rx.StringImm(value, ObjectStructInfo(), span=self.span(syn))
        raise self.error(syn, f"expected a Relax value, got {_describe(value)}")

    # ---------------------------------------------------------------- R.* calls
    def r_call(self, path: str, syn: S.Call) -> Any:
        if path in _STRUCT_INFO_BUILTINS:
            return self.struct_info_call(path, syn)
        handler = getattr(self, "r_" + path, None)
        if handler is not None and path in _R_VALUE_BUILTINS:
            return handler(syn)
        if path in CALL_FORMS:
            return CALL_FORMS[path](self, syn)
        spec = relax_op.lookup(path)
        if spec is None:
            raise self.error(syn.func, f"R.{path}(...) cannot be used here")
        args = [self.relax_arg(spec, self.ev(a), a) for a in syn.args]
        attrs, sinfo_args = {}, ()
        for key, value_syn in syn.kwargs:
            if key in ("sinfo_args", "ty_args"):  # R.builtin.alloc_tensor(..., ty_args=(...))
                value = self.ev(value_syn)
                value = value if isinstance(value, (list, tuple)) else (value,)  # one, or several
                sinfo_args = tuple(self.as_struct_info(x, syn) for x in value)
                continue
            value = self.ev(value_syn)
            if key in spec.args and all(a.name != key for a in spec.attrs):  # a Relax argument by name
                attrs[key] = self.relax_arg(spec, value, value_syn)
            else:
                attrs[key] = self.attr_value(value, value_syn)
        return relax_op.make_call(spec, args, attrs, sinfo_args, span=self.span(syn))

    def relax_arg(self, spec: Any, value: Any, syn: Any) -> Any:
        if isinstance(value, float) and spec.name not in relax_op.PRIM_VALUE_ARGS:
            value = arith.to_expr(value)  # (TVM's FFI hands the operator a float32: R.add(x, 1.5))
        return self.to_relax(value, syn)

    def attr_value(self, value: Any, syn: Any) -> Any:
        if isinstance(value, list):
            return tuple(self.attr_value(v, syn) for v in value)
        if isinstance(value, IntImm):
            return value.value
        if isinstance(value, str) and value == "void":
            return None  # the classic dialect writes an unset dtype as "void"
        return value

    def r_const(self, syn: S.Call) -> rx.Constant:
        args = [self.ev(a) for a in syn.args]
        kwargs = {k: self.ev(v) for k, v in syn.kwargs}
        value = args[0] if args else kwargs.get("value")
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
        dtype = str(self.dtype_of(dtype, syn)) if dtype else None
        try:
            data = np.array(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as err:  # a dtype numpy lacks, a ragged list
            of_type = f" of type {dtype}" if dtype else ""
            raise self.error(syn, f"R.const cannot make a constant{of_type} from {_describe(value)}: "
                                  f"{err}") from None
        return make_constant(data, span=self.span(syn))

    def r_shape(self, syn: S.Call) -> rx.ShapeExpr:
        values = self.ev(syn.args[0]) if syn.args else []
        dims = tuple(self.dim(v, syn) for v in values)
        return rx.ShapeExpr(dims, ShapeStructInfo(dims), span=self.span(syn))

    def r_prim_value(self, syn: S.Call) -> rx.PrimValue:
        value = self.ev(syn.args[0])
        if isinstance(value, (bool, int, float, PrimExpr)):
            return self.prim_value(value, syn)
        return self.to_relax(value, syn)

    def prim_value(self, value: bool | int | float | PrimExpr, syn: Any) -> rx.PrimValue:
        if type(value) is int and not int64.holds_int(value):  # (as TVM refuses it)
            raise self.error(syn, f"{value} is out of the range of int64")
        expr = _scalar(value)
        return rx.PrimValue(expr, PrimStructInfo(expr.dtype, expr), span=self.span(syn))

    def r_str(self, syn: S.Call) -> rx.StringImm:
        return rx.StringImm(self.ev(syn.args[0]), ObjectStructInfo(), span=self.span(syn))

    def r_dtype(self, syn: S.Call) -> rx.DataTypeImm:
        return rx.DataTypeImm(DataType(self.ev(syn.args[0])), ObjectStructInfo(), span=self.span(syn))

    def r_tuple(self, syn: S.Call) -> rx.Tuple:
        return self.to_relax(tuple(self.ev(a) for a in syn.args), syn)

    def r_ExternFunc(self, syn: S.Call) -> rx.ExternFunc:
        """``R.ExternFunc("symbol")``, or with its signature: ``R.ExternFunc("f", R.Callable(...))``."""
        if not 1 <= len(syn.args) <= 2 or syn.kwargs or not isinstance(symbol := self.ev(syn.args[0]), str):
            raise self.error(syn, "R.ExternFunc takes a symbol name and, optionally, its R.Callable")
        sinfo = self.as_struct_info(self.ev(syn.args[1]), syn.args[1]) if len(syn.args) == 2 else ObjectStructInfo()
        if not isinstance(sinfo, (FuncStructInfo, ObjectStructInfo)):
            raise self.error(syn.args[1], "the signature of an R.ExternFunc is an R.Callable(...)")
        return rx.ExternFunc(symbol, sinfo, span=self.span(syn))

    def call_sinfo(self, syn: S.Call, kwargs: dict) -> tuple:
        out = kwargs.pop("out_sinfo", None) if "out_sinfo" in kwargs else kwargs.pop("out_ty", None)
        if out is None:
            raise self.error(syn, "the output struct info is missing: out_sinfo=R.Tensor(...)")
        out = out if isinstance(out, (list, tuple)) else [out]
        for o in out:
            if not isinstance(o, StructInfo):
                raise self.error(syn, f"out_sinfo must be struct info such as R.Tensor((4,), \"float32\"), "
                                 f"got {_describe(o)}")
        return tuple(out)

    def to_relax_shape(self, values: Any, syn: Any) -> rx.ShapeExpr:
        if isinstance(values, rx.ShapeExpr):
            return values
        dims = tuple(self.dim(v, syn) for v in values)
        return rx.ShapeExpr(dims, ShapeStructInfo(dims))

    # ---------------------------------------------------------------- struct info
    def param_var(self, name: str, sinfo: StructInfo, span: Any = None) -> rx.Var:
        """A parameter. In TVM 0.27 a scalar int64 parameter is a size variable too
        (``n: T.int64, x: R.Tensor((n,))``, ``n + 1``): its struct info's value is one of its name."""
        if self.dialect.name != "classic" and isinstance(sinfo, PrimStructInfo) and sinfo.value is None \
                and sinfo.dtype == DataType("int64"):
            sinfo = PrimStructInfo(sinfo.dtype, TirVar(name, sinfo.dtype))
        return rx.Var(name, sinfo, span=span)

    def dim(self, value: Any, syn: Any) -> PrimExpr:
        """A dimension: ints are int64, strings name symbolic sizes (the classic signature)."""
        value = _prim_of(value)
        if isinstance(value, bool):
            raise self.error(syn, "a dimension is an integer, not a bool")
        if isinstance(value, int):
            return IntImm(DataType("int64"), value)
        if isinstance(value, str):
            return self.symbolic(value, syn)
        if isinstance(value, PrimExpr) and (value.dtype.is_integer):
            return value
        raise self.error(syn, f"a dimension is an integer or a symbolic size, got {_describe(value)}")

    def symbolic(self, name: str, syn: Any) -> PrimExpr:
        if not name.isidentifier():
            return self.size_expression(name, syn)
        for scope in reversed(self.scopes):
            if name in scope and isinstance(_prim_of(scope[name]), TirVar):  # (or a parameter that is one)
                return _prim_of(scope[name])
        var = TirVar(name, DataType("int64"))
        self.scopes[self.size_scope if len(self.scopes) > self.size_scope else 0][name] = var
        return var

    def size_expression(self, text: str, syn: Any) -> PrimExpr:
        """A quoted compound size of the classic signature (``"m * 2"``, as TVM prints a size
        that is not one variable): an expression over the symbolic sizes in scope."""
        from .parser import parse_syntax

        problem = f"a quoted dimension is a symbolic size or an expression of sizes, got {text!r}"
        # (in the classic signature, where sizes have no TypeVars, a size named first inside an
        # expression is declared there, as a quoted name is: ``A: R.Tensor(("M * N",)),
        # x: R.Shape(["M", "N"])`` uses M before the name alone declares it)
        found = re.finditer(r"(?<![\w.])([A-Za-z_]\w*)(?![\w(.])", text) if self.dialect.name == "classic" else ()
        for m in found:
            name = m.group(1)
            if not any(name in scope for scope in self.scopes) and name not in self.module_names \
                    and name not in ("T", "R"):
                var = self.symbolic(name, syn)
                if self.sizes_declared_in_expressions is not None:  # (a parameter must define it)
                    self.sizes_declared_in_expressions.append((var, syn, text, m.start()))
        try:
            stmts = parse_syntax(text, Source(text, "<size>")).body
            if len(stmts) != 1 or not isinstance(stmts[0], S.ExprStmt):
                raise self.error(syn, problem)
            value = self.ev(stmts[0].value)
        except ScriptError as e:
            raise self.error(syn, f"{problem}: {e.message}") from None
        if not (isinstance(value, PrimExpr) and value.dtype.is_integer):
            raise self.error(syn, problem)
        return value

    def struct_info_call(self, path: str, syn: S.Call) -> StructInfo:
        args = [self.ev(a) for a in syn.args]
        kwargs = {k: self.ev(v) for k, v in syn.kwargs}
        return self.make_struct_info(path, args, kwargs, syn)

    def sizes(self, shape: Any, what: str, syn: Any) -> tuple | list:
        if not isinstance(shape, (tuple, list)):  # `R.Tensor((256), ...)` is a number, not a tuple
            raise self.error(syn, f"the shape of {what} must be a tuple of sizes, not {_describe(shape)}")
        return shape

    def make_struct_info(self, path: str, args: list, kwargs: dict, syn: Any) -> StructInfo:
        if path == "Tensor":
            shape = args[0] if args else kwargs.get("shape")
            dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
            if isinstance(shape, str) and dtype is None:  # `R.Tensor("float32", ndim=2)`: TVM reads a dtype
                shape, dtype = None, shape
            ndim = kwargs.get("ndim", -1)
            dt = DataType(dtype) if dtype not in (None, "void") else VOID
            vdev = args[2] if len(args) > 2 else kwargs.get("vdevice")
            vdev = self.vdevice(vdev, syn) if vdev is not None else None
            if shape is None:
                return TensorStructInfo(None, dt, ndim, vdev)
            if isinstance(shape, rx.Var):  # shaped by a Relax shape variable: its rank is known
                shape_sinfo = shape.struct_info
                if ndim == -1 and isinstance(shape_sinfo, ShapeStructInfo):
                    ndim = shape_sinfo.ndim
                return TensorStructInfo(shape, dt, ndim, vdev)
            dims = tuple(self.dim(d, syn) for d in self.sizes(shape, "R.Tensor", syn))
            return TensorStructInfo(rx.ShapeExpr(dims, ShapeStructInfo(dims)), dt, len(dims), vdev)
        if path == "Shape":
            values = args[0] if args else kwargs.get("values")
            if values is None:
                return ShapeStructInfo(None, kwargs.get("ndim", -1))
            return ShapeStructInfo(tuple(self.dim(d, syn) for d in self.sizes(values, "R.Shape", syn)))
        if path == "Tuple":
            if len(args) == 1 and isinstance(args[0], list):  # R.Tuple([a, b])
                args = args[0]
            return TupleStructInfo(tuple(self.as_struct_info(a, syn) for a in args))
        if path in ("Object", "Any"):
            return ObjectStructInfo()
        if path == "Prim":
            dtype = args[0] if args else kwargs.get("dtype")
            value = kwargs.get("value")
            if value is not None:
                value = _scalar(value) if not isinstance(value, str) else self.symbolic(value, syn)
                return PrimStructInfo(value.dtype, value)
            return PrimStructInfo(DataType(dtype))
        if path == "Callable":
            params = args[0] if args else kwargs.get("params")
            ret = args[1] if len(args) > 1 else kwargs.get("ret")
            # TVM's defaults: an opaque signature is impure and returns anything
            purity = args[2] if len(args) > 2 else kwargs.get("purity", params is not None)
            if params is not None and not isinstance(params, (tuple, list)):
                params = (params,)
            return FuncStructInfo(None if params is None else tuple(self.as_struct_info(p, syn) for p in params),
                                  ObjectStructInfo() if ret is None else self.as_struct_info(ret, syn),
                                  bool(purity))
        raise self.error(syn, f"R.{path} is not struct info")

    def vdevice(self, label: Any, syn: Any) -> Any:
        """The vdevice ``R.Tensor(..., vdevice="cuda:0")`` names in the module's global infos."""
        from ..ir.global_info import lookup_vdevice

        if not isinstance(label, str):
            raise self.error(syn, f"a vdevice is written as a string such as \"cuda:0\", got {_describe(label)}")
        try:
            return lookup_vdevice(label, self.vdevices)
        except TVMSError as e:
            raise self.error(syn, str(e)) from None

    def as_struct_info(self, value: Any, syn: Any) -> StructInfo:
        if isinstance(value, StructInfo):
            return value
        if isinstance(value, RBuiltin) and value.path in ("Object", "Any", "Tensor", "Shape", "Tuple", "Callable"):
            return self.make_struct_info(value.path, [], {}, syn)
        if isinstance(value, Builtin) and is_dtype_name(value.path):
            return PrimStructInfo(DataType(value.path))  # TVM 0.27 writes R.Prim("int64") as T.int64
        raise self.error(syn, f"expected struct info such as R.Tensor((4,), \"float32\"), got {_describe(value)}")


class MetadataKind:
    """``metadata["ir.GenericConst"]`` before it is indexed."""

    def __init__(self, meta: Metadata, key: Any):
        self.meta, self.key = meta, key


def _sinfo(e: Any) -> StructInfo:
    return getattr(e, "struct_info", None) or ObjectStructInfo()


def is_r_builtin_name(path: str) -> bool:
    """Whether ``R.<path>`` is a name tvms knows (struct info, a value builtin, an operator or a
    namespace of operators such as ``nn``); what the parser accepts and the inventory test counts."""
    return (path in _STRUCT_INFO_BUILTINS or path in _R_VALUE_BUILTINS or path in CALL_FORMS
            or relax_op.lookup(path) is not None
            or any(name.startswith(path + ".") for name in relax_op.script_names()))


__all__ = ["RelaxBuilder", "RBuiltin", "ModuleRef", "make_constant", "FrozenDict", "canonical_attr_key",
           "freeze_value", "NewVar", "ScriptError", "TVMSError", "rx"]
