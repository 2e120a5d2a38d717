"""tvms.runtime: devices, tensors, compiled modules, the Relax VM, the global function registry.

This package is also the face ``tvms.runtime`` (TVM 0.27's names: ``tvms.runtime.tensor``,
``Device``, ``Tensor``); the folder is mapped to that name, so the names live here, not in api/.
"""
from .device import Device, cpu, cuda, device
from .export import load_module
from ..ir.registry import get_global_func, list_global_func_names, remove_global_func
from .packed import PackedFunc, register_func
from .tensor import NDArray, Tensor, empty, from_dlpack, tensor
# (these register what lowering reaches by name: the kernel loaders (llvm, cuda), the VM's executable, the
# thread pool's kind, the cpu_blas kernel, R.call_py_func's functions)
from . import cpu_blas, cuda_module, module, py_funcs, thread_pool, vm  # noqa: E402,F401

__all__ = ["Device", "NDArray", "PackedFunc", "Tensor", "cpu", "cuda", "device", "empty", "from_dlpack",
           "get_global_func", "list_global_func_names", "load_module", "register_func", "remove_global_func",
           "tensor"]
