"""Hypothesis strategies for random Relax programs that the reference executor can run, for the
semantic properties of the passes (``test_pass_properties.py``).

A program is a module with one function ``main``: one to three float32 tensor parameters of small
shapes (some with the symbolic size ``n``), one dataflow block of one to eight bindings drawn
from the operator generators of ``relax_strategies`` (everything but helper calls, match_cast and
shape values, which do not compute numbers), and a return of one or two of the values bound. With
it come concrete inputs: ``n`` is drawn, and the tensors hold values from a seeded generator.
"""
from __future__ import annotations

from typing import Any, Callable

import hypothesis.strategies as st
import numpy as np

import relax_strategies as rs
from strategies import _between, coin, pick
from tvms import relax
from tvms.ir import IntImm, IRModule
from tvms.ir import Var as TirVar
from tvms.ir import relax as rx
from tvms.ir.struct_info import TensorStructInfo

# The operators that compute numbers (the others bind shapes, casts to unknown shapes or calls
# of helper functions, which say nothing about a pass's arithmetic).
OPS = (rs.op_unary, rs.op_binary, rs.op_astype, rs.op_reduce, rs.op_permute_dims, rs.op_matmul,
       rs.op_reshape, rs.op_expand_dims, rs.op_squeeze, rs.op_concat, rs.op_split,
       rs.op_strided_slice, rs.op_take, rs.op_where, rs.op_softmax, rs.op_norm, rs.op_broadcast_to,
       rs.op_create, rs.op_tuple, rs.op_const, rs.op_call_tir)


class Program:
    """A module and the arguments of its entry function (``main``, or ``main1`` when a value
    took the name). (Not a dataclass: hypothesis would show its fields, not the module's text.)"""

    def __init__(self, mod: IRModule, entry: str, args: list):
        self.mod, self.entry, self.args = mod, entry, args

    def __repr__(self) -> str:  # what hypothesis shows for a failing example
        shapes = [a.shape for a in self.args]
        return f"Program(args of shapes {shapes}):\n{self.mod.script(dialect='tvm-0.27')}"


def _binding(draw: Callable, scope: rs.Scope, output: bool = False) -> rx.Var:
    start = draw(_between(0, len(OPS) - 1))
    for i in range(len(OPS)):
        value = OPS[(start + i) % len(OPS)](draw, scope)
        if value is None or rs.has_negative_size(value.struct_info) or _prim_with_scalar_tensor(value):
            continue
        return rs.emit(draw, scope, value, output)
    raise AssertionError("generator bug: nothing to bind")


def _prim_with_scalar_tensor(value: Any) -> bool:
    """A binary operator on a 0-d tensor and an ``R.prim_value``: its struct info says shape
    (1,), as TVM 0.27 infers, but the operator (and its legalization) gives a 0-d result, in TVM
    as here; such a program is wrong by itself."""
    if not isinstance(value, rx.Call):
        return False
    args = value.args
    return any(isinstance(a, rx.PrimValue) for a in args) and \
        any(rs.ndim_of(a) == 0 for a in args if not isinstance(a, rx.PrimValue))


def _param_sinfo(draw: Callable, n: TirVar) -> TensorStructInfo:
    dims = [n if draw(_between(0, 3)) == 0 else IntImm(rs.I64, draw(_between(1, 5)))
            for _ in range(draw(_between(1, 3)))]
    return TensorStructInfo(rs.shape_expr(dims), rs.F32, len(dims))


def _argument(draw: Callable, sinfo: TensorStructInfo, n_value: int, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(n_value if isinstance(d, TirVar) else int(d.value) for d in sinfo.dims)
    scale = pick(draw, (1.0, 3.0))
    return (rng.standard_normal(shape) * scale).astype("float32")


@st.composite
def dataflow_programs(draw, max_bindings: int = 8) -> Program:
    module = rs.ModuleState(relax.BlockBuilder())
    n = TirVar("n", rs.I64)
    params = [relax.Var(pick(draw, ("x", "y", "w")), _param_sinfo(draw, n))
              for _ in range(draw(_between(1, 3)))]
    sizes = [n] if any(n in rs.size_vars(p.struct_info) for p in params) else []
    scope = rs.Scope(module, list(params), sizes, helpers=False)
    bb = module.bb
    with bb.function("main", params):
        with bb.dataflow():
            scope.dataflow = True
            for _ in range(draw(_between(0, max_bindings - 1))):
                _binding(draw, scope)
            outputs = [_binding(draw, scope, output=True)]
            if coin(draw):
                flow = [v for v in scope.values if isinstance(v, rx.DataflowVar)]
                if flow:
                    outputs.append(bb.emit_output(pick(draw, flow), "out"))
        gv = bb.emit_func_output(outputs[0] if len(outputs) == 1 else rx.Tuple(outputs))
    n_value = draw(_between(1, 4))
    rng = np.random.default_rng(draw(_between(0, 2 ** 16)))
    args = [_argument(draw, p.struct_info, n_value, rng) for p in params]
    return Program(bb.get(), gv.name_hint, args)


def assert_same_values(got: Any, want: Any, rtol: float = 1e-4, atol: float = 1e-4) -> None:
    """Equal results (tuples element by element); floats within a tolerance, NaN equal to NaN."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same_values(g, w, rtol, atol)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)
