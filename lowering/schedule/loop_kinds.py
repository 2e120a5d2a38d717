"""What a loop runs as: parallel, vectorized, unrolled, or bound to a GPU thread axis."""
from __future__ import annotations

from ...ir.expr import COMM_REDUCE, DATA_PAR, OPAQUE, THREAD_INDEX, IterVar, Var
from ...ir.function import PrimFunc
from ...ir.stmt import PARALLEL, THREAD_BINDING, UNROLLED, VECTORIZED, For
from .errors import ScheduleError
from .loop_transform import uses_var
from .tree import blocks_under, replace_stmts


def _check_data_parallel(loop: For, primitive: str, allow_reduce: bool) -> None:
    """Blocks under ``loop`` may bind it only to data-parallel iterators."""
    allowed = (DATA_PAR, COMM_REDUCE) if allow_reduce else (DATA_PAR,)
    ids = {id(loop.loop_var)}
    for realize in blocks_under(loop.body):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.iter_type not in allowed and uses_var(value, ids):
                raise ScheduleError(
                    f'{primitive}: the "{primitive}" of loop \'{loop.loop_var.name}\' cannot be fulfilled '
                    f"with regard to block '{realize.block.name_hint}' because its block iter "
                    f"'{iv.var.name}', whose binding contains the loop var, is not a data parallel "
                    f"block iter")


def set_kind(func: PrimFunc, loop: For, primitive: str) -> PrimFunc:
    kind = {"parallel": PARALLEL, "vectorize": VECTORIZED, "unroll": UNROLLED}[primitive]
    if primitive != "unroll":
        _check_data_parallel(loop, primitive, allow_reduce=False)
    return replace_stmts(func, {id(loop): loop.with_changes(kind=kind, thread_binding=None)})


def bind(func: PrimFunc, loop: For, thread_axis: str) -> PrimFunc:
    if not isinstance(thread_axis, str) or not thread_axis:
        raise ScheduleError(f"bind: the thread axis of loop '{loop.loop_var.name}' must be a name "
                            f"such as 'threadIdx.x', got {thread_axis!r}")
    # threads of one block may cooperate on a reduction; other thread axes must be data parallel
    _check_data_parallel(loop, "bind", allow_reduce=thread_axis.startswith("threadIdx"))
    thread = IterVar(None, Var("", loop.loop_var.dtype), THREAD_INDEX, thread_axis)
    return replace_stmts(func, {id(loop): loop.with_changes(kind=THREAD_BINDING, thread_binding=thread)})


def loop_iter_type(loop: For) -> str:
    """DataPar, CommReduce or Opaque: what the blocks under ``loop`` bind its variable to."""
    ids = {id(loop.loop_var)}
    seen = set()
    for realize in blocks_under(loop.body):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if uses_var(value, ids):
                seen.add(iv.iter_type if iv.iter_type in (DATA_PAR, COMM_REDUCE) else OPAQUE)
    if OPAQUE in seen or len(seen) > 1:
        return OPAQUE
    return COMM_REDUCE if COMM_REDUCE in seen else DATA_PAR
