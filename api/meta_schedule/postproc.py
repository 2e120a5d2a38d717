"""``tvms.meta_schedule.postproc``: what finishes (or rejects) each sampled schedule."""
from ..lowering.tune.postproc import Postproc, PyPostproc  # noqa: F401
from ..lowering.tune.postproc_disallow_dynamic_loop import DisallowDynamicLoop  # noqa: F401
from ..lowering.tune.postproc_rewrite_cooperative_fetch import RewriteCooperativeFetch  # noqa: F401
from ..lowering.tune.postproc_rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll  # noqa: F401
from ..lowering.tune.postproc_rewrite_reduction_block import RewriteReductionBlock  # noqa: F401
from ..lowering.tune.postproc_rewrite_tensorize import RewriteTensorize  # noqa: F401
from ..lowering.tune.postproc_rewrite_unbound_block import RewriteUnboundBlock  # noqa: F401
from ..lowering.tune.postproc_verify_gpu_code import VerifyGPUCode  # noqa: F401
