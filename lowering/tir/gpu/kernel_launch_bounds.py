"""A kernel's launch bounds, written in its body as attributes (``T.attr({"tirx.max_registers":
92})`` and the like), taken out into the kernel's function attributes when SplitHostDevice cuts it
out, as TVM 0.27 does; the CUDA code generator writes them on the kernel's declaration
(``__launch_bounds__(threads, min_blocks[, max_blocks_per_cluster])`` or ``__maxnreg__(n)``).
The body's attributes keep their spelling; the kernel's are keyed as the IR keys every function
attribute (``canonical_attr_key``: ``tir.max_registers``), so printed text of either dialect reads
back to them.

The three keys (TVM's names):

- ``tirx.launch_bounds_min_blocks_per_sm``: the CTAs per SM the kernel is compiled to fit;
- ``tirx.launch_bounds_max_blocks_per_cluster``: the CTAs a cluster launches at most (only with the
  minimum above, as CUDA's third launch bound follows the second);
- ``tirx.max_registers``: the registers a thread uses at most (CUDA's ``__maxnreg__``), which CUDA
  does not combine with launch bounds.

Each value is a positive integer constant; a key written twice takes one value.
"""
from __future__ import annotations

from ....ir.errors import TVMSError
from ....ir.expr import IntImm
from ....ir.stmt import AttrStmt, Stmt
from ....ir.visitor import Mutator
from ....script.dialect import canonical_attr_key

MIN_BLOCKS_PER_SM = "tirx.launch_bounds_min_blocks_per_sm"
MAX_BLOCKS_PER_CLUSTER = "tirx.launch_bounds_max_blocks_per_cluster"
MAX_REGISTERS = "tirx.max_registers"
KEYS = (MIN_BLOCKS_PER_SM, MAX_BLOCKS_PER_CLUSTER, MAX_REGISTERS)


def _bound_value(key: str, value, kernel: str) -> int:
    """``value`` of launch bound ``key`` as an int, refused unless a positive integer constant."""
    if isinstance(value, IntImm) and not value.dtype.is_bool:
        value = value.value
    elif isinstance(value, bool) or not isinstance(value, int):
        raise TVMSError(f"kernel {kernel}: {key} takes an integer constant, not {value}")
    if value <= 0:
        raise TVMSError(f"kernel {kernel}: {key} must be positive, not {value}")
    return value


def checked_bounds(bounds: dict, kernel: str) -> dict[str, int]:
    """``bounds`` (by the keys above) as ints, refused as TVM refuses them (the body's and the
    kernel's attributes alike: a kernel read from text is checked as its body was)."""
    found = {key: _bound_value(key, value, kernel) for key, value in bounds.items()}
    if MAX_BLOCKS_PER_CLUSTER in found and MIN_BLOCKS_PER_SM not in found:
        raise TVMSError(f"kernel {kernel}: {MAX_BLOCKS_PER_CLUSTER} needs {MIN_BLOCKS_PER_SM} "
                        f"(CUDA's launch bounds give the CTAs per cluster after the CTAs per SM)")
    if MAX_REGISTERS in found and len(found) > 1:
        raise TVMSError(f"kernel {kernel}: {MAX_REGISTERS} cannot be combined with launch bounds "
                        f"({', '.join(k for k in found if k != MAX_REGISTERS)}), as CUDA's __maxnreg__ cannot")
    return found


class _Taker(Mutator):
    def __init__(self, kernel: str) -> None:
        self.kernel = kernel
        self.found: dict[str, int] = {}

    def visit_AttrStmt(self, attr: AttrStmt) -> Stmt:
        if attr.attr_key not in KEYS:
            return self.generic_visit(attr)
        value = _bound_value(attr.attr_key, attr.value, self.kernel)
        earlier = self.found.setdefault(attr.attr_key, value)
        if earlier != value:
            raise TVMSError(f"kernel {self.kernel}: {attr.attr_key} is written twice with other values "
                            f"({earlier} and {value})")
        return self.visit(attr.body)


def take_launch_bounds(body: Stmt, kernel: str) -> tuple[Stmt, dict[str, int]]:
    """``body`` without its launch-bound attributes, and those attributes keyed as the kernel's
    function attributes (see the module)."""
    taker = _Taker(kernel)
    body = taker.visit(body)
    found = checked_bounds(taker.found, kernel)
    return body, {canonical_attr_key(key): value for key, value in found.items()}


def _bounds_in(attrs, kernel: str) -> dict[str, int]:
    """The launch bounds among a kernel's function attributes (either spelling), by their TVM names."""
    by_canonical_key = {canonical_attr_key(key): key for key in KEYS}
    return checked_bounds({by_canonical_key[canonical_attr_key(key)]: value for key, value in attrs.items()
                           if canonical_attr_key(key) in by_canonical_key}, kernel)


def launch_bounds_text(threads: int | None, attrs, kernel: str) -> str:
    """The qualifiers of a kernel's declaration: `` __maxnreg__(n)`` when it sets its registers,
    else `` __launch_bounds__(threads[, min_blocks[, max_blocks_per_cluster]])`` when its block
    has a constant number of threads other than 1, else nothing."""
    attrs = _bounds_in(attrs, kernel)
    if MAX_REGISTERS in attrs:
        return f" __maxnreg__({attrs[MAX_REGISTERS]})"
    if threads is None or threads == 1:
        return ""
    bounds = [threads, *(attrs[k] for k in (MIN_BLOCKS_PER_SM, MAX_BLOCKS_PER_CLUSTER) if k in attrs)]
    return f" __launch_bounds__({', '.join(map(str, bounds))})"


__all__ = ["KEYS", "MAX_BLOCKS_PER_CLUSTER", "MAX_REGISTERS", "MIN_BLOCKS_PER_SM", "checked_bounds",
           "launch_bounds_text", "take_launch_bounds"]
