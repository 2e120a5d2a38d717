"""tvms.relax.backend.cuda.cublas: cuBLAS dispatch, shaped like ``tvm.relax.backend.cuda.cublas``
(re-exports only). Importing it registers the ``cublas.*`` patterns and loads cuBLAS; when the
library loads, ``relax.ext.cublas`` is registered and RunCodegen offloads to it::

    import tvms.relax.backend.cuda.cublas
    mod = partition_for_cublas(mod)
    mod = relax.transform.RunCodegen()(mod)
"""
from ....runtime import cublas as _library  # loads libcublasLt: registers runtime.cublas.gemm
from ....lowering.relax.backend_cuda_cublas import (check_matmul, enable_codegen,
                                                     is_supported_dtype, partition_for_cublas)

enable_codegen(_library.REASON)

_check_matmul, _is_supported_dtype = check_matmul, is_supported_dtype  # TVM's private names

__all__ = ["partition_for_cublas"]
