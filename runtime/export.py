"""Shipping compiled code: ``Module.export_library(path)`` and ``tvms.runtime.load_module(path)``.

``export_library`` writes a real shared library: the machine code of every compiled PrimFunc
(emitted by llvmlite as position-independent object code) linked by the system C compiler
(``cc -shared``), followed by the metadata: a JSON text that names each function's entry symbol,
its signature (parameters and buffers with their symbolic sizes, as data: ``ir/signature.py``),
the order of its argument slots, the target and the Relax program (a serialized VM program, and
the functions the compiled VM made native code: their code linked in, what calling them needs in
the metadata, ``ir/vm_program.native_json``; and the functions whose weights ``tvms.compile``
lifted, with the native code of their calls with cached weights: ``lifted_json``). The library
is therefore self-contained:
``load_module`` needs only it (and tvms) to call the functions again, with the same argument
checks and ``time_evaluator`` as a freshly built module. A trailer with the sizes and SHA-256
hashes of both parts ends the file (``library_file`` documents the layout); ``load_module``
checks it before ``dlopen``, so a damaged file is an error, not a crash.

Each function's code lives in its own LLVM module, and each such module defines the thread-count
global of its parallel loops; in the library it is renamed ``<entry>__num_threads`` so that the
objects link together and the loader can find each one.
"""
from __future__ import annotations

import base64
import binascii
import ctypes
import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

from tvms.ir.errors import TVMSError
from tvms.ir.analysis import entry_vars, written_params
from tvms.ir.files import write_file
from tvms.ir.function import PrimFunc
from tvms.ir.signature import signature_json, signature_of
from tvms.ir.target import Target
from tvms.ir.vm_program import (CALL_PREFIX, KERNEL_PREFIX, VM_PREFIX, lifted_json, lifted_of, native_json,
                                native_of)

from .library_file import append_trailer, verify_library
from .thread_pool import load_thread_pool, thread_pool_kind

FORMAT = "tvms-library"
VERSION = 3  # 2: the metadata follows the shared object, checked by the trailer's hashes;
# 3: an Executable's Relax functions as a serialized VM program, signatures as JSON data (not TVMScript).
# Fields added since ("native_vm", "lifted_vm") are optional: a library without one loads (its
# functions interpreted, or run as written: weights transformed at each call), and a tvms that
# does not know one ignores it, so neither changed the version.


# --------------------------------------------------------------------------- what a library holds


@dataclass(frozen=True)
class LoadedFunction:
    """A function of a loaded library, in the shape ``runtime.module.Function`` calls: the entry
    ``address``, the signature ``func``, the ``slots`` it reads and the thread-count global."""

    func: PrimFunc
    target: Any  # a Target (for the thread count)
    address: int
    slots: tuple
    num_threads_address: int
    outputs: tuple
    library: Any  # the ctypes handle: the code stays mapped while a function refers to it

    def assembly(self) -> str:
        raise TVMSError("a loaded library holds machine code only; its source is not available")

    llvm_ir = optimized_ir = ""


# --------------------------------------------------------------------------- export


