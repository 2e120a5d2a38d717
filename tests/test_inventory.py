"""Issue 14's checklist: what Apache TVM 0.27 has (the fixtures of ``tools/tvm_inventory.py``,
in tests/fixtures/inventory/) against what tvms knows.

Each list below names what tvms lacks today. The test fails when a name of the fixture is unknown
to tvms and not listed (something was lost, or the fixture grew), and when a listed name becomes
known (take it off the list): the lists only shrink. ``python tests/test_inventory.py`` prints
the coverage of each checklist.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

import tvms  # noqa: F401  (importing the package registers every operator and builtin)
from tvms.ir import relax_op
from tvms.script.relax_parser import is_r_builtin_name
from tvms.script.tensorir.evaluator import is_builtin_name
from tvms.tir import Schedule

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "inventory"


def _lines(text: str) -> list[str]:
    return [line for line in text.split() if line]


# Relax operators TVM registers (relax.txt, `relax.*`) that ir/relax_ops*.py lacks
MISSING_RELAX_OPS = _lines("""
relax.arange
relax.argsort
relax.assert_op
relax.bucketize
relax.builtin.stop_lift_params
relax.call_builtin_with_ctx
relax.call_inplace_packed
relax.call_pure_packed
relax.call_py_func
relax.call_tir_inplace
relax.call_tir_with_grad
relax.ccl.allgather
relax.ccl.allreduce
relax.ccl.broadcast_from_worker0
relax.ccl.scatter_from_worker0
relax.clip
relax.collapse_sum_like
relax.collapse_sum_to
relax.cumprod
relax.cumsum
relax.dequantize
relax.dist.annotate_sharding
relax.dist.call_tir_local_view
relax.dist.redistribute
relax.dist.redistribute_replica_to_shard
relax.dynamic_strided_slice
relax.einsum
relax.ewise_fma
relax.eye
relax.eye_like
relax.gather_elements
relax.gather_nd
relax.grad.avg_pool2d_backward
relax.grad.end_checkpoint
relax.grad.max_pool2d_backward
relax.grad.nll_loss_backward
relax.grad.no_grad
relax.grad.start_checkpoint
relax.grad.take_backward
relax.hamming_window
relax.hint_on_device
relax.image.affine_grid
relax.image.grid_sample
relax.image.resize2d
relax.image.resize3d
relax.index_put
relax.index_tensor
relax.inspect.tensor_byte_offset
relax.inspect.tensor_dtype_bits
relax.inspect.tensor_dtype_code
relax.inspect.tensor_dtype_lanes
relax.inspect.tensor_elem_offset
relax.inspect.tensor_ndim
relax.inspect.tensor_shape_i
relax.inspect.tensor_stride_i
relax.invoke_closure
relax.invoke_pure_closure
relax.layout_transform
relax.make_closure
relax.median
relax.memory.alloc_storage
relax.memory.alloc_tensor
relax.memory.ensure_zero_offset
relax.memory.kill_storage
relax.memory.kill_tensor
relax.memory.view
relax.meshgrid
relax.multinomial_from_uniform
relax.nn.adaptive_avg_pool1d
relax.nn.adaptive_avg_pool2d
relax.nn.adaptive_avg_pool3d
relax.nn.attention
relax.nn.attention_bias
relax.nn.attention_var_len
relax.nn.avg_pool1d
relax.nn.avg_pool3d
relax.nn.batch_flatten
relax.nn.batch_norm
relax.nn.conv1d
relax.nn.conv1d_transpose
relax.nn.conv2d_transpose
relax.nn.conv3d
relax.nn.conv3d_transpose
relax.nn.cross_entropy_with_logits
relax.nn.dropout
relax.nn.group_norm
relax.nn.instance_norm
relax.nn.leakyrelu
relax.nn.max_pool1d
relax.nn.max_pool3d
relax.nn.nll_loss
relax.nn.pad
relax.nn.pixel_shuffle
relax.nn.prelu
relax.nn.selu
relax.nn.softplus
relax.nonzero
relax.one_hot
relax.outer
relax.print
relax.quantize
relax.reverse_sequence
relax.scatter_elements
relax.scatter_nd
relax.shape_to_tensor
relax.size
relax.slice_scatter
relax.sort
relax.tensor_to_shape
relax.to_vdevice
relax.topk
relax.tril
relax.triu
relax.unique
relax.vision.all_class_non_max_suppression
relax.vision.get_valid_counts
relax.vision.multibox_transform_loc
relax.vision.non_max_suppression
relax.vision.roi_align
relax.vision.roi_pool
relax.vm.call_tir_dyn
relax.wrap_param
""")

# `R.*` script names (relax.txt) the Relax parser does not accept
MISSING_R_NAMES = _lines("""
R.Else
R.If
R.SeqExpr
R.ShapeExpr
R.Then
R.TupleGetItem
R.arange
R.arg
R.argsort
R.assert_op
R.bucketize
R.builtin.stop_lift_params
R.call_builtin_with_ctx
R.call_inplace_packed
R.call_pure_packed
R.call_py_func
R.call_tir_inplace
R.call_tir_with_grad
R.ccl.allgather
R.ccl.allreduce
R.ccl.broadcast_from_worker0
R.ccl.scatter_from_worker0
R.clip
R.collapse_sum_like
R.collapse_sum_to
R.cpu
R.cuda
R.cumprod
R.cumsum
R.dequantize
R.device
R.dist.DTensor
R.dist.annotate_sharding
R.dist.call_tir
R.dist.call_tir_local_view
R.dist.const
R.dist.device_mesh
R.dist.redistribute
R.dist.redistribute_replica_to_shard
R.dynamic_strided_slice
R.einsum
R.emit
R.emit_match_cast
R.emit_te
R.emit_var_binding
R.emit_with_ty
R.emit_with_type
R.ewise_fma
R.ext_dev
R.eye
R.eye_like
R.func_name
R.func_ret_ty
R.func_ret_type
R.func_ret_value
R.gather_elements
R.gather_nd
R.grad.avg_pool2d_backward
R.grad.end_checkpoint
R.grad.max_pool2d_backward
R.grad.nll_loss_backward
R.grad.no_grad
R.grad.start_checkpoint
R.grad.take_backward
R.hamming_window
R.hexagon
R.hint_on_device
R.image.affine_grid
R.image.grid_sample
R.image.resize2d
R.image.resize3d
R.index_put
R.index_tensor
R.invoke_closure
R.invoke_pure_closure
R.layout_transform
R.linear
R.macro
R.make_closure
R.median
R.memory.alloc_storage
R.memory.alloc_tensor
R.memory.ensure_zero_offset
R.memory.kill_storage
R.memory.kill_tensor
R.memory.view
R.meshgrid
R.metal
R.multinomial_from_uniform
R.nn.adaptive_avg_pool1d
R.nn.adaptive_avg_pool2d
R.nn.adaptive_avg_pool3d
R.nn.attention
R.nn.attention_bias
R.nn.attention_var_len
R.nn.avg_pool1d
R.nn.avg_pool3d
R.nn.batch_flatten
R.nn.batch_norm
R.nn.conv1d
R.nn.conv1d_transpose
R.nn.conv2d_transpose
R.nn.conv3d
R.nn.conv3d_transpose
R.nn.cross_entropy_with_logits
R.nn.dropout
R.nn.group_norm
R.nn.instance_norm
R.nn.leakyrelu
R.nn.max_pool1d
R.nn.max_pool3d
R.nn.nll_loss
R.nn.pad
R.nn.pixel_shuffle
R.nn.prelu
R.nn.relu6
R.nn.selu
R.nn.softplus
R.nonzero
R.one_hot
R.opencl
R.outer
R.print
R.quantize
R.reverse_sequence
R.rewriter
R.rocm
R.scatter_elements
R.scatter_nd
R.shape_to_tensor
R.size
R.slice_scatter
R.sort
R.stop_lift_params
R.tensor_to_shape
R.to_vdevice
R.topk
R.tril
R.triu
R.unique
R.vision.all_class_non_max_suppression
R.vision.get_valid_counts
R.vision.multibox_transform_loc
R.vision.non_max_suppression
R.vision.roi_align
R.vision.roi_pool
R.vm.call_tir_dyn
R.vpi
R.vulkan
R.webgpu
R.wrap_param
""")

# `T.*` names of TVM's TensorIR script namespace (tir.txt) the TensorIR parser does not accept
MISSING_TIR_NAMES = _lines("""
T.BitwiseAnd
T.BitwiseNot
T.BitwiseOr
T.BitwiseXor
T.Break
T.BufferLoad
T.Call
T.CallEffectKind
T.CommReducer
T.ComposeLayout
T.Continue
T.DtypeConstructor
T.ExecScope
T.FloatImm
T.IntImm
T.Iter
T.IterVar
T.LShift
T.Layout
T.LetAnnotation
T.LocalVectorAnnotation
T.Optional
T.Ptr
T.R
T.RShift
T.Range
T.Reduce
T.S
T.SMEMPool
T.ScopeIdDef
T.TMEMPool
T.TensorMap
T.TileLayout
T.Tuple
T.Var
T.add_to_parent
T.alloc_cast_frag
T.alloc_tcgen05_ldst_frag
T.arg
T.block_name_suffix_context
T.buffer_var
T.call_kernel
T.cluster_id
T.constexpr
T.cta_id
T.cta_id_in_cluster
T.cta_id_in_pair
T.cuda
T.func_name
T.func_ret
T.inline
T.iter_var
T.jit
T.lane_id
T.llvm_lookup_intrinsic_id
T.macro
T.meta_class
T.meta_var
T.nki
T.ptr
T.ptx
T.register_script_namespace
T.scalar_wrapper
T.scope_id
T.smem
T.tensormap_encode_tiled
T.thread_id
T.thread_id_in_wg
T.tmem
T.warp_id
T.warp_id_in_wg
T.warpgroup_id
T.wg_reg_tile
""")

# methods of TVM's Schedule (schedule.txt) that tvms' Schedule lacks
MISSING_SCHEDULE_METHODS = _lines("""
annotate_buffer_access
cache_index
cache_inplace
can_decompose_padding
decompose_padding
fuse_reduction_epilogue
get_sref
loop_partition
pad_einsum
read_at
reindex_cache_read
reindex_cache_write
rolling_buffer
state
tensorize
write_at
""")


def _fixture(name: str, prefix: str = "") -> list[str]:
    """The names of a fixture file (``#`` lines are its header), those starting with ``prefix``."""
    path = FIXTURES / name
    names = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return [n for n in names if n.startswith(prefix)]


def _knows_relax_op(name: str) -> bool:
    return relax_op.lookup(name) is not None


def _knows_schedule_method(name: str) -> bool:
    return not name.startswith("_") and hasattr(Schedule, name)


# checklist -> (fixture, prefix of its lines, does tvms know the name?, the names it lacks)
CHECKLISTS: dict[str, tuple[str, str, Callable[[str], bool], list[str]]] = {
    "relax operators": ("relax.txt", "relax.", _knows_relax_op, MISSING_RELAX_OPS),
    "R names": ("relax.txt", "R.", lambda n: is_r_builtin_name(n[len("R."):]), MISSING_R_NAMES),
    "T names": ("tir.txt", "T.", lambda n: is_builtin_name(n[len("T."):]), MISSING_TIR_NAMES),
    "schedule methods": ("schedule.txt", "", _knows_schedule_method, MISSING_SCHEDULE_METHODS),
}


def coverage(checklist: str) -> tuple[int, int]:
    """(names tvms knows, names in TVM 0.27) for one checklist."""
    fixture, prefix, knows, _ = CHECKLISTS[checklist]
    names = _fixture(fixture, prefix)
    return sum(map(knows, names)), len(names)


@pytest.mark.parametrize("checklist", list(CHECKLISTS))
def test_missing_list_is_exact(checklist):
    fixture, prefix, knows, missing = CHECKLISTS[checklist]
    names = _fixture(fixture, prefix)
    assert names, f"{fixture} holds no {checklist}: regenerate it with tools/tvm_inventory.py"
    lost = sorted(n for n in names if not knows(n) and n not in missing)
    assert not lost, f"{checklist} of TVM 0.27 that tvms does not know and the list does not name: {lost}"
    learned = sorted(n for n in missing if knows(n))
    assert not learned, f"tvms knows these now: take them off the missing {checklist}: {learned}"
    stale = sorted(set(missing) - set(names))
    assert not stale, f"the missing {checklist} name what TVM 0.27 does not have: {stale}"
    assert missing == sorted(set(missing)), f"keep the missing {checklist} sorted, each once"
    known, total = coverage(checklist)
    print(f"{checklist}: {known}/{total} known to tvms ({100 * known / total:.1f}%)")


@pytest.mark.parametrize("checklist, unknown", [
    ("relax operators", "relax.no_such_op"), ("R names", "R.no_such_op"),
    ("T names", "T.no_such_builtin"), ("schedule methods", "no_such_primitive")])
def test_a_name_tvms_lacks_is_not_known(checklist, unknown):
    # the predicates decide the coverage: none may accept everything
    assert not CHECKLISTS[checklist][2](unknown)


def test_fixtures_say_how_they_were_made():
    for name in ("relax.txt", "tir.txt", "schedule.txt"):
        header = [line for line in (FIXTURES / name).read_text().splitlines() if line.startswith("#")]
        assert any("tools/tvm_inventory.py" in line for line in header), name
        assert any(line.startswith("# Apache TVM 0.27") for line in header), name


if __name__ == "__main__":
    for checklist in CHECKLISTS:
        known, total = coverage(checklist)
        print(f"{checklist}: {known}/{total} ({100 * known / total:.1f}%)")
