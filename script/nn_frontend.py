"""The nn.Module frontend (``tvms.relax.frontend.nn``): PyTorch-like models that export to Relax.

::

    class MLP(nn.Module):
        def __init__(self):
            self.fc1 = nn.Linear(784, 256)
            self.relu = nn.ReLU()
        def forward(self, x):
            return self.relu(self.fc1(x))

    mod, params = MLP().export_tvm({"forward": {"x": nn.spec.Tensor(("n", 784), "float32")}})

``export_tvm`` runs ``forward`` once on symbolic tensors; every operator emits one binding through
the current BlockBuilder, named after the operator (``matmul``, ``add``, ``relu``, ...) as TVM's
frontend names them. Parameters become function parameters after the inputs (``fc1.weight``
prints as ``fc1_weight``); the function gets ``R.func_attr({"num_input": k})``.

This file holds the core (Tensor, Parameter, Module, containers, the exporter); the functional
operators are in ``nn_op.py``, the layers in ``nn_modules.py``, input specs in ``nn_spec.py``.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Iterator, Sequence

from ..ir import relax as rx
from ..ir.dtype import DataType
from ..ir.errors import TVMSError
from ..ir.expr import IntImm, PrimExpr, Var as TirVar
from ..ir.module import IRModule
from ..ir.struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo
from . import nn_spec as _spec
from .block_builder import BlockBuilder, const

_DEFAULT_DTYPE = "float32"


def get_default_dtype() -> str:
    """The dtype of parameters created without one (float32 unless changed)."""
    return _DEFAULT_DTYPE


def set_default_dtype(dtype: str) -> None:
    global _DEFAULT_DTYPE
    _DEFAULT_DTYPE = dtype


def _nn_op() -> Any:
    from . import nn_op

    return nn_op


class _TensorOp:
    """Python operators on tensors: ``x + y`` is ``nn.op.add(x, y)``; numbers become constants of
    the tensor's dtype."""

    def __add__(self, other: Any) -> "Tensor":
        return _nn_op().add(self, _scalar(other, self))

    def __radd__(self, other: Any) -> "Tensor":
        return _nn_op().add(self, _scalar(other, self))

    def __sub__(self, other: Any) -> "Tensor":
        return _nn_op().subtract(self, _scalar(other, self))

    def __rsub__(self, other: Any) -> "Tensor":
        return _nn_op().subtract(_scalar(other, self), self)

    def __mul__(self, other: Any) -> "Tensor":
        return _nn_op().multiply(self, _scalar(other, self))

    def __rmul__(self, other: Any) -> "Tensor":
        return _nn_op().multiply(self, _scalar(other, self))

    def __truediv__(self, other: Any) -> "Tensor":
        return _nn_op().divide(self, _scalar(other, self))

    def __lt__(self, other: Any) -> "Tensor":
        return _nn_op().less(self, _scalar(other, self))

    def __le__(self, other: Any) -> "Tensor":
        return _nn_op().less_equal(self, _scalar(other, self))

    def __gt__(self, other: Any) -> "Tensor":
        return _nn_op().greater(self, _scalar(other, self))

    def __ge__(self, other: Any) -> "Tensor":
        return _nn_op().greater_equal(self, _scalar(other, self))

    def astype(self, dtype: str) -> "Tensor":
        return _nn_op().astype(self, dtype)

    def maximum(self, other: Any) -> "Tensor":
        return _nn_op().maximum(self, _scalar(other, self))

    def minimum(self, other: Any) -> "Tensor":
        return _nn_op().minimum(self, _scalar(other, self))

    def reshape(self, *shape: Any) -> "Tensor":
        return _nn_op().reshape(self, shape)

    def permute_dims(self, *axes: Any) -> "Tensor":
        return _nn_op().permute_dims(self, axes)

    def repeat(self, repeats: int, axis: int | None = None) -> "Tensor":
        raise TVMSError("Tensor.repeat needs the R.repeat operator, which is not registered yet")


def _scalar(value: Any, ref: "Tensor") -> Any:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, IntImm) or (isinstance(value, PrimExpr) and hasattr(value, "value")):
        value = value.value  # type: ignore[attr-defined]
    if isinstance(value, (int, float)):
        return Tensor.from_scalar(value, ref.dtype)
    return value


