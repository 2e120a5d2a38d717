"""IR -> TVMScript text: modules, functions and fragments, in the dialect asked for.

Comments. The parser attaches each comment of the text to a statement (``tvms.script.comments``)
and the builders keep them in the ``span`` of the nodes they make, so they travel with a node the
way its source position does, and structural equality ignores them. The printers print a node's
``Comments``: ``before`` on lines of their own above it; ``after`` at the end of its first line of
code (the ``def`` line of a function, not its decorator; the ``with``/``for`` line of a block or
loop); ``inside`` first in its body (the comments of declaration lines such as ``T.reads`` or
``T.func_attr``, which the printer writes again in its own order); ``below`` after it and its
body, at its indentation (the end of a block). A comment inside a statement that spans lines goes
before that statement: the printer lays expressions out on one line. The generated lines (the
``# from tvm.script import`` header, ``# with T.block("root"):``) are dropped by the parser and
printed again here, so they never repeat. A node that a pass rebuilds from scratch has no comments.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..ir.buffer import Buffer
from ..ir.deep import deep_recursion
from ..ir.dtype import DataType
from ..ir.errors import TVMSError
from ..ir.expr import PrimExpr, Var
from ..ir.function import PrimFunc
from ..ir.distributed import DeviceMesh, device_mesh_text
from ..ir.global_info import VDevice
from ..ir.module import IRModule
from ..ir.node import Node, register_printer
from ..ir.print_order import tvm_function_order
from ..ir.stmt import Stmt
from ..ir.struct_info import StructInfo, own_sizes
from ..ir import relax as rx
from ..ir.visitor import collect
from .dialect import RELAX_HEADER, Dialect, get_dialect
from .metadata import CONSTANT_KEYS, render_section
from .relax_printer import RelaxPrinter
from .tensorir.printer_core import TIRPrinter
from .tensorir.text import Namer, comments_of, quote


@deep_recursion
def to_script(node: Any, dialect: "str | Dialect" = "classic", name: str | None = None,
              show_meta: bool = False, indent_spaces: int = 4, print_line_numbers: bool = False,
              **tvm_options: Any) -> str:
    """TVMScript text of an IRModule, a PrimFunc, a statement or an expression.

    ``dialect="classic"`` prints what the seeds show; ``dialect="tvm-0.27"`` what Apache TVM
    0.27 prints. ``name`` is the name of a function's ``def`` (default: its global symbol, or
    ``main``) or of a module's class (default ``Module``). The text has no trailing newline, as
    TVM's ``script()``. TVM's layout options ``indent_spaces`` and ``print_line_numbers`` apply;
    its other options are accepted at their default values (a text tvms would print differently
    is refused, never silently ignored).
    """
    _check_tvm_options(tvm_options)
    text = _script(node, get_dialect(dialect), name, show_meta)
    if indent_spaces != 4:
        text = _reindented(text, indent_spaces)
    return _numbered(text) if print_line_numbers else text


# TVM's other printer options, at the values tvms prints with
_TVM_DEFAULTS = {"ir_prefix": "I", "module_alias": "cls", "int_dtype": "int32", "float_dtype": "void",
                 "verbose_expr": False, "num_context_lines": -1, "syntax_sugar": True,
                 "show_object_address": False, "show_all_ty": True, "extra_config": None,
                 "path_to_underline": None, "path_to_annotate": None, "obj_to_underline": None,
                 "obj_to_annotate": None}


def _check_tvm_options(options: dict) -> None:
    for key, value in options.items():
        if key not in _TVM_DEFAULTS:
            raise TVMSError(f"script() got an unknown option {key!r}")
        default = _TVM_DEFAULTS[key]
        if (bool(value) if default is None else value != default):  # (None-default: None or empty)
            raise TVMSError(f"script({key}={value!r}): tvms prints only with {key}="
                            f"{_TVM_DEFAULTS[key]!r}")


def _reindented(text: str, spaces: int) -> str:
    """Each level of four leading spaces becomes ``spaces`` (TVMScript indents by levels)."""
    if spaces < 0:
        raise TVMSError(f"script(indent_spaces={spaces}): expected a count >= 0")
    out = []
    for line in text.split("\n"):
        body = line.lstrip(" ")
        levels, rest = divmod(len(line) - len(body), 4)
        out.append(" " * (levels * spaces + rest) + body)
    return "\n".join(out)


def _numbered(text: str) -> str:
    """Lines prefixed with their numbers, right-aligned, as TVM's ``print_line_numbers``: TVM
    numbers the header's lines and every line of code, not the blank lines between functions."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line and not line.startswith("#")), len(lines))
    numbered = [i < start or line != "" for i, line in enumerate(lines)]
    width = len(str(sum(numbered)))
    out, number = [], 0
    for line, counted in zip(lines, numbered):
        if counted:
            number += 1
            out.append(f"{number:>{width}} {line}")
        else:
            out.append(line)
    return "\n".join(out)


