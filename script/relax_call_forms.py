"""The Relax calls whose text is not ``R.name(args, attr=...)``: how each is read and written.

TVM's printer has special cases for these (src/relax/script/printer/call.cc): the format string
of ``R.print`` / ``R.assert_op`` is a keyword although it is an argument, ``R.call_tir_inplace``
and ``R.call_tir_with_grad`` print like ``R.call_tir`` with their attributes after ``out_ty``,
``R.hint_on_device`` writes its attributes as an ``R.device(...)``, ``R.to_vdevice`` names its
vdevice ``"kind:index:scope"``. The parser side accepts what TVM's ``R.*`` functions take.

``PARSERS`` is keyed by the script name after ``R.`` (with the device constructors and the
``R.stop_lift_params`` alias), ``PRINTERS`` by the operator's name.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..ir import relax as rx
from ..ir import relax_op
from ..ir.expr import IntImm
from ..ir.distributed import DeviceMesh, DTensorStructInfo, lookup_mesh, make_device_mesh, placement_text
from ..ir.global_info import lookup_vdevice, vdevice_label
from ..ir.errors import TVMSError
from ..ir.module import GlobalVar
from ..ir.relax import make_constant
from ..ir.node import FrozenDict
from ..ir.relax_ops_misc import DEVICE_TYPES, py_func_result
from ..ir.dtype import DataType
from ..ir.struct_info import ObjectStructInfo, TupleStructInfo
from . import syntax as S
from .tensorir.attrs import freeze_value
from .tensorir.rules import call_args
from .tensorir.text import quote


class Device(tuple):
    """``R.cpu(0)``, ``R.device(device_type=2, index=1)``: (device type code, index)."""


# ---------------------------------------------------------------- reading
def _format(b: Any, value: Any, syn: Any) -> rx.StringImm:
    if isinstance(value, rx.StringImm):
        return value
    if not isinstance(value, str):
        raise b.error(syn, f"the format is a string such as \"x: {{}}\", got {value!r}")
    return rx.StringImm(value, ObjectStructInfo())


def _make(b: Any, name: str, args: list, attrs: dict, sinfo_args: tuple, syn: S.Call) -> rx.Call:
    try:
        return relax_op.make_call(name, args, attrs, sinfo_args, span=b.span(syn))
    except TVMSError as e:
        raise b.error(syn, str(e)) from None


def _no_extra(b: Any, kwargs: dict, name: str, syn: S.Call) -> None:
    if kwargs:
        raise b.error(syn, f"R.{name} has no argument {next(iter(kwargs))!r}")


def _bind(b: Any, syn: S.Call, name: str, names: tuple, required: int = 1,
          aliases: dict | None = None) -> dict:
    """The arguments of ``R.<name>(...)`` by name, bound as Python binds them (positionally in the
    order of ``names``, or by keyword; ``aliases`` maps other spellings of a keyword to its
    name): one too many, an unknown or repeated one, or a missing one of the first ``required``
    is an error at the call."""
    args, kwargs = call_args(b, syn)
    return _bind_values(b, syn, name, names, required, aliases, args, kwargs)


def _bind_values(b: Any, syn: S.Call, name: str, names: tuple, required: int, aliases: dict | None,
                 args: list, kwargs: dict) -> dict:
    """``_bind`` of arguments already read."""
    if len(args) > len(names):
        raise b.error(syn, f"R.{name} takes at most {len(names)} arguments ({', '.join(names)}), "
                           f"got {len(args)}")
    values = dict(zip(names, args))
    for key, value in kwargs.items():
        key = (aliases or {}).get(key, key)
        if key not in names:
            raise b.error(syn, f"R.{name} has no argument {key!r}; it takes {', '.join(names)}")
        if key in values:
            raise b.error(syn, f"R.{name} got the argument {key!r} twice")
        values[key] = value
    for key in names[:required]:
        if key not in values:
            raise b.error(syn, f"R.{name} needs the argument {key!r} ({', '.join(names[:required])})")
    return values


def parse_print(b: Any, syn: S.Call) -> rx.Call:
    """``R.print(x, y, format="{} {}")``: the format string becomes the first argument."""
    args, kwargs = call_args(b, syn)
    fmt = _format(b, kwargs.pop("format", ""), syn)
    _no_extra(b, kwargs, "print", syn)
    return _make(b, "print", [fmt, *(b.to_relax(a, syn) for a in args)], {}, (), syn)


def parse_assert_op(b: Any, syn: S.Call) -> rx.Call:
    """``R.assert_op(cond, x, format="x: {}")``: a PrimExpr condition is a PrimValue, the format
    string the second argument; the values may come as one list (TVM's ``format_args``)."""
    args, kwargs = call_args(b, syn)
    if not args and "condition" not in kwargs:
        raise b.error(syn, "R.assert_op needs a condition")
    cond = args.pop(0) if args else kwargs.pop("condition")
    values = args
    if "format_args" in kwargs:
        values = values + [kwargs.pop("format_args")]
    if len(values) == 1 and isinstance(values[0], (list, tuple)):
        values = list(values[0])
    fmt = _format(b, kwargs.pop("format", ""), syn)
    _no_extra(b, kwargs, "assert_op", syn)
    return _make(b, "assert_op", [b.to_relax(cond, syn), fmt, *(b.to_relax(v, syn) for v in values)], {}, (), syn)


def _sinfo_args(b: Any, kwargs: dict, syn: Any) -> tuple:
    sinfo = kwargs.pop("ty_args", None) if "ty_args" in kwargs else kwargs.pop("sinfo_args", None)
    if sinfo is None:
        return ()
    sinfo = sinfo if isinstance(sinfo, (list, tuple)) else (sinfo,)
    return tuple(b.as_struct_info(s, syn) for s in sinfo)


def _extern(value: Any) -> Any:
    """A string names a packed function."""
    return rx.ExternFunc(value, ObjectStructInfo()) if isinstance(value, str) else value


def _packed(name: str) -> Callable:
    def parse(b: Any, syn: S.Call) -> rx.Call:
        """``R.<name>("func", args..., ty_args=...)``: a string names a packed function."""
        args, kwargs = call_args(b, syn)
        if not args:
            raise b.error(syn, f"R.{name} needs the function to call")
        func = _extern(args[0])
        sinfo_args = _sinfo_args(b, kwargs, syn)
        attrs = {}
        if "inplace_indices" in kwargs:
            indices = kwargs.pop("inplace_indices")
            attrs["inplace_indices"] = indices if isinstance(indices, (list, tuple)) else [indices]
        if name == "call_packed":  # the other keywords are attributes (TVM's DictAttrs)
            if kwargs.pop("attrs_type_key", "ir.DictAttrs") != "ir.DictAttrs":
                raise b.error(syn, "R.call_packed takes attributes of attrs_type_key=\"ir.DictAttrs\" only")
            attrs = {k: freeze_value(v) for k, v in kwargs.items()}
            kwargs = {}
        _no_extra(b, kwargs, name, syn)
        # (TVM converts the arguments as Python values: True is the int64 1)
        values = [int(a) if isinstance(a, bool) else a for a in args[1:]]
        return _make(b, name, [func, *(b.to_relax(a, syn) for a in values)], attrs, sinfo_args, syn)
    return parse


def parse_call_py_func(b: Any, syn: S.Call) -> rx.Call:
    """TVM's builder form ``R.call_py_func("f", x, y, out_ty=[...])`` (the arguments one by one,
    several results one tuple) and its printed form ``R.call_py_func(R.str("f"), (x, y),
    ty_args=(...,))``. The name is only text: nothing is looked up while parsing."""
    args, kwargs = call_args(b, syn)
    if not args:
        raise b.error(syn, "R.call_py_func needs the name of the Python function")
    name = rx.StringImm(args[0], ObjectStructInfo()) if isinstance(args[0], str) else args[0]
    out = kwargs.pop("out_ty", None) if "out_ty" in kwargs else kwargs.pop("out_sinfo", None)
    if out is None:
        rest, sinfo_args = [b.to_relax(a, syn) for a in args[1:]], _sinfo_args(b, kwargs, syn)
    else:
        outs = tuple(b.as_struct_info(s, syn) for s in (out if isinstance(out, (list, tuple)) else (out,)))
        try:
            sinfo_args = py_func_result(outs)
        except TVMSError as e:
            raise b.error(syn, str(e)) from None
        rest = [rx.Tuple(tuple(b.to_relax(a, syn) for a in args[1:]))]
    _no_extra(b, kwargs, "call_py_func", syn)
    return _make(b, "call_py_func", [name, *rest], {}, sinfo_args, syn)


def _dps(name: str, positional: tuple, packed: bool = False) -> Callable:
    names = ("func", "args", *positional)

    def parse(b: Any, syn: S.Call) -> rx.Call:
        """``R.<name>(cls.f, (x, y), out_ty=..., <attrs>)``, as ``R.call_tir``; what follows the
        arguments may come positionally, in the order of TVM's function (``positional``);
        ``packed``: the function is a packed one, named by a string."""
        values = _bind(b, syn, name, names, 3, {"out_sinfo": "out_ty"})
        return make_dps(b, name, values, syn, packed)
    return parse


def make_dps(b: Any, name: str, values: dict, syn: S.Call, packed: bool = False) -> rx.Call:
    """The call of ``_dps`` from its bound arguments."""
    sinfo_args = b.call_sinfo(syn, {"out_ty": values.pop("out_ty", None)})
    tir_vars = values.pop("tir_vars", None)
    func, inputs = _extern(values.pop("func")) if packed else values.pop("func"), values.pop("args")
    attrs = values
    if isinstance(attrs.get("te_grad_kwargs"), dict):
        attrs["te_grad_kwargs"] = FrozenDict(attrs["te_grad_kwargs"])
    if isinstance(attrs.get("inplace_indices"), int):
        attrs["inplace_indices"] = [attrs["inplace_indices"]]
    if not isinstance(func, rx.RelaxExpr if packed else GlobalVar):  # (packed: its name, or a value)
        what = "a packed function (its name or a value)" if packed else "a TensorIR function (cls.name)"
        raise b.error(syn, f"R.{name} takes {what} and a tuple of arguments")
    if isinstance(inputs, rx.RelaxExpr) and not isinstance(inputs.struct_info, TupleStructInfo):
        inputs = (inputs,)  # (one tensor: TVM makes it a tuple)
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else inputs
    operands = [func, b.to_relax(inputs, syn)]
    if tir_vars is not None:
        operands.append(b.to_relax_shape(tir_vars, syn))
    return _make(b, name, operands, attrs, sinfo_args, syn)


def parse_call_tir(b: Any, syn: S.Call) -> rx.Call:
    """``R.call_tir(cls.f, (x,), out_ty=..., tir_vars=...)``; the older spellings too: the output
    as a shape and a dtype (``R.call_tir(f, (x,), (1, 128), dtype="float32")``), and a packed
    function named by a string (what ``R.call_dps_packed`` means now)."""
    args, kwargs = call_args(b, syn)
    if len(args) == 3 and "dtype" in kwargs:
        shape, dtype = args.pop(), kwargs.pop("dtype")
        kwargs["out_ty"] = b.make_struct_info("Tensor", [shape, dtype], {}, syn)
    packed = bool(args) and isinstance(args[0], str)
    name, names = ("call_dps_packed", ("func", "args", "out_ty")) if packed else \
        ("call_tir", ("func", "args", "out_ty", "tir_vars"))
    values = _bind_values(b, syn, name, names, 3, {"out_sinfo": "out_ty"}, args, kwargs)
    return make_dps(b, name, values, syn, packed)


def _device(device_type: Any) -> Callable:
    def parse(b: Any, syn: S.Call) -> Device:
        """``R.cpu(0)``, ``R.device(device_type=1, index=0)``, ``R.device("cuda", 1)``."""
        args, kwargs = call_args(b, syn)
        kind = device_type
        if kind is None:
            kind = args.pop(0) if args else kwargs.pop("device_type", None)
        index = args.pop(0) if args else kwargs.pop("index", 0)
        if args or kwargs:
            raise b.error(syn, "a device takes a device type and an index")
        code = DEVICE_TYPES.get(kind) if isinstance(kind, str) else kind
        if isinstance(code, IntImm):
            code = code.value
        index = 0 if index is None else index.value if isinstance(index, IntImm) else index
        if not isinstance(code, int) or not isinstance(index, int):
            raise b.error(syn, f"a device is a device type ({', '.join(DEVICE_TYPES)} or its code) "
                               f"and an index, got {kind!r}, {index!r}")
        return Device((code, index))
    return parse


def parse_hint_on_device(b: Any, syn: S.Call) -> rx.Call:
    """``R.hint_on_device(x, R.cpu(0), "global")``: the device's fields become the attributes."""
    values = _bind(b, syn, "hint_on_device", ("data", "dst_vdevice", "memory_scope"), 2)
    data, device, scope = values["data"], values["dst_vdevice"], values.get("memory_scope", "global")
    if not isinstance(device, Device):
        raise b.error(syn, f"R.hint_on_device takes a device such as R.cpu(0), got {device!r}")
    attrs = {"device_type": device[0], "index": device[1], "memory_scope": scope}
    return _make(b, "hint_on_device", [b.to_relax(data, syn)], attrs, (), syn)


def parse_to_vdevice(b: Any, syn: S.Call) -> rx.Call:
    """``R.to_vdevice(x, "cuda:0")``: the vdevice of the module's global infos it names."""
    values = _bind(b, syn, "to_vdevice", ("data", "dst_vdevice"), 2)
    label = values["dst_vdevice"]
    if not isinstance(label, str):
        raise b.error(syn, "R.to_vdevice takes a tensor and a vdevice such as \"cuda:0\"")
    try:
        vdev = lookup_vdevice(label, b.vdevices)
    except TVMSError as e:
        raise b.error(syn, str(e)) from None
    return _make(b, "to_vdevice", [b.to_relax(values["data"], syn)], {"dst_vdevice": vdev}, (), syn)


def parse_stop_lift_params(b: Any, syn: S.Call) -> rx.Call:
    """``R.stop_lift_params(x)``: TVM's alias of ``R.builtin.stop_lift_params``."""
    args, kwargs = call_args(b, syn)
    _no_extra(b, kwargs, "stop_lift_params", syn)
    return _make(b, "builtin.stop_lift_params", [b.to_relax(a, syn) for a in args], {}, (), syn)


def parse_view(b: Any, syn: S.Call) -> rx.Call:
    """``R.memory.view(x, shape=None, dtype=None, relative_byte_offset=None)``, as TVM's function
    fills it: R.tuple() for no new shape or offset, R.null_value() for no new dtype."""
    names = ("data", "shape", "dtype", "relative_byte_offset")
    values = _bind(b, syn, "memory.view", names)
    nothing = rx.Tuple((), TupleStructInfo(()))
    shape, dtype, offset = (values.get(k) for k in names[1:])
    if isinstance(shape, (list, tuple)):
        shape = b.to_relax_shape(shape, syn)
    if dtype is None:
        dtype = _make(b, "null_value", [], {}, (), syn)
    elif isinstance(dtype, str):
        dtype = rx.DataTypeImm(DataType(dtype), ObjectStructInfo())
    args = [values["data"], nothing if shape is None else shape, dtype, nothing if offset is None else offset]
    return _make(b, "memory.view", [b.to_relax(a, syn) for a in args], {}, (), syn)


# ---------------------------------------------------------------- distributed
def _mesh(b: Any, value: Any, syn: Any) -> DeviceMesh:
    """A device mesh: one of the module's (``"mesh[0]"``) or written out (R.device_mesh(...))."""
    if isinstance(value, DeviceMesh):
        return value
    if isinstance(value, str):
        try:
            return lookup_mesh(value, b.meshes)
        except TVMSError as e:
            raise b.error(syn, str(e)) from None
    raise b.error(syn, f"a device mesh is \"mesh[i]\" or R.device_mesh(...), got {value!r}")


def _placement(b: Any, value: Any, mesh: DeviceMesh, syn: Any) -> str:
    try:
        return placement_text(value, mesh)
    except TVMSError as e:
        raise b.error(syn, str(e)) from None


def parse_device_mesh(b: Any, syn: S.Call) -> DeviceMesh:
    """``R.device_mesh((2, 2), I.Range(0, 4))`` or ``R.device_mesh((2,), [5, 7])``."""
    if len(syn.args) != 2 or syn.kwargs:
        raise b.error(syn, "R.device_mesh takes a shape and the devices: I.Range(start, end) or a list")
    devices = syn.args[1]
    if isinstance(devices, S.Call) and (S.dotted(devices.func) or "").endswith(".Range"):
        bounds = [b.ev(a) for a in devices.args]
        devices = range(*bounds) if len(bounds) == 2 and all(isinstance(v, int) for v in bounds) else bounds
    else:
        devices = b.ev(devices)
    try:
        return make_device_mesh(b.ev(syn.args[0]), devices)
    except TVMSError as e:
        raise b.error(syn, str(e)) from None


def parse_dtensor(b: Any, syn: S.Call) -> DTensorStructInfo:
    """``R.DTensor(shape, dtype, device_mesh, placement)``, the last two also by keyword."""
    values = _bind(b, syn, "DTensor", ("shape", "dtype", "device_mesh", "placement", "ndim"), 0)
    if "device_mesh" not in values or "placement" not in values:
        raise b.error(syn, "R.DTensor needs a device_mesh and a placement")
    mesh = _mesh(b, values.pop("device_mesh"), syn)
    placement = _placement(b, values.pop("placement"), mesh, syn)
    tensor = b.make_struct_info("Tensor", [values.pop("shape", None), values.pop("dtype", None)], values, syn)
    return DTensorStructInfo(tensor, mesh, placement)


def _sharding(name: str) -> Callable:
    def parse(b: Any, syn: S.Call) -> rx.Call:
        """``R.dist.<name>(x, device_mesh="mesh[0]", placement="S[1], R")``."""
        values = _bind(b, syn, f"dist.{name}", ("input", "device_mesh", "placement"), 3)
        mesh = _mesh(b, values["device_mesh"], syn)
        attrs = {"device_mesh": mesh, "placement": _placement(b, values["placement"], mesh, syn)}
        return _make(b, f"dist.{name}", [b.to_relax(values["input"], syn)], attrs, (), syn)
    return parse


def parse_dist_const(b: Any, syn: S.Call) -> rx.Constant:
    """``R.dist.const(1.0, R.DTensor((), "float32", "mesh[0]", "R, R"))``: a constant placed on a mesh."""
    values = _bind(b, syn, "dist.const", ("value", "ty"), 0, {"struct_info": "ty"})
    value, ty = values.get("value"), values.get("ty")
    if not isinstance(ty, DTensorStructInfo) or ty.tensor_sinfo.dtype.is_void:
        raise b.error(syn, "R.dist.const takes a value and an R.DTensor with a dtype")
    try:
        if value is None:
            raise ValueError("no value")
        data = np.array(value, dtype=str(ty.tensor_sinfo.dtype))
    except (TypeError, ValueError, OverflowError):
        raise b.error(syn, f"R.dist.const: {value!r} is not {ty.tensor_sinfo.dtype} data") from None
    c = make_constant(data, span=b.span(syn))
    return rx.Constant(c.data, ty, c.digest, span=c.span)


def parse_linear(b: Any, syn: S.Call) -> rx.Call:
    """``R.linear(x, w, b=None, out_dtype=None)``: TVM's sugar for
    ``R.add(R.matmul(x, R.permute_dims(w, axes=None), out_dtype=out_dtype), b)``."""
    values = _bind(b, syn, "linear", ("data", "weight", "bias", "out_dtype"), 2)
    weight = _make(b, "permute_dims", [b.to_relax(values["weight"], syn)], {"axes": None}, (), syn)
    out = _make(b, "matmul", [b.to_relax(values["data"], syn), weight], {"out_dtype": values.get("out_dtype")},
                (), syn)
    bias = values.get("bias")
    return out if bias is None else _make(b, "add", [out, b.to_relax(bias, syn)], {}, (), syn)


def parse_tuple_get_item(b: Any, syn: S.Call) -> rx.TupleGetItem:
    """``R.TupleGetItem(t, 1)``: TVM's node constructor, the same as ``t[1]``."""
    args, kwargs = call_args(b, syn)
    if len(args) != 2 or kwargs or not isinstance(args[1], int):
        raise b.error(syn, "R.TupleGetItem takes a tuple and a constant index")
    return b.index_tuple(b.to_relax(args[0], syn), args[1], syn)


def parse_relu6(b: Any, syn: S.Call) -> rx.Call:
    """``R.nn.relu6(x)``: no operator of its own in TVM, but ``R.clip(x, 0, 6)``."""
    data = _bind(b, syn, "nn.relu6", ("data",))["data"]
    return _make(b, "clip", [b.to_relax(data, syn), 0, 6], {}, (), syn)


PARSERS: dict[str, Callable] = {
    "nn.relu6": parse_relu6,
    "print": parse_print,
    "assert_op": parse_assert_op,
    "call_pure_packed": _packed("call_pure_packed"),
    "call_inplace_packed": _packed("call_inplace_packed"),
    "call_builtin_with_ctx": _packed("call_builtin_with_ctx"),
    "call_py_func": parse_call_py_func,
    "call_tir_inplace": _dps("call_tir_inplace", ("inplace_indices", "out_ty", "tir_vars")),
    "call_tir_with_grad": _dps("call_tir_with_grad", ("out_ty", "te_grad_name", "te_grad_kwargs", "tir_vars")),
    "call_tir": parse_call_tir,
    "call_dps_packed": _dps("call_dps_packed", ("out_ty",), packed=True),
    "call_packed": _packed("call_packed"),
    "hint_on_device": parse_hint_on_device,
    "to_vdevice": parse_to_vdevice,
    "stop_lift_params": parse_stop_lift_params,
    "memory.view": parse_view,
    "linear": parse_linear,
    "ShapeExpr": lambda b, syn: b.r_shape(syn),  # (TVM's node constructor, the same as R.shape)
    "TupleGetItem": parse_tuple_get_item,
    "DTensor": parse_dtensor,
    "dist.DTensor": parse_dtensor,
    "device_mesh": parse_device_mesh,
    "dist.device_mesh": parse_device_mesh,
    "dist.annotate_sharding": _sharding("annotate_sharding"),
    "dist.redistribute": _sharding("redistribute"),
    "dist.call_tir": _dps("call_tir", ("out_ty", "tir_vars")),
    "dist.call_tir_local_view": _dps("dist.call_tir_local_view", ("out_ty",)),
    "dist.const": parse_dist_const,
    "device": _device(None),
    **{name: _device(name) for name in DEVICE_TYPES},
}


# ---------------------------------------------------------------- writing
def print_print(p: Any, c: rx.Call) -> str:
    args = [p.rexpr(a) for a in c.args[1:]] + [f"format={p.rexpr(c.args[0])}"]
    return f"R.print({', '.join(args)})"


def print_assert_op(p: Any, c: rx.Call) -> str:
    args = [p.rexpr(c.args[0])] + [p.rexpr(a) for a in c.args[2:]] + [f"format={p.rexpr(c.args[1])}"]
    return f"R.assert_op({', '.join(args)})"


def print_call_tir_inplace(p: Any, c: rx.Call) -> str:
    indices = ", ".join(str(i) for i in c.attrs["inplace_indices"])
    return p.call_dps("call_tir_inplace", c, [f"inplace_indices=[{indices}]"])


def print_call_tir_with_grad(p: Any, c: rx.Call) -> str:
    extra = [f"te_grad_name={quote(c.attrs['te_grad_name'])}"]
    if c.attrs["te_grad_kwargs"]:
        extra.append(f"te_grad_kwargs={p.attr_dict(c.attrs['te_grad_kwargs'])}")
    return p.call_dps("call_tir_with_grad", c, extra)


def print_hint_on_device(p: Any, c: rx.Call) -> str:
    a = c.attrs
    device = f"R.device(device_type={a['device_type']}, index={a['index']})"
    return f"R.hint_on_device({p.rexpr(c.args[0])}, {device}, {quote(a['memory_scope'])})"


def print_to_vdevice(p: Any, c: rx.Call) -> str:
    label = vdevice_label(c.attrs["dst_vdevice"], p.vdevices)
    return f"R.to_vdevice({p.rexpr(c.args[0])}, dst_vdevice={quote(label)})"


def print_sharding(p: Any, c: rx.Call) -> str:
    name = c.op.name.removeprefix("relax.")
    mesh = p.device_mesh(c.attrs["device_mesh"])
    return f"R.{name}({p.rexpr(c.args[0])}, device_mesh={mesh}, placement={quote(c.attrs['placement'])})"


PRINTERS: dict[str, Callable] = {
    "relax.print": print_print,
    "relax.assert_op": print_assert_op,
    "relax.call_tir_inplace": print_call_tir_inplace,
    "relax.call_tir_with_grad": print_call_tir_with_grad,
    "relax.hint_on_device": print_hint_on_device,
    "relax.to_vdevice": print_to_vdevice,
    "relax.dist.annotate_sharding": print_sharding,
    "relax.dist.redistribute": print_sharding,
    "relax.dist.call_tir_local_view": lambda p, c: p.call_dps("dist.call_tir_local_view", c),
}

__all__ = ["PARSERS", "PRINTERS", "Device"]
