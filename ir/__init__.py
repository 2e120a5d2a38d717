"""tvms.ir: the IR node classes, data types, structural equality and the generic walkers."""
from .buffer import Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from .dtype import DataType
from .errors import ScriptError, Source, Span, TVMSError
from .expr import *  # noqa: F401,F403
from .function import PrimFunc
from .module import GlobalVar, IRModule, Target
from .node import EMPTY, FrozenDict, Node, frozen
from .op import get_op
from .stmt import *  # noqa: F401,F403
from .structural import assert_structural_equal, first_mismatch, structural_equal, structural_hash
from .visitor import Mutator, Visitor, walk
from . import relax, struct_info  # noqa: E402,F401  (the operator tables load on first lookup: relax_op.py)
