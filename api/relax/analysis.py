"""``tvms.relax.analysis``: questions about Relax programs, as ``tvm.relax.analysis``."""
from ..ir.relax_vars import all_global_vars, all_vars, bound_vars, free_vars
from ..ir.relax_well_formed import well_formed
from ..lowering.relax.dpl import get_var2val

__all__ = ["all_global_vars", "all_vars", "bound_vars", "free_vars", "get_var2val", "well_formed"]
