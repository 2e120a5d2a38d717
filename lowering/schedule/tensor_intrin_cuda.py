"""The CUDA tensor-core intrinsics TVM 0.27 registers for its WMMA path, by TVM's names
(``wmma_load_16x16x16_f16_a_shared_dyn``, ``wmma_sync_16x16x16_f16f16f32_trans``,
``wmma_fill_16x16x16_f32``, ``wmma_store_16x16x16_f32_shared``, ...), and
``get_wmma_intrin_group``, the names DLight's tensorized matmul asks for.

Each intrinsic is a description (a loop nest over 2-D buffers: a copy, a zero fill, or a
multiply-accumulate) and an implementation (one call of ``T.tvm_load_matrix_sync``,
``T.tvm_fill_fragment``, ``T.tvm_store_matrix_sync`` or ``T.tvm_mma_sync`` on
``offset_factor``-aligned views). A fragment array holds many tiles; the call names its tile by
index: the view's ``elem_offset`` in tiles of the fragment's rows and columns. The functions are
written as TVMScript and parsed when first asked for (``TensorIntrin.register_lazy``): parsing all
of them would cost a second at import.
"""
from __future__ import annotations

from typing import Callable

from ...ir.errors import TVMSError
from ...script import from_source
from .tensorize import TensorIntrin

_SHORT = {"float16": "f16", "float32": "f32", "int8": "s8", "int4": "s4", "int32": "s32"}
_ZERO = {"float16": "T.float16(0.0)", "float32": "T.float32(0.0)", "int32": "0"}


def _buffer(name: str, shape: tuple, dtype: str, scope: str, factor: int, strides: str = "") -> str:
    scope_kw = "" if scope == "global" else f', scope="{scope}"'
    strides_kw = f", strides=({strides})" if strides else ""
    return f'{name}: T.Buffer(({shape[0]}, {shape[1]}), "{dtype}"{strides_kw}{scope_kw}, offset_factor={factor})'


def _func(name: str, params: list[str], regions: tuple[str, str], body: str) -> str:
    reads, writes = regions
    return (f"@T.prim_func(s_tir=True)\ndef {name}({', '.join(params)}):\n"
            f'    with T.sblock("root"):\n        T.reads({reads})\n        T.writes({writes})\n'
            + "".join(f"        {line}\n" for line in body.splitlines()))


def _nest(shape: tuple, block: str, iters: str, reads: str, writes: str, store: str) -> str:
    """A loop nest over ``shape`` with one block inside (a description's body)."""
    names = "ijk"[:len(shape)]
    v = ", ".join(f"v{c}{c}" for c in names)
    return (f"for {', '.join(names)} in T.grid({', '.join(map(str, shape))}):\n"
            f'    with T.sblock("{block}"):\n'
            f'        {v} = T.axis.remap("{iters}", [{", ".join(names)}])\n'
            f"        T.reads({reads})\n        T.writes({writes})\n        {store}")


def _whole(buf: str, shape: tuple) -> str:
    return f"{buf}[0:{shape[0]}, 0:{shape[1]}]"


def _tile(buf: str, rows: int, cols: int) -> str:
    """The index of the view's tile in its fragment array (TVM's ``get_wmma_fragment_index``)."""
    stride = f"{buf}.strides[0]"
    return f"{buf}.elem_offset // {stride} // {rows} * ({stride} // {cols}) + {buf}.elem_offset % {stride} // {cols}"


def _pointer(buf: str, dtype: str, rows: int, mask: int) -> str:
    return f'T.tvm_access_ptr(T.type_annotation("{dtype}"), {buf}.data, {buf}.elem_offset, {buf}.strides[0] * {rows}, {mask})'


