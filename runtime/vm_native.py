"""The compiled VM in the runtime: a function of the program that ``lowering/codegen/llvm_vm.py``
lowered to native code (a ``NativeVMFunction``), called once per ``vm["main"](...)``.

A call allocates one byte array per returned tensor (its size from the last call, or from
the shapes when they are constants), enters the native function with the argument tuple, and
wraps the outputs as Tensors (each over its own fresh memory: nothing a later call writes).
The native code reads the arguments itself (``object_layout``: where a tuple's items and a
numpy array's data, shape, dtype and flags are, measured here on live objects), checks them,
binds the sizes and runs the kernels with the VM's reserved storage. When the arguments are
not what it takes (a wrong shape or dtype, a list, a strided array) it returns without running
anything, and the call goes to the interpreter (``fallback``), which converts and checks them
as it always does: same results, same error messages.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Callable

import numpy as np

from tvms.ir.errors import TVMSError
from tvms.ir.target import host_cores
from tvms.ir.vm_program import ALIGNMENT, CTX_FIELDS, LIFTED_CALL_WORDS, NEED_OUTPUTS, NativeVMFunction

from .llvm_jit import load_kernel
from .module import _data_address
from .tensor import Tensor
from .vm_memory import aligned_bytes

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.py_object, ctypes.py_object, ctypes.c_void_p)
_layout: Any = None


def object_layout() -> dict | str:
    """The CTX_FIELDS of object layout for this interpreter and numpy (offsets in bytes, type
    addresses), each checked by reading live objects; a string says why they cannot be used."""
    global _layout
    if _layout is None:
        _layout = _measure_layout()
    return _layout


def _measure_layout() -> dict | str:
    head = object.__basicsize__  # (the object header: ob_type is its last word)
    if sys.byteorder != "little":
        return "the native VM reads objects of little-endian hosts"
    fields = {"ndarray_type": id(np.ndarray), "tensor_type": id(Tensor), "ob_type": head - 8,
              "tuple_size": head, "tuple_items": tuple.__basicsize__,
              # PyArrayObject: data, nd, dimensions, strides, base, descr, flags (numpy's ABI)
              "arr_data": head, "arr_nd": head + 8, "arr_dims": head + 16, "arr_descr": head + 40,
              "arr_flags": head + 48,
              # PyArray_Descr: typeobj, kind, type, byteorder, flags, type_num
              "descr_byteorder": head + 10, "descr_type_num": head + 12}
    arr = np.empty((3, 5), np.float32)
    tensor = Tensor.__new__(Tensor)
    tensor.array, tensor.device = arr, None
    slot = [off for off in range(head, Tensor.__basicsize__, 8) if _word(tensor, off) == id(arr)]
    if len(slot) != 1:
        return "tvms Tensors are not laid out as the native VM expects"
    fields["tensor_array"] = slot[0]
    pair = (arr, tensor)
    shape = _word(arr, fields["arr_dims"])
    checks = [_word(arr, fields["ob_type"]) == id(np.ndarray), _word(pair, fields["tuple_size"]) == 2,
              _word(pair, fields["tuple_items"] + 8) == id(tensor),
              _word(arr, fields["arr_data"]) == arr.ctypes.data,
              ctypes.c_int32.from_address(id(arr) + fields["arr_nd"]).value == 2,
              [ctypes.c_int64.from_address(shape + 8 * i).value for i in range(2)] == [3, 5],
              _word(arr, fields["arr_descr"]) == id(arr.dtype),
              ctypes.c_int32.from_address(id(arr) + fields["arr_flags"]).value & 0x0501 == 0x0501,
              ctypes.c_int32.from_address(id(arr.dtype) + fields["descr_type_num"]).value == arr.dtype.num,
              ctypes.c_char.from_address(id(arr.dtype) + fields["descr_byteorder"]).value
              == arr.dtype.byteorder.encode()]
    if not all(checks):
        return f"numpy {np.__version__}'s arrays are not laid out as the native VM expects"
    return fields


def _word(obj: Any, offset: int) -> int:
    return ctypes.c_uint64.from_address(id(obj) + offset).value


class NativeFunction:
    """One native function of the program, on one VM: its context (the kernels' entries, the
    constants, the VM's reserved storage) made once; ``call(*args)`` runs one inference.
    ``fallbacks`` counts the calls the interpreter served. ``wrap`` and ``tensor`` are the VM's
    conversions of a result value and of a fit array to a Tensor."""

    def __init__(self, artifact: NativeVMFunction, layout: dict, kernels: Any, constants: list,
                 fallback: Callable, wrap: Callable, tensor: Callable, storage: Any = None) -> None:
        self.artifact, self.fallback, self.fallbacks = artifact, fallback, 0
        # (a library's function is mapped already; else the JIT links its object code, once)
        self._entry = _ENTRY(artifact.address or load_kernel(artifact).address)
        ctx = self._ctx = (ctypes.c_int64 * artifact.ctx_size)()
        threads = CTX_FIELDS.index("threads")  # (the object layout's fields come before it)
        for k, name in enumerate(CTX_FIELDS[:threads]):
            ctx[k] = layout[name]
        functions = [kernels.get_function(name).compiled for name in artifact.kernels]
        ctx[threads] = artifact.num_cores or host_cores()
        # reserved once per VM (or another function's, given as ``storage``, that never runs
        # at the same time: a lifted call and its function's lifted form)
        if storage is not None and storage.nbytes < artifact.storage_bytes:
            raise TVMSError(f"{artifact.name}: the shared storage has {storage.nbytes} bytes, "
                            f"the function reserves {artifact.storage_bytes}")
        self.storage = aligned_bytes(artifact.storage_bytes) if storage is None else storage
        ctx[CTX_FIELDS.index("storage")] = _data_address(self.storage) if artifact.storage_bytes else 0
        at = len(CTX_FIELDS)
        for fn in functions:
            ctx[at], ctx[at + 1] = fn.address, fn.num_threads_address
            at += 2
        self._constants = [constants[k] for k in artifact.constants]  # (kept: ctx holds their data)
        for c in self._constants:
            ctx[at] = _data_address(c)
            at += 1
        # per output, the byte array's size: the static one, else the last call's
        self._sizes = [ALIGNMENT + _static_bytes(out) for out in artifact.outputs]
        self._allocate = _allocator(len(self._sizes), self._sizes)
        self._finish = _finisher(artifact, constants, wrap, tensor)
        self._entry_parts: tuple = ()
        self.call = self._caller()

    def reuse(self, weights: tuple | None, transformed: tuple = (), arrays: tuple = ()) -> None:
        """For the native call of a lifted function (``lower_lifted_calls``: ctx's last three
        words): the parameter set it runs with while its weights are these objects and none of
        ``arrays`` is writable; ``None``: no set (each call goes through ``fallback``)."""
        parts = (weights, transformed, arrays) if weights is not None else ()
        at = self.artifact.ctx_size - LIFTED_CALL_WORDS
        for k in range(LIFTED_CALL_WORDS):
            self._ctx[at + k] = id(parts[k]) if parts else 0
        self._entry_parts = parts  # (kept alive: ctx holds their addresses)

    def _caller(self) -> Callable:
        entry, ctx, finish, allocate, sizes = self._entry, self._ctx, self._finish, self._allocate, self._sizes
        address = ctypes.addressof(ctx)
        needed = [out.offset_at + 1 + len(out.dims) for out in self.artifact.outputs]

        def call(*args: Any) -> Any:
            outs = allocate()
            code = entry(args, outs, address)
            if code == NEED_OUTPUTS:  # (the sizes changed since the last call)
                for j, at in enumerate(needed):
                    sizes[j] = ALIGNMENT + ctx[at]
                outs = allocate()
                code = entry(args, outs, address)
            if code == 0:
                return finish(args, outs, ctx)
            self.fallbacks += 1
            return self.fallback(*args)
        return call


def _static_bytes(out: Any) -> int:
    if any(d is None for d in out.dims):
        return 0
    return np.dtype(out.dtype).itemsize * int(np.prod(out.dims, dtype=np.int64))


def _allocator(count: int, sizes: list) -> Callable[[], tuple]:
    """``() -> tuple`` of fresh byte arrays of ``sizes`` (one expression: evaluated in one frame)."""
    items = "".join(f"empty(s[{j}], u8), " for j in range(count))
    return eval(f"lambda: ({items})", {"empty": np.empty, "u8": np.dtype(np.uint8), "s": sizes})


def _finisher(artifact: NativeVMFunction, constants: list, wrap: Callable, tensor: Callable) -> Callable:
    """``(args, outs, ctx) -> result`` as the interpreter returns it: outputs as Tensors over
    their byte arrays, parameters and constants as ``wrap`` (the VM's result conversion) makes them.
    (Made by ``eval`` for speed, of text holding nothing but ints: a library's ``result`` is
    checked by ``native_of``, and each leaf is read again here as a known kind and a number.)"""
    namespace = {"view": np.ndarray, "tensor": tensor, "wrap": wrap, "C": constants,
                 "array_of": lambda x: x.array if isinstance(x, Tensor) else x}

    def source(tree: Any) -> str:
        if isinstance(tree, tuple) and tree and isinstance(tree[0], str):
            kind, k = tree
            if kind == "param":
                return "wrap(array_of(a[%d]))" % k
            if kind == "const":
                return "wrap(C[%d])" % k
            if kind != "out":
                raise TVMSError(f"{artifact.name}: a result of unknown kind {kind!r:.20}")
            out = artifact.outputs[k]
            namespace["D%d" % k] = np.dtype(out.dtype)
            dims = "".join("%d, " % d if d is not None else "c[%d], " % (out.offset_at + 1 + i)
                           for i, d in enumerate(out.dims))
            return "tensor(view((%s), D%d, o[%d], c[%d]))" % (dims, k, k, out.offset_at)
        return "(" + "".join(source(t) + ", " for t in tree) + ")"
    return eval(f"lambda a, o, c: {source(artifact.result)}", namespace)


__all__ = ["NativeFunction", "object_layout"]
