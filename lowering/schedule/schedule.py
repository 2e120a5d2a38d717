"""The Schedule: a module under transformation, the handles it hands out, and its trace.

Every primitive runs as a transaction: on failure the module and the handle table are put back
as they were and a ScheduleError names the block or loop and the reason. A block handle is kept
as (function, block name) and a loop handle as (function, loop variable), which stay valid
while later primitives rebuild the immutable IR around them.
"""
from __future__ import annotations

import random
from typing import Any, Callable

from ...ir.deep import from_recursion, in_deep_walk, run_deep
from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.module import IRModule
from ...ir.dtype import DataType
from ...ir.expr import DATA_PAR, IntImm, Var, const
from ...ir.stmt import SERIAL, Block, BlockRealize, For
from ...script.dialect import get_dialect
from . import (annotation, block_layout, blockize, cache, cache_index, cache_inplace, compute_at, inline, layout,
               loop_kinds, loop_transform, pad_einsum, padding, partition, read_write_at, reduction, reindex_cache,
               rolling_buffer, rfactor, sampling, tensorize)
from . import epilogue as epilogue_module
from .errors import ScheduleError
from .random_vars import BlockRV, ExprRV, LoopRV
from .state import ScheduleState, StmtSRef, sref_of
from .trace import CLASSIC, Instruction, Trace
from .tree import (all_realizes, blocks_under, child_blocks, enclosing_loops, find_block, find_loop, find_realize,
                   parent_block, replace_stmts, walk_with_path)


ROOT, INLINE = "root", "inline"  # the two locations sample_compute_location names without a loop


def _check_scope(primitive: str, scope: Any) -> None:
    """A storage scope a primitive is given: a string such as "shared" (what a buffer holds)."""
    if not isinstance(scope, str):
        raise ScheduleError(f"{primitive}: the storage scope is a string such as \"shared\", got {scope!r}")


def _name_index(key: Any) -> tuple:
    """(name, k) of a block handle's key: the k-th block of that name."""
    return key if isinstance(key, tuple) else (key, 0)


