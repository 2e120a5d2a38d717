"""tvms.relax.expr_functor: Python visitors and mutators over Relax, shaped like
``tvm.relax.expr_functor`` (re-exports only; the logic is in ``tvms.lowering.relax.expr_functor``)."""
from ..lowering.relax.expr_functor import PyExprMutator, PyExprVisitor, mutator, visitor

__all__ = ["PyExprMutator", "PyExprVisitor", "mutator", "visitor"]
