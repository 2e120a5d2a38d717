"""A kernel's launch bounds (``tirx.launch_bounds_min_blocks_per_sm``,
``tirx.launch_bounds_max_blocks_per_cluster``, ``tirx.max_registers``), written in its body as
TVM 0.27's tirx kernels write them: SplitHostDevice makes them the kernel's attributes and the CUDA
code generator writes them on its declaration, as TVM does (the goldens of
fixtures/tirx_pipeline: ``launch_bounds_*``, ``max_registers``); what TVM refuses is refused with
the kernel's name; NVRTC compiles what is written.
"""
from __future__ import annotations

import pytest

import tvms
from tvms.ir.errors import TVMSError
from tvms.ir.node import FrozenDict
from tvms.ir.stmt import AttrStmt
from tvms.ir.target import Target
from tvms.ir.visitor import walk
from tvms.lowering.codegen.cuda import cuda_source
from tvms.lowering.tir.gpu.tirx_pipeline import lower_for_cuda_tirx, split_for_cuda_tirx
from tvms.script import from_source

from cuda_support import assert_compiles

SM90A = {"kind": "cuda", "arch": "sm_90a"}


def _kernel(attrs: str, threads: int = 128) -> str:
    return f"""# from tvm.script import tirx as T

@T.prim_func
def k(A: T.Buffer((4,), "int32")):
    T.attr({{"tirx.device_entry": T.bool(True), {attrs}}})
    bx = T.cta_id([4])
    tx = T.thread_id([{threads}])
    if tx == 0:
        A[bx] = A[bx] + 1
"""


def _source(attrs: str, threads: int = 128) -> str:
    return tvms.build(from_source(_kernel(attrs, threads)), target=SM90A, pipeline="tirx") \
        .imported_modules[0].get_source()


def test_the_bounds_become_the_kernels_attributes_and_leave_its_body() -> None:
    mod = split_for_cuda_tirx(from_source(_kernel('"tirx.launch_bounds_min_blocks_per_sm": 2, '
                                                  '"tirx.launch_bounds_max_blocks_per_cluster": 4')), Target(SM90A))
    kernel = mod["k_kernel"]
    assert kernel.attrs["tir.launch_bounds_min_blocks_per_sm"] == 2  # (keyed as the IR keys function attributes)
    assert kernel.attrs["tir.launch_bounds_max_blocks_per_cluster"] == 4
    assert not [n for n in walk(kernel.body) if isinstance(n, AttrStmt) and "launch_bounds" in n.attr_key]


@pytest.mark.parametrize("attrs, threads, declared", [
    ('"tirx.launch_bounds_min_blocks_per_sm": 2', 128, "__launch_bounds__(128, 2)"),
    ('"tirx.launch_bounds_min_blocks_per_sm": 1, "tirx.launch_bounds_max_blocks_per_cluster": 2', 384,
     "__launch_bounds__(384, 1, 2)"),
    ('"tirx.max_registers": 92', 128, "__maxnreg__(92)"),
])
def test_the_declaration_carries_the_bounds_and_nvrtc_compiles_it(attrs: str, threads: int, declared: str) -> None:
    source = _source(attrs, threads)
    assert f'extern "C" __global__ void {declared} k_kernel(' in source
    assert "__launch_bounds__" not in source or "__maxnreg__" not in source
    assert_compiles(source, archs=("sm_90a",))


def test_a_block_of_one_thread_has_no_launch_bounds_but_its_registers() -> None:
    assert 'void k_kernel(' in _source('"tirx.launch_bounds_min_blocks_per_sm": 2', threads=1)
    assert 'void __maxnreg__(40) k_kernel(' in _source('"tirx.max_registers": 40', threads=1)


