"""Tensor cores through PTX (``mma.sync``, ``ldmatrix``) as TVM 0.27's CUDA code generator writes the
calls of its PTX tensor intrinsics (``tvm.s_tir.tensor_intrin.cuda``'s LDMATRIX_* and MMA_*):

* ``T.ptx_legacy.mma(shape, a_layout, b_layout, a_type, b_type, c_type, A, a_off, B, b_off, C,
  c_off, saturate[, bit_op])``: a block of inline asm ``mma.sync.aligned.<shape>.<a>.<b>...``,
  the operands the warp-fragment arrays' 32-bit (or 64-bit) registers from ``ptr + offset``
  (``D`` is ``C``: the accumulators are updated in place);
* ``T.ptx_legacy.ldmatrix(trans, num, ".b16", local, local_off, smem, smem_off)``: inline asm
  ``ldmatrix.sync.aligned.m8n8.x<num>[.trans].shared.b16``; a transposed load of 8-bit elements,
  which ldmatrix cannot do, is a gather loop instead (the last argument then the shared tile's
  row stride);
* ``T.cuda.mma_fill_legacy(size, local, off)``: zeros into the accumulators;
* ``T.cuda.mma_store_legacy(16, 16, dst, local, off, stride)``: the 8 accumulators each thread
  holds of a 16 x 16 tile, to ``dst`` at the place the ldmatrix layout gives them.

The asm blocks are written as statements of their own (TVM writes them straight to its stream);
the loops are expressions TVM's ``Evaluate`` ends with ``;``. Which shapes and types a GPU takes
is NVRTC's and ptxas's to check.
"""
from __future__ import annotations

from typing import Any

from ...ir import expr as E
from ...ir.buffer import pointer_data
from ...ir.errors import TVMSError

# PTX's matrix types, by the names TVM's intrinsics give them: (PTX suffix, bits)
_TYPES = {".s4": 4, ".u4": 4, ".s8": 8, ".u8": 8, ".s16": 16, ".u16": 16, ".s32": 32, ".u32": 32, ".s64": 64,
          ".u64": 64, ".e4m3": 8, ".e5m2": 8, ".f16": 16, ".bf16": 16, ".f32": 32, ".tf32": 32, ".f64": 64,
          ".b1": 1, ".b8": 8, ".b16": 16, ".b32": 32, ".b64": 64}
_ALIASES = {"int4": ".s4", "uint4": ".u4", "int8": ".s8", "uint8": ".u8", "int16": ".s16", "uint16": ".u16",
            "int32": ".s32", "uint32": ".u32", "int64": ".s64", "uint64": ".u64", "e4m3": ".e4m3",
            "float8_e4m3fn": ".e4m3", "e5m2": ".e5m2", "float8_e5m2": ".e5m2", "float16": ".f16", "fp16": ".f16",
            "bfloat16": ".bf16", "bf16": ".bf16", "float32": ".f32", "fp32": ".f32", "tf32": ".tf32",
            "float64": ".f64", "fp64": ".f64", "int1": ".b1"}

_MMA = """
  {
    __asm__ __volatile__(
      "mma.sync.aligned{.shape}{.alayout}{.blayout}{.saturate}{.dtype}{.atype}{.btype}{.ctype}{.bitop}"
      "{templates};\\n"
      : {outputs}
      : {inputs});
  }
"""
_LDMATRIX = """
  {
    unsigned int addr = __cvta_generic_to_shared({smem_addr});
    __asm__ __volatile__(
      "ldmatrix.sync.aligned{.shape}{.num}{.trans}{.ss}{.type}"
      "{templates};\\n"
      : {outputs}
      : "r"(addr)
    );
  }
"""


def ptx_type(name: str) -> str:
    suffix = _ALIASES.get(name, name)
    if suffix not in _TYPES:
        raise TVMSError(f"{name!r} is not a PTX matrix type")
    return suffix


