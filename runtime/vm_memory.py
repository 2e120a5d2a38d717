"""Memory reuse for the Relax VM: which intermediate buffers may share storage, and a pool.

``plan_seq(seq)`` looks at the bindings of one ``SeqExpr``. A binding that allocates one tensor,
``v = R.call_tir(...)`` / ``R.call_dps_packed(...)`` with one tensor output or (after
CallTIRRewrite) ``v = R.builtin.alloc_tensor(...)``, is *poolable* when every later use of ``v``
(or of an alias ``y = v``) is as a direct input of a destination-passing call or a direct
argument of a PrimFunc call: then nothing keeps the buffer after that last use, and it goes back
to the pool there. Any other use (returned, put in a tuple, captured by a closure, passed to a
Relax function or ``R.call_packed``) keeps the buffer for good: it is allocated fresh and never
reused.

``BufferPool`` hands out buffers by exact byte size: a released buffer serves the next request
of the same size, in this call or in later calls of the same VM.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np

from tvms.ir import relax as rx
from tvms.ir.expr import Op
from tvms.ir.node import Node
from tvms.ir.struct_info import TensorStructInfo

from .module import _data_address
from .tensor import ALIGNMENT

DPS_OPS = ("relax.call_tir", "relax.call_dps_packed")
ALLOC_TENSOR = "relax.builtin.alloc_tensor"


@dataclass
class SeqPlan:
    """The bindings of a ``SeqExpr`` in order, the calls whose output comes from the pool, and
    the variables whose buffer returns to the pool after each binding."""

    bindings: list
    pooled_calls: set = field(default_factory=set)  # ids of the Call nodes
    release_after: dict = field(default_factory=dict)  # binding index -> [Var]


def plan_seq(seq: rx.SeqExpr, is_prim_func: Callable[[Any], bool] = lambda op: False) -> SeqPlan:
    """The plan of ``seq``; ``is_prim_func(op)`` says whether calling ``op`` runs a PrimFunc
    (such a call only writes into its arguments, so they may come from the pool)."""
    bindings = [b for block in seq.blocks for b in block.bindings]
    candidates = {b.var: i for i, b in enumerate(bindings) if _allocates_one_tensor(b)}
    last_use = dict(candidates)  # unused: free right after its own binding
    root = {v: v for v in candidates}  # each alias of a candidate -> the candidate
    escaped: set = set(_vars_in(seq.body))

    def use(x: Any, j: int) -> None:
        if x in root:
            last_use[root[x]] = j
        else:
            escaped.update(_vars_in(x))

    for j, b in enumerate(bindings):
        value = b.value
        if isinstance(b, rx.VarBinding) and isinstance(value, rx.Var) and value in root:
            root[b.var] = root[value]
            last_use[root[value]] = j
        elif isinstance(b, rx.VarBinding) and _is_dps(value) and isinstance(value.args[1], rx.Tuple):
            for x in value.args[1].fields:
                use(x, j)
            escaped.update(v for a in (value.args[0], *value.args[2:]) for v in _vars_in(a))
        elif isinstance(value, rx.Call) and is_prim_func(value.op):
            for x in value.args:
                use(x, j)
        else:
            escaped.update(_vars_in(value))
    escaped = {root.get(v, v) for v in escaped}
    plan = SeqPlan(bindings)
    for var, i in candidates.items():
        if var in escaped:
            continue
        plan.pooled_calls.add(id(bindings[i].value))
        plan.release_after.setdefault(last_use[var], []).append(var)
    return plan


def _is_dps(value: Any) -> bool:
    return isinstance(value, rx.Call) and isinstance(value.op, Op) and value.op.name in DPS_OPS


def _allocates_one_tensor(b: Any) -> bool:
    if not isinstance(b, rx.VarBinding) or not isinstance(b.value, rx.Call):
        return False
    call = b.value
    if isinstance(call.op, Op) and call.op.name == ALLOC_TENSOR:
        return True
    return _is_dps(call) and len(call.sinfo_args) == 1 and isinstance(call.sinfo_args[0], TensorStructInfo)


def walk(node: Any) -> Iterator[Any]:
    """``node`` and every node below it (through fields, tuples and lists)."""
    if isinstance(node, (tuple, list)):
        for x in node:
            yield from walk(x)
    elif isinstance(node, Node) and dataclasses.is_dataclass(node):
        yield node
        for f in dataclasses.fields(node):
            yield from walk(getattr(node, f.name))


def _vars_in(node: Any) -> Iterator[rx.Var]:
    """Every Relax variable that occurs in ``node`` (nested functions and struct info included:
    counting too many only keeps a buffer from being reused)."""
    return (n for n in walk(node) if isinstance(n, rx.Var))


def aligned_bytes(nbytes: int) -> np.ndarray:
    """``nbytes`` uninitialized bytes starting on an ``ALIGNMENT``-byte boundary (as Tensors
    need; ``tensor._aligned_empty`` does the same through the slower ``.ctypes.data``)."""
    raw = np.empty(nbytes + ALIGNMENT, dtype=np.uint8)
    start = -_data_address(raw) % ALIGNMENT
    return raw[start:start + nbytes]


def aligned_empty(shape: tuple, dtype: np.dtype) -> np.ndarray:
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    return aligned_bytes(nbytes).view(dtype).reshape(shape)


class BufferPool:
    """Aligned byte buffers by size; ``take`` prefers a released one, ``release`` returns it.
    The typed view of a buffer is kept for the next request of the same shape and dtype (a
    pooled value never leaves the VM, so handing out the same view object again is safe)."""

    def __init__(self) -> None:
        self.free: dict[int, list[np.ndarray]] = defaultdict(list)
        self.lent: dict[int, np.ndarray] = {}  # id of the view handed out -> its byte buffer
        self.views: dict[int, dict] = {}  # id of a byte buffer -> {(shape, dtype): view}
        self.fresh = 0  # buffers the pool had to allocate
        self.reused = 0  # requests a released buffer served

    def take(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        nbytes = dtype.itemsize
        for d in shape:
            nbytes *= d
        free = self.free[nbytes]
        if free:
            raw = free.pop()
            self.reused += 1
        else:
            raw = aligned_bytes(nbytes)
            self.views[id(raw)] = {}  # (the pool keeps every buffer: its id stays its own)
            self.fresh += 1
        views = self.views[id(raw)]
        view = views.get((shape, dtype))
        if view is None:
            view = views[(shape, dtype)] = raw.view(dtype).reshape(shape)
        self.lent[id(view)] = raw
        return view

    def release(self, view: np.ndarray) -> None:
        raw = self.lent.pop(id(view), None)
        if raw is not None:
            self.free[raw.nbytes].append(raw)

    @property
    def distinct(self) -> int:
        """How many buffers the pool owns (all allocated so far)."""
        return self.fresh


__all__ = ["ALLOC_TENSOR", "BufferPool", "DPS_OPS", "SeqPlan", "aligned_empty", "plan_seq", "walk"]