def wmma_load(m: int, n: int, k: int, dtype: str, scope: str, is_b: bool, col_major: bool) -> tuple[str, str]:
    """Shared memory to a ``wmma.matrix_a``/``matrix_b`` tile, in row- or column-major order."""
    frag = f"wmma.matrix_{'b' if is_b else 'a'}"
    shape = (k, n) if is_b else (m, k)
    if col_major:
        shape = shape[::-1]
    factor, whole = shape[1], (_whole("A", shape), _whole("C", shape))
    desc = _func("wmma_load_desc", [_buffer("A", shape, dtype, scope, factor), _buffer("C", shape, dtype, frag, factor)],
                 whole, _nest(shape, "load", "SS", "A[vii, vjj]", "C[vii, vjj]", "C[vii, vjj] = A[vii, vjj]"))
    call = (f"T.tvm_load_matrix_sync(C.data, {m}, {n}, {k}, {_tile('C', *shape)}, {_pointer('A', dtype, shape[0], 1)}, "
            f'A.strides[0], "{"col_major" if col_major else "row_major"}")')
    impl = _func("wmma_load_impl", [_buffer("A", shape, dtype, scope, factor, '"s1", "s0"'),
                                    _buffer("C", shape, dtype, frag, factor, '"d1", "d0"')], whole, call)
    return desc, impl


def wmma_fill(m: int, n: int, k: int, dtype: str) -> tuple[str, str]:
    """A ``wmma.accumulator`` tile set to zero."""
    shape = (m, n)
    regions = ("", _whole("C", shape))
    desc = _func("wmma_fill_desc", [_buffer("C", shape, dtype, "wmma.accumulator", n)], regions,
                 _nest(shape, "init", "SS", "", "C[vii, vjj]", f"C[vii, vjj] = {_ZERO[dtype]}"))
    call = f"T.tvm_fill_fragment(C.data, {m}, {n}, {k}, {_tile('C', m, n)}, T.float32(0.0))"
    impl = _func("wmma_fill_impl", [_buffer("C", shape, dtype, "wmma.accumulator", n, '"d1", "d0"')], regions, call)
    return desc, impl


def wmma_store(m: int, n: int, k: int, dtype: str, scope: str) -> tuple[str, str]:
    """A ``wmma.accumulator`` tile written row-major to ``scope``."""
    shape = (m, n)
    whole = (_whole("A", shape), _whole("C", shape))
    desc = _func("wmma_store_desc", [_buffer("A", shape, dtype, "wmma.accumulator", n), _buffer("C", shape, dtype, scope, n)],
                 whole, _nest(shape, "store", "SS", "A[vii, vjj]", "C[vii, vjj]", "C[vii, vjj] = A[vii, vjj]"))
    call = (f"T.tvm_store_matrix_sync(A.data, {m}, {n}, {k}, {_tile('A', m, n)}, {_pointer('C', dtype, m, 2)}, "
            f'C.strides[0], "row_major")')
    impl = _func("wmma_store_impl", [_buffer("A", shape, dtype, "wmma.accumulator", n, '"d1", "d0"'),
                                     _buffer("C", shape, dtype, scope, n, '"s1", "s0"')], whole, call)
    return desc, impl


def wmma_sync(m: int, n: int, k: int, in_dtype: str, out_dtype: str, b_transposed: bool) -> tuple[str, str]:
    """``C[i, j] += A[i, k] * B[k, j]`` (``B[j, k]`` when transposed) on fragments, the operands
    cast to the accumulator's type when it differs."""
    a_shape, b_shape, c_shape = (m, k), ((n, k) if b_transposed else (k, n)), (m, n)
    regions = (f"{_whole('C', c_shape)}, {_whole('A', a_shape)}, {_whole('B', b_shape)}", _whole("C", c_shape))

    def cast(load: str) -> str:
        return load if in_dtype == out_dtype else f'T.Cast("{out_dtype}", {load})'

    b_load = "B[vjj, vkk]" if b_transposed else "B[vkk, vjj]"
    store = f"C[vii, vjj] = C[vii, vjj] + {cast('A[vii, vkk]')} * {cast(b_load)}"

    def params(strides: bool) -> list[str]:
        return [_buffer(name, shape, dtype, f"wmma.{scope}", shape[1], f'"{name.lower()}1", "{name.lower()}0"' * strides)
                for name, shape, dtype, scope in (("A", a_shape, in_dtype, "matrix_a"), ("B", b_shape, in_dtype, "matrix_b"),
                                                  ("C", c_shape, out_dtype, "accumulator"))]

    desc = _func("wmma_sync_desc", params(False), regions,
                 _nest((m, n, k), "", "SSR", f"C[vii, vjj], A[vii, vkk], {b_load}", "C[vii, vjj]", store))
    tiles = {"A": _tile("A", *a_shape), "B": _tile("B", *b_shape), "C": _tile("C", *c_shape)}
    call = f"T.tvm_mma_sync(C.data, {tiles['C']}, A.data, {tiles['A']}, B.data, {tiles['B']}, C.data, {tiles['C']})"
    return desc, _func("wmma_sync_impl", params(True), regions, call)


