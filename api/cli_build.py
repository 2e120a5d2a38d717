"""``tvms build`` and ``tvms run``: compile a module to a shared library, and run one.

``tvms build IN.tvms --target llvm -o model.so`` writes the library (atomically);
``tvms run IN.tvms|model.so --entry main --input A=a.npy --random-inputs --time`` calls a function
and prints its outputs (and latency statistics). Exit codes (tvms.cli's contract): 0 success,
1 the module could not be compiled or linked, or the program failed while running, 2 a usage or
input error (unreadable or unparsable file, a missing input, an input of the wrong shape or dtype,
a bad --shape value, a library that cannot be written).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cli import EXIT_ERROR, EXIT_FAILED, EXIT_OK, InputError, _error, add_pass_config_flag, read_source
from .ir import ScriptError, TVMSError
from .ir.files import WriteError
from .runtime.numpy_ops import memory_bytes as _memory_bytes  # (no input is made bigger than that)

EXIT_BUILD_FAILED = EXIT_FAILED
SMALL_OUTPUT = 64  # outputs with at most this many elements are printed in full
_ELF_MAGIC = b"\x7fELF"


class _Failure(Exception):
    """A command failure already worded for the user, with its exit code."""

    def __init__(self, message: str, code: int, rendered: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.rendered = rendered  # a parse error prints itself (file:line:col, the line, a caret)

    def report(self) -> int:
        print(str(self), file=sys.stderr) if self.rendered else _error(str(self))
        return self.code


# --------------------------------------------------------------------------- loading programs


def _parse(path: str) -> Any:
    from .script import from_source

    try:
        name, text = read_source(path)
    except InputError as err:
        raise _Failure(str(err), EXIT_ERROR) from None
    try:
        return from_source(text, name)
    except TVMSError as err:
        raise _Failure(str(err), EXIT_ERROR, rendered=True) from None


def _compile(node: Any, target: str, path: str, default_schedule: bool = True, tir_pipeline: str | None = None) -> Any:
    """A runtime Module (TensorIR) or a Relax Executable for ``node``."""
    import tvms
    from .ir import IRModule
    from .ir import relax as rx
    from .ir.function import PrimFunc

    if not isinstance(node, (IRModule, PrimFunc, rx.Function)):
        raise _Failure(f"{path} holds no module or function to compile", EXIT_ERROR)
    _check_target(target)
    try:  # (compile gives build's Module for TensorIR alone, an Executable with Relax functions)
        return tvms.compile(node, target, default_schedule=default_schedule, tir_pipeline=tir_pipeline)
    except TVMSError as err:
        if isinstance(err, ScriptError) and err.span is not None:  # (a statement of the file: shown)
            raise _Failure(str(err), EXIT_BUILD_FAILED, rendered=True) from None
        message = str(err).removeprefix("error: ")  # (a ScriptError without a position)
        raise _Failure(f"cannot compile {path}: {message}", EXIT_BUILD_FAILED) from None


def _check_target(target: str) -> None:
    """A ``--target`` that does not parse, or whose options its kind refuses (for llvm: a CPU,
    features or triple LLVM does not know; LLVM would abort the process on it), is an input
    error, refused before anything is compiled."""
    from .lowering.targets import check_target

    try:
        check_target(target)
    except TVMSError as err:
        raise _Failure(str(err), EXIT_ERROR) from None


def _is_library(path: str) -> bool:
    if path.endswith(".so"):
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) == _ELF_MAGIC
    except OSError:
        return False


# the options of ``tvms run`` that only compiling a module reads (a library was compiled already)
_COMPILE_OPTIONS = (("target", "--target"), ("no_default_schedule", "--no-default-schedule"),
                    ("tir_pipeline", "--tir-pipeline"), ("pass_config", "--pass-config"))


def _load_program(path: str, args: argparse.Namespace) -> Any:
    if path != "-" and _is_library(path):
        from .runtime import load_module

        given = [flag for name, flag in _COMPILE_OPTIONS if getattr(args, name)]
        if given:  # (they would be silently ignored: the library's were fixed by 'tvms build')
            raise _Failure(f"{path} is a library, already compiled: {', '.join(given)} applies only to "
                           f"a .tvms module (give it to 'tvms build' instead)", EXIT_ERROR)

        try:
            return load_module(path)
        except TVMSError as err:
            raise _Failure(str(err), EXIT_ERROR) from None
    return _compile(_parse(path), args.target or "llvm", path, not args.no_default_schedule, args.tir_pipeline)


# --------------------------------------------------------------------------- build


def cmd_build(args: argparse.Namespace) -> int:
    if not args.output or args.output == "-":
        _error("build: name the library to write with -o FILE.so")
        return EXIT_ERROR
    try:
        program = _compile(_parse(args.input), args.target, args.input, not args.no_default_schedule,
                           args.tir_pipeline)
        try:
            program.export_library(args.output)
        except WriteError as err:  # a write that cannot happen is an input error, not a failed build
            raise _Failure(str(err), EXIT_ERROR) from None
        except TVMSError as err:
            raise _Failure(str(err), EXIT_BUILD_FAILED) from None
    except _Failure as err:
        return err.report()
    return EXIT_OK


# --------------------------------------------------------------------------- run


def _parse_bindings(items: list, what: str) -> dict:
    """``["x=a.npy", ...]`` as ``{"x": "a.npy"}``; a malformed item is a usage error."""
    out: dict = {}
    for item in items or []:
        name, eq, value = item.partition("=")
        if not eq or not name or not value:
            raise _Failure(f"run: {what} {item!r} is not NAME=VALUE", EXIT_ERROR)
        out[name.strip()] = value.strip()
    return out


def _read_npy(name: str, path: str) -> np.ndarray:
    try:
        value = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise _Failure(f"run: cannot read input {name} from {path}: {err}", EXIT_ERROR) from None
    if not isinstance(value, np.ndarray):
        raise _Failure(f"run: {path} holds several arrays; give input {name} one .npy file", EXIT_ERROR)
    return value if value.flags.c_contiguous else value.copy(order="C")  # (a 0-d array stays 0-d)


def _random_array(shape: tuple, dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype == object:  # (a string tensor: words of 1 to 8 lower-case letters)
        from .runtime.tensor import string_array

        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        words = ["".join(rng.choice(letters, rng.integers(1, 9))) for _ in range(int(np.prod(shape)))]
        return string_array(words).reshape(shape)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 10, shape).astype(dtype)


def _as_declared(p: Any, arr: np.ndarray) -> np.ndarray:
    """Text read from a .npy file (numpy's <U or |S arrays: an object array would need a pickle,
    which is never loaded) as the object array of str a string parameter takes."""
    if p.dtype == "string" and arr.dtype.kind in "US":
        from .runtime.tensor import string_array

        return string_array(arr)
    return arr


@dataclass(frozen=True)
class _Param:
    """One argument of the function to run: a tensor (``shape`` its declared sizes) or a scalar
    (``shape`` None, ``var`` its variable); ``output`` for a destination the call writes."""

    name: str
    dtype: str
    shape: tuple | None
    var: Any = None
    output: bool = False


def _tir_params(fn: Any) -> list:
    from .ir.analysis import written_params

    if hasattr(fn, "func"):  # (a CUDA function: its host function's parameters, the outputs its kernels write)
        func, outputs = fn.func, fn.outputs
    else:
        func = fn.compiled.func
        outputs = getattr(fn.compiled, "outputs", None)  # (a loaded library stores them)
        outputs = outputs if outputs is not None else written_params(func)
    params = []
    for k, p in enumerate(func.params):
        buf = func.buffer_map.get(p)
        params.append(_Param(p.name, str(p.dtype), None, p) if buf is None  # (a vector's lanes: one more dimension)
                      else _Param(buf.name, str(buf.dtype.element_of), buf.array_shape, output=k in outputs))
    return params


def _relax_params(func: Any, entry: str) -> list:
    """The parameters of a VM program's function (``VMFunction``), from its signature."""
    from .ir import expr as E
    from .ir.vm_program import prim_expr_of

    sizes = [E.Var(name, "int64") for name in func.heap]
    params = []
    for name, (text, dtype, dims) in zip(func.params, func.signature):
        if dtype is None or dims is None:
            raise _Failure(f"run: parameter {name} of {entry} is {text}: tvms run passes "
                           f"tensors whose shape and dtype the signature gives", EXIT_ERROR)
        params.append(_Param(name, dtype, tuple(prim_expr_of(d, sizes) for d in dims)))
    return params