class Schedule:
    """``Schedule(mod_or_func, seed=None)``: transform the TensorIR functions of a module."""

    def __init__(self, mod: "IRModule | PrimFunc", seed: int | None = None, dialect: str | None = None,
                 debug_mask: Any = "all", error_render_level: str = "detail", enable_check: bool = True):
        # debug_mask, error_render_level and enable_check are TVM's options; tvms always checks.
        if isinstance(mod, PrimFunc):  # TVM names it main, whatever its global symbol
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise ScheduleError(f"Schedule takes an IRModule or a PrimFunc, got {type(mod).__name__}")
        self._mod = mod.copy()
        prim_funcs = [name for name in mod if isinstance(mod[name], PrimFunc)]
        self._func_name: str | None = "main" if "main" in prim_funcs else (
            prim_funcs[0] if len(prim_funcs) == 1 else None)
        self._rng = random.Random(seed if seed is not None else random.randrange(1 << 31))
        self._rvs: dict = {}  # BlockRV -> (func, name); LoopRV -> (func, Var); ExprRV -> int
        # the trace prints in the dialect the module was written in (classic for one built in Python)
        self._trace = Trace(dialect=get_dialect(dialect).name if dialect else mod.source_dialect or CLASSIC)

    # ------------------------------------------------------------ state
    @property
    def mod(self) -> IRModule:
        return self._mod.copy()

    @property
    def trace(self) -> Trace:
        return self._trace.copy()

    @property
    def func_working_on(self) -> str | None:
        return self._func_name

    def work_on(self, func_name: str) -> None:
        self._prim_func(func_name)
        self._func_name = func_name

    def copy(self) -> "Schedule":
        """An independent schedule in the same state; the handles stay valid in both."""
        other = Schedule.__new__(Schedule)
        other._mod = self._mod.copy()
        other._func_name = self._func_name
        other._rng = random.Random()
        other._rng.setstate(self._rng.getstate())
        other._rvs = dict(self._rvs)
        other._trace = self._trace.copy()
        return other

    def seed(self, seed: int) -> None:
        self._rng.seed(seed)

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's generator (for a schedule of its own)."""
        return self._rng.randrange(1 << 31)

    def get(self, rv: Any) -> Any:
        """The current Block, For or integer a handle stands for (lists map element-wise)."""
        if isinstance(rv, (list, tuple)):
            return [self.get(r) for r in rv]
        if isinstance(rv, BlockRV):
            return self._block(rv)[1].block
        if isinstance(rv, LoopRV):
            return self._loop(rv, any_step=True)[1]
        if isinstance(rv, ExprRV):
            return self._int(rv)
        return rv

    @property
    def state(self) -> "ScheduleState":
        """A view of this schedule's module and srefs (see ``state.py`` for what tvms keeps)."""
        return ScheduleState(self)

    def get_sref(self, rand_var_or_stmt: Any) -> "StmtSRef | None":
        """The sref of a block or loop handle, or of a Block or For of the module (None when the
        module does not hold it)."""
        if isinstance(rand_var_or_stmt, (BlockRV, LoopRV)):
            fname, node, _ = self._block_or_loop(rand_var_or_stmt)
            node = node.block if isinstance(node, BlockRealize) else node
            return sref_of(self._prim_func(fname).body, node)
        if not isinstance(rand_var_or_stmt, (Block, For)):
            raise ScheduleError(f"get_sref takes a block or loop handle, a Block or a For, got "
                                f"{type(rand_var_or_stmt).__name__}")
        funcs = [self._mod[n] for n in self._mod if isinstance(self._mod[n], PrimFunc)]
        return next((found for f in funcs if (found := sref_of(f.body, rand_var_or_stmt)) is not None), None)

    def remove_rv(self, rv: Any) -> None:
        self._rvs.pop(rv, None)

    def show(self, **kwargs: Any) -> None:
        print(self._mod.script(**kwargs))

    # ------------------------------------------------------------ lookups
    def _prim_func(self, func_name: str | None) -> PrimFunc:
        if func_name is None:
            raise ScheduleError("the module has several functions; name one (func_name=... or work_on)")
        if func_name not in self._mod or not isinstance(self._mod[func_name], PrimFunc):
            raise ScheduleError(f"the module has no TensorIR function {func_name!r}")
        return self._mod[func_name]

    def _block(self, rv: Any) -> tuple[str, BlockRealize, tuple]:
        return self._lookup(rv, BlockRV, "block", find_block, lambda name: f"block '{name}'")

    def _loop(self, rv: Any, any_step: bool = False) -> tuple[str, For, tuple]:
        found = self._lookup(rv, LoopRV, "loop", find_loop, lambda var: f"loop '{var.name}'")
        loop = found[1]
        if not any_step and not loop.has_trivial_step:  # (the primitives count iterations as extents)
            raise ScheduleError(f"loop '{loop.loop_var.name}' has a step; the schedule transforms loops "
                                f"of step 1 (CanonicalizeLoop makes them so)")
        return found

    def _lookup(self, rv: Any, rv_type: type, what: str, finder: Callable, describe: Callable) -> tuple:
        """(function name, node, ancestors) of the block or loop a handle stands for."""
        if not isinstance(rv, rv_type):
            raise ScheduleError(f"expected a {what} handle ({rv_type.__name__}), got {type(rv).__name__}")
        where = self._rvs.get(rv)
        if where is None:
            raise ScheduleError(f"{rv!r} does not belong to this schedule or its {what} was removed")
        func_name, key = where
        found = finder(self._prim_func(func_name), key)
        if found is None:
            raise ScheduleError(f"{describe(key)} no longer exists in function {func_name!r} "
                                f"(a split, fuse, inline or rename replaced it)")
        return func_name, found[0], found[1]

    def _int(self, value: Any) -> Any:
        if isinstance(value, ExprRV):
            if value not in self._rvs:
                raise ScheduleError(f"{value!r} does not belong to this schedule")
            return self._rvs[value]
        return value

    def _new_blocks(self, func_name: str, realizes: list) -> list[BlockRV]:
        rvs = [BlockRV() for _ in realizes]
        for rv, r in zip(rvs, realizes):
            self._rvs[rv] = (func_name, r.block.name_hint)
        return rvs

    def _block_rv(self, func_name: str, stage: Any) -> BlockRV:
        """A handle of the block of the new statement ``stage``; a block whose name an earlier
        block already has is known as (name, k), the k-th of that name."""
        while not isinstance(stage, BlockRealize):
            stage = stage.body
        name = stage.block.name_hint
        same = [r for r, _ in walk_with_path(self._prim_func(func_name).body)
                if isinstance(r, BlockRealize) and r.block.name_hint == name]
        k = next(i for i, r in enumerate(same) if r.block is stage.block)
        rv = BlockRV()
        self._rvs[rv] = (func_name, name if k == 0 else (name, k))
        return rv

    def _made_blocks(self, func_name: str, before: PrimFunc, names: list[str]) -> list[BlockRV]:
        """Handles of the blocks named ``names`` that the last step made (those not in ``before``,
        the function as it was): an earlier block of the same name keeps its own handle."""
        old = {id(r.block) for r in all_realizes(before.body)}
        realizes = all_realizes(self._prim_func(func_name).body)
        return [self._block_rv(func_name, next(r for r in realizes if r.block.name_hint == name
                                               and id(r.block) not in old)) for name in names]

    def _new_loops(self, func_name: str, loop_vars: list) -> list[LoopRV]:
        rvs = [LoopRV() for _ in loop_vars]
        for rv, var in zip(rvs, loop_vars):
            self._rvs[rv] = (func_name, var)
        return rvs

    # ------------------------------------------------------------ transactions
    def _run(self, primitive: str, action: Callable[[], Any]) -> Any:
        """Run ``action``; on any failure restore the module and handles and raise ScheduleError.

        A primitive whose walk ran out of recursion on deeply nested IR is undone (module,
        handles, trace, random state) and run again with room for it (``ir.deep.run_deep``)."""
        saved_mod, saved_rvs = self._mod.copy(), dict(self._rvs)
        saved_trace, saved_rng = len(self._trace.insts), self._rng.getstate()
        try:
            try:
                return action()
            except Exception as err:  # noqa: BLE001 - only a walk out of stack is run again
                if not from_recursion(err) or in_deep_walk():
                    raise
            self._mod, self._rvs = saved_mod.copy(), dict(saved_rvs)
            while len(self._trace.insts) > saved_trace:
                self._trace.pop()
            self._rng.setstate(saved_rng)
            return run_deep(action)
        except ScheduleError:
            self._mod, self._rvs = saved_mod, saved_rvs
            raise
        except TVMSError as e:
            self._mod, self._rvs = saved_mod, saved_rvs
            raise ScheduleError(f"{primitive}: {e}") from None
        except BaseException:  # a bug or an interrupt: still leave the schedule as it was
            self._mod, self._rvs = saved_mod, saved_rvs
            raise

    def _record(self, kind: str, inputs: list, attrs: list, outputs: list, decision: Any = None) -> None:
        self._trace.append(Instruction(kind, list(inputs), list(attrs), list(outputs)), decision)

    def _update(self, func_name: str, func: PrimFunc) -> None:
        self._mod[func_name] = func

    # ------------------------------------------------------------ getting blocks and loops
    def get_sblock(self, name: str, func_name: str | None = None) -> BlockRV:
        def action() -> BlockRV:
            fname = func_name or self._func_name
            found = find_block(self._prim_func(fname), name)
            if found is None:
                raise ScheduleError(f"get_block: cannot find a block with the name {name!r} in "
                                    f"function {fname!r}")
            (rv,) = self._new_blocks(fname, [found[0]])
            self._record("GetSBlock", [], [name, fname], [rv])
            return rv
        return self._run("get_block", action)

    get_block = get_sblock

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        def action() -> list[LoopRV]:
            fname, _, path = self._block(block)
            rvs = self._new_loops(fname, [loop.loop_var for loop in enclosing_loops(path)])
            self._record("GetLoops", [block], [], rvs)
            return rvs
        return self._run("get_loops", action)

    def get_child_blocks(self, block_or_loop: "BlockRV | LoopRV") -> list[BlockRV]:
        def action() -> list[BlockRV]:
            fname, node, _ = self._block_or_loop(block_or_loop)
            rvs = self._new_blocks(fname, child_blocks(node))
            self._record("GetChildBlocks", [block_or_loop], [], rvs)
            return rvs
        return self._run("get_child_blocks", action)

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        return self._neighbours(block, "GetProducers")

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        return self._neighbours(block, "GetConsumers")

    def _neighbours(self, block: BlockRV, kind: str) -> list[BlockRV]:
        """Blocks of the same scope that write what ``block`` reads (producers), or read what it
        writes (consumers)."""
        def action() -> list[BlockRV]:
            fname, realize, path = self._block(block)
            found = (_producers if kind == "GetProducers" else _consumers)(realize, path)
            rvs = self._new_blocks(fname, found)
            self._record(kind, [block], [], rvs)
            return rvs
        return self._run(kind, action)

    def get_output_blocks(self, scope_block: BlockRV | None = None, *,
                          block: BlockRV | None = None) -> list[BlockRV]:
        """The blocks under ``scope_block`` (at any depth) that write a buffer their own scope
        block does not allocate, as TVM's ``GetOutputBlocks``."""
        # (TVM's method names it scope_block, while its printed traces say block=: both are read)
        if (scope_block is None) == (block is None):
            raise ScheduleError("get_output_blocks: give the scope block once (scope_block or block)")
        scope_block = scope_block if block is None else block

        def action() -> list[BlockRV]:
            fname, realize, _ = self._block(scope_block)
            found = [node for node, path in walk_with_path(realize.block.body, (realize.block,))
                     if isinstance(node, BlockRealize) and _writes_outside(node.block, parent_block(path))]
            rvs = self._new_blocks(fname, found)
            self._record("GetOutputBlocks", [scope_block], [], rvs)
            return rvs
        return self._run("get_output_blocks", action)

    def add_unit_loop(self, block_or_loop: "BlockRV | LoopRV") -> LoopRV:
        """A new loop ``u`` of extent 1 directly around the block or loop (TVM's ``AddUnitLoop``)."""
        def action() -> LoopRV:
            fname, node, path = self._block_or_loop(block_or_loop)
            if isinstance(node, BlockRealize) and parent_block(path) is None:
                raise ScheduleError("add_unit_loop: cannot add a loop on top of the root block")
            var = Var("u", DataType("int32"))
            func = replace_stmts(self._prim_func(fname),
                                 {id(node): For(var, const(0, "int32"), const(1, "int32"), SERIAL, node)})
            self._update(fname, func)
            (rv,) = self._new_loops(fname, [var])
            self._record("AddUnitLoop", [block_or_loop], [], [rv])
            return rv
        return self._run("add_unit_loop", action)

    def _block_or_loop(self, rv: Any) -> tuple[str, Any, tuple]:
        if isinstance(rv, LoopRV):
            return self._loop(rv)
        return self._block(rv)

    # ------------------------------------------------------------ loop transformations
    def split(self, loop: LoopRV, factors: list, preserve_unit_iters: bool = True,
              disable_predication: bool = False) -> list[LoopRV]:
        def action() -> list[LoopRV]:
            fname, node, _ = self._loop(loop)
            if not isinstance(factors, (list, tuple)):
                raise ScheduleError(f"split: factors must be a list, got {factors!r}")
            values = [self._int(f) for f in factors]
            func, new_vars = loop_transform.split(self._prim_func(fname), node, values,
                                                  preserve_unit_iters, disable_predication)
            self._update(fname, func)
            rvs = self._new_loops(fname, new_vars)
            self._record("Split", [loop, *factors], [bool(preserve_unit_iters), bool(disable_predication)], rvs)
            return rvs
        return self._run("split", action)

    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        def action() -> LoopRV:
            if not loops:
                raise ScheduleError("fuse: no loops given")
            found = [self._loop(rv) for rv in loops]
            fname = found[0][0]
            func, fused = loop_transform.fuse(self._prim_func(fname), [f[1] for f in found],
                                              preserve_unit_iters)
            self._update(fname, func)
            (rv,) = self._new_loops(fname, [fused])
            self._record("Fuse", list(loops), [bool(preserve_unit_iters)], [rv])
            return rv
        return self._run("fuse", action)

    def loop_partition(self, loop: LoopRV, factors: list, preserve_unit_iters: bool = True) -> list[LoopRV]:
        """Cut the loop into consecutive loops of the sizes ``factors`` (one may be None), each in an
        opaque block of its own (see ``partition.py``); returns the new loops."""
        def action() -> list[LoopRV]:
            fname, node, _ = self._loop(loop)
            if not isinstance(factors, (list, tuple)):
                raise ScheduleError(f"loop_partition: factors must be a list, got {factors!r}")
            func, new_vars = partition.loop_partition(self._prim_func(fname), node,
                                                      [self._int(f) for f in factors])
            self._update(fname, func)
            rvs = self._new_loops(fname, new_vars)
            self._record("LoopPartition", [loop, *factors], [bool(preserve_unit_iters)], rvs)
            return rvs
        return self._run("loop_partition", action)

    def merge(self, *loops: LoopRV) -> LoopRV:
        """Merge loop nests of the same extents into one (see ``loop_transform.merge``); returns
        the merged innermost loop."""
        def action() -> LoopRV:
            if len(loops) < 2:
                raise ScheduleError("merge: give at least two loops")
            found = [self._loop(rv) for rv in loops]
            fname = found[0][0]
            if any(f[0] != fname for f in found):
                raise ScheduleError("merge: the loops are in different functions")
            func, inner = loop_transform.merge(self._prim_func(fname), [(f[1], f[2]) for f in found])
            self._update(fname, func)
            (rv,) = self._new_loops(fname, [inner])
            self._record("Merge", list(loops), [], [rv])
            return rv
        return self._run("merge", action)

    def reorder(self, *ordered_loops: LoopRV) -> None:
        def action() -> None:
            found = [self._loop(rv) for rv in ordered_loops]
            if not found:
                raise ScheduleError("reorder: no loops given")
            fname = found[0][0]
            self._update(fname, loop_transform.reorder(self._prim_func(fname), [f[1] for f in found]))
            self._record("Reorder", list(ordered_loops), [], [])
        self._run("reorder", action)

    def _loop_kind(self, loop: LoopRV, primitive: str, kind: str) -> None:
        def action() -> None:
            fname, node, _ = self._loop(loop)
            self._update(fname, loop_kinds.set_kind(self._prim_func(fname), node, primitive))
            self._record(kind, [loop], [], [])
        self._run(primitive, action)

    def parallel(self, loop: LoopRV) -> None:
        self._loop_kind(loop, "parallel", "Parallel")

    def vectorize(self, loop: LoopRV) -> None:
        self._loop_kind(loop, "vectorize", "Vectorize")

    def unroll(self, loop: LoopRV) -> None:
        self._loop_kind(loop, "unroll", "Unroll")

    def bind(self, loop: LoopRV, thread_axis: str) -> None:
        def action() -> None:
            fname, node, _ = self._loop(loop)
            self._update(fname, loop_kinds.bind(self._prim_func(fname), node, thread_axis))
            self._record("Bind", [loop], [thread_axis], [])
        self._run("bind", action)

    def annotate(self, block_or_loop: "BlockRV | LoopRV", ann_key: str, ann_val: Any) -> None:
        def action() -> None:
            fname, node, _ = self._block_or_loop(block_or_loop)
            value = self._int(ann_val)
            self._update(fname, annotation.annotate(self._prim_func(fname), node, ann_key, value))
            self._record("Annotate", [block_or_loop, ann_val], [ann_key], [])
        self._run("annotate", action)

    def unannotate(self, block_or_loop: "BlockRV | LoopRV", ann_key: str) -> None:
        def action() -> None:
            fname, node, _ = self._block_or_loop(block_or_loop)
            self._update(fname, annotation.unannotate(self._prim_func(fname), node, ann_key))
            self._record("Unannotate", [block_or_loop], [ann_key], [])
        self._run("unannotate", action)

    def reorder_block_iter_var(self, block: BlockRV, new_order: list) -> None:
        """Permute the block's iteration variables (and their bindings): the k-th becomes the
        ``new_order[k]``-th of before (TVM's ``ReorderBlockIterVar``)."""
        def action() -> None:
            fname, realize, _ = self._block(block)
            order = [self._int(k) for k in new_order] if isinstance(new_order, (list, tuple)) else None
            n = len(realize.block.iter_vars)
            if order is None or sorted(order) != list(range(n)):
                raise ScheduleError(f"reorder_block_iter_var: the specified reorder indices are invalid: "
                                    f"{new_order!r} is not a permutation of [0, ..., {n - 1}] in block "
                                    f"{realize.block.name_hint!r}")
            iter_vars, values = realize.block.iter_vars, realize.iter_values
            new_block = realize.block.with_changes(iter_vars=tuple(iter_vars[k] for k in order))
            new_realize = realize.with_changes(block=new_block, iter_values=tuple(values[k] for k in order))
            self._update(fname, replace_stmts(self._prim_func(fname), {id(realize): new_realize}))
            self._record("ReorderBlockIterVar", [block, list(new_order)], [], [])
        return self._run("reorder_block_iter_var", action)

    # ------------------------------------------------------------ reductions
    def decompose_reduction(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        def action() -> BlockRV:
            fname, realize, path = self._block(block)
            loop_fname, node, _ = self._loop(loop)
            if loop_fname != fname:
                raise ScheduleError("decompose_reduction: the block and the loop are in different functions")
            old_name = realize.block.name_hint
            before = self._prim_func(fname)
            func, init_name = reduction.decompose_reduction(before, realize, path, node)
            self._update(fname, func)
            # handles of the block now name C_update; later blocks of the name C move up one
            decomposed = _name_index(self._rvs[block][1])
            (update,) = self._made_blocks(fname, before, [f"{old_name}_update"])
            for rv, where in list(self._rvs.items()):
                if not isinstance(rv, BlockRV) or where[0] != fname or _name_index(where[1])[0] != old_name:
                    continue
                k = _name_index(where[1])[1]
                if k == decomposed[1]:
                    self._rvs[rv] = self._rvs[update]
                elif k > decomposed[1]:
                    self._rvs[rv] = (fname, old_name if k == 1 else (old_name, k - 1))
            (rv,) = self._made_blocks(fname, before, [init_name])
            self._record("DecomposeReduction", [block, loop], [], [rv])
            return rv
        return self._run("decompose_reduction", action)

    def decompose_padding(self, block: BlockRV, loop: LoopRV) -> BlockRV:
        """Split a padding block into one filling the pad value, placed before ``loop``, and the
        block writing only the in-bound part (see ``padding.py``); returns the filling block."""
        def action() -> BlockRV:
            fname, realize, path = self._block(block)
            loop_fname, node, _ = self._loop(loop)
            if loop_fname != fname:
                raise ScheduleError("decompose_padding: the block and the loop are in different functions")
            before = self._prim_func(fname)
            func, name = padding.decompose_padding(before, realize, path, node)
            self._update(fname, func)
            (rv,) = self._made_blocks(fname, before, [name])
            self._record("DecomposePadding", [block, loop], [], [rv])
            return rv
        return self._run("decompose_padding", action)

    def can_decompose_padding(self, block: BlockRV, loop: LoopRV) -> bool:
        """Whether ``decompose_padding(block, loop)`` would succeed (not traced, as in TVM)."""
        fname, realize, path = self._block(block)
        _, node, _ = self._loop(loop)
        try:
            padding.decompose_padding(self._prim_func(fname), realize, path, node)
        except ScheduleError:
            return False
        return True

    def pad_einsum(self, block: BlockRV, padding: list) -> None:
        """Round the block's iterators up to multiples of ``padding``, through padded copies of
        its buffers (see ``pad_einsum.py``)."""
        def action() -> None:
            fname, realize, path = self._block(block)
            sizes = [self._int(p) for p in padding] if isinstance(padding, (list, tuple)) else padding
            if not isinstance(sizes, list):
                raise ScheduleError(f"pad_einsum: padding must be a list, got {padding!r}")
            self._update(fname, pad_einsum.pad_einsum(self._prim_func(fname), realize, path, sizes))
            self._record("PadEinsum", [block], [sizes], [])
        self._run("pad_einsum", action)

    def rolling_buffer(self, block: BlockRV, write_buffer_index: int) -> None:
        """Keep only a sliding window of the buffer the block writes, along the axis its tiles
        overlap on (see ``rolling_buffer.py``)."""
        def action() -> None:
            fname, realize, path = self._block(block)
            self._update(fname, rolling_buffer.rolling_buffer(self._prim_func(fname), realize, path,
                                                              write_buffer_index))
            self._record("RollingBuffer", [block], [write_buffer_index], [])
        self._run("rolling_buffer", action)

    # ------------------------------------------------------------ moving blocks
    def compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                   index: int = -1) -> None:
        self._compute_at(block, loop, preserve_unit_loops, index, reverse=False)

    def reverse_compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                           index: int = -1) -> None:
        self._compute_at(block, loop, preserve_unit_loops, index, reverse=True)

    def _compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool, index: int,
                    reverse: bool) -> None:
        primitive = "reverse_compute_at" if reverse else "compute_at"

        def action() -> None:
            if index != -1:
                raise ScheduleError(f"{primitive}: only index=-1 (next to the blocks it serves) is "
                                    f"supported, got {index}")
            fname, realize, path = self._block(block)
            location = self._rvs.get(loop)
            if location in (ROOT, INLINE):  # a location sample_compute_location chose
                if location == INLINE:
                    inliner = inline.reverse_compute_inline if reverse else inline.compute_inline
                    self._update(fname, inliner(self._prim_func(fname), realize))
                    self._rvs.pop(block, None)  # the block is gone
                self._record("ReverseComputeAt" if reverse else "ComputeAt", [block, loop],
                             [bool(preserve_unit_loops), index], [])
                return
            _, node, loop_path = self._loop(loop)
            func = compute_at.compute_at(self._prim_func(fname), realize, path, node, loop_path,
                                         bool(preserve_unit_loops), reverse)
            self._update(fname, func)
            self._record("ReverseComputeAt" if reverse else "ComputeAt", [block, loop],
                         [bool(preserve_unit_loops), index], [])
        self._run(primitive, action)

    # ------------------------------------------------------------ inlining and caches
    def compute_inline(self, block: BlockRV) -> None:
        self._block_rewrite(block, "compute_inline", "ComputeInline", inline.compute_inline)

    def reverse_compute_inline(self, block: BlockRV) -> None:
        self._block_rewrite(block, "reverse_compute_inline", "ReverseComputeInline",
                            inline.reverse_compute_inline)

    def fuse_reduction_epilogue(self, reduction_block: BlockRV, epilogue_block: BlockRV) -> None:
        """Fold an epilogue ``D = temp + C`` into the reduction writing ``temp`` (see
        ``epilogue.py``); the epilogue block is gone."""
        def action() -> None:
            fname, reduction, path = self._block(reduction_block)
            _, epilogue, _ = self._block(epilogue_block)
            self._update(fname, epilogue_module.fuse_reduction_epilogue(self._prim_func(fname), reduction, epilogue,
                                                                        path))
            self._rvs.pop(epilogue_block, None)  # the epilogue block is gone
            self._record("FuseReductionEpilogue", [reduction_block, epilogue_block], [], [])
        self._run("fuse_reduction_epilogue", action)

    def _block_rewrite(self, block: BlockRV, primitive: str, kind: str, rewrite: Callable) -> None:
        def action() -> None:
            fname, realize, _ = self._block(block)
            self._update(fname, rewrite(self._prim_func(fname), realize))
            self._rvs.pop(block, None)  # the block is gone
            self._record(kind, [block], [], [])
        self._run(primitive, action)

    def cache_read(self, block: BlockRV, read_buffer_index: int, storage_scope: str,
                   consumer_blocks: list | None = None) -> BlockRV:
        return self._cache(block, read_buffer_index, storage_scope, consumer_blocks, "CacheRead")

    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str,
                    consumer_blocks: list | None = None) -> BlockRV:
        return self._cache(block, write_buffer_index, storage_scope, consumer_blocks, "CacheWrite")

    def _cache(self, block: BlockRV, index: int, scope: str, consumer_blocks: list | None, kind: str) -> BlockRV:
        primitive = "cache_read" if kind == "CacheRead" else "cache_write"

        def action() -> BlockRV:
            _check_scope(primitive, scope)
            fname, realize, path = self._block(block)
            if kind == "CacheRead":
                consumers = [self._block(b)[1].block for b in consumer_blocks or []]
                func, stage = cache.cache_read(self._prim_func(fname), realize, path, index, scope, consumers)
            else:
                consumers = [self._block(b)[1].block.name_hint for b in consumer_blocks or []]
                func, stage = cache.cache_write(self._prim_func(fname), realize, path, index, scope, consumers)
            self._update(fname, func)
            rv = self._block_rv(fname, stage)
            self._record(kind, [block, list(consumer_blocks or [])], [index, scope], [rv])
            return rv
        return self._run(primitive, action)

    def cache_index(self, block: BlockRV, storage_scope: str, cse_thresh: int = 0) -> list[BlockRV]:
        """Precompute the block's index computations into buffers (see ``cache_index.py``);
        returns the new blocks."""
        def action() -> list[BlockRV]:
            _check_scope("cache_index", storage_scope)
            fname, realize, path = self._block(block)
            before = self._prim_func(fname)
            func, names = cache_index.cache_index(before, realize, path, storage_scope, cse_thresh)
            self._update(fname, func)
            rvs = self._made_blocks(fname, before, names)
            self._record("CacheIndex", [block], [storage_scope, cse_thresh], rvs)
            return rvs
        return self._run("cache_index", action)

    def reindex_cache_read(self, block: BlockRV, read_buffer_index: int, storage_scope: str,
                           index_map: Any) -> BlockRV:
        """A cache of the buffer the block reads, indexed by ``index_map`` of the block's iterators
        (see ``reindex_cache.py``); returns the copy block."""
        return self._reindex_cache(block, read_buffer_index, storage_scope, index_map, True)

    def reindex_cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str,
                            index_map: Any) -> BlockRV:
        """A cache of the buffer the block writes, indexed by ``index_map`` of the block's
        iterators and copied back after it; returns the copy block."""
        return self._reindex_cache(block, write_buffer_index, storage_scope, index_map, False)

    def _reindex_cache(self, block: BlockRV, index: int, scope: str, index_map: Any, is_read: bool) -> BlockRV:
        kind = "ReindexCacheRead" if is_read else "ReindexCacheWrite"

        def action() -> BlockRV:
            _check_scope("reindex_cache_read" if is_read else "reindex_cache_write", scope)
            fname, realize, path = self._block(block)
            before = self._prim_func(fname)
            func, name, imap = reindex_cache.reindex_cache(before, realize, path, index, scope, index_map, is_read)
            self._update(fname, func)
            (rv,) = self._made_blocks(fname, before, [name])
            self._record(kind, [block, imap], [index, scope], [rv])
            return rv
        return self._run("reindex_cache_read" if is_read else "reindex_cache_write", action)

    def cache_inplace(self, block: BlockRV, read_buffer_index: int, storage_scope: str) -> list[BlockRV]:
        """Work on a copy of a buffer the block reads and writes in place (see
        ``cache_inplace.py``); returns the copy-in and copy-out blocks."""
        def action() -> list[BlockRV]:
            _check_scope("cache_inplace", storage_scope)
            fname, realize, path = self._block(block)
            func, stages = cache_inplace.cache_inplace(self._prim_func(fname), realize, path, read_buffer_index,
                                                       storage_scope)
            self._update(fname, func)
            rvs = [self._block_rv(fname, stage) for stage in stages]  # (they share a name, as in TVM)
            self._record("CacheInplace", [block], [read_buffer_index, storage_scope], rvs)
            return rvs
        return self._run("cache_inplace", action)

    def read_at(self, loop: LoopRV, block: BlockRV, read_buffer_index: int, storage_scope: str) -> BlockRV:
        """Copy what one iteration of ``loop`` reads of the buffer into ``storage_scope`` (see
        ``read_write_at.py``); returns the copy block."""
        return self._read_write_at(loop, block, read_buffer_index, storage_scope, True)

    def write_at(self, loop: LoopRV, block: BlockRV, write_buffer_index: int, storage_scope: str) -> BlockRV:
        """Write what one iteration of ``loop`` writes of the buffer into ``storage_scope`` first,
        copied out after it; returns the copy block."""
        return self._read_write_at(loop, block, write_buffer_index, storage_scope, False)

    def _read_write_at(self, loop: LoopRV, block: BlockRV, index: int, scope: str, is_read: bool) -> BlockRV:
        def action() -> BlockRV:
            _check_scope("read_at" if is_read else "write_at", scope)
            fname, node, loop_path = self._loop(loop)
            _, realize, _ = self._block(block)
            func, copy = read_write_at.read_write_at(self._prim_func(fname), node, loop_path, realize, index,
                                                     scope, is_read)
            self._update(fname, func)
            rv = self._block_rv(fname, copy)
            self._record("ReadAt" if is_read else "WriteAt", [loop, block], [index, scope], [rv])
            return rv
        return self._run("read_at" if is_read else "write_at", action)

    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        def action() -> None:
            _check_scope("set_scope", storage_scope)
            fname, realize, _ = self._block(block)
            self._update(fname, cache.set_scope(self._prim_func(fname), realize, buffer_index, storage_scope))
            self._record("SetScope", [block], [buffer_index, storage_scope], [])
        self._run("set_scope", action)

    def unsafe_hide_buffer_access(self, block: BlockRV, buf_type: str, buf_index_array: list) -> None:
        """Drop the block's read (``buf_type="read"``) or write regions at ``buf_index_array``
        from its signature (unsafe: dependence analysis no longer sees those accesses)."""
        def action() -> None:
            fname, realize, _ = self._block(block)
            b = realize.block
            if buf_type not in ("read", "write"):
                raise ScheduleError(f"unsafe_hide_buffer_access: buf_type must be 'read' or 'write', "
                                    f"got {buf_type!r}")
            regions = b.reads if buf_type == "read" else b.writes
            indices = [self._int(k) for k in buf_index_array]
            bad = [k for k in indices if not isinstance(k, int) or not 0 <= k < len(regions)]
            if bad:
                raise ScheduleError(f"unsafe_hide_buffer_access: index {bad[0]!r} is out of range: block "
                                    f"'{b.name_hint}' has {len(regions)} {buf_type} region(s)")
            kept = tuple(r for k, r in enumerate(regions) if k not in set(indices))
            new_block = b.with_changes(**{"reads" if buf_type == "read" else "writes": kept})
            self._update(fname, replace_stmts(self._prim_func(fname), {id(b): new_block}))
            self._record("UnsafeHideBufferAccess", [block, buf_type, list(buf_index_array)], [], [])
        self._run("unsafe_hide_buffer_access", action)

    def annotate_buffer_access(self, block: BlockRV, buffer_index: int, buf_type: str,
                               gen_new_ranges: Callable) -> None:
        """Set the region the block reads (``buf_type="read"``) or writes of its ``buffer_index``-th
        buffer: ``gen_new_ranges(*iterators)`` gives per iterator a (begin, end) pair or a point,
        and the block is annotated ``explicit_read_region`` / ``explicit_write_region``."""
        def action() -> None:
            fname, realize, _ = self._block(block)
            if buf_type not in ("read", "write"):
                raise ScheduleError(f"annotate_buffer_access: buf_type must be 'read' or 'write', got {buf_type!r}")
            ranges = annotation.explicit_ranges(realize.block, gen_new_ranges)
            func = annotation.annotate_buffer_access(self._prim_func(fname), realize.block, buffer_index,
                                                     buf_type, ranges)
            self._update(fname, func)
            self._record("AnnotateBufferAccess", [block, buffer_index, ("read", "write").index(buf_type), ranges],
                         [], [])
        self._run("annotate_buffer_access", action)

    def unsafe_set_dtype(self, block: BlockRV, buffer_index: int, dtype: str) -> None:
        """Store the buffer the block writes at ``buffer_index`` as ``dtype``; its stores and
        loads convert (unsafe: precision may be lost)."""
        def action() -> None:
            fname, realize, _ = self._block(block)
            self._update(fname, cache.unsafe_set_dtype(self._prim_func(fname), realize, buffer_index, dtype))
            self._record("UnsafeSetDType", [block], [buffer_index, dtype], [])
        self._run("unsafe_set_dtype", action)

    def storage_align(self, block: BlockRV, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        def action() -> None:
            fname, realize, _ = self._block(block)
            self._update(fname, cache.storage_align(self._prim_func(fname), realize, buffer_index, axis,
                                                    factor, offset))
            self._record("StorageAlign", [block], [buffer_index, axis, factor, offset], [])
        self._run("storage_align", action)

    def blockize(self, target: LoopRV, preserve_unit_iters: bool = True) -> BlockRV:
        def action() -> BlockRV:
            if not isinstance(target, LoopRV):
                raise ScheduleError("blockize: only a loop target is supported (not a list of blocks)")
            fname, node, _ = self._loop(target)
            func, outer_name = blockize.blockize(self._prim_func(fname), node)
            self._update(fname, func)
            (rv,) = self._new_blocks(fname, [find_block(func, outer_name)[0]])
            self._record("Blockize", [target], [bool(preserve_unit_iters)], [rv])
            return rv
        return self._run("blockize", action)

    def tensorize(self, block_or_loop: "BlockRV | LoopRV", tensor_intrin: str,
                  preserve_unit_iters: bool = True) -> None:
        """Replace the computation of a block (or of the subtree under a loop, blockized first)
        with the registered tensor intrinsic ``tensor_intrin`` whose description it matches."""
        def action() -> None:
            if not isinstance(tensor_intrin, str):
                raise ScheduleError(f"tensorize: the tensor intrinsic is named by a string, got {tensor_intrin!r}")
            intrin = tensorize.TensorIntrin.get(tensor_intrin)
            fname, node, _ = self._block_or_loop(block_or_loop)
            func = self._prim_func(fname)
            if isinstance(node, For):
                func, name = blockize.blockize(func, node)
            else:
                name = node.block.name_hint
            self._update(fname, tensorize.tensorize(func, name, intrin))
            self._record("Tensorize", [block_or_loop], [tensor_intrin, bool(preserve_unit_iters)], [])
        return self._run("tensorize", action)

    def rfactor(self, loop: LoopRV, factor_axis: int = 0) -> BlockRV:
        def action() -> BlockRV:
            fname, node, _ = self._loop(loop)
            func = self._prim_func(fname)
            reductions = [r for r in blocks_under(node.body) if r.block.init is not None]
            if len(reductions) != 1:
                raise ScheduleError(f"rfactor: loop '{node.loop_var.name}' must hold exactly one reduction "
                                    f"block, it holds {len(reductions)}")
            realize, path = find_realize(func, reductions[0])
            new_func, rf_name = rfactor.rfactor(func, realize, path, node, factor_axis)
            self._update(fname, new_func)
            # (a second rfactor of the same block makes a second block of that name)
            (rv,) = self._made_blocks(fname, func, [rf_name])
            self._record("RFactor", [loop], [factor_axis], [rv])
            return rv
        return self._run("rfactor", action)

    def transform_layout(self, block: BlockRV, buffer: "tuple | str", index_map: Any,
                         pad_value: Any = None, assume_injective_transform: bool = False) -> None:
        """Store ``buffer`` in the layout ``index_map`` gives (``layout.py``); ``pad_value`` (a number,
        a function of the new indices) fills the places no element goes to (``layout_pad.py``)."""
        def action() -> None:
            fname, realize, _ = self._block(block)
            kind, index = self._buffer_position(realize.block, buffer)
            sampled = isinstance(index_map, layout.SampledIndexMap)
            bound = index_map.bind(self._int) if sampled else index_map
            func, imap, pad_map = layout.transform_layout(self._prim_func(fname), realize, kind, index, bound,
                                                          pad_value, bool(assume_injective_transform))
            self._update(fname, func)
            # (TVM 0.27 records the caller's IndexMap as given, int32 indices on an int64 buffer
            # included; a function it records as converted)
            recorded = index_map if sampled or isinstance(index_map, layout.IndexMap) else imap
            self._record("TransformLayout", [block, recorded, pad_map], [(kind, index),
                                                                         bool(assume_injective_transform)], [])
        self._run("transform_layout", action)

    def reindex(self, block: BlockRV, buffer: "tuple | str") -> BlockRV:
        """A stage copying ``buffer`` (``("read", 0)``, ``("write", 0)`` or a name) into or out of a
        buffer indexed by the block's iterators (see ``cache.reindex``); returns the stage."""
        def action() -> BlockRV:
            fname, realize, path = self._block(block)
            kind, index = self._buffer_position(realize.block, buffer)
            if kind not in ("read", "write"):
                raise ScheduleError(f"reindex: the buffer kind must be 'read' or 'write', got {kind!r}")
            func, name = cache.reindex(self._prim_func(fname), realize, path, kind, index)
            self._update(fname, func)
            (rv,) = self._new_blocks(fname, [find_block(func, name)[0]])
            self._record("ReIndex", [block], [index, ("read", "write").index(kind)], [rv])
            return rv
        return self._run("reindex", action)

    def transform_block_layout(self, block: BlockRV, index_map: Any) -> None:
        """Give the block new iterators through ``index_map`` (see ``block_layout.py``)."""
        def action() -> None:
            fname, realize, path = self._block(block)
            func, imap = block_layout.transform_block_layout(self._prim_func(fname), realize, path, index_map)
            self._update(fname, func)
            self._record("TransformBlockLayout", [block, imap], [], [])
        self._run("transform_block_layout", action)

    @staticmethod
    def _buffer_position(block: Any, buffer: Any) -> tuple[str, int]:
        """``("write", 0)`` for a buffer given as such a pair or by name."""
        if isinstance(buffer, (tuple, list)) and len(buffer) == 2:
            return str(buffer[0]), buffer[1]
        for kind, regions in (("write", block.writes), ("read", block.reads)):
            for i, region in enumerate(regions):
                if region.buffer.name == buffer:
                    return kind, i
        raise ScheduleError(f"block '{block.name_hint}' accesses no buffer {buffer!r}")

    # ------------------------------------------------------------ sampling
    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                            decision: list | None = None) -> list[ExprRV]:
        def action() -> list[ExprRV]:
            _, node, _ = self._loop(loop)
            extent = loop_transform.const_extent(node, "sample_perfect_tile")
            chosen = sampling.sample_perfect_tile(self._rng, extent, n, max_innermost_factor, decision,
                                                  node.loop_var.name)
            rvs = [ExprRV() for _ in chosen]
            self._rvs.update(zip(rvs, chosen))
            self._record("SamplePerfectTile", [loop], [n, max_innermost_factor], rvs, chosen)
            return rvs
        return self._run("sample_perfect_tile", action)

    def sample_partitioned_tile(self, loop: LoopRV, n: int, partition_pos: int = 0, innerpart_factor: int = 1,
                                decision: list | None = None) -> list[ExprRV]:
        """Like ``sample_perfect_tile``, with the factors from ``partition_pos`` on multiplying to
        a multiple of ``innerpart_factor``."""
        def action() -> list[ExprRV]:
            _, node, _ = self._loop(loop)
            extent = loop_transform.const_extent(node, "sample_partitioned_tile")
            chosen = sampling.sample_partitioned_tile(self._rng, extent, n, partition_pos, innerpart_factor,
                                                      decision, node.loop_var.name)
            rvs = [ExprRV() for _ in chosen]
            self._rvs.update(zip(rvs, chosen))
            self._record("SamplePartitionedTile", [loop], [n, partition_pos, innerpart_factor], rvs, chosen)
            return rvs
        return self._run("sample_partitioned_tile", action)

    def sample_categorical(self, candidates: list, probs: list, decision: int | None = None) -> ExprRV:
        def action() -> ExprRV:
            index = sampling.sample_categorical(self._rng, list(candidates), list(probs), decision)
            rv = ExprRV()
            self._rvs[rv] = candidates[index]
            self._record("SampleCategorical", [], [list(candidates), list(probs)], [rv], index)
            return rv
        return self._run("sample_categorical", action)

    def sample_compute_location(self, block: BlockRV, decision: int | None = None) -> LoopRV:
        """A place to compute ``block`` at, as TVM numbers them: inlined (-2), the root (-1), or
        the loop at position k among its first consumer's loops (k). A decision that is no longer
        a place falls back to the nearest place before it (the root when none), as TVM's does."""
        def action() -> LoopRV:
            fname = self._block(block)[0]
            if decision is None:
                places = self.compute_location_places(block)
                chosen = self._rng.choice(list(places))
            elif not isinstance(decision, int) or isinstance(decision, bool):
                raise ScheduleError(f"sample_compute_location: the decision is an integer, got {decision!r}")
            else:  # (only the places at or before the decision are checked, nearest first)
                places = self._places(block, decision)
                chosen = max((p for p in places if p <= decision), default=-1)
            rv = LoopRV()
            self._rvs[rv] = {-2: INLINE, -1: ROOT}.get(chosen) or (fname, places[chosen].loop_var)
            self._record("SampleComputeLocation", [block], [], [rv], chosen)
            return rv
        return self._run("sample_compute_location", action)

    def compute_location_places(self, block: BlockRV) -> dict:
        """TVM's CollectComputeLocation: {decision: loop or None} of the places ``block`` can go,
        in order: inlined (-2) when it inlines, the root (-1), and the loops of its first consumer
        down to the consumers' common loop, skipping unit loops, data-parallel loops after a
        reduction loop and trailing reduction loops, where compute_at succeeds."""
        return self._places(block)

    def _places(self, block: BlockRV, decision: int | None = None) -> dict:
        """``compute_location_places``; given a decision, only the places a sampler needs to
        resolve it: those at or before it, down to the first where the block can go."""
        fname, realize, path = self._block(block)
        func = self._prim_func(fname)
        places: dict = {}
        if decision is None or decision == -2:
            try:
                inline.compute_inline(func, realize)
                places[-2] = None
            except TVMSError:
                pass
        places[-1] = None
        if decision is not None and decision < 0:
            return places
        found = {id(c) for c in _consumers(realize, path)}
        consumers = [tuple(p for p in c_path if isinstance(p, (Block, For))) + (c,)
                     for c, c_path in walk_with_path(func.body) if id(c) in found]  # (TVM's sref tree)
        if not consumers:
            return places
        shared = consumers[0][:-1]
        for other in consumers[1:]:
            common = next((i for i, (a, b) in enumerate(zip(shared, other)) if a is not b), min(len(shared), len(other)))
            shared = shared[:common]
        loops = enclosing_loops(consumers[0][:-1])
        if not shared or not isinstance(shared[-1], For) or not any(loop is shared[-1] for loop in loops):
            return places
        candidates = loops[:next(i for i, loop in enumerate(loops) if loop is shared[-1]) + 1]
        kinds = [loop_kinds.loop_iter_type(loop) for loop in candidates]
        last_data_par = max((i for i, kind in enumerate(kinds) if kind == DATA_PAR), default=-1)
        seen_reduce = False
        eligible = []
        for i, (loop, kind) in enumerate(zip(candidates, kinds)):
            if isinstance(loop.extent, IntImm) and loop.extent.value == 1:
                continue
            if kind != DATA_PAR:
                seen_reduce = True
                if i > last_data_par:
                    break
            elif seen_reduce:
                break
            eligible.append((i, loop))
        if decision is not None:
            eligible = [(i, loop) for i, loop in reversed(eligible) if i <= decision]
        for i, loop in eligible:
            try:
                compute_at.compute_at(func, realize, path, loop, find_loop(func, loop.loop_var)[1], True, False)
            except TVMSError:
                continue
            places[i] = loop
            if decision is not None:
                break
        return places

    def enter_postproc(self) -> None:
        """Mark where post-processing starts (``remove_postproc`` cuts the trace here)."""
        self._record("EnterPostproc", [], [], [])