class Tensor(_TensorOp):
    """A symbolic tensor: a Relax expression whose struct info is a tensor of known rank and
    shape. Users do not make them; ``export_tvm`` and the operators do."""

    def __init__(self, *, _expr: Any) -> None:
        sinfo = getattr(_expr, "struct_info", None)
        if not isinstance(sinfo, TensorStructInfo) or sinfo.dims is None:
            raise TVMSError(f"nn.Tensor needs a tensor of known shape, got "
                            f"{type(sinfo).__name__ if sinfo is not None else 'no struct info'}")
        self._expr = _expr

    @staticmethod
    def from_const(data: Any) -> "Tensor":
        return Tensor(_expr=const(data))

    @staticmethod
    def from_scalar(data: "int | float", dtype: str) -> "Tensor":
        return Tensor(_expr=const(data, dtype))

    @staticmethod
    def from_struct_info(struct_info: TensorStructInfo, name: str = "tensor") -> "Tensor":
        return Tensor(_expr=rx.Var(name, struct_info))

    @staticmethod
    def placeholder(shape: Sequence[Any], dtype: str, name: str = "tensor") -> "Tensor":
        """A tensor variable; a string dimension is a new symbolic size of that name."""
        dims: list = []
        for d in shape:
            if isinstance(d, IntImm):
                d = d.value
            if isinstance(d, bool):
                raise TVMSError(f"invalid shape {list(shape)}: a dimension is not a bool")
            if isinstance(d, int):
                if d < 0:
                    raise TVMSError(f"invalid shape {list(shape)}: negative dimension {d}")
                dims.append(d)
            elif isinstance(d, str):
                dims.append(TirVar(d, DataType("int64")))
            elif isinstance(d, PrimExpr) and d.dtype == DataType("int64"):
                dims.append(d)
            else:
                raise TVMSError(f"invalid shape {list(shape)}: a dimension is an int, a name or an "
                                f"int64 expression, got {d!r}")
        return Tensor(_expr=rx.Var(name, TensorStructInfo(dims, dtype)))

    @property
    def shape(self) -> list:
        """The dimensions: Python ints where static, TensorIR expressions where symbolic."""
        return [d.value if isinstance(d, IntImm) else d for d in self._expr.struct_info.dims]

    @property
    def ndim(self) -> int:
        return self._expr.struct_info.ndim

    @property
    def dtype(self) -> str:
        return str(self._expr.struct_info.dtype)

    def __repr__(self) -> str:
        return f'Tensor({self.shape}, "{self.dtype}")'


class Parameter(Tensor):
    """A weight of a layer: a tensor that becomes a function parameter when exported, and may
    hold a concrete value (``param.data = np.array(...)``)."""

    def __init__(self, shape: Sequence[Any], dtype: str | None = None) -> None:
        super().__init__(_expr=Tensor.placeholder(shape, dtype or get_default_dtype(), "param")._expr)
        self._data: Any = None
        self.attrs: dict = OrderedDict()

    @property
    def data(self) -> Any:
        return self._data

    @data.setter
    def data(self, data: Any) -> None:
        if data is None:
            self._data = None
            return
        if not hasattr(data, "shape") or not hasattr(data, "dtype"):
            raise TVMSError(f"a parameter's data is an array, got {type(data).__name__}")
        if tuple(data.shape) != tuple(self.shape):
            raise TVMSError(f"shape mismatch: expected {tuple(self.shape)}, got {tuple(data.shape)}")
        if str(data.dtype) != self.dtype:
            raise TVMSError(f"dtype mismatch: expected {self.dtype}, got {data.dtype}")
        self._data = data

    def to(self, dtype: str | None = None) -> None:
        if dtype is None:
            return
        if self._data is not None:
            raise TVMSError("changing the dtype of a parameter bound to data would lose precision")
        self._expr = Tensor.placeholder(self.shape, dtype, "param")._expr


class Module:
    """The base of every layer and model: parameters and submodules are attributes."""

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """``("fc1.weight", Parameter)`` for every parameter, in attribute order."""
        yield from _attribute_finder(self, prefix, lambda x: isinstance(x, Parameter))

    def parameters(self) -> Iterator[Parameter]:
        for _, param in self.named_parameters():
            yield param

    def state_dict(self, *, prefix: str = "", destination: dict | None = None) -> dict:
        out = OrderedDict() if destination is None else destination
        for name, param in self.named_parameters(prefix):
            out[name] = param
        return out

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> tuple[list[str], list[str]]:
        own = self.state_dict()
        unexpected = []
        for key, value in state_dict.items():
            if key not in own:
                unexpected.append(key)
                continue
            data = value.data if isinstance(value, Parameter) else value
            if data is None:
                raise TVMSError(f"parameter {key} is not set to any concrete tensor")
            own.pop(key).data = data
        missing = list(own)
        if strict and (missing or unexpected):
            raise TVMSError(f"missing keys: {missing}, unexpected keys: {unexpected}")
        return missing, unexpected

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        forward = getattr(self, "forward", None)
        if forward is None:
            raise TVMSError(f"module {type(self).__name__} has no forward method")
        return forward(*args, **kwargs)

    def to(self, dtype: str | None = None) -> None:
        """Convert every parameter (recursively) to ``dtype``."""
        for item in self.__dict__.values():
            if hasattr(item, "to") and callable(item.to):
                item.to(dtype=dtype)
        if dtype is not None and isinstance(getattr(self, "dtype", None), str):
            self.dtype = dtype

    def export_tvm(self, spec: Any, debug: bool = False, allow_extern: bool = False) -> tuple:
        """The module as an IRModule with one Relax function per method in ``spec``, and the
        parameters as ``[(name, Parameter), ...]`` in the order the functions take them."""
        if debug:
            raise TVMSError("export_tvm(debug=True) needs effects (I/O), which tvms does not have yet")
        module_spec = _spec.ModuleSpec.from_raw(spec, self)
        mod, params = Exporter().build(module_spec)
        return (mod, params, []) if allow_extern else (mod, params)