class _Arguments:
    """The arguments of a call, gathered from --input, --shape and --random-inputs."""

    def __init__(self, params: list, fname: str, args: argparse.Namespace) -> None:
        self.params, self.fname = params, fname
        self.files = _parse_bindings(args.input_files, "--input")
        self.rng = np.random.default_rng(args.seed)
        self.random = args.random_inputs
        sizes = {v.name: v for p in params for d in p.shape or () for v in _free_vars(d)}
        scalars = {p.name: p.var for p in params if p.shape is None}
        self.env: dict = {}
        for name, value in _parse_bindings(args.shape, "--shape").items():
            if name not in sizes and name not in scalars:
                known = ", ".join([*sizes, *scalars]) or "none"
                raise _Failure(f"run: {fname} has no size named {name!r} (its sizes: {known})", EXIT_ERROR)
            var = sizes.get(name, scalars.get(name))
            self.env[var] = _scalar_value(name, value, var.dtype, is_size=name in sizes)

    def gather(self) -> list:
        names = [p.name for p in self.params]
        unknown = sorted(set(self.files) - set(names))
        if unknown:
            raise _Failure(f"run: {self.fname} has no parameter {unknown[0]!r} "
                           f"(its parameters: {', '.join(names)})", EXIT_ERROR)
        given = {p.name: _as_declared(p, _read_npy(p.name, self.files[p.name])) for p in self.params
                 if p.name in self.files and p.shape is not None}
        for p in self.params:  # the given inputs are checked, and bind the sizes
            if p.name in given:
                self._check(p, given[p.name])
        return [self._value(p, given) for p in self.params]

    def _check(self, p: _Param, arr: np.ndarray) -> None:
        """A given input against its parameter: rank, dtype, static sizes, and the symbolic sizes
        bound so far (by --shape or an earlier input), which it binds otherwise."""
        from .ir import expr as E

        declared = f"{p.name} is declared {_describe_shape(p.shape)} {p.dtype}"
        if arr.ndim != len(p.shape):
            raise _Failure(f"run: input {p.name} is {arr.ndim}-d (shape {tuple(arr.shape)}); "
                           f"{declared}", EXIT_ERROR)
        if arr.dtype != _numpy_dtype(p.dtype):
            raise _Failure(f"run: input {p.name} has dtype {arr.dtype}; {declared}", EXIT_ERROR)
        for k, (dim, actual) in enumerate(zip(p.shape, arr.shape)):
            if isinstance(dim, E.IntImm) and dim.value != actual:
                raise _Failure(f"run: input {p.name}: dimension {k}: expected extent {dim.value}, "
                               f"got {actual} ({declared})", EXIT_ERROR)
            if isinstance(dim, E.Var):
                bound = self.env.setdefault(dim, actual)
                if bound != actual:
                    raise _Failure(f"run: input {p.name}: dimension {k} is the size {dim.name}, {actual} "
                                   f"here but {bound} from --shape or an earlier input", EXIT_ERROR)

    def _value(self, p: _Param, given: dict) -> Any:
        if p.name in given:
            return given[p.name]
        if p.shape is None:
            if p.var not in self.env:
                raise _Failure(f"run: missing scalar argument {p.name}: give --shape {p.name}=VALUE", EXIT_ERROR)
            return self.env[p.var]
        if not (p.output or self.random):
            raise _Failure(f"run: missing input {p.name}: give --input {p.name}=FILE.npy, "
                           f"or --random-inputs", EXIT_ERROR)
        shape = self._shape(p)
        dtype = _numpy_dtype(p.dtype)
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if nbytes > _memory_bytes():
            raise _Failure(f"run: {p.name} of shape {shape} would take {nbytes:,} bytes, more than "
                           f"this machine's memory; give smaller --shape sizes", EXIT_ERROR)
        return np.zeros(shape, dtype) if p.output else _random_array(shape, dtype, self.rng)

    def _shape(self, p: _Param) -> tuple:
        from .runtime.reference import compile_expr

        dims = []
        for d in p.shape:
            try:
                dims.append(int(compile_expr(d)(self.env)))
            except KeyError:
                free = sorted({v.name for v in _free_vars(d)} - {v.name for v in self.env})
                raise _Failure(f"run: the shape of {p.name} depends on the size {', '.join(free)}: give "
                               f"--shape {free[0]}=N or an --input that has it", EXIT_ERROR) from None
            except ArithmeticError as err:  # n // m with m = 0
                raise _Failure(f"run: with these sizes the shape {_describe_shape(p.shape)} of {p.name} "
                               f"cannot be computed ({err})", EXIT_ERROR) from None
        if any(d < 0 for d in dims):
            raise _Failure(f"run: with these sizes {p.name} would have the negative shape {tuple(dims)} "
                           f"({_describe_shape(p.shape)})", EXIT_ERROR)
        return tuple(dims)


