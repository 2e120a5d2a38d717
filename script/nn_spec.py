"""``nn.spec``: what ``Module.export_tvm`` compiles: for each method, the shape and dtype of each
input. ``nn.spec.Tensor(("n", 784), "float32")`` has a symbolic first dimension ``n``."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

from ..ir.errors import TVMSError


class Int:
    """An integer input (a symbolic size the caller passes)."""

    def __repr__(self) -> str:
        return "int"


class Tensor:
    """A tensor input: static rank and dtype; a dimension is an int or a name (symbolic)."""

    def __init__(self, shape: Sequence[Any], dtype: str) -> None:
        self.shape = list(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"Tensor([{', '.join(str(i) for i in self.shape)}], '{self.dtype}')"


class Tuple:
    """A tuple (or list) input."""

    def __init__(self, name: str, elements: "list | tuple") -> None:
        if not isinstance(elements, (list, tuple)):
            raise TVMSError(f"nn.spec.Tuple: elements must be a list or tuple, got {type(elements).__name__}")
        self.name = name
        self.elements = elements

    def __repr__(self) -> str:
        return repr(self.elements)


class MethodSpec:
    """The inputs of one method; ``param_mode`` says how parameters are passed ("plain": one
    function parameter each, after the inputs; "packed": one tuple; "none": not at all)."""

    def __init__(self, method: Callable, arg_names: list[str], arg_specs: list, param_mode: str = "plain",
                 effect_mode: str = "plain") -> None:
        if param_mode not in ("plain", "packed", "none"):
            raise TVMSError(f"invalid param_mode {param_mode!r}: plain, packed or none")
        if effect_mode not in ("plain", "packed", "none"):
            raise TVMSError(f"invalid effect_mode {effect_mode!r}: plain, packed or none")
        self.method, self.arg_names, self.arg_specs = method, arg_names, arg_specs
        self.param_mode, self.effect_mode = param_mode, effect_mode

    def __repr__(self) -> str:
        return f"MethodSpec({', '.join(f'{n}: {s}' for n, s in zip(self.arg_names, self.arg_specs))})"

    @staticmethod
    def from_raw(spec: "MethodSpec | dict", method: Callable) -> "MethodSpec":
        """``{"x": nn.spec.Tensor(...), "n": int, "$": {"param_mode": "packed"}}``: the inputs in
        the order of the method's signature."""
        if isinstance(spec, MethodSpec):
            return spec
        spec = dict(spec)
        config = spec.pop("$", {})
        names = list(inspect.signature(method).parameters)
        unknown = [k for k in spec if k not in names]
        if unknown:
            method_name = getattr(method, "__name__", "the method")
            raise TVMSError(f"the spec names {unknown[0]!r}, which {method_name} does not take "
                            f"(it takes {', '.join(names) or 'nothing'})")
        arg_names = [n for n in names if n in spec]
        arg_specs = [_convert(spec[n], n) for n in arg_names]
        return MethodSpec(method, arg_names, arg_specs, config.get("param_mode", "plain"),
                          config.get("effect_mode", "plain"))


class ModuleSpec:
    """The methods to export and their inputs."""

    def __init__(self, module: Any, method_names: list[str], method_specs: list[MethodSpec]) -> None:
        self.module, self.method_names, self.method_specs = module, method_names, method_specs

    @staticmethod
    def from_raw(spec: "ModuleSpec | dict", module: Any) -> "ModuleSpec":
        if isinstance(spec, ModuleSpec):
            return spec
        names = list(spec)
        methods = []
        for name in names:
            method = getattr(module, name, None)
            if method is None or not callable(method):
                raise TVMSError(f"{type(module).__name__} has no method {name!r} to export")
            methods.append(MethodSpec.from_raw(spec[name], method))
        return ModuleSpec(module, names, methods)

    def __repr__(self) -> str:
        methods = zip(self.method_names, self.method_specs)
        return "ModuleSpec:\n" + "\n".join(f"  {n}: {s}" for n, s in methods)


def _convert(arg: Any, name: str) -> Any:
    if arg is Int or arg is int or arg == "int":
        return Int()
    if isinstance(arg, (Int, Tensor, Tuple)):
        return arg
    if isinstance(arg, (list, tuple)):
        return Tuple(name, type(arg)(_convert(a, f"{name}_{i}") for i, a in enumerate(arg)))
    raise TVMSError(f"invalid spec for argument {name!r}: {arg!r}; use nn.spec.Tensor(shape, dtype) or int")


__all__ = ["Int", "Tensor", "Tuple", "MethodSpec", "ModuleSpec"]