def _script(node: Any, d: Dialect, name: str | None, show_meta: bool) -> str:
    if isinstance(node, (IRModule, PrimFunc, rx.Function)):
        return print_definition(node, d, name, show_meta).text()
    if isinstance(node, Stmt):
        p = TIRPrinter(d)
        p.func_body = node
        p.body(node, top=True)
        return "\n".join(p.lines)
    if isinstance(node, PrimExpr):
        return TIRPrinter(d).expr(node)
    if isinstance(node, Buffer):
        return TIRPrinter(d).buffer_decl(node, "Buffer", [], dtype_always=True)
    if isinstance(node, StructInfo):
        return RelaxPrinter(d, Namer(), {}, set(), []).sinfo(node)
    if isinstance(node, Node):
        return TIRPrinter(d).value(node)
    raise TypeError(f"cannot print a {type(node).__name__}")


def _hoisted_typevars(funcs: list) -> tuple[list[str], dict[int, str]]:
    """TVM 0.27 declares symbolic sizes (int64 variables that no parameter binds) once, as
    module-level ``n = TypeVar("n")`` lines: function by function in printing order, each
    function's new names sorted."""
    ids: dict[int, str] = {}
    names: list[str] = []
    for f in funcs:
        if isinstance(f, rx.ExternFunc):
            continue  # (its signature's sizes are its own)
        if isinstance(f, PrimFunc):
            params = {id(p) for p in f.params}
            found = [n for buf in f.buffer_map.values() for dim in (*buf.shape, buf.elem_offset)
                     for n in collect(dim, Var)]  # (an element offset too: TVM's te.extern buffers)
        else:  # sizes the signature names; those a match_cast binds are defined in the body
            params = {id(v) for v in own_sizes(f.params)}  # (and those a scalar parameter is)
            found = [n for s in [p.struct_info for p in f.params] + [f.ret_struct_info]
                     for n in collect(s, Var)]
        mine = {id(n): n for n in found if n.dtype == DataType("int64") and id(n) not in params}
        own: set = set()
        for n in reversed(mine.values()):  # variables of one name: TVM names the last one first
            name, k = n.name, 0
            while name in own:
                k += 1
                name = f"{n.name}_{k}"
            ids[id(n)] = name
            own.add(name)
        names += sorted(own - set(names))
    return names, ids


@dataclass
class PrintedDefinition:
    """A module or a function printed in its parts, for a caller that places them apart (a
    definition formatted inside a Python file keeps its own decorators and imports)."""

    header: list[str]  # the import comments, a blank line, then the TypeVar declarations
    definition: list[str]  # the comments above it, its decorator, its class/def line and body
    head: int  # where the class/def line is in ``definition``
    footer: list[str]  # the metadata section, or the note that it is left out
    declarations: list[str]  # TVM 0.27's ``n = TypeVar("n")`` lines (the end of the header)

    def text(self) -> str:
        text = "\n".join(self.header + self.definition)
        return text + "\n\n" + "\n".join(self.footer) if self.footer else text


