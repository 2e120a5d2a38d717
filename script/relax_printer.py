"""IR -> TVMScript text for Relax functions: bindings, dataflow blocks, struct info, calls.

TensorIR expressions inside (symbolic sizes) are printed by the TensorIR printer this class
extends, with int64 as the default integer type (Relax sizes are int64).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import relax as rx
from ..ir import relax_op
from ..ir.dtype import DataType
from ..ir.expr import IntImm, Op, PrimExpr, Var as TirVar
from ..ir.index_map import IndexMap
from ..ir.module import GlobalVar
from ..ir.node import Node, walk_fields
from ..ir.structural import structural_equal
from ..ir.visitor import collect
from ..ir.struct_info import (VOID, FuncStructInfo, ObjectStructInfo, PrimStructInfo,
                              ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo, own_sizes)
from ..ir.distributed import DTensorStructInfo, device_mesh_text, mesh_label
from ..ir.global_info import vdevice_label
from .dialect import RELAX_HEADER
from .relax_call_forms import PRINTERS as CALL_FORMS
from ..ir.operators import ATOM
from .tensorir.printer_core import TIRPrinter
from .tensorir.rules import PRINT_EXPR
from .tensorir.text import def_name, format_float, quote

_CONSTANT_KEY = {"classic": "relax.expr.Constant", "tvm-0.27": "ir.GenericConst"}


class RelaxPrinter(TIRPrinter):
    """Prints Relax functions; shares names and module state with the module printer."""

    def __init__(self, dialect, namer, typevars: dict, module_names: set, constants: list,
                 class_name: str = "Module"):
        super().__init__(dialect, namer, typevars)
        self.module_names = module_names  # names of the module's functions (printed cls.name)
        self.class_name = class_name  # the module's class (`cls = Module`)
        self.constants = constants  # constants printed as metadata[...][i], shared by the module
        self.in_signature = False
        self.quoted: set = set()  # the sizes the classic signature names before defining them
        self.vdevices: tuple = ()  # the module's vdevices (a tensor names its vdevice by its index)
        self.meshes: tuple = ()  # the module's device meshes ("mesh[i]")
        self.ir_used = False  # the module printed I.<name> before its functions
        self.cls_wanted = False  # the function needs `cls = Module` and has not printed it yet
        self.typevar_used = False  # a function printed before declared TypeVars
        self.module_level = False  # printing a module's R.ExternFunc line, outside any function
        self.own: set = set()  # ids of the sizes the function's scalar parameters are
        self.sized: set = set()  # ids of the sizes the function's text reads as sizes (_sizes_read)

    # ---------------------------------------------------------------- TensorIR inside Relax
    def ex_int(self, e: IntImm):
        if self.module_level:  # (outside a function TVM writes sizes as TensorIR does: T.int64(2))
            return super().ex_int(e)
        if e.dtype.name == "int64":
            return str(e.value), ATOM  # Relax sizes are int64: printed bare
        if e.dtype.name == "int32":
            return self.tir(f"int32({e.value})"), ATOM  # a bare number means int64 here
        return super().ex_int(e)

    def var(self, v: Any) -> str:
        if self.in_signature and id(v) in self.quoted:
            return quote(self.namer.get(v))  # the classic signature names sizes before they are defined
        return super().var(v)

    def has_quoted(self, e: PrimExpr) -> bool:
        return any(id(v) in self.quoted for v in collect(e, TirVar))

    def dims(self, values: tuple) -> str:
        parts = []
        for d in values:
            # a compound size in a signature is quoted: classic TVM when it reads a size the
            # signature names before defining it, TVM 0.27 always (its parser defines sizes there)
            if self.in_signature and not isinstance(d, (IntImm, TirVar)) and (
                    self.has_quoted(d) if self.d.name == "classic" else
                    any(id(v) not in self.own for v in collect(d, TirVar))):
                parts.append(quote(self.unquoted_expr(d)))
            else:
                parts.append(self.expr(d))
        return ", ".join(parts)

    def unquoted_expr(self, e: PrimExpr) -> str:
        """``e`` with the sizes the signature quotes written bare (it is quoted as a whole)."""
        self.in_signature = False
        try:
            return self.expr(e)
        finally:
            self.in_signature = True

    # ---------------------------------------------------------------- struct info
    def sinfo(self, s: StructInfo) -> str:
        classic = self.d.name == "classic"
        if isinstance(s, TensorStructInfo):
            args = []
            dims = s.dims
            if dims is not None:
                args.append(f"({self.dims(dims)}{',' if len(dims) == 1 else ''})")
            elif s.shape is not None:
                args.append(self.rexpr(s.shape))
            if s.dtype != VOID:
                args.append(f"dtype={quote(str(s.dtype))}")
            if dims is None and s.shape is None and s.ndim >= 0:
                args.append(f"ndim={s.ndim}")
            if s.vdevice is not None:
                args.append(f"vdevice={quote(vdevice_label(s.vdevice, self.vdevices))}")
            return f"R.Tensor({', '.join(args)})" if args else "R.Tensor"
        if isinstance(s, ShapeStructInfo):
            if s.values is not None:
                return f"R.Shape([{self.dims(s.values)}])"
            return f"R.Shape(ndim={s.ndim})"  # (TVM prints an unknown rank as ndim=-1 too)
        if isinstance(s, TupleStructInfo):
            if not s.fields:
                return "R.Tuple"
            return f"R.Tuple({', '.join(self.sinfo(f) for f in s.fields)})"
        if isinstance(s, ObjectStructInfo):
            return "R.Object" if classic else "R.Any"
        if isinstance(s, PrimStructInfo):
            if not classic:  # (0.27's struct info of a scalar is its type: it has no value to print)
                return self.tir(f"{s.dtype}")
            if s.value is not None:
                return f"R.Prim(value={self.dims((s.value,))})"  # (a compound value is quoted whole)
            return f"R.Prim({quote(str(s.dtype))})"
        if isinstance(s, FuncStructInfo):
            return self.callable_sinfo(s)
        if isinstance(s, DTensorStructInfo):
            return self.dtensor_sinfo(s)
        raise TypeError(f"cannot print struct info {type(s).__name__}")

    def dtensor_sinfo(self, s: DTensorStructInfo) -> str:
        """``R.DTensor((128, 128), "float32", "mesh[0]", "S[0], R")`` as TVM prints it: positional
        while the shape and dtype are known, keywords after."""
        t, args, keys = s.tensor_sinfo, [], []
        if t.dims is not None:
            args.append(f"({self.dims(t.dims)}{',' if len(t.dims) == 1 else ''})")
        elif t.shape is not None:
            args.append(self.rexpr(t.shape))
        positional = t.shape is not None and t.dtype != VOID
        if t.dtype != VOID:
            (args if t.shape is not None else keys).append(
                quote(str(t.dtype)) if t.shape is not None else f"dtype={quote(str(t.dtype))}")
        mesh, placement = self.device_mesh(s.device_mesh), quote(s.placement)
        if positional:
            args += [mesh, placement]
        else:
            keys += [f"device_mesh={mesh}", f"placement={placement}"]
        if t.shape is None and t.ndim >= 0:
            keys.append(f"ndim={t.ndim}")
        return f"R.DTensor({', '.join(args + keys)})"

    def device_mesh(self, mesh: Any) -> str:
        """``"mesh[0]"`` for one of the module's meshes, else the mesh written out."""
        label = mesh_label(mesh, self.meshes)
        return quote(label) if label is not None else device_mesh_text(mesh, "R")

    def callable_sinfo(self, s: FuncStructInfo) -> str:
        """``R.Callable`` as TVM prints it (both dialects): the parameters as a tuple; an opaque
        signature names only what differs from its defaults (any result, impure)."""
        if s.params is None:
            keys = [] if isinstance(s.ret, ObjectStructInfo) else [f"ret={self.sinfo(s.ret)}"]
            keys += ["purity=True"] if s.purity else []
            return f"R.Callable({', '.join(keys)})" if keys else "R.Callable"
        params = ", ".join(self.sinfo(p) for p in s.params)
        params = f"({params},)" if len(s.params) == 1 else f"({params})"
        return f"R.Callable({params}, {self.sinfo(s.ret)}, {s.purity})"

    # ---------------------------------------------------------------- expressions
    def rexpr(self, e: Any, top: bool = False) -> str:
        """A Relax expression; ``top``: the whole right side of a binding (tuples go bare)."""
        if isinstance(e, rx.Var):
            name = self.namer.get(e)
            if name is None and _is_void(e.struct_info):
                return "R.tuple()"  # (its binding printed as the value alone: it holds nothing, as TVM writes it)
            return name or e.name
        if isinstance(e, GlobalVar):
            if e.name_hint not in self.module_names:
                return quote(e.name_hint)
            if self.cls_wanted:
                self.pending.append(f"cls = {self.class_name}")
                self.cls_wanted = False
            return f"cls.{e.name_hint}"
        if isinstance(e, rx.Call):
            return self.call(e)
        if isinstance(e, rx.Tuple):
            if not e.fields:
                return "R.tuple()"
            items = ", ".join(self.rexpr(f) for f in e.fields)
            if len(e.fields) == 1:
                return f"({items},)"
            return items if top else f"({items})"
        if isinstance(e, rx.TupleGetItem):
            return f"{self.rexpr(e.tuple_value)}[{e.index}]"
        if isinstance(e, rx.ShapeExpr):
            return f"R.shape([{self.dims(e.values)}])"
        if isinstance(e, rx.PrimValue):
            if self.d.name == "classic":
                return f"R.prim_value({super().expr(e.value)})"
            if isinstance(e.value, IntImm) and e.value.dtype.is_bool:
                return str(bool(e.value.value))  # (TVM 0.27 writes a boolean value bare)
            return self.expr(e.value)
        if isinstance(e, rx.StringImm):
            return f"R.str({quote(e.value)})"
        if isinstance(e, rx.DataTypeImm):
            return f"R.dtype({quote(str(e.value))})"
        if isinstance(e, rx.ExternFunc):  # (with its signature when it has one)
            sig = f", {self.sinfo(e.struct_info)}" if isinstance(e.struct_info, FuncStructInfo) else ""
            return f"R.ExternFunc({quote(e.global_symbol)}{sig})"
        if isinstance(e, rx.Constant):
            return self.constant(e)
        raise TypeError(f"cannot print a Relax {type(e).__name__} here")

    def constant(self, c: rx.Constant) -> str:
        key = _CONSTANT_KEY[self.d.name]
        if c.data is None and c.digest.startswith("elided:"):  # left out of the text it was parsed from
            self.absent_metadata = True
            _, old_key, index = c.digest.split(":", 2)
            if old_key in _CONSTANT_KEY.values():
                old_key = key
            return f"metadata[{quote(old_key)}][{index}]"
        data = c.data
        if isinstance(c.struct_info, DTensorStructInfo):  # (TVM prints the value of a scalar only)
            value = data.item() if data.ndim == 0 else data.tolist()
            text = format_float(value) if isinstance(value, float) else str(value)
            return f"R.dist.const({text}, {self.sinfo(c.struct_info)})"
        if data.ndim == 0 and data.dtype.kind in "biuf":
            value = data.item()
            text = format_float(value) if isinstance(value, float) else str(value)
            return f"R.const({text}, {quote(str(data.dtype))})"
        for i, known in enumerate(self.constants):
            if known is c:
                return f"metadata[{quote(key)}][{i}]"
        self.constants.append(c)
        return f"metadata[{quote(key)}][{len(self.constants) - 1}]"

    def call(self, c: rx.Call) -> str:
        if not isinstance(c.op, Op):
            head = self.rexpr(c.op)
            return f"{head}({', '.join(self.rexpr(a) for a in c.args)})"
        form = CALL_FORMS.get(c.op.name)
        if form is not None:
            return form(self, c)
        spec = relax_op.spec_of(c.op)
        name = spec.script_name
        if name == "call_tir" and any(isinstance(s, DTensorStructInfo) for s in c.sinfo_args):
            return self.call_dps("dist.call_tir", c)
        if name in ("call_tir", "call_dps_packed"):
            return self.call_dps(name, c)
        if name == "call_packed":
            args = [self.rexpr(c.args[0]) if not isinstance(c.args[0], rx.ExternFunc) else quote(c.args[0].global_symbol)]
            args += [self.rexpr(a) for a in c.args[1:]]
            if c.attrs:  # (TVM's DictAttrs, named by their type key)
                args += ['attrs_type_key="ir.DictAttrs"'] + [f"{k}={self.attr_value(v, 'any')}" for k, v in c.attrs.items()]
            args += self.sinfo_args_kwarg(c)
            return f"R.call_packed({', '.join(args)})"
        # (a packed function as the first argument is written by name, as TVM's PrintCallee does)
        args = [quote(a.global_symbol) if i == 0 and isinstance(a, rx.ExternFunc) else self.rexpr(a)
                for i, a in enumerate(c.args)]
        for attr in spec.attrs:
            value = c.attrs.get(attr.name, attr.default)
            if not getattr(attr, "print_default", True) and value == attr.default:
                continue
            args.append(f"{attr.name}={self.attr_value(value, attr.kind)}")
        args += self.sinfo_args_kwarg(c)  # R.builtin.alloc_tensor(..., ty_args=(...))
        return f"R.{name}({', '.join(args)})"

    def sinfo_args_kwarg(self, c: rx.Call) -> list[str]:
        if not c.sinfo_args:
            return []
        key = "sinfo_args" if self.d.name == "classic" else "ty_args"
        items = ", ".join(self.sinfo(s) for s in c.sinfo_args)
        return [f"{key}=({items}{',' if len(c.sinfo_args) == 1 else ''})"]

    def call_dps(self, name: str, c: rx.Call, extra: list | tuple = ()) -> str:
        func = c.args[0]
        head = quote(func.global_symbol) if isinstance(func, rx.ExternFunc) else self.rexpr(func)
        args = [head, self.rexpr(c.args[1])]
        key = "out_sinfo" if self.d.name == "classic" else "out_ty"
        out = self.sinfo(c.sinfo_args[0]) if len(c.sinfo_args) == 1 else \
            "[" + ", ".join(self.sinfo(s) for s in c.sinfo_args) + "]"
        args.append(f"{key}={out}")
        args += extra  # (R.call_tir_inplace's inplace_indices, R.call_tir_with_grad's te_grad_name)
        if len(c.args) > 2:
            args.append(f"tir_vars={self.rexpr(c.args[2])}")
        return f"R.{name}({', '.join(args)})"

    def attr_value(self, value: Any, kind: str) -> str:
        if kind == relax_op.ATTR_DTYPE and value in (None, "void"):
            return '"void"' if self.d.name == "classic" else "None"
        if isinstance(value, tuple):
            return "[" + ", ".join(self.attr_value(v, "any") for v in value) + "]"
        if isinstance(value, IntImm) and value.dtype == DataType("int32"):
            return str(value.value)  # (TVMScript's default integer type, written bare)
        if isinstance(value, PrimExpr):
            return self.expr(value)
        if isinstance(value, DataType):
            return quote(str(value))
        if isinstance(value, IndexMap):
            return self.index_map(value)
        return self.value(value)

    # ---------------------------------------------------------------- functions
    def function(self, f: rx.Function, name: str, nested: bool = False) -> None:
        self.commented(f, lambda: self.print_function(f, name, nested))

    def print_function(self, f: rx.Function, name: str, nested: bool = False) -> None:
        name = def_name(name)
        self.namer.push()
        outer_frame, self.func_frame = self.func_frame, len(self.namer.frames) - 1
        decorator = "@R.function"
        args = []  # (in TVM's order: purity, then privacy)
        if not f.is_pure:
            args.append("pure=False")
        if f.is_private and not nested:
            args.append("private=True")
        if args:
            decorator += f"({', '.join(args)})"
        self.emit_aside(decorator)
        sizes = []
        own = {id(v) for v in own_sizes(f.params)}  # (parameters that are their size variables)
        outer_own, self.own = self.own, own  # (TVM 0.27 quotes a compound size of other sizes)
        outer_sized, self.sized = self.sized, _sizes_read(f)
        if self.d.name == "classic":  # the sizes are named first: a parameter may take `m_1`
            sizes = [v for v in _symbolic_vars([p.struct_info for p in f.params] + [f.ret_struct_info])
                     if self.namer.get(v) is None and id(v) not in self.typevars and id(v) not in own]
            for v in sizes:
                self.namer.define(v, v.name)
            self.quoted = {id(v) for v in sizes} | own
        self.in_signature = True
        params = [f"{self.param_name(p, own)}: {self.sinfo(p.struct_info)}" for p in f.params]
        ret = self.sinfo(f.ret_struct_info)
        self.in_signature, self.quoted = False, set()
        self.emit(f"def {name}({', '.join(params)}) -> {ret}:")
        self.indent += 1
        for v in sizes:
            self.emit(f"{self.namer.get(v)} = {self.tir(f'{v.dtype}()')}")
        attrs = {k: v for k, v in f.attrs.items() if not (k == "global_symbol" and v == name)}
        if attrs:
            self.emit(f"R.func_attr({self.attr_dict(attrs)})")
        # TVM defines the sizes the body uses and `cls = Module` at the top of the function, in
        # the order the body first uses them (`cls` where it first names a module function)
        outer_cls, self.cls_wanted = self.cls_wanted, not nested and _refers_to_module(f, self.module_names)
        mark, start = len(self.lines), len(self.pending)
        body = f.body
        if isinstance(body, rx.SeqExpr):
            for block in body.blocks:
                self.commented(block, lambda block=block: self.block(block))
            result = body.body
        else:
            result = body
        returned = self.bare_integers(result, f.ret_struct_info, top=False) or self.rexpr(result)
        self.commented(body, lambda: self.emit(f"return {returned}"))
        if self.cls_wanted:  # (only a nested function names the module)
            self.pending.insert(start, f"cls = {self.class_name}")
        self.lines[mark:mark] = ["    " * self.indent + p for p in self.pending[start:]]
        del self.pending[start:]
        self.cls_wanted = outer_cls
        self.indent -= 1
        self.namer.pop()
        self.func_frame, self.own, self.sized = outer_frame, outer_own, outer_sized

    def param_name(self, p: rx.Var, own: set) -> str:
        name = self.namer.define(p, p.name)
        if id(p.struct_info.value if isinstance(p.struct_info, PrimStructInfo) else None) in own:
            self.namer.alias(p.struct_info.value, p)  # (n: T.int64 is the size n too)
        return name

    def block(self, block: rx.BindingBlock) -> None:
        if isinstance(block, rx.DataflowBlock):
            self.emit("with R.dataflow():")
            self.indent += 1
            for b in block.bindings:
                self.commented(b, lambda b=b: self.binding(b))
            outputs = [self.namer.get(b.var) for b in block.bindings
                       if not isinstance(b.var, rx.DataflowVar) and b.var.name != "_"]
            self.emit(f"R.output({', '.join(outputs)})")
            self.indent -= 1
        else:
            for b in block.bindings:
                self.commented(b, lambda b=b: self.binding(b))

    def nested_typevars(self, f: rx.Function) -> list[str]:
        """TVM 0.27 declares the sizes of a nested function's signature that nothing defined
        before as TypeVars above it (sorted by name); they are the enclosing function's."""
        if self.d.typevar_header is None:
            return []
        own = {id(v) for v in own_sizes(f.params)}
        free = [v for v in _symbolic_vars([p.struct_info for p in f.params] + [f.ret_struct_info])
                if self.namer.get(v) is None and id(v) not in self.typevars and id(v) not in own
                and v.dtype == DataType("int64")]
        names = sorted(self.namer.define(v, v.name, self.func_frame) for v in free)
        self.typevar_used = self.typevar_used or bool(names)
        return names

    def nested_header(self) -> list[str]:
        """The import comments TVM prints above a nested function: the prefixes the text used so
        far (TVM's printer collects them as it goes: the functions printed before, this one up to
        here and the nested function itself), ``TypeVar`` once a function declared some."""
        lines = [self.d.typevar_header] if self.typevar_used and self.d.typevar_header else []
        lines += [h for h in self.d.header if (self.ir_used if " ir as I" in h else self.uses_tir)]
        return lines + [RELAX_HEADER]

    def bare_integers(self, value: Any, sinfo: Any, top: bool = True) -> str | None:
        """TVM 0.27 writes an integer scalar bound under its annotation bare, whatever its type,
        in tuples too (``k: T.int32 = 3``, ``g: R.Tuple(R.Tensor(...), T.int8) = x, 5``; the parser
        types the numbers by the annotation), and one returned (``-> T.int32: return 3``; only
        where the annotation says its type, so that the text reads back the same); None where
        nothing is written bare. ``top``: a tuple goes without parentheses (a binding's)."""
        def bare(e: Any, info: Any, top: bool) -> str | None:
            if (isinstance(e, rx.PrimValue) and isinstance(e.value, IntImm) and not e.value.dtype.is_bool
                    and isinstance(info, PrimStructInfo) and info.dtype == e.value.dtype):
                return str(e.value.value)
            if isinstance(e, rx.Tuple) and e.fields and isinstance(info, TupleStructInfo) \
                    and len(info.fields) == len(e.fields):
                items = [bare(f, i, False) for f, i in zip(e.fields, info.fields)]
                if not any(items):
                    return None
                text = ", ".join(item or self.rexpr(f) for item, f in zip(items, e.fields))
                return f"({text},)" if len(items) == 1 else text if top else f"({text})"
            return None
        return None if self.d.name == "classic" else bare(value, sinfo, top)

    def binding(self, b: Any) -> None:
        value = b.value
        if isinstance(value, rx.Function):
            at = len(self.lines)
            self.emit_aside("")  # the function's header: known once it is printed
            self.lines.append("    " * self.indent)
            for v in self.nested_typevars(value):  # (aside: the def line is the binding's first line of code)
                self.emit_aside(f'{v} = TypeVar("{v}")')
            # (the binding prints the comments it shares with the function)
            self.print_function(value, self.namer.define(b.var, b.var.name), nested=True)
            self.lines.append("")
            # (one entry of several lines: the marks of commented nodes hold line numbers)
            self.lines[at] = "\n".join("    " * self.indent + h for h in self.nested_header())
            return
        if isinstance(value, rx.If):
            return self.if_binding(b)
        if isinstance(b, rx.MatchCast) and self.reads_a_size(b):
            rhs = self.rexpr(value, top=True)
            name = self.namer.define(b.var, b.var.name)
            self.namer.alias(b.struct_info.value, b.var)  # (the size takes the variable's name)
            if self.d.name == "classic":  # (the quoted size is defined where it is read)
                sinfo = f'R.Prim(value="{name}")'
                self.emit(f"{name}: {sinfo} = R.match_cast({rhs}, {sinfo})")
            else:  # n: T.int64 = params[0]
                self.emit(f"{name}: {self.sinfo(b.var.struct_info)} = {rhs}")
            return
        if isinstance(b, rx.MatchCast):
            rhs = f"R.match_cast({self.rexpr(value)}, {self.sinfo(b.struct_info)})"
            name = self.namer.define(b.var, b.var.name)
            self.emit(f"{name}: {self.sinfo(b.var.struct_info)} = {rhs}")
            return
        rhs = self.bare_integers(value, b.var.struct_info) or self.rexpr(value, top=True)
        # a value of nothing bound to a variable of nothing (a call made for its effect, an empty
        # tuple): TVM prints the value alone
        if _is_void(b.var.struct_info) and _is_void(getattr(value, "struct_info", None)):
            self.emit(rhs)
            return
        name = self.namer.define(b.var, b.var.name)
        if (isinstance(value, rx.Call) and value.sinfo_args and _states_own_sinfo(value)
                and structural_equal(b.var.struct_info, value.struct_info)):
            self.emit(f"{name} = {rhs}")  # the call states its own struct info (and the variable's)
        else:
            self.emit(f"{name}: {self.sinfo(b.var.struct_info)} = {rhs}")

    def reads_a_size(self, b: rx.MatchCast) -> bool:
        """A match_cast that TVM 0.27 writes as a scalar binding (``_defines_a_size``) whose size
        the function then uses as one (the parser's ``reads_a_size``: unused, the binding would
        read back as a plain one); the classic text names the size once, quoted, as a
        parameter's (``n: R.Prim(value="n")``)."""
        return (_defines_a_size(b) and self.namer.get(b.struct_info.value) is None
                and (self.d.name == "classic" or id(b.struct_info.value) in self.sized))

    def if_binding(self, b: rx.VarBinding) -> None:
        value = b.value
        cond = self.rexpr(value.cond)
        name = self.namer.define(b.var, b.var.name)  # both branches assign this very name
        self.emit(f"if {cond}:")
        self.branch(value.true_branch, b.var, name)
        self.emit("else:")
        self.branch(value.false_branch, b.var, name)

    def branch(self, seq: Any, var: rx.Var, name: str) -> None:
        self.indent += 1
        self.namer.push()
        body = seq
        if isinstance(seq, rx.SeqExpr):
            for block in seq.blocks:
                self.commented(block, lambda block=block: self.block(block))
            body = seq.body
        rhs = self.bare_integers(body, var.struct_info) or self.rexpr(body, top=True)
        self.commented(seq, lambda: self.emit(f"{name}: {self.sinfo(var.struct_info)} = {rhs}"))
        self.namer.pop()
        self.indent -= 1


