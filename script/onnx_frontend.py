"""ONNX import: an ONNX model becomes a Relax IRModule whose ``main`` takes the graph's inputs,
as TVM's ``relax.frontend.onnx.from_onnx`` builds it (the converters are in ``onnx_ops_*.py``).

::

    mod = from_onnx(onnx.load("model.onnx"), shape_dict={"x": [1, 3, 224, 224]})

The ``onnx`` package is imported here only when a model is converted, so that importing tvms
never imports it.
"""
from __future__ import annotations

import copy
import math
import os
from typing import Any

import numpy as np

from ..ir import relax as rx
from ..ir.dtype import DataType
from ..ir.errors import TVMSError
from ..ir.expr import IntImm, Op, SizeVar
from ..ir.module import IRModule
from ..ir.name_supply import NameSupply
from ..ir.registry import get_global_func
from ..ir.struct_info import TensorStructInfo, TupleStructInfo
from .block_builder import BlockBuilder, const
from .onnx_convert import CONVERTERS, Attrs, Context, InvalidModel, Unsupported, onnx_dtype
from .onnx_deferred import deferred_call
from .onnx_shape_values import ShapeValue, evaluate
# (importing the converter modules registers their converters)
from . import (onnx_ops_control, onnx_ops_image, onnx_ops_math, onnx_ops_nn, onnx_ops_quant,  # noqa: F401
               onnx_ops_rnn, onnx_ops_signal, onnx_ops_tensor, onnx_ops_transformer)
from . import (onnx_ops_layers, onnx_ops_linalg, onnx_ops_ml, onnx_ops_preview, onnx_ops_select,  # noqa: F401
               onnx_ops_string, onnx_ops_text, onnx_ops_training)
from .onnx_ops_random import RANDOM_INSIDE, may_draw, split_at_impure
from .onnx_ops_control import Scope
from .onnx_ops_sequence import EMPTY_OPTIONAL, structured_input

_DEFAULT_DOMAINS = ("", "ai.onnx")


def from_onnx(model: Any, shape_dict: dict | None = None, dtype_dict: "str | dict | None" = None,
              opset: int | None = None, keep_params_in_input: bool = False) -> IRModule:
    """Convert an ONNX ``ModelProto`` (or the path of a ``.onnx`` file) into a Relax IRModule.

    ``shape_dict`` (input name -> shape) and ``dtype_dict`` (input name -> dtype, or one dtype
    for every input) override what the graph declares; ``opset`` overrides the model's opset of
    the default domain. Initializers become constants, or with ``keep_params_in_input`` further
    parameters of ``main`` after the graph inputs (``num_input`` counts the inputs; the values
    are in the function's ``params`` attribute, see ``detach_params``); integer initializers
    (shapes, axes, indices) stay constants. A dimension the graph
    names (``"batch"``) or leaves unknown becomes a symbolic size. A sequence input needs its
    length at import time: ``shape_dict`` gives the shapes of its elements (``{"s": [[2, 3], [4]]}``);
    an optional input given None there is empty.
    """
    import onnx

    if isinstance(model, (str, os.PathLike)):
        model = load_model(model)
    if not isinstance(model, onnx.ModelProto):
        raise TVMSError(f"from_onnx expects an onnx.ModelProto or a path, got {type(model).__name__}")
    if not model.graph.output:  # (an empty file parses as an empty ModelProto)
        raise InvalidModel("the model has no graph outputs: not an ONNX model, or nothing to compute")
    model_opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), 1)
    importer = _GraphImporter(shape_dict or {}, dtype_dict, keep_params_in_input, opset or model_opset)
    importer.domain_opsets = {o.domain: o.version for o in model.opset_import}
    return importer.run(model.graph)


