"""TVM's ``tirx.LowerTIRxOpaque``, and the tirx pipeline's refusal of blocks.

(Its own module: the GPU passes' package exports the pass, and the tirx pipeline imports that
package, so neither may import the other to reach it.)
"""
from __future__ import annotations

from ...ir import stmt as S
from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from .lower_opaque_block import lower_opaque_block
from .tir_pass import define_tir_pass


def refuse_blocks(func: PrimFunc, pipeline: str = "tirx") -> None:
    """A TVMSError when ``func`` holds blocks: the tirx pipeline lowers no ``T.sblock``."""
    blocks = sorted(collect(func.body, S.Block), key=lambda b: b.name_hint == "root")  # (a named one first)
    if blocks:
        name = func.attrs.get("global_symbol", "the function")
        raise TVMSError(f"the {pipeline} TIR pipeline lowers tirx kernels, which have no blocks; {name} has the "
                        f"block {blocks[0].name_hint!r} (compile scheduled TensorIR with tir_pipeline='s_tir', "
                        f"the default)")


def lower_tirx_opaque(func: PrimFunc) -> PrimFunc:
    """TVM's LowerTIRxOpaque: LowerOpaqueBlock's part that is not about blocks (a thread-bound
    loop becomes a thread launch, a unit loop its body, ``pragma_*`` annotations attributes)."""
    refuse_blocks(func)
    return lower_opaque_block(func)


LowerTIRxOpaque = define_tir_pass("tirx.LowerTIRxOpaque", lower_tirx_opaque)

__all__ = ["LowerTIRxOpaque", "lower_tirx_opaque", "refuse_blocks"]
