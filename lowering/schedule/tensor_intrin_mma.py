"""The ``mma.sync`` tensor intrinsics TVM 0.27 registers for the second tensor-core tuning rule
(its default "cuda-tensorcore" space), by TVM's names: ``mma_init_m16n8k8_f16``/``_f32``,
``mma_load_m16n8k8_f16_A_shared_dyn``/``_B_shared_dyn``, ``mma_sync_m16n8k8_f16f16f16``/``f32``
and ``mma_store_m16n8k8_f16_global``/``f32_global``.

The fragments live in buffers of the scopes ``m16n8k8.matrixA``/``B``/``C``, as large as the
tiles they hold; an intrinsic's call names the registers of its tile by an offset computed from
the view's ``elem_offset`` (A and B: ``ldmatrix`` loads four 8 x 8 matrices, a 32 x 8 slice of A
or an 8 x 32 slice of B, transposed, into 8 registers per lane; C: two 8 x 8 halves per 16 x 8
tile). The store has no implementation of its own in TVM (its description stands for both): the
accumulators reach memory by the write-back copy the rule makes, not by this intrinsic.
"""
from __future__ import annotations

from .tensor_intrin_cuda import _buffer, _func, _nest, _register, _whole

_SHORT = {"float16": "f16", "float32": "f32"}
_ZERO = {"float16": "T.float16(0.0)", "float32": "T.float32(0.0)"}
M, N, K = 16, 8, 8
LOAD = {"A": (32, 8), "B": (8, 32)}  # (the slice one ldmatrix x4 moves)


def _offset(buf: str, operand: str) -> str:
    """The first register of the view's tile in its fragment buffer (TVM's get_index_A/B/C)."""
    stride, off = f"{buf}.strides[0]", f"{buf}.elem_offset"
    row, col = f"{off} // {stride}", f"{off} % {stride}"
    if operand == "A":
        return f"({row} // 32 * ({stride} // 8) + {col} // 8) * 8 + {row} % 32 // 16 * 4"
    if operand == "B":
        return f"({row} // 8 * ({stride} // 32) + {col} // 32) * 8 + {col} % 32 // 8 * 2"
    return f"({row} // 8 // 2 * 2 * ({stride} // 8) + {row} // 8 % 2 + {col} // 8 * 2) * 2"


def mma_init(dtype: str) -> tuple[str, str]:
    """A 16 x 8 accumulator tile set to zero, each lane its 2 x 2 elements."""
    param = [_buffer("dst", (M, N), dtype, "m16n8k8.matrixC", 1)]
    regions = ("", _whole("dst", (M, N)))
    desc = _func("mma_init_desc", param, regions,
                 _nest((M, N), "init", "SS", "", "dst[vii, vjj]", f"dst[vii, vjj] = {_ZERO[dtype]}"))
    body = ('for tx in T.thread_binding(32, thread="threadIdx.x"):\n    for b in range(2):\n'
            f"        for v in T.vectorized(2):\n            dst[b * 8 + tx // 4, tx % 4 * 2 + v] = {_ZERO[dtype]}")
    return desc, _func("mma_init_impl", param, regions, body)


def mma_load(operand: str) -> tuple[str, str]:
    """A float16 slice of A (32 x 8) or B (8 x 32) from shared memory into fragments: one
    ``ldmatrix`` x4, B's transposed (its rows are k, the fragment's columns)."""
    shape, scope = LOAD[operand], f"m16n8k8.matrix{operand}"
    regions = (_whole("src", shape), _whole("dst", shape))

    def params(strided: bool) -> list[str]:
        return [_buffer("src", shape, "float16", "shared.dyn", 1, '"s0", "s1"' * strided),
                _buffer("dst", shape, "float16", scope, 1, '"d0", "d1"' * strided)]

    desc = _func("mma_load_desc", params(False), regions,
                 _nest(shape, "root", "SS", "src[vii, vjj]", "dst[vii, vjj]", "dst[vii, vjj] = src[vii, vjj]"))
    trans, lane = ("T.bool(True)", "tx % 8 * src.strides[0] + tx // 8 * 8") if operand == "B" \
        else ("T.bool(False)", "tx * src.strides[0]")
    pointer = (f'T.tvm_access_ptr(T.type_annotation("float16"), src.data, src.elem_offset, '
               f"src.strides[0] * {shape[0]}, 1)")
    call = (f'T.ptx_legacy.ldmatrix({trans}, 4, ".b16", dst.data, {_offset("dst", operand)}, {pointer}, {lane})')
    body = f'for tx in T.thread_binding(32, thread="threadIdx.x"):\n    {call}'
    return desc, _func("mma_load_impl", params(True), regions, body)