def _register(suffix: str) -> tuple[str, int, str]:
    """The asm constraint, bits and pointer cast of a fragment register holding ``suffix``."""
    if suffix == ".s32":
        return "r", 32, "(int *)"
    if suffix == ".f32":
        return "f", 32, "(float *)"
    if suffix == ".f64":
        return "d", 64, "(double *)"
    return "r", 32, "(unsigned *)"  # (packed: f16x2, bf16x2, 4 x s8 ...)


def _replace(text: str, rules: list) -> str:
    """Each rule in turn over the whole text, as TVM's Replacer does."""
    for pattern, replacement in rules:
        text = text.replace(pattern, replacement)
    return text


def _constants(call: str, args: tuple, names: dict) -> list:
    """The values of the constant arguments of ``call`` named in ``names`` (name -> the node a
    constant of it is, a string or an integer), a TVMSError naming one that is not."""
    for arg, (name, kind) in zip(args, names.items()):
        if not isinstance(arg, kind):
            raise TVMSError(f"{call}: its {name} argument is a constant "
                            f"{'string' if kind is E.StringImm else 'integer'}, not {arg.script()}")
    return [arg.value for arg in args[:len(names)]]


def _counts(mnk: tuple, suffixes: tuple) -> list[int]:
    """How many registers each thread gives A, B and C (m8n8k4 in float16 is four MMAs of 8 threads)."""
    m, n, k = mnk
    threads = 8 if (m, n, k) == (8, 8, 4) and suffixes[0] == ".f16" else 32
    return [rows * cols * _TYPES[s] // _register(s)[1] // threads
            for (rows, cols), s in zip(((m, k), (k, n), (m, n)), suffixes)]