def load_model(path: "str | os.PathLike") -> Any:
    """The ``onnx.ModelProto`` in the file ``path``; an InvalidModel when it cannot be read."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        return onnx.load(os.fspath(path))
    except (OSError, DecodeError, onnx.checker.ValidationError) as err:  # (the last: external data)
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InvalidModel(f"cannot read the ONNX model {os.fspath(path)}: {reason}") from None


def detach_params(mod: IRModule) -> tuple[IRModule, dict[str, list[np.ndarray]]]:
    """``mod`` without its functions' ``params`` attributes, and those values by function name
    (as TVM's ``relax.frontend.detach_params``; the attribute holds them as Relax constants)."""
    detached: dict[str, list] = {}
    out = mod.copy()
    for gv, func in mod.functions_items():
        if isinstance(func, rx.Function) and "params" in func.attrs:
            detached[gv.name_hint] = [c.data for c in func.attrs["params"]]
            out[gv.name_hint] = func.without_attr("params")
    return out, detached


class NeedsConstantInputs(TVMSError):
    """A graph input decides a shape or an axis (Reshape's shape, ReduceSum's axes, ...), which
    Relax needs at compile time; ``inputs`` names it. ``bind_inputs`` makes it a constant."""

    def __init__(self, message: str, inputs: list[str]):
        super().__init__(message)
        self.inputs = inputs


def bind_inputs(model: Any, values: dict[str, np.ndarray]) -> Any:
    """A copy of ``model`` whose inputs named in ``values`` are initializers of those values:
    a model specialized for them (as a runtime compiles one when the values arrive)."""
    from onnx import numpy_helper

    bound = type(model)()
    bound.CopyFrom(model)
    kept = [i for i in bound.graph.input if i.name not in values]
    del bound.graph.input[:]
    bound.graph.input.extend(kept)
    bound.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), name) for name, v in values.items())
    return bound


def specialize_node(node: Any, opset: int, values: list) -> tuple[IRModule, list[int]]:
    """``node`` alone as a module whose ``main`` takes its inputs of the shapes and dtypes of
    ``values`` (numpy arrays, None for an omitted input), the inputs that decide a shape or an
    axis bound as constants of their values; and the indices of those inputs (the run-time half
    of ``onnx_deferred``). Nothing is folded at the graph level: the converters convert the
    node."""
    from onnx import helper, numpy_helper

    names = [f"input{k}" if v is not None else "" for k, v in enumerate(values)]
    renamed = type(node)()
    renamed.CopyFrom(node)
    renamed.input[:] = names  # (one graph input per position: a node may read a value twice)
    bound: list[int] = []
    while True:
        graph = helper.make_graph(
            [renamed], "specialized",
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, (n, v) in enumerate(zip(names, values)) if n and k not in bound],
            [helper.make_empty_tensor_value_info(o) for o in node.output if o],
            [numpy_helper.from_array(np.asarray(values[k]), names[k]) for k in bound])
        try:
            return _GraphImporter({}, None, False, opset, fold=False, defer=False).run(graph), bound
        except NeedsConstantInputs as err:
            needed = [names.index(n) for n in err.inputs]
            if set(needed) <= set(bound):
                raise
            bound = sorted(set(bound) | set(needed))


def _check_arity(node: Any, opset: int, where: str) -> None:
    """Refuse a node whose inputs or outputs ONNX's schema of its operator does not allow (the
    converters assume the schema's arity)."""
    from onnx import defs

    try:
        schema = defs.get_schema(node.op_type, opset, node.domain)
    except defs.SchemaError:
        return  # (no schema: the converter lookup names the operator)
    for kind, names, low, high in (("input", node.input, schema.min_input, schema.max_input),
                                   ("output", node.output, schema.min_output, schema.max_output)):
        if not low <= len(names) <= high:
            allowed = f"{low}" if low == high else f"{low} to {high}" if high < 1 << 30 else f"at least {low}"
            raise InvalidModel(f"{where}: has {len(names)} {kind}s, the operator takes {allowed}")
    for k, formal in enumerate(schema.inputs[:len(node.input)]):
        if not node.input[k] and formal.option == defs.OpSchema.FormalParameterOption.Single:
            raise InvalidModel(f"{where}: its input {formal.name!r} (position {k}) is required")


