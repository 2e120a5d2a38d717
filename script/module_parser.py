"""Text -> IRModule (or PrimFunc): the module-level layer of the parser.

It finds ``@I.ir_module`` classes and ``@T.prim_func`` functions, module-level ``TypeVar``
declarations (TVM 0.27), ``I.module_attrs`` and ``I.module_global_infos``, and hands each function to its builder.
"""
from __future__ import annotations

from typing import Any

from ..ir.errors import ScriptError, Source, Span
from ..ir.function import PrimFunc
from ..ir.global_info import DummyGlobalInfo, make_vdevice
from ..ir.node import FrozenDict
from ..ir.module import GlobalVar, IRModule
from . import syntax as S
from .syntax import dotted
from .comments import attach, carry
from .diagnostics import did_you_mean, error, span_of
from .dialect import CLASSIC, TVM_027, Dialect, detect_dialect
from .nesting import check_nesting
from .parser import parse_syntax
from .tensorir.attrs import freeze_value, norm_attrs
from ..ir.errors import TVMSError
from ..ir.deep import deep_recursion
from .metadata import CONSTANT_KEYS, decode_entry
from .relax_function import RelaxFunctionBuilder
from .relax_parser import make_constant
from .tensorir.evaluator import Builtin, ModuleFunctions
from .tensorir.parser_core import TIRBuilder
from ..ir.dtype import DataType, is_dtype_name, void

# (the spelled-out forms too: a Python file may write @tvm.script.tir.prim_func)
_MODULE_DECORATORS = {"I.ir_module", "ir_module", "tvm.script.ir_module", "ir.ir_module",
                      "tvms.script.ir_module", "tvm.script.ir.ir_module", "tvms.script.ir.ir_module"}
_PRIM_FUNC_DECORATORS = {"T.prim_func", "prim_func", "tir.prim_func", "tvm.script.tir.prim_func",
                         "tvms.script.tir.prim_func", "tvms.script.prim_func"}
_RELAX_DECORATORS = {"R.function", "relax.function", "tvm.script.relax.function",
                     "tvms.script.relax.function"}


def _decorator(syn: Any) -> tuple[str | None, dict]:
    """(dotted name, keyword arguments) of a decorator such as ``@T.prim_func(private=True)``."""
    if isinstance(syn, S.Call):
        kwargs = {}
        for key, value in syn.kwargs:
            kwargs[key] = value.value if isinstance(value, S.Constant) else value
        return dotted(syn.func), kwargs
    return dotted(syn), {}