@deep_recursion
def print_definition(node: "IRModule | PrimFunc | rx.Function", dialect: "str | Dialect" = "classic",
                     name: str | None = None, show_meta: bool = False) -> PrintedDefinition:
    """``to_script`` of a module or a function, in its parts."""
    d = get_dialect(dialect)
    if isinstance(node, IRModule):
        return _module(node, d, name or "Module", show_meta)
    return _bare_function(node, d, name)


def _head(node: Any) -> int:
    """Where a printed definition's class/def line is: after the comments above it and its
    (one-line) decorator."""
    notes = comments_of(node)
    return (len(notes.before) if notes is not None else 0) + 1


def _header(d: Dialect, typevars: list[str], uses_t: bool, relax: bool, with_ir: bool = True,
            typing: bool = False) -> list[str]:
    """The import comments TVM prints: the TensorIR ones only when the text uses ``T.``
    (``uses_t``: a printer printed a ``T.<name>``); ``typing``: a function declared TypeVars."""
    lines = []
    if (typevars or typing) and d.typevar_header:
        lines.append(d.typevar_header)
    for h in d.header:
        if " ir as I" in h and not with_ir:
            continue
        if " ir as I" not in h and not uses_t:
            continue
        lines.append(h)
    if relax:
        lines.append(RELAX_HEADER)
    lines.append("")
    lines += _declarations(typevars)
    return lines


def _reserve_typevars(namer: Namer, f: Any, typevar_ids: dict[int, str]) -> bool:
    """The module-level TypeVar names ``f`` uses are taken while ``f`` prints (its own variables
    are renamed around them); those it does not use are free, as in TVM's printer. True when
    ``f`` uses some."""
    if not typevar_ids:
        return False
    used = {id(v) for v in collect(f, Var)} & typevar_ids.keys()
    for key in used:
        name = typevar_ids[key]
        namer.used[name] = namer.used.get(name, 0) + 1
        namer.frames[-1].append((key, name))
    return bool(used)


def _declarations(typevars: list[str]) -> list[str]:
    return [f'{n} = TypeVar("{n}")' for n in typevars]


METADATA_NOTE = "# Metadata omitted. Use show_meta=True in script() method to show it."


