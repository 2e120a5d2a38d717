"""ManifestSharedMemoryLocalStage: a copy into shared memory marked
``tirx.manifest_shared_memory_local_stage`` goes through registers, as TVM 0.27's pass does.

The marked block (a single store to a ``shared`` buffer, under serial or vectorized loops that
each hold only the next one) keeps its store but takes the value from a new ``local`` buffer
``<name>_local`` shaped by those loops' extents; a copy of the loop nest that fills the local
buffer with the stored value is placed just before the statement that holds the marked block, in
the block that allocates the shared buffer (which also allocates the local one). Split so, the
global loads can be issued a pipeline stage ahead of the shared stores (the DLight tensor-core
rule marks its copies so, and counts these statements in its ``software_pipeline_stage``).
"""
from __future__ import annotations

from ....ir.arith.operators import binary
from ....ir.buffer import BufferRegion, decl_buffer
from ....ir.errors import TVMSError
from ....ir.expr import Add, BufferLoad, Range, const
from ....ir.function import PrimFunc
from ....ir.stmt import SERIAL, VECTORIZED, Block, BlockRealize, BufferStore, For, SeqStmt, Stmt
from ....ir.analysis import substitute
from ....ir.visitor import Mutator
from ..tir_pass import define_tir_pass

# the mark as parsed (``tirx.`` is read as ``tir.``) and as a schedule may write it
MARKS = ("tir.manifest_shared_memory_local_stage", "tirx.manifest_shared_memory_local_stage")


class _Inserter(Mutator):
    def __init__(self) -> None:
        self.ancestors: list = []  # the loops and block realizes around the statement visited
        self.local: dict = {}  # shared buffer -> (local buffer, the statement filling it)
        self.targets: list = []  # the shared buffers, in the order their marked blocks were met

    def _enclosing(self, node: For | BlockRealize) -> Stmt:
        self.ancestors.append(node)
        try:
            return self.generic_visit(node)
        finally:
            self.ancestors.pop()

    visit_For = visit_BlockRealize = _enclosing

    def visit_Block(self, block: Block) -> Stmt:
        if any(mark in block.annotations for mark in MARKS):
            return self.manifest(block)
        allocated = set(block.alloc_buffers)
        statements, allocs = [], []
        children = block.body.seq if isinstance(block.body, SeqStmt) else (block.body,)
        changed = False
        for child in children:
            first = len(self.targets)
            new = self.visit(child)
            for target in self.targets[first:]:
                if target in allocated:  # (the local stage goes where the shared buffer lives)
                    buffer, stage = self.local[target]
                    statements.append(stage)
                    allocs.append(buffer)
            statements.append(new)
            changed = changed or new is not child
        if not changed:
            return block
        body = statements[0] if len(statements) == 1 else SeqStmt(tuple(statements))
        return block.with_changes(body=body, alloc_buffers=block.alloc_buffers + tuple(allocs))

    def manifest(self, block: Block) -> Block:
        store = block.body
        if not isinstance(store, BufferStore) or store.buffer.scope not in ("shared", "shared.dyn"):
            raise TVMSError(f"ManifestSharedMemoryLocalStage: block {block.name_hint!r} must be a single store to "
                            "shared memory")
        target = store.buffer
        realize = self.ancestors[-1]
        loops = []  # innermost first
        for k in range(len(self.ancestors) - 2, -1, -1):
            node = self.ancestors[k]
            if isinstance(node, BlockRealize):
                if target not in node.block.alloc_buffers:
                    raise TVMSError(f"ManifestSharedMemoryLocalStage: the shared buffer {target.name!r} must be "
                                    f"allocated in the block around the loops of block {block.name_hint!r}")
                break
            if node.kind not in (SERIAL, VECTORIZED):
                raise TVMSError(f"ManifestSharedMemoryLocalStage: the loops around block {block.name_hint!r} must be "
                                f"serial or vectorized, not {node.kind} ({node.loop_var.name})")
            if node.body is not self.ancestors[k + 1]:
                raise TVMSError(f"ManifestSharedMemoryLocalStage: each loop around block {block.name_hint!r} must "
                                "hold only the next")
            loops.append(node)
        outer_first = loops[::-1]
        indices = tuple(binary(Add, loop.min, loop.loop_var) for loop in outer_first)
        local = decl_buffer(tuple(loop.extent for loop in outer_first), target.dtype, f"{target.name}_local",
                            scope="local")
        fill = BufferStore(local, store.value, indices)
        point = BufferRegion(local, tuple(Range(i, const(1, i.dtype)) for i in indices))
        stage: Stmt = BlockRealize((), realize.predicate, Block(iter_vars=(), reads=block.reads, writes=(point,),
                                                                 body=fill))
        renamed = {}
        for loop in loops:  # (the copy's loops have variables of their own)
            var = loop.loop_var.with_changes()
            renamed[loop.loop_var] = var
            stage = loop.with_changes(loop_var=var, body=stage)
        self.local[target] = (local, substitute(stage, renamed))
        self.targets.append(target)
        annotations = {k: v for k, v in block.annotations.items() if k not in MARKS}
        return block.with_changes(body=store.with_changes(value=BufferLoad(local, indices)),
                                  annotations=type(block.annotations)(annotations))


def manifest_shared_memory_local_stage(func: PrimFunc) -> PrimFunc:
    """``func`` with its marked shared-memory copies staged through local buffers (see the module)."""
    body = _Inserter().visit(func.body)
    return func if body is func.body else func.with_changes(body=body)


ManifestSharedMemoryLocalStage = define_tir_pass("ManifestSharedMemoryLocalStage", manifest_shared_memory_local_stage)

__all__ = ["ManifestSharedMemoryLocalStage", "manifest_shared_memory_local_stage"]
