"""Traces: the instructions a schedule ran and the decisions its samplers made.

A trace prints as Python that replays it, in TVM 0.27's form (``def apply_trace(sch)`` around
``sch.get_sblock(...)``) or in the classic form of the tutorials (bare ``sch.get_block(...)``
lines), and serializes to TVM's JSON layout ``[[[kind, inputs, attrs, outputs], ...],
[[instruction index, decision], ...]]``.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from ...ir.errors import TVMSError
from ...ir.expr import FloatImm, IntImm, const
from .layout import IndexMap, SampledIndexMap
from .random_vars import RV_TYPES, BlockRV, ExprRV, LoopRV

CLASSIC, TVM_027 = "classic", "tvm-0.27"


@dataclass(frozen=True)
class Param:
    """How one argument of a printed call is made: ``name=`` (None: positional) from ``source``.

    ``source`` is ``"i0"`` (input 0), ``"i1:"`` (inputs from 1 on, as a list), ``"i*"`` (every
    input, spread as positional arguments), ``"a0"`` (attribute 0) or ``"d"`` (the decision).
    """

    name: str | None
    source: str
    classic: bool = True  # printed in the classic dialect (False: only when it is not the default)
    default: Any = None
    skip_empty: bool = False  # left out of the printed call when it is an empty list


@dataclass(frozen=True)
class InstructionKind:
    name: str
    method: str
    params: tuple
    array_result: bool = False  # the call returns a list (``l1, = ...`` for one output)


def _kinds() -> dict[str, InstructionKind]:
    k = InstructionKind
    loop = (Param("loop", "i0"),)
    table = [
        k("GetSBlock", "get_sblock", (Param("name", "a0"), Param("func_name", "a1"))),
        k("GetLoops", "get_loops", (Param("block", "i0"),), True),
        k("GetChildBlocks", "get_child_blocks", (Param(None, "i0"),), True),
        k("GetProducers", "get_producers", (Param("block", "i0"),), True),
        k("GetConsumers", "get_consumers", (Param("block", "i0"),), True),
        k("GetOutputBlocks", "get_output_blocks", (Param("block", "i0"),), True),
        k("AddUnitLoop", "add_unit_loop", (Param("block_or_loop", "i0"),)),
        k("ReorderBlockIterVar", "reorder_block_iter_var", (Param("block", "i0"), Param("new_order", "i1"))),
        k("Split", "split", (Param("loop", "i0"), Param("factors", "i1:"), Param("preserve_unit_iters", "a0"),
                             Param("disable_predication", "a1", classic=False, default=False)), True),
        k("LoopPartition", "loop_partition", (Param("loop", "i0"), Param("factors", "i1:"),
                                               Param("preserve_unit_iters", "a0")), True),
        k("Fuse", "fuse", (Param(None, "i*"), Param("preserve_unit_iters", "a0"))),
        k("Reorder", "reorder", (Param(None, "i*"),)),
        k("Merge", "merge", (Param(None, "i*"),)),
        k("Parallel", "parallel", loop),
        k("Vectorize", "vectorize", loop),
        k("Unroll", "unroll", loop),
        k("Bind", "bind", loop + (Param("thread_axis", "a0"),)),
        k("Annotate", "annotate", (Param("block_or_loop", "i0"), Param("ann_key", "a0"), Param("ann_val", "i1"))),
        k("Unannotate", "unannotate", (Param("block_or_loop", "i0"), Param("ann_key", "a0"))),
        k("RollingBuffer", "rolling_buffer", (Param("block", "i0"), Param("write_buffer_index", "a0"))),
        k("PadEinsum", "pad_einsum", (Param("block", "i0"), Param("padding", "a0"))),
        k("DecomposePadding", "decompose_padding", (Param("block", "i0"), Param("loop", "i1"))),
        k("DecomposeReduction", "decompose_reduction", (Param("block", "i0"), Param("loop", "i1"))),
        k("SamplePerfectTile", "sample_perfect_tile",
          loop + (Param("n", "a0"), Param("max_innermost_factor", "a1"), Param("decision", "d")), True),
        k("SamplePartitionedTile", "sample_partitioned_tile",
          loop + (Param("n", "a0"), Param("partition_pos", "a1"), Param("innerpart_factor", "a2"),
                  Param("decision", "d")), True),
        k("SampleCategorical", "sample_categorical",
          (Param("candidates", "a0"), Param("probs", "a1"), Param("decision", "d"))),
        k("ComputeInline", "compute_inline", (Param("block", "i0"),)),
        k("FuseReductionEpilogue", "fuse_reduction_epilogue", (Param("reduction_block", "i0"),
                                                               Param("epilogue_block", "i1"))),
        k("ReverseComputeInline", "reverse_compute_inline", (Param("block", "i0"),)),
        k("CacheRead", "cache_read", (Param("block", "i0"), Param("read_buffer_index", "a0"),
                                      Param("storage_scope", "a1"), Param("consumer_blocks", "i1", skip_empty=True))),
        k("CacheWrite", "cache_write", (Param("block", "i0"), Param("write_buffer_index", "a0"),
                                        Param("storage_scope", "a1"), Param("consumer_blocks", "i1", skip_empty=True))),
        k("CacheIndex", "cache_index", (Param("block", "i0"), Param("storage_scope", "a0"),
                                        Param("cse_thresh", "a1")), True),
        k("ReindexCacheRead", "reindex_cache_read", (Param("block", "i0"), Param("read_buffer_index", "a0"),
                                                     Param("storage_scope", "a1"), Param("index_map", "i1"))),
        k("ReindexCacheWrite", "reindex_cache_write", (Param("block", "i0"), Param("write_buffer_index", "a0"),
                                                       Param("storage_scope", "a1"), Param("index_map", "i1"))),
        k("CacheInplace", "cache_inplace", (Param("block", "i0"), Param("read_buffer_index", "a0"),
                                            Param("storage_scope", "a1")), True),
        k("ReadAt", "read_at", (Param("loop", "i0"), Param("block", "i1"), Param("read_buffer_index", "a0"),
                                Param("storage_scope", "a1"))),
        k("WriteAt", "write_at", (Param("loop", "i0"), Param("block", "i1"), Param("write_buffer_index", "a0"),
                                  Param("storage_scope", "a1"))),
        k("AnnotateBufferAccess", "annotate_buffer_access", (Param("block", "i0"), Param("buffer_index", "i1"),
                                                             Param("buf_type", "buf_type"),
                                                             Param("gen_new_ranges", "i3"))),
        k("UnsafeHideBufferAccess", "unsafe_hide_buffer_access",
          (Param("block", "i0"), Param("buf_type", "i1"), Param("buf_index_array", "i2"))),
        k("UnsafeSetDType", "unsafe_set_dtype", (Param("block", "i0"), Param("buffer_index", "a0"),
                                                 Param("dtype", "a1"))),
        k("ReIndex", "reindex", (Param("block", "i0"), Param("buffer", "buffer"))),
        k("TransformBlockLayout", "transform_block_layout", (Param("block", "i0"), Param("index_map", "i1"))),
        k("SetScope", "set_scope", (Param("block", "i0"), Param("buffer_index", "a0"), Param("storage_scope", "a1"))),
        k("StorageAlign", "storage_align", (Param("block", "i0"), Param("buffer_index", "a0"), Param("axis", "a1"),
                                            Param("factor", "a2"), Param("offset", "a3"))),
        k("ComputeAt", "compute_at", (Param("block", "i0"), Param("loop", "i1"),
                                      Param("preserve_unit_loops", "a0"), Param("index", "a1"))),
        k("ReverseComputeAt", "reverse_compute_at", (Param("block", "i0"), Param("loop", "i1"),
                                                     Param("preserve_unit_loops", "a0"), Param("index", "a1"))),
        k("RFactor", "rfactor", (Param("loop", "i0"), Param("factor_axis", "a0"))),
        k("Blockize", "blockize", (Param("target", "i0"), Param("preserve_unit_iters", "a0"))),
        k("Tensorize", "tensorize", (Param("block_or_loop", "i0"), Param("tensor_intrin", "a0"),
                                     Param("preserve_unit_iters", "a1"))),
        k("TransformLayout", "transform_layout", (Param("block", "i0"), Param("buffer", "a0"), Param("index_map", "i1"),
                                                  Param("pad_value", "i2"), Param("assume_injective_transform", "a1"))),
        k("SampleComputeLocation", "sample_compute_location", (Param("block", "i0"), Param("decision", "d"))),
        k("EnterPostproc", "enter_postproc", ()),
    ]
    return {kind.name: kind for kind in table}


KINDS = _kinds()
SAMPLING_KINDS = ("SamplePerfectTile", "SamplePartitionedTile", "SampleCategorical", "SampleComputeLocation")
# TVM's JSON stores these kinds' flags as 0/1: kind -> the index of its flag among the attributes
INT_FLAG_KINDS = {"Fuse": 0, "LoopPartition": 0, "ComputeAt": 0, "ReverseComputeAt": 0, "Blockize": 0,
                  "Tensorize": 1}


@dataclass(eq=False)
class Instruction:
    """One schedule call: its kind, inputs (random variables or constants), attributes, outputs."""

    kind: str
    inputs: list
    attrs: list
    outputs: list

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise TVMSError(f"unknown schedule instruction kind {self.kind!r}")


def _literal(value: Any) -> str:
    """A constant as Python text, the way TVM's trace printer writes it."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):  # ("write", 0): a buffer named by access kind and position
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)  # numbers, and index maps (which print as their lambda)


