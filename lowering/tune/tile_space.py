"""The "tiles" tuning space: a target's default space (TVM's rules, ``default_space.py``) with
tvms's tile rule of the target kind right after ApplyCustomRule. Under llvm, ConvRegisterTile:
a conv that DLight's conv plans take gets one schedule per register tile. Under cuda,
MatmulTiles: a large matmul gets one schedule per shape of its plan. Any other function gets
TVM's rules. ``tvms tune --space tiles``, or ``space=tile_space(target)`` in the Python API.
"""
from __future__ import annotations

from typing import Any

from ...ir.errors import TVMSError
from ...ir.target import as_target
from .post_order_apply import PostOrderApply
from .rule_conv_register_tile import ConvRegisterTile
from .rule_matmul_tiles import MatmulTiles
from .space_generator import default_part, space_kind

TILE_RULES = {"llvm": ConvRegisterTile, "cuda": MatmulTiles}


def tile_space(target: Any) -> PostOrderApply:
    """The "tiles" space of ``target`` (a Target or its text)."""
    target = as_target(target)
    rule = TILE_RULES.get(target.kind)
    if rule is None:
        raise TVMSError(f"the tiles space has no rule for target kind {target.kind!r}; it has for "
                        + " and ".join(TILE_RULES))
    rules = default_part(space_kind(target), "sch_rules")
    rules.insert(1, rule())
    return PostOrderApply(sch_rules=rules)


__all__ = ["TILE_RULES", "tile_space"]