def _scalar_value(name: str, text: str, dtype: Any, is_size: bool) -> Any:
    """The value of ``--shape NAME=TEXT`` for a variable of ``dtype``: a number that the dtype
    holds (an integer; a float for a float scalar), and not negative when it is a size."""
    what = "the size" if is_size else f"{name} ({dtype})"
    if dtype.is_float:
        try:
            value = float(text)
        except ValueError:
            raise _Failure(f"run: --shape {name}={text}: {what} must be a number", EXIT_ERROR) from None
        if not np.isfinite(value) or abs(value) > np.finfo(_numpy_dtype(dtype)).max:
            raise _Failure(f"run: --shape {name}={text}: out of the range of {dtype}", EXIT_ERROR)
        return value
    try:
        value = int(text)
    except ValueError:
        raise _Failure(f"run: --shape {name}={text}: {what} must be an integer", EXIT_ERROR) from None
    if is_size and value < 0:
        raise _Failure(f"run: --shape {name}={text}: a size cannot be negative", EXIT_ERROR)
    info = np.iinfo(_numpy_dtype(dtype)) if (dtype.is_int or dtype.is_uint) else None
    if info is not None and not info.min <= value <= info.max:
        raise _Failure(f"run: --shape {name}={text}: out of the range of {dtype} "
                       f"({info.min}..{info.max})", EXIT_ERROR)
    return value


