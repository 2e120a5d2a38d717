"""The build driver: ``tvms.build`` (TensorIR -> Module) and ``tvms.compile`` (Relax -> Executable).

Both are short sequences of named steps, each reading the target's row of the target table
(``targets.py``), so nothing here names a target kind:

    relax pipeline -> default schedules -> TIR pipeline -> code generation -> link

The link step hands the artifacts to the runtime through the packed-function registry (the
row's loader, and ``runtime.vm.executable`` for a Relax program): this layer never imports the
runtime, which only loads and runs what is made here.

``compile`` caches its result by content (``compile_key``), and the kernels' object code is
also cached on disk (``codegen/object_cache.py``).
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from ..ir import relax as rx
from ..ir.deep import deep_recursion
from ..ir.errors import TVMSError
from ..ir.expr import Op
from ..ir.function import PrimFunc
from ..ir.module import IRModule, offloaded_functions
from ..ir.name_supply import NameSupply
from ..ir.node import FrozenDict
from ..ir.registry import get_global_func
from ..ir.relax_op import SPECIAL_OPS
from ..ir.vm_program import KERNEL_PREFIX, native_symbol
from ..ir.target import Target, as_target
from ..ir.visitor import collect
from ..ir.relax_well_formed import verify_return_annotations
from ..ir.tile_layout import refuse_tile_layouts
from ..ir.tile_primitive import refuse_tile_primitives
from ..ir.well_formed import verify_well_formed
from .targets import TargetKind, target_kind
from .tir_pipelines import resolve_tir_pipeline

# operator-name prefixes the VM runs itself (allocation, not computation): not "Relax operators"
_RUNTIME_OPS = ("relax.builtin.", "relax.vm.", "relax.memory.", "builtin.", "vm.")
EXECUTABLE_LOADER = "runtime.vm.executable"  # (VMProgram, kernels, native code, lifted functions) -> Executable
EXEC_MODES = ("bytecode", "compiled")  # TVM's names: the VM program interpreted, or native code


# --------------------------------------------------------------------------- build (TensorIR)


@deep_recursion
def build(mod_or_func: Any, target: Any = None, pipeline: Any = "default", name: str = "main") -> Any:
    """Compile the PrimFuncs of an IRModule (or one PrimFunc, named ``name``) for ``target``
    (default: the current target, else ``llvm``) into a runtime Module, lowered by the TIR
    ``pipeline`` named (TVM's names: ``"default"``/``"s_tir"`` for scheduled TensorIR,
    ``"tirx"`` for tirx kernels; None is the target's default; ``tir_pipelines.py``)."""
    pipeline = resolve_tir_pipeline(pipeline)
    target = as_target(target)
    row = target_kind(target)
    return link_kernels(_artifacts(_prim_funcs(mod_or_func, name), row, target, pipeline), row, target)


def _artifacts(funcs: dict, row: TargetKind, target: Target, pipeline: str = "s_tir") -> dict:
    """The TIR pipeline and code generation steps: one artifact per PrimFunc, by name. A function
    without a ``global_symbol`` (a legalized operator) takes its name as one (numbered where
    another function's symbol has it), as TVM's build attaches them: its kernels are
    ``<name>_kernel``, apart from the other functions' kernels."""
    symbols = NameSupply("_")
    owners: dict[str, str] = {}
    for key, func in funcs.items():
        if "global_symbol" in func.attrs:
            symbol = str(func.attrs["global_symbol"])
            if symbol in owners:  # (TVM 0.27 refuses them too: one symbol, two functions)
                raise TVMSError(f"duplicate PrimFunc global_symbol {symbol!r}: the functions {owners[symbol]!r} and "
                                f"{key!r} would both be exported as {symbol!r}; give each its own global_symbol")
            owners[symbol] = key
            symbols.reserve(symbol)
    named = {key: func if "global_symbol" in func.attrs else func.with_attr("global_symbol", symbols.fresh(key))
             for key, func in funcs.items()}
    return codegen({key: lower_prim_func(func, row, target, pipeline) for key, func in named.items()}, row, target)


def _prim_funcs(mod_or_func: Any, name: str) -> dict:
    if isinstance(mod_or_func, PrimFunc):
        return {name: mod_or_func}
    if not isinstance(mod_or_func, IRModule):
        raise TVMSError(f"build takes an IRModule or a PrimFunc, got {type(mod_or_func).__name__}")
    funcs = {key: f for key, f in ((k, mod_or_func[k]) for k in mod_or_func) if isinstance(f, PrimFunc)}
    others = [k for k in mod_or_func if k not in funcs]
    if others:
        raise TVMSError(f"build compiles TensorIR functions; {', '.join(others)} are not "
                        f"(compile a module with Relax functions with tvms.compile)")
    if not funcs:
        raise TVMSError("build: the module has no functions")
    return funcs


def lower_prim_func(func: PrimFunc, row: TargetKind, target: Target, pipeline: str = "s_tir") -> PrimFunc:
    """The TIR pipeline step: ``func`` checked and lowered by the target's ``pipeline``."""
    refuse_tile_primitives(func, "build")
    verify_well_formed(func)  # (the parser reads what TVM's reads: this is where it is checked)
    refuse_tile_layouts(func, "build")
    return row.lower(func, target, pipeline)


def codegen(lowered: dict, row: TargetKind, target: Target) -> dict:
    """The code generation step: one artifact per lowered function, by name."""
    symbols = NameSupply("_")
    return {key: row.codegen(func, target, native_symbol(symbols, KERNEL_PREFIX, key))
            for key, func in lowered.items()}


def link_kernels(artifacts: dict, row: TargetKind, target: Target) -> Any:
    """The link step: the runtime Module holding the artifacts (the row's loader)."""
    return row.load(artifacts, target)


# --------------------------------------------------------------------------- compile (Relax)


@deep_recursion
def compile(mod: Any, target: Any = None, relax_pipeline: Any = "zero",
            default_schedule: bool = True, exec_mode: str = "compiled", tir_pipeline: Any = "default") -> Any:
    """Compile ``mod``: with Relax functions an ``Executable`` for ``VirtualMachine``; a module
    of PrimFuncs only (or a PrimFunc) gives ``tvms.build``'s ``Module``, as ``tvm.compile``.

    ``relax_pipeline`` (a name or a pass) runs when Relax operators remain, as TVM runs its
    build pipeline on a module that is not lowered yet; None skips it.

    ``default_schedule``: every PrimFunc that is not scheduled yet (see
    ``tvms.dlight.is_scheduled``) gets the default schedule of its kind from the target's rules
    (``tvms.dlight.cpu`` for llvm: matmul, GEMV, reduction, elementwise, fallback), and a named
    pipeline is preceded by FuseTransposeMatmul, so that a linear layer reads its weight as
    stored, and followed by ConcatInPlace, so that a concatenation's parts are written into it;
    on an llvm target it first runs PadConvGroups, so that grouped convolutions compute groups of
    whole vectors (``"relax.PadConvGroups.enable": False`` leaves them), and, with 8 fp32 lanes or
    more, BlockChannels, so that convolutions run on channel-blocked data
    (``PassContext(config={"relax.BlockChannels.enable": False})`` keeps NCHW). False compiles the
    TensorIR as it is, as TVM does.

    ``tir_pipeline`` (TVM's): the TIR pipeline every PrimFunc is lowered by, by name
    (``"default"``/``"s_tir"``, ``"tirx"`` for tirx kernels, None for the target's default;
    ``tir_pipelines.py``).

    ``exec_mode`` (TVM's): ``"compiled"`` lowers each Relax function the native VM takes to one
    native function (``codegen/llvm_vm.py``; the others, and ``"bytecode"``, are interpreted:
    ``Executable.stats()`` says which and why).

    The result is cached by content (``compile_key``): compiling a module whose text, target and
    options are unchanged returns the same Executable (or Module), which is safe to share: each
    VirtualMachine keeps its own buffers."""
    target = as_target(target)
    tir_pipeline = resolve_tir_pipeline(tir_pipeline)
    if exec_mode not in EXEC_MODES:
        raise TVMSError(f"exec_mode must be one of {', '.join(map(repr, EXEC_MODES))}, not {exec_mode!r}")
    if isinstance(mod, rx.Function):
        mod = IRModule({"main": mod})
    # (the thread pool the runtime runs parallel loops on, TVMS_THREAD_POOL, shapes llvm code too)
    pool_kind = get_global_func("runtime.thread_pool_kind", True) if target.kind == "llvm" else None
    pool = {"thread_pool": pool_kind()} if pool_kind is not None else {}
    key = compile_key(mod, target, relax_pipeline, default_schedule=bool(default_schedule), exec_mode=exec_mode,
                      tir_pipeline=tir_pipeline, **pool)
    if key is not None:
        with _COMPILED_LOCK:
            hit = _COMPILED.get(key)
            if hit is not None:
                _COMPILED.move_to_end(key)
                return hit
    result = _compile_uncached(mod, target, relax_pipeline, bool(default_schedule), exec_mode, tir_pipeline)
    if key is not None:
        with _COMPILED_LOCK:
            _COMPILED[key] = result
            while len(_COMPILED) > _COMPILED_MAX:
                _COMPILED.popitem(last=False)
    return result


# compile's results by content key, least recently used first (bounded: each holds native code)
_COMPILED: "OrderedDict[tuple, Any]" = OrderedDict()
_COMPILED_LOCK = threading.Lock()
_COMPILED_MAX = 64


def compile_key(mod: Any, target: Any, relax_pipeline: Any, **options: Any) -> tuple | None:
    """What a compile depends on: the sha256 of the module's text (constants included), the
    target, the pipeline's name, then each further option of ``compile`` as a (name, value) pair
    (values with a stable ``repr``), then the current PassContext's settings (``_context_key``:
    a pass it disables or a config switch changes what is made). None when the result cannot be keyed (a pipeline given as a
    pass object, an input compile rejects, a module RunCodegen offloaded from)."""
    if relax_pipeline is not None and not isinstance(relax_pipeline, str):
        return None
    if not isinstance(mod, (PrimFunc, IRModule)):
        return None
    if isinstance(mod, IRModule) and mod.attrs.get("external_mods"):
        return None  # (offloaded functions hold what the text does not show: their constants)
    try:
        text = mod.script(show_meta=True) if isinstance(mod, IRModule) else "prim_func\n" + mod.script()
    except Exception:  # (a module the printer cannot print yet is compiled, just not cached)
        return None
    extra = tuple((name, repr(value)) for name, value in sorted(options.items()))
    return (hashlib.sha256(text.encode()).hexdigest(), str(target), relax_pipeline, *extra, _context_key())


def _context_key() -> tuple:
    """The current PassContext as far as it decides what the pipelines run: its opt_level, the
    passes it disables and requires, and its config (a pass's options)."""
    from .transform import PassContext

    ctx = PassContext.current()
    return ("pass_context", ctx.opt_level, tuple(sorted(ctx.disabled_pass)), tuple(sorted(ctx.required_pass)),
            repr(sorted(ctx.config.items(), key=lambda item: str(item[0]))))


def _compile_uncached(mod: Any, target: Target, relax_pipeline: Any, schedule: bool, exec_mode: str,
                      tir_pipeline: str = "s_tir") -> Any:
    row = target_kind(target)
    if isinstance(mod, PrimFunc):
        mod = IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TVMSError(f"compile takes an IRModule, a Relax function or a PrimFunc, "
                        f"not {type(mod).__name__}")
    if _prim_funcs_only(mod):
        return build(default_schedules(mod, target, row) if schedule else mod, target, tir_pipeline)
    verify_return_annotations(mod)
    mod = run_relax_pipeline(mod, relax_pipeline, schedule, target)
    _check_offloaded(mod)  # (after the pipeline, which may run RunCodegen itself, or annotate)
    if schedule:
        mod = prepack_constant_weights(default_schedules(mod, target, row))
    from .relax.lift_transform_params import lift_weights

    mod, lifted = lift_weights(mod)  # (what depends on weights only runs once: runtime/param_cache.py)
    return link_executable(mod, *_build_kernels(mod, row, target, tir_pipeline), lifted, exec_mode=exec_mode,
                           target=target)


def _check_offloaded(mod: IRModule) -> None:
    """A function a backend is to compile (``Codegen``, from FuseOpsByPattern's annotation or a
    partition_for_* helper) must have been handed to it by RunCodegen first: compiled as plain
    Relax it would run without the library the user asked for (TVM fails there obscurely)."""
    for gv, func in mod.functions.items():
        backend = func.attrs.get("Codegen") if isinstance(func, rx.Function) and func.attrs else None
        if backend is not None:
            raise TVMSError(f"function {gv.name_hint!r} is marked for the {backend!r} backend "
                            f"(Codegen); run relax.transform.RunCodegen() on the module before compiling it")


def prepack_constant_weights(mod: IRModule) -> IRModule:
    """Weights bound as constants (an imported model's) repacked once, here: the kernels whose
    packing blocks the default rules marked are split (SplitLayoutRewritePreproc) and the
    packing calls whose weights are constants run now (FoldConstant), as BindParams and
    FoldConstant do for bound parameters; ``mod`` as it is when no packed weight is a constant."""
    from ..ir.stmt import Block
    from .relax.passes import FoldConstant
    from .relax.split_layout_rewrite_preproc import PREPROC, split_layout_rewrite_preproc

    marked = {gv.name_hint for gv, f in mod.functions_items()
              if isinstance(f, PrimFunc) and any(PREPROC in b.annotations for b in collect(f.body, Block))}
    if not any(_calls_with_constant(f, marked) for f in mod.functions.values() if isinstance(f, rx.Function)):
        return mod
    return FoldConstant()(split_layout_rewrite_preproc(mod.copy(), strict=False))


def _calls_with_constant(func: rx.Function, kernels: set) -> bool:
    """Whether ``func`` calls one of ``kernels`` (by name) through ``call_tir`` with a constant argument."""
    for call in collect(func, rx.Call):
        if getattr(call.op, "name", None) not in ("relax.call_tir", "relax.call_tir_inplace"):
            continue
        callee, args = call.args[0], call.args[1]
        if (isinstance(callee, rx.GlobalVar) and callee.name_hint in kernels and isinstance(args, rx.Tuple)
                and any(isinstance(a, rx.Constant) for a in args.fields)):
            return True
    return False


def _prim_funcs_only(mod: IRModule) -> bool:
    return len(mod) > 0 and all(isinstance(mod[k], PrimFunc) for k in mod)


def run_relax_pipeline(mod: IRModule, relax_pipeline: Any, schedule: bool, target: Any = None) -> IRModule:
    """The Relax pipeline step: ``relax_pipeline`` (a name or a pass) when Relax operators
    remain; a named pipeline is preceded by the CPU backend's dispatch passes and, with default
    schedules, by FuseTransposeMatmul (and followed by ConcatInPlace); for an llvm ``target``
    first PadConvGroups and, of 8 lanes or more, BlockChannels (``_layout_passes``)."""
    if relax_pipeline is None or not has_relax_operators(mod):
        return mod
    if isinstance(relax_pipeline, str):
        from .relax.dispatch import DispatchSampling, DispatchSortScan
        from .relax.pipeline import get_pipeline
        from .transform import Sequential

        # TVM's "default" legalizes before the VM; here the zero pipeline also fuses. As TVM's
        # build for a CPU, the backend's dispatch passes run first (cumsum, multinomial sampling)
        relax_pipeline = get_pipeline("zero" if relax_pipeline == "default" else relax_pipeline)
        if schedule:  # (and, after fusion, the parts of a concatenation written in place)
            from .relax.concat_in_place import ConcatInPlace
            from .relax.fuse_transpose_matmul import FuseTransposeMatmul

            relax_pipeline = Sequential([*_layout_passes(target), FuseTransposeMatmul(), relax_pipeline,
                                         ConcatInPlace()])
        relax_pipeline = Sequential([DispatchSampling(), DispatchSortScan(), relax_pipeline])
    # TVM's build keeps every Relax function; the pipeline's dead-code elimination keeps the
    # public ones only, so a private one (IRModule.from_expr(func)) is public while it runs
    private = [k for k in mod if isinstance(mod[k], rx.Function) and "global_symbol" not in mod[k].attrs]
    mod = relax_pipeline(_with_global_symbols(mod, private, True))
    return _with_global_symbols(mod, [k for k in private if k in mod], False)


BLOCK_CHANNELS_BY_DEFAULT = True  # (the PassContext options turn these off)
PAD_CONV_GROUPS_BY_DEFAULT = True
WINOGRAD_BY_DEFAULT = True


def _layout_passes(target: Any) -> list:
    """For an llvm target, the passes that lay convolutions out for its vectors: PadConvGroups
    (grouped convolutions on groups of whole vectors; the PassContext option
    ``"relax.PadConvGroups.enable": False`` leaves them), then BlockChannels with blocks of the
    target's fp32 lanes where its vector width is known (its ``-mattr``, the host's features, or
    LLVM's for a named x86 CPU) and holds 8 lanes or more (``"relax.BlockChannels.enable": False``
    leaves the convolutions NCHW), then WinogradConv2d on the blocked 3x3 convolutions that gain
    from it (``"relax.WinogradConv2d.enable": False`` leaves them)."""
    from .transform import PassContext

    target = as_target(target) if target is not None else None
    if target is None or target.kind != "llvm":
        return []
    from .dlight.analysis import vector_bits
    from .relax.block_channels import BlockChannels
    from .relax.pad_conv_groups import PadConvGroups
    from .relax.winograd import WinogradConv2d

    config = PassContext.current().config
    passes = [PadConvGroups(target)] if config.get("relax.PadConvGroups.enable", PAD_CONV_GROUPS_BY_DEFAULT) else []
    lanes = (vector_bits(target) or 0) // 32
    if lanes >= 8 and config.get("relax.BlockChannels.enable", BLOCK_CHANNELS_BY_DEFAULT):
        passes.append(BlockChannels(lanes))
        if config.get("relax.WinogradConv2d.enable", WINOGRAD_BY_DEFAULT):
            passes.append(WinogradConv2d(lanes))
    return passes


def has_relax_operators(mod: IRModule) -> bool:
    """Whether a Relax function of ``mod`` still calls a computing operator (``R.add``...)."""
    for key in mod:
        func = mod[key]
        if isinstance(func, rx.Function):
            for n in collect(func, rx.Call):
                if isinstance(n.op, Op) and n.op.name not in SPECIAL_OPS \
                        and not n.op.name.startswith(_RUNTIME_OPS):
                    return True
    return False


def default_schedules(mod: IRModule, target: Any, row: TargetKind | None = None) -> IRModule:
    """The default schedules step: ``mod`` with each PrimFunc that is not scheduled yet given
    the first of the target's default rules that applies."""
    from .dlight import ApplyDefaultSchedule

    target = as_target(target)
    row = row or target_kind(target)
    with target:
        return ApplyDefaultSchedule(*row.default_rules())(mod)


def _build_kernels(mod: IRModule, row: TargetKind, target: Target, tir_pipeline: str = "s_tir") -> tuple:
    """The one place the lowered module's PrimFuncs are taken and compiled for the VM: the
    kernels' runtime Module and their artifacts."""
    artifacts = _artifacts({k: mod[k] for k in mod if isinstance(mod[k], PrimFunc)}, row, target, tir_pipeline)
    return link_kernels(artifacts, row, target), artifacts


def link_executable(mod: IRModule, kernels: Any, artifacts: dict | None = None, lifted: dict | None = None,
                    exec_mode: str = "bytecode", target: Any = None) -> Any:
    """The link step of a Relax program: its VM program (``relax/vm_codegen.py``), its kernels
    and, in the compiled mode, the native code of its functions (``codegen/llvm_vm.py``, which
    calls the kernels of ``artifacts``), made into the runtime's Executable; ``lifted`` names
    the functions whose weights ``<name>_transform_params`` transforms (``lift_weights``)."""
    from .relax.vm_codegen import compile_vm

    program = compile_vm(mod)
    if exec_mode == "compiled":
        from .codegen.llvm_vm import lower_lifted_calls, lower_vm_program

        native = lower_vm_program(program, artifacts or {}, target)
    else:
        native = {f.name: f'exec_mode="{exec_mode}"' for f in program.functions if not f.closure}
    lifted_native = {name: f'exec_mode="{exec_mode}"' for name in lifted or {}}
    if lifted and exec_mode == "compiled":  # (the call with cached weights as one native call too)
        lifted_native = lower_lifted_calls(program, native, artifacts or {}, target, lifted)
    return get_global_func(EXECUTABLE_LOADER)(program, kernels, native, lifted, lifted_native,
                                              offloaded_functions(mod))


def _with_global_symbols(mod: IRModule, names: list, add: bool) -> IRModule:
    """``mod`` with the functions ``names`` given (or rid of) their ``global_symbol``."""
    if not names:
        return mod
    out = mod.copy()
    for name in names:
        func = mod[name]
        attrs = {k: v for k, v in func.attrs.items() if k != "global_symbol"}
        if add:
            attrs["global_symbol"] = name
        out[mod.get_global_var(name)] = func.with_changes(attrs=FrozenDict(attrs))
    return out


def relax_build(mod: Any, target: Any = None, relax_pipeline: Any = "zero",
                default_schedule: bool = True, exec_mode: str = "compiled", tir_pipeline: Any = "default") -> Any:
    """``tvms.relax.build``: as ``compile``, for modules with Relax functions."""
    ex = compile(mod, target, relax_pipeline, default_schedule, exec_mode, tir_pipeline)
    if isinstance(mod, PrimFunc) or (isinstance(mod, IRModule) and _prim_funcs_only(mod)):
        raise TVMSError("relax.build: the module has no Relax function (use tvms.build for TensorIR)")
    return ex


__all__ = ["build", "compile", "compile_key", "default_schedules", "has_relax_operators", "relax_build"]
