"""tvms.runtime: devices, tensors, compiled modules, the Relax VM, the global function registry.

This package is also the face ``tvms.runtime`` (TVM 0.27's names: ``tvms.runtime.tensor``,
``Device``, ``Tensor``); the folder is mapped to that name, so the names live here, not in api/.
"""
from .device import Device, cpu, cuda, device
from .export import load_module
from ..ir.registry import add_layer_loader, get_global_func, list_global_func_names, remove_global_func
from .packed import PackedFunc, register_func
from .tensor import NDArray, Tensor, empty, from_dlpack, tensor
# (these register what lowering reaches by name: the llvm kernel loader, the VM's executable, the
# thread pool's kind, R.call_py_func's functions)
from . import module, py_funcs, thread_pool, vm  # noqa: E402,F401


def _load_registrations() -> None:
    """The cuda kernel loader (and its tensor-map encoder, runtime.cuTensorMapEncodeTiled), the
    cpu_blas kernel (with numpy's operators), the reference executor's evaluation of a Relax
    expression (FoldConstant's), the run-time sequences', strings', random draws' and image
    decoding's functions register when first looked up."""
    from . import cpu_blas, cuda_module, image_decode, random_ops, reference_relax, sequence, string_ops  # noqa: F401


add_layer_loader(_load_registrations)

__all__ = ["Device", "NDArray", "PackedFunc", "Tensor", "cpu", "cuda", "device", "empty", "from_dlpack",
           "get_global_func", "list_global_func_names", "load_module", "register_func", "remove_global_func",
           "tensor"]
