"""tvms.relax.op: one function per registered Relax operator (``relax.op.add``,
``relax.op.nn.relu``), made from the operator registry when first used (re-exports only)."""
from ..script.relax_op_api import op as _op


def __getattr__(name: str):
    return getattr(_op, name)


def __dir__() -> list:
    return _op.__dir__()