class ModuleParser:
    def __init__(self, text: str, name: str = "<string>", source: Source | None = None,
                 dialect: Dialect | None = None):
        self.source = source or Source(text, name)
        self.text = text
        self.dialect = dialect or detect_dialect(text)
        self.tvm027_spellings: set[str] = set()  # (see RelaxBuilder.tvm027_spellings)
        self.typevars: set[str] = set()
        self.globals: dict[str, GlobalVar] = {}
        self.metadata: dict | None = None
        self.prim_func_names: set[str] = set()
        self.signatures: dict = {}
        self.module_functions: ModuleFunctions | None = None

    def error(self, syn: Any, message: str) -> ScriptError:
        return error(self.source, syn, message)

    def parse(self) -> IRModule | PrimFunc:
        result = self.parse_as_detected()
        if self.tvm027_spellings and self.dialect is CLASSIC:  # a Relax text by TVM 0.27 without a marker
            return ModuleParser(self.text, self.source.name, self.source, TVM_027).parse()
        return result

    def parse_as_detected(self) -> IRModule | PrimFunc:
        tree = parse_syntax(self.text, self.source)
        check_nesting(tree, self.source)
        attach(tree, self.source)
        results: list = []
        for stmt in tree.body:  # the metadata section comes last but is needed first
            if _is_metadata(stmt):
                self.metadata = self.read_metadata(stmt)
        for stmt in tree.body:
            if isinstance(stmt, S.Import) or _is_docstring(stmt) or _is_metadata(stmt):
                continue
            if isinstance(stmt, S.Assign) and self.typevar(stmt):
                continue
            if isinstance(stmt, S.ClassDef):
                self.keep_top_level_comments(tree.body, stmt)
                results.append(self.module(stmt))
            elif isinstance(stmt, S.FunctionDef):
                self.keep_top_level_comments(tree.body, stmt)
                results.append(self.function(stmt))
            else:
                raise self.error(stmt, "expected an @I.ir_module class or a @T.prim_func function "
                                 "at the top level")
        if not results:
            raise ScriptError("no @I.ir_module class or @T.prim_func function found",
                              Span(self.source, 1, 1, 1, 2))
        if len(results) > 1:
            raise self.error(tree.body[-1], "a script holds one module or one function; "
                             "put several functions into one @I.ir_module class")
        return results[0]

    def keep_top_level_comments(self, stmts: list, definition: Any) -> None:
        """The comments of the top-level lines the printer writes again (imports, TypeVars,
        metadata) go before the definition, or below it when they come after it."""
        after = False
        for stmt in stmts:
            if stmt is definition:
                after = True
            else:
                carry(self.source, stmt, definition, where="below" if after else "before")

    def typevar(self, stmt: S.Assign) -> bool:
        """``n = TypeVar("n")``: a symbolic size shared by the functions below (TVM 0.27)."""
        value = stmt.value
        if not (isinstance(value, S.Call) and dotted(value.func) in ("TypeVar", "typing.TypeVar")):
            return False
        target = stmt.targets[0]
        if not isinstance(target, S.Name) or not value.args or not isinstance(value.args[0], S.Constant) \
                or value.args[0].value != target.id:
            raise self.error(stmt, "write a type variable as n = TypeVar(\"n\")")
        self.typevars.add(target.id)
        return True

    def module(self, cls: S.ClassDef) -> IRModule:
        names = [_decorator(d)[0] for d in cls.decorators]
        if not any(n in _MODULE_DECORATORS for n in names):
            raise self.error(cls, f"class {cls.name!r} needs the @I.ir_module decorator")
        mod = IRModule(source_dialect=self.dialect.name)
        attrs: dict = {}
        self.class_name = cls.name  # `cls = Module` may name the class as it is written
        # every function can refer to every other (cls.name) whatever their order
        self.globals = {s.name: GlobalVar(s.name) for s in cls.body if isinstance(s, S.FunctionDef)}
        prim_funcs = [s for s in cls.body if isinstance(s, S.FunctionDef)
                      and any(_decorator(d)[0] in _PRIM_FUNC_DECORATORS for d in s.decorators)]
        self.prim_func_names = {s.name for s in prim_funcs}
        # what `Module.f(...)` in a PrimFunc calls, typed by what f declares it returns
        self.module_functions = ModuleFunctions(cls.name, self.globals,
                                                {s.name: self.result_type(s) for s in prim_funcs})
        for stmt in cls.body:  # (first: the functions' struct info may name a vdevice)
            if _module_call(stmt) == "I.module_global_infos":
                mod.global_infos = self.global_infos(stmt)
        self.vdevices = tuple(mod.global_infos.get("vdevice", ()))
        self.meshes = tuple(mod.global_infos.get("mesh", ()))
        for stmt in cls.body:
            if isinstance(stmt, S.FunctionDef):
                for dec in stmt.decorators:
                    name, kwargs = _decorator(dec)
                    if name in _RELAX_DECORATORS:
                        self.signatures[stmt.name] = self.relax_builder().signature(stmt, kwargs)
        functions = [s for s in cls.body if isinstance(s, S.FunctionDef)]
        for stmt in cls.body:  # comments of I.module_attrs (...) go to the next function
            if not isinstance(stmt, S.FunctionDef):
                later = [f for f in functions if f.line > stmt.line]
                # (a module of no function keeps them below the class: nothing is dropped)
                carry(self.source, stmt, later[0] if later else functions[-1] if functions else cls,
                      where="before" if later else "below")
        for stmt in cls.body:
            if isinstance(stmt, S.FunctionDef):
                if stmt.name in mod:
                    raise self.error(stmt, f"function {stmt.name!r} is defined twice in this module")
                mod[self.globals[stmt.name]] = self.function(stmt)
            elif _extern_name(stmt):  # my_ext = R.ExternFunc("my_ext"): a function outside the module
                if stmt.targets[0].id in mod:
                    raise self.error(stmt, f"function {stmt.targets[0].id!r} is defined twice in this module")
                mod[GlobalVar(stmt.targets[0].id)] = self.literal(stmt.value)
            elif isinstance(stmt, S.ExprStmt) and isinstance(stmt.value, S.Call) \
                    and dotted(stmt.value.func) == "I.module_attrs":
                args = stmt.value.args
                if len(args) != 1 or not isinstance(args[0], S.DictExpr):
                    raise self.error(stmt, "I.module_attrs takes one dict")
                attrs.update(norm_attrs(self.literal(args[0]), self.dialect))  # (keys as the IR spells them)
            elif isinstance(stmt, (S.Pass, S.Import)) or _is_docstring(stmt) \
                    or _module_call(stmt) == "I.module_global_infos":
                continue
            else:
                raise self.error(stmt, "a module class holds functions, R.ExternFunc assignments, "
                                       "I.module_attrs and I.module_global_infos only")
        if attrs:
            mod.attrs = freeze_value(attrs)
        mod.span = None
        if self.source.comments.get((cls.line, cls.col)):
            mod.span = span_of(self.source, cls)  # the comments of the class
        return mod

    def result_type(self, fdef: S.FunctionDef) -> DataType:
        """The data type a PrimFunc declares it returns (``-> T.float32``), void when none (a
        wrong annotation is reported when the function itself is read)."""
        if fdef.returns is None:
            return void
        try:
            ret = TIRBuilder(self.source, self.dialect).ev(fdef.returns)
        except ScriptError:
            return void
        return DataType(ret.path) if isinstance(ret, Builtin) and is_dtype_name(ret.path) else void

    def global_infos(self, stmt: S.ExprStmt) -> FrozenDict:
        """``I.module_global_infos({"vdevice": [I.vdevice(...), ...]})``."""
        args = stmt.value.args
        if len(args) != 1 or not isinstance(args[0], S.DictExpr):
            raise self.error(stmt, "I.module_global_infos takes one dict of lists")
        infos = {}
        for key, value in zip(args[0].keys, args[0].values):
            name = self.literal(key)
            if not isinstance(value, S.ListExpr) or not isinstance(name, str):
                raise self.error(value, "I.module_global_infos maps a name to a list, such as "
                                        "{\"vdevice\": [I.vdevice(\"llvm\")]}")
            infos[name] = tuple(self.global_info(item) for item in value.elts)
        return FrozenDict(infos)

    def global_info(self, syn: Any) -> Any:
        if isinstance(syn, S.Call) and dotted(syn.func) == "I.vdevice":
            args = [self.literal(a) for a in syn.args]
            kwargs = {k: self.literal(v) for k, v in syn.kwargs}
            try:
                return make_vdevice(*args, **kwargs)
            except (TVMSError, TypeError) as e:
                raise self.error(syn, str(e)) from None
        if isinstance(syn, S.Call) and dotted(syn.func) == "I.dummy_global_info" and not syn.args:
            return DummyGlobalInfo()
        if isinstance(syn, S.Call) and dotted(syn.func) in ("R.device_mesh", "R.dist.device_mesh"):
            return self.literal(syn)
        raise self.error(syn, "a global info is I.vdevice(...), R.device_mesh(...) or I.dummy_global_info()")

    def relax_builder(self) -> RelaxFunctionBuilder:
        builder = RelaxFunctionBuilder(self.source, self.dialect, self.globals,
                                       frozenset(self.typevars), self.metadata)
        builder.tvm027_spellings = self.tvm027_spellings
        builder.vdevices = getattr(self, "vdevices", ())
        builder.meshes = getattr(self, "meshes", ())
        builder.prim_funcs = self.prim_func_names
        builder.signatures = self.signatures
        builder.class_name = getattr(self, "class_name", "Module")
        return builder

    def literal(self, syn: Any) -> Any:
        builder = RelaxFunctionBuilder(self.source, self.dialect, self.globals,
                                       frozenset(self.typevars), self.metadata)
        builder.tvm027_spellings = self.tvm027_spellings
        return builder.ev(syn)

    def read_metadata(self, stmt: S.Assign) -> dict:
        """``metadata = {"ir.GenericConst": [{...}, ...]}`` (see tvms.script.metadata)."""
        table = TIRBuilder(self.source, self.dialect).ev(stmt.value)
        if not isinstance(table, dict):
            raise self.error(stmt.value, "the metadata section is a dict of lists")
        out = {}
        for key, entries in table.items():
            if key not in CONSTANT_KEYS or not isinstance(entries, list):
                raise self.error(stmt.value, f"unknown metadata kind {key!r}; tvms reads "
                                 f"{' and '.join(CONSTANT_KEYS)}")
            try:
                constants = [make_constant(decode_entry(e)) for e in entries]
            except (TVMSError, ValueError, TypeError) as e:
                raise self.error(stmt.value, f"bad metadata constant: {e}") from None
            for k in CONSTANT_KEYS:  # either dialect's name refers to the same constants
                out[k] = constants
        return out

    def function(self, fdef: S.FunctionDef) -> PrimFunc:
        for dec in fdef.decorators:
            name, kwargs = _decorator(dec)
            if name in _PRIM_FUNC_DECORATORS:
                for key in kwargs:
                    if key not in ("private", "s_tir", "persistent", "check_well_formed"):
                        raise self.error(dec, f"unknown @T.prim_func argument {key!r}")
                module = self.module_functions
                builder = TIRBuilder(self.source, self.dialect, typevars=frozenset(self.typevars),
                                     globals_={module.name: module} if module is not None else None)
                return builder.prim_func(fdef, kwargs)
            if name in _RELAX_DECORATORS:
                for key in kwargs:
                    if key not in ("private", "pure"):
                        raise self.error(dec, f"unknown @R.function argument {key!r}")
                return self.relax_builder().function(fdef, kwargs)
            known = sorted(_PRIM_FUNC_DECORATORS | _RELAX_DECORATORS)
            raise self.error(dec, f"unknown decorator '@{name}'{did_you_mean(name or '', known)}")
        raise self.error(fdef, f"function {fdef.name!r} needs a decorator such as @T.prim_func")


