"""tvms.relax.frontend.onnx: ONNX models to Relax, shaped like TVM's ``relax.frontend.onnx``
(re-exports only; the converters are in ``tvms.script.onnx_*``). Needs the ``onnx`` package
(``pip install tvms[onnx]``), imported only when a model is converted."""
from ...script.onnx_frontend import InvalidModel, NeedsConstantInputs, bind_inputs, detach_params, from_onnx

__all__ = ["from_onnx", "detach_params", "bind_inputs", "NeedsConstantInputs", "InvalidModel"]