@dataclass(eq=False)
class Trace:
    """The instructions run so far and the decisions of their sampling instructions."""

    insts: list = field(default_factory=list)
    decisions: dict = field(default_factory=dict)  # Instruction -> decision
    dialect: str = TVM_027

    # ------------------------------------------------------------ editing
    def get_decision(self, inst: Instruction) -> Any:
        return self.decisions.get(inst)

    def append(self, inst: Instruction, decision: Any = None) -> None:
        self.insts.append(inst)
        if decision is not None:
            self.decisions[inst] = decision

    def pop(self) -> Instruction | None:
        if not self.insts:
            return None
        inst = self.insts.pop()
        self.decisions.pop(inst, None)
        return inst

    def copy(self) -> "Trace":
        return Trace(list(self.insts), dict(self.decisions), self.dialect)

    def _kept(self, remove_postproc: bool) -> list:
        if not remove_postproc:
            return list(self.insts)
        kept = []
        for inst in self.insts:
            if inst.kind == "EnterPostproc":
                break
            kept.append(inst)
        return kept

    def with_decision(self, inst: Instruction, decision: Any, remove_postproc: bool) -> "Trace":
        insts = self._kept(remove_postproc)
        decisions = {i: d for i, d in self.decisions.items() if i in insts}
        decisions[inst] = decision
        return Trace(insts, decisions, self.dialect)

    # ------------------------------------------------------------ printing
    def _names(self, insts: list) -> dict:
        names: dict = {}
        for inst in insts:
            for out in inst.outputs:
                names[out] = f"{out.prefix}{len(names)}"
        return names

    def as_python(self, remove_postproc: bool = False, dialect: str | None = None) -> list[str]:
        """One line of Python per instruction."""
        dialect = dialect or self.dialect
        insts = self._kept(remove_postproc)
        names = self._names(insts)
        return [self._line(inst, names, dialect) for inst in insts]

    def _arg(self, value: Any, names: dict) -> str:
        if isinstance(value, RV_TYPES):
            if value not in names:
                raise TVMSError(f"the trace uses {value!r} before an instruction defines it")
            return names[value]
        if isinstance(value, list):
            return "[" + ", ".join(self._arg(v, names) for v in value) + "]"
        if isinstance(value, SampledIndexMap):
            return value.text(names)
        return _literal(value)

    def _line(self, inst: Instruction, names: dict, dialect: str) -> str:
        kind = KINDS[inst.kind]
        args = []
        for p in kind.params:
            value = _source(inst, p.source, self.decisions.get(inst))
            if (p.source == "d" and value is None) or (p.skip_empty and not value):
                continue
            if dialect == CLASSIC and not p.classic and value == p.default:
                continue
            if p.source == "i*":
                args.extend(self._arg(v, names) for v in value)
                continue
            text = self._arg(value, names)
            args.append(text if p.name is None else f"{p.name}={text}")
        method = kind.method
        if dialect == CLASSIC and method == "get_sblock":
            method = "get_block"
        call = f"sch.{method}({', '.join(args)})"
        outs = [names[o] for o in inst.outputs]
        if not outs:
            return call
        lhs = ", ".join(outs) + ("," if kind.array_result and len(outs) == 1 else "")
        return f"{lhs} = {call}"

    def script(self, dialect: str | None = None, remove_postproc: bool = False) -> str:
        dialect = dialect or self.dialect
        lines = self.as_python(remove_postproc, dialect)
        if dialect == CLASSIC:
            return "\n".join(lines)
        body = [f"  {line}" for line in lines] or ["  pass"]
        return "\n".join(["# from tvm import s_tir", "def apply_trace(sch: s_tir.Schedule) -> None:"] + body)

    def __str__(self) -> str:
        return self.script()

    def show(self, dialect: str | None = None) -> None:
        print(self.script(dialect))

    # ------------------------------------------------------------ JSON
    def as_json(self, remove_postproc: bool = False) -> list:
        insts = self._kept(remove_postproc)
        names = self._names(insts)
        rows, decisions = [], []
        for index, inst in enumerate(insts):
            inputs = [_json_input(v, names) for v in inst.inputs]
            attrs = [int(a) if inst.kind in INT_FLAG_KINDS and isinstance(a, bool) else
                     list(a) if isinstance(a, tuple) else a for a in inst.attrs]
            rows.append([inst.kind, inputs, attrs, [names[o] for o in inst.outputs]])
            if inst in self.decisions:
                decisions.append([index, self.decisions[inst]])
        return [rows, decisions]

    @staticmethod
    def from_json(json_obj: Any) -> "Trace":
        """A trace from ``as_json``'s layout (its random variables are fresh handles)."""
        try:
            rows, decision_rows = json_obj
            rvs: dict[str, Any] = {}
            trace = Trace()
            decisions = {int(i): d for i, d in decision_rows}
            for index, (kind, inputs, attrs, outputs) in enumerate(rows):
                ins = [_from_json_input(v, rvs) for v in inputs]
                outs = []
                for name in outputs:
                    rv = {"b": BlockRV, "l": LoopRV, "v": ExprRV}[name[0]]()
                    rvs[name] = rv
                    outs.append(rv)
                if kind in INT_FLAG_KINDS:
                    flag = INT_FLAG_KINDS[kind]
                    attrs = [*attrs[:flag], bool(attrs[flag]), *attrs[flag + 1:]]
                if kind == "TransformLayout":
                    attrs = [tuple(attrs[0])] + list(attrs[1:])
                trace.append(Instruction(kind, ins, list(attrs), outs), decisions.get(index))
            return trace
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise TVMSError(f"not a schedule trace in JSON form: {e}") from None

    @staticmethod
    def apply_json_to_schedule(json_obj: Any, sch: Any) -> None:
        Trace.from_json(json_obj).apply_to_schedule(sch, remove_postproc=False)

    # ------------------------------------------------------------ replay
    def apply_to_schedule(self, sch: Any, remove_postproc: bool,
                          decision_provider: Callable | None = None) -> None:
        """Run the instructions on ``sch``; sampling instructions reuse their decisions."""
        rv_map: dict = {}
        for inst in self._kept(remove_postproc):
            inputs = [_map_rv(v, rv_map) for v in inst.inputs]
            decision = self.decisions.get(inst)
            if decision_provider is not None:
                decision = decision_provider(inst, inputs, inst.attrs, decision)
            replayed = Instruction(inst.kind, inputs, list(inst.attrs), [])
            args, kwargs = call_arguments(replayed, decision)
            result = getattr(sch, KINDS[inst.kind].method)(*args, **kwargs)
            results = [] if result is None else list(result) if isinstance(result, (list, tuple)) else [result]
            if len(results) != len(inst.outputs):
                raise TVMSError(f"replaying {inst.kind} gave {len(results)} results, "
                                f"the trace has {len(inst.outputs)}")
            rv_map.update(zip(inst.outputs, results))


