"""tvms.relax.backend.cuda: the CUDA library backends, shaped like ``tvm.relax.backend.cuda``
(``cublas``: import it to register its patterns and, with cuBLAS installed, its codegen)."""
