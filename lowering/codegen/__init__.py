"""Code generation: LLVM IR (llvmlite) from lowered TensorIR."""
