"""Memory reuse for the Relax VM: which intermediate buffers may share storage, and a pool.

``plan_seq(seq)`` looks at the bindings of one ``SeqExpr``. A binding ``v = R.call_tir(...)`` /
``R.call_dps_packed(...)`` with one tensor output is *poolable* when every later use of ``v`` is
as a direct input of another destination-passing call: then nothing keeps the buffer after that
last use, and it goes back to the pool there. Any other use (returned, aliased ``y = v``, put in
a tuple, captured by a closure, passed to a Relax function or ``R.call_packed``) keeps the
buffer for good: it is allocated fresh and never reused.

``BufferPool`` hands out buffers by exact byte size: a released buffer serves the next request
of the same size, in this call or in later calls of the same VM.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from tvms.ir import relax as rx
from tvms.ir.expr import Op
from tvms.ir.node import Node
from tvms.ir.struct_info import TensorStructInfo

from .tensor import _aligned_empty

DPS_OPS = ("relax.call_tir", "relax.call_dps_packed")


@dataclass
class SeqPlan:
    """The bindings of a ``SeqExpr`` in order, the calls whose output comes from the pool, and
    the variables whose buffer returns to the pool after each binding."""

    bindings: list
    pooled_calls: set = field(default_factory=set)  # ids of the Call nodes
    release_after: dict = field(default_factory=dict)  # binding index -> [Var]


def plan_seq(seq: rx.SeqExpr) -> SeqPlan:
    bindings = [b for block in seq.blocks for b in block.bindings]
    candidates = {b.var: i for i, b in enumerate(bindings) if _single_tensor_dps(b)}
    last_use = dict(candidates)  # unused: free right after its own binding
    escaped: set = set(_vars_in(seq.body))
    for j, b in enumerate(bindings):
        if isinstance(b, rx.VarBinding) and _is_dps(b.value) and isinstance(b.value.args[1], rx.Tuple):
            for x in b.value.args[1].fields:
                if isinstance(x, rx.Var):
                    last_use[x] = j
                else:
                    escaped.update(_vars_in(x))
            escaped.update(v for a in (b.value.args[0], *b.value.args[2:]) for v in _vars_in(a))
        else:
            escaped.update(_vars_in(b.value))
    plan = SeqPlan(bindings)
    for var, i in candidates.items():
        if var in escaped:
            continue
        plan.pooled_calls.add(id(bindings[i].value))
        plan.release_after.setdefault(last_use[var], []).append(var)
    return plan


def _is_dps(value: Any) -> bool:
    return isinstance(value, rx.Call) and isinstance(value.op, Op) and value.op.name in DPS_OPS


def _single_tensor_dps(b: Any) -> bool:
    return (isinstance(b, rx.VarBinding) and _is_dps(b.value) and len(b.value.sinfo_args) == 1
            and isinstance(b.value.sinfo_args[0], TensorStructInfo))


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


class BufferPool:
    """Aligned byte buffers by size; ``take`` prefers a released one, ``release`` returns it."""

    def __init__(self) -> None:
        self.free: dict[int, list[np.ndarray]] = defaultdict(list)
        self.lent: dict[int, np.ndarray] = {}  # id of the view handed out -> its byte buffer
        self.fresh = 0  # buffers the pool had to allocate
        self.reused = 0  # requests a released buffer served

    def take(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if self.free[nbytes]:
            raw = self.free[nbytes].pop()
            self.reused += 1
        else:
            raw = _aligned_empty((nbytes,), np.dtype(np.uint8))
            self.fresh += 1
        view = raw.view(dtype).reshape(shape)
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


__all__ = ["BufferPool", "DPS_OPS", "SeqPlan", "plan_seq", "walk"]