def _numpy_dtype(dtype: Any) -> np.dtype:
    from .ir.dtype import DataType
    from .runtime.tir_values import numpy_dtype

    return np.dtype(numpy_dtype(DataType(str(dtype))))


def _describe_shape(shape: tuple) -> str:
    from .ir import expr as E

    dims = [str(d.value) if isinstance(d, E.IntImm) else d.script() for d in shape]
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


def _free_vars(expr: Any) -> list:
    from .ir import expr as E
    from .ir.visitor import collect

    return [expr] if isinstance(expr, E.Var) else collect(expr, E.Var)


def describe_array(name: str, value: np.ndarray) -> str:
    """An output as text: name, shape and dtype, a summary, and the values when it is small."""
    if value.dtype == object:  # (a string tensor: its lengths summarize it)
        lines = [f"{name}: shape {tuple(value.shape)} string"]
        if value.size:
            lengths = [len(s) for s in value.flat]
            lines.append(f"  lengths: min {min(lengths)}  max {max(lengths)}")
    else:
        lines = [f"{name}: shape {tuple(value.shape)} {value.dtype}"]
    if value.size and value.dtype != object:
        data = value.astype(np.float64) if value.dtype.kind in "biuf" else value
        lines.append(f"  min {data.min():.6g}  max {data.max():.6g}  mean {data.mean():.6g}")
    if value.size <= SMALL_OUTPUT:
        lines.append("  " + np.array2string(value, precision=6, separator=", ").replace("\n", "\n  "))
    return "\n".join(lines)


