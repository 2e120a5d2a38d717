"""IR -> TVMScript text: modules, functions and fragments, in the dialect asked for."""
from __future__ import annotations

from typing import Any

from ..ir.buffer import Buffer
from ..ir.dtype import DataType
from ..ir.expr import PrimExpr, Var
from ..ir.function import PrimFunc
from ..ir.module import IRModule
from ..ir.node import Node, register_printer
from ..ir.stmt import Stmt
from ..ir.visitor import walk
from .dialect import Dialect, get_dialect
from .tir_printer import Namer, TIRPrinter


def to_script(node: Any, dialect: "str | Dialect" = "classic", name: str | None = None,
              show_meta: bool = False) -> str:
    """TVMScript text of an IRModule, a PrimFunc, a statement or an expression.

    ``dialect="classic"`` prints what the seeds show; ``dialect="tvm-0.27"`` what Apache TVM
    0.27 prints. The text has no trailing newline, as TVM's ``script()``.
    """
    d = get_dialect(dialect)
    if isinstance(node, IRModule):
        return _module(node, d)
    if isinstance(node, PrimFunc):
        return _bare_function(node, d, name)
    if isinstance(node, Stmt):
        p = TIRPrinter(d)
        p.body(node, top=True)
        return "\n".join(p.lines)
    if isinstance(node, PrimExpr):
        return TIRPrinter(d).expr(node)
    if isinstance(node, Buffer):
        return TIRPrinter(d).buffer_decl(node, "Buffer", [], dtype_always=True)
    if isinstance(node, Node):
        return TIRPrinter(d).value(node)
    raise TypeError(f"cannot print a {type(node).__name__}")


def _hoisted_typevars(funcs: list[PrimFunc]) -> tuple[list[str], dict[int, str]]:
    """TVM 0.27 declares the symbolic sizes of buffer shapes once, as module-level TypeVars."""
    names: list[str] = []
    ids: dict[int, str] = {}
    for f in funcs:
        params = {id(p) for p in f.params}
        for buf in f.buffer_map.values():
            for dim in buf.shape:
                for n in walk(dim):
                    if isinstance(n, Var) and n.dtype == DataType("int64") and id(n) not in params:
                        ids[id(n)] = n.name
                        if n.name not in names:
                            names.append(n.name)
    return names, ids


def _header(d: Dialect, typevars: list[str], with_ir: bool = True) -> list[str]:
    lines = []
    if typevars and d.typevar_header:
        lines.append(d.typevar_header)
    lines += [h for h in d.header if with_ir or " ir as I" not in h]
    lines.append("")
    lines += [f'{n} = TypeVar("{n}")' for n in typevars]
    return lines


def _module(mod: IRModule, d: Dialect) -> str:
    funcs = [(gv.name_hint, f) for gv, f in mod.functions_items()]
    typevars, typevar_ids = ([], {}) if d.typevar_header is None else _hoisted_typevars(
        [f for _, f in funcs if isinstance(f, PrimFunc)])
    lines = _header(d, typevars)
    lines.append("@I.ir_module")
    lines.append("class Module:")
    namer = Namer()
    for name in typevars:
        namer.used[name] = 1  # module-level names are taken
    if mod.attrs:
        p = TIRPrinter(d, namer)
        lines.append(f"    I.module_attrs({p.attr_dict(mod.attrs)})")
    for i, (name, f) in enumerate(funcs):
        if i:
            lines.append("")
        p = TIRPrinter(d, namer, typevar_ids)
        p.indent = 1
        if isinstance(f, PrimFunc):
            p.prim_func(f, name, decorate_s_tir=d.name != "classic")
        else:
            raise TypeError(f"cannot print a {type(f).__name__} in a module yet")
        lines += p.lines
    return "\n".join(lines)


def _bare_function(f: PrimFunc, d: Dialect, name: str | None) -> str:
    name = name or str(f.attrs.get("global_symbol", "main"))
    typevars, typevar_ids = ([], {}) if d.typevar_header is None else _hoisted_typevars([f])
    lines = _header(d, typevars, with_ir=False)
    p = TIRPrinter(d, typevars=typevar_ids)
    for n in typevars:
        p.namer.used[n] = 1
    p.prim_func(f, name, decorate_s_tir=d.name != "classic")
    return "\n".join(lines + p.lines)


register_printer(to_script)
