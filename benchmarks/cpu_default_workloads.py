"""The workloads of ``cpu_default.py`` as Relax TVMScript text, each one operator in ``main``,
shared by ``cpu_default.py`` and by ``cpu_default_tvm.py``, which builds the same text with
Apache TVM. It imports neither tvms nor TVM: both Pythons read it.
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


def workloads(n_add: int, rows: int, cols: int, matmul_sizes: list[int], conv: tuple) -> dict:
    """label -> (Relax text, input shapes); the output is float32 of the first input's shape.
    ``conv`` is (C, H): a 3x3 convolution of 1 x C x H x H by C filters, padding 1 (ResNet's)."""
    channels, size = conv
    image, filters = (1, channels, size, size), (channels, channels, 3, 3)
    found = {
        "add": ([(n_add,), (n_add,)], "R.add(a, b)", (n_add,)),
        "softmax": ([(rows, cols)], "R.nn.softmax(a, axis=-1)", (rows, cols)),
        "layer_norm": ([(rows, cols), (cols,), (cols,)], "R.nn.layer_norm(a, b, c, axes=[-1])", (rows, cols)),
        "gelu": ([(rows, cols)], "R.nn.gelu(a)", (rows, cols)),
        "conv2d": ([image, filters], "R.nn.conv2d(a, b, padding=[1, 1, 1, 1])", image),
    }
    for n in matmul_sizes:
        found[f"matmul {n}"] = ([(n, n), (n, n)], "R.matmul(a, b)", (n, n))
    return {label: (HEADER.format(params=", ".join(tensor(name, s) for name, s in zip("abc", shapes)),
                                  out_shape=out, call=call), shapes)
            for label, (shapes, call, out) in found.items()}


def reference(np, label: str, arrays: list, erf=None):
    """numpy's result of a workload (``np`` passed in: this file imports nothing of tvms or TVM);
    the softmax, layer norm and convolution expressions are also numpy's side of the timings.
    GELU is ``0.5 x (1 + erf(x / sqrt 2))`` with ``erf`` (default: ``exact_erf(np)``)."""
    a = arrays[0]
    if label == "gelu":
        return 0.5 * a * (1.0 + (erf or exact_erf(np))(a * np.float32(0.5 ** 0.5)))
    if label == "conv2d":
        return conv2d_im2col(np, a, arrays[1])
    if label == "add":
        return a + arrays[1]
    if label == "softmax":
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if label == "layer_norm":
        mean = a.mean(axis=-1, keepdims=True)
        return (a - mean) / np.sqrt(a.var(axis=-1, keepdims=True) + 1e-5) * arrays[1] + arrays[2]
    return a @ arrays[1]


def exact_erf(np):
    """scipy's vectorized erf when scipy is installed, else ``math.erf`` element by element (as
    exact, about a hundred times slower: fit for checking a result, not for timing)."""
    try:
        from scipy.special import erf
        return erf
    except ImportError:
        import math
        by_element = np.frompyfunc(math.erf, 1, 1)
        return lambda x: by_element(x).astype(x.dtype)


def conv2d_im2col(np, x, w):
    """A stride-1 convolution with padding 1 in plain numpy, the fastest way it has: im2col (the
    padded image's 3x3 windows as a strided view, copied into a (C*9) x (H*W) matrix per image) and
    a BLAS matmul per image with the filters as a F x (C*9) matrix."""
    batch, channels, height, width = x.shape
    filters, _, kh, kw = w.shape
    padded = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))  # N, C, H, W, kh, kw
    columns = windows.transpose(0, 1, 4, 5, 2, 3).reshape(batch, channels * kh * kw, height * width)
    return (w.reshape(filters, -1) @ columns).reshape(batch, filters, height, width)