def export_library(module: Any, path: str, vm_program: bytes | None = None, native: list = (),
                   lifted: list = ()) -> None:
    """Write ``module`` (a runtime Module built for the llvm target, or a CUDA module:
    ``cuda_export.py``) to ``path`` as a shared library (atomically); ``vm_program`` is the
    serialized VM program of an Executable, kept with it, ``native`` its functions compiled
    to native code (``NativeVMFunction``s of the code generator), and ``lifted`` its functions
    whose weights were lifted: (name, spec, the native code of its call with cached weights or
    None)."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        raise TVMSError(f"export_library needs a C compiler to link the shared library: "
                        f"{os.environ.get('CC', 'cc')!r} was not found on PATH (install gcc or clang, or set CC)")
    program = None if vm_program is None else base64.b64encode(vm_program).decode("ascii")
    lifted_vm = [lifted_json(name, spec, call) for name, spec, call in lifted]
    if getattr(module, "device_type", 1) == 2:  # (a CUDA module: no host code, its binary as data)
        from .cuda_export import cuda_functions_json

        metadata = {"format": FORMAT, "version": VERSION, "target": module.target, "functions": [],
                    "cuda_functions": cuda_functions_json(module), "vm_program": program, "lifted_vm": lifted_vm}
        _link(compiler, [], [], path, json.dumps(metadata, indent=1).encode("utf-8"))
        return
    functions, objects, pools = [], [], set()
    for key, fn in module.functions.items():
        compiled = fn.compiled
        if not compiled.optimized_ir:
            raise TVMSError(f"export_library: {key} has no LLVM IR (a function loaded from a library "
                            f"cannot be exported again; export the module it was built from)")
        symbol = _entry_symbol(compiled)
        threads = f"{symbol}__num_threads" if compiled.num_threads_address else None
        if compiled.thread_pool:
            pools.add(compiled.thread_pool)
        objects.append(compiled.shared_object(threads))  # (code generation's: PIC object code)
        functions.append({
            "name": key, "symbol": symbol, "num_threads_symbol": threads,
            "signature": signature_json(compiled.func),
            "slots": [v.name for v in compiled.slots],
            "outputs": list(written_params(compiled.func)),
            "params": _describe_params(compiled.func),
        })
    calls = [call for _, _, call in lifted if call is not None]
    objects += [a.shared_object() for a in [*native, *calls]]
    metadata = {"format": FORMAT, "version": VERSION, "target": module.target, "functions": functions,
                "vm_program": program, "native_vm": [native_json(a) for a in native], "lifted_vm": lifted_vm}
    libs = ["-lm"]
    libs += sorted({"-lpthread" if pool == "pthread" else "-lgomp" for pool in pools})
    _link(compiler, objects, libs, path, json.dumps(metadata, indent=1).encode("utf-8"))


def _entry_symbol(compiled: Any) -> str:
    """The one function the code exports (the others are its internal parallel tasks)."""
    names = re.findall(r"^define (?!internal)[^@\n]*@([\w.$]+)\(", compiled.optimized_ir, re.M)
    if len(names) != 1:
        raise TVMSError(f"export_library: expected one exported function in the code, found {names}")
    return names[0]


def _link(compiler: str, objects: list, libs: list, path: str, metadata: bytes) -> None:
    """Link ``objects`` into a shared library at ``path`` with ``metadata`` and the trailer after
    it: linked in a temporary directory, then written with write_file (atomically, or through a
    device such as /dev/null), so ``path`` is never left half written."""
    try:
        work = tempfile.mkdtemp(prefix="tvms-link-")
    except OSError as err:
        raise TVMSError(f"export_library: cannot make a directory to link in: {err.strerror or err}") from None
    try:
        names = []
        for k, code in enumerate(objects):
            names.append(os.path.join(work, f"part{k}.o"))
            with open(names[-1], "wb") as f:
                f.write(code)
        out = os.path.join(work, "lib.so")
        names = names or ["-x", "c", os.devnull]  # (no objects: an empty shared object)
        done = subprocess.run([compiler, "-shared", "-o", out, *names, *libs],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise TVMSError(f"export_library: linking with {compiler} failed:\n{done.stderr.strip()}")
        append_trailer(out, metadata)
        with open(out, "rb") as f:
            data = f.read()
    except OSError as err:
        raise TVMSError(f"export_library: cannot link {path}: {err.strerror or err}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_file(path, data, new_mode=0o777)


def _describe_params(func: PrimFunc) -> list:
    """Each parameter's name, dtype and (for a buffer) shape, sizes printed as expressions."""
    from tvms.ir import expr as E

    out = []
    for p in func.params:
        buf = func.buffer_map.get(p)
        if buf is None:
            out.append({"name": p.name, "dtype": str(p.dtype)})
        else:
            dims = [d.value if isinstance(d, E.IntImm) else d.script() for d in buf.shape]
            out.append({"name": buf.name, "dtype": str(buf.dtype), "shape": dims})
    return out


