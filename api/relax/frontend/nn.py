"""tvms.relax.frontend.nn: PyTorch-like modules that export to Relax, shaped like TVM's
``tvm.relax.frontend.nn`` (re-exports only; the logic is in ``tvms.script.nn_*``)."""
from ...script import nn_op as op
from ...script import nn_spec as spec
from ...script.nn_frontend import (Module, ModuleDict, ModuleList, Parameter, ParameterList, Sequential,
                                    Tensor, get_default_dtype, set_default_dtype, wrap_nested)
from ...script.nn_modules import (GELU, Conv2D, Embedding, Identity, LayerNorm, Linear, ReLU, RMSNorm,
                                   SiLU)
from ...script.nn_op import *  # noqa: F401,F403  (nn.relu, nn.matmul, ... as in TVM)
from ...script.nn_op import __all__ as _op_names

__all__ = ["op", "spec", "Module", "ModuleDict", "ModuleList", "Parameter", "ParameterList",
           "Sequential", "Tensor", "get_default_dtype", "set_default_dtype", "wrap_nested", "GELU",
           "Conv2D", "Embedding", "Identity", "LayerNorm", "Linear", "ReLU", "RMSNorm", "SiLU",
           *_op_names]
