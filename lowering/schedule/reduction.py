"""decompose_reduction: a reduction block's ``T.init()`` becomes a block of its own.

``C`` becomes ``C_init`` (the init, over the spatial iterators only, under copies ``i_init`` of
the loops it needs, placed just before the chosen loop) and ``C_update`` (the reduction, which
now reads its output).
"""
from __future__ import annotations

from ...ir.analysis import substitute
from ...ir.expr import DATA_PAR, IterVar, Var
from ...ir.function import PrimFunc
from ...ir.stmt import Block, BlockRealize, For, SeqStmt, Stmt
from ...ir.structural import structural_equal
from .errors import ScheduleError
from .loop_transform import conjoin, conjuncts, uses_var
from .tree import find_loop, replace_stmts


def decompose_reduction(func: PrimFunc, realize: BlockRealize, block_path: tuple,
                        loop: For) -> tuple[PrimFunc, str]:
    """Returns the new function and the init block's name."""
    block = realize.block
    name = block.name_hint
    if not any(node is loop for node in block_path):
        raise ScheduleError(f"decompose_reduction: loop '{loop.loop_var.name}' is not an ancestor "
                            f"of block '{name}'")
    if block.init is None:
        raise ScheduleError(f"decompose_reduction: block '{name}' is not a reduction block "
                            f"(it has no T.init())")
    start = next(i for i, node in enumerate(block_path) if node is loop)
    inner = block_path[start:]
    if any(isinstance(node, (Block, BlockRealize)) for node in inner):
        raise ScheduleError(f"decompose_reduction: loop '{loop.loop_var.name}' is outside the "
                            f"scope that holds block '{name}'")
    loops = [node for node in inner if isinstance(node, For)]
    # The init block: the spatial iterators, bound as before but to fresh copies of the loops.
    spatial = [(iv, value) for iv, value in zip(block.iter_vars, realize.iter_values)
               if iv.iter_type == DATA_PAR]
    loop_ids = {id(node.loop_var) for node in loops}
    needed = [node for node in loops
              if any(uses_var(value, {id(node.loop_var)}) for _, value in spatial)]
    _check_reduction_loops(block, realize, block_path[:start], needed, loop)
    loop_map = {node.loop_var: Var(f"{node.loop_var.name}_init", node.loop_var.dtype) for node in needed}
    iter_map = {iv.var: Var(iv.var.name, iv.var.dtype) for iv, _ in spatial}
    init_iters = tuple(IterVar(iv.dom, iter_map[iv.var], iv.iter_type, iv.thread_tag) for iv, _ in spatial)
    init_values = tuple(substitute(value, loop_map) for _, value in spatial)
    writes = tuple(substitute(w, iter_map) for w in block.writes)
    init_block = Block(init_iters, (), (), (), writes, f"{name}_init", None, substitute(block.init, iter_map),
                       block.annotations)  # (TVM's init block keeps the block's annotations)
    # Guards on loops the init does not run under (reduction loops) do not apply to it.
    absent = loop_ids - {id(v) for v in loop_map}
    predicate = conjoin([g for g in conjuncts(realize.predicate) if not uses_var(g, absent)])
    init: Stmt = BlockRealize(init_values, substitute(predicate, loop_map), init_block)
    for node in reversed(needed):
        init = node.with_changes(loop_var=loop_map[node.loop_var], body=init)
    # The update block reads what it accumulates into (a buffer of its own: two buffers of one shape
    # are structurally equal).
    reads = tuple(w for w in block.writes
                  if not any(r.buffer is w.buffer and structural_equal(w, r) for r in block.reads)) + block.reads
    update = block.with_changes(init=None, name_hint=f"{name}_update", reads=reads)
    func = replace_stmts(func, {id(block): update})
    new_loop = find_loop(func, loop.loop_var)[0]
    return replace_stmts(func, {id(new_loop): SeqStmt((init, new_loop))}), f"{name}_init"


def _check_reduction_loops(block: Block, realize: BlockRealize, above: tuple, needed: list,
                           loop: For) -> None:
    """The init must run once per output element: no loop outside ``loop`` may iterate the
    reduction, and no loop the init repeats may iterate both the output and the reduction."""
    reduce_values = [value for iv, value in zip(block.iter_vars, realize.iter_values)
                     if iv.iter_type != DATA_PAR]
    name = block.name_hint
    for node in above:
        if isinstance(node, For) and any(uses_var(v, {id(node.loop_var)}) for v in reduce_values):
            raise ScheduleError(f"decompose_reduction: loop '{node.loop_var.name}' above loop "
                                f"'{loop.loop_var.name}' iterates the reduction of block '{name}'")
    for node in needed:
        if any(uses_var(v, {id(node.loop_var)}) for v in reduce_values):
            raise ScheduleError(f"decompose_reduction: loop '{node.loop_var.name}' iterates both the "
                                f"output and the reduction of block '{name}'")