@pytest.mark.parametrize("attrs, message", [
    ('"tirx.launch_bounds_max_blocks_per_cluster": 2',
     r"kernel k_kernel: tirx.launch_bounds_max_blocks_per_cluster needs tirx.launch_bounds_min_blocks_per_sm"),
    ('"tirx.max_registers": 64, "tirx.launch_bounds_min_blocks_per_sm": 1',
     r"kernel k_kernel: tirx.max_registers cannot be combined with launch bounds "
     r"\(tirx.launch_bounds_min_blocks_per_sm\)"),
    ('"tirx.max_registers": 0', r"kernel k_kernel: tirx.max_registers must be positive, not 0"),
    ('"tirx.launch_bounds_min_blocks_per_sm": -1',
     r"kernel k_kernel: tirx.launch_bounds_min_blocks_per_sm must be positive, not -1"),
    ('"tirx.max_registers": T.bool(True)', r"kernel k_kernel: tirx.max_registers takes an integer constant"),
])
def test_what_tvm_refuses_is_refused_naming_the_kernel(attrs: str, message: str) -> None:
    with pytest.raises(TVMSError, match=message):
        _source(attrs)


def test_one_key_written_twice_takes_one_value() -> None:
    text = _kernel('"tirx.max_registers": 64').replace(
        "    if tx == 0:", '    with T.attr({"tirx.max_registers": 64}):\n        if tx == 0:').replace(
        "        A[bx] = A[bx] + 1", "            A[bx] = A[bx] + 1")
    assert "__maxnreg__(64) k_kernel(" in tvms.build(from_source(text), target=SM90A, pipeline="tirx") \
        .imported_modules[0].get_source()
    with pytest.raises(TVMSError, match=r"tirx.max_registers is written twice with other values \(64 and 32\)"):
        tvms.build(from_source(text.replace('with T.attr({"tirx.max_registers": 64})',
                                            'with T.attr({"tirx.max_registers": 32})')), target=SM90A, pipeline="tirx")


@pytest.mark.parametrize("attrs, declared", [
    ('"tirx.launch_bounds_min_blocks_per_sm": 2', "__launch_bounds__(128, 2)"),
    ('"tirx.max_registers": 92', "__maxnreg__(92)"),
])
@pytest.mark.parametrize("dialect", ["classic", "tvm-0.27"])
def test_the_bounds_survive_a_print_and_parse_of_the_lowered_module(attrs: str, declared: str, dialect: str) -> None:
    # (the kernel's attributes are keyed as the IR keys them, so the text of either dialect reads back to them)
    lowered = lower_for_cuda_tirx(from_source(_kernel(attrs)), Target(SM90A))
    reparsed = from_source(lowered.script(dialect=dialect), "lowered.py")
    source = cuda_source([("k_kernel", reparsed["k_kernel"])])
    assert f'extern "C" __global__ void {declared} k_kernel(' in source


@pytest.mark.parametrize("bounds, message", [
    ({"tir.launch_bounds_max_blocks_per_cluster": 4},
     r"kernel k_kernel: tirx.launch_bounds_max_blocks_per_cluster needs tirx.launch_bounds_min_blocks_per_sm"),
    ({"tir.max_registers": 64, "tir.launch_bounds_min_blocks_per_sm": 2},
     r"kernel k_kernel: tirx.max_registers cannot be combined with launch bounds"),
    ({"tirx.max_registers": 0}, r"kernel k_kernel: tirx.max_registers must be positive, not 0"),
    ({"tir.launch_bounds_min_blocks_per_sm": True},
     r"kernel k_kernel: tirx.launch_bounds_min_blocks_per_sm takes an integer constant"),
])
def test_the_declaration_refuses_bounds_set_on_the_kernel_that_the_body_could_not_set(bounds, message) -> None:
    # (a kernel read from text, or given attributes by hand, is checked as SplitHostDevice checks its body)
    kernel = lower_for_cuda_tirx(from_source(_kernel('"tirx.max_registers": 92')), Target(SM90A))["k_kernel"]
    unbounded = {key: value for key, value in kernel.attrs.items() if "max_registers" not in key}
    kernel = kernel.with_changes(attrs=FrozenDict({**unbounded, **bounds}))
    with pytest.raises(TVMSError, match=message):
        cuda_source([("k_kernel", kernel)])
