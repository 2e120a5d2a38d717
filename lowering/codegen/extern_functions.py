"""The C functions a script may call by name on the CPU (``T.call_extern("float32", "expf", x)``).

Code for the llvm target is linked into the tvms process itself, where every symbol of the C
library and of Python's C API is defined: a script naming ``system`` or ``PyRun_SimpleString``
would run what its data says. So a script may name only the C math library's functions (what
TVM's own lowering and its users' texts call, ``expf``, ``tanhf``, ``powf``, ...); any other name
is refused when the function is built, unless the user's own code lets it through: the PassContext
option ``tvms.extern_functions`` names more functions (a C library the program loaded, or libc's
``usleep`` in a test). (CUDA kernels call device functions, compiled by NVRTC into the kernel, so
this limit is the llvm target's.)
"""
from __future__ import annotations

from ...ir import expr as E
from ...ir.errors import TVMSError
from ...ir.function import PrimFunc
from ...ir.visitor import collect
from ..transform import PassContext

CONFIG = "tvms.extern_functions"

# C99's <math.h> functions of double; each also comes with an ``f`` (float) and ``l`` (long double)
# form, and glibc adds exp10 and sincos
_DOUBLE_FORMS = """
    acos asin atan atan2 cos sin tan acosh asinh atanh cosh sinh tanh exp exp2 expm1 exp10 frexp
    ilogb ldexp log log10 log1p log2 logb modf scalbn scalbln cbrt fabs hypot pow sqrt erf erfc
    lgamma tgamma ceil floor nearbyint rint lrint llrint round lround llround trunc fmod remainder
    remquo copysign nan nextafter nexttoward fdim fmax fmin fma sincos
""".split()

C_MATH_FUNCTIONS = frozenset(name + suffix for name in _DOUBLE_FORMS for suffix in ("", "f", "l"))


def check_extern_calls(func: PrimFunc) -> None:
    """Refuse ``func`` where it calls a C function a script may not name (checked before the
    kernel caches are looked up: code built once under a wider PassContext is not loaded without it)."""
    for call in collect(func.body, E.Call):
        op = getattr(call.op, "name", "")
        if op in ("tir.call_extern", "tir.call_pure_extern") and call.args and isinstance(call.args[0], E.StringImm):
            check_extern_call(call.args[0].value, f"T.{op[len('tir.'):]}")


def check_extern_call(symbol: str, what: str = "T.call_extern") -> None:
    """Refuse a ``T.call_extern`` (``what``) of ``symbol`` on the llvm target unless it is a C math
    function or one the PassContext's ``tvms.extern_functions`` names."""
    if symbol in C_MATH_FUNCTIONS or symbol in allowed_names(PassContext.current().config.get(CONFIG, ())):
        return
    raise TVMSError(f"{what}({symbol!r}): the llvm target calls only C math library functions "
                    f"(expf, sqrt, powf, ...) by name; other functions of the process are called only "
                    f"where the PassContext option {CONFIG} names them")


def allowed_names(value: object) -> frozenset:
    """The names of a ``tvms.extern_functions`` value: a list of strings, or one string of
    comma-separated names (as ``--pass-config tvms.extern_functions=usleep,my_fn`` gives it)."""
    names = value.split(",") if isinstance(value, str) else value
    if not isinstance(names, (list, tuple, set, frozenset)) or not all(isinstance(n, str) for n in names):
        raise TVMSError(f"{CONFIG}: expected a list of function names, got {value!r}")
    return frozenset(n.strip() for n in names if n.strip())


__all__ = ["CONFIG", "C_MATH_FUNCTIONS", "allowed_names", "check_extern_call", "check_extern_calls"]
