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

from ..ir import relax as rx
from ..ir import relax_op
from ..ir.expr import IntImm
from ..ir.global_info import lookup_vdevice, vdevice_label
from ..ir.errors import TVMSError
from ..ir.module import GlobalVar
from ..ir.node import FrozenDict
from ..ir.relax_ops_misc import DEVICE_TYPES
from ..ir.struct_info import ObjectStructInfo
from . import syntax as S
from .tensorir.text import quote


class Device(tuple):
    """``R.cpu(0)``, ``R.device(device_type=2, index=1)``: (device type code, index)."""


# ---------------------------------------------------------------- reading
def _arguments(b: Any, syn: S.Call) -> tuple[list, dict]:
    return [b.ev(a) for a in syn.args], {k: b.ev(v) for k, v in syn.kwargs}


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


def parse_print(b: Any, syn: S.Call) -> rx.Call:
    """``R.print(x, y, format="{} {}")``: the format string becomes the first argument."""
    args, kwargs = _arguments(b, syn)
    fmt = _format(b, kwargs.pop("format", ""), syn)
    _no_extra(b, kwargs, "print", syn)
    return _make(b, "print", [fmt, *(b.to_relax(a, syn) for a in args)], {}, (), syn)


def parse_assert_op(b: Any, syn: S.Call) -> rx.Call:
    """``R.assert_op(cond, x, format="x: {}")``: a PrimExpr condition is a PrimValue, the format
    string the second argument; the values may come as one list (TVM's ``format_args``)."""
    args, kwargs = _arguments(b, syn)
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


def _packed(name: str) -> Callable:
    def parse(b: Any, syn: S.Call) -> rx.Call:
        """``R.<name>("func", args..., ty_args=...)``: a string names a packed function."""
        args, kwargs = _arguments(b, syn)
        if not args:
            raise b.error(syn, f"R.{name} needs the function to call")
        func = rx.ExternFunc(args[0], ObjectStructInfo()) if isinstance(args[0], str) else args[0]
        sinfo_args = _sinfo_args(b, kwargs, syn)
        attrs = {}
        if "inplace_indices" in kwargs:
            indices = kwargs.pop("inplace_indices")
            attrs["inplace_indices"] = indices if isinstance(indices, (list, tuple)) else [indices]
        _no_extra(b, kwargs, name, syn)
        return _make(b, name, [func, *(b.to_relax(a, syn) for a in args[1:])], attrs, sinfo_args, syn)
    return parse


def _dps(name: str, attr_names: tuple) -> Callable:
    def parse(b: Any, syn: S.Call) -> rx.Call:
        """``R.<name>(cls.f, (x, y), out_ty=..., <attrs>)``, as ``R.call_tir``."""
        args, kwargs = _arguments(b, syn)
        sinfo_args = b.call_sinfo(syn, kwargs)
        attrs = {k: kwargs.pop(k) for k in attr_names if k in kwargs}
        if isinstance(attrs.get("te_grad_kwargs"), dict):
            attrs["te_grad_kwargs"] = FrozenDict(attrs["te_grad_kwargs"])
        if isinstance(attrs.get("inplace_indices"), int):
            attrs["inplace_indices"] = [attrs["inplace_indices"]]
        tir_vars = kwargs.pop("tir_vars", None)
        _no_extra(b, kwargs, name, syn)
        if len(args) != 2 or not isinstance(args[0], GlobalVar):
            raise b.error(syn, f"R.{name} takes a TensorIR function (cls.name) and a tuple of arguments")
        inputs = tuple(args[1]) if isinstance(args[1], (tuple, list)) else args[1]
        call_args = [args[0], b.to_relax(inputs, syn)]
        if tir_vars is not None:
            call_args.append(b.to_relax_shape(tir_vars, syn))
        return _make(b, name, call_args, attrs, sinfo_args, syn)
    return parse


