"""Memory reuse for the Relax VM, planned at compile time: which intermediate buffers may share
storage (``runtime/vm_memory.py`` holds the pool that serves the plan).

``plan_seq(seq)`` looks at the bindings of one ``SeqExpr``. A binding that allocates one tensor,
``v = R.call_tir(...)`` / ``R.call_dps_packed(...)`` with one tensor output or (after
CallTIRRewrite) ``v = R.builtin.alloc_tensor(...)``, is *poolable* when every later use of ``v``
(or of an alias: ``y = v``, or the result of an ``R.call_tir_inplace`` that writes ``v``) is as a direct input of a destination-passing call or a direct
argument of a PrimFunc call: then nothing keeps the buffer after that last use, and it goes back
to the pool there. Any other use (returned, put in a tuple, captured by a closure, passed to a
Relax function or ``R.call_packed``) keeps the buffer for good: it is allocated fresh and never
reused.

``vm_codegen`` turns the plan into instructions: a pooled allocation (``vm.builtin.alloc_tensor``
with ``pooled``) and, after the last use, ``vm.builtin.release``.

``plan_storage(f)`` is the static plan of the compiled VM (``codegen/llvm_vm.py``), as TVM's
StaticPlanBlockMemory makes it, over a straight-line ``VMFunction``: each allocation the function
does not return gets a storage token; a token whose tensors have all died is free, and the next
allocation takes the free token that fits best (growing it when none is large enough), so
tensors whose lifetimes do not overlap share storage. A token's size is a byte expression over
the heap; it is reserved once per VM when it is a constant or when the ``tir_var_upper_bound``
of the sizes it reads bounds it (``bound``), else allocated at each call.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ...ir import relax as rx
from ...ir.dtype import DataType
from ...ir.expr import Op
from ...ir.node import Node
from ...ir.struct_info import TensorStructInfo
from ...ir.vm_program import Call, Reg, Ret, Size, VMFunction

DPS_OPS = ("relax.call_tir", "relax.call_dps_packed", "relax.call_tir_inplace")
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
            written = _written_in_place(value)
            if len(written) == 1 and len(value.attrs["inplace_indices"]) == 1:
                if written[0] in root:  # (its result is that buffer: an alias)
                    root[b.var] = root[written[0]]
            else:  # (a tuple holding the buffers it writes: they are kept for good, as any tuple's)
                escaped.update(v for x in written for v in _vars_in(x))
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


def _written_in_place(call: rx.Call) -> list:
    """The inputs an ``R.call_tir_inplace`` writes and returns (none for any other call)."""
    if call.op.name != "relax.call_tir_inplace":
        return []
    return [call.args[1].fields[int(k)] for k in call.attrs["inplace_indices"] if int(k) >= 0]


def _allocates_one_tensor(b: Any) -> bool:
    if not isinstance(b, rx.VarBinding) or not isinstance(b.value, rx.Call):
        return False
    call = b.value
    if isinstance(call.op, Op) and call.op.name == ALLOC_TENSOR:
        return True
    return (_is_dps(call) and call.op.name != "relax.call_tir_inplace"  # (which allocates nothing)
            and len(call.sinfo_args) == 1 and isinstance(call.sinfo_args[0], TensorStructInfo))


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


# ---------------------------------------------------------------- the compiled VM's static plan
ALLOC = "vm.builtin.alloc_tensor"
# the builtins that read a tensor without keeping it (checks) or end its life (release)
_PASSIVE = ("vm.builtin.check_tensor_info", "vm.builtin.match_shape", "vm.builtin.bind_sizes",
            "vm.builtin.release")


@dataclass(frozen=True)
class StorageToken:
    """Storage shared by ``tensors`` (registers, in allocation order): ``size`` its bytes (a size
    expression over the heap: the largest of its tensors'), ``bound`` the bytes reserved once per
    VM (None: allocated at each call, as large as ``size``)."""

    size: Any
    bound: int | None
    tensors: tuple


@dataclass(frozen=True)
class StoragePlan:
    """``tokens``; ``token_of``: register -> index of its token; ``outputs``: the registers of
    allocations that outlive the function (returned, or kept by something other than a kernel
    or a check): each call allocates them afresh."""

    tokens: tuple
    token_of: dict
    outputs: tuple

    def describe(self, heap: tuple = ()) -> list[str]:
        """One line per token: its tensors, size and how it is allocated."""
        from ...ir.vm_program import size_text

        return [f"storage {k}: {', '.join(f'%{r}' for r in t.tensors)}; {size_text(t.size, heap)} bytes, "
                + (f"{t.bound} reserved per VM" if t.bound is not None else "allocated per call")
                for k, t in enumerate(self.tokens)]


def tensor_bytes(inst: Call) -> Any:
    """The bytes of the tensor an ``alloc_tensor`` instruction allocates, a size expression."""
    dtype = DataType(inst.args[0].value)
    nbytes: Any = 1 if dtype.is_bool else (dtype.bits * dtype.lanes + 7) // 8  # (bool: a byte, as numpy)
    for a in inst.args[2:]:
        d = a.expr if isinstance(a, Size) else a.value
        nbytes = nbytes * d if isinstance(d, int) and isinstance(nbytes, int) else ("mul", nbytes, d)
    return nbytes


def upper_bound(e: Any, bounds: dict) -> int | None:
    """The largest value of the size expression ``e`` when each heap slot ``k`` lies in
    ``0..bounds[k]`` (sizes are never negative), or None when that does not bound it."""
    if isinstance(e, bool) or not isinstance(e, (int, tuple)):
        return None
    if isinstance(e, int):
        return e
    op, args = e[0], e[1:]
    if op == "slot":
        return bounds.get(args[0])
    if op == "floordiv" and isinstance(args[1], int) and args[1] > 0:
        a = upper_bound(args[0], bounds)
        return None if a is None else a // args[1]
    if op in ("add", "mul", "max"):
        parts = [upper_bound(x, bounds) for x in args]
        if None in parts or any(p < 0 for p in parts):
            return None
        return {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": max}[op](*parts)
    if op == "min":
        parts = [p for p in (upper_bound(x, bounds) for x in args) if p is not None]
        return min(parts) if parts else None
    return None


def plan_storage(f: VMFunction) -> StoragePlan:
    """The static storage plan of ``f`` (straight-line code: calls, then one ``Ret``)."""
    code, bounds = f.code, dict(f.upper_bounds)
    root: dict = {}  # register -> the allocation register it aliases (vm.builtin.copy)
    allocs: dict = {}  # allocation register -> its instruction index
    last_use: dict = {}
    kept: set = set()
    for pc, inst in enumerate(code):
        if isinstance(inst, Ret):
            kept.add(root.get(inst.reg, inst.reg))
            continue
        if not isinstance(inst, Call):
            continue
        regs = [root.get(a.index, a.index) for a in inst.args if isinstance(a, Reg)]
        if inst.kind == "builtin" and inst.func == ALLOC:
            allocs[inst.dst] = pc
            last_use[inst.dst] = pc
        elif inst.kind == "builtin" and inst.func == "vm.builtin.copy" and regs and regs[0] in allocs:
            root[inst.dst] = regs[0]
        elif inst.kind != "kernel" and not (inst.kind == "builtin" and inst.func in _PASSIVE):
            kept.update(regs)  # (a tuple, a packed function, a closure... may hold it for good)
        for r in regs:
            if r in allocs:
                last_use[r] = pc
    # a register made by make_tuple and returned keeps its fields: kept above, as a use by make_tuple
    tokens: list = []  # [size, bound, tensors]
    token_of: dict = {}
    free: list = []
    dying: dict = {}  # instruction index -> tokens free after it
    for reg, pc in allocs.items():
        if reg in kept:
            continue
        for at in [k for k in dying if k < pc]:
            free.extend(dying.pop(at))
        size = tensor_bytes(code[pc])
        bound = upper_bound(size, bounds)
        k = _best_fit(tokens, free, bound)
        if k is None:
            k = len(tokens)
            tokens.append([size, bound, []])
        else:
            free.remove(k)
            token = tokens[k]
            token[0] = _larger(token[0], size)
            token[1] = None if bound is None else max(token[1], bound)
        tokens[k][2].append(reg)
        token_of[reg] = k
        dying.setdefault(last_use[reg], []).append(k)
    outputs = tuple(r for r in allocs if r in kept)
    return StoragePlan(tuple(StorageToken(s, b, tuple(t)) for s, b, t in tokens), token_of, outputs)


def _larger(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return a if a == b else ("max", a, b)


def _best_fit(tokens: list, free: list, bound: int | None) -> int | None:
    """The free token for a tensor of ``bound`` bytes (None: unbounded): the smallest one at
    least as large, else the largest one (it grows); unbounded tensors share unbounded tokens."""
    if bound is None:
        return next((k for k in free if tokens[k][1] is None), None)
    sized = sorted((tokens[k][1], k) for k in free if tokens[k][1] is not None)
    if not sized:
        return None
    return next((k for b, k in sized if b >= bound), sized[-1][1])


__all__ = ["ALLOC_TENSOR", "DPS_OPS", "SeqPlan", "StoragePlan", "StorageToken", "plan_seq", "plan_storage",
           "tensor_bytes", "upper_bound"]
