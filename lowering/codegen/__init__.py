"""Code generation: LLVM IR (llvmlite) from lowered TensorIR; CUDA C for GPU kernels (cuda.py on
the C-family renderer c_source.py), compiled by NVRTC (nvrtc.py)."""
