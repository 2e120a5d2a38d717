"""The workloads of ``cpu_default.py`` as Relax TVMScript text, each one operator in ``main``,
shared by ``cpu_default.py`` and by ``cpu_default_tvm.py``, which builds the same text with
Apache TVM. No imports: both Pythons read it.
"""
from __future__ import annotations

HEADER = """# from tvm.script import ir as I
# from tvm.script import relax as R

@I.ir_module
class Module:
    @R.function
    def main({params}) -> R.Tensor({out_shape}, dtype="float32"):
        with R.dataflow():
            gv = {call}
            R.output(gv)
        return gv
"""


def tensor(name: str, shape: tuple) -> str:
    return f'{name}: R.Tensor({shape}, dtype="float32")'


def workloads(n_add: int, rows: int, cols: int, matmul_sizes: list[int]) -> dict:
    """label -> (Relax text, input shapes); the output is float32 of the first input's rows."""
    found = {
        "add": ([(n_add,), (n_add,)], "R.add(a, b)", (n_add,)),
        "softmax": ([(rows, cols)], "R.nn.softmax(a, axis=-1)", (rows, cols)),
        "layer_norm": ([(rows, cols), (cols,), (cols,)], "R.nn.layer_norm(a, b, c, axes=[-1])", (rows, cols)),
    }
    for n in matmul_sizes:
        found[f"matmul {n}"] = ([(n, n), (n, n)], "R.matmul(a, b)", (n, n))
    return {label: (HEADER.format(params=", ".join(tensor(name, s) for name, s in zip("abc", shapes)),
                                  out_shape=out, call=call), shapes)
            for label, (shapes, call, out) in found.items()}


def reference(np, label: str, arrays: list):
    """numpy's result of a workload (``np`` passed in: this file imports nothing); the softmax and
    layer norm expressions are also numpy's side of the timings."""
    a = arrays[0]
    if label == "add":
        return a + arrays[1]
    if label == "softmax":
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if label == "layer_norm":
        mean = a.mean(axis=-1, keepdims=True)
        return (a - mean) / np.sqrt(a.var(axis=-1, keepdims=True) + 1e-5) * arrays[1] + arrays[2]
    return a @ arrays[1]
