"""The elementwise add of ``cpu_e2e.py`` as TVMScript text, unscheduled and scheduled (parallel
outer loop, vectorized inner loop), shared by ``cpu_e2e.py`` and ``cpu_e2e_tvm.py``, which builds
the same text with Apache TVM. No imports: both Pythons read it.
"""
from __future__ import annotations

HEADER = """# from tvm.script import ir as I
# from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer(({n},), "float32"), B: T.Buffer(({n},), "float32"), C: T.Buffer(({n},), "float32")):
        T.func_attr({{"tir.noalias": True}})
"""


def block_body(index: str, indent: int) -> str:
    """The add's block body, at ``indent`` spaces, with the block index ``index``."""
    lines = ["vi = T.axis.spatial({n}, " + index + ")", "T.reads(A[vi], B[vi])", "T.writes(C[vi])",
             "C[vi] = A[vi] + B[vi]"]
    return "".join(" " * indent + line + "\n" for line in lines)


UNSCHEDULED = HEADER + """        for i in range({n}):
            with T.sblock("C"):
""" + block_body("i", 16)

# chunks of CHUNK elements across the cores, each chunk as 16-lane vector adds
CHUNK, LANES = 4096, 16
SCHEDULED = HEADER + f"""        for i_0 in T.parallel({{n_chunks}}):
            for i_1 in range({CHUNK // LANES}):
                for i_2 in T.vectorized({LANES}):
                    with T.sblock("C"):
""" + block_body(f"i_0 * {CHUNK} + i_1 * {LANES} + i_2", 24)

ADD_SCHEDULES = {"unscheduled": UNSCHEDULED, "parallel + vectorized": SCHEDULED}


def add_text(template: str, n: int) -> str:
    """The TVMScript of an add template over n floats (n a multiple of CHUNK)."""
    if n % CHUNK:
        raise ValueError(f"n={n} is not a multiple of {CHUNK}")
    return template.format(n=n, n_chunks=n // CHUNK)


def chain_text(length: int) -> str:
    """A Relax function of ``length`` tiny kernels in a row (add one to a (1, 16) tensor): its
    time through the VM beside the kernels' own is the VM's overhead per kernel call."""
    calls = "".join(f"            a{i + 1} = R.call_tir(cls.add_one, (a{i},), "
                    f"out_sinfo=R.Tensor((1, 16), dtype=\"float32\"))\n" for i in range(length))
    return f"""@I.ir_module
class Module:
    @T.prim_func
    def add_one(A: T.Buffer((1, 16), "float32"), B: T.Buffer((1, 16), "float32")):
        for i, j in T.grid(1, 16):
            B[i, j] = A[i, j] + T.float32(1)

    @R.function
    def main(a0: R.Tensor((1, 16), dtype="float32")) -> R.Tensor((1, 16), dtype="float32"):
        cls = Module
        with R.dataflow():
{calls}            R.output(a{length})
        return a{length}
"""