def _source(inst: Instruction, source: str, decision: Any) -> Any:
    if source == "d":
        return decision
    if source == "i*":
        return list(inst.inputs)
    if source == "buf_type":  # input 2, 0 read / 1 write, given as its name
        return ("read", "write")[inst.inputs[2]]
    if source == "buffer":  # attributes (index, 0 read / 1 write), given as ("read", index)
        return (("read", "write")[inst.attrs[1]], inst.attrs[0])
    values = inst.inputs if source[0] == "i" else inst.attrs
    if source.endswith(":"):
        return list(values[int(source[1:-1]):])
    return values[int(source[1:])]


def call_arguments(inst: Instruction, decision: Any) -> tuple[list, dict]:
    """The positional and keyword arguments of the schedule method an instruction stands for."""
    args: list = []
    kwargs: dict = {}
    for p in KINDS[inst.kind].params:
        value = _source(inst, p.source, decision)
        if p.source == "i*":
            args.extend(value)
        elif p.name is None:
            args.append(value)
        elif not (p.source == "d" and value is None):
            kwargs[p.name] = value
    return args, kwargs


def _map_rv(value: Any, rv_map: dict) -> Any:
    if isinstance(value, RV_TYPES):
        if value not in rv_map:
            raise TVMSError(f"the trace uses {value!r} before an instruction defines it")
        return rv_map[value]
    if isinstance(value, list):
        return [_map_rv(v, rv_map) for v in value]
    if isinstance(value, SampledIndexMap):
        return value.remap(rv_map)
    return value


