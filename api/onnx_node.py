"""The run-time half of ``script/onnx_deferred.py``: the packed function
``tvms.onnx.specialized_node`` converts an ONNX node whose shape or axis is decided by its inputs'
values, once those values are known (here in the face, as it converts with the script layer and
compiles with the lowering layer, which the runtime layer may not import). The inputs that decide (learnt the first time a node sees
inputs of given shapes and dtypes) are bound as constants, the node is converted by tvms's
converters, compiled for the host, cached, and run; a later call with the same deciding values
and the same shapes and dtypes runs the cached executable (the guards of a JIT).
"""
from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np

from .ir.errors import TVMSError
from .ir.registry import register_func
from .script.onnx_deferred import SPECIALIZED_NODE, parse_spec
from .script.onnx_frontend import specialize_node
from .runtime.vm_memory import aligned_empty

_CACHE_SIZE = 256  # compiled specializations kept (the least recently used goes first)
# an entry is (executable, deciding inputs, per-thread VMs): a VM reuses its buffers across calls,
# so two threads running one VM would overwrite each other's intermediates
_compiled: "collections.OrderedDict[tuple, tuple[Any, list[int], threading.local]]" = collections.OrderedDict()
# (spec, shapes and dtypes) -> the deciding inputs, bounded as _compiled (shapes may vary forever)
_deciding: "collections.OrderedDict[tuple, list[int]]" = collections.OrderedDict()
_lock = threading.Lock()
stats = {"compiled": 0, "hits": 0}  # (read by tests and by whoever wants the first-call cost)


def _key(spec: str, signature: tuple, deciding: list[int], values: list) -> tuple:
    return spec, signature, tuple((k, values[k].tobytes()) for k in deciding)


def _remember(cache: collections.OrderedDict, key: tuple, value: Any) -> None:
    """Keep ``value`` in ``cache``, dropping the least recently used beyond ``_CACHE_SIZE``."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)


@register_func(SPECIALIZED_NODE)
def specialized_node(spec: str, *args: Any) -> Any:
    """Run the node ``spec`` (``onnx_deferred.node_spec``) on ``args`` (its present inputs)."""
    from .lowering.build import compile as build
    from .runtime.device import cpu
    from .runtime.vm import VirtualMachine

    node, opset = parse_spec(spec)
    values: list = [np.asarray(a) for a in args]
    named = sum(1 for name in node.input if name)
    if len(values) != named:
        raise TVMSError(f"{SPECIALIZED_NODE}: the {node.op_type} node has {named} input{'s' * (named != 1)}, "
                        f"but the call passes {len(values)}")
    present = iter(values)
    inputs = [next(present, None) if name else None for name in node.input]
    signature = tuple((v.shape, str(v.dtype)) for v in values)
    deciding = _deciding.get((spec, signature))
    with _lock:
        entry = _compiled.get(_key(spec, signature, deciding, inputs)) if deciding is not None else None
        if entry is not None:
            _compiled.move_to_end(_key(spec, signature, deciding, inputs))
            stats["hits"] += 1
    if entry is None:
        try:
            mod, deciding = specialize_node(node, opset, inputs)
        except TVMSError as err:
            raise TVMSError(f"{SPECIALIZED_NODE}: converting at run time: {err}") from None
        entry = (build(mod, "llvm"), deciding, threading.local())
        with _lock:
            _remember(_deciding, (spec, signature), deciding)
            _remember(_compiled, _key(spec, signature, deciding, inputs), entry)
            stats["compiled"] += 1
    executable, deciding, local = entry
    vm = getattr(local, "vm", None)
    if vm is None:
        vm = local.vm = VirtualMachine(executable, cpu())
    result = vm["main"](*[v for k, v in enumerate(inputs) if v is not None and k not in deciding])
    if isinstance(result, (list, tuple)):
        return tuple(_owned(r) for r in result)
    return _owned(result)


def _owned(result: Any) -> np.ndarray:
    """A copy of a result (the VM may reuse its buffer), aligned as the kernels reading it assume."""
    out = aligned_empty(result.shape, np.dtype(result.array.dtype))
    out[...] = result.array
    return out