def _module(mod: IRModule, d: Dialect, class_name: str, show_meta: bool) -> PrintedDefinition:
    funcs = [(gv.name_hint, f) for gv, f in mod.functions_items()]
    if d.tvm_function_order:
        funcs = tvm_function_order(funcs)
    typevars, typevar_ids = ([], {}) if d.typevar_header is None else _hoisted_typevars([f for _, f in funcs])
    namer = Namer()
    names = {name for name, _ in funcs}
    constants: list = []  # the module's metadata section, filled by the printers
    absent_metadata = False  # the text refers to metadata the module does not hold
    uses_t = False  # the text has a T.<name>
    notes = mod.span.comments if mod.span is not None else None
    head = f"class {class_name}:"
    body = [*notes.before, "@I.ir_module", f"{head}  {notes.after}" if notes.after else head] \
        if notes else ["@I.ir_module", head]
    head_at = len(body) - 1
    if mod.attrs:
        p = RelaxPrinter(d, namer, typevar_ids, names, constants)
        body.append(f"    I.module_attrs({p.attr_dict(mod.attrs)})")
        absent_metadata, uses_t = p.absent_metadata, p.uses_tir
    if mod.global_infos:
        body.append(f"    I.module_global_infos({_global_infos(mod.global_infos, RelaxPrinter(d, namer, {}, names, []))})")
    vdevices = tuple(mod.global_infos.get("vdevice", ()))
    typevar_used = False  # a function printed so far declared TypeVars
    for i, (name, f) in enumerate(funcs):
        if i and not isinstance(funcs[i - 1][1], rx.ExternFunc):
            body.append("")  # (after a function definition, not after an extern's line)
        if isinstance(f, rx.ExternFunc):  # my_ext = R.ExternFunc("my_ext")
            p = RelaxPrinter(d, namer, typevar_ids, names, constants)
            p.module_level = True
            body.append(f"    {name} = {p.rexpr(f)}")
            uses_t |= p.uses_tir
            continue
        namer.push()
        uses_typevars = _reserve_typevars(namer, f, typevar_ids)
        if isinstance(f, PrimFunc):
            p = TIRPrinter(d, namer, typevar_ids)
            p.indent, p.module_name = 1, class_name
            p.prim_func(f, name, decorate_s_tir=d.name != "classic")
        elif isinstance(f, rx.Function):
            p = RelaxPrinter(d, namer, typevar_ids, names, constants, class_name)
            p.vdevices, p.meshes = vdevices, tuple(mod.global_infos.get("mesh", ()))
            # (what a nested function's header names: what the text used before it)
            p.indent, p.uses_tir, p.typevar_used = 1, uses_t, typevar_used
            p.ir_used = bool(mod.attrs or mod.global_infos)
            p.function(f, name)
        else:
            raise TypeError(f"cannot print a {type(f).__name__} in a module")
        namer.pop()
        body += [line for entry in p.lines for line in entry.split("\n")]
        absent_metadata |= p.absent_metadata
        uses_t |= p.uses_tir
        typevar_used |= uses_typevars or getattr(p, "typevar_used", False)  # (nested TypeVars)
    if len(body) == head_at + 1:  # an empty module, as TVM prints it
        body.append("    pass")
    if notes:
        body += notes.below
    relax = any(isinstance(f, (rx.Function, rx.ExternFunc)) for _, f in funcs)
    footer = []
    # a section is printed only when it is complete: not for a text that also refers to entries
    # the module does not hold (constants left out when it was parsed, a runtime module)
    if show_meta and constants and not absent_metadata:
        footer = render_section(CONSTANT_KEYS[d.name != "classic"], constants)
    elif constants or absent_metadata:
        footer = [METADATA_NOTE]
    return PrintedDefinition(_header(d, typevars, uses_t, relax, typing=typevar_used), body, _head(mod), footer,
                             _declarations(typevars))


def _global_infos(infos: dict, p: RelaxPrinter) -> str:
    """``{"vdevice": [I.vdevice({...target...}, 0, "global")]}`` as TVM prints it."""
    def entry(info: Any) -> str:
        if isinstance(info, VDevice):
            return f"I.vdevice({p.attr_dict(info.target)}, {info.vdevice_id}, {quote(info.memory_scope)})"
        if isinstance(info, DeviceMesh):
            return device_mesh_text(info, "I")
        return "I.dummy_global_info()"

    return "{" + ", ".join(f"{quote(k)}: [{', '.join(entry(i) for i in v)}]" for k, v in infos.items()) + "}"


def _bare_function(f: "PrimFunc | rx.Function", d: Dialect, name: str | None) -> PrintedDefinition:
    """A function outside a module (``@T.prim_func def main`` / ``@R.function def main``)."""
    name = name or str(f.attrs.get("global_symbol", "main"))
    typevars, typevar_ids = ([], {}) if d.typevar_header is None else _hoisted_typevars([f])
    namer = Namer()
    for n in typevars:
        namer.used[n] = 1
    relax = isinstance(f, rx.Function)
    if relax:
        p = RelaxPrinter(d, namer, typevar_ids, set(), [])
        p.function(f, name)
    else:
        p = TIRPrinter(d, namer, typevar_ids)
        p.prim_func(f, name, decorate_s_tir=d.name != "classic")
    lines = [line for entry in p.lines for line in entry.split("\n")]
    with_ir = getattr(p, "uses_ir_namespace", False)  # (a tile primitive's I.Op)
    return PrintedDefinition(_header(d, typevars, p.uses_tir, relax=relax, with_ir=with_ir), lines, _head(f), [],
                             _declarations(typevars))


register_printer(to_script)