def _device(device_type: Any) -> Callable:
    def parse(b: Any, syn: S.Call) -> Device:
        """``R.cpu(0)``, ``R.device(device_type=1, index=0)``, ``R.device("cuda", 1)``."""
        args, kwargs = _arguments(b, syn)
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
    args, kwargs = _arguments(b, syn)
    if len(args) < 2 and "dst_vdevice" not in kwargs:
        raise b.error(syn, "R.hint_on_device takes a tensor and a device such as R.cpu(0)")
    data = args[0]
    device = args[1] if len(args) > 1 else kwargs.pop("dst_vdevice")
    scope = args[2] if len(args) > 2 else kwargs.pop("memory_scope", "global")
    _no_extra(b, kwargs, "hint_on_device", syn)
    if not isinstance(device, Device):
        raise b.error(syn, f"R.hint_on_device takes a device such as R.cpu(0), got {device!r}")
    attrs = {"device_type": device[0], "index": device[1], "memory_scope": scope}
    return _make(b, "hint_on_device", [b.to_relax(data, syn)], attrs, (), syn)


def parse_to_vdevice(b: Any, syn: S.Call) -> rx.Call:
    """``R.to_vdevice(x, "cuda:0")``: the vdevice of the module's global infos it names."""
    args, kwargs = _arguments(b, syn)
    label = args[1] if len(args) > 1 else kwargs.pop("dst_vdevice", None)
    _no_extra(b, kwargs, "to_vdevice", syn)
    if not args or not isinstance(label, str):
        raise b.error(syn, "R.to_vdevice takes a tensor and a vdevice such as \"cuda:0\"")
    try:
        vdev = lookup_vdevice(label, b.vdevices)
    except TVMSError as e:
        raise b.error(syn, str(e)) from None
    return _make(b, "to_vdevice", [b.to_relax(args[0], syn)], {"dst_vdevice": vdev}, (), syn)


def parse_stop_lift_params(b: Any, syn: S.Call) -> rx.Call:
    """``R.stop_lift_params(x)``: TVM's alias of ``R.builtin.stop_lift_params``."""
    args, kwargs = _arguments(b, syn)
    _no_extra(b, kwargs, "stop_lift_params", syn)
    return _make(b, "builtin.stop_lift_params", [b.to_relax(a, syn) for a in args], {}, (), syn)


def parse_relu6(b: Any, syn: S.Call) -> rx.Call:
    """``R.nn.relu6(x)``: no operator of its own in TVM, but ``R.clip(x, 0, 6)``."""
    args, kwargs = _arguments(b, syn)
    data = args[0] if args else kwargs.pop("data", None)
    _no_extra(b, kwargs, "nn.relu6", syn)
    if data is None or len(args) > 1:
        raise b.error(syn, "R.nn.relu6 takes one tensor")
    return _make(b, "clip", [b.to_relax(data, syn), 0, 6], {}, (), syn)


PARSERS: dict[str, Callable] = {
    "nn.relu6": parse_relu6,
    "print": parse_print,
    "assert_op": parse_assert_op,
    "call_pure_packed": _packed("call_pure_packed"),
    "call_inplace_packed": _packed("call_inplace_packed"),
    "call_builtin_with_ctx": _packed("call_builtin_with_ctx"),
    "call_tir_inplace": _dps("call_tir_inplace", ("inplace_indices",)),
    "call_tir_with_grad": _dps("call_tir_with_grad", ("te_grad_name", "te_grad_kwargs")),
    "hint_on_device": parse_hint_on_device,
    "to_vdevice": parse_to_vdevice,
    "stop_lift_params": parse_stop_lift_params,
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


PRINTERS: dict[str, Callable] = {
    "relax.print": print_print,
    "relax.assert_op": print_assert_op,
    "relax.call_tir_inplace": print_call_tir_inplace,
    "relax.call_tir_with_grad": print_call_tir_with_grad,
    "relax.hint_on_device": print_hint_on_device,
    "relax.to_vdevice": print_to_vdevice,
}

__all__ = ["PARSERS", "PRINTERS", "Device"]
