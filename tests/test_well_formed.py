"""Programs that would touch memory outside their buffers, or whose iteration kinds contradict
their body, read (as in TVM) and are refused when compiled, at their position
(``tvms.ir.well_formed``); a compiled function refuses arguments that overlap."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tvms
from tvms import relax
from tvms.ir import FloatImm, IntImm, PrimFunc, ScriptError, TVMSError, decl_buffer
from tvms.ir.dtype import DataType
from tvms.ir.expr import Var
from tvms.ir.node import FrozenDict
from tvms.ir.stmt import BufferStore
from tvms.script import from_source

pytest.importorskip("llvmlite")


def plain(statement: str, decorator: str = "@T.prim_func") -> str:
    """A function of two 4-element buffers that runs ``statement`` (line 5) in a plain loop."""
    return f'''\
{decorator}
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        T.evaluate(0)
        {statement}
'''


def in_block(statement: str) -> str:
    """The same in a block (``statement`` on line 7, indented by 12; ``vi`` is the iterator)."""
    return f'''\
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("b"):
            vi = T.axis.remap("S", [i])
            T.evaluate(0)
            {statement}
'''


def assert_build_error(src: str, line: int, col: int, match: str) -> ScriptError:
    """``src`` reads (as TVM reads it) but its build fails at ``line``:``col`` with ``match``."""
    func = from_source(src, "refused.tvms")
    with pytest.raises(ScriptError) as info:
        tvms.build(func)
    err = info.value
    assert re.search(match, err.message), err.message
    assert (err.span.line, err.span.col) == (line, col)
    return err


# ---------------------------------------------------------------- constant indices
@pytest.mark.parametrize("index", ["4", "-1", "100000000"])
@pytest.mark.parametrize("where", ["load", "store"])
def test_a_constant_index_outside_the_buffer_is_refused_at_its_position(index, where):
    statement = f"B[i] = A[{index}]" if where == "load" else f"B[{index}] = A[i]"
    col = 9 + statement.index("A" if where == "load" else "B")
    assert_build_error(plain(statement), 5, col,
                       rf"^index {index} is out of bounds for axis 0 of buffer '{'A' if where == 'load' else 'B'}' "
                       rf"of shape \(4,\)$")
    statement = statement.replace("[i]", "[vi]")
    col = 13 + statement.index("A" if where == "load" else "B")
    assert_build_error(in_block(statement), 7, col, rf"^index {index} is out of bounds")


def test_every_axis_is_checked_and_the_last_index_inside_is_accepted():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8,), "float32")):
    for j in range(8):
        B[j] = A[3, j] + A[0, 7] + A[j % 4, 8]
'''
    assert_build_error(src, 4, 36, r"^index 8 is out of bounds for axis 1 of buffer 'A' of shape \(4, 8\)$")
    tvms.build(from_source(src.replace("A[j % 4, 8]", "A[j % 4, 0]")))


def test_a_vector_slice_past_the_end_is_refused():
    assert_build_error(plain("B[0:4] = A[1:5]"), 5, 18, r"^index 4 is out of bounds for axis 0 of buffer 'A'")


def test_symbolic_extents_and_computed_indices_are_left_to_run_time():
    from_source('''\
@T.prim_func
def main(a: T.handle, B: T.Buffer((4,), "float32")):
    n = T.int32()
    A = T.match_buffer(a, (n,))
    for i in range(4):
        B[i] = A[100]
''')


def test_a_match_buffer_region_outside_its_source_is_refused():
    src = '''\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32")):
    with T.block("b"):
        S = T.match_buffer(A[0:4, 2:6], (4, 4))
        T.evaluate(0)
'''
    assert_build_error(src, 4, 13, r"^T\.match_buffer: the region 2:6 of axis 1 is outside buffer 'A' of shape \(4, 4\)$")
    tvms.build(from_source(src.replace("2:6", "0:4")))


def test_reading_a_buffer_without_elements_is_refused():
    src = '''\
@T.prim_func
def main(A: T.Buffer((0, 4), "float32"), B: T.Buffer((4,), "float32")):
    for i, j in T.grid(4, 4):
        B[j] = A[i, j]
'''
    assert_build_error(src, 4, 16, r"^buffer 'A' of shape \(0, 4\) has no elements; it cannot be read$")
    # (under a loop that never runs no access happens: legalized operators on empty tensors)
    tvms.build(from_source(src.replace("T.grid(4, 4)", "T.grid(0, 4)")))
    tvms.build(from_source(src.replace("T.grid(4, 4)", "T.grid(4, 0)").replace("B[j]", "B[7]")))


def test_a_buffer_with_fewer_strides_than_dimensions_is_row_major():
    """TVM reads and prints ``T.alloc_buffer((8, 8), strides=(1,))`` (a TVM schedule test does)
    and compiles it, its CompactBufferAllocation dropping the strides: the buffer is row-major, in
    the reference executor (which had read ``index[v0, v1]`` as ``index[v0]``) as in the builds."""
    from tvms.runtime.reference import run_prim_func

    src = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "int32")):
    index = T.alloc_buffer((8, 8), "int32", strides=(1,))
    for i, j in T.grid(8, 8):
        index[i, j] = i * 8 + j
    for i, j in T.grid(8, 8):
        A[i, j] = index[j, i]
'''
    expected = np.arange(64).reshape(8, 8).T
    for run in (lambda a: run_prim_func(from_source(src), a), tvms.build(from_source(src))["main"]):
        a = np.zeros((8, 8), "int32")
        run(a)
        np.testing.assert_array_equal(a, expected)


def test_operators_on_empty_tensors_still_compile_and_run():
    mod = from_source('''\
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((0, 4), "float32")) -> R.Tensor((4,), "float32"):
        with R.dataflow():
            y = R.add(x, x)
            s = R.sum(y, axis=[0])
            R.output(s)
        return s
''')
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    np.testing.assert_array_equal(vm["main"](tvms.nd.array(np.zeros((0, 4), np.float32))).numpy(), np.zeros(4))


def test_the_build_refuses_what_the_parser_was_told_not_to_check():
    for build in (tvms.build, lambda f: tvms.compile(f, target="llvm")):
        func = from_source(plain("B[i] = A[4]", "@T.prim_func(check_well_formed=False)"), "unchecked.tvms")
        with pytest.raises(TVMSError, match=r"^unchecked\.tvms:5:16: error: index 4 is out of bounds"):
            build(func)


def test_the_build_refuses_a_function_built_in_python_naming_it():
    b = decl_buffer((4,), "float32", "B")
    handle = Var("b", DataType("handle"))
    func = PrimFunc((handle,), FrozenDict({handle: b}), BufferStore(b, FloatImm(DataType("float32"), 1.0),
                                                                    (IntImm(DataType("int32"), 4),)),
                    attrs=FrozenDict({"global_symbol": "fill"}))
    with pytest.raises(TVMSError, match=r"^error: fill: index 4 is out of bounds for axis 0 of buffer 'B'"):
        tvms.build(func)


# ---------------------------------------------------------------- iteration kinds
MATMUL = '''\
@T.prim_func
def main(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    for i, j, k in T.grid(4, 4, 4):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("KINDS", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0.0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def test_a_reduction_iterator_declared_spatial_is_refused():
    # (it compiled, and the init ran again for each k: C held the last product only)
    err = assert_build_error(MATMUL.replace("KINDS", "SSS"), 5, 26,
                             r"^block 'C': iterator 'vk' is declared spatial but does not index 'C', "
                             r"which the block's T\.init\(\) initializes$")
    assert "declare it a reduction iterator" in err.note


def test_a_spatial_iterator_declared_reduction_is_refused():
    assert_build_error(MATMUL.replace("KINDS", "SRR"), 5, 26,
                       r"^block 'C': reduction iterator 'vj' indexes 'C', which the block's T\.init\(\) initializes$")


def test_the_separate_axis_declarations_point_at_the_wrong_one():
    src = MATMUL.replace('vi, vj, vk = T.axis.remap("KINDS", [i, j, k])',
                         'vi = T.axis.spatial(4, i)\n'
                         '            vj = T.axis.spatial(4, j)\n'
                         '            vk = T.axis.spatial(4, k)')
    assert_build_error(src, 7, 18, r"iterator 'vk' is declared spatial")


def test_a_store_into_a_match_buffer_indexes_through_its_region():
    """``BB = T.match_buffer(B[i], ())``: a store ``BB[()]`` indexes ``B`` with ``i``."""
    src = MATMUL.replace("KINDS", "SSR").replace(
        "            with T.init():\n                C[vi, vj] = T.float32(0.0)\n"
        "            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]\n",
        "            CC = T.match_buffer(C[vi, vj], ())\n"
        "            with T.init():\n                CC[()] = T.float32(0.0)\n"
        "            CC[()] = CC[()] + A[vi, vk] * B[vk, vj]\n")
    a, b = np.random.default_rng(1).random((2, 4, 4), dtype=np.float32)
    c = np.zeros((4, 4), np.float32)
    tvms.build(from_source(src))(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_right_kinds_and_blocks_without_init_are_accepted():
    a, b = np.random.default_rng(0).random((2, 4, 4), dtype=np.float32)
    c = np.zeros((4, 4), np.float32)
    tvms.build(from_source(MATMUL.replace("KINDS", "SSR")))(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    # without T.init() the kinds say nothing about initialization (an update block, as
    # decompose_reduction leaves it, or a spatial block that accumulates in place)
    no_init = MATMUL.replace("            with T.init():\n                C[vi, vj] = T.float32(0.0)\n", "")
    from_source(no_init.replace("KINDS", "SSS"))


def test_iterators_count_through_the_bindings_of_nested_blocks():
    from_source('''\
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((4,), "float32")):
    for io, ko in T.grid(2, 2):
        with T.block("outer"):
            vio, vko = T.axis.remap("SR", [io, ko])
            with T.init():
                for ii in range(2):
                    with T.block("init"):
                        vi = T.axis.spatial(4, vio * 2 + ii)
                        C[vi] = T.float32(0.0)
            for ii, ki in T.grid(2, 4):
                with T.block("inner"):
                    vi = T.axis.spatial(4, vio * 2 + ii)
                    vk = T.axis.reduce(8, vko * 4 + ki)
                    C[vi] = C[vi] + A[vi * 4 + vk % 4]
''')


# ---------------------------------------------------------------- overlapping arguments
ADD = '''\
@T.prim_func
def main(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        C[i] = A[i] + B[i]
'''


def test_an_output_that_overlaps_an_input_is_refused():
    add = tvms.build(from_source(ADD))["main"]
    x = np.arange(8, dtype=np.float32)
    for a, c, k in ((x[:4], x[:4], 0), (x[:4], x[2:6], 0), (x[4:], x[1:5], 0)):
        b = np.ones(4, np.float32)
        with pytest.raises(TVMSError, match=rf"^main argument 2 \(C\) shares memory with argument {k} \(A\); "
                                            r"the function writes it"):
            add(a, b, c)
    t = tvms.nd.array(np.ones(4, np.float32))
    with pytest.raises(TVMSError, match=r"argument 2 \(C\) shares memory with argument 1 \(B\)"):
        add(np.ones(4, np.float32), t, t)
    np.testing.assert_array_equal(x, np.arange(8))  # nothing ran


def test_a_function_of_a_loaded_library_refuses_overlapping_arguments_too(tmp_path):
    tvms.build(from_source(ADD)).export_library(str(tmp_path / "add.so"))
    add = tvms.runtime.load_module(str(tmp_path / "add.so"))["main"]
    x = np.ones(4, np.float32)
    with pytest.raises(TVMSError, match=r"argument 2 \(C\) shares memory with argument 0 \(A\)"):
        add(x, np.ones(4, np.float32), x)


def test_a_relax_function_that_passes_a_tensor_as_input_and_output_of_a_kernel_is_refused():
    mod = from_source('''\
@I.ir_module
class Module:
    @T.prim_func
    def add(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4,), "float32")):
        for i in range(4):
            C[i] = A[i] + B[i]

    @R.function(pure=False)
    def main(x: R.Tensor((4,), "float32"), y: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        cls = Module
        _ = cls.add(x, y, y)
        return y
''')
    vm = relax.VirtualMachine(tvms.compile(mod, target="llvm"), tvms.cpu())
    x, y = np.ones(4, np.float32), np.ones(4, np.float32)
    # (the VM's fast path ran the kernel without its checks: the parameters fit its signature)
    with pytest.raises(TVMSError, match=r"^add argument 2 \(C\) shares memory with argument 1 \(B\)"):
        vm["main"](x, y)
    np.testing.assert_array_equal(y, np.ones(4))


def test_inputs_may_share_memory_and_disjoint_views_are_fine():
    add = tvms.build(from_source(ADD))["main"]
    x = np.arange(8, dtype=np.float32)
    add(x[:4], x[:4], x[4:])  # read twice, written elsewhere
    np.testing.assert_array_equal(x[4:], [0, 2, 4, 6])


# ---------------------------------------------------------------- Relax return annotations
def returning(annotation: str, param: str = 'R.Tensor((1, 20), "float32")') -> str:
    """A Relax function of ``x: param`` annotated ``-> annotation`` (line 4) that returns x + x."""
    return f'''\
@I.ir_module
class Module:
    @R.function
    def main(x: {param}) -> {annotation}:
        with R.dataflow():
            y = R.add(x, x)
            R.output(y)
        return y
'''


@pytest.mark.parametrize("annotation, reason", [
    ('R.Tensor((1, 10), "float32")', "extent 10 vs 20 in dimension 1"),
    ('R.Tensor((1, 20), "float16")', "dtype float16 vs float32"),
    ('R.Tensor((20,), "float32")', "1 vs 2 dimensions"),
    ('R.Tuple(R.Tensor((1, 20), "float32"))', "a tuple vs a tensor"),
    ('R.Shape([1, 20])', "a shape vs a tensor"),
])
def test_a_return_annotation_that_contradicts_the_body_is_kept_and_refused_by_compile(annotation, reason):
    # TVM 0.27 reads the function with the annotation as its return type (and compiles it, to
    # fail when it returns); tvms reads it as TVM does and refuses it when compiling, at the def
    src = returning(annotation)
    mod = from_source(src, "model.tvms")
    printed = annotation.replace('"float', 'dtype="float')
    assert mod.script().splitlines()[6].endswith(f"-> {printed}:")
    with pytest.raises(tvms.ScriptError) as err:
        tvms.compile(mod, "llvm")
    assert err.value.message == f"main: the return annotation contradicts the value returned (annotation vs value: {reason})"
    assert str(err.value).startswith("model.tvms:4:9: error: ")  # (the function's name)


def test_tuple_fields_are_compared_one_by_one():
    src = returning('R.Tuple(R.Tensor((1, 20), "float32"), R.Tensor((2,), "int32"))').replace(
        "return y", "return (y, R.const([1, 2, 3], \"int32\"))")
    with pytest.raises(tvms.ScriptError) as err:
        tvms.compile(from_source(src), "llvm")
    assert err.value.message.endswith("(annotation vs value: field 1: extent 2 vs 3 in dimension 0)")


@pytest.mark.parametrize("annotation, param", [
    ('R.Tensor(dtype="float32", ndim=2)', 'R.Tensor((1, 20), "float32")'),  # coarser
    ("R.Tensor", 'R.Tensor((1, 20), "float32")'),
    ("R.Object", 'R.Tensor((1, 20), "float32")'),
    ('R.Tensor((1, 20), "float32")', 'R.Tensor(dtype="float32", ndim=2)'),  # finer: checked at run time
    ('R.Tensor(("n", 20), "float32")', 'R.Tensor((1, 20), "float32")'),  # symbolic
    ('R.Tensor((1, 20), "float32")', 'R.Tensor(("n", 20), "float32")'),
    ('R.Tensor((1, 20))', 'R.Tensor((1, 20), "float32")'),  # unknown dtype
])
def test_a_compatible_return_annotation_is_accepted(annotation, param):
    from_source(returning(annotation, param))