class _GraphImporter:
    # the opsets of the other domains (ai.onnx.ml, ...), whose converters are registered as "domain.OpType"
    domain_opsets: dict[str, int] = {}

    def __init__(self, shape_dict: dict, dtype_dict: Any, keep_params: bool, opset: int,
                 fold: bool = True, defer: bool = True):
        self.shape_dict = {k: list(v) if v is not None else None for k, v in shape_dict.items()}
        self.dtype_dict = dtype_dict
        self.keep_params = keep_params
        self.opset = opset
        # fold: evaluate nodes of constant inputs at import; defer: a node needing a run-time
        # value as a constant becomes a call converting it at run time (onnx_deferred)
        self.fold, self.defer = fold, defer
        self.values: dict[str, Any] = {}
        self.sizes: dict[str, SizeVar] = {}  # named dimensions, shared by every input that names them
        self.names = NameSupply("_")
        # the graph inputs each value is computed from (by id: Relax values hash by identity)
        self.sources: dict[int, set[str]] = {}

    def run(self, graph: Any) -> IRModule:
        params = self._parameters(graph)
        inputs = self._inputs(graph)
        bb = BlockBuilder()
        ctx = Context(bb, self.opset)
        ctx.subgraph = self._subgraph  # (If, Loop, Scan and SequenceMap convert their bodies with it)
        attrs = {"num_input": len(inputs)}
        if self.keep_params and params:
            attrs["params"] = tuple(const(value, str(value.dtype)) for _, value in params)
        with bb.function("main", [v for v in inputs] + [v for v, _ in params], attrs=attrs):
            with bb.dataflow():
                for node in graph.node:
                    self._convert(ctx, node)
                outputs = [self._materialize(ctx, self._value(o.name, "graph output")) for o in graph.output]
                result = bb.emit_output(outputs[0] if len(outputs) == 1 else rx.Tuple(tuple(outputs)))
            gv = bb.emit_func_output(result)
        func = bb.get()[gv]
        drawn = split_at_impure(func)  # (impure where it draws at random)
        if drawn is not func:
            bb.update_func(gv, drawn)
        return bb.get()

    # ------------------------------------------------------------------ inputs
    def _var_name(self, name: str) -> str:
        """A valid, unique Relax identifier for an ONNX name (``conv1.weight`` -> ``conv1_weight``)."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "input"
        if not (base[0].isalpha() or base[0] == "_"):
            base = "input_" + base
        return self.names.fresh(base)

    def _parameters(self, graph: Any) -> list[tuple[rx.Var, np.ndarray]]:
        params = []
        for init in graph.initializer:
            array = tensor_value(init, f"initializer {init.name!r}")
            # (integer initializers are shapes, axes and indices, which conversion needs as
            # constants: only floating-point weights become parameters)
            if self.keep_params and array.dtype.kind == "f":
                var = rx.Var(self._var_name(init.name), TensorStructInfo(list(array.shape), str(array.dtype)))
                self.values[init.name] = var
                params.append((var, array))
            else:
                self.values[init.name] = const(array, str(array.dtype))
        return params

    def _inputs(self, graph: Any) -> list[rx.Var]:
        inputs = []
        for info in graph.input:
            if info.name in self.values:  # (an initializer listed as an input too, as old models do)
                continue
            if not info.type.HasField("tensor_type"):  # (a sequence or an optional)
                self.values[info.name] = var = self._structured_input(info)
                inputs += [var] if var is not None else []
                continue
            shape, dtype = self._declared_type(info)
            if info.name in self.shape_dict:
                shape = [self._dim(d) for d in self.shape_dict[info.name]]
            if isinstance(self.dtype_dict, str):
                dtype = self.dtype_dict
            elif isinstance(self.dtype_dict, dict) and info.name in self.dtype_dict:
                dtype = self.dtype_dict[info.name]
            var = rx.Var(self._var_name(info.name), TensorStructInfo(shape, dtype))
            self.values[info.name] = var
            self.sources[id(var)] = {info.name}
            inputs.append(var)
        return inputs

    def _structured_input(self, info: Any) -> Any:
        """A sequence or optional graph input: a tuple parameter whose length (and element shapes)
        ``shape_dict`` gives, None for an empty optional (see ``onnx_ops_sequence``)."""
        given = self.shape_dict.get(info.name, ...)
        sinfo = structured_input(info.name, info.type, given, self._dim)
        return None if sinfo is None else rx.Var(self._var_name(info.name), sinfo)

    def _subgraph(self, ctx: Context, graph: Any, inputs: dict, captures: Any = None) -> list:
        """The values of the outputs of ``graph`` (a body of If, Loop, Scan or SequenceMap), its
        nodes converted into the current block with ``inputs`` (name -> value) bound; it sees the
        enclosing graph's values, as parameters of the function being built when ``captures``
        (an ``onnx_ops_control.Captures``) is given."""
        child = copy.copy(self)
        child.values, child.keep_params = Scope(self.values, captures), False
        child.values.update(inputs)
        child._parameters(graph)
        outer, ctx.subgraph = ctx.subgraph, child._subgraph
        try:
            for node in graph.node:
                child._convert(ctx, node)
        finally:
            ctx.subgraph = outer
        return [child._value(o.name, "subgraph output") for o in graph.output]

    def _dim(self, dim: Any) -> Any:
        """An int for a known dimension, a symbolic size (shared by name) otherwise."""
        if isinstance(dim, int) and dim >= 0:
            return dim
        name = dim if isinstance(dim, str) and dim else f"d{len(self.sizes)}"
        if name not in self.sizes:
            self.sizes[name] = SizeVar(self._var_name(name), DataType("int64"))
        return self.sizes[name]

    def _declared_type(self, info: Any) -> tuple[list | None, str]:
        tensor = info.type.tensor_type
        if not info.type.HasField("tensor_type"):
            raise TVMSError(f"graph input {info.name!r} is not a tensor (sequence, map and optional "
                            f"inputs are not supported)")
        try:
            dtype = onnx_dtype(tensor.elem_type)
        except TVMSError as err:
            raise InvalidModel(f"graph input {info.name!r}: {err}") from None
        if not tensor.HasField("shape"):
            return None, dtype
        dims = []
        for d in tensor.shape.dim:
            dims.append(self._dim(d.dim_value if d.HasField("dim_value") else d.dim_param))
        return dims, dtype

    # ------------------------------------------------------------------ nodes
    def _value(self, name: str, user: str) -> Any:
        if name not in self.values:
            raise InvalidModel(f"{user} reads {name!r}, which no node, input or initializer defines")
        return self.values[name]

    def _convert(self, ctx: Context, node: Any) -> None:
        key, opset = node.op_type, self.opset
        if node.domain not in _DEFAULT_DOMAINS:
            key, opset = f"{node.domain}.{node.op_type}", self.domain_opsets.get(node.domain, 1)
        where = f"node {node.name or (node.output or [''])[0]!r} ({node.op_type}, opset {opset})"
        if node.domain not in _DEFAULT_DOMAINS and key not in CONVERTERS:
            raise TVMSError(f"{where}: operators of domain {node.domain!r} are not supported")
        _check_arity(node, opset, where)
        cls = CONVERTERS.get(key)
        impl = cls.get_converter(opset) if cls else None
        if impl is None:
            raise TVMSError(f"{where}: the operator {node.op_type} is not supported"
                            + (f" before opset {cls.versions()[0]}" if cls else ""))
        attrs = Attrs({a.name: _attribute(a, where) for a in node.attribute})
        inputs = [self._value(name, where) if name else None for name in node.input]
        if not cls.takes_strings and _holds_strings(inputs):
            raise TVMSError(f"{where}: string tensors are not supported as inputs of {node.op_type} (only of "
                            f"the string operators, Equal, LabelEncoder, Identity, Shape and Size)")
        if len(node.output) == 1 and self._follow_shapes(ctx, node, attrs, inputs):
            return
        inputs = [self._materialize(ctx, x) for x in inputs]
        ctx.node_outputs = len(node.output)
        emitted = len(ctx.bb._frame().bindings)
        try:
            result = impl(ctx, inputs, attrs)
        except Unsupported as err:
            deferred = deferred_call(node, self.opset, inputs) \
                if self.defer and err.needs is not None and not isinstance(err.needs, rx.Constant) else None
            if deferred is not None:  # (what the converter emitted before it gave up is dropped)
                del ctx.bb._frame().bindings[emitted:]
                if deferred[0].op.name == "relax.call_packed" and not may_draw(ctx):
                    raise TVMSError(f"{where}: not supported: {RANDOM_INSIDE}") from None
                self._bind_outputs(ctx, node, where, inputs, self._deferred_outputs(ctx, *deferred))
                return
            needed = sorted(self.sources.get(id(err.needs), ()))
            if needed:
                raise NeedsConstantInputs(f"{where}: not supported: {err} (it comes from the graph "
                                          f"input{'s' * (len(needed) > 1)} {', '.join(needed)}: see "
                                          f"bind_inputs)", needed) from None
            raise TVMSError(f"{where}: not supported: {err}") from None
        except NeedsConstantInputs as err:  # (from a node of a subgraph)
            raise NeedsConstantInputs(f"{where}: {err}", err.inputs) from None
        except InvalidModel as err:  # (a subgraph's)
            raise InvalidModel(f"{where}: {err}") from None
        except TVMSError as err:
            raise TVMSError(f"{where}: {err}") from None
        except (ValueError, MemoryError) as err:  # (numpy refusing what the node asks for)
            raise TVMSError(f"{where}: {type(err).__name__}: {err}") from None
        if not cls.takes_strings and _holds_strings(result if isinstance(result, (list, tuple)) else [result]):
            raise TVMSError(f"{where}: string results of {node.op_type} are not supported")
        unused = attrs.unused()
        if unused:
            raise TVMSError(f"{where}: the attribute{'s' * (len(unused) > 1)} {', '.join(unused)} "
                            f"{'is' if len(unused) == 1 else 'are'} not supported")
        outputs = list(result) if isinstance(result, (list, tuple)) else [result]
        folded = self._fold(ctx, node, inputs, emitted, outputs) if self.fold else None
        if folded is not None:
            for name, value in zip(node.output, folded):
                self.values[name] = const(value, str(value.dtype))
            return
        self._bind_outputs(ctx, node, where, inputs, outputs)

    def _follow_shapes(self, ctx: Context, node: Any, attrs: Attrs, inputs: list) -> bool:
        """Convert a shape computation on symbolic sizes, or its consumer, from the elements
        known at import (``onnx_shape_values``); False when the node is not one."""
        result = evaluate(node.op_type, self.opset, attrs, inputs)
        if result is None:
            return False
        if isinstance(result, ShapeValue) and not result.symbolic:
            value = ctx.constant(np.array(result.elems, result.dtype).reshape(() if result.scalar else -1))
        else:
            value = result if isinstance(result, ShapeValue) else ctx.emit(result)
        self.values[node.output[0]] = value
        self.sources[id(value)] = set().union(*(self.sources.get(id(x), ()) for x in inputs if x is not None))
        return True

    @staticmethod
    def _materialize(ctx: Context, x: Any) -> Any:
        """A Relax value for ``x``: a ShapeValue's tensor is emitted where a node first reads it."""
        if not isinstance(x, ShapeValue):
            return x
        if x.var is None:
            x.var = ctx.emit(x.relax())
        return x.var

    def _deferred_outputs(self, ctx: Context, call: rx.Call, shapes: list) -> list:
        """The outputs of a node converted at run time, each of a known rank given symbolic
        sizes for its dimensions that inference leaves open (a match_cast), so that the
        operators after it are compiled for any size."""
        result = ctx.emit(call)
        outputs = [result] if len(shapes) == 1 else [ctx.emit(rx.TupleGetItem(result, i)) for i in range(len(shapes))]
        for k, (value, dims) in enumerate(zip(outputs, shapes)):
            if dims is not None and None in dims:
                dims = [d if d is not None else SizeVar(self.names.fresh("n"), DataType("int64")) for d in dims]
                outputs[k] = ctx.bb.match_cast(value, TensorStructInfo(dims, value.struct_info.dtype))
        return outputs

    def _bind_outputs(self, ctx: Context, node: Any, where: str, inputs: list, outputs: list) -> None:
        if len(outputs) == 1 and len(node.output) > 1 and isinstance(outputs[0].struct_info, TupleStructInfo):
            tup = ctx.emit(outputs[0])
            outputs = [rx.TupleGetItem(tup, i) for i in range(len(tup.struct_info.fields))]
        came_from = set().union(*(self.sources.get(id(x), ()) for x in inputs if x is not None))
        for name, value in zip(node.output, outputs):
            if name and value is EMPTY_OPTIONAL:
                self.values[name] = None
            elif name and value is not None:
                self.values[name] = ctx.emit(value)
                # (a subgraph's output keeps the inputs it came from as well)
                self.sources[id(self.values[name])] = came_from | self.sources.get(id(self.values[name]), set())
        missing = [n for n in node.output[len(outputs):] if n]
        if missing:
            raise TVMSError(f"{where}: the optional output{'s' * (len(missing) > 1)} "
                            f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not supported")

    @staticmethod
    def _fold(ctx: Context, node: Any, inputs: list, emitted: int, outputs: list) -> list | None:
        """The outputs of a node whose inputs are all (small) constants as numpy arrays, as
        constant folding does: what its converter emitted (from binding ``emitted`` on) is
        evaluated now by the Relax reference executor's numpy operators, and dropped; shape
        computations (Shape -> Gather -> Concat -> Reshape) then give static shapes. None when
        it does not apply (the bindings stay)."""
        given = [x for x in inputs if x is not None]
        if not given or not all(isinstance(x, rx.Constant) and x.data.size <= _FOLD_LIMIT for x in given) \
                or any(a.type == a.GRAPH for a in node.attribute):
            return None
        bindings = ctx.bb._frame().bindings[emitted:]
        # (tensors out, every value of known, small size before any is computed)
        if not all(isinstance(o, rx.RelaxExpr) and isinstance(o.struct_info, TensorStructInfo)
                   and _small_tensor(o.struct_info) for o in outputs) \
                or not all(_small_tensor(b.var.struct_info) and _evaluable(b.value) for b in bindings) \
                or not all(map(_evaluable, outputs)):
            return None
        evaluate = get_global_func("runtime.reference_relax.eval_expr")
        env: dict = {}
        try:
            for b in bindings:
                env[b.var] = evaluate(b.value, None, env)
            values = [np.asarray(evaluate(o, None, env)) for o in outputs]
        except Exception:  # noqa: BLE001  (an operator the executor does not run: it stays)
            return None
        shapes = [tuple(int(d.value) for d in o.struct_info.shape.values) for o in outputs]
        if any(v.shape != shape for v, shape in zip(values, shapes)):
            return None
        del ctx.bb._frame().bindings[emitted:]
        return [v.astype(str(o.struct_info.dtype)) for v, o in zip(values, outputs)]


def _small_tensor(sinfo: Any) -> bool:
    """A tensor (or a tuple of them) of known dtype and sizes, of at most ``_FOLD_LIMIT``
    elements, not of strings."""
    if isinstance(sinfo, TupleStructInfo):
        return all(map(_small_tensor, sinfo.fields))
    return isinstance(sinfo, TensorStructInfo) and isinstance(sinfo.shape, rx.ShapeExpr) \
        and all(isinstance(d, IntImm) for d in sinfo.shape.values) \
        and math.prod(d.value for d in sinfo.shape.values) <= _FOLD_LIMIT \
        and not sinfo.dtype.is_string and str(sinfo.dtype) != "void"


# (operators calling functions: kernels, packed functions, closures; a fold evaluates the others)
_CALLING_OPS = {"relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad", "relax.call_dps_packed",
                "relax.call_pure_packed", "relax.call_packed", "relax.call_inplace_packed",
                "relax.call_builtin_with_ctx", "relax.invoke_closure", "relax.print", "relax.assert_op"}


def _evaluable(value: Any) -> bool:
    """Whether a bound value is pure and self-contained: no call of a function."""
    if isinstance(value, rx.Call):
        return isinstance(value.op, Op) and value.op.name not in _CALLING_OPS and all(map(_evaluable, value.args))
    if isinstance(value, rx.Tuple):
        return all(map(_evaluable, value.fields))
    if isinstance(value, rx.TupleGetItem):
        return _evaluable(value.tuple_value)
    return isinstance(value, (rx.Var, rx.Constant, rx.ShapeExpr, rx.PrimValue))


_FOLD_LIMIT = 1 << 16  # elements: shapes and indices, not weights


def tensor_value(tensor: Any, what: str) -> np.ndarray:
    """The array a TensorProto holds; an InvalidModel naming ``what`` when its data does not fit
    its dims or its element type is not ONNX's."""
    from onnx import TensorProto, numpy_helper

    if tensor.data_type not in TensorProto.DataType.values():
        raise InvalidModel(f"{what}: the element type {tensor.data_type} is not an ONNX tensor type")
    try:
        return numpy_helper.to_array(tensor)
    except (ValueError, TypeError, KeyError) as err:
        raise InvalidModel(f"{what}: its data does not make a tensor of shape {list(tensor.dims)} and "
                           f"element type {TensorProto.DataType.Name(tensor.data_type)}: {err}") from None


def _holds_strings(values: list) -> bool:
    """Whether any of ``values`` is (or a tuple holding) a string tensor."""
    def strings(sinfo: Any) -> bool:
        if isinstance(sinfo, TupleStructInfo):
            return any(strings(f) for f in sinfo.fields)
        return isinstance(sinfo, TensorStructInfo) and sinfo.dtype.is_string
    return any(strings(getattr(v, "struct_info", None)) for v in values if v is not None)


def _attribute(attr: Any, where: str) -> Any:
    """An AttributeProto's value in Python terms: numbers, str, numpy arrays, lists of them."""
    from onnx import AttributeProto
    from onnx.helper import get_attribute_value

    value = get_attribute_value(attr)
    try:
        if attr.type == AttributeProto.STRING:
            return value.decode()
        if attr.type == AttributeProto.STRINGS:
            return [v.decode() for v in value]
    except UnicodeDecodeError:
        raise InvalidModel(f"{where}: the attribute {attr.name} is not UTF-8 text") from None
    if attr.type == AttributeProto.TENSOR:
        return tensor_value(value, f"{where}: the attribute {attr.name}")
    if attr.type == AttributeProto.TENSORS:
        return [tensor_value(v, f"{where}: the attribute {attr.name}") for v in value]
    if attr.type in (AttributeProto.INTS, AttributeProto.FLOATS):
        return list(value)
    return value