# --------------------------------------------------------------------------- load

# dlsym looks a name up in the library and in everything it links too: a name from the metadata
# without the prefix of its kind (``abort``), or with another kind's, is refused, and so is an
# address that lies outside the library.


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def symbol_address(lib: Any, symbol: Any, prefix: str, path: str) -> int:
    """The address of ``symbol`` (of the kind ``prefix`` names) in the library ``lib`` loaded from ``path``."""
    if not isinstance(symbol, str) or not symbol.startswith(prefix):
        raise TVMSError(f"load_module: {path} names the symbol {symbol!r:.60}, not one of its own "
                        f"(they begin with {prefix!r})")
    try:
        address = ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
    except AttributeError:
        raise TVMSError(f"load_module: {path} does not define the symbol {symbol!r:.60}") from None
    where, own = _object_of(address), _name_of(lib)
    if None not in (where, own) and where != own:
        raise TVMSError(f"load_module: the symbol {symbol!r:.60} is not defined in {path} but in "
                        f"{os.fsdecode(where)}")
    return address


def _object_of(address: int) -> bytes | None:
    """The name the dynamic loader keeps for the object holding ``address`` (dladdr), None when
    that cannot be told."""
    dladdr = getattr(_process(), "dladdr", None)
    info = _DlInfo()
    if dladdr is None or not dladdr(ctypes.c_void_p(address), ctypes.byref(info)):
        return None
    return info.dli_fname


@functools.lru_cache(maxsize=None)
def _process() -> Any:
    """The process's own symbols (libc's dladdr and dlinfo), opened once, not at each symbol loaded."""
    return ctypes.CDLL(None)


class _LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]


def _name_of(lib: Any) -> bytes | None:
    """The name the dynamic loader keeps for the library ``lib`` (dlinfo's link map), None when
    that cannot be told. Why not its path: the loader reuses an object already loaded from another
    path (renamed since, or a hard link) under its first name."""
    dlinfo = getattr(_process(), "dlinfo", None)
    link_map = ctypes.POINTER(_LinkMap)()
    if dlinfo is None or dlinfo(ctypes.c_void_p(lib._handle), 2, ctypes.byref(link_map)) != 0 or not link_map:
        return None  # (2: RTLD_DI_LINKMAP)
    return link_map.contents.l_name


def read_metadata(path: str) -> tuple[dict, Any]:
    """The metadata of the library at ``path`` and its ctypes handle; the file's sizes and hashes
    are checked before it is loaded."""
    text = verify_library(path)
    try:
        metadata = json.loads(text.decode("utf-8"))
    except ValueError as err:
        raise TVMSError(f"load_module: the metadata of {path} is not JSON: {err}") from None
    fields = metadata if isinstance(metadata, dict) else {}
    if fields.get("format") != FORMAT or fields.get("version") != VERSION:
        raise TVMSError(f"load_module: {path} has metadata of format {fields.get('format')!r} version "
                        f"{fields.get('version')!r}; this tvms reads {FORMAT!r} version {VERSION}")
    if thread_pool_kind() != "pthread":
        load_thread_pool(own_pool=False)  # (first: so libgomp's workers sleep when idle, as for JIT-built code)
    try:
        lib = _dlopen(os.path.abspath(path))
    except OSError as err:
        raise TVMSError(f"load_module: cannot load {path}: {err}") from None
    return metadata, lib


_OPENED: dict = {}  # path -> (device, inode) of the file the dynamic loader opened under that path
_OPENED_LOCK = threading.Lock()


