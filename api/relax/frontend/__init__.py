"""tvms.relax.frontend: ways to make Relax from models (``nn``: PyTorch-like modules)."""
from . import nn

__all__ = ["nn"]