# TVM (before 0.27 and in it) leaves out the annotation of these calls' variables only: every other
# call with struct info arguments keeps it (``y: R.Tensor(...) = R.call_packed(..., ty_args=...)``)
_CALLS_STATING_OWN_SINFO = frozenset({"call_tir", "call_dps_packed"})


def _states_own_sinfo(c: rx.Call) -> bool:
    """The calls whose bound variable prints without annotation (``R.call_tir``,
    ``R.call_dps_packed``), as TVM prints them."""
    return isinstance(c.op, Op) and relax_op.spec_of(c.op).script_name in _CALLS_STATING_OWN_SINFO


def _defines_a_size(b: Any) -> bool:
    """A match_cast of a scalar int64 of unknown value to a new size of the variable's name."""
    if not isinstance(b, rx.MatchCast) or not isinstance(b.struct_info, PrimStructInfo):
        return False
    size, inferred = b.struct_info.value, getattr(b.value, "struct_info", None)
    return (isinstance(size, TirVar) and size.name == b.var.name and size.dtype == DataType("int64")
            and isinstance(inferred, PrimStructInfo) and inferred.value is None)


def _sizes_read(f: rx.Function) -> set:
    """The ids of the sizes a function's TVM 0.27 text reads as sizes (what the parser's
    ``_names_used_as_sizes`` finds): those in the struct info it writes (annotations,
    match_casts, sinfo_args, nested signatures; a scalar's has no value in that text), its
    shapes, and the scalars it computes (``n + 1``; a bare ``n`` reads the variable); not the
    struct info of a size's own ``n: T.int64 = ...``, nor inferred ones (not written)."""
    found: set = set()
    stack: list = [f.body, f.ret_struct_info]
    while stack:
        node = stack.pop()
        if isinstance(node, (tuple, list)):
            stack.extend(node)
        elif isinstance(node, TirVar):
            found.add(id(node))
        elif isinstance(node, PrimStructInfo) or isinstance(node, rx.PrimValue) and isinstance(node.value, TirVar):
            continue
        elif isinstance(node, (rx.VarBinding, rx.MatchCast)):
            stack.append(node.value)
            if not _defines_a_size(node):
                stack.append(node.var.struct_info)
                stack.append(getattr(node, "struct_info", None))
        elif isinstance(node, Node) and not isinstance(node, rx.Var):
            if isinstance(node, rx.Function):
                stack.extend(p.struct_info for p in node.params)
            stack.extend(getattr(node, name) for name, _, _ in walk_fields(type(node))
                         if not (name == "struct_info" and isinstance(node, rx.RelaxExpr)))
    return found


def _is_void(s: StructInfo) -> bool:
    return isinstance(s, TupleStructInfo) and not s.fields


def _symbolic_vars(infos: list) -> list:
    """TensorIR variables in struct info, in order of first appearance."""
    seen: dict[int, TirVar] = {}
    for s in infos:
        for v in collect(s, TirVar):
            seen.setdefault(id(v), v)
    return list(seen.values())




def _refers_to_module(f: rx.Function, names: set) -> bool:
    return any(g.name_hint in names for g in collect(f.body, GlobalVar))


RelaxPrinter.expr_printers = {**PRINT_EXPR, IntImm: RelaxPrinter.ex_int}

__all__ = ["RelaxPrinter", "np"]