def _dlopen(path: str) -> Any:
    """``ctypes.CDLL(path)``; where another file was opened under this path before in this process
    (a library exported again to the same path), from a private copy: the loader would hand back
    the object it opened first, the old code with the new metadata."""
    with _OPENED_LOCK:
        st = os.stat(path)
        known = _OPENED.get(path)
        if known is None or known == (st.st_dev, st.st_ino):
            _OPENED[path] = (st.st_dev, st.st_ino)
            return ctypes.CDLL(path)
    fd, copy = tempfile.mkstemp(suffix=".so", prefix="tvms-")
    try:
        with os.fdopen(fd, "wb") as out, open(path, "rb") as src:
            shutil.copyfileobj(src, out)
        return ctypes.CDLL(copy)
    finally:
        os.unlink(copy)  # (the mapping stays)


def load_module(path: str) -> Any:
    """A Module calling the functions of the library at ``path`` (an Executable when the library
    holds a Relax program)."""
    metadata, lib = read_metadata(path)
    try:
        return _module_of(metadata, lib, path)
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        # (only a file written with valid hashes by something other than export_library)
        raise TVMSError(f"load_module: the metadata of {path} is malformed: {type(err).__name__}: {err}") from None


def _module_of(metadata: dict, lib: Any, path: str) -> Any:
    if "cuda_functions" in metadata:
        from .cuda_export import cuda_module_of

        return _with_program(cuda_module_of(metadata["cuda_functions"], metadata["target"]), metadata, path)
    return _with_program(_llvm_module_of(metadata, lib, path), metadata, path, lib)


def _llvm_module_of(metadata: dict, lib: Any, path: str) -> Any:
    from .module import Function, Module

    target = Target(metadata["target"])
    functions = {}
    for entry in metadata["functions"]:
        name = entry["name"]
        func = signature_of(entry["signature"], name)
        slots = tuple(entry_vars(func))
        if [v.name for v in slots] != entry["slots"]:
            raise TVMSError(f"load_module: the signature of {name} in {path} does not match its slots")
        address = symbol_address(lib, entry["symbol"], KERNEL_PREFIX, path)
        threads = entry["num_threads_symbol"]
        if threads is not None and threads != f"{entry['symbol']}__num_threads":
            raise TVMSError(f"load_module: the thread-count global of {name} in {path} is named {threads!r:.60}")
        threads_address = symbol_address(lib, threads, KERNEL_PREFIX, path) if threads else 0
        loaded = LoadedFunction(func, target, address, slots, threads_address, tuple(entry["outputs"]), lib)
        functions[name] = Function(name, loaded)
    return Module(functions, metadata["target"])


def _with_program(kernels: Any, metadata: dict, path: str, lib: Any = None) -> Any:
    """``kernels``, or the Executable of the library's Relax program calling them."""
    if metadata.get("vm_program") is None:
        return kernels
    from tvms.ir.vm_program import deserialize

    from .vm import Executable

    try:
        program = base64.b64decode(metadata["vm_program"], validate=True)
    except binascii.Error as err:
        raise TVMSError(f"load_module: the VM program in {path} is not base64: {err}") from None

    def native(d: dict, lifted_call: bool = False) -> Any:
        prefix = CALL_PREFIX if lifted_call else VM_PREFIX
        return native_of(d, symbol_address(lib, d.get("symbol"), prefix, path), lib, lifted_call)

    lifted, calls = {}, {}
    for d in metadata.get("lifted_vm", ()):  # (none in a library of an older tvms: see VERSION)
        name, spec = lifted_of(d, lib)
        lifted[name] = spec
        if d["native"] is not None:
            calls[name] = native(d["native"], lifted_call=True)
    # (a VM function's native code before the tvmsvm_ prefix, tvms_vm_<name>: run interpreted, as
    # a symbol of that form may be a kernel's too)
    native_vm = [d for d in metadata.get("native_vm", ()) if not str(d.get("symbol")).startswith("tvms_vm_")]
    return Executable(deserialize(program), kernels, {d["name"]: native(d) for d in native_vm},
                      lifted, calls)
