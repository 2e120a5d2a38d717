"""Seed 000's MLP (1x784 -> 128 -> 10, fp32) as a Relax module, shared by the benchmarks that
tune it (tune_cpu.py) and run it on a GPU (gpu.py)."""

MLP = """@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 784), dtype="float32"), w0: R.Tensor((128, 784), dtype="float32"), b0: R.Tensor((128,), dtype="float32"), w1: R.Tensor((10, 128), dtype="float32"), b1: R.Tensor((10,), dtype="float32")) -> R.Tensor((1, 10), dtype="float32"):
        with R.dataflow():
            lv0 = R.nn.relu(R.matmul(x, R.permute_dims(w0)) + b0)
            out = R.matmul(lv0, R.permute_dims(w1)) + b1
            R.output(out)
        return out
"""