def describe_timing(result: Any, number: int) -> str:
    return (f"latency (ms, {len(result.results)} repeats of {number} runs): mean {result.mean * 1e3:.4f}  "
            f"median {result.median * 1e3:.4f}  min {result.min * 1e3:.4f}")


def _outputs(result: Any, prefix: str = "output") -> list:
    """``(name, array)`` for each tensor a Relax function returned (tuples flattened)."""
    if isinstance(result, (tuple, list)):
        return [item for k, v in enumerate(result) for item in _outputs(v, f"{prefix}[{k}]")]
    return [(prefix, np.asarray(getattr(result, "array", result)))]


def _prepare(program: Any, entry: str | None, args: argparse.Namespace) -> tuple:
    """``(call, values, timer)`` for the function to run: a kernel of a Module, or a Relax
    function of an Executable run by the VM (on a GPU for a module compiled for cuda)."""
    from .runtime.device import CUDA, cpu, cuda
    from .runtime.module import Module

    if isinstance(program, Module):
        entry = entry or program.entry_name
        try:
            fn = program.get_function(entry)
        except TVMSError as err:
            raise _Failure(f"run: {err}", EXIT_ERROR) from None
        params = _tir_params(fn)
        values = _Arguments(params, entry, args).gather()
        on_gpu = program.device_type == CUDA
        try:  # the call's own checks (shape, dtype), reported as input errors
            fn.check(tuple(values)) if on_gpu else fn.pack(tuple(values))
        except TVMSError as err:
            raise _Failure(f"run: {err}", EXIT_ERROR) from None
        if on_gpu:  # (the arguments go to the GPU, the outputs come back)
            values = [_on_device(v, cuda(0)) for v in values]

        def call() -> list:
            fn(*values)
            return [(p.name, np.asarray(v)) for p, v in zip(params, values) if p.output]

        return call, values, fn.time_evaluator(args.number, args.repeat)
    from .runtime.vm import VirtualMachine

    try:
        vm = VirtualMachine(program, cuda(0) if program.kernels().device_type == CUDA else cpu())
    except TVMSError as err:
        raise _Failure(f"run: {err}", EXIT_FAILED) from None
    names = program.function_names
    entry = entry or ("main" if "main" in names or len(names) != 1 else names[0])
    if entry not in names:
        raise _Failure(f"run: the executable has no Relax function {entry!r}; it has "
                       f"{', '.join(names) or 'none'}", EXIT_ERROR)
    values = _Arguments(_relax_params(program.program.function(entry), entry), entry, args).gather()
    return (lambda: _outputs(vm[entry](*values)), values,
            vm.time_evaluator(entry, number=args.number, repeat=args.repeat))


def _on_device(value: Any, device: Any) -> Any:
    from .runtime.tensor import tensor

    if not isinstance(value, np.ndarray):
        return value
    try:
        return tensor(value, device)
    except TVMSError as err:
        raise _Failure(f"run: {err}", EXIT_FAILED) from None