def _register(name: str, make: Callable[[], tuple[str, str]]) -> None:
    def build() -> TensorIntrin:
        desc, impl = make()
        return TensorIntrin(from_source(desc), from_source(impl))
    TensorIntrin.register_lazy(name, build)


def _scope_name(scope: str) -> str:
    return scope.replace(".", "_")


def _register_all() -> None:
    """TVM 0.27's WMMA intrinsics: 16x16x16 on float16 and int8, 8x8x32 on int4 (B transposed)."""
    for in_dtype, out_dtype, trans in (("float16", "float32", False), ("float16", "float32", True),
                                       ("float16", "float16", False), ("float16", "float16", True),
                                       ("int8", "int32", False), ("int8", "int32", True), ("int4", "int32", True)):
        m, n, k = (8, 8, 32) if in_dtype == "int4" else (16, 16, 16)
        name = f"wmma_sync_{m}x{n}x{k}_{_SHORT[in_dtype] * 2}{_SHORT[out_dtype]}{'_trans' * trans}"
        _register(name, lambda a=(m, n, k, in_dtype, out_dtype, trans): wmma_sync(*a))
    for dtype, operands in (("float16", "a b a_trans b_trans"), ("int8", "a b a_trans b_trans"), ("int4", "a b_trans")):
        m, n, k = (8, 8, 32) if dtype == "int4" else (16, 16, 16)
        for operand in operands.split():
            for scope in ("shared", "shared.dyn"):
                name = f"wmma_load_{m}x{n}x{k}_{_SHORT[dtype]}_{operand}_{_scope_name(scope)}"
                _register(name, lambda a=(m, n, k, dtype, scope, operand[0] == "b", "trans" in operand): wmma_load(*a))
    for dtype, (m, n, k) in (("float32", (16, 16, 16)), ("float16", (16, 16, 16)), ("int32", (16, 16, 16)),
                             ("int32", (8, 8, 32))):
        shape = f"{m}x{n}x{k}_{_SHORT[dtype]}"
        _register(f"wmma_fill_{shape}", lambda a=(m, n, k, dtype): wmma_fill(*a))
        for scope in ("shared", "shared.dyn", "global"):
            _register(f"wmma_store_{shape}_{_scope_name(scope)}", lambda a=(m, n, k, dtype, scope): wmma_store(*a))


def get_wmma_intrin_group(load_scope: str, store_scope: str, in_dtype: str, out_dtype: str,
                          trans_b: bool) -> dict[str, str]:
    """The names of the init, load_a, load_b, compute and store intrinsics of one 16x16x16 WMMA
    configuration (TVM's ``get_wmma_intrin_group``)."""
    if load_scope not in ("shared", "shared.dyn") or store_scope not in ("global", "shared", "shared.dyn"):
        raise TVMSError(f"get_wmma_intrin_group: no WMMA intrinsics load from {load_scope!r} and store to {store_scope!r}")
    if in_dtype not in ("float16", "int8") or out_dtype not in ("float16", "float32", "int32"):
        raise TVMSError(f"get_wmma_intrin_group: no 16x16x16 WMMA intrinsics of {in_dtype} into {out_dtype}")
    shape, a, c = "16x16x16", _SHORT[in_dtype], _SHORT[out_dtype]
    trans = "_trans" if trans_b else ""
    return {"init": f"wmma_fill_{shape}_{c}",
            "load_a": f"wmma_load_{shape}_{a}_a_{_scope_name(load_scope)}",
            "load_b": f"wmma_load_{shape}_{a}_b{trans}_{_scope_name(load_scope)}",
            "compute": f"wmma_sync_{shape}_{a}{a}{c}{trans}",
            "store": f"wmma_store_{shape}_{c}_{_scope_name(store_scope)}"}


_register_all()
from . import tensor_intrin_mma  # noqa: E402,F401  (the mma.sync family registers with this one, as in TVM)

__all__ = ["get_wmma_intrin_group", "wmma_fill", "wmma_load", "wmma_store", "wmma_sync"]