class PtxTensorCore:
    """The mma.sync / ldmatrix side of ``CudaSource``."""

    def ptx_mma(self, args: tuple) -> str:
        if len(args) not in (13, 14):
            raise TVMSError(f"T.ptx_legacy.mma takes 13 or 14 arguments, not {len(args)}")
        strings = ("shape", "A layout", "B layout", "A type", "B type", "C type")
        shape, a_layout, b_layout, a_type, b_type, c_type = _constants(
            "T.ptx_legacy.mma", args, dict.fromkeys(strings, E.StringImm))
        saturate, *bit_op = _constants("T.ptx_legacy.mma", args[12:], {"saturate": E.IntImm, "bit op": E.StringImm})
        try:
            mnk = tuple(int(x) for x in shape[1:].replace("n", " ").replace("k", " ").split())
        except ValueError:
            mnk = ()
        if len(mnk) != 3 or not shape.startswith("m"):
            raise TVMSError(f"T.ptx_legacy.mma: {shape!r} is not an MMA shape (m16n8k16)")
        suffixes = tuple(ptx_type(t) for t in (a_type, b_type, c_type))
        n_a, n_b, n_c = _counts(mnk, suffixes)
        (ra, _, pa), (rb, _, pb), (rc, _, pc) = (_register(s) for s in suffixes)
        slots = iter(range(n_c * 2 + n_a + n_b))
        templates = "}, {".join(", ".join(f"%{next(slots)}" for _ in range(n)) for n in (n_c, n_a, n_b, n_c))
        # (the operands written in, not substituted for TVM's placeholders A, B, C and D one after
        # another, which would rewrite a later placeholder's letter inside an earlier operand's name)
        a, b, c = (f"{self.expr(x)} + {self.expr(off)}" for x, off in zip(args[6:12:2], args[7:12:2]))
        inputs = ", ".join([f'"{ra}"(({pa}({a}))[{i}])' for i in range(n_a)]
                           + [f'"{rb}"(({pb}({b}))[{i}])' for i in range(n_b)]
                           + [f'"{rc}"(({pc}({c}))[{i}])' for i in range(n_c)])
        outputs = ",".join(f' "={rc}"(({pc}({c}))[{i}])' for i in range(n_c))  # (D is C: updated in place)
        bit_op = bit_op[0] if bit_op else ""
        text = _replace(_MMA, [("{.shape}", "." + shape), ("{.saturate}", ".satfinite" if saturate else ""),
                               ("{.alayout}", "." + a_layout), ("{.blayout}", "." + b_layout),
                               ("{.atype}", suffixes[0]), ("{.btype}", suffixes[1]), ("{.ctype}", suffixes[2]),
                               ("{.dtype}", suffixes[2]), ("{.bitop}", f".{bit_op}.popc" if bit_op else ""),
                               ("{templates}", "{" + templates + "}"), ("{outputs}", outputs), ("{inputs}", inputs)])
        self.tags.add("mma")
        self.out.append(text)
        return ""

    def ptx_ldmatrix(self, args: tuple) -> str:
        if len(args) != 7:
            raise TVMSError(f"T.ptx_legacy.ldmatrix takes 7 arguments, not {len(args)}")
        trans, num, matrix_type = _constants("T.ptx_legacy.ldmatrix", args,
                                             {"trans": E.IntImm, "matrices": E.IntImm, "type": E.StringImm})
        trans = bool(trans)
        if num not in (1, 2, 4):
            raise TVMSError(f"ldmatrix loads 1, 2 or 4 matrices, not {num}")
        if ptx_type(matrix_type) != ".b16":
            raise TVMSError(f"ldmatrix loads .b16 matrices, not {matrix_type}")
        local, local_off, smem = (self.expr(x) for x in args[3:6])
        self.tags.add("mma")
        element = self.handle_type.get(pointer_data(args[3]))
        if trans and element is not None and element.bits == 8:  # (ldmatrix transposes 16-bit elements only)
            if num != 4:
                raise TVMSError("a transposed ldmatrix of 8-bit elements is gathered for 4 matrices only")
            stride = self.expr(args[6])
            return (f"for (int i = 0; i < 16; ++i) {{\n{local}[{local_off} + i] = {smem}[(i % 8) / 4 * {stride} * 16 "
                    f"+ (threadIdx.x % 4) * 4 * {stride}+ (i % 4) * {stride} + threadIdx.x / 4 +  (i / 8) * 8];\n}}\n")
        templates = "{" + ", ".join(f"%{i}" for i in range(num)) + f"}}, [%{num}]"
        outputs = ", ".join(f'"=r"(((unsigned *)({local} + {local_off}))[{i}])' for i in range(num))
        self.out.append(_replace(_LDMATRIX, [("{.shape}", ".m8n8"), ("{.num}", f".x{num}"),
                                             ("{.trans}", ".trans" if trans else ""), ("{.ss}", ".shared"),
                                             ("{.type}", ".b16"), ("{smem_addr}", f"{smem} + {self.expr(args[6])}"),
                                             ("{templates}", templates), ("{outputs}", outputs)]))
        return ""

    def mma_fill(self, args: tuple) -> str:
        size, local, offset = (self.expr(x) for x in args)
        return f"for (int i = 0; i < {size}; ++i) {{\n{local}[{offset} + i] = 0.0;}}\n"

    def mma_store(self, args: tuple) -> str:
        if not all(isinstance(x, E.IntImm) and x.value == 16 for x in args[:2]):
            raise TVMSError("T.cuda.mma_store_legacy stores 16 x 16 tiles only")
        dst, local, offset, stride = (self.expr(x) for x in args[2:])
        # (row and column of accumulator local_id of thread threadIdx.x: the inverse of the ldmatrix layout)
        index = (f"((((((local_id % 4) / 2) * 8) + (threadIdx.x / 4)) * {stride}) + "
                 f"((((local_id / 4) * 8) + ((threadIdx.x % 4) * 2)) + (local_id % 2)))")
        return (f"for (int local_id = 0; local_id < 8; ++local_id) {{\n{dst}[{index}] = "
                f"{local}[{offset} + local_id];\n}}\n")


PTX_CALLS = {"tir.ptx_legacy.mma": PtxTensorCore.ptx_mma, "tir.ptx_legacy.ldmatrix": PtxTensorCore.ptx_ldmatrix,
             "tir.mma_fill_legacy": PtxTensorCore.mma_fill, "tir.mma_store_legacy": PtxTensorCore.mma_store}