def _producers(realize: BlockRealize, path: tuple) -> list[BlockRealize]:
    """The blocks of ``realize``'s scope before it that write what it reads: by the buffers it
    reads, in the order of its reads, each buffer's writers in program order (as TVM's block
    scope records the dependencies)."""
    siblings = child_blocks(parent_block(path))
    index = next(i for i, r in enumerate(siblings) if r is realize)
    found: list[BlockRealize] = []
    for read in realize.block.reads:
        found += [r for r in siblings[:index] if any(w.buffer is read.buffer for w in r.block.writes)
                  and all(r is not f for f in found)]
    return found


def _consumers(realize: BlockRealize, path: tuple) -> list[BlockRealize]:
    """The blocks of ``realize``'s scope after it that read what it writes."""
    siblings = child_blocks(parent_block(path))
    index = next(i for i, r in enumerate(siblings) if r is realize)
    mine = {id(w.buffer) for w in realize.block.writes}
    return [r for r in siblings[index + 1:] if any(id(x.buffer) in mine for x in r.block.reads)]


def _writes_outside(block: Block, scope: Block | None) -> bool:
    """Whether ``block`` writes a buffer that its scope block does not allocate (TVM's
    ``IsOutputBlock``)."""
    allocated = {id(b) for b in scope.alloc_buffers} if scope is not None else set()
    return any(id(w.buffer) not in allocated for w in block.writes)


__all__ = ["Schedule", "ScheduleError", "BlockRV", "LoopRV", "ExprRV"]