def cmd_run(args: argparse.Namespace) -> int:
    try:
        program = _load_program(args.input, args)
        call, values, timer = _prepare(program, args.entry, args)
        try:  # a failure inside the program (the arguments were checked)
            outputs = call()
            for name, value in outputs:
                print(describe_array(name, value))
            if args.time:
                print(describe_timing(timer(*values), args.number))
        except TVMSError as err:
            raise _Failure(f"run: {err}", EXIT_FAILED) from None
    except _Failure as err:
        return err.report()
    return EXIT_OK


# --------------------------------------------------------------------------- parsers


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _seed(text: str) -> int:
    if not text.isdigit():  # (numpy's generators take no negative seed)
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return int(text)


def add_build_parsers(subparsers) -> None:
    p = subparsers.add_parser(
        "build", help="compile a module to a shared library",
        description=("Compile a TVMScript module (TensorIR functions with tvms.build; Relax modules "
                     "with tvms.compile) for the CPU (or a CUDA GPU: --target cuda) and write it, "
                     "atomically, as a shared library that 'tvms run' and tvms.runtime.load_module "
                     "load. Exit codes: 0 success, "
                     "1 compiling or linking failed, 2 usage or input error."))
    p.add_argument("input", nargs="?", default="-", metavar="FILE",
                   help="the module to compile; '-' or none reads standard input")
    p.add_argument("-o", "--output", metavar="FILE.so", help="the library to write (required)")
    p.add_argument("--target", default="llvm", help="the target (default: llvm, the host CPU; cuda: a GPU)")
    _add_schedule_flag(p)
    _add_tir_pipeline_flag(p)
    add_pass_config_flag(p)
    p.set_defaults(func=cmd_build)

    r = subparsers.add_parser(
        "run", help="run a function of a module or library",
        description=("Run a function of a TVMScript module (compiled first) or of a library written "
                     "by 'tvms build', and print its outputs: shape, dtype, a summary, and the values "
                     "of small ones. Sizes such as n come from the given inputs or --shape. "
                     "Exit codes: 0 success, 1 compiling failed or the program failed, 2 usage or input "
                     "error, 70 internal error."))
    r.add_argument("input", metavar="FILE", help="a .tvms module, or a library (.so)")
    r.add_argument("--entry", metavar="NAME", help="the function to run (default: main, or the only one)")
    r.add_argument("--input", dest="input_files", action="append", metavar="NAME=FILE.npy",
                   help="an input array, by parameter name (repeatable)")
    r.add_argument("--shape", action="append", metavar="NAME=N",
                   help="bind a symbolic size (or a scalar parameter) to N (repeatable)")
    r.add_argument("--random-inputs", action="store_true",
                   help="fill the inputs not given with --input with random values")
    r.add_argument("--seed", type=_seed, default=0, help="seed of the random inputs (default 0)")
    r.add_argument("--time", action="store_true", help="print latency statistics")
    r.add_argument("--number", type=_positive, default=10, help="runs per repeat when timing (default 10)")
    r.add_argument("--repeat", type=_positive, default=3, help="timed repeats (default 3)")
    r.add_argument("--target", help="the target to compile a .tvms module for (default: llvm)")
    _add_schedule_flag(r)
    _add_tir_pipeline_flag(r)
    add_pass_config_flag(r)
    r.set_defaults(func=cmd_run)


def _add_tir_pipeline_flag(parser: argparse.ArgumentParser) -> None:
    from .lowering.tir_pipelines import TIR_PIPELINES

    parser.add_argument("--tir-pipeline", choices=TIR_PIPELINES, metavar="NAME",
                        help=f"the TIR pipeline, by TVM's name: {', '.join(TIR_PIPELINES)} (default: the target's, "
                             f"s_tir; tirx: for kernels written in TVM's tirx language, with their own barriers)")


def _add_schedule_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-default-schedule", action="store_true",
                        help="compile the TensorIR as written (no default CPU schedules)")
