"""Storage scopes and thread tags as TVM's runtime reads them (StorageScope, ThreadScope), and which
threads share one allocation of a scope: what the schedule primitives, CompactBufferAllocation and
the GPU passes ask of them."""
from __future__ import annotations

from ..ir.errors import TVMSError

# TVM's StorageRank of a scope: the part before the first dot for the plain memories (``shared.dyn``
# is shared), the whole name for the fragments
GLOBAL, SHARED, WARP, LOCAL, WMMA_A, WMMA_B, WMMA_ACCUMULATOR, MMA_C = 0, 1, 2, 3, 4, 5, 6, 11
_RANKS = {"global": GLOBAL, "shared": SHARED, "warp": WARP, "local": LOCAL,
          "wmma.matrix_a": WMMA_A, "wmma.matrix_b": WMMA_B, "wmma.accumulator": WMMA_ACCUMULATOR, "texture": 7,
          "amx.tmm": 8, "m16n8k8.matrixA": 9, "m16n8k8.matrixB": 10, "m16n8k8.matrixC": MMA_C, "metal.simdgroup": 12}


def storage_rank(scope: str) -> int:
    rank = _RANKS.get(scope, _RANKS.get(scope.split(".")[0]))
    if rank is None:
        raise TVMSError(f"unknown storage scope {scope!r}")
    return rank


def thread_rank(tag: str) -> int:
    """0 for a block index, 1 for a thread index (virtual threads included), -1 otherwise."""
    if tag.startswith("blockIdx."):
        return 0
    if tag.startswith(("threadIdx.", "vthread", "cthread")):
        return 1
    return -1


def thread_dim(tag: str) -> int:
    """The axis of a block or thread index (x 0, y 1, z 2); -1 for a virtual thread."""
    if tag.startswith(("blockIdx.", "threadIdx.")):
        return "xyz".index(tag[-1])
    return -1


def can_relax_under_thread(scope: str, tag: str) -> bool:
    """Whether one allocation of ``scope`` is shared by the threads of ``tag`` (TVM's
    CanRelaxStorageUnderThread): warp memory across threadIdx.x, else a memory at or above the
    thread's rank (shared memory across threadIdx and vthread, global across block indices too)."""
    rank, threads = storage_rank(scope), thread_rank(tag)
    if rank == WARP:
        return threads == 1 and thread_dim(tag) == 0
    return threads >= 0 and rank <= threads


__all__ = ["GLOBAL", "SHARED", "WARP", "LOCAL", "WMMA_A", "WMMA_B", "WMMA_ACCUMULATOR", "MMA_C", "storage_rank",
           "thread_rank", "thread_dim", "can_relax_under_thread"]