def _module_call(stmt: Any) -> str | None:
    """The name a module-level call statement calls (``I.module_attrs``), else None."""
    if isinstance(stmt, S.ExprStmt) and isinstance(stmt.value, S.Call):
        return dotted(stmt.value.func)
    return None


def _is_metadata(stmt: Any) -> bool:
    return isinstance(stmt, S.Assign) and len(stmt.targets) == 1 \
        and isinstance(stmt.targets[0], S.Name) and stmt.targets[0].id == "metadata"


def _extern_name(stmt: Any) -> bool:
    return isinstance(stmt, S.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], S.Name) \
        and isinstance(stmt.value, S.Call) and dotted(stmt.value.func) == "R.ExternFunc"


def _is_docstring(stmt: Any) -> bool:
    return isinstance(stmt, S.ExprStmt) and isinstance(stmt.value, S.Constant) \
        and isinstance(stmt.value.value, str)


def from_source(text: str, name: str = "<string>") -> IRModule | PrimFunc:
    """Parse TVMScript text: an ``@I.ir_module`` class gives an IRModule, a bare
    ``@T.prim_func`` a PrimFunc. Errors are ``tvms.ScriptError`` with the position."""
    return parse_module(text, name)


@deep_recursion  # (a fresh ModuleParser each time: a retry starts clean)
def parse_module(text: str, name: str = "<string>", source: Source | None = None) -> IRModule | PrimFunc:
    """``from_source``, for a text that may come with its Source (a decorated Python function)."""
    return ModuleParser(text, name, source=source).parse()