def _json_input(value: Any, names: dict) -> Any:
    if isinstance(value, RV_TYPES):
        return names[value]
    if value is None:
        return "None"
    if isinstance(value, str):
        return json.dumps(value)  # strings are quoted, to tell them from variable names
    if isinstance(value, (list, tuple)):
        return [_json_input(v, names) for v in value]
    if isinstance(value, SampledIndexMap):
        return value.text(names)
    if isinstance(value, IndexMap):
        return str(value)  # tvms keeps the lambda text where TVM saves its IndexMap object
    if isinstance(value, (IntImm, FloatImm)):  # (an annotation's T.bool(True)): typed, as printed
        return f"T.{value.dtype}({bool(value.value) if value.dtype.is_bool else value.value!r})"
    from .replay import IndexMapLambda

    if isinstance(value, IndexMapLambda):  # (a trace read from JSON holds its lambda as read)
        return value.source
    return value


_RV_NAME = re.compile(r"[blv]\d+")
_TYPED_CONST = re.compile(r"T\.(bool|u?int\d+|float\d+)\((True|False|-?[0-9][0-9.e+-]*|-?inf|nan)\)")


def _lambda_from_json(text: str, rvs: dict) -> Any:
    """An index map read back; one using sampled integers (``v27``) as a SampledIndexMap over
    those random variables."""
    from .replay import evaluate_lambda

    head, _, body = text.partition(":")
    params = [p.strip() for p in head[len("lambda"):].split(",") if p.strip()]
    sampled = [name for name in dict.fromkeys(re.findall(r"\bv\d+\b", body)) if name in rvs and name not in params]
    if not sampled:
        return evaluate_lambda(text)
    func = evaluate_lambda(f"lambda {', '.join(params + sampled)}:{body}")
    whole = IndexMap.from_func(func, len(params) + len(sampled), "a trace's transform_layout")
    placeholders = whole.initial_indices[len(params):]
    return SampledIndexMap(whole.initial_indices[:len(params)], whole.final_indices,
                           [(var, rvs[name]) for var, name in zip(placeholders, sampled)])


def _from_json_input(value: Any, rvs: dict) -> Any:
    if isinstance(value, str):
        if value == "None":
            return None
        if value.startswith('"'):
            return json.loads(value)
        if value.startswith("lambda"):
            return _lambda_from_json(value, rvs)
        typed = _TYPED_CONST.fullmatch(value)
        if typed:  # read, never evaluated
            dtype, text = typed.groups()
            try:
                return const(text == "True" if dtype == "bool" else int(text) if dtype[0] in "ui" else float(text), dtype)
            except ValueError:
                raise TVMSError(f"{value!r} in a trace is not a constant of its type") from None
        if _RV_NAME.fullmatch(value) and value in rvs:
            return rvs[value]
        raise TVMSError(f"unknown random variable {value!r} in a trace")
    if isinstance(value, list):
        return [_from_json_input(v, rvs) for v in value]
    return value
