"""Memory reuse for the Relax VM, planned at compile time: which intermediate buffers may share
storage (``runtime/vm_memory.py`` holds the pool that serves the plan).

``plan_seq(seq)`` looks at the bindings of one ``SeqExpr``. A binding that allocates one tensor,
``v = R.call_tir(...)`` / ``R.call_dps_packed(...)`` with one tensor output or (after
CallTIRRewrite) ``v = R.builtin.alloc_tensor(...)``, is *poolable* when every later use of ``v``
(or of an alias ``y = v``) is as a direct input of a destination-passing call or a direct
argument of a PrimFunc call: then nothing keeps the buffer after that last use, and it goes back
to the pool there. Any other use (returned, put in a tuple, captured by a closure, passed to a
Relax function or ``R.call_packed``) keeps the buffer for good: it is allocated fresh and never
reused.

``vm_codegen`` turns the plan into instructions: a pooled allocation (``vm.builtin.alloc_tensor``
with ``pooled``) and, after the last use, ``vm.builtin.release``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ...ir import relax as rx
from ...ir.expr import Op
from ...ir.node import Node
from ...ir.struct_info import TensorStructInfo

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


__all__ = ["ALLOC_TENSOR", "DPS_OPS", "SeqPlan", "plan_seq"]