class ModuleList(Module):
    """Submodules in a list; parameters are named by index (``layers.0.weight``)."""

    def __init__(self, modules: list) -> None:
        self.modules = list(modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self.modules)

    def __getitem__(self, idx: int) -> Module:
        return self.modules[idx]

    def __setitem__(self, idx: int, module: Module) -> None:
        self.modules[idx] = module

    def __len__(self) -> int:
        return len(self.modules)

    def append(self, module: Module) -> None:
        self.modules.append(module)

    def to(self, dtype: str | None = None) -> None:
        for module in self.modules:
            module.to(dtype=dtype)

    def forward(self, x: Any) -> Any:
        """Apply the modules in order."""
        for module in self.modules:
            x = module(x)
        return x


class Sequential(ModuleList):
    """``nn.Sequential(nn.Linear(4, 8), nn.ReLU())``: a ModuleList built from its arguments."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(list(modules))


class ModuleDict(Module):
    """Submodules by name (``blocks.attn.weight``)."""

    def __init__(self, modules: dict | None = None) -> None:
        self.modules = OrderedDict(modules or {})

    def __getitem__(self, key: str) -> Module:
        return self.modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.modules[key] = module

    def __iter__(self) -> Iterator[str]:
        return iter(self.modules)

    def __len__(self) -> int:
        return len(self.modules)

    def items(self) -> Any:
        return self.modules.items()

    def keys(self) -> Any:
        return self.modules.keys()

    def values(self) -> Any:
        return self.modules.values()

    def to(self, dtype: str | None = None) -> None:
        for module in self.modules.values():
            module.to(dtype=dtype)


class ParameterList(Module):
    """Parameters in a list (``weights.0``)."""

    def __init__(self, params: list | None = None) -> None:
        self.params: list = list(params or [])

    def __iter__(self) -> Iterator[Parameter]:
        return iter(self.params)

    def __getitem__(self, idx: int) -> Parameter:
        return self.params[idx]

    def __len__(self) -> int:
        return len(self.params)

    def append(self, param: Parameter) -> None:
        self.params.append(param)

    def to(self, dtype: str | None = None) -> None:
        for p in self.params:
            p.to(dtype=dtype)


def _attribute_finder(root: Any, prefix: str, want: Callable[[Any], bool]) -> Iterator[tuple[str, Any]]:
    """(dotted name, item) for every item ``want`` accepts, found through submodules and
    containers, in attribute order (TVM's naming: ``fc1.weight``, ``layers.0.bias``)."""
    if isinstance(root, ParameterList):
        for i, p in enumerate(root):
            if want(p):
                yield f"{prefix}{i}", p
        return
    if isinstance(root, ModuleList):
        for i, sub in enumerate(root):
            yield from _attribute_finder(sub, f"{prefix}{i}.", want)
        return
    if isinstance(root, ModuleDict):
        for name, sub in root.items():
            yield from _attribute_finder(sub, f"{prefix}{name}.", want)
        return
    for name, item in root.__dict__.items():
        if want(item):
            yield prefix + name, item
        elif isinstance(item, Module):
            yield from _attribute_finder(item, f"{prefix}{name}.", want)


def wrap_nested(expr: Any, name: str) -> Any:
    """Emit ``expr`` through the current builder (named ``name``) and wrap the result: a Tensor,
    or a tuple of Tensors for a tuple value (fields named ``name.0``, ``name.1``, ...)."""
    if not isinstance(expr, rx.DataflowVar):
        bb = BlockBuilder.current()
        if bb is None:
            raise TVMSError("nn operators build Relax and only run inside Module.export_tvm")
        expr = bb.emit(expr, name)
    sinfo = expr.struct_info
    if isinstance(sinfo, TensorStructInfo):
        return Tensor(_expr=expr)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(wrap_nested(rx.TupleGetItem(expr, i), f"{name}.{i}") for i in range(len(sinfo.fields)))
    raise TVMSError(f"an nn operator returned {type(sinfo).__name__}, not a tensor or a tuple")


# -------------------------------------------------------------------- export
class Exporter:
    """Builds one Relax function per method of a ModuleSpec (TVM's nn exporter)."""

    def __init__(self) -> None:
        self.builder = BlockBuilder()

    def build(self, spec: _spec.ModuleSpec) -> tuple[IRModule, list[tuple[str, Parameter]]]:
        params: list = []
        for method_name, method_spec in zip(spec.method_names, spec.method_specs):
            # re-collected per method, so that symbolic sizes are not shared between methods
            params = list(_attribute_finder(spec.module, "", lambda x: isinstance(x, Parameter)))
            with self.builder.function(method_name, attrs={"num_input": len(method_spec.arg_specs)}):
                with self.builder.dataflow():
                    outputs, inputs = self._method(method_spec, params)
                self.builder.emit_func_output(outputs, inputs)
        return self.builder.finalize(), params

    def _method(self, spec: _spec.MethodSpec, params: list) -> tuple:
        bb = self.builder
        explicit = _spec_inputs(spec)
        inputs = [_input_var(x) for x in explicit]
        param_vars = self._params(spec.param_mode, params)
        for i, (arg, var) in enumerate(zip(explicit, inputs)):
            if isinstance(arg, _spec.Tuple):
                explicit[i] = _detuple(arg, var, bb)
        outputs = spec.method(*explicit)
        return bb.emit_output(_unwrap(outputs)), inputs + param_vars

    def _params(self, mode: str, params: list) -> list:
        sizes: dict[str, TirVar] = {}  # one symbolic size per name across the parameters

        def size(d: Any) -> Any:
            if isinstance(d, TirVar):
                return sizes.setdefault(d.name, TirVar(d.name, DataType("int64")))
            return d

        variables = []
        for name, param in params:
            var = Tensor.placeholder([size(d) for d in param.shape], param.dtype, name)._expr
            variables.append(var)
            param._expr = var
        if mode == "none":
            return []
        if mode == "plain":
            return variables
        packed = rx.Var("packed_params", TupleStructInfo(tuple(v.struct_info for v in variables)))
        for i, (name, param) in enumerate(params):
            param._expr = self.builder.emit(rx.TupleGetItem(packed, i), name)
        return [packed]


def _spec_inputs(spec: _spec.MethodSpec) -> list:
    """The method's arguments: symbolic tensors (and sizes) named after the spec's entries."""
    sizes: dict[str, TirVar] = {}

    def size(name: str) -> TirVar:
        return sizes.setdefault(name, TirVar(name, DataType("int64")))

    def convert(name: str, arg: Any) -> Any:
        if isinstance(arg, _spec.Int):
            return size(name)
        if isinstance(arg, _spec.Tensor):
            shape = [size(d) if isinstance(d, str) else d for d in arg.shape]
            return Tensor.placeholder(shape, arg.dtype, name)
        if isinstance(arg, _spec.Tuple):
            return _spec.Tuple(name, type(arg.elements)(convert(f"{name}_{i}", e)
                                                        for i, e in enumerate(arg.elements)))
        raise TVMSError(f"invalid spec for argument {name!r}: {arg!r}")

    return [convert(n, a) for n, a in zip(spec.arg_names, spec.arg_specs)]


def _input_var(arg: Any) -> rx.Var:
    if isinstance(arg, TirVar):
        return rx.Var(arg.name, ShapeStructInfo([arg]))
    if isinstance(arg, Tensor):
        return arg._expr
    if isinstance(arg, _spec.Tuple):
        return rx.Var(arg.name, TupleStructInfo(tuple(_input_var(e).struct_info for e in arg.elements)))
    raise TVMSError(f"unsupported input {arg!r}")


def _detuple(arg: Any, var: rx.Var, bb: BlockBuilder) -> Any:
    if isinstance(arg, _spec.Tuple):
        out = []
        for i, element in enumerate(arg.elements):
            field = bb.emit(rx.TupleGetItem(var, i), f"{arg.name}_{i}")
            out.append(_detuple(element, field, bb))
        return type(arg.elements)(out)
    if isinstance(arg, Tensor):
        return Tensor(_expr=var)
    return arg


def _unwrap(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value._expr
    if isinstance(value, (tuple, list)):
        return rx.Tuple(tuple(_unwrap(v) for v in value))
    raise TVMSError(f"forward must return tensors (or tuples of them), got {type(value).__name__}")


__all__ = ["Tensor", "Parameter", "Module", "ModuleList", "ModuleDict", "ParameterList", "Sequential",
           "Exporter", "wrap_nested", "get_default_dtype", "set_default_dtype"]
