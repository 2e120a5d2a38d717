"""TVM 0.27's tile primitives: ``T.<scope>.<op>(regions..., options...)``, one statement that a
group of threads (``scope``: a thread, a warp, a warpgroup, a CTA, a cluster) runs together on
buffer regions: ``T.cta.copy(A_smem[0:64], A[0:64])``, ``T.warp.gemm(D[...], A[...], B[...],
C[...], False, False, T.float32(1.0), T.float32(0.0))``.

A call keeps its arguments as TVM's builder stores them (regions, scalars, the reduced axes, the
names of the ops a composed primitive applies, a lambda), then the buffers of its workspace, the
variant it dispatches to and the other keyword options (``config``). ``OPS`` is TVM's registry of
them: the parameters of each, in the order its Python function takes them.

tvms reads and prints tile primitives; it does not lower them (``refuse_tile_primitives``).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .buffer import BufferRegion
from .errors import TVMSError
from .expr import PrimExpr
from .node import EMPTY, FrozenDict, Node, binds
from .stmt import Stmt

# the scope of a call by how the script names it (TVM prints a thread's as ``T.tile``)
SCOPE_OF_PREFIX = {"tile": "thread", "thread": "thread", "warp": "warp", "wg": "warpgroup",
                   "warpgroup": "warpgroup", "cta": "cta", "cluster": "cluster"}
PREFIX_OF_SCOPE = {"thread": "tile", "warp": "warp", "warpgroup": "wg", "cta": "cta", "cluster": "cluster"}
OP_PREFIX = "tirx.tile."  # TVM's operator names, tirx.tile.<op>

# Each parameter: name:kind, and =default where it may be left out. Kinds: region (a buffer or a
# region of one), operand (a region or a scalar), scalar, flag (a bool or an expression), axes (an
# axis or a list of them; stored as a list), op (the name of a tile op), lambda (a predicate over
# the destination's indices). ``src=dst``: the source is the destination (in place); TVM's printer
# leaves such a source out of every call, so each op whose second argument is a region reads so.
# A row goes on on the next lines, indented to its parameters.
_TABLE = """
zero reciprocal silu cast copy copy_async permute_layout   dst:region src:region=dst
sqrt exp exp2 log2          dst:region src:region=dst bias:operand=None scale:scalar=None
add sub mul fdiv maximum minimum   dst:region src1:operand src2:operand
fma                         dst:region src:region scale:operand bias:operand
fill memset                 dst:region value:scalar
gemm                        D:region A:region B:region C:region
                            transpose_A:flag=False transpose_B:flag=False alpha:scalar=1.0 beta:scalar=0.0
gemm_async                  C:region A:region B:region SFA:region=None SFB:region=None
                            transA:flag=False transB:flag=False accum:flag=False
sum max min                 dst:region src:region axes:axes=-1 accum:flag=False
binary_reduce               binary_output:region reduce_output:region binary_input1:operand
                            binary_input2:operand binary_op:op reduce_op:op reduce_axes:axes=-1
unary_reduce                unary_output:region reduce_output:region unary_input:region unary_op:op
                            reduce_op:op bias:operand=None scale:scalar=None reduce_axes:axes=-1
binary_chain                output:region data:region operand0:operand operand1:operand op0:op op1:op
                            reverse1:flag=False
reduce_negate               output:region input:region reduce_op:op reduce_axes:axes=-1 accum:flag=False
select                      dst:region true_value:operand false_value:operand pred:lambda
"""
REQUIRED = object()


@dataclass(frozen=True)
class Param:
    name: str
    kind: str
    default: object = REQUIRED  # a Python value, None, or "dst"


def _default(text: str) -> object:
    return text if text == "dst" else ast.literal_eval(text)


def _load(table: str) -> dict[str, tuple[Param, ...]]:
    ops = {}
    for row in table.strip().replace("\n" + " " * 28, " ").splitlines():  # (a row goes on indented)
        words = row.split()
        names = [w for w in words if ":" not in w]
        params = []
        for w in words[len(names):]:
            name, rest = w.split(":")
            kind, _, default = rest.partition("=")
            params.append(Param(name, kind, _default(default) if default else REQUIRED))
        for name in names:
            ops[name] = tuple(params)
    return ops


OPS = _load(_TABLE)

# the order TVM's builder stores the arguments in, where it is not the order of the parameters
STORED_ORDER = {"reduce_negate": ("output", "input", "reduce_axes", "accum", "reduce_op")}


@dataclass(frozen=True, slots=True, eq=False)
class LambdaExpr(Node):
    """``lambda i, j: i < j``: a predicate over the destination's indices (int32 variables)."""

    params: tuple = binds()
    body: PrimExpr = field()


@dataclass(frozen=True, slots=True, eq=False)
class TilePrimitiveCall(Stmt):
    """``T.<scope>.<op>(args..., workspace={...}, dispatch="...", **config)``: ``args`` as TVM
    stores them (BufferRegion, PrimExpr, Python bools, None, tuples of axes, Op, LambdaExpr)."""

    op: str
    args: tuple
    scope: str = "thread"
    workspace: FrozenDict = EMPTY  # name -> Buffer
    dispatch: str | None = None
    config: FrozenDict = EMPTY

    @property
    def script_name(self) -> str:
        return f"T.{PREFIX_OF_SCOPE[self.scope]}.{self.op}"


def printed_args(call: TilePrimitiveCall) -> tuple:
    """The arguments as TVM prints them: trailing Nones left out, and a source that is its
    destination (``T.tile.exp(A[0:16])``)."""
    from .structural import structural_equal  # (structural imports the statements)

    args = list(call.args)
    while args and args[-1] is None:
        args.pop()
    if len(args) == 2 and all(isinstance(a, BufferRegion) for a in args) and args[0].buffer is args[1].buffer \
            and structural_equal(args[0].region, args[1].region):
        args.pop()
    return tuple(args)


def refuse_tile_primitives(node: Node, where: str) -> None:
    """A TVMSError naming the first tile primitive of ``node`` (a function): nothing in tvms
    lowers one, and a pass that met it would misread it."""
    from .visitor import collect

    found = collect(node, TilePrimitiveCall)
    if found:
        raise TVMSError(f"{where}: {found[0].script_name}: tvms reads and prints TVM 0.27's tile primitives "
                        f"but does not lower them")