def mma_sync(out_dtype: str) -> tuple[str, str]:
    """C (16 x 8) += A (16 x 8) B (8 x 8) in float16 operands: one ``mma.sync`` m16n8k8."""
    shapes = {"A": (M, K), "B": (K, N), "C": (M, N)}
    regions = (f"C[0:{M}, 0:{N}], A[0:{M}, 0:{K}], B[0:{K}, 0:{N}]", f"C[0:{M}, 0:{N}]")

    def params(strided: bool) -> list[str]:
        return [_buffer(name, shapes[name], out_dtype if name == "C" else "float16", f"m16n8k8.matrix{name}", 1,
                        f'"{name.lower()}0", "{name.lower()}1"' * strided) for name in "ABC"]

    def cast(load: str) -> str:
        return load if out_dtype == "float16" else f'T.Cast("{out_dtype}", {load})'

    store = f"C[vii, vjj] = C[vii, vjj] + {cast('A[vii, vkk]')} * {cast('B[vkk, vjj]')}"
    desc = _func("mma_sync_desc", params(False), regions,
                 _nest((M, N, K), "m16n8k8_sync", "SSR", "C[vii, vjj], A[vii, vkk], B[vkk, vjj]", "C[vii, vjj]",
                       store))
    call = (f'T.ptx_legacy.mma("m16n8k8", "row", "col", "float16", "float16", "{out_dtype}", '
            f'A.data, {_offset("A", "A")}, B.data, {_offset("B", "B")}, C.data, {_offset("C", "C")}, T.bool(False))')
    return desc, _func("mma_sync_impl", params(True), regions, call)


def mma_store(dtype: str) -> tuple[str, str]:
    """A 16 x 8 accumulator tile copied out; TVM registers the description as both halves."""
    params = [_buffer("src", (M, N), dtype, "m16n8k8.matrixC", 1), _buffer("dst", (M, N), dtype, "shared.dyn", 1)]
    desc = _func("mma_store_desc", params, (_whole("src", (M, N)), _whole("dst", (M, N))),
                 _nest((M, N), "m16n8k8_store", "SS", "src[vii, vjj]", "dst[vii, vjj]", "dst[vii, vjj] = src[vii, vjj]"))
    return desc, desc


def get_mma_m16n8k8_intrin_group(out_dtype: str) -> dict[str, str]:
    """The intrinsic group TVM 0.27's default cuda-tensorcore space gives its mma.sync rule for
    float16 operands accumulating in ``out_dtype`` (float16 or float32)."""
    c = _SHORT[out_dtype]
    return {"init": f"mma_init_m16n8k8_{c}", "load_a": "mma_load_m16n8k8_f16_A_shared_dyn",
            "load_b": "mma_load_m16n8k8_f16_B_shared_dyn", "compute": f"mma_sync_m16n8k8_f16f16{c}",
            "store": f"mma_store_m16n8k8_{c}_global"}


def _register_all() -> None:
    for dtype, c in _SHORT.items():
        _register(f"mma_init_m16n8k8_{c}", lambda d=dtype: mma_init(d))
        _register(f"mma_sync_m16n8k8_f16f16{c}", lambda d=dtype: mma_sync(d))
        _register(f"mma_store_m16n8k8_{c}_global", lambda d=dtype: mma_store(d))
    for operand in "AB":
        _register(f"mma_load_m16n8k8_f16_{operand}_shared_dyn", lambda o=operand: mma_load(o))


_register_all()

__all__ = ["get_mma_m16n8k8_intrin_group", "mma_init", "mma_load", "mma_store", "mma_sync"]
